// Lowering one kernel unit for the GPU: the unit's members composed and their elementwise
// chains inlined exactly as for the CPU (compiler/lower_group.h), then the default GPU schedule
// (topi/cuda_schedule.h) instead of the CPU schedules, tir, and CUDA C (codegen/cuda_emitter.h).
#pragma once

#include <string>

#include "codegen/cuda_emitter.h"
#include "compiler/lower_group.h"

namespace kiln::compiler {

struct CudaLoweredKernel {
    std::string description;  // ops of the unit, "MatMul+Add+Relu"
    std::string node_name;
    tir::PrimFunc func;       // the scheduled loop IR (its CPU semantics: the tir interpreter)
    codegen::CudaKernel cuda;
    double flops = 0;
};

/// Static shapes only. Throws kUnsupported naming the node when the unit cannot run on the GPU.
CudaLoweredKernel lower_unit_cuda(const KernelUnit& unit, const codegen::CudaEmitOptions& emit = {});

}  // namespace kiln::compiler
