#include "compiler/host_folds.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kiln::compiler {
namespace {

/// A row-major walk over `shape` by planes: every dim but the last two is walked here, keeping
/// one element offset per operand in step (operand k advances by strides[k][d] along dim d; a
/// stride of 0 broadcasts); plane(offsets) covers the last two dims (rows x cols of
/// Plane::extents) itself, so the bookkeeping is paid once per plane, not per element.
struct Plane {
    int64_t rows = 1, cols = 1;
    std::vector<int64_t> row_step, col_step;  // per operand
};

/// Merges adjacent dims that every operand walks contiguously (stride[d] == stride[d+1] *
/// shape[d+1]; broadcast dims have stride 0 on both sides), so the planes are as long as they
/// can be: a conv weight times its per-output-channel scale is one O x (I*kh*kw) plane.
void coalesce(Shape& shape, std::vector<std::vector<int64_t>>& strides) {
    Shape out_shape;
    std::vector<std::vector<int64_t>> out_strides(strides.size());
    for (size_t d = 0; d < shape.size(); ++d) {
        bool merge = !out_shape.empty();
        for (size_t k = 0; merge && k < strides.size(); ++k)
            merge = out_strides[k].back() == strides[k][d] * shape[d];
        if (merge) {
            out_shape.back() *= shape[d];
            for (size_t k = 0; k < strides.size(); ++k) out_strides[k].back() = strides[k][d];
        } else {
            out_shape.push_back(shape[d]);
            for (size_t k = 0; k < strides.size(); ++k) out_strides[k].push_back(strides[k][d]);
        }
    }
    shape = std::move(out_shape);
    strides = std::move(out_strides);
}

template <typename Body>
void for_each_plane(Shape shape, std::vector<std::vector<int64_t>> strides, Body plane) {
    if (shape_numel(shape) == 0) return;
    coalesce(shape, strides);
    const size_t rank = shape.size(), ops = strides.size();
    Plane p;
    p.row_step.assign(ops, 0);
    p.col_step.assign(ops, 0);
    if (rank >= 1) p.cols = shape[rank - 1];
    if (rank >= 2) p.rows = shape[rank - 2];
    for (size_t k = 0; k < ops; ++k) {
        if (rank >= 1) p.col_step[k] = strides[k][rank - 1];
        if (rank >= 2) p.row_step[k] = strides[k][rank - 2];
    }
    const size_t outer = rank > 2 ? rank - 2 : 0;
    std::vector<int64_t> index(outer, 0), offsets(ops, 0);
    for (;;) {
        plane(p, offsets);
        size_t d = outer;
        for (;;) {  // the next plane: carry through the outer dims
            if (d == 0) return;
            --d;
            for (size_t k = 0; k < ops; ++k) offsets[k] += strides[k][d];
            if (++index[d] < shape[d]) break;
            for (size_t k = 0; k < ops; ++k) offsets[k] -= strides[k][d] * shape[d];
            index[d] = 0;
        }
    }
}

template <typename T>
void transpose_planes(const T* src, T* dst, const Shape& shape, const std::vector<int64_t>& strides) {
    for_each_plane(shape, {strides}, [&](const Plane& p, const std::vector<int64_t>& at) {
        for (int64_t r = 0; r < p.rows; ++r) {
            const T* in = src + at[0] + r * p.row_step[0];
            if (p.col_step[0] == 1) std::memcpy(dst, in, static_cast<size_t>(p.cols) * sizeof(T));
            else for (int64_t c = 0; c < p.cols; ++c) dst[c] = in[c * p.col_step[0]];
            dst += p.cols;
        }
    });
}

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
    switch (dtype_size(in.dtype())) {
        case 1: transpose_planes(static_cast<const uint8_t*>(in.data()), static_cast<uint8_t*>(out.data()), out.shape(), strides); return true;
        case 2: transpose_planes(static_cast<const uint16_t*>(in.data()), static_cast<uint16_t*>(out.data()), out.shape(), strides); return true;
        case 4: transpose_planes(static_cast<const uint32_t*>(in.data()), static_cast<uint32_t*>(out.data()), out.shape(), strides); return true;
        case 8: transpose_planes(static_cast<const uint64_t*>(in.data()), static_cast<uint64_t*>(out.data()), out.shape(), strides); return true;
        default: return false;
    }
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
    const std::vector<int64_t> sa = broadcast_strides(a.shape(), out.shape()), sb = broadcast_strides(b.shape(), out.shape());
    for_each_plane(out.shape(), {sa, sb}, [&](const Plane& p, const std::vector<int64_t>& at) {
        for (int64_t r = 0; r < p.rows; ++r) {
            const float* u = x + at[0] + r * p.row_step[0];
            const float* v = y + at[1] + r * p.row_step[1];
            if (p.col_step[0] == 1 && p.col_step[1] == 1) {
                for (int64_t c = 0; c < p.cols; ++c) z[c] = op(u[c], v[c]);
            } else if (p.col_step[0] == 1 && p.col_step[1] == 0) {
                for (int64_t c = 0; c < p.cols; ++c) z[c] = op(u[c], v[0]);
            } else if (p.col_step[0] == 0 && p.col_step[1] == 1) {
                for (int64_t c = 0; c < p.cols; ++c) z[c] = op(u[0], v[c]);
            } else {
                for (int64_t c = 0; c < p.cols; ++c) z[c] = op(u[c * p.col_step[0]], v[c * p.col_step[1]]);
            }
            z += p.cols;
        }
    });
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
