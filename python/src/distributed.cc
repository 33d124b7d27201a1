// kiln::DataParallelTrainer (kiln/data_parallel.h) as _kiln.DataParallel (wrapped for a Module
// by kiln/training/data_parallel.py), kiln::PipelineTrainer (kiln/pipeline_parallel.h) as
// _kiln.PipelineTrainer (kiln/training/pipeline_parallel.py), and the process's place in the MPI job. MPI starts with the first DataParallel
// (or mpi_rank/mpi_size) of the process; mpi_finalize ends it (the wrapper registers it at exit,
// as every rank of a job must call it once).
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "kiln/data_parallel.h"
#include "kiln/pipeline_parallel.h"
#include "kiln/training.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {

namespace {

void bind_pipeline(nb::module_& m) {
    nb::class_<PipelineTrainerOptions>(m, "PipelineTrainerOptions")
        .def(nb::init<>())
        .def_rw("microbatches", &PipelineTrainerOptions::microbatches)
        .def_rw("schedule", &PipelineTrainerOptions::schedule)
        .def_rw("stages", &PipelineTrainerOptions::stages)
        .def_rw("rematerialize", &PipelineTrainerOptions::rematerialize)
        .def_rw("pipeline_stages", &PipelineTrainerOptions::pipeline_stages)
        .def_rw("data_parallel", &PipelineTrainerOptions::data_parallel)
        .def_rw("bucket_bytes", &PipelineTrainerOptions::bucket_bytes);
    nb::class_<PipelineTrainer>(m, "PipelineTrainer")
        .def(nb::init<const std::string&, const TrainingOptions&, const PipelineTrainerOptions&>(), "onnx_path"_a,
             "options"_a, "pipeline"_a, nb::call_guard<nb::gil_scoped_release>())
        .def("batch_inputs", &PipelineTrainer::batch_inputs, nb::rv_policy::copy)
        .def("step",
             [](PipelineTrainer& pt, const nb::dict& batch) {
                 std::map<std::string, Tensor> values = batch_from_python(batch);
                 nb::gil_scoped_release release;
                 return pt.step(values);
             },
             "batch"_a, "One step on the replica's batch; returns the global batch's mean loss.")
        .def("eval_step",
             [](PipelineTrainer& pt, const nb::dict& batch) {
                 std::map<std::string, Tensor> values = batch_from_python(batch);
                 StepResult r;
                 {
                     nb::gil_scoped_release release;
                     r = pt.eval_step(values);
                 }
                 values.clear();
                 nb::list outs;
                 for (size_t i = 0; i < r.outputs.size(); ++i)
                     outs.append(tensor_to_numpy(std::move(r.outputs[i]), "output " + std::to_string(i)));
                 return nb::make_tuple(r.loss, outs);
             },
             "batch"_a, "Forward and loss only: (loss on every rank, [the loss's output] on the last stage).")
        .def("steps", &PipelineTrainer::steps)
        .def_prop_ro("stage", &PipelineTrainer::stage)
        .def_prop_ro("stages", &PipelineTrainer::stages)
        .def_prop_ro("replica", &PipelineTrainer::replica)
        .def_prop_ro("replicas", &PipelineTrainer::replicas)
        .def("describe", &PipelineTrainer::describe)
        .def("stage_parameter_names", &PipelineTrainer::stage_parameter_names)
        .def("gather_parameters",
             [](PipelineTrainer& pt) {
                 std::map<std::string, Tensor> values;
                 {
                     nb::gil_scoped_release release;
                     values = pt.gather_parameters();
                 }
                 nb::dict out;
                 for (auto& [name, t] : values)
                     out[name.c_str()] = tensor_to_numpy(std::move(t), "parameter '" + name + "'");
                 return out;
             })
        .def("export_onnx", &PipelineTrainer::export_onnx, "path"_a, nb::call_guard<nb::gil_scoped_release>())
        .def("save_checkpoint", &PipelineTrainer::save_checkpoint, "path"_a,
             "extra"_a = std::map<std::string, std::string>{}, nb::call_guard<nb::gil_scoped_release>())
        .def("load_checkpoint", &PipelineTrainer::load_checkpoint, "path"_a, nb::call_guard<nb::gil_scoped_release>())
        .def("last_step_stats", [](const PipelineTrainer& pt) {
            const PipelineTrainerStats s = pt.last_step_stats();
            nb::dict d;
            d["step_s"] = s.step_s;
            d["forward_s"] = s.forward_s;
            d["backward_s"] = s.backward_s;
            d["apply_s"] = s.apply_s;
            d["peak_stashed"] = s.peak_stashed;
            return d;
        });
}

}  // namespace

void bind_distributed(nb::module_& m) {
    bind_pipeline(m);
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
