#include "topi/pool_grad_match.h"

#include <algorithm>
#include <string>

namespace kiln::topi {

std::optional<ExternChoice> match_pool_grad(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                            const std::vector<ir::Value*>& outputs) {
    if (nodes.size() != 1 || nodes[0]->op() != "KilnMaxPoolGrad" || outputs.size() != 1) return std::nullopt;
    const ir::Node& n = *nodes[0];
    const ir::Value *dy = n.input(0), *ind = n.input(1), *dx = n.output(0);
    for (const ir::Value* v : {dy, ind, dx})
        if (!v->type().is_static()) return std::nullopt;
    const DType dt = dy->type().dtype;
    if ((dt != DType::kFloat32 && dt != DType::kFloat64) || outputs[0] != dx) return std::nullopt;
    auto index_of = [&](const ir::Value* v) {
        auto it = std::find(inputs.begin(), inputs.end(), v);
        return it == inputs.end() ? -1 : static_cast<int>(it - inputs.begin());
    };
    const int a = index_of(dy), b = index_of(ind);
    if (a < 0 || b < 0) return std::nullopt;
    const Shape ys = dy->type().static_shape(), xs = dx->type().static_shape();
    const int64_t planes = ys[0] * ys[1];
    return ExternChoice{"kiln_maxpool_grad",
                        {{"dy", std::to_string(a)},
                         {"indices", std::to_string(b)},
                         {"out", std::to_string(inputs.size())},
                         {"planes", std::to_string(planes)},
                         {"in_plane", std::to_string(shape_numel(xs) / planes)},
                         {"out_plane", std::to_string(shape_numel(ys) / planes)}}};
}

}  // namespace kiln::topi
