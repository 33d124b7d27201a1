// ai.onnx.ml TreeEnsembleRegressor and TreeEnsembleClassifier (1, 3): the classic tree-ensemble
// layout that scikit-learn converters (skl2onnx) emit, as host kernels over the shared core
// (ml_tree_core.h). X [N, F] (a 1-D X is one row), any of f32 f64 i64 i32, compared as doubles.
//
// Layout: node i of the parallel nodes_* arrays is (nodes_treeids[i], nodes_nodeids[i]); its
// nodes_modes[i] is BRANCH_LEQ/LT/GTE/GT/EQ/NEQ or LEAF; nodes_{true,false}nodeids name node ids
// of the same tree. A tree's root is its first node in array order; trees run in ascending tree
// id. Weights attach to leaves by (tree id, node id): target_{treeids,nodeids,ids,weights} for
// the regressor, class_{treeids,nodeids,ids,weights} for the classifier (version 3 also takes
// nodes_values / *_weights / base_values as *_as_tensor attributes).
//
// The outputs follow ONNX Runtime (the peer users compare against), whose rules are:
// - Regressor -> Y [N, n_targets] f32. Per target, the leaves reached add (SUM, AVERAGE) or keep
//   the min / max (MIN, MAX) of their weights; a target no leaf reaches counts 0. AVERAGE divides
//   by the number of trees. base_values (one per target, or none) is added last. post_transform
//   applies to the row; with a single target only PROBIT does (ONNX Runtime ignores the others).
// - Classifier -> Y [N] labels (classlabels_int64s -> i64, classlabels_strings -> string) and
//   Z [N, C] f32, C = number of labels. Weights are summed per class; a class that no reached
//   leaf weighs ("no score") writes 0 to Z.
//   C > 2: base_values (C of them, or none) is added (giving every class a score); the label is the
//   first class of highest score among those with a score (the first label if none has); Z is the
//   post transform of the scores.
//   C == 2: "binary" when class_ids name one class only. base_values of size 2: when class 1 has a
//   score, s1 = b1 + s0 and s0 = -s1, else both get their base added (a class without score
//   still writes 0); of size 1: s0 += b0. When class 1 has no score (and fewer than two base
//   values) the row has one score s = s0 (0 without score); the
//   decision weight is s1 if class 1 has a score, else s0 (0 without score). Label: binary with
//   all weights >= 0: weight > 0.5 -> label 1, else label 0; binary with a negative weight, or
//   not binary: weight > 0 -> label 1, else label 0 (ONNX Runtime writes the literal 1 / 0 for
//   integer labels when not binary: Kiln writes the labels, the same for the usual [0, 1]).
//   Z with one score s: LOGISTIC gives [logistic(-s), logistic(s)]; otherwise [1 - s, s] when the
//   weights are all >= 0 and binary, else [-s, s]; PROBIT gives [probit(s), 0] (ONNX Runtime
//   leaves the second entry unset). Z with two scores: the post transform of both.
//   C == 1 is unsupported.
// Every id is validated before evaluation and walks are bounded (ml_tree_core), so a malformed
// ensemble is a kiln::Error, never a crash or a hang.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "op/defs/ml_tree_core.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using ml::TreeCore;
using ml::TreeRef;

enum Aggregate { kSum, kAverage, kMin, kMax };

const std::vector<DType>& x_types() {
    static const std::vector<DType> t{DType::kFloat32, DType::kFloat64, DType::kInt64,
                                      DType::kInt32};
    return t;
}

// The nodes_* arrays and the (tree, node, target, weight) rows of prefix `target` / `class`
// read into a TreeCore. Throws kInvalidArgument / kInvalidModel naming the node.
TreeCore read_classic(const ir::Node& n, const std::string& prefix) {
    const auto tree_ids = n.attr_ints("nodes_treeids");
    const auto node_ids = n.attr_ints("nodes_nodeids");
    const auto features = n.attr_ints("nodes_featureids");
    const auto true_ids = n.attr_ints("nodes_truenodeids");
    const auto false_ids = n.attr_ints("nodes_falsenodeids");
    const auto values = ml::floats_or_tensor_attr(n, "nodes_values");
    std::vector<std::string> modes;
    if (auto it = n.attrs().find("nodes_modes"); it != n.attrs().end())
        if (const auto* s = std::get_if<std::vector<std::string>>(&it->second)) modes = *s;
    const size_t count = tree_ids.size();
    const auto missing =
        n.attr_ints("nodes_missing_value_tracks_true", std::vector<int64_t>(count, 0));
    auto check_len = [&](const std::string& what, size_t got, size_t want) {
        KILN_CHECK(got == want, kInvalidArgument)
            << n.describe() << ": " << what << " has " << got << " entries, expected " << want;
    };
    KILN_CHECK(count > 0, kInvalidArgument) << n.describe() << ": nodes_treeids is empty";
    check_len("nodes_nodeids", node_ids.size(), count);
    check_len("nodes_modes", modes.size(), count);
    check_len("nodes_featureids", features.size(), count);
    check_len("nodes_truenodeids", true_ids.size(), count);
    check_len("nodes_falsenodeids", false_ids.size(), count);
    check_len("nodes_values", values.size(), count);
    check_len("nodes_missing_value_tracks_true", missing.size(), count);

    // (tree, node id) -> interior index or leaf index.
    static const char* const kModes[] = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE",
                                         "BRANCH_GT",  "BRANCH_EQ", "BRANCH_NEQ"};
    TreeCore core;
    std::map<std::pair<int64_t, int64_t>, TreeRef> where;
    std::vector<int64_t> mode_of(count, -1);
    for (size_t i = 0; i < count; ++i) {
        if (modes[i] != "LEAF") {
            for (int64_t m = 0; m < 6; ++m)
                if (modes[i] == kModes[m]) mode_of[i] = m;
            KILN_CHECK(mode_of[i] >= 0, kInvalidArgument)
                << n.describe() << ": nodes_modes[" << i << "]='" << modes[i]
                << "' is not LEAF or BRANCH_LEQ/LT/GTE/GT/EQ/NEQ";
        }
        const bool leaf = mode_of[i] < 0;
        TreeRef r{static_cast<int64_t>(leaf ? core.leaves.size() : core.nodes.size()), leaf};
        KILN_CHECK(where.emplace(std::make_pair(tree_ids[i], node_ids[i]), r).second,
                   kInvalidArgument)
            << n.describe() << ": node id " << node_ids[i] << " appears twice in tree "
            << tree_ids[i];
        if (leaf) core.leaves.emplace_back();
        else core.nodes.emplace_back();
    }
    auto lookup = [&](int64_t tree, int64_t id, const std::string& what) {
        auto it = where.find({tree, id});
        KILN_CHECK(it != where.end(), kInvalidArgument)
            << n.describe() << ": " << what << " names node " << id << ", not a node of tree "
            << tree;
        return it->second;
    };
    std::set<int64_t> seen_trees;
    std::map<int64_t, TreeRef> roots;
    for (size_t i = 0; i < count; ++i) {
        const TreeRef self = where.at({tree_ids[i], node_ids[i]});
        roots.emplace(tree_ids[i], self);  // the first node of each tree
        if (self.leaf) continue;
        ml::TreeInterior& d = core.nodes[static_cast<size_t>(self.index)];
        d.feature = features[i];
        d.mode = mode_of[i];
        d.split = values[i];
        d.missing_true = missing[i] != 0;
        d.on_true =
            lookup(tree_ids[i], true_ids[i], "nodes_truenodeids[" + std::to_string(i) + "]");
        d.on_false =
            lookup(tree_ids[i], false_ids[i], "nodes_falsenodeids[" + std::to_string(i) + "]");
    }
    for (const auto& [tree, root] : roots) core.roots.push_back(root);

    const auto w_trees = n.attr_ints(prefix + "_treeids");
    const auto w_nodes = n.attr_ints(prefix + "_nodeids");
    const auto w_ids = n.attr_ints(prefix + "_ids");
    const auto weights = ml::floats_or_tensor_attr(n, prefix + "_weights");
    check_len(prefix + "_nodeids", w_nodes.size(), w_trees.size());
    check_len(prefix + "_ids", w_ids.size(), w_trees.size());
    check_len(prefix + "_weights", weights.size(), w_trees.size());
    for (size_t k = 0; k < w_trees.size(); ++k) {
        const std::string what = prefix + "_nodeids[" + std::to_string(k) + "]";
        const TreeRef r = lookup(w_trees[k], w_nodes[k], what);
        KILN_CHECK(r.leaf, kInvalidArgument)
            << n.describe() << ": " << what << " names node " << w_nodes[k]
            << ", which is not a LEAF";
        KILN_CHECK(w_ids[k] >= 0, kInvalidArgument)
            << n.describe() << ": " << prefix << "_ids[" << k << "]=" << w_ids[k] << " is negative";
        core.leaves[static_cast<size_t>(r.index)].emplace_back(w_ids[k], weights[k]);
    }
    return core;
}

// X as [rows, F] doubles, validated.
std::vector<double> read_x(const ir::Node& n, const Tensor& x, int64_t& rows, int64_t& features) {
    check_dtype(n, "X", x.dtype(), x_types());
    KILN_CHECK(x.shape().size() == 1 || x.shape().size() == 2, kInvalidArgument)
        << n.describe() << ": X must have shape [N, F] (or [F]), got " << shape_str(x.shape());
    rows = x.shape().size() == 2 ? x.shape()[0] : 1;
    features = x.shape().back();
    std::vector<double> v(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) v[static_cast<size_t>(i)] = x.get_f64(i);
    return v;
}

ir::Dim rows_of(const ir::TensorType& x) { return x.rank() == 2 ? x.shape[0] : ir::Dim(1); }

// ---------------------------------------------------------------------------------------------
// TreeEnsembleRegressor

std::vector<Datum> regressor_host(const HostArgs& a) {
    const ir::Node& n = a.node;
    int64_t rows = 0, num_features = 0;
    const std::vector<double> x = read_x(n, a.tensor(0), rows, num_features);
    const TreeCore core = read_classic(n, "target");
    ml::validate_tree_core(n, core, num_features);
    int64_t max_target = -1;
    for (const auto& leaf : core.leaves)
        for (const auto& [t, w] : leaf) max_target = std::max(max_target, t);
    const int64_t m = n.attr_int("n_targets", max_target + 1);
    KILN_CHECK(m >= 1 && max_target < m, kInvalidArgument)
        << n.describe() << ": n_targets=" << m << " must be >= 1 and above every target id (max "
        << max_target << ")";
    const std::string agg_s = n.attr_string("aggregate_function", "SUM");
    const int agg = agg_s == "SUM" ? kSum : agg_s == "AVERAGE" ? kAverage : agg_s == "MIN" ? kMin
                  : agg_s == "MAX" ? kMax : -1;
    KILN_CHECK(agg >= 0, kInvalidArgument) << n.describe()
        << ": aggregate_function must be SUM, AVERAGE, MIN or MAX, got '" << agg_s << "'";
    const int64_t post = ml::parse_post_transform(n, n.attr_string("post_transform", "NONE"));
    const std::vector<double> base = ml::floats_or_tensor_attr(n, "base_values");
    KILN_CHECK(base.empty() || static_cast<int64_t>(base.size()) == m, kInvalidArgument)
        << n.describe() << ": base_values has " << base.size() << " entries, expected 0 or " << m;

    Tensor y(DType::kFloat32, {rows, m});
    std::vector<double> acc(static_cast<size_t>(m));
    std::vector<char> has(static_cast<size_t>(m));
    for (int64_t r = 0; r < rows; ++r) {
        std::fill(acc.begin(), acc.end(), 0.0);
        std::fill(has.begin(), has.end(), 0);
        for (const TreeRef& root : core.roots) {
            const int64_t leaf =
                ml::tree_find_leaf(n, core, root, &x[static_cast<size_t>(r * num_features)]);
            for (const auto& [t, w] : core.leaves[static_cast<size_t>(leaf)]) {
                double& v = acc[static_cast<size_t>(t)];
                char& h = has[static_cast<size_t>(t)];
                if (agg == kMin) v = (!h || w < v) ? w : v;
                else if (agg == kMax) v = (!h || w > v) ? w : v;
                else v += w;
                h = 1;
            }
        }
        for (int64_t j = 0; j < m; ++j) {
            double& v = acc[static_cast<size_t>(j)];
            if (agg == kAverage) v /= static_cast<double>(core.roots.size());
            if (!base.empty()) v += base[static_cast<size_t>(j)];
        }
        if (m >= 2) ml::tree_post_transform(post, acc.data(), m);
        else if (post == ml::kProbit) acc[0] = ml::probit(acc[0]);
        for (int64_t j = 0; j < m; ++j) y.set_f64(r * m + j, acc[static_cast<size_t>(j)]);
    }
    return {std::move(y)};
}

std::vector<AttrSpec> common_tree_attrs() {
    return {
        {"base_values", AttrKind::kFloats, std::nullopt},
        {"base_values_as_tensor", AttrKind::kTensor, std::nullopt},
        {"nodes_falsenodeids", AttrKind::kInts, std::nullopt},
        {"nodes_featureids", AttrKind::kInts, std::nullopt},
        {"nodes_hitrates", AttrKind::kFloats, std::nullopt},
        {"nodes_hitrates_as_tensor", AttrKind::kTensor, std::nullopt},
        {"nodes_missing_value_tracks_true", AttrKind::kInts, std::nullopt},
        {"nodes_modes", AttrKind::kStrings, std::nullopt, true},
        {"nodes_nodeids", AttrKind::kInts, std::nullopt},
        {"nodes_treeids", AttrKind::kInts, std::nullopt},
        {"nodes_truenodeids", AttrKind::kInts, std::nullopt},
        {"nodes_values", AttrKind::kFloats, std::nullopt},
        {"nodes_values_as_tensor", AttrKind::kTensor, std::nullopt},
        {"post_transform", AttrKind::kString, ir::Attr(std::string("NONE"))},
    };
}

OpDef tree_ensemble_regressor_op() {
    OpDef d;
    d.name = "TreeEnsembleRegressor";
    d.domain = "ai.onnx.ml";
    d.onnx_versions = {1, 3};
    d.attrs = common_tree_attrs();
    d.attrs.push_back({"aggregate_function", AttrKind::kString, ir::Attr(std::string("SUM"))});
    d.attrs.push_back({"n_targets", AttrKind::kInt, std::nullopt});
    d.attrs.push_back({"target_ids", AttrKind::kInts, std::nullopt});
    d.attrs.push_back({"target_nodeids", AttrKind::kInts, std::nullopt});
    d.attrs.push_back({"target_treeids", AttrKind::kInts, std::nullopt});
    d.attrs.push_back({"target_weights", AttrKind::kFloats, std::nullopt});
    d.attrs.push_back({"target_weights_as_tensor", AttrKind::kTensor, std::nullopt});
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, x_types());
        ir::Dim targets = ir::Dim::sym("?");
        if (n.has_attr("n_targets")) {
            targets = ir::Dim(n.attr_int("n_targets", 1));
        } else if (n.has_attr("target_ids")) {
            int64_t mx = -1;
            for (int64_t t : n.attr_ints("target_ids")) mx = std::max(mx, t);
            targets = ir::Dim(mx + 1);
        }
        return std::vector<ir::TensorType>{{DType::kFloat32, {rows_of(x), targets}}};
    };
    d.host = regressor_host;
    return d;
}

// ---------------------------------------------------------------------------------------------
// TreeEnsembleClassifier

struct Labels {
    std::vector<int64_t> ints;
    std::vector<std::string> strings;
    bool is_string = false;
    int64_t size() const {
        return static_cast<int64_t>(is_string ? strings.size() : ints.size());
    }
};

Labels class_labels(const ir::Node& n) {
    Labels l;
    const bool has_ints = n.has_attr("classlabels_int64s");
    l.is_string = n.has_attr("classlabels_strings");
    KILN_CHECK(has_ints != l.is_string, kInvalidModel)
        << n.describe() << ": expected exactly one of classlabels_int64s / classlabels_strings";
    if (has_ints) {
        l.ints = n.attr_ints("classlabels_int64s");
    } else {
        const auto& a = n.attrs().at("classlabels_strings");
        if (const auto* s = std::get_if<std::vector<std::string>>(&a)) l.strings = *s;
    }
    return l;
}

std::vector<Datum> classifier_host(const HostArgs& a) {
    const ir::Node& n = a.node;
    int64_t rows = 0, num_features = 0;
    const std::vector<double> x = read_x(n, a.tensor(0), rows, num_features);
    const TreeCore core = read_classic(n, "class");
    ml::validate_tree_core(n, core, num_features);
    const Labels labels = class_labels(n);
    const int64_t c = labels.size();
    KILN_CHECK(c >= 2, kUnsupported)
        << n.describe() << ": a classifier with " << c << " class label(s) is not supported "
        << "(expected at least 2)";
    std::set<int64_t> weighted;
    bool all_positive = true;
    for (const auto& leaf : core.leaves)
        for (const auto& [id, w] : leaf) {
            KILN_CHECK(id < c, kInvalidArgument)
                << n.describe() << ": class id " << id << " is out of range [0, " << c << ")";
            weighted.insert(id);
            if (w < 0) all_positive = false;
        }
    const bool binary = c == 2 && weighted.size() == 1;
    const int64_t post = ml::parse_post_transform(n, n.attr_string("post_transform", "NONE"));
    const std::vector<double> base = ml::floats_or_tensor_attr(n, "base_values");
    KILN_CHECK(base.empty() || static_cast<int64_t>(base.size()) == c ||
                   (c == 2 && base.size() == 1),
               kInvalidArgument)
        << n.describe() << ": base_values has " << base.size() << " entries, expected 0 or " << c;

    Tensor y(labels.is_string ? DType::kString : DType::kInt64, {rows});
    Tensor z(DType::kFloat32, {rows, c});
    std::vector<double> s(static_cast<size_t>(c));
    std::vector<char> has(static_cast<size_t>(c));
    auto set_label = [&](int64_t r, int64_t k) {
        if (labels.is_string) y.data_as<std::string>()[r] = labels.strings[static_cast<size_t>(k)];
        else y.data_as<int64_t>()[r] = labels.ints[static_cast<size_t>(k)];
    };
    for (int64_t r = 0; r < rows; ++r) {
        std::fill(s.begin(), s.end(), 0.0);
        std::fill(has.begin(), has.end(), 0);
        for (const TreeRef& root : core.roots) {
            const int64_t leaf =
                ml::tree_find_leaf(n, core, root, &x[static_cast<size_t>(r * num_features)]);
            for (const auto& [id, w] : core.leaves[static_cast<size_t>(leaf)]) {
                s[static_cast<size_t>(id)] += w;
                has[static_cast<size_t>(id)] = 1;
            }
        }
        float* zr = z.data_as<float>() + r * c;
        if (c > 2) {
            for (size_t k = 0; k < base.size(); ++k) {
                s[k] += base[k];
                has[k] = 1;
            }
            int64_t best = -1;
            for (int64_t k = 0; k < c; ++k) {
                const auto uk = static_cast<size_t>(k);
                if (has[uk] && (best < 0 || s[uk] > s[static_cast<size_t>(best)])) best = k;
            }
            set_label(r, std::max<int64_t>(best, 0));
            for (int64_t k = 0; k < c; ++k)
                if (!has[static_cast<size_t>(k)]) s[static_cast<size_t>(k)] = 0;
            ml::tree_post_transform(post, s.data(), c);
            for (int64_t k = 0; k < c; ++k) zr[k] = static_cast<float>(s[static_cast<size_t>(k)]);
            continue;
        }
        // Two classes (ONNX Runtime's rules, see the file comment).
        if (base.size() == 2) {
            if (has[1]) {
                s[1] = base[1] + s[0];
                s[0] = -s[1];
            } else {
                s[0] += base[0];
                s[1] += base[1];
            }
        } else if (base.size() == 1) {
            s[0] += base[0];
        }
        const bool two_scores = has[1] != 0 || base.size() == 2;
        const double pos = has[1] ? s[1] : (has[0] ? s[0] : 0.0);
        const bool positive = (binary && all_positive) ? pos > 0.5 : pos > 0;
        set_label(r, positive ? 1 : 0);
        if (two_scores) {
            double v[2] = {has[0] ? s[0] : 0.0, has[1] ? s[1] : 0.0};
            ml::tree_post_transform(post, v, 2);
            zr[0] = static_cast<float>(v[0]);
            zr[1] = static_cast<float>(v[1]);
            continue;
        }
        const double one = has[0] ? s[0] : 0.0;
        const bool add_second = binary || base.empty();  // ONNX Runtime's add_second_class >= 0
        if (post == ml::kProbit) {
            zr[0] = static_cast<float>(ml::probit(one));
            zr[1] = 0;
        } else if (!add_second) {
            zr[0] = static_cast<float>(one);
            zr[1] = 0;
        } else if (post == ml::kLogistic) {
            zr[0] = static_cast<float>(1 / (1 + std::exp(one)));
            zr[1] = static_cast<float>(1 / (1 + std::exp(-one)));
        } else {
            zr[0] = static_cast<float>(binary && all_positive ? 1 - one : -one);
            zr[1] = static_cast<float>(one);
        }
    }
    return {std::move(y), std::move(z)};
}

OpDef tree_ensemble_classifier_op() {
    OpDef d;
    d.name = "TreeEnsembleClassifier";
    d.domain = "ai.onnx.ml";
    d.onnx_versions = {1, 3};
    d.min_outputs = d.max_outputs = 2;
    d.attrs = common_tree_attrs();
    d.attrs.push_back({"class_ids", AttrKind::kInts, std::nullopt});
    d.attrs.push_back({"class_nodeids", AttrKind::kInts, std::nullopt});
    d.attrs.push_back({"class_treeids", AttrKind::kInts, std::nullopt});
    d.attrs.push_back({"class_weights", AttrKind::kFloats, std::nullopt});
    d.attrs.push_back({"class_weights_as_tensor", AttrKind::kTensor, std::nullopt});
    d.attrs.push_back({"classlabels_int64s", AttrKind::kInts, std::nullopt});
    d.attrs.push_back({"classlabels_strings", AttrKind::kStrings, std::nullopt});
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, x_types());
        const Labels l = class_labels(n);
        const ir::Dim rows = rows_of(x);
        return std::vector<ir::TensorType>{
            {l.is_string ? DType::kString : DType::kInt64, {rows}},
            {DType::kFloat32, {rows, ir::Dim(l.size())}}};
    };
    d.host = classifier_host;
    return d;
}

}  // namespace

void register_ml_tree_classic_ops(OpRegistry& r) {
    r.add(tree_ensemble_regressor_op());
    r.add(tree_ensemble_classifier_op());
}

}  // namespace kiln::op
