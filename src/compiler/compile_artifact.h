// compile_artifact: an ONNX model -> a compiled `.kiln` artifact (docs/deploy.md).
//
// The model is imported and compiled as Session::load would compile it with the same options
// (compiler/model_compile_options.h), except that every generated kernel goes into one shared
// library (CompileOptions::one_library); runtime::save_artifact then writes the executable
// (steps, buffers, memory plan, constants), that library and the facts below into one file that
// libkiln_runtime loads without the compiler.
//
// An artifact holds one executable, so the model must compile ahead of time: no graph
// interpreter (control flow, sequences, data-dependent shapes), no graph input read as a
// shape-determining value. A symbolic input dimension given no value (--dim) makes a symbolic
// compile, one executable for every value of it (docs/dynamic_shapes.md), which only a model
// inside the symbolic subset allows; otherwise the dimension needs a value. Each of these is a
// kiln::Error naming the reason.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kiln/session.h"

namespace kiln::compiler {

struct ArtifactOptions {
    /// The compile's options, read as Session::load reads them: dims, opt_level, kernels,
    /// tuning_log, threads (the intra-op thread count whose tuned records apply; recorded),
    /// executor and inter_op_threads (kDataflow, or kAuto with more than one inter-op thread:
    /// a memory plan that lets independent steps run at once). Other fields are ignored.
    SessionOptions session;
    /// Parallel compiler processes (0 = cores).
    int compile_jobs = 0;
};

struct ArtifactReport {
    std::string path;
    uint64_t bytes = 0;        // size of the artifact
    uint64_t model_bytes = 0;  // size of the ONNX file
    int kernels = 0;           // generated kernels in the one library
    int extern_kernels = 0;    // oneDNN kernels (built when the artifact loads)
    int steps = 0;             // kernel launches per run
    int objects_compiled = 0;  // kernel objects the C compiler built now (the rest were cached)
    uint64_t library_bytes = 0;
    double seconds = 0;
    /// What the artifact records (ArtifactInfo::metadata): producer, source model, options, and
    /// the ONNX model's own facts as "model.*" keys.
    std::map<std::string, std::string> metadata;
};

/// Compiles the ONNX model at `onnx_path` and writes the artifact to `out_path` (atomically; its
/// directory must exist). Throws kiln::Error: kUnsupported for a model an artifact cannot hold,
/// kInvalidArgument for a missing or unused --dim, kIOError for paths, kCompileError from the
/// C compiler.
ArtifactReport compile_artifact(const std::string& onnx_path, const std::string& out_path,
                                const ArtifactOptions& opts = {});

}  // namespace kiln::compiler
