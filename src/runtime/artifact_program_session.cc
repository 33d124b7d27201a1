// ProgramSession (see artifact_program_session.h).
#include "runtime/artifact_program_session.h"

#include <mutex>
#include <sstream>

#include "runtime/model_runner.h"
#include "runtime/session_inputs.h"
#include "runtime/vm/executable_callee.h"
#include "runtime/vm/vm.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

std::string type_str(DType dtype, const Shape& shape) { return std::string(dtype_name(dtype)) + shape_str(shape); }

class ProgramSession final : public Session {
public:
    ProgramSession(const std::string& path, LoadedArtifact loaded, const SessionOptions& opts,
                   std::chrono::steady_clock::time_point t0)
        : path_(path), artifact_(std::move(loaded)) {
        check_dims(opts.dims);
        RunnerOptions ropts = runner_options(opts);
        ropts.executor = ExecutorChoice::kSequential;  // the VM calls each segment in turn
        runner_ = std::make_unique<ModelRunner>(ropts);
        const ProgramImage& image = *artifact_.program;
        auto program = std::make_shared<vm::Program>(image.program);
        for (size_t k = 0; k < image.executables.size(); ++k) {
            program->callees.push_back(std::make_shared<vm::ExecutableCallee>(
                image.executables[k], image.callee_names[k], runner_->intra_pool(), runner_->allocator()));
            stats_.kernels += static_cast<int>(image.executables[k]->steps.size());
        }
        vm_ = std::make_unique<vm::VirtualMachine>(program);
        stats_.executor = "vm";
        stats_.intra_op_threads = runner_->stats().intra_op_threads;
        stats_.control_flow = "vm: " + std::to_string(image.executables.size()) +
                              " compiled segments, loaded from the artifact";
        stats_.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }

    const std::vector<TensorInfo>& inputs() const override { return artifact_.program->inputs; }
    const std::vector<TensorInfo>& outputs() const override { return artifact_.program->outputs; }

    std::vector<Tensor> run(const std::map<std::string, Tensor>& given, const RunOptions& ropts) override {
        KILN_CHECK(ropts.outputs_into == nullptr && ropts.preempt == nullptr, kInvalidArgument)
            << "'" << path_ << "' holds a VM program (control flow): RunOptions::outputs_into and preempt "
            << "are not supported for it";
        check_input_names(inputs(), given);
        std::vector<Tensor> ordered;
        for (const TensorInfo& info : inputs()) {
            auto it = given.find(info.name);
            KILN_CHECK(it != given.end(), kInvalidArgument) << "missing input '" << info.name << "'";
            check_input(info, it->second);
            ordered.push_back(it->second);
        }
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<Tensor> outs;
        vm_->run(ordered, outs, ropts.terminate).throw_if_error();
        return outs;
    }

    std::vector<Datum> run_values(const std::map<std::string, Datum>& given, const RunOptions& ropts) override {
        std::map<std::string, Tensor> tensors;
        for (const auto& [name, d] : given) tensors[name] = d.tensor("input '" + name + "'");
        std::vector<Tensor> outs = run(tensors, ropts);
        return std::vector<Datum>(outs.begin(), outs.end());
    }

    std::string inspect() override;
    std::string kernel_list() override;
    SessionStats stats() const override { return stats_; }
    std::map<std::string, std::string> metadata() const override { return artifact_.info.metadata; }
    std::string memory_report() override;

private:
    /// The program was lowered at these shapes: another shape names the input and the axis.
    void check_input(const TensorInfo& info, const Tensor& t) const {
        const std::string want = type_str(info.dtype, info.shape);
        KILN_CHECK(t.dtype() == info.dtype && t.shape().size() == info.shape.size(), kInvalidArgument)
            << "input '" << info.name << "': expected " << want << ", got " << type_str(t.dtype(), t.shape());
        for (size_t k = 0; k < info.shape.size(); ++k)
            KILN_CHECK(t.shape()[k] == info.shape[k], kInvalidArgument)
                << "input '" << info.name << "': expected " << want << ", got " << type_str(t.dtype(), t.shape())
                << " (axis " << k << " is " << t.shape()[k] << ", the program in '" << path_ << "' was lowered for "
                << info.shape[k] << "; recompile with `kiln compile --dim` for other shapes)";
    }

    /// SessionOptions::dims must be among those the program was compiled with (metadata "dims").
    void check_dims(const std::map<std::string, int64_t>& wanted) const {
        auto it = artifact_.info.metadata.find("dims");
        const std::string compiled = it == artifact_.info.metadata.end() ? "" : it->second;
        for (const auto& [name, value] : wanted) {
            const std::string kv = name + "=" + std::to_string(value);
            KILN_CHECK(("," + compiled + ",").find("," + kv + ",") != std::string::npos, kInvalidArgument)
                << "dimension '" << name << "': '" << path_ << "' holds a program compiled with dims '"
                << (compiled.empty() ? "none" : compiled) << "', got " << kv << " (recompile with `kiln compile --dim "
                << kv << "`)";
        }
    }

    std::string path_;
    LoadedArtifact artifact_;
    std::unique_ptr<ModelRunner> runner_;
    std::unique_ptr<vm::VirtualMachine> vm_;
    std::mutex mu_;  // one VM run at a time (it owns the register files)
    SessionStats stats_;
};

std::string ProgramSession::kernel_list() {
    std::string out;
    size_t total = 0;
    const ProgramImage& image = *artifact_.program;
    for (size_t k = 0; k < image.executables.size(); ++k) {
        const Executable& exe = *image.executables[k];
        for (const StepDesc& step : exe.steps) {
            out += "kernel " + std::to_string(total++) + ": " + exe.kernels[step.kernel].description;
            if (!step.node_name.empty()) out += " (node '" + step.node_name + "')";
            out += " [segment '" + image.callee_names[k] + "']\n";
        }
    }
    return out + std::to_string(total) + " kernels\n";
}

std::string ProgramSession::inspect() {
    std::ostringstream os;
    os << "// compiled Kiln artifact '" << path_ << "': a VM program (control flow), no IR\n// metadata:\n";
    for (const auto& [k, v] : artifact_.info.metadata)
        if (k != "memory_report") os << "//   " << k << ": " << v << "\n";
    const ProgramImage& image = *artifact_.program;
    for (const TensorInfo& t : image.inputs) os << "// input " << t.name << ": " << type_str(t.dtype, t.shape) << "\n";
    for (const TensorInfo& t : image.outputs) os << "// output " << t.name << ": " << type_str(t.dtype, t.shape) << "\n";
    return os.str() + vm::program_text(vm_->program());
}

std::string ProgramSession::memory_report() {
    size_t arena = 0, constants = 0;
    for (const auto& exe : artifact_.program->executables) {
        arena += exe->arena_bytes;
        for (const BufferDesc& b : exe->buffers)
            if (b.role == BufferRole::kConstant) constants += b.nbytes();
    }
    return "arenas: " + std::to_string(arena) + " (one per compiled segment)\nconstants: " + std::to_string(constants) +
           " (mapped from the artifact, not copied)\n" + runner_->allocator_report();
}

}  // namespace

std::unique_ptr<Session> make_program_session(const std::string& path, LoadedArtifact loaded, const SessionOptions& opts,
                                              std::chrono::steady_clock::time_point t0) {
    return std::make_unique<ProgramSession>(path, std::move(loaded), opts, t0);
}

}  // namespace kiln::runtime
