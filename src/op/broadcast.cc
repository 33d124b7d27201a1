// Numpy broadcasting (see broadcast.h).
#include "op/broadcast.h"

#include <algorithm>

#include "ir/dim_expr.h"
#include "op/op_util.h"
#include "support/error.h"

namespace kiln::op {

namespace {
// Broadcasts two dims; false if incompatible.
bool broadcast_dim(const ir::Dim& a, const ir::Dim& b, ir::Dim* out) {
    if (a == b) return *out = a, true;
    if (a.is_static() && a.value == 1) return *out = b, true;
    if (b.is_static() && b.value == 1) return *out = a, true;
    if (a.is_static() && b.is_static()) return false;
    if (a.is_static()) return *out = a, true;  // symbol b must be 1 or a
    if (b.is_static()) return *out = b, true;
    // Two different dim expressions of a symbolic compile, at least one computed (a conv's
    // floor((H+1)/2) beside an upsampled 2*floor((H+3)/4)): the model needs them equal, and the
    // compile asserts that at run time (compiler::symbolic_refusal); the shorter text names it.
    auto pa = ir::dim_poly(a), pb = ir::dim_poly(b);
    if (pa && pb && !(pa->is_symbol() && pb->is_symbol())) {
        const bool a_first = a.symbol.size() != b.symbol.size() ? a.symbol.size() < b.symbol.size() : a.symbol < b.symbol;
        return *out = a_first ? a : b, true;
    }
    *out = ir::Dim::sym("?");  // two different input symbols: unknown
    return true;
}
}  // namespace

std::vector<ir::Dim> broadcast_shapes(const ir::Node& n, const std::vector<std::vector<ir::Dim>>& shapes) {
    std::vector<ir::Dim> result;
    for (size_t k = 0; k < shapes.size(); ++k) {
        const auto& s = shapes[k];
        if (k == 0) {
            result = s;
            continue;
        }
        size_t rank = std::max(result.size(), s.size());
        std::vector<ir::Dim> next(rank);
        for (size_t i = 0; i < rank; ++i) {
            // Right-aligned positions.
            int64_t ia = static_cast<int64_t>(i) - static_cast<int64_t>(rank - result.size());
            int64_t ib = static_cast<int64_t>(i) - static_cast<int64_t>(rank - s.size());
            ir::Dim a = ia >= 0 ? result[ia] : ir::Dim(1);
            ir::Dim b = ib >= 0 ? s[ib] : ir::Dim(1);
            KILN_CHECK(broadcast_dim(a, b, &next[i]), kInvalidModel)
                << node_label(n) << ": shapes " << dims_str(result) << " and " << dims_str(s)
                << " are not broadcastable";
        }
        result = std::move(next);
    }
    return result;
}

std::vector<te::Expr> broadcast_indices(const std::vector<int64_t>& in_shape, const std::vector<te::Var>& out_idx) {
    KILN_ICHECK(out_idx.size() >= in_shape.size()) << "broadcast read of a higher-rank tensor";
    size_t off = out_idx.size() - in_shape.size();
    std::vector<te::Expr> idx;
    for (size_t i = 0; i < in_shape.size(); ++i)
        idx.push_back(in_shape[i] == 1 ? te::int_imm(0) : te::Expr(out_idx[off + i]));
    return idx;
}

te::Expr broadcast_read(const te::Tensor& t, const std::vector<te::Var>& out_idx) {
    return te::read(t, broadcast_indices(t->shape, out_idx));
}

}  // namespace kiln::op
