// The partition (src/distributed/partition.h): transfer keys, stage maps, rank assignment
// (annotated and cost-balanced, the latter against a brute force over every cut), the split's
// Send/Recv pairs, rank cycles, and the in-process partitioned run against the whole graph's
// compiled run (bit for bit) and a plain C++ loop (the reference).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "compiler/compile.h"
#include "distributed/partition_model.h"
#include "distributed/partitioned_run.h"
#include "distributed/stage_cost.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "runtime/model_runner.h"

namespace kiln::distributed {
namespace {

// a = Relu(x); b = Exp(a); c = Add(a, b); d = Mul(c, k); e = MatMul(d, w); out = e.
// `k` is read on both ranks of the annotated split below (by b's consumer c and by d).
constexpr const char* kChain = R"(
graph chain(%x: f32[2,4]) {
  const %k: f32[4] = [0.5, -1.0, 2.0, 0.25]
  const %w: f32[4,3] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
  %a = Relu(%x) : f32[2,4] # name="a"
  %b = Exp(%a) : f32[2,4] # name="b"
  %kb = Mul(%b, %k) : f32[2,4] # name="kb"
  %c = Add(%a, %kb) : f32[2,4] # name="c"
  %d = Mul(%c, %k) : f32[2,4] # name="d"
  %e = MatMul(%d, %w) : f32[2,3] # name="e"
  return %e
}
)";

int count_op(const ir::Graph& g, const std::string& op) {
    int n = 0;
    for (const ir::Node* node : g.nodes()) n += node->op() == op;
    return n;
}

TEST(TransferKey, RoundTripsWithAndWithoutStepAndOddTensorNames) {
    TransferKey k{0, 7, 1, "it's a 'name' frame", 2, 5, -1};
    EXPECT_EQ(k.to_string(), "0/7 -> 1 'it's a 'name' frame' frame 2:5");
    EXPECT_EQ(parse_transfer_key(k.to_string()), k);
    TransferKey s = k.at_step(42);
    EXPECT_EQ(s.to_string(), "0/7 -> 1 'it's a 'name' frame' frame 2:5 step 42");
    EXPECT_EQ(parse_transfer_key(s.to_string()), s);
    EXPECT_NE(s.tag(32767), k.tag(32767));  // the step is part of the tag
    EXPECT_GE(s.tag(32767), 1);
    EXPECT_LE(s.tag(32767), 32767);
    EXPECT_THROW(parse_transfer_key("0/1 -> x 't' frame 0:0"), Error);
    EXPECT_THROW(parse_transfer_key("0/1 -> 1 't'"), Error);
    EXPECT_THROW(parse_transfer_key("0/1 -> 1 '' frame 0:0"), Error);
}

TEST(StageMap, ParsesPiecesAndNamesABadOne) {
    StageMap m = parse_stage_map({"a=0,c=1", "e=1"});
    EXPECT_EQ(m, (StageMap{{"a", 0}, {"c", 1}, {"e", 1}}));
    try {
        parse_stage_map({"a=0,c"});
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'c'"), std::string::npos) << e.what();
    }
}

TEST(Partition, AnnotatedSplitSharesOneRecvPerTensorAndCopiesConstants) {
    ir::Graph g = ir::parse_graph(kChain);
    PartitionOptions o;
    o.stages = {{"c", 1}};  // a, b, kb stay on rank 0; c inherits 1 and so do d, e
    Partition p = partition_model(g, {}, o, 0);
    ASSERT_EQ(p.ranks.size(), 2u);
    const ir::Graph& r0 = p.ranks[0].graph;
    const ir::Graph& r1 = p.ranks[1].graph;
    // a is read on rank 1 by c only; kb by c: two transfers, one Recv each, one Send each.
    EXPECT_EQ(count_op(r0, "KilnSend"), 2);
    EXPECT_EQ(count_op(r1, "KilnRecv"), 2);
    ASSERT_EQ(p.transfers.size(), 2u);
    EXPECT_EQ(p.transfers[0].key.to_string(), "0/1 -> 1 'a' frame 0:0");
    EXPECT_EQ(p.transfers[1].key.to_string(), "0/1 -> 1 'kb' frame 0:0");
    EXPECT_EQ(p.transfers[0].bytes, 2 * 4 * 4);
    // k is read on both ranks: copied to each; w only on rank 1.
    EXPECT_NE(r0.find_value("k"), nullptr);
    EXPECT_NE(r1.find_value("k"), nullptr);
    EXPECT_EQ(r0.find_value("w"), nullptr);
    EXPECT_EQ(p.run_order, (std::vector<int>{0, 1}));
    ASSERT_EQ(p.outputs.size(), 1u);
    EXPECT_EQ(p.outputs[0].rank, 1);
    // The report prints both graphs and the transfers; rank graphs parse back.
    std::string report = partition_report(p);
    EXPECT_NE(report.find("transfer f32[2,4] 32 bytes: 0/1 -> 1 'a' frame 0:0\n"), std::string::npos) << report;
    ir::Graph back = ir::parse_graph(ir::print_graph(r1));
    EXPECT_EQ(count_op(back, "KilnRecv"), 2);
}

TEST(Partition, OneRecvServesEveryConsumerOnItsRank) {
    ir::Graph g = ir::parse_graph(kChain);
    PartitionOptions o;
    o.stages = {{"b", 1}, {"kb", 1}, {"c", 1}};  // a on rank 0, read by b and c on rank 1
    Partition p = partition_model(g, {}, o, 0);
    EXPECT_EQ(count_op(p.ranks[1].graph, "KilnRecv"), 1);
    ir::Value* a = p.ranks[1].graph.find_value("a");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->producer()->op(), "KilnRecv");
    EXPECT_EQ(a->users().size(), 2u);
}

TEST(Partition, RankCycleIsAnErrorNamingTheNodes) {
    ir::Graph g = ir::parse_graph(kChain);
    PartitionOptions o;
    o.stages = {{"b", 1}, {"kb", 0}};  // a (0) -> b (1) -> kb (0)
    try {
        partition_model(g, {}, o, 0);
        FAIL() << "no error";
    } catch (const Error& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("cycle"), std::string::npos) << m;
        EXPECT_NE(m.find("'b'"), std::string::npos) << m;
        EXPECT_NE(m.find("'kb'"), std::string::npos) << m;
    }
}

TEST(Partition, UnknownStageNameAndRankOutOfRangeAreErrors) {
    ir::Graph g = ir::parse_graph(kChain);
    PartitionOptions o;
    o.stages = {{"nope", 1}};
    EXPECT_THROW(partition_model(g, {}, o, 0), Error);
    ir::Graph g2 = ir::parse_graph(kChain);
    o.stages = {{"c", 2}};
    EXPECT_THROW(partition_model(g2, {}, o, 0), Error);
}

TEST(Partition, NodeAttributePlacesANodeAndIsDropped) {
    std::string text = kChain;
    text.replace(text.find("%d = Mul(%c, %k) :"), std::strlen("%d = Mul(%c, %k) :"), "%d = Mul(%c, %k) {kiln.rank=1} :");
    ir::Graph g = ir::parse_graph(text);
    Partition p = partition_model(g, {}, {}, 0);
    ASSERT_NE(p.ranks[1].graph.find_value("d"), nullptr);
    EXPECT_EQ(p.ranks[1].graph.find_value("d")->producer()->op(), "Mul");
    EXPECT_FALSE(p.ranks[1].graph.find_value("d")->producer()->has_attr(kRankAttr));
    EXPECT_EQ(p.ranks[0].graph.find_value("c")->producer()->op(), "Add");
}

TEST(Partition, BalancedSplitMatchesABruteForceOverEveryCut) {
    // A cheap prefix and an expensive MatMul: the best 2-way cut isolates the heavy tail.
    ir::Graph g = ir::parse_graph(R"(
graph g(%x: f32[64,256], %w: f32[256,256]) {
  %a = Relu(%x) : f32[64,256]
  %b = Exp(%a) : f32[64,256]
  %c = MatMul(%b, %w) : f32[64,256]
  %d = Tanh(%c) : f32[64,256]
  %e = MatMul(%d, %w) : f32[64,256]
  %f = Sigmoid(%e) : f32[64,256]
  return %f
}
)");
    prepare_for_partition(g, {}, 0);
    std::vector<ir::Node*> order = g.nodes();
    for (int ranks = 2; ranks <= 3; ++ranks) {
        RankAssignment a = assign_ranks_balanced(g, ranks);
        double got = *std::max_element(a.stage_seconds.begin(), a.stage_seconds.end());
        // Brute force over every placement of ranks-1 cuts.
        double best = std::numeric_limits<double>::infinity();
        const int n = static_cast<int>(order.size());
        std::vector<double> cost;
        for (ir::Node* node : order) cost.push_back(node_cost(*node).seconds);
        for (int i = 1; i < n; ++i)
            for (int j = ranks == 3 ? i + 1 : n; j <= n; ++j) {
                if (ranks == 3 && j == n) continue;
                double s0 = 0, s1 = 0, s2 = 0;
                for (int k = 0; k < n; ++k) (k < i ? s0 : k < j ? s1 : s2) += cost[k];
                best = std::min(best, std::max({s0, s1, s2}));
            }
        EXPECT_DOUBLE_EQ(got, best) << ranks << " ranks";
        // Stages are contiguous and non-empty.
        int prev = 0;
        for (ir::Node* node : order) {
            EXPECT_GE(a.rank.at(node), prev);
            prev = a.rank.at(node);
        }
        EXPECT_EQ(prev, ranks - 1);
    }
}

TEST(Partition, FusionGroupsAreNeverCut) {
    // At -O2 the elementwise chain a..d fuses into one group; no split may separate its nodes.
    for (StageMap stages : {StageMap{}, StageMap{{"c", 1}}}) {
        ir::Graph g = ir::parse_graph(kChain);
        prepare_for_partition(g, {}, 2);
        std::map<int, int> groups;
        for (const ir::Node* n : g.nodes()) groups[n->group()] += 1;
        ASSERT_TRUE(groups.size() > 1) << "the chain did not fuse:\n" << ir::print_graph(g);
        PartitionOptions o;
        o.stages = stages;
        RankAssignment a = assign_ranks(g, o);
        std::map<int, std::set<int>> ranks_of_group;
        for (const ir::Node* n : g.nodes())
            if (n->group() >= 0) ranks_of_group[n->group()].insert(a.rank.at(n));
        for (const auto& [grp, ranks] : ranks_of_group) EXPECT_EQ(ranks.size(), 1u) << "group " << grp;
        Partition p = partition_graph(g, a);
        if (stages.empty()) {  // balanced: the cut falls between the group and the MatMul
            EXPECT_EQ(p.transfers.size(), 1u) << ir::print_graph(g);
        } else {  // c's group goes whole to rank 1, and e follows it: rank 0 is left empty
            EXPECT_EQ(p.ranks[0].graph.num_nodes(), 0u) << ir::print_graph(g);
        }
    }
}

std::vector<Tensor> run_whole(ir::Graph g, const std::map<std::string, Tensor>& feeds) {
    SessionOptions opts;
    opts.threads = 1;
    runtime::ModelRunner runner(runtime::runner_options(opts));
    compiler::CompileOptions copts;
    compiler::CompiledModel m = compiler::compile(g, copts);
    auto p = runner.prepare(m.executable);
    std::vector<Tensor> inputs, outputs;
    for (int id : m.executable->inputs) inputs.push_back(feeds.at(m.executable->buffers[id].name));
    runner.run(*p, inputs, outputs, runtime::RunControls{}).throw_if_error();
    return outputs;
}

TEST(PartitionedRun, EqualsTheWholeGraphBitForBitAndTheLoopReference) {
    Tensor x(DType::kFloat32, {2, 4});
    float* xp = x.data_as<float>();
    for (int i = 0; i < 8; ++i) xp[i] = 0.3f * static_cast<float>(i) - 1.0f;
    std::map<std::string, Tensor> feeds{{"x", x}};
    std::vector<Tensor> whole = run_whole(ir::parse_graph(kChain), feeds);
    SessionOptions opts;
    opts.threads = 1;
    for (StageMap stages : {StageMap{}, StageMap{{"c", 1}}, StageMap{{"b", 1}, {"kb", 1}, {"c", 1}}}) {
        PartitionOptions o;
        o.stages = stages;
        PartitionedModel pm(ir::parse_graph(kChain), o, opts);
        for (int step = 0; step < 2; ++step) {  // keys carry the step: a second run works alike
            std::vector<Tensor> got = pm.run(feeds);
            ASSERT_EQ(got.size(), 1u);
            ASSERT_EQ(got[0].shape(), whole[0].shape());
            EXPECT_EQ(std::memcmp(got[0].data(), whole[0].data(), whole[0].nbytes()), 0) << pm.report();
        }
    }
    // The loop reference (float64) of the chain.
    const double k[4] = {0.5, -1.0, 2.0, 0.25};
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) {
            double acc = 0;
            for (int c = 0; c < 4; ++c) {
                double a = std::max(0.0, static_cast<double>(xp[i * 4 + c]));
                double d = (a + std::exp(a) * k[c]) * k[c];
                acc += d * static_cast<double>(c * 3 + j + 1);
            }
            EXPECT_NEAR(whole[0].data_as<float>()[i * 3 + j], acc, 1e-4 * (1 + std::abs(acc)));
        }
}

}  // namespace
}  // namespace kiln::distributed
