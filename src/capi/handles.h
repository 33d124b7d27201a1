// The C API's opaque handles (include/kiln/kiln_c.h), defined over the public C++ API.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "kiln/kiln_c.h"
#include "kiln/session.h"

struct kiln_session_options {
    kiln::SessionOptions options;
};

struct kiln_run_options {
    std::atomic<bool> terminate{false};
};

struct kiln_tensor {
    kiln::Tensor tensor;
    bool writable = false;  // made by kiln_tensor_create (borrowed inputs and run outputs are read-only)
};

struct kiln_session {
    /// One declared input or output: the C view points into the session's TensorInfo.
    struct Info {
        kiln_value_info c{};
        std::vector<const char*> symbols;
    };
    std::unique_ptr<kiln::Session> session;
    std::vector<Info> inputs, outputs;
};
