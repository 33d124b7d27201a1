// Windowing ops over constant index specs:
//  - Slice (1/10/11/13): starts/ends/axes/steps are constant inputs (the importer turns Slice-1
//    attributes into them). Per axis (numpy rules): negative starts/ends add the dim; step > 0
//    clamps start and end into [0, dim]; step < 0 clamps start into [0, dim-1] and end into
//    [-1, dim-1]; the count is max(0, ceil((end - start) / step)). out[i] = x[start + i * step].
//  - Split (1/2/11/13/18): sizes from the constant `split` input, else the num_outputs attribute
//    (opset 18: ceil(dim / n) each, the last one smaller), else equal parts over the outputs.
//  - Pad (1/2/11/13/18/19/21/23): constant pads [begins..., ends...] over `axes` (all axes by
//    default); negative pads crop. j = i - pad_begin maps an output index to the input, then
//    constant: x[j] inside, constant_value (a run-time scalar, default 0) outside; edge: clamp;
//    reflect: floormod(j, 2(n-1)) folded back; wrap: floormod(j, n).
//  - Compress (9/11): the bool condition is a constant (value input); the selected positions
//    become a select table (O(selected) per element, fine for the sizes models use); without
//    an axis the input is read as flat.
//  - CenterCropPad (18): per listed axis, target size t from the constant `shape` input; t < dim
//    crops from (dim - t) / 2, t > dim pads with zeros from (t - dim) / 2 (ONNX reference).
// Gradients (op/gradient.h): Slice (below, movement ops only) and Split (a Concat).
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "ir/dim_expr.h"
#include "op/defs/movement_util.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

struct SliceAxis {
    int64_t start = 0, step = 1, count = 0;
};

constexpr int64_t kSymbolicCount = -1;

// Per-axis start/step/count of a Slice node over `shape`.
std::vector<SliceAxis> slice_spec(const ir::Node& n, const std::vector<ir::Dim>& in_shape) {
    const int rank = static_cast<int>(in_shape.size());
    std::vector<int64_t> starts = constant_ints(n, 1, "starts"), ends = constant_ints(n, 2, "ends");
    std::vector<int64_t> axes, steps;
    if (has_input(n, 3)) {
        axes = constant_ints(n, 3, "axes");
    } else {
        for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    steps = has_input(n, 4) ? constant_ints(n, 4, "steps") : std::vector<int64_t>(starts.size(), 1);
    KILN_CHECK(ends.size() == starts.size() && axes.size() == starts.size() && steps.size() == starts.size(),
               kInvalidModel)
        << node_label(n) << ": starts, ends, axes and steps must have the same length, got " << starts.size() << ", "
        << ends.size() << ", " << axes.size() << ", " << steps.size();
    std::vector<SliceAxis> spec(rank);
    std::vector<bool> seen(rank, false);
    // A symbolic dim (symbolic compiles) has count kSymbolicCount: kept whole, or cut from a
    // constant start to its end (x[:, 1:] of [batch, seq, 384]: seq-1, slice_dims).
    for (int i = 0; i < rank; ++i) spec[i].count = in_shape[i].is_static() ? in_shape[i].value : kSymbolicCount;
    for (size_t k = 0; k < starts.size(); ++k) {
        const int ax = normalize_axis(n, axes[k], rank, "axes");
        KILN_CHECK(!seen[ax], kInvalidModel) << node_label(n) << ": axis " << axes[k] << " repeats in axes";
        seen[ax] = true;
        const int64_t dim = spec[ax].count, step = steps[k];
        KILN_CHECK(step != 0, kInvalidModel) << node_label(n) << ": steps must be nonzero (axis " << ax << ")";
        if (dim == kSymbolicCount) {
            KILN_CHECK(step == 1 && starts[k] >= 0 && ends[k] >= std::numeric_limits<int32_t>::max(), kUnsupported)
                << node_label(n) << ": slicing the symbolic axis " << ax << " of " << dims_str(in_shape)
                << " other than from a constant start to its end";
            spec[ax] = {starts[k], 1, kSymbolicCount};
            continue;
        }
        int64_t s = starts[k] < 0 ? starts[k] + dim : starts[k];
        int64_t e = ends[k] < 0 ? ends[k] + dim : ends[k];
        int64_t count;
        if (step > 0) {
            s = std::clamp<int64_t>(s, 0, dim);
            e = std::clamp<int64_t>(e, 0, dim);
            count = e > s ? (e - s + step - 1) / step : 0;
        } else {
            s = std::clamp<int64_t>(s, 0, dim - 1);
            e = std::clamp<int64_t>(e, -1, dim - 1);
            count = s > e ? (s - e + (-step) - 1) / (-step) : 0;
        }
        spec[ax] = {s, step, count};
    }
    return spec;
}

// Slice gradient: dx is zero but at x[start + i * step] = g[i], per axis. Built from movement
// ops only (no scatter): axes with negative steps are reversed first (a Slice with step -1),
// so every step is positive; axes with step s > 1 get s - 1 zeros after each element (reshape
// to [count, 1], Pad to [count, s], reshape to [count * s]); one constant Pad then places the
// run at its lowest index and crops the zeros that overhang the axis (a negative end pad).
std::vector<ir::Value*> slice_gradient(GradientBuilder& b) {
    std::vector<ir::Value*> grads(b.num_inputs(), nullptr);
    const ir::TensorType& xt = b.input(0)->type();
    const Shape dims = xt.static_shape();
    const std::vector<SliceAxis> spec = slice_spec(b.node(), to_dims(dims));
    const int rank = static_cast<int>(dims.size());
    for (const SliceAxis& s : spec)
        if (s.count == 0) {  // an empty slice: x does not reach the output
            grads[0] = b.filled(xt, 0.0);
            return grads;
        }
    ir::Value* g = b.output_grad_or_zeros(0);

    std::vector<int64_t> reversed;
    for (int d = 0; d < rank; ++d)
        if (spec[d].step < 0 && spec[d].count > 1) reversed.push_back(d);
    if (!reversed.empty()) {
        const size_t n = reversed.size();
        g = b.emit1("Slice", {g, b.ints(std::vector<int64_t>(n, -1)),
                              b.ints(std::vector<int64_t>(n, std::numeric_limits<int64_t>::min())), b.ints(reversed),
                              b.ints(std::vector<int64_t>(n, -1))});
    }

    // Spread the strided axes: [.., count, ..] -> [.., count, 1, ..] -> pad -> [.., count * s, ..].
    Shape split, spread;
    std::vector<int64_t> spread_ends;
    bool strided = false;
    for (int d = 0; d < rank; ++d) {
        const int64_t step = std::abs(spec[d].step), count = spec[d].count;
        split.push_back(count);
        spread_ends.push_back(0);
        if (step > 1 && count > 1) {
            strided = true;
            split.push_back(1);
            spread_ends.push_back(step - 1);
            spread.push_back(count * step);
        } else {
            spread.push_back(count);
        }
    }
    if (strided) {
        std::vector<int64_t> pads(spread_ends.size(), 0);
        pads.insert(pads.end(), spread_ends.begin(), spread_ends.end());
        g = b.reshape(b.emit1("Pad", {b.reshape(g, split), b.ints(pads)}), spread);
    }

    std::vector<int64_t> begins, ends;
    bool moved = false;
    for (int d = 0; d < rank; ++d) {
        const SliceAxis& s = spec[d];
        const int64_t lowest = s.step > 0 ? s.start : s.start - (s.count - 1) * -s.step;
        begins.push_back(lowest);
        ends.push_back(dims[d] - lowest - spread[d]);
        moved = moved || begins.back() != 0 || ends.back() != 0;
    }
    if (moved) {
        begins.insert(begins.end(), ends.begin(), ends.end());
        g = b.emit1("Pad", {g, b.ints(begins)});
    }
    grads[0] = g;
    return grads;
}

OpDef slice_op() {
    OpDef d;
    d.name = "Slice";
    d.onnx_versions = {1, 10, 11, 13};
    d.min_inputs = 3;
    d.max_inputs = 5;
    d.value_inputs = {1, 2, 3, 4};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        std::vector<ir::Dim> out;
        const std::vector<SliceAxis> spec = slice_spec(n, x.shape);
        for (size_t k = 0; k < spec.size(); ++k) {
            if (spec[k].count != kSymbolicCount) {
                out.push_back(spec[k].count);
                continue;
            }
            auto p = ir::dim_poly(x.shape[k]);  // the symbolic dim less the start (seq-1)
            auto d = p ? ir::dim_of_poly(*p - DimPoly::constant(spec[k].start)) : std::nullopt;
            KILN_CHECK(d.has_value(), kUnsupported) << node_label(n) << ": unknown dimension " << k << " of "
                                                    << dims_str(x.shape);
            out.push_back(*d);
        }
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        std::vector<SliceAxis> spec = slice_spec(a.node, to_dims(x->shape));
        auto out = te::sym_compute(  // out_dims: static ones give the static stage
            a.out_dims(), [&](const std::vector<Var>& i) {
                std::vector<Expr> idx;
                for (size_t k = 0; k < i.size(); ++k) idx.push_back(Expr(i[k]) * spec[k].step + spec[k].start);
                return te::read(x, idx);
            },
            "Slice", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    d.gradient = slice_gradient;
    return d;
}

std::vector<int64_t> split_sizes(const ir::Node& n, int64_t dim, int axis) {
    const int64_t nout = static_cast<int64_t>(n.num_outputs());
    std::vector<int64_t> sizes;
    if (has_input(n, 1)) {
        sizes = constant_ints(n, 1, "split");
        int64_t total = 0;
        for (int64_t s : sizes) {
            KILN_CHECK(s >= 0, kInvalidModel) << node_label(n) << ": negative split size " << s;
            total += s;
        }
        KILN_CHECK(total == dim && static_cast<int64_t>(sizes.size()) == nout, kInvalidModel)
            << node_label(n) << ": split sizes sum to " << total << " over " << sizes.size() << " parts; axis " << axis
            << " has size " << dim << " and the node has " << nout << " outputs";
        return sizes;
    }
    if (n.has_attr("num_outputs")) {
        const int64_t parts = n.attr_int("num_outputs", nout);
        KILN_CHECK(parts == nout && parts >= 1, kInvalidModel)
            << node_label(n) << ": num_outputs=" << parts << " but the node has " << nout << " outputs";
        const int64_t each = (dim + parts - 1) / parts;
        for (int64_t k = 0; k < parts; ++k) sizes.push_back(std::clamp<int64_t>(dim - k * each, 0, each));
        return sizes;
    }
    KILN_CHECK(dim % nout == 0, kInvalidModel)
        << node_label(n) << ": axis " << axis << " of size " << dim << " does not split evenly into " << nout << " outputs";
    return std::vector<int64_t>(nout, dim / nout);
}

// Split gradient: the outputs' gradients concatenated back (zeros for outputs off the loss path).
std::vector<ir::Value*> split_gradient(GradientBuilder& b) {
    std::vector<ir::Value*> grads(b.num_inputs(), nullptr);
    const int axis = normalize_axis(b.node(), b.node().attr_int("axis", 0), b.input(0)->type().rank());
    std::vector<ir::Value*> parts;
    for (size_t k = 0; k < b.node().num_outputs(); ++k) parts.push_back(b.output_grad_or_zeros(k));
    grads[0] = parts.size() == 1 ? parts[0] : b.emit1("Concat", parts, {{"axis", int64_t{axis}}});
    return grads;
}

OpDef split_op() {
    OpDef d;
    d.name = "Split";
    d.onnx_versions = {1, 2, 11, 13, 18};
    d.min_inputs = 1;
    d.max_inputs = 2;
    d.max_outputs = -1;
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{0})}, {"num_outputs", AttrKind::kInt, std::nullopt}};
    d.value_inputs = {1};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        const int axis = normalize_axis(n, n.attr_int("axis", 0), x.rank());
        std::vector<ir::TensorType> out;
        for (int64_t s : split_sizes(n, static_dim(n, x.shape[axis], "input"), axis)) {
            std::vector<ir::Dim> dims = x.shape;
            dims[axis] = s;
            out.push_back({x.dtype, dims});
        }
        return out;
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", 0), x->ndim());
        std::vector<te::Tensor> outs;
        int64_t off = 0;
        for (size_t k = 0; k < a.output_types.size(); ++k) {
            outs.push_back(te::compute(
                a.out_shape(k), [&](const std::vector<Var>& i) {
                    std::vector<Expr> idx(i.begin(), i.end());
                    idx[axis] = Expr(i[axis]) + off;
                    return te::read(x, idx);
                },
                "Split" + std::to_string(k), a.out_dtype(k)));
            off += a.out_shape(k)[axis];
        }
        return outs;
    };
    d.gradient = split_gradient;
    return d;
}

// Pad begins/ends per input axis.
void pad_spec(const ir::Node& n, int rank, std::vector<int64_t>* begin, std::vector<int64_t>* end) {
    std::vector<int64_t> pads = constant_ints(n, 1, "pads");
    std::vector<int64_t> axes;
    if (has_input(n, 3)) {
        axes = constant_ints(n, 3, "axes");
    } else {
        for (int i = 0; i < rank; ++i) axes.push_back(i);
    }
    KILN_CHECK(pads.size() == 2 * axes.size(), kInvalidModel)
        << node_label(n) << ": pads has " << pads.size() << " entries, expected " << 2 * axes.size();
    begin->assign(rank, 0);
    end->assign(rank, 0);
    for (size_t k = 0; k < axes.size(); ++k) {
        const int ax = normalize_axis(n, axes[k], rank, "axes");
        (*begin)[ax] = pads[k];
        (*end)[ax] = pads[k + axes.size()];
    }
}

OpDef pad_op() {
    OpDef d;
    d.name = "Pad";
    d.onnx_versions = {1, 2, 11, 13, 18, 19, 21, 23};
    d.min_inputs = 2;
    d.max_inputs = 4;
    d.attrs = {{"mode", AttrKind::kString, ir::Attr(std::string("constant"))}};
    d.value_inputs = {1, 3};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        const std::string mode = n.attr_string("mode", "constant");
        KILN_CHECK(mode == "constant" || mode == "reflect" || mode == "edge" || mode == "wrap", kInvalidModel)
            << node_label(n) << ": unknown mode '" << mode << "'";
        if (has_input(n, 2))
            check_same_dtype(n, "data", x.dtype, "constant_value", input_type(n, 2, "constant_value").dtype);
        std::vector<int64_t> b, e;
        pad_spec(n, x.rank(), &b, &e);
        std::vector<ir::Dim> out;
        for (int i = 0; i < x.rank(); ++i) {
            if (!x.shape[i].is_static()) {  // a symbolic compile: the dim expression plus the pads
                auto p = ir::dim_poly(x.shape[i]);
                out.push_back(b[i] + e[i] == 0 ? x.shape[i]
                              : p ? ir::dim_of_poly(*p + DimPoly::constant(b[i] + e[i])).value_or(ir::Dim::sym("?"))
                                  : ir::Dim::sym("?"));
                continue;
            }
            const int64_t dim = static_dim(n, x.shape[i], "data"), o = dim + b[i] + e[i];
            KILN_CHECK(o >= 0, kInvalidModel) << node_label(n) << ": pads crop axis " << i << " below zero";
            KILN_CHECK(mode == "constant" || o == 0 || dim > 0, kInvalidModel)
                << node_label(n) << ": mode " << mode << " cannot pad the empty axis " << i;
            out.push_back(o);
        }
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const std::string mode = a.node.attr_string("mode", "constant");
        std::vector<int64_t> b, e;
        pad_spec(a.node, x->ndim(), &b, &e);
        const std::vector<Expr> xs = x->shape_exprs();
        auto out = te::sym_compute(
            a.out_dims(), [&](const std::vector<Var>& i) {
                std::vector<Expr> idx;
                Expr inside;
                for (size_t k = 0; k < i.size(); ++k) {
                    const int64_t dim = x->shape[k];  // te::kDynamicDim on a symbolic axis
                    const bool sym = dim == te::kDynamicDim;
                    Expr j = Expr(i[k]) - b[k];
                    if (b[k] == 0 && e[k] <= 0) {
                        idx.push_back(j);
                        continue;
                    }
                    const Expr clamped = sym ? te::min(te::max(j, te::int_imm(0)), xs[k] - te::int_imm(1)) : clamp_index(j, dim);
                    if (mode == "constant") {
                        Expr in_k = te::logical_and(j >= te::int_imm(0), j < xs[k]);
                        inside = inside ? te::logical_and(inside, in_k) : in_k;
                        idx.push_back(clamped);
                    } else if (mode == "edge" || dim == 1) {
                        idx.push_back(clamped);
                    } else if (sym) {
                        KILN_THROW(kUnsupported) << node_label(a.node) << ": mode " << mode
                                                 << " along the symbolic axis " << k << " is not compiled symbolically";
                    } else if (mode == "wrap") {
                        idx.push_back(te::floormod(j, te::int_imm(dim)));
                    } else {  // reflect
                        const int64_t period = 2 * (dim - 1);
                        Expr m = te::floormod(j, te::int_imm(period));
                        idx.push_back(te::select(m < te::int_imm(dim), m, te::int_imm(period) - m));
                    }
                }
                Expr v = te::read(x, idx);
                if (!inside) return v;
                Expr cv = a.has_input(2) ? read_scalar(a.in(2)) : te::make_const(te::compute_dtype(x->dtype), 0);
                return te::select(inside, v, cv);
            },
            "Pad", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

// Selected positions of a Compress node (flat or along axis).
std::vector<int64_t> compress_positions(const ir::Node& n, int64_t extent) {
    const ir::Value* c = n.input(1);
    KILN_CHECK(c->is_constant(), kUnsupported)
        << node_label(n) << ": input condition ('" << c->name() << "') must be a constant";
    const Tensor& t = c->constant();
    KILN_CHECK(t.shape().size() == 1, kInvalidModel)
        << node_label(n) << ": condition must be 1-D, got shape " << shape_str(t.shape());
    KILN_CHECK(t.numel() <= extent, kInvalidModel)
        << node_label(n) << ": condition has " << t.numel() << " entries but the axis has " << extent;
    std::vector<int64_t> pos;
    for (int64_t k = 0; k < t.numel(); ++k)
        if (t.get_i64(k) != 0) pos.push_back(k);
    return pos;
}

OpDef compress_op() {
    OpDef d;
    d.name = "Compress";
    d.onnx_versions = {9, 11};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"axis", AttrKind::kInt, std::nullopt}};
    d.value_inputs = {1};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        check_dtype(n, "condition", input_type(n, 1, "condition").dtype, {DType::kBool});
        if (!n.has_attr("axis")) {
            int64_t numel = 1;
            for (const auto& dim : x.shape) numel *= static_dim(n, dim, "input");
            return std::vector<ir::TensorType>{{x.dtype, {static_cast<int64_t>(compress_positions(n, numel).size())}}};
        }
        const int axis = normalize_axis(n, n.attr_int("axis", 0), x.rank());
        std::vector<ir::Dim> out = x.shape;
        out[axis] = static_cast<int64_t>(compress_positions(n, static_dim(n, x.shape[axis], "input")).size());
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const bool flat = !a.node.has_attr("axis");
        const int axis = flat ? 0 : normalize_axis(a.node, a.node.attr_int("axis", 0), x->ndim());
        const std::vector<int64_t> pos = compress_positions(a.node, flat ? x->numel() : x->shape[axis]);
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                Expr p = pos.empty() ? te::int_imm(0) : const_table(i[axis], pos);
                if (!flat) {
                    std::vector<Expr> idx(i.begin(), i.end());
                    idx[axis] = p;
                    return te::read(x, idx);
                }
                std::vector<Expr> idx(x->ndim());
                for (int k = x->ndim(); k-- > 0;) {
                    idx[k] = te::floormod(p, te::int_imm(x->shape[k]));
                    p = te::floordiv(p, te::int_imm(x->shape[k]));
                }
                return te::read(x, idx);
            },
            "Compress", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

// Per input axis: the target size and the input offset of output index 0 (negative: padding).
void center_crop_pad_spec(const ir::Node& n, const std::vector<ir::Dim>& in_shape, std::vector<int64_t>* size,
                          std::vector<int64_t>* offset) {
    const int rank = static_cast<int>(in_shape.size());
    std::vector<int64_t> shape = constant_ints(n, 1, "shape");
    std::vector<int64_t> axes = n.attr_ints("axes");
    if (!n.has_attr("axes"))
        for (int i = 0; i < rank; ++i) axes.push_back(i);
    KILN_CHECK(shape.size() == axes.size(), kInvalidModel)
        << node_label(n) << ": shape has " << shape.size() << " entries for " << axes.size() << " axes";
    size->clear();
    for (int i = 0; i < rank; ++i) size->push_back(static_dim(n, in_shape[i], "input_data"));
    offset->assign(rank, 0);
    for (size_t k = 0; k < axes.size(); ++k) {
        const int ax = normalize_axis(n, axes[k], rank, "axes");
        const int64_t dim = (*size)[ax], t = shape[k];
        KILN_CHECK(t >= 0, kInvalidModel) << node_label(n) << ": negative target size " << t;
        (*offset)[ax] = t < dim ? (dim - t) / 2 : -((t - dim) / 2);
        (*size)[ax] = t;
    }
}

OpDef center_crop_pad_op() {
    OpDef d;
    d.name = "CenterCropPad";
    d.onnx_versions = {18};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"axes", AttrKind::kInts, std::nullopt}};
    d.value_inputs = {1};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input_data");
        std::vector<int64_t> size, offset;
        center_crop_pad_spec(n, x.shape, &size, &offset);
        return std::vector<ir::TensorType>{{x.dtype, to_dims(size)}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        std::vector<int64_t> size, offset;
        center_crop_pad_spec(a.node, to_dims(x->shape), &size, &offset);
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                if (x->numel() == 0) return te::make_const(te::compute_dtype(x->dtype), 0);  // all padding
                std::vector<Expr> idx;
                Expr inside;
                for (size_t k = 0; k < i.size(); ++k) {
                    const int64_t dim = x->shape[k];
                    Expr j = Expr(i[k]) + offset[k];
                    if (offset[k] >= 0 && offset[k] + size[k] <= dim) {  // a pure crop
                        idx.push_back(j);
                        continue;
                    }
                    Expr in_k = te::logical_and(j >= te::int_imm(0), j < te::int_imm(dim));
                    inside = inside ? te::logical_and(inside, in_k) : in_k;
                    idx.push_back(clamp_index(j, dim));
                }
                Expr v = te::read(x, idx);
                return inside ? te::select(inside, v, te::make_const(te::compute_dtype(x->dtype), 0)) : v;
            },
            "CenterCropPad", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

}  // namespace

void register_slice_pad_ops(OpRegistry& r) {
    r.add(slice_op());
    r.add(split_op());
    r.add(pad_op());
    r.add(compress_op());
    r.add(center_crop_pad_op());
}

}  // namespace kiln::op
