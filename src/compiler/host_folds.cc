#include "compiler/host_folds.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::compiler {
namespace {

/// Walks a row-major index over `shape`, keeping one element offset per operand in step
/// (operand k advances by strides[k][d] along dim d; a stride of 0 broadcasts).
class OffsetWalk {
public:
    OffsetWalk(Shape shape, std::vector<std::vector<int64_t>> strides)
        : shape_(std::move(shape)), strides_(std::move(strides)), index_(shape_.size(), 0),
          offsets_(strides_.size(), 0) {}
    const std::vector<int64_t>& offsets() const { return offsets_; }
    /// The next index in row-major order (the last dim fastest).
    void next() {
        for (size_t d = shape_.size(); d-- > 0;) {
            for (size_t k = 0; k < strides_.size(); ++k) offsets_[k] += strides_[k][d];
            if (++index_[d] < shape_[d]) return;
            for (size_t k = 0; k < strides_.size(); ++k) offsets_[k] -= strides_[k][d] * shape_[d];
            index_[d] = 0;
        }
    }

private:
    Shape shape_;
    std::vector<std::vector<int64_t>> strides_;
    std::vector<int64_t> index_, offsets_;
};

std::vector<int64_t> row_major_strides(const Shape& shape) {
    std::vector<int64_t> s(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
    return s;
}

bool transpose(const ir::Node& n, Tensor& out) {
    const Tensor& in = n.input(0)->constant();
    const size_t rank = in.shape().size();
    std::vector<int64_t> perm = n.attr_ints("perm");
    if (perm.empty())
        for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    if (perm.size() != rank) return false;
    // Output dim d reads input dim perm[d].
    const std::vector<int64_t> in_strides = row_major_strides(in.shape());
    std::vector<int64_t> strides(rank);
    for (size_t d = 0; d < rank; ++d) {
        if (perm[d] < 0 || perm[d] >= static_cast<int64_t>(rank)) return false;
        strides[d] = in_strides[static_cast<size_t>(perm[d])];
    }
    const size_t elem = dtype_size(in.dtype());
    const char* src = static_cast<const char*>(in.data());
    char* dst = static_cast<char*>(out.data());
    OffsetWalk walk(out.shape(), {strides});
    for (int64_t i = 0; i < out.numel(); ++i, walk.next())
        std::memcpy(dst + i * elem, src + walk.offsets()[0] * static_cast<int64_t>(elem), elem);
    return true;
}

bool concat(const ir::Node& n, Tensor& out) {
    const int64_t rank = static_cast<int64_t>(out.shape().size());
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return false;
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= out.shape()[static_cast<size_t>(d)];
    const size_t elem = dtype_size(out.dtype());
    const size_t out_row = static_cast<size_t>(out.numel() / std::max<int64_t>(outer, 1)) * elem;
    for (const ir::Value* v : n.inputs())
        if (v && v->constant().dtype() != out.dtype()) return false;
    char* dst = static_cast<char*>(out.data());
    size_t at = 0;  // bytes into each output row
    for (const ir::Value* v : n.inputs()) {
        if (!v) continue;
        const Tensor& in = v->constant();
        const size_t row = outer ? static_cast<size_t>(in.numel() / outer) * elem : 0;
        for (int64_t o = 0; o < outer; ++o)
            std::memcpy(dst + static_cast<size_t>(o) * out_row + at,
                        static_cast<const char*>(in.data()) + static_cast<size_t>(o) * row, row);
        at += row;
    }
    return at == out_row;
}

/// The element strides of `in` read at the index of `out`'s shape, numpy-broadcast (dims
/// aligned on the right; a dim of 1 repeats).
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
    std::vector<int64_t> s(out.size(), 0);
    const std::vector<int64_t> own = row_major_strides(in);
    const size_t lead = out.size() - in.size();
    for (size_t d = 0; d < in.size(); ++d) s[lead + d] = in[d] == 1 ? 0 : own[d];
    return s;
}

template <typename Op>
void binary(const Tensor& a, const Tensor& b, Tensor& out, Op op) {
    const float* x = a.data_as<float>();
    const float* y = b.data_as<float>();
    float* z = out.data_as<float>();
    OffsetWalk walk(out.shape(), {broadcast_strides(a.shape(), out.shape()), broadcast_strides(b.shape(), out.shape())});
    for (int64_t i = 0; i < out.numel(); ++i, walk.next()) z[i] = op(x[walk.offsets()[0]], y[walk.offsets()[1]]);
}

bool arithmetic(const ir::Node& n, Tensor& out) {
    if (n.num_inputs() != 2 || !n.input(0) || !n.input(1)) return false;
    const Tensor& a = n.input(0)->constant();
    const Tensor& b = n.input(1)->constant();
    if (a.dtype() != DType::kFloat32 || b.dtype() != DType::kFloat32 || out.dtype() != DType::kFloat32) return false;
    if (a.shape().size() > out.shape().size() || b.shape().size() > out.shape().size()) return false;
    const std::string& op = n.op();
    if (op == "Add") binary(a, b, out, [](float p, float q) { return p + q; });
    else if (op == "Sub") binary(a, b, out, [](float p, float q) { return p - q; });
    else if (op == "Mul") binary(a, b, out, [](float p, float q) { return p * q; });
    else binary(a, b, out, [](float p, float q) { return p / q; });
    return true;
}

}  // namespace

bool run_host_fold(const ir::Node& n, Tensor& out) {
    if (n.num_outputs() != 1 || out.dtype() == DType::kString || n.num_inputs() < 1) return false;
    for (const ir::Value* v : n.inputs())
        if (v && (!v->is_constant() || v->constant().dtype() == DType::kString)) return false;
    const std::string& op = n.op();
    if (op == "Transpose") return transpose(n, out);
    if (op == "Concat") return concat(n, out);
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return arithmetic(n, out);
    return false;
}

}  // namespace kiln::compiler
