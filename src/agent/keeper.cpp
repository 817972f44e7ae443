#include "agent/keeper.hpp"

#include <pthread.h>
#include <signal.h>

#include <cerrno>

#include "core/thread_state.hpp"
#include "os/linux/signals.hpp"

namespace liveprobe::agent {
namespace {

// The keeper's state, under g_mu (pthread's, not std's: keeper_forget makes it anew in a forked
// child, where a thread that no longer exists may have held it).
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
bool g_alive = false;                       // a keeper takes jobs
bool g_stop = false;                        // it is asked to end
const std::function<void()> *g_job = nullptr;  // the job posted, until it returned
unsigned long g_done = 0;                   // jobs returned

// The keeper's loop: one job at a time, each poster waiting for its own (g_done).
void *keeper_thread(void *)
{
    core::QuietThread quiet;  // its calls into probed code are liveprobe's, not the program's
    pthread_mutex_lock(&g_mu);
    while (!g_stop) {
        if (!g_job) {
            pthread_cond_wait(&g_cv, &g_mu);
            continue;
        }
        const std::function<void()> *job = g_job;
        pthread_mutex_unlock(&g_mu);
        (*job)();
        pthread_mutex_lock(&g_mu);
        g_job = nullptr;
        ++g_done;
        pthread_cond_broadcast(&g_cv);
    }
    g_alive = false;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return nullptr;
}

}  // namespace

int keeper_start()
{
    pthread_mutex_lock(&g_mu);
    const bool running = g_alive;
    pthread_mutex_unlock(&g_mu);
    if (running) return 0;
    // Like the agent's thread (agent.cpp): none of the program's signals but the synchronous
    // ones, which a thread that runs libc's probed code must take.
    sigset_t all, prev;
    sigfillset(&all);
    for (int sig : os::kSynchronousSignals) sigdelset(&all, sig);
    pthread_sigmask(SIG_SETMASK, &all, &prev);
    pthread_mutex_lock(&g_mu);
    g_stop = false;
    g_alive = true;
    pthread_mutex_unlock(&g_mu);
    pthread_t t;
    const int r = pthread_create(&t, nullptr, keeper_thread, nullptr);
    pthread_sigmask(SIG_SETMASK, &prev, nullptr);
    if (r != 0) {
        pthread_mutex_lock(&g_mu);
        g_alive = false;
        pthread_mutex_unlock(&g_mu);
        return -r;
    }
    pthread_setname_np(t, "liveprobe-keep");
    pthread_detach(t);
    return 0;
}

bool keeper_run(const std::function<void()> &fn)
{
    pthread_mutex_lock(&g_mu);
    while (g_alive && !g_stop && g_job) pthread_cond_wait(&g_cv, &g_mu);  // another poster's job first
    if (!g_alive || g_stop) {
        pthread_mutex_unlock(&g_mu);
        return false;
    }
    g_job = &fn;
    const unsigned long mine = g_done + 1;
    pthread_cond_broadcast(&g_cv);
    while (g_done < mine && g_alive) pthread_cond_wait(&g_cv, &g_mu);
    const bool ran = g_done >= mine;
    pthread_mutex_unlock(&g_mu);
    return ran;
}

void keeper_stop()
{
    pthread_mutex_lock(&g_mu);
    g_stop = true;
    pthread_cond_broadcast(&g_cv);
    while (g_alive) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
}

void keeper_forget()
{
    g_mu = PTHREAD_MUTEX_INITIALIZER;
    g_cv = PTHREAD_COND_INITIALIZER;
    g_alive = g_stop = false;
    g_job = nullptr;
    g_done = 0;
}

}  // namespace liveprobe::agent
