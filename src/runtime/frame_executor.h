// FrameExecutor: runs an Executable holding TF1 control-flow steps (Switch, Merge, Enter, Exit,
// NextIteration; compiler/lower_to_frames.h) with frames and iteration ids, after TensorFlow's
// executor (executor.cc, propagator_state.cc) and Yu et al. 2018. Kernel steps run on the
// inter-op pool as their inputs arrive; control steps run inline while values propagate. An
// untaken Switch output is dead, and deadness flows on (a kernel with a dead input does not run);
// a Merge forwards its live input. Up to parallel_iterations iterations of a loop frame run at
// once, so iteration i+1's work that does not depend on iteration i starts before i ends.
// Every value produced by a step lives in storage of its own from a pooled allocator, shared by
// reference between the steps that forward it, and released when the last step of its iteration
// that reads it has fired (the static arena plan assumes one live copy of each buffer, which
// several iterations break).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/executable.h"
#include "runtime/executor.h"
#include "runtime/frame_graph.h"
#include "runtime/inter_op_thread_pool.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

struct FrameOptions {
    /// Overrides every loop frame's parallel_iterations (from its Enter steps) when > 0.
    int parallel_iterations = 0;
};

/// Counts of the last run (for tests and `kiln run`).
struct FrameRunStats {
    int64_t kernels_run = 0;       // kernel steps that ran
    int64_t kernels_dead = 0;      // kernel steps skipped for a dead input (an untaken branch)
    int64_t iterations = 0;        // loop iterations started, all frames
    int peak_live_iterations = 0;  // most iterations of one frame live at once
    int peak_running_kernels = 0;  // most kernels running at the same moment
};

class FrameExecutor final : public Executor {
public:
    /// intra: the kernels' parallel loops (nullptr: serial); inter: runs ready kernel steps
    /// (nullptr: the calling thread only); alloc: the values' storage (nullptr: a caching pool).
    FrameExecutor(std::shared_ptr<Executable> exe, ThreadPool* intra, InterOpThreadPool* inter,
                  std::shared_ptr<Allocator> alloc = nullptr, FrameOptions opts = {});
    ~FrameExecutor() override;
    FrameExecutor(const FrameExecutor&) = delete;
    FrameExecutor& operator=(const FrameExecutor&) = delete;

    /// As Executor::run; a malformed frame structure (frame_graph.h), a loop past its
    /// max_iterations or a dead graph output is a kInvalidArgument Status naming the node.
    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
               const std::atomic<bool>* terminate = nullptr, int max_threads = 0,
               const std::vector<const Tensor*>* into = nullptr, const OutputReadyFn* ready = nullptr) override;
    void set_profiler(Profiler* p) override { profiler_ = p; }
    const char* name() const override { return "frames"; }

    const FrameGraph& frame_graph() const { return fg_; }
    /// Whether the executable's frame structure is sound (build_frame_graph); run() returns it too.
    const Status& structure_status() const { return graph_error_; }
    FrameRunStats last_run_stats() const { return stats_; }

    struct RunState;

private:
    std::shared_ptr<Executable> exe_;
    ThreadPool* intra_;
    InterOpThreadPool* inter_;
    std::shared_ptr<Allocator> alloc_;
    FrameOptions opts_;
    FrameGraph fg_;
    Status graph_error_;
    Profiler* profiler_ = nullptr;
    FrameRunStats stats_;
    std::mutex run_mu_;
};

}  // namespace kiln::runtime
