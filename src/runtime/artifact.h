// Compiled Kiln artifacts (`.kiln`, written by `kiln compile`): one file holding a compiled
// Executable — its kernels as one shared library, its steps and memory plan, and its constants
// (page-aligned, mapped, never copied) — that the runtime alone can load and run. The file
// layout is in runtime/artifact_format.h.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/session.h"
#include "runtime/executable.h"
#include "runtime/vm/program.h"

namespace kiln::runtime {

struct ArtifactInfo {
    /// Free-form facts written by `kiln compile` and shown by tools: "producer", "kiln_version",
    /// "source_model", "opt_level", "dims", "kernels", "threads", "model.producer_name",
    /// "model.graph_name", "model.domain", "model.description", "model.version", ... (strings).
    /// "dims" reads "N=1,S=128" (the session checks SessionOptions::dims against it);
    /// "memory_report", when present, is shown by Session::memory_report().
    std::map<std::string, std::string> metadata;
    /// CPU features the kernels were compiled for (filled by save_artifact from this host when
    /// empty); load_artifact refuses a CPU that lacks any of them (kUnsupported, naming them).
    std::vector<std::string> cpu_features;
};

/// Writes `exe` + `info` to `path` atomically (temp file in the same dir + rename). Every
/// generated kernel of exe (not async, not extern) must be exported under its KernelDesc::symbol
/// by the shared library at `kernel_library_path` (whose bytes are embedded; "" when exe has no
/// generated kernel); KernelDesc::library is ignored. Constants are written page-aligned.
/// DType::kString constants are refused (kUnsupported): they hold std::string objects, which
/// cannot be mapped (and compiled kernels never read them). Throws kiln::Error (kIOError,
/// kInvalidArgument, kUnsupported).
void save_artifact(const std::string& path, const Executable& exe, const std::string& kernel_library_path,
                   const ArtifactInfo& info);

/// A VM program (control flow: If, Loop, Scan; docs/control_flow.md) as an artifact holds it:
/// the program without its callees, and callee k's executable (each a compiled segment).
struct ProgramImage {
    vm::Program program;  // callees empty: the session makes them (vm::ExecutableCallee)
    std::vector<std::shared_ptr<Executable>> executables;
    std::vector<std::string> callee_names;
    /// The model's inputs (the entry's params, in order) and outputs (its results), static types.
    std::vector<TensorInfo> inputs, outputs;
};

/// Writes a program artifact (format section kProgram): every callee of image.program must be
/// in image.executables (an interpreted callee cannot be saved: the caller refuses it), each
/// executable's generated kernels in one library (CompileOptions::one_library), whose path is
/// their KernelDesc::library. Throws kiln::Error as save_artifact.
void save_program_artifact(const std::string& path, const ProgramImage& image, const ArtifactInfo& info);

struct LoadedArtifact {
    std::shared_ptr<Executable> exe;  // loaded (kernels resolved), constants = views of the mmap
    ArtifactInfo info;
    /// Set instead of exe for a program artifact (its executables loaded likewise).
    std::shared_ptr<ProgramImage> program;
};

/// Reads and checks magic, format version, section bounds, checksums and CPU features;
/// constants are zero-copy views of a read-only mmap of the file (kept alive by the tensors);
/// the kernel library is loaded from memory (memfd_create + dlopen of /proc/self/fd/N; fall back
/// to a private temp file). Throws kiln::Error: kInvalidModel (malformed/truncated/corrupt: says
/// which section and expected vs got), kUnsupported (format version, CPU features), kIOError.
LoadedArtifact load_artifact(const std::string& path);

/// True when the file starts with the artifact magic (false for ONNX files, missing files).
bool is_artifact_file(const std::string& path);

/// A kiln::Session over a loaded artifact (include/kiln/session.h), running through
/// runtime::ModelRunner (threads, inter_op_threads, executor, use_global_thread_pools,
/// memory_limit, profile, profile_path from SessionOptions). Options that need the compiler:
/// `dims` must agree with the compiled ones (metadata "dims"; kInvalidArgument otherwise);
/// print_after / print_after_all are kInvalidArgument (an artifact holds no IR); opt_level,
/// kernels and tuning_log are ignored (fixed when the artifact was compiled).
std::unique_ptr<Session> load_artifact_session(const std::string& path, const SessionOptions& opts);

}  // namespace kiln::runtime
