// AffineGrid (20): the sampling grid of an affine transform, for GridSample.
//   theta [N, 2, 3] with size [N, C, H, W]        -> grid [N, H, W, 2]
//   theta [N, 3, 4] with size [N, C, D, H, W]     -> grid [N, D, H, W, 3]
// `size` is a constant (value input). Base coordinates in [-1, 1] per spatial dim of extent S:
//   align_corners=1: -1 + 2 i / (S - 1) (-1 when S = 1); align_corners=0: (2 i + 1) / S - 1.
// The homogeneous base point is (x, y, 1) in 2-D, (x, y, z, 1) in 3-D (x along the last dim);
// grid[..., k] = sum_j theta[n, k, j] * base[j], an unrolled 3- or 4-term dot product.
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

OpDef affine_grid_op() {
    OpDef d;
    d.name = "AffineGrid";
    d.onnx_versions = {20};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"align_corners", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.value_inputs = {1};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& theta = input_type(n, 0, "theta");
        check_dtype(n, "theta", theta.dtype, float_types());
        std::vector<int64_t> size = constant_ints(n, 1, "size");
        KILN_CHECK(size.size() == 4 || size.size() == 5, kInvalidModel)
            << node_label(n) << ": size must have 4 (2-D) or 5 (3-D) entries, got " << size.size();
        const int64_t sd = static_cast<int64_t>(size.size()) - 2;
        check_rank(n, "theta", theta.rank(), 3);
        const std::vector<ir::Dim> want = {ir::Dim(size[0]), ir::Dim(sd), ir::Dim(sd + 1)};
        for (int i = 0; i < 3; ++i)
            KILN_CHECK(!theta.shape[i].is_static() || theta.shape[i] == want[i], kInvalidModel)
                << node_label(n) << ": theta must have shape " << dims_str(want) << " for size of " << size.size()
                << " entries, got " << dims_str(theta.shape);
        for (int64_t s : size) KILN_CHECK(s > 0, kInvalidModel) << node_label(n) << ": size entries must be > 0";
        std::vector<int64_t> out = {size[0]};
        out.insert(out.end(), size.begin() + 2, size.end());
        out.push_back(sd);
        return std::vector<ir::TensorType>{{theta.dtype, to_dims(out)}};
    };
    d.compute = [](const ComputeArgs& a) {
        const te::Tensor& theta = a.in(0);
        const Shape out = a.out_shape();
        const int sd = static_cast<int>(out.size()) - 2;
        const bool align = a.node.attr_int("align_corners", 0) != 0;
        const DType cd = te::compute_dtype(a.out_dtype());
        auto base = [&](const Var& i, int64_t s) -> Expr {
            Expr fi = te::cast(cd, i);
            if (align) return s == 1 ? te::make_const(cd, -1.0) : te::make_const(cd, 2.0 / (s - 1)) * fi - te::make_const(cd, 1.0);
            return (te::make_const(cd, 2.0) * fi + te::make_const(cd, 1.0)) / te::make_const(cd, static_cast<double>(s)) -
                   te::make_const(cd, 1.0);
        };
        auto grid = te::compute(
            out, [&](const std::vector<Var>& i) {
                // Spatial indices i[1..sd]; the point's coordinates run x (last dim) first.
                std::vector<Expr> pt;
                for (int k = sd; k >= 1; --k) pt.push_back(base(i[k], out[k]));
                Expr acc = te::read(theta, {Expr(i[0]), Expr(i[sd + 1]), te::int_imm(sd)});  // * 1
                for (int j = 0; j < sd; ++j) acc = acc + te::read(theta, {Expr(i[0]), Expr(i[sd + 1]), te::int_imm(j)}) * pt[j];
                return acc;
            },
            "AffineGrid", a.out_dtype());
        return std::vector<te::Tensor>{grid};
    };
    return d;
}

}  // namespace

void register_affine_grid_ops(OpRegistry& r) { r.add(affine_grid_op()); }

}  // namespace kiln::op
