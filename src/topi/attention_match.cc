#include "topi/attention_match.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace kiln::topi {

std::optional<ExternChoice> match_blocked_attention(const std::vector<ir::Node*>& nodes,
                                                    const std::vector<ir::Value*>& inputs,
                                                    const std::vector<ir::Value*>& outputs) {
    if (nodes.size() != 1 || nodes[0]->op() != "KilnBlockedAttention") return std::nullopt;
    const ir::Node& n = *nodes[0];
    for (const ir::Value* v : std::vector<const ir::Value*>{n.input(0), n.input(1), n.input(2), n.output(0)})
        if (v->type().dtype != DType::kFloat32 || !v->type().is_static() || v->type().rank() != 4) return std::nullopt;
    auto arg = [&](const ir::Value* v) -> int64_t {
        auto i = std::find(inputs.begin(), inputs.end(), v);
        if (i != inputs.end()) return i - inputs.begin();
        auto o = std::find(outputs.begin(), outputs.end(), v);
        return o == outputs.end() ? -1 : static_cast<int64_t>(inputs.size()) + (o - outputs.begin());
    };
    const int64_t q = arg(n.input(0)), kt = arg(n.input(1)), v = arg(n.input(2)), y = arg(n.output(0));
    if (q < 0 || kt < 0 || v < 0 || y < static_cast<int64_t>(inputs.size())) return std::nullopt;
    const Shape qs = n.input(0)->type().static_shape(), ks = n.input(1)->type().static_shape(),
                vs = n.input(2)->type().static_shape();
    char scale[32];
    std::snprintf(scale, sizeof scale, "%.9g", n.attr_float("scale", 1.0));
    std::vector<std::pair<std::string, std::string>> p = {
        {"q", std::to_string(q)},           {"kt", std::to_string(kt)},       {"v", std::to_string(v)},
        {"y", std::to_string(y)},           {"bh", std::to_string(qs[0] * qs[1])}, {"s", std::to_string(qs[2])},
        {"t", std::to_string(ks[3])},       {"d", std::to_string(qs[3])},     {"dv", std::to_string(vs[3])},
        {"scale", scale}};
    return ExternChoice{"kiln_attention", std::move(p)};
}

}  // namespace kiln::topi
