#include "compiler/cuda_row_match.h"

#include "op/op_util.h"

namespace kiln::compiler {
namespace {

bool static_of(const ir::Value* v, DType dt) { return v && v->type().dtype == dt && v->type().is_static(); }

}  // namespace

std::optional<codegen::RowKernelSpec> row_kernel_choice(const KernelUnit& unit) {
    if (unit.nodes.size() != 1) return std::nullopt;
    const ir::Node& n = *unit.nodes[0];
    const bool ln = n.op() == "LayerNormalization";
    if ((!ln && n.op() != "Softmax") || n.num_inputs() < 1 || n.num_outputs() != 1) return std::nullopt;
    const ir::Value* x = n.input(0);
    const DType dt = x ? x->type().dtype : DType::kFloat32;
    if ((dt != DType::kFloat32 && dt != DType::kFloat16) || !static_of(x, dt) || !static_of(n.output(0), dt))
        return std::nullopt;
    const Shape xs = x->type().static_shape();
    if (xs.empty() || op::normalize_axis(n, n.attr_int("axis", -1), static_cast<int>(xs.size())) != static_cast<int>(xs.size()) - 1)
        return std::nullopt;
    codegen::RowKernelSpec s;
    s.kind = ln ? codegen::RowKernelSpec::Kind::kLayerNorm : codegen::RowKernelSpec::Kind::kSoftmax;
    s.cols = xs.back();
    s.rows = shape_numel(xs) / std::max<int64_t>(s.cols, 1);
    s.dtype = dt;
    if (ln) {
        if (n.num_inputs() < 2 || n.attr_int("stash_type", 1) != 1) return std::nullopt;
        for (size_t i = 1; i < n.num_inputs(); ++i) {  // Scale, B: one value per column
            const ir::Value* p = n.input(i);
            if (!p) continue;
            if (!static_of(p, dt) || shape_numel(p->type().static_shape()) != s.cols) return std::nullopt;
        }
        s.has_bias = n.num_inputs() > 2 && n.input(2) != nullptr;
        s.epsilon = n.attr_float("epsilon", 1e-5);
    } else if (n.num_inputs() != 1) {
        return std::nullopt;
    }
    return s;
}

}  // namespace kiln::compiler
