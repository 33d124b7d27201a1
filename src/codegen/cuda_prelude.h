// The prelude of generated CUDA kernels: the C prelude's scalar helpers (c_prelude.cc: the same
// f32 exp/log/tanh/erf approximations, integer division and conversion semantics, so a CUDA
// kernel computes what the C kernel computes) as __device__ functions, with the fixed-width
// types and limit macros NVRTC lacks (it has no libc headers).
#pragma once

#include <string>

namespace kiln::codegen {

std::string cuda_prelude();

}  // namespace kiln::codegen
