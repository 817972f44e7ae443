// The C++ API (include/liveprobe/liveprobe.hpp): RAII handles, errors with reasons, typed
// arguments of every SysV class, typed return values, skip, typed per-call slots and their
// outcomes, counters and state, batches, lambdas with captures.
//
// The probed functions are [[gnu::noipa]]: the compiler keeps their ABI (no clones with
// arguments dropped or constants propagated), which is what the typed access reads.
#include <liveprobe/liveprobe.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace lp = liveprobe;

// ---- probed functions -------------------------------------------------------------------

[[gnu::noipa]] long ints8(int a, long b, short c, unsigned char d, bool e, long long f, int g, long h)
{
    return a + b + c + d + e + f + g + h;
}

[[gnu::noipa]] double many_fp(float a, double b, double c, double d, double e, double f, double g, double h,
                              double i, float j)
{
    return a + b + c + d + e + f + g + h + i + j;
}

// x and y on the stack (X87 class), d in xmm0, a in edi.
[[gnu::noipa]] long double x87_args(int a, long double x, double d, long double y) { return a + x + d + y; }

struct Big {  // 40 bytes: MEMORY class
    long v[5];
};
[[gnu::noipa]] long big_arg(int a, Big b, int c) { return a + b.v[0] + b.v[4] + c; }
[[gnu::noipa]] Big make_big(long x)
{
    Big b{};
    for (int i = 0; i < 5; ++i) b.v[i] = x * (i + 1);
    return b;
}

// Not trivially copyable: passed by invisible reference.
[[gnu::noipa]] std::size_t str_arg(std::string s, int n) { return s.size() * 100 + static_cast<std::size_t>(n); }

// a: edi; b: rsi:rdx; c: rcx; d: r8; e: r9; f: the stack (16-aligned).
[[gnu::noipa]] __int128 i128(int a, __int128 b, long c, long d, long e, __int128 f) { return a + b + c + d + e + f; }

[[gnu::noipa]] int by_ref(int &out, const int *p)
{
    out = *p + 1;
    return out;
}

enum class Color : short { red = 1, green = -2 };
[[gnu::noipa]] int color_value(Color c, char ch) { return static_cast<int>(c) * 1000 + ch; }

[[gnu::noipa]] int vsum(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    int s = 0;
    for (int i = 0; i < n; ++i) s += va_arg(ap, int);
    va_end(ap);
    return s;
}
[[gnu::noipa]] double vscale(double scale, const char *what, ...)
{
    va_list ap;
    va_start(ap, what);
    double v = va_arg(ap, double);
    va_end(ap);
    return scale * v + static_cast<double>(std::strlen(what));
}

[[gnu::noipa]] float half_f(float x) { return x / 2; }
[[gnu::noipa]] double twice(double x) { return x * 2; }
[[gnu::noipa]] long double third(long double x) { return x / 3; }
[[gnu::noipa]] int *next_ptr(int *p) { return p + 1; }
[[gnu::noipa]] int add(int a, int b) { return a + b; }
[[gnu::noipa]] int sub(int a, int b) { return a - b; }
[[gnu::noipa]] int mul(int a, int b) { return a * b; }
int g_side_effect = 0;
[[gnu::noipa]] void bump(int by) { g_side_effect += by; }
[[gnu::noipa]] int bump_and_return(int by)
{
    g_side_effect += by;
    return by;
}

struct Widget {
    int base = 0;
    [[gnu::noipa]] int spin(int x) const { return base + x; }
    [[gnu::noipa]] Big build(long x) { return make_big(x + base); }
    [[gnu::noipa]] virtual int virt(int x) { return base * x; }
    virtual ~Widget() = default;
};

[[gnu::noipa]] int may_throw(int x)
{
    if (x < 0) throw std::runtime_error("negative");
    return x * 10;
}
[[gnu::noipa]] int calls_may_throw(int x) { return may_throw(x) + 1; }

// Small classes (16 bytes or less), passed in registers by their eightbytes.
struct Point {  // INTEGER
    int x, y;
};
struct Vec2 {  // SSE
    float x, y;
};
struct Mixed {  // SSE, INTEGER
    double d;
    long l;
};
struct IntDouble {  // INTEGER, SSE
    int i;
    double d;
};
template <>
struct liveprobe::sysv::Eightbytes<Point> : liveprobe::sysv::Classes<liveprobe::sysv::Class::integer> {};
template <>
struct liveprobe::sysv::Eightbytes<Vec2> : liveprobe::sysv::Classes<liveprobe::sysv::Class::sse> {};
template <>
struct liveprobe::sysv::Eightbytes<Mixed>
    : liveprobe::sysv::Classes<liveprobe::sysv::Class::sse, liveprobe::sysv::Class::integer> {};
template <>
struct liveprobe::sysv::Eightbytes<IntDouble>
    : liveprobe::sysv::Classes<liveprobe::sysv::Class::integer, liveprobe::sysv::Class::sse> {};

// p: rdi; v: xmm0; m: xmm1 + rsi; sv: rdx + rcx; pr: r8 + xmm2; tail: r9.
[[gnu::noipa]] double small_args(Point p, Vec2 v, Mixed m, std::string_view sv, std::pair<int, double> pr, int tail)
{
    return p.x + p.y + v.x + v.y + m.d + static_cast<double>(m.l) + static_cast<double>(sv.size()) + pr.first +
           pr.second + tail;
}
// a..e: five registers; sv needs two: the stack; p takes the last register (r9).
[[gnu::noipa]] long small_spill(long a, long b, long c, long d, long e, std::string_view sv, Point p)
{
    return a + b + c + d + e + static_cast<long>(sv.size()) * 1000 + p.x * 100 + p.y;
}
[[gnu::noipa]] Vec2 make_vec(float x) { return Vec2{x, x * 2}; }
[[gnu::noipa]] Mixed make_mixed(long l) { return Mixed{l * 0.5, l}; }
[[gnu::noipa]] IntDouble make_id(int i) { return IntDouble{i, i * 0.25}; }
[[gnu::noipa]] std::pair<long, long> make_pair(long a) { return {a, -a}; }
[[gnu::noipa]] std::chrono::milliseconds ms_twice(std::chrono::milliseconds d) { return d * 2; }

// Recursion through a pointer the compiler cannot see through: real calls at any -O.
int recurse(int n);
int (*volatile g_recurse)(int) = &recurse;
[[gnu::noipa]] int recurse(int n) { return n <= 0 ? 0 : 1 + g_recurse(n - 1); }

// An address no handler may write: the handler's fault.
[[gnu::noipa]] volatile int *bad_address() { return reinterpret_cast<volatile int *>(uintptr_t{16}); }

// A data object: not code.
int g_data_word = 42;

// ---- RAII handles -------------------------------------------------------------------------

TEST(CxxHandle, ScopeExitUnregisters)
{
    int hits = 0;
    {
        auto p = lp::probe(&add).on_entry([&](int, int) { ++hits; }).attach();
        ASSERT_TRUE(p) << p.error().message();
        EXPECT_EQ(add(1, 2), 3);
        EXPECT_EQ(hits, 1);
        EXPECT_EQ(p->counters().hits, 1u);
    }
    EXPECT_EQ(add(1, 2), 3);
    EXPECT_EQ(hits, 1) << "the probe still ran after its handle went out of scope";
}

TEST(CxxHandle, MovedFromHandleOwnsNothing)
{
    int hits = 0;
    auto r = lp::probe(&sub).on_entry([&](int, int) { ++hits; }).attach();
    ASSERT_TRUE(r) << r.error().message();
    lp::Probe a = std::move(*r);
    EXPECT_TRUE(a.registered());
    lp::Probe b = std::move(a);
    EXPECT_FALSE(a.registered());
    EXPECT_FALSE(static_cast<bool>(a));
    EXPECT_EQ(a.address(), nullptr);
    EXPECT_EQ(a.counters().hits, 0u);
    auto e = a.disable();
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, -EINVAL);
    EXPECT_NE(e.error().reason.find("empty"), std::string::npos) << e.error().reason;
    a.reset();  // no-op
    EXPECT_TRUE(b.registered());
    EXPECT_EQ(b.address(), reinterpret_cast<void *>(&sub));
    sub(5, 1);
    EXPECT_EQ(hits, 1);
    // Move-assigning over a registered handle unregisters what it held.
    int other = 0;
    auto r2 = lp::probe(&mul).on_entry([&](int, int) { ++other; }).attach();
    ASSERT_TRUE(r2);
    b = std::move(*r2);
    sub(5, 1);
    mul(2, 3);
    EXPECT_EQ(hits, 1) << "the probe on sub survived being overwritten";
    EXPECT_EQ(other, 1);
    b.reset();
    mul(2, 3);
    EXPECT_EQ(other, 1);
    EXPECT_FALSE(b.registered());
}

TEST(CxxHandle, HandlesInAVectorUnregisterTogether)
{
    int hits = 0;
    {
        std::vector<lp::Probe> probes;
        for (auto f : {&add, &sub, &mul}) {
            auto p = lp::probe(f).on_entry([&](int, int) { ++hits; }).attach();
            ASSERT_TRUE(p) << p.error().message();
            probes.push_back(std::move(*p));
        }
        add(1, 1), sub(1, 1), mul(1, 1);
        EXPECT_EQ(hits, 3);
    }
    add(1, 1), sub(1, 1), mul(1, 1);
    EXPECT_EQ(hits, 3);
}

// ---- errors with reasons ------------------------------------------------------------------

TEST(CxxErrors, UnknownSymbol)
{
    auto p = lp::probe<int(int, int)>("no_such_function_anywhere").on_entry([](int, int) {}).attach();
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().code, -ENOENT);
    EXPECT_NE(p.error().reason.find("no_such_function_anywhere"), std::string::npos) << p.error().reason;
    EXPECT_THROW((void)p.value(), lp::BadResultAccess);
    try {
        (void)p.value();
    } catch (const lp::BadResultAccess &e) {
        EXPECT_EQ(e.error().code, -ENOENT);
        EXPECT_NE(std::string(e.what()).find("no_such_function_anywhere"), std::string::npos) << e.what();
    }
}

TEST(CxxErrors, AddressNotCode)
{
    auto p = lp::kprobe(static_cast<const void *>(&g_data_word)).pre([](pt_regs &) {}).attach();
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().code, -EINVAL);
    EXPECT_FALSE(p.error().reason.empty());
    EXPECT_EQ(g_data_word, 42);
}

TEST(CxxErrors, NotAnInstructionBoundary)
{
    // ints8 starts with a multi-byte instruction at -O1 (no one-byte push first): find a byte
    // inside the first instruction by asking the C API where ints8 is and trying offsets.
    int found = 0;
    for (unsigned off = 1; off < 4 && !found; ++off) {
        auto p = lp::kprobe({"ints8", off}).pre([](pt_regs &) {}).attach();
        if (!p && p.error().code == -EILSEQ) {
            EXPECT_NE(p.error().reason.find("boundary"), std::string::npos) << p.error().reason;
            found = 1;
        }
    }
    EXPECT_TRUE(found) << "no offset inside ints8's first instruction gave -EILSEQ";
}

TEST(CxxErrors, TypedProbeNeedsTheEntry)
{
    auto p = lp::probe<int(int, int)>({"add", 4}).on_entry([](int, int) {}).attach();
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().code, -EINVAL);
    EXPECT_NE(p.error().reason.find("entry"), std::string::npos) << p.error().reason;
}

TEST(CxxErrors, NullFunctionAndVirtualMember)
{
    int (*null_fn)(int, int) = nullptr;
    auto p = lp::probe(null_fn).on_entry([](int, int) {}).attach();
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().code, -EINVAL);
    EXPECT_NE(p.error().reason.find("null"), std::string::npos) << p.error().reason;

    auto v = lp::probe(&Widget::virt).on_entry([](Widget *, int) {}).attach();
    ASSERT_FALSE(v);
    EXPECT_EQ(v.error().code, -EINVAL);
    EXPECT_NE(v.error().reason.find("virtual"), std::string::npos) << v.error().reason;
}

TEST(CxxErrors, ReturnProbeNotAtAnEntry)
{
    auto p = lp::kretprobe({"ints8", 0}).on_return([](kretprobe_instance &, pt_regs &) {}).attach();
    ASSERT_TRUE(p) << p.error().message();  // the entry itself is fine
    p->reset();
    // Past the entry: the C API's -EINVAL, with its reason.
    for (unsigned off = 1; off < 16; ++off) {
        auto q = lp::kretprobe({"ints8", off}).on_return([](kretprobe_instance &, pt_regs &) {}).attach();
        if (!q && q.error().code == -EINVAL) {
            EXPECT_NE(q.error().reason.find("entry"), std::string::npos) << q.error().reason;
            return;
        }
    }
    ADD_FAILURE() << "no offset inside ints8 was refused with -EINVAL";
}

TEST(CxxErrors, DataSizeTooBig)
{
    auto p = lp::kretprobe("add").on_return([](kretprobe_instance &, pt_regs &) {}).data_size(5000).attach();
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().code, -E2BIG);
    EXPECT_NE(p.error().reason.find("5000"), std::string::npos) << p.error().reason;
    EXPECT_NE(p.error().message().find("5000"), std::string::npos);
}

// ---- typed arguments, every SysV class ----------------------------------------------------

TEST(CxxTypedArgs, IntegersInRegistersAndOnTheStack)
{
    std::vector<long> seen;
    auto p = lp::probe(&ints8)
                 .on_entry([&](int a, long b, short c, unsigned char d, bool e, long long f, int g, long h) {
                     seen = {a, b, c, d, e, f, g, h};
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(ints8(-1, 1L << 40, -3, 250, true, -(1LL << 50), -7, 8), -1 + (1L << 40) - 3 + 250 + 1 - (1LL << 50) - 7 + 8);
    EXPECT_EQ(seen, (std::vector<long>{-1, 1L << 40, -3, 250, 1, -(1LL << 50), -7, 8}));
}

TEST(CxxTypedArgs, WritesToIntegerArgumentsReachTheFunction)
{
    auto p = lp::probe(&ints8)
                 .on_entry([](auto &call) {
                     call.template set_arg<0>(100);         // edi
                     call.template set_arg<2>(short(-300)); // a short, sign-extended
                     call.template set_arg<7>(1000L);       // on the stack
                     EXPECT_EQ(call.template arg<7>(), 1000L);
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(ints8(1, 2, 3, 4, false, 6, 7, 8), 100 + 2 - 300 + 4 + 0 + 6 + 7 + 1000);
}

TEST(CxxTypedArgs, FloatAndDoubleInXmmAndOnTheStack)
{
    std::vector<double> seen;
    auto p = lp::probe(&many_fp)
                 .on_entry([&](float a, double b, double c, double d, double e, double f, double g, double h,
                               double i, float j) { seen = {a, b, c, d, e, f, g, h, i, j}; })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    double r = many_fp(0.5f, 1.25, 2, 3, 4, 5, 6, 7, 8.5, 9.75f);
    EXPECT_DOUBLE_EQ(r, 0.5 + 1.25 + 2 + 3 + 4 + 5 + 6 + 7 + 8.5 + 9.75);
    EXPECT_EQ(seen, (std::vector<double>{0.5, 1.25, 2, 3, 4, 5, 6, 7, 8.5, 9.75}));
}

TEST(CxxTypedArgs, WritesToFloatingArgumentsReachTheFunction)
{
    auto p = lp::probe(&many_fp)
                 .on_entry([](auto &call) {
                     call.template set_arg<0>(10.5f);  // xmm0, a float
                     call.template set_arg<7>(-7.0);   // xmm7
                     call.template set_arg<8>(100.0);  // the stack
                     call.template set_arg<9>(0.25f);  // the stack, a float
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_DOUBLE_EQ(many_fp(0.5f, 1, 2, 3, 4, 5, 6, 7, 8, 9), 10.5 + 1 + 2 + 3 + 4 + 5 + 6 - 7 + 100 + 0.25);
}

TEST(CxxTypedArgs, LongDoubleOnTheStack)
{
    long double x = 0, y = 0;
    int a = 0;
    double d = 0;
    auto p = lp::probe(&x87_args)
                 .on_entry([&](auto &call) {
                     a = call.template arg<0>();
                     x = call.template arg<1>();
                     d = call.template arg<2>();
                     y = call.template arg<3>();
                     call.template set_arg<3>(1000.0L);
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    long double r = x87_args(3, 1.5L, 2.25, 1e300L * 1e300L);
    EXPECT_EQ(a, 3);
    EXPECT_EQ(x, 1.5L);
    EXPECT_EQ(d, 2.25);
    EXPECT_EQ(y, 1e300L * 1e300L) << "a long double beyond double's range";
    EXPECT_EQ(r, 3 + 1.5L + 2.25 + 1000.0L);
}

TEST(CxxTypedArgs, ClassesInMemoryAndByInvisibleReference)
{
    long b0 = 0, b4 = 0;
    int c = 0;
    auto p = lp::probe(&big_arg)
                 .on_entry([&](auto &call) {
                     Big &b = call.template arg<1>();  // the callee's copy, on the stack
                     b0 = b.v[0];
                     b4 = b.v[4];
                     c = call.template arg<2>();
                     b.v[0] = 1000;
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    Big big{{1, 2, 3, 4, 5}};
    EXPECT_EQ(big_arg(7, big, 9), 7 + 1000 + 5 + 9);
    EXPECT_EQ(b0, 1);
    EXPECT_EQ(b4, 5);
    EXPECT_EQ(c, 9);
    EXPECT_EQ(big.v[0], 1) << "the caller's object changed: the write went to the wrong copy";

    std::string seen;
    auto s = lp::probe(&str_arg)
                 .on_entry([&](auto &call) {
                     std::string &str = call.template arg<0>();
                     seen = str;
                     EXPECT_EQ(call.template arg<1>(), 4);
                     str += "!!";
                 })
                 .attach();
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_EQ(str_arg("hello", 4), 7u * 100 + 4);
    EXPECT_EQ(seen, "hello");
}

TEST(CxxTypedArgs, SmallClassesInRegistersByTheirEightbytes)
{
    Point p{};
    Vec2 v{};
    Mixed m{};
    std::string seen_sv;
    std::pair<int, double> pr{};
    int tail = 0;
    auto probe = lp::probe(&small_args)
                     .on_entry([&](auto &call) {
                         std::tie(p, v, m, std::ignore, pr, tail) = call.values();
                         seen_sv = std::string(call.template arg<3>());
                         call.template set_arg<0>(Point{100, 200});
                         call.template set_arg<2>(Mixed{0.5, 1000});
                         call.template set_arg<4>(std::pair<int, double>{-1, -0.25});
                     })
                     .attach();
    ASSERT_TRUE(probe) << probe.error().message();
    double r = small_args({1, 2}, {0.5f, 1.5f}, {2.25, 3}, "abcd", {5, 6.5}, 7);
    EXPECT_EQ(p.x, 1);
    EXPECT_EQ(p.y, 2);
    EXPECT_EQ(v.x, 0.5f);
    EXPECT_EQ(v.y, 1.5f);
    EXPECT_EQ(m.d, 2.25);
    EXPECT_EQ(m.l, 3);
    EXPECT_EQ(seen_sv, "abcd");
    EXPECT_EQ(pr.first, 5);
    EXPECT_EQ(pr.second, 6.5);
    EXPECT_EQ(tail, 7);
    EXPECT_DOUBLE_EQ(r, 300 + 2.0 + 0.5 + 1000 + 4 - 1 - 0.25 + 7);
}

TEST(CxxTypedArgs, SmallClassGoesWholeOnTheStackWhenItsRegistersAreNotFree)
{
    std::string seen_sv;
    Point p{};
    auto probe = lp::probe(&small_spill)
                     .on_entry([&](long, long, long, long, long, std::string_view sv, Point pt) {
                         seen_sv = std::string(sv);
                         p = pt;
                     })
                     .attach();
    ASSERT_TRUE(probe) << probe.error().message();
    EXPECT_EQ(small_spill(1, 2, 3, 4, 5, "xyz", {6, 7}), 15 + 3000 + 607);
    EXPECT_EQ(seen_sv, "xyz");
    EXPECT_EQ(p.x, 6);
    EXPECT_EQ(p.y, 7);
}

TEST(CxxTypedReturn, SmallClassesInRaxRdxXmm0Xmm1)
{
    Vec2 v{};
    auto pv = lp::probe(&make_vec).on_return([&](auto &x) {
        v = x.value();
        x.set_value(Vec2{-1, -2});
    }).attach();
    ASSERT_TRUE(pv) << pv.error().message();
    Vec2 rv = make_vec(3);
    EXPECT_EQ(v.x, 3);
    EXPECT_EQ(v.y, 6);
    EXPECT_EQ(rv.x, -1);
    EXPECT_EQ(rv.y, -2);

    Mixed m{};
    auto pm = lp::probe(&make_mixed).on_return([&](auto &x) {
        m = x.value();
        x.set_value(Mixed{9.5, 9});
    }).attach();
    ASSERT_TRUE(pm) << pm.error().message();
    Mixed rm = make_mixed(4);
    EXPECT_EQ(m.d, 2.0);
    EXPECT_EQ(m.l, 4);
    EXPECT_EQ(rm.d, 9.5);
    EXPECT_EQ(rm.l, 9);

    IntDouble id{};
    auto pi = lp::probe(&make_id).on_return([&](IntDouble r) { id = r; }).attach();
    ASSERT_TRUE(pi) << pi.error().message();
    make_id(8);
    EXPECT_EQ(id.i, 8);
    EXPECT_EQ(id.d, 2.0);

    std::pair<long, long> pr{};
    auto pp = lp::probe(&make_pair).on_return([&](auto &x) {
        pr = x.value();
        x.set_value(std::pair<long, long>{1, 2});
    }).attach();
    ASSERT_TRUE(pp) << pp.error().message();
    EXPECT_EQ(make_pair(5), (std::pair<long, long>{1, 2}));
    EXPECT_EQ(pr, (std::pair<long, long>{5, -5}));

    // Skipped with a small class: the registers of its eightbytes are set.
    auto ps = lp::probe(&make_id).on_entry([](auto &call) { call.skip(IntDouble{-3, -0.5}); }).attach();
    ASSERT_TRUE(ps) << ps.error().message();
    pi->reset();
    IntDouble s = make_id(1);
    EXPECT_EQ(s.i, -3);
    EXPECT_EQ(s.d, -0.5);

    std::chrono::milliseconds seen{};
    auto pd = lp::probe(&ms_twice).on_entry([&](std::chrono::milliseconds d) { seen = d; }).attach();
    ASSERT_TRUE(pd) << pd.error().message();
    EXPECT_EQ(ms_twice(std::chrono::milliseconds(21)).count(), 42);
    EXPECT_EQ(seen.count(), 21);
}

TEST(CxxTypedArgs, Int128InRegisterPairsAndOnTheStack)
{
    __int128 b = 0, f = 0;
    long c = 0, e = 0;
    auto p = lp::probe(&i128)
                 .on_entry([&](int, __int128 b_, long c_, long, long e_, __int128 f_) {
                     b = b_, c = c_, e = e_, f = f_;
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    __int128 big = (__int128(1) << 100) + 7;
    __int128 neg = -(__int128(1) << 90);
    EXPECT_EQ(i128(1, big, 3, 4, 5, neg), 1 + big + 3 + 4 + 5 + neg);
    EXPECT_TRUE(b == big);
    EXPECT_EQ(c, 3);
    EXPECT_EQ(e, 5);
    EXPECT_TRUE(f == neg);
}

TEST(CxxTypedArgs, ReferencesPointersEnumsAndChars)
{
    int *seen_ref = nullptr;
    const int *seen_ptr = nullptr;
    auto p = lp::probe(&by_ref)
                 .on_entry([&](auto &call) {
                     int &out = call.template arg<0>();
                     seen_ref = &out;
                     seen_ptr = call.template arg<1>();
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    int out = 0, in = 41;
    EXPECT_EQ(by_ref(out, &in), 42);
    EXPECT_EQ(seen_ref, &out);
    EXPECT_EQ(seen_ptr, &in);

    Color seen_c{};
    char seen_ch = 0;
    auto q = lp::probe(&color_value)
                 .on_entry([&](auto &call) {
                     seen_c = call.template arg<0>();
                     seen_ch = call.template arg<1>();
                     call.template set_arg<0>(Color::green);
                 })
                 .attach();
    ASSERT_TRUE(q) << q.error().message();
    EXPECT_EQ(color_value(Color::red, 'x'), -2 * 1000 + 'x');
    EXPECT_EQ(seen_c, Color::red);
    EXPECT_EQ(seen_ch, 'x');
}

TEST(CxxTypedArgs, VariadicFixedPart)
{
    int n = -1;
    unsigned long third = 0;
    auto p = lp::probe(&vsum)
                 .on_entry([&](auto &call) {
                     n = call.template arg<0>();
                     third = call.regs().dx;  // the variable part through the registers
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(vsum(3, 10, 20, 30), 60);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(third, 20u);

    double scale = 0;
    std::string what;
    auto q = lp::probe(&vscale).on_entry([&](double s, const char *w) { scale = s, what = w; }).attach();
    ASSERT_TRUE(q) << q.error().message();
    EXPECT_DOUBLE_EQ(vscale(1.5, "abc", 4.0), 1.5 * 4.0 + 3);
    EXPECT_EQ(scale, 1.5);
    EXPECT_EQ(what, "abc");
}

TEST(CxxTypedArgs, MemberFunctionsGetThis)
{
    Widget w;
    w.base = 5;
    const Widget *self = nullptr;
    int x = 0;
    auto p = lp::probe(&Widget::spin).on_entry([&](const Widget *t, int x_) { self = t, x = x_; }).attach();
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(w.spin(3), 8);
    EXPECT_EQ(self, &w);
    EXPECT_EQ(x, 3);

    // A member function returning a class in memory: the hidden pointer comes first, then this.
    Widget *self2 = nullptr;
    long arg = 0;
    auto q = lp::probe(&Widget::build)
                 .on_return([](auto &exit) { exit.value().v[1] = -1; })
                 .attach();
    ASSERT_TRUE(q) << q.error().message();
    auto e = lp::probe(&Widget::build).on_entry([&](Widget *t, long a) { self2 = t, arg = a; }).attach();
    ASSERT_TRUE(e) << e.error().message();
    Big b = w.build(2);
    EXPECT_EQ(self2, &w);
    EXPECT_EQ(arg, 2);
    EXPECT_EQ(b.v[0], 7);
    EXPECT_EQ(b.v[1], -1) << "the return handler's change to the returned object did not reach the caller";
}

TEST(CxxTypedArgs, BySignatureAndSymbolName)
{
    int a = 0, b = 0;
    // Demangled, without the parameter list (one overload).
    auto p = lp::probe<int(int, int)>("mul").on_entry([&](int a_, int b_) { a = a_, b = b_; }).attach();
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(p->address(), reinterpret_cast<void *>(&mul));
    mul(6, 7);
    EXPECT_EQ(a, 6);
    EXPECT_EQ(b, 7);
    // A member function by its demangled name and a pointer-to-member type.
    const Widget *self = nullptr;
    auto q = lp::probe<int (Widget::*)(int) const>("Widget::spin")
                 .on_entry([&](const Widget *t, int) { self = t; })
                 .attach();
    ASSERT_TRUE(q) << q.error().message();
    Widget w;
    w.spin(1);
    EXPECT_EQ(self, &w);
}

// ---- return values and skipping ------------------------------------------------------------

TEST(CxxTypedReturn, ReadAndReplaceEveryClass)
{
    float f = 0;
    auto pf = lp::probe(&half_f).on_return([&](auto &x) {
        f = x.value();
        x.set_value(f + 100);
    }).attach();
    ASSERT_TRUE(pf) << pf.error().message();
    EXPECT_EQ(half_f(3.0f), 101.5f);
    EXPECT_EQ(f, 1.5f);

    double d = 0;
    auto pd = lp::probe(&twice).on_return([&](double v) { d = v; }).attach();
    ASSERT_TRUE(pd) << pd.error().message();
    EXPECT_EQ(twice(1.25), 2.5);
    EXPECT_EQ(d, 2.5);

    long double ld = 0;
    auto pl = lp::probe(&third).on_return([&](auto &x) {
        ld = x.value();
        x.set_value(x.value() * 3);
    }).attach();
    ASSERT_TRUE(pl) << pl.error().message();
    EXPECT_EQ(third(9.0L), 9.0L);
    EXPECT_EQ(ld, 3.0L);

    int arr[2] = {};
    int *seen = nullptr;
    auto pp = lp::probe(&next_ptr).on_return([&](auto &x) {
        seen = x.value();
        x.set_value(&arr[0]);
    }).attach();
    ASSERT_TRUE(pp) << pp.error().message();
    EXPECT_EQ(next_ptr(&arr[0]), &arr[0]);
    EXPECT_EQ(seen, &arr[1]);

    __int128 wide = 0;
    auto pw = lp::probe(&i128).on_return([&](auto &x) {
        wide = x.value();
        x.set_value(-wide);
    }).attach();
    ASSERT_TRUE(pw) << pw.error().message();
    __int128 big = __int128(1) << 100;
    EXPECT_TRUE(i128(0, big, 0, 0, 0, 1) == -(big + 1));
    EXPECT_TRUE(wide == big + 1);

    long v0 = 0;
    auto pb = lp::probe(&make_big).on_return([&](auto &x) {
        Big &b = x.value();
        v0 = b.v[0];
        x.set_value(Big{{9, 9, 9, 9, 9}});
    }).attach();
    ASSERT_TRUE(pb) << pb.error().message();
    Big b = make_big(4);
    EXPECT_EQ(v0, 4);
    EXPECT_EQ(b.v[3], 9);

    int void_returns = 0;
    auto pv = lp::probe(&bump).on_return([&]() { ++void_returns; }).attach();
    ASSERT_TRUE(pv) << pv.error().message();
    bump(1);
    EXPECT_EQ(void_returns, 1);
}

TEST(CxxTypedReturn, SkipTheCallWithAValue)
{
    g_side_effect = 0;
    auto p = lp::probe(&bump_and_return)
                 .on_entry([](auto &call) {
                     if (call.template arg<0>() == 13) call.skip(-13);
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(bump_and_return(2), 2);
    EXPECT_EQ(bump_and_return(13), -13);
    EXPECT_EQ(g_side_effect, 2) << "the skipped call ran";

    auto v = lp::probe(&bump).on_entry([](auto &call) { call.skip(); }).attach();
    ASSERT_TRUE(v) << v.error().message();
    bump(5);
    EXPECT_EQ(g_side_effect, 2);

    auto d = lp::probe(&twice).on_entry([](auto &call) { call.skip(-1.5); }).attach();
    ASSERT_TRUE(d) << d.error().message();
    EXPECT_EQ(twice(4), -1.5);

    auto m = lp::probe(&make_big).on_entry([](auto &call) { call.skip(Big{{7, 7, 7, 7, call.template arg<0>()}}); }).attach();
    ASSERT_TRUE(m) << m.error().message();
    Big b = make_big(11);
    EXPECT_EQ(b.v[0], 7);
    EXPECT_EQ(b.v[4], 11);
}

// ---- return probes: slots and outcomes ----------------------------------------------------

struct Tracked {  // counts constructions and destructions
    static inline int alive = 0;
    static inline int made = 0;
    long t0 = 0;
    Tracked() noexcept
    {
        ++alive;
        ++made;
    }
    ~Tracked() { --alive; }
};

TEST(CxxSlot, ConstructedAtEntryDestroyedAfterReturn)
{
    Tracked::alive = Tracked::made = 0;
    std::vector<long> durations;
    long clock = 100;
    auto p = lp::probe(&add)
                 .with_slot<Tracked>()
                 .on_entry([&](auto &, Tracked &t) {
                     EXPECT_EQ(t.t0, 0) << "the slot is not value-initialized";
                     t.t0 = clock;
                 })
                 .on_return([&](auto &exit, Tracked &t) {
                     EXPECT_EQ(exit.outcome(), lp::Outcome::returned);
                     EXPECT_EQ(Tracked::alive, 1);
                     durations.push_back(clock - t.t0);
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    add(1, 2);
    clock = 150;
    add(1, 2);
    EXPECT_EQ(Tracked::made, 2);
    EXPECT_EQ(Tracked::alive, 0);
    EXPECT_EQ(durations, (std::vector<long>{0, 0}));
}

TEST(CxxSlot, UnwoundCallsGetTheUnwoundOutcomeAndTheirSlotDestroyed)
{
    Tracked::alive = Tracked::made = 0;
    int returned = 0, unwound = 0;
    auto p = lp::probe(&may_throw)
                 .with_slot<Tracked>()
                 .on_return([&](auto &exit, Tracked &) {
                     if (exit.outcome() == lp::Outcome::returned) {
                         ++returned;
                         EXPECT_EQ(exit.value(), 50);
                     } else {
                         ++unwound;
                         EXPECT_EQ(exit.regs(), nullptr);
                         EXPECT_EQ(exit.value(), 0) << "an unwound call has no value: R{}";
                         exit.set_value(7);  // no effect, no fault
                     }
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(calls_may_throw(5), 51);
    EXPECT_THROW(calls_may_throw(-1), std::runtime_error);
    // The unwound call is noticed at the latest when the thread next enters or leaves a
    // function of a return probe.
    EXPECT_EQ(calls_may_throw(5), 51);
    EXPECT_EQ(returned, 2);
    EXPECT_EQ(unwound, 1);
    EXPECT_EQ(p->counters().faults, 0u);
    EXPECT_EQ(Tracked::made, 3);
    EXPECT_EQ(Tracked::alive, 0);
}

TEST(CxxSlot, EntryReturningFalseDoesNotFollowTheCall)
{
    Tracked::alive = Tracked::made = 0;
    int exits = 0;
    auto p = lp::probe(&sub)
                 .with_slot<Tracked>()
                 .on_entry([](int a, int) { return a != 0; })
                 .on_return([&](int) { ++exits; })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    sub(1, 1);
    sub(0, 1);
    EXPECT_EQ(exits, 1);
    EXPECT_EQ(Tracked::made, 2);
    EXPECT_EQ(Tracked::alive, 0);
}

TEST(CxxSlot, MissedCallsAreCounted)
{
    int exits = 0;
    auto p = lp::probe(&recurse)
                 .with_slot<long>()
                 .on_return([&](int) { ++exits; })
                 .options({.maxactive = 2})
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(recurse(5), 5);  // 6 calls in flight at the deepest point, 2 followed
    EXPECT_EQ(exits, 2);
    lp::Counters c = p->counters();
    EXPECT_EQ(c.missed, 4u);
    EXPECT_EQ(p->c_kretprobe()->nmissed, 4);
}

// ---- counters, state, enable/disable --------------------------------------------------------

TEST(CxxState, CountersStateEnableDisable)
{
    int hits = 0;
    auto p = lp::probe(&mul).on_entry([&](int, int) { ++hits; }).attach();
    ASSERT_TRUE(p) << p.error().message();
    lp::State s = p->state();
    EXPECT_TRUE(s.enabled);
    const char *env = std::getenv("LIVEPROBE_OPTIMIZE");
    if (env && std::strcmp(env, "0") == 0) {
        EXPECT_FALSE(s.optimized);
        ASSERT_NE(s.why_not_optimized, nullptr);
        EXPECT_NE(std::string(s.why_not_optimized).find("LIVEPROBE_OPTIMIZE"), std::string::npos)
            << s.why_not_optimized;
    } else {
        EXPECT_TRUE(s.optimized) << (s.why_not_optimized ? s.why_not_optimized : "");
        EXPECT_EQ(s.why_not_optimized, nullptr);
    }
    mul(1, 2);
    ASSERT_TRUE(p->disable());
    EXPECT_FALSE(p->state().enabled);
    mul(1, 2);
    ASSERT_TRUE(p->enable());
    EXPECT_TRUE(p->state().enabled);
    mul(1, 2);
    EXPECT_EQ(hits, 2);
    EXPECT_EQ(p->counters().hits, 2u);
    EXPECT_EQ(p->counters().missed, 0u);
}

TEST(CxxState, ReturnProbeEnableDisable)
{
    int exits = 0;
    auto p = lp::probe(&sub).on_return([&](int) { ++exits; }).attach();
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_TRUE(p->state().enabled);
    ASSERT_NE(p->c_kretprobe(), nullptr);
    sub(2, 1);
    ASSERT_TRUE(p->disable());
    EXPECT_FALSE(p->state().enabled);
    sub(2, 1);
    ASSERT_TRUE(p->enable());
    sub(2, 1);
    EXPECT_EQ(exits, 2);
    EXPECT_EQ(p->counters().hits, 2u);
}

TEST(CxxState, RegisteredDisabled)
{
    int hits = 0;
    auto p = lp::probe(&add).on_entry([&](int, int) { ++hits; }).options({.disabled = true}).attach();
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_FALSE(p->state().enabled);
    add(1, 1);
    EXPECT_EQ(hits, 0);
    ASSERT_TRUE(p->enable());
    add(1, 1);
    EXPECT_EQ(hits, 1);
}

TEST(CxxState, FaultsAreCountedAndTheProgramGoesOn)
{
    int faults_seen = 0;
    auto p = lp::kprobe(&sub)
                 .pre([](pt_regs &) { *bad_address() = 1; })
                 .fault([&](pt_regs &, int sig) {
                     EXPECT_EQ(sig, SIGSEGV);
                     ++faults_seen;
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(sub(5, 2), 3);
    EXPECT_EQ(faults_seen, 1);
    EXPECT_EQ(p->counters().faults, 1u);
}

TEST(CxxState, FaultsInReturnProbeHandlersAreCounted)
{
    auto p = lp::probe(&mul)
                 .on_entry([](int a, int) {
                     if (a == 3) *bad_address() = 1;  // the entry handler faults: call not followed
                 })
                 .on_return([](int v) {
                     if (v == 8) *bad_address() = 1;  // the return handler faults
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(mul(2, 4), 8);
    EXPECT_EQ(mul(3, 4), 12);
    EXPECT_EQ(mul(5, 1), 5);
    EXPECT_EQ(p->counters().faults, 2u);
    EXPECT_EQ(p->counters().hits, 3u);
}

// ---- untyped probes with lambdas ----------------------------------------------------------

TEST(CxxUntyped, PrePostAndKretprobeWithData)
{
    std::string order;
    auto p = lp::kprobe(&add)
                 .pre([&](pt_regs &r) {
                     order += "pre(" + std::to_string(r.di) + ")";
                     return 0;
                 })
                 .post([&](pt_regs &) { order += "post"; })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    add(4, 5);
    EXPECT_EQ(order, "pre(4)post");

    unsigned long ret = 0;
    auto r = lp::kretprobe("sub")
                 .entry([](kretprobe_instance &ri, pt_regs &regs) {
                     std::memcpy(ri.data, &regs.di, 8);
                 })
                 .on_return([&](kretprobe_instance &ri, pt_regs &regs) {
                     unsigned long a;
                     std::memcpy(&a, ri.data, 8);
                     ret = a * 1000 + regs_return_value(&regs);
                 })
                 .data_size(8)
                 .attach();
    ASSERT_TRUE(r) << r.error().message();
    sub(9, 2);
    EXPECT_EQ(ret, 9007u);
}

// ---- lambdas with captures ----------------------------------------------------------------

TEST(CxxLambda, CapturesByValueAndByReference)
{
    struct Stats {
        long calls = 0;
        long sum = 0;
    } stats;
    std::string tag = "mul";
    auto p = lp::probe(&mul)
                 .on_entry([&stats, tag, local = 0](int a, int b) mutable {
                     ++local;  // state kept in the probe's own copy of the lambda
                     stats.calls = local;
                     stats.sum += a * b;
                     EXPECT_EQ(tag, "mul");
                 })
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    tag = "changed";
    for (int i = 1; i <= 4; ++i) mul(i, 10);
    EXPECT_EQ(stats.calls, 4);
    EXPECT_EQ(stats.sum, 100);
}

// ---- batches ------------------------------------------------------------------------------

TEST(CxxBatch, CommitsAllOrNothing)
{
    int hits = 0;
    {
        lp::Batch batch;
        batch.add(lp::probe(&add).on_entry([&](int, int) { ++hits; }));
        batch.add(lp::probe(&sub).on_return([&](int) { ++hits; }));
        batch.add(lp::kprobe("mul").pre([&](pt_regs &) { ++hits; }));
        EXPECT_EQ(batch.size(), 3u);
        auto probes = batch.commit();
        ASSERT_TRUE(probes) << probes.error().message();
        ASSERT_EQ(probes->size(), 3u);
        add(1, 1), sub(1, 1), mul(1, 1);
        EXPECT_EQ(hits, 3);
    }
    add(1, 1), sub(1, 1), mul(1, 1);
    EXPECT_EQ(hits, 3);

    // One bad member: nothing registered, and the error says which and why.
    lp::Batch bad;
    bad.add(lp::probe(&add).on_entry([&](int, int) { ++hits; }));
    bad.add(lp::probe(&sub).on_return([&](int) { ++hits; }));
    bad.add(lp::kretprobe("no_such_function_in_batch").on_return([&](kretprobe_instance &, pt_regs &) {}));
    auto failed = bad.commit();
    ASSERT_FALSE(failed);
    EXPECT_EQ(failed.error().code, -ENOENT);
    EXPECT_NE(failed.error().reason.find("no_such_function_in_batch"), std::string::npos) << failed.error().reason;
    add(1, 1), sub(1, 1);
    EXPECT_EQ(hits, 3) << "a probe of the failed batch stayed registered";

    // An error found while building a member fails the commit with that member's number.
    lp::Batch built_bad;
    built_bad.add(lp::probe(&add).on_entry([&](int, int) { ++hits; }));
    built_bad.add(lp::probe(&Widget::virt).on_entry([](Widget *, int) {}));
    auto f2 = built_bad.commit();
    ASSERT_FALSE(f2);
    EXPECT_NE(f2.error().reason.find("probe 1: "), std::string::npos) << f2.error().reason;
    add(1, 1);
    EXPECT_EQ(hits, 3);

    // Dropped without a commit: nothing registered.
    {
        lp::Batch dropped;
        dropped.add(lp::probe(&add).on_entry([&](int, int) { ++hits; }));
    }
    add(1, 1);
    EXPECT_EQ(hits, 3);
    lp::Batch empty;
    auto e = empty.commit();
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, -EINVAL);
}

// ---- threads ------------------------------------------------------------------------------

struct Counted {  // live slots over all threads
    static inline std::atomic<long> alive{0};
    int a = 0;
    Counted() noexcept { alive.fetch_add(1, std::memory_order_relaxed); }
    ~Counted() { alive.fetch_sub(1, std::memory_order_relaxed); }
};

TEST(CxxThreads, TypedReturnProbeFromManyThreads)
{
    constexpr int kThreads = 4, kCalls = 20000;
    std::atomic<long> entries{0}, returns{0}, wrong{0};
    auto p = lp::probe(&add)
                 .with_slot<Counted>()
                 .on_entry([&](auto &call, Counted &c) {
                     c.a = call.template arg<0>();
                     entries.fetch_add(1, std::memory_order_relaxed);
                 })
                 .on_return([&](auto &exit, Counted &c) {
                     // Each call's slot is its own: the first argument plus 1 is what add returned.
                     if (exit.value() != c.a + 1) wrong.fetch_add(1, std::memory_order_relaxed);
                     returns.fetch_add(1, std::memory_order_relaxed);
                 })
                 .options({.maxactive = 64})
                 .attach();
    ASSERT_TRUE(p) << p.error().message();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([t] {
            for (int i = 0; i < kCalls; ++i) add(t * kCalls + i, 1);
        });
    for (auto &t : threads) t.join();
    lp::Counters c = p->counters();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(entries.load() + static_cast<long>(c.missed), long{kThreads} * kCalls);
    EXPECT_EQ(returns.load(), entries.load());
    EXPECT_EQ(Counted::alive.load(), 0);
}
