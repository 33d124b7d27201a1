// ProgramSession: kiln::Session over a `.kiln` artifact that holds a VM program (control flow:
// If, Loop, Scan; docs/control_flow.md). The program's compiled segments run as
// vm::ExecutableCallees on the session's intra-op pool and allocator, in one VirtualMachine
// (one run at a time). The program was lowered at one set of input shapes (`kiln compile`'s),
// so each run's inputs must have exactly those shapes.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "runtime/artifact.h"

namespace kiln::runtime {

/// `loaded` (from load_artifact(path), started at t0) holds a program. SessionOptions as for
/// load_artifact_session; `dims` must agree with the compiled ones.
std::unique_ptr<Session> make_program_session(const std::string& path, LoadedArtifact loaded, const SessionOptions& opts,
                                              std::chrono::steady_clock::time_point t0);

}  // namespace kiln::runtime
