// Helpers shared by the shape / data-movement op definitions (shape.cc, movement.cc,
// slice_pad.cc, index_ops.cc, generators.cc):
//  - const_table: a small compile-time table indexed by an expression, expressed as a chain of
//    selects (O(table size) per element; used for Shape's dims and Compress's index map);
//  - constant_scalar: the value of a one-element constant input (Range's start, OneHot depth);
//  - scalar_value / value_of: immediates in a compute dtype from doubles or int64s.
#pragma once

#include <cstdint>
#include <vector>

#include "op/op_util.h"
#include "support/error.h"
#include "te/tensor.h"

namespace kiln::op {

/// table[i] for 0 <= i < table.size() as a select chain (the last entry for any other i; 0
/// for an empty table).
inline te::Expr const_table(const te::Expr& i, const std::vector<int64_t>& table) {
    if (table.empty()) return te::int_imm(0);
    te::Expr v = te::int_imm(table.back());
    for (size_t k = table.size() - 1; k-- > 0;)
        v = te::select(te::eq(i, te::int_imm(static_cast<int64_t>(k))), te::int_imm(table[k]), v);
    return v;
}

/// The constant input i (a tensor with one element); throws naming `what`.
inline const Tensor& constant_scalar(const ir::Node& n, size_t i, const char* what) {
    const ir::Value* v = n.input(i);
    KILN_CHECK(v != nullptr, kInvalidModel) << node_label(n) << ": missing required input " << what;
    KILN_CHECK(v->is_constant(), kUnsupported)
        << node_label(n) << ": input " << what << " ('" << v->name() << "') must be a constant";
    KILN_CHECK(v->constant().numel() == 1, kInvalidModel)
        << node_label(n) << ": input " << what << " must hold one element, got shape " << shape_str(v->constant().shape());
    return v->constant();
}

/// Element k of `t` as an immediate of compute_dtype(dt) (exact for integer dtypes).
inline te::Expr tensor_elem_imm(const Tensor& t, int64_t k, DType dt) {
    DType c = te::compute_dtype(dt);
    if (dtype_is_float(c)) return te::make_const(c, t.get_f64(k));
    if (dtype_is_float(t.dtype())) return te::int_imm(static_cast<int64_t>(t.get_f64(k)), c);
    return te::int_imm(t.get_i64(k), c);
}

/// Reads a tensor holding one element (at all-zero indices).
inline te::Expr read_scalar(const te::Tensor& t) { return te::read(t, std::vector<te::Expr>(t->ndim(), te::int_imm(0))); }

}  // namespace kiln::op
