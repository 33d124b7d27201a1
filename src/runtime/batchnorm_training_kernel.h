// BatchNormalization in training mode as two runtime kernels of two passes each (matched for
// float32 by topi/batchnorm_training_match.cc under every kernel source; the ops' TE computes,
// op/defs/nn.cc and op/defs/batch_norm_grad.cc, are the reference and the float64 path):
//
//  - "kiln_bn_train" (BatchNormalization, training_mode=1): per channel, pass 1 sums x - K and
//    (x - K)^2 (K = the channel's first element: a shift that keeps E[x^2] - E[x]^2 from
//    cancelling) into mean and population variance; pass 2 writes y = x inv + shift (with relu=1:
//    max(y, 0), the ReLU that alone read Y folded in). Then the running statistics:
//    input * momentum + batch * (1 - momentum).
//  - "kiln_bn_grad" (KilnBatchNormGrad): per channel, pass 1 recomputes the statistics exactly as
//    the forward did and sums dY and dY (x - K); pass 2 writes dX = k dY + a x + b. With R given
//    (the ReLU that followed the BatchNormalization: its output, or its input Y), dY is read as
//    0 where R <= 0.
//
// A channel's N planes are read by pass 1 and again by pass 2 right after, so on ResNet-sized
// activations the second pass mostly hits the cache. Channels run in parallel. Sums of a plane
// are float (8 lanes, branch-free: the ReLU mask is a bitwise and), planes add up in double.
//
// Parameters: argument indices (x, scale, bias, mean, var, y, rmean, rvar for the forward; x,
// dy, scale, r (-1: none), dx, dscale, dbias for the gradient), n, c, hw (elements of an (n, c)
// plane), epsilon, momentum and optional relu (forward). float32 only; anything else is
// kInvalidModel when made.
#pragma once

#include <memory>
#include <vector>

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

std::unique_ptr<ExternKernel> make_bn_train_kernel(const ExternParams& p, const std::vector<ExternArg>& args);
std::unique_ptr<ExternKernel> make_bn_grad_kernel(const ExternParams& p, const std::vector<ExternArg>& args);

}  // namespace kiln::runtime
