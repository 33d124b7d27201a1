// kiln::Error — the one exception type for user-facing failures, and the streamed check macros.
//
// Two audiences (STYLE.md rule 10): user errors name the node/input and say expected vs got;
// internal errors (KILN_ICHECK) say "bug in Kiln" with the violated invariant.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {

/// What went wrong, coarsely; tests assert on the kind, users read the message.
enum class ErrorKind {
    kInvalidModel,     // malformed or inconsistent model file / graph
    kInvalidArgument,  // bad user argument: wrong input shape, missing input, bad option
    kUnsupported,      // op, opset, attribute value or dtype Kiln does not handle
    kCompileError,     // the system compiler failed on generated code
    kOutOfMemory,      // an allocator budget was exceeded
    kIOError,          // file could not be read or written
    kParseError,       // IR text could not be parsed
    kCancelled,        // a run stopped by RunOptions::terminate
    kInternal,         // a bug in Kiln
};

const char* error_kind_name(ErrorKind kind);

/// A user-facing error. `what()` is "<kind>: <message>" followed by the context chain
/// (innermost first), e.g. "while importing node 'conv1' (Conv)".
class Error : public std::runtime_error {
public:
    Error(ErrorKind kind, std::string message);

    ErrorKind kind() const { return kind_; }
    const std::string& message() const { return message_; }
    const std::vector<std::string>& context() const { return context_; }

    /// Adds an outer context line ("while compiling kernel fused_conv_relu") and rebuilds what().
    Error& add_context(std::string line);

    const char* what() const noexcept override { return full_.c_str(); }

private:
    void rebuild();
    ErrorKind kind_;
    std::string message_;
    std::vector<std::string> context_;
    std::string full_;
};

namespace detail {
/// The streamed message of KILN_THROW / KILN_CHECK / KILN_ICHECK.
class ErrorMessage {
public:
    template <typename T>
    ErrorMessage& operator<<(const T& v) {
        os_ << v;
        return *this;
    }
    std::string str() const { return os_.str(); }

private:
    std::ostringstream os_;
};

/// Where a KILN_THROW stands and the kind it throws. (A constructor, not braces: the macro
/// may stand inside another macro's arguments, where braces' commas would split it.)
struct ErrorSite {
    ErrorSite(ErrorKind kind, const char* file, int line) : kind(kind), file(file), line(line) {}
    ErrorKind kind;
    const char* file;
    int line;
};

/// The Error of `site` with the streamed `message` (kInternal ones get file:line). The macros
/// expand to `throw site & ErrorMessage() << ...`: '&' binds looser than '<<', so the whole
/// message is its right operand. The throw is a plain throw expression, never a destructor's: an
/// exception raised while the message is being built (a helper that throws, a Python call in
/// the binding) then propagates as itself, where a destructor throwing during that unwinding
/// would call std::terminate and abort the process.
Error operator&(const ErrorSite& site, const ErrorMessage& message);
}  // namespace detail
}  // namespace kiln

/// Throws kiln::Error of `kind` with the streamed message: KILN_THROW(kUnsupported) << "op " << op;
#define KILN_THROW(kind) \
    throw ::kiln::detail::ErrorSite(::kiln::ErrorKind::kind, __FILE__, __LINE__) & ::kiln::detail::ErrorMessage()

/// User check: KILN_CHECK(rank == 4, kInvalidModel) << "Conv '" << name << "': expected rank 4, got " << rank;
#define KILN_CHECK(cond, kind) \
    if (cond) {                \
    } else                     \
        KILN_THROW(kind)

/// Internal invariant; failure is a bug in Kiln.
#define KILN_ICHECK(cond)                                                          \
    if (cond) {                                                                    \
    } else                                                                         \
        KILN_THROW(kInternal) << "bug in Kiln: check failed: " #cond " "
