// The host's instruction-set features. Generated kernels are compiled with -march=native, so a
// compiled artifact records the features of the machine that compiled it and refuses to load
// on a CPU that lacks one (runtime/artifact.h).
#pragma once

#include <string>
#include <vector>

namespace kiln::runtime {

/// The architecture ("x86_64", "aarch64", ...) followed by the host's features (CPUID, with
/// the OS's register-state support for AVX, AVX-512 and AMX) from a fixed list, in this order
/// and named as GCC's __builtin_cpu_supports names them (x86: sse4.1 sse4.2 popcnt avx avx2 fma
/// f16c bmi bmi2 avx512f avx512bw avx512dq avx512vl avx512cd avx512vnni avx512bf16 avx512fp16
/// avx512vbmi avx512ifma avxvnni amx-tile amx-int8 amx-bf16 gfni vpclmulqdq).
std::vector<std::string> host_cpu_features();

/// The names in `wanted` this host does not have (names this runtime does not know included),
/// in `wanted`'s order.
std::vector<std::string> missing_cpu_features(const std::vector<std::string>& wanted);

/// Whether the host has an int8 dot-product instruction (avx512vnni, avxvnni or amx-int8: u8 x
/// s8 -> s32 in one step). Without one, int8 products run on 16-bit multiply-adds and are often
/// no faster than fp32 (`kiln quantize` says so).
bool host_has_int8_dot_product();

}  // namespace kiln::runtime
