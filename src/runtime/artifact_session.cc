// ArtifactSession: kiln::Session over a compiled `.kiln` artifact. Everything the compiling
// session decides at compile time (shapes, kernels, memory plan) is fixed in the artifact, so
// this session only checks inputs against the executable's buffers and runs it through the
// shared ModelRunner.
#include <algorithm>
#include <chrono>
#include <sstream>

#include "runtime/artifact.h"
#include "runtime/artifact_format.h"
#include "runtime/artifact_program_session.h"
#include "runtime/dims_plan.h"
#include "runtime/model_runner.h"
#include "runtime/output_binding.h"
#include "runtime/session_inputs.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

using Clock = std::chrono::steady_clock;


/// The artifact's "dims" metadata, "N=1,S=128" as `kiln compile` writes it -> {N: 1, S: 128}.
/// A piece that is not NAME=INTEGER means the metadata was damaged: an error, never skipped.
std::map<std::string, int64_t> parse_dims(const std::string& text, const std::string& path) {
    std::map<std::string, int64_t> dims;
    std::istringstream in(text);
    for (std::string kv; std::getline(in, kv, ',');) {
        if (kv.empty()) continue;
        const size_t eq = kv.find('=');
        size_t used = 0;
        int64_t value = -1;
        try {
            if (eq != std::string::npos && eq > 0) value = std::stoll(kv.substr(eq + 1), &used);
        } catch (const std::exception&) {
        }
        KILN_CHECK(value >= 0 && used > 0 && eq + 1 + used == kv.size(), kInvalidArgument)
            << "'" << path << "': its metadata 'dims' holds '" << kv << "', expected NAME=INTEGER pieces joined by ','";
        dims[kv.substr(0, eq)] = value;
    }
    return dims;
}

std::string join(const std::vector<std::string>& names) {
    std::string s;
    for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
}

std::string dims_list(const std::map<std::string, int64_t>& dims) {
    std::string s;
    for (const auto& [k, v] : dims) s += (s.empty() ? "" : ", ") + k + "=" + std::to_string(v);
    return s.empty() ? "none" : s;
}

/// A symbolic axis (BufferDesc::dim_of) is -1 in the shape with the dim's name in `symbols`.
TensorInfo info_of(const Executable& exe, const BufferDesc& b) {
    TensorInfo t;
    t.name = b.name;
    t.dtype = b.dtype;
    t.shape = b.shape;
    t.symbols.assign(b.shape.size(), "");
    for (size_t k = 0; k < b.dim_of.size(); ++k) {
        if (b.dim_of[k] < 0) continue;
        t.shape[k] = -1;
        t.symbols[k] = exe.dims[static_cast<size_t>(b.dim_of[k])];
    }
    return t;
}

std::string type_str(DType dtype, const Shape& shape) { return std::string(dtype_name(dtype)) + shape_str(shape); }

/// "f32[batch,seq,384]": a TensorInfo with its symbolic axes by name.
std::string type_str(const TensorInfo& t) {
    std::string s = std::string(dtype_name(t.dtype)) + "[";
    for (size_t k = 0; k < t.shape.size(); ++k)
        s += (k ? "," : "") + (t.symbols[k].empty() ? std::to_string(t.shape[k]) : t.symbols[k]);
    return s + "]";
}

/// Whether `shape` fits `t`: the same rank, equal at every static axis.
bool fits(const TensorInfo& t, const Shape& shape) {
    if (shape.size() != t.shape.size()) return false;
    for (size_t k = 0; k < shape.size(); ++k)
        if (t.symbols[k].empty() && shape[k] != t.shape[k]) return false;
    return true;
}

class ArtifactSession final : public Session {
public:
    /// `loaded` from load_artifact(path) (started at t0), holding an executable.
    ArtifactSession(const std::string& path, LoadedArtifact loaded, const SessionOptions& opts, Clock::time_point t0)
        : path_(path) {
        artifact_ = std::move(loaded);
        const Executable& exe = *artifact_.exe;
        check_dims(opts.dims);
        RunnerOptions ropts = runner_options(opts);
        if (!exe.planned_for_concurrency) {
            KILN_CHECK(opts.executor != ExecutorKind::kDataflow, kInvalidArgument)
                << "'" << path << "' was compiled for sequential execution (its memory plan lets concurrent steps "
                << "share memory): the dataflow executor cannot run it; recompile with `kiln compile --executor dataflow`";
            ropts.executor = ExecutorChoice::kSequential;  // auto: the plan allows nothing else
        }
        runner_ = std::make_unique<ModelRunner>(ropts);
        for (int id : exe.inputs) inputs_.push_back(info_of(exe, exe.buffers[id]));
        for (int id : exe.outputs) outputs_.push_back(info_of(exe, exe.buffers[id]));
        runner_->set_executable(artifact_.exe);
        const RunnerStats rs = runner_->stats();
        stats_.kernels = static_cast<int>(exe.kernels.size());
        stats_.executor = rs.executor;
        stats_.intra_op_threads = rs.intra_op_threads;
        stats_.inter_op_threads = rs.inter_op_threads;
        stats_.parallel_width = rs.parallel_width;
        stats_.load_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }

    const std::vector<TensorInfo>& inputs() const override { return inputs_; }
    const std::vector<TensorInfo>& outputs() const override { return outputs_; }

    std::vector<Tensor> run(const std::map<std::string, Tensor>& given, const RunOptions& ropts) override {
        check_input_names(inputs_, given);
        std::vector<Tensor> ordered;
        for (const TensorInfo& info : inputs_) {
            auto it = given.find(info.name);
            KILN_CHECK(it != given.end(), kInvalidArgument) << "missing input '" << info.name << "'";
            const Tensor& t = it->second;
            KILN_CHECK(t.dtype() == info.dtype && fits(info, t.shape()), kInvalidArgument)
                << "input '" << info.name << "': expected " << type_str(info) << ", got " << type_str(t.dtype(), t.shape())
                << (fits(info, t.shape()) ? "" : " (the artifact was compiled for these shapes; recompile for others)");
            ordered.push_back(t);
        }
        const std::vector<int64_t> dims = run_dims(ordered);
        // Outputs bound to the caller's tensors are written in place, at this run's shapes.
        const std::vector<const Tensor*> bound = order_outputs_into(outputs_, ropts.outputs_into);
        const Executable& exe = *artifact_.exe;
        for (size_t j = 0; j < bound.size(); ++j) {
            const BufferDesc& d = exe.buffers[static_cast<size_t>(exe.outputs[j])];
            if (bound[j]) check_output_into(outputs_[j], *bound[j], d.is_symbolic() ? d.shape_at(dims) : d.shape);
        }
        RunControls controls = run_controls(ropts);
        if (!bound.empty()) controls.outputs_into = &bound;
        std::vector<Tensor> outs;
        runner_->run(ordered, outs, controls).throw_if_error();
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
    std::string profile_summary(int top) const override { return runner_->profile_summary(top); }
    void write_profile() const override { runner_->write_profile(); }

private:
    /// SessionOptions::dims must name dims the artifact was compiled with, at the same values
    /// (a misspelt name is an error, as the artifact cannot take it into account), or symbolic
    /// dims of the artifact, which each run must then agree with (run_dims).
    void check_dims(const std::map<std::string, int64_t>& wanted) {
        if (wanted.empty()) return;
        auto it = artifact_.info.metadata.find("dims");
        const std::map<std::string, int64_t> compiled =
            it == artifact_.info.metadata.end() ? std::map<std::string, int64_t>{} : parse_dims(it->second, path_);
        const std::vector<std::string>& symbolic = artifact_.exe->dims;
        for (const auto& [name, value] : wanted) {
            auto s = std::find(symbolic.begin(), symbolic.end(), name);
            if (s != symbolic.end()) {
                fixed_dims_.emplace_back(static_cast<size_t>(s - symbolic.begin()), value);
                continue;
            }
            auto c = compiled.find(name);
            KILN_CHECK(c != compiled.end(), kInvalidArgument)
                << "dimension '" << name << "': '" << path_ << "' was compiled with no dimension of that name "
                << "(its dims: " << dims_list(compiled) << (symbolic.empty() ? "" : "; symbolic: " + join(symbolic))
                << ")";
            KILN_CHECK(c->second == value, kInvalidArgument)
                << "dimension '" << name << "': '" << path_ << "' was compiled with " << name << "=" << c->second
                << ", got " << name << "=" << value << " (recompile with `kiln compile --dim " << name << "=" << value
                << "`)";
        }
    }

    /// The values of a symbolic artifact's dims in this run (empty for a static one); the
    /// runner checks the inputs again, this names a dim SessionOptions::dims fixed.
    std::vector<int64_t> run_dims(const std::vector<Tensor>& inputs) const {
        std::vector<int64_t> dims;
        if (!artifact_.exe->is_symbolic()) return dims;
        bind_run_dims(*artifact_.exe, inputs, dims).throw_if_error();
        for (const auto& [k, value] : fixed_dims_)
            KILN_CHECK(dims[k] == value, kInvalidArgument)
                << "dimension '" << artifact_.exe->dims[k] << "' is " << dims[k] << " in this run, but the session "
                << "was opened with " << artifact_.exe->dims[k] << "=" << value << " (SessionOptions::dims)";
        return dims;
    }

    std::string kernel_line(size_t step) const;

    std::string path_;
    LoadedArtifact artifact_;
    std::unique_ptr<ModelRunner> runner_;
    std::vector<TensorInfo> inputs_, outputs_;
    std::vector<std::pair<size_t, int64_t>> fixed_dims_;  // (dim index, value) from SessionOptions::dims
    SessionStats stats_;
};

std::string ArtifactSession::kernel_line(size_t s) const {
    const Executable& exe = *artifact_.exe;
    const StepDesc& step = exe.steps[s];
    const KernelDesc& k = exe.kernels[step.kernel];
    std::string line = "kernel " + std::to_string(s) + ": " + k.description;
    if (!step.node_name.empty()) line += " (node '" + step.node_name + "')";
    if (k.is_extern()) line += " [" + k.extern_name + "]";
    if (k.is_async) line += " [" + k.symbol + "]";
    return line;
}

std::string ArtifactSession::kernel_list() {
    std::string out;
    for (size_t s = 0; s < artifact_.exe->steps.size(); ++s) out += kernel_line(s) + "\n";
    return out + std::to_string(artifact_.exe->steps.size()) + " kernels\n";
}

std::string ArtifactSession::inspect() {
    const Executable& exe = *artifact_.exe;
    std::ostringstream os;
    os << "// compiled Kiln artifact '" << path_ << "' (format version " << artifact_format::kFormatVersion
       << "): no IR; its metadata, tensors and steps\n// metadata:\n";
    for (const auto& [k, v] : artifact_.info.metadata)
        if (k != "memory_report") os << "//   " << k << ": " << v << "\n";
    os << "// cpu features:";
    for (const std::string& f : artifact_.info.cpu_features) os << " " << f;
    os << "\n";
    if (exe.is_symbolic()) {
        os << "// symbolic dims (one compile serves every value):";
        for (const std::string& d : exe.dims) os << " " << d;
        os << "\n";
    }
    auto list = [&](const char* title, const std::vector<int>& ids) {
        os << "// " << title << ":\n";
        for (int id : ids) os << "//   " << exe.buffers[id].name << ": " << type_str(info_of(exe, exe.buffers[id])) << "\n";
    };
    list("inputs", exe.inputs);
    list("outputs", exe.outputs);
    size_t constants = 0, constant_bytes = 0, intermediates = 0;
    for (const BufferDesc& b : exe.buffers) {
        if (b.role == BufferRole::kConstant) ++constants, constant_bytes += b.nbytes();
        if (b.role == BufferRole::kIntermediate) ++intermediates;
    }
    os << "// " << constants << " constants (" << constant_bytes << " bytes, mapped from the file), " << intermediates
       << " intermediates (arena " << exe.arena_bytes << " bytes)\n";
    os << "// " << exe.steps.size() << " steps, " << exe.kernels.size() << " kernels\n";
    for (size_t s = 0; s < exe.steps.size(); ++s) {
        const StepDesc& step = exe.steps[s];
        os << kernel_line(s) << ":";
        for (size_t a = 0; a < step.args.size(); ++a) {
            if (step.num_inputs >= 0 && static_cast<int>(a) == step.num_inputs) os << " ->";
            const BufferDesc& b = exe.buffers[step.args[a]];
            os << " " << b.name << ":" << type_str(info_of(exe, b));
        }
        os << "\n";
    }
    return os.str();
}

std::string ArtifactSession::memory_report() {
    const Executable& exe = *artifact_.exe;
    std::ostringstream os;
    auto it = artifact_.info.metadata.find("memory_report");
    if (it != artifact_.info.metadata.end()) {
        os << it->second;
        if (!it->second.empty() && it->second.back() != '\n') os << "\n";
    } else {
        os << "arena: " << exe.arena_bytes << "\n";
    }
    size_t constant_bytes = 0;
    for (const BufferDesc& b : exe.buffers)
        if (b.role == BufferRole::kConstant) constant_bytes += b.nbytes();
    os << "constants: " << constant_bytes << " (mapped from the artifact, not copied)\n";
    return os.str() + runner_->allocator_report();
}

}  // namespace

std::unique_ptr<Session> load_artifact_session(const std::string& path, const SessionOptions& opts) {
    const auto t0 = Clock::now();
    KILN_CHECK(opts.print_after.empty() && !opts.print_after_all, kInvalidArgument)
        << "--print-after: '" << path << "' is a compiled artifact, which holds no IR to print (use it on the ONNX model)";
    KILN_CHECK(opts.specialize.empty(), kInvalidArgument)
        << "specialize: '" << path << "' is a compiled artifact, which holds the one specialization `kiln compile` "
        << "made (its dims); specializations are compiled from the ONNX model";
    LoadedArtifact loaded = load_artifact(path);
    if (loaded.program) return make_program_session(path, std::move(loaded), opts, t0);
    return std::make_unique<ArtifactSession>(path, std::move(loaded), opts, t0);
}

}  // namespace kiln::runtime
