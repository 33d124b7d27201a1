// The symbolic compile's graph checks (symbolic_compile.h).
#include "compiler/symbolic_compile.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "compiler/compile.h"
#include "ir/dim_expr.h"
#include "op/view_ops.h"
#include "pass/rewrite.h"
#include "runtime/extern_kernel.h"
#include "support/error.h"

namespace kiln::compiler {
namespace {

/// Ops whose compute builds over symbolic shapes (ComputeArgs::out_dims): the elementwise and
/// broadcasting math of op/defs/elementwise.cc, comparisons, logic and Where (masks), Cast,
/// the matrix products (MatMul, and the packed-weight kernel pack_matmul_weights makes of a MatMul or Gemm with a constant B),
/// Softmax / LogSoftmax (along any axis), LayerNormalization over static axes, Transpose,
/// Gather along a static axis (an embedding table), and KilnDimRange (lower_dim_ranges).
const std::set<std::string>& symbolic_ops() {
    static const std::set<std::string> ops = {"Add",  "Sub", "Mul", "Div",  "Pow",  "Relu",   "Sigmoid",
                                              "Tanh", "Exp", "Erf", "Sqrt", "Neg",  "Abs",    "Log",
                                              "Gelu", "Clip", "Cast", "Identity", "MatMul", "KilnMatMulPackedB",
                                              "Softmax", "LogSoftmax", "LayerNormalization", "Transpose", "Gather",
                                              "Reshape", "Flatten", "Squeeze", "Unsqueeze", "KilnDimRange", "KilnReshape",
                                              "Where", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                              "Not", "And", "Or", "Xor", "Max", "Min", "Expand", "KilnExpand", "Concat", "Slice",
                                              "ReduceSum", "ReduceMean", "ReduceL2", "ReduceSumSquare",
                                              "ReduceMax", "ReduceMin",
                                              // float unaries built by op::map_op (sym_compute)
                                              "HardSigmoid", "HardSwish", "LeakyRelu", "Elu", "Selu", "Celu",
                                              "Softplus", "Softsign", "Mish", "Swish", "Reciprocal", "Floor", "Ceil",
                                              "Round", "Sin", "Cos", "ThresholdedRelu",
                                              // window ops with a symbolic compute (op/defs/pool.cc, resize.cc)
                                              "GlobalAveragePool", "Resize", "Upsample", "MaxPool", "AveragePool",
                                              // the layout pass's conversions and blocked pools (op/defs/conv_nchwc.cc)
                                              "KilnLayoutToBlocked", "KilnLayoutFromBlocked", "KilnGlobalAveragePoolNCHWc",
                                              "KilnMaxPoolNCHWc", "KilnAveragePoolNCHWc", "Pad",
                                              // generated over a symbolic batch (compile.cc: generated_symbolic_conv)
                                              "KilnConv2dNCHWc"};
    return ops;
}

/// A symbolic dim of `v` that is not one of `syms` (or "?"), or "".
std::string foreign_dim(const ir::Value* v, const std::set<std::string>& syms) {
    for (const ir::Dim& d : v->type().shape) {
        if (d.is_static() || syms.count(d.symbol)) continue;
        // A dim expression of the inputs' symbols (batch*seq) is bound at run time from them.
        auto p = ir::dim_poly(d);
        bool ours = p.has_value();
        for (const std::string& s : p ? p->symbols() : std::vector<std::string>{}) ours &= syms.count(s) != 0;
        if (!ours) return d.symbol.empty() ? "?" : d.symbol;
    }
    return "";
}

/// Equalities between dims that nodes assume (broadcast_dim's choice of one of two dim
/// expressions; Concat's dims outside its axis), collected by node_refusal.
using Equalities = std::vector<SymbolicEquality>;

/// Every symbolic dim of input `in`, right-aligned against `out`, equals out's dim there: a
/// broadcast never stretches a symbolic dim (which might be 1 at run time). Two different
/// symbolic dims (neither "?") are the same at run time or the model is wrong: recorded in `eq`
/// as an assertion, when given.
bool broadcasts_exactly(const std::vector<ir::Dim>& in, const std::vector<ir::Dim>& out, const ir::Node* n = nullptr,
                        Equalities* eq = nullptr) {
    if (in.size() > out.size()) return false;
    const size_t off = out.size() - in.size();
    for (size_t k = 0; k < in.size(); ++k) {
        const ir::Dim& o = out[off + k];
        if (in[k].is_static() || in[k] == o) continue;
        if (!eq || o.is_static() || !ir::dim_poly(in[k]) || !ir::dim_poly(o)) return false;
        eq->push_back({in[k].symbol, o.symbol, n->describe()});
    }
    return true;
}

/// The axis attribute of `n` normalized against `rank` (-1 when out of range).
int64_t axis_of(const ir::Node* n, int64_t fallback, int rank) {
    int64_t a = n->attr_int("axis", fallback);
    if (a < 0) a += rank;
    return a >= 0 && a < rank ? a : -1;
}

std::string node_refusal(const ir::Node* n, Equalities& eq) {
    if (!symbolic_ops().count(n->op())) return n->describe() + ": " + n->op() + " is not compiled symbolically yet";
    const std::vector<ir::Dim>& out = n->output(0)->type().shape;
    const ir::TensorType& x = n->input(0)->type();
    if (n->op() == "LayerNormalization") {
        // Reduced along static axes only (the axis and after).
        const int64_t axis = axis_of(n, -1, x.rank());
        for (int64_t k = axis; axis >= 0 && k < x.rank(); ++k)
            if (!x.shape[static_cast<size_t>(k)].is_static())
                return n->describe() + ": reduces along the symbolic axis " + std::to_string(k) + " of " + x.str();
        return "";
    }
    if (n->op() == "Transpose" || n->op() == "KilnDimRange") return "";
    if (n->op() == "KilnConv2dNCHWc") {  // a conv oneDNN does not run: generated over a symbolic batch only
        for (const ir::Value* v : {n->input(0), n->output(0)})
            for (size_t k = 1; k < v->type().shape.size(); ++k)
                if (!v->type().shape[k].is_static())
                    return n->describe() + ": a generated convolution over the symbolic dim " + std::to_string(k) +
                           " of " + v->type().str() + " (only the batch may be symbolic)";
        return "";
    }
    if (n->op().rfind("Reduce", 0) == 0) return "";  // along any axes, symbolic ones in symbolic loops  // the input's dims, permuted or one of them
    if (op::is_view_op(n->op())) {
        // Inside a fused kernel (not a view): inserting or removing axes of size 1, or reshaping
        // static trailing dims behind shared leading ones (op/defs/shape.cc computes both).
        auto rest = [](const std::vector<ir::Dim>& dims) {
            std::vector<ir::Dim> r;
            for (const ir::Dim& d : dims)
                if (!(d.is_static() && d.value == 1)) r.push_back(d);
            return r;
        };
        if (rest(x.shape) == rest(out)) return "";
        // Or the same leading dims, then static dims of the same product (split into heads).
        size_t p = 0;
        while (p < x.shape.size() && p < out.size() && x.shape[p] == out[p]) ++p;
        int64_t in_rest = 1, out_rest = 1;
        bool fixed = true;
        for (size_t k = p; k < x.shape.size(); ++k) fixed = fixed && x.shape[k].is_static(), in_rest *= x.shape[k].value;
        for (size_t k = p; k < out.size(); ++k) fixed = fixed && out[k].is_static(), out_rest *= out[k].value;
        if (fixed && in_rest == out_rest) return "";
        return n->describe() + ": a fused reshape of " + x.str() + " to " + n->output(0)->type().str() +
               " needs dim arithmetic";
    }
    if (n->op() == "Gather") {  // along any axis (a symbolic one clamps against the run-time dim)
        const int64_t axis = axis_of(n, 0, x.rank());
        if (axis < 0) return n->describe() + ": axis out of range for " + x.str();
        return "";
    }
    if (n->op() == "Concat") {  // the inputs' dims; the axis's offsets are dim expressions
        const int64_t axis = axis_of(n, 0, static_cast<int>(out.size()));
        for (const ir::Value* in : n->inputs()) {
            std::vector<ir::Dim> others = in->type().shape, want = out;
            if (axis < 0 || others.size() != want.size()) return n->describe() + ": axis out of range";
            others[static_cast<size_t>(axis)] = want[static_cast<size_t>(axis)] = ir::Dim(1);
            if (!broadcasts_exactly(others, want, n, &eq))
                return n->describe() + ": input " + in->type().str() + " differs from " + n->output(0)->type().str() +
                       " outside the axis";
        }
        return "";
    }
    if (n->op() == "Slice") return "";
    if (n->op() == "Pad") {  // constant pads; a symbolic axis padded with a constant or its edge
        for (size_t i = 1; i < n->num_inputs(); ++i)
            if (n->input(i) && !n->input(i)->is_constant())
                return n->describe() + ": its pads or value are computed at run time";
        const std::string mode = n->attr_string("mode", "constant");
        if (mode == "constant" || mode == "edge") return "";
        const Tensor& pads = n->input(1)->constant();
        const bool all_axes = n->num_inputs() < 4 || !n->input(3);
        for (size_t k = 0; all_axes && k < x.shape.size(); ++k)
            if (!x.shape[k].is_static() && (pads.get_i64(static_cast<int64_t>(k)) != 0 ||
                                            pads.get_i64(static_cast<int64_t>(k + x.shape.size())) != 0))
                return n->describe() + ": mode " + mode + " along a symbolic axis";
        return all_axes ? "" : n->describe() + ": mode " + mode + " with axes";
    }
    if (n->op() == "MatMul" || n->op() == "KilnMatMulPackedB") {
        // Batch dims (all but the last two) of each operand must equal the output's (the packed
        // kernel's B is a constant [blocks, K, block] panel: no batch dims).
        const size_t operands = n->op() == "MatMul" ? 2 : 1;
        for (size_t i = 0; i < std::min<size_t>(operands, n->num_inputs()); ++i) {
            const auto& s = n->input(i)->type().shape;
            if (s.size() < 2 || out.size() < 2) continue;
            std::vector<ir::Dim> batch(s.begin(), s.end() - 2), obatch(out.begin(), out.end() - 2);
            if (!broadcasts_exactly(batch, obatch))
                return n->describe() + ": operand batch dims " + n->input(i)->type().str() + " broadcast symbolically";
        }
        if (n->num_inputs() > 2 && n->input(2) && !broadcasts_exactly(n->input(2)->type().shape, out))
            return n->describe() + ": C broadcasts a symbolic dim";
        return "";
    }
    static const std::set<std::string> own_dims = {"Resize", "Upsample", "GlobalAveragePool", "MaxPool", "AveragePool",
                                                   "KilnLayoutToBlocked",
                                                   "KilnLayoutFromBlocked", "KilnGlobalAveragePoolNCHWc",
                                                   "KilnMaxPoolNCHWc", "KilnAveragePoolNCHWc"};
    if (own_dims.count(n->op())) return "";  // window and layout ops: dims of their own (op/defs)
    for (const ir::Value* in : n->inputs())
        if (in && !broadcasts_exactly(in->type().shape, out, n, &eq))
            return n->describe() + ": input " + in->type().str() + " broadcasts a symbolic dim to " +
                   n->output(0)->type().str();
    return "";
}

/// Static product and sorted symbols of a shape.
std::pair<int64_t, std::vector<std::string>> factors(const ir::TensorType& t) {
    int64_t p = 1;
    std::vector<std::string> syms;
    for (const ir::Dim& d : t.shape) {
        if (d.is_static()) {
            p *= d.value;
            continue;
        }
        // A product dim (batch*seq, 2*seq) contributes its factors; a sum stays one factor.
        auto poly = ir::dim_poly(d);
        const std::string text = poly ? poly->str() : d.symbol;
        if (!poly || text.find_first_of("+-") != std::string::npos) {
            syms.push_back(d.symbol);
            continue;
        }
        size_t at = 0;
        while (at <= text.size()) {
            const size_t star = std::min(text.find('*', at), text.size());
            const std::string f = text.substr(at, star - at);
            if (!f.empty() && std::isdigit(static_cast<unsigned char>(f[0]))) p *= std::stoll(f);
            else syms.push_back(f);
            at = star + 1;
        }
    }
    std::sort(syms.begin(), syms.end());
    return {p, syms};
}

}  // namespace

namespace {

/// A constant scalar (or one-element tensor) of integer dtype equal to `want`.
bool constant_int_is(const ir::Value* v, int64_t want) {
    return v && v->is_constant() && v->constant().numel() == 1 && dtype_is_int(v->constant().dtype()) &&
           v->constant().get_i64(0) == want;
}

/// (x, axis) when `limit` is Gather(Shape(x), k) with a constant scalar k and x's dim k symbolic.
std::optional<std::pair<ir::Value*, int64_t>> shape_dim_of(const ir::Value* limit) {
    const ir::Node* gather = limit ? limit->producer() : nullptr;
    if (!gather || gather->op() != "Gather" || gather->num_inputs() != 2 || gather->attr_int("axis", 0) != 0)
        return std::nullopt;
    const ir::Value* k = gather->input(1);
    const ir::Node* shape = gather->input(0) ? gather->input(0)->producer() : nullptr;
    if (!shape || shape->op() != "Shape" || !k->is_constant() || k->constant().numel() != 1 ||
        !k->type().shape.empty() || !dtype_is_int(k->constant().dtype()))
        return std::nullopt;
    ir::Value* x = shape->input(0);
    const int64_t rank = x->type().rank();
    // Shape's start/end (opset 15) pick dims [start, end) of x, clamped; k indexes those.
    auto clamp = [&](int64_t d) { return std::clamp<int64_t>(d < 0 ? d + rank : d, 0, rank); };
    const int64_t start = clamp(shape->attr_int("start", 0)), end = clamp(shape->attr_int("end", rank));
    int64_t axis = k->constant().get_i64(0);
    if (axis < 0) axis += end - start;
    if (axis < 0 || axis >= end - start) return std::nullopt;
    axis += start;
    if (x->type().shape[static_cast<size_t>(axis)].is_static()) return std::nullopt;
    return std::make_pair(x, axis);
}

/// Erases `n` when nothing reads its outputs, then its inputs' producers likewise.
void erase_if_dead(ir::Graph& g, ir::Node* n) {
    if (!n) return;
    for (const ir::Value* o : n->outputs()) {
        if (!o->users().empty()) return;
        for (const ir::Value* out : g.outputs())
            if (out == o) return;
    }
    std::vector<ir::Node*> producers;
    for (const ir::Value* in : n->inputs())
        if (in && in->producer()) producers.push_back(in->producer());
    g.erase_node(n);
    for (ir::Node* p : producers) erase_if_dead(g, p);
}

}  // namespace

std::string symbolic_prefilter(const ir::Graph& g) {
    static const std::set<std::string> never = {
        "ConvInteger", "QLinearConv",
        "GlobalMaxPool", "LpPool", "MaxUnpool", "TopK",
        "NonMaxSuppression", "RoiAlign", "InstanceNormalization", "DepthToSpace",
        "SpaceToDepth", "GridSample", "Col2Im", "DeformConv"};
    for (const ir::Node* n : g.nodes()) {
        // RNN, GRU and LSTM run symbolically on the fused recurrent kernel (oneDNN builds only).
        const bool recurrent = n->op() == "RNN" || n->op() == "GRU" || n->op() == "LSTM";
        if (!never.count(n->op()) && !(recurrent && !runtime::have_dnnl())) continue;
        for (const ir::Value* in : n->inputs())
            if (in && !in->type().is_static())
                return n->describe() + ": " + n->op() + " is not compiled symbolically yet";
    }
    return "";
}

int name_unknown_input_dims(ir::Graph& g) {
    std::set<std::string> taken;
    for (const ir::Value* in : g.inputs())
        for (const ir::Dim& d : in->type().shape)
            if (!d.is_static()) taken.insert(d.symbol);
    int named = 0;
    for (ir::Value* in : g.inputs()) {
        ir::TensorType t = in->type();
        bool changed = false;
        for (size_t k = 0; k < t.shape.size(); ++k) {
            ir::Dim& d = t.shape[k];
            if (d.is_static() || (!d.symbol.empty() && d.symbol != "?")) continue;
            // An identifier (support/dim_poly.h), so that expressions of it parse.
            std::string base;
            for (char c : in->name()) base += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
            if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0]))) base = "in_" + base;
            std::string name = base + "_dim" + std::to_string(k);
            while (taken.count(name)) name += "_";
            taken.insert(name);
            d = ir::Dim::sym(name);
            changed = true;
            ++named;
        }
        if (changed) in->set_type(t);
    }
    return named;
}

int collapse_softmax_coercions(ir::Graph& g) {
    int collapsed = 0;
    for (ir::Node* r : g.nodes()) {
        if ((r->op() != "Reshape" && r->op() != "KilnReshape") || !r->input(0)) continue;
        ir::Node* sm = r->input(0)->producer();
        if (!sm || (sm->op() != "Softmax" && sm->op() != "LogSoftmax" && sm->op() != "Hardmax") ||
            sm->output(0)->users().size() != 1 || sm->attr_int("axis", -1) != -1)
            continue;
        ir::Node* flat = sm->input(0)->producer();
        if (!flat || flat->op() != "Flatten" || flat->output(0)->users().size() != 1) continue;
        ir::Value* x = flat->input(0);
        const int rank = x->type().rank();
        int64_t axis = flat->attr_int("axis", 1);
        if (axis < 0) axis += rank;
        if (rank < 1 || axis != rank - 1 || !(r->output(0)->type() == x->type())) continue;
        ir::Node* one = g.add_node(sm->op(), {x}, {{"axis", ir::Attr(int64_t{-1})}}, {x->type()}, {}, sm->name());
        pass::replace_keeping_output_name(g, r->output(0), one->output(0));
        erase_if_dead(g, r);
        ++collapsed;
    }
    if (collapsed) g.topo_sort();
    return collapsed;
}

int decompose_batch_norms(ir::Graph& g) {
    int rewritten = 0;
    for (ir::Node* n : g.nodes()) {
        if (n->op() != "BatchNormalization" || n->num_outputs() != 1 || n->num_inputs() != 5 ||
            n->attr_int("training_mode", 0) != 0 || n->input(0)->type().dtype != DType::kFloat32 ||
            n->input(0)->type().rank() < 2 || n->input(0)->type().is_static())
            continue;
        const ir::Node* p = n->input(0)->producer();
        if (p && (p->op() == "Conv" || p->op() == "Gemm")) continue;  // fold-batch-norm folds it into the weights
        bool constants = true;
        for (size_t i = 1; i < 5; ++i) constants &= n->input(i)->is_constant() && n->input(i)->type().dtype == DType::kFloat32;
        if (!constants) continue;
        const Tensor &scale = n->input(1)->constant(), &bias = n->input(2)->constant();
        const Tensor &mean = n->input(3)->constant(), &var = n->input(4)->constant();
        const int64_t c = scale.numel();
        if (bias.numel() != c || mean.numel() != c || var.numel() != c) continue;
        // y = x * s + t, s = scale / sqrt(var + eps), t = bias - mean * s, per channel (axis 1).
        Shape shape(static_cast<size_t>(n->input(0)->type().rank() - 1), 1);
        shape[0] = c;
        Tensor s(DType::kFloat32, shape), t(DType::kFloat32, shape);
        const double eps = n->attr_float("epsilon", 1e-5);
        for (int64_t k = 0; k < c; ++k) {
            const double sk = scale.get_f64(k) / std::sqrt(var.get_f64(k) + eps);
            s.set_f64(k, sk);
            t.set_f64(k, bias.get_f64(k) - mean.get_f64(k) * sk);
        }
        ir::Node* mul = pass::add_inferred_node(g, "Mul", {n->input(0), pass::add_constant_like(g, n->name() + "_scale", s)},
                                                {}, 1, n->name());
        ir::Node* add = pass::add_inferred_node(g, "Add", {mul->output(0), pass::add_constant_like(g, n->name() + "_shift", t)},
                                                {}, 1, n->name());
        pass::replace_keeping_output_name(g, n->output(0), add->output(0));
        erase_if_dead(g, n);
        ++rewritten;
    }
    if (rewritten) g.topo_sort();
    return rewritten;
}

int lower_dim_ranges(ir::Graph& g) {
    int rewritten = 0;
    for (ir::Node* n : g.nodes()) {
        if (n->op() != "Range" || n->num_inputs() != 3 || !constant_int_is(n->input(0), 0) ||
            !constant_int_is(n->input(2), 1) || n->input(0)->type().dtype != DType::kInt64)
            continue;
        const auto dim = shape_dim_of(n->input(1));
        if (!dim) continue;
        const ir::TensorType t{DType::kInt64, {dim->first->type().shape[static_cast<size_t>(dim->second)]}};
        ir::Node* r = g.add_node("KilnDimRange", {dim->first}, {{"axis", ir::Attr(dim->second)}}, {t}, {},
                                 n->name());
        pass::replace_keeping_output_name(g, n->output(0), r->output(0));
        erase_if_dead(g, n);
        ++rewritten;
    }
    if (rewritten) g.topo_sort();
    return rewritten;
}

void bind_known_dims(ir::Graph& g, const std::map<std::string, int64_t>& dims) {
    for (ir::Value* in : g.inputs()) {
        ir::TensorType t = in->type();
        for (ir::Dim& d : t.shape) {
            if (d.is_static()) continue;
            auto it = dims.find(d.symbol);
            if (it == dims.end()) continue;
            KILN_CHECK(it->second >= 0, kInvalidArgument)
                << "dimension '" << d.symbol << "' must be >= 0, got " << it->second;
            d = ir::Dim(it->second);
        }
        in->set_type(t);
    }
}

SymbolicDims symbolic_dims_of(const ir::Graph& g) {
    SymbolicDims dims;
    for (const ir::Value* in : g.inputs())
        for (const ir::Dim& d : in->type().shape)
            if (!d.is_static() && !d.symbol.empty() && d.symbol != "?") dims.add(d.symbol);
    return dims;
}

bool is_symbolic_view(const ir::Node* n, const ir::Graph& g) {
    if (!op::is_view_op(n->op()) || n->num_outputs() != 1 || n->num_inputs() < 1 || !n->input(0)) return false;
    const ir::TensorType& in = n->input(0)->type();
    const ir::TensorType& out = n->output(0)->type();
    if (in.dtype != out.dtype || in.dtype == DType::kString || factors(in) != factors(out)) return false;
    for (const ir::Value* o : g.outputs())  // a graph output gets a buffer of its own
        if (o == n->output(0)) return false;
    return true;
}

std::string symbolic_refusal(const ir::Graph& g, const std::vector<KernelUnit>& units,
                             const std::set<const ir::Node*>& views, const std::set<const ir::Node*>& externs,
                             std::vector<SymbolicEquality>* equalities) {
    Equalities eq;
    const SymbolicDims dims = symbolic_dims_of(g);
    if (dims.names.empty()) return "no graph input has a symbolic dimension";
    const std::set<std::string> syms(dims.names.begin(), dims.names.end());
    for (const ir::Value* in : g.inputs())
        if (std::string d = foreign_dim(in, syms); !d.empty())
            return "graph input '" + in->name() + "' has an unnamed dimension " + in->type().str();
    for (const KernelUnit& unit : units) {
        for (const ir::Node* n : unit.nodes) {
            for (const ir::Value* o : n->outputs())
                if (std::string d = foreign_dim(o, syms); !d.empty())
                    return n->describe() + ": output " + o->type().str() + " has dimension '" + d +
                           "', not a symbol of the inputs (dim arithmetic is not compiled symbolically yet)";
            if (views.count(n) || externs.count(unit.nodes.front())) continue;
            bool all_static = true;
            for (const ir::Value* v : n->inputs()) all_static &= !v || v->type().is_static();
            for (const ir::Value* v : n->outputs()) all_static &= v->type().is_static();
            if (all_static) continue;  // the op's static compute serves
            if (std::string why = node_refusal(n, eq); !why.empty()) return why;
        }
    }
    if (equalities) *equalities = std::move(eq);
    return "";
}

namespace {

/// Every node output's symbolic dims through `f` (graph inputs keep theirs).
void rewrite_symbolic_dims(ir::Graph& g, const std::function<ir::Dim(const ir::Dim&)>& f) {
    for (ir::Node* n : g.nodes())
        for (ir::Value* v : n->outputs()) {
            ir::TensorType t = v->type();
            bool changed = false;
            for (ir::Dim& d : t.shape) {
                if (d.is_static()) continue;
                ir::Dim e = f(d);
                changed |= !(e == d);
                d = std::move(e);
            }
            if (changed) v->set_type(t);
        }
}

}  // namespace

std::vector<SymbolicEquality> pin_unit_dims(ir::Graph& g) {
    std::vector<SymbolicEquality> pinned;
    std::set<std::string> ones, inputs;
    for (const ir::Value* in : g.inputs())
        for (const ir::Dim& d : in->type().shape)
            if (!d.is_static()) inputs.insert(d.symbol);
    auto pin = [&](const ir::Dim& d, const ir::Node* n) {  // an atom: a floor division of the inputs' dims
        auto p = d.is_static() ? std::nullopt : ir::dim_poly(d);
        if (!p || !p->is_symbol() || inputs.count(d.symbol)) return;
        if (ones.insert(d.symbol).second) pinned.push_back({d.symbol, "1", n->describe()});
    };
    for (const ir::Node* n : g.nodes()) {
        if (n->op() == "Squeeze" && n->num_inputs() > 1 && n->input(1) && n->input(1)->is_constant()) {
            const std::vector<ir::Dim>& x = n->input(0)->type().shape;
            const Tensor& axes = n->input(1)->constant();
            for (int64_t i = 0; i < axes.numel(); ++i) {
                int64_t a = axes.get_i64(i);
                if (a < 0) a += static_cast<int64_t>(x.size());
                if (a >= 0 && a < static_cast<int64_t>(x.size())) pin(x[static_cast<size_t>(a)], n);
            }
        }
        if (n->op() == "KilnReshape" && n->has_attr("ones"))
            for (const std::string& t : std::get<std::vector<std::string>>(n->attrs().at("ones"))) pin(ir::Dim::sym(t), n);
    }
    if (ones.empty()) return pinned;
    rewrite_symbolic_dims(g, [&](const ir::Dim& d) {
        auto p = ir::dim_poly(d);
        if (!p) return d;
        DimPoly q = *p;  // the atom as a factor of products too (floor((W+3)/8)*floor((H+15)/48))
        for (const std::string& one : ones) q = q.substitute(one, DimPoly::constant(1));
        return q == *p ? d : *ir::dim_of_poly(q);
    });
    return pinned;
}

void unify_equal_dims(ir::Graph& g, const std::vector<SymbolicEquality>& equalities) {
    std::map<std::string, std::string> parent;
    std::function<std::string(const std::string&)> find = [&](const std::string& d) -> std::string {
        auto it = parent.find(d);
        return it == parent.end() || it->second == d ? d : (it->second = find(it->second));
    };
    // The name a class keeps: a single atom (an input symbol, which graph inputs keep, or a floor
    // atom), else the shortest text.
    auto better = [](const std::string& a, const std::string& b) {
        const bool pa = DimPoly::parse(a) && DimPoly::parse(a)->is_symbol(), pb = DimPoly::parse(b) && DimPoly::parse(b)->is_symbol();
        if (pa != pb) return pa;
        return a.size() != b.size() ? a.size() < b.size() : a < b;
    };
    for (const SymbolicEquality& e : equalities) {
        const std::string ra = find(e.a), rb = find(e.b);
        if (ra == rb) continue;
        if (better(ra, rb)) parent[rb] = ra;
        else parent[ra] = rb;
    }
    if (parent.empty()) return;
    rewrite_symbolic_dims(g, [&](const ir::Dim& d) {
        const std::string r = find(d.symbol);
        return r == d.symbol ? d : ir::Dim::sym(r);
    });
}

}  // namespace kiln::compiler
