// drop_tile_guards (see the header): find the candidate Ifs (a local analysis of each), check
// that nothing outside them reads their tiles' padding lanes, then splice their then-cases in.
#include "tir/drop_tile_guards.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "tir/affine.h"

namespace kiln::tir {
namespace {

struct Interval {
    int64_t lo, hi;
};
using Ranges = std::unordered_map<const te::VarNode*, Interval>;

constexpr int64_t kBoundLimit = int64_t{1} << 40;  // no interval arithmetic near overflow

std::optional<Interval> checked(int64_t lo, int64_t hi) {
    if (lo < -kBoundLimit || hi > kBoundLimit) return std::nullopt;
    return Interval{lo, hi};
}

// [lo, hi] of an int64 index expression over the loop ranges; nullopt when unknown.
std::optional<Interval> bound(const Expr& e, const Ranges& r) {
    switch (e->kind) {
        case te::ExprKind::kIntImm: {
            int64_t v = static_cast<const te::IntImmNode&>(*e).value;
            return checked(v, v);
        }
        case te::ExprKind::kVar: {
            auto it = r.find(static_cast<const te::VarNode*>(e.get()));
            if (it == r.end()) return std::nullopt;
            return it->second;
        }
        case te::ExprKind::kCast:
            if (!dtype_is_int(e->dtype)) return std::nullopt;
            return bound(static_cast<const te::CastNode&>(*e).a, r);
        case te::ExprKind::kBinary: break;
        default: return std::nullopt;
    }
    const auto& n = static_cast<const te::BinaryNode&>(*e);
    auto a = bound(n.a, r), b = bound(n.b, r);
    if (!a || !b) return std::nullopt;
    switch (n.op) {
        case te::BinaryOp::kAdd: return checked(a->lo + b->lo, a->hi + b->hi);
        case te::BinaryOp::kSub: return checked(a->lo - b->hi, a->hi - b->lo);
        case te::BinaryOp::kMul: {
            int64_t c[] = {a->lo * b->lo, a->lo * b->hi, a->hi * b->lo, a->hi * b->hi};
            return checked(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
        }
        case te::BinaryOp::kFloorDiv:
            if (b->lo != b->hi || b->lo <= 0) return std::nullopt;
            return Interval{a->lo >= 0 ? a->lo / b->lo : -((-a->lo + b->lo - 1) / b->lo),
                            a->hi >= 0 ? a->hi / b->lo : -((-a->hi + b->lo - 1) / b->lo)};
        case te::BinaryOp::kFloorMod:
            if (b->lo != b->hi || b->lo <= 0) return std::nullopt;
            return Interval{0, b->lo - 1};
        case te::BinaryOp::kMin: return Interval{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
        case te::BinaryOp::kMax: return Interval{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
        default: return std::nullopt;
    }
}

bool in_bounds(const Buffer& buf, const Expr& index, const Ranges& r) {
    auto b = bound(index, r);
    return b && b->lo >= 0 && b->hi < buf->numel();
}

// Calls f on every BufferLoad in e (and in the indices of loads).
template <class F>
void for_each_load(const Expr& e, const F& f) {
    if (!e) return;
    switch (e->kind) {
        case te::ExprKind::kBinary: {
            const auto& n = static_cast<const te::BinaryNode&>(*e);
            for_each_load(n.a, f);
            for_each_load(n.b, f);
            return;
        }
        case te::ExprKind::kUnary: for_each_load(static_cast<const te::UnaryNode&>(*e).a, f); return;
        case te::ExprKind::kCast: for_each_load(static_cast<const te::CastNode&>(*e).a, f); return;
        case te::ExprKind::kSelect: {
            const auto& n = static_cast<const te::SelectNode&>(*e);
            for_each_load(n.cond, f);
            for_each_load(n.t, f);
            for_each_load(n.f, f);
            return;
        }
        case te::ExprKind::kBufferLoad: {
            const auto& n = static_cast<const te::BufferLoadNode&>(*e);
            f(n);
            for_each_load(n.index, f);
            return;
        }
        default: return;
    }
}

void vars_of(const Expr& e, std::set<const te::VarNode*>& out, bool& only_affine_vars) {
    for (const auto& [atom, coef] : to_affine(e).terms) {
        (void)coef;
        if (atom->kind == te::ExprKind::kVar) out.insert(static_cast<const te::VarNode*>(atom.get()));
        else only_affine_vars = false;
    }
}

// Whether a store index is one-to-one in `vars` (the others held fixed): mixed radix, each
// coefficient larger than the span of the smaller ones. Every var of `vars` must appear.
bool injective_in(const Expr& index, const std::set<const te::VarNode*>& vars, const Ranges& r) {
    std::vector<std::pair<int64_t, int64_t>> coef_extent;  // |coefficient|, extent
    std::set<const te::VarNode*> seen;
    for (const auto& [atom, coef] : to_affine(index).terms) {
        if (atom->kind != te::ExprKind::kVar) continue;
        const auto* v = static_cast<const te::VarNode*>(atom.get());
        if (!vars.count(v)) continue;
        auto it = r.find(v);
        if (it == r.end() || it->second.lo != 0 || coef == 0) return false;
        seen.insert(v);
        coef_extent.emplace_back(coef < 0 ? -coef : coef, it->second.hi + 1);
    }
    if (seen.size() != vars.size()) return false;
    std::sort(coef_extent.begin(), coef_extent.end());
    int64_t span = 0;  // largest value of the smaller terms
    for (const auto& [c, extent] : coef_extent) {
        if (c <= span) return false;
        span += c * (extent - 1);
    }
    return true;
}

// Every var in e (inside atoms such as floormod too).
void all_vars(const Expr& e, std::set<const te::VarNode*>& out) {
    if (!e) return;
    switch (e->kind) {
        case te::ExprKind::kVar: out.insert(static_cast<const te::VarNode*>(e.get())); return;
        case te::ExprKind::kBinary: {
            const auto& n = static_cast<const te::BinaryNode&>(*e);
            all_vars(n.a, out);
            all_vars(n.b, out);
            return;
        }
        case te::ExprKind::kUnary: all_vars(static_cast<const te::UnaryNode&>(*e).a, out); return;
        case te::ExprKind::kCast: all_vars(static_cast<const te::CastNode&>(*e).a, out); return;
        default: return;  // loads and selects never reach a tile guard's sides
    }
}

bool free_of(const Expr& e, const std::set<const te::VarNode*>& vars) {
    std::set<const te::VarNode*> in;
    all_vars(e, in);
    return std::none_of(in.begin(), in.end(), [&](const te::VarNode* v) { return vars.count(v) != 0; });
}

// A candidate guard: its condition, every var in it, and those that appear as plain terms.
struct Guard {
    Expr cond;
    std::set<const te::VarNode*> vars, affine_vars;
};

// Whether the guard holds with every lane var at 0, for every value of the other loops.
bool admits_first_lane(const Guard& g, const std::set<const te::VarNode*>& lanes, Ranges r) {
    for (const auto* v : lanes) r[v] = Interval{0, 0};
    const auto& b = static_cast<const te::BinaryNode&>(*g.cond);
    auto lhs = bound(b.a, r), rhs = bound(b.b, r);
    if (!lhs || !rhs) return false;
    switch (b.op) {
        case te::BinaryOp::kLT: return lhs->hi < rhs->lo;
        case te::BinaryOp::kLE: return lhs->hi <= rhs->lo;
        case te::BinaryOp::kGT: return lhs->lo > rhs->hi;
        case te::BinaryOp::kGE: return lhs->lo >= rhs->hi;
        default: return false;
    }
}

// What the scan knows at a statement: the ranges of the enclosing loops, the Ifs around it, and
// the loop vars bound inside each enclosing Allocate.
struct Scope {
    Ranges ranges;
    std::vector<const IfNode*> ifs;
    std::map<const te::BufferNode*, std::set<const te::VarNode*>> inner_vars;
};

class GuardScan {
public:
    // Ifs whose guard can go (the local analysis), by the local buffers they store.
    std::map<const IfNode*, std::set<const te::BufferNode*>> candidates;
    // Every read of a local buffer outside a candidate's then-case, with the Ifs around it.
    std::vector<std::pair<const te::BufferNode*, std::vector<const IfNode*>>> outside_reads;

    void scan(const Stmt& s, Scope& sc) {
        if (!s) return;
        switch (s->kind) {
            case StmtKind::kFor: return scan_for(static_cast<const ForNode&>(*s), sc);
            case StmtKind::kSeq:
                for (const auto& c : static_cast<const SeqNode&>(*s).stmts) scan(c, sc);
                return;
            case StmtKind::kAllocate: {
                const auto& n = static_cast<const AllocateNode&>(*s);
                sc.inner_vars[n.buffer.get()].clear();
                scan(n.body, sc);
                sc.inner_vars.erase(n.buffer.get());
                return;
            }
            case StmtKind::kStore: {
                const auto& n = static_cast<const StoreNode&>(*s);
                note_reads(n.index, sc);
                note_reads(n.value, sc);
                return;
            }
            case StmtKind::kIf: return scan_if(static_cast<const IfNode&>(*s), sc);
            case StmtKind::kPrefetch: return;  // reads nothing
        }
    }

private:
    void scan_for(const ForNode& n, Scope& sc) {
        note_reads(n.extent, sc);
        auto ext = bound(n.extent, sc.ranges);
        // A loop over a symbolic extent (a kernel's dims): its var is at least 0, which bounds
        // floormod(var, c) (a fused batch-and-column-tile loop's column tile).
        sc.ranges[n.var.get()] = ext && ext->lo == ext->hi && ext->lo > 0 ? Interval{0, ext->lo - 1} : Interval{0, kBoundLimit};
        for (auto& [buf, vars] : sc.inner_vars) vars.insert(n.var.get());
        scan(n.body, sc);
        sc.ranges.erase(n.var.get());
        for (auto& [buf, vars] : sc.inner_vars) vars.erase(n.var.get());
    }

    void scan_if(const IfNode& n, Scope& sc) {
        note_reads(n.cond, sc);
        std::set<const te::BufferNode*> stored;
        if (!n.else_case && guard_can_go(n, sc, stored)) {
            candidates[&n] = std::move(stored);
            return;
        }
        sc.ifs.push_back(&n);
        scan(n.then_case, sc);
        scan(n.else_case, sc);
        sc.ifs.pop_back();
    }

    void note_reads(const Expr& e, const Scope& sc) {
        for_each_load(e, [&](const te::BufferLoadNode& l) {
            if (l.buffer->local) outside_reads.emplace_back(l.buffer.get(), sc.ifs);
        });
    }

    bool guard_can_go(const IfNode& n, const Scope& sc, std::set<const te::BufferNode*>& stored) {
        Guard g{n.cond, {}, {}};
        bool only_affine = true;  // atoms such as floormod(fused, 139) are allowed; their vars are not lanes
        for (const te::Expr& side : comparison_sides(n.cond)) {
            vars_of(side, g.affine_vars, only_affine);
            all_vars(side, g.vars);
        }
        if (g.vars.empty()) return false;
        for (const auto* v : g.vars)
            if (!sc.ranges.count(v)) return false;
        Ranges r = sc.ranges;
        auto inner = sc.inner_vars;
        return body_ok(n.then_case, r, inner, g, stored);
    }

    static std::vector<te::Expr> comparison_sides(const Expr& cond) {
        if (cond->kind != te::ExprKind::kBinary) return {};
        const auto& b = static_cast<const te::BinaryNode&>(*cond);
        if (b.op != te::BinaryOp::kLT && b.op != te::BinaryOp::kLE && b.op != te::BinaryOp::kGT &&
            b.op != te::BinaryOp::kGE)
            return {};
        return {b.a, b.b};
    }

    // The then-case: loops, sequences and stores to local buffers only; every index in bounds;
    // a local buffer read only at the index its store writes; each store one-to-one in the
    // guard's variables bound inside the buffer's Allocate.
    bool body_ok(const Stmt& s, Ranges& r, std::map<const te::BufferNode*, std::set<const te::VarNode*>>& inner,
                 const Guard& g, std::set<const te::BufferNode*>& stored) {
        if (!s) return true;
        switch (s->kind) {
            case StmtKind::kSeq:
                for (const auto& c : static_cast<const SeqNode&>(*s).stmts)
                    if (!body_ok(c, r, inner, g, stored)) return false;
                return true;
            case StmtKind::kFor: {
                const auto& f = static_cast<const ForNode&>(*s);
                auto ext = bound(f.extent, r);
                if (!ext || ext->lo != ext->hi || ext->lo <= 0) return false;
                r[f.var.get()] = Interval{0, ext->lo - 1};
                for (auto& [buf, vars] : inner) vars.insert(f.var.get());
                bool ok = body_ok(f.body, r, inner, g, stored);
                for (auto& [buf, vars] : inner) vars.erase(f.var.get());
                r.erase(f.var.get());
                return ok;
            }
            case StmtKind::kStore: return store_ok(static_cast<const StoreNode&>(*s), r, inner, g, stored);
            case StmtKind::kPrefetch: return true;  // touches no memory: any index is safe
            default: return false;
        }
    }

    // A store into a local tile: one-to-one in its lanes (the guard's vars bound inside the
    // tile's Allocate, which must appear in the guard as plain terms); every load in bounds, or
    // (a buffer whose bounds are symbolic: a kernel's dims) the same for every lane of a tile
    // whose first lane the guard always admits, so the original code loaded it too.
    static bool store_ok(const StoreNode& st, const Ranges& r,
                         const std::map<const te::BufferNode*, std::set<const te::VarNode*>>& inner, const Guard& g,
                         std::set<const te::BufferNode*>& stored) {
        auto it = inner.find(st.buffer.get());
        if (!st.buffer->local || it == inner.end() || !in_bounds(st.buffer, st.index, r)) return false;
        std::set<const te::VarNode*> lane_vars;
        for (const auto* v : g.vars)
            if (it->second.count(v)) lane_vars.insert(v);
        for (const auto* v : lane_vars)
            if (!g.affine_vars.count(v)) return false;
        if (!injective_in(st.index, lane_vars, r)) return false;
        bool ok = true;
        for_each_load(st.value, [&](const te::BufferLoadNode& l) {
            if (!in_bounds(l.buffer, l.index, r) && !(free_of(l.index, lane_vars) && admits_first_lane(g, lane_vars, r)))
                ok = false;
            if (l.buffer->local && (l.buffer != st.buffer || !struct_equal(l.index, st.index))) ok = false;
        });
        if (ok) stored.insert(st.buffer.get());
        return ok;
    }
};

// Candidates whose tiles are read elsewhere only under the same guard.
std::set<const IfNode*> droppable(const GuardScan& scan) {
    std::set<const IfNode*> out;
    for (const auto& [guard, bufs] : scan.candidates) {
        bool ok = true;
        for (const auto& [buf, ifs] : scan.outside_reads) {
            if (!bufs.count(buf)) continue;
            bool guarded = std::any_of(ifs.begin(), ifs.end(),
                                       [&](const IfNode* i) { return struct_equal(i->cond, guard->cond); });
            ok = ok && guarded;
        }
        for (const auto& [other, other_bufs] : scan.candidates)
            for (const auto* b : other_bufs)
                if (bufs.count(b) && !struct_equal(other->cond, guard->cond)) ok = false;
        if (ok) out.insert(guard);
    }
    return out;
}

Stmt splice(const Stmt& s, const std::set<const IfNode*>& drop) {
    if (!s) return s;
    switch (s->kind) {
        case StmtKind::kFor: {
            const auto& n = static_cast<const ForNode&>(*s);
            return std::make_shared<ForNode>(n.var, n.extent, n.loop_kind, splice(n.body, drop));
        }
        case StmtKind::kSeq: {
            std::vector<Stmt> out;
            for (const auto& c : static_cast<const SeqNode&>(*s).stmts) out.push_back(splice(c, drop));
            return make_seq(std::move(out));
        }
        case StmtKind::kIf: {
            const auto& n = static_cast<const IfNode&>(*s);
            if (drop.count(&n)) return n.then_case;
            return std::make_shared<IfNode>(n.cond, splice(n.then_case, drop), splice(n.else_case, drop));
        }
        case StmtKind::kAllocate: {
            const auto& n = static_cast<const AllocateNode&>(*s);
            return std::make_shared<AllocateNode>(n.buffer, splice(n.body, drop));
        }
        case StmtKind::kStore:
        case StmtKind::kPrefetch: return s;
    }
    return s;
}

}  // namespace

PrimFunc drop_tile_guards(PrimFunc f) {
    GuardScan scan;
    Scope sc;
    scan.scan(f.body, sc);
    std::set<const IfNode*> drop = droppable(scan);
    if (!drop.empty()) f.body = splice(f.body, drop);
    return f;
}

}  // namespace kiln::tir
