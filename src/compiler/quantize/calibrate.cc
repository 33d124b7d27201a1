// Calibration runs (calibrate.h).
#include "compiler/quantize/calibrate.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "support/error.h"

namespace kiln::compiler {

TempModel::TempModel(const std::string& bytes) {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("kiln-quantize-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".onnx"))
                .string();
    std::ofstream out(path_, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    KILN_CHECK(out.good(), kIOError) << "cannot write the temporary model '" << path_ << "'";
}

TempModel::~TempModel() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
}

TensorProbe::TensorProbe(const std::string& bytes, const QuantizeOptions& opts) : file_(bytes) {
    SessionOptions so;
    so.threads = opts.threads;
    so.dims = opts.dims;
    session_ = Session::load(file_.path(), so);
}

std::map<std::string, Tensor> TensorProbe::run(const CalibrationBatch& batch) {
    std::vector<Tensor> outs = session_->run(batch);
    std::map<std::string, Tensor> named(batch.begin(), batch.end());
    const auto& infos = session_->outputs();
    for (size_t i = 0; i < outs.size(); ++i) named[infos[i].name] = std::move(outs[i]);
    return named;
}

std::map<std::string, TensorStats> calibrate(TensorProbe& probe, const std::vector<std::string>& tensors,
                                             const std::vector<CalibrationBatch>& batches, CalibrationMethod method) {
    std::map<std::string, TensorStats> stats;
    const int passes = needs_histograms(method) ? 2 : 1;
    for (int pass = 0; pass < passes; ++pass) {
        for (const CalibrationBatch& b : batches) {
            std::map<std::string, Tensor> values = probe.run(b);
            for (const auto& t : tensors) {
                auto it = values.find(t);
                KILN_ICHECK(it != values.end()) << "calibration output '" << t << "' missing";
                if (pass == 0) stats[t].add_range(it->second);
                else stats[t].add_histogram(it->second);
            }
        }
    }
    return stats;
}

}  // namespace kiln::compiler
