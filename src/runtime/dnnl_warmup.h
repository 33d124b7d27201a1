// oneDNN's one-time set-up, started early (issue 23: a first call within 1 s of a cold load).
//
// oneDNN generates its sgemm kernels (JIT) the first time any gemm runs in the process: about
// 20 ms on one core. PP-OCRv4's recogniser has 1x1 convolutions on plain layouts that oneDNN
// computes by gemm (x64:gemm:jit): the first of them took 22 ms to run once, 0.01 ms the second
// time; after a 64x64 sgemm it takes 0.05 ms the first time. The compiler starts this on a
// thread of its own when a model has oneDNN kernels, before it waits for the C compiler (or
// loads a cached build), and waits for it before it returns, so the model's first call does not
// pay it. (A process that exits while the thread runs crashes: oneDNN's statics made by the
// thread are destroyed under it. The compile holds the thread's future until it ends.)
#pragma once

#include <future>

namespace kiln::runtime {

/// Starts oneDNN's one-time set-up (its gemm kernels) on a thread of its own, the first time in
/// the process (later calls, and builds without oneDNN, return an empty future); a kernel that
/// needs it meanwhile waits for it inside oneDNN. The future's destructor waits for the thread
/// (std::async): hold it until the set-up must be over.
std::future<void> start_dnnl_warmup();

}  // namespace kiln::runtime
