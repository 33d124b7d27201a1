#include "compiler/cuda_gemm_match.h"

#include "compiler/half_precision.h"
#include "compiler/lower_group.h"

namespace kiln::compiler {
namespace {

/// FP32 or FP16 throughout (cuBLAS's types here), static shapes.
bool all_float_static(const ir::Node& n, DType dt) {
    if (dt != DType::kFloat32 && dt != DType::kFloat16) return false;
    for (const ir::Value* v : n.inputs())
        if (v && (v->type().dtype != dt || !v->type().is_static())) return false;
    return n.num_outputs() == 1 && n.output(0)->type().dtype == dt && n.output(0)->type().is_static();
}

std::optional<CublasChoice> matmul_choice(const Shape& a, const Shape& b) {
    if (a.size() < 2 || b.size() < 2) return std::nullopt;
    CublasChoice c;
    runtime::cuda::CudaGemmDesc& g = c.gemm;
    if (b.size() == 2) {  // A's leading dims flatten into M
        if (a.back() != b[0]) return std::nullopt;
        g.m = static_cast<int>(shape_numel(a) / a.back());
    } else {  // equal batch dims: strided batched
        if (a.size() != b.size() || a[a.size() - 1] != b[b.size() - 2]) return std::nullopt;
        for (size_t i = 0; i + 2 < a.size(); ++i)
            if (a[i] != b[i]) return std::nullopt;
        g.batch = static_cast<int>(shape_numel(a) / (a[a.size() - 2] * a.back()));
        g.m = static_cast<int>(a[a.size() - 2]);
    }
    g.k = static_cast<int>(a.back());
    g.n = static_cast<int>(b.back());
    g.stride_a = static_cast<long long>(g.m) * g.k;
    g.stride_b = b.size() == 2 ? 0 : static_cast<long long>(g.k) * g.n;
    g.stride_c = static_cast<long long>(g.m) * g.n;
    return c;
}

/// beta * C broadcast (numpy rules, C of rank <= 2) to [m, n]; undefined if C does not broadcast.
Tensor broadcast_bias(const Tensor& cv, double beta, int m, int n) {
    const Shape& cs = cv.shape();
    if (cs.size() > 2) return Tensor();
    const int64_t c0 = cs.size() == 2 ? cs[0] : 1, c1 = cs.empty() ? 1 : cs.back();
    if ((c0 != 1 && c0 != m) || (c1 != 1 && c1 != n)) return Tensor();
    Tensor t(DType::kFloat32, {m, n});
    const float* c = cv.data_as<float>();
    float* o = t.data_as<float>();
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
            o[i * n + j] = static_cast<float>(beta * c[(c0 == 1 ? 0 : i) * c1 + (c1 == 1 ? 0 : j)]);
    return t;
}

std::optional<CublasChoice> gemm_choice(const ir::Node& n) {
    if (n.attr_int("transA", 0) != 0) return std::nullopt;
    const Shape a = n.input(0)->type().static_shape(), b = n.input(1)->type().static_shape();
    const bool tb = n.attr_int("transB", 0) != 0;
    if (a.size() != 2 || b.size() != 2 || a[1] != (tb ? b[1] : b[0])) return std::nullopt;
    CublasChoice c;
    c.gemm.m = static_cast<int>(a[0]);
    c.gemm.k = static_cast<int>(a[1]);
    c.gemm.n = static_cast<int>(tb ? b[0] : b[1]);
    c.gemm.trans_b = tb;
    c.gemm.alpha = static_cast<float>(n.attr_float("alpha", 1.0));
    c.gemm.stride_c = static_cast<long long>(c.gemm.m) * c.gemm.n;
    const double beta = n.attr_float("beta", 1.0);
    const ir::Value* cv = n.num_inputs() > 2 ? n.input(2) : nullptr;
    if (cv && beta != 0) {
        if (!cv->is_constant()) return std::nullopt;
        const Tensor cf = cv->type().dtype == DType::kFloat16 ? as_float(cv->constant()) : cv->constant();
        c.init = broadcast_bias(cf, beta, c.gemm.m, c.gemm.n);
        if (!c.init.defined()) return std::nullopt;
        if (cv->type().dtype == DType::kFloat16) c.init = as_half(c.init);
    }
    return c;
}

}  // namespace

std::optional<CublasChoice> cublas_choice(const ir::Node& n) {
    if ((n.op() != "MatMul" && n.op() != "Gemm") || n.num_inputs() < 2 || !n.input(0) || !n.input(1)) return std::nullopt;
    const DType dt = n.input(0)->type().dtype;
    if (!all_float_static(n, dt)) return std::nullopt;
    std::optional<CublasChoice> c =
        n.op() == "Gemm" ? gemm_choice(n) : matmul_choice(n.input(0)->type().static_shape(), n.input(1)->type().static_shape());
    if (c) c->gemm.dtype = dt;
    return c;
}

void detach_cublas_anchors(ir::Graph& g) {
    for (ir::Node* n : g.nodes()) {
        if (n->group() < 0 || !cublas_choice(*n)) continue;
        bool fed = false;  // by convexity, a group member upstream would wrap around the product
        for (const ir::Value* in : n->inputs()) fed |= in && in->producer() && in->producer()->group() == n->group();
        if (!fed) n->set_group(-1);
    }
}

}  // namespace kiln::compiler
