// kiln._kiln: the native half of the `kiln` Python package. The Python half (kiln/*.py) gives
// it ONNX Runtime's API; this module binds include/kiln/session.h as it is.
#include <nanobind/nanobind.h>

#include "bindings.h"
#include "errors.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

NB_MODULE(_kiln, m) {
    m.doc() = "Kiln's C++ session API (include/kiln/session.h); use the `kiln` package's ONNX Runtime API";
    m.attr("__version__") = KILN_VERSION;
    m.attr("have_dnnl") = bool(KILN_HAVE_DNNL);
    kiln::python::bind_errors(m);
    kiln::python::bind_session_options(m);
    kiln::python::bind_terminate_flag(m);
    kiln::python::bind_session(m);
    kiln::python::bind_training(m);
    kiln::python::bind_distributed(m);
}
