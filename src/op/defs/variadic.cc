// Variadic elementwise ops over 1..N inputs with multidirectional (numpy) broadcasting:
// Max Min (NaN-propagating for floats; every numeric dtype), Sum, Mean (= Sum / N; floats).
// The inputs fold left to right into one expression of a single stage.
#include "op/elementwise_util.h"
#include "op/op_util.h"
#include "op/registry.h"

namespace kiln::op {

namespace {

using te::BinaryOp;
using te::Expr;

OpDef fold_op(const std::string& name, std::vector<int> versions, const std::vector<DType>& types, BinaryOp op,
              bool mean = false) {
    return map_op(name, std::move(versions), 1, -1, types, [op, mean](const std::vector<Expr>& x, const ir::Node&) {
        Expr acc = x[0];
        for (size_t i = 1; i < x.size(); ++i) acc = te::binary(op, acc, x[i]);
        if (mean) acc = acc / te::make_const(acc->dtype, static_cast<double>(x.size()));
        return acc;
    });
}

}  // namespace

void register_variadic_ops(OpRegistry& r) {
    r.add(fold_op("Max", {1, 6, 8, 12, 13}, numeric_types(), BinaryOp::kMax));
    r.add(fold_op("Min", {1, 6, 8, 12, 13}, numeric_types(), BinaryOp::kMin));
    r.add(fold_op("Sum", {1, 6, 8, 13}, float_types(), BinaryOp::kAdd));
    r.add(fold_op("Mean", {1, 6, 8, 13}, float_types(), BinaryOp::kAdd, true));
}

}  // namespace kiln::op
