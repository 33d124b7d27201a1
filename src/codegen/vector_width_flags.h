// Full-width vectors on every AVX-512 CPU. Kiln's schedules assume 64-byte vectors (op/
// vector_width: 16 floats, the micro-kernels' 16-lane tiles) and the C compiler vectorizes them.
// GCC and Clang tune Intel's AVX-512 server cores (skylake-avx512 through sapphirerapids) for
// 256-bit vectors (-mprefer-vector-width=256), so under -march=native on a Xeon every generated
// kernel ran on ymm registers: half the FMA width its tiles were made for (BERT-base on one
// thread took 2x ONNX Runtime's time there, on par on the AMD Zen 4 machine, whose GCC 12 tuning
// has no preference). Where the host has AVX-512F and the compiler's tuning prefers narrower
// vectors, kernels are compiled with -mprefer-vector-width=512; elsewhere nothing is added, so
// kernel cache keys and code stay as they were.
#pragma once

#include <string>
#include <vector>

namespace kiln::codegen {

/// The flags to add, given the compiler's `-Q --help=target` output for the kernels' ISA flags
/// (its "-mprefer-vector-width=" line: "none", "128", "256" or "512") and whether the host has
/// AVX-512F: {"-mprefer-vector-width=512"} when the host has it and the preference is 128 or
/// 256, or unknown (a report without the line: Clang prints none, and it also tunes Xeons for
/// 256 bits; the caller adds the flag only if the compiler accepts it); otherwise none.
std::vector<std::string> wide_vector_flags(const std::string& target_help, bool host_avx512);

}  // namespace kiln::codegen
