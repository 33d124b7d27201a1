// Tensors of the tensor-expression language: placeholders (kernel inputs) and computes.
//
//   Tensor A = placeholder({n, k}, DType::kFloat32, "A");
//   IterVar r = reduce_axis(k, "r");
//   Tensor C = compute({n, m}, [&](const std::vector<Var>& i) {
//       return sum(A(i[0], r) * B(r, i[1]), {r}); }, "C");
//
// Shapes are static: Kiln compiles for concrete shapes (symbolic dims are bound before lowering).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "te/expr.h"

namespace kiln::te {

struct TensorNode : std::enable_shared_from_this<TensorNode> {
    std::string name;
    DType dtype;                 // storage dtype
    std::vector<int64_t> shape;  // static
    bool is_placeholder = true;
    // Compute tensors only:
    std::vector<IterVar> axis;   // one data-parallel IterVar per output dimension
    Expr body;                   // value at `axis`; may be a ReduceNode at top level

    int64_t numel() const;
    int ndim() const { return static_cast<int>(shape.size()); }
    /// Tensors read by `body` (direct producers), in first-read order.
    std::vector<Tensor> inputs() const;
};

Tensor placeholder(std::vector<int64_t> shape, DType dtype, const std::string& name);

/// `fcompute` receives one int64 Var per output dimension. The body's dtype is converted to
/// compute_dtype(dtype) if it differs; dtype defaults to the body's dtype.
Tensor compute(std::vector<int64_t> shape, const std::function<Expr(const std::vector<Var>&)>& fcompute,
               const std::string& name, std::optional<DType> dtype = std::nullopt);

/// Read of a tensor at the given indices (a TensorRead expression).
Expr read(const Tensor& t, std::vector<Expr> indices);
Expr read(const Tensor& t, const std::vector<Var>& indices);

/// All tensors reachable from `outputs` (through inputs()), producers before consumers.
std::vector<Tensor> post_order(const std::vector<Tensor>& outputs);

}  // namespace kiln::te
