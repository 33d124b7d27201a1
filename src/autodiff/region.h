// Helpers for differentiating nodes with sub-graphs (If, Loop, Scan): which outer-scope values a
// node's regions read, and copying a region's nodes into another graph.
//
// A sub-graph reads an enclosing scope's value by name (ir::Graph::add_outer_input), and a
// region nested inside it may read a name from further out without the middle graph listing it
// (the graph interpreter resolves names frame by frame). For autodiff such a captured value is
// an input of the node like any other: it receives a gradient.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln::autodiff {

/// Names `sub` and the regions nested in it read from outside `sub`, in first-read order.
std::vector<std::string> captured_names(const ir::Graph& sub);

/// Whether `n` carries a sub-graph attribute.
bool has_region(const ir::Node& n);

/// The values of `g` that `n`'s sub-graphs capture (names `g` does not define are skipped: they
/// come from further out).
std::vector<ir::Value*> captured_values(const ir::Graph& g, const ir::Node& n);

/// A name starting with `prefix` that none of `graphs` defines.
std::string unique_name(const std::string& prefix, const std::vector<const ir::Graph*>& graphs);

/// Appends copies of `src`'s constants and nodes to `dst` (same names, attributes, types;
/// sub-graph attributes are copied too: the graph interpreter keeps one plan per sub-graph, so
/// two nodes never share one). `map` must hold a value of `dst` for every input and outer input
/// of `src` that a node reads; it receives the copies.
void clone_nodes(ir::Graph& dst, const ir::Graph& src, std::unordered_map<const ir::Value*, ir::Value*>& map);

/// A copy of `src` (inputs, outer inputs, nodes, outputs; nested regions copied).
std::shared_ptr<ir::Graph> copy_graph(const ir::Graph& src);

}  // namespace kiln::autodiff
