// The C emitter: a printer from tir to one C11 translation unit.
//
// Layout of the output: the prelude (c_prelude.cc: includes, kernel ABI, scalar helpers), then
// one static task function per parallel loop, then the exported kernel. Names: every Var and
// Buffer gets a C identifier derived from its name, made unique (identity is the node, not the
// name) and kept clear of C keywords, libc/libm names and the kiln_ prefix.
//
// Parallel loops are outlined: the loop body becomes `<name>_task<k>(begin, end, ctx)` over a
// context struct holding every variable and buffer the body uses from the enclosing scope, run
// through env->parallel_for. A parallel loop inside a task is emitted serially (the runtime
// would run it inline anyway). Allocate becomes an aligned heap buffer freed at the end of its
// scope (a local buffer, Stage::cache_write_local, is a fixed-size array instead); when
// allocation fails the kernel frees what it holds and returns 1 (a task sets
// ctx->failed, checked by the kernel after parallel_for). After each top-level parallel loop the
// kernel also checks env->stop (preemption, runtime/run_control.h): when set, the loop may have
// skipped chunks, so the kernel frees what it holds and returns KILN_KERNEL_STOPPED; the runtime
// runs it again from its start. Iterations of a parallel loop write disjoint elements and never
// read what another iteration writes (Stage::parallel refuses reduce axes, te/schedule.cc, and
// lowering keeps a parallel leaf outside the reductions), so how the runtime chunks a loop never
// changes the result.
//
// Vectorized loops get `#pragma GCC ivdep` only when every store in the body indexes with the
// loop variable (a reduction into a loop-invariant element keeps its dependence), and short
// contiguous ones also `#pragma GCC unroll 1` (codegen/one_vector_loop.h). Unrolled loops get
// `KILN_UNROLL(n)`: the prelude's `#pragma GCC unroll n`, nothing at a tiered compile's quick
// tier (-DKILN_QUICK_TIER).
#include "codegen/c_emitter.h"

#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "codegen/c_expr_printer.h"
#include "codegen/c_prelude.h"
#include "codegen/invariant_divisions.h"
#include "codegen/one_vector_loop.h"
#include "codegen/staged_gathers.h"
#include "codegen/transpose_tiles.h"
#include "support/error.h"

namespace kiln::codegen {
namespace {

using te::ExprKind;
using te::LoopKind;
using tir::StmtKind;

/// Free variables and buffers of a statement (used from outside it), in first-use order.
class FreeUses {
public:
    std::vector<const te::VarNode*> vars;
    std::vector<const te::BufferNode*> buffers;

    void stmt(const tir::Stmt& s) {
        if (!s) return;
        switch (s->kind) {
            case StmtKind::kFor: {
                const auto& f = static_cast<const tir::ForNode&>(*s);
                expr(f.extent);
                bound_vars_.insert(f.var.get());
                stmt(f.body);
                break;
            }
            case StmtKind::kStore: {
                const auto& st = static_cast<const tir::StoreNode&>(*s);
                use_buffer(st.buffer.get());
                expr(st.index);
                expr(st.value);
                break;
            }
            case StmtKind::kSeq:
                for (const auto& x : static_cast<const tir::SeqNode&>(*s).stmts) stmt(x);
                break;
            case StmtKind::kIf: {
                const auto& i = static_cast<const tir::IfNode&>(*s);
                expr(i.cond);
                stmt(i.then_case);
                stmt(i.else_case);
                break;
            }
            case StmtKind::kAllocate: {
                const auto& a = static_cast<const tir::AllocateNode&>(*s);
                bound_buffers_.insert(a.buffer.get());
                stmt(a.body);
                break;
            }
            case StmtKind::kPrefetch: {
                const auto& pf = static_cast<const tir::PrefetchNode&>(*s);
                use_buffer(pf.buffer.get());
                expr(pf.index);
                break;
            }
        }
    }
    void bind_var(const te::VarNode* v) { bound_vars_.insert(v); }

private:
    void use_buffer(const te::BufferNode* b) {
        if (bound_buffers_.count(b) || !seen_buffers_.insert(b).second) return;
        buffers.push_back(b);
    }
    void expr(const te::Expr& e) {
        if (!e) return;
        switch (e->kind) {
            case ExprKind::kVar: {
                const auto* v = static_cast<const te::VarNode*>(e.get());
                if (!bound_vars_.count(v) && seen_vars_.insert(v).second) vars.push_back(v);
                break;
            }
            case ExprKind::kBinary: {
                const auto& b = static_cast<const te::BinaryNode&>(*e);
                expr(b.a);
                expr(b.b);
                break;
            }
            case ExprKind::kUnary: expr(static_cast<const te::UnaryNode&>(*e).a); break;
            case ExprKind::kSelect: {
                const auto& s = static_cast<const te::SelectNode&>(*e);
                expr(s.cond);
                expr(s.t);
                expr(s.f);
                break;
            }
            case ExprKind::kCast: expr(static_cast<const te::CastNode&>(*e).a); break;
            case ExprKind::kBufferLoad: {
                const auto& l = static_cast<const te::BufferLoadNode&>(*e);
                use_buffer(l.buffer.get());
                expr(l.index);
                break;
            }
            default: break;
        }
    }
    std::unordered_set<const te::VarNode*> bound_vars_, seen_vars_;
    std::unordered_set<const te::BufferNode*> bound_buffers_, seen_buffers_;
};

const char* loop_kind_word(LoopKind k) {
    switch (k) {
        case LoopKind::kSerial: return "serial";
        case LoopKind::kParallel: return "parallel";
        case LoopKind::kVectorized: return "vectorized";
        case LoopKind::kUnrolled: return "unrolled";
        case LoopKind::kBlockIdxX: return "blockIdx.x";
        case LoopKind::kThreadIdxX: return "threadIdx.x";
    }
    return "?";
}

/// True if every store under `s` has an index that mentions `v`.
bool stores_depend_on(const tir::Stmt& s, const te::VarNode* v) {
    if (!s) return true;
    switch (s->kind) {
        case StmtKind::kFor: return stores_depend_on(static_cast<const tir::ForNode&>(*s).body, v);
        case StmtKind::kStore: return expr_uses_var(static_cast<const tir::StoreNode&>(*s).index, v);
        case StmtKind::kSeq:
            for (const auto& x : static_cast<const tir::SeqNode&>(*s).stmts)
                if (!stores_depend_on(x, v)) return false;
            return true;
        case StmtKind::kIf: {
            const auto& i = static_cast<const tir::IfNode&>(*s);
            return stores_depend_on(i.then_case, v) && stores_depend_on(i.else_case, v);
        }
        case StmtKind::kAllocate: return stores_depend_on(static_cast<const tir::AllocateNode&>(*s).body, v);
        case StmtKind::kPrefetch: return true;  // stores nothing
    }
    return true;
}

/// Per function-body emission state: the output, the indentation, the allocations live at this
/// point (freed on failure) and whether we are inside a task function.
struct Scope {
    std::ostringstream* out;
    int indent = 1;
    bool in_task = false;
    std::vector<std::string> live;
};

class CEmitter {
public:
    explicit CEmitter(const tir::PrimFunc& f) : f_(f) {}

    std::string run() {
        KILN_ICHECK(is_c_identifier(f_.name)) << "kernel name '" << f_.name << "' is not a C identifier";
        names_.reserve_name(f_.name);
        std::ostringstream body;
        emit_signature(body);
        for (size_t i = 0; i < f_.params.size(); ++i) {
            const auto& b = f_.params[i];
            std::string t = dtype_c_type(b->dtype);
            body << "    " << t << param_qualifier() << names_.buffer(b.get()) << " = (" << t << "*)args[" << i
                 << "];\n";
        }
        Scope sc{&body};
        stmt(f_.body, sc);
        body << "    return 0;\n}\n";

        std::ostringstream out;
        out << "/* Kiln generated kernel '" << f_.name << "'. */\n" << c_prelude() << "\n";
        if (!f_.dims.empty()) out << c_prelude_dims() << "\n";
        if (uses_transpose_tile_) out << c_prelude_transpose() << "\n";
        out << tasks_.str() << body.str();
        return out.str();
    }

private:
    /// kiln_kernel_fn, or kiln_kernel_dims_fn with the dims read into locals and a negative one
    /// refused before any buffer is touched (runtime/kernel_abi.h).
    void emit_signature(std::ostringstream& body) {
        if (f_.dims.empty()) {
            body << "int32_t " << f_.name << "(void* const* args, const kiln_kernel_env* env) {\n";
            return;
        }
        body << "int32_t " << f_.name << "(void* const* args, const int64_t* dims, const kiln_kernel_env* env) {\n";
        for (size_t i = 0; i < f_.dims.size(); ++i) {
            std::string v = names_.var(f_.dims[i].get());
            names_.mark_nonnegative(f_.dims[i].get());
            body << "    const int64_t " << v << " = dims[" << i << "];\n";
            body << "    if (" << v << " < 0) return KILN_KERNEL_BAD_DIMS;\n";
        }
    }

    /// "* restrict " unless the kernel's parameters may alias (computed in place).
    const char* param_qualifier() const { return f_.params_may_alias ? "* " : "* restrict "; }
    bool is_param(const te::BufferNode* b) const {
        for (const auto& p : f_.params)
            if (p.get() == b) return true;
        return false;
    }

    static void pad(Scope& sc) {
        for (int i = 0; i < sc.indent; ++i) *sc.out << "    ";
    }
    std::string e(const te::Expr& x) { return print_c_expr(x, names_); }

    /// The block that leaves the current function after a failed allocation.
    static std::string fail_block(const Scope& sc) {
        std::string out = "{";
        for (auto it = sc.live.rbegin(); it != sc.live.rend(); ++it) out += " free(" + *it + ");";
        if (sc.in_task) return out + " __atomic_store_n(&kiln_ctx->failed, 1, __ATOMIC_RELAXED); return; }";
        return out + " return 1; }";
    }

    /// The block that leaves the kernel when the runtime stopped a parallel loop (preemption):
    /// the loop may have skipped chunks, so the kernel frees what it holds and reports it.
    static std::string stop_block(const Scope& sc) {
        std::string out = "{";
        for (auto it = sc.live.rbegin(); it != sc.live.rend(); ++it) out += " free(" + *it + ");";
        return out + " return KILN_KERNEL_STOPPED; }";
    }

    void stmt(const tir::Stmt& s, Scope& sc) {
        if (!s) return;
        switch (s->kind) {
            case StmtKind::kFor: emit_for(static_cast<const tir::ForNode&>(*s), sc); break;
            case StmtKind::kStore: {
                const auto& st = static_cast<const tir::StoreNode&>(*s);
                pad(sc);
                *sc.out << names_.buffer(st.buffer.get()) << "[" << strip_parens(e(st.index))
                        << "] = " << strip_parens(store_value_c(st.buffer->dtype, st.value, names_)) << ";\n";
                break;
            }
            case StmtKind::kSeq:
                for (const auto& x : static_cast<const tir::SeqNode&>(*s).stmts) stmt(x, sc);
                break;
            case StmtKind::kPrefetch: {  // into L2 (locality 2: prefetcht1), for a read
                const auto& pf = static_cast<const tir::PrefetchNode&>(*s);
                pad(sc);
                *sc.out << "__builtin_prefetch(&" << names_.buffer(pf.buffer.get()) << "[" << strip_parens(e(pf.index))
                        << "], 0, 2);\n";
                break;
            }
            case StmtKind::kIf: {
                const auto& i = static_cast<const tir::IfNode&>(*s);
                pad(sc);
                *sc.out << "if (" << strip_parens(e(i.cond)) << ") {\n";
                ++sc.indent;
                stmt(i.then_case, sc);
                --sc.indent;
                if (i.else_case) {
                    pad(sc);
                    *sc.out << "} else {\n";
                    ++sc.indent;
                    stmt(i.else_case, sc);
                    --sc.indent;
                }
                pad(sc);
                *sc.out << "}\n";
                break;
            }
            case StmtKind::kAllocate: {
                const auto& a = static_cast<const tir::AllocateNode&>(*s);
                std::string name = names_.buffer(a.buffer.get());
                std::string t = dtype_c_type(a.buffer->dtype);
                KILN_ICHECK(a.buffer->is_static() || !a.buffer->local)
                    << "local buffer '" << a.buffer->name << "' with a symbolic shape";
                // A symbolic size is computed at run time from the dims (in size_t: no UB).
                const std::string numel = a.buffer->is_static() ? std::to_string(a.buffer->numel())
                                                                : e(a.buffer->numel_expr());
                const std::string bytes = a.buffer->is_static()
                                              ? std::to_string(a.buffer->numel() * static_cast<int64_t>(
                                                                   dtype_size(a.buffer->dtype)))
                                              : "(size_t)" + numel + " * " + std::to_string(dtype_size(a.buffer->dtype));
                pad(sc);
                *sc.out << "{\n";
                ++sc.indent;
                if (a.buffer->local) {  // a register tile: a fixed-size array gcc keeps in registers
                    pad(sc);
                    *sc.out << t << " " << name << "[" << numel << "] __attribute__((aligned(64)));  /* "
                            << a.buffer->name << " local */\n";
                    stmt(a.body, sc);
                    --sc.indent;
                    pad(sc);
                    *sc.out << "}\n";
                    break;
                }
                pad(sc);
                *sc.out << t << "* restrict " << name << " = (" << t << "*)kiln_alloc(" << bytes << ");  /* "
                        << a.buffer->name << " " << dtype_name(a.buffer->dtype) << "["
                        << numel << "] */\n";
                pad(sc);
                *sc.out << "if (!" << name << ") " << fail_block(sc) << "\n";
                sc.live.push_back(name);
                stmt(a.body, sc);
                sc.live.pop_back();
                pad(sc);
                *sc.out << "free(" << name << ");\n";
                --sc.indent;
                pad(sc);
                *sc.out << "}\n";
                break;
            }
        }
    }

    void emit_for(const tir::ForNode& f, Scope& sc) {
        std::string v = names_.var(f.var.get());
        // Loops count up from 0 (a task's from kiln_begin >= 0): floordiv/floormod of their indices by a
        // positive constant print as C / and %, which GCC hoists out of an inner loop (the
        // branch-free helpers kept a QDQ transpose's out-of-line task loop scalar: 10x slower).
        names_.mark_nonnegative(f.var.get());
        if (f.loop_kind == LoopKind::kParallel && !sc.in_task) {
            emit_parallel(f, sc);
            return;
        }
        if (!f_.params_may_alias) {
            if (const auto tile = match_transpose_tile(f)) {
                emit_transpose_tile(f, *tile, sc);
                return;
            }
        }
        if (f.loop_kind == LoopKind::kVectorized && stores_depend_on(f.body, f.var.get())) {
            if (const auto gathers = gathers_to_stage(f); !gathers.empty()) {
                emit_staged(f, gathers, sc);
                return;
            }
            if (keep_for_vectorizer(f)) {
                pad(sc);
                *sc.out << "#pragma GCC unroll 1\n";
            }
            pad(sc);
            *sc.out << "#pragma GCC ivdep\n";
        } else if (f.loop_kind == LoopKind::kUnrolled) {
            int64_t n = 8;
            if (f.extent->kind == ExprKind::kIntImm) {
                int64_t ext = static_cast<const te::IntImmNode&>(*f.extent).value;
                if (ext > 0 && ext <= 32) n = ext;
            }
            pad(sc);
            *sc.out << "KILN_UNROLL(" << n << ")\n";  // #pragma GCC unroll n, except at the quick tier
        }
        pad(sc);
        *sc.out << "for (int64_t " << v << " = 0; " << v << " < " << e(f.extent) << "; ++" << v << ") {";
        if (f.loop_kind != LoopKind::kSerial)
            *sc.out << "  /* " << loop_kind_word(f.loop_kind)
                    << (f.loop_kind == LoopKind::kParallel ? ", nested: run serially" : "") << " */";
        *sc.out << "\n";
        ++sc.indent;
        // A parallel loop here is nested in a task: run serially.
        const bool serial = f.loop_kind == LoopKind::kSerial || f.loop_kind == LoopKind::kParallel;
        const size_t hoisted = serial ? hoist_divisions(f.body, sc) : 0;
        stmt(f.body, sc);
        names_.pop_hoisted(hoisted);
        --sc.indent;
        pad(sc);
        *sc.out << "}\n";
    }

    /// The 16 x 16 tile loop nest `f` (codegen/transpose_tiles.h) as one call of the prelude's
    /// helper, its two loop indices 0 in the addresses of the tile's first elements.
    void emit_transpose_tile(const tir::ForNode& f, const TransposeTile& t, Scope& sc) {
        uses_transpose_tile_ = true;
        names_.mark_nonnegative(t.inner);
        pad(sc);
        *sc.out << "{  /* a 16 x 16 transpose tile */\n";
        ++sc.indent;
        pad(sc);
        *sc.out << "const int64_t " << names_.var(f.var.get()) << " = 0, " << names_.var(t.inner) << " = 0;\n";
        pad(sc);
        *sc.out << "kiln_transpose_16x16_4b(&" << names_.buffer(t.store->buffer.get()) << "["
                << strip_parens(e(t.store->index)) << "], " << t.out_stride << "LL, &"
                << names_.buffer(t.load->buffer.get()) << "[" << strip_parens(e(t.load->index)) << "], "
                << t.in_stride << "LL);\n";
        --sc.indent;
        pad(sc);
        *sc.out << "}\n";
    }

    /// Vectorized loop `f` with its `gathers` read ahead into arrays, one scalar loop each
    /// (codegen/staged_gathers.h); the loop then reads them with unit stride and vectorizes.
    void emit_staged(const tir::ForNode& f, const std::vector<te::Expr>& gathers, Scope& sc) {
        const std::string v = names_.var(f.var.get());
        const std::string n = e(f.extent);
        pad(sc);
        *sc.out << "{\n";
        ++sc.indent;
        for (const te::Expr& g : gathers) {
            const std::string text = e(g);
            const std::string name = "kiln_g" + std::to_string(staged_count_++);
            names_.reserve_name(name);
            pad(sc);
            *sc.out << dtype_c_type(g->dtype) << " " << name << "[" << n << "] __attribute__((aligned(64)));\n";
            pad(sc);
            *sc.out << "for (int64_t " << v << " = 0; " << v << " < " << n << "; ++" << v << ") " << name << "[" << v
                    << "] = " << strip_parens(text) << ";\n";
            names_.push_hoisted(text, name + "[" + v + "]");
        }
        pad(sc);
        *sc.out << "#pragma GCC unroll 1\n";
        pad(sc);
        *sc.out << "#pragma GCC ivdep\n";
        pad(sc);
        *sc.out << "for (int64_t " << v << " = 0; " << v << " < " << n << "; ++" << v << ") {  /* vectorized, "
                << gathers.size() << " gather(s) staged */\n";
        ++sc.indent;
        stmt(f.body, sc);
        --sc.indent;
        pad(sc);
        *sc.out << "}\n";
        names_.pop_hoisted(gathers.size());
        --sc.indent;
        pad(sc);
        *sc.out << "}\n";
    }

    /// Computes the body's loop-invariant divisions by run-time dims into locals at the top of a
    /// serial loop's body (codegen/invariant_divisions.h); returns how many to pop after it.
    /// Static kernels divide by constants only and print as before.
    size_t hoist_divisions(const tir::Stmt& body, Scope& sc) {
        if (f_.dims.empty()) return 0;
        size_t pushed = 0;
        for (const te::Expr& d : invariant_divisions(body)) {
            std::string text = e(d);
            if (hoisted_names_.count(text)) continue;  // already printed as an enclosing local
            std::string name = "kiln_q" + std::to_string(hoisted_names_.size());
            pad(sc);
            *sc.out << "const " << dtype_c_type(d->dtype) << " " << name << " = " << strip_parens(text) << ";\n";
            names_.push_hoisted(text, name);
            hoisted_names_.insert(name);
            ++pushed;
        }
        return pushed;
    }

    void emit_parallel(const tir::ForNode& f, Scope& sc) {
        int k = task_count_++;
        std::string task = f_.name + "_task" + std::to_string(k);
        std::string ctx_t = task + "_ctx";
        names_.reserve_name(task);
        names_.reserve_name(ctx_t);
        FreeUses uses;
        uses.bind_var(f.var.get());
        uses.stmt(f.body);

        // The context struct and the task function.
        std::ostringstream fn;
        fn << "typedef struct " << ctx_t << " {\n";
        for (const auto* b : uses.buffers) fn << "    " << dtype_c_type(b->dtype) << "* " << names_.buffer(b) << ";\n";
        for (const auto* v : uses.vars) fn << "    " << dtype_c_type(v->dtype) << " " << names_.var(v) << ";\n";
        fn << "    int32_t failed;\n} " << ctx_t << ";\n\n";
        std::string v = names_.var(f.var.get());
        fn << "static void " << task << "(int64_t kiln_begin, int64_t kiln_end, void* kiln_ctx_) {\n";
        fn << "    " << ctx_t << "* kiln_ctx = (" << ctx_t << "*)kiln_ctx_;\n";
        for (const auto* b : uses.buffers) {
            std::string t = dtype_c_type(b->dtype);
            fn << "    " << t << (is_param(b) ? param_qualifier() : "* restrict ") << names_.buffer(b) << " = kiln_ctx->"
               << names_.buffer(b) << ";\n";
        }
        for (const auto* x : uses.vars)
            fn << "    const " << dtype_c_type(x->dtype) << " " << names_.var(x) << " = kiln_ctx->" << names_.var(x) << ";\n";
        fn << "    for (int64_t " << v << " = kiln_begin; " << v << " < kiln_end; ++" << v << ") {\n";
        Scope inner{&fn, 2, true, {}};
        auto outer_hoisted = names_.take_hoisted();  // the caller's locals are not in the task
        const size_t hoisted = hoist_divisions(f.body, inner);
        stmt(f.body, inner);
        names_.pop_hoisted(hoisted);
        names_.restore_hoisted(std::move(outer_hoisted));
        fn << "    }\n}\n\n";
        tasks_ << fn.str();

        // The call site.
        std::string c = "kiln_c" + std::to_string(k);
        pad(sc);
        *sc.out << "{  /* parallel " << v << " < " << e(f.extent) << " */\n";
        ++sc.indent;
        pad(sc);
        *sc.out << ctx_t << " " << c << ";\n";
        for (const auto* b : uses.buffers) {
            pad(sc);
            *sc.out << c << "." << names_.buffer(b) << " = " << names_.buffer(b) << ";\n";
        }
        for (const auto* x : uses.vars) {
            pad(sc);
            *sc.out << c << "." << names_.var(x) << " = " << names_.var(x) << ";\n";
        }
        pad(sc);
        *sc.out << c << ".failed = 0;\n";
        pad(sc);
        *sc.out << "if (env && env->parallel_for)\n";
        pad(sc);
        *sc.out << "    env->parallel_for(env->pool, " << e(f.extent) << ", " << task << ", &" << c << ");\n";
        pad(sc);
        *sc.out << "else\n";
        pad(sc);
        *sc.out << "    " << task << "(0, " << e(f.extent) << ", &" << c << ");\n";
        pad(sc);
        *sc.out << "if (" << c << ".failed) " << fail_block(sc) << "\n";
        pad(sc);
        *sc.out << "if (env && env->stop && *env->stop) " << stop_block(sc) << "\n";
        --sc.indent;
        pad(sc);
        *sc.out << "}\n";
    }

    const tir::PrimFunc& f_;
    CNames names_;
    std::ostringstream tasks_;
    int task_count_ = 0;
    int staged_count_ = 0;
    bool uses_transpose_tile_ = false;  // a kernel calling kiln_transpose_16x16_4b gets its prelude
    std::unordered_set<std::string> hoisted_names_;
};

}  // namespace

std::string emit_c(const tir::PrimFunc& f) { return CEmitter(f).run(); }

}  // namespace kiln::codegen
