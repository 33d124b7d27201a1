// JSON forms of measurement tasks and results: what the measurement process reads on stdin and
// what the rpc protocol carries (tune/rpc.h).
#include <nlohmann/json.hpp>

#include "support/error.h"
#include "tune/measure.h"

namespace kiln::tune {
namespace {

using nlohmann::json;

template <typename T>
T field(const json& j, const char* name, const char* what) {
    KILN_CHECK(j.is_object() && j.contains(name), kInvalidArgument) << what << ": missing field '" << name << "'";
    try {
        return j.at(name).get<T>();
    } catch (const json::exception& e) {
        KILN_CHECK(false, kInvalidArgument) << what << ": field '" << name << "' is malformed: " << e.what();
    }
    return T();
}

json parse(const std::string& text, const char* what) {
    try {
        return json::parse(text);
    } catch (const json::exception& e) {
        KILN_CHECK(false, kInvalidArgument) << what << " is not valid JSON: " << e.what();
    }
    return json();
}

}  // namespace

std::string task_to_json(const MeasureTask& task, const MeasureOptions& opts, size_t first) {
    json args = json::array();
    for (const ArgSpec& a : task.args)
        args.push_back({{"dtype", dtype_name(a.dtype)}, {"shape", a.shape}, {"output", a.is_output}, {"constant", a.is_constant},
                        {"values", a.values}});
    json cands = json::array();
    for (const Candidate& c : task.candidates)
        cands.push_back({{"knobs", c.knobs}, {"source", c.source}, {"extern_name", c.extern_name},
                         {"extern_params", c.extern_params}, {"library", c.library}});
    json o = {{"threads", opts.threads}, {"warmup", opts.warmup}, {"repeats", opts.repeats},
              {"min_repeat_ms", opts.min_repeat_ms}, {"timeout_s", opts.timeout_s}, {"compile_jobs", opts.compile_jobs},
              {"rtol", opts.rtol}, {"atol", opts.atol}, {"flush_cache", opts.flush_cache}};
    json j = {{"workload", task.workload}, {"flops", task.flops}, {"args", args}, {"candidates", cands},
              {"options", o}, {"first", first}};
    return j.dump();
}

void task_from_json(const std::string& text, MeasureTask& task, MeasureOptions& opts, size_t& first) {
    const char* what = "measurement task";
    json j = parse(text, what);
    task = MeasureTask();
    task.workload = field<std::string>(j, "workload", what);
    task.flops = field<double>(j, "flops", what);
    for (const json& a : field<json>(j, "args", what)) {
        ArgSpec s;
        std::string dt = field<std::string>(a, "dtype", "measurement task argument");
        std::optional<DType> d = dtype_from_name(dt);
        KILN_CHECK(d.has_value(), kInvalidArgument) << "measurement task argument: unknown dtype '" << dt << "'";
        s.dtype = *d;
        s.shape = field<Shape>(a, "shape", "measurement task argument");
        s.is_output = field<bool>(a, "output", "measurement task argument");
        s.is_constant = field<bool>(a, "constant", "measurement task argument");
        if (a.contains("values")) s.values = field<std::vector<double>>(a, "values", "measurement task argument");
        KILN_CHECK(s.values.empty() || static_cast<int64_t>(s.values.size()) == shape_numel(s.shape), kInvalidArgument)
            << "measurement task argument: " << s.values.size() << " values for shape " << shape_str(s.shape);
        task.args.push_back(std::move(s));
    }
    for (const json& c : field<json>(j, "candidates", what)) {
        Candidate k;
        k.knobs = field<std::string>(c, "knobs", "measurement candidate");
        k.source = field<std::string>(c, "source", "measurement candidate");
        k.extern_name = field<std::string>(c, "extern_name", "measurement candidate");
        k.extern_params = field<std::string>(c, "extern_params", "measurement candidate");
        k.library = field<std::string>(c, "library", "measurement candidate");
        task.candidates.push_back(std::move(k));
    }
    const json o = field<json>(j, "options", what);
    opts.threads = field<int>(o, "threads", "measurement options");
    opts.warmup = field<int>(o, "warmup", "measurement options");
    opts.repeats = field<int>(o, "repeats", "measurement options");
    opts.min_repeat_ms = field<double>(o, "min_repeat_ms", "measurement options");
    opts.timeout_s = field<double>(o, "timeout_s", "measurement options");
    opts.compile_jobs = field<int>(o, "compile_jobs", "measurement options");
    opts.rtol = field<double>(o, "rtol", "measurement options");
    opts.atol = field<double>(o, "atol", "measurement options");
    opts.flush_cache = field<bool>(o, "flush_cache", "measurement options");
    first = field<size_t>(j, "first", what);
    KILN_CHECK(!task.candidates.empty(), kInvalidArgument) << what << ": no candidates (the reference comes first)";
    KILN_CHECK(opts.threads >= 1 && opts.repeats >= 1, kInvalidArgument)
        << what << ": threads and repeats must be >= 1, got " << opts.threads << " and " << opts.repeats;
}

std::string results_to_json(const std::vector<MeasureResult>& results) {
    json a = json::array();
    for (const MeasureResult& r : results) a.push_back({{"ok", r.ok}, {"seconds", r.seconds}, {"error", r.error}});
    return a.dump();
}

std::vector<MeasureResult> results_from_json(const std::string& text) {
    json j = parse(text, "measurement results");
    KILN_CHECK(j.is_array(), kInvalidArgument) << "measurement results: expected an array";
    std::vector<MeasureResult> out;
    for (const json& r : j) {
        MeasureResult m;
        m.ok = field<bool>(r, "ok", "measurement result");
        m.seconds = field<double>(r, "seconds", "measurement result");
        m.error = field<std::string>(r, "error", "measurement result");
        out.push_back(std::move(m));
    }
    return out;
}

}  // namespace kiln::tune
