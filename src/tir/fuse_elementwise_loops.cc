#include "tir/fuse_elementwise_loops.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "tir/affine.h"

namespace kiln::tir {
namespace {

/// The loops of a perfect nest ending in stores (one, or a sequence of them: an earlier fusion),
/// outermost first, and those stores.
struct Nest {
    std::vector<const ForNode*> loops;
    std::vector<const StoreNode*> stores;
};

bool as_nest(const Stmt& s, Nest& n) {
    const StmtNode* cur = s.get();
    while (cur && cur->kind == StmtKind::kFor) {
        n.loops.push_back(static_cast<const ForNode*>(cur));
        cur = n.loops.back()->body.get();
    }
    if (!cur || n.loops.empty()) return false;
    if (cur->kind == StmtKind::kStore) {
        n.stores.push_back(static_cast<const StoreNode*>(cur));
        return true;
    }
    if (cur->kind != StmtKind::kSeq) return false;
    for (const Stmt& c : static_cast<const SeqNode*>(cur)->stmts) {
        if (c->kind != StmtKind::kStore) return false;
        n.stores.push_back(static_cast<const StoreNode*>(c.get()));
    }
    return !n.stores.empty();
}

using Written = std::vector<const te::BufferNode*>;

/// True when every load in `e` reads element `index` of its buffer, or a one-element buffer
/// that no store of the two nests writes.
bool loads_at(const Expr& e, const Expr& index, const Written& w) {
    switch (e->kind) {
    case te::ExprKind::kBinary: {
        const auto& n = static_cast<const te::BinaryNode&>(*e);
        return loads_at(n.a, index, w) && loads_at(n.b, index, w);
    }
    case te::ExprKind::kUnary: return loads_at(static_cast<const te::UnaryNode&>(*e).a, index, w);
    case te::ExprKind::kCast: return loads_at(static_cast<const te::CastNode&>(*e).a, index, w);
    case te::ExprKind::kSelect: {
        const auto& n = static_cast<const te::SelectNode&>(*e);
        return loads_at(n.cond, index, w) && loads_at(n.t, index, w) && loads_at(n.f, index, w);
    }
    case te::ExprKind::kBufferLoad: {
        const auto& l = static_cast<const te::BufferLoadNode&>(*e);
        const te::BufferNode* buf = l.buffer.get();
        const bool written = std::find(w.begin(), w.end(), buf) != w.end();
        const bool scalar = !written && buf->is_static() && buf->numel() == 1;
        return scalar || struct_equal(l.index, index);
    }
    case te::ExprKind::kIntImm:
    case te::ExprKind::kFloatImm:
    case te::ExprKind::kVar: return true;
    default: return false;  // TensorRead, Reduce: not in a lowered elementwise store
    }
}

/// The two nests as one, or null when fusing them is not known to be legal: every iteration of
/// both touches one element (the same index in every buffer) and scalars nobody writes, so each
/// element sees the first nest's reads and writes, then the second's, as in the original order.
Stmt fuse(const Stmt& first, const Stmt& second) {
    Nest a, b;
    if (!as_nest(first, a) || !as_nest(second, b) || a.loops.size() != b.loops.size()) return nullptr;
    std::unordered_map<const te::VarNode*, Expr> rename;
    for (size_t i = 0; i < a.loops.size(); ++i) {
        const ForNode& x = *a.loops[i];
        const ForNode& y = *b.loops[i];
        if (x.loop_kind != y.loop_kind || !struct_equal(x.extent, y.extent)) return nullptr;
        rename[y.var.get()] = x.var;
    }
    const Expr index = a.stores[0]->index;
    Written w;
    std::vector<Stmt> body;
    for (const Nest* n : {&a, &b})
        for (const StoreNode* st : n->stores) {
            if (std::find(w.begin(), w.end(), st->buffer.get()) != w.end()) return nullptr;
            w.push_back(st->buffer.get());
            const Expr i = n == &a ? st->index : te::substitute(st->index, rename);
            if (!struct_equal(i, index)) return nullptr;
            body.push_back(make_store(st->buffer, index, n == &a ? st->value : te::substitute(st->value, rename)));
        }
    for (const Stmt& st : body)
        if (!loads_at(static_cast<const StoreNode&>(*st).value, index, w)) return nullptr;
    Stmt nest = make_seq(std::move(body));
    for (size_t i = a.loops.size(); i-- > 0;)
        nest = make_for(a.loops[i]->var, a.loops[i]->extent, a.loops[i]->loop_kind, nest);
    return nest;
}

/// Fuses runs of adjacent nests in a sequence (and in nested sequences), left to right.
Stmt fuse_in(const Stmt& s) {
    if (!s) return s;
    switch (s->kind) {
    case StmtKind::kSeq: {
        std::vector<Stmt> out;
        for (const Stmt& c : static_cast<const SeqNode&>(*s).stmts) {
            Stmt c2 = fuse_in(c);
            if (!out.empty())
                if (Stmt f = fuse(out.back(), c2)) {
                    out.back() = f;
                    continue;
                }
            out.push_back(c2);
        }
        return make_seq(std::move(out));
    }
    case StmtKind::kAllocate: {
        const auto& n = static_cast<const AllocateNode&>(*s);
        return make_allocate(n.buffer, fuse_in(n.body));
    }
    default: return s;  // a loop nest, store or If: nothing adjacent inside to fuse here
    }
}

}  // namespace

PrimFunc fuse_elementwise_loops(PrimFunc f) {
    f.body = fuse_in(f.body);
    return f;
}

}  // namespace kiln::tir
