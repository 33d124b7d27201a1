// Shape ops: Flatten, Reshape (constant shape input), Transpose, Concat. All injective; any dtype.
// Reshape and Flatten read the input at the row-major position of the output element.
#include <numeric>
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

// Output element at `out_idx` of shape `out_shape` -> indices into `in_shape` (same numel).
std::vector<Expr> reshape_indices(const Shape& in_shape, const Shape& out_shape, const std::vector<Var>& out_idx) {
    Expr flat = te::int_imm(0);
    for (size_t i = 0; i < out_shape.size(); ++i) flat = flat * out_shape[i] + Expr(out_idx[i]);
    std::vector<Expr> idx(in_shape.size());
    for (size_t k = in_shape.size(); k-- > 0;) {
        idx[k] = te::floormod(flat, te::int_imm(in_shape[k]));
        flat = te::floordiv(flat, te::int_imm(in_shape[k]));
    }
    return idx;
}

std::vector<te::Tensor> reshape_compute(const ComputeArgs& a) {
    te::Tensor x = a.in(0);
    Shape out_shape = a.out_shape();
    auto out = te::compute(
        out_shape, [&](const std::vector<Var>& i) { return te::read(x, reshape_indices(x->shape, out_shape, i)); },
        a.node.op(), a.out_dtype());
    return {out};
}

OpDef flatten_op() {
    OpDef d;
    d.name = "Flatten";
    d.onnx_versions = {1, 9, 11, 13, 21};
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        int rank = x.rank();
        int64_t axis = n.attr_int("axis", 1);
        KILN_CHECK(axis >= -rank && axis <= rank, kInvalidModel)
            << node_label(n) << ": attribute axis=" << axis << " is out of range for rank " << rank;
        if (axis < 0) axis += rank;
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < rank; ++i)
            (i < axis ? outer : inner) *= static_dim(n, x.shape[i], "input");
        return std::vector<ir::TensorType>{{x.dtype, {outer, inner}}};
    };
    d.compute = reshape_compute;
    return d;
}

OpDef reshape_op() {
    OpDef d;
    d.name = "Reshape";
    d.onnx_versions = {1, 5, 13, 14, 19, 21};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"allowzero", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.value_inputs = {1};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        std::vector<int64_t> spec = constant_ints(n, 1, "shape");
        bool allowzero = n.attr_int("allowzero", 0) != 0;
        std::string spec_str = "[";
        for (size_t i = 0; i < spec.size(); ++i) spec_str += (i ? "," : "") + std::to_string(spec[i]);
        spec_str += "]";
        std::vector<ir::Dim> out(spec.size());
        int infer_at = -1;
        for (size_t i = 0; i < spec.size(); ++i) {
            if (spec[i] == -1) {
                KILN_CHECK(infer_at < 0, kInvalidModel) << node_label(n) << ": shape " << spec_str << " has more than one -1";
                infer_at = static_cast<int>(i);
            } else if (spec[i] == 0 && !allowzero) {
                KILN_CHECK(i < x.shape.size(), kInvalidModel)
                    << node_label(n) << ": shape " << spec_str << " copies dimension " << i << " (0) but the input has rank "
                    << x.rank();
                out[i] = x.shape[i];
            } else {
                KILN_CHECK(spec[i] >= 0, kInvalidModel) << node_label(n) << ": invalid dimension " << spec[i] << " in shape " << spec_str;
                out[i] = spec[i];
            }
        }
        bool known = x.is_static();
        for (size_t i = 0; i < out.size(); ++i)
            if (static_cast<int>(i) != infer_at && !out[i].is_static()) known = false;
        if (!known) {
            // Only copies of symbolic dims are allowed without static shapes.
            KILN_CHECK(infer_at < 0, kUnsupported)
                << node_label(n) << ": cannot infer -1 in shape " << spec_str << " from symbolic input shape " << dims_str(x.shape);
            return std::vector<ir::TensorType>{{x.dtype, out}};
        }
        int64_t total = shape_numel(x.static_shape());
        int64_t known_prod = 1;
        for (size_t i = 0; i < out.size(); ++i)
            if (static_cast<int>(i) != infer_at) known_prod *= out[i].value;
        if (infer_at >= 0) {
            KILN_CHECK(known_prod != 0 && total % known_prod == 0, kInvalidModel)
                << node_label(n) << ": cannot reshape " << total << " elements to " << spec_str;
            out[infer_at] = total / known_prod;
        } else {
            KILN_CHECK(known_prod == total, kInvalidModel)
                << node_label(n) << ": cannot reshape " << total << " elements to " << spec_str;
        }
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = reshape_compute;
    return d;
}

std::vector<int64_t> transpose_perm(const ir::Node& n, int rank) {
    std::vector<int64_t> perm = n.attr_ints("perm");
    if (perm.empty() && !n.has_attr("perm")) {
        for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
        return perm;
    }
    KILN_CHECK(static_cast<int>(perm.size()) == rank, kInvalidModel)
        << node_label(n) << ": perm has " << perm.size() << " entries but the input has rank " << rank;
    std::vector<bool> seen(rank, false);
    for (int64_t& p : perm) {
        KILN_CHECK(p >= -rank && p < rank, kInvalidModel) << node_label(n) << ": perm entry " << p << " is out of range";
        if (p < 0) p += rank;
        KILN_CHECK(!seen[p], kInvalidModel) << node_label(n) << ": perm is not a permutation (" << p << " repeats)";
        seen[p] = true;
    }
    return perm;
}

OpDef transpose_op() {
    OpDef d;
    d.name = "Transpose";
    d.onnx_versions = {1, 13, 21};
    d.attrs = {{"perm", AttrKind::kInts, std::nullopt}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        auto perm = transpose_perm(n, x.rank());
        std::vector<ir::Dim> out;
        for (int64_t p : perm) out.push_back(x.shape[p]);
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        auto perm = transpose_perm(a.node, x->ndim());
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                std::vector<Expr> idx(perm.size());
                for (size_t k = 0; k < perm.size(); ++k) idx[perm[k]] = i[k];
                return te::read(x, idx);
            },
            "Transpose", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

OpDef concat_op() {
    OpDef d;
    d.name = "Concat";
    d.onnx_versions = {1, 4, 11, 13};
    d.min_inputs = 1;
    d.max_inputs = -1;
    d.attrs = {{"axis", AttrKind::kInt, std::nullopt, /*required=*/true}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& first = input_type(n, 0, "inputs[0]");
        int rank = first.rank();
        int axis = normalize_axis(n, n.attr_int("axis", 0), rank);
        std::vector<ir::Dim> out = first.shape;
        int64_t total = 0;
        for (size_t k = 0; k < n.num_inputs(); ++k) {
            std::string what = "inputs[" + std::to_string(k) + "]";
            const auto& t = input_type(n, k, what.c_str());
            check_same_dtype(n, "inputs[0]", first.dtype, what.c_str(), t.dtype);
            KILN_CHECK(t.rank() == rank, kInvalidModel)
                << node_label(n) << ": " << what << " has rank " << t.rank() << " but inputs[0] has rank " << rank;
            for (int i = 0; i < rank; ++i) {
                if (i == axis) continue;
                KILN_CHECK(!(t.shape[i].is_static() && first.shape[i].is_static()) || t.shape[i] == first.shape[i],
                           kInvalidModel)
                    << node_label(n) << ": shapes " << dims_str(first.shape) << " and " << dims_str(t.shape)
                    << " differ outside axis " << axis;
            }
            total += static_dim(n, t.shape[axis], what.c_str());
        }
        out[axis] = total;
        return std::vector<ir::TensorType>{{first.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        int rank = static_cast<int>(a.out_shape().size());
        int axis = normalize_axis(a.node, a.node.attr_int("axis", 0), rank);
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                // Nested selects from the last input back; indices clamped so every read is in bounds.
                std::vector<int64_t> offsets;
                int64_t off = 0;
                for (const auto& t : a.inputs) offsets.push_back(off), off += t->shape[axis];
                Expr v;
                for (size_t k = a.inputs.size(); k-- > 0;) {
                    const te::Tensor& t = a.inputs[k];
                    if (t->shape[axis] == 0) continue;  // contributes nothing
                    std::vector<Expr> idx(i.begin(), i.end());
                    Expr local = Expr(i[axis]) - te::int_imm(offsets[k]);
                    idx[axis] = a.inputs.size() == 1 ? local : clamp_index(local, t->shape[axis]);
                    Expr r = te::read(t, idx);
                    v = v ? te::select(Expr(i[axis]) < te::int_imm(offsets[k] + t->shape[axis]), r, v) : r;
                }
                return v;
            },
            "Concat", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
    r.add(flatten_op());
    r.add(reshape_op());
    r.add(transpose_op());
    r.add(concat_op());
}

}  // namespace kiln::op
