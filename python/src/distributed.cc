// kiln::distributed::DataParallel as _kiln.DataParallel (kiln/training/data_parallel.py wraps it
// for a Module), and the process's place in the MPI job. MPI starts with the first DataParallel
// (or mpi_rank/mpi_size) of the process; mpi_finalize ends it (the wrapper registers it at exit,
// as every rank of a job must call it once).
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "distributed/communicator.h"
#include "distributed/data_parallel.h"
#include "kiln/training.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {

void bind_distributed(nb::module_& m) {
    using distributed::Communicator;
    using distributed::DataParallel;
    m.def("mpi_rank", [] { return Communicator::get().rank(); }, nb::call_guard<nb::gil_scoped_release>());
    m.def("mpi_size", [] { return Communicator::get().size(); }, nb::call_guard<nb::gil_scoped_release>());
    m.def("mpi_finalize", [] {
        if (Communicator::initialized()) Communicator::get().finalize();
    }, nb::call_guard<nb::gil_scoped_release>());
    nb::class_<DataParallel>(m, "DataParallel")
        .def("__init__",
             [](DataParallel* self, TrainingSession& session, size_t bucket_bytes) {
                 distributed::DataParallelOptions opts = distributed::DataParallelOptions::from_env();
                 if (bucket_bytes > 0) opts.bucket_bytes = bucket_bytes;
                 new (self) DataParallel(Communicator::get(), session, opts);
             },
             "session"_a, "bucket_bytes"_a = 0, nb::keep_alive<1, 2>())
        .def("broadcast_parameters", &DataParallel::broadcast_parameters, nb::call_guard<nb::gil_scoped_release>(),
             "Copies rank 0's parameters to every rank.")
        .def("step",
             [](DataParallel& dp, const nb::dict& batch) {
                 std::map<std::string, Tensor> values = batch_from_python(batch);
                 nb::gil_scoped_release release;
                 return dp.step(values);
             },
             "batch"_a,
             "This rank's gradients, averaged over the ranks in buckets overlapped with the backward pass, "
             "then the optimizer update; returns the mean loss over the ranks.")
        .def_prop_ro("buckets", [](const DataParallel& dp) { return static_cast<int>(dp.buckets().size()); })
        .def_prop_ro("started_during_backward",
                     [](const DataParallel& dp) { return dp.last_step_stats().started_during_backward; });
}

}  // namespace kiln::python
