// Col2Im (18): the inverse of im2col, summing overlapping blocks back into an image.
//   input [N, C * prod(block), L], image_shape (constant, n spatial dims), block_shape (constant)
//   -> output [N, C, *image_shape], L = prod(n_blocks), n_blocks[d] =
//      (image[d] + pad_b[d] + pad_e[d] - dilation[d] (block[d] - 1) - 1) / stride[d] + 1.
// Gather form (one reduce over the block offsets, no scatter): output[n, c, p] sums, over the
// block offsets k, input[n, c * prod(block) + flat(k), flat(q)] for every k whose block
// position q[d] = (p[d] + pad_b[d] - k[d] dilation[d]) / stride[d] is integral and in range.
#include <numeric>
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

struct Col2ImGeometry {
    std::vector<int64_t> image, block, strides, dilations, pads, n_blocks;
    int64_t block_size = 1, num_blocks = 1;
};

Col2ImGeometry col2im_geometry(const ir::Node& n, const ir::TensorType& x) {
    Col2ImGeometry g;
    g.image = constant_ints(n, 1, "image_shape");
    g.block = constant_ints(n, 2, "block_shape");
    const size_t sd = g.image.size();
    KILN_CHECK(sd >= 1 && g.block.size() == sd, kInvalidModel)
        << node_label(n) << ": image_shape and block_shape must have the same nonzero length, got " << sd << " and "
        << g.block.size();
    g.strides = n.attr_ints("strides", std::vector<int64_t>(sd, 1));
    g.dilations = n.attr_ints("dilations", std::vector<int64_t>(sd, 1));
    g.pads = n.attr_ints("pads", std::vector<int64_t>(2 * sd, 0));
    KILN_CHECK(g.strides.size() == sd && g.dilations.size() == sd && g.pads.size() == 2 * sd, kInvalidModel)
        << node_label(n) << ": strides / dilations need " << sd << " entries and pads " << 2 * sd;
    for (size_t d = 0; d < sd; ++d) {
        KILN_CHECK(g.strides[d] > 0 && g.dilations[d] > 0 && g.block[d] > 0 && g.image[d] > 0, kInvalidModel)
            << node_label(n) << ": image_shape, block_shape, strides and dilations must be > 0";
        const int64_t nb = (g.image[d] + g.pads[d] + g.pads[d + sd] - g.dilations[d] * (g.block[d] - 1) - 1) / g.strides[d] + 1;
        KILN_CHECK(nb >= 1, kInvalidModel) << node_label(n) << ": no sliding block fits spatial dim " << d;
        g.n_blocks.push_back(nb);
        g.block_size *= g.block[d];
        g.num_blocks *= nb;
    }
    check_rank(n, "input", x.rank(), 3);
    const int64_t cb = static_dim(n, x.shape[1], "input dim 1"), l = static_dim(n, x.shape[2], "input dim 2");
    KILN_CHECK(cb % g.block_size == 0 && l == g.num_blocks, kInvalidModel)
        << node_label(n) << ": input must have shape [N, C * " << g.block_size << ", " << g.num_blocks << "], got "
        << dims_str(x.shape);
    return g;
}

OpDef col2im_op() {
    OpDef d;
    d.name = "Col2Im";
    d.onnx_versions = {18};
    d.min_inputs = d.max_inputs = 3;
    d.attrs = {{"dilations", AttrKind::kInts, std::nullopt},
               {"pads", AttrKind::kInts, std::nullopt},
               {"strides", AttrKind::kInts, std::nullopt}};
    d.value_inputs = {1, 2};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        check_dtype(n, "input", x.dtype, numeric_types());
        Col2ImGeometry g = col2im_geometry(n, x);
        std::vector<ir::Dim> out = {x.shape[0], ir::Dim(static_dim(n, x.shape[1], "input dim 1") / g.block_size)};
        for (int64_t s : g.image) out.emplace_back(s);
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        const te::Tensor& x = a.in(0);
        const Col2ImGeometry g = col2im_geometry(a.node, a.node.input(0)->type());
        const size_t sd = g.image.size();
        const DType cd = te::compute_dtype(a.out_dtype());
        std::vector<te::IterVar> ks;
        for (size_t d = 0; d < sd; ++d) ks.push_back(te::reduce_axis(g.block[d], "k" + std::to_string(d)));
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                Expr valid = te::int_imm(1, DType::kBool);
                Expr kflat = te::int_imm(0), qflat = te::int_imm(0);
                for (size_t d = 0; d < sd; ++d) {
                    Expr t = Expr(i[2 + d]) + te::int_imm(g.pads[d]) - Expr(ks[d]->var) * g.dilations[d];
                    Expr q = te::floordiv(t, te::int_imm(g.strides[d]));
                    valid = te::logical_and(valid, te::logical_and(t >= te::int_imm(0),
                                                                   te::eq(te::floormod(t, te::int_imm(g.strides[d])), te::int_imm(0))));
                    valid = te::logical_and(valid, q < te::int_imm(g.n_blocks[d]));
                    kflat = kflat * g.block[d] + Expr(ks[d]->var);
                    qflat = qflat * g.n_blocks[d] + clamp_index(q, g.n_blocks[d]);
                }
                Expr v = te::read(x, {Expr(i[0]), Expr(i[1]) * g.block_size + kflat, qflat});
                return te::sum(te::select(valid, v, te::make_const(cd, 0.0)), ks);
            },
            "Col2Im", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

}  // namespace

void register_col2im_ops(OpRegistry& r) { r.add(col2im_op()); }

}  // namespace kiln::op
