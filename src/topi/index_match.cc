#include "topi/index_match.h"

#include <algorithm>
#include <string>

#include "op/op_util.h"
#include "support/error.h"

namespace kiln::topi {
namespace {

int index_of(const std::vector<ir::Value*>& vs, const ir::Value* v) {
    auto it = std::find(vs.begin(), vs.end(), v);
    return it == vs.end() ? -1 : static_cast<int>(it - vs.begin());
}

bool kernel_dtype(DType t) {
    return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kInt32 || t == DType::kInt64;
}

bool all_static(const ir::Node& n) {
    for (const ir::Value* v : n.inputs())
        if (v && !v->type().is_static()) return false;
    for (const ir::Value* v : n.outputs())
        if (!v->type().is_static()) return false;
    return true;
}

/// The single value of the node's constant integer input `slot`, or nullopt.
std::optional<int64_t> constant_scalar(const ir::Node& n, size_t slot) {
    try {
        std::vector<int64_t> v = op::constant_ints(n, slot, "constant");
        if (v.size() == 1) return v[0];
    } catch (const Error&) {
    }
    return std::nullopt;
}

using Params = std::vector<std::pair<std::string, std::string>>;

std::optional<ExternChoice> match_topk(const ir::Node& n, const std::vector<ir::Value*>& inputs,
                                       const std::vector<ir::Value*>& outputs) {
    const std::optional<int64_t> k = constant_scalar(n, 1);
    const int x = index_of(inputs, n.input(0)), v = index_of(outputs, n.output(0)), i = index_of(outputs, n.output(1));
    if (!k || x < 0 || (v < 0 && i < 0)) return std::nullopt;
    auto out_arg = [&](int o) { return o < 0 ? std::string("-1") : std::to_string(inputs.size() + static_cast<size_t>(o)); };
    const int rank = n.input(0)->type().rank();
    const int axis = op::normalize_axis(n, n.attr_int("axis", -1), rank);
    Params p = {{"x", std::to_string(x)},
                {"values", out_arg(v)},
                {"indices", out_arg(i)},
                {"axis", std::to_string(axis)},
                {"k", std::to_string(*k)},
                {"largest", std::to_string(n.attr_int("largest", 1) != 0 ? 1 : 0)}};
    return ExternChoice{"kiln_topk", std::move(p)};
}

std::optional<ExternChoice> match_cumsum(const ir::Node& n, const std::vector<ir::Value*>& inputs,
                                         const std::vector<ir::Value*>& outputs) {
    const std::optional<int64_t> axis = constant_scalar(n, 1);
    const int x = index_of(inputs, n.input(0)), y = index_of(outputs, n.output(0));
    if (!axis || x < 0 || y < 0) return std::nullopt;
    const int a = op::normalize_axis(n, *axis, n.input(0)->type().rank());
    Params p = {{"x", std::to_string(x)},
                {"y", std::to_string(inputs.size() + static_cast<size_t>(y))},
                {"axis", std::to_string(a)},
                {"exclusive", std::to_string(n.attr_int("exclusive", 0) != 0 ? 1 : 0)},
                {"reverse", std::to_string(n.attr_int("reverse", 0) != 0 ? 1 : 0)}};
    return ExternChoice{"kiln_cumsum", std::move(p)};
}

std::optional<ExternChoice> match_scatternd(const ir::Node& n, const std::vector<ir::Value*>& inputs,
                                            const std::vector<ir::Value*>& outputs) {
    const int d = index_of(inputs, n.input(0)), i = index_of(inputs, n.input(1)), u = index_of(inputs, n.input(2));
    const int o = index_of(outputs, n.output(0));
    if (d < 0 || i < 0 || u < 0 || o < 0) return std::nullopt;
    Params p = {{"data", std::to_string(d)},
                {"indices", std::to_string(i)},
                {"updates", std::to_string(u)},
                {"out", std::to_string(inputs.size() + static_cast<size_t>(o))},
                {"reduction", n.attr_string("reduction", "none")}};
    return ExternChoice{"kiln_scatternd", std::move(p)};
}

}  // namespace

std::optional<ExternChoice> match_index_kernel(const std::vector<ir::Node*>& nodes,
                                               const std::vector<ir::Value*>& inputs,
                                               const std::vector<ir::Value*>& outputs) {
    if (nodes.size() != 1) return std::nullopt;
    const ir::Node& n = *nodes[0];
    const std::string& op = n.op();
    if (op != "TopK" && op != "CumSum" && op != "ScatterND") return std::nullopt;
    if (!all_static(n) || !kernel_dtype(n.input(0)->type().dtype)) return std::nullopt;
    if (op == "TopK") return match_topk(n, inputs, outputs);
    if (op == "CumSum") return match_cumsum(n, inputs, outputs);
    return match_scatternd(n, inputs, outputs);
}

}  // namespace kiln::topi
