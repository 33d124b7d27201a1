// Helpers for the op tests: one-node graphs and error expectations.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op::testing {

using InputSpec = std::optional<ir::TensorType>;

inline ir::TensorType tt(DType t, std::vector<ir::Dim> s) { return ir::TensorType(t, std::move(s)); }

/// Adds a node of `op` whose inputs are fresh graph inputs (nullopt: omitted) and `constants`
/// (slot -> data) and runs check_node + infer_node.
inline ir::Node* make_node(ir::Graph& g, const std::string& op, const std::vector<InputSpec>& inputs,
                           ir::AttrMap attrs = {}, int num_outputs = 1,
                           const std::vector<std::pair<size_t, Tensor>>& constants = {},
                           const std::string& name = "n", bool run_checks = true) {
    std::vector<ir::Value*> ins(inputs.size(), nullptr);
    const std::string prefix = "v" + std::to_string(g.num_nodes()) + "_";  // unique per node
    for (size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i]) ins[i] = g.add_input(prefix + "in" + std::to_string(i), *inputs[i]);
    for (const auto& [slot, data] : constants) {
        if (ins.size() <= slot) ins.resize(slot + 1, nullptr);
        ins[slot] = g.add_constant(prefix + "c" + std::to_string(slot), data);
    }
    ir::Node* n = g.add_node(op, ins, std::move(attrs), std::vector<ir::TensorType>(num_outputs), {}, name);
    if (run_checks) {
        const OpDef* def = OpRegistry::global().find(op);
        EXPECT_NE(def, nullptr) << op;
        check_node(*n, *def);
        infer_node(*n);
    }
    return n;
}

inline Tensor int_tensor(const std::vector<int64_t>& v) {
    Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.set_i64(i, v[i]);
    return t;
}

/// Runs f and expects a kiln::Error of `kind` whose message contains `substr`.
template <typename F>
void expect_error(F&& f, ErrorKind kind, const std::string& substr) {
    try {
        f();
        ADD_FAILURE() << "expected an error containing '" << substr << "'";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        EXPECT_NE(std::string(e.what()).find(substr), std::string::npos) << "message: " << e.what();
    }
}

}  // namespace kiln::op::testing
