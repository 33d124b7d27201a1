// Shared helpers of the op definitions (see op_util.h).
#include "op/op_util.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "support/error.h"

namespace kiln::op {

std::string node_label(const ir::Node& n) { return n.op() + " node '" + n.name() + "'"; }

std::string dims_str(const std::vector<ir::Dim>& dims) {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + dims[i].str();
    return s + "]";
}

std::vector<ir::Dim> to_dims(const Shape& s) { return std::vector<ir::Dim>(s.begin(), s.end()); }

const std::vector<DType>& float_types() {
    static const std::vector<DType> v = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
    return v;
}
const std::vector<DType>& numeric_types() {
    static const std::vector<DType> v = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                                         DType::kInt8,    DType::kInt16,   DType::kInt32,   DType::kInt64,
                                         DType::kUInt8,   DType::kUInt16,  DType::kUInt32,  DType::kUInt64};
    return v;
}
const std::vector<DType>& all_types() {
    static const std::vector<DType> v = [] {
        auto t = numeric_types();
        t.push_back(DType::kBool);
        return t;
    }();
    return v;
}

bool has_input(const ir::Node& n, size_t i) { return n.input(i) != nullptr; }

const ir::TensorType& input_type(const ir::Node& n, size_t i, const char* what) {
    KILN_CHECK(n.input(i) != nullptr, kInvalidModel) << node_label(n) << ": missing required input " << what;
    return n.input(i)->type();
}

void check_dtype(const ir::Node& n, const char* what, DType t, const std::vector<DType>& allowed) {
    KILN_CHECK(std::find(allowed.begin(), allowed.end(), t) != allowed.end(), kUnsupported)
        << node_label(n) << ": op " << n.op() << " does not support dtype " << dtype_name(t) << " (input "
        << what << ")";
}

void check_same_dtype(const ir::Node& n, const char* a_name, DType a, const char* b_name, DType b) {
    KILN_CHECK(a == b, kInvalidModel) << node_label(n) << ": expected the same dtype for " << a_name << " and "
                                      << b_name << ", got " << dtype_name(a) << " and " << dtype_name(b);
}

void check_rank(const ir::Node& n, const char* what, int rank, int want) {
    KILN_CHECK(rank == want, kInvalidModel)
        << node_label(n) << ": expected input " << what << " of rank " << want << ", got rank " << rank;
}

int normalize_axis(const ir::Node& n, int64_t axis, int rank, const char* attr) {
    KILN_CHECK(axis >= -rank && axis < rank, kInvalidModel)
        << node_label(n) << ": attribute " << attr << "=" << axis << " is out of range for rank " << rank;
    return static_cast<int>(axis < 0 ? axis + rank : axis);
}

int64_t static_dim(const ir::Node& n, const ir::Dim& d, const char* what) {
    KILN_CHECK(d.is_static(), kUnsupported)
        << node_label(n) << ": dimension '" << d.str() << "' of " << what
        << " must be known (bind symbolic dims before shape inference)";
    return d.value;
}

std::vector<int64_t> constant_ints(const ir::Node& n, size_t i, const char* what) {
    const ir::Value* v = n.input(i);
    KILN_CHECK(v != nullptr, kInvalidModel) << node_label(n) << ": missing required input " << what;
    KILN_CHECK(v->is_constant(), kUnsupported)
        << node_label(n) << ": input " << what << " ('" << v->name() << "') must be a constant";
    const Tensor& t = v->constant();
    KILN_CHECK(dtype_is_int(t.dtype()), kInvalidModel)
        << node_label(n) << ": input " << what << " must be an integer tensor, got " << dtype_name(t.dtype());
    std::vector<int64_t> out(t.numel());
    for (int64_t k = 0; k < t.numel(); ++k) out[k] = t.get_i64(k);
    return out;
}

te::Expr clamp_index(const te::Expr& i, int64_t extent) {
    return te::min(te::max(i, te::int_imm(0)), te::int_imm(extent - 1));
}

te::Expr lowest_value(DType t) {
    DType c = te::compute_dtype(t);
    switch (c) {
        case DType::kFloat32:
        case DType::kFloat64: return te::make_const(c, -std::numeric_limits<double>::infinity());
        case DType::kInt8: return te::int_imm(std::numeric_limits<int8_t>::min(), c);
        case DType::kInt16: return te::int_imm(std::numeric_limits<int16_t>::min(), c);
        case DType::kInt32: return te::int_imm(std::numeric_limits<int32_t>::min(), c);
        case DType::kInt64: return te::int_imm(std::numeric_limits<int64_t>::min(), c);
        default: return te::int_imm(0, c);  // unsigned and bool
    }
}

}  // namespace kiln::op
