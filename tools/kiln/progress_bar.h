// The progress display of `kiln train` on stderr: epoch, step in the epoch, smoothed loss,
// samples per second and ETA. On a terminal one line is redrawn in place (at most ten times a
// second); otherwise (a log file, a pipe) a plain line is printed every `log_every` steps and at
// the end of each epoch, so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kiln::cli {

struct Progress {
    int64_t epoch = 0;           // 0-based
    int64_t epochs = 0;
    int64_t batch = 0;           // batches done in this epoch
    int64_t batches_per_epoch = 0;
    int64_t step = 0;            // optimizer steps done in the run
    double loss = 0;             // smoothed training loss
    double lr = 0;
    double samples_per_s = 0;
    double eta_s = 0;            // seconds to the end of the run
};

class ProgressBar {
public:
    /// `tty`: redraw in place; otherwise one line per `log_every` steps (>= 1).
    ProgressBar(bool tty, int64_t log_every);
    void set_log_every(int64_t steps) { log_every_ = steps < 1 ? 1 : steps; }
    /// Prints nothing at all (the ranks other than 0 of a data-parallel run).
    void set_quiet(bool quiet) { quiet_ = quiet; }
    /// Shows `p` (redrawn, or printed when its step is due).
    void update(const Progress& p);
    /// Prints a whole line (the eval line, a note), first ending a line being redrawn.
    void print_line(const std::string& line);
    /// Ends a line being redrawn (before exit).
    void finish();

    /// Whether stderr is a terminal.
    static bool stderr_is_tty();

private:
    std::string format(const Progress& p) const;
    bool tty_;
    int64_t log_every_;
    bool quiet_ = false;
    bool line_open_ = false;  // a redrawn line is on screen without its newline
    std::chrono::steady_clock::time_point last_draw_{};
};

/// "1:02:03" / "2:03" for a duration in seconds ("?" for a negative or non-finite one).
std::string format_duration(double seconds);

}  // namespace kiln::cli
