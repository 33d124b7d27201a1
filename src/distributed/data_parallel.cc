// Data-parallel steps (data_parallel.h).
#include "distributed/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "distributed/agreement.h"
#include "distributed/bucket_launcher.h"
#include "distributed/collectives.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

double env_number(const char* name, double fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    char* end = nullptr;
    double x = std::strtod(v, &end);
    KILN_CHECK(end && *end == '\0' && x >= 0, kInvalidArgument) << name << ": expected a non-negative number, got '" << v << "'";
    return x;
}

bool env_flag(const char* name, bool fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    return std::strcmp(v, "0") != 0;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

DataParallelOptions DataParallelOptions::from_env() {
    DataParallelOptions o;
    o.skip_allreduce = env_flag("KILN_DIST_BENCH_NO_ALLREDUCE", false);
    o.overlap = env_flag("KILN_DIST_OVERLAP", true);
    const double mb = env_number("KILN_DIST_BUCKET_MB", static_cast<double>(o.bucket_bytes) / (1 << 20));
    o.bucket_bytes = static_cast<size_t>(mb * (1 << 20));
    const char* ct = std::getenv("KILN_DIST_COMM_THREAD");
    if (ct && *ct && std::string(ct) != "auto") o.comm_thread = env_flag("KILN_DIST_COMM_THREAD", true) ? 1 : 0;
    return o;
}

bool DataParallelOptions::use_comm_thread(const Communicator& comm) const {
    if (comm_thread >= 0) return comm_thread == 1;
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int threads = compute_threads > 0 ? compute_threads : cores;
    return comm.local_size() * threads < cores;
}

DataParallel::DataParallel(Communicator& comm, TrainingSession& session, DataParallelOptions opts)
    : comm_(comm), session_(session), opts_(opts) {
    if (opts_.sync_batch_norm) sync_bn_ = std::make_unique<SyncBatchNormGradients>(comm_, session_);
}

DataParallel::~DataParallel() = default;

void DataParallel::broadcast_parameters() {
    std::vector<NamedTensor> params;
    for (const std::string& name : session_.parameter_names()) params.push_back({name, session_.parameter(name).clone()});
    broadcast(comm_, params, 0);
    if (comm_.rank() != 0)
        for (const NamedTensor& p : params) session_.set_parameter(p.name, p.tensor);
}

// Buckets in reverse parameter order (the order backward produces gradients), each up to
// bucket_bytes (a larger gradient goes alone); the loss (f64) joins the last, which starts after
// the backward pass anyway (it holds the first parameters' gradients).
void DataParallel::plan_buckets() {
    buckets_.assign(1, {});
    // Synchronized BatchNorm's statistics first: a rank that differs there (sync off, other
    // channels) is named before any collective of the forward pass.
    descriptions_ = sync_bn_ ? sync_bn_->descriptions() : std::vector<std::string>{};
    slot_.clear();
    size_t bytes = 0;
    const std::vector<std::string> names = session_.parameter_names();
    for (auto it = names.rbegin(); it != names.rend(); ++it) {
        const Tensor p = session_.parameter(*it);
        if (bytes > 0 && bytes + p.nbytes() > opts_.bucket_bytes) buckets_.emplace_back(), bytes = 0;
        slot_[*it] = {buckets_.size() - 1, buckets_.back().size()};
        buckets_.back().push_back("grad/" + *it);
        bytes += p.nbytes();
        descriptions_.push_back("bucket " + std::to_string(buckets_.size() - 1) + ": " +
                                describe({"grad/" + *it, Tensor(p.dtype(), p.shape())}));
    }
    buckets_.back().push_back("loss");
    descriptions_.push_back("bucket " + std::to_string(buckets_.size() - 1) + ": loss f64[]");
}

double DataParallel::step(const std::map<std::string, Tensor>& batch) {
    if (buckets_.empty()) plan_buckets();
    const bool reduce = !opts_.skip_allreduce;
    // One check for every bucket of the step, before any starts: a rank whose model differs is
    // an error naming the rank and the tensor, not a mismatched collective in the backward pass.
    if (reduce && comm_.options().check_agreement) check_agreement(comm_, "data-parallel step", descriptions_);
    std::vector<size_t> sizes;
    for (const auto& b : buckets_) sizes.push_back(b.size());
    BucketLauncher launcher(comm_, sizes, reduce, opts_.use_comm_thread(comm_));
    auto put = [&](const std::string& name, const Tensor& g) {
        auto s = slot_.find(name);
        if (s != slot_.end()) launcher.put(s->second.first, s->second.second, {"grad/" + name, g}, true);
    };
    const auto t0 = std::chrono::steady_clock::now();
    double loss = 0;
    const bool synchronized = sync_bn_ && !sync_bn_->layers().empty();
    std::map<std::string, Tensor> grads = synchronized ? sync_bn_->gradients(batch, &loss)
                                          : opts_.overlap ? session_.gradients_as_ready(batch, &loss, put)
                                                          : session_.gradients(batch, &loss);
    stats_ = {};
    stats_.synchronized_batch_norms = synchronized ? static_cast<int>(sync_bn_->layers().size()) : 0;
    stats_.backward_s = seconds_since(t0);
    const size_t started_in_backward = launcher.started();
    for (const auto& [name, s] : slot_) {  // gradients not reported (overlap off)
        auto g = grads.find(name);
        KILN_CHECK(g != grads.end(), kInternal) << "bug in Kiln: the session returned no gradient for '" << name << "'";
        if (!launcher.has(s.first, s.second)) put(name, g->second);
    }
    Tensor loss_t(DType::kFloat64, {});
    *loss_t.data_as<double>() = loss;
    launcher.put(buckets_.size() - 1, buckets_.back().size() - 1, {"loss", loss_t}, false);
    const auto t1 = std::chrono::steady_clock::now();
    launcher.finish();  // the gradients in `grads` are reduced in place (shared storage)
    stats_.wait_s = seconds_since(t1);
    stats_.buckets = static_cast<int>(buckets_.size());
    stats_.gradients = static_cast<int>(slot_.size());
    stats_.reported_at_start = launcher.reported_at_start();
    for (size_t b = 0; b < started_in_backward; ++b)
        stats_.started_during_backward += stats_.reported_at_start[b] < stats_.gradients;
    session_.apply_gradients(grads);
    return *loss_t.data_as<double>();
}

}  // namespace kiln::distributed
