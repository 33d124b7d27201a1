// GraphInterpreter: runs a graph node by node on run-time values (kiln::Datum), for what the
// compiled path cannot take: control flow (If/Loop/Scan run their sub-graphs here), sequences
// and optionals, string tensors, ops whose output shapes depend on data (NonZero, Unique, NMS),
// and value inputs (Range's limit, Pad's pads) computed from run-time data.
//
// Each node runs one of these ways:
//  - its host kernel (OpDef::host, op/host.h) when the op has no compute, or when an input is a
//    string tensor, a sequence or an empty optional;
//  - otherwise its TE compute, specialized to the run-time shapes with its value inputs frozen
//    to their run-time values:
//    - a reshape-like op (op/view_ops.h is_view_op) is a view: its output shares the input's data;
//    - new nodes (inputs and outputs up to kInterpretElements elements, work up to
//      kInterpretWork) are lowered unscheduled and run by the tir interpreter (no compiler
//      call), and compiled as below once they have run kHotRuns times, unless tiny; a node
//      that runs once (memoized, below) is never compiled unless very large;
//    - the others are compiled as a one-node model (-O3 pipeline, with the node's fixed inputs
//      as constants, the kernel cache on disk) and run by the sequential executor.
//    Specializations are cached by op, attributes, input types, value-input values and the
//    identity of fixed inputs; a node first compares its inputs with its last specialization.
// A node of fixed inputs only (constants, and outputs of such nodes, also from enclosing
// graphs) is memoized: its outputs on the first run are reused. Each graph (and sub-graph) gets
// a plan once: nodes, OpDefs, value slots, release points.
// This is the "simple path" the operator-coverage issue allows; the VM (DESIGN.md) will make
// control flow fast.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "op/op_def.h"
#include "runtime/allocator.h"
#include "runtime/thread_pool.h"
#include "support/datum.h"

namespace kiln::runtime {
class SequentialExecutor;
}  // namespace kiln::runtime

namespace kiln::compiler {

struct GraphPlan;

/// When a node's TE compute runs in the tir interpreter rather than compiled. The tir
/// interpreter takes ~10-50 ns per scalar operation and needs no compiler; a compiled one-node
/// kernel costs a C compile once (~0.2-0.6 s, then the on-disk kernel cache) and runs ~50x
/// faster. So a node is interpreted while it is new (its inputs and outputs each at most
/// kInterpretElements elements, its work (OpDef::flops, else output elements) at most
/// kInterpretWork) and compiled when its specialization runs the kHotRuns-th time (a Loop body,
/// a stream of VAD chunks), unless its work is at most kTinyWork (shape arithmetic). A node that
/// runs once (memoized: all inputs fixed) is interpreted up to 16x the elements and
/// kInterpretOnceWork. Larger nodes are compiled at once.
constexpr int64_t kInterpretElements = 1 << 16;
constexpr double kInterpretWork = 1 << 21;
constexpr double kInterpretOnceWork = 1 << 22;
constexpr double kTinyWork = 64;
constexpr int kHotRuns = 3;

/// Why `g` needs the graph interpreter ("" when compile() can run it): an op without a compute,
/// a sub-graph attribute, a non-tensor or string value, or a value input that depends on the
/// data of a graph input not in `frozen_inputs` (graph inputs whose values the session
/// specializes on).
std::string interpreter_reason(const ir::Graph& g, const std::vector<std::string>& frozen_inputs = {});

/// Names of graph inputs an op reads as a value input (a Reshape target fed by a graph input):
/// their values shape the graph, so a compile specializes on them.
std::set<std::string> value_fed_inputs(const ir::Graph& g);

/// The part of interpreter_reason that no specialization removes: host-only ops, sub-graphs,
/// non-tensor or string values ("" when compile() can take the graph's ops and types).
std::string host_only_reason(const ir::Graph& g);

class GraphInterpreter {
public:
    /// `pool` and `alloc` serve the compiled nodes; both must outlive the interpreter.
    GraphInterpreter(std::shared_ptr<const ir::Graph> g, runtime::ThreadPool* pool, runtime::Allocator* alloc);
    ~GraphInterpreter();

    /// Runs the graph on its inputs (in graph-input order); returns its outputs in order.
    std::vector<Datum> run(const std::vector<Datum>& inputs);

    /// Nodes run so far by each path (for tests and `kiln inspect`).
    struct Counts {
        int64_t host = 0, interpreted = 0, compiled = 0, compiles = 0;
        int64_t reused = 0;  // nodes of fixed inputs whose first outputs were reused
        int64_t views = 0;   // reshape-like nodes whose output shares the input's data
    };
    Counts counts() const { return counts_; }

private:
    struct Frame;
    struct SpecializedNode;
    struct NodeCache;
    GraphPlan& plan_for(const ir::Graph& g, const Frame* parent);
    std::vector<Datum> run_graph(const ir::Graph& g, const std::vector<Datum>& inputs, const Frame* parent);
    // `fixed`: per input, whether it holds the same data every run; `once`: the node is memoized.
    std::vector<Datum> run_node(const ir::Node& n, const op::OpDef& def, const std::vector<Datum>& inputs,
                                const std::vector<char>& fixed, bool once, const Frame& frame);
    std::vector<Datum> eval_compute(const ir::Node& n, const op::OpDef& def, const std::vector<Datum>& inputs,
                                    const std::vector<char>& fixed, bool once);
    SpecializedNode& specialization(const ir::Node& n, const op::OpDef& def, const std::vector<Datum>& inputs,
                                    const std::vector<char>& fixed, bool once);
    std::unique_ptr<runtime::SequentialExecutor> compile_node(const ir::Node& n, const std::set<int>& value_slots,
                                                              const std::set<int>& fixed_slots,
                                                              const std::vector<Datum>& inputs,
                                                              std::vector<size_t>& runtime_slots);
    std::unique_ptr<SpecializedNode> specialize(const ir::Node& n, const op::OpDef& def, const std::set<int>& value_slots,
                                                const std::set<int>& fixed_slots, const std::vector<Datum>& inputs,
                                                int64_t input_elements, bool once);

    std::shared_ptr<const ir::Graph> graph_;
    runtime::ThreadPool* pool_;
    runtime::Allocator* alloc_;
    std::unordered_map<std::string, std::unique_ptr<SpecializedNode>> specialized_;
    std::unordered_map<const ir::Node*, NodeCache> node_cache_;
    std::unordered_map<const ir::Graph*, std::unique_ptr<GraphPlan>> plans_;  // graph_ and its sub-graphs
    Counts counts_;
};

}  // namespace kiln::compiler
