// build_pipeline_stages (src/distributed/pipeline_stage_graph.h), in one process: the shape of
// the stages of the MLP (each parameter on one stage, the transfers' keys matched by seeds and
// input gradients, the forward's values stashed or rematerialized, the eval graphs), and the
// refused models and splits, each naming what and why.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "autodiff/differentiate.h"
#include "distributed/pipeline_stage_graph.h"
#include "mlp_test_model.h"

namespace kiln::distributed {
namespace {

using namespace kiln::distributed::testing;
using namespace kiln::frontend::testing;
namespace fs = std::filesystem;

std::string write(const onnx::ModelProto& m, const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / ("kiln_pp_stages_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string path = (dir / name).string();
    std::ofstream f(path, std::ios::binary);
    m.SerializeToOstream(&f);
    return path;
}

PipelineTrainingSpec spec_for(const std::string& path, int ranks) {
    PipelineTrainingSpec s;
    s.onnx_path = path;
    s.dims = {{"N", 2}};
    s.num_ranks = ranks;
    s.microbatches = 4;
    return s;
}

std::string error_of(const PipelineTrainingSpec& s, ErrorKind kind) {
    try {
        (void)build_pipeline_stages(s);
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "expected an error";
    return "";
}

TEST(PipelineStages, EveryParameterOnOneStageAndEveryTransferSeeded) {
    PipelineStages p = build_pipeline_stages(spec_for(write(mlp(), "mlp.onnx"), 3));
    ASSERT_EQ(p.stages.size(), 3u);
    std::multiset<std::string> owned;
    std::set<std::string> sent, received;
    for (const PipelineStageGraph& s : p.stages) {
        owned.insert(s.params.begin(), s.params.end());
        EXPECT_EQ(s.computes_loss, s.rank == 2);
        EXPECT_EQ(s.seed_inputs.size(), s.send_keys.size());
        for (const auto& keys : s.send_keys) sent.insert(keys.begin(), keys.end());
        for (const auto& [name, key] : s.recv_keys) received.insert(key);
        // The backward returns the loss (last stage), a gradient per parameter and per received input.
        EXPECT_EQ(s.backward_outputs.size(), (s.computes_loss ? 1 : 0) + s.params.size() + s.recv_keys.size());
        EXPECT_EQ(s.backward.outputs().size(), s.backward_outputs.size());
    }
    EXPECT_EQ(owned, std::multiset<std::string>(p.params.begin(), p.params.end()));
    EXPECT_EQ(sent, received);
    EXPECT_FALSE(sent.empty());
}

// The eval graphs: the forward alone. An inner stage's returns exactly what it sends (no stash),
// the last stage's the loss and the logits; none holds a backward node.
TEST(PipelineStages, EvalGraphsAreTheForwardAlone) {
    PipelineStages p = build_pipeline_stages(spec_for(write(mlp(), "mlp.onnx"), 3));
    for (const PipelineStageGraph& s : p.stages) {
        for (const ir::Node* n : s.eval.nodes())
            EXPECT_FALSE(autodiff::is_backward_node(*n)) << "stage " << s.rank << ": " << n->describe();
        if (s.computes_loss) {
            ASSERT_EQ(s.eval.outputs().size(), 2u);
            EXPECT_EQ(s.eval.outputs()[0]->type().rank(), 0) << "the loss";
            EXPECT_EQ(s.eval.outputs()[1]->name(), "logits");
        } else {
            ASSERT_EQ(s.eval.outputs().size(), s.send_keys.size()) << "stage " << s.rank;
            for (size_t i = 0; i < s.send_keys.size(); ++i)
                EXPECT_EQ(s.eval.outputs()[i]->name(), s.forward_outputs[i]) << "stage " << s.rank;
        }
    }
}

/// Whether every node of `g` is one autodiff added (the backward computes no forward value).
bool only_backward_nodes(const ir::Graph& g) {
    for (const ir::Node* n : g.nodes())
        if (!autodiff::is_backward_node(*n)) return false;
    return true;
}

TEST(PipelineStages, StashedOrRematerializedForward) {
    PipelineTrainingSpec spec = spec_for(write(mlp(), "mlp.onnx"), 2);
    PipelineStages stash = build_pipeline_stages(spec);
    const PipelineStageGraph& s = stash.stages[0];
    // Stashed: the forward returns more than it sends (the values its backward reads), and the
    // backward computes none of the forward again.
    EXPECT_GT(s.forward_outputs.size(), s.send_keys.size());
    EXPECT_TRUE(only_backward_nodes(s.backward));
    spec.rematerialize = true;
    PipelineStages remat = build_pipeline_stages(spec);
    const PipelineStageGraph& r = remat.stages[0];
    EXPECT_EQ(r.forward_outputs.size(), r.send_keys.size());
    EXPECT_FALSE(only_backward_nodes(r.backward));
    // Either way the backward returns the same gradients.
    EXPECT_EQ(r.backward_outputs, s.backward_outputs);
}

TEST(PipelineStages, MoreRanksThanNodesIsRefused) {
    const std::string msg = error_of(spec_for(write(mlp(), "mlp.onnx"), 9), ErrorKind::kInvalidArgument);
    EXPECT_NE(msg.find("fewer than the ranks"), std::string::npos) << msg;
}

TEST(PipelineStages, BatchNormalizationIsRefused) {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), int64_t{4}});
    add_float_init(g, "scale", {4}, {1, 1, 1, 1});
    add_float_init(g, "bias", {4}, {0, 0, 0, 0});
    add_float_init(g, "mean", {4}, {0, 0, 0, 0});
    add_float_init(g, "var", {4}, {1, 1, 1, 1});
    add_float_init(g, "W", {3, 4}, random_floats(12, 1, 0.5f));
    add_node(g, "BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"h"}, "bn");
    attr_int(add_node(g, "Gemm", {"h", "W"}, {"logits"}, "fc"), "transB", 1);
    add_output(g, "logits", {std::string("N"), int64_t{3}});
    const std::string msg = error_of(spec_for(write(m, "bn.onnx"), 2), ErrorKind::kUnsupported);
    EXPECT_NE(msg.find("BatchNormalization"), std::string::npos) << msg;
    EXPECT_NE(msg.find("batch statistics"), std::string::npos) << msg;
}

TEST(PipelineStages, AParameterReadOnTwoStagesIsRefused) {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), int64_t{4}});
    add_float_init(g, "W", {4, 4}, random_floats(16, 2, 0.5f));
    attr_int(add_node(g, "Gemm", {"x", "W"}, {"h"}, "fc0"), "transB", 1);
    add_node(g, "Relu", {"h"}, {"r"}, "act0");
    attr_int(add_node(g, "Gemm", {"r", "W"}, {"logits"}, "fc1"), "transB", 1);  // tied weights
    add_output(g, "logits", {std::string("N"), int64_t{4}});
    PipelineTrainingSpec s = spec_for(write(m, "tied.onnx"), 2);
    s.stages = {{"fc1", 1}};
    const std::string msg = error_of(s, ErrorKind::kUnsupported);
    EXPECT_NE(msg.find("parameter 'W' is read on ranks 0 and 1"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln::distributed
