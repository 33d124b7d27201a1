// kiln::Session::load for libkiln_runtime, the runtime-only library: it loads compiled `.kiln`
// artifacts and nothing else (libkiln's definition, in compiler/session.cc, also imports and
// compiles ONNX models). Linked only into libkiln_runtime.so (CMakeLists.txt), never with libkiln.
#include <cerrno>
#include <cstring>
#include <fstream>

#include "kiln/session.h"
#include "runtime/artifact.h"

namespace kiln {

std::unique_ptr<Session> Session::load(const std::string& path, const SessionOptions& opts) {
    KILN_CHECK(std::ifstream(path).good(), kIOError) << "cannot open '" << path << "': " << std::strerror(errno);
    KILN_CHECK(runtime::is_artifact_file(path), kInvalidArgument)
        << "'" << path << "' is not a Kiln artifact: this is the runtime-only library (libkiln_runtime); compile "
        << "ONNX models with `kiln compile` or link libkiln";
    return runtime::load_artifact_session(path, opts);
}

}  // namespace kiln
