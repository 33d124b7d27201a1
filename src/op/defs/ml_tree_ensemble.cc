// ai.onnx.ml TreeEnsemble (5): a host kernel (op/host.h) evaluating an ensemble of decision
// trees on X [N, F] (a 1-D X is one row) -> Y [N, n_targets] in X's dtype.
//
// Interior nodes are the parallel nodes_* arrays; leaves the parallel leaf_* arrays. Evaluating a
// tree starts at nodes index tree_roots[t]; node i compares x = X[row, nodes_featureids[i]] with
// nodes_splits[i] by nodes_modes[i] (0 LEQ x <= s, 1 LT, 2 GTE, 3 GT, 4 EQ, 5 NEQ, 6 MEMBER: x is
// in node i's set) — a NaN x takes the true branch when nodes_missing_value_tracks_true[i] is 1,
// otherwise the comparison's result (false, except NEQ). The taken branch is the leaf
// nodes_{true,false}nodeids[i] when nodes_{true,false}leafs[i] is 1, else that interior node. A
// one-leaf tree is a node whose two branches name the same leaf. MEMBER sets come from
// membership_values: one run per MEMBER node, in node order, each ended by a NaN.
// Each reached leaf adds leaf_weights[l] to target leaf_targetids[l], aggregated by
// aggregate_function (0 AVERAGE = sum / number of trees, 1 SUM, 2 MIN, 3 MAX; a target no leaf
// reaches keeps 0, or the dtype's max / lowest for MIN / MAX like the ONNX reference), then
// post_transform per row: 0 NONE, 1 SOFTMAX, 2 LOGISTIC, 3 SOFTMAX_ZERO (ONNX Runtime's: zeros
// stay zero), 4 PROBIT (sqrt(2) * erfinv(2y - 1)). Arithmetic is in double.
// Every id is validated up front and walks are bounded by the node count, so a malformed
// ensemble (bad ids, cycles) is a kiln::Error, never a crash or a hang. The walk and the post
// transforms are ml_tree_core's, shared with TreeEnsembleRegressor/Classifier (ml_tree_classic.cc).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "op/defs/ml_tree_core.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using ml::TreeCore;
using ml::TreeRef;
enum Aggregate : int64_t { kAverage = 0, kSum, kMin, kMax };

const Tensor& tensor_attr(const ir::Node& n, const std::string& name) {
    auto it = n.attrs().find(name);
    KILN_CHECK(it != n.attrs().end() && std::holds_alternative<Tensor>(it->second),
               kInvalidArgument)
        << n.describe() << ": missing tensor attribute '" << name << "'";
    return std::get<Tensor>(it->second);
}

std::vector<double> tensor_values(const Tensor& t) {
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_f64(i);
    return v;
}

struct Ensemble {
    TreeCore core;
    int64_t n_targets = 0;
};

Ensemble read_ensemble(const ir::Node& n, int64_t num_features) {
    Ensemble e;
    const std::vector<double> splits = tensor_values(tensor_attr(n, "nodes_splits"));
    const Tensor& modes_t = tensor_attr(n, "nodes_modes");
    KILN_CHECK(!dtype_is_float(modes_t.dtype()) && modes_t.dtype() != DType::kString,
               kInvalidArgument)
        << n.describe() << ": nodes_modes must be an integer tensor (u8), got "
        << dtype_name(modes_t.dtype());
    std::vector<int64_t> modes;
    for (int64_t i = 0; i < modes_t.numel(); ++i) modes.push_back(modes_t.get_i64(i));
    const std::vector<int64_t> features = n.attr_ints("nodes_featureids");
    const std::vector<int64_t> true_ids = n.attr_ints("nodes_truenodeids");
    const std::vector<int64_t> false_ids = n.attr_ints("nodes_falsenodeids");
    const std::vector<int64_t> true_leaf = n.attr_ints("nodes_trueleafs");
    const std::vector<int64_t> false_leaf = n.attr_ints("nodes_falseleafs");
    const std::vector<double> leaf_weights = tensor_values(tensor_attr(n, "leaf_weights"));
    const std::vector<int64_t> leaf_targets = n.attr_ints("leaf_targetids");
    const std::vector<int64_t> roots = n.attr_ints("tree_roots");
    const size_t num_nodes = features.size(), num_leaves = leaf_targets.size();
    const std::vector<int64_t> missing_true =
        n.attr_ints("nodes_missing_value_tracks_true", std::vector<int64_t>(num_nodes, 0));

    auto check_len = [&](const char* what, size_t got, size_t want) {
        KILN_CHECK(got == want, kInvalidArgument)
            << n.describe() << ": " << what << " has " << got << " entries, expected " << want;
    };
    check_len("nodes_splits", splits.size(), num_nodes);
    check_len("nodes_modes", modes.size(), num_nodes);
    check_len("nodes_truenodeids", true_ids.size(), num_nodes);
    check_len("nodes_falsenodeids", false_ids.size(), num_nodes);
    check_len("nodes_trueleafs", true_leaf.size(), num_nodes);
    check_len("nodes_falseleafs", false_leaf.size(), num_nodes);
    check_len("nodes_missing_value_tracks_true", missing_true.size(), num_nodes);
    check_len("leaf_weights", leaf_weights.size(), num_leaves);
    KILN_CHECK(!roots.empty(), kInvalidArgument) << n.describe() << ": tree_roots is empty";

    int64_t max_target = -1;
    for (int64_t t : leaf_targets) max_target = std::max(max_target, t);
    e.n_targets = n.attr_int("n_targets", max_target + 1);
    KILN_CHECK(e.n_targets >= 1, kInvalidArgument)
        << n.describe() << ": n_targets must be >= 1, got " << e.n_targets;
    for (size_t l = 0; l < num_leaves; ++l) {
        KILN_CHECK(leaf_targets[l] >= 0 && leaf_targets[l] < e.n_targets, kInvalidArgument)
            << n.describe() << ": leaf_targetids[" << l << "]=" << leaf_targets[l]
            << " is out of range [0, " << e.n_targets << ")";
        e.core.leaves.push_back({{leaf_targets[l], leaf_weights[l]}});
    }
    for (int64_t r : roots) e.core.roots.push_back(TreeRef{r, false});

    std::vector<double> member_values;
    if (n.has_attr("membership_values"))
        member_values = tensor_values(tensor_attr(n, "membership_values"));
    size_t next_member = 0;
    e.core.nodes.resize(num_nodes);
    for (size_t i = 0; i < num_nodes; ++i) {
        KILN_CHECK(modes[i] >= ml::kLeq && modes[i] <= ml::kMember, kInvalidArgument)
            << n.describe() << ": nodes_modes[" << i << "]=" << modes[i]
            << " is not a mode in [0, 6]";
        ml::TreeInterior& d = e.core.nodes[i];
        d.feature = features[i];
        d.mode = modes[i];
        d.split = splits[i];
        d.missing_true = missing_true[i] != 0;
        d.on_true = TreeRef{true_ids[i], true_leaf[i] != 0};
        d.on_false = TreeRef{false_ids[i], false_leaf[i] != 0};
        if (modes[i] != ml::kMember) continue;
        KILN_CHECK(next_member < member_values.size(), kInvalidArgument)
            << n.describe() << ": membership_values has no set for BRANCH_MEMBER node " << i;
        while (next_member < member_values.size() && !std::isnan(member_values[next_member]))
            d.members.push_back(member_values[next_member++]);
        ++next_member;  // the NaN ending the set (or the end)
        std::sort(d.members.begin(), d.members.end());
    }
    ml::validate_tree_core(n, e.core, num_features);
    return e;
}

double dtype_max(DType t) {
    if (t == DType::kFloat16) return 65504.0;
    if (t == DType::kFloat32) return std::numeric_limits<float>::max();
    return std::numeric_limits<double>::max();
}

std::vector<Datum> tree_ensemble_host(const HostArgs& a) {
    const ir::Node& n = a.node;
    const Tensor& x = a.tensor(0);
    check_dtype(n, "X", x.dtype(), {DType::kFloat32, DType::kFloat64, DType::kFloat16});
    KILN_CHECK(x.shape().size() == 1 || x.shape().size() == 2, kInvalidArgument)
        << n.describe() << ": X must have shape [N, F] (or [F]), got " << shape_str(x.shape());
    const int64_t rows = x.shape().size() == 2 ? x.shape()[0] : 1;
    const int64_t num_features = x.shape().back();
    const Ensemble e = read_ensemble(n, num_features);
    const int64_t agg = n.attr_int("aggregate_function", kSum);
    const int64_t post = n.attr_int("post_transform", ml::kNone);
    KILN_CHECK(agg >= kAverage && agg <= kMax, kInvalidArgument)
        << n.describe() << ": aggregate_function must be in [0, 3], got " << agg;
    KILN_CHECK(post >= ml::kNone && post <= ml::kProbit, kInvalidArgument)
        << n.describe() << ": post_transform must be in [0, 4], got " << post;

    const int64_t m = e.n_targets;
    Tensor y(x.dtype(), {rows, m});
    std::vector<double> row(static_cast<size_t>(num_features)), acc(static_cast<size_t>(m));
    std::vector<char> hit(static_cast<size_t>(m));
    const double init = agg == kMin   ? dtype_max(x.dtype())
                        : agg == kMax ? -dtype_max(x.dtype())
                                      : 0.0;
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t f = 0; f < num_features; ++f)
            row[static_cast<size_t>(f)] = x.get_f64(r * num_features + f);
        std::fill(acc.begin(), acc.end(), init);
        for (const TreeRef& root : e.core.roots) {
            const auto leaf = static_cast<size_t>(ml::tree_find_leaf(n, e.core, root, row.data()));
            const auto t = static_cast<size_t>(e.core.leaves[leaf][0].first);
            const double w = e.core.leaves[leaf][0].second;
            switch (agg) {
                case kMin:
                    acc[t] = std::min(acc[t], w);
                    break;
                case kMax:
                    acc[t] = std::max(acc[t], w);
                    break;
                default:
                    acc[t] += w;
                    break;
            }
        }
        if (agg == kAverage)
            for (double& v : acc) v /= static_cast<double>(e.core.roots.size());
        ml::tree_post_transform(post, acc.data(), m);
        for (int64_t j = 0; j < m; ++j) y.set_f64(r * m + j, acc[static_cast<size_t>(j)]);
    }
    return {std::move(y)};
}

OpDef tree_ensemble_op() {
    OpDef d;
    d.name = "TreeEnsemble";
    d.domain = "ai.onnx.ml";
    d.onnx_versions = {5};
    d.attrs = {
        {"aggregate_function", AttrKind::kInt, ir::Attr(int64_t{kSum})},
        {"leaf_targetids", AttrKind::kInts, std::nullopt, true},
        {"leaf_weights", AttrKind::kTensor, std::nullopt, true},
        {"membership_values", AttrKind::kTensor, std::nullopt},
        {"n_targets", AttrKind::kInt, std::nullopt},
        {"nodes_falseleafs", AttrKind::kInts, std::nullopt, true},
        {"nodes_falsenodeids", AttrKind::kInts, std::nullopt, true},
        {"nodes_featureids", AttrKind::kInts, std::nullopt, true},
        {"nodes_hitrates", AttrKind::kTensor, std::nullopt},
        {"nodes_missing_value_tracks_true", AttrKind::kInts, std::nullopt},
        {"nodes_modes", AttrKind::kTensor, std::nullopt, true},
        {"nodes_splits", AttrKind::kTensor, std::nullopt, true},
        {"nodes_trueleafs", AttrKind::kInts, std::nullopt, true},
        {"nodes_truenodeids", AttrKind::kInts, std::nullopt, true},
        {"post_transform", AttrKind::kInt, ir::Attr(int64_t{ml::kNone})},
        {"tree_roots", AttrKind::kInts, std::nullopt, true},
    };
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, {DType::kFloat32, DType::kFloat64, DType::kFloat16});
        ir::Dim rows = x.rank() == 2 ? x.shape[0] : ir::Dim(1);
        ir::Dim targets = ir::Dim::sym("?");
        if (n.has_attr("n_targets")) {
            targets = ir::Dim(n.attr_int("n_targets", 1));
        } else {
            int64_t max_target = -1;
            for (int64_t t : n.attr_ints("leaf_targetids")) max_target = std::max(max_target, t);
            targets = ir::Dim(max_target + 1);
        }
        return std::vector<ir::TensorType>{{x.dtype, {rows, targets}}};
    };
    d.host = tree_ensemble_host;
    return d;
}

}  // namespace

void register_ml_tree_ensemble_ops(OpRegistry& r) { r.add(tree_ensemble_op()); }

}  // namespace kiln::op
