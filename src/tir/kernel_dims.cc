// Binding a kernel's symbolic dims for one call (tir/kernel_dims.h).
#include "tir/kernel_dims.h"

#include "support/error.h"

namespace kiln::tir {

namespace {
// Elements of a buffer for bound dims; its bytes are overflow-checked too (a kernel computes them).
int64_t checked_numel(const PrimFunc& f, const Buffer& b, const te::DimValues& dims) {
    int64_t n = 1;
    for (int64_t d : buffer_shape(b, dims)) {
        KILN_CHECK(!__builtin_mul_overflow(n, d, &n), kInvalidArgument)
            << "kernel '" << f.name << "': buffer '" << b->name << "' has more elements than int64 holds";
    }
    int64_t bytes;
    KILN_CHECK(!__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(b->dtype)), &bytes), kInvalidArgument)
        << "kernel '" << f.name << "': buffer '" << b->name << "' is larger than int64 bytes";
    return n;
}

void collect_allocs(const Stmt& s, std::vector<Buffer>& out) {
    if (!s) return;
    switch (s->kind) {
        case StmtKind::kFor: collect_allocs(static_cast<const ForNode&>(*s).body, out); break;
        case StmtKind::kSeq:
            for (const auto& c : static_cast<const SeqNode&>(*s).stmts) collect_allocs(c, out);
            break;
        case StmtKind::kIf: {
            const auto& n = static_cast<const IfNode&>(*s);
            collect_allocs(n.then_case, out);
            collect_allocs(n.else_case, out);
            break;
        }
        case StmtKind::kAllocate: {
            const auto& n = static_cast<const AllocateNode&>(*s);
            out.push_back(n.buffer);
            collect_allocs(n.body, out);
            break;
        }
        case StmtKind::kStore:
        case StmtKind::kPrefetch: break;
    }
}
}  // namespace

te::DimValues bind_dims(const PrimFunc& f, const std::vector<int64_t>& dims) {
    KILN_CHECK(dims.size() == f.dims.size(), kInvalidArgument)
        << "kernel '" << f.name << "': expected " << f.dims.size() << " dim values, got " << dims.size();
    te::DimValues out;
    for (size_t i = 0; i < dims.size(); ++i) {
        KILN_CHECK(dims[i] >= 0, kInvalidArgument)
            << "kernel '" << f.name << "': dim '" << f.dims[i]->name << "' must be >= 0, got " << dims[i];
        out[f.dims[i].get()] = dims[i];
    }
    return out;
}

std::vector<int64_t> buffer_shape(const Buffer& b, const te::DimValues& dims) {
    if (b->is_static()) return b->shape;
    std::vector<int64_t> out;
    for (const auto& d : b->sym_shape) {
        int64_t v = te::eval_dim(d, dims);
        KILN_CHECK(v >= 0, kInvalidArgument)
            << "buffer '" << b->name << "': dim " << te::expr_str(d) << " is negative (" << v << ")";
        out.push_back(v);
    }
    return out;
}

std::vector<int64_t> param_numels(const PrimFunc& f, const std::vector<int64_t>& dims) {
    te::DimValues bound = bind_dims(f, dims);
    std::vector<int64_t> out;
    for (const auto& p : f.params) out.push_back(checked_numel(f, p, bound));
    std::vector<Buffer> allocs;
    collect_allocs(f.body, allocs);
    for (const auto& a : allocs) checked_numel(f, a, bound);
    return out;
}

void check_call(const PrimFunc& f, const std::vector<int64_t>& dims, const std::vector<int64_t>& arg_numels) {
    std::vector<int64_t> want = param_numels(f, dims);
    KILN_CHECK(arg_numels.size() == want.size(), kInvalidArgument)
        << "kernel '" << f.name << "': expected " << want.size() << " arguments, got " << arg_numels.size();
    for (size_t i = 0; i < want.size(); ++i) {
        KILN_CHECK(arg_numels[i] == want[i], kInvalidArgument)
            << "kernel '" << f.name << "': argument " << i << " ('" << f.params[i]->name << "') expected "
            << want[i] << " elements for these dims, got " << arg_numels[i];
    }
}

}  // namespace kiln::tir
