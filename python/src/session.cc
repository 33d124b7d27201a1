// kiln::Session as _kiln.Session (and its TensorInfo). run() converts the feed while holding
// the GIL, releases it for Session::run_values (several Python threads may run one session at
// once), then wraps the outputs as numpy arrays.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <optional>
#include <vector>

#include "bindings.h"
#include "convert.h"
#include "kiln/session.h"
#include "terminate_flag.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {
namespace {

const char* kind_name(ValueKind k) {
    switch (k) {
        case ValueKind::kTensor: return "tensor";
        case ValueKind::kSequence: return "sequence";
        case ValueKind::kOptionalTensor: return "optional_tensor";
        case ValueKind::kOptionalSequence: return "optional_sequence";
    }
    return "?";
}

/// The arrays of `into` (output name -> writable numpy array) as tensors over their memory.
std::map<std::string, Tensor> outputs_into(const std::optional<nb::dict>& into) {
    std::map<std::string, Tensor> tensors;
    if (!into) return tensors;
    for (auto [key, value] : *into) {
        const std::string name = nb::cast<std::string>(key);
        tensors.emplace(name, tensor_into_numpy(value, "output '" + name + "'"));
    }
    return tensors;
}

nb::list run(Session& session, nb::dict feed, std::optional<std::vector<int64_t>> which, TerminateFlag* terminate,
             std::optional<nb::dict> into) {
    const std::vector<TensorInfo>& inputs = session.inputs();
    const std::vector<TensorInfo>& outputs = session.outputs();
    std::map<std::string, Datum> values;
    for (auto [key, value] : feed) {
        TensorInfo unknown;  // a name the model does not have: the session names it in its error
        unknown.name = nb::cast<std::string>(key);
        const TensorInfo* info = &unknown;
        for (const TensorInfo& i : inputs)
            if (i.name == unknown.name) info = &i;
        values.emplace(info->name, datum_from_python(value, *info));
    }
    std::vector<int64_t> picked;
    if (which) {
        for (int64_t i : *which)
            KILN_CHECK(i >= 0 && static_cast<size_t>(i) < outputs.size(), kInvalidArgument)
                << "output index " << i << " out of range (the model has " << outputs.size() << " outputs)";
        picked = *which;
    } else {
        for (size_t i = 0; i < outputs.size(); ++i) picked.push_back(static_cast<int64_t>(i));
    }
    RunOptions options;
    options.terminate = terminate ? &terminate->flag : nullptr;
    const std::map<std::string, Tensor> bound = outputs_into(into);
    if (!bound.empty()) options.outputs_into = &bound;
    std::vector<Datum> results;
    {
        nb::gil_scoped_release release;
        results = session.run_values(values, options);
    }
    values.clear();  // drop the borrowed views of the caller's arrays
    KILN_CHECK(results.size() == outputs.size(), kInternal)
        << "bug in Kiln: the session returned " << results.size() << " outputs for " << outputs.size();
    nb::list out;
    std::vector<int> uses(results.size(), 0);
    for (int64_t i : picked) ++uses[i];
    for (int64_t i : picked) {
        if (bound.count(outputs[i].name)) {  // written into the caller's array: that array
            out.append((*into)[outputs[i].name.c_str()]);
            continue;
        }
        // The last use of an output takes it (zero copy); an output asked for twice is copied.
        Datum d;
        if (--uses[i] == 0)
            d = std::move(results[i]);
        else
            d = results[i];
        out.append(datum_to_python(std::move(d), "output '" + outputs[i].name + "'"));
    }
    return out;
}

nb::dict stats_dict(const Session& s) {
    const SessionStats st = s.stats();
    nb::dict d;
    d["kernels"] = st.kernels;
    d["compiled"] = st.compiled;
    d["compile_seconds"] = st.compile_seconds;
    d["load_seconds"] = st.load_seconds;
    d["executor"] = st.executor;
    d["intra_op_threads"] = st.intra_op_threads;
    d["inter_op_threads"] = st.inter_op_threads;
    d["parallel_width"] = st.parallel_width;
    d["interpreted"] = st.interpreted;
    d["interpreter_reason"] = st.interpreter_reason;
    d["control_flow"] = st.control_flow;
    d["compiles"] = st.compiles;
    d["specializations"] = st.specializations;
    d["specialization_evictions"] = st.specialization_evictions;
    d["weight_bytes"] = st.weight_bytes;
    d["constant_bytes"] = st.constant_bytes;
    d["symbolic"] = st.symbolic;
    d["symbolic_reason"] = st.symbolic_reason;
    d["quick_kernels"] = st.quick_kernels;
    d["optimized_kernels_running"] = st.optimized_kernels_running;
    d["optimize_seconds"] = st.optimize_seconds;
    return d;
}

}  // namespace

void bind_session(nb::module_& m) {
    nb::class_<TensorInfo>(m, "TensorInfo")
        .def_ro("name", &TensorInfo::name)
        .def_prop_ro("kind", [](const TensorInfo& t) { return kind_name(t.kind); })
        .def_prop_ro("dtype", [](const TensorInfo& t) { return dtype_name(t.dtype); })
        .def_ro("shape", &TensorInfo::shape, "-1 where symbolic or unknown")
        .def_ro("symbols", &TensorInfo::symbols, "per dim: the symbol's name or \"\"");

    nb::class_<Session>(m, "Session")
        .def_static("load", &Session::load, "path"_a, "options"_a, nb::call_guard<nb::gil_scoped_release>(),
                    "Loads (imports and, when the shapes are known, compiles) an .onnx model or a .kiln artifact.")
        .def("inputs", &Session::inputs, nb::rv_policy::copy)
        .def("outputs", &Session::outputs, nb::rv_policy::copy)
        .def("run", &run, "feed"_a, "outputs"_a.none(), "terminate"_a.none(), "into"_a.none() = nb::none(),
             "Runs the model: feed maps input names to numpy arrays (lists for sequences, None for empty "
             "optionals); returns the outputs at the given indices (all when None). `into` maps output names "
             "to writable C-contiguous arrays the kernels write those outputs into (returned as they are).")
        .def("stats", &stats_dict)
        .def("specialize", &Session::specialize, "dims"_a, nb::call_guard<nb::gil_scoped_release>(),
             "Compiles the specialization for these symbolic dim values now (docs/dynamic_shapes.md).")
        .def("wait_for_optimized_kernels", &Session::wait_for_optimized_kernels,
             nb::call_guard<nb::gil_scoped_release>(),
             "Blocks until every kernel runs its -O3 build (SessionOptions.tiered_compile).")
        .def("metadata", &Session::metadata)
        .def("inspect", &Session::inspect, nb::call_guard<nb::gil_scoped_release>())
        .def("kernel_list", &Session::kernel_list, nb::call_guard<nb::gil_scoped_release>())
        .def("memory_report", &Session::memory_report, nb::call_guard<nb::gil_scoped_release>())
        .def("profile_summary", &Session::profile_summary, "top"_a = 15)
        .def("write_profile", &Session::write_profile, nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace kiln::python
