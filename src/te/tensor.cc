// Placeholders and computes: building compute bodies, reading tensors, and walking the tensor
// graph (direct inputs of a body; post order of everything reachable from outputs).
#include "te/tensor.h"

#include <functional>
#include <unordered_set>

#include "support/error.h"
#include "te/dims.h"

namespace kiln::te {

namespace {
// Visits every TensorRead in `e` (pre-order, left to right); `allow_reduce` says whether a
// Reduce may appear at this position (only the top level of a compute body).
void visit_reads(const Expr& e, const std::function<void(const TensorReadNode&)>& fn,
                 bool allow_reduce, const std::string& owner) {
    if (!e) return;
    switch (e->kind) {
        case ExprKind::kBinary: {
            const auto& n = static_cast<const BinaryNode&>(*e);
            visit_reads(n.a, fn, false, owner);
            visit_reads(n.b, fn, false, owner);
            break;
        }
        case ExprKind::kUnary:
            visit_reads(static_cast<const UnaryNode&>(*e).a, fn, false, owner);
            break;
        case ExprKind::kCast:
            visit_reads(static_cast<const CastNode&>(*e).a, fn, false, owner);
            break;
        case ExprKind::kSelect: {
            const auto& n = static_cast<const SelectNode&>(*e);
            visit_reads(n.cond, fn, false, owner);
            visit_reads(n.t, fn, false, owner);
            visit_reads(n.f, fn, false, owner);
            break;
        }
        case ExprKind::kTensorRead: {
            const auto& n = static_cast<const TensorReadNode&>(*e);
            fn(n);
            for (const auto& i : n.indices) visit_reads(i, fn, false, owner);
            break;
        }
        case ExprKind::kReduce:
            KILN_CHECK(allow_reduce, kInvalidArgument)
                << "compute '" << owner
                << "': a reduction must be the whole body of a compute, found one nested inside "
                   "an expression";
            visit_reads(static_cast<const ReduceNode&>(*e).source, fn, false, owner);
            break;
        default: break;
    }
}
}  // namespace

int64_t TensorNode::numel() const {
    KILN_ICHECK(is_static()) << "numel() of tensor '" << name << "' with a symbolic shape";
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::vector<Expr> TensorNode::shape_exprs() const {
    if (!sym_shape.empty()) return sym_shape;
    std::vector<Expr> out;
    for (int64_t d : shape) out.push_back(int_imm(d));
    return out;
}

std::vector<Tensor> TensorNode::inputs() const {
    std::vector<Tensor> out;
    std::unordered_set<const TensorNode*> seen;
    visit_reads(
        body,
        [&](const TensorReadNode& r) {
            if (seen.insert(r.tensor.get()).second) out.push_back(r.tensor);
        },
        true, name);
    return out;
}

Tensor placeholder(std::vector<int64_t> shape, DType dtype, const std::string& name) {
    for (int64_t d : shape) {
        KILN_CHECK(d >= 0, kInvalidArgument)
            << "placeholder '" << name << "': negative dimension " << d;
    }
    auto t = std::make_shared<TensorNode>();
    t->name = name;
    t->dtype = dtype;
    t->shape = std::move(shape);
    t->is_placeholder = true;
    return t;
}

Tensor sym_placeholder(const std::vector<Expr>& shape, DType dtype, const std::string& name) {
    SplitDims d = split_dims(shape, "placeholder '" + name + "'");  // checks the dims
    auto t = std::make_shared<TensorNode>();
    t->name = name;
    t->dtype = dtype;
    t->shape = std::move(d.shape);
    t->sym_shape = std::move(d.sym);
    t->is_placeholder = true;
    return t;
}

Tensor compute(std::vector<int64_t> shape,
               const std::function<Expr(const std::vector<Var>&)>& fcompute,
               const std::string& name, std::optional<DType> dtype) {
    for (int64_t d : shape) {
        KILN_CHECK(d >= 0, kInvalidArgument) << "compute '" << name << "': negative dimension " << d;
    }
    std::vector<Expr> dims;
    for (int64_t d : shape) dims.push_back(int_imm(d));
    return sym_compute(dims, fcompute, name, dtype);
}

Tensor sym_compute(const std::vector<Expr>& shape,
                   const std::function<Expr(const std::vector<Var>&)>& fcompute,
                   const std::string& name, std::optional<DType> dtype) {
    SplitDims d = split_dims(shape, "compute '" + name + "'");
    auto t = std::make_shared<TensorNode>();
    t->name = name;
    t->shape = d.shape;
    t->sym_shape = d.sym;
    t->is_placeholder = false;
    std::vector<Var> vars;
    for (size_t i = 0; i < shape.size(); ++i) {
        IterVar iv = d.sym.empty() ? make_iter_var("i" + std::to_string(i), d.shape[i], false)
                                   : make_iter_var("i" + std::to_string(i), d.sym[i], false);
        t->axis.push_back(iv);
        vars.push_back(iv->var);
    }
    Expr body = fcompute(vars);
    KILN_CHECK(body != nullptr, kInvalidArgument)
        << "compute '" << name << "': fcompute returned a null expression";
    t->dtype = dtype.value_or(body->dtype);
    DType ct = compute_dtype(t->dtype);
    if (body->kind == ExprKind::kReduce) {
        const auto& r = static_cast<const ReduceNode&>(*body);
        if (r.dtype != ct)
            body = std::make_shared<ReduceNode>(ct, r.op, cast(ct, r.source), r.axes);
    } else {
        body = cast(ct, body);
    }
    t->body = body;
    t->inputs();  // validates: no Reduce below the top level
    return t;
}

Expr read(const Tensor& t, std::vector<Expr> indices) {
    KILN_CHECK(t != nullptr, kInvalidArgument) << "read of a null tensor";
    KILN_CHECK(static_cast<int>(indices.size()) == t->ndim(), kInvalidArgument)
        << "read of tensor '" << t->name << "': expected " << t->ndim() << " indices, got "
        << indices.size();
    for (auto& i : indices) {
        KILN_CHECK(i != nullptr && !dtype_is_float(i->dtype), kInvalidArgument)
            << "read of tensor '" << t->name << "': indices must be integer expressions";
        i = cast(DType::kInt64, i);
    }
    return std::make_shared<TensorReadNode>(compute_dtype(t->dtype), t, std::move(indices));
}

Expr read(const Tensor& t, const std::vector<Var>& indices) {
    std::vector<Expr> idx(indices.begin(), indices.end());
    return read(t, std::move(idx));
}

std::vector<Tensor> post_order(const std::vector<Tensor>& outputs) {
    std::vector<Tensor> order;
    std::unordered_set<const TensorNode*> done;
    std::function<void(const Tensor&)> visit = [&](const Tensor& t) {
        if (!done.insert(t.get()).second) return;
        if (!t->is_placeholder) {
            for (const auto& in : t->inputs()) visit(in);
        }
        order.push_back(t);
    };
    for (const auto& o : outputs) visit(o);
    return order;
}

}  // namespace kiln::te
