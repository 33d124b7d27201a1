// The shared tree-ensemble core (ml_tree_core.h): reference validation, the bounded walk of a row
// down one tree, and the post transforms. A NaN feature takes the true branch when the node's
// missing-value flag is set, otherwise the comparison's result (false, except NEQ). A walk that
// takes more steps than there are interior nodes has met a cycle: a kiln::Error, never a hang.
#include "op/defs/ml_tree_core.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "support/error.h"
#include "support/tensor.h"

namespace kiln::op::ml {

void validate_tree_core(const ir::Node& n, const TreeCore& t, int64_t num_features) {
    const auto num_nodes = static_cast<int64_t>(t.nodes.size());
    const auto num_leaves = static_cast<int64_t>(t.leaves.size());
    auto check_ref = [&](const TreeRef& r, const std::string& what) {
        const int64_t bound = r.leaf ? num_leaves : num_nodes;
        KILN_CHECK(r.index >= 0 && r.index < bound, kInvalidArgument)
            << n.describe() << ": " << what << " names " << (r.leaf ? "leaf " : "node ") << r.index
            << ", out of range [0, " << bound << ")";
    };
    KILN_CHECK(!t.roots.empty(), kInvalidArgument) << n.describe() << ": the ensemble has no tree";
    for (size_t i = 0; i < t.roots.size(); ++i)
        check_ref(t.roots[i], "tree root " + std::to_string(i));
    for (int64_t i = 0; i < num_nodes; ++i) {
        const TreeInterior& d = t.nodes[static_cast<size_t>(i)];
        KILN_CHECK(d.feature >= 0 && d.feature < num_features, kInvalidArgument)
            << n.describe() << ": node " << i << " reads feature " << d.feature
            << ", out of range [0, " << num_features << ")";
        check_ref(d.on_true, "the true branch of node " + std::to_string(i));
        check_ref(d.on_false, "the false branch of node " + std::to_string(i));
    }
}

namespace {

bool branch_true(const TreeInterior& d, double x) {
    if (std::isnan(x) && d.missing_true) return true;
    const double s = d.split;
    switch (d.mode) {
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
            return std::binary_search(d.members.begin(), d.members.end(), x);
    }
}

// Inverse error function: Winitzki's closed-form approximation refined by Newton steps on erf.
double erfinv(double y) {
    if (std::isnan(y) || y < -1 || y > 1) return std::numeric_limits<double>::quiet_NaN();
    if (y == -1) return -std::numeric_limits<double>::infinity();
    if (y == 1) return std::numeric_limits<double>::infinity();
    constexpr double kA = 0.147;
    const double ln = std::log((1 - y) * (1 + y));
    const double t = 2 / (std::numbers::pi * kA) + ln / 2;
    double x = std::copysign(std::sqrt(std::sqrt(t * t - ln / kA) - t), y);
    for (int k = 0; k < 3; ++k)
        x -= (std::erf(x) - y) / (2 / std::sqrt(std::numbers::pi) * std::exp(-x * x));
    return x;
}

}  // namespace

int64_t tree_find_leaf(const ir::Node& n, const TreeCore& t, TreeRef root, const double* row) {
    TreeRef r = root;
    for (size_t steps = 0; steps <= t.nodes.size(); ++steps) {
        if (r.leaf) return r.index;
        const TreeInterior& d = t.nodes[static_cast<size_t>(r.index)];
        r = branch_true(d, row[d.feature]) ? d.on_true : d.on_false;
    }
    KILN_THROW(kInvalidArgument) << n.describe() << ": the tree at node " << root.index
                                 << " has a cycle";
    return -1;  // not reached: KILN_THROW throws
}

double probit(double p) { return std::numbers::sqrt2 * erfinv(2 * p - 1); }

void tree_post_transform(int64_t kind, double* v, int64_t m) {
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
            for (int64_t j = 0; j < m; ++j) v[j] = probit(v[j]);
            break;
        default:
            break;
    }
}

int64_t parse_post_transform(const ir::Node& n, const std::string& s) {
    static const char* const kNames[] = {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"};
    for (int64_t i = 0; i < 5; ++i)
        if (s == kNames[i]) return i;
    KILN_THROW(kInvalidArgument) << n.describe() << ": post_transform must be one of NONE, "
                                 << "SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT; got '" << s << "'";
    return kNone;
}

std::vector<double> floats_or_tensor_attr(const ir::Node& n, const std::string& name) {
    const bool plain = n.has_attr(name), as_tensor = n.has_attr(name + "_as_tensor");
    KILN_CHECK(!(plain && as_tensor), kInvalidModel)
        << n.describe() << ": both " << name << " and " << name << "_as_tensor are given";
    if (plain) return n.attr_floats(name);
    if (!as_tensor) return {};
    const auto* t = std::get_if<Tensor>(&n.attrs().at(name + "_as_tensor"));
    KILN_CHECK(t != nullptr && t->dtype() != DType::kString, kInvalidModel)
        << n.describe() << ": " << name << "_as_tensor must be a numeric tensor";
    std::vector<double> v(static_cast<size_t>(t->numel()));
    for (int64_t i = 0; i < t->numel(); ++i) v[static_cast<size_t>(i)] = t->get_f64(i);
    return v;
}

}  // namespace kiln::op::ml
