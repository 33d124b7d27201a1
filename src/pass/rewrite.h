// Small graph-rewriting vocabulary shared by the passes.
#pragma once

#include <optional>
#include <string>

#include "ir/graph.h"

namespace kiln::pass {

bool is_graph_output(const ir::Graph& g, const ir::Value* v);

/// Replaces every use of `from` with `to` (same type). Graph outputs keep their names: when
/// `from` is a graph output, `to` takes over its name, which needs `to` to be a node result
/// that is not itself a graph output; otherwise nothing changes and false is returned.
bool replace_value(ir::Graph& g, ir::Value* from, ir::Value* to);

/// Replaces every use of `from` with `to`, a new node's result whose type may be more precise
/// (a rewrite at the compiler's end: KilnReshape for Reshape, LayerNormalization for its
/// decomposition). A graph output keeps its name: `to` takes it over.
void replace_keeping_output_name(ir::Graph& g, ir::Value* from, ir::Value* to);

/// When every element of constant `v` equals one value, that value (as double); else nullopt.
std::optional<double> uniform_constant(const ir::Value* v);

/// Ops whose value is a fresh random draw (RandomNormal*, RandomUniform*, Bernoulli,
/// Multinomial): never folded, never merged.
bool is_random_op(const std::string& op);

/// A recomputation (ir::NodeRole::kRecompute; autodiff/recompute.h names them with this prefix
/// for people reading the graph) recomputes a forward value for the backward pass: CSE must not
/// merge it with the forward node it copies, and fusion must not group it with nodes of the
/// forward pass, or the copy would run in the forward pass and keep its result alive until the
/// backward pass, which is what recomputation avoids.
inline constexpr const char* kRecomputePrefix = "recompute/";
bool is_recomputation(const ir::Node& n);

/// An i64 constant holding `s` (a Reshape target).
ir::Value* shape_constant(ir::Graph& g, const Shape& s);

/// A constant, or a value computed from constants only (not yet evaluated by fold_constants).
bool is_constant_expr(const ir::Value* v, int depth = 0);

/// Adds a constant named after `hint` (made unique).
ir::Value* add_constant_like(ir::Graph& g, const std::string& hint, Tensor data);

/// Appends a node whose output types come from the op's inference (op registry). The caller
/// rewires uses and then restores the order with g.topo_sort().
ir::Node* add_inferred_node(ir::Graph& g, const std::string& op, const std::vector<ir::Value*>& inputs,
                            ir::AttrMap attrs = {}, int num_outputs = 1, const std::string& name_hint = "");

/// The node's single user when its output 0 has exactly one use and is no graph output.
ir::Node* sole_user(const ir::Graph& g, const ir::Value* v);

}  // namespace kiln::pass
