#include "topi/softmax_match.h"

#include <algorithm>
#include <string>

#include "op/op_util.h"

namespace kiln::topi {

std::optional<ExternChoice> match_row_softmax(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                              const std::vector<ir::Value*>& outputs, bool symbolic) {
    if (nodes.size() != 1 || nodes[0]->op() != "Softmax") return std::nullopt;
    const ir::Node& n = *nodes[0];
    const ir::TensorType& t = n.input(0)->type();
    if (t.dtype != DType::kFloat32 || t.rank() < 1 || t.is_static() == symbolic) return std::nullopt;
    if (op::normalize_axis(n, n.attr_int("axis", -1), t.rank()) != t.rank() - 1) return std::nullopt;
    // Symbolic shapes: rows and len are placeholders the shape rule rewrites per run
    // (runtime/extern_shape_params.h); a symbolic row may be of any length.
    if (!symbolic && t.shape.back().value < 16) return std::nullopt;
    const int64_t len = symbolic ? 16 : t.shape.back().value;
    auto x = std::find(inputs.begin(), inputs.end(), n.input(0));
    auto y = std::find(outputs.begin(), outputs.end(), n.output(0));
    if (x == inputs.end() || y == outputs.end()) return std::nullopt;
    int64_t rows = 1;
    for (size_t d = 0; !symbolic && d + 1 < t.shape.size(); ++d) rows *= t.shape[d].value;
    std::vector<std::pair<std::string, std::string>> p = {
        {"x", std::to_string(x - inputs.begin())},
        {"y", std::to_string(inputs.size() + static_cast<size_t>(y - outputs.begin()))},
        {"rows", std::to_string(rows)},
        {"len", std::to_string(len)}};
    // In place over the scores where they die here: each row is read whole (pass 1) before
    // it is written, so y may be x (one stream through memory instead of two).
    ExternChoice c{"kiln_softmax", std::move(p)};
    c.inplace_input = static_cast<int>(x - inputs.begin());
    return c;
}

}  // namespace kiln::topi
