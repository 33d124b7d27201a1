// MPI datatypes and operations per dtype (reduce_op.h). The f16/bf16 operations are created
// once, after MPI_Init, and live until MPI_Finalize frees them.
#include "distributed/reduce_op.h"

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "kiln/error.h"

namespace kiln::distributed {
namespace {

template <float (*Load)(uint16_t), uint16_t (*Store)(float), int Kind>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
    const auto* a = static_cast<const uint16_t*>(in);
    auto* b = static_cast<uint16_t*>(inout);
    for (int i = 0; i < *len; ++i) {
        float x = Load(a[i]), y = Load(b[i]);
        float r = Kind == 0 ? x + y : Kind == 1 ? std::min(x, y) : Kind == 2 ? std::max(x, y) : x * y;
        b[i] = Store(r);
    }
}

struct HalfOps {
    MPI_Op f16[4], bf16[4];  // sum, min, max, prod
};

const HalfOps& half_ops() {
    static HalfOps ops = [] {
        HalfOps h;
        MPI_Op_create(&half_op<half_to_float, float_to_half, 0>, 1, &h.f16[0]);
        MPI_Op_create(&half_op<half_to_float, float_to_half, 1>, 1, &h.f16[1]);
        MPI_Op_create(&half_op<half_to_float, float_to_half, 2>, 1, &h.f16[2]);
        MPI_Op_create(&half_op<half_to_float, float_to_half, 3>, 1, &h.f16[3]);
        MPI_Op_create(&half_op<bfloat16_to_float, float_to_bfloat16, 0>, 1, &h.bf16[0]);
        MPI_Op_create(&half_op<bfloat16_to_float, float_to_bfloat16, 1>, 1, &h.bf16[1]);
        MPI_Op_create(&half_op<bfloat16_to_float, float_to_bfloat16, 2>, 1, &h.bf16[2]);
        MPI_Op_create(&half_op<bfloat16_to_float, float_to_bfloat16, 3>, 1, &h.bf16[3]);
        return h;
    }();
    return ops;
}

int op_index(ReduceOp op) {
    switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kMean: return 0;
        case ReduceOp::kMin: return 1;
        case ReduceOp::kMax: return 2;
        case ReduceOp::kProd: return 3;
    }
    return 0;
}

template <typename T>
void divide(void* data, size_t count, int divisor) {
    T* p = static_cast<T*>(data);
    for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(divisor));
}

template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void divide_half(void* data, size_t count, int divisor) {
    auto* p = static_cast<uint16_t*>(data);
    for (size_t i = 0; i < count; ++i) p[i] = Store(Load(p[i]) / static_cast<float>(divisor));
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
    static const char* names[] = {"sum", "mean", "min", "max", "prod"};
    return names[static_cast<int>(op)];
}

MPI_Datatype mpi_datatype(DType dtype, const std::string& tensor) {
    switch (dtype) {
        case DType::kFloat32: return MPI_FLOAT;
        case DType::kFloat64: return MPI_DOUBLE;
        case DType::kFloat16:
        case DType::kBFloat16: return MPI_UINT16_T;  // reduced by half_ops()
        case DType::kInt8: return MPI_INT8_T;
        case DType::kInt16: return MPI_INT16_T;
        case DType::kInt32: return MPI_INT32_T;
        case DType::kInt64: return MPI_INT64_T;
        case DType::kUInt8: return MPI_UINT8_T;
        case DType::kUInt16: return MPI_UINT16_T;
        case DType::kUInt32: return MPI_UINT32_T;
        case DType::kUInt64: return MPI_UINT64_T;
        default: break;
    }
    KILN_THROW(kUnsupported) << "collective on tensor '" << tensor << "': dtype " << dtype_name(dtype)
                             << " is not carried (f32 f64 f16 bf16 and the 8- to 64-bit integers are)";
}

MPI_Op mpi_op(ReduceOp op, DType dtype) {
    if (dtype == DType::kFloat16) return half_ops().f16[op_index(op)];
    if (dtype == DType::kBFloat16) return half_ops().bf16[op_index(op)];
    static const MPI_Op ops[] = {MPI_SUM, MPI_MIN, MPI_MAX, MPI_PROD};
    return ops[op_index(op)];
}

void divide_in_place(void* data, DType dtype, size_t count, int divisor) {
    switch (dtype) {
        case DType::kFloat32: return divide<float>(data, count, divisor);
        case DType::kFloat64: return divide<double>(data, count, divisor);
        case DType::kFloat16: return divide_half<half_to_float, float_to_half>(data, count, divisor);
        case DType::kBFloat16: return divide_half<bfloat16_to_float, float_to_bfloat16>(data, count, divisor);
        case DType::kInt8: return divide<int8_t>(data, count, divisor);
        case DType::kInt16: return divide<int16_t>(data, count, divisor);
        case DType::kInt32: return divide<int32_t>(data, count, divisor);
        case DType::kInt64: return divide<int64_t>(data, count, divisor);
        case DType::kUInt8: return divide<uint8_t>(data, count, divisor);
        case DType::kUInt16: return divide<uint16_t>(data, count, divisor);
        case DType::kUInt32: return divide<uint32_t>(data, count, divisor);
        case DType::kUInt64: return divide<uint64_t>(data, count, divisor);
        default: KILN_THROW(kInternal) << "bug in Kiln: divide_in_place on " << dtype_name(dtype);
    }
}

}  // namespace kiln::distributed
