// Which kernel units run as a row kernel on the GPU (codegen/cuda_row_kernels.h): a unit of one
// LayerNormalization or Softmax over the last axis, static shapes, FP32 or FP16 throughout, and
// (LayerNormalization) Scale and B of one row's length with only the Y output.
#pragma once

#include <optional>

#include "codegen/cuda_row_kernels.h"
#include "compiler/lower_group.h"

namespace kiln::compiler {

std::optional<codegen::RowKernelSpec> row_kernel_choice(const KernelUnit& unit);

}  // namespace kiln::compiler
