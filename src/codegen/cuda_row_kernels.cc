#include "codegen/cuda_row_kernels.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "codegen/cuda_prelude.h"
#include "support/error.h"

namespace kiln::codegen {
namespace {

// The block-wide sum and max (every thread gets the result). `red` is the block's shared
// scratch of 32 floats; the trailing barrier lets the next reduction reuse it.
constexpr const char* kBlockReduce = R"(
static __device__ __forceinline__ float kiln_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float kiln_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
static __device__ float kiln_block_sum(float v, float* red) {
    v = kiln_warp_sum(v);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    const int warps = (int)(blockDim.x >> 5);
    v = (int)threadIdx.x < warps ? red[threadIdx.x] : 0.0f;
    if (threadIdx.x < 32) v = kiln_warp_sum(v);
    if (threadIdx.x == 0) red[0] = v;
    __syncthreads();
    v = red[0];
    __syncthreads();
    return v;
}
static __device__ float kiln_block_max(float v, float* red) {
    v = kiln_warp_max(v);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    const int warps = (int)(blockDim.x >> 5);
    v = (int)threadIdx.x < warps ? red[threadIdx.x] : -INFINITY;
    if (threadIdx.x < 32) v = kiln_warp_max(v);
    if (threadIdx.x == 0) red[0] = v;
    __syncthreads();
    v = red[0];
    __syncthreads();
    return v;
}
)";

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
    return s;
}

constexpr const char* kLayerNorm = R"(
extern "C" __global__ void __launch_bounds__(BLOCK) kiln_row_layer_norm(const T* __restrict__ x, const T* __restrict__ scale,
                                                                      BIAS_PARAM T* __restrict__ y) {
    __shared__ float red[32];
    const T* xr = x + (int64_t)blockIdx.x * COLS;
    T* yr = y + (int64_t)blockIdx.x * COLS;
    float s = 0.0f;
    for (int i = threadIdx.x; i < COLS; i += BLOCK) s += LOAD(xr[i]);
    const float mean = kiln_block_sum(s, red) / (float)COLS;
    float q = 0.0f;
    for (int i = threadIdx.x; i < COLS; i += BLOCK) {
        const float d = LOAD(xr[i]) - mean;
        q += d * d;
    }
    const float inv = 1.0f / sqrtf(kiln_block_sum(q, red) / (float)COLS + EPS);
    for (int i = threadIdx.x; i < COLS; i += BLOCK) yr[i] = STORE((LOAD(xr[i]) - mean) * inv * LOAD(scale[i]) BIAS_TERM);
}
)";

constexpr const char* kSoftmax = R"(
extern "C" __global__ void __launch_bounds__(BLOCK) kiln_row_softmax(const T* __restrict__ x, T* __restrict__ y) {
    __shared__ float red[32];
    const T* xr = x + (int64_t)blockIdx.x * COLS;
    T* yr = y + (int64_t)blockIdx.x * COLS;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < COLS; i += BLOCK) m = fmaxf(m, LOAD(xr[i]));
    m = kiln_block_max(m, red);
    float s = 0.0f;
    for (int i = threadIdx.x; i < COLS; i += BLOCK) s += kiln_exp_f32(LOAD(xr[i]) - m);
    s = kiln_block_sum(s, red);
    for (int i = threadIdx.x; i < COLS; i += BLOCK) yr[i] = STORE(kiln_exp_f32(LOAD(xr[i]) - m) / s);
}
)";

}  // namespace

int64_t row_kernel_block(int64_t cols) { return std::clamp<int64_t>((cols + 31) / 32 * 32, 32, 256); }

CudaKernel emit_row_kernel(const RowKernelSpec& s) {
    KILN_CHECK(s.dtype == DType::kFloat32 || s.dtype == DType::kFloat16, kUnsupported)
        << "row kernel: dtype " << dtype_name(s.dtype) << " (FP32 or FP16 only)";
    KILN_CHECK(s.rows > 0 && s.rows < (int64_t{1} << 31) && s.cols > 0 && s.cols < (int64_t{1} << 31), kUnsupported)
        << "row kernel: " << s.rows << " rows of " << s.cols;
    const bool half = s.dtype == DType::kFloat16;
    const bool ln = s.kind == RowKernelSpec::Kind::kLayerNorm;
    const int64_t block = row_kernel_block(s.cols);
    std::string body = ln ? kLayerNorm : kSoftmax;
    char eps[64];
    std::snprintf(eps, sizeof(eps), "%.9gf", s.epsilon);
    body = replace_all(body, "BIAS_PARAM", s.has_bias ? "const T* __restrict__ bias," : "");
    body = replace_all(body, "BIAS_TERM", s.has_bias ? "+ LOAD(bias[i])" : "");
    body = replace_all(body, "BLOCK", std::to_string(block));
    body = replace_all(body, "COLS", std::to_string(s.cols));
    body = replace_all(body, "EPS", eps);
    body = replace_all(body, "LOAD(", half ? "kiln_f16_to_f32(" : "(");
    body = replace_all(body, "STORE(", half ? "kiln_f32_to_f16(" : "(");
    body = replace_all(body, "const T*", half ? "const uint16_t*" : "const float*");
    body = replace_all(body, "T* ", half ? "uint16_t* " : "float* ");
    CudaKernel k;
    k.source = cuda_prelude() + kBlockReduce + body;
    k.launches.push_back({ln ? "kiln_row_layer_norm" : "kiln_row_softmax", s.rows, block});
    return k;
}

}  // namespace kiln::codegen
