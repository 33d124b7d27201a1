// FramesModel (include/kiln/frames.h): import, compile_frames, and a FrameExecutor with its pools.
#include "kiln/frames.h"

#include "compiler/compile_frames.h"
#include "frontend/onnx/importer.h"
#include "runtime/frame_executor.h"
#include "runtime/inter_op_thread_pool.h"
#include "runtime/thread_pool.h"
#include "support/error.h"

namespace kiln {
namespace {

TensorInfo info_of(const ir::Value& v) {
    TensorInfo t;
    t.name = v.name();
    t.dtype = v.type().dtype;
    for (const ir::Dim& d : v.type().shape) {
        t.shape.push_back(d.is_static() ? d.value : -1);
        t.symbols.push_back(d.is_static() ? "" : d.symbol);
    }
    return t;
}

class FramesModelImpl final : public FramesModel {
public:
    FramesModelImpl(const std::string& path, const FramesOptions& opts) : intra_(std::max(1, opts.threads)) {
        KILN_CHECK(opts.inter_op_threads >= 1, kInvalidArgument)
            << "inter_op_threads must be >= 1, got " << opts.inter_op_threads;
        ir::Graph g = frontend::import_onnx_file(path);
        for (ir::Value* v : g.inputs()) inputs_.push_back(info_of(*v));
        for (ir::Value* v : g.outputs()) outputs_.push_back(info_of(*v));
        compiler::CompileOptions copts;
        copts.dims = opts.dims;
        copts.opt_level = opts.opt_level;
        compiler::FramesLoweringOptions lowering;
        lowering.parallel_iterations = opts.parallel_iterations;
        lowering.max_iterations = opts.max_iterations;
        compiler::CompiledModel m = compiler::compile_frames(g, copts, lowering);
        stats_.kernels = m.stats.kernels;
        stats_.compiled = m.stats.compiled;
        stats_.compile_seconds = m.stats.seconds;
        if (opts.inter_op_threads > 1) inter_ = std::make_unique<runtime::InterOpThreadPool>(opts.inter_op_threads);
        exec_ = std::make_unique<runtime::FrameExecutor>(m.executable, &intra_, inter_.get());
        exec_->structure_status().throw_if_error();  // a malformed frame fails at load, naming the node
    }

    const std::vector<TensorInfo>& inputs() const override { return inputs_; }
    const std::vector<TensorInfo>& outputs() const override { return outputs_; }

    std::vector<Tensor> run(const std::map<std::string, Tensor>& feeds) override {
        std::vector<Tensor> ins;
        for (const TensorInfo& info : inputs_) {
            auto it = feeds.find(info.name);
            KILN_CHECK(it != feeds.end(), kInvalidArgument) << "input '" << info.name << "' is not given";
            ins.push_back(it->second);
        }
        std::vector<Tensor> outs;
        exec_->run(ins, outs).throw_if_error();
        runtime::FrameRunStats s = exec_->last_run_stats();
        stats_.kernels_run = s.kernels_run;
        stats_.kernels_dead = s.kernels_dead;
        stats_.iterations = s.iterations;
        stats_.peak_live_iterations = s.peak_live_iterations;
        stats_.peak_running_kernels = s.peak_running_kernels;
        return outs;
    }

    FramesStats stats() const override { return stats_; }

private:
    runtime::ThreadPool intra_;
    std::unique_ptr<runtime::InterOpThreadPool> inter_;
    std::unique_ptr<runtime::FrameExecutor> exec_;
    std::vector<TensorInfo> inputs_, outputs_;
    FramesStats stats_;
};

}  // namespace

std::unique_ptr<FramesModel> FramesModel::load(const std::string& onnx_path, const FramesOptions& opts) {
    return std::make_unique<FramesModelImpl>(onnx_path, opts);
}

}  // namespace kiln
