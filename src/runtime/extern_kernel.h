// Extern kernels: a step computed by a vendor library (oneDNN on CPU) instead of generated code.
//
// The compiler names the kernel (KernelDesc::extern_name) and describes what it computes in a
// parameter string (KernelDesc::extern_params, `key=value` pairs, see ExternParams). When the
// Executable loads, the named factory builds one ExternKernel per step from the parameters and
// the step's argument types; the factory sees the data of constant arguments (weights) so that it
// can pack them once into the library's preferred layout. Runs never throw: they return Status.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/kernel_abi.h"
#include "support/status.h"
#include "support/tensor.h"

namespace kiln::runtime {

/// One argument of an extern step (inputs, then outputs): its type and, for a constant buffer,
/// its data (nullptr otherwise).
struct ExternArg {
    DType dtype = DType::kFloat32;
    Shape shape;
    const void* constant = nullptr;
    /// A step on symbolic shapes (KernelDesc::takes_dims): per axis, the index of the step's dim
    /// it is (StepDesc::dims order), -1 for a static axis; empty for a static step.
    std::vector<int> dim_of;
};

/// A parsed parameter string: `key=value;key=value` (values have no ';' or '='). A missing key
/// or a malformed number is a kInvalidModel error naming the key.
class ExternParams {
public:
    explicit ExternParams(const std::string& text);
    bool has(const std::string& key) const { return kv_.count(key) > 0; }
    const std::string& str(const std::string& key) const;
    int64_t integer(const std::string& key) const;
    int64_t integer_or(const std::string& key, int64_t fallback) const;
    std::vector<int64_t> ints(const std::string& key) const;  // comma-separated
    std::vector<std::string> list(const std::string& key) const;  // comma-separated words
    /// The non-empty pieces of `s` between `sep`s (a list value's items, a post-op's fields).
    static std::vector<std::string> split(const std::string& s, char sep);
    /// Writes pairs back in the same form.
    static std::string format(const std::vector<std::pair<std::string, std::string>>& pairs);

private:
    std::map<std::string, std::string> kv_;
};

class ExternKernel {
public:
    virtual ~ExternKernel() = default;
    /// Computes the step on `args` (data pointers, inputs then outputs) on the caller's thread
    /// and the intra-op pool of `env` (`threads` of them, the caller's included). Never throws.
    virtual Status run(void* const* args, const kiln_kernel_env& env, int threads) = 0;
    /// The same on symbolic shapes: `dims` are the values of the step's dims (StepDesc::dims
    /// order, all of them). Only kernels made for a step that takes dims (extern_at_shapes.h).
    virtual Status run_at(void* const* args, const int64_t* dims, const kiln_kernel_env& env, int threads) {
        (void)args, (void)dims, (void)env, (void)threads;
        return Status(ErrorKind::kInternal, "bug in Kiln: this extern kernel takes no dims");
    }
    /// Makes now what the first run on `threads` threads would make (oneDNN's primitives and
    /// weight copies), so that the run finds it ready; run_at's `dims` for a kernel that takes
    /// them. Never throws: what cannot be made is left to the run, which reports it. Default:
    /// nothing to make.
    virtual void prepare(int threads) { (void)threads; }
    virtual void prepare_at(const int64_t* dims, int threads) { (void)dims, (void)threads; }
};

using ExternKernelFactory = std::unique_ptr<ExternKernel> (*)(const ExternParams& params,
                                                              const std::vector<ExternArg>& args);

/// The factory of extern kernel `name` ("dnnl_conv", "dnnl_matmul", "dnnl_conv_bwd", "kiln_rnn",
/// "kiln_topk", "kiln_cumsum", "kiln_scatternd", "kiln_qadd", "kiln_qmaxpool", "kiln_maxpool", "kiln_maxpool_grad", "kiln_softmax", "kiln_attention",
/// "kiln_bn_train", "kiln_bn_grad"), nullptr when
/// unknown or when
/// its library is not built into this runtime.
ExternKernelFactory find_extern_kernel(const std::string& name);

/// Whether Kiln was built with oneDNN.
bool have_dnnl();

/// oneDNN's implementation (its impl_info_str, e.g. "jit:avx512_core", "ref:any") of extern
/// kernel `name` with parameter text `params` on one thread, made without running it; "" when
/// oneDNN rejects it, or for a kernel other than dnnl_conv, dnnl_qconv and dnnl_conv_bwd.
std::string dnnl_implementation(const std::string& name, const std::string& params);

}  // namespace kiln::runtime
