// Forked-child work runner. The parent loop: start children until `jobs` are alive; poll() their
// pipes until data, EOF or the nearest deadline; on EOF reap the child with waitpid and classify
// its end (exit status or signal); past its deadline a child is killed with SIGKILL and reaped.
// Each child leads its own process group, so a kill on timeout also ends the compilers it started.
// Children leave with _exit so they never run the parent's atexit handlers or flush its buffers.
#include "forked_runner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include "support/error.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Child {
    size_t item = 0;
    pid_t pid = -1;
    int fd = -1;  // read end of the result pipe
    Clock::time_point deadline;
    std::string payload;
};

void write_all(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = ::write(fd, s.data() + off, s.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        off += static_cast<size_t>(n);
    }
}

[[noreturn]] void child_main(int fd, size_t item, const std::function<std::string(size_t)>& work,
                             bool quiet) {
    // Own process group, so a timeout kill reaches the compilers this child may have started; and
    // the result pipe is not inherited by them, so its EOF means this child is gone.
    ::setpgid(0, 0);
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    if (quiet) {
        int devnull = ::open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            ::dup2(devnull, STDOUT_FILENO);
            ::close(devnull);
        }
    }
    std::string payload;
    int status = 0;
    try {
        payload = work(item);
    } catch (const std::exception& e) {
        payload = std::string("uncaught exception: ") + e.what();
        status = 3;
    } catch (...) {
        payload = "uncaught exception of unknown type";
        status = 3;
    }
    write_all(fd, payload);
    ::close(fd);
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(status);
}

Child start_child(size_t item, const std::function<std::string(size_t)>& work,
                  const ForkedRunnerOptions& opts) {
    int fds[2];
    KILN_CHECK(::pipe(fds) == 0, kIOError) << "pipe() failed: " << std::strerror(errno);
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = ::fork();
    if (pid < 0) {
        int err = errno;
        ::close(fds[0]);
        ::close(fds[1]);
        KILN_THROW(kIOError) << "fork() failed: " << std::strerror(err);
    }
    if (pid == 0) {
        ::close(fds[0]);
        child_main(fds[1], item, work, opts.quiet_children);
    }
    ::setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFD, FD_CLOEXEC);  // later children must not inherit this pipe
    Child c;
    c.item = item;
    c.pid = pid;
    c.fd = fds[0];
    c.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(opts.timeout_seconds));
    return c;
}

/// Waits for `c` to exit (it has closed its pipe or was killed) and describes how it ended.
ChildResult reap(Child& c, bool timed_out, double timeout_seconds) {
    int status = 0;
    while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    ChildResult r;
    r.payload = std::move(c.payload);
    if (timed_out) {
        r.failure = fmt::format("timed out after {:g} s", timeout_seconds);
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        r.failure = fmt::format("crashed with signal {} ({})", sig, ::strsignal(sig));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        r.failure = fmt::format("exited with status {}", WEXITSTATUS(status));
        if (!r.payload.empty()) r.failure += ": " + r.payload;
    } else {
        r.ok = true;
    }
    return r;
}

}  // namespace

void run_forked(size_t count, const std::function<std::string(size_t)>& work,
                const std::function<void(size_t, const ChildResult&)>& done,
                const ForkedRunnerOptions& opts) {
    size_t jobs = static_cast<size_t>(opts.jobs < 1 ? 1 : opts.jobs);
    std::vector<Child> alive;
    size_t next = 0;
    while (next < count || !alive.empty()) {
        while (next < count && alive.size() < jobs)
            alive.push_back(start_child(next++, work, opts));

        auto now = Clock::now();
        auto nearest = alive.front().deadline;
        for (const Child& c : alive) nearest = std::min(nearest, c.deadline);
        int64_t left_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(nearest - now).count() + 1;
        int wait_ms = static_cast<int>(std::clamp<int64_t>(left_ms, 0, 3600 * 1000));
        std::vector<pollfd> fds;
        for (const Child& c : alive) fds.push_back({c.fd, POLLIN, 0});
        int rc = ::poll(fds.data(), fds.size(), wait_ms);
        KILN_CHECK(rc >= 0 || errno == EINTR, kIOError)
            << "poll() failed: " << std::strerror(errno);

        now = Clock::now();
        std::vector<Child> still;
        for (size_t k = 0; k < alive.size(); ++k) {
            Child& c = alive[k];
            bool finished = false;
            if (rc > 0 && (fds[k].revents & (POLLIN | POLLHUP | POLLERR))) {
                char buf[4096];
                ssize_t n = ::read(c.fd, buf, sizeof buf);
                if (n > 0) {
                    c.payload.append(buf, static_cast<size_t>(n));
                } else if (n == 0 || errno != EINTR) {
                    finished = true;  // EOF: the child closed its end (exited or crashed)
                }
            }
            if (finished) {
                ::close(c.fd);
                done(c.item, reap(c, false, opts.timeout_seconds));
            } else if (now >= c.deadline) {
                ::kill(-c.pid, SIGKILL);  // the child's process group
                ::kill(c.pid, SIGKILL);
                ::close(c.fd);
                done(c.item, reap(c, true, opts.timeout_seconds));
            } else {
                still.push_back(std::move(c));
            }
        }
        alive = std::move(still);
    }
}

}  // namespace kiln::cli
