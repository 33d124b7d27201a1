// kiln::DataParallelTrainer (kiln/data_parallel.h) as _kiln.DataParallel (wrapped for a Module
// by kiln/training/data_parallel.py), and the process's place in the MPI job. MPI starts with the first DataParallel
// (or mpi_rank/mpi_size) of the process; mpi_finalize ends it (the wrapper registers it at exit,
// as every rank of a job must call it once).
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "kiln/data_parallel.h"
#include "kiln/training.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {

void bind_distributed(nb::module_& m) {
    m.def("mpi_rank", &mpi_rank, nb::call_guard<nb::gil_scoped_release>());
    m.def("mpi_size", &mpi_size, nb::call_guard<nb::gil_scoped_release>());
    m.def("mpi_finalize", &mpi_finalize, nb::call_guard<nb::gil_scoped_release>());
    nb::class_<DataParallelTrainer>(m, "DataParallel")
        .def(
            "__init__",
            [](DataParallelTrainer* self, TrainingSession& session, size_t bucket_bytes, bool sync_batch_norm) {
                new (self) DataParallelTrainer(session, DataParallelTrainerOptions{bucket_bytes, sync_batch_norm});
            },
            "session"_a, "bucket_bytes"_a = 0, "sync_batch_norm"_a = false, nb::keep_alive<1, 2>(),
            nb::call_guard<nb::gil_scoped_release>())
        .def("broadcast_parameters", &DataParallelTrainer::broadcast_parameters,
             nb::call_guard<nb::gil_scoped_release>(), "Copies rank 0's parameters to every rank.")
        .def("step",
             [](DataParallelTrainer& dp, const nb::dict& batch) {
                 std::map<std::string, Tensor> values = batch_from_python(batch);
                 nb::gil_scoped_release release;
                 return dp.step(values);
             },
             "batch"_a,
             "This rank's gradients, averaged over the ranks in buckets overlapped with the backward pass, "
             "then the optimizer update; returns the mean loss over the ranks.")
        .def_prop_ro("buckets", &DataParallelTrainer::bucket_count)
        .def_prop_ro("synchronized_batch_norms", &DataParallelTrainer::synchronized_batch_norms);
}

}  // namespace kiln::python
