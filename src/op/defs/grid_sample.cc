// GridSample (opset 16/20/22), following onnx.reference.ops.op_grid_sample, for any spatial rank
// k >= 1 (4-D and 5-D in practice): X [N, C, D1..Dk], grid [N, H1..Hk', k] -> Y [N, C, H1..Hk'].
// For each output element the grid vector (reversed: its last entry indexes X's last axis) is
// denormalized in the grid's compute dtype (f32 as in the reference; f64 grids stay f64):
//   align_corners ? (g + 1) / 2 * (D - 1) : ((g + 1) * D - 1) / 2.
// Coordinates outside the border box ([-0.5, D-0.5], or [0, D-1] with align_corners) are clamped
// into [0, D-1] (padding_mode border) or reflected about the box (reflection). Then:
//  - nearest: round half to even, truncate, fetch with the padding rule;
//  - linear/bilinear: taps floor(x) + {0, 1}, weights {1-r, r};
//  - cubic/bicubic: taps floor(x) + {-1..2}, Keys weights with a = -0.75;
// each tap fetches with the padding rule: zeros gives 0 outside the axis, border clamps the
// index, reflection reflects the integer index about the box and truncates. Multi-axis taps are
// the product of per-axis weights (the reference's separable recursion).
#include <cmath>
#include <functional>
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

constexpr DType kF64 = DType::kFloat64;

Expr c64(double v) { return te::float_imm(v, kF64); }

/// The reference's _gs_reflect in f64: reflect x about [lo, hi] until it lies inside.
Expr reflect(const Expr& x, double lo, double hi) {
    const double rng = hi - lo;
    // dx >= 0 past the near edge; n = int(dx / rng) whole spans; even n: near + r, odd: far - r.
    auto side = [&](const Expr& dx, bool from_lo) {
        const Expr n = te::cast(DType::kInt64, dx / c64(rng));
        const Expr r = dx - te::cast(kF64, n) * c64(rng);
        const Expr even = te::eq(te::floormod(n, te::int_imm(2)), te::int_imm(0));
        const Expr from_low = c64(lo) + r, from_high = c64(hi) - r;
        return from_lo ? te::select(even, from_low, from_high)
                       : te::select(even, from_high, from_low);
    };
    const Expr below = side(c64(lo) - x, true);
    const Expr above = side(x - c64(hi), false);
    return te::select(x < c64(lo), below, te::select(x > c64(hi), above, x));
}

struct Axis {
    int64_t dim;
    double lo, hi;  // border box
};

OpDef grid_sample_op() {
    OpDef d;
    d.name = "GridSample";
    d.onnx_versions = {16, 20, 22};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"align_corners", AttrKind::kInt, ir::Attr(int64_t{0})},
               {"mode", AttrKind::kString, ir::Attr(std::string("linear"))},
               {"padding_mode", AttrKind::kString, ir::Attr(std::string("zeros"))}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        const auto& g = input_type(n, 1, "grid");
        check_dtype(n, "X", x.dtype, float_types());
        check_dtype(n, "grid", g.dtype, float_types());
        KILN_CHECK(x.rank() >= 3, kInvalidModel)
            << node_label(n) << ": X must have rank >= 3, got " << x.rank();
        const int k = x.rank() - 2;
        KILN_CHECK(g.rank() == x.rank(), kInvalidModel)
            << node_label(n) << ": grid must have rank " << x.rank() << " (same as X), got "
            << g.rank();
        const int64_t last = static_dim(n, g.shape.back(), "grid");
        KILN_CHECK(last == k, kInvalidModel)
            << node_label(n) << ": grid's last dimension must be " << k << ", got " << last;
        const std::string mode = n.attr_string("mode", "linear");
        KILN_CHECK(mode == "linear" || mode == "bilinear" || mode == "nearest" || mode == "cubic" ||
                       mode == "bicubic",
                   kInvalidModel)
            << node_label(n) << ": mode must be linear, nearest or cubic, got '" << mode << "'";
        const std::string pad = n.attr_string("padding_mode", "zeros");
        KILN_CHECK(pad == "zeros" || pad == "border" || pad == "reflection", kInvalidModel)
            << node_label(n) << ": padding_mode must be zeros, border or reflection, got '" << pad
            << "'";
        for (int i = 0; i < k; ++i) static_dim(n, x.shape[2 + i], "X");
        std::vector<ir::Dim> out = {x.shape[0], x.shape[1]};
        out.insert(out.end(), g.shape.begin() + 1, g.shape.end() - 1);
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0), grid = a.in(1);
        const int k = x->ndim() - 2;
        const bool align = a.node.attr_int("align_corners", 0) != 0;
        std::string mode = a.node.attr_string("mode", "linear");
        if (mode == "bilinear") mode = "linear";
        if (mode == "bicubic") mode = "cubic";
        const std::string pad = a.node.attr_string("padding_mode", "zeros");
        const DType cdt = te::compute_dtype(a.out_dtype());
        // Coordinates in the grid's compute dtype (the reference uses f32; f64 grids keep f64).
        const DType gdt = te::compute_dtype(grid->dtype);
        auto cg = [&](double v) { return te::make_const(gdt, v); };
        std::vector<Axis> axes;
        for (int i = 0; i < k; ++i) {
            const int64_t dim = x->shape[2 + i];
            axes.push_back({dim, align ? 0.0 : -0.5, align ? dim - 1.0 : dim - 0.5});
        }
        auto out = te::compute(
            a.out_shape(),
            [&](const std::vector<Var>& o) {
                // Source coordinates per spatial axis (f32, after the border/reflection fix-up).
                std::vector<Expr> xs;
                for (int i = 0; i < k; ++i) {
                    const Axis& ax = axes[i];
                    std::vector<Expr> gi = {o[0]};
                    for (int j = 0; j < k; ++j) gi.push_back(o[2 + j]);
                    gi.push_back(te::int_imm(k - 1 - i));
                    const Expr g = te::cast(gdt, te::read(grid, gi));
                    const double len = static_cast<double>(ax.dim);
                    Expr v = align ? (g + cg(1.0)) / cg(2.0) * cg(len - 1)
                                   : ((g + cg(1.0)) * cg(len) - cg(1.0)) / cg(2.0);
                    if (mode == "nearest") v = te::unary(te::UnaryOp::kRound, v);
                    if (pad == "border") {
                        const Expr outside = te::logical_or(v<cg(ax.lo), v> cg(ax.hi));
                        v = te::select(outside, te::min(te::max(v, cg(0.0)), cg(len - 1)), v);
                    } else if (pad == "reflection") {
                        v = te::cast(gdt, reflect(te::cast(kF64, v), ax.lo, ax.hi));
                    }
                    xs.push_back(v);
                }
                // Fetch of one integer tap position per axis with the padding rule.
                auto fetch = [&](const std::vector<Expr>& pos) {
                    std::vector<Expr> idx = {o[0], o[1]};
                    Expr valid;
                    for (int i = 0; i < k; ++i) {
                        const Axis& ax = axes[i];
                        Expr p = pos[i];
                        if (pad == "zeros") {
                            const Expr in =
                                te::logical_and(p >= te::int_imm(0), p < te::int_imm(ax.dim));
                            valid = valid ? te::logical_and(valid, in) : in;
                        } else if (pad == "reflection") {
                            p = te::cast(DType::kInt64, reflect(te::cast(kF64, p), ax.lo, ax.hi));
                        }
                        idx.push_back(clamp_index(p, ax.dim));
                    }
                    Expr v = te::read(x, idx);
                    return valid ? te::select(valid, v, te::make_const(cdt, 0.0)) : v;
                };
                if (mode == "nearest") {
                    std::vector<Expr> pos;
                    for (const Expr& v : xs) pos.push_back(te::cast(DType::kInt64, v));
                    return fetch(pos);
                }
                // Per-axis taps (floor + offset) and weights, then the product expansion.
                const int taps = mode == "linear" ? 2 : 4, first = mode == "linear" ? 0 : -1;
                std::vector<Expr> base(k);
                std::vector<std::vector<Expr>> w(k);
                for (int i = 0; i < k; ++i) {
                    const Expr fl = te::unary(te::UnaryOp::kFloor, xs[i]);
                    base[i] = te::cast(DType::kInt64, fl);
                    const Expr r = te::cast(cdt, xs[i] - fl);
                    auto c = [&](double v) { return te::make_const(cdt, v); };
                    if (mode == "linear") {
                        w[i] = {c(1.0) - r, r};
                    } else {
                        const double A = -0.75;
                        const Expr r1 = r + c(1.0), q = c(1.0) - r, q2 = c(2.0) - r;
                        w[i] = {((c(A) * r1 - c(5 * A)) * r1 + c(8 * A)) * r1 - c(4 * A),
                                ((c(A + 2) * r - c(A + 3)) * r * r + c(1.0)),
                                ((c(A + 2) * q - c(A + 3)) * q * q + c(1.0)),
                                ((c(A) * q2 - c(5 * A)) * q2 + c(8 * A)) * q2 - c(4 * A)};
                    }
                }
                std::vector<Expr> pos(k);
                std::function<Expr(int)> expand = [&](int i) -> Expr {
                    if (i == k) return fetch(pos);
                    Expr acc;
                    for (int t = 0; t < taps; ++t) {
                        pos[i] = base[i] + (first + t);
                        const Expr term = w[i][t] * expand(i + 1);
                        acc = acc ? acc + term : term;
                    }
                    return acc;
                };
                return expand(0);
            },
            "GridSample", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

}  // namespace

void register_grid_sample_ops(OpRegistry& r) { r.add(grid_sample_op()); }

}  // namespace kiln::op
