// tir statement constructors, statement substitution and the readable printer.
//
//   func matmul(A: f32[64,32], B: f32[32,64], C: f32[64,64]) {
//     for i0 in 0..64 parallel {
//       C[i0*64 + i1] = 0.0
//       ...
#include "tir/stmt.h"

#include <string>

#include "support/error.h"

namespace kiln::tir {

Stmt make_for(Var v, Expr extent, te::LoopKind k, Stmt body) {
    KILN_ICHECK(v && extent) << "make_for with a null var or extent";
    return std::make_shared<ForNode>(std::move(v), te::cast(DType::kInt64, std::move(extent)), k,
                                     std::move(body));
}

Stmt make_store(Buffer b, Expr index, Expr value) {
    KILN_ICHECK(b && index && value) << "make_store with a null operand";
    return std::make_shared<StoreNode>(std::move(b), te::cast(DType::kInt64, std::move(index)),
                                       std::move(value));
}

Stmt make_prefetch(Buffer b, Expr index) {
    KILN_ICHECK(b && index) << "make_prefetch with a null operand";
    return std::make_shared<PrefetchNode>(std::move(b), te::cast(DType::kInt64, std::move(index)));
}

Stmt make_seq(std::vector<Stmt> stmts) {
    std::vector<Stmt> flat;
    for (auto& s : stmts) {
        if (!s) continue;
        if (s->kind == StmtKind::kSeq) {
            for (const auto& c : static_cast<const SeqNode&>(*s).stmts)
                if (c) flat.push_back(c);
        } else {
            flat.push_back(std::move(s));
        }
    }
    if (flat.size() == 1) return flat[0];
    return std::make_shared<SeqNode>(std::move(flat));
}

Stmt make_if(Expr cond, Stmt then_case, Stmt else_case) {
    KILN_ICHECK(cond) << "make_if with a null condition";
    return std::make_shared<IfNode>(te::cast(DType::kBool, std::move(cond)), std::move(then_case),
                                    std::move(else_case));
}

Stmt make_allocate(Buffer b, Stmt body) {
    KILN_ICHECK(b) << "make_allocate with a null buffer";
    return std::make_shared<AllocateNode>(std::move(b), std::move(body));
}

Stmt substitute(const Stmt& s, const std::unordered_map<const te::VarNode*, Expr>& vmap) {
    if (!s || vmap.empty()) return s;
    switch (s->kind) {
        case StmtKind::kFor: {
            const auto& n = static_cast<const ForNode&>(*s);
            return std::make_shared<ForNode>(n.var, te::substitute(n.extent, vmap), n.loop_kind,
                                             substitute(n.body, vmap));
        }
        case StmtKind::kStore: {
            const auto& n = static_cast<const StoreNode&>(*s);
            return std::make_shared<StoreNode>(n.buffer, te::substitute(n.index, vmap),
                                               te::substitute(n.value, vmap));
        }
        case StmtKind::kSeq: {
            std::vector<Stmt> out;
            for (const auto& c : static_cast<const SeqNode&>(*s).stmts)
                out.push_back(substitute(c, vmap));
            return std::make_shared<SeqNode>(std::move(out));
        }
        case StmtKind::kIf: {
            const auto& n = static_cast<const IfNode&>(*s);
            return std::make_shared<IfNode>(te::substitute(n.cond, vmap),
                                            substitute(n.then_case, vmap),
                                            substitute(n.else_case, vmap));
        }
        case StmtKind::kAllocate: {
            const auto& n = static_cast<const AllocateNode&>(*s);
            return std::make_shared<AllocateNode>(n.buffer, substitute(n.body, vmap));
        }
        case StmtKind::kPrefetch: {
            const auto& n = static_cast<const PrefetchNode&>(*s);
            return std::make_shared<PrefetchNode>(n.buffer, te::substitute(n.index, vmap));
        }
    }
    return s;
}

namespace {
std::string pad(int indent) {
    return std::string(static_cast<size_t>(indent) * 2, ' ');
}

std::string shape_text(const Buffer& b) {
    std::string s = std::string(dtype_name(b->dtype)) + "[";
    const std::vector<Expr> dims = b->shape_exprs();
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + te::expr_str(dims[i]);
    return s + "]";
}
}  // namespace

std::string stmt_str(const Stmt& s, int indent) {
    if (!s) return pad(indent) + "<empty>\n";
    switch (s->kind) {
        case StmtKind::kFor: {
            const auto& n = static_cast<const ForNode&>(*s);
            std::string kind = n.loop_kind == te::LoopKind::kSerial
                                   ? ""
                                   : std::string(" ") + te::loop_kind_name(n.loop_kind);
            return pad(indent) + "for " + n.var->name + " in 0.." + te::expr_str(n.extent) + kind +
                   " {\n" + stmt_str(n.body, indent + 1) + pad(indent) + "}\n";
        }
        case StmtKind::kStore: {
            const auto& n = static_cast<const StoreNode&>(*s);
            return pad(indent) + n.buffer->name + "[" + te::expr_str(n.index) +
                   "] = " + te::expr_str(n.value) + "\n";
        }
        case StmtKind::kSeq: {
            std::string out;
            for (const auto& c : static_cast<const SeqNode&>(*s).stmts) out += stmt_str(c, indent);
            return out;
        }
        case StmtKind::kIf: {
            const auto& n = static_cast<const IfNode&>(*s);
            std::string out = pad(indent) + "if (" + te::expr_str(n.cond) + ") {\n" +
                              stmt_str(n.then_case, indent + 1);
            if (n.else_case) out += pad(indent) + "} else {\n" + stmt_str(n.else_case, indent + 1);
            return out + pad(indent) + "}\n";
        }
        case StmtKind::kAllocate: {
            const auto& n = static_cast<const AllocateNode&>(*s);
            return pad(indent) + (n.buffer->local ? "local " : "allocate ") + n.buffer->name + ": " + shape_text(n.buffer) +
                   " {\n" + stmt_str(n.body, indent + 1) + pad(indent) + "}\n";
        }
        case StmtKind::kPrefetch: {
            const auto& n = static_cast<const PrefetchNode&>(*s);
            return pad(indent) + "prefetch " + n.buffer->name + "[" + te::expr_str(n.index) + "]\n";
        }
    }
    return pad(indent) + "<?>\n";
}

std::string func_str(const PrimFunc& f) {
    std::string out = "func " + f.name + "(";
    for (size_t i = 0; i < f.params.size(); ++i) {
        out += (i ? ", " : "") + f.params[i]->name + ": " + shape_text(f.params[i]);
    }
    if (!f.dims.empty()) {
        out += "; dims ";
        for (size_t i = 0; i < f.dims.size(); ++i) out += (i ? ", " : "") + f.dims[i]->name;
    }
    return out + ") {\n" + stmt_str(f.body, 1) + "}\n";
}

Stmt rewrite_loops(const Stmt& s, const std::function<Stmt(const ForNode& loop, const Stmt& body)>& on_for) {
    if (!s) return s;
    switch (s->kind) {
        case StmtKind::kFor: {
            const auto& n = static_cast<const ForNode&>(*s);
            Stmt body = rewrite_loops(n.body, on_for);
            if (Stmt replaced = on_for(n, body)) return replaced;
            return body == n.body ? s : make_for(n.var, n.extent, n.loop_kind, body);
        }
        case StmtKind::kSeq: {
            std::vector<Stmt> out;
            for (const Stmt& c : static_cast<const SeqNode&>(*s).stmts) out.push_back(rewrite_loops(c, on_for));
            return make_seq(std::move(out));
        }
        case StmtKind::kIf: {
            const auto& n = static_cast<const IfNode&>(*s);
            return make_if(n.cond, rewrite_loops(n.then_case, on_for), rewrite_loops(n.else_case, on_for));
        }
        case StmtKind::kAllocate: {
            const auto& n = static_cast<const AllocateNode&>(*s);
            return make_allocate(n.buffer, rewrite_loops(n.body, on_for));
        }
        case StmtKind::kStore:
        case StmtKind::kPrefetch: return s;
    }
    return s;
}

}  // namespace kiln::tir
