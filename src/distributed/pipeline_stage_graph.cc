// build_pipeline_stages (pipeline_stage_graph.h).
#include "distributed/pipeline_stage_graph.h"

#include <algorithm>
#include <set>

#include "autodiff/differentiate.h"
#include "compiler/compile.h"
#include "distributed/lower_transfers.h"
#include "distributed/partition.h"
#include "distributed/partition_model.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/model_initializers.h"
#include "pass/eliminate_dead_code.h"
#include "pass/infer_shapes.h"
#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::distributed {
namespace {

Tensor filled(const ir::TensorType& t, double v) {
    Tensor x(t.dtype, t.static_shape());
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, v);
    return x;
}

/// The model in its training form with the loss's output as its only output (file comment);
/// fills `initial` with the parameters' values and `params` with their names.
ir::Graph training_form(const PipelineTrainingSpec& spec, std::vector<std::string>& params,
                        std::map<std::string, Tensor>& initial) {
    ir::Graph g = frontend::import_onnx_file(spec.onnx_path);
    compiler::bind_input_shapes(g, spec.dims);
    pass::infer_shapes(g, compiler::pass_context());
    autodiff::check_loss(g, spec.loss);
    for (const ir::Node* n : g.nodes())
        KILN_CHECK(n->op() != "BatchNormalization", kUnsupported)
            << "pipeline-parallel training does not support " << n->describe()
            << ": its batch statistics would be a microbatch's, not the global batch's";
    const autodiff::ModelState state =
        autodiff::find_model_state(g, frontend::onnx_initializer_names(spec.onnx_path), spec.trainable);
    params = state.params;
    for (const std::string& p : params) initial[p] = g.find_value(p)->constant();
    size_t out_index = 0;
    while (!spec.loss.output.empty() && g.outputs()[out_index]->name() != spec.loss.output) ++out_index;
    (void)autodiff::convert_for_training(g, state, spec.seed);
    g.set_outputs({g.outputs()[out_index]});
    // Nodes that only fed other outputs would otherwise be placed, and their values sent.
    pass::eliminate_dead_code(g, compiler::pass_context());
    return g;
}

/// The rank assignment, checked for what a pipeline of training stages needs.
RankAssignment assign_stages(const ir::Graph& g, const PipelineTrainingSpec& spec,
                             const std::vector<std::string>& params) {
    const int n = spec.num_ranks;
    KILN_CHECK(static_cast<int>(g.num_nodes()) >= n, kInvalidArgument)
        << "pipeline-parallel training over " << n << " ranks: the model has " << g.num_nodes()
        << " nodes to train, fewer than the ranks (one stage per rank)";
    PartitionOptions po;
    po.num_ranks = n;
    po.stages = spec.stages;
    RankAssignment a = assign_ranks(g, po);
    compute_stage_costs(g, a);
    std::vector<int> nodes(static_cast<size_t>(n), 0);
    for (const auto& [node, r] : a.rank) ++nodes[static_cast<size_t>(r)];
    for (int r = 0; r < n; ++r)
        KILN_CHECK(nodes[static_cast<size_t>(r)] > 0, kInvalidArgument)
            << "pipeline-parallel training: rank " << r << " of " << n << " has no stage (no node is placed on it); "
            << "use fewer ranks or place nodes on it with --stage";
    const ir::Value* out = g.outputs()[0];
    const int loss_rank = out->producer() ? a.rank.at(out->producer()) : 0;
    KILN_CHECK(loss_rank == n - 1, kInvalidArgument)
        << "pipeline-parallel training: the loss reads output '" << out->name() << "', computed on rank " << loss_rank
        << "; it must be computed on the last rank (" << n - 1 << ")";
    for (const std::string& p : params) {
        std::set<int> ranks;
        for (const ir::Node* user : g.find_value(p)->users()) ranks.insert(a.rank.at(user));
        KILN_CHECK(ranks.size() <= 1, kUnsupported)
            << "pipeline-parallel training: parameter '" << p << "' is read on ranks " << *ranks.begin() << " and "
            << *ranks.rbegin() << " (shared weights); each parameter must belong to one stage";
    }
    return a;
}

/// Stage `s`'s backward graph from its lowered rank graph (file comment).
std::vector<ir::Value*> build_backward(PipelineStageGraph& s, LoweredRank l, const PipelineTrainingSpec& spec,
                                      const std::vector<std::string>& all_params) {
    ir::Graph& g = l.graph;
    std::vector<ir::Value*> wrt;
    std::vector<std::string> roles;
    for (const std::string& p : all_params) {  // model order
        ir::Value* v = g.find_value(p);
        if (!v || !v->is_graph_input()) continue;
        s.params.push_back(p);
        wrt.push_back(v);
        roles.push_back("grad:" + p);
    }
    for (size_t i = 0; i < l.input_keys.size(); ++i) {
        if (l.input_keys[i].empty()) continue;
        ir::Value* in = g.inputs()[i];
        s.recv_keys[in->name()] = l.input_keys[i];
        wrt.push_back(in);
        roles.push_back("input_grad:" + in->name());
    }
    const std::vector<ir::Value*> outs = g.outputs();
    std::vector<ir::Value*> ys, dys;
    for (size_t i = l.model_outputs; i < outs.size(); ++i) {
        s.seed_inputs.push_back(pipeline_seed_name(outs[i]->name()));
        s.send_keys.push_back(l.output_keys[i]);
        ys.push_back(outs[i]);
        dys.push_back(g.add_input(s.seed_inputs.back(), outs[i]->type()));
    }
    std::vector<ir::Value*> results;
    if (s.computes_loss) {
        KILN_CHECK(ys.empty(), kInvalidArgument)
            << "pipeline-parallel training: the last stage sends '" << ys[0]->name() << "' to an earlier rank";
        ir::Value* loss = autodiff::append_loss(g, outs.at(0), spec.loss);
        ys.push_back(loss);
        dys.push_back(pass::add_constant_like(g, "loss/seed", filled(loss->type(), 1.0 / spec.microbatches)));
        results.push_back(loss);
        roles.insert(roles.begin(), "loss");
    }
    KILN_CHECK(!ys.empty(), kInvalidArgument)
        << "pipeline-parallel training: stage " << s.rank
        << " sends nothing to a later stage, so it cannot reach the loss";
    const std::vector<ir::Value*> sent = ys;
    const std::vector<ir::Value*> grads = autodiff::vjp(g, ys, dys, wrt);
    for (size_t i = 0; i < wrt.size(); ++i)
        results.push_back(grads[i] ? grads[i]
                                   : pass::add_constant_like(g, wrt[i]->name() + "/zero", filled(wrt[i]->type(), 0.0)));
    g.set_outputs(results);
    s.backward_outputs = std::move(roles);
    s.backward = std::move(g);
    return s.computes_loss ? std::vector<ir::Value*>{} : sent;
}

/// Every output of `g` from `first` on that a forward node computes, or no node (a constant,
/// an input), passes through an Identity of the backward, so that the split below puts it there.
void outputs_to_backward(ir::Graph& g, size_t first) {
    std::vector<ir::Value*> outs = g.outputs();
    for (size_t i = first; i < outs.size(); ++i) {
        if (outs[i]->producer() && autodiff::is_backward_node(*outs[i]->producer())) continue;
        ir::Node* n = pass::add_inferred_node(g, "Identity", {outs[i]}, {}, 1, "grad/out");
        n->set_name(g.fresh_name(std::string(autodiff::kGradPrefix) + "out"));
        n->set_role(ir::NodeRole::kBackward);
        outs[i] = n->output(0);
    }
    g.set_outputs(outs);
}

/// Splits stage `s`'s backward graph into a forward graph returning the sent values and the
/// stash, and a backward graph taking the stash (the file comment), with the partition.
void split_stash(PipelineStageGraph& s, const std::vector<ir::Value*>& sent) {
    ir::Graph& g = s.backward;
    std::vector<ir::Value*> outs = sent;
    for (ir::Value* v : g.outputs()) outs.push_back(v);
    g.set_outputs(outs);
    outputs_to_backward(g, sent.size());
    RankAssignment a;
    a.num_ranks = 2;
    for (const ir::Node* n : g.nodes()) {  // topological: a node after a backward node is one too
        int r = autodiff::is_backward_node(*n) ? 1 : 0;
        for (const ir::Value* in : n->inputs())
            if (in && in->producer()) r = std::max(r, a.rank.at(in->producer()));
        a.rank[n] = r;
    }
    Partition p = partition_graph(g, a);
    LoweredRank f = lower_transfers(std::move(p.ranks[0].graph));
    KILN_CHECK(f.model_outputs == sent.size(), kInternal)
        << "bug in Kiln: stage " << s.rank << "'s forward computes " << f.model_outputs << " of its " << sent.size()
        << " sent values";
    s.forward = std::move(f.graph);
    s.backward = lower_transfers(std::move(p.ranks[1].graph)).graph;
}

/// Stage `s`'s eval graph from its lowered rank graph (the file comment): Dropout's training_mode
/// constant set back to false, and on the last stage the loss appended.
void build_eval(PipelineStageGraph& s, LoweredRank l, const PipelineTrainingSpec& spec) {
    ir::Graph& g = l.graph;
    for (ir::Node* n : g.nodes()) {
        if (n->op() != "Dropout" || !n->input(2) || !n->input(2)->is_constant()) continue;
        Tensor off(DType::kBool, {});
        n->set_input(2, pass::add_constant_like(g, n->name() + "/eval_mode", off));
    }
    const std::vector<ir::Value*> outs = g.outputs();
    if (s.computes_loss) {
        ir::Value* loss = autodiff::append_loss(g, outs.at(0), spec.loss);
        g.set_outputs({loss, outs.at(0)});
    } else {
        g.set_outputs(std::vector<ir::Value*>(outs.begin() + static_cast<std::ptrdiff_t>(l.model_outputs), outs.end()));
    }
    pass::eliminate_dead_code(g, compiler::pass_context());
    s.eval = std::move(g);
}

}  // namespace

std::string pipeline_seed_name(const std::string& value) { return "seed/" + value; }

PipelineStages build_pipeline_stages(const PipelineTrainingSpec& spec) {
    KILN_CHECK(spec.num_ranks >= 2, kInvalidArgument)
        << "pipeline-parallel training needs at least 2 ranks (stages), got " << spec.num_ranks;
    KILN_CHECK(spec.microbatches >= 1, kInvalidArgument) << "--microbatches must be >= 1, got " << spec.microbatches;
    PipelineStages out;
    ir::Graph g = training_form(spec, out.params, out.initial);
    const RankAssignment a = assign_stages(g, spec, out.params);
    // Three splits of the same graph (deterministic, the same keys): the backward graphs, the
    // forward graphs when the backward rematerialises, and the eval graphs.
    Partition fwd = partition_graph(g, a), bwd = partition_graph(g, a), ev = partition_graph(g, a);
    for (int r = 0; r < spec.num_ranks; ++r) {
        PipelineStageGraph s;
        s.rank = r;
        s.computes_loss = r == spec.num_ranks - 1;
        s.estimated_seconds = a.stage_seconds.at(static_cast<size_t>(r));
        const std::vector<ir::Value*> sent =
            build_backward(s, lower_transfers(std::move(bwd.ranks[r].graph)), spec, out.params);
        if (!s.computes_loss && spec.rematerialize) s.forward = lower_transfers(std::move(fwd.ranks[r].graph)).graph;
        if (!s.computes_loss && !spec.rematerialize) split_stash(s, sent);
        for (const ir::Value* v : s.forward.outputs()) s.forward_outputs.push_back(v->name());
        build_eval(s, lower_transfers(std::move(ev.ranks[r].graph)), spec);
        out.stages.push_back(std::move(s));
    }
    return out;
}

}  // namespace kiln::distributed
