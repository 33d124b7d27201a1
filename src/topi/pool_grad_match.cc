#include "topi/pool_grad_match.h"

#include <algorithm>
#include <string>

#include "op/pool_compute.h"

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

namespace {

std::string joined(const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

}  // namespace

std::optional<ExternChoice> match_max_pool_indices(const std::vector<ir::Node*>& nodes,
                                                   const std::vector<ir::Value*>& inputs,
                                                   const std::vector<ir::Value*>& outputs) {
    if (nodes.size() != 1 || nodes[0]->op() != "MaxPool" || nodes[0]->num_outputs() != 2) return std::nullopt;
    const ir::Node& n = *nodes[0];
    if (n.attr_int("storage_order", 0) != 0) return std::nullopt;
    const ir::Value *x = n.input(0), *y = n.output(0), *ind = n.output(1);
    if (!x->type().is_static() || !y->type().is_static() || x->type().rank() < 3 || x->type().rank() > 5)
        return std::nullopt;
    const DType dt = x->type().dtype;
    if (dt != DType::kFloat32 && dt != DType::kFloat64) return std::nullopt;
    // float32 rows narrower than 16 outputs stay generated: the kernel scans them output by
    // output (a serial compare chain per output), slower than the generated pool there (the
    // digits CNN's 2x2 pools, 8x8 and 4x4 planes: 0.19 and 0.11 ms against 0.05 and 0.006 ms).
    // float64 (the gradient tests' dtype) always takes it.
    if (dt == DType::kFloat32 && y->type().static_shape().back() < 16) return std::nullopt;
    auto out_index = [&](const ir::Value* v) {
        auto it = std::find(outputs.begin(), outputs.end(), v);
        return it == outputs.end() ? -1 : static_cast<int>(inputs.size() + (it - outputs.begin()));
    };
    const auto xi = std::find(inputs.begin(), inputs.end(), x);
    const int yi = out_index(y), ii = out_index(ind);  // Y -1: only the Indices are read
    if (xi == inputs.end() || ii < 0) return std::nullopt;
    const op::WindowGeometry g = op::pool_geometry(n, x->type().shape);
    const Shape xs = x->type().static_shape();
    return ExternChoice{"kiln_maxpool",
                        {{"x", std::to_string(xi - inputs.begin())},
                         {"y", std::to_string(yi)},
                         {"indices", std::to_string(ii)},
                         {"planes", std::to_string(xs[0] * xs[1])},
                         {"in", joined(std::vector<int64_t>(xs.begin() + 2, xs.end()))},
                         {"out", joined(g.out)},
                         {"kernel", joined(g.kernel)},
                         {"strides", joined(g.strides)},
                         {"dilations", joined(g.dilations)},
                         {"pads", joined(g.pads_begin)}}};
}

}  // namespace kiln::topi
