// A pool helper moves off its caller's CPU (cpu_placement.h).
#include "runtime/cpu_placement.h"

#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace kiln::runtime {

#if defined(__linux__)

namespace {

bool enabled() {
    static const bool on = [] {
        const char* v = std::getenv("KILN_MOVE_OFF_CALLER");
        return !(v && std::strcmp(v, "0") == 0);
    }();
    return on;
}

/// The CPUs this thread was allowed the first time it asked (its start: a worker's, inherited
/// from the thread that made the pool), so moving off one CPU never narrows it for good.
const cpu_set_t* allowed_at_start() {
    thread_local bool read = false;
    thread_local bool ok = false;
    thread_local cpu_set_t set;
    if (!read) {
        read = true;
        CPU_ZERO(&set);
        ok = pthread_getaffinity_np(pthread_self(), sizeof(set), &set) == 0;
    }
    return ok ? &set : nullptr;
}

}  // namespace

int current_cpu() { return sched_getcpu(); }

bool move_off_cpu(int caller_cpu) {
    if (caller_cpu < 0 || caller_cpu >= CPU_SETSIZE || !enabled()) return false;
    const cpu_set_t* allowed = allowed_at_start();
    if (!allowed || sched_getcpu() != caller_cpu) return false;
    cpu_set_t set = *allowed;
    CPU_CLR(caller_cpu, &set);
    if (CPU_COUNT(&set) == 0) return false;
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

#else

int current_cpu() { return -1; }
bool move_off_cpu(int) { return false; }

#endif

}  // namespace kiln::runtime
