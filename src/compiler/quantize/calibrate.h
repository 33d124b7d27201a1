// Calibration: runs the fp32 model in Kiln with the tensors to quantize exposed as extra
// outputs, over every calibration batch, and records each tensor's statistics
// (tensor_ranges.h). Graph inputs among the tensors are measured from the batches themselves.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/quantize/tensor_ranges.h"
#include "kiln/quantize.h"
#include "kiln/session.h"

namespace kiln::compiler {

/// A serialized model written to a file of its own in the temp directory (a Session loads
/// models by path), removed with this object.
class TempModel {
public:
    explicit TempModel(const std::string& bytes);
    ~TempModel();
    TempModel(const TempModel&) = delete;
    TempModel& operator=(const TempModel&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

/// A Session over `bytes` that returns the named tensors by name for each batch.
class TensorProbe {
public:
    TensorProbe(const std::string& bytes, const QuantizeOptions& opts);
    /// The batch's graph inputs and every output, by name.
    std::map<std::string, Tensor> run(const CalibrationBatch& batch);

private:
    TempModel file_;
    std::unique_ptr<Session> session_;
};

/// Statistics of `tensors` over `batches`, run by `probe` (the fp32 model exposing them; two
/// passes when the method needs histograms).
std::map<std::string, TensorStats> calibrate(TensorProbe& probe, const std::vector<std::string>& tensors,
                                             const std::vector<CalibrationBatch>& batches, CalibrationMethod method);

}  // namespace kiln::compiler
