// Per-layer error accumulation (layer_error.h) and the report's table / JSON (kiln/quantize.h).
#include "compiler/quantize/layer_error.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "support/error.h"

namespace kiln {

namespace compiler {

void LayerError::add(const std::string& tensor, const Tensor& f, const Tensor& q) {
    KILN_CHECK(f.dtype() == DType::kFloat32 && q.dtype() == DType::kFloat32 && f.shape() == q.shape(), kInternal)
        << "bug in Kiln: tensor '" << tensor << "' differs in dtype or shape between the fp32 and QDQ models";
    const float* a = f.data_as<float>();
    const float* b = q.data_as<float>();
    for (int64_t i = 0; i < f.numel(); ++i) {
        const double d = static_cast<double>(b[i]) - a[i];
        ref_sq += static_cast<double>(a[i]) * a[i];
        err_sq += d * d;
        max_abs = std::max(max_abs, std::fabs(d));
    }
}

void LayerError::finish(QuantizedLayer& layer) const {
    layer.sqnr_db = err_sq == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(ref_sq / err_sq);
    layer.rel_l2 = ref_sq == 0 ? (err_sq == 0 ? 0.0 : std::numeric_limits<double>::infinity())
                               : std::sqrt(err_sq / ref_sq);
    layer.max_abs_steps = max_abs / layer.scale;
}

}  // namespace compiler

namespace {

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

std::string QuantizeReport::table() const {
    char line[512];
    std::snprintf(line, sizeof line, "%-28s %-8s %-28s %22s %11s %5s %9s %9s %7s\n", "node", "op", "tensor", "range",
                  "scale", "zp", "SQNR dB", "rel L2", "max st");
    std::string s = line;
    for (const QuantizedLayer& l : layers) {
        char range[64];
        std::snprintf(range, sizeof range, "[%.4g, %.4g]", l.range_min, l.range_max);
        std::snprintf(line, sizeof line, "%-28s %-8s %-28s %22s %11.4g %5d %9.2f %9.4f %7.1f\n", l.node.c_str(),
                      l.op_type.empty() ? "input" : l.op_type.c_str(), l.tensor.c_str(), range, l.scale,
                      l.zero_point, l.sqnr_db, l.rel_l2, l.max_abs_steps);
        s += line;
    }
    std::snprintf(line, sizeof line,
                  "%zu tensors, %d constants quantized; %d calibration batches (%s): calibration %.2f s, report %.2f s\n",
                  layers.size(), weights, batches, method.c_str(), calibration_seconds, report_seconds);
    return s + line;
}

std::string QuantizeReport::json() const {
    nlohmann::json j;
    j["method"] = method;
    j["batches"] = batches;
    j["constants_quantized"] = weights;
    j["calibration_seconds"] = calibration_seconds;
    j["report_seconds"] = report_seconds;
    j["layers"] = nlohmann::json::array();
    for (const QuantizedLayer& l : layers)
        j["layers"].push_back({{"node", l.node}, {"op_type", l.op_type}, {"tensor", l.tensor},
                               {"range", {l.range_min, l.range_max}}, {"scale", l.scale},
                               {"zero_point", l.zero_point}, {"sqnr_db", number(l.sqnr_db)},
                               {"rel_l2", number(l.rel_l2)}, {"max_abs_steps", number(l.max_abs_steps)}});
    return j.dump(2) + "\n";
}

}  // namespace kiln
