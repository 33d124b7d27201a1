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
// ensemble (bad ids, cycles) is a kiln::Error, never a crash or a hang.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

enum Mode : int64_t { kLeq = 0, kLt, kGte, kGt, kEq, kNeq, kMember };
enum Aggregate : int64_t { kAverage = 0, kSum, kMin, kMax };
enum PostTransform : int64_t { kNone = 0, kSoftmax, kLogistic, kSoftmaxZero, kProbit };

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
    std::vector<double> splits;
    std::vector<int64_t> features, modes, true_ids, false_ids, true_leaf, false_leaf, missing_true;
    std::vector<std::vector<double>> members;  // per node; only MEMBER nodes' are non-empty
    std::vector<double> leaf_weights;
    std::vector<int64_t> leaf_targets;
    std::vector<int64_t> roots;
    int64_t n_targets = 0;
};

Ensemble read_ensemble(const ir::Node& n, int64_t num_features) {
    Ensemble e;
    e.splits = tensor_values(tensor_attr(n, "nodes_splits"));
    const Tensor& modes = tensor_attr(n, "nodes_modes");
    KILN_CHECK(!dtype_is_float(modes.dtype()) && modes.dtype() != DType::kString, kInvalidArgument)
        << n.describe() << ": nodes_modes must be an integer tensor (u8), got "
        << dtype_name(modes.dtype());
    for (int64_t i = 0; i < modes.numel(); ++i) e.modes.push_back(modes.get_i64(i));
    e.features = n.attr_ints("nodes_featureids");
    e.true_ids = n.attr_ints("nodes_truenodeids");
    e.false_ids = n.attr_ints("nodes_falsenodeids");
    e.true_leaf = n.attr_ints("nodes_trueleafs");
    e.false_leaf = n.attr_ints("nodes_falseleafs");
    e.leaf_weights = tensor_values(tensor_attr(n, "leaf_weights"));
    e.leaf_targets = n.attr_ints("leaf_targetids");
    e.roots = n.attr_ints("tree_roots");
    const size_t num_nodes = e.features.size(), num_leaves = e.leaf_targets.size();
    e.missing_true =
        n.attr_ints("nodes_missing_value_tracks_true", std::vector<int64_t>(num_nodes, 0));

    auto check_len = [&](const char* what, size_t got, size_t want) {
        KILN_CHECK(got == want, kInvalidArgument)
            << n.describe() << ": " << what << " has " << got << " entries, expected " << want;
    };
    check_len("nodes_splits", e.splits.size(), num_nodes);
    check_len("nodes_modes", e.modes.size(), num_nodes);
    check_len("nodes_truenodeids", e.true_ids.size(), num_nodes);
    check_len("nodes_falsenodeids", e.false_ids.size(), num_nodes);
    check_len("nodes_trueleafs", e.true_leaf.size(), num_nodes);
    check_len("nodes_falseleafs", e.false_leaf.size(), num_nodes);
    check_len("nodes_missing_value_tracks_true", e.missing_true.size(), num_nodes);
    check_len("leaf_weights", e.leaf_weights.size(), num_leaves);
    KILN_CHECK(!e.roots.empty(), kInvalidArgument) << n.describe() << ": tree_roots is empty";

    int64_t max_target = -1;
    for (int64_t t : e.leaf_targets) max_target = std::max(max_target, t);
    e.n_targets = n.attr_int("n_targets", max_target + 1);
    KILN_CHECK(e.n_targets >= 1, kInvalidArgument)
        << n.describe() << ": n_targets must be >= 1, got " << e.n_targets;
    for (size_t l = 0; l < num_leaves; ++l)
        KILN_CHECK(e.leaf_targets[l] >= 0 && e.leaf_targets[l] < e.n_targets, kInvalidArgument)
            << n.describe() << ": leaf_targetids[" << l << "]=" << e.leaf_targets[l]
            << " is out of range [0, " << e.n_targets << ")";
    for (int64_t r : e.roots)
        KILN_CHECK(r >= 0 && r < static_cast<int64_t>(num_nodes), kInvalidArgument)
            << n.describe() << ": tree root " << r << " is out of range [0, " << num_nodes << ")";

    std::vector<double> member_values;
    if (n.has_attr("membership_values"))
        member_values = tensor_values(tensor_attr(n, "membership_values"));
    size_t next_member = 0;
    e.members.resize(num_nodes);
    for (size_t i = 0; i < num_nodes; ++i) {
        KILN_CHECK(e.modes[i] >= kLeq && e.modes[i] <= kMember, kInvalidArgument)
            << n.describe() << ": nodes_modes[" << i << "]=" << e.modes[i]
            << " is not a mode in [0, 6]";
        KILN_CHECK(e.features[i] >= 0 && e.features[i] < num_features, kInvalidArgument)
            << n.describe() << ": nodes_featureids[" << i << "]=" << e.features[i]
            << " is out of range [0, " << num_features << ")";
        for (bool t : {true, false}) {
            const int64_t id = t ? e.true_ids[i] : e.false_ids[i];
            const bool leaf = (t ? e.true_leaf[i] : e.false_leaf[i]) != 0;
            const size_t bound = leaf ? num_leaves : num_nodes;
            KILN_CHECK(id >= 0 && id < static_cast<int64_t>(bound), kInvalidArgument)
                << n.describe() << ": nodes_" << (t ? "true" : "false") << "nodeids[" << i
                << "]=" << id << " is out of range [0, " << bound << ") of the "
                << (leaf ? "leaves" : "nodes");
        }
        if (e.modes[i] != kMember) continue;
        KILN_CHECK(next_member < member_values.size(), kInvalidArgument)
            << n.describe() << ": membership_values has no set for BRANCH_MEMBER node " << i;
        while (next_member < member_values.size() && !std::isnan(member_values[next_member]))
            e.members[i].push_back(member_values[next_member++]);
        ++next_member;  // the NaN ending the set (or the end)
        std::sort(e.members[i].begin(), e.members[i].end());
    }
    return e;
}

bool branch_true(const Ensemble& e, size_t i, double x) {
    if (std::isnan(x) && e.missing_true[i] != 0) return true;
    const double s = e.splits[i];
    switch (e.modes[i]) {
        case kLeq:
            return x <= s;
        case kLt:
            return x < s;
        case kGte:
            return x >= s;
        case kGt:
            return x > s;
        case kEq:
            return x == s;
        case kNeq:
            return x != s;
        default:
            return std::binary_search(e.members[i].begin(), e.members[i].end(), x);
    }
}

// The leaf a row reaches from root `root`.
int64_t find_leaf(const ir::Node& n, const Ensemble& e, int64_t root, const double* row) {
    auto i = static_cast<size_t>(root);
    for (size_t steps = 0; steps <= e.features.size(); ++steps) {
        const bool t = branch_true(e, i, row[e.features[i]]);
        const int64_t id = t ? e.true_ids[i] : e.false_ids[i];
        if ((t ? e.true_leaf[i] : e.false_leaf[i]) != 0) return id;
        i = static_cast<size_t>(id);
    }
    KILN_THROW(kInvalidArgument) << n.describe() << ": the tree at root " << root << " has a cycle";
    return -1;  // not reached: KILN_THROW throws
}

// Inverse error function: Winitzki's closed-form approximation refined by Newton steps on erf.
double erfinv(double y) {
    if (std::isnan(y)) return y;
    if (y <= -1) return -std::numeric_limits<double>::infinity();
    if (y >= 1) return std::numeric_limits<double>::infinity();
    constexpr double kA = 0.147;
    const double ln = std::log((1 - y) * (1 + y));
    const double t = 2 / (std::numbers::pi * kA) + ln / 2;
    double x = std::copysign(std::sqrt(std::sqrt(t * t - ln / kA) - t), y);
    for (int k = 0; k < 3; ++k)
        x -= (std::erf(x) - y) / (2 / std::sqrt(std::numbers::pi) * std::exp(-x * x));
    return x;
}

void post_transform(int64_t kind, double* v, int64_t m) {
    switch (kind) {
        case kSoftmax:
        case kSoftmaxZero: {
            double mx = -std::numeric_limits<double>::infinity();
            for (int64_t j = 0; j < m; ++j) mx = std::max(mx, v[j]);
            double sum = 0;
            for (int64_t j = 0; j < m; ++j) {
                v[j] = (kind == kSoftmaxZero && v[j] == 0) ? 0 : std::exp(v[j] - mx);
                sum += v[j];
            }
            for (int64_t j = 0; j < m; ++j) v[j] /= sum;
            break;
        }
        case kLogistic:
            for (int64_t j = 0; j < m; ++j) v[j] = 1 / (1 + std::exp(-v[j]));
            break;
        case kProbit:
            for (int64_t j = 0; j < m; ++j) v[j] = std::sqrt(2.0) * erfinv(2 * v[j] - 1);
            break;
        default:
            break;
    }
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
    const int64_t post = n.attr_int("post_transform", kNone);
    KILN_CHECK(agg >= kAverage && agg <= kMax, kInvalidArgument)
        << n.describe() << ": aggregate_function must be in [0, 3], got " << agg;
    KILN_CHECK(post >= kNone && post <= kProbit, kInvalidArgument)
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
        for (int64_t root : e.roots) {
            const auto leaf = static_cast<size_t>(find_leaf(n, e, root, row.data()));
            const auto t = static_cast<size_t>(e.leaf_targets[leaf]);
            const double w = e.leaf_weights[leaf];
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
            for (double& v : acc) v /= static_cast<double>(e.roots.size());
        post_transform(post, acc.data(), m);
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
        {"post_transform", AttrKind::kInt, ir::Attr(int64_t{kNone})},
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
