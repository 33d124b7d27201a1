// Status: the non-throwing error result of the runtime hot path (STYLE: the runtime returns
// Status, the compiler throws). Convert with Status::from(error) / status.throw_if_error().
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "support/error.h"

namespace kiln {

class Status {
public:
    Status() = default;
    Status(ErrorKind kind, std::string message) : error_(std::make_unique<Failure>(Failure{kind, std::move(message)})) {}
    Status(const Status& o) : error_(o.error_ ? std::make_unique<Failure>(*o.error_) : nullptr) {}
    Status& operator=(const Status& o) {
        if (this != &o) error_ = o.error_ ? std::make_unique<Failure>(*o.error_) : nullptr;
        return *this;
    }
    Status(Status&&) noexcept = default;
    Status& operator=(Status&&) noexcept = default;
    static Status ok_status() { return Status(); }
    /// The error's message and context chain; the kind is kept apart (not repeated in the text,
    /// so throw_if_error() gives back "<kind>: <message>", not "<kind>: <kind>: <message>").
    static Status from(const Error& e) {
        std::string w = e.what();
        std::string prefix = std::string(error_kind_name(e.kind())) + ": ";
        return Status(e.kind(), w.rfind(prefix, 0) == 0 ? w.substr(prefix.size()) : w);
    }

    bool ok() const { return !error_; }
    ErrorKind kind() const { return error_ ? error_->kind : ErrorKind::kInternal; }
    const std::string& message() const {
        static const std::string none;
        return error_ ? error_->message : none;
    }
    /// Throws the equivalent kiln::Error if not ok.
    void throw_if_error() const {
        if (error_) throw Error(error_->kind, error_->message);
    }

private:
    struct Failure {
        ErrorKind kind;
        std::string message;
    };
    // One pointer, null when ok: the runtime's hot path makes and moves an ok Status per kernel
    // call and per VM instruction (a Loop iteration several), which is then a single word.
    std::unique_ptr<Failure> error_;
};

}  // namespace kiln
