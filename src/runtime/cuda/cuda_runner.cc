#include "runtime/cuda/cuda_runner.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstring>
#include <sstream>

#include "support/error.h"

namespace kiln::runtime::cuda {

CudaRunner::CudaRunner(std::shared_ptr<const CudaProgram> program, CudaDevice& dev, size_t budget_bytes,
                       CudaStream::Priority priority)
    : prog_(std::move(program)), dev_(dev), alloc_(make_cuda_session_allocator(dev, budget_bytes)), stream_(dev, priority),
      start_(dev), kernels_start_(dev), kernels_end_(dev), end_(dev), staging_in_(dev), staging_out_(dev) {
    dev_.make_current();
    try {
        load_modules();
        allocate_buffers();
        allocate_stop_flags();
        prepare_launches();
    } catch (...) {
        release();  // the destructor does not run for a constructor that throws
        throw;
    }
}

CudaRunner::~CudaRunner() {
    stream_.synchronize();
    release();
}

void CudaRunner::release() {
    if (graph_exec_) dev_.api().cuGraphExecDestroy(graph_exec_);
    if (graph_) dev_.api().cuGraphDestroy(graph_);
    graph_exec_ = nullptr;
    graph_ = nullptr;
    for (auto& [p, bytes] : owned_) alloc_->deallocate(p, bytes);
    owned_.clear();
    for (CUmodule m : modules_) dev_.api().cuModuleUnload(m);
    modules_.clear();
    convs_.clear();  // descriptors before their handle
    cudnn_.reset();
    if (stop_flag_) dev_.api().cuMemFreeHost(stop_flag_);
    if (cut_flags_) dev_.api().cuMemFreeHost(cut_flags_);
    stop_flag_ = cut_flags_ = nullptr;
}

void CudaRunner::allocate_stop_flags() {
    size_t launches = 0;
    for (const CudaStepDesc& s : prog_->steps)
        if (s.kernel >= 0 && prog_->kernels.at(s.kernel).stoppable) launches += prog_->kernels.at(s.kernel).entries.size();
    if (launches == 0) return;
    void* p = nullptr;
    check_cuda(dev_.api().cuMemAllocHost(&p, sizeof(int)), "cuMemAllocHost (the stop flag)");
    stop_flag_ = static_cast<int*>(p);
    *stop_flag_ = 0;
    check_cuda(dev_.api().cuMemAllocHost(&p, launches * sizeof(int)), "cuMemAllocHost (the cut flags)");
    cut_flags_ = static_cast<int*>(p);
    std::memset(cut_flags_, 0, launches * sizeof(int));
}

void CudaRunner::request_stop() {
    if (stop_flag_) __atomic_store_n(stop_flag_, 1, __ATOMIC_RELEASE);
}

void CudaRunner::clear_stop() {
    if (stop_flag_) __atomic_store_n(stop_flag_, 0, __ATOMIC_RELEASE);
}

Status CudaRunner::resume_cut_launches() {
    for (;;) {
        size_t first = launches_.size();
        for (size_t i = 0; i < launches_.size() && first == launches_.size(); ++i)
            if (cut_slot_[i] >= 0 && __atomic_load_n(&cut_flags_[cut_slot_[i]], __ATOMIC_ACQUIRE)) first = i;
        if (first == launches_.size()) return Status();
        while (__atomic_load_n(stop_flag_, __ATOMIC_ACQUIRE))  // the real-time work runs
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        for (int slot : cut_slot_)
            if (slot >= 0) cut_flags_[slot] = 0;
        ++resumes_;
        Status s = enqueue_steps(nullptr, first);
        if (s.ok()) s = stream_.synchronize();
        if (!s.ok()) return s;
    }
}

void CudaRunner::load_modules() {
    for (const CudaKernelDesc& k : prog_->kernels) {
        CUmodule m = nullptr;
        check_cuda(dev_.api().cuModuleLoadData(&m, k.cubin.data()),
                   "loading the cubin of kernel " + k.description + " (built for sm_" + std::to_string(prog_->arch) +
                       ", this GPU is sm_" + std::to_string(dev_.arch()) + ")");
        modules_.push_back(m);
        functions_.emplace_back();
        for (const CudaEntry& e : k.entries) {
            CUfunction f = nullptr;
            check_cuda(dev_.api().cuModuleGetFunction(&f, m, e.name.c_str()), "kernel entry " + e.name);
            functions_.back().push_back(f);
        }
    }
}

void CudaRunner::allocate_buffers() {
    buffer_ptr_.assign(prog_->buffers.size(), nullptr);
    char* arena = nullptr;
    if (prog_->arena_bytes) {
        arena = static_cast<char*>(alloc_->allocate(prog_->arena_bytes, "the arena of the model's intermediates"));
        owned_.push_back({arena, prog_->arena_bytes});
    }
    for (size_t i = 0; i < prog_->buffers.size(); ++i) {
        const BufferDesc& b = prog_->buffers[i];
        if (b.arena_offset >= 0 && arena) {
            buffer_ptr_[i] = arena + b.arena_offset;
            continue;
        }
        const size_t bytes = b.nbytes();
        void* p = alloc_->allocate(bytes ? bytes : 1, b.name);
        owned_.push_back({p, bytes ? bytes : 1});
        buffer_ptr_[i] = p;
        if (b.role == BufferRole::kConstant && bytes) {
            KILN_CHECK(b.constant.defined() && b.constant.nbytes() == bytes, kInternal)
                << "bug in Kiln: constant '" << b.name << "' has no data of " << bytes << " bytes";
            dev_.copy(p, b.constant.data(), bytes);
        }
    }
}

void CudaRunner::prepare_launches() {
    int next_cut_slot = 0;  // cut flags in launch order
    for (const CudaStepDesc& s : prog_->steps) {
        if (!s.host_extern.empty() || s.host_program) {
            prepare_host_step(s);
            continue;
        }
        if (s.is_conv) {
            prepare_conv_step(s);
            continue;
        }
        if (s.kernel < 0) {  // cuBLAS: args A, B, out
            if (!cublas_) cublas_ = std::make_unique<CublasGemm>(dev_, prog_->tf32);
            Launch l{nullptr, 0, 0, {}, {}, "cuBLAS gemm of " + s.node_name, &s};
            for (int b : s.args) l.values.push_back(dptr(buffer_ptr_.at(b)));
            launches_.push_back(std::move(l));
            continue;
        }
        const CudaKernelDesc& k = prog_->kernels.at(s.kernel);
        std::vector<CUdeviceptr> values;
        for (int b : s.args) values.push_back(dptr(buffer_ptr_.at(b)));
        for (size_t j = 0; j < k.scratch_bytes.size(); ++j) {
            const std::string what = s.node_name + " scratch " + k.scratch_names[j];
            void* p = alloc_->allocate(k.scratch_bytes[j], what);
            owned_.push_back({p, k.scratch_bytes[j]});
            values.push_back(dptr(p));
        }
        for (size_t e = 0; e < k.entries.size(); ++e) {
            Launch l{functions_[s.kernel][e], k.entries[e].grid, k.entries[e].block, values, {},
                     k.entries[e].name + " of " + s.node_name + " (" + k.description + ")"};
            if (k.stoppable) {  // the stop flag, then this launch's cut flag
                l.values.push_back(dptr(stop_flag_));
                l.values.push_back(dptr(cut_flags_ + next_cut_slot));
                cut_slot_.resize(launches_.size(), -1);
                cut_slot_.push_back(next_cut_slot++);
            }
            launches_.push_back(std::move(l));
        }
    }
    if (conv_workspace_bytes_) {
        conv_workspace_ = alloc_->allocate(conv_workspace_bytes_, "the cuDNN workspace");
        owned_.push_back({conv_workspace_, conv_workspace_bytes_});
    }
    cut_slot_.resize(launches_.size(), -1);
    for (Launch& l : launches_)  // pointers into each launch's own (now final) values
        for (CUdeviceptr& v : l.values) l.params.push_back(&v);
}

void CudaRunner::prepare_conv_step(const CudaStepDesc& s) {
    if (!cudnn_) cudnn_ = std::make_unique<CudnnHandle>(dev_);
    const std::string what = "cuDNN convolution of " + s.node_name;
    constexpr size_t kMaxWorkspace = size_t{256} << 20;
    convs_.push_back(std::make_unique<CudnnConv>(*cudnn_, s.conv, prog_->tf32, kMaxWorkspace, what));
    conv_workspace_bytes_ = std::max(conv_workspace_bytes_, convs_.back()->workspace_bytes());
    Launch l{nullptr, 0, 0, {}, {}, what};
    l.conv = static_cast<int>(convs_.size()) - 1;
    for (int b : s.args) l.values.push_back(dptr(buffer_ptr_.at(b)));
    launches_.push_back(std::move(l));
}

void CudaRunner::prepare_host_step(const CudaStepDesc& s) {
    HostStep h{&s, nullptr, nullptr, {}};
    std::vector<ExternArg> types;
    for (int b : s.args) {
        const BufferDesc& d = prog_->buffers.at(b);
        h.args.emplace_back(d.dtype, d.shape);
        types.push_back({d.dtype, d.shape, d.role == BufferRole::kConstant ? d.constant.data() : nullptr});
    }
    std::string what;
    if (s.host_program) {
        h.program = std::make_unique<SequentialExecutor>(s.host_program, nullptr, host_alloc_.get());
        what = "CPU step " + s.node_name + " (a CPU program)";
    } else {
        ExternKernelFactory make = find_extern_kernel(s.host_extern);
        KILN_CHECK(make != nullptr, kUnsupported) << "step " << s.node_name << ": no CPU kernel '" << s.host_extern << "'";
        h.kernel = make(ExternParams(s.host_params), types);
        KILN_CHECK(h.kernel != nullptr, kUnsupported) << "step " << s.node_name << ": CPU kernel '" << s.host_extern
                                                      << "' refused its arguments";
        what = "CPU step " + s.node_name + " (" + s.host_extern + ")";
    }
    hosts_.push_back(std::move(h));
    Launch l{nullptr, 0, 0, {}, {}, what};
    l.host = static_cast<int>(hosts_.size()) - 1;
    launches_.push_back(std::move(l));
}

/// Runs fn over [0, n) on the calling thread (a host step's kernel env: no pool).
static void serial_for(void*, int64_t n, kiln_task_fn fn, void* ctx) {
    if (n > 0) fn(0, n, ctx);
}

Status CudaRunner::run_host_step(HostStep& h) {
    const std::vector<int>& args = h.step->args;
    const size_t nin = static_cast<size_t>(h.step->num_inputs);
    for (size_t i = 0; i < nin; ++i) {  // copies in, then the one wait the CPU step needs
        Status s = copy_to_host_async(dev_, h.args[i].data(), buffer_ptr_[args[i]], h.args[i].nbytes(), stream_);
        if (!s.ok()) return s;
    }
    Status s = stream_.synchronize();
    if (!s.ok()) return s;
    if (h.program) {
        std::vector<Tensor> outs;
        s = h.program->run(std::vector<Tensor>(h.args.begin(), h.args.begin() + static_cast<std::ptrdiff_t>(nin)), outs);
        for (size_t i = nin; i < args.size() && s.ok(); ++i) h.args[i] = outs.at(i - nin);
    } else {
        std::vector<void*> ptrs;
        for (Tensor& t : h.args) ptrs.push_back(t.data());
        const kiln_kernel_env env{nullptr, serial_for, nullptr};
        s = h.kernel->run(ptrs.data(), env, 1);
    }
    if (!s.ok()) return Status(s.kind(), s.message() + " (CPU step " + h.step->node_name + ")");
    for (size_t i = nin; i < args.size() && s.ok(); ++i)  // pageable source: staged by the driver before returning
        s = copy_to_device_async(dev_, buffer_ptr_[args[i]], h.args[i].data(), h.args[i].nbytes(), stream_);
    return s;
}

Status CudaRunner::run_gemm(const Launch& l) {
    const CudaGemmDesc& g = l.gemm->gemm;
    if (g.init >= 0) {
        const size_t bytes = prog_->buffers.at(g.init).nbytes();
        CUresult r = dev_.api().cuMemcpyDtoDAsync(l.values[2], dptr(buffer_ptr_.at(g.init)), bytes, stream_.get());
        if (r != 0) return cuda_status(r, "initializing the output of " + l.what);
    }
    auto f = [](CUdeviceptr p) { return reinterpret_cast<void*>(p); };
    Status s = cublas_->gemm(stream_, g, f(l.values[0]), f(l.values[1]), f(l.values[2]));
    if (!s.ok()) return Status(s.kind(), s.message() + " (" + l.what + ")");
    return s;
}

Status CudaRunner::run_conv(const Launch& l) {
    auto f = [](CUdeviceptr p) { return reinterpret_cast<void*>(p); };
    return convs_[l.conv]->enqueue(f(l.values[0]), f(l.values[1]), f(l.values[2]), conv_workspace_);
}

Status CudaRunner::enqueue_steps(std::vector<std::unique_ptr<CudaEvent>>* step_ends, size_t from) {
    if (cudnn_) {
        Status s = cudnn_->set_stream(stream_);
        if (!s.ok()) return s;
    }
    for (size_t i = from; i < launches_.size(); ++i) {
        if (step_ends && i > 0) {  // the previous launch's end
            Status s = (*step_ends)[i - 1]->record(stream_);
            if (!s.ok()) return s;
        }
        Launch& l = launches_[i];
        if (l.conv >= 0) {
            Status s = run_conv(l);
            if (!s.ok()) return s;
            continue;
        }
        if (l.host >= 0) {
            Status s = run_host_step(hosts_[l.host]);
            if (!s.ok()) return s;
            continue;
        }
        if (l.gemm) {
            Status s = run_gemm(l);
            if (!s.ok()) return s;
            continue;
        }
        CUresult r = dev_.api().cuLaunchKernel(l.fn, l.grid, 1, 1, l.block, 1, 1, 0, stream_.get(), l.params.data(), nullptr);
        if (r != 0) return cuda_status(r, "launching " + l.what);
    }
    if (step_ends && !launches_.empty()) return step_ends->back()->record(stream_);
    return Status();
}

Status CudaRunner::profile_steps(const std::vector<Tensor>& inputs, std::vector<std::pair<std::string, float>>& steps) {
    std::vector<Tensor> outputs;
    Status s = run(inputs, outputs);  // the inputs in place (and a warm-up)
    if (!s.ok()) return s;
    try {
        std::vector<std::unique_ptr<CudaEvent>> ends;
        for (size_t i = 0; i < launches_.size(); ++i) ends.push_back(std::make_unique<CudaEvent>(dev_));
        s = kernels_start_.record(stream_);
        if (s.ok()) s = enqueue_steps(&ends);
        if (s.ok()) s = stream_.synchronize();
        if (!s.ok()) return s;
        steps.clear();
        for (size_t i = 0; i < launches_.size(); ++i)
            steps.emplace_back(launches_[i].what, CudaEvent::elapsed_ms(i == 0 ? kernels_start_ : *ends[i - 1], *ends[i]));
    } catch (const Error& e) {
        return Status::from(e);
    }
    return Status();
}

Status CudaRunner::enqueue_graph() {
    const DriverApi& api = dev_.api();
    if (!api.has_graphs()) return Status(ErrorKind::kUnsupported, "this CUDA driver has no graph capture");
    if (!hosts_.empty()) return Status(ErrorKind::kUnsupported, "the model has steps placed on the CPU");
    if (!graph_exec_) {
        Status s = cuda_status(api.cuStreamBeginCapture(stream_.get(), kCaptureModeThreadLocal), "cuStreamBeginCapture");
        if (!s.ok()) return s;
        Status e = enqueue_steps();
        Status end = cuda_status(api.cuStreamEndCapture(stream_.get(), &graph_), "cuStreamEndCapture");
        if (!e.ok()) return e;
        if (!end.ok()) return end;
        s = cuda_status(api.cuGraphInstantiate(&graph_exec_, graph_, 0), "cuGraphInstantiate");
        if (!s.ok()) return s;
    }
    return cuda_status(api.cuGraphLaunch(graph_exec_, stream_.get()), "cuGraphLaunch");
}

Status CudaRunner::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
    dev_.make_current();
    if (inputs.size() != prog_->inputs.size())
        return Status(ErrorKind::kInvalidArgument, "expected " + std::to_string(prog_->inputs.size()) + " inputs, got " +
                                                       std::to_string(inputs.size()));
    size_t in_bytes = 0, out_bytes = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const BufferDesc& b = prog_->buffers[prog_->inputs[i]];
        if (inputs[i].dtype() != b.dtype || inputs[i].shape() != b.shape)
            return Status(ErrorKind::kInvalidArgument, "input '" + b.name + "': expected " + dtype_name(b.dtype) +
                                                           shape_str(b.shape) + ", got " + dtype_name(inputs[i].dtype()) +
                                                           shape_str(inputs[i].shape()));
        in_bytes += b.nbytes();
    }
    for (int o : prog_->outputs) out_bytes += prog_->buffers[o].nbytes();
    try {
        char* in_stage = static_cast<char*>(staging_in_.reserve(in_bytes));
        char* out_stage = static_cast<char*>(staging_out_.reserve(out_bytes));
        Status s = start_.record(stream_);
        for (size_t i = 0, at = 0; s.ok() && i < inputs.size(); ++i) {
            const size_t n = prog_->buffers[prog_->inputs[i]].nbytes();
            if (n) std::memcpy(in_stage + at, inputs[i].data(), n);
            s = copy_to_device_async(dev_, buffer_ptr_[prog_->inputs[i]], in_stage + at, n, stream_);
            at += n;
        }
        if (s.ok()) s = kernels_start_.record(stream_);
        if (s.ok() && use_graph_ && preemptible())
            s = Status(ErrorKind::kUnsupported, "a preemptible program is not replayed as a CUDA graph");
        if (s.ok()) s = use_graph_ ? enqueue_graph() : enqueue_steps();
        if (s.ok() && preemptible()) {  // a cut run waits for clear_stop() and resumes
            s = stream_.synchronize();
            if (s.ok()) s = resume_cut_launches();
        }
        if (s.ok()) s = kernels_end_.record(stream_);
        for (size_t i = 0, at = 0; s.ok() && i < prog_->outputs.size(); ++i) {
            const size_t n = prog_->buffers[prog_->outputs[i]].nbytes();
            s = copy_to_host_async(dev_, out_stage + at, buffer_ptr_[prog_->outputs[i]], n, stream_);
            at += n;
        }
        if (s.ok()) s = end_.record(stream_);
        if (s.ok()) s = stream_.synchronize();  // the run's one host synchronization
        if (!s.ok()) return s;
        outputs.clear();
        for (size_t i = 0, at = 0; i < prog_->outputs.size(); ++i) {
            const BufferDesc& b = prog_->buffers[prog_->outputs[i]];
            Tensor t(b.dtype, b.shape);
            if (b.nbytes()) std::memcpy(t.data(), out_stage + at, b.nbytes());
            at += b.nbytes();
            outputs.push_back(std::move(t));
        }
        timing_ = {CudaEvent::elapsed_ms(kernels_start_, kernels_end_), CudaEvent::elapsed_ms(start_, end_)};
    } catch (const Error& e) {
        return Status::from(e);
    }
    return Status();
}

std::string CudaRunner::resource_report() const {
    std::ostringstream os;
    for (size_t k = 0; k < functions_.size(); ++k)
        for (size_t e = 0; e < functions_[k].size(); ++e) {
            int regs = -1, smem = -1;
            dev_.api().cuFuncGetAttribute(&regs, kFuncAttrNumRegs, functions_[k][e]);
            dev_.api().cuFuncGetAttribute(&smem, kFuncAttrSharedSizeBytes, functions_[k][e]);
            const CudaEntry& ce = prog_->kernels[k].entries[e];
            os << prog_->kernels[k].description << " " << ce.name << ": grid " << ce.grid << " x block " << ce.block
               << ", " << regs << " registers, " << smem << " B shared\n";
        }
    return os.str();
}

}  // namespace kiln::runtime::cuda
