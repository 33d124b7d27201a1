// The fixed text every generated C kernel starts with: includes, the kernel ABI (a copy of
// runtime/kernel_abi.h under the same include guard) and the scalar helpers the emitter calls.
#pragma once

namespace kiln::codegen {

/// The prelude of a generated translation unit (C11, no dependency beyond libc and libm).
const char* c_prelude();
/// The part of the ABI only kernels with symbolic dims use (kiln_kernel_dims_fn,
/// KILN_KERNEL_BAD_DIMS), printed after c_prelude() for them alone.
const char* c_prelude_dims();
/// The 16 x 16 tile transpose helper (codegen/transpose_tiles.h), printed after the prelude (and
/// c_prelude_dims()) for kernels that call it; guarded, so a kernel unit may hold it twice.
const char* c_prelude_transpose();

}  // namespace kiln::codegen
