// lower_thread_priority (serve/thread_priority.h): setpriority on the calling thread's id.
#include "serve/thread_priority.h"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kiln::serve {

void lower_thread_priority(int nice) {
    // On Linux, PRIO_PROCESS with a thread id applies to that thread only.
    if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice) == 0) return;
    static std::atomic<bool> reported{false};
    if (!reported.exchange(true))
        std::fprintf(stderr, "kiln serve: could not set best-effort threads to nice %d: %s\n", nice,
                     std::strerror(errno));
}

}  // namespace kiln::serve
