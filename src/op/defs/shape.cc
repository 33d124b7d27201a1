// Shape ops: Flatten, Reshape (constant shape input), Transpose, Concat, Squeeze, Unsqueeze (axes
// input; the importer turns the pre-13 attribute into it), Shape (start/end) and Size. All
// injective; any dtype. Reshape, Flatten, Squeeze and Unsqueeze read the input at the row-major
// position of the output element. Shape and Size depend only on the static input shape: their
// computes write constants (a select table) and never read the data.
// Gradients (op/gradient.h): reshape-likes reshape back, Transpose by the inverse permutation,
// Concat slices the output gradient per input; Shape and Size have none (integer outputs).
#include <algorithm>
#include <numeric>
#include <utility>
#include <string>

#include "ir/dim_expr.h"
#include "op/defs/movement_util.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "op/schedule_util.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

// Output element at `out_idx` of shape `out_shape` -> indices into `in_shape` (same numel).
std::vector<Expr> reshape_indices(const Shape& in_shape, const Shape& out_shape, const std::vector<Var>& out_idx) {
    Expr flat = te::int_imm(0);
    for (size_t i = 0; i < out_shape.size(); ++i) flat = flat * out_shape[i] + Expr(out_idx[i]);
    std::vector<Expr> idx(in_shape.size());
    for (size_t k = in_shape.size(); k-- > 0;) {
        idx[k] = te::floormod(flat, te::int_imm(in_shape[k]));
        flat = te::floordiv(flat, te::int_imm(in_shape[k]));
    }
    return idx;
}

/// A symbolic compile's reshape of static trailing dims (heads: [b, s, 384] <-> [b, s, 12, 32]):
/// the leading dims the input and output share keep their indices, the static rest is
/// reshaped as reshape_indices does.
std::vector<te::Tensor> prefix_reshape(const ComputeArgs& a) {
    te::Tensor x = a.in(0);
    const std::vector<Expr> in = x->shape_exprs(), out = a.out_dims();
    size_t p = 0;
    while (p < in.size() && p < out.size() && te::same_dim(in[p], out[p])) ++p;
    Shape in_rest, out_rest;
    for (size_t k = p; k < in.size(); ++k) in_rest.push_back(x->shape[k]);
    for (size_t k = p; k < out.size(); ++k) {
        int64_t v = -1;
        KILN_ICHECK(te::const_int(out[k], &v)) << a.node.describe() << ": a symbolic reshape needing dim arithmetic";
        out_rest.push_back(v);
    }
    for (int64_t d : in_rest)
        KILN_ICHECK(d != te::kDynamicDim) << a.node.describe() << ": a symbolic reshape needing dim arithmetic";
    KILN_ICHECK(shape_numel(in_rest) == shape_numel(out_rest)) << a.node.describe() << ": reshape sizes differ";
    auto out_t = te::sym_compute(
        out, [&](const std::vector<Var>& i) {
            std::vector<Expr> idx(i.begin(), i.begin() + static_cast<std::ptrdiff_t>(p));
            std::vector<Var> rest(i.begin() + static_cast<std::ptrdiff_t>(p), i.end());
            for (Expr e : reshape_indices(in_rest, out_rest, rest)) idx.push_back(std::move(e));
            return te::read(x, idx);
        },
        a.node.op(), a.out_dtype());
    return {out_t};
}

/// A symbolic compile's reshape (docs/dynamic_shapes.md): one that inserts or removes axes
/// of size 1 (Unsqueeze, Squeeze, a Reshape to the same dims plus or minus ones), so each input
/// index is an output index or 0 without dim arithmetic.
std::vector<te::Tensor> unit_axes_reshape(const ComputeArgs& a) {
    te::Tensor x = a.in(0);
    const std::vector<Expr> in = x->shape_exprs(), out = a.out_dims();
    auto is_one = [](const Expr& e) {
        int64_t v = 0;
        return te::const_int(e, &v) && v == 1;
    };
    std::vector<Expr> in_rest, out_rest;
    std::vector<size_t> out_pos;  // per non-1 output dim, its position
    for (const Expr& e : in)
        if (!is_one(e)) in_rest.push_back(e);
    for (size_t k = 0; k < out.size(); ++k)
        if (!is_one(out[k])) out_rest.push_back(out[k]), out_pos.push_back(k);
    if (!te::same_dims(in_rest, out_rest)) return prefix_reshape(a);
    auto out_t = te::sym_compute(
        out, [&](const std::vector<Var>& i) {
            std::vector<Expr> idx;
            size_t r = 0;
            for (const Expr& e : in) idx.push_back(is_one(e) ? te::int_imm(0) : Expr(i[out_pos[r++]]));
            return te::read(x, idx);
        },
        a.node.op(), a.out_dtype());
    return {out_t};
}

std::vector<te::Tensor> reshape_compute(const ComputeArgs& a) {
    te::Tensor x = a.in(0);
    bool symbolic = !x->is_static();
    for (const Expr& e : a.out_dims()) {
        int64_t v = 0;
        symbolic = symbolic || !te::const_int(e, &v);
    }
    if (symbolic) return unit_axes_reshape(a);
    Shape out_shape = a.out_shape();
    auto out = te::compute(
        out_shape, [&](const std::vector<Var>& i) { return te::read(x, reshape_indices(x->shape, out_shape, i)); },
        a.node.op(), a.out_dtype());
    return {out};
}

// Gradient: Reshape, Flatten, Squeeze, Unsqueeze move no element: the output gradient reshaped back to the
// input's shape. Their shape / axes input has none.
std::vector<ir::Value*> reshape_like_gradient(GradientBuilder& b) {
    std::vector<ir::Value*> grads(b.num_inputs(), nullptr);
    grads[0] = b.reshape(b.output_grad_or_zeros(0), b.input(0)->type().static_shape());
    return grads;
}

OpDef flatten_op() {
    OpDef d;
    d.name = "Flatten";
    d.onnx_versions = {1, 9, 11, 13, 21};
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        int rank = x.rank();
        int64_t axis = n.attr_int("axis", 1);
        KILN_CHECK(axis >= -rank && axis <= rank, kInvalidModel)
            << node_label(n) << ": attribute axis=" << axis << " is out of range for rank " << rank;
        if (axis < 0) axis += rank;
        if (!x.is_static()) {  // a symbolic compile: the products as dim expressions (batch*seq)
            auto outer = ir::dims_poly_product({x.shape.begin(), x.shape.begin() + axis});
            auto inner = ir::dims_poly_product({x.shape.begin() + axis, x.shape.end()});
            KILN_CHECK(outer && inner, kUnsupported)
                << node_label(n) << ": input " << x.str() << " has an unknown dimension";
            return std::vector<ir::TensorType>{{x.dtype, {*ir::dim_of_poly(*outer), *ir::dim_of_poly(*inner)}}};
        }
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < rank; ++i)
            (i < axis ? outer : inner) *= static_dim(n, x.shape[i], "input");
        return std::vector<ir::TensorType>{{x.dtype, {outer, inner}}};
    };
    d.compute = reshape_compute;
    d.gradient = reshape_like_gradient;
    return d;
}

OpDef reshape_op() {
    OpDef d;
    d.name = "Reshape";
    d.onnx_versions = {1, 5, 13, 14, 19, 21};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"allowzero", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.value_inputs = {1};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        std::vector<int64_t> spec = constant_ints(n, 1, "shape");
        bool allowzero = n.attr_int("allowzero", 0) != 0;
        std::string spec_str = "[";
        for (size_t i = 0; i < spec.size(); ++i) spec_str += (i ? "," : "") + std::to_string(spec[i]);
        spec_str += "]";
        std::vector<ir::Dim> out(spec.size());
        int infer_at = -1;
        for (size_t i = 0; i < spec.size(); ++i) {
            if (spec[i] == -1) {
                KILN_CHECK(infer_at < 0, kInvalidModel) << node_label(n) << ": shape " << spec_str << " has more than one -1";
                infer_at = static_cast<int>(i);
            } else if (spec[i] == 0 && !allowzero) {
                KILN_CHECK(i < x.shape.size(), kInvalidModel)
                    << node_label(n) << ": shape " << spec_str << " copies dimension " << i << " (0) but the input has rank "
                    << x.rank();
                out[i] = x.shape[i];
            } else {
                KILN_CHECK(spec[i] >= 0, kInvalidModel) << node_label(n) << ": invalid dimension " << spec[i] << " in shape " << spec_str;
                out[i] = spec[i];
            }
        }
        bool known = x.is_static();
        for (size_t i = 0; i < out.size(); ++i)
            if (static_cast<int>(i) != infer_at && !out[i].is_static()) known = false;
        if (!known) {
            // Symbolic: -1 is the input's product over the other dims, as a dim expression
            // (`batch*seq` for [b, s, 384] -> [-1, 384]; ir/dim_expr.h).
            if (infer_at >= 0) {
                std::vector<ir::Dim> rest = out;
                rest.erase(rest.begin() + infer_at);
                auto total = ir::dims_poly_product(x.shape), other = ir::dims_poly_product(rest);
                auto q = total && other ? total->div_exact(*other) : std::nullopt;
                auto d = q ? ir::dim_of_poly(*q) : std::nullopt;
                KILN_CHECK(d.has_value(), kUnsupported) << node_label(n) << ": cannot infer -1 in shape " << spec_str
                                                        << " from symbolic input shape " << dims_str(x.shape);
                out[static_cast<size_t>(infer_at)] = *d;
            }
            return std::vector<ir::TensorType>{{x.dtype, out}};
        }
        int64_t total = shape_numel(x.static_shape());
        int64_t known_prod = 1;
        for (size_t i = 0; i < out.size(); ++i)
            if (static_cast<int>(i) != infer_at) known_prod *= out[i].value;
        if (infer_at >= 0) {
            KILN_CHECK(known_prod != 0 && total % known_prod == 0, kInvalidModel)
                << node_label(n) << ": cannot reshape " << total << " elements to " << spec_str;
            out[infer_at] = total / known_prod;
        } else {
            KILN_CHECK(known_prod == total, kInvalidModel)
                << node_label(n) << ": cannot reshape " << total << " elements to " << spec_str;
        }
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = reshape_compute;
    d.gradient = reshape_like_gradient;
    return d;
}

// KilnReshape (internal; symbolic compiles, compiler::fold_shape_values): a Reshape to dims
// given as text (`batch`, `seq`, `batch*seq`, `16`), for a target no constant shape can say with
// 0 and -1 ([batch*seq, 16] -> [batch, seq, 16], GPT-2's Conv1D). A view, or fused like Reshape.
OpDef kiln_reshape_op() {
    OpDef d;
    d.name = "KilnReshape";
    d.internal = true;
    d.min_inputs = d.max_inputs = 1;
    // `ones`: dims of the input that the target leaves out, which must be 1 at run time (the
    // compile asserts it: compiler::pin_unit_dims).
    d.attrs = {{"dims", AttrKind::kStrings, std::nullopt, true}, {"ones", AttrKind::kStrings, std::nullopt}};
    d.pattern = OpPattern::kOpaque;  // never fused: a view (a fused one would need index arithmetic)
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        const auto& texts = std::get<std::vector<std::string>>(n.attrs().at("dims"));
        std::vector<ir::Dim> out;
        for (const std::string& t : texts) {
            auto p = DimPoly::parse(t);
            auto d = p ? ir::dim_of_poly(*p) : std::nullopt;
            KILN_CHECK(d.has_value(), kInvalidModel) << node_label(n) << ": '" << t << "' is no dimension";
            out.push_back(*d);
        }
        auto in = ir::dims_poly_product(x.shape), to = ir::dims_poly_product(out);
        if (n.has_attr("ones") && to)
            for (const std::string& t : std::get<std::vector<std::string>>(n.attrs().at("ones")))
                if (auto p = DimPoly::parse(t)) to = *to * *p;
        KILN_CHECK(in && to && *in == *to, kInvalidModel)
            << node_label(n) << ": cannot reshape " << dims_str(x.shape) << " to " << dims_str(out);
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = reshape_compute;
    return d;
}

std::vector<int64_t> transpose_perm(const ir::Node& n, int rank) {
    std::vector<int64_t> perm = n.attr_ints("perm");
    if (perm.empty() && !n.has_attr("perm")) {
        for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
        return perm;
    }
    KILN_CHECK(static_cast<int>(perm.size()) == rank, kInvalidModel)
        << node_label(n) << ": perm has " << perm.size() << " entries but the input has rank " << rank;
    std::vector<bool> seen(rank, false);
    for (int64_t& p : perm) {
        KILN_CHECK(p >= -rank && p < rank, kInvalidModel) << node_label(n) << ": perm entry " << p << " is out of range";
        if (p < 0) p += rank;
        KILN_CHECK(!seen[p], kInvalidModel) << node_label(n) << ": perm is not a permutation (" << p << " repeats)";
        seen[p] = true;
    }
    return perm;
}

// Transpose by the inverse permutation.
std::vector<ir::Value*> transpose_gradient(GradientBuilder& b) {
    const std::vector<int64_t> perm = transpose_perm(b.node(), b.input(0)->type().rank());
    std::vector<int64_t> inverse(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) inverse[perm[k]] = static_cast<int64_t>(k);
    return {b.emit1("Transpose", {b.output_grad_or_zeros(0)}, {{"perm", inverse}})};
}

// A transpose that moves the input's contiguous axis (at output position q) away from the last:
// the output's last axis and axis q tiled by up to a vector each, the other output axes fused
// into the parallel loop (with the q blocks when they are fewer than 16 rows), then (q outer,
// last outer, q inner, last inner vectorized). A block
// reads its 16 input lines 16 times over (L1) and writes whole output lines; one output row at
// a time gathered each element from a different line (3x ORT on [64,128,96] by [2,0,1]).
void transpose_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (te::Stage& st : s.stages()) {
        const te::Tensor& t = st.tensor();
        const int nd = t->ndim();
        if (t->name != "Transpose" || st.is_inlined() || !stage_untouched(st) || !t->is_static() || nd < 2 ||
            t->inputs().empty())
            continue;
        const te::Tensor x = t->inputs()[0];
        // The output axis whose index is the input's last: its variable is the last index read.
        const auto* body = static_cast<const te::TensorReadNode*>(t->body.get());
        if (t->body->kind != te::ExprKind::kTensorRead || body->indices.empty()) continue;
        int q = -1;
        for (int k = 0; k < nd; ++k)
            if (body->indices.back().get() == t->axis[k]->var.get()) q = k;
        const int64_t w = vector_width(t->dtype);
        if (q < 0 || q == nd - 1 || x->shape.back() < 4 || t->shape.back() < w || t->numel() < 4096) continue;
        std::vector<te::IterVar> outer;
        for (int k = 0; k < nd - 1; ++k)
            if (k != q) outer.push_back(st.axis(k));
        auto [qo, qi] = st.split(st.axis(q), std::min(w, t->shape[q]));
        auto [lo, li] = st.split(st.axis(nd - 1), w);
        std::vector<te::IterVar> order = outer;
        for (const te::IterVar& v : {qo, lo, qi, li}) order.push_back(v);
        st.reorder(order);
        te::IterVar f = qo;
        if (!outer.empty()) {
            f = outer[0];
            for (size_t k = 1; k < outer.size(); ++k) f = st.fuse(f, outer[k]);
            // Too few outer rows to share (batch 1's [1, 196, 512] -> [1, 512, 196] in
            // MLP-Mixer ran on one thread: 9.8% of its roofline at 2): the q blocks join them.
            if (f->extent < 16) f = st.fuse(f, qo);
        }
        st.vectorize(li);
        if (t->numel() > kParallelMin && f->extent > 1) st.parallel(f);
    }
    default_schedule(s, outputs);
}

OpDef transpose_op() {
    OpDef d;
    d.name = "Transpose";
    d.onnx_versions = {1, 13, 21};
    d.attrs = {{"perm", AttrKind::kInts, std::nullopt}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        auto perm = transpose_perm(n, x.rank());
        std::vector<ir::Dim> out;
        for (int64_t p : perm) out.push_back(x.shape[p]);
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        auto perm = transpose_perm(a.node, x->ndim());
        auto out = te::sym_compute(
            a.out_dims(), [&](const std::vector<Var>& i) {
                std::vector<Expr> idx(perm.size());
                for (size_t k = 0; k < perm.size(); ++k) idx[perm[k]] = i[k];
                return te::read(x, idx);
            },
            "Transpose", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    d.schedule = transpose_schedule;
    d.gradient = transpose_gradient;
    return d;
}

// Each input's gradient is its stretch of the output gradient along the axis: a Slice (it fuses
// into its consumer), for the inputs that need one.
std::vector<ir::Value*> concat_gradient(GradientBuilder& b) {
    ir::Value* g = b.output_grad_or_zeros(0);
    const Shape out_shape = g->type().static_shape();
    const int axis = normalize_axis(b.node(), b.node().attr_int("axis", 0), static_cast<int>(out_shape.size()));
    std::vector<ir::Value*> grads(b.num_inputs(), nullptr);
    int64_t off = 0;
    for (size_t k = 0; k < b.num_inputs(); ++k) {
        const int64_t len = b.input(k)->type().static_shape()[axis];
        if (b.needs_grad(k)) {
            grads[k] = len == out_shape[axis]
                           ? g
                           : b.emit1("Slice", {g, b.ints({off}), b.ints({off + len}), b.ints({axis})});
        }
        off += len;
    }
    return grads;
}

/// A symbolic compile's Concat: the offsets along the axis are dim expressions (seq, seq+1).
std::vector<te::Tensor> sym_concat(const ComputeArgs& a) {
    const std::vector<Expr> out_dims = a.out_dims();
    const int axis = normalize_axis(a.node, a.node.attr_int("axis", 0), static_cast<int>(out_dims.size()));
    auto out = te::sym_compute(
        out_dims, [&](const std::vector<Var>& i) {
            std::vector<Expr> offsets;
            Expr off = te::int_imm(0);
            for (const auto& t : a.inputs) offsets.push_back(off), off = off + t->shape_exprs()[static_cast<size_t>(axis)];
            Expr v;
            for (size_t k = a.inputs.size(); k-- > 0;) {
                const te::Tensor& t = a.inputs[k];
                const Expr len = t->shape_exprs()[static_cast<size_t>(axis)];
                std::vector<Expr> idx(i.begin(), i.end());
                const Expr local = Expr(i[axis]) - offsets[k];
                idx[axis] = a.inputs.size() == 1 ? local : te::max(te::min(local, len - te::int_imm(1)), te::int_imm(0));
                Expr r = te::read(t, idx);
                v = v ? te::select(Expr(i[axis]) < offsets[k] + len, r, v) : r;
            }
            return v;
        },
        "Concat", a.out_dtype());
    return {out};
}

OpDef concat_op() {
    OpDef d;
    d.name = "Concat";
    d.onnx_versions = {1, 4, 11, 13};
    d.min_inputs = 1;
    d.max_inputs = -1;
    d.attrs = {{"axis", AttrKind::kInt, std::nullopt, /*required=*/true}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& first = input_type(n, 0, "inputs[0]");
        int rank = first.rank();
        int axis = normalize_axis(n, n.attr_int("axis", 0), rank);
        std::vector<ir::Dim> out = first.shape;
        int64_t total = 0;
        DimPoly sym_total;  // the symbolic lengths along the axis (symbolic compiles)
        for (size_t k = 0; k < n.num_inputs(); ++k) {
            std::string what = "inputs[" + std::to_string(k) + "]";
            const auto& t = input_type(n, k, what.c_str());
            check_same_dtype(n, "inputs[0]", first.dtype, what.c_str(), t.dtype);
            KILN_CHECK(t.rank() == rank, kInvalidModel)
                << node_label(n) << ": " << what << " has rank " << t.rank() << " but inputs[0] has rank " << rank;
            for (int i = 0; i < rank; ++i) {
                if (i == axis) continue;
                KILN_CHECK(!(t.shape[i].is_static() && first.shape[i].is_static()) || t.shape[i] == first.shape[i],
                           kInvalidModel)
                    << node_label(n) << ": shapes " << dims_str(first.shape) << " and " << dims_str(t.shape)
                    << " differ outside axis " << axis;
            }
            if (!t.shape[axis].is_static()) {
                auto p = ir::dim_poly(t.shape[axis]);
                KILN_CHECK(p.has_value(), kUnsupported)
                    << node_label(n) << ": " << what << " has an unknown dimension along axis " << axis;
                sym_total = sym_total + *p;
                continue;
            }
            total += t.shape[axis].value;
        }
        out[axis] = total;
        if (!sym_total.is_constant()) out[axis] = *ir::dim_of_poly(sym_total + DimPoly::constant(total));  // seq+1
        return std::vector<ir::TensorType>{{first.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        const std::vector<Expr> out_dims = a.out_dims();
        for (const Expr& e : out_dims)
            if (int64_t v = 0; !te::const_int(e, &v)) return sym_concat(a);
        int rank = static_cast<int>(a.out_shape().size());
        int axis = normalize_axis(a.node, a.node.attr_int("axis", 0), rank);
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                // Nested selects from the last input back; indices clamped so every read is in bounds.
                std::vector<int64_t> offsets;
                int64_t off = 0;
                for (const auto& t : a.inputs) offsets.push_back(off), off += t->shape[axis];
                Expr v;
                for (size_t k = a.inputs.size(); k-- > 0;) {
                    const te::Tensor& t = a.inputs[k];
                    if (t->shape[axis] == 0) continue;  // contributes nothing
                    std::vector<Expr> idx(i.begin(), i.end());
                    Expr local = Expr(i[axis]) - te::int_imm(offsets[k]);
                    idx[axis] = a.inputs.size() == 1 ? local : clamp_index(local, t->shape[axis]);
                    Expr r = te::read(t, idx);
                    v = v ? te::select(Expr(i[axis]) < te::int_imm(offsets[k] + t->shape[axis]), r, v) : r;
                }
                return v;
            },
            "Concat", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    d.gradient = concat_gradient;
    return d;
}


// ---- Squeeze / Unsqueeze / Shape / Size ----

// Normalized, de-duplicated axes of an optional constant axes input (input 1).
std::vector<int> axes_input(const ir::Node& n, int rank, bool* given) {
    *given = has_input(n, 1);
    std::vector<int> axes;
    if (!*given) return axes;
    std::vector<bool> seen(std::max(rank, 0), false);
    for (int64_t a : constant_ints(n, 1, "axes")) {
        int ax = normalize_axis(n, a, rank, "axes");
        KILN_CHECK(!seen[ax], kInvalidModel) << node_label(n) << ": axis " << a << " repeats in axes";
        seen[ax] = true;
        axes.push_back(ax);
    }
    return axes;
}

OpDef squeeze_op() {
    OpDef d;
    d.name = "Squeeze";
    d.onnx_versions = {1, 11, 13, 21, 23};
    d.min_inputs = 1;
    d.max_inputs = 2;
    d.value_inputs = {1};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        bool given = false;
        std::vector<int> axes = axes_input(n, x.rank(), &given);
        std::vector<bool> drop(x.rank(), false);
        if (!given) {
            for (int i = 0; i < x.rank(); ++i) drop[i] = static_dim(n, x.shape[i], "data") == 1;
        }
        for (int ax : axes) {
            // A symbolic compile's dim expression there (a height the model leaves unknown that
            // its convs take to 1): dropped; the compile asserts it is 1 at run time
            // (compiler::pin_unit_dims).
            if (!x.shape[ax].is_static() && ir::dim_poly(x.shape[ax])) {
                drop[ax] = true;
                continue;
            }
            int64_t dim = static_dim(n, x.shape[ax], "data");
            KILN_CHECK(dim == 1, kInvalidModel)
                << node_label(n) << ": cannot squeeze axis " << ax << " of size " << dim << " (shape " << dims_str(x.shape) << ")";
            drop[ax] = true;
        }
        std::vector<ir::Dim> out;
        for (int i = 0; i < x.rank(); ++i)
            if (!drop[i]) out.push_back(x.shape[i]);
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = reshape_compute;
    d.gradient = reshape_like_gradient;
    return d;
}

OpDef unsqueeze_op() {
    OpDef d;
    d.name = "Unsqueeze";
    d.onnx_versions = {1, 11, 13, 21, 23};
    d.min_inputs = d.max_inputs = 2;
    d.value_inputs = {1};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        const int out_rank = x.rank() + static_cast<int>(constant_ints(n, 1, "axes").size());
        bool given = false;
        std::vector<int> axes = axes_input(n, out_rank, &given);
        std::vector<bool> ins(out_rank, false);
        for (int ax : axes) ins[ax] = true;
        std::vector<ir::Dim> out;
        size_t k = 0;
        for (int i = 0; i < out_rank; ++i) out.push_back(ins[i] ? ir::Dim(int64_t{1}) : x.shape[k++]);
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = reshape_compute;
    d.gradient = reshape_like_gradient;
    return d;
}

// Shape-15 start/end: clamped into [0, rank] after adding rank to negatives.
std::pair<int64_t, int64_t> shape_range(const ir::Node& n, int rank) {
    auto clampr = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
    int64_t start = clampr(n.attr_int("start", 0));
    int64_t end = n.has_attr("end") ? clampr(n.attr_int("end", rank)) : rank;
    return {start, std::max(end, start)};
}

OpDef shape_op() {
    OpDef d;
    d.name = "Shape";
    d.onnx_versions = {1, 13, 15, 19, 21, 23};
    d.attrs = {{"start", AttrKind::kInt, ir::Attr(int64_t{0})}, {"end", AttrKind::kInt, std::nullopt}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        auto [start, end] = shape_range(n, x.rank());
        for (int64_t i = start; i < end; ++i) static_dim(n, x.shape[i], "data");
        return std::vector<ir::TensorType>{{DType::kInt64, {end - start}}};
    };
    d.compute = [](const ComputeArgs& a) {
        const te::Tensor& x = a.in(0);
        auto [start, end] = shape_range(a.node, x->ndim());
        std::vector<int64_t> dims(x->shape.begin() + start, x->shape.begin() + end);
        auto out = te::compute(
            a.out_shape(),
            [&](const std::vector<Var>& i) { return dims.empty() ? te::int_imm(0) : const_table(i[0], dims); }, "Shape",
            DType::kInt64);
        return std::vector<te::Tensor>{out};
    };
    return d;
}

OpDef size_op() {
    OpDef d;
    d.name = "Size";
    d.onnx_versions = {1, 13, 19, 21, 23};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        for (const auto& dim : x.shape) static_dim(n, dim, "data");
        return std::vector<ir::TensorType>{{DType::kInt64, {}}};
    };
    d.compute = [](const ComputeArgs& a) {
        const int64_t numel = a.in(0)->numel();
        auto out = te::compute({}, [&](const std::vector<Var>&) { return te::int_imm(numel); }, "Size", DType::kInt64);
        return std::vector<te::Tensor>{out};
    };
    return d;
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
    r.add(flatten_op());
    r.add(reshape_op());
    r.add(kiln_reshape_op());
    r.add(transpose_op());
    r.add(concat_op());
    r.add(squeeze_op());
    r.add(unsqueeze_op());
    r.add(shape_op());
    r.add(size_op());
}

}  // namespace kiln::op
