// The Reduce* family and the arg-reductions, one table row per op.
//
// Reduce* (axes as a constant input: from opset 13 for ReduceSum, 18 for the others; the
// importer's adapter turns the older `axes` attribute into that input). Every op is
//   acc = combine over the reduced axes of pre(x)     (stage "<op>_acc", in the compute type)
//   y   = post(acc, count)                            (stage "<op>", the input dtype)
// with (pre, combine, post):
//   ReduceSum (x, +, acc)          ReduceMean (x, +, acc / count; ints truncate)
//   ReduceMax (x, max, acc)        ReduceMin (x, min, acc)        ReduceProd (x, *, acc)
//   ReduceL1 (|x|, +, acc)         ReduceL2 (x*x, +, sqrt(acc))   ReduceSumSquare (x*x, +, acc)
//   ReduceLogSum (x, +, log(acc))
//   ReduceLogSumExp: m = max over the axes (stage "<op>_max"), acc = sum exp(x - m),
//                    y = log(acc) + m (overflow-free; an empty set gives log(0) + -inf = -inf).
// Empty / omitted axes reduce everything, or copy the input with noop_with_empty_axes=1. An
// empty reduced dim gives the combiner's identity (0, -inf, +inf, 1) through post, as ONNX
// specifies for empty sets. Integer inputs of L2/LogSum/LogSumExp apply post in f64 and
// truncate back. Pattern kCommReduce.
// Gradients: ReduceSum, ReduceMean, ReduceSumSquare (reduce_gradient).
//
// ArgMax / ArgMin: TE has no arg-reduction, so two stages: m = max (min) over the axis, then
// the min (first) or max (select_last_index) of the positions r where x[..r..] == m.
//
// Speed (flat_reduce.h): when the reduced axes are a trailing block of the input (the last
// axis, or all axes) of at least two vectors, each reduction stage takes the flat form (lanes
// and parallel chunks, then a small combine; float sums reassociate); when the last axis is
// kept, the schedule vectorizes it with the reduce loops inside (column form). Other layouts
// run the plain reduction (default_schedule).
#include <functional>
#include <set>
#include <string>

#include "op/defs/flat_reduce.h"
#include "op/defs/row_reduce.h"
#include "op/schedule_util.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

// ---- axes ----

// The reduced axes (sorted, normalized); empty when the axes input is omitted or empty.
std::vector<int> reduce_axes(const ir::Node& n, int rank) {
    std::set<int> axes;
    if (has_input(n, 1)) {
        for (int64_t a : constant_ints(n, 1, "axes")) {
            const int ax = normalize_axis(n, a, rank, "axes");
            KILN_CHECK(axes.insert(ax).second, kInvalidModel)
                << node_label(n) << ": axis " << a << " appears more than once in input axes";
        }
    }
    return {axes.begin(), axes.end()};
}

// Every axis is reduced when no axes are given (and noop_with_empty_axes=0).
std::vector<bool> reduced_mask(const ir::Node& n, int rank, bool* noop) {
    std::vector<int> axes = reduce_axes(n, rank);
    *noop = axes.empty() && n.attr_int("noop_with_empty_axes", 0) != 0;
    std::vector<bool> mask(rank, axes.empty() && !*noop);
    for (int a : axes) mask[a] = true;
    return mask;
}

// ---- one reduction stage, plain or flat ----

// Where the reduced axes are: the mask, keepdims, and when they form a trailing block of the
// input (axes t0..rank-1) long enough, the plan of the flat form (flat_reduce.h).
struct ReduceLayout {
    std::vector<bool> mask;
    bool keep = true;
    int t0 = 0;
    FlatReducePlan plan;  // lanes == 0: the plain form
};

ReduceLayout reduce_layout(const ir::Node& n, const te::Tensor& x, bool* noop) {
    const int rank = x->ndim();
    ReduceLayout lay;
    lay.mask = reduced_mask(n, rank, noop);
    lay.keep = n.attr_int("keepdims", 1) != 0;
    lay.t0 = rank;
    while (lay.t0 > 0 && lay.mask[lay.t0 - 1]) --lay.t0;
    bool trailing = lay.t0 < rank;
    for (int i = 0; i < lay.t0; ++i) trailing = trailing && !lay.mask[i];
    if (trailing && !*noop) {
        const Shape rows(x->shape.begin(), x->shape.begin() + lay.t0), dims(x->shape.begin() + lay.t0, x->shape.end());
        lay.plan = plan_flat_reduce(te::compute_dtype(x->dtype), shape_numel(rows), shape_numel(dims));
    }
    return lay;
}

// elem(input index, output index) is the summand at one input element; the output index is
// that of the element's output (for reading a per-output stage such as LogSumExp's max).
using ReduceElem = std::function<Expr(const std::vector<Expr>& in, const std::vector<Expr>& out)>;

te::Tensor reduce_stage(const ReduceLayout& lay, const te::Tensor& x, te::ReduceOp op, DType dt, const Shape& out_shape,
                        const ReduceElem& elem, const std::string& name) {
    const int rank = x->ndim();
    if (lay.plan.lanes > 0) {
        const Shape rows(x->shape.begin(), x->shape.begin() + lay.t0), dims(x->shape.begin() + lay.t0, x->shape.end());
        auto body = [&](const std::vector<Expr>& r, const Expr& k) {
            std::vector<Expr> out = r;
            if (lay.keep) out.resize(static_cast<size_t>(rank), te::int_imm(0));
            return elem(unflatten_index(r, k, dims), out);
        };
        auto rows_of = [&](const std::vector<Var>& o) { return std::vector<Expr>(o.begin(), o.begin() + lay.t0); };
        return flat_reduce(rows, shape_numel(dims), lay.plan, op, dt, body, out_shape, rows_of, name);
    }
    std::vector<te::IterVar> r;
    for (int i = 0; i < rank; ++i)
        if (lay.mask[i]) r.push_back(te::reduce_axis(x->shape[i], "r" + std::to_string(i)));
    return te::compute(
        out_shape, [&](const std::vector<Var>& o) {
            // The input index of output index o with the reduced dims at the reduce vars r.
            std::vector<Expr> idx;
            size_t oi = 0, ri = 0;
            for (int i = 0; i < rank; ++i) {
                if (lay.mask[i]) {
                    idx.push_back(r[ri++]->var);
                    if (lay.keep) ++oi;  // the kept size-1 dim
                } else {
                    idx.push_back(o[oi++]);
                }
            }
            return reduce_with(op, elem(idx, std::vector<Expr>(o.begin(), o.end())), r);
        },
        name, dt);
}

// ---- the generic Reduce* row ----

struct ReduceKind {
    const char* name;
    std::vector<int> versions;
    std::vector<DType> dtypes;
    te::ReduceOp combine;
    std::function<Expr(Expr)> pre;                          // x (compute type) -> summand
    std::function<Expr(Expr acc, Expr count)> post;         // may be empty: identity
    bool float_post = false;                                // post in f64 for integer inputs
    bool log_sum_exp = false;
};

std::vector<DType> with_types(std::vector<DType> base, std::initializer_list<DType> more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
}

Expr ident(Expr x) { return x; }
Expr square(Expr x) { return x * x; }
Expr absval(Expr x) { return te::unary(te::UnaryOp::kAbs, x); }

// A symbolic compile's reduction (docs/dynamic_shapes.md): input and output dims as
// expressions; a symbolic reduced axis reduces in a symbolic loop and its count is a run-time
// dim. The last axis alone with keepdims reduces in vector lanes (row_reduce.h: the
// decomposed LayerNorm's means); other layouts run the plain reduction.
std::vector<te::Tensor> sym_reduce_compute(const ComputeArgs& a, const ReduceKind& k) {
    te::Tensor x = a.in(0);
    const int rank = x->ndim();
    const std::vector<Expr> xs = x->shape_exprs(), os = a.out_dims();
    bool noop = false;
    const std::vector<bool> mask = reduced_mask(a.node, rank, &noop);
    const bool keep = a.node.attr_int("keepdims", 1) != 0;
    if (noop)
        return {te::sym_compute(xs, [&](const std::vector<Var>& i) { return te::read(x, i); }, k.name, a.out_dtype())};
    const DType cdt = te::compute_dtype(x->dtype);
    Expr count = te::int_imm(1);
    int reduced = 0;
    for (int i = 0; i < rank; ++i)
        if (mask[static_cast<size_t>(i)]) count = count * xs[static_cast<size_t>(i)], ++reduced;
    const bool last_only = reduced == 1 && rank > 0 && mask.back() && keep;
    const int64_t lanes = last_only ? row_lanes(cdt, assumed(x->shape.back())) : 0;
    const bool staged = k.post != nullptr;
    const std::string acc_name = staged ? std::string(k.name) + "_acc" : k.name;
    const DType acc_dt = staged ? cdt : a.out_dtype();
    te::Tensor acc;
    if (lanes > 0) {
        acc = lane_reduce(
            xs, lanes, k.combine, acc_dt,
            [&](const std::vector<Var>& i, Expr at) {
                std::vector<Expr> idx(i.begin(), i.end());
                idx.back() = std::move(at);
                return k.pre(te::cast(cdt, te::read(x, idx)));
            },
            acc_name);
    } else {
        std::vector<te::IterVar> r;
        for (int i = 0; i < rank; ++i)
            if (mask[static_cast<size_t>(i)]) r.push_back(te::reduce_axis(xs[static_cast<size_t>(i)], "r" + std::to_string(i)));
        acc = te::sym_compute(
            os, [&](const std::vector<Var>& o) {
                std::vector<Expr> idx;
                size_t oi = 0, ri = 0;
                for (int i = 0; i < rank; ++i) {
                    if (mask[static_cast<size_t>(i)]) {
                        idx.push_back(r[ri++]->var);
                        if (keep) ++oi;
                    } else {
                        idx.push_back(o[oi++]);
                    }
                }
                return reduce_with(k.combine, k.pre(te::cast(cdt, te::read(x, idx))), r);
            },
            acc_name, acc_dt);
    }
    if (!staged) return {acc};
    const DType pdt = k.float_post && !dtype_is_float(cdt) ? DType::kFloat64 : cdt;
    return {te::sym_compute(
        os, [&](const std::vector<Var>& o) {
            return k.post(te::cast(pdt, te::read(acc, o)), te::cast(pdt, count));
        },
        k.name, a.out_dtype())};
}

bool is_symbolic(const ComputeArgs& a) {
    if (!a.in(0)->is_static()) return true;
    for (const Expr& e : a.out_dims()) {
        int64_t v = 0;
        if (!te::const_int(e, &v)) return true;
    }
    return false;
}

OpDef reduce_op(const ReduceKind& k) {
    OpDef d;
    d.name = k.name;
    d.onnx_versions = k.versions;
    d.min_inputs = 1;
    d.max_inputs = 2;
    d.attrs = {{"keepdims", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"noop_with_empty_axes", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.value_inputs = {1};
    d.pattern = OpPattern::kCommReduce;
    d.infer = [k](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        check_dtype(n, "data", x.dtype, k.dtypes);
        bool noop = false;
        const std::vector<bool> mask = reduced_mask(n, x.rank(), &noop);
        if (noop) return std::vector<ir::TensorType>{x};
        const bool keep = n.attr_int("keepdims", 1) != 0;
        std::vector<ir::Dim> out;
        for (int i = 0; i < x.rank(); ++i) {
            if (!mask[i])
                out.push_back(x.shape[i]);
            else if (keep)
                out.push_back(ir::Dim(1));
        }
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [k](const ComputeArgs& a) {
        if (!k.log_sum_exp && is_symbolic(a)) return sym_reduce_compute(a, k);
        te::Tensor x = a.in(0);
        const std::string name = k.name;
        bool noop = false;
        const ReduceLayout lay = reduce_layout(a.node, x, &noop);
        if (noop) {
            auto y = te::compute(
                x->shape, [&](const std::vector<Var>& i) { return te::read(x, i); }, name, a.out_dtype());
            return std::vector<te::Tensor>{y};
        }
        const DType cdt = te::compute_dtype(x->dtype);
        int64_t count = 1;
        for (int i = 0; i < x->ndim(); ++i)
            if (lay.mask[i]) count *= x->shape[i];
        te::Tensor m;
        if (k.log_sum_exp)
            m = reduce_stage(lay, x, te::ReduceOp::kMax, cdt, a.out_shape(),
                             [&](const std::vector<Expr>& in, const std::vector<Expr>&) {
                                 return te::cast(cdt, te::read(x, in));
                             },
                             name + "_max");
        te::Tensor acc = reduce_stage(
            lay, x, k.combine, k.post || m ? cdt : a.out_dtype(), a.out_shape(),
            [&](const std::vector<Expr>& in, const std::vector<Expr>& out) {
                Expr v = te::cast(cdt, te::read(x, in));
                if (m) v = te::unary(te::UnaryOp::kExp, v - te::read(m, out));
                return k.pre(v);
            },
            k.post || m ? name + "_acc" : name);
        if (!k.post && !m) return std::vector<te::Tensor>{acc};
        // NOTE: ReduceMean over an empty set divides 0 by 0 like ORT: NaN for floats.
        const DType pdt = k.float_post && !dtype_is_float(cdt) ? DType::kFloat64 : cdt;
        auto y = te::compute(
            a.out_shape(), [&](const std::vector<Var>& o) {
                Expr v = te::cast(pdt, te::read(acc, o));
                if (k.post) v = k.post(v, te::make_const(pdt, static_cast<double>(count)));
                if (m) v = v + te::cast(pdt, te::read(m, o));
                return v;
            },
            name, a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    d.schedule = reduce_schedule;
    return d;
}

std::vector<ReduceKind> reduce_kinds() {
    using te::ReduceOp;
    using te::UnaryOp;
    const std::vector<DType> sum_types =
        with_types(float_types(), {DType::kInt32, DType::kInt64, DType::kUInt32, DType::kUInt64});
    const std::vector<DType> minmax_types = with_types(numeric_types(), {DType::kBool});
    const std::vector<int> v18 = {1, 11, 13, 18};
    auto log_post = [](Expr acc, Expr) { return te::unary(UnaryOp::kLog, acc); };
    return {
        {"ReduceL1", v18, sum_types, ReduceOp::kSum, absval, nullptr},
        {"ReduceL2", v18, sum_types, ReduceOp::kSum, square,
         [](Expr acc, Expr) { return te::unary(UnaryOp::kSqrt, acc); }, true},
        {"ReduceLogSum", v18, sum_types, ReduceOp::kSum, ident, log_post, true},
        {"ReduceLogSumExp", v18, float_types(), ReduceOp::kSum, ident, log_post, true, true},
        {"ReduceMax", {1, 11, 12, 13, 18, 20}, minmax_types, ReduceOp::kMax, ident, nullptr},
        {"ReduceMean", v18, sum_types, ReduceOp::kSum, ident, [](Expr acc, Expr count) { return acc / count; }},
        {"ReduceMin", {1, 11, 12, 13, 18, 20}, minmax_types, ReduceOp::kMin, ident, nullptr},
        {"ReduceProd", v18, sum_types, ReduceOp::kProd, ident, nullptr},
        {"ReduceSum", {1, 11, 13}, sum_types, ReduceOp::kSum, ident, nullptr},
        {"ReduceSumSquare", v18, sum_types, ReduceOp::kSum, square, nullptr},
    };
}

// ---- ArgMax / ArgMin ----

// Indices of x with position `axis` replaced by `at`.
std::vector<Expr> with_axis(const std::vector<Var>& i, int axis, Expr at) {
    std::vector<Expr> idx(i.begin(), i.end());
    idx[axis] = std::move(at);
    return idx;
}

// ArgMax/ArgMin along a long last axis in the flat form (flat_reduce.h): the extreme m of each
// row split over lanes and chunks, then the first (last) position holding m, likewise (the min
// or max of positions is exact in any order).
te::Tensor flat_arg_reduce(const ComputeArgs& a, const te::Tensor& x, bool is_max, bool last,
                           const FlatReducePlan& pm, const std::string& name) {
    const int rank = x->ndim();
    const int64_t extent = x->shape[rank - 1];
    Shape rows(x->shape.begin(), x->shape.end() - 1), red = rows;
    red.push_back(1);
    auto elem = [&](const std::vector<Expr>& r, const Expr& k) {
        std::vector<Expr> idx = r;
        idx.push_back(k);
        return te::read(x, idx);
    };
    auto keep_rows = [&](const std::vector<Var>& o) { return std::vector<Expr>(o.begin(), o.begin() + rank - 1); };
    te::Tensor m = flat_reduce(rows, extent, pm, is_max ? te::ReduceOp::kMax : te::ReduceOp::kMin,
                               te::compute_dtype(x->dtype), elem, red, keep_rows, is_max ? "argmax_max" : "argmin_min");
    auto pos = [&](const std::vector<Expr>& r, const Expr& k) {
        std::vector<Expr> mi = r;
        mi.push_back(te::int_imm(0));
        Expr hit = te::eq(elem(r, k), te::read(m, mi));
        return te::select(hit, k, te::int_imm(last ? -1 : extent));
    };
    const FlatReducePlan pi = plan_flat_reduce(DType::kInt64, shape_numel(rows), extent);
    return flat_reduce(rows, extent, pi, last ? te::ReduceOp::kMax : te::ReduceOp::kMin, DType::kInt64, pos,
                       a.out_shape(), keep_rows, name);
}

OpDef arg_reduce_op(bool is_max) {
    OpDef d;
    d.name = is_max ? "ArgMax" : "ArgMin";
    d.onnx_versions = {1, 11, 12, 13};
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{0})},
               {"keepdims", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"select_last_index", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kCommReduce;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        check_dtype(n, "data", x.dtype, numeric_types());
        KILN_CHECK(x.rank() >= 1, kInvalidModel) << node_label(n) << ": input data must have rank >= 1";
        const int axis = normalize_axis(n, n.attr_int("axis", 0), x.rank());
        std::vector<ir::Dim> out = x.shape;
        if (n.attr_int("keepdims", 1) != 0)
            out[axis] = 1;
        else
            out.erase(out.begin() + axis);
        return std::vector<ir::TensorType>{{DType::kInt64, out}};
    };
    d.compute = [is_max, name = d.name](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", 0), x->ndim());
        const bool keep = a.node.attr_int("keepdims", 1) != 0;
        const bool last = a.node.attr_int("select_last_index", 0) != 0;
        const int64_t extent = x->shape[axis];
        if (axis == x->ndim() - 1) {
            const FlatReducePlan pm = plan_flat_reduce(te::compute_dtype(x->dtype), x->numel() / extent, extent);
            if (pm.lanes > 0) return std::vector<te::Tensor>{flat_arg_reduce(a, x, is_max, last, pm, name)};
        }
        Shape red = x->shape;
        red[axis] = 1;
        te::IterVar r1 = te::reduce_axis(extent, "r");
        te::Tensor m = te::compute(
            red, [&](const std::vector<Var>& i) {
                Expr v = te::read(x, with_axis(i, axis, r1->var));
                return is_max ? te::max_reduce(v, {r1}) : te::min_reduce(v, {r1});
            },
            is_max ? "argmax_max" : "argmin_min", te::compute_dtype(x->dtype));
        te::IterVar r2 = te::reduce_axis(extent, "r");
        te::Tensor idx = te::compute(
            a.out_shape(), [&](const std::vector<Var>& o) {
                // Output index -> full-rank index; the axis position is replaced below.
                std::vector<Var> full = o;
                if (!keep) full.insert(full.begin() + axis, te::make_var("unused"));
                Expr hit = te::eq(te::read(x, with_axis(full, axis, r2->var)),
                                  te::read(m, with_axis(full, axis, te::int_imm(0))));
                if (last) return te::max_reduce(te::select(hit, Expr(r2->var), te::int_imm(-1)), {r2});
                return te::min_reduce(te::select(hit, Expr(r2->var), te::int_imm(extent)), {r2});
            },
            name, DType::kInt64);
        return std::vector<te::Tensor>{idx};
    };
    d.schedule = reduce_schedule;
    return d;
}


// ---- gradients (op/gradient.h) ----
// ReduceSum: g (in the keepdims shape) broadcast back over the reduced axes; ReduceMean: the
// same divided by the count; ReduceSumSquare: 2 x g. The axes input gets none. With
// noop_with_empty_axes and no axes the forward copies its input (all three), so g passes.

enum class ReduceGrad { kSum, kMean, kSumSquare };

GradientFn reduce_gradient(ReduceGrad kind) {
    return [kind](GradientBuilder& b) {
        const ir::Node& n = b.node();
        ir::Value* x = b.input(0);
        const Shape xs = x->type().static_shape();
        bool noop = false;
        const std::vector<bool> mask = reduced_mask(n, static_cast<int>(xs.size()), &noop);
        Shape keep = xs;
        int64_t count = 1;
        for (size_t d = 0; d < xs.size(); ++d)
            if (mask[d]) {
                keep[d] = 1;
                count *= xs[d];
            }
        ir::Value* g = b.reshape(b.output_grad_or_zeros(0), keep);
        const DType t = x->type().dtype;
        std::vector<ir::Value*> out(b.num_inputs(), nullptr);
        if (noop) {
            out[0] = g;
            return out;
        }
        switch (kind) {
            case ReduceGrad::kSum:
                out[0] = b.emit1("Expand", {g, b.ints(xs)});
                break;
            case ReduceGrad::kMean:
                out[0] = b.emit1("Expand", {b.emit1("Mul", {g, b.scalar(1.0 / static_cast<double>(count), t)}), b.ints(xs)});
                break;
            case ReduceGrad::kSumSquare:  // x broadcasts g: no Expand needed
                out[0] = b.emit1("Mul", {b.emit1("Mul", {x, b.scalar(2.0, t)}), g});
                break;
        }
        return out;
    };
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
    for (const ReduceKind& k : reduce_kinds()) {
        OpDef d = reduce_op(k);
        const std::string name = k.name;
        if (name == "ReduceSum") d.gradient = reduce_gradient(ReduceGrad::kSum);
        if (name == "ReduceMean") d.gradient = reduce_gradient(ReduceGrad::kMean);
        if (name == "ReduceSumSquare") d.gradient = reduce_gradient(ReduceGrad::kSumSquare);
        r.add(std::move(d));
    }
    r.add(arg_reduce_op(true));
    r.add(arg_reduce_op(false));
}

}  // namespace kiln::op
