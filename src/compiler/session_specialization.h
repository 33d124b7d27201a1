// One specialization of a compiling Session: the model compiled for one binding of its symbolic
// input dims and the values of its shape-deciding inputs, prepared in the session's runner,
// with the texts inspect(), kernel_list() and memory_report() show for it.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "compiler/compile.h"
#include "compiler/constant_pool.h"
#include "ir/graph.h"
#include "kiln/session.h"
#include "runtime/model_runner.h"

namespace kiln::compiler {

struct Specialization {
    std::string key;  // specialization_key
    std::shared_ptr<runtime::PreparedExecutable> prepared;
    CompileStats compile;
    runtime::RunnerStats runner;
    std::string inspect_text;   // the IR after the pipeline (and print_after), every kernel's source
    std::string kernel_list;    // one line per kernel launch, then "N kernels"
    std::string memory_report;  // the static memory plan's figures
    /// A tiered compile's background -O3 build (null when the kernels were built at -O3).
    std::shared_ptr<KernelUpgrade> upgrade;
};

/// "N=4;S=128;" then each frozen input "name:dtype[shape]:<bytes>;": equal keys compile alike.
std::string specialization_key(const std::map<std::string, int64_t>& dims, const std::map<std::string, Tensor>& frozen);

/// Compiles `g` (a fresh import of the model) with `dims` bound and the inputs of `frozen` made
/// constants, with the session options `opts`; its constants are shared through `pool`, and the
/// executable is prepared in `runner`.
/// `symbolic`: one compile for every value of the dims not bound in opts.dims
/// (CompileOptions::symbolic; `dims` and `frozen` are then unused).
std::shared_ptr<const Specialization> compile_specialization(ir::Graph g, const SessionOptions& opts,
                                                             const std::map<std::string, int64_t>& dims,
                                                             const std::map<std::string, Tensor>& frozen,
                                                             runtime::ModelRunner& runner, ConstantPool& pool,
                                                             bool symbolic = false);

/// The cache key of the one symbolic compile of a session.
inline constexpr const char* kSymbolicKey = "symbolic";

}  // namespace kiln::compiler
