#include "pass/transform_layout.h"

#include <array>
#include <map>
#include <set>
#include <span>
#include <tuple>
#include <utility>

#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::pass {
namespace {

constexpr const char* kToBlocked = "KilnLayoutToBlocked";
constexpr const char* kFromBlocked = "KilnLayoutFromBlocked";

ir::Value* node1(ir::Graph& g, const std::string& op, const std::vector<ir::Value*>& ins, ir::AttrMap attrs = {}) {
    return add_inferred_node(g, op, ins, std::move(attrs), 1, "layout")->output(0);
}

bool static_f32(const ir::Value* v, int rank) {
    return v && v->type().dtype == DType::kFloat32 && v->type().rank() == rank && v->type().is_static();
}

/// An activation the pass may block: float32 of rank `rank` with static channels (axis 1); its
/// batch and spatial dims may be symbolic (a symbolic compile: docs/dynamic_shapes.md).
bool blockable_f32(const ir::Value* v, int rank) {
    return v && v->type().dtype == DType::kFloat32 && v->type().rank() == rank && v->type().shape[1].is_static();
}

int64_t channels_of(const ir::Value* v) { return v->type().shape[1].value; }

/// Whether dim `k` of v's type is the static size 1.
bool unit_dim(const ir::Value* v, size_t k) {
    const ir::Dim& d = v->type().shape.at(k);
    return d.is_static() && d.value == 1;
}

int64_t block_for(int64_t channels) { return channels % 16 == 0 ? 16 : channels % 8 == 0 ? 8 : 0; }

/// The block of a whole activation of `channels` channels. With `nhwc8`, channel counts that 8
/// divides but 16 does not (24, 40, 72, 120, 232, 440; at most 1024) are one block of every
/// channel: NHWC, where oneDNN runs its avx512 brgemm convs, as it runs its avx2 ones on nChw8c
/// (docs/kernels.md; PassContext::nhwc_8_channel_blocks says when).
int64_t activation_block(int64_t channels, bool nhwc8) {
    if (nhwc8 && channels % 16 != 0 && channels % 8 == 0 && channels <= 1024) return channels;
    return block_for(channels);
}

/// The blocked value `v` is the FromBlocked of, or nullptr. Not a FromBlocked that drops
/// padding channels (a padded depthwise conv's, rewrite_depthwise): its source has more
/// channels than `v`, so nothing sinks through it.
ir::Value* blocked_source(const ir::Value* v) {
    const ir::Node* p = v ? v->producer() : nullptr;
    return p && p->op() == kFromBlocked && !p->has_attr("channels") ? p->input(0) : nullptr;
}

int64_t block_of(const ir::Value* blocked) { return blocked->type().shape.at(4).value; }

bool is_unary(const std::string& op);

/// The block `v` will have once the ops between it and a FromBlocked sank (elementwise ops,
/// pools, BatchNormalization keep their operand's block), or 0: a conv reading `v` asks for that
/// block, so that its ToBlocked cancels instead of becoming a reorder.
int64_t eventual_block(const ir::Value* v, int depth = 0) {
    if (const ir::Value* src = blocked_source(v)) return block_of(src);
    const ir::Node* p = v ? v->producer() : nullptr;
    if (!p || depth > 6 || p->num_inputs() == 0) return 0;
    const std::string& op = p->op();
    const bool keeps = is_unary(op) || op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "MaxPool" ||
                       op == "AveragePool" || op == "BatchNormalization";
    const bool binary = op == "Add" || op == "Sub" || op == "Mul" || op == "Div";
    if (!keeps && !binary) return 0;
    if (!binary) return eventual_block(p->input(0), depth + 1);
    // The operand of the output's shape decides (not a broadcast channel scale).
    for (const ir::Value* in : p->inputs())
        if (in && in->type() == p->output(0)->type())
            if (int64_t b = eventual_block(in, depth + 1)) return b;
    return 0;
}

/// Block of an operand with `channels` channels: the block it has, or will have, when it comes
/// from a FromBlocked value (so no reorder is needed), else block_for.
int64_t operand_block(const ir::Value* x, int64_t channels, bool nhwc8) {
    const int64_t b = eventual_block(x);
    return b && channels % b == 0 ? b : activation_block(channels, nhwc8);
}

/// Packed weights per (weights, ci, co), blocked inputs per (x, ci, -1): convs sharing them share one.
using PackCache = std::map<std::tuple<const ir::Value*, int64_t, int64_t>, ir::Value*>;

/// Erases `n` and forgets the cache entries naming its outputs (their addresses may be reused).
void erase_tracked(ir::Graph& g, ir::Node* n, PackCache& cache) {
    for (auto it = cache.begin(); it != cache.end();) {
        bool named = false;
        for (const ir::Value* o : n->outputs()) named |= std::get<0>(it->first) == o || it->second == o;
        it = named ? cache.erase(it) : std::next(it);
    }
    g.erase_node(n);
}

constexpr std::array<const char*, 5> kConvWindowAttrs = {"auto_pad", "dilations", "kernel_shape", "pads", "strides"};

ir::AttrMap copy_attrs(const ir::Node& n, std::span<const char* const> keys) {
    ir::AttrMap attrs;
    for (const char* k : keys)
        if (n.has_attr(k)) attrs[k] = n.attrs().at(k);
    return attrs;
}

/// One ToBlocked per (value, block), shared by every consumer.
ir::Value* to_blocked(ir::Graph& g, ir::Value* x, int64_t block, PackCache& cache) {
    ir::Value*& xb = cache[{x, block, -1}];
    if (!xb) xb = node1(g, kToBlocked, {x}, {{"block", ir::Attr(block)}});
    return xb;
}

/// Replaces n's output 0 with FromBlocked(blocked) (named like n) and erases n; with `crop`,
/// FromBlocked {channels=crop}: the first channels of a zero-padded blocked value.
bool finish(ir::Graph& g, ir::Node* n, ir::Node* blocked, PackCache& cache, int64_t crop = 0) {
    blocked->set_name(n->name());
    ir::AttrMap attrs;
    if (crop) attrs["channels"] = ir::Attr(crop);
    ir::Value* y = node1(g, kFromBlocked, {blocked->output(0)}, attrs);
    if (!replace_value(g, n->output(0), y)) return false;  // leaves dead nodes: the caller erases them
    g.topo_sort();
    erase_tracked(g, n, cache);
    return true;
}

/// A 2-D conv with static float32 operands, constant weights and an optional constant bias.
bool conv_operands_blockable(const ir::Node* n) {
    const ir::Value *x = n->input(0), *w = n->input(1), *b = n->input(2);
    if (!blockable_f32(x, 4) || !static_f32(w, 4) || !blockable_f32(n->output(0), 4) || !is_constant_expr(w)) return false;
    return !b || (static_f32(b, 1) && is_constant_expr(b));
}

/// Whether `v` feeds, directly or through unary ops, a grouped conv whose groups are whole
/// blocks of 8 but not of 16 (RegNet's and ResNeXt's 8-channel groups): its producer then
/// writes blocks of 8, so the grouped conv runs blocked without a reorder.
bool feeds_groups_of_8(const ir::Value* v, int depth = 0) {
    for (const ir::Node* u : v->users()) {
        if (u->op() == "Conv" && u->input(0) == v && u->attr_int("group", 1) > 1 && static_f32(u->input(1), 4)) {
            const int64_t cg = u->input(1)->type().static_shape()[1];
            if (cg > 1 && cg % 16 != 0 && cg % 8 == 0) return true;
        }
        if (depth < 3 && is_unary(u->op()) && u->num_outputs() == 1 && feeds_groups_of_8(u->output(0), depth + 1)) return true;
    }
    return false;
}

/// The input and output blocks of a dense or grouped conv (0, 0 when it stays NCHW). Grouped:
/// every group's input and output channels must be whole blocks (ResNeXt, RegNet).
std::pair<int64_t, int64_t> conv_blocks(const ir::Node* n, int64_t group, bool nhwc8) {
    const Shape ws = n->input(1)->type().static_shape();
    const int64_t m = ws[0], c = ws[1];  // c: input channels per group
    if (group > 1) {
        // The input's block when it divides the groups, else blocks of the groups' size (the
        // producer's, once feeds_groups_of_8 picked them and the unary ops between sank).
        int64_t ci = operand_block(n->input(0), c * group, nhwc8);
        if (!ci || c % ci != 0) ci = block_for(c);
        const int64_t co = block_for(m / group);
        return ci && co ? std::pair{ci, co} : std::pair<int64_t, int64_t>{0, 0};
    }
    // A few plain input channels that 8 does not divide (an image's colours) are blocks of one
    // channel: [N, C, H, W, 1] is NCHW's memory, so the ToBlocked is a view and oneDNN's
    // first-layer conv reads the image as it is (as one NHWC block the image was transposed to
    // NHWC and oneDNN reordered it back to NCHW: 30 + 42 us per run at 224x224, one thread).
    // Up to 512 output channels that 8 does not divide of a conv over a 1x1 map make one block
    // (squeeze-and-excitation's squeeze), so that the excitation path stays blocked.
    const bool map_1x1 = unit_dim(n->output(0), 2) && unit_dim(n->output(0), 3);
    int64_t co = activation_block(m, nhwc8) ? activation_block(m, nhwc8) : m <= 512 && map_1x1 ? m : 0;
    if (co != 8 && block_for(m) && feeds_groups_of_8(n->output(0))) co = 8;  // also instead of NHWC
    // (Blocks of one channel on static shapes only: a symbolic compile keeps one NHWC block.)
    const int64_t few = n->input(0)->type().is_static() ? 1 : c;
    const int64_t ci = operand_block(n->input(0), c, nhwc8) ? operand_block(n->input(0), c, nhwc8) : c < 8 ? few : 0;
    return {ci, co};
}

/// The channel count a dense conv over `ch` channels that no block divides computes on: the
/// next multiple of 16 when that adds at most an eighth (ShuffleNetV2's 58 -> 64, 116 -> 128),
/// else 0 (it stays NCHW).
int64_t padded_dense_channels(int64_t ch) {
    const int64_t p16 = (ch + 15) / 16 * 16;
    return ch >= 8 && (p16 - ch) * 8 <= ch ? p16 : 0;
}

ir::Value* pad_axis_end(ir::Graph& g, ir::Value* v, size_t rank, size_t axis, int64_t from, int64_t to);

bool rewrite_conv(ir::Graph& g, ir::Node* n, PackCache& packed, bool nhwc8) {
    const int64_t group = n->attr_int("group", 1);
    if (n->num_outputs() != 1 || group < 1) return false;
    ir::Value* x = n->input(0);
    ir::Value* w = n->input(1);
    ir::Value* b = n->input(2);
    if (!conv_operands_blockable(n)) return false;
    const Shape ws = w->type().static_shape();
    const int64_t m = ws[0], c = ws[1];
    if (group > 1 && (c == 1 || m % group != 0)) return false;  // depthwise: rewrite_depthwise
    auto [ci, co] = conv_blocks(n, group, nhwc8);
    // Input or output channels no block divides (one group, static shapes): computed on
    // channels zero-padded to a multiple of 16 (padded_dense_channels) as rewrite_depthwise
    // does, ToBlocked {padded_channels=P} in, weights and bias padded with zeros, FromBlocked
    // {channels=M} out. Its padded output channels are zero; a padded conv or depthwise conv
    // reading a padded value multiplies its padded channels by zero weights, so the crop and pad
    // between two of them cancel (cancel_padded). ShuffleNetV2's 58- and 116-channel branches
    // ran NCHW at 30-180 GFLOP/s.
    int64_t pc = c, pm = m;
    if (ci == 0 || co == 0) {
        if (group != 1 || !x->type().is_static()) return false;
        if (!ci) pc = padded_dense_channels(c), ci = 16;
        if (!co) pm = padded_dense_channels(m), co = 16;
        if (pc == 0 || pm == 0) return false;
    }
    ir::AttrMap attrs = copy_attrs(*n, kConvWindowAttrs);
    if (group > 1) attrs["group"] = ir::Attr(group);
    ir::Value* xb = pc == c ? to_blocked(g, x, ci, packed)
                            : node1(g, kToBlocked, {x}, {{"block", ir::Attr(ci)}, {"padded_channels", ir::Attr(pc)}});
    ir::Value*& wb = packed[{w, ci, co}];
    if (!wb) {
        ir::Value* wp = pad_axis_end(g, pad_axis_end(g, w, 4, 0, m, pm), 4, 1, c, pc);  // unpadded: w itself
        ir::Value* wr = node1(g, "Reshape", {wp, shape_constant(g, {pm / co, co, pc / ci, ci, ws[2], ws[3]})});
        wb = node1(g, "Transpose", {wr}, {{"perm", ir::Attr(std::vector<int64_t>{0, 2, 4, 5, 3, 1})}});
    }
    std::vector<ir::Value*> ins = {xb, wb};
    if (b) ins.push_back(node1(g, "Reshape", {pad_axis_end(g, b, 1, 0, m, pm), shape_constant(g, {pm / co, co})}));
    return finish(g, n, add_inferred_node(g, "KilnConv2dNCHWc", ins, attrs, 1, "conv"), packed, pm == m ? 0 : m);
}

/// The channel count a depthwise conv over `ch` channels that no block divides computes on:
/// the next multiple of 16 when that adds at most an eighth, else of 8 (0: too few channels).
int64_t padded_depthwise_channels(int64_t ch) {
    if (ch < 8) return 0;
    const int64_t p16 = (ch + 15) / 16 * 16;
    return (p16 - ch) * 8 <= ch ? p16 : (ch + 7) / 8 * 8;
}

/// `v` with its axis `axis` of `rank` (extent `from`) zero-padded at the end to `to`.
ir::Value* pad_axis_end(ir::Graph& g, ir::Value* v, size_t rank, size_t axis, int64_t from, int64_t to) {
    if (to == from) return v;
    Shape pads(2 * rank, 0);
    pads[rank + axis] = to - from;
    return node1(g, "Pad", {v, shape_constant(g, pads)});
}

/// Depthwise Conv (group = C = M, weights [C, 1, KH, KW]) -> KilnDepthwiseConv2dNCHWc with
/// weights Transpose(Reshape(W, [C/c, c, KH, KW]), [0, 2, 3, 1]) = [C/c, KH, KW, c].
/// Channels that no block divides (ShuffleNetV2's 58 and 116) are zero-padded to P
/// (padded_depthwise_channels) around the blocked conv: ToBlocked {padded_channels=P}, weights
/// and bias padded with zeros, FromBlocked {channels=C}. oneDNN's and the generated
/// depthwise conv on plain NCHW ran at 4-13 GFLOP/s (a 28-column row is a 16-lane vector, an
/// 8-lane one and 4 scalars); the blocked one runs at 40-70.
bool rewrite_depthwise(ir::Graph& g, ir::Node* n, PackCache& packed, bool nhwc8) {
    if (n->num_outputs() != 1) return false;
    ir::Value* x = n->input(0);
    ir::Value* w = n->input(1);
    ir::Value* b = n->input(2);
    if (!conv_operands_blockable(n)) return false;
    const Shape ws = w->type().static_shape();
    const int64_t ch = channels_of(x);
    if (n->attr_int("group", 1) != ch || ws[0] != ch || ws[1] != 1) return false;
    int64_t c = operand_block(x, ch, nhwc8), p = ch;
    if (c == 0) {
        p = padded_depthwise_channels(ch);
        if (p == 0 || !x->type().is_static()) return false;
        c = block_for(p);
    }
    ir::Value* xb = p == ch ? to_blocked(g, x, c, packed)
                            : node1(g, kToBlocked, {x}, {{"block", ir::Attr(c)}, {"padded_channels", ir::Attr(p)}});
    ir::Value*& wb = packed[{w, c, 0}];
    if (!wb) {
        ir::Value* wr = node1(g, "Reshape", {pad_axis_end(g, w, 4, 0, ch, p), shape_constant(g, {p / c, c, ws[2], ws[3]})});
        wb = node1(g, "Transpose", {wr}, {{"perm", ir::Attr(std::vector<int64_t>{0, 2, 3, 1})}});
    }
    std::vector<ir::Value*> ins = {xb, wb};
    if (b) ins.push_back(node1(g, "Reshape", {pad_axis_end(g, b, 1, 0, ch, p), shape_constant(g, {p / c, c})}));
    ir::AttrMap attrs = copy_attrs(*n, kConvWindowAttrs);
    ir::Node* conv = add_inferred_node(g, "KilnDepthwiseConv2dNCHWc", ins, attrs, 1, "dwconv");
    return finish(g, n, conv, packed, p == ch ? 0 : ch);
}

/// Per-channel constant of an NCHW operand with `channels` channels: its (right-aligned,
/// rank <= 4) shape is [1, C, 1, 1]; scalars (every dim 1) qualify too (returns 1).
int64_t per_channel(const ir::Value* v, int64_t channels) {
    if (!v->is_constant() || v->type().rank() > 4) return 0;
    Shape s = v->type().static_shape();
    while (s.size() < 4) s.insert(s.begin(), 1);
    if (s[0] != 1 || s[2] != 1 || s[3] != 1) return 0;
    return s[1] == 1 ? 1 : s[1] == channels ? channels : 0;
}

const std::set<std::string>& unary_ops() {
    static const std::set<std::string> ops = {"Relu",        "Clip",      "LeakyRelu", "Sigmoid",
                                              "Tanh",        "HardSigmoid", "HardSwish", "Erf"};
    return ops;
}

/// Whether `v` is a per-channel tensor [N', C, 1, 1] of the NCHW output type `out` (N' = 1 or
/// out's N): squeeze-and-excitation's channel scale. Its NCHW buffer reshapes to the blocked
/// [N', C/c, 1, 1, c] as a view, so a binary op with it runs blocked.
bool channel_vector(const ir::Value* v, const ir::TensorType& out) {
    if (!blockable_f32(v, 4)) return false;
    const std::vector<ir::Dim>& s = v->type().shape;
    return (s[0] == ir::Dim(1) || s[0] == out.shape[0]) && s[1] == out.shape[1] && unit_dim(v, 2) && unit_dim(v, 3);
}

/// A Reshape target [N', rest...] with N' copied from the input (0: symbolic batches too).
ir::Value* keep_batch_target(ir::Graph& g, const ir::Value* v, Shape rest) {
    const ir::Dim& nb = v->type().shape.at(0);
    rest.insert(rest.begin(), nb.is_static() ? nb.value : 0);
    return shape_constant(g, rest);
}

/// How an operand of a blocked elementwise op is rewritten (see sink_through).
enum class Operand { kBlocked, kChannelVector, kBlockedVector, kToBlocked, kKeep, kReject };

Operand classify(const ir::Value* in, bool tensor_input, bool binary, const ir::TensorType& out, int64_t channels) {
    if (!tensor_input) return !in || in->is_constant() ? Operand::kKeep : Operand::kReject;
    if (!in) return Operand::kReject;
    if (blocked_source(in)) {
        if (in->type() == out) return Operand::kBlocked;
        if (binary && channel_vector(in, out)) return Operand::kBlockedVector;
        return Operand::kReject;
    }
    if (per_channel(in, channels)) return Operand::kKeep;  // a constant: reshaped below when per-channel
    if (binary && in->type() == out) return Operand::kToBlocked;
    if (binary && channel_vector(in, out)) return Operand::kChannelVector;
    return Operand::kReject;
}

bool is_unary(const std::string& op) { return unary_ops().count(op) > 0; }

/// Moves the FromBlocked of elementwise node `n`'s operands below it. A binary op's other
/// operand may also be an NCHW value of the output's type (it gets a shared ToBlocked) or a
/// per-channel [N', C, 1, 1] value, blocked or not (the channel scale of squeeze-and-excitation).
/// At least one operand must be a blocked value of the output's type.
bool sink_through(ir::Graph& g, ir::Node* n, PackCache& cache) {
    const bool unary = unary_ops().count(n->op()) > 0;
    const bool binary = n->op() == "Add" || n->op() == "Sub" || n->op() == "Mul" || n->op() == "Div";
    if ((!unary && !binary) || n->num_outputs() != 1 || !blockable_f32(n->output(0), 4)) return false;
    if (binary && n->num_inputs() != 2) return false;
    const ir::TensorType& out = n->output(0)->type();
    const int64_t channels = channels_of(n->output(0));
    const size_t tensor_inputs = unary ? 1 : 2;
    int64_t block = 0;
    bool full_blocked = false;
    std::vector<Operand> kinds;
    for (size_t i = 0; i < n->num_inputs(); ++i) {
        const Operand k = classify(n->input(i), i < tensor_inputs, binary, out, channels);
        if (k == Operand::kReject) return false;
        if (k == Operand::kBlocked) {
            const int64_t bl = block_of(blocked_source(n->input(i)));
            if (block && bl != block) return false;
            block = bl;
            full_blocked = true;
        }
        kinds.push_back(k);
    }
    if (!full_blocked) return false;
    std::vector<ir::Value*> ins;
    for (size_t i = 0; i < n->num_inputs(); ++i) {
        ir::Value* in = n->input(i);
        switch (kinds[i]) {
            case Operand::kBlocked: ins.push_back(blocked_source(in)); break;
            case Operand::kBlockedVector: {
                // Over a 1x1 map every block holds the channels in order: another block is a view.
                ir::Value* src = blocked_source(in);
                ins.push_back(block_of(src) == block
                                  ? src
                                  : node1(g, "Reshape", {src, keep_batch_target(g, in, {channels / block, 1, 1, block})}));
                break;
            }
            case Operand::kToBlocked: ins.push_back(to_blocked(g, in, block, cache)); break;
            case Operand::kChannelVector:
                ins.push_back(node1(g, "Reshape", {in, keep_batch_target(g, in, {channels / block, 1, 1, block})}));
                break;
            default:
                if (i < tensor_inputs && per_channel(in, channels) == channels)
                    ins.push_back(node1(g, "Reshape", {in, shape_constant(g, {channels / block, 1, 1, block})}));
                else ins.push_back(in);
        }
    }
    return finish(g, n, add_inferred_node(g, n->op(), ins, n->attrs(), 1, n->op()), cache);
}

/// Inference BatchNormalization of a FromBlocked value with constant parameters (one after a
/// Concat, which fold-batch-norm cannot fold into a conv: DenseNet) runs blocked as
/// x * s + t, s = scale / sqrt(var + eps), t = B - mean * s (constant nodes, folded later).
bool sink_batch_norm(ir::Graph& g, ir::Node* n, PackCache& cache) {
    if (n->op() != "BatchNormalization" || n->num_outputs() != 1 || n->attr_int("training_mode", 0) != 0) return false;
    ir::Value* src = blocked_source(n->input(0));
    if (!src || !blockable_f32(n->output(0), 4) || n->num_inputs() != 5) return false;
    const int64_t channels = channels_of(n->output(0)), block = block_of(src);
    for (size_t i = 1; i < 5; ++i)
        if (!static_f32(n->input(i), 1) || !is_constant_expr(n->input(i))) return false;
    Tensor eps(DType::kFloat32, {});
    eps.set_f64(0, n->attr_float("epsilon", 1e-5));
    ir::Value* var_eps = node1(g, "Add", {n->input(4), add_constant_like(g, "eps", eps)});
    ir::Value* s = node1(g, "Div", {n->input(1), node1(g, "Sqrt", {var_eps})});
    ir::Value* t = node1(g, "Sub", {n->input(2), node1(g, "Mul", {n->input(3), s})});
    const Shape per_block = {channels / block, 1, 1, block};
    ir::Value* scaled = node1(g, "Mul", {src, node1(g, "Reshape", {s, shape_constant(g, per_block)})});
    ir::Node* shifted = add_inferred_node(g, "Add", {scaled, node1(g, "Reshape", {t, shape_constant(g, per_block)})}, {}, 1,
                                          "BatchNormalization");
    return finish(g, n, shifted, cache);
}

/// A pool of a FromBlocked value runs blocked: MaxPool (without a used Indices output),
/// AveragePool, GlobalAveragePool, GlobalMaxPool -> Kiln<op>NCHWc.
bool sink_pool(ir::Graph& g, ir::Node* n, PackCache& cache) {
    static const std::array<const char*, 7> kPoolAttrs = {"auto_pad", "ceil_mode", "dilations", "kernel_shape",
                                                          "pads",     "strides",   "count_include_pad"};
    const std::string& op = n->op();
    const bool window = op == "MaxPool" || op == "AveragePool";
    if (!window && op != "GlobalAveragePool" && op != "GlobalMaxPool") return false;
    ir::Value* src = blocked_source(n->input(0));
    if (!src || !blockable_f32(n->output(0), 4)) return false;
    // On symbolic dims GlobalAveragePool and the window pools have a blocked compute
    // (blocked_ops.cc); the window pools' output dims must be expressions of the input's.
    if (!n->output(0)->type().is_static()) {
        if (op == "GlobalMaxPool") return false;
        for (const ir::Dim& d : n->output(0)->type().shape)
            if (!d.is_static() && (d.symbol.empty() || d.symbol == "?")) return false;
    }
    for (size_t i = 1; i < n->num_outputs(); ++i)  // MaxPool's Indices: only when unused
        if (!n->output(i)->users().empty() || is_graph_output(g, n->output(i))) return false;
    ir::AttrMap attrs = window ? copy_attrs(*n, std::span(kPoolAttrs).first(op == "MaxPool" ? 6 : 7)) : ir::AttrMap{};
    return finish(g, n, add_inferred_node(g, "Kiln" + op + "NCHWc", {src}, attrs, 1, op), cache);
}

/// The reduced axes of a ReduceMax / ReduceMean, normalized and sorted; empty when they are
/// not a constant (or not given: every axis).
std::vector<int64_t> constant_reduce_axes(const ir::Node* n, int64_t rank) {
    const ir::Value* axes = n->num_inputs() > 1 ? n->input(1) : nullptr;
    if (!axes || !axes->is_constant()) return {};
    std::set<int64_t> out;
    const Tensor& t = axes->constant();
    for (int64_t i = 0; i < t.numel(); ++i) out.insert(t.get_i64(i) < 0 ? t.get_i64(i) + rank : t.get_i64(i));
    return {out.begin(), out.end()};
}

/// ReduceMax / ReduceMean over the whole map of a FromBlocked value is its global pool, run
/// blocked (channels in the lanes) without the transpose to plain: over axes {2, 3} of
/// [N, C, H, W], or over axis 2 of the [N, C, L] that a lifted 1-D conv's output is reshaped
/// back to (PointNet's max over 4096 points: 13.6 ms of transpose + 4.6 of ReduceMax, 37% of
/// the model at batch 8). The pooled [N, C/c, 1, 1, c] is a view of [N, C, 1, 1] (trivial
/// transform), reshaped to the reduction's output.
bool sink_reduce(ir::Graph& g, ir::Node* n, PackCache& cache) {
    if ((n->op() != "ReduceMax" && n->op() != "ReduceMean") || n->num_outputs() != 1) return false;
    const ir::Value* in = n->input(0);
    if (!in || !in->type().is_static() || in->type().dtype != DType::kFloat32 || !n->output(0)->type().is_static())
        return false;
    const int64_t rank = in->type().rank();
    const ir::Value* map = in;  // the [N, C, H, W] the pool reads
    if (rank == 3) {            // Reshape([N, C, 1, L] -> [N, C, L])
        const ir::Node* r = in->producer();
        if (!r || r->op() != "Reshape" || !r->input(0) || r->input(0)->type().rank() != 4) return false;
        map = r->input(0);
        const Shape m = map->type().static_shape(), v = in->type().static_shape();
        if (m[0] != v[0] || m[1] != v[1] || m[2] != 1 || m[3] != v[2]) return false;
    }
    ir::Value* src = blocked_source(map);
    const std::vector<int64_t> want = rank == 3 ? std::vector<int64_t>{2} : std::vector<int64_t>{2, 3};
    if (!src || !blockable_f32(map, 4) || constant_reduce_axes(n, rank) != want) return false;
    const std::string pool = n->op() == "ReduceMax" ? "KilnGlobalMaxPoolNCHWc" : "KilnGlobalAveragePoolNCHWc";
    ir::Node* pooled = add_inferred_node(g, pool, {src}, {}, 1, n->op());
    pooled->set_name(n->name());
    ir::Value* plain = node1(g, kFromBlocked, {pooled->output(0)});
    ir::Value* y = node1(g, "Reshape", {plain, shape_constant(g, n->output(0)->type().static_shape())});
    if (!replace_value(g, n->output(0), y)) return false;  // leaves dead nodes: the caller erases them
    g.topo_sort();
    erase_tracked(g, n, cache);
    return true;
}

/// Concat along the channels of values whose channel counts are multiples of one block, at
/// least one of them a FromBlocked value: the blocked tensors concatenate along their axis 1
/// (the same layout); NCHW operands get a (shared) ToBlocked.
bool sink_concat(ir::Graph& g, ir::Node* n, PackCache& cache) {
    if (n->op() != "Concat" || !blockable_f32(n->output(0), 4)) return false;
    const int64_t axis = n->attr_int("axis", 0);
    if (axis != 1 && axis != -3) return false;
    int64_t block = 0;
    for (const ir::Value* in : n->inputs()) {
        const ir::Value* src = blocked_source(in);
        if (!src) continue;
        if (block && block_of(src) != block) return false;
        block = block_of(src);
    }
    if (!block) return false;
    std::vector<ir::Value*> ins;
    for (ir::Value* in : n->inputs()) {
        if (!blockable_f32(in, 4) || channels_of(in) % block != 0) return false;
        ir::Value* src = blocked_source(in);
        ins.push_back(src ? src : nullptr);
    }
    for (size_t i = 0; i < ins.size(); ++i)
        if (!ins[i]) ins[i] = to_blocked(g, n->input(i), block, cache);
    return finish(g, n, add_inferred_node(g, "Concat", ins, {{"axis", ir::Attr(int64_t{1})}}, 1, "concat"), cache);
}

/// ToBlocked(FromBlocked(t)) with t's block: t.
bool cancel(ir::Graph& g, ir::Node* n, PackCache& cache) {
    ir::Value* src = blocked_source(n->input(0));
    if (!src || !(src->type() == n->output(0)->type())) return false;
    g.replace_all_uses(n->output(0), src);
    erase_tracked(g, n, cache);
    return true;
}

/// The blocked value a cropping FromBlocked {channels=C} drops padding channels of, or nullptr.
ir::Value* cropped_source(const ir::Value* v) {
    const ir::Node* p = v ? v->producer() : nullptr;
    return p && p->op() == kFromBlocked && p->has_attr("channels") ? p->input(0) : nullptr;
}

/// ToBlocked {block c, padded_channels P}(FromBlocked {channels C}(t)) with t of that blocked
/// type: t. Only padded convs read a padded ToBlocked (rewrite_conv, rewrite_depthwise),
/// and they multiply its channels past C by zero weights; t holds finite values there (a padded
/// conv's zeros, then what sank through the crop: bounded unary ops, sums and products).
bool cancel_padded(ir::Graph& g, ir::Node* n, PackCache& cache) {
    if (!n->has_attr("padded_channels")) return false;
    ir::Value* src = cropped_source(n->input(0));
    if (!src || !(src->type() == n->output(0)->type())) return false;
    g.replace_all_uses(n->output(0), src);
    erase_tracked(g, n, cache);
    return true;
}

/// A unary elementwise op of a cropped value, or Add / Sub / Mul of two cropped values of one
/// padded type and crop, runs on the padded values: op(FromBlocked{C}(t)) -> FromBlocked{C}(op(t)).
/// (No Div: 0 / 0 in the padding would be NaN.)
bool sink_through_crop(ir::Graph& g, ir::Node* n, PackCache& cache) {
    const bool unary = unary_ops().count(n->op()) > 0;
    const bool binary = n->op() == "Add" || n->op() == "Sub" || n->op() == "Mul";
    if ((!unary && !binary) || n->num_outputs() != 1 || !blockable_f32(n->output(0), 4)) return false;
    ir::Value* a = cropped_source(n->input(0));
    if (!a || !(n->input(0)->type() == n->output(0)->type())) return false;
    const int64_t crop = n->input(0)->producer()->attr_int("channels", 0);
    std::vector<ir::Value*> ins = {a};
    if (binary) {
        if (n->num_inputs() != 2) return false;
        ir::Value* b = cropped_source(n->input(1));
        if (!b || !(b->type() == a->type()) || n->input(1)->producer()->attr_int("channels", 0) != crop) return false;
        ins.push_back(b);
    } else {
        for (size_t i = 1; i < n->num_inputs(); ++i) {  // Clip's bounds: scalar constants
            ir::Value* in = n->input(i);
            if (in && (!in->is_constant() || !in->type().is_static() || shape_numel(in->type().static_shape()) != 1))
                return false;
            ins.push_back(in);
        }
    }
    return finish(g, n, add_inferred_node(g, n->op(), ins, n->attrs(), 1, n->op()), cache, crop);
}

/// Erases nodes made dead by the rewrites (their outputs unused and no graph outputs).
void erase_dead(ir::Graph& g) {
    for (bool again = true; again;) {
        again = false;
        std::vector<ir::Node*> nodes = g.nodes();
        for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
            ir::Node* n = *it;
            bool used = false;
            for (const ir::Value* o : n->outputs()) used |= !o->users().empty() || is_graph_output(g, o);
            if (!used) {
                g.erase_node(n);
                again = true;
            }
        }
    }
}

/// A layout transform of a 1x1 map ([N, C/c, 1, 1, c] <-> [N, C, 1, 1]) or in blocks of one
/// channel ([N, C, H, W, 1]) moves nothing: the memory is the same. It becomes a Reshape, a
/// view (the pooled features before a classifier, squeeze-and-excitation's scale, an image
/// into the first conv).
void trivial_transforms_to_views(ir::Graph& g) {
    for (ir::Node* n : g.nodes()) {
        if (n->op() != kToBlocked && n->op() != kFromBlocked) continue;
        if (n->has_attr("padded_channels") || n->has_attr("channels")) continue;  // pads or crops: not a view
        const ir::Value* plain = n->op() == kToBlocked ? n->input(0) : n->output(0);
        const ir::Value* blocked = n->op() == kToBlocked ? n->output(0) : n->input(0);
        if (plain->type().rank() != 4) continue;
        if (!(unit_dim(plain, 2) && unit_dim(plain, 3)) && !unit_dim(blocked, 4)) continue;
        const std::vector<ir::Dim>& to = n->output(0)->type().shape;
        Shape rest;
        for (size_t k = 1; k < to.size(); ++k) rest.push_back(to[k].value);
        ir::Node* r = add_inferred_node(g, "Reshape", {n->input(0), keep_batch_target(g, n->input(0), rest)}, {}, 1, "layout");
        if (!replace_value(g, n->output(0), r->output(0))) {
            g.erase_node(r);
            continue;
        }
        g.topo_sort();
        g.erase_node(n);
    }
}

}  // namespace

bool transform_layout(ir::Graph& g, const PassContext& ctx) {
    bool changed = false;
    PackCache packed;
    for (ir::Node* n : g.nodes())
        if (n->op() == "Conv" && (rewrite_conv(g, n, packed, ctx.nhwc_8_channel_blocks) ||
                                    rewrite_depthwise(g, n, packed, ctx.nhwc_8_channel_blocks))) changed = true;
    if (!changed) return false;
    for (bool again = true; again;) {
        again = false;
        for (ir::Node* n : g.nodes()) {
            const bool done = n->op() == kToBlocked ? cancel(g, n, packed) || cancel_padded(g, n, packed)
                                                    : sink_through(g, n, packed) || sink_pool(g, n, packed) ||
                                                          sink_reduce(g, n, packed) ||
                                                          sink_batch_norm(g, n, packed) ||
                                                          sink_concat(g, n, packed) || sink_through_crop(g, n, packed);
            if (done) {
                again = true;
                break;
            }
        }
    }
    erase_dead(g);
    trivial_transforms_to_views(g);
    g.topo_sort();
    return true;
}

}  // namespace kiln::pass
