// The local measurer: compiles a task's candidates through the compile driver's job pool, then
// runs `WORKER tune-worker` with the task on stdin and reads one result line per candidate.
// When the process dies or stays silent past the per-candidate timeout, the candidate it was
// on is recorded as crashed or timed out and a new process continues after it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "codegen/compile_driver.h"
#include "support/error.h"
#include "tune/measure.h"

extern char** environ;

namespace kiln::tune {
namespace {

using Clock = std::chrono::steady_clock;

std::string self_executable() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    KILN_CHECK(n > 0, kInternal) << "cannot find this program's path (/proc/self/exe): " << std::strerror(errno);
    return std::string(buf, static_cast<size_t>(n));
}

/// A running `WORKER tune-worker`: stdin fed once, stdout read line by line with a deadline.
class WorkerProcess {
public:
    WorkerProcess(const std::string& worker, const std::string& input) {
        int in[2], out[2];
        KILN_CHECK(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0, kInternal)
            << "pipe: " << std::strerror(errno);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        std::string arg0 = worker, arg1 = "tune-worker";
        char* argv[] = {arg0.data(), arg1.data(), nullptr};
        int rc = posix_spawn(&pid_, worker.c_str(), &fa, nullptr, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(in[0]);
        close(out[1]);
        out_ = out[0];
        if (rc != 0) {
            close(in[1]);
            close(out_);
            KILN_CHECK(false, kInvalidArgument)
                << "cannot start the measurement process '" << worker << " tune-worker': " << std::strerror(rc);
        }
        // The task is read whole before any output; a worker that dies early gives EPIPE here
        // (SIGPIPE is ignored by make_local_measurer), and its exit is seen when reading.
        const char* p = input.data();
        size_t left = input.size();
        while (left > 0) {
            ssize_t w = write(in[1], p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            p += w;
            left -= static_cast<size_t>(w);
        }
        close(in[1]);
    }
    ~WorkerProcess() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            wait_exit();
        }
        if (out_ >= 0) close(out_);
    }

    enum class Read { kLine, kEnd, kTimeout };
    /// The next line, or the end of output, or nothing before `deadline`.
    Read next_line(Clock::time_point deadline, std::string& line) {
        for (;;) {
            size_t nl = buf_.find('\n');
            if (nl != std::string::npos) {
                line = buf_.substr(0, nl);
                buf_.erase(0, nl + 1);
                return Read::kLine;
            }
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            if (left <= 0) return Read::kTimeout;
            pollfd pfd{out_, POLLIN, 0};
            int r = poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
            if (r < 0 && errno == EINTR) continue;
            if (r == 0) return Read::kTimeout;
            char chunk[65536];
            ssize_t n = read(out_, chunk, sizeof(chunk));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return Read::kEnd;
            buf_.append(chunk, static_cast<size_t>(n));
        }
    }

    /// How the process ended ("crashed: signal 11 (Segmentation fault)", "exited with status 2").
    std::string wait_exit() {
        int status = 0;
        while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
        if (WIFSIGNALED(status))
            return "crashed: signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
        return "the measurement process exited with status " + std::to_string(WEXITSTATUS(status));
    }
    void kill_now() { kill(pid_, SIGKILL); }

private:
    pid_t pid_ = -1;
    int out_ = -1;
    std::string buf_;
};

class LocalMeasurer : public Measurer {
public:
    std::vector<MeasureResult> measure(MeasureTask task, const MeasureOptions& opts) override {
        const size_t n = task.candidates.size();
        std::vector<MeasureResult> results(n);
        std::vector<bool> known(n, false);
        // Compile every generated candidate (the compile driver's job pool, cached by content).
        std::vector<std::string> sources;
        std::vector<size_t> source_of;
        for (size_t i = 0; i < n; ++i)
            if (task.candidates[i].extern_name.empty() && task.candidates[i].library.empty()) {
                sources.push_back(task.candidates[i].source);
                source_of.push_back(i);
            }
        std::vector<codegen::CompileOutcome> built = codegen::compile_c_each(sources, opts.compile_jobs);
        for (size_t k = 0; k < built.size(); ++k) {
            const size_t i = source_of[k];
            if (built[k].error.empty()) {
                task.candidates[i].library = built[k].library.path;
                continue;
            }
            results[i].error = "compile error: " + first_lines(built[k].error, 6);
            known[i] = true;
        }
        if (known[0]) return fail_rest(results, known, "reference failed to compile");
        const std::string worker = opts.worker.empty() ? self_executable() : opts.worker;

        size_t next = 1;  // the first candidate the next process measures
        while (true) {
            while (next < n && known[next]) ++next;
            if (next >= n && known[0]) break;
            // Already-known candidates (compile errors) are dropped from the process's task.
            MeasureTask sub = task;
            std::vector<size_t> index = {0};
            sub.candidates = {task.candidates[0]};
            for (size_t i = next; i < n; ++i)
                if (!known[i]) {
                    sub.candidates.push_back(task.candidates[i]);
                    index.push_back(i);
                }
            WorkerProcess proc(worker, task_to_json(sub, opts, 1));
            size_t pending = 0;  // position in `index` of the candidate being measured
            auto deadline = Clock::now() + timeout(opts);
            std::string line, failure;
            for (;;) {
                WorkerProcess::Read r = proc.next_line(deadline, line);
                if (r == WorkerProcess::Read::kTimeout) {
                    proc.kill_now();
                    proc.wait_exit();
                    std::ostringstream os;
                    os << "timed out after " << opts.timeout_s << " s";
                    failure = os.str();
                    break;
                }
                if (r == WorkerProcess::Read::kEnd) {
                    failure = proc.wait_exit();
                    break;
                }
                nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
                if (j.is_discarded() || !j.contains("i")) continue;  // not a result line
                const size_t pos = j.at("i").get<size_t>();
                KILN_CHECK(pos < index.size(), kInternal) << "measurement process reported candidate " << pos
                                                           << " of " << index.size();
                const size_t i = index[pos];
                results[i].ok = j.value("ok", false);
                results[i].seconds = j.value("seconds", 0.0);
                results[i].error = j.value("error", std::string());
                known[i] = true;
                if (i == 0 && !results[0].ok) return fail_rest(results, known, "reference failed: " + results[0].error);
                pending = pos + 1;
                deadline = Clock::now() + timeout(opts);
                if (pending == index.size()) break;
            }
            if (pending == index.size()) break;
            const size_t i = index[pending];
            results[i].error = failure;
            known[i] = true;
            if (i == 0) return fail_rest(results, known, "reference failed: " + failure);
            next = i + 1;
        }
        return results;
    }

    std::string target() override { return host_target(); }

private:
    static std::chrono::milliseconds timeout(const MeasureOptions& opts) {
        return std::chrono::milliseconds(static_cast<int64_t>(opts.timeout_s * 1000));
    }
    static std::string first_lines(const std::string& s, int lines) {
        size_t pos = 0;
        for (int i = 0; i < lines && pos != std::string::npos; ++i) pos = s.find('\n', pos + 1);
        return pos == std::string::npos ? s : s.substr(0, pos) + " ...";
    }
    static std::vector<MeasureResult> fail_rest(std::vector<MeasureResult>& results, std::vector<bool>& known,
                                                const std::string& why) {
        for (size_t i = 0; i < results.size(); ++i)
            if (!known[i]) results[i].error = why;
        return results;
    }
};

}  // namespace

std::unique_ptr<Measurer> make_local_measurer() {
    signal(SIGPIPE, SIG_IGN);  // a measurement process that dies early must not kill us
    return std::make_unique<LocalMeasurer>();
}

std::string host_target() {
    std::ifstream f("/proc/cpuinfo");
    std::string line, model = "unknown cpu", isa = "generic";
    bool avx2 = false, avx512 = false, have_flags = false;
    while (std::getline(f, line)) {
        auto value = [&] {
            size_t c = line.find(':');
            return c == std::string::npos ? std::string() : line.substr(line.find_first_not_of(" \t", c + 1));
        };
        if (line.rfind("model name", 0) == 0 && model == "unknown cpu") model = value();
        if (line.rfind("flags", 0) == 0 && !have_flags) {
            std::string flags = " " + value() + " ";
            avx2 = flags.find(" avx2 ") != std::string::npos && flags.find(" fma ") != std::string::npos;
            avx512 = flags.find(" avx512f ") != std::string::npos;
            have_flags = true;
        }
    }
    if (avx512) isa = "avx512";
    else if (avx2) isa = "avx2";
    return model + " | " + isa;
}

}  // namespace kiln::tune
