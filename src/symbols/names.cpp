#include "symbols/names.hpp"

#include <cxxabi.h>

#include <cstdlib>

namespace liveprobe::symbols::names {
namespace {

bool is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The parameter list of a normalized demangled name: its '(' and ')' positions, when the name
// ends with "(...)" followed only by qualifiers. Template arguments and "operator()" can hold
// parentheses of their own, so the list is matched from the end, and a ')' followed by '>' or
// ':' (a type inside a variable's template arguments) is no parameter list.
bool find_parameters(std::string_view s, size_t *open, size_t *close) {
    size_t c = s.rfind(')');
    if (c == std::string_view::npos) return false;
    for (char t : s.substr(c + 1)) {
        if (!is_ident(t) && t != '&') return false;  // const, volatile, &, &&, noexcept
    }
    int depth = 0;
    for (size_t i = c + 1; i-- > 0;) {
        if (s[i] == ')') {
            ++depth;
        } else if (s[i] == '(' && --depth == 0) {
            if (i == 0) return false;
            *open = i;
            *close = c;
            return true;
        }
    }
    return false;
}

}  // namespace

bool parse_spec(std::string_view spec, Spec *out, std::string *why) {
    *out = Spec{};
    std::string_view rest = spec;
    // OBJECT names never contain '(', '[' or '<'; stopping there keeps "f[abi:cxx11]" and
    // "f<a::b>" whole.
    for (size_t i = 0; i < spec.size(); ++i) {
        char c = spec[i];
        if (c == '(' || c == '[' || c == '<') break;
        if (c != ':') continue;
        if (i + 1 < spec.size() && spec[i + 1] == ':') {
            ++i;  // a C++ scope "::"
            continue;
        }
        out->object = spec.substr(0, i);
        rest = spec.substr(i + 1);
        if (out->object.empty()) {
            if (why) *why = "malformed symbol '" + std::string(spec) + "': empty object before ':'";
            return false;
        }
        break;
    }
    size_t at = rest.find('@');
    if (at != std::string_view::npos) {
        out->version = rest.substr(at + 1);
        if (out->version.starts_with('@')) out->version.remove_prefix(1);
        rest = rest.substr(0, at);
        if (out->version.empty()) {
            if (why) *why = "malformed symbol '" + std::string(spec) + "': empty version after '@'";
            return false;
        }
    }
    out->name = rest;
    if (out->name.empty()) {
        if (why) *why = "malformed symbol '" + std::string(spec) + "': empty name";
        return false;
    }
    return true;
}

std::string_view base_name(std::string_view path) {
    size_t slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool object_matches(std::string_view object, std::string_view path) {
    if (object.find('/') != std::string_view::npos) return object == path;
    std::string_view base = base_name(path);
    if (!base.starts_with(object)) return false;
    return base.size() == object.size() || base[object.size()] == '.';
}

std::string_view split_version(std::string_view name, std::string_view *version, bool *hidden) {
    size_t at = name.find('@');
    if (at == std::string_view::npos) {
        *version = {};
        *hidden = false;
        return name;
    }
    *hidden = !(at + 1 < name.size() && name[at + 1] == '@');
    *version = name.substr(at + (*hidden ? 1 : 2));
    return name.substr(0, at);
}

std::string demangle(const char *mangled) {
    if (mangled[0] != '_' || mangled[1] != 'Z') return {};
    int status = 0;
    char *out = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    if (out == nullptr) return {};
    std::string result(out);
    std::free(out);
    return result;
}

std::string normalize(std::string_view demangled) {
    std::string out;
    out.reserve(demangled.size());
    for (size_t i = 0; i < demangled.size(); ++i) {
        char c = demangled[i];
        // GCC's ABI tags ("f[abi:cxx11](int)") are invisible in source; users do not type them.
        if (c == '[' && demangled.substr(i).starts_with("[abi:")) {
            size_t end = demangled.find(']', i);
            if (end != std::string_view::npos) {
                i = end;
                continue;
            }
        }
        if (c == ' ' || c == '\t') {
            size_t next = i + 1;
            while (next < demangled.size() && (demangled[next] == ' ' || demangled[next] == '\t'))
                ++next;
            if (!out.empty() && next < demangled.size() && is_ident(out.back()) &&
                is_ident(demangled[next]))
                out.push_back(' ');
            i = next - 1;
            continue;
        }
        out.push_back(c);
    }
    return out;
}

std::string_view strip_parameters(std::string_view s) {
    size_t open = 0, close = 0;
    if (!find_parameters(s, &open, &close)) return s;
    std::string_view name = s.substr(0, open);
    // Template functions demangle with their return type first ("void ns::f<int>(int)"):
    // drop everything up to the last space outside <> and () that comes before any
    // "operator" (whose own spaces, as in "operator new", belong to the name).
    size_t limit = name.find("operator");
    if (limit == std::string_view::npos) limit = name.size();
    int depth = 0;
    size_t cut = std::string_view::npos;
    for (size_t i = 0; i < limit; ++i) {
        char c = name[i];
        if (c == '<' || c == '(') ++depth;
        if (c == '>' || c == ')') --depth;
        if (c == ' ' && depth == 0) cut = i;
    }
    if (cut != std::string_view::npos) name.remove_prefix(cut + 1);
    return name;
}

std::string_view strip_qualifiers(std::string_view s) {
    size_t open = 0, close = 0;
    if (!find_parameters(s, &open, &close)) return s;
    return s.substr(0, close + 1);
}

}  // namespace liveprobe::symbols::names
