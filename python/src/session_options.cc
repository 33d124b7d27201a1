// kiln::SessionOptions as _kiln.SessionOptions: plain fields; kiln/session_options.py fills
// them from ONNX Runtime's SessionOptions and the "kiln.*" session config entries.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "kiln/session.h"

namespace nb = nanobind;

namespace kiln::python {

void bind_session_options(nb::module_& m) {
    nb::enum_<ExecutorKind>(m, "ExecutorKind")
        .value("auto", ExecutorKind::kAuto)
        .value("sequential", ExecutorKind::kSequential)
        .value("dataflow", ExecutorKind::kDataflow);
    nb::class_<SessionOptions>(m, "SessionOptions")
        .def(nb::init<>())
        .def_rw("threads", &SessionOptions::threads)
        .def_rw("inter_op_threads", &SessionOptions::inter_op_threads)
        .def_rw("executor", &SessionOptions::executor)
        .def_rw("use_global_thread_pools", &SessionOptions::use_global_thread_pools)
        .def_rw("preemptible", &SessionOptions::preemptible)
        .def_rw("memory_limit", &SessionOptions::memory_limit)
        .def_rw("profile_path", &SessionOptions::profile_path)
        .def_rw("profile", &SessionOptions::profile)
        .def_rw("dims", &SessionOptions::dims)
        .def_rw("specialize", &SessionOptions::specialize)
        .def_rw("dim_ranges", &SessionOptions::dim_ranges)
        .def_rw("max_specializations", &SessionOptions::max_specializations)
        .def_rw("symbolic_shapes", &SessionOptions::symbolic_shapes)
        .def_rw("tiered_compile", &SessionOptions::tiered_compile)
        .def_rw("opt_level", &SessionOptions::opt_level)
        .def_rw("kernels", &SessionOptions::kernels)
        .def_rw("tuning_log", &SessionOptions::tuning_log)
        .def_rw("print_after", &SessionOptions::print_after)
        .def_rw("print_after_all", &SessionOptions::print_after_all);
}

}  // namespace kiln::python
