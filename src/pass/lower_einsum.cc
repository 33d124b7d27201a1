#include "pass/lower_einsum.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "pass/rewrite.h"

namespace kiln::pass {
namespace {

/// The labels of "ab,cb->ac"-style terms; empty when the equation has an ellipsis, a label
/// repeated within a term, other than two inputs, or an implicit output.
struct Terms {
    std::string a, b, out;
};

std::optional<Terms> parse(std::string eq) {
    eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
    const size_t arrow = eq.find("->"), comma = eq.find(',');
    if (arrow == std::string::npos || comma == std::string::npos || comma > arrow) return std::nullopt;
    Terms t{eq.substr(0, comma), eq.substr(comma + 1, arrow - comma - 1), eq.substr(arrow + 2)};
    for (const std::string* s : {&t.a, &t.b, &t.out}) {
        if (s->find_first_of(".,") != std::string::npos) return std::nullopt;
        std::string sorted = *s;
        std::sort(sorted.begin(), sorted.end());
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return std::nullopt;
    }
    return t;
}

bool has(const std::string& s, char c) { return s.find(c) != std::string::npos; }

/// Transpose of `v` (labels `from`) into the label order `to`; `v` itself when already so.
ir::Value* transpose_to(ir::Graph& g, ir::Value* v, const std::string& from, const std::string& to,
                        const std::string& name) {
    if (from == to) return v;
    std::vector<int64_t> perm;
    Shape shape;
    const Shape in = v->type().static_shape();
    for (char c : to) {
        perm.push_back(static_cast<int64_t>(from.find(c)));
        shape.push_back(in[from.find(c)]);
    }
    ir::AttrMap attrs;
    attrs["perm"] = ir::Attr(perm);
    return g.add_node("Transpose", {v}, attrs, {ir::TensorType::of_static(v->type().dtype, shape)}, {}, name)->output(0);
}

ir::Value* reshape_to(ir::Graph& g, ir::Value* v, const Shape& shape, const std::string& name) {
    if (v->type().static_shape() == shape) return v;
    return g.add_node("Reshape", {v, shape_constant(g, shape)}, {}, {ir::TensorType::of_static(v->type().dtype, shape)},
                      {}, name)
        ->output(0);
}

bool lower(ir::Graph& g, ir::Node* n) {
    if (n->num_inputs() != 2 || !n->input(0) || !n->input(1) || n->num_outputs() != 1) return false;
    ir::Value *a = n->input(0), *b = n->input(1), *y = n->output(0);
    if (!a->type().is_static() || !b->type().is_static() || !y->type().is_static()) return false;
    if (a->type().dtype != DType::kFloat32 || b->type().dtype != DType::kFloat32) return false;
    const std::optional<Terms> t = parse(n->attr_string("equation", ""));
    if (!t || t->a.size() != static_cast<size_t>(a->type().rank()) || t->b.size() != static_cast<size_t>(b->type().rank()))
        return false;
    std::string batch, m, k, nn;
    for (char c : t->a) {
        if (has(t->b, c) && has(t->out, c)) batch += c;
        else if (has(t->b, c)) k += c;
        else if (has(t->out, c)) m += c;
        else return false;  // summed out of A alone
    }
    for (char c : t->b)
        if (!has(t->a, c)) {
            if (!has(t->out, c)) return false;
            nn += c;
        }
    for (char c : t->out)
        if (!has(t->a, c) && !has(t->b, c)) return false;
    const Shape as = a->type().static_shape(), bs = b->type().static_shape();
    auto extent = [&](char c) { return has(t->a, c) ? as[t->a.find(c)] : bs[t->b.find(c)]; };
    for (char c : batch)
        if (as[t->a.find(c)] != bs[t->b.find(c)]) return false;  // broadcasting: keep the Einsum
    auto product = [&](const std::string& labels) {
        int64_t p = 1;
        for (char c : labels) p *= extent(c);
        return p;
    };
    Shape lead;
    for (char c : batch) lead.push_back(extent(c));
    Shape a3 = lead, b3 = lead, c3 = lead, cfull = lead;
    a3.insert(a3.end(), {product(m), product(k)});
    b3.insert(b3.end(), {product(k), product(nn)});
    c3.insert(c3.end(), {product(m), product(nn)});
    for (char c : m + nn) cfull.push_back(extent(c));
    const std::string base = n->name().empty() ? "einsum" : n->name();
    ir::Value* am = reshape_to(g, transpose_to(g, a, t->a, batch + m + k, base + "/a_t"), a3, base + "/a_r");
    ir::Value* bm = reshape_to(g, transpose_to(g, b, t->b, batch + k + nn, base + "/b_t"), b3, base + "/b_r");
    ir::Value* c = g.add_node("MatMul", {am, bm}, {}, {ir::TensorType::of_static(y->type().dtype, c3)}, {}, base + "/matmul")
                       ->output(0);
    c = transpose_to(g, reshape_to(g, c, cfull, base + "/c_r"), batch + m + nn, t->out, base + "/c_t");
    if (c == a || c == b || !replace_value(g, y, c)) return false;
    g.erase_node(n);
    g.topo_sort();
    return true;
}

}  // namespace

bool lower_einsum(ir::Graph& g, const PassContext&) {
    bool changed = false;
    for (ir::Node* n : g.nodes())
        if (n->op() == "Einsum") changed |= lower(g, n);
    return changed;
}

}  // namespace kiln::pass
