// `kiln run MODEL --device cuda`: the model compiled for the GPU (compiler/cuda_compile.h) and
// run by the CudaRunner on seeded random inputs (or .npy files); prints the outputs, the median
// wall time per run and the GPU's own time for the kernels, and with --compare-cpu the largest
// error against the CPU session on the same inputs. Without a GPU or driver: a clear error.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "device_placement_args.h"

namespace kiln::cli {

struct CudaRunArgs {
    std::string model;
    std::vector<std::string> inputs;  // NAME=FILE.npy
    std::map<std::string, int64_t> dims;
    int repeat = 10;
    uint64_t seed = 0;
    size_t memory_limit = 0;  // device bytes, 0 = unlimited
    int opt_level = 3;
    bool compare_cpu = false;
    std::string output_dir;
    bool use_vendor_libraries = true;  // cuBLAS and cuDNN; false: --kernels generated
    std::string inputs_npz;            // --inputs FILE.npz (by name)
    std::string gpu_math = "fp32";     // --gpu-math fp32 | tf32 | fp16
    bool profile_summary = false;      // --profile-summary: the steps' GPU time by kind
    DevicePlacementArgs placement;     // --pin, --pin-op, --place-by-cost
};

int run_model_cuda(const CudaRunArgs& args);

}  // namespace kiln::cli
