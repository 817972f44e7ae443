// A value of every kind the tracer types from DWARF, as parameters and return values
// (scripts/typed_test.sh compares the whole trace with tests/golden/typed_*.txt): void, bool,
// char, integers of each width and sign, enums, pointers, strings, float, double and long double,
// structs returned in each register class and in memory, C++ references and a method.
// Built -O0 -g, so that every function is called and keeps its parameters where the ABI puts
// them.
#include <cstdio>

#include <cstddef>

extern "C" {

// tests/programs/typed_lib.c
int lp_tl_sum(const int *v, int n);
int lp_tl_sum_odd(const int *v, int n);
int lp_tl_checked(const int *v, int n, int limit);

enum color { RED, GREEN = 5, BLUE };
enum sign { MINUS = -1, ZERO = 0, PLUS = 1 };

struct point {  // 8 bytes, INTEGER: rax
    int x, y;
};
struct vec3 {  // 12 bytes, SSE and SSE: xmm0, xmm1
    float x, y, z;
};
struct mixed {  // INTEGER and SSE: rax, xmm0
    long id;
    double weight;
};
struct named {  // INTEGER and INTEGER: rax, rdx
    const char *name;
    int id;
};
struct big {  // 40 bytes: in memory, its address in rax
    long a, b, c;
    char tag[16];
};

int g_counter = 7;
point g_origin = {0, 0};

__attribute__((noinline)) void lp_ty_nothing(int) {}
__attribute__((noinline)) bool lp_ty_is_even(int n) { return n % 2 == 0; }
__attribute__((noinline)) char lp_ty_first(const char *s) { return s[0]; }
__attribute__((noinline)) int lp_ty_neg(int v) { return -v; }
__attribute__((noinline)) unsigned short lp_ty_u16(unsigned short v) { return static_cast<unsigned short>(v * 2); }
__attribute__((noinline)) signed char lp_ty_s8(signed char v) { return static_cast<signed char>(-v); }
__attribute__((noinline)) long long lp_ty_ll(long long v) { return v * 1000000000000LL; }
__attribute__((noinline)) unsigned long long lp_ty_ull(void) { return 18446744073709551615ULL; }
__attribute__((noinline)) double lp_ty_half_of(double x) { return x / 2; }
__attribute__((noinline)) float lp_ty_scale(float f, int k) { return f * static_cast<float>(k); }
__attribute__((noinline)) long double lp_ty_third(long double x) { return x / 3; }
__attribute__((noinline)) const char *lp_ty_greeting(int polite) { return polite ? "good morning, \"café\"" : "hi\n"; }
__attribute__((noinline)) const char *lp_ty_none(void) { return nullptr; }
__attribute__((noinline)) enum color lp_ty_pick(int k) { return k == 0 ? RED : k == 1 ? GREEN : k == 2 ? BLUE : static_cast<color>(42); }
__attribute__((noinline)) enum sign lp_ty_sign_of(int v) { return v < 0 ? MINUS : v > 0 ? PLUS : ZERO; }
__attribute__((noinline)) int *lp_ty_null_ptr(void) { return nullptr; }
__attribute__((noinline)) point lp_ty_make_point(int x, int y) { return {x, y}; }
__attribute__((noinline)) vec3 lp_ty_make_vec(float x) { return {x, x * 2, x * 4}; }
__attribute__((noinline)) mixed lp_ty_make_mixed(long id, double w) { return {id, w}; }
__attribute__((noinline)) named lp_ty_make_named(int id) { return {"widget", id}; }
__attribute__((noinline)) big lp_ty_make_big(long a) { return {a, a + 1, a + 2, "big one"}; }
__attribute__((noinline)) int lp_ty_sum_point(point p, color c) { return p.x + p.y + static_cast<int>(c); }
__attribute__((noinline)) double lp_ty_mix(int a, double b, float c, long d) { return a + b + c + static_cast<double>(d); }

}  // extern "C"

// Lines to probe (SRCFILE:LINE, FUNC:RELLINE), with variables in scope.
__attribute__((noinline)) int lp_ty_loop(int n, const char *label)
{
    int total = 0;
    for (int i = 0; i < n; ++i) {
        total += i * i;
    }
    return total + label[0];
}

// A char array in a union, read through a reference: nested three deep.
struct labelled {
    int id;
    union {
        char name[8];
        long code;
    } u;
};
labelled g_labelled = {4, {"tag"}};
__attribute__((noinline)) const labelled &lp_ty_labelled() { return g_labelled; }
// A type DWARF gives no size (decltype(nullptr)): its value raw.
__attribute__((noinline)) std::nullptr_t lp_ty_nullptr() { return nullptr; }

__attribute__((noinline)) int &lp_ty_counter_ref() { return g_counter; }
__attribute__((noinline)) const point &lp_ty_origin() { return g_origin; }
__attribute__((noinline)) int lp_ty_read_ref(const point &p, int &n) { return p.x + n; }

// A class with a destructor of its own: returned in memory and passed by its address, though
// it is 8 bytes (rax holds its address, not its value).
struct Ticket {
    int id;
    int seat;
    ~Ticket() { g_counter += 0; }
};
__attribute__((noinline)) Ticket lp_ty_ticket(int id) { return Ticket{id, 12}; }
__attribute__((noinline)) int lp_ty_seat_of(Ticket t) { return t.seat; }

namespace shop {
struct Cart {
    double prices[3];
    __attribute__((noinline)) double total() const { return prices[0] + prices[1] + prices[2]; }
};
}  // namespace shop

int main()
{
    long sink = 0;
    lp_ty_nothing(1);
    sink += lp_ty_is_even(4) + lp_ty_is_even(7);
    sink += lp_ty_first("xyz");
    sink += lp_ty_neg(42);
    sink += lp_ty_u16(40000);
    sink += lp_ty_s8(-100);
    sink += lp_ty_ll(-3);
    sink += static_cast<long>(lp_ty_ull());
    sink += static_cast<long>(lp_ty_half_of(3.0));
    sink += static_cast<long>(lp_ty_scale(1.5f, 3));
    sink += static_cast<long>(lp_ty_third(1.0L));
    sink += lp_ty_greeting(1)[0] + lp_ty_greeting(0)[0];
    sink += lp_ty_none() == nullptr;
    for (int k = 0; k < 4; ++k) sink += lp_ty_pick(k);
    sink += lp_ty_sign_of(-5) + lp_ty_sign_of(0) + lp_ty_sign_of(9);
    sink += lp_ty_null_ptr() == nullptr;
    sink += lp_ty_make_point(3, -4).y;
    sink += static_cast<long>(lp_ty_make_vec(0.5f).z);
    sink += static_cast<long>(lp_ty_make_mixed(77, 2.25).weight);
    sink += lp_ty_make_named(9).id;
    sink += lp_ty_make_big(100).c;
    sink += lp_ty_sum_point({1, 2}, BLUE);
    sink += static_cast<long>(lp_ty_mix(1, 0.5, 0.25f, 2));
    sink += lp_ty_counter_ref();
    sink += lp_ty_origin().x;
    int n = 5;
    sink += lp_ty_read_ref({11, 12}, n);
    sink += lp_ty_loop(4, "squares");
    sink += lp_ty_seat_of(lp_ty_ticket(31));
    sink += lp_ty_labelled().id + (lp_ty_nullptr() == nullptr);
    const int values[4] = {1, 2, 3, 4};
    sink += lp_tl_sum(values, 4) + lp_tl_sum_odd(values, 4) + lp_tl_checked(values, 4, 100);
    shop::Cart cart{{1.5, 2.25, 3.0}};
    sink += static_cast<long>(cart.total());
    std::printf("typed_target done: %ld\n", sink);
    return 0;
}
