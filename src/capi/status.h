// The C API's error model: every entry point runs its body under guard(), which turns any
// exception into a kiln_status and records the message as this thread's last error.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "kiln/kiln_c.h"
#include "support/dtype.h"
#include "support/error.h"

namespace kiln::capi {

kiln_status status_of(ErrorKind kind);
/// Records `message` as the calling thread's last error; returns `status`.
kiln_status fail(kiln_status status, const char* message) noexcept;

/// Runs `body`; KILN_OK, or the status and message of what it threw. Never throws.
template <typename F>
kiln_status guard(F&& body) noexcept {
    try {
        body();
        return KILN_OK;
    } catch (const Error& e) {
        return fail(status_of(e.kind()), e.what());
    } catch (const std::bad_alloc&) {
        return fail(KILN_OUT_OF_MEMORY, "OutOfMemory: allocation failed");
    } catch (const std::exception& e) {
        return fail(KILN_INTERNAL, (std::string("Internal: bug in Kiln: unexpected exception: ") + e.what()).c_str());
    } catch (...) {
        return fail(KILN_INTERNAL, "Internal: bug in Kiln: unknown exception");
    }
}

/// Throws kInvalidArgument "<what> is NULL" when p is null.
inline void require(const void* p, const char* what) {
    KILN_CHECK(p != nullptr, kInvalidArgument) << what << " is NULL";
}

/// The Kiln dtype of a C dtype value; kInvalidArgument naming `what` for a value outside the enum.
DType dtype_from_c(kiln_dtype dtype, const char* what);
kiln_dtype dtype_to_c(DType dtype);

}  // namespace kiln::capi
