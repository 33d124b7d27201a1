// Tensors of the tensor-expression language: placeholders (kernel inputs) and computes.
//
//   Tensor A = placeholder({n, k}, DType::kFloat32, "A");
//   IterVar r = reduce_axis(k, "r");
//   Tensor C = compute({n, m}, [&](const std::vector<Var>& i) {
//       return sum(A(i[0], r) * B(r, i[1]), {r}); }, "C");
//
// Shapes are static (int64) or symbolic: sym_placeholder/sym_compute take dims that are int64
// expressions of dim Vars (te/dims.h); handed constants they build the static tensors. (They
// are not overloads of placeholder/compute so that `placeholder({}, ...)` and `{5}` stay
// unambiguous for every existing caller.)
//
//   Var n = make_dim("n");
//   Tensor X = sym_placeholder({n, int_imm(384)}, DType::kFloat32, "X");
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "te/dims.h"
#include "te/expr.h"

namespace kiln::te {

struct TensorNode : std::enable_shared_from_this<TensorNode> {
    std::string name;
    DType dtype;                 // storage dtype
    std::vector<int64_t> shape;  // kDynamicDim where sym_shape holds a symbolic dim
    std::vector<Expr> sym_shape; // empty: static shape; else one int64 dim expression per dim
    bool is_placeholder = true;
    // Compute tensors only:
    std::vector<IterVar> axis;   // one data-parallel IterVar per output dimension
    Expr body;                   // value at `axis`; may be a ReduceNode at top level

    int64_t numel() const;  // static shapes only
    int ndim() const { return static_cast<int>(shape.size()); }
    bool is_static() const { return sym_shape.empty(); }
    /// The dims as expressions (IntImms when static).
    std::vector<Expr> shape_exprs() const;
    /// Tensors read by `body` (direct producers), in first-read order.
    std::vector<Tensor> inputs() const;
};

Tensor placeholder(std::vector<int64_t> shape, DType dtype, const std::string& name);
/// A placeholder with dims given as expressions (te/dims.h); all-constant dims give the static one.
Tensor sym_placeholder(const std::vector<Expr>& shape, DType dtype, const std::string& name);

/// `fcompute` receives one int64 Var per output dimension. The body's dtype is converted to
/// compute_dtype(dtype) if it differs; dtype defaults to the body's dtype.
Tensor compute(std::vector<int64_t> shape, const std::function<Expr(const std::vector<Var>&)>& fcompute,
               const std::string& name, std::optional<DType> dtype = std::nullopt);
/// compute() over dims given as expressions; the axes of symbolic dims get symbolic extents.
Tensor sym_compute(const std::vector<Expr>& shape, const std::function<Expr(const std::vector<Var>&)>& fcompute,
                   const std::string& name, std::optional<DType> dtype = std::nullopt);

/// Read of a tensor at the given indices (a TensorRead expression).
Expr read(const Tensor& t, std::vector<Expr> indices);
Expr read(const Tensor& t, const std::vector<Var>& indices);

/// All tensors reachable from `outputs` (through inputs()), producers before consumers.
std::vector<Tensor> post_order(const std::vector<Tensor>& outputs);

}  // namespace kiln::te
