/* A library the behaviour tests load and unload (KPROBE_FLAG_GONE). */
__attribute__((noinline)) int lp_plugin_twice(int x)
{
    __asm__ volatile("");
    return 2 * x;
}
