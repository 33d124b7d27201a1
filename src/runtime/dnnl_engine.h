// The process's one oneDNN CPU engine, shared by every extern kernel built on oneDNN
// (dnnl_kernels.cc, rnn_kernel.cc). Include only where KILN_HAVE_DNNL is set.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace kiln::runtime {

inline dnnl::engine& cpu_engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

}  // namespace kiln::runtime
