#include "pass/transform_layout.h"

#include <map>
#include <set>
#include <tuple>

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

int64_t block_for(int64_t channels) { return channels % 16 == 0 ? 16 : channels % 8 == 0 ? 8 : 0; }

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

bool rewrite_conv(ir::Graph& g, ir::Node* n, PackCache& packed) {
    if (n->num_outputs() != 1 || n->attr_int("group", 1) != 1) return false;
    ir::Value* x = n->input(0);
    ir::Value* w = n->input(1);
    ir::Value* b = n->input(2);
    if (!static_f32(x, 4) || !static_f32(w, 4) || !static_f32(n->output(0), 4) || !is_constant_expr(w)) return false;
    if (b && (!static_f32(b, 1) || !is_constant_expr(b))) return false;
    const Shape ws = w->type().static_shape();
    const int64_t m = ws[0], c = ws[1], ci = block_for(c), co = block_for(m);
    if (ci == 0 || co == 0) return false;
    ir::AttrMap attrs;
    for (const char* k : {"auto_pad", "dilations", "kernel_shape", "pads", "strides"})
        if (n->has_attr(k)) attrs[k] = n->attrs().at(k);
    ir::Value*& xb = packed[{x, ci, -1}];  // one ToBlocked per (value, block)
    if (!xb) xb = node1(g, kToBlocked, {x}, {{"block", ir::Attr(ci)}});
    ir::Value*& wb = packed[{w, ci, co}];
    if (!wb) {
        ir::Value* wr = node1(g, "Reshape", {w, shape_constant(g, {m / co, co, c / ci, ci, ws[2], ws[3]})});
        wb = node1(g, "Transpose", {wr}, {{"perm", ir::Attr(std::vector<int64_t>{0, 2, 4, 5, 3, 1})}});
    }
    std::vector<ir::Value*> ins = {xb, wb};
    if (b) ins.push_back(node1(g, "Reshape", {b, shape_constant(g, {m / co, co})}));
    ir::Node* conv = add_inferred_node(g, "KilnConv2dNCHWc", ins, attrs, 1, "conv");
    conv->set_name(n->name());
    ir::Value* y = node1(g, kFromBlocked, {conv->output(0)});
    if (!replace_value(g, n->output(0), y)) return false;  // leaves dead nodes: the caller erases them
    g.topo_sort();
    erase_tracked(g, n, packed);
    return true;
}

/// The blocked value `v` is the FromBlocked of, or nullptr.
ir::Value* blocked_source(const ir::Value* v) {
    const ir::Node* p = v ? v->producer() : nullptr;
    return p && p->op() == kFromBlocked ? p->input(0) : nullptr;
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
    static const std::set<std::string> ops = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish"};
    return ops;
}

/// Moves the FromBlocked of elementwise node `n`'s operands below it. A binary op's other
/// operand may also be an NCHW value of the output's type: it gets a (shared) ToBlocked.
bool sink_through(ir::Graph& g, ir::Node* n, PackCache& cache) {
    const bool unary = unary_ops().count(n->op()) > 0;
    const bool binary = n->op() == "Add" || n->op() == "Sub" || n->op() == "Mul" || n->op() == "Div";
    if ((!unary && !binary) || n->num_outputs() != 1 || !static_f32(n->output(0), 4)) return false;
    const ir::TensorType& out = n->output(0)->type();
    const int64_t channels = out.static_shape()[1];
    int64_t block = 0;
    size_t tensor_inputs = unary ? 1 : 2;
    if (binary && n->num_inputs() != 2) return false;
    for (size_t i = 0; i < n->num_inputs(); ++i) {
        ir::Value* in = n->input(i);
        ir::Value* src = i < tensor_inputs ? blocked_source(in) : nullptr;
        if (src) {
            const int64_t bl = src->type().static_shape()[4];
            if ((block && bl != block) || !(in->type() == out)) return false;
            block = bl;
        } else if (i < tensor_inputs ? !(in && (per_channel(in, channels) || (binary && in->type() == out)))
                                     : (in && !in->is_constant())) {
            return false;
        }
    }
    if (!block) return false;
    std::vector<ir::Value*> ins;
    for (size_t i = 0; i < n->num_inputs(); ++i) {
        ir::Value* in = n->input(i);
        ir::Value* src = i < tensor_inputs ? blocked_source(in) : nullptr;
        if (src) ins.push_back(src);
        else if (i < tensor_inputs && per_channel(in, channels) == channels)
            ins.push_back(node1(g, "Reshape", {in, shape_constant(g, {channels / block, 1, 1, block})}));
        else if (i < tensor_inputs && !per_channel(in, channels)) {
            ir::Value*& xb = cache[{in, block, -1}];
            if (!xb) xb = node1(g, kToBlocked, {in}, {{"block", ir::Attr(block)}});
            ins.push_back(xb);
        } else ins.push_back(in);
    }
    ir::Node* nb = add_inferred_node(g, n->op(), ins, n->attrs(), 1, n->op());
    nb->set_name(n->name());
    ir::Value* y = node1(g, kFromBlocked, {nb->output(0)});
    if (!replace_value(g, n->output(0), y)) return false;
    g.topo_sort();
    erase_tracked(g, n, cache);
    return true;
}

/// ToBlocked(FromBlocked(t)) with t's block: t.
bool cancel(ir::Graph& g, ir::Node* n, PackCache& cache) {
    ir::Value* src = blocked_source(n->input(0));
    if (!src || !(src->type() == n->output(0)->type())) return false;
    g.replace_all_uses(n->output(0), src);
    erase_tracked(g, n, cache);
    return true;
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

}  // namespace

bool transform_layout(ir::Graph& g, const PassContext&) {
    bool changed = false;
    PackCache packed;
    for (ir::Node* n : g.nodes())
        if (n->op() == "Conv" && rewrite_conv(g, n, packed)) changed = true;
    if (!changed) return false;
    for (bool again = true; again;) {
        again = false;
        for (ir::Node* n : g.nodes()) {
            if (n->op() == kToBlocked ? cancel(g, n, packed) : sink_through(g, n, packed)) {
                again = true;
                break;
            }
        }
    }
    erase_dead(g);
    g.topo_sort();
    return true;
}

}  // namespace kiln::pass
