// The CompileOptions of a whole-model compile, from the public SessionOptions. Shared by the
// compiling Session (compiler/session.cc) and `kiln compile` (compiler/compile_artifact.h), so a
// compiled artifact holds the executable a Session would compile with the same options.
#pragma once

#include <string>

#include "compiler/compile.h"
#include "kiln/session.h"

namespace kiln::compiler {

/// `threads`, or the number of cores when 0 (what the runtime's intra-op pool resolves it to).
int resolve_intra_op_threads(int threads);

/// The tuning log `tuning_log` (SessionOptions::tuning_log) names: "" when none applies ("none",
/// or "" with no default log); kInvalidArgument when a named file does not exist.
std::string resolve_tuning_log(const std::string& tuning_log);

/// dims, opt_level, kernels (kInvalidArgument if unknown), print_after (kInvalidArgument naming an
/// unknown pass) and the tuning log's best records for this machine and `intra_op_threads`
/// threads (the records are per thread count). The caller sets plan_for_concurrency and the
/// print hook.
CompileOptions compile_options_for(const SessionOptions& o, int intra_op_threads);

}  // namespace kiln::compiler
