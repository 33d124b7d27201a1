#include "support/error.h"

namespace kiln {

const char* error_kind_name(ErrorKind kind) {
    switch (kind) {
        case ErrorKind::kInvalidModel: return "InvalidModel";
        case ErrorKind::kInvalidArgument: return "InvalidArgument";
        case ErrorKind::kUnsupported: return "Unsupported";
        case ErrorKind::kCompileError: return "CompileError";
        case ErrorKind::kOutOfMemory: return "OutOfMemory";
        case ErrorKind::kIOError: return "IOError";
        case ErrorKind::kParseError: return "ParseError";
        case ErrorKind::kCancelled: return "Cancelled";
        case ErrorKind::kInternal: return "Internal";
    }
    return "Unknown";
}

Error::Error(ErrorKind kind, std::string message)
    : std::runtime_error(message), kind_(kind), message_(std::move(message)) {
    rebuild();
}

Error& Error::add_context(std::string line) {
    context_.push_back(std::move(line));
    rebuild();
    return *this;
}

void Error::rebuild() {
    full_ = std::string(error_kind_name(kind_)) + ": " + message_;
    for (const auto& c : context_) full_ += "\n  " + c;
}

namespace detail {
Error operator&(const ErrorSite& site, const ErrorMessage& message) {
    std::string msg = message.str();
    if (site.kind == ErrorKind::kInternal) msg += " (" + std::string(site.file) + ":" + std::to_string(site.line) + ")";
    return Error(site.kind, std::move(msg));
}
}  // namespace detail
}  // namespace kiln
