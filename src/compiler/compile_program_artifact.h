// compile_program_artifact: a model with control flow (If, Loop, Scan) -> a `.kiln` artifact
// holding its VM program (docs/control_flow.md, docs/deploy.md).
//
// The model is lowered as Session lowers it for the VM (compiler/lower_control_flow.h), at the
// one set of input shapes its declared types and --dim give, with every segment's kernels in
// one library per segment (CompileOptions::one_library); the program and its executables are
// written with runtime::save_program_artifact, which libkiln_runtime loads and runs alone.
// Refused (kiln::Error saying why): an input dim given no value (a program is lowered per
// shape), a graph input whose value shapes the graph, and any piece the lowering leaves to the
// graph interpreter (an artifact holds no interpreter).
#pragma once

#include <string>

#include "compiler/compile_artifact.h"
#include "frontend/onnx/importer.h"
#include "ir/graph.h"

namespace kiln::compiler {

/// Whether `g` goes the program path: control flow at its top level that the VM takes.
bool wants_program_artifact(const ir::Graph& g);

/// Lowers `g` (imported from `onnx_path`, its facts in `facts`) and writes the program artifact;
/// fills `r` (bytes, kernels, steps, metadata) but not its seconds.
void compile_program_artifact(const ir::Graph& g, const frontend::ModelFacts& facts, const std::string& onnx_path,
                              const std::string& out_path, const ArtifactOptions& opts, ArtifactReport& r);

}  // namespace kiln::compiler
