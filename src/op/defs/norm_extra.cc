// Normalizations over statistics groups: InstanceNormalization, GroupNormalization,
// MeanVarianceNormalization; and LpNormalization, LRN.
//
// The first three share `moments`: for each statistics cell s (a row of shape `stat`), over the
// elements x[index(s, r)] of its group (r ranges over `extents`), two passes as the spec writes:
//   mean = sum(x) / n                                   (stage "<op>_sum")
//   var  = sum((x - mean)^2) / n                        (stage "<op>_sqsum")
//   inv  = 1 / sqrt(var + eps)   (MVN: 1 / (sqrt(var) + 1e-9), its function body's form)
// then y = (x - mean[s(i)]) * inv[s(i)] (* scale + bias):
//   InstanceNormalization: stat [N, C], group = the spatial dims; scale / B per channel.
//   GroupNormalization: stat [N, G], group = C/G channels x spatial; scale / bias have C entries
//     (opset 21) or G entries (opset 18); the shape tells which (identical when G == C).
//   MeanVarianceNormalization: stat = x's shape with the `axes` dims set to 1.
// LpNormalization: y = x / (sum over the axis of |x|^p)^(1/p), p in {1, 2}; over the last axis
// the sums reduce in vector lanes (row_reduce.h lane_reduce).
// LRN: sq[n,c,..] = sum of x[n,c',..]^2 over c' in [c - (size-1)/2, c + size/2] within [0, C),
//      y = x / (bias + alpha / size * sq)^beta.
// The statistics compute in the input's compute type (f32 for f16/bf16). Where each group is one
// contiguous block of x (InstanceNormalization, GroupNormalization) its sums take the flat form
// of flat_reduce.h: vector lanes and a tree, not one add chain per group.
#include <functional>
#include <string>

#include "op/defs/flat_reduce.h"
#include "op/defs/row_reduce.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

using IndexFn = std::function<std::vector<Expr>(const std::vector<Var>& s, const std::vector<te::IterVar>& r)>;

struct Moments {
    te::Tensor mean, inv;  // compute dtype, shape `stat`
};

// The element at stat cell s and flat position k of its group, when every group is one
// contiguous block of x (InstanceNormalization, GroupNormalization), else null.
using FlatElem = std::function<Expr(const std::vector<Expr>& s, const Expr& k)>;

Moments moments(const te::Tensor& x, const Shape& stat, const std::vector<int64_t>& extents, const IndexFn& index,
                const FlatElem& flat, double eps, bool eps_after_sqrt, const std::string& prefix) {
    const DType cdt = te::compute_dtype(x->dtype);
    int64_t count = 1;
    for (int64_t e : extents) count *= e;
    const Expr inv_n = te::make_const(cdt, 1.0 / static_cast<double>(count));
    // sum over each group of f(x, s): a contiguous group reduces in vector lanes (flat_reduce.h;
    // a reduce loop chains every add on the last), any other group with its own reduce loops.
    using Summand = std::function<Expr(Expr v, const std::vector<Expr>& s)>;
    auto group_sum = [&](const Summand& f, const std::string& name) {
        const FlatReducePlan plan = flat ? plan_flat_reduce(cdt, shape_numel(stat), count) : FlatReducePlan{};
        if (plan.lanes > 0) {
            auto body = [&](const std::vector<Expr>& s, const Expr& k) { return f(te::cast(cdt, flat(s, k)), s); };
            auto rows_of = [](const std::vector<Var>& o) { return std::vector<Expr>(o.begin(), o.end()); };
            return flat_reduce(stat, count, plan, te::ReduceOp::kSum, cdt, body, stat, rows_of, name);
        }
        std::vector<te::IterVar> r;
        for (size_t k = 0; k < extents.size(); ++k) r.push_back(te::reduce_axis(extents[k], "r" + std::to_string(k)));
        return te::compute(
            stat, [&](const std::vector<Var>& s) {
                return te::sum(f(te::cast(cdt, te::read(x, index(s, r))), std::vector<Expr>(s.begin(), s.end())), r);
            },
            name, cdt);
    };
    te::Tensor sum = group_sum([](Expr v, const std::vector<Expr>&) { return v; }, prefix + "_sum");
    te::Tensor mean = te::compute(
        stat, [&](const std::vector<Var>& s) { return te::read(sum, s) * inv_n; }, prefix + "_mean", cdt);
    te::Tensor sq = group_sum(
        [&](Expr v, const std::vector<Expr>& s) {
            Expr dev = v - te::read(mean, s);
            return dev * dev;
        },
        prefix + "_sqsum");
    te::Tensor inv = te::compute(
        stat, [&](const std::vector<Var>& s) {
            Expr var = te::read(sq, s) * inv_n;
            Expr e = te::make_const(cdt, eps);
            Expr den = eps_after_sqrt ? te::unary(te::UnaryOp::kSqrt, var) + e
                                      : te::unary(te::UnaryOp::kSqrt, var + e);
            return te::make_const(cdt, 1.0) / den;
        },
        prefix + "_inv", cdt);
    return {mean, inv};
}

// FlatElem of NC... x with stat [N, G]: group (n, g) is channels [g*cg, (g+1)*cg) x spatial.
FlatElem channel_groups(const te::Tensor& x, int64_t cg) {
    return [x, cg](const std::vector<Expr>& s, const Expr& k) {
        Shape dims(x->shape.begin() + 2, x->shape.end());
        if (cg == 1) return te::read(x, unflatten_index(s, k, dims));
        dims.insert(dims.begin(), cg);
        std::vector<Expr> idx = unflatten_index({s[0]}, k, dims);
        idx[1] = s[1] * cg + idx[1];
        return te::read(x, idx);
    };
}

// y[i] = (x[i] - mean[s]) * inv[s] * scale + bias with s = stat_of(i); scale/bias may be null.
using ReadFn = std::function<Expr(const std::vector<Var>&)>;

te::Tensor normalize(const te::Tensor& x, const Moments& m,
                     const std::function<std::vector<Expr>(const std::vector<Var>&)>& stat_of, const ReadFn& scale,
                     const ReadFn& bias, const std::string& name, DType out) {
    const DType cdt = te::compute_dtype(x->dtype);
    return te::compute(
        x->shape, [&](const std::vector<Var>& i) {
            const std::vector<Expr> s = stat_of(i);
            Expr v = (te::cast(cdt, te::read(x, i)) - te::read(m.mean, s)) * te::read(m.inv, s);
            if (scale) v = v * te::cast(cdt, scale(i));
            if (bias) v = v + te::cast(cdt, bias(i));
            return v;
        },
        name, out);
}

void check_channel_param(const ir::Node& n, const char* what, size_t slot, const ir::TensorType& x,
                         const std::vector<int64_t>& allowed) {
    const auto& t = input_type(n, slot, what);
    check_same_dtype(n, "X", x.dtype, what, t.dtype);
    bool ok = t.rank() == 1 && t.shape[0].is_static();
    bool match = false;
    for (int64_t a : allowed) match = match || (ok && t.shape[0].value == a);
    KILN_CHECK(match, kInvalidModel) << node_label(n) << ": input " << what << " must have shape [" << allowed[0]
                                     << "], got " << dims_str(t.shape);
}

std::vector<ir::TensorType> nchw_infer(const ir::Node& n) {
    const auto& x = input_type(n, 0, "X");
    check_dtype(n, "X", x.dtype, float_types());
    KILN_CHECK(x.rank() >= 3, kInvalidModel)
        << node_label(n) << ": input X must have rank >= 3 (N, C, spatial...), got rank " << x.rank();
    for (const auto& dim : x.shape) static_dim(n, dim, "X");
    return {x};
}

OpDef instance_norm_op() {
    OpDef d;
    d.name = "InstanceNormalization";
    d.onnx_versions = {6, 22};
    d.min_inputs = d.max_inputs = 3;
    d.attrs = {{"epsilon", AttrKind::kFloat, ir::Attr(1e-5)}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        auto out = nchw_infer(n);
        const int64_t c = out[0].shape[1].value;
        check_channel_param(n, "scale", 1, out[0], {c});
        check_channel_param(n, "B", 2, out[0], {c});
        return out;
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0), scale = a.in(1), bias = a.in(2);
        std::vector<int64_t> extents(x->shape.begin() + 2, x->shape.end());
        Moments m = moments(
            x, {x->shape[0], x->shape[1]}, extents,
            [](const std::vector<Var>& s, const std::vector<te::IterVar>& r) {
                std::vector<Expr> idx = {s[0], s[1]};
                for (const auto& v : r) idx.push_back(v->var);
                return idx;
            },
            channel_groups(x, 1), a.node.attr_float("epsilon", 1e-5), false, "instnorm");
        auto chan = [](const te::Tensor& t) {
            return [t](const std::vector<Var>& i) { return te::read(t, {Expr(i[1])}); };
        };
        auto stat_of = [](const std::vector<Var>& i) { return std::vector<Expr>{i[0], i[1]}; };
        return std::vector<te::Tensor>{
            normalize(x, m, stat_of, chan(scale), chan(bias), "InstanceNormalization", a.out_dtype())};
    };
    d.schedule = reduce_schedule;  // lane partials of the flat moments (flat_reduce.h)
    return d;
}

OpDef group_norm_op() {
    OpDef d;
    d.name = "GroupNormalization";
    d.onnx_versions = {18, 21};
    d.min_inputs = d.max_inputs = 3;
    d.attrs = {{"epsilon", AttrKind::kFloat, ir::Attr(1e-5)},
               {"num_groups", AttrKind::kInt, std::nullopt, /*required=*/true},
               {"stash_type", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        auto out = nchw_infer(n);
        const int64_t c = out[0].shape[1].value;
        const int64_t g = n.attr_int("num_groups", 0);
        KILN_CHECK(g >= 1 && c % g == 0, kInvalidModel)
            << node_label(n) << ": num_groups=" << g << " must be >= 1 and divide the channel count " << c;
        check_channel_param(n, "scale", 1, out[0], {c, g});
        check_channel_param(n, "bias", 2, out[0], {c, g});
        return out;
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0), scale = a.in(1), bias = a.in(2);
        const int64_t g = a.node.attr_int("num_groups", 1);
        const int64_t cg = x->shape[1] / g;
        std::vector<int64_t> extents = {cg};
        extents.insert(extents.end(), x->shape.begin() + 2, x->shape.end());
        Moments m = moments(
            x, {x->shape[0], g}, extents,
            [cg](const std::vector<Var>& s, const std::vector<te::IterVar>& r) {
                std::vector<Expr> idx = {s[0], Expr(s[1]) * cg + Expr(r[0]->var)};
                for (size_t k = 1; k < r.size(); ++k) idx.push_back(r[k]->var);
                return idx;
            },
            channel_groups(x, cg), a.node.attr_float("epsilon", 1e-5), false, "groupnorm");
        // Per-channel (opset 21) or per-group (opset 18) scale / bias.
        auto chan = [&](const te::Tensor& t) {
            const bool per_channel = t->shape[0] == x->shape[1];
            return [t, per_channel, cg](const std::vector<Var>& i) {
                return te::read(t, {per_channel ? Expr(i[1]) : te::floordiv(Expr(i[1]), te::int_imm(cg))});
            };
        };
        auto stat_of = [cg](const std::vector<Var>& i) {
            return std::vector<Expr>{i[0], te::floordiv(Expr(i[1]), te::int_imm(cg))};
        };
        return std::vector<te::Tensor>{
            normalize(x, m, stat_of, chan(scale), chan(bias), "GroupNormalization", a.out_dtype())};
    };
    d.schedule = reduce_schedule;  // lane partials of the flat moments (flat_reduce.h)
    return d;
}

OpDef mvn_op() {
    OpDef d;
    d.name = "MeanVarianceNormalization";
    d.onnx_versions = {9, 13};
    d.attrs = {{"axes", AttrKind::kInts, ir::Attr(std::vector<int64_t>{0, 2, 3})}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, float_types());
        for (int64_t ax : n.attr_ints("axes", {0, 2, 3})) normalize_axis(n, ax, x.rank(), "axes");
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const int rank = x->ndim();
        std::vector<bool> mask(rank, false);
        for (int64_t ax : a.node.attr_ints("axes", {0, 2, 3})) mask[normalize_axis(a.node, ax, rank, "axes")] = true;
        Shape stat = x->shape;
        std::vector<int64_t> extents;
        for (int k = 0; k < rank; ++k) {
            if (!mask[k]) continue;
            extents.push_back(x->shape[k]);
            stat[k] = 1;
        }
        Moments m = moments(
            x, stat, extents,
            [mask, rank](const std::vector<Var>& s, const std::vector<te::IterVar>& r) {
                std::vector<Expr> idx;
                size_t ri = 0;
                for (int k = 0; k < rank; ++k) idx.push_back(mask[k] ? Expr(r[ri++]->var) : Expr(s[k]));
                return idx;
            },
            nullptr, 1e-9, true, "mvn");
        auto stat_of = [mask, rank](const std::vector<Var>& i) {
            std::vector<Expr> s;
            for (int k = 0; k < rank; ++k) s.push_back(mask[k] ? te::int_imm(0) : Expr(i[k]));
            return s;
        };
        return std::vector<te::Tensor>{normalize(x, m, stat_of, nullptr, nullptr, "MeanVarianceNormalization",
                                                 a.out_dtype())};
    };
    d.schedule = reduce_schedule;  // lane partials of the flat moments (flat_reduce.h)
    return d;
}

OpDef lp_norm_op() {
    OpDef d;
    d.name = "LpNormalization";
    d.onnx_versions = {1, 22};
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{-1})}, {"p", AttrKind::kInt, ir::Attr(int64_t{2})}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        check_dtype(n, "input", x.dtype, float_types());
        normalize_axis(n, n.attr_int("axis", -1), x.rank());
        const int64_t p = n.attr_int("p", 2);
        KILN_CHECK(p == 1 || p == 2, kInvalidModel) << node_label(n) << ": attribute p must be 1 or 2, got " << p;
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", -1), x->ndim());
        const bool l1 = a.node.attr_int("p", 2) == 1;
        const DType cdt = te::compute_dtype(x->dtype);
        Shape red = x->shape;
        red[axis] = 1;
        auto term = [&](Expr v) { return l1 ? te::unary(te::UnaryOp::kAbs, v) : v * v; };
        // Along the last axis the sums reduce in vector lanes (row_reduce.h): one add chain per
        // row ran latency-bound ([64, 4096] at one thread: 480 us, ORT 295).
        const int64_t lanes = axis == x->ndim() - 1 ? row_lanes(cdt, x->shape[axis]) : 0;
        te::Tensor acc;
        if (lanes > 0) {
            acc = lane_reduce(
                x->shape_exprs(), lanes, te::ReduceOp::kSum, cdt,
                [&](const std::vector<Var>& i, Expr k) {
                    std::vector<Expr> idx(i.begin(), i.end());
                    idx[axis] = k;
                    return term(te::cast(cdt, te::read(x, idx)));
                },
                "lpnorm_sum");
        } else {
            te::IterVar r = te::reduce_axis(x->shape[axis], "r");
            acc = te::compute(
                red, [&](const std::vector<Var>& i) {
                    std::vector<Expr> idx(i.begin(), i.end());
                    idx[axis] = r->var;
                    return te::sum(term(te::cast(cdt, te::read(x, idx))), {r});
                },
                "lpnorm_sum", cdt);
        }
        te::Tensor y = te::compute(
            x->shape, [&](const std::vector<Var>& i) {
                std::vector<Expr> s(i.begin(), i.end());
                s[axis] = te::int_imm(0);
                Expr norm = l1 ? te::read(acc, s) : te::unary(te::UnaryOp::kSqrt, te::read(acc, s));
                return te::cast(cdt, te::read(x, i)) / norm;
            },
            "LpNormalization", a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    d.schedule = row_reduce_schedule;
    return d;
}

OpDef lrn_op() {
    OpDef d;
    d.name = "LRN";
    d.onnx_versions = {1, 13};
    d.attrs = {{"alpha", AttrKind::kFloat, ir::Attr(1e-4)},
               {"beta", AttrKind::kFloat, ir::Attr(0.75)},
               {"bias", AttrKind::kFloat, ir::Attr(1.0)},
               {"size", AttrKind::kInt, std::nullopt, /*required=*/true}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        auto out = nchw_infer(n);
        KILN_CHECK(n.attr_int("size", 0) >= 1, kInvalidModel)
            << node_label(n) << ": attribute size must be >= 1, got " << n.attr_int("size", 0);
        return out;
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const int64_t size = a.node.attr_int("size", 1);
        const double alpha = a.node.attr_float("alpha", 1e-4), beta = a.node.attr_float("beta", 0.75);
        const double bias = a.node.attr_float("bias", 1.0);
        const int64_t c = x->shape[1], lo = (size - 1) / 2;
        const DType cdt = te::compute_dtype(x->dtype);
        te::IterVar r = te::reduce_axis(size, "r");
        te::Tensor sq = te::compute(
            x->shape, [&](const std::vector<Var>& i) {
                std::vector<Expr> idx(i.begin(), i.end());
                Expr ch = Expr(i[1]) + Expr(r->var) - te::int_imm(lo);
                idx[1] = clamp_index(ch, c);
                Expr v = te::cast(cdt, te::read(x, idx));
                Expr inside = te::logical_and(ch >= te::int_imm(0), ch < te::int_imm(c));
                return te::sum(te::select(inside, v * v, te::make_const(cdt, 0)), {r});
            },
            "lrn_sqsum", cdt);
        te::Tensor y = te::compute(
            x->shape, [&](const std::vector<Var>& i) {
                Expr scaled = te::make_const(cdt, alpha / static_cast<double>(size)) * te::read(sq, i);
                Expr base = te::make_const(cdt, bias) + scaled;
                return te::cast(cdt, te::read(x, i)) / te::binary(te::BinaryOp::kPow, base, te::make_const(cdt, beta));
            },
            "LRN", a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    return d;
}

}  // namespace

void register_norm_extra_ops(OpRegistry& r) {
    r.add(group_norm_op());
    r.add(instance_norm_op());
    r.add(lp_norm_op());
    r.add(lrn_op());
    r.add(mvn_op());
}

}  // namespace kiln::op
