#include "agent/module_params.hpp"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include <liveprobe/module.h>  // last: its kernel-style macros clash with the C++ headers

namespace liveprobe::agent {
namespace {

const char *type_name(int t)
{
    switch (t) {
    case LIVEPROBE_PARAM_INT: return "int";
    case LIVEPROBE_PARAM_UINT: return "uint";
    case LIVEPROBE_PARAM_LONG: return "long";
    case LIVEPROBE_PARAM_ULONG: return "ulong";
    case LIVEPROBE_PARAM_SHORT: return "short";
    case LIVEPROBE_PARAM_USHORT: return "ushort";
    case LIVEPROBE_PARAM_BYTE: return "byte";
    case LIVEPROBE_PARAM_ULLONG: return "ullong";
    case LIVEPROBE_PARAM_HEXINT: return "hexint";
    case LIVEPROBE_PARAM_BOOL: return "bool";
    case LIVEPROBE_PARAM_INVBOOL: return "invbool";
    case LIVEPROBE_PARAM_CHARP: return "charp";
    case LIVEPROBE_PARAM_STRING: return "string";
    default: return "?";
    }
}

size_t type_size(int t)
{
    switch (t) {
    case LIVEPROBE_PARAM_SHORT:
    case LIVEPROBE_PARAM_USHORT: return sizeof(short);
    case LIVEPROBE_PARAM_BYTE: return 1;
    case LIVEPROBE_PARAM_LONG:
    case LIVEPROBE_PARAM_ULONG:
    case LIVEPROBE_PARAM_ULLONG: return 8;
    case LIVEPROBE_PARAM_BOOL:
    case LIVEPROBE_PARAM_INVBOOL: return sizeof(bool);
    case LIVEPROBE_PARAM_CHARP: return sizeof(char *);
    default: return sizeof(int);
    }
}

// One value of type t into the element at `dst`: "" on success, else why not.
std::string set_one(int t, const std::string &v, void *dst, std::vector<char *> *owned)
{
    if (t == LIVEPROBE_PARAM_BOOL || t == LIVEPROBE_PARAM_INVBOOL) {
        // The kernel's kstrtobool: by the first character (y Y t T 1 / n N f F 0), or "on"/"off".
        bool b;
        char c0 = v.empty() ? '\0' : v[0], c1 = v.size() > 1 ? v[1] : '\0';
        if (std::strchr("yYtT1", c0) && c0) b = true;
        else if (std::strchr("nNfF0", c0) && c0) b = false;
        else if ((c0 == 'o' || c0 == 'O') && (c1 == 'n' || c1 == 'N')) b = true;
        else if ((c0 == 'o' || c0 == 'O') && (c1 == 'f' || c1 == 'F')) b = false;
        else return "not a boolean (y, n, 1, 0, on, off)";
        if (t == LIVEPROBE_PARAM_INVBOOL) b = !b;
        std::memcpy(dst, &b, sizeof b);
        return "";
    }
    if (t == LIVEPROBE_PARAM_CHARP) {
        if (v.size() > 1024) return "longer than 1024 characters";
        char *s = strdup(v.c_str());
        owned->push_back(s);
        std::memcpy(dst, &s, sizeof s);
        return "";
    }
    std::string s = v;
    if (!s.empty() && s.back() == '\n') s.pop_back();  // as kstrto*: one trailing newline
    if (s.empty()) return "empty";
    if (std::isspace(static_cast<unsigned char>(s[0]))) return "not a number";  // strto* would skip it
    bool is_signed = t == LIVEPROBE_PARAM_INT || t == LIVEPROBE_PARAM_LONG || t == LIVEPROBE_PARAM_SHORT;
    int base = 0;  // as kstrto*(s, 0): 0x hex, 0 octal, else decimal (hexint too: it only prints in hex)
    char *end = nullptr;
    errno = 0;
    long long sv = 0;
    unsigned long long uv = 0;
    if (is_signed) sv = std::strtoll(s.c_str(), &end, base);
    else {
        if (s[0] == '-') return "negative, for an unsigned parameter";
        uv = std::strtoull(s.c_str(), &end, base);
    }
    if (end == s.c_str() || *end != '\0') return "not a number";
    bool range = errno == ERANGE;
    switch (t) {
    case LIVEPROBE_PARAM_INT: range |= sv < INT_MIN || sv > INT_MAX; break;
    case LIVEPROBE_PARAM_SHORT: range |= sv < SHRT_MIN || sv > SHRT_MAX; break;
    case LIVEPROBE_PARAM_UINT:
    case LIVEPROBE_PARAM_HEXINT: range |= uv > UINT_MAX; break;
    case LIVEPROBE_PARAM_USHORT: range |= uv > USHRT_MAX; break;
    case LIVEPROBE_PARAM_BYTE: range |= uv > UCHAR_MAX; break;
    default: break;
    }
    if (range) return "out of range";
    // x86-64 is little-endian: the value's low type_size(t) bytes are the element, signed or not.
    uint64_t bits = is_signed ? static_cast<uint64_t>(sv) : uv;
    std::memcpy(dst, &bits, type_size(t));
    return "";
}

// A value as error messages quote it: a long one cut short.
std::string quoted(const std::string &v)
{
    if (v.size() <= 64) return "'" + v + "'";
    return fmt::format("'{}...' ({} characters)", v.substr(0, 48), v.size());
}

}  // namespace

std::string set_param(const std::vector<const struct liveprobe_module_param *> &params, const std::string &module,
                      const std::string &arg, std::vector<char *> *owned)
{
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    // As the kernel's parameq: '-' and '_' are the same in a name.
    auto same = [](const std::string &a, const char *b) {
        size_t i = 0;
        for (; i < a.size() && b[i]; ++i) {
            char x = a[i] == '-' ? '_' : a[i], y = b[i] == '-' ? '_' : b[i];
            if (x != y) return false;
        }
        return i == a.size() && b[i] == '\0';
    };
    const struct liveprobe_module_param *d = nullptr;
    for (const struct liveprobe_module_param *q : params)
        if (same(name, q->name)) d = q;
    if (d == nullptr) {
        std::string have;
        for (const struct liveprobe_module_param *q : params) have += (have.empty() ? "" : ", ") + std::string(q->name);
        return fmt::format("unknown parameter '{}': module {} {}", name, module,
                           have.empty() ? std::string("has no parameters") : "has: " + have);
    }
    const char *tn = d->type == LIVEPROBE_PARAM_STRING ? "string" : type_name(d->type);
    if (eq == std::string::npos) {
        // As in the kernel, a bare name sets a bool (and clears an invbool); others need a value.
        if ((d->type == LIVEPROBE_PARAM_BOOL || d->type == LIVEPROBE_PARAM_INVBOOL) && !d->is_array) {
            set_one(d->type, "1", d->var, owned);
            return "";
        }
        return fmt::format("parameter '{}' has no value: write {}=VALUE ({}{})", name, name, tn,
                           d->is_array ? " array" : "");
    }
    std::string value = arg.substr(eq + 1);
    if (d->type == LIVEPROBE_PARAM_STRING) {
        if (value.size() + 1 > d->len)
            return fmt::format("bad value for parameter '{}' (string): {} characters, and it holds at most {}", name,
                               value.size(), d->len ? d->len - 1 : 0);
        std::memcpy(d->var, value.c_str(), value.size() + 1);
        return "";
    }
    if (!d->is_array) {
        std::string e = set_one(d->type, value, d->var, owned);
        return e.empty() ? e : fmt::format("bad value {} for parameter '{}' ({}): {}", quoted(value), name, tn, e);
    }
    std::vector<std::string> items;
    for (size_t start = 0;;) {
        size_t comma = value.find(',', start);
        items.push_back(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (items.size() > d->len)
        return fmt::format("bad value {} for parameter '{}' ({} array): {} values, and it takes at most {}", quoted(value),
                           name, tn, items.size(), d->len);
    size_t es = type_size(d->type);
    for (size_t i = 0; i < items.size(); ++i) {
        std::string e = set_one(d->type, items[i], static_cast<char *>(d->var) + i * es, owned);
        if (!e.empty())
            return fmt::format("bad value {} for parameter '{}' ({} array), element {}: {}", quoted(items[i]), name, tn, i + 1,
                               e);
    }
    if (d->nump) *d->nump = static_cast<unsigned>(items.size());
    return "";
}


}  // namespace liveprobe::agent
