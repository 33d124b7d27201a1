// fold_shape_values and the shape-value rules (shape_values.h).
#include "compiler/shape_values.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#include "compiler/fold_constant_node.h"
#include "ir/dim_expr.h"
#include "op/registry.h"
#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::compiler {
namespace {

constexpr int64_t kMaxElements = 64;  // a shape value is a short vector

using ValueOf = std::function<std::optional<ShapeValue>(const ir::Value*)>;

bool int_like(DType t) { return dtype_is_int(t) || t == DType::kBool; }

std::optional<ShapeValue> from_constant(const ir::Value* v) {
    if (!v || !v->is_constant()) return std::nullopt;
    const Tensor& t = v->constant();
    if (!int_like(t.dtype()) || t.numel() > kMaxElements || t.shape().size() > 1) return std::nullopt;
    ShapeValue s{t.dtype(), t.shape(), {}};
    for (int64_t i = 0; i < t.numel(); ++i) s.v.push_back(DimPoly::constant(t.get_i64(i)));
    return s;
}

/// The constant integers of a shape value (nullopt if any is symbolic).
std::optional<std::vector<int64_t>> ints_of(const std::optional<ShapeValue>& s) {
    if (!s || !s->is_constant()) return std::nullopt;
    std::vector<int64_t> out;
    for (const DimPoly& p : s->v) out.push_back(p.constant_value());
    return out;
}

/// A polynomial that is >= 0 whenever its symbols are (no negative coefficient).
bool nonnegative(const DimPoly& p) {
    if (p.is_constant()) return p.constant_value() >= 0;
    return p.str().find('-') == std::string::npos;
}

std::optional<ShapeValue> shape_of(const ir::Node& n) {
    const ir::TensorType& t = n.input(0)->type();
    const int64_t rank = t.rank();
    auto clamp = [&](int64_t d) { return std::clamp<int64_t>(d < 0 ? d + rank : d, 0, rank); };
    const int64_t start = clamp(n.attr_int("start", 0)), end = clamp(n.attr_int("end", rank));
    ShapeValue s{DType::kInt64, {std::max<int64_t>(end - start, 0)}, {}};
    for (int64_t k = start; k < end; ++k) {
        auto p = ir::dim_poly(t.shape[static_cast<size_t>(k)]);
        if (!p) return std::nullopt;
        s.v.push_back(*p);
    }
    return s;
}

/// ONNX Slice of a 1-D value with constant operands.
std::optional<ShapeValue> slice_1d(const ir::Node& n, const ShapeValue& x, const ValueOf& of) {
    auto starts = ints_of(of(n.input(1))), ends = ints_of(of(n.input(2)));
    auto axes = n.input(3) ? ints_of(of(n.input(3))) : std::vector<int64_t>{0};
    auto steps = n.input(4) ? ints_of(of(n.input(4))) : std::vector<int64_t>{1};
    if (!starts || !ends || !axes || !steps || starts->size() != 1 || ends->size() != 1 || axes->size() != 1 ||
        steps->size() != 1 || ((*axes)[0] != 0 && (*axes)[0] != -1) || (*steps)[0] == 0)
        return std::nullopt;
    const int64_t len = static_cast<int64_t>(x.v.size()), step = (*steps)[0];
    auto norm = [&](int64_t i, int64_t lo, int64_t hi) { return std::clamp<int64_t>(i < 0 ? i + len : i, lo, hi); };
    const int64_t b = step > 0 ? norm((*starts)[0], 0, len) : norm((*starts)[0], -1, len - 1);
    const int64_t e = step > 0 ? norm((*ends)[0], 0, len) : norm((*ends)[0], -1, len - 1);
    ShapeValue s{x.dtype, {0}, {}};
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) s.v.push_back(x.v[static_cast<size_t>(i)]);
    s.shape[0] = static_cast<int64_t>(s.v.size());
    return s;
}

/// Elementwise over operands of numel 1 or N (N = the output's numel).
std::optional<ShapeValue> elementwise(const ir::Node& n, const std::vector<ShapeValue>& args, DType dt,
                                      const std::function<std::optional<DimPoly>(const std::vector<DimPoly>&)>& f) {
    const ir::TensorType& ot = n.output(0)->type();
    if (!ot.is_static() || ot.rank() > 1) return std::nullopt;
    const int64_t count = shape_numel(ot.static_shape());
    ShapeValue s{dt, ot.static_shape(), {}};
    for (int64_t i = 0; i < count; ++i) {
        std::vector<DimPoly> xs;
        for (const ShapeValue& a : args) {
            const auto size = static_cast<int64_t>(a.v.size());
            if (size != 1 && size != count) return std::nullopt;
            xs.push_back(a.v[static_cast<size_t>(size == 1 ? 0 : i)]);
        }
        auto r = f(xs);
        if (!r) return std::nullopt;
        s.v.push_back(*r);
    }
    return s;
}

std::optional<DimPoly> arith(const std::string& op, const DimPoly& a, const DimPoly& b) {
    if (op == "Add") return a + b;
    if (op == "Sub") return a - b;
    if (op == "Mul") return a * b;
    if (a.is_constant() && b.is_constant()) {  // integer Div truncates (ONNX Runtime)
        if (b.constant_value() == 0) return std::nullopt;
        return DimPoly::constant(a.constant_value() / b.constant_value());
    }
    return a.div_exact(b);
}

std::optional<DimPoly> equal(const DimPoly& a, const DimPoly& b) {
    if (a == b) return DimPoly::constant(1);
    if (a.is_constant() && b.is_constant()) return DimPoly::constant(0);
    // A dim is never negative: `dim == -1` (Expand's and Reshape's conventions) is false.
    const DimPoly& c = a.is_constant() ? a : b;
    const DimPoly& s = a.is_constant() ? b : a;
    if (c.is_constant() && c.constant_value() < 0 && nonnegative(s)) return DimPoly::constant(0);
    return std::nullopt;
}

}  // namespace

bool ShapeValue::is_constant() const {
    return std::all_of(v.begin(), v.end(), [](const DimPoly& p) { return p.is_constant(); });
}

std::optional<ShapeValue> eval_shape_value(const ir::Node& n, const ValueOf& of) {
    const std::string& op = n.op();
    if (n.num_outputs() != 1 || !n.input(0)) return std::nullopt;
    if (op == "Shape") return shape_of(n);
    const std::optional<ShapeValue> x = of(n.input(0));
    if (!x) return std::nullopt;
    if (op == "Gather") {
        auto idx = ints_of(of(n.input(1)));
        if (!idx || x->shape.size() != 1 || n.attr_int("axis", 0) != 0) return std::nullopt;
        ShapeValue s{x->dtype, n.input(1)->type().is_static() ? n.input(1)->type().static_shape() : Shape{}, {}};
        for (int64_t k : *idx) {
            const auto len = static_cast<int64_t>(x->v.size());
            if (k < 0) k += len;
            if (k < 0 || k >= len) return std::nullopt;
            s.v.push_back(x->v[static_cast<size_t>(k)]);
        }
        return s;
    }
    if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Flatten" || op == "Identity") {
        const ir::TensorType& ot = n.output(0)->type();
        if (!ot.is_static() || ot.rank() > 1 || shape_numel(ot.static_shape()) != static_cast<int64_t>(x->v.size()))
            return std::nullopt;
        return ShapeValue{x->dtype, ot.static_shape(), x->v};
    }
    if (op == "Concat") {
        ShapeValue s{x->dtype, {0}, {}};
        for (const ir::Value* in : n.inputs()) {
            auto a = of(in);
            if (!a || a->shape.size() != 1) return std::nullopt;
            s.v.insert(s.v.end(), a->v.begin(), a->v.end());
        }
        s.shape[0] = static_cast<int64_t>(s.v.size());
        return s;
    }
    if (op == "Slice") return x->shape.size() == 1 ? slice_1d(n, *x, of) : std::nullopt;
    if (op == "Cast") {
        const DType to = n.output(0)->type().dtype;
        if (!dtype_is_int(to)) return std::nullopt;
        return ShapeValue{to, x->shape, x->v};
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal") {
        auto y = of(n.input(1));
        if (!y || !dtype_is_int(x->dtype)) return std::nullopt;
        const DType dt = op == "Equal" ? DType::kBool : x->dtype;
        return elementwise(n, {*x, *y}, dt, [&](const std::vector<DimPoly>& a) {
            return op == "Equal" ? equal(a[0], a[1]) : arith(op, a[0], a[1]);
        });
    }
    if (op == "Where") {
        auto a = of(n.input(1)), b = of(n.input(2));
        if (!a || !b || !x->is_constant()) return std::nullopt;
        return elementwise(n, {*x, *a, *b}, a->dtype, [](const std::vector<DimPoly>& c) {
            return std::optional<DimPoly>(c[0].constant_value() != 0 ? c[1] : c[2]);
        });
    }
    return std::nullopt;
}

namespace {

ir::Value* make_constant(ir::Graph& g, const ShapeValue& s) {
    Tensor t(s.dtype, s.shape);
    for (size_t i = 0; i < s.v.size(); ++i) t.set_f64(static_cast<int64_t>(i), static_cast<double>(s.v[i].constant_value()));
    if (s.dtype == DType::kInt64)  // exact beyond 2^53
        for (size_t i = 0; i < s.v.size(); ++i) t.data_as<int64_t>()[i] = s.v[i].constant_value();
    return g.add_constant(g.fresh_name("shape_value"), std::move(t));
}

ir::Value* ints_constant(ir::Graph& g, const std::vector<int64_t>& v) {
    ShapeValue s{DType::kInt64, {static_cast<int64_t>(v.size())}, {}};
    for (int64_t x : v) s.v.push_back(DimPoly::constant(x));
    return make_constant(g, s);
}

struct Rewriter {
    ir::Graph& g;
    const ValueOf& of;
    std::map<std::string, std::pair<ir::Value*, int64_t>> source;  // plain symbol -> an input axis giving it

    /// Reshape(x, s) / Expand(x, s) with a symbolic s -> a constant s (0 / -1, or 1).
    bool constant_target(ir::Node* n) {
        auto s = of(n->input(1));
        if (!s || s->is_constant() || s->shape.size() != 1) return false;
        const std::vector<ir::Dim>& xs = n->input(0)->type().shape;
        const bool reshape = n->op() == "Reshape";
        if (reshape && n->attr_int("allowzero", 0) != 0) return false;
        std::vector<int64_t> spec;
        bool inferred = false;
        for (size_t i = 0; i < s->v.size(); ++i) {
            const DimPoly& p = s->v[i];
            if (p.is_constant()) {
                spec.push_back(p.constant_value());
                inferred |= reshape && p.constant_value() == -1;
                continue;
            }
            // Expand aligns right, Reshape's 0 copies the dim at the same position.
            const size_t off = reshape ? 0 : s->v.size() - std::min(s->v.size(), xs.size());
            const bool within = reshape ? i < xs.size() : i >= off && i - off < xs.size();
            auto xd = within ? ir::dim_poly(xs[i - off]) : std::nullopt;
            if (xd && *xd == p) {
                spec.push_back(reshape ? 0 : 1);
            } else if (reshape && !inferred) {
                spec.push_back(-1), inferred = true;
            } else {
                return false;
            }
        }
        ir::Value* old = n->input(1);
        n->set_input(1, ints_constant(g, spec));
        try {
            op::infer_node(*n);
        } catch (const Error&) {
            n->set_input(1, old);
            return false;
        }
        // The target the model computes must be what inference now gives.
        const std::vector<ir::Dim>& out = n->output(0)->type().shape;
        bool same = out.size() == s->v.size() || !reshape;
        for (size_t i = 0; same && reshape && i < out.size(); ++i) {
            auto d = ir::dim_poly(out[i]);
            same = d && (s->v[i].is_constant() && s->v[i].constant_value() <= 0 ? true : *d == s->v[i]);
        }
        if (!same) n->set_input(1, old);
        return same;
    }

    /// Reshape(x, s) whose s no constant can say (two symbolic entries that are not x's dims
    /// there: [b*s, 16] -> [b, s, 16]) -> KilnReshape(x) {dims = s as text}.
    /// The computed dim (a floor atom, no input symbol) that total / known is, when it is one: a
    /// reshape that is right only where it is 1 (PP-OCR's recogniser folds a height its convs
    /// take to 1 at the 48 rows it is fed); else empty.
    std::vector<std::string> unit_factors(const DimPoly& total, const DimPoly& known) const {
        auto q = total.div_exact(known);
        if (!q || !q->is_symbol() || source.count(q->str())) return {};
        return {q->str()};
    }

    ir::Node* dims_reshape(ir::Node* n) {
        auto s = of(n->input(1));
        if (!s || s->shape.size() != 1 || n->attr_int("allowzero", 0) != 0) return nullptr;
        const std::vector<ir::Dim>& xs = n->input(0)->type().shape;
        std::vector<DimPoly> dims = s->v;
        int infer_at = -1;
        DimPoly known = DimPoly::constant(1);
        for (size_t i = 0; i < dims.size(); ++i) {
            const bool c = dims[i].is_constant();
            if (c && dims[i].constant_value() == 0) {  // copies x's dim i
                auto xd = i < xs.size() ? ir::dim_poly(xs[i]) : std::nullopt;
                if (!xd) return nullptr;
                dims[i] = *xd;
            } else if (c && dims[i].constant_value() == -1) {
                if (infer_at >= 0) return nullptr;
                infer_at = static_cast<int>(i);
                continue;
            } else if (c && dims[i].constant_value() < 0) {
                return nullptr;
            }
            known = known * dims[i];
        }
        auto total = ir::dims_poly_product(xs);
        if (!total) return nullptr;
        if (infer_at >= 0) {
            auto q = total->div_exact(known);
            if (!q) return nullptr;
            dims[static_cast<size_t>(infer_at)] = *q;
        }
        std::vector<std::string> ones;  // a computed input dim the target leaves out: it must be 1
        if (infer_at < 0 && !(*total == known)) {
            ones = unit_factors(*total, known);
            if (ones.empty()) return nullptr;
        }
        std::vector<std::string> texts;
        for (const DimPoly& p : dims) texts.push_back(p.str());
        ir::AttrMap attrs = {{"dims", ir::Attr(texts)}};
        if (!ones.empty()) attrs["ones"] = ir::Attr(ones);
        ir::Node* r = g.add_node("KilnReshape", {n->input(0)}, attrs, {n->output(0)->type()}, {}, n->name());
        return swap(n, r);
    }

    /// Expand(x, s) whose s no constant can say (x's 1 stretched to a symbolic dim), and
    /// ConstantOfShape(s) with a symbolic s -> KilnExpand(x or the fill value) {dims = s as text}.
    ir::Node* dims_expand(ir::Node* n) {
        const bool fill = n->op() == "ConstantOfShape";
        auto s = of(n->input(fill ? 0 : 1));
        if (!s || s->is_constant() || s->shape.size() != 1) return nullptr;
        std::vector<std::string> texts;
        for (const DimPoly& p : s->v) {
            if (p.is_constant() && p.constant_value() < 0) return nullptr;
            texts.push_back(p.str());
        }
        ir::Value* x = n->input(0);
        if (fill) {  // the fill value (ConstantOfShape's `value`, default f32 0) as a scalar
            Tensor v(DType::kFloat32, Shape{});
            v.set_f64(0, 0.0);
            if (n->has_attr("value")) {
                const Tensor& a = std::get<Tensor>(n->attrs().at("value"));
                if (a.numel() != 1) return nullptr;
                v = Tensor(a.dtype(), Shape{});
                std::memcpy(v.data(), a.data(), dtype_size(a.dtype()));
            }
            x = g.add_constant(g.fresh_name("fill"), std::move(v));
        }
        ir::Node* r = g.add_node("KilnExpand", {x}, {{"dims", ir::Attr(texts)}}, {n->output(0)->type()}, {}, n->name());
        return swap(n, r);
    }

    /// The node computing 0, 1, ..., d-1 for a plain symbol d of an input (nullptr if none).
    /// `limit` > 0: d may not exceed it (KilnDimRange's limit, checked at run time).
    ir::Node* dim_range(const DimPoly& d, const std::string& name, int64_t limit = 0) {
        if (!d.is_symbol()) return nullptr;
        auto it = source.find(d.symbols()[0]);
        if (it == source.end()) return nullptr;
        const ir::TensorType t{DType::kInt64, {it->second.first->type().shape[static_cast<size_t>(it->second.second)]}};
        ir::AttrMap attrs{{"axis", ir::Attr(it->second.second)}};
        if (limit > 0) attrs["limit"] = ir::Attr(limit);
        return g.add_node("KilnDimRange", {it->second.first}, attrs, {t}, {}, name);
    }

    /// Range(0, d, 1) -> KilnDimRange; Slice(data, 0, d) along one axis -> Gather(data, range).
    ir::Node* replace(ir::Node* n) {
        if (n->op() == "Range" && n->num_inputs() == 3 && n->output(0)->type().dtype == DType::kInt64) {
            auto start = ints_of(of(n->input(0))), delta = ints_of(of(n->input(2)));
            auto limit = of(n->input(1));
            if (!start || !delta || !limit || *start != std::vector<int64_t>{0} || *delta != std::vector<int64_t>{1} ||
                limit->v.size() != 1)
                return nullptr;
            return swap(n, dim_range(limit->v[0], n->name()));
        }
        if (n->op() != "Slice" || n->num_inputs() < 3) return nullptr;
        auto starts = ints_of(of(n->input(1)));
        auto ends = of(n->input(2));
        auto axes = n->input(3) ? ints_of(of(n->input(3))) : std::vector<int64_t>{0};
        auto steps = n->input(4) ? ints_of(of(n->input(4))) : std::vector<int64_t>{1};
        if (!starts || !ends || ends->is_constant() || !axes || !steps || starts->size() != 1 || axes->size() != 1 ||
            ends->v.size() != 1 || (*starts)[0] != 0 || (*steps)[0] != 1)
            return nullptr;
        const int rank = n->input(0)->type().rank();
        int64_t axis = (*axes)[0] < 0 ? (*axes)[0] + rank : (*axes)[0];
        if (axis < 0 || axis >= rank || !n->input(0)->type().shape[static_cast<size_t>(axis)].is_static()) return nullptr;
        // Slice clamps its end to the axis, where Gather would clamp each index to the last row:
        // a longer dim would repeat that row, so the range carries the axis as its limit.
        const int64_t extent = n->input(0)->type().shape[static_cast<size_t>(axis)].value;
        ir::Node* range = dim_range(ends->v[0], n->name() + "/positions", extent);
        if (!range) return nullptr;
        // NOTE: Slice clamps the end to the axis; Gather clamps each index (op/defs/gather.cc).
        ir::Node* gather = g.add_node("Gather", {n->input(0), range->output(0)}, {{"axis", ir::Attr(axis)}},
                                      {n->output(0)->type()}, {}, n->name());
        return swap(n, gather);
    }

    ir::Node* swap(ir::Node* n, ir::Node* by) {
        if (!by) return nullptr;
        pass::replace_keeping_output_name(g, n->output(0), by->output(0));
        g.erase_node(n);
        return by;
    }
};

bool small_constant_inputs(const ir::Node& n) {
    for (const ir::Value* in : n.inputs())
        if (in && (!in->is_constant() || in->constant().numel() > kMaxElements)) return false;
    return n.num_inputs() > 0;
}

void erase_dead(ir::Graph& g) {
    const op::OpRegistry& reg = op::OpRegistry::global();
    for (bool changed = true; changed;) {
        changed = false;
        std::vector<ir::Node*> nodes = g.nodes();
        for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
            ir::Node* n = *it;
            const op::OpDef* def = reg.find(n->op());
            if (!def || def->has_side_effect || def->frame_control) continue;
            bool used = false;
            for (const ir::Value* o : n->outputs()) {
                used |= !o->users().empty();
                for (const ir::Value* out : g.outputs()) used |= out == o;
            }
            if (!used) g.erase_node(n), changed = true;
        }
    }
}

}  // namespace

int fold_shape_values(ir::Graph& g) {
    std::unordered_map<const ir::Value*, ShapeValue> vals;
    const ValueOf of = [&](const ir::Value* v) -> std::optional<ShapeValue> {
        if (!v) return std::nullopt;
        auto it = vals.find(v);
        return it != vals.end() ? std::optional<ShapeValue>(it->second) : from_constant(v);
    };
    Rewriter rw{g, of, {}};
    for (ir::Value* in : g.inputs())
        for (size_t k = 0; k < in->type().shape.size(); ++k) {
            const ir::Dim& d = in->type().shape[k];
            if (!d.is_static() && !d.symbol.empty() && d.symbol != "?")
                rw.source.emplace(d.symbol, std::make_pair(in, static_cast<int64_t>(k)));
        }
    int rewritten = 0;
    for (ir::Node* n : g.nodes()) {
        for (size_t i = 0; i < n->num_inputs(); ++i) {  // known shape values become constants
            ir::Value* v = n->input(i);
            auto it = v && !v->is_constant() ? vals.find(v) : vals.end();
            if (it != vals.end() && it->second.is_constant()) n->set_input(i, make_constant(g, it->second));
        }
        if (ir::Node* r = rw.replace(n)) {
            n = r, ++rewritten;
        } else if ((n->op() == "Reshape" || n->op() == "Expand") && n->num_inputs() == 2 && rw.constant_target(n)) {
            ++rewritten;
        } else if (n->op() == "Reshape" && n->num_inputs() == 2 && !n->input(1)->is_constant()) {
            if (ir::Node* r = rw.dims_reshape(n)) n = r, ++rewritten;
        } else if ((n->op() == "Expand" && n->num_inputs() == 2) || (n->op() == "ConstantOfShape" && n->input(0))) {
            if (ir::Node* r = rw.dims_expand(n)) n = r, ++rewritten;
        }
        if (n->op() == "Shape" && n->input(0)) {  // its inference wants static dims; the value is what counts
            if (auto v = shape_of(*n)) {
                n->output(0)->set_type(ir::TensorType(DType::kInt64, {v->shape[0]}));
                vals[n->output(0)] = *v;
            }
            continue;
        }
        try {
            op::infer_node(*n);
        } catch (const Error&) {
            continue;  // left to the compile, which names it
        }
        try {
            if (small_constant_inputs(*n) && fold_constant_node(g, n)) continue;
            if (n->num_outputs() == 1 && int_like(n->output(0)->type().dtype))
                if (auto s = eval_shape_value(*n, of)) vals[n->output(0)] = *s;
        } catch (const Error&) {
            continue;  // (an overflowing dim expression, an unfoldable node): left to the compile
        }
    }
    erase_dead(g);
    g.topo_sort();
    return rewritten;
}

}  // namespace kiln::compiler
