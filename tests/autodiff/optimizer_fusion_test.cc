// append_optimizer() builds each parameter's update from elementwise ops so that the fusion pass
// can make one kernel of it: checked on the MLP's train-step graph after the -O3 pipeline.
// fuse_operators lets an injective graph output that is also read in the graph (an updated
// momentum buffer, Adam's m and v) join its users' group as one more output of the kernel, so
// sgd+momentum and Adam each update a parameter in one kernel (before: 2 and 4).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "../frontend/onnx_model_builder.h"
#include "autodiff/training_graph.h"
#include "compiler/compile.h"
#include "compiler/lower_group.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/model_initializers.h"
#include "pass/infer_shapes.h"

namespace kiln {
namespace {

using namespace kiln::frontend::testing;

std::string write_mlp() {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), int64_t{4}});
    add_float_init(g, "W1", {8, 4}, std::vector<float>(32, 0.1f));
    add_float_init(g, "b1", {8}, std::vector<float>(8, 0.0f));
    add_float_init(g, "W2", {8, 3}, std::vector<float>(24, -0.1f));
    attr_int(add_node(g, "Gemm", {"x", "W1", "b1"}, {"h"}, "fc1"), "transB", 1);
    add_node(g, "Relu", {"h"}, {"r"}, "relu");
    add_node(g, "MatMul", {"r", "W2"}, {"logits"}, "fc2");
    add_output(g, "logits", {std::string("N"), int64_t{3}});
    const std::string path = (std::filesystem::temp_directory_path() / ("kiln_opt_fusion_" + std::to_string(::getpid()) + ".onnx")).string();
    std::ofstream f(path, std::ios::binary);
    m.SerializeToOstream(&f);
    return path;
}

void expect_one_kernel_per_update(const std::string& kind, double clip) {
    const std::string path = write_mlp();
    ir::Graph model = frontend::import_onnx_file(path);
    compiler::bind_input_shapes(model, {{"N", 5}});
    pass::infer_shapes(model, compiler::pass_context());
    autodiff::ModelState state = autodiff::find_model_state(model, frontend::onnx_initializer_names(path), {});
    ASSERT_EQ(state.params, (std::vector<std::string>{"W1", "b1", "W2"}));
    autodiff::OptimizerSpec spec;
    spec.kind = kind;
    spec.momentum = 0.9;
    spec.weight_decay = 0.01;
    spec.clip_norm = clip;
    autodiff::TrainingGraph tg =
        autodiff::build_training_graph(std::move(model), state, {}, spec, autodiff::TrainingGraphKind::kTrainStep);
    std::filesystem::remove(path);
    compiler::CompileOptions opts;
    compiler::optimize_graph(tg.graph, opts);
    for (const std::string& p : state.params) {
        std::set<size_t> units;
        std::vector<compiler::KernelUnit> all = compiler::partition_kernels(tg.graph);
        for (size_t u = 0; u < all.size(); ++u)
            for (const ir::Node* n : all[u].nodes)
                if (n->name().rfind("opt/" + p + "/", 0) == 0) units.insert(u);
        EXPECT_EQ(units.size(), 1u) << kind << ": the update of '" << p << "' spans " << units.size() << " kernels";
    }
}

TEST(OptimizerFusion, OneKernelPerParameter) {
    expect_one_kernel_per_update("sgd", 0);
    expect_one_kernel_per_update("adam", 0);
    expect_one_kernel_per_update("adamw", 1.0);
}

}  // namespace
}  // namespace kiln
