// tir: the loop IR produced by lowering a scheduled TE. Expressions are te::Expr (with
// BufferLoad instead of TensorRead); statements are below. A PrimFunc is one kernel.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "te/expr.h"
#include "te/schedule.h"

namespace kiln::tir {

using te::Buffer;
using te::Expr;
using te::Var;

enum class StmtKind { kFor, kStore, kSeq, kIf, kAllocate, kPrefetch };

struct StmtNode;
using Stmt = std::shared_ptr<const StmtNode>;

struct StmtNode {
    StmtKind kind;
    explicit StmtNode(StmtKind k) : kind(k) {}
    virtual ~StmtNode() = default;
};

/// for (var = 0; var < extent; ++var) body — `kind` says how the loop may be run.
struct ForNode : StmtNode {
    Var var;
    Expr extent;  // int64
    te::LoopKind loop_kind;
    Stmt body;
    ForNode(Var v, Expr e, te::LoopKind k, Stmt b)
        : StmtNode(StmtKind::kFor), var(std::move(v)), extent(std::move(e)), loop_kind(k), body(std::move(b)) {}
};
/// buffer[index] = value (value is in compute dtype; stored converted to the buffer's dtype).
struct StoreNode : StmtNode {
    Buffer buffer;
    Expr index;
    Expr value;
    StoreNode(Buffer b, Expr i, Expr v) : StmtNode(StmtKind::kStore), buffer(std::move(b)), index(std::move(i)), value(std::move(v)) {}
};
struct SeqNode : StmtNode {
    std::vector<Stmt> stmts;
    explicit SeqNode(std::vector<Stmt> s) : StmtNode(StmtKind::kSeq), stmts(std::move(s)) {}
};
struct IfNode : StmtNode {
    Expr cond;
    Stmt then_case;
    Stmt else_case;  // may be null
    IfNode(Expr c, Stmt t, Stmt e) : StmtNode(StmtKind::kIf), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
};
/// A kernel-local buffer (an intermediate stage) live during `body`.
struct AllocateNode : StmtNode {
    Buffer buffer;
    Stmt body;
    AllocateNode(Buffer b, Stmt s) : StmtNode(StmtKind::kAllocate), buffer(std::move(b)), body(std::move(s)) {}
};

/// A hint that buffer[index] will be read soon (te::Stage::prefetch): the C emitter fetches its
/// line into the core's L2 ahead of the loads; it reads and writes nothing, so the interpreter
/// and the CUDA emitter skip it and an index past the buffer is harmless (never dereferenced).
struct PrefetchNode : StmtNode {
    Buffer buffer;
    Expr index;
    PrefetchNode(Buffer b, Expr i) : StmtNode(StmtKind::kPrefetch), buffer(std::move(b)), index(std::move(i)) {}
};

Stmt make_for(Var v, Expr extent, te::LoopKind k, Stmt body);
Stmt make_prefetch(Buffer b, Expr index);
Stmt make_store(Buffer b, Expr index, Expr value);
Stmt make_seq(std::vector<Stmt> stmts);  // flattens nested Seqs, drops nulls
Stmt make_if(Expr cond, Stmt then_case, Stmt else_case = nullptr);
Stmt make_allocate(Buffer b, Stmt body);

/// One kernel: parameters are buffers (inputs first, then outputs, as lowering was asked).
struct PrimFunc {
    std::string name;
    std::vector<Buffer> params;
    Stmt body;
    /// Parameters may alias (an output planned in place of an elementwise input): the C emitter
    /// then declares them without `restrict`.
    bool params_may_alias = false;
    /// The symbolic dims the kernel takes as parameters (empty: a static kernel), in the order
    /// of the `dims` array of the kiln_kernel_dims_fn ABI (runtime/kernel_abi.h). Buffer shapes,
    /// loop extents and allocations may be expressions of these Vars (te/dims.h).
    std::vector<Var> dims;
};

/// Readable loop-nest text (for `kiln inspect` and tests).
std::string stmt_str(const Stmt& s, int indent = 0);
std::string func_str(const PrimFunc& f);

/// Replaces variables (by identity) in every expression of `s`; loop variables themselves are
/// not renamed.
Stmt substitute(const Stmt& s, const std::unordered_map<const te::VarNode*, Expr>& vmap);

/// `s` with its loops rewritten innermost first: each loop's body is rewritten, then
/// `on_for(loop, new_body)` gives the loop's replacement, or nullptr to keep the loop around its
/// new body. Seq, If and Allocate are rebuilt around their rewritten children; unchanged
/// subtrees are shared. The walk of the loop passes (partition_loops, unswitch_loops).
Stmt rewrite_loops(const Stmt& s, const std::function<Stmt(const ForNode& loop, const Stmt& body)>& on_for);

}  // namespace kiln::tir
