// Running work items in forked child processes, so that a crash or hang in one item cannot take
// down the caller. Each child runs one item and sends back a text payload through a pipe; the
// parent keeps up to N children alive, enforces a per-item timeout, and reports how each ended.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace kiln::cli {

/// How one child ended.
struct ChildResult {
    bool ok = false;      // exited normally with status 0
    std::string payload;  // everything the work function returned (may be partial when !ok)
    std::string failure;  // when !ok: "crashed with signal 11 (Segmentation fault)", "timed out
                          // after 60 s", ...
};

struct ForkedRunnerOptions {
    int jobs = 2;                 // children alive at once
    double timeout_seconds = 60;  // per item
    bool quiet_children = true;   // send the children's stdout to /dev/null
};

/// Runs work(i) for i in [0, count), each in its own child process. `done(i, result)` is called in
/// the parent, in completion order, once per item. The caller must be single-threaded (fork).
void run_forked(size_t count, const std::function<std::string(size_t)>& work,
                const std::function<void(size_t, const ChildResult&)>& done,
                const ForkedRunnerOptions& opts);

}  // namespace kiln::cli
