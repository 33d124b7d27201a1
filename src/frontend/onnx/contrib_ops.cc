// ONNX Runtime contrib ops -> standard ops (see contrib_ops.h).
//
// ORT's graph optimizer (ORT_ENABLE_EXTENDED) and onnxruntime.transformers.optimizer replace
// subgraphs of standard ops by fused com.microsoft ops. Each is a fusion of standard ops, so the
// importer writes back the ops it stands for (semantics from ORT's contrib op schemas,
// bert_defs.cc / contrib_defs.cc) and Kiln's own fusion pass makes kernels of them again:
//   FusedMatMul(A, B)          alpha * op(A) @ op(B), op = swap of the last two dims if trans*
//   Gelu / BiasGelu / FastGelu Gelu(x [+ bias]), erf form; FastGelu the tanh form (as x sigmoid(2z))
//   QuickGelu(x)               x * Sigmoid(alpha x)
//   BiasAdd(x, bias, skip)     x + bias + skip
//   SkipLayerNormalization     LayerNormalization(input + skip [+ bias]) (+ that sum as output 3)
//   LayerNormalization         (ai.onnx before opset 17: ORT's own) the opset-17 op
//   SimplifiedLayerNormalization (ai.onnx, ORT's RMS norm) RMSNormalization;
//   SkipSimplifiedLayerNormalization RMSNormalization(input + skip [+ bias]) (+ the sum)
//   EmbedLayerNormalization    LayerNormalization(word[ids] + position[pos] [+ segment[seg]]),
//                              mask_index = number of 1s in each mask row
//   Attention                  X @ W + bias split into Q, K, V; per head softmax(Q K^T scale + mask) V
//                              with an additive mask built from mask_index / attention_bias;
//                              past (2, B, heads, P, d) goes in front of K, V; present = both
//   MultiHeadAttention         (3-D query/key/value) [+ bias] -> the same attention
//   RotaryEmbedding            (3-D input) ONNX RotaryEmbedding, a position offset expanded to ids
//   MatMulNBits                MatMul(A, W) [+ bias], W dequantized at import (matmul_nbits.h)
// A form outside these (rotary Attention, packed MHA inputs, MHA cache, ...) is kUnsupported.
#include "frontend/onnx/contrib_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "frontend/onnx/matmul_nbits.h"
#include "support/error.h"

namespace kiln::frontend {
namespace {

std::string label(const PendingNode& n) { return "node '" + n.name + "' (" + n.op + ")"; }

// The rank of v when import-time inference could not type it (a Shape over a symbolic dim leaves
// the Reshapes after it untyped, as in ORT's extended-level GPT-2), from the ops that produced it:
// only ops whose output rank follows from their inputs' ranks and attributes. -1 if unknown.
int walked_rank(const AdapterContext& ctx, const ir::Value* v, int depth = 0);

// Length of a 1-D integer value (a shape being built), -1 if unknown.
int64_t walked_length(const AdapterContext& ctx, const ir::Value* v, int depth) {
    if (!v || depth > 32) return -1;
    if (ctx.type_known(v)) {
        const ir::TensorType& t = v->type();
        return t.rank() == 1 && t.shape[0].is_static() ? t.shape[0].value : -1;
    }
    const ir::Node* p = v->producer();
    if (!p) return -1;
    if (p->op() == "Unsqueeze" && walked_rank(ctx, p->input(0), depth + 1) == 0) return 1;
    if (p->op() != "Concat") return -1;
    int64_t n = 0;
    for (size_t i = 0; i < p->num_inputs(); ++i) {
        const int64_t l = walked_length(ctx, p->input(i), depth + 1);
        if (l < 0) return -1;
        n += l;
    }
    return n;
}

int64_t constant_numel(const ir::Value* v) { return v && v->is_constant() ? v->constant().numel() : -1; }

int walked_rank(const AdapterContext& ctx, const ir::Value* v, int depth) {
    if (!v || depth > 32) return -1;
    if (ctx.type_known(v)) return v->type().rank();
    const ir::Node* p = v->producer();
    if (!p) return -1;
    const std::string& op = p->op();
    auto in = [&](size_t i) { return walked_rank(ctx, p->input(i), depth + 1); };
    if (op == "Transpose" && p->has_attr("perm"))
        return static_cast<int>(std::get<std::vector<int64_t>>(p->attrs().at("perm")).size());
    if (op == "Reshape") return static_cast<int>(walked_length(ctx, p->input(1), depth + 1));
    if (op == "Squeeze" || op == "Unsqueeze") {
        const int r = in(0);
        const int64_t k = constant_numel(p->input(1));
        if (r < 0 || k < 0) return -1;
        return op == "Squeeze" ? r - static_cast<int>(k) : r + static_cast<int>(k);
    }
    if (op == "Gather") {
        const int r = in(0), ri = in(1);
        return r < 0 || ri < 0 ? -1 : r - 1 + ri;
    }
    static const std::set<std::string> same_as_input0 = {"Split", "Cast", "Identity", "Softmax", "Gelu", "Erf",
                                                         "Tanh", "Sigmoid", "Relu", "Neg", "Sqrt", "Slice",
                                                         "LayerNormalization"};
    if (same_as_input0.count(op)) return in(0);
    static const std::set<std::string> broadcast = {"Add", "Sub", "Mul", "Div", "Pow", "Where", "MatMul", "Concat"};
    if (!broadcast.count(op)) return -1;
    int r = -1;  // the largest input rank; Concat needs one, the others all
    for (size_t i = 0; i < p->num_inputs(); ++i) {
        const int ri = in(i);
        if (ri < 0 && op != "Concat") return -1;
        r = std::max(r, ri);
    }
    return r;
}

// Emits standard ops on behalf of one contrib node, naming helpers after it.
class Expander {
public:
    Expander(const PendingNode& n, AdapterContext& ctx) : n_(n), ctx_(ctx) {}

    const PendingNode& node() const { return n_; }

    // Attributes outside `known` are kUnsupported (never silently ignored).
    void allow_attrs(std::initializer_list<const char*> known) const {
        std::set<std::string> ok(known.begin(), known.end());
        for (const auto& [k, v] : n_.attrs)
            KILN_CHECK(ok.count(k), kUnsupported) << label(n_) << ": attribute '" << k << "' is not supported";
    }
    int64_t attr_int(const std::string& key, int64_t dflt) const {
        auto it = n_.attrs.find(key);
        if (it == n_.attrs.end()) return dflt;
        if (auto* i = std::get_if<int64_t>(&it->second)) return *i;
        KILN_THROW(kInvalidModel) << label(n_) << ": attribute '" << key << "' must be an int, got "
                                  << ir::attr_kind_name(it->second);
    }
    double attr_float(const std::string& key, double dflt) const {
        auto it = n_.attrs.find(key);
        if (it == n_.attrs.end()) return dflt;
        if (auto* f = std::get_if<double>(&it->second)) return *f;
        if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
        KILN_THROW(kInvalidModel) << label(n_) << ": attribute '" << key << "' must be a float, got "
                                  << ir::attr_kind_name(it->second);
    }
    std::vector<int64_t> attr_ints(const std::string& key) const {
        auto it = n_.attrs.find(key);
        if (it == n_.attrs.end()) return {};
        if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
        KILN_THROW(kInvalidModel) << label(n_) << ": attribute '" << key << "' must be ints";
    }

    ir::Value* in(size_t i) const { return i < n_.inputs.size() ? n_.inputs[i] : nullptr; }
    ir::Value* required(size_t i, const char* what) const {
        KILN_CHECK(in(i) != nullptr, kInvalidModel) << label(n_) << ": input " << i << " (" << what << ") is required";
        return in(i);
    }
    void refuse_inputs_from(size_t first, const char* what) const {
        for (size_t i = first; i < n_.inputs.size(); ++i)
            KILN_CHECK(n_.inputs[i] == nullptr, kUnsupported)
                << label(n_) << ": input " << i << " (" << what << ") is not supported";
    }
    // The model's name of output i, "" when absent or unused.
    std::string out(size_t i) const { return i < n_.output_names.size() ? n_.output_names[i] : ""; }
    void refuse_outputs_from(size_t first, const char* what) const {
        for (size_t i = first; i < n_.output_names.size(); ++i)
            KILN_CHECK(n_.output_names[i].empty(), kUnsupported)
                << label(n_) << ": output " << i << " (" << what << ") is not supported";
    }
    int rank_of(ir::Value* v, const char* what) const {
        const int r = walked_rank(ctx_, v);
        KILN_CHECK(r >= 0, kUnsupported) << label(n_) << ": the rank of " << what << " must be known at import";
        return r;
    }
    // Dim `axis` of v when inference knows it statically, else -1.
    int64_t static_dim(ir::Value* v, int axis) const {
        if (!v || !ctx_.type_known(v)) return -1;
        const ir::TensorType& t = v->type();
        return axis < t.rank() && t.shape[axis].is_static() ? t.shape[axis].value : -1;
    }

    // Emits one node; `outs` are output names ("" = a fresh name). Returns the node.
    ir::Node* emit(const std::string& op, std::vector<ir::Value*> ins, ir::AttrMap attrs = {},
                   std::vector<std::string> outs = {""}) {
        PendingNode p;
        p.op = op;
        p.name = (n_.name.empty() ? n_.op : n_.name) + "_" + op + std::to_string(count_++);
        p.inputs = std::move(ins);
        while (!p.inputs.empty() && p.inputs.back() == nullptr) p.inputs.pop_back();
        p.attrs = std::move(attrs);
        for (std::string& o : outs)
            if (o.empty()) o = ctx_.fresh_name(p.name);
        p.output_names = std::move(outs);
        return ctx_.emit(std::move(p));
    }
    ir::Value* emit1(const std::string& op, std::vector<ir::Value*> ins, ir::AttrMap attrs = {},
                     const std::string& out = "") {
        return emit(op, std::move(ins), std::move(attrs), {out})->output(0);
    }

    ir::Value* scalar(DType dt, double v) {
        Tensor t(dt, {});
        t.set_f64(0, v);
        return ctx_.graph.add_constant(ctx_.fresh_name(n_.op + "_c"), std::move(t));
    }
    ir::Value* constant(Tensor t) { return ctx_.graph.add_constant(ctx_.fresh_name(n_.op + "_w"), std::move(t)); }
    ir::Value* ints(const std::vector<int64_t>& v) {
        Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
        std::copy(v.begin(), v.end(), t.data_as<int64_t>());
        return ctx_.graph.add_constant(ctx_.fresh_name(n_.op + "_ints"), std::move(t));
    }

    // a + b (nullptr-tolerant: a missing operand is skipped).
    ir::Value* add(ir::Value* a, ir::Value* b, const std::string& out = "") {
        if (!b) return out.empty() ? a : emit1("Identity", {a}, {}, out);
        return emit1("Add", {a, b}, {}, out);
    }
    // dims [from, to) of v's shape as an i64 vector (Shape with start/end).
    ir::Value* shape_slice(ir::Value* v, int64_t from, int64_t to) {
        return emit1("Shape", {v}, {{"start", from}, {"end", to}});
    }

private:
    const PendingNode& n_;
    AdapterContext& ctx_;
    int count_ = 0;
};

// ---------------------------------------------------------------- elementwise fusions

// Transposes the last two dims of v (a no-op below rank 2).
ir::Value* swap_last_two(Expander& e, ir::Value* v, const char* what) {
    const int r = e.rank_of(v, what);
    if (r < 2) return v;
    std::vector<int64_t> perm(r);
    for (int i = 0; i < r; ++i) perm[i] = i;
    std::swap(perm[r - 1], perm[r - 2]);
    return e.emit1("Transpose", {v}, {{"perm", perm}});
}

void fused_matmul(Expander& e) {
    e.allow_attrs({"alpha", "transA", "transB", "transBatchA", "transBatchB"});
    KILN_CHECK(e.attr_int("transBatchA", 0) == 0 && e.attr_int("transBatchB", 0) == 0, kUnsupported)
        << label(e.node()) << ": transBatchA/transBatchB other than 0 are not supported";
    ir::Value* a = e.required(0, "A");
    ir::Value* b = e.required(1, "B");
    if (e.attr_int("transA", 0)) a = swap_last_two(e, a, "A");
    if (e.attr_int("transB", 0)) b = swap_last_two(e, b, "B");
    const double alpha = e.attr_float("alpha", 1.0);
    if (alpha == 1.0) {
        e.emit1("MatMul", {a, b}, {}, e.out(0));
        return;
    }
    ir::Value* y = e.emit1("MatMul", {a, b});
    e.emit1("Mul", {y, e.scalar(y->type().dtype, alpha)}, {}, e.out(0));
}

// Gelu (erf), BiasGelu (erf, bias required), FastGelu (tanh, bias optional).
void gelu_family(Expander& e) {
    const std::string& op = e.node().op;
    e.allow_attrs({});
    ir::Value* x = e.required(0, "X");
    ir::Value* bias = op == "Gelu" ? nullptr : op == "BiasGelu" ? e.required(1, "bias") : e.in(1);
    if (op == "Gelu") e.refuse_inputs_from(1, "extra input");
    if (bias) x = e.emit1("Add", {x, bias});
    if (op != "FastGelu") {
        e.emit1("Gelu", {x}, {{"approximate", std::string("none")}}, e.out(0));
        return;
    }
    // The tanh form as x * sigmoid(2 z), z = sqrt(2/pi) (x + 0.044715 x^3): the same function
    // (0.5 (1 + tanh z) = sigmoid(2 z)), but Kiln's f32 sigmoid is vectorized where its tanh is a
    // libm call; the fused MatMul+Gelu(tanh) of GPT-2 small ran at half the speed of the down
    // projection's MatMul (`kiln run --profile-summary` on bench/ort_optimized.py's GPT-2).
    const DType dt = x->type().dtype;
    const double a = 2.0 * std::sqrt(2.0 / M_PI);
    ir::Value* poly = e.emit1("Add", {e.emit1("Mul", {e.emit1("Mul", {x, x}), e.scalar(dt, a * 0.044715)}), e.scalar(dt, a)});
    ir::Value* s = e.emit1("Sigmoid", {e.emit1("Mul", {x, poly})});
    e.emit1("Mul", {x, s}, {}, e.out(0));
}

void quick_gelu(Expander& e) {
    e.allow_attrs({"alpha"});
    ir::Value* x = e.required(0, "X");
    const double alpha = e.attr_float("alpha", 1.702);
    ir::Value* s = e.emit1("Sigmoid", {e.emit1("Mul", {x, e.scalar(x->type().dtype, alpha)})});
    e.emit1("Mul", {x, s}, {}, e.out(0));
}

void bias_add(Expander& e) {
    e.allow_attrs({});
    ir::Value* x = e.emit1("Add", {e.required(0, "X"), e.required(1, "bias")});
    e.emit1("Add", {x, e.required(2, "skip")}, {}, e.out(0));
}

// MatMulNBits: the constant quantized weight dequantized at import (matmul_nbits.h).
void matmul_nbits(Expander& e) {
    e.allow_attrs({"K", "N", "bits", "block_size", "accuracy_level", "weight_prepacked"});
    KILN_CHECK(e.attr_int("weight_prepacked", 0) == 0, kUnsupported)
        << label(e.node()) << ": weight_prepacked (an execution provider's layout) is not supported";
    auto constant_in = [&](size_t i, const char* what) -> const Tensor* {
        ir::Value* v = e.in(i);
        if (!v) return nullptr;
        KILN_CHECK(v->is_constant(), kUnsupported)
            << label(e.node()) << ": input " << i << " (" << what << ") must be an initializer (Kiln dequantizes at import)";
        return &v->constant();
    };
    NBitsWeight w;
    w.who = label(e.node());
    e.required(1, "B");
    e.required(2, "scales");
    w.b = constant_in(1, "B");
    w.scales = constant_in(2, "scales");
    w.zero_points = constant_in(3, "zero_points");
    w.g_idx = constant_in(4, "g_idx");
    w.k = e.attr_int("K", 0);
    w.n = e.attr_int("N", 0);
    w.bits = e.attr_int("bits", 4);
    w.block_size = e.attr_int("block_size", 0);
    ir::Value* weight = e.constant(dequantize_nbits(w));
    ir::Value* y = e.emit1("MatMul", {e.required(0, "A"), weight}, {}, e.in(5) ? "" : e.out(0));
    if (ir::Value* bias = e.in(5)) e.emit1("Add", {y, bias}, {}, e.out(0));
}

// ---------------------------------------------------------------- layer norms

// LayerNormalization over the last axis; outputs Y, Mean, InvStdDev under `outs`.
void layer_norm(Expander& e, ir::Value* x, ir::Value* gamma, ir::Value* beta, double eps,
                std::vector<std::string> outs) {
    while (outs.size() > 1 && outs.back().empty()) outs.pop_back();
    e.emit("LayerNormalization", {x, gamma, beta}, {{"axis", int64_t{-1}}, {"epsilon", eps}}, outs);
}

// ORT's LayerNormalization (ai.onnx domain, any opset): the opset-17 op.
void ort_layer_norm(Expander& e) {
    e.allow_attrs({"axis", "epsilon", "stash_type"});
    std::vector<std::string> outs{e.out(0), e.out(1), e.out(2)};
    while (outs.size() > 1 && outs.back().empty()) outs.pop_back();
    e.emit("LayerNormalization", {e.required(0, "X"), e.required(1, "Scale"), e.in(2)},
           {{"axis", e.attr_int("axis", -1)}, {"epsilon", e.attr_float("epsilon", 1e-5)},
            {"stash_type", e.attr_int("stash_type", 1)}},
           outs);
}

void skip_layer_norm(Expander& e) {
    e.allow_attrs({"epsilon"});
    ir::Value* sum = e.emit1("Add", {e.required(0, "input"), e.required(1, "skip")});
    sum = e.add(sum, e.in(4), e.out(3));  // bias; the sum is the optional output input_skip_bias_sum
    layer_norm(e, sum, e.required(2, "gamma"), e.in(3), e.attr_float("epsilon", 1e-12), {e.out(0), e.out(1), e.out(2)});
}

// ORT's SimplifiedLayerNormalization (ai.onnx domain; RMS norm): ONNX RMSNormalization.
void simplified_layer_norm(Expander& e) {
    e.allow_attrs({"axis", "epsilon", "stash_type"});
    e.refuse_outputs_from(1, "inv_std_var");
    e.emit1("RMSNormalization", {e.required(0, "X"), e.required(1, "scale")},
            {{"axis", e.attr_int("axis", -1)}, {"epsilon", e.attr_float("epsilon", 1e-5)},
             {"stash_type", e.attr_int("stash_type", 1)}},
            e.out(0));
}

// RMSNormalization(input + skip [+ bias]) (+ that sum as output 3).
void skip_simplified_layer_norm(Expander& e) {
    e.allow_attrs({"epsilon"});
    KILN_CHECK(e.out(1).empty() && e.out(2).empty(), kUnsupported)
        << label(e.node()) << ": outputs mean / inv_std_var are not supported";
    ir::Value* sum = e.emit1("Add", {e.required(0, "input"), e.required(1, "skip")});
    sum = e.add(sum, e.in(3), e.out(3));
    e.emit1("RMSNormalization", {sum, e.required(2, "gamma")},
            {{"axis", int64_t{-1}}, {"epsilon", e.attr_float("epsilon", 1e-12)}}, e.out(0));
}

// position ids 0..S-1 for ids of shape (B, S): a (S) i64 tensor, broadcast over the batch.
ir::Value* default_positions(Expander& e, ir::Value* ids) {
    ir::Value* s = e.emit1("Squeeze", {e.shape_slice(ids, 1, 2), e.ints({0})});
    return e.emit1("Range", {e.scalar(DType::kInt64, 0), s, e.scalar(DType::kInt64, 1)});
}

void embed_layer_norm(Expander& e) {
    e.allow_attrs({"epsilon", "mask_index_type"});
    const int64_t mask_type = e.attr_int("mask_index_type", 1);
    KILN_CHECK(mask_type == 0 || mask_type == 1, kUnsupported)
        << label(e.node()) << ": mask_index_type=" << mask_type << " is not supported (0 or 1)";
    ir::Value* ids = e.required(0, "input_ids");
    ir::Value* word = e.emit1("Gather", {e.required(2, "word_embedding"), ids});
    ir::Value* pos_ids = e.in(8) ? e.in(8) : default_positions(e, ids);
    ir::Value* sum = e.emit1("Add", {word, e.emit1("Gather", {e.required(3, "position_embedding"), pos_ids})});
    if (e.in(1) || e.in(4)) {
        ir::Value* seg = e.emit1("Gather", {e.required(4, "segment_embedding"), e.required(1, "segment_ids")});
        sum = e.emit1("Add", {sum, seg});
    }
    if (!e.out(2).empty()) e.emit1("Identity", {sum}, {}, e.out(2));
    layer_norm(e, sum, e.required(5, "gamma"), e.required(6, "beta"), e.attr_float("epsilon", 1e-12), {e.out(0)});
    if (e.out(1).empty()) return;
    KILN_CHECK(mask_type == 1, kInvalidModel)
        << label(e.node()) << ": output mask_index is used but mask_index_type=0 does not produce it";
    if (ir::Value* mask = e.in(7)) {  // the number of 1s in each row of the mask
        ir::Value* ones = e.emit1("Cast", {e.emit1("Equal", {mask, e.scalar(mask->type().dtype, 1)})},
                                  {{"to", int64_t{6}}});  // int32
        e.emit1("ReduceSum", {ones, e.ints({1})}, {{"keepdims", int64_t{0}}}, e.out(1));
    } else {
        Tensor zero(DType::kInt32, {1});
        zero.set_i64(0, 0);
        e.emit1("ConstantOfShape", {e.shape_slice(ids, 0, 1)}, {{"value", zero}}, e.out(1));
    }
}

// ---------------------------------------------------------------- attention

// Additive (B, 1, 1|S, T) mask from Attention's mask_index: 0 where attended, mask_filter_value
// elsewhere. Forms: (B) key lengths (right padding), (B, T) raw 0/1, (B, S, T) raw 0/1.
// T counts the past state's keys (past: (2, B, heads, P, d) or nullptr) before `keys`' S.
ir::Value* mask_from_index(Expander& e, ir::Value* mask, ir::Value* keys, ir::Value* past, DType dt, double filter) {
    const int r = e.rank_of(mask, "mask_index");
    ir::Value* keep = nullptr;  // bool, true where attended
    if (r == 1) {
        const int64_t mb = e.static_dim(mask, 0), kb = e.static_dim(keys, 0);
        KILN_CHECK(mb < 0 || kb < 0 || mb == kb, kUnsupported)
            << label(e.node()) << ": mask_index of shape " << mask->type().str()
            << " is not supported (1-D mask_index must hold one key length per batch row)";
        ir::Value* t = default_positions(e, keys);                                    // (T)
        if (past) {
            ir::Value* t_len = e.emit1("Add", {e.shape_slice(keys, 1, 2), e.shape_slice(past, 3, 4)});
            t_len = e.emit1("Squeeze", {t_len, e.ints({0})});
            t = e.emit1("Range", {e.scalar(DType::kInt64, 0), t_len, e.scalar(DType::kInt64, 1)});
        }
        ir::Value* len = e.emit1("Unsqueeze", {e.emit1("Cast", {mask}, {{"to", int64_t{7}}}), e.ints({1})});
        keep = e.emit1("Unsqueeze", {e.emit1("Less", {t, len}), e.ints({1, 2})});    // (B, 1, 1, T)
    } else {
        KILN_CHECK(r == 2 || r == 3, kUnsupported)
            << label(e.node()) << ": mask_index of rank " << r << " is not supported (1, 2 or 3)";
        keep = e.emit1("Greater", {mask, e.scalar(mask->type().dtype, 0)});
        keep = e.emit1("Unsqueeze", {keep, e.ints(r == 2 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1})});
    }
    return e.emit1("Where", {keep, e.scalar(dt, 0.0), e.scalar(dt, filter)});
}

// The additive attention mask: mask_index's mask plus attention_bias (either may be absent).
ir::Value* attention_mask(Expander& e, ir::Value* mask_index, ir::Value* bias, ir::Value* keys, ir::Value* past,
                          DType dt) {
    const double filter = e.attr_float("mask_filter_value", -10000.0);
    ir::Value* m = mask_index ? mask_from_index(e, mask_index, keys, past, dt, filter) : nullptr;
    if (!m) return bias;
    return bias ? e.emit1("Add", {m, bias}) : m;
}

// (B, S, heads * d) -> (B, heads, S, d), or (B, heads, d, S) for keys (`perm`).
ir::Value* split_heads(Expander& e, ir::Value* x, int64_t heads, int64_t d, std::vector<int64_t> perm) {
    ir::Value* r = e.emit1("Reshape", {x, e.ints({0, 0, heads, d})});
    return e.emit1("Transpose", {r}, {{"perm", std::move(perm)}});
}

// (S, T) bool, true where key t lies after query s (the keys a causal query may not see). With
// past state the queries are the last S of the T positions, so query s sits at position T - S + s.
ir::Value* future_keys(Expander& e, ir::Value* q, ir::Value* keys4d) {
    ir::Value* s_len = e.emit1("Squeeze", {e.shape_slice(q, 1, 2), e.ints({0})});
    ir::Value* t_len = e.emit1("Squeeze", {e.shape_slice(keys4d, 2, 3), e.ints({0})});
    ir::Value* first = e.emit1("Sub", {t_len, s_len});
    ir::Value* s = e.emit1("Range", {first, t_len, e.scalar(DType::kInt64, 1)});
    s = e.emit1("Unsqueeze", {s, e.ints({1})});                                           // (S, 1)
    ir::Value* t = e.emit1("Range", {e.scalar(DType::kInt64, 0), t_len, e.scalar(DType::kInt64, 1)});  // (T)
    return e.emit1("Greater", {t, s});
}

// Keys and values (B, heads, T, d) with Attention's past state (2, B, heads, P, d) in front;
// writes present (2, B, heads, P + T, d) under `present` when the model uses it.
std::pair<ir::Value*, ir::Value*> with_past(Expander& e, ir::Value* kh, ir::Value* vh, ir::Value* past,
                                            const std::string& present) {
    if (past) {
        KILN_CHECK(e.rank_of(past, "past") == 5, kInvalidModel)
            << label(e.node()) << ": past must be (2, batch, heads, past_len, head_size), got " << past->type().str();
        ir::Value* pk = e.emit1("Gather", {past, e.scalar(DType::kInt64, 0)}, {{"axis", int64_t{0}}});
        ir::Value* pv = e.emit1("Gather", {past, e.scalar(DType::kInt64, 1)}, {{"axis", int64_t{0}}});
        kh = e.emit1("Concat", {pk, kh}, {{"axis", int64_t{2}}});
        vh = e.emit1("Concat", {pv, vh}, {{"axis", int64_t{2}}});
    }
    if (!present.empty()) {
        ir::Value* k5 = e.emit1("Unsqueeze", {kh, e.ints({0})});
        ir::Value* v5 = e.emit1("Unsqueeze", {vh, e.ints({0})});
        e.emit1("Concat", {k5, v5}, {{"axis", int64_t{0}}}, present);
    }
    return {kh, vh};
}

// Scaled dot-product attention over 3-D q (B, S, heads*d), k (B, T, heads*d), v (B, T, heads*dv),
// written as the standard ops an exporter writes (head split, MatMul, Softmax, MatMul, merge):
// Kiln fuses and schedules those better than its generic ONNX Attention kernel (bench/contrib_bert.py).
// Output 0 carries the node's name.
// `past` (Attention's past state, or nullptr) goes in front of k and v; output 1 gets present.
void sdpa(Expander& e, ir::Value* q, ir::Value* k, ir::Value* v, int64_t qk_hidden, int64_t v_hidden,
          ir::Value* mask, ir::Value* past = nullptr) {
    const int64_t heads = e.attr_int("num_heads", 0);
    KILN_CHECK(heads > 0, kInvalidModel) << label(e.node()) << ": attribute num_heads must be positive";
    KILN_CHECK(qk_hidden % heads == 0 && v_hidden % heads == 0, kInvalidModel)
        << label(e.node()) << ": num_heads=" << heads << " does not divide the hidden sizes " << qk_hidden << ", "
        << v_hidden;
    const int64_t d = qk_hidden / heads, dv = v_hidden / heads;
    const DType dt = q->type().dtype;
    double scale = e.attr_float("scale", 0.0);
    if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(d));
    ir::Value* qh = split_heads(e, q, heads, d, {0, 2, 1, 3});
    ir::Value* vh = split_heads(e, v, heads, dv, {0, 2, 1, 3});
    ir::Value* kt = nullptr;  // keys as (B, heads, d, T)
    ir::Value* k4 = nullptr;  // keys as (B, heads, T, d), for the causal mask's T
    if (past || !e.out(1).empty()) {
        std::tie(k4, vh) = with_past(e, split_heads(e, k, heads, d, {0, 2, 1, 3}), vh, past, e.out(1));
        kt = e.emit1("Transpose", {k4}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
    } else {
        kt = split_heads(e, k, heads, d, {0, 2, 3, 1});  // the exporter's form, without state
        k4 = vh;
    }
    ir::Value* scores = e.emit1("Mul", {e.emit1("MatMul", {qh, kt}), e.scalar(dt, scale)});
    if (mask) scores = e.emit1("Add", {scores, mask});
    // ORT's CPU kernel sets future keys to the lowest float (not mask_filter_value added): a query
    // whose visible keys are all padding still attends only to those (left-padded prompts).
    if (e.attr_int("unidirectional", 0))
        scores = e.emit1("Where", {future_keys(e, q, k4), e.scalar(dt, std::numeric_limits<float>::lowest()), scores});
    ir::Value* probs = e.emit1("Softmax", {scores}, {{"axis", int64_t{-1}}});
    ir::Value* ctx = e.emit1("Transpose", {e.emit1("MatMul", {probs, vh})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    e.emit1("Reshape", {ctx, e.ints({0, 0, v_hidden})}, {}, e.out(0));
}

void attention(Expander& e) {
    e.allow_attrs({"num_heads", "unidirectional", "qkv_hidden_sizes", "mask_filter_value", "scale", "do_rotary",
                   "past_present_share_buffer"});
    KILN_CHECK(e.attr_int("do_rotary", 0) == 0 && e.attr_int("past_present_share_buffer", 0) == 0, kUnsupported)
        << label(e.node()) << ": do_rotary / past_present_share_buffer are not supported";
    KILN_CHECK(!e.in(6), kUnsupported) << label(e.node()) << ": input past_sequence_length is not supported";
    e.refuse_inputs_from(7, "extra input");
    ir::Value* x = e.required(0, "input");
    ir::Value* w = e.required(1, "weights");
    std::vector<int64_t> sizes = e.attr_ints("qkv_hidden_sizes");
    if (sizes.empty()) {
        const int64_t n = e.static_dim(w, 1);
        KILN_CHECK(e.rank_of(w, "weights") == 2 && n > 0, kUnsupported)
            << label(e.node()) << ": weights need a static (input_hidden, 3 * hidden) shape, got " << w->type().str();
        KILN_CHECK(n % 3 == 0, kInvalidModel) << label(e.node()) << ": weights' second dim " << n << " is not 3 * hidden";
        sizes = {n / 3, n / 3, n / 3};
    }
    KILN_CHECK(sizes.size() == 3, kInvalidModel) << label(e.node()) << ": qkv_hidden_sizes must have 3 entries";
    ir::Value* qkv = e.add(e.emit1("MatMul", {x, w}), e.in(2));
    ir::Node* split = e.emit("Split", {qkv, e.ints(sizes)}, {{"axis", int64_t{-1}}}, {"", "", ""});
    KILN_CHECK(sizes[0] == sizes[1], kInvalidModel)
        << label(e.node()) << ": qkv_hidden_sizes: Q and K hidden sizes differ (" << sizes[0] << ", " << sizes[1] << ")";
    KILN_CHECK(!e.in(4) || (sizes[1] == sizes[2]), kInvalidModel)
        << label(e.node()) << ": past state needs equal K and V hidden sizes, got " << sizes[1] << ", " << sizes[2];
    ir::Value* mask = attention_mask(e, e.in(3), e.in(5), x, e.in(4), x->type().dtype);
    sdpa(e, split->output(0), split->output(1), split->output(2), sizes[0], sizes[2], mask, e.in(4));
}

void multi_head_attention(Expander& e) {
    e.allow_attrs({"num_heads", "unidirectional", "mask_filter_value", "scale"});
    ir::Value* q = e.required(0, "query");
    ir::Value* k = e.required(1, "key");
    ir::Value* v = e.required(2, "value");
    KILN_CHECK(e.rank_of(q, "query") == 3 && e.rank_of(k, "key") == 3 && e.rank_of(v, "value") == 3, kUnsupported)
        << label(e.node()) << ": only 3-D query, key and value are supported (packed QKV/KV and 4-D key/value are not)";
    e.refuse_inputs_from(6, "past state or cache input");
    e.refuse_outputs_from(1, "present state");
    const int64_t dq = e.static_dim(q, 2), dk = e.static_dim(k, 2), dv = e.static_dim(v, 2);
    KILN_CHECK(dq > 0 && dk > 0 && dv > 0, kUnsupported)
        << label(e.node()) << ": query, key and value need static hidden sizes, got " << q->type().str() << ", "
        << k->type().str() << ", " << v->type().str();
    KILN_CHECK(dq == dk, kInvalidModel) << label(e.node()) << ": query and key hidden sizes differ (" << dq << ", " << dk << ")";
    if (ir::Value* bias = e.in(3)) {  // (Dq + Dk + Dv): split and add
        ir::Node* parts = e.emit("Split", {bias, e.ints({dq, dk, dv})}, {{"axis", int64_t{0}}}, {"", "", ""});
        q = e.emit1("Add", {q, parts->output(0)});
        k = e.emit1("Add", {k, parts->output(1)});
        v = e.emit1("Add", {v, parts->output(2)});
    }
    ir::Value* mask = attention_mask(e, e.in(4), e.in(5), k, nullptr, q->type().dtype);
    sdpa(e, q, k, v, dq, dv, mask);
}

// ---------------------------------------------------------------- rotary embedding

// ORT's RotaryEmbedding(input (B, S, hidden), position_ids (B, S) or a (1) offset, cos, sin) ->
// ONNX RotaryEmbedding(X, cos, sin, position_ids (B, S)). ORT without num_heads rotates heads
// of the cache's full width: num_heads = hidden / (2 * cos_cache's last dim).
void rotary_embedding(Expander& e) {
    e.allow_attrs({"interleaved", "num_heads", "rotary_embedding_dim", "scale", "is_packed_batching"});
    KILN_CHECK(e.attr_float("scale", 1.0) == 1.0 && e.attr_int("is_packed_batching", 0) == 0, kUnsupported)
        << label(e.node()) << ": scale other than 1 and is_packed_batching are not supported";
    ir::Value* x = e.required(0, "input");
    ir::Value* pos = e.required(1, "position_ids");
    ir::Value* cos = e.required(2, "cos_cache");
    KILN_CHECK(e.rank_of(x, "input") == 3, kUnsupported) << label(e.node()) << ": only 3-D input (B, S, hidden) is supported";
    int64_t heads = e.attr_int("num_heads", 0);
    if (heads == 0) {
        const int64_t hidden = e.static_dim(x, 2), width = e.static_dim(cos, 1);
        KILN_CHECK(hidden > 0 && e.rank_of(cos, "cos_cache") == 2 && width > 0, kUnsupported)
            << label(e.node()) << ": without num_heads, input's hidden size and cos_cache's width must be static";
        heads = hidden / (2 * width);
    }
    pos = e.emit1("Cast", {pos}, {{"to", int64_t{7}}});
    if (e.rank_of(pos, "position_ids") == 1) {  // an offset: positions offset + 0..S-1 for every row
        ir::Value* row = e.emit1("Add", {e.emit1("Unsqueeze", {default_positions(e, x), e.ints({0})}), pos});
        pos = e.emit1("Expand", {row, e.shape_slice(x, 0, 2)});
    }
    ir::AttrMap a{{"interleaved", e.attr_int("interleaved", 0)}, {"num_heads", heads}};
    if (int64_t rd = e.attr_int("rotary_embedding_dim", 0)) a["rotary_embedding_dim"] = rd;
    e.emit1("RotaryEmbedding", {x, cos, e.required(3, "sin_cache"), pos}, std::move(a), e.out(0));
}

// ---------------------------------------------------------------- the table

using ExpandFn = void (*)(Expander&);

struct Row {
    ContribOpInfo info;
    ExpandFn fn;
};

// keep-sorted
const Row kRows[] = {
    {{"Attention", kMicrosoftDomain, 2, 7, 1, 2}, attention},
    {{"BiasAdd", kMicrosoftDomain, 3, 3, 1, 1}, bias_add},
    {{"BiasGelu", kMicrosoftDomain, 2, 2, 1, 1}, gelu_family},
    {{"EmbedLayerNormalization", kMicrosoftDomain, 7, 9, 2, 3}, embed_layer_norm},
    {{"FastGelu", kMicrosoftDomain, 1, 2, 1, 1}, gelu_family},
    {{"FusedMatMul", kMicrosoftDomain, 2, 2, 1, 1}, fused_matmul},
    {{"Gelu", kMicrosoftDomain, 1, 1, 1, 1}, gelu_family},
    {{"LayerNormalization", "ai.onnx", 2, 3, 1, 3}, ort_layer_norm},
    {{"MatMulNBits", kMicrosoftDomain, 3, 6, 1, 1}, matmul_nbits},
    {{"MultiHeadAttention", kMicrosoftDomain, 3, 6, 1, 1}, multi_head_attention},
    {{"QuickGelu", kMicrosoftDomain, 1, 1, 1, 1}, quick_gelu},
    {{"RotaryEmbedding", kMicrosoftDomain, 4, 4, 1, 1}, rotary_embedding},
    {{"SimplifiedLayerNormalization", "ai.onnx", 2, 2, 1, 1}, simplified_layer_norm},
    {{"SkipLayerNormalization", kMicrosoftDomain, 3, 5, 1, 4}, skip_layer_norm},
    {{"SkipSimplifiedLayerNormalization", kMicrosoftDomain, 3, 4, 1, 4}, skip_simplified_layer_norm},
};

const Row* find_row(const std::string& op, const std::string& domain) {
    const std::string d = domain.empty() ? "ai.onnx" : domain;
    for (const Row& r : kRows)
        if (op == r.info.name && d == r.info.domain) return &r;
    return nullptr;
}

}  // namespace

const std::vector<ContribOpInfo>& contrib_ops() {
    static const std::vector<ContribOpInfo> infos = [] {
        std::vector<ContribOpInfo> v;
        for (const Row& r : kRows) v.push_back(r.info);
        return v;
    }();
    return infos;
}

bool is_contrib_node(const std::string& op, const std::string& domain, int default_opset) {
    if (domain == kMicrosoftDomain) return true;  // unknown ones are reported by import_contrib_node
    // ORT writes its LayerNormalization (ai.onnx domain, since-version 1) into opset < 17 models,
    // and its SimplifiedLayerNormalization (RMS norm, no ONNX counterpart of that name) at any opset.
    if (!domain.empty() && domain != "ai.onnx") return false;
    return (op == "LayerNormalization" && default_opset < 17) || op == "SimplifiedLayerNormalization";
}

void import_contrib_node(const PendingNode& n, AdapterContext& ctx) {
    const bool onnx_domain = n.op == "LayerNormalization" || n.op == "SimplifiedLayerNormalization";
    const std::string domain = onnx_domain ? "ai.onnx" : kMicrosoftDomain;
    const Row* row = find_row(n.op, domain);
    if (!row) {
        std::string known;
        for (const Row& r : kRows)
            if (std::string(r.info.domain) == kMicrosoftDomain) known += (known.empty() ? "" : ", ") + std::string(r.info.name);
        KILN_THROW(kUnsupported) << "unsupported op '" << n.op << "' (node '" << n.name << "', domain " << domain
                                 << "); Kiln imports these com.microsoft ops: " << known;
    }
    const ContribOpInfo& info = row->info;
    size_t used_inputs = n.inputs.size();
    KILN_CHECK(static_cast<int>(used_inputs) <= info.max_inputs, kUnsupported)
        << label(n) << ": " << used_inputs << " inputs, Kiln implements at most " << info.max_inputs;
    KILN_CHECK(static_cast<int>(n.output_names.size()) <= info.max_outputs, kUnsupported)
        << label(n) << ": " << n.output_names.size() << " outputs, Kiln implements at most " << info.max_outputs;
    Expander e(n, ctx);
    row->fn(e);
}

}  // namespace kiln::frontend
