// ExternAtShapes (extern_at_shapes.h): an extern kernel made per run-time shape, cached.
#include "runtime/extern_at_shapes.h"

#include <algorithm>
#include <set>

#include "runtime/extern_shape_params.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

/// `base` (key=value;...) with the keys of `over` replaced, and those it lacks appended.
std::string merged(const std::string& base, const ParamPairs& over) {
    ParamPairs out;
    std::set<std::string> replaced;
    for (const std::string& kv : ExternParams::split(base, ';')) {
        const size_t eq = kv.find('=');
        const std::string key = kv.substr(0, eq);
        auto it = std::find_if(over.begin(), over.end(), [&](const auto& p) { return p.first == key; });
        if (it != over.end()) replaced.insert(key);
        out.push_back(it != over.end() ? *it : std::make_pair(key, eq == std::string::npos ? "" : kv.substr(eq + 1)));
    }
    for (const auto& p : over)
        if (!replaced.count(p.first)) out.push_back(p);
    return ExternParams::format(out);
}

}  // namespace

ExternAtShapes::ExternAtShapes(std::string name, ExternKernelFactory factory, std::string params,
                               std::vector<ExternArg> args, size_t num_dims, size_t capacity)
    : name_(std::move(name)),
      factory_(factory),
      params_(std::move(params)),
      args_(std::move(args)),
      capacity_(std::max<size_t>(capacity, 1)),
      num_dims_(num_dims) {
    KILN_CHECK(factory_, kInternal) << "bug in Kiln: ExternAtShapes of '" << name_ << "' without a factory";
    KILN_CHECK(extern_takes_shapes(name_), kUnsupported)
        << "extern kernel '" << name_ << "' cannot run on symbolic shapes (only dnnl_conv can)";
    for (const ExternArg& a : args_) {
        KILN_CHECK(a.dim_of.empty() || a.dim_of.size() == a.shape.size(), kInternal)
            << "bug in Kiln: an argument of '" << name_ << "' has " << a.dim_of.size() << " dim indices for rank "
            << a.shape.size();
        for (int d : a.dim_of)
            KILN_CHECK(d < static_cast<int>(num_dims_), kInvalidModel)
                << name_ << ": an argument axis names dim " << d << " of the step's " << num_dims_;
    }
}

Status ExternAtShapes::run(void* const* args, const kiln_kernel_env& env, int threads) {
    (void)args, (void)env, (void)threads;
    return Status(ErrorKind::kInternal, "bug in Kiln: " + name_ + " on symbolic shapes was called without dims");
}

Status ExternAtShapes::run_at(void* const* args, const int64_t* dims, const kiln_kernel_env& env, int threads) {
    try {
        const std::shared_ptr<ExternKernel> k = kernel_at(std::vector<int64_t>(dims, dims + num_dims_));
        return k ? k->run(args, env, threads) : Status::ok_status();
    } catch (const Error& e) {
        return Status::from(e);
    }
}

void ExternAtShapes::prepare_at(const int64_t* dims, int threads) {
    try {
        if (const std::shared_ptr<ExternKernel> k = kernel_at(std::vector<int64_t>(dims, dims + num_dims_)))
            k->prepare(threads);
    } catch (...) {  // left to the run, whose error names the node
    }
}

std::shared_ptr<ExternKernel> ExternAtShapes::kernel_at(const std::vector<int64_t>& dims) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
        if (it->dims != dims) continue;
        lru_.splice(lru_.begin(), lru_, it);  // most recently used first
        return lru_.front().kernel;
    }
    // Made under the lock: concurrent first runs at one shape make it once (oneDNN's primitive
    // creation takes milliseconds; runs at held shapes wait for it, which is rare and short).
    lru_.push_front({dims, make_at(dims)});
    ++made_;
    if (lru_.size() > capacity_) lru_.pop_back();  // a run still using it holds its shared_ptr
    return lru_.front().kernel;
}

std::shared_ptr<ExternKernel> ExternAtShapes::make_at(const std::vector<int64_t>& dims) const {
    std::vector<ExternArg> args = args_;
    std::vector<Shape> shapes;
    for (ExternArg& a : args) {
        for (size_t k = 0; k < a.dim_of.size(); ++k)
            if (a.dim_of[k] >= 0) {
                KILN_CHECK(dims[static_cast<size_t>(a.dim_of[k])] >= 0, kInvalidArgument)
                    << name_ << ": dimension " << a.dim_of[k] << " is negative";
                a.shape[k] = dims[static_cast<size_t>(a.dim_of[k])];
            }
        a.dim_of.clear();
        shapes.push_back(a.shape);
    }
    const std::optional<ParamPairs> pairs = extern_shape_pairs(name_, ExternParams(params_), shapes);
    if (!pairs) return nullptr;
    return std::shared_ptr<ExternKernel>(factory_(ExternParams(merged(params_, *pairs)), args));
}

size_t ExternAtShapes::made() const {
    std::lock_guard<std::mutex> lock(mu_);
    return made_;
}

size_t ExternAtShapes::held() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lru_.size();
}

}  // namespace kiln::runtime
