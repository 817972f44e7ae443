// symbols::resolve / function_at / describe against this very process: the test binary is the
// main program, libc is loaded, and small libraries compiled here with `cc` are dlopened to make
// cross-object ambiguity, symbol versions and an IFUNC of our own.
#include "symbols/symbols.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "symbols/elf_object.hpp"
#include "symbols/names.hpp"

// Functions of the main program. noinline+used keeps each a real function with a symbol.
extern "C" __attribute__((noinline, used)) int lp_symtest_c_function(int x) {
    return x * 3 + 1;
}

namespace lp_ns {
__attribute__((noinline, used)) int overloaded(int x) {
    return x + 1;
}
__attribute__((noinline, used)) int overloaded(double x) {
    return static_cast<int>(x) + 2;
}
__attribute__((noinline, used)) int unique_fn(long x) {
    return static_cast<int>(x) * 5;
}

struct Widget {
    int spins = 0;
    __attribute__((noinline, used)) int spin(int n);
    __attribute__((noinline, used)) int peek() const;
};
int Widget::spin(int n) {
    return spins += n;
}
int Widget::peek() const {
    return spins;
}
}  // namespace lp_ns

static __attribute__((noinline, used)) int lp_static_helper(int x) {
    return x ^ 0x5a;
}

namespace {

using namespace liveprobe;

template <typename F>
uint64_t addr_of(F *f) {
    return reinterpret_cast<uint64_t>(f);
}

// A non-virtual member function's address: the first word of its Itanium-ABI pointer to member.
template <typename M>
uint64_t method_addr(M pmf) {
    static_assert(sizeof(pmf) == 2 * sizeof(uint64_t));
    uint64_t words[2];
    std::memcpy(words, &pmf, sizeof words);
    return words[0];
}

uint64_t dlsym_default(const char *name) {
    void *volatile p = dlsym(RTLD_DEFAULT, name);
    return reinterpret_cast<uint64_t>(p);
}

std::string exe_base_name() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    std::string path(buf, n > 0 ? static_cast<size_t>(n) : 0);
    return path.substr(path.rfind('/') + 1);
}

uint64_t must_resolve(const std::string &spec) {
    uint64_t addr = 0;
    std::string why;
    int rc = symbols::resolve(spec, &addr, &why);
    EXPECT_EQ(rc, 0) << spec << ": " << why;
    return addr;
}

int resolve_error(const std::string &spec, std::string *why) {
    uint64_t addr = 0;
    return symbols::resolve(spec, &addr, why);
}

TEST(SymbolNames, ParseSpec) {
    symbols::names::Spec s;
    std::string why;
    ASSERT_TRUE(symbols::names::parse_spec("libc.so.6:getpid", &s, &why));
    EXPECT_EQ(s.object, "libc.so.6");
    EXPECT_EQ(s.name, "getpid");
    ASSERT_TRUE(symbols::names::parse_spec("ns::Widget::spin", &s, &why));
    EXPECT_EQ(s.object, "");
    EXPECT_EQ(s.name, "ns::Widget::spin");
    ASSERT_TRUE(symbols::names::parse_spec("prog:ns::Widget::spin(int)", &s, &why));
    EXPECT_EQ(s.object, "prog");
    EXPECT_EQ(s.name, "ns::Widget::spin(int)");
    ASSERT_TRUE(symbols::names::parse_spec("f(std::map<int,int>::iterator)", &s, &why));
    EXPECT_EQ(s.object, "");
    ASSERT_TRUE(symbols::names::parse_spec("libc:memcpy@@GLIBC_2.14", &s, &why));
    EXPECT_EQ(s.name, "memcpy");
    EXPECT_EQ(s.version, "GLIBC_2.14");
    EXPECT_FALSE(symbols::names::parse_spec("", &s, &why));
    EXPECT_FALSE(symbols::names::parse_spec("lib:", &s, &why));
    EXPECT_FALSE(symbols::names::parse_spec(":getpid", &s, &why));
    EXPECT_FALSE(symbols::names::parse_spec("getpid@", &s, &why));
}

TEST(SymbolNames, ObjectMatches) {
    using symbols::names::object_matches;
    const char *libz = "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13";
    for (const char *o : {"libz.so.1.2.13", "libz.so.1.2", "libz.so.1", "libz.so", "libz", libz})
        EXPECT_TRUE(object_matches(o, libz)) << o;
    for (const char *o : {"lib", "libz.s", "libz.so.2", "z", "/lib/libz.so.1.2.13"})
        EXPECT_FALSE(object_matches(o, libz)) << o;
}

TEST(SymbolNames, DemangledForms) {
    using namespace symbols::names;
    EXPECT_EQ(normalize("ns::W::f(int, char) const"), "ns::W::f(int,char)const");
    EXPECT_EQ(normalize("f(unsigned long)"), "f(unsigned long)");
    EXPECT_EQ(normalize("f[abi:cxx11](int)"), "f(int)");
    EXPECT_EQ(strip_parameters("ns::W::f(int,char)const"), "ns::W::f");
    EXPECT_EQ(strip_parameters("S::operator()(int)"), "S::operator()");
    EXPECT_EQ(strip_parameters("std::function<void(int)>::operator()(int)const"),
              "std::function<void(int)>::operator()");
    EXPECT_EQ(strip_parameters("void ns::f<int>(int)"), "ns::f<int>");
    EXPECT_EQ(strip_parameters("operator new(unsigned long)"), "operator new");
    EXPECT_EQ(strip_parameters("ns::counter"), "ns::counter");
    EXPECT_EQ(strip_qualifiers("ns::W::get()const"), "ns::W::get()");
    EXPECT_EQ(demangle("_ZN5lp_ns6Widget4spinEi"), "lp_ns::Widget::spin(int)");
    EXPECT_EQ(demangle("getpid"), "");
}

TEST(Symbols, MainProgram) {
    EXPECT_EQ(must_resolve("lp_symtest_c_function"), addr_of(&lp_symtest_c_function));
    EXPECT_EQ(must_resolve(exe_base_name() + ":lp_symtest_c_function"),
              addr_of(&lp_symtest_c_function));
    // Static functions are found through .symtab.
    EXPECT_EQ(must_resolve("lp_static_helper"), addr_of(&lp_static_helper));
}

TEST(Symbols, Libc) {
    uint64_t getpid_addr = dlsym_default("getpid");
    ASSERT_NE(getpid_addr, 0u);
    for (const char *spec : {"getpid", "libc.so.6:getpid", "libc:getpid", "libc.so:getpid"})
        EXPECT_EQ(must_resolve(spec), getpid_addr) << spec;
}

// libc's own memcpy, even when a sanitizer runtime interposes one in front of it.
uint64_t libc_memcpy() {
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    void *volatile p = libc ? dlsym(libc, "memcpy") : nullptr;
    if (libc) dlclose(libc);
    return reinterpret_cast<uint64_t>(p);
}

TEST(Symbols, IfuncMeansTheSelectedImplementation) {
    uint64_t memcpy_addr = libc_memcpy();
    ASSERT_NE(memcpy_addr, 0u);
    EXPECT_EQ(must_resolve("libc:memcpy"), memcpy_addr);
    if (dlsym_default("memcpy") == memcpy_addr) {
        EXPECT_EQ(must_resolve("memcpy"), memcpy_addr);
    } else {
        // ASan and TSan runtimes define memcpy too: two objects, no definition in main.
        std::string why;
        EXPECT_EQ(resolve_error("memcpy", &why), -EINVAL);
        EXPECT_NE(why.find("libc.so.6:memcpy at 0x"), std::string::npos) << why;
    }
    // The implementation (e.g. __memmove_avx_unaligned_erms) has bounds: from its symbol
    // when libc's debug file is installed, from its FDE otherwise.
    std::optional<symbols::Function> f = symbols::function_at(memcpy_addr);
    ASSERT_TRUE(f.has_value());
    EXPECT_LE(f->start, memcpy_addr);
    EXPECT_GT(f->end, memcpy_addr);
    EXPECT_NE(f->object.find("libc"), std::string::npos) << f->object;
}

// Debian's libc has no .symtab: without its debug file, the bounds come from .eh_frame.
TEST(Symbols, FdeBoundsWithoutSymbols) {
    uint64_t memcpy_addr = libc_memcpy();
    Dl_info info;
    ASSERT_NE(dladdr(reinterpret_cast<void *>(memcpy_addr), &info), 0);
    link_map *map = nullptr;
    ASSERT_NE(dladdr1(reinterpret_cast<void *>(memcpy_addr), &info, reinterpret_cast<void **>(&map),
                      RTLD_DL_LINKMAP),
              0);
    std::string why;
    auto libc = symbols::ElfObject::load(info.dli_fname, /*use_debug_file=*/false, &why);
    ASSERT_TRUE(libc) << why;
    uint64_t file_addr = memcpy_addr - map->l_addr;
    uint64_t start = 0, end = 0;
    ASSERT_TRUE(libc->fde_range(file_addr, &start, &end));
    EXPECT_LE(start, file_addr);
    EXPECT_GT(end, file_addr);
}

TEST(Symbols, Cxx) {
    uint64_t spin = method_addr(&lp_ns::Widget::spin);
    EXPECT_EQ(must_resolve("lp_ns::Widget::spin(int)"), spin);
    EXPECT_EQ(must_resolve("lp_ns::Widget::spin"), spin);
    EXPECT_EQ(must_resolve("_ZN5lp_ns6Widget4spinEi"), spin);
    EXPECT_EQ(must_resolve(exe_base_name() + ":lp_ns::Widget::spin"), spin);
    // A const method by its full name, without " const", or without parameters.
    uint64_t peek = method_addr(&lp_ns::Widget::peek);
    EXPECT_EQ(must_resolve("lp_ns::Widget::peek() const"), peek);
    EXPECT_EQ(must_resolve("lp_ns::Widget::peek()"), peek);
    EXPECT_EQ(must_resolve("lp_ns::Widget::peek"), peek);
    EXPECT_EQ(must_resolve("lp_ns::unique_fn"), addr_of(&lp_ns::unique_fn));

    uint64_t by_int = addr_of(static_cast<int (*)(int)>(&lp_ns::overloaded));
    uint64_t by_double = addr_of(static_cast<int (*)(double)>(&lp_ns::overloaded));
    EXPECT_EQ(must_resolve("lp_ns::overloaded(int)"), by_int);
    EXPECT_EQ(must_resolve("lp_ns::overloaded( double )"), by_double);
    std::string why;
    EXPECT_EQ(resolve_error("lp_ns::overloaded", &why), -EINVAL);
    EXPECT_NE(why.find("lp_ns::overloaded(int) at 0x"), std::string::npos) << why;
    EXPECT_NE(why.find("lp_ns::overloaded(double) at 0x"), std::string::npos) << why;
}

TEST(Symbols, Errors) {
    std::string why;
    EXPECT_EQ(resolve_error("lp_no_such_symbol_anywhere", &why), -ENOENT);
    EXPECT_EQ(why, "no symbol 'lp_no_such_symbol_anywhere' in any loaded object");
    EXPECT_EQ(resolve_error("libc.so.6:lp_no_such_symbol", &why), -ENOENT);
    EXPECT_EQ(why, "no symbol 'lp_no_such_symbol' in libc.so.6");
    EXPECT_EQ(resolve_error("libzz:getpid", &why), -ENOENT);
    EXPECT_EQ(why, "no loaded object matches 'libzz'");
    EXPECT_EQ(resolve_error("", &why), -EINVAL);
    EXPECT_EQ(resolve_error("libc:", &why), -EINVAL);
    EXPECT_EQ(resolve_error(":getpid", &why), -EINVAL);
}

TEST(Symbols, FunctionAtAndDescribe) {
    uint64_t fn = addr_of(&lp_symtest_c_function);
    std::optional<symbols::Function> f = symbols::function_at(fn + 1);
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->start, fn);
    EXPECT_GT(f->end, fn + 1);
    EXPECT_EQ(f->name, "lp_symtest_c_function");
    EXPECT_FALSE(f->from_eh_frame);
    EXPECT_EQ(symbols::describe(fn + 2), "lp_symtest_c_function+0x2");
    EXPECT_EQ(symbols::describe(fn), "lp_symtest_c_function+0x0");
    EXPECT_EQ(symbols::describe(0x10), "0x10");
    EXPECT_FALSE(symbols::function_at(0x10).has_value());
}

// What a jump through a pointer can load (ElfObject::stores_code_address): this test program is
// position-independent, so the pointers in its data are relocations. lp_symtest_stored's
// address is stored (a table of pointers, as a dispatch table is), and with an offset into its
// body (as a computed goto's label would be); lp_symtest_c_function's bytes past its entry are
// stored nowhere.
extern "C" __attribute__((noinline, used)) int lp_symtest_stored(int x) {
    return x * 7 + 3;
}
asm(".section .data.rel.ro,\"aw\"\n.balign 8\nlp_symtest_pointers: .quad lp_symtest_stored, lp_symtest_stored+6\n"
    ".text\n");

TEST(Symbols, CodeAddressesTheDataStores) {
    const uint64_t fn = addr_of(&lp_symtest_c_function);
    const uint64_t stored = addr_of(&lp_symtest_stored);
    EXPECT_EQ(symbols::code_address_stored(fn + 1, fn + 5), 0);
    EXPECT_EQ(symbols::code_address_stored(stored, stored + 1), 1);
    EXPECT_EQ(symbols::code_address_stored(stored + 1, stored + 6), 0);
    EXPECT_EQ(symbols::code_address_stored(stored + 1, stored + 7), 1);  // +6
    // In a library: libc stores its own functions' addresses (IRELATIVE, function tables).
    const uint64_t qsort_at = addr_of(&qsort);
    EXPECT_EQ(symbols::code_address_stored(qsort_at + 1, qsort_at + 5), 0);
    // Where no object is mapped: not known.
    EXPECT_EQ(symbols::code_address_stored(0x10, 0x20), -1);
}

// A function with a cold part, as GCC splits them (f and the local symbol f.cold).
asm(".text\n"
    ".globl lp_symtest_hot\n.type lp_symtest_hot, @function\n"
    "lp_symtest_hot: testl %edi, %edi\n jne lp_symtest_hot.cold\n ret\n"
    ".size lp_symtest_hot, .-lp_symtest_hot\n"
    ".type lp_symtest_hot.cold, @function\n"
    "lp_symtest_hot.cold: xorl %eax, %eax\n jmp lp_symtest_hot+4\n"
    ".size lp_symtest_hot.cold, .-lp_symtest_hot.cold\n");
extern "C" int lp_symtest_hot(int);

TEST(Symbols, FunctionAtReportsColdParts) {
    uint64_t fn = addr_of(&lp_symtest_hot);
    std::optional<symbols::Function> f = symbols::function_at(fn);
    ASSERT_TRUE(f.has_value());
    ASSERT_EQ(f->cold.size(), 1u);
    uint64_t cold = 0;
    std::string why;
    ASSERT_EQ(symbols::resolve("lp_symtest_hot.cold", &cold, &why), 0) << why;
    EXPECT_EQ(f->cold[0].first, cold);
    EXPECT_EQ(f->cold[0].second, cold + 4);  // xorl (2) + jmp rel8 (2)
    // A function without one has none.
    EXPECT_TRUE(symbols::function_at(addr_of(&lp_symtest_c_function))->cold.empty());
}

// Small libraries built at test time: two defining one name (ambiguous with none in the main
// program), one with two versions of a symbol, one with an IFUNC.
class SymbolLibraries : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        if (std::system("cc --version >/dev/null 2>&1") != 0) return;
        char tmpl[] = "/tmp/lp_symtest_XXXXXX";
        if (mkdtemp(tmpl) == nullptr) return;
        dir_ = tmpl;
        write("a.c",
              "int lp_dup_fn(int x) { return x + 1; }\nint lp_only_a(void) { return 7; }\n"
              "int lp_tier(int x) { return x + 4; }\n");
        write("b.c", "int lp_dup_fn(int x) { return x + 2; }\n");
        write("v.c",
              "int lp_ver_old(void) { return 1; }\n"
              "int lp_ver_new(void) { return 2; }\n"
              "__asm__(\".symver lp_ver_old, lp_ver@LPV_1\");\n"
              "__asm__(\".symver lp_ver_new, lp_ver@@LPV_2\");\n");
        write("v.map", "LPV_1 { global: lp_ver; local: *; };\nLPV_2 { global: lp_ver; } LPV_1;\n");
        write("i.c",
              "static int lp_impl_a(int x) { return x + 10; }\n"
              "static int lp_impl_b(int x) { return x + 20; }\n"
              "static void *lp_resolver(void) { return (void *)lp_impl_b; }\n"
              "int lp_ifn(int x) __attribute__((ifunc(\"lp_resolver\")));\n"
              "static int lp_local_ifn(int x) __attribute__((ifunc(\"lp_resolver\")));\n"
              "int lp_use_a(int x) { return lp_impl_a(x) + lp_local_ifn(x); }\n"
              // Hand-written assembly without .size: bounds only from its FDE.
              "__asm__(\".text\\n.globl lp_nosize\\n.type lp_nosize, @function\\n\"\n"
              "        \"lp_nosize:\\n.cfi_startproc\\nnop\\nnop\\nret\\n.cfi_endproc\\n\");\n");
        // Two compilation units of one object, each with a static lp_twin; lp_tier is static
        // here and global in liblpa.so.
        write("c1.c",
              "__attribute__((noinline, used)) static int lp_twin(int x) { return x + 1; }\n"
              "__attribute__((noinline, used)) static int lp_tier(int x) { return x + 3; }\n"
              "int lp_use_twin1(int x) { return lp_twin(x) + lp_tier(x); }\n");
        write("c2.c",
              "__attribute__((noinline, used)) static int lp_twin(int x) { return x + 2; }\n"
              "int lp_use_twin2(int x) { return lp_twin(x); }\n");
        bool ok = cc("liblpc.so", "c1.c", dir_ + "/c2.c") && cc("liblpa.so", "a.c") &&
                  cc("liblpb.so", "b.c") &&
                  cc("liblpv.so", "v.c", "-Wl,--version-script=" + dir_ + "/v.map") &&
                  cc("liblpi.so", "i.c");
        if (!ok) return;
        for (const char *name : {"liblpa.so", "liblpb.so", "liblpv.so", "liblpi.so", "liblpc.so"}) {
            void *h = dlopen((dir_ + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL);
            if (h == nullptr) return;
            handles_.push_back(h);
        }
    }
    static void TearDownTestSuite() {
        for (void *h : handles_) dlclose(h);
        handles_.clear();
        if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
    }
    void SetUp() override {
        if (handles_.size() != 5) GTEST_SKIP() << "could not build the test libraries with cc";
    }
    static void write(const char *name, const char *text) {
        std::ofstream(dir_ + "/" + name) << text;
    }
    static bool cc(const char *out, const char *src, const std::string &extra = "") {
        std::string cmd = "cc -shared -fPIC -O1 -g0 -o " + dir_ + "/" + out + " " + dir_ + "/" +
                          src + " " + extra + " 2>&1";
        return std::system(cmd.c_str()) == 0;
    }
    static uint64_t sym(int lib, const char *name) {
        return reinterpret_cast<uint64_t>(dlsym(handles_[lib], name));
    }

    static inline std::string dir_;
    static inline std::vector<void *> handles_;
};

TEST_F(SymbolLibraries, AmbiguousAcrossObjects) {
    std::string why;
    EXPECT_EQ(resolve_error("lp_dup_fn", &why), -EINVAL);
    char a[32], b[32];
    std::snprintf(a, sizeof a, "0x%llx", static_cast<unsigned long long>(sym(0, "lp_dup_fn")));
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(sym(1, "lp_dup_fn")));
    EXPECT_NE(why.find(std::string("liblpa.so:lp_dup_fn at ") + a), std::string::npos) << why;
    EXPECT_NE(why.find(std::string("liblpb.so:lp_dup_fn at ") + b), std::string::npos) << why;
    EXPECT_EQ(must_resolve("liblpa:lp_dup_fn"), sym(0, "lp_dup_fn"));
    EXPECT_EQ(must_resolve("liblpb.so:lp_dup_fn"), sym(1, "lp_dup_fn"));
    EXPECT_EQ(must_resolve("lp_only_a"), sym(0, "lp_only_a"));
}

// Static functions of one name in two compilation units of one object: ambiguous, as two in the
// main program are. A global definition elsewhere hides a static one of the same name.
TEST_F(SymbolLibraries, StaticTwinsAndGlobalsFirst) {
    std::string why;
    EXPECT_EQ(resolve_error("liblpc:lp_twin", &why), -EINVAL);
    EXPECT_EQ(std::count(why.begin(), why.end(), ','), 1) << why;
    EXPECT_NE(why.find("liblpc.so:lp_twin at 0x"), std::string::npos) << why;
    EXPECT_EQ(resolve_error("lp_twin", &why), -EINVAL);
    EXPECT_EQ(must_resolve("lp_tier"), sym(0, "lp_tier"));
    std::optional<symbols::Function> f = symbols::function_at(must_resolve("liblpc:lp_tier"));
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->name, "lp_tier");
    EXPECT_NE(f->object.find("liblpc.so"), std::string::npos);
}

TEST_F(SymbolLibraries, UnloadIsNoticed) {
    ASSERT_EQ(must_resolve("lp_only_a"), sym(0, "lp_only_a"));
    dlclose(handles_[1]);
    uint64_t addr = 0;
    std::string why;
    // liblpb.so is gone: lp_dup_fn now has one definition.
    EXPECT_EQ(symbols::resolve("lp_dup_fn", &addr, &why), 0) << why;
    EXPECT_EQ(addr, sym(0, "lp_dup_fn"));
    handles_[1] = dlopen((dir_ + "/liblpb.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handles_[1], nullptr);
    EXPECT_EQ(symbols::resolve("lp_dup_fn", &addr, &why), -EINVAL);
}

TEST_F(SymbolLibraries, Versions) {
    void *v2 = dlvsym(handles_[2], "lp_ver", "LPV_2");
    void *v1 = dlvsym(handles_[2], "lp_ver", "LPV_1");
    ASSERT_NE(v1, nullptr);
    ASSERT_NE(v2, v1);
    EXPECT_EQ(must_resolve("lp_ver"), reinterpret_cast<uint64_t>(v2));
    EXPECT_EQ(must_resolve("liblpv:lp_ver"), reinterpret_cast<uint64_t>(v2));
    EXPECT_EQ(must_resolve("liblpv:lp_ver@LPV_1"), reinterpret_cast<uint64_t>(v1));
    EXPECT_EQ(must_resolve("lp_ver@@LPV_2"), reinterpret_cast<uint64_t>(v2));
}

TEST_F(SymbolLibraries, OwnIfunc) {
    uint64_t impl = sym(3, "lp_ifn");
    ASSERT_NE(impl, 0u);
    EXPECT_EQ(must_resolve("lp_ifn"), impl);
    EXPECT_EQ(reinterpret_cast<int (*)(int)>(impl)(1), 21);  // lp_impl_b
    std::optional<symbols::Function> f = symbols::function_at(impl);
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->start, impl);
    EXPECT_NE(f->object.find("liblpi.so"), std::string::npos);
    // A static IFUNC is in .symtab only; which implementation it bound to is unknown.
    std::string why;
    EXPECT_EQ(resolve_error("liblpi:lp_local_ifn", &why), -ENOENT);
    EXPECT_NE(why.find("not exported"), std::string::npos) << why;
}

TEST_F(SymbolLibraries, FdeBoundsOfSizelessFunction) {
    uint64_t fn = sym(3, "lp_nosize");
    ASSERT_NE(fn, 0u);
    std::optional<symbols::Function> f = symbols::function_at(fn + 1);
    ASSERT_TRUE(f.has_value());
    EXPECT_TRUE(f->from_eh_frame);
    EXPECT_EQ(f->start, fn);
    EXPECT_EQ(f->end, fn + 3);  // nop; nop; ret
    EXPECT_EQ(f->name, "lp_nosize");
    EXPECT_EQ(symbols::describe(fn + 2), "lp_nosize+0x2");
}

// One mutex guards the tables: concurrent lookups agree with a serial one.
TEST(Symbols, ConcurrentLookups) {
    uint64_t expect = dlsym_default("getpid");
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 200; ++i) {
                uint64_t addr = 0;
                if (symbols::resolve("getpid", &addr, nullptr) != 0 || addr != expect) ++bad;
                if (t == 0 && i % 50 == 0) symbols::invalidate();
                if (!symbols::function_at(addr)) ++bad;
            }
        });
    }
    for (std::thread &th : threads) th.join();
    EXPECT_EQ(bad.load(), 0);
}

// A warm lookup is a few hash probes per object, like kallsyms_lookup_name.
TEST(Symbols, WarmLookupIsFast) {
    uint64_t addr = 0;
    ASSERT_EQ(symbols::resolve("lp_ns::Widget::spin", &addr, nullptr), 0);
    ASSERT_EQ(symbols::resolve("getpid", &addr, nullptr), 0);
    constexpr int n = 2000;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i)
        symbols::resolve(i % 2 ? "getpid" : "lp_ns::Widget::spin", &addr, nullptr);
    auto per_call = (std::chrono::steady_clock::now() - start) / n;
    RecordProperty("ns_per_resolve", static_cast<int>(per_call.count()));
    EXPECT_LT(per_call, std::chrono::microseconds(200));
}

}  // namespace

// ---- Globs (symbols::match, for tracers) ----

TEST(SymbolsMatch, MainProgramByGlobAndDemangledName) {
    std::vector<symbols::Match> found;
    std::string why;
    ASSERT_EQ(symbols::match("lp_symtest_*", &found, &why), 0) << why;
    bool c_function = false, static_helper = false;
    for (const auto &m : found) {
        c_function |= m.name == "lp_symtest_c_function" && m.addr == addr_of(&lp_symtest_c_function);
        EXPECT_NE(m.name, "_start");
        EXPECT_EQ(m.name.find(':'), std::string::npos) << "main program names carry no object: " << m.name;
    }
    EXPECT_TRUE(c_function);
    ASSERT_EQ(symbols::match("lp_static_*", &found, &why), 0) << why;
    for (const auto &m : found) static_helper |= m.addr == addr_of(&lp_static_helper);
    EXPECT_TRUE(static_helper) << "static functions come from .symtab";
    // A C++ function by its demangled name; every match resolves back to its address.
    ASSERT_EQ(symbols::match("lp_ns::*", &found, &why), 0) << why;
    EXPECT_FALSE(found.empty());
    for (const auto &m : found) {
        uint64_t a = 0;
        ASSERT_EQ(symbols::resolve(m.name, &a, &why), 0) << m.name << ": " << why;
        EXPECT_EQ(a, m.addr) << m.name;
    }
    // '*' never names the entry point or the init/fini sections' functions.
    ASSERT_EQ(symbols::match("*", &found, &why), 0) << why;
    for (const auto &m : found) EXPECT_TRUE(m.name != "_start" && m.name != "_init" && m.name != "_fini") << m.name;
}

TEST(SymbolsMatch, OneLibraryAndErrors) {
    std::vector<symbols::Match> found;
    std::string why;
    ASSERT_EQ(symbols::match("libc.so.6:getpi*", &found, &why), 0) << why;
    bool getpid = false;
    for (const auto &m : found) getpid |= m.name == "libc.so.6:getpid";
    EXPECT_TRUE(getpid);
    EXPECT_EQ(symbols::match("libnosuch.so.1:*", &found, &why), -ENOENT);
    EXPECT_NE(why.find("libnosuch.so.1"), std::string::npos) << why;
    EXPECT_EQ(symbols::match("libc:", &found, &why), -EINVAL);
    EXPECT_EQ(symbols::match("nothing_is_called_this_*", &found, &why), 0);
    EXPECT_TRUE(found.empty());
}

// What '*' and return probes take for functions (issue 31): a cold part GCC splits out of a
// function (landing pads, unlikely paths) is not one, whatever its suffix's number; its clones
// are.
TEST(SymbolNames, ColdPartsAreNotFunctions) {
    using liveprobe::symbols::is_cold_part;
    EXPECT_TRUE(is_cold_part("_Z4leafi.cold"));
    EXPECT_TRUE(is_cold_part("main.cold"));
    EXPECT_TRUE(is_cold_part("do_work.cold.3"));
    EXPECT_TRUE(is_cold_part("leaf(int) [clone .cold]"));
    EXPECT_TRUE(is_cold_part("f.cold@@VERS_1"));
    EXPECT_FALSE(is_cold_part("f.part.0"));
    EXPECT_FALSE(is_cold_part("f.isra.0"));
    EXPECT_FALSE(is_cold_part("f.constprop.0"));
    EXPECT_FALSE(is_cold_part("cold"));
    EXPECT_FALSE(is_cold_part(".cold"));
    EXPECT_FALSE(is_cold_part("f.coldstart"));
    EXPECT_FALSE(is_cold_part("f.cold.x"));
    EXPECT_FALSE(is_cold_part("get_cold"));
}
