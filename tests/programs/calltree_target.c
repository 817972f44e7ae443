/*
 * The target of tests/scripts/views_test.sh (issue 34): calls whose tree is known in advance, for
 * replay, report and graph and their filters. Every run makes the same calls in the same order:
 *
 *   main
 *     ct_parse(0), ct_parse(1)       each calls ct_lex(i), ct_lex(i + 1), ct_lex(i + 2)
 *     ct_eval(3)                     recursive: ct_eval(2), ct_eval(1), ct_eval(0); each calls ct_leaf()
 *     ct_wait()                      sleeps 20 ms: the one call with main that takes 10 ms or more
 *     ct_emit(7)                     calls ct_leaf(), returns 8
 *     ct_neg(3)                      returns -3 (an int: its 64-bit register is not negative)
 *   a thread, joined before ct_wait, which names itself "ct-worker" first:
 *     ct_worker()                    calls ct_parse(10)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>

#define TRACED __attribute__((noipa, used))

TRACED int ct_lex(int i) { return 2 * i; }
TRACED int ct_leaf(void) { return 1; }

TRACED int ct_parse(int i)
{
    return ct_lex(i) + ct_lex(i + 1) + ct_lex(i + 2);
}

TRACED int ct_eval(int n)
{
    int here = ct_leaf();
    return n == 0 ? here : ct_eval(n - 1) + here;
}

TRACED void ct_wait(void)
{
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
}

TRACED int ct_emit(int v) { return v + ct_leaf(); }
TRACED int ct_neg(int v) { return -v; }

TRACED void *ct_worker(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "ct-worker");
    return (void *)(long)ct_parse(10);
}

int main(void)
{
    int sum = ct_parse(0) + ct_parse(1) + ct_eval(3);
    pthread_t t;
    pthread_create(&t, NULL, ct_worker, NULL);
    pthread_join(t, NULL);
    ct_wait();
    sum += ct_emit(7);
    return sum == 30 && ct_neg(3) == -3 ? 0 : 1;
}
