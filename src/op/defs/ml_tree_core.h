// The tree-evaluation core shared by the ai.onnx.ml tree-ensemble ops: TreeEnsemble (5,
// ml_tree_ensemble.cc) and the classic TreeEnsembleRegressor / TreeEnsembleClassifier (1, 3,
// ml_tree_classic.cc). Each op reads its own attribute layout into a TreeCore (interior nodes and
// leaves in two arrays, every branch naming a node or a leaf); walking a row down a tree and the
// post transforms are here, once. Aggregation differs per op and stays with the op.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace kiln::op::ml {

/// Branch comparison of an interior node: x (the row's feature) against the node's split.
enum TreeMode : int64_t { kLeq = 0, kLt, kGte, kGt, kEq, kNeq, kMember };
/// post_transform values, in ONNX's order.
enum PostTransform : int64_t { kNone = 0, kSoftmax, kLogistic, kSoftmaxZero, kProbit };

/// A branch target: interior node `index`, or leaf `index` when `leaf`.
struct TreeRef {
    int64_t index = 0;
    bool leaf = false;
};

struct TreeInterior {
    int64_t feature = 0;
    int64_t mode = kLeq;
    double split = 0;
    bool missing_true = false;   // a NaN x takes the true branch
    std::vector<double> members;  // sorted; kMember only
    TreeRef on_true, on_false;
};

struct TreeCore {
    std::vector<TreeInterior> nodes;
    /// Per leaf: its (target or class, weight) contributions.
    std::vector<std::vector<std::pair<int64_t, double>>> leaves;
    /// One per tree, in evaluation order.
    std::vector<TreeRef> roots;
};

/// Checks every reference (roots, branches) is in range and every feature id is in
/// [0, num_features); a kInvalidArgument error naming `n` otherwise.
void validate_tree_core(const ir::Node& n, const TreeCore& t, int64_t num_features);

/// The leaf a row reaches from `root`; a kInvalidArgument error if the walk cycles.
int64_t tree_find_leaf(const ir::Node& n, const TreeCore& t, TreeRef root, const double* row);

/// `kind` (PostTransform) applied in place to the m scores `v`.
void tree_post_transform(int64_t kind, double* v, int64_t m);

/// sqrt(2) * erfinv(2p - 1); NaN outside p in [0, 1] (like ONNX Runtime), -inf / inf at 0 / 1.
double probit(double p);

/// A post_transform string attribute ("NONE", "SOFTMAX", ...) as a PostTransform; a
/// kInvalidArgument error naming `n` for another string.
int64_t parse_post_transform(const ir::Node& n, const std::string& s);

/// A node's float-list attribute given either as `name` (floats) or `name`_as_tensor (a tensor
/// of any numeric dtype); empty if neither; a kInvalidModel error if both.
std::vector<double> floats_or_tensor_attr(const ir::Node& n, const std::string& name);

}  // namespace kiln::op::ml
