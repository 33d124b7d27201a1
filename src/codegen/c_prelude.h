// The fixed text every generated C kernel starts with: includes, the kernel ABI (a copy of
// runtime/kernel_abi.h under the same include guard) and the scalar helpers the emitter calls.
#pragma once

namespace kiln::codegen {

/// The prelude of a generated translation unit (C11, no dependency beyond libc and libm).
const char* c_prelude();

}  // namespace kiln::codegen
