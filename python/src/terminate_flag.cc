// The flag behind RunOptions::terminate: kiln.RunOptions owns one; setting it from any Python
// thread stops a run in flight (the run releases the GIL) at its next kernel boundary.
#include <nanobind/nanobind.h>

#include <atomic>

#include "bindings.h"
#include "terminate_flag.h"

namespace nb = nanobind;

namespace kiln::python {

void bind_terminate_flag(nb::module_& m) {
    nb::class_<TerminateFlag>(m, "TerminateFlag")
        .def(nb::init<>())
        .def_prop_rw(
            "value", [](const TerminateFlag& f) { return f.flag.load(); },
            [](TerminateFlag& f, bool v) { f.flag.store(v); });
}

}  // namespace kiln::python
