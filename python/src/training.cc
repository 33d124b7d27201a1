// kiln::TrainingSession as _kiln.TrainingSession, with its option structs as plain-field
// classes. kiln/training/ builds ONNX Runtime's training API (CheckpointState, Module,
// Optimizer) on top. A batch is a dict of numpy arrays, borrowed (no copy) for the call while
// the GIL is released; gradients and parameters come back as numpy arrays the caller owns.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <string>

#include "bindings.h"
#include "convert.h"
#include "kiln/training.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {

std::map<std::string, Tensor> batch_from_python(const nb::dict& batch) {
    std::map<std::string, Tensor> values;
    for (auto [key, value] : batch) {
        const std::string name = nb::cast<std::string>(key);
        values.emplace(name, tensor_from_numpy(value, "batch input '" + name + "'"));
    }
    return values;
}

namespace {

nb::list outputs_to_python(std::vector<Tensor> outputs) {
    nb::list out;
    for (size_t i = 0; i < outputs.size(); ++i)
        out.append(tensor_to_numpy(std::move(outputs[i]), "output " + std::to_string(i)));
    return out;
}

// (loss, [outputs]) of a train or eval step.
nb::tuple step(TrainingSession& s, const nb::dict& batch, bool train) {
    std::map<std::string, Tensor> values = batch_from_python(batch);
    StepResult r;
    {
        nb::gil_scoped_release release;
        r = train ? s.train_step(values) : s.eval_step(values);
    }
    values.clear();  // drop the borrowed views before handing control back to Python
    return nb::make_tuple(r.loss, outputs_to_python(std::move(r.outputs)));
}

nb::tuple gradients(TrainingSession& s, const nb::dict& batch) {
    std::map<std::string, Tensor> values = batch_from_python(batch);
    std::map<std::string, Tensor> grads;
    double loss = 0;
    {
        nb::gil_scoped_release release;
        grads = s.gradients(values, &loss);
    }
    values.clear();
    nb::dict out;
    for (auto& [name, g] : grads) out[name.c_str()] = tensor_to_numpy(std::move(g), "gradient of '" + name + "'");
    return nb::make_tuple(loss, out);
}

void apply_gradients(TrainingSession& s, const nb::dict& grads) {
    std::map<std::string, Tensor> values;
    for (auto [key, value] : grads) {
        const std::string name = nb::cast<std::string>(key);
        values.emplace(name, tensor_from_numpy(value, "gradient of '" + name + "'"));
    }
    nb::gil_scoped_release release;
    s.apply_gradients(values);
}

}  // namespace

void bind_training(nb::module_& m) {
    nb::class_<LossOptions>(m, "LossOptions")
        .def(nb::init<>())
        .def_rw("kind", &LossOptions::kind)
        .def_rw("output", &LossOptions::output)
        .def_rw("labels", &LossOptions::labels);
    nb::class_<OptimizerOptions>(m, "OptimizerOptions")
        .def(nb::init<>())
        .def_rw("kind", &OptimizerOptions::kind)
        .def_rw("lr", &OptimizerOptions::lr)
        .def_rw("momentum", &OptimizerOptions::momentum)
        .def_rw("nesterov", &OptimizerOptions::nesterov)
        .def_rw("beta1", &OptimizerOptions::beta1)
        .def_rw("beta2", &OptimizerOptions::beta2)
        .def_rw("eps", &OptimizerOptions::eps)
        .def_rw("weight_decay", &OptimizerOptions::weight_decay)
        .def_rw("clip_norm", &OptimizerOptions::clip_norm);
    nb::class_<LrSchedule>(m, "LrSchedule")
        .def(nb::init<>())
        .def_rw("kind", &LrSchedule::kind)
        .def_rw("step_size", &LrSchedule::step_size)
        .def_rw("gamma", &LrSchedule::gamma)
        .def_rw("total_steps", &LrSchedule::total_steps)
        .def_rw("min_lr", &LrSchedule::min_lr)
        .def_rw("warmup_steps", &LrSchedule::warmup_steps)
        .def("at", &LrSchedule::at, "step"_a, "lr"_a);
    nb::class_<TrainingOptions>(m, "TrainingOptions")
        .def(nb::init<>())
        .def_rw("session", &TrainingOptions::session)
        .def_rw("loss", &TrainingOptions::loss)
        .def_rw("optimizer", &TrainingOptions::optimizer)
        .def_rw("schedule", &TrainingOptions::schedule)
        .def_rw("trainable", &TrainingOptions::trainable)
        .def_rw("recompute", &TrainingOptions::recompute)
        .def_rw("recompute_memory_limit", &TrainingOptions::recompute_memory_limit)
        .def_rw("seed", &TrainingOptions::seed);

    nb::class_<TrainingSession>(m, "TrainingSession")
        .def_static("create", &TrainingSession::create, "onnx_path"_a, "options"_a,
                    nb::call_guard<nb::gil_scoped_release>(),
                    "Imports the ONNX model and compiles its training step for the shapes options.session.dims binds.")
        .def("batch_inputs", &TrainingSession::batch_inputs, nb::rv_policy::copy)
        .def("train_step", [](TrainingSession& s, const nb::dict& b) { return step(s, b, true); }, "batch"_a,
             "Forward, loss, backward and the optimizer update: (loss, [model outputs]).")
        .def("eval_step", [](TrainingSession& s, const nb::dict& b) { return step(s, b, false); }, "batch"_a,
             "Forward and loss only (BatchNormalization in inference mode): (loss, [model outputs]).")
        .def("gradients", &gradients, "batch"_a,
             "Forward, loss and backward with no update: (loss, {parameter name: gradient}).")
        .def("apply_gradients", &apply_gradients, "grads"_a,
             "The optimizer update with the given gradients ({parameter name: array}); advances step().")
        .def("step", &TrainingSession::step)
        .def("set_learning_rate", &TrainingSession::set_learning_rate, "lr"_a)
        .def("learning_rate", &TrainingSession::learning_rate)
        .def("parameter_names", &TrainingSession::parameter_names)
        .def("parameter",
             [](const TrainingSession& s, const std::string& name) {
                 return tensor_to_numpy(s.parameter(name), "parameter '" + name + "'");
             },
             "name"_a)
        .def("set_parameter",
             [](TrainingSession& s, const std::string& name, nb::handle value) {
                 s.set_parameter(name, tensor_from_numpy(value, "parameter '" + name + "'"));
             },
             "name"_a, "value"_a)
        .def("save_checkpoint", &TrainingSession::save_checkpoint, "path"_a,
             "extra"_a = std::map<std::string, std::string>{}, nb::call_guard<nb::gil_scoped_release>())
        .def("load_checkpoint", &TrainingSession::load_checkpoint, "path"_a, nb::call_guard<nb::gil_scoped_release>())
        .def("export_onnx", &TrainingSession::export_onnx, "path"_a, nb::call_guard<nb::gil_scoped_release>())
        .def("memory_report", &TrainingSession::memory_report, nb::call_guard<nb::gil_scoped_release>())
        .def("planned_peak_bytes", &TrainingSession::planned_peak_bytes, nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace kiln::python
