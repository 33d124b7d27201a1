// Det (11/22): determinants of the trailing [M, M] matrices of X [..., M, M] -> [...].
// Closed form by cofactor (Laplace) expansion along the first row, unrolled at compile time
// into one elementwise expression per output element (M! products: M <= 4 is supported; a
// larger M is a kUnsupported error, an LU kernel would be needed there).
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

constexpr int64_t kMaxDetSize = 4;

// det of the submatrix of rows [row, M) and the given columns.
Expr cofactor_det(const std::function<Expr(int64_t, int64_t)>& at, int64_t row, const std::vector<int64_t>& cols) {
    if (cols.size() == 1) return at(row, cols[0]);
    Expr acc;
    for (size_t j = 0; j < cols.size(); ++j) {
        std::vector<int64_t> rest;
        for (size_t k = 0; k < cols.size(); ++k)
            if (k != j) rest.push_back(cols[k]);
        Expr term = at(row, cols[j]) * cofactor_det(at, row + 1, rest);
        if (!acc)
            acc = term;
        else
            acc = j % 2 ? acc - term : acc + term;
    }
    return acc;
}

OpDef det_op() {
    OpDef d;
    d.name = "Det";
    d.onnx_versions = {11, 22};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, float_types());
        KILN_CHECK(x.rank() >= 2, kInvalidModel) << node_label(n) << ": X must have rank >= 2, got " << x.rank();
        const int64_t m = static_dim(n, x.shape[x.rank() - 1], "X dim -1");
        KILN_CHECK(static_dim(n, x.shape[x.rank() - 2], "X dim -2") == m, kInvalidModel)
            << node_label(n) << ": X must hold square matrices, got shape " << dims_str(x.shape);
        KILN_CHECK(m >= 1 && m <= kMaxDetSize, kUnsupported)
            << node_label(n) << ": Det of " << m << "x" << m << " matrices is not supported (at most "
            << kMaxDetSize << "x" << kMaxDetSize << ")";
        return std::vector<ir::TensorType>{{x.dtype, std::vector<ir::Dim>(x.shape.begin(), x.shape.end() - 2)}};
    };
    d.compute = [](const ComputeArgs& a) {
        const te::Tensor& x = a.in(0);
        const int64_t m = x->shape.back();
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                auto at = [&](int64_t r, int64_t c) {
                    std::vector<Expr> ix(i.begin(), i.end());
                    ix.push_back(te::int_imm(r));
                    ix.push_back(te::int_imm(c));
                    return te::read(x, ix);
                };
                std::vector<int64_t> cols;
                for (int64_t c = 0; c < m; ++c) cols.push_back(c);
                return cofactor_det(at, 0, cols);
            },
            "Det", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

}  // namespace

void register_det_ops(OpRegistry& r) { r.add(det_op()); }

}  // namespace kiln::op
