// FramesModel: an ONNX model whose If and Loop run as TF1 control flow in the frames executor
// (docs/control_flow.md, "Frames"): the sub-graphs' nodes are compiled to ordinary fused kernels
// at the given input shapes, and up to parallel_iterations iterations of a loop run at once on
// the inter-op threads. `kiln run --control-flow frames` uses it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/session.h"
#include "kiln/tensor.h"

namespace kiln {

struct FramesOptions {
    int threads = 1;           // intra-op threads of each kernel
    int inter_op_threads = 2;  // threads running ready kernels (1: the caller only)
    /// Iterations of one loop that may run at once (TensorFlow's parallel_iterations).
    int parallel_iterations = 10;
    /// A loop that would start more iterations is an error naming it (0: no bound).
    int64_t max_iterations = 0;
    std::map<std::string, int64_t> dims;  // values of symbolic input dims
    int opt_level = 3;
};

struct FramesStats {
    int kernels = 0;   // kernels of the compiled model
    int compiled = 0;  // compiler invocations (kernel cache misses)
    double compile_seconds = 0;
    // Of the last run:
    int64_t kernels_run = 0;
    int64_t kernels_dead = 0;  // skipped in untaken branches
    int64_t iterations = 0;
    int peak_live_iterations = 0;
    int peak_running_kernels = 0;  // most kernels running at the same moment
};

class FramesModel {
public:
    virtual ~FramesModel() = default;
    /// Imports and compiles the model; throws kiln::Error (an unbound dim, a Loop with scan
    /// outputs or a loop-carried shape that changes, an unknown op), naming the node.
    static std::unique_ptr<FramesModel> load(const std::string& onnx_path, const FramesOptions& opts = {});
    virtual const std::vector<TensorInfo>& inputs() const = 0;
    virtual const std::vector<TensorInfo>& outputs() const = 0;
    /// Runs on the named inputs; returns the outputs in model order. Throws kiln::Error.
    virtual std::vector<Tensor> run(const std::map<std::string, Tensor>& feeds) = 0;
    virtual FramesStats stats() const = 0;
};

}  // namespace kiln
