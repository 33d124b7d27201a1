// Data-movement ops whose output element reads one input element at computed indices:
//  - Expand (opset 8/13): numpy broadcast of the input against the constant `shape` input;
//  - Tile (6/13): out[i] = x[i mod x.shape] with out.shape = x.shape * repeats (constant);
//  - DepthToSpace (1/11/13), mode DCR (default) or CRD, and SpaceToDepth (1/13), NCHW:
//      DCR: out[n, c, y, x] = in[n, ((y % b) * b + x % b) * C' + c, y / b, x / b]
//      CRD: out[n, c, y, x] = in[n, c * b * b + (y % b) * b + x % b, y / b, x / b]
//      SpaceToDepth: out[n, (i * b + j) * C + c, h, w] = in[n, c, h * b + i, w * b + j];
//  - Trilu (14): keeps x where j - i >= k (upper) or j - i <= k (lower), else 0; k is read at
//    run time from the optional scalar input;
//  - ReverseSequence (10): along time_axis, the first seq_lens[b] elements of batch b are
//    reversed (lengths read at run time, clamped into [0, T]);
//  - Dropout: inference (or ratio 0): identity, optional mask output all true. Training
//    (training_mode, a value input, true): keep = hash(seed, element index) >= ratio * 2^32,
//    y = keep ? x / (1 - ratio) : 0, mask = keep. The mask is a pure function of the seed (the
//    `seed` attribute, else a hash of the node name) and the index: the same every run, so a
//    training step reproduces it (the gradient reads it) but it does not change between steps.
#include <string>

#include "ir/dim_expr.h"
#include "op/broadcast.h"
#include "op/defs/movement_util.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "op/schedule_util.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

OpDef expand_op() {
    OpDef d;
    d.name = "Expand";
    d.onnx_versions = {8, 13};
    d.min_inputs = d.max_inputs = 2;
    d.value_inputs = {1};
    d.pattern = OpPattern::kBroadcast;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        std::vector<int64_t> shape = constant_ints(n, 1, "shape");
        for (int64_t s : shape)
            KILN_CHECK(s >= 0, kInvalidModel) << node_label(n) << ": negative dimension " << s << " in shape";
        return std::vector<ir::TensorType>{{x.dtype, broadcast_shapes(n, {x.shape, to_dims(shape)})}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        // out_dims: a symbolic compile's dims (static ones give the static stage).
        auto out = te::sym_compute(
            a.out_dims(), [&](const std::vector<Var>& i) { return broadcast_read(x, i); }, "Expand", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    // Gradient: the output gradient summed over the broadcast axes; the shape input has none.
    d.gradient = [](GradientBuilder& b) {
        return std::vector<ir::Value*>{b.reduce_to_shape(b.output_grad_or_zeros(0), b.input(0)->type()), nullptr};
    };
    return d;
}

// KilnExpand (internal; symbolic compiles, compiler::fold_shape_values): Expand to dims given as
// text (`batch`, `seq`, `384`), for a target no constant can say (a 1 stretched to a symbolic
// dim: `buffer[:, :seq].expand(batch, seq)`, ConstantOfShape(Shape(ids))).
OpDef kiln_expand_op() {
    OpDef d;
    d.name = "KilnExpand";
    d.internal = true;
    d.min_inputs = d.max_inputs = 1;
    d.attrs = {{"dims", AttrKind::kStrings, std::nullopt, true}};
    d.pattern = OpPattern::kBroadcast;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        std::vector<ir::Dim> dims;
        for (const std::string& t : std::get<std::vector<std::string>>(n.attrs().at("dims"))) {
            auto p = DimPoly::parse(t);
            auto dim = p ? ir::dim_of_poly(*p) : std::nullopt;
            KILN_CHECK(dim.has_value(), kInvalidModel) << node_label(n) << ": '" << t << "' is no dimension";
            dims.push_back(*dim);
        }
        return std::vector<ir::TensorType>{{x.dtype, broadcast_shapes(n, {x.shape, dims})}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        return std::vector<te::Tensor>{te::sym_compute(
            a.out_dims(), [&](const std::vector<Var>& i) { return broadcast_read(x, i); }, "KilnExpand",
            a.out_dtype())};
    };
    return d;
}

// Tile as a strided copy: the leading axes that are not tiled fused into the parallel loop, the
// tiled ones serial loops inside it (a loop of known range: floormod(i, x) of a parallel chunk's
// index made GCC pick a scalar loop), the last axis split at the input's last extent w so that
// the inner loop copies one input row (floormod(o * w + i, w) folds to i: unit stride,
// vectorized). Fused flat by the default schedule, every lane divided its index and gathered
// (10x ORT on [1,64,28,28] x [1,1,2,2]).
void tile_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (te::Stage& st : s.stages()) {
        const te::Tensor& t = st.tensor();
        const int nd = t->ndim();
        if (t->name != "Tile" || st.is_inlined() || !stage_untouched(st) || nd < 2 || t->inputs().empty()) continue;
        const Shape xs = t->inputs()[0]->shape;
        int lead = 0;
        while (lead < nd - 1 && xs[lead] == t->shape[lead]) ++lead;
        te::IterVar f = lead > 0 ? fuse_leading(st, lead) : st.axis(0);
        const int64_t w = xs.back();
        if (w != t->shape.back() && w >= 4) {
            auto [o, i] = st.split(st.axis(nd - 1), w);
            st.vectorize(i);
        } else if (t->shape.back() > 1) {
            st.vectorize(st.axis(nd - 1));
        }
        if (t->numel() > kParallelMin && f->extent > 1) st.parallel(f);
    }
    default_schedule(s, outputs);
}

OpDef tile_op() {
    OpDef d;
    d.name = "Tile";
    d.onnx_versions = {6, 13};
    d.min_inputs = d.max_inputs = 2;
    d.value_inputs = {1};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        std::vector<int64_t> rep = constant_ints(n, 1, "repeats");
        KILN_CHECK(static_cast<int>(rep.size()) == x.rank(), kInvalidModel)
            << node_label(n) << ": repeats has " << rep.size() << " entries but the input has rank " << x.rank();
        std::vector<ir::Dim> out;
        for (int i = 0; i < x.rank(); ++i) {
            KILN_CHECK(rep[i] >= 0, kInvalidModel) << node_label(n) << ": negative repeat " << rep[i];
            out.push_back(static_dim(n, x.shape[i], "input") * rep[i]);
        }
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                std::vector<Expr> idx;
                for (size_t k = 0; k < i.size(); ++k)
                    idx.push_back(x->shape[k] == 1 ? te::int_imm(0) : te::floormod(i[k], te::int_imm(x->shape[k])));
                return te::read(x, idx);
            },
            "Tile", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    d.schedule = tile_schedule;
    return d;
}

// SpaceToDepth's output channel o1 = (i * b + j) * C + c reads input row h * b + i, columns
// w * b + j. Loops (n, i, c, h) parallel, w vectorized, j unrolled inside it: the b outputs of
// one input row take its interleaved columns from the same contiguous loads (GCC's grouped
// accesses, vector permutes). Fused flat, each output row was a gather of stride b
// ([1, 64, 112, 112] by 2: 1.41x ONNX Runtime at one thread).
void space_to_depth_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (te::Stage& st : s.stages()) {
        const te::Tensor& t = st.tensor();
        if (t->name != "SpaceToDepth" || st.is_inlined() || !stage_untouched(st) || !t->is_static() ||
            t->inputs().empty())
            continue;
        const int64_t c = t->inputs()[0]->shape[1], bb = t->shape[1] / c;
        int64_t b = 1;
        while (b * b < bb) ++b;
        if (b * b != bb || b > 4 || t->shape[3] < vector_width(t->dtype)) continue;
        auto [blk, ci] = st.split(st.axis(1), c);
        auto [bi, bj] = st.split(blk, b);
        st.reorder({st.axis(0), bi, ci, st.axis(2), st.axis(3), bj});
        te::IterVar outer = st.fuse(st.fuse(st.fuse(st.axis(0), bi), ci), st.axis(2));
        st.vectorize(st.axis(3));
        st.unroll(bj);
        if (t->numel() > kParallelMin) st.parallel(outer);
    }
    default_schedule(s, outputs);
}

// DepthToSpace (to_space) / SpaceToDepth: 4-D NCHW, blocksize b.
OpDef space_depth_op(bool to_space) {
    OpDef d;
    d.name = to_space ? "DepthToSpace" : "SpaceToDepth";
    d.onnx_versions = to_space ? std::vector<int>{1, 11, 13} : std::vector<int>{1, 13};
    d.attrs = {{"blocksize", AttrKind::kInt, std::nullopt, /*required=*/true}};
    if (to_space) d.attrs.push_back({"mode", AttrKind::kString, ir::Attr(std::string("DCR"))});
    d.pattern = OpPattern::kInjective;
    d.infer = [to_space](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        check_rank(n, "input", x.rank(), 4);
        const int64_t b = n.attr_int("blocksize", 1);
        KILN_CHECK(b >= 1, kInvalidModel) << node_label(n) << ": blocksize must be >= 1, got " << b;
        if (to_space) {
            const std::string mode = n.attr_string("mode", "DCR");
            KILN_CHECK(mode == "DCR" || mode == "CRD", kInvalidModel)
                << node_label(n) << ": mode must be DCR or CRD, got '" << mode << "'";
        }
        int64_t dims[4];
        for (int i = 0; i < 4; ++i) dims[i] = static_dim(n, x.shape[i], "input");
        if (to_space) {
            KILN_CHECK(dims[1] % (b * b) == 0, kInvalidModel)
                << node_label(n) << ": channels " << dims[1] << " are not divisible by blocksize^2 = " << b * b;
            return std::vector<ir::TensorType>{{x.dtype, {dims[0], dims[1] / (b * b), dims[2] * b, dims[3] * b}}};
        }
        KILN_CHECK(dims[2] % b == 0 && dims[3] % b == 0, kInvalidModel)
            << node_label(n) << ": spatial dims " << dims_str(x.shape) << " are not divisible by blocksize " << b;
        return std::vector<ir::TensorType>{{x.dtype, {dims[0], dims[1] * b * b, dims[2] / b, dims[3] / b}}};
    };
    d.compute = [to_space](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const int64_t b = a.node.attr_int("blocksize", 1);
        const bool crd = to_space && a.node.attr_string("mode", "DCR") == "CRD";
        const Shape os = a.out_shape();
        auto bi = [b](const Expr& e) { return te::floordiv(e, te::int_imm(b)); };
        auto bm = [b](const Expr& e) { return te::floormod(e, te::int_imm(b)); };
        auto out = te::compute(
            os, [&](const std::vector<Var>& o) {
                if (to_space) {
                    Expr off = bm(o[2]) * b + bm(o[3]);
                    Expr c = crd ? Expr(o[1]) * (b * b) + off : off * os[1] + Expr(o[1]);
                    return te::read(x, {o[0], c, bi(o[2]), bi(o[3])});
                }
                const int64_t C = x->shape[1];
                Expr blk = te::floordiv(o[1], te::int_imm(C));  // i * b + j
                Expr c = te::floormod(o[1], te::int_imm(C));
                return te::read(x, {o[0], c, Expr(o[2]) * b + bi(blk), Expr(o[3]) * b + bm(blk)});
            },
            to_space ? "DepthToSpace" : "SpaceToDepth", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    if (!to_space) d.schedule = space_to_depth_schedule;
    return d;
}

OpDef trilu_op() {
    OpDef d;
    d.name = "Trilu";
    d.onnx_versions = {14};
    d.min_inputs = 1;
    d.max_inputs = 2;
    d.attrs = {{"upper", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        KILN_CHECK(x.rank() >= 2, kInvalidModel) << node_label(n) << ": input must have rank >= 2, got " << x.rank();
        if (has_input(n, 1)) {
            const auto& k = input_type(n, 1, "k");
            check_dtype(n, "k", k.dtype, {DType::kInt64});
            KILN_CHECK(k.rank() == 0 || (k.rank() == 1 && k.shape[0] == ir::Dim(int64_t{1})), kInvalidModel)
                << node_label(n) << ": k must be a scalar, got shape " << dims_str(k.shape);
        }
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const bool upper = a.node.attr_int("upper", 1) != 0;
        const int r = x->ndim();
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                Expr k = a.has_input(1) ? read_scalar(a.in(1)) : te::int_imm(0);
                Expr diff = Expr(i[r - 1]) - Expr(i[r - 2]);
                Expr keep = upper ? diff >= k : diff <= k;
                return te::select(keep, te::read(x, i), te::make_const(te::compute_dtype(x->dtype), 0));
            },
            "Trilu", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

OpDef reverse_sequence_op() {
    OpDef d;
    d.name = "ReverseSequence";
    d.onnx_versions = {10};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"batch_axis", AttrKind::kInt, ir::Attr(int64_t{1})}, {"time_axis", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        const auto& lens = input_type(n, 1, "sequence_lens");
        check_dtype(n, "sequence_lens", lens.dtype, {DType::kInt64});
        KILN_CHECK(x.rank() >= 2, kInvalidModel) << node_label(n) << ": input must have rank >= 2, got " << x.rank();
        int b = normalize_axis(n, n.attr_int("batch_axis", 1), x.rank(), "batch_axis");
        int t = normalize_axis(n, n.attr_int("time_axis", 0), x.rank(), "time_axis");
        KILN_CHECK(b != t && b <= 1 && t <= 1, kInvalidModel)
            << node_label(n) << ": batch_axis and time_axis must be 0 and 1 in some order, got " << b << " and " << t;
        check_rank(n, "sequence_lens", lens.rank(), 1);
        KILN_CHECK(lens.shape[0] == x.shape[b], kInvalidModel)
            << node_label(n) << ": sequence_lens has shape " << dims_str(lens.shape) << " but the batch dim is "
            << dims_str({x.shape[b]});
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0), lens = a.in(1);
        const int b = normalize_axis(a.node, a.node.attr_int("batch_axis", 1), x->ndim(), "batch_axis");
        const int t = normalize_axis(a.node, a.node.attr_int("time_axis", 0), x->ndim(), "time_axis");
        const int64_t T = x->shape[t];
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                Expr len = te::min(te::max(te::read(lens, {Expr(i[b])}), te::int_imm(0)), te::int_imm(T));
                std::vector<Expr> idx(i.begin(), i.end());
                idx[t] = te::select(Expr(i[t]) < len, len - 1 - Expr(i[t]), Expr(i[t]));
                idx[t] = clamp_index(idx[t], T);
                return te::read(x, idx);
            },
            "ReverseSequence", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

double dropout_ratio(const ir::Node& n) {
    const double r = has_input(n, 1) ? constant_scalar(n, 1, "ratio").get_f64(0) : 0.5;
    KILN_CHECK(r >= 0.0 && r < 1.0, kInvalidModel) << node_label(n) << ": ratio must be in [0, 1), got " << r;
    return r;
}

// True when Dropout runs in training mode with a nonzero ratio (random output).
bool dropout_is_random(const ir::Node& n) {
    if (!has_input(n, 2)) return false;
    if (constant_scalar(n, 2, "training_mode").get_i64(0) == 0) return false;
    return dropout_ratio(n) != 0.0;
}

// The mask's seed: the `seed` attribute, else a hash (FNV-1a) of the node's name, so that two
// unseeded Dropouts draw different masks. 32 bits.
int64_t dropout_seed(const ir::Node& n) {
    if (n.has_attr("seed")) return n.attr_int("seed", 0) & 0xffffffffLL;
    uint32_t h = 2166136261u;
    for (unsigned char ch : n.name()) h = (h ^ ch) * 16777619u;
    return h;
}

// A 32-bit integer mix of v < 2^32 (two xor-shift-multiply rounds; the 27-bit multiplier keeps
// every product below 2^63, so the int64 arithmetic never overflows).
Expr mix32(Expr v) {
    const Expr mask = te::int_imm(0xffffffffLL), sh = te::int_imm(16), mul = te::int_imm(0x45d9f3b);
    for (int round = 0; round < 2; ++round)
        v = te::binary(te::BinaryOp::kBitAnd, te::binary(te::BinaryOp::kBitXor, te::binary(te::BinaryOp::kShr, v, sh), v) * mul,
                       mask);
    return te::binary(te::BinaryOp::kBitXor, te::binary(te::BinaryOp::kShr, v, sh), v);
}

// Dropout's gradient: dY where the mask kept the element, scaled by 1 / (1 - ratio); dY itself
// when the node is not random. The mask is a pure function of (seed, element index), so a
// second Dropout with the forward's inputs and seed reproduces it when the node has no mask
// output.
std::vector<ir::Value*> dropout_gradient(GradientBuilder& b) {
    std::vector<ir::Value*> grads(b.num_inputs(), nullptr);
    ir::Value* dy = b.output_grad(0);
    if (!dy || !b.needs_grad(0)) return grads;
    const ir::Node& n = b.node();
    if (!dropout_is_random(n)) {
        grads[0] = dy;
        return grads;
    }
    ir::Value* mask = nullptr;
    if (n.num_outputs() > 1) {
        mask = b.output(1);
    } else {
        ir::AttrMap attrs = n.attrs();
        attrs["seed"] = dropout_seed(n);
        std::vector<ir::Value*> in(n.inputs().begin(), n.inputs().end());
        mask = b.emit("Dropout", in, attrs, 2).at(1);
    }
    const DType dt = dy->type().dtype;
    ir::Value* scaled = b.emit1("Mul", {dy, b.scalar(1.0 / (1.0 - dropout_ratio(n)), dt)});
    grads[0] = b.emit1("Where", {mask, scaled, b.scalar(0.0, dt)});
    return grads;
}

OpDef dropout_op() {
    OpDef d;
    d.name = "Dropout";
    d.onnx_versions = {1, 6, 7, 10, 12, 13, 22};
    d.min_inputs = 1;
    d.max_inputs = 3;
    d.max_outputs = 2;
    d.attrs = {{"seed", AttrKind::kInt, std::nullopt}};
    d.value_inputs = {1, 2};
    d.pattern = OpPattern::kElemWise;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        check_dtype(n, "data", x.dtype, float_types());
        dropout_ratio(n);
        std::vector<ir::TensorType> out{x};
        if (n.num_outputs() > 1) out.push_back({DType::kBool, x.shape});
        return out;
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const bool random = dropout_is_random(a.node);
        const double ratio = random ? dropout_ratio(a.node) : 0.0;
        const int64_t seed = dropout_seed(a.node);
        // keep = hash(seed, flat index) >= ratio * 2^32: each element kept with probability 1 - ratio.
        const int64_t threshold = static_cast<int64_t>(ratio * 4294967296.0);
        auto keep = [&](const std::vector<Var>& i) {
            Expr flat = te::int_imm(0);
            for (size_t k = 0; k < i.size(); ++k) flat = flat * x->shape[k] + Expr(i[k]);
            Expr lo = te::binary(te::BinaryOp::kBitAnd, flat, te::int_imm(0xffffffffLL));
            return mix32(te::binary(te::BinaryOp::kBitXor, lo, mix32(te::int_imm(seed) + te::binary(te::BinaryOp::kShr, flat, te::int_imm(32))))) >=
                   te::int_imm(threshold);
        };
        const DType cdt = te::compute_dtype(a.out_dtype());
        std::vector<te::Tensor> outs{te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                if (!random) return te::read(x, i);
                Expr v = te::cast(cdt, te::read(x, i)) * te::make_const(cdt, 1.0 / (1.0 - ratio));
                return te::select(keep(i), v, te::make_const(cdt, 0));
            },
            "Dropout", a.out_dtype())};
        if (a.output_types.size() > 1)
            outs.push_back(te::compute(
                a.out_shape(1), [&](const std::vector<Var>& i) { return random ? keep(i) : te::int_imm(1, DType::kBool); },
                "DropoutMask", DType::kBool));
        return outs;
    };
    d.gradient = dropout_gradient;
    return d;
}

}  // namespace

void register_movement_ops(OpRegistry& r) {
    r.add(expand_op());
    r.add(kiln_expand_op());
    r.add(tile_op());
    r.add(space_depth_op(true));
    r.add(space_depth_op(false));
    r.add(trilu_op());
    r.add(reverse_sequence_op());
    r.add(dropout_op());
}

}  // namespace kiln::op
