// C expressions for tir: identifier naming and the per-node C forms used by the C emitter.
#pragma once

#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "te/expr.h"

namespace kiln::codegen {

/// Unique C identifiers for Vars and Buffers (by node identity), clear of C keywords, libc/libm
/// names and the reserved kiln_ prefix.
class CNames {
public:
    std::string var(const te::VarNode* v);
    std::string buffer(const te::BufferNode* b);
    /// Marks a name as taken (function and struct names the emitter creates).
    void reserve_name(const std::string& name) { used_.insert(name); }
    /// Marks an int variable as never negative (a loop variable, a checked dim): floordiv and
    /// floormod of it by a positive constant print as C's / and % (kernels with dims only, so
    /// static kernels' source stays as it was). The helpers' selects, if-converted into an inner
    /// loop, kept GCC from vectorizing it (a symbolic kernel's row index divided by its heads).
    void mark_nonnegative(const te::VarNode* v) { nonneg_.insert(v); }
    bool nonnegative(const te::VarNode* v) const { return nonneg_.count(v) > 0; }
    /// Whether any variable was marked (a kernel with dims; static kernels print as before).
    bool marks_nonnegative() const { return !nonneg_.empty(); }
    /// A subexpression computed ahead into a local (the emitter's loop-invariant divisions,
    /// codegen/invariant_divisions.h): printing `text` prints `name` instead, until popped.
    void push_hoisted(const std::string& text, const std::string& name) { hoisted_.emplace_back(text, name); }
    void pop_hoisted(size_t count) { hoisted_.resize(hoisted_.size() - count); }
    const std::string* hoisted(const std::string& text) const {
        for (const auto& [t, n] : hoisted_)
            if (t == text) return &n;
        return nullptr;
    }
    /// The hoisted locals, taken out (a task function cannot see its caller's), then put back.
    std::vector<std::pair<std::string, std::string>> take_hoisted() { return std::exchange(hoisted_, {}); }
    void restore_hoisted(std::vector<std::pair<std::string, std::string>> h) { hoisted_ = std::move(h); }

private:
    std::string fresh(const std::string& hint);
    std::unordered_map<const void*, std::string> names_;
    std::set<std::string> used_;
    std::set<const te::VarNode*> nonneg_;
    std::vector<std::pair<std::string, std::string>> hoisted_;
};

bool is_c_identifier(const std::string& s);
/// True if `e` mentions variable `v`.
bool expr_uses_var(const te::Expr& e, const te::VarNode* v);

/// `s` without one pair of parentheses enclosing all of it ("(a + b)" -> "a + b").
std::string strip_parens(const std::string& s);

/// The C text of an expression (fully parenthesized where needed).
std::string print_c_expr(const te::Expr& e, CNames& names);
/// The C text of `value` converted for storing into a buffer of `storage` dtype.
std::string store_value_c(DType storage, const te::Expr& value, CNames& names);

}  // namespace kiln::codegen
