// The metrics CSV (train_metrics.h).
#include "train_metrics.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "kiln/error.h"

namespace kiln::cli {
namespace {

constexpr const char* kHeader = "epoch,step,train_loss,eval_loss,eval_accuracy,lr,samples_per_s";

std::string field(std::optional<double> v) { return v ? fmt::format("{:.9g}", *v) : ""; }

}  // namespace

MetricsCsv::MetricsCsv(const std::string& path, std::optional<int64_t> keep_rows) : path_(path) {
    std::vector<std::string> kept;
    if (keep_rows) {
        std::ifstream in(path);
        KILN_CHECK(in.good(), kIOError) << "--metrics-csv '" << path << "': cannot read it to continue it after "
                                        << "--resume (the checkpoint counts " << *keep_rows << " rows)";
        std::string line;
        std::getline(in, line);
        KILN_CHECK(line == kHeader, kInvalidArgument)
            << "--metrics-csv '" << path << "': not a kiln train metrics file (header '" << line << "')";
        while (static_cast<int64_t>(kept.size()) < *keep_rows && std::getline(in, line)) kept.push_back(line);
        KILN_CHECK(static_cast<int64_t>(kept.size()) == *keep_rows, kInvalidArgument)
            << "--metrics-csv '" << path << "' has " << kept.size() << " rows, but the checkpoint counts " << *keep_rows;
    }
    // Rewritten whole (a temporary then a rename), so that a crash here loses nothing.
    std::string tmp = path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    KILN_CHECK(f != nullptr, kIOError) << "--metrics-csv '" << path << "': cannot write " << tmp;
    fmt::print(f, "{}\n", kHeader);
    for (const std::string& line : kept) fmt::print(f, "{}\n", line);
    bool ok = std::fclose(f) == 0;
    std::error_code ec;
    if (ok) std::filesystem::rename(tmp, path, ec);
    KILN_CHECK(ok && !ec, kIOError) << "--metrics-csv '" << path << "': cannot write it (" << ec.message() << ")";
    file_ = std::fopen(path.c_str(), "a");
    KILN_CHECK(file_ != nullptr, kIOError) << "--metrics-csv '" << path << "': cannot open it for appending";
    rows_ = static_cast<int64_t>(kept.size());
}

MetricsCsv::~MetricsCsv() {
    if (file_) std::fclose(file_);
}

void MetricsCsv::row(int64_t epoch, int64_t step, std::optional<double> train_loss, std::optional<double> eval_loss,
                     std::optional<double> eval_accuracy, double lr, double samples_per_s) {
    fmt::print(file_, "{},{},{},{},{},{:.9g},{:.1f}\n", epoch, step, field(train_loss), field(eval_loss),
               field(eval_accuracy), lr, samples_per_s);
    KILN_CHECK(std::fflush(file_) == 0, kIOError) << "--metrics-csv '" << path_ << "': write failed";
    ++rows_;
}

}  // namespace kiln::cli
