// Variadic elementwise ops over 1..N inputs with multidirectional (numpy) broadcasting:
// Max Min (NaN-propagating for floats; every numeric dtype), Sum, Mean (= Sum / N; floats).
// The inputs fold left to right into one expression of a single stage.
// Gradients: fold_gradient.
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


// ---- gradients (op/gradient.h) ----
// Sum: every input gets g summed to its shape; Mean: g / N; Max/Min: g flows to the inputs equal
// to the result (tied inputs each get all of g: a subgradient; ties have measure zero).

enum class FoldGrad { kSum, kMean, kSelect };

GradientFn fold_gradient(FoldGrad kind) {
    return [kind](GradientBuilder& b) {
        ir::Value* g = b.output_grad_or_zeros(0);
        const DType t = g->type().dtype;
        if (kind == FoldGrad::kMean)
            g = b.emit1("Mul", {g, b.scalar(1.0 / static_cast<double>(b.num_inputs()), t)});
        std::vector<ir::Value*> out(b.num_inputs(), nullptr);
        for (size_t i = 0; i < b.num_inputs(); ++i) {
            if (!b.needs_grad(i)) continue;
            ir::Value* gi = g;
            if (kind == FoldGrad::kSelect) {
                ir::Value* hit = b.emit1("Equal", {b.input(i), b.output(0)});
                gi = b.emit1("Where", {hit, g, b.scalar(0.0, t)});
            }
            out[i] = b.reduce_to_shape(gi, b.input(i)->type());
        }
        return out;
    };
}

OpDef with_gradient(OpDef d, FoldGrad kind) {
    d.gradient = fold_gradient(kind);
    return d;
}

}  // namespace

void register_variadic_ops(OpRegistry& r) {
    r.add(with_gradient(fold_op("Max", {1, 6, 8, 12, 13}, numeric_types(), BinaryOp::kMax), FoldGrad::kSelect));
    r.add(with_gradient(fold_op("Min", {1, 6, 8, 12, 13}, numeric_types(), BinaryOp::kMin), FoldGrad::kSelect));
    r.add(with_gradient(fold_op("Sum", {1, 6, 8, 13}, float_types(), BinaryOp::kAdd), FoldGrad::kSum));
    r.add(with_gradient(fold_op("Mean", {1, 6, 8, 13}, float_types(), BinaryOp::kAdd, true), FoldGrad::kMean));
}

}  // namespace kiln::op
