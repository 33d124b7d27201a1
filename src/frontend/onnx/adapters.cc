// Opset adapters (TVM's OnnxOpConverter per-version selectors, as one table).
//
// The op layer implements each op's latest form. ONNX changed some ops' *form* over time:
// attributes became inputs (Clip-11 min/max, Reshape-5 shape, Slice-10, Pad-11, Squeeze and
// Unsqueeze-13, ReduceSum-13 and the other reductions-18, Split-13, TopK-10), attributes were
// dropped (consumed_inputs before 6, BatchNormalization spatial/is_test, Gemm broadcast, legacy
// arithmetic broadcast/axis before 7), or semantics changed (Softmax/LogSoftmax/Hardmax before
// 13 coerce the input to 2-D at `axis`). Each row of kAdapters names the op, the opset that
// introduced the canonical form, and a rewrite. A row applies when the model's opset is below
// that version *and* the op layer claims that version (so an op that still implements the old
// form is left alone).
#include "frontend/onnx/adapters.h"

#include <algorithm>
#include <optional>

#include <onnx/onnx_pb.h>

#include "support/error.h"

namespace kiln::frontend {
namespace {

using AdapterFn = void (*)(PendingNode& n, AdapterContext& ctx);

std::string label(const PendingNode& n) { return "node '" + n.name + "' (" + n.op + ")"; }

std::optional<ir::Attr> take_attr(PendingNode& n, const std::string& key) {
    auto it = n.attrs.find(key);
    if (it == n.attrs.end()) return std::nullopt;
    ir::Attr a = std::move(it->second);
    n.attrs.erase(it);
    return a;
}

std::vector<int64_t> as_ints(const PendingNode& n, const std::string& key, const ir::Attr& a) {
    if (auto* v = std::get_if<std::vector<int64_t>>(&a)) return *v;
    if (auto* i = std::get_if<int64_t>(&a)) return {*i};
    KILN_THROW(kInvalidModel) << label(n) << ": attribute '" << key << "' must be ints, got " << ir::attr_kind_name(a);
}

double as_float(const PendingNode& n, const std::string& key, const ir::Attr& a) {
    if (auto* f = std::get_if<double>(&a)) return *f;
    if (auto* i = std::get_if<int64_t>(&a)) return static_cast<double>(*i);
    KILN_THROW(kInvalidModel) << label(n) << ": attribute '" << key << "' must be a float, got " << ir::attr_kind_name(a);
}

std::string hint(const PendingNode& n, const std::string& what) {
    std::string base = !n.name.empty() ? n.name : (!n.output_names.empty() ? n.output_names[0] : n.op);
    return base + "_" + what;
}

ir::Value* ints_constant(AdapterContext& ctx, const std::string& name_hint, const std::vector<int64_t>& v) {
    Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data_as<int64_t>());
    return ctx.graph.add_constant(ctx.fresh_name(name_hint), std::move(t));
}

ir::Value* scalar_constant(AdapterContext& ctx, const std::string& name_hint, DType dt, double v) {
    Tensor t(dt, {});
    t.set_f64(0, v);
    return ctx.graph.add_constant(ctx.fresh_name(name_hint), std::move(t));
}

void set_input(PendingNode& n, size_t i, ir::Value* v) {
    if (n.inputs.size() <= i) n.inputs.resize(i + 1, nullptr);
    n.inputs[i] = v;
}

void trim_inputs(PendingNode& n) {
    while (!n.inputs.empty() && n.inputs.back() == nullptr) n.inputs.pop_back();
}

ir::Value* required_input(const PendingNode& n, size_t i) {
    KILN_CHECK(i < n.inputs.size() && n.inputs[i] != nullptr, kInvalidModel)
        << label(n) << ": input " << i << " is required";
    return n.inputs[i];
}

// Moves an ints attribute into input slot `slot` as an i64 constant (if present).
void ints_attr_to_input(PendingNode& n, AdapterContext& ctx, const std::string& key, size_t slot) {
    if (auto a = take_attr(n, key)) set_input(n, slot, ints_constant(ctx, hint(n, key), as_ints(n, key, *a)));
}

// ---------------------------------------------------------------- the rewrites

// Clip-1/6: min/max attributes -> optional 0-d inputs of the input's dtype (absent = unbounded).
void clip_attrs_to_inputs(PendingNode& n, AdapterContext& ctx) {
    DType dt = required_input(n, 0)->type().dtype;
    if (auto a = take_attr(n, "min")) set_input(n, 1, scalar_constant(ctx, hint(n, "min"), dt, as_float(n, "min", *a)));
    if (auto a = take_attr(n, "max")) set_input(n, 2, scalar_constant(ctx, hint(n, "max"), dt, as_float(n, "max", *a)));
}

// Softmax/LogSoftmax/Hardmax-1/11: the input is coerced to 2-D [prod(:axis), prod(axis:)] and
// normalized along dim 1. When the rank is known and axis is the last dim the coercion changes
// nothing: one op with axis=-1. Otherwise Flatten(axis) -> op(axis=-1) -> Reshape back, to a
// constant shape when the input's is static, else to Shape(x): that form needs neither the rank
// nor the dims at import (Flatten takes a negative axis at any rank), and compile() folds the
// Shape once the session has bound the dims. (paddle2onnx's PP-OCR recogniser feeds its opset-12
// Softmax from a Reshape whose target is computed, so the rank is unknown until then.)
void softmax_coerce_2d(PendingNode& n, AdapterContext& ctx) {
    int64_t axis = 1;
    if (auto a = take_attr(n, "axis")) axis = as_ints(n, "axis", *a).at(0);
    ir::Value* x = required_input(n, 0);
    const bool rank_known = ctx.type_known(x);
    const ir::TensorType& xt = x->type();
    const int rank = xt.rank();
    if (rank_known) {
        KILN_CHECK(axis >= -rank && axis < std::max(rank, 1), kInvalidModel)
            << label(n) << ": axis " << axis << " is out of range for rank " << rank;
        if (axis < 0) axis += rank;
        if (rank == 0 || axis == rank - 1) {
            n.attrs["axis"] = int64_t{-1};
            return;
        }
    }
    PendingNode flat;
    flat.op = "Flatten";
    flat.name = hint(n, "flatten");
    flat.inputs = {x};
    flat.attrs["axis"] = axis;
    flat.output_names = {ctx.fresh_name(hint(n, "2d"))};
    ir::Value* x2d = ctx.emit(std::move(flat))->output(0);

    PendingNode core;
    core.op = n.op;
    core.name = n.name;
    core.inputs = {x2d};
    core.attrs = n.attrs;
    core.attrs["axis"] = int64_t{-1};
    core.output_names = {ctx.fresh_name(hint(n, "y2d"))};
    ir::Value* y2d = ctx.emit(std::move(core))->output(0);

    ir::Value* shape = nullptr;
    if (rank_known && xt.is_static()) {
        shape = ints_constant(ctx, hint(n, "shape"), xt.static_shape());
    } else {
        PendingNode sh;
        sh.op = "Shape";
        sh.name = hint(n, "shape");
        sh.inputs = {x};
        sh.output_names = {ctx.fresh_name(hint(n, "shape"))};
        shape = ctx.emit(std::move(sh))->output(0);
    }
    n.op = "Reshape";
    n.name = hint(n, "unflatten");
    n.attrs.clear();
    n.inputs = {y2d, shape};
}

void reshape_shape_to_input(PendingNode& n, AdapterContext& ctx) { ints_attr_to_input(n, ctx, "shape", 1); }

// BatchNormalization-1/6/7: drop spatial (only spatial=1 is expressible) and is_test. Their
// extra outputs were training statistics with other semantics than today's.
void batchnorm_drop_legacy(PendingNode& n, AdapterContext& ctx) {
    if (auto a = take_attr(n, "spatial")) {
        KILN_CHECK(as_ints(n, "spatial", *a).at(0) != 0, kUnsupported)
            << label(n) << ": spatial=0 (per-activation batch normalization) is not supported";
    }
    take_attr(n, "is_test");
    size_t used = 0;
    for (const auto& o : n.output_names) used += !o.empty();
    KILN_CHECK(used <= 1, kUnsupported)
        << label(n) << ": training-mode outputs of opset " << ctx.opset << " BatchNormalization are not supported";
    n.output_names.resize(1);
    n.output_types.resize(1);
}

// Concat-1: axis was optional with default 1.
void concat_default_axis(PendingNode& n, AdapterContext&) {
    if (!n.attrs.count("axis")) n.attrs["axis"] = int64_t{1};
}

// Gemm-1/6: `broadcast` only allowed what unidirectional broadcasting of C now does.
void gemm_drop_broadcast(PendingNode& n, AdapterContext&) { take_attr(n, "broadcast"); }

// Add/Sub/Mul/Div/Pow-1/6 legacy broadcasting: B aligned at `axis` of A rather than at the end.
// Rewritten to numpy broadcasting by appending 1-dims to B.
void arith_legacy_broadcast(PendingNode& n, AdapterContext& ctx) {
    auto bc = take_attr(n, "broadcast");
    auto ax = take_attr(n, "axis");
    if (!bc || as_ints(n, "broadcast", *bc).at(0) == 0 || !ax) return;
    int64_t axis = as_ints(n, "axis", *ax).at(0);
    ir::Value* a = required_input(n, 0);
    ir::Value* b = required_input(n, 1);
    KILN_CHECK(ctx.type_known(a) && ctx.type_known(b), kUnsupported)
        << label(n) << ": legacy broadcast with axis needs the input ranks";
    const int ra = a->type().rank(), rb = b->type().rank();
    if (axis < 0) axis += ra;
    KILN_CHECK(axis >= 0 && axis + rb <= ra, kInvalidModel)
        << label(n) << ": broadcast axis " << axis << " does not fit B of rank " << rb << " into A of rank " << ra;
    const int64_t trailing = ra - axis - rb;
    if (trailing == 0) return;
    KILN_CHECK(b->type().is_static(), kUnsupported)
        << label(n) << ": legacy broadcast with axis needs B's static shape; got " << b->type().str();
    Shape bs = b->type().static_shape();
    bs.insert(bs.end(), trailing, 1);
    if (b->is_constant()) {
        set_input(n, 1, ctx.graph.add_constant(ctx.fresh_name(hint(n, "b")), b->constant().clone().reshaped(bs)));
        return;
    }
    PendingNode r;
    r.op = "Reshape";
    r.name = hint(n, "align");
    r.inputs = {b, ints_constant(ctx, hint(n, "bshape"), bs)};
    r.output_names = {ctx.fresh_name(hint(n, "b"))};
    r.output_types = {ir::TensorType::of_static(b->type().dtype, bs)};
    set_input(n, 1, ctx.emit(std::move(r))->output(0));
}

void axes_to_input(PendingNode& n, AdapterContext& ctx) { ints_attr_to_input(n, ctx, "axes", 1); }
void split_to_input(PendingNode& n, AdapterContext& ctx) { ints_attr_to_input(n, ctx, "split", 1); }

// Slice-1: starts/ends/axes attributes -> inputs 1..3.
void slice_attrs_to_inputs(PendingNode& n, AdapterContext& ctx) {
    ints_attr_to_input(n, ctx, "starts", 1);
    ints_attr_to_input(n, ctx, "ends", 2);
    ints_attr_to_input(n, ctx, "axes", 3);
}

// Pad-1/2: pads (Pad-1: paddings) and value attributes -> inputs 1 and 2.
void pad_attrs_to_inputs(PendingNode& n, AdapterContext& ctx) {
    if (auto a = take_attr(n, "paddings")) n.attrs["pads"] = *a;
    ints_attr_to_input(n, ctx, "pads", 1);
    if (auto v = take_attr(n, "value"))
        set_input(n, 2, scalar_constant(ctx, hint(n, "value"), required_input(n, 0)->type().dtype, as_float(n, "value", *v)));
}

// TopK-1: k attribute -> 1-element i64 input.
void topk_k_to_input(PendingNode& n, AdapterContext& ctx) { ints_attr_to_input(n, ctx, "k", 1); }

// Dropout-1..10: inference Dropout is identity; ratio/is_test attributes carry no meaning here.
void dropout_drop_attrs(PendingNode& n, AdapterContext&) {
    take_attr(n, "ratio");
    take_attr(n, "is_test");
}

// Cast-1: `to` was a type name string ("FLOAT").
void cast_to_name(PendingNode& n, AdapterContext&) {
    auto it = n.attrs.find("to");
    if (it == n.attrs.end()) return;
    if (auto* s = std::get_if<std::string>(&it->second)) {
        onnx::TensorProto_DataType t;
        KILN_CHECK(onnx::TensorProto_DataType_Parse(*s, &t), kInvalidModel)
            << label(n) << ": unknown type name '" << *s << "' in attribute 'to'";
        it->second = static_cast<int64_t>(t);
    }
}

// DFT-17: `axis` was an attribute (default 1); DFT-20 takes it as input 2 (default -2).
void dft_axis_to_input(PendingNode& n, AdapterContext& ctx) {
    int64_t axis = 1;
    if (auto a = take_attr(n, "axis")) axis = as_ints(n, "axis", *a).at(0);
    set_input(n, 2, ints_constant(ctx, hint(n, "axis"), {axis}));
}

// RoiAlign-10 had no coordinate_transformation_mode and sampled as output_half_pixel does.
void roi_align_legacy_mode(PendingNode& n, AdapterContext&) {
    n.attrs["coordinate_transformation_mode"] = std::string("output_half_pixel");
}

struct AdapterRow {
    const char* op;
    int since;  // the opset that introduced the canonical form
    AdapterFn fn;
};

// keep-sorted
const AdapterRow kAdapters[] = {
    {"Add", 7, arith_legacy_broadcast},
    {"BatchNormalization", 9, batchnorm_drop_legacy},
    {"Cast", 6, cast_to_name},
    {"Clip", 11, clip_attrs_to_inputs},
    {"Concat", 4, concat_default_axis},
    {"DFT", 20, dft_axis_to_input},
    {"Div", 7, arith_legacy_broadcast},
    {"Dropout", 12, dropout_drop_attrs},
    {"Gemm", 7, gemm_drop_broadcast},
    {"Hardmax", 13, softmax_coerce_2d},
    {"LogSoftmax", 13, softmax_coerce_2d},
    {"Mul", 7, arith_legacy_broadcast},
    {"Pad", 11, pad_attrs_to_inputs},
    {"Pow", 7, arith_legacy_broadcast},
    {"ReduceL1", 18, axes_to_input},
    {"ReduceL2", 18, axes_to_input},
    {"ReduceLogSum", 18, axes_to_input},
    {"ReduceLogSumExp", 18, axes_to_input},
    {"ReduceMax", 18, axes_to_input},
    {"ReduceMean", 18, axes_to_input},
    {"ReduceMin", 18, axes_to_input},
    {"ReduceProd", 18, axes_to_input},
    {"ReduceSum", 13, axes_to_input},
    {"ReduceSumSquare", 18, axes_to_input},
    {"RoiAlign", 16, roi_align_legacy_mode},
    {"Reshape", 5, reshape_shape_to_input},
    {"Slice", 10, slice_attrs_to_inputs},
    {"Softmax", 13, softmax_coerce_2d},
    {"Split", 13, split_to_input},
    {"Squeeze", 13, axes_to_input},
    {"Sub", 7, arith_legacy_broadcast},
    {"TopK", 10, topk_k_to_input},
    {"Unsqueeze", 13, axes_to_input},
};

}  // namespace

void adapt_node(PendingNode& n, const op::OpDef& def, AdapterContext& ctx) {
    // consumed_inputs (opset < 6) described in-place buffer reuse; it never affected results.
    if (ctx.opset < 7) n.attrs.erase("consumed_inputs");
    const int latest = def.onnx_versions.empty() ? 0 : def.onnx_versions.back();
    for (const AdapterRow& row : kAdapters) {
        if (n.op != row.op || ctx.opset >= row.since || latest < row.since) continue;
        row.fn(n, ctx);
        break;  // one row per op
    }
    trim_inputs(n);
}

}  // namespace kiln::frontend
