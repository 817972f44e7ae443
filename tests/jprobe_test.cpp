// jprobes: the entry gets the probed function's arguments (registers and stack, integer and
// floating point), its changes do not reach the probed function, it runs after the other pre
// handlers at the address and before their post handlers. Run on both entry paths.
#include <liveprobe/kprobes.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

extern "C" {
__attribute__((noipa)) long jp_sum8(long a, long b, long c, long d, long e, long f, long g, long h)
{
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;
}

__attribute__((noipa)) double jp_mixed(int a, double x, long b, double y, float z, long c, double w)
{
    return a + x * 2 + b * 3 + y * 4 + z * 5 + c * 6 + w * 7;
}
}

namespace {

long g_args[8];
std::atomic<int> g_entries{0};
std::string g_order;

void entry8(long a, long b, long c, long d, long e, long f, long g, long h)
{
    long v[8] = {a, b, c, d, e, f, g, h};
    std::memcpy(g_args, v, sizeof v);
    g_entries++;
    g_order += 'j';
    a = -1;  // a change to a copy: the probed function must not see it
    (void)a;
    jprobe_return();
}

struct Mixed {
    int a;
    double x;
    long b;
    double y;
    float z;
    long c;
    double w;
};
Mixed g_mixed;

void entry_mixed(int a, double x, long b, double y, float z, long c, double w)
{
    g_mixed = {a, x, b, y, z, c, w};
    g_entries++;
    jprobe_return();
}

jprobe make(void *addr, void *entry)
{
    jprobe jp{};
    jp.kp.addr = static_cast<kprobe_opcode_t *>(addr);
    jp.entry = entry;
    return jp;
}

TEST(Jprobe, EightArgumentsTwoOnTheStack)
{
    g_entries = 0;
    jprobe jp = make(reinterpret_cast<void *>(&jp_sum8), reinterpret_cast<void *>(&entry8));
    ASSERT_EQ(register_jprobe(&jp), 0) << liveprobe_strerror(-1);
    long r = jp_sum8(1, 2, 3, 4, 5, 6, 7, 8);
    EXPECT_EQ(r, 1 + 4 + 9 + 16 + 25 + 36 + 49 + 64) << "the probed function got its own arguments";
    EXPECT_EQ(g_entries.load(), 1);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(g_args[i], i + 1) << "argument " << i;
    unregister_jprobe(&jp);
    jp_sum8(0, 0, 0, 0, 0, 0, 0, 0);
    EXPECT_EQ(g_entries.load(), 1);
}

TEST(Jprobe, MixedIntegerAndFloatingPointSignature)
{
    g_entries = 0;
    jprobe jp = make(reinterpret_cast<void *>(&jp_mixed), reinterpret_cast<void *>(&entry_mixed));
    ASSERT_EQ(register_jprobe(&jp), 0) << liveprobe_strerror(-1);
    double r = jp_mixed(3, 1.5, -7, 2.25, 0.5f, 11, -4.75);
    EXPECT_DOUBLE_EQ(r, 3 + 3.0 - 21 + 9.0 + 2.5 + 66 - 33.25);
    EXPECT_EQ(g_entries.load(), 1);
    EXPECT_EQ(g_mixed.a, 3);
    EXPECT_EQ(g_mixed.x, 1.5);
    EXPECT_EQ(g_mixed.b, -7);
    EXPECT_EQ(g_mixed.y, 2.25);
    EXPECT_EQ(g_mixed.z, 0.5f);
    EXPECT_EQ(g_mixed.c, 11);
    EXPECT_EQ(g_mixed.w, -4.75);
    unregister_jprobe(&jp);
}

int order_pre(kprobe *, pt_regs *)
{
    g_order += 'p';
    return 0;
}
void order_post(kprobe *, pt_regs *, unsigned long) { g_order += 'q'; }

TEST(Jprobe, RunsAfterOtherPreHandlersAndBeforePostHandlers)
{
    g_order.clear();
    jprobe jp = make(reinterpret_cast<void *>(&jp_sum8), reinterpret_cast<void *>(&entry8));
    ASSERT_EQ(register_jprobe(&jp), 0) << liveprobe_strerror(-1);
    kprobe kp{};  // registered after the jprobe, runs before it
    kp.addr = reinterpret_cast<kprobe_opcode_t *>(&jp_sum8);
    kp.pre_handler = order_pre;
    kp.post_handler = order_post;
    ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-1);
    EXPECT_EQ(jp_sum8(1, 1, 1, 1, 1, 1, 1, 1), 36);
    EXPECT_EQ(g_order, "pjq");
    unregister_kprobe(&kp);
    unregister_jprobe(&jp);
}

TEST(Jprobe, BadInputIsRefused)
{
    jprobe a = make(reinterpret_cast<void *>(&jp_sum8), reinterpret_cast<void *>(&entry8));
    ASSERT_EQ(register_jprobe(&a), 0);
    jprobe b = make(reinterpret_cast<void *>(&jp_sum8), reinterpret_cast<void *>(&entry8));
    EXPECT_EQ(register_jprobe(&b), -EBUSY);
    unregister_jprobe(&a);

    jprobe mid{};
    mid.kp.symbol_name = "jp_sum8";
    mid.kp.offset = 1;
    mid.entry = reinterpret_cast<void *>(&entry8);
    int err = register_jprobe(&mid);
    EXPECT_TRUE(err == -EINVAL) << err;
    jprobe none = make(reinterpret_cast<void *>(&jp_sum8), nullptr);
    EXPECT_EQ(register_jprobe(&none), -EINVAL);
    // Outside an entry, jprobe_return() just returns.
    jprobe_return();
}

void entry_returns_normally(long, long, long, long, long, long, long, long) { g_entries++; }

TEST(Jprobe, EntryThatReturnsWithoutJprobeReturnIsFine)
{
    g_entries = 0;
    jprobe jp = make(reinterpret_cast<void *>(&jp_sum8), reinterpret_cast<void *>(&entry_returns_normally));
    jp.kp.flags = KPROBE_FLAG_NOVEC;  // integer only: the live registers are used
    ASSERT_EQ(register_jprobe(&jp), 0);
    EXPECT_EQ(jp_sum8(1, 0, 0, 0, 0, 0, 0, 1), 9);
    EXPECT_EQ(g_entries.load(), 1);
    unregister_jprobe(&jp);
}

}  // namespace
