// kiln_softmax: Softmax along the last axis of a float32 tensor, one row at a time (max, then the
// exponentials and their sum, then the division), rows split over the intra-op pool.
//
// The generated Softmax is one loop nest per stage (op/defs/softmax_family.cc): the row maxima,
// the exponentials, the sums and the division each stream the whole tensor. Where it outgrows
// the caches (attention scores over 1500 frames: [1, 6, 1500, 1500], 54 MB) every stage reads it
// from memory again: 9 ms against ONNX Runtime's 2.7. Here each row (6 KB) stays in L1 across
// the three passes, so the tensor is read once and written once.
//
// The generated kernel's semantics: x - max clamped below at -87 and 0 there (flushed_exp),
// probabilities under FLT_MIN 0 (flush_subnormal.h); a NaN anywhere in a row, a row of -inf, or
// a +inf in a row makes the row NaN. Within an ulp or two of its values: exp by Cephes'
// polynomial (1-2 ulp, as kiln_exp_f32), and the sum's reciprocal times each exponential where
// it divides. 16 lanes at a time with AVX-512, a scalar loop elsewhere. In place (y = x) allowed.
//
// Parameters: x, y (argument indices), rows, len (y is x's shape, rows * len elements).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

std::unique_ptr<ExternKernel> make_softmax_kernel(const ExternParams& params, const std::vector<ExternArg>& args);

/// The rows' softmax on the calling thread: `rows` rows of `len` from x into y (y may be x).
/// The blocked attention kernel's too (runtime/attention_kernel.h).
void softmax_rows(const float* x, float* y, int64_t rows, int64_t len);

}  // namespace kiln::runtime
