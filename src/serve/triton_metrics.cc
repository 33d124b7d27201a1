// Triton's metric families from model statistics (triton_metrics.h).
#include "serve/triton_metrics.h"

#include <cstdint>
#include <functional>
#include <sstream>

namespace kiln::serve {
namespace {

struct Family {
    const char* name;
    const char* help;
    std::function<uint64_t(const ModelStatistics&)> value;
};

uint64_t us(uint64_t ns) { return ns / 1000; }

std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

const std::vector<Family>& families() {
    static const std::vector<Family> f = {
        {"nv_inference_request_success", "Inference requests answered with a result, per model version.",
         [](const ModelStatistics& s) { return s.success.count; }},
        {"nv_inference_request_failure", "Inference requests answered with an error, per model version.",
         [](const ModelStatistics& s) { return s.fail.count; }},
        {"nv_inference_count", "Batch rows inferred (a request of 4 rows counts 4).",
         [](const ModelStatistics& s) { return s.inference_count; }},
        {"nv_inference_exec_count", "Model executions (a dynamic batch of requests counts 1).",
         [](const ModelStatistics& s) { return s.execution_count; }},
        {"nv_inference_request_duration_us", "Cumulative microseconds of successful requests, arrival to answer.",
         [](const ModelStatistics& s) { return us(s.success.ns); }},
        {"nv_inference_queue_duration_us", "Cumulative microseconds successful requests waited in the queue.",
         [](const ModelStatistics& s) { return us(s.queue.ns); }},
        {"nv_inference_compute_input_duration_us", "Cumulative microseconds preparing inputs of successful requests.",
         [](const ModelStatistics& s) { return us(s.compute_input.ns); }},
        {"nv_inference_compute_infer_duration_us", "Cumulative microseconds running the model for successful requests.",
         [](const ModelStatistics& s) { return us(s.compute_infer.ns); }},
        {"nv_inference_compute_output_duration_us", "Cumulative microseconds writing outputs of successful requests.",
         [](const ModelStatistics& s) { return us(s.compute_output.ns); }},
    };
    return f;
}

}  // namespace

std::string triton_metrics_text(const std::vector<ModelStatistics>& versions) {
    if (versions.empty()) return "";
    std::ostringstream os;
    for (const Family& f : families()) {
        os << "# HELP " << f.name << " " << f.help << "\n# TYPE " << f.name << " counter\n";
        for (const ModelStatistics& s : versions)
            os << f.name << "{model=\"" << escape(s.name) << "\",version=\"" << escape(s.version) << "\"} " << f.value(s)
               << "\n";
    }
    return os.str();
}

}  // namespace kiln::serve
