#include "distributed/partitioned_run.h"

#include "compiler/compile.h"
#include "compiler/model_compile_options.h"
#include "distributed/microbatch.h"
#include "support/error.h"

namespace kiln::distributed {
TensorInfo tensor_info_of(const ir::Value& v) {
    TensorInfo t;
    t.name = v.name();
    t.dtype = v.type().dtype;
    t.kind = static_cast<ValueKind>(v.type().kind);  // same order as ir::TypeKind
    for (const ir::Dim& d : v.type().shape) {
        t.shape.push_back(d.is_static() ? d.value : -1);
        t.symbols.push_back(d.is_static() ? "" : d.symbol);
    }
    return t;
}

PartitionedModel::PartitionedModel(ir::Graph g, const PartitionOptions& popts, const SessionOptions& opts,
                                   int only_rank, const ShipFn& ship)
    : runner_(std::make_unique<runtime::ModelRunner>(runtime::runner_options(opts))) {
    for (const ir::Value* v : g.inputs()) inputs_.push_back(tensor_info_of(*v));
    for (const ir::Value* v : g.outputs()) outputs_info_.push_back(tensor_info_of(*v));
    Partition p = partition_model(g, opts.dims, popts, opts.opt_level);
    report_ = partition_report(p);
    transfers_ = p.transfers;
    outputs_ = p.outputs;
    run_order_ = p.run_order;
    KILN_CHECK(only_rank < static_cast<int>(p.ranks.size()), kInvalidArgument)
        << "rank " << only_rank << " of a model partitioned over " << p.ranks.size() << " ranks";
    KILN_CHECK(!ship || only_rank >= 0, kInvalidArgument) << "a master ships the ranks it does not run itself";
    ranks_.resize(p.ranks.size());
    // The other ranks' graphs leave first, so the workers compile while this rank does.
    if (ship)
        for (RankGraph& rg : p.ranks)
            if (rg.rank != only_rank) {
                for (const ir::Value* v : rg.graph.inputs()) ranks_[rg.rank].model_inputs.push_back(v->name());
                ship(std::move(rg));
            }
    const compiler::CompileOptions copts = compile_options(opts);
    for (RankGraph& rg : p.ranks)
        if (!ship || rg.rank == only_rank) add_rank(std::move(rg), only_rank < 0 || rg.rank == only_rank, copts);
}

PartitionedModel::PartitionedModel(RankGraph mine, int num_ranks, const SessionOptions& opts)
    : runner_(std::make_unique<runtime::ModelRunner>(runtime::runner_options(opts))) {
    KILN_CHECK(mine.rank >= 0 && mine.rank < num_ranks, kInvalidArgument)
        << "rank " << mine.rank << " of a model partitioned over " << num_ranks << " ranks";
    for (const ir::Value* v : mine.graph.inputs()) inputs_.push_back(tensor_info_of(*v));
    for (const ir::Value* v : mine.graph.outputs()) {
        outputs_info_.push_back(tensor_info_of(*v));
        outputs_.push_back(OutputPlace{mine.rank, v->name()});
    }
    ranks_.resize(static_cast<size_t>(num_ranks));
    add_rank(std::move(mine), true, compile_options(opts));
}

compiler::CompileOptions PartitionedModel::compile_options(const SessionOptions& opts) const {
    compiler::CompileOptions copts = compiler::compile_options_for(opts, runner_->stats().intra_op_threads);
    copts.plan_for_concurrency = runner_->plans_for_concurrency();
    return copts;
}

void PartitionedModel::add_rank(RankGraph rg, bool compile, const compiler::CompileOptions& copts) {
    Rank& r = ranks_[static_cast<size_t>(rg.rank)];
    for (const ir::Value* v : rg.graph.inputs()) r.model_inputs.push_back(v->name());
    r.lowered = lower_transfers(std::move(rg.graph));
    const std::vector<ir::Value*>& ins = r.lowered.graph.inputs();
    for (size_t i = 0; i < ins.size(); ++i)
        if (!r.lowered.input_keys[i].empty()) r.key_of_input[ins[i]->name()] = r.lowered.input_keys[i];
    for (const ir::Value* v : r.lowered.graph.outputs()) r.output_names.push_back(v->name());
    if (compile && !r.lowered.graph.outputs().empty()) {  // a rank with nothing to send or return runs nothing
        compiler::CompiledModel m = compiler::compile(r.lowered.graph, copts);
        kernels_ += m.stats.kernels;
        r.prepared = runner_->prepare(m.executable);
    }
}

const std::vector<std::string>& PartitionedModel::model_inputs_of(int rank) const {
    KILN_CHECK(rank >= 0 && rank < num_ranks(), kInvalidArgument)
        << "rank " << rank << " of a model partitioned over " << num_ranks() << " ranks";
    return ranks_[static_cast<size_t>(rank)].model_inputs;
}

PartitionedModel::~PartitionedModel() = default;

std::vector<Tensor> PartitionedModel::run_rank(Rank& r, const std::map<std::string, Tensor>& feeds,
                                               const RecvFn& recv, const SendFn& send) {
    const runtime::Executable& exe = *r.prepared->exe;
    std::vector<Tensor> inputs;
    for (int id : exe.inputs) {
        const std::string& name = exe.buffers[id].name;
        auto key = r.key_of_input.find(name);
        if (key != r.key_of_input.end()) {
            inputs.push_back(recv(parse_transfer_key(key->second)));
            continue;
        }
        auto feed = feeds.find(name);
        KILN_CHECK(feed != feeds.end(), kInvalidArgument) << "missing input '" << name << "'";
        inputs.push_back(feed->second);
    }
    std::vector<Tensor> outputs;
    runner_->run(*r.prepared, inputs, outputs, runtime::RunControls{}).throw_if_error();
    KILN_CHECK(outputs.size() == r.lowered.output_keys.size(), kInternal)
        << "bug in Kiln: a rank graph has " << r.lowered.output_keys.size() << " outputs, its executable "
        << outputs.size();
    for (size_t i = 0; i < outputs.size(); ++i)
        for (const std::string& key : r.lowered.output_keys[i]) send(parse_transfer_key(key), outputs[i]);
    return outputs;
}

size_t PartitionedModel::output_index(const OutputPlace& o) const {
    const Rank& r = ranks_[o.rank];
    size_t i = 0;
    while (i < r.lowered.model_outputs && r.output_names[i] != o.value) ++i;
    KILN_CHECK(i < r.lowered.model_outputs, kInternal) << "bug in Kiln: model output '" << o.value << "' not on rank "
                                                       << o.rank;
    return i;
}

namespace {

/// The feeds of each microbatch (the feeds themselves for one).
std::vector<std::map<std::string, Tensor>> microbatch_feeds(const std::map<std::string, Tensor>& feeds, int parts) {
    if (parts == 1) return {feeds};
    return split_microbatches(feeds, parts);
}

}  // namespace

std::vector<std::string> PartitionedModel::output_names() const {
    std::vector<std::string> names;
    for (const TensorInfo& t : outputs_info_) names.push_back(t.name);
    return names;
}

std::vector<Tensor> PartitionedModel::run(const std::map<std::string, Tensor>& feeds, int microbatches) {
    std::vector<std::vector<Tensor>> parts;
    for (const std::map<std::string, Tensor>& micro : microbatch_feeds(feeds, microbatches)) {
        const int64_t step = next_step_++;
        LocalRendezvous rv;
        const RecvFn recv = [&](const TransferKey& k) { return rv.recv(k.at_step(step).to_string()); };
        const SendFn send = [&](const TransferKey& k, const Tensor& t) { rv.send(k.at_step(step).to_string(), t); };
        std::vector<std::vector<Tensor>> rank_outputs(ranks_.size());
        for (int r : run_order_)
            if (ranks_[r].prepared) rank_outputs[r] = run_rank(ranks_[r], micro, recv, send);
        KILN_CHECK(rv.pending() == 0, kInternal) << "bug in Kiln: " << rv.pending() << " transfers sent but never received";
        std::vector<Tensor> outs;
        for (const OutputPlace& o : outputs_) outs.push_back(rank_outputs[o.rank].at(output_index(o)));
        parts.push_back(std::move(outs));
    }
    return join_microbatches(parts, output_names());
}

std::vector<Tensor> PartitionedModel::run_mpi(const std::map<std::string, Tensor>& feeds, Rendezvous& rv, int rank,
                                              int microbatches) {
    KILN_CHECK(rank >= 0 && rank < num_ranks(), kInvalidArgument)
        << "rank " << rank << " of a model partitioned over " << num_ranks() << " ranks";
    // The model outputs meet on rank 0, each under a key of its own ("output:NAME").
    auto output_key = [](const OutputPlace& o, int64_t step) {
        TransferKey k;
        k.src_rank = o.rank;
        k.dst_rank = 0;
        k.tensor = "output:" + o.value;
        return k.at_step(step);
    };
    // Every microbatch's stage first: sends never block, so rank r runs microbatch m + 1 while
    // rank r + 1 runs m (a GPipe forward); rank 0 collects the outputs at the end.
    std::vector<int64_t> steps;
    std::vector<std::vector<Tensor>> mine;
    for (const std::map<std::string, Tensor>& micro : microbatch_feeds(feeds, microbatches)) {
        const int64_t step = next_step_++;
        const RecvFn recv = [&](const TransferKey& k) { return rv.recv(k.at_step(step)); };
        const SendFn send = [&](const TransferKey& k, const Tensor& t) { rv.send(k.at_step(step), t); };
        steps.push_back(step);
        mine.push_back(ranks_[rank].prepared ? run_rank(ranks_[rank], micro, recv, send) : std::vector<Tensor>{});
        if (rank == 0) continue;
        for (const OutputPlace& o : outputs_)
            if (o.rank == rank) rv.send(output_key(o, step), mine.back().at(output_index(o)));
    }
    if (rank != 0) return {};
    std::vector<std::vector<Tensor>> parts;
    for (size_t m = 0; m < steps.size(); ++m) {
        std::vector<Tensor> outs;
        for (const OutputPlace& o : outputs_)
            outs.push_back(o.rank == 0 ? mine[m].at(output_index(o)) : rv.recv(output_key(o, steps[m])));
        parts.push_back(std::move(outs));
    }
    return join_microbatches(parts, output_names());
}

}  // namespace kiln::distributed
