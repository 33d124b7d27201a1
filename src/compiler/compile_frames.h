// compile_frames: compile() for the frames executor (runtime/frame_executor.h): If and Loop are
// lowered to TF1 control-flow primitives (lower_to_frames.h) so their bodies compile to ordinary
// fused kernels at the concrete input shapes, then the graph compiles as any other.
#pragma once

#include "compiler/compile.h"
#include "compiler/lower_to_frames.h"
#include "ir/graph.h"

namespace kiln::compiler {

/// Lowers `g` in place and compiles it. A loop-carried value whose shape or dtype changes across
/// iterations is a kUnsupported kiln::Error naming the loop (the kernels are compiled for one
/// shape); what lower_to_frames refuses is an error too.
CompiledModel compile_frames(ir::Graph& g, const CompileOptions& opts, const FramesLoweringOptions& lowering = {});

}  // namespace kiln::compiler
