// The progress line of `kiln train` (progress_bar.h).
#include "progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace kiln::cli {

std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    auto s = static_cast<int64_t>(std::llround(seconds));
    if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
    return fmt::format("{}:{:02}", s / 60, s % 60);
}

ProgressBar::ProgressBar(bool tty, int64_t log_every) : tty_(tty), log_every_(log_every < 1 ? 1 : log_every) {}

bool ProgressBar::stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

std::string ProgressBar::format(const Progress& p) const {
    std::string bar;
    if (tty_) {
        constexpr int kWidth = 20;
        int filled = p.batches_per_epoch > 0 ? static_cast<int>(kWidth * p.batch / p.batches_per_epoch) : 0;
        bar = "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] ";
    }
    return fmt::format("epoch {}/{} {}step {}/{}  loss {:.4f}  lr {:.3g}  {:.0f} samples/s  ETA {}", p.epoch + 1,
                       p.epochs, bar, p.batch, p.batches_per_epoch, p.loss, p.lr, p.samples_per_s,
                       format_duration(p.eta_s));
}

void ProgressBar::update(const Progress& p) {
    if (quiet_) return;
    bool epoch_end = p.batch == p.batches_per_epoch;
    if (tty_) {
        auto now = std::chrono::steady_clock::now();
        if (!epoch_end && line_open_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
        last_draw_ = now;
        fmt::print(stderr, "\r{}\x1b[K", format(p));  // \x1b[K clears what a longer line left
        line_open_ = true;
    } else if (epoch_end || p.step % log_every_ == 0) {
        fmt::print(stderr, "{}\n", format(p));
    }
    std::fflush(stderr);
}

void ProgressBar::print_line(const std::string& line) {
    if (quiet_) return;
    finish();
    fmt::print(stderr, "{}\n", line);
    std::fflush(stderr);
}

void ProgressBar::finish() {
    if (line_open_) fmt::print(stderr, "\n");
    line_open_ = false;
}

}  // namespace kiln::cli
