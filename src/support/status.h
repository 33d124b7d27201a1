// Status: the non-throwing error result of the runtime hot path (STYLE: the runtime returns
// Status, the compiler throws). Convert with Status::from(error) / status.throw_if_error().
#pragma once

#include <string>
#include <utility>

#include "support/error.h"

namespace kiln {

class Status {
public:
    Status() = default;
    Status(ErrorKind kind, std::string message) : ok_(false), kind_(kind), message_(std::move(message)) {}
    static Status ok_status() { return Status(); }
    /// The error's message and context chain; the kind is kept apart (not repeated in the text,
    /// so throw_if_error() gives back "<kind>: <message>", not "<kind>: <kind>: <message>").
    static Status from(const Error& e) {
        std::string w = e.what();
        std::string prefix = std::string(error_kind_name(e.kind())) + ": ";
        return Status(e.kind(), w.rfind(prefix, 0) == 0 ? w.substr(prefix.size()) : w);
    }

    bool ok() const { return ok_; }
    ErrorKind kind() const { return kind_; }
    const std::string& message() const { return message_; }
    /// Throws the equivalent kiln::Error if not ok.
    void throw_if_error() const {
        if (!ok_) throw Error(kind_, message_);
    }

private:
    bool ok_ = true;
    ErrorKind kind_ = ErrorKind::kInternal;
    std::string message_;
};

}  // namespace kiln
