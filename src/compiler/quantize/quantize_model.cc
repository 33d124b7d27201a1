// kiln::quantize_model: plan (quantize_plan.h), calibrate (calibrate.h), choose scales
// (quant_params.h), write QDQ ONNX (frontend/onnx/qdq_model.h), measure each layer's error
// (layer_error.h).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <fstream>
#include <set>

#include "compiler/quantize/calibrate.h"
#include "compiler/quantize/calibration_data.h"
#include "compiler/quantize/layer_error.h"
#include "compiler/quantize/quant_params.h"
#include "compiler/quantize/quantize_plan.h"
#include "frontend/onnx/fold_conv_bn.h"
#include "support/error.h"

namespace kiln {

namespace {

using namespace compiler;
using frontend::OnnxGraphView;
using frontend::QdqActivation;
using frontend::QdqConstant;
using frontend::QdqSpec;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void check_options(const QuantizeOptions& o) {
    KILN_CHECK(o.activation_type == DType::kUInt8 || o.activation_type == DType::kInt8, kInvalidArgument)
        << "activation type: expected uint8 or int8, got " << dtype_name(o.activation_type);
    KILN_CHECK(!o.activation_symmetric || o.activation_type == DType::kInt8, kInvalidArgument)
        << "symmetric activations need the int8 activation type";
    KILN_CHECK(o.weight_type == DType::kInt8, kUnsupported)
        << "weight type: Kiln quantizes weights to int8 (symmetric), got " << dtype_name(o.weight_type);
    KILN_CHECK(o.percentile > 50 && o.percentile <= 100, kInvalidArgument)
        << "percentile: expected a value in (50, 100], got " << o.percentile;
}

/// Each Clip's (min, max) from its constant inputs (opset 11+) or attributes (opset 6).
std::map<int, std::pair<double, double>> clip_bounds(const std::string& model, const OnnxGraphView& g) {
    std::map<std::string, Tensor> consts = frontend::read_onnx_constants(model, clip_bound_inputs(g));
    std::map<int, std::pair<double, double>> out;
    for (int k = 0; k < static_cast<int>(g.nodes.size()); ++k) {
        const auto& n = g.nodes[k];
        if (n.op_type != "Clip") continue;
        auto bound = [&](size_t i, const char* attr, double dflt) -> std::optional<double> {
            if (i < n.inputs.size() && !n.inputs[i].empty()) {
                auto it = consts.find(n.inputs[i]);
                if (it == consts.end() || it->second.numel() != 1) return std::nullopt;  // computed bound
                return it->second.get_f64(0);
            }
            auto a = n.float_attrs.find(attr);
            return a == n.float_attrs.end() ? dflt : a->second;
        };
        auto lo = bound(1, "min", -INFINITY), hi = bound(2, "max", INFINITY);
        if (lo && hi) out[k] = {*lo, *hi};
    }
    return out;
}

/// Whether calibration saw `t` as f32 with a range an 8-bit grid can hold: a sentinel such as an
/// attention mask's -3.4e38 would make the step 1e36.
bool quantizable(const TensorStats& s) { return s.seen && s.min > -1e30f && s.max < 1e30f; }

/// Drops the nodes with a tensor calibration found not quantizable (and the MaxPools / Adds that
/// then have a float operand).
void keep_float_nodes(QuantPlan& plan, const std::map<std::string, TensorStats>& stats, const OnnxGraphView& g) {
    std::set<std::string> quantized;
    std::vector<QuantNodePlan> kept;
    for (auto& p : plan.nodes) {
        bool ok = quantizable(stats.at(p.output));
        for (const auto& t : p.act_inputs)
            ok = ok && quantizable(stats.at(t)) &&
                 (!(p.same_scale || g.nodes[p.node].op_type == "Add") || quantized.count(t));
        if (!ok) continue;
        for (const auto& t : p.act_inputs) quantized.insert(t);
        quantized.insert(p.output);
        kept.push_back(std::move(p));
    }
    plan.nodes = std::move(kept);
}

struct Chosen {
    QuantizedLayer layer;
    QdqActivation act;
};

/// Scale and zero point of every planned tensor (a MaxPool's output: its input's).
std::map<std::string, Chosen> choose_params(const QuantPlan& plan, const std::map<std::string, TensorStats>& stats,
                                            const QuantizeOptions& o) {
    const QRange q = quant_range(o.activation_type, o.activation_symmetric);
    std::map<std::string, Chosen> out;
    for (const auto& p : plan.nodes) {
        for (const auto& t : p.act_inputs) {
            if (out.count(t)) continue;
            auto [lo, hi] = choose_range(stats.at(t), o.method, o.percentile);
            ScaleZero sz = scale_zero_point(lo, hi, q, o.activation_symmetric);
            out[t] = {{"", "", t, lo, hi, sz.scale, sz.zero_point}, {t, sz.scale, sz.zero_point, o.activation_type}};
        }
        if (out.count(p.output)) continue;
        if (p.same_scale) {
            Chosen c = out.at(p.act_inputs[0]);
            c.layer.tensor = c.act.tensor = p.output;
            out[p.output] = c;
            continue;
        }
        auto [lo, hi] = choose_range(stats.at(p.output), o.method, o.percentile);
        ScaleZero sz = scale_zero_point(lo, hi, q, o.activation_symmetric);
        out[p.output] = {{"", "", p.output, lo, hi, sz.scale, sz.zero_point},
                         {p.output, sz.scale, sz.zero_point, o.activation_type}};
    }
    return out;
}

/// The quantized weights and biases of the plan's nodes.
std::vector<QdqConstant> quantize_constants(const std::string& model, const OnnxGraphView& g, const QuantPlan& plan,
                                            const std::map<std::string, Chosen>& acts) {
    std::set<std::string> names;
    for (const auto& p : plan.nodes) {
        for (auto [i, axis] : p.weights) names.insert(g.nodes[p.node].inputs[i]);
        if (p.bias_input >= 0) names.insert(g.nodes[p.node].inputs[p.bias_input]);
    }
    const std::map<std::string, Tensor> values = frontend::read_onnx_constants(model, names);
    std::map<std::string, size_t> by_key;  // "<tensor>#<axis>" -> index in out
    std::vector<QdqConstant> out;
    const QRange wq = quant_range(DType::kInt8, true);
    for (const auto& p : plan.nodes) {
        const auto& n = g.nodes[p.node];
        const Tensor* w_scale = nullptr;
        for (auto [i, axis] : p.weights) {
            const Tensor& w = values.at(n.inputs[i]);
            if (w.dtype() != DType::kFloat32) continue;
            if (axis >= static_cast<int>(w.shape().size()) || (n.op_type != "Conv" && w.shape().size() != 2)) axis = -1;
            const std::string key = n.inputs[i] + "#" + std::to_string(axis);
            if (!by_key.count(key)) {
                QuantizedWeight qw = quantize_weight(w, axis, wq);
                by_key[key] = out.size();
                // a second use at another axis needs a name of its own
                const bool again = std::any_of(out.begin(), out.end(), [&](const QdqConstant& c) { return c.tensor == n.inputs[i]; });
                out.push_back({n.inputs[i], n.inputs[i] + (again ? "_axis" + std::to_string(axis) : "") + "_DequantizeLinear_Output",
                               std::move(qw.values), std::move(qw.scale), axis, {}});
            }
            out[by_key[key]].uses.push_back({p.node, i});
            w_scale = &out[by_key[key]].scale;
        }
        if (p.bias_input < 0 || !w_scale) continue;
        const std::string& bname = n.inputs[p.bias_input];
        const Tensor& b = values.at(bname);
        if (b.dtype() != DType::kFloat32 || b.shape().size() != 1 || (w_scale->numel() != 1 && w_scale->numel() != b.numel()))
            continue;
        QuantizedWeight qb = quantize_bias(b, acts.at(p.act_inputs[0]).act.scale, *w_scale);
        out.push_back({bname, bname + "_node" + std::to_string(p.node) + "_DequantizeLinear_Output", std::move(qb.values),
                       std::move(qb.scale), w_scale->numel() == 1 ? -1 : 0, {{p.node, p.bias_input}}});
    }
    return out;
}

/// Relu / Clip nodes the QuantizeLinear after them makes redundant: the zero point at the
/// type's minimum (so 0 saturates), and for Clip the largest value representable within max.
std::vector<int> removable_activations(const QuantPlan& plan, const std::map<std::string, Chosen>& acts, QRange q) {
    std::vector<int> out;
    for (const auto& p : plan.nodes) {
        if (p.activation < 0) continue;
        const QdqActivation& a = acts.at(p.output).act;
        if (a.zero_point == q.qmin && (q.qmax - a.zero_point) * static_cast<double>(a.scale) <= p.clip_max * (1 + 1e-6))
            out.push_back(p.activation);
    }
    return out;
}

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    KILN_CHECK(f.good(), kIOError) << "cannot write '" << path << "'";
}

/// Fills each layer's error: the QDQ model's dequantized tensors against fp32's, on `batches`.
void measure_errors(const std::string& model, QdqSpec spec, const std::vector<CalibrationBatch>& batches,
                    TensorProbe& fp32, std::vector<QuantizedLayer>& layers, const QuantizeOptions& o,
                    const std::vector<std::string>& graph_outputs) {
    for (const auto& l : layers) spec.expose.push_back(l.tensor);
    TensorProbe qdq(frontend::onnx_to_qdq(model, spec), o);
    std::vector<LayerError> err(layers.size());
    for (const auto& b : batches) {
        std::map<std::string, Tensor> f = fp32.run(b), q = qdq.run(b);
        for (size_t i = 0; i < layers.size(); ++i) {
            const std::string& t = layers[i].tensor;
            const bool out = std::count(graph_outputs.begin(), graph_outputs.end(), t) > 0;
            err[i].add(t, f.at(t), q.at(out ? t : frontend::qdq_dequantized_name(t)));
        }
    }
    for (size_t i = 0; i < layers.size(); ++i) err[i].finish(layers[i]);
}

/// Each layer's producing node and its op type ("" for a graph input).
void name_producers(const OnnxGraphView& g, const QuantPlan& plan, std::vector<QuantizedLayer>& layers) {
    std::map<std::string, const frontend::OnnxNodeView*> producer;
    for (const auto& n : g.nodes)
        for (const auto& o : n.outputs) producer[o] = &n;
    for (const auto& p : plan.nodes) producer[p.output] = &g.nodes[p.node];  // a Conv's, not its Relu's
    for (auto& l : layers) {
        auto it = producer.find(l.tensor);
        if (it == producer.end()) continue;
        l.node = it->second->name;
        l.op_type = it->second->op_type;
    }
}

const char* method_name(CalibrationMethod m) {
    return m == CalibrationMethod::kMinMax ? "minmax" : m == CalibrationMethod::kPercentile ? "percentile" : "entropy";
}

}  // namespace

QuantizeReport quantize_model(const std::string& source, const std::string& output,
                              const std::vector<CalibrationBatch>& batches, const QuantizeOptions& o) {
    check_options(o);
    std::error_code ec;  // the source is read again after the output is written (the report)
    KILN_CHECK(!std::filesystem::equivalent(source, output, ec), kInvalidArgument)
        << "the output '" << output << "' is the input model; write the quantized model elsewhere";
    const auto t0 = std::chrono::steady_clock::now();
    // BatchNormalization after a Conv folds into its weights first (ORT's quant_pre_process).
    std::optional<std::string> folded = frontend::fold_conv_batchnorm(source);
    std::unique_ptr<TempModel> folded_file = folded ? std::make_unique<TempModel>(*folded) : nullptr;
    const std::string& model = folded_file ? folded_file->path() : source;
    const OnnxGraphView g = frontend::read_onnx_graph_view(model);
    check_not_quantized(g, source);
    check_calibration_batches(batches, g, o.dims);
    QuantPlan plan = plan_quantization(g, {o.op_types, o.exclude, o.per_channel}, clip_bounds(model, g));
    const std::vector<std::string> tensors = plan.tensors();
    std::vector<std::string> outputs;  // graph inputs need no output: the batch holds them
    for (const auto& t : tensors)
        if (!batches.front().count(t)) outputs.push_back(t);
    TensorProbe fp32(frontend::onnx_with_extra_outputs(model, outputs), o);
    const std::map<std::string, TensorStats> stats = calibrate(fp32, tensors, batches, o.method);
    keep_float_nodes(plan, stats, g);
    const std::map<std::string, Chosen> acts = choose_params(plan, stats, o);
    QdqSpec spec;
    for (const auto& t : plan.tensors()) spec.activations.push_back(acts.at(t).act);
    spec.constants = quantize_constants(model, g, plan, acts);
    spec.removed_activations = removable_activations(plan, acts, quant_range(o.activation_type, o.activation_symmetric));
    write_file(output, frontend::onnx_to_qdq(model, spec));
    QuantizeReport r;
    r.method = method_name(o.method);
    r.batches = static_cast<int>(batches.size());
    r.weights = static_cast<int>(spec.constants.size());
    for (const auto& t : plan.tensors()) r.layers.push_back(acts.at(t).layer);
    name_producers(g, plan, r.layers);
    r.calibration_seconds = seconds_since(t0);
    if (o.report) {
        const auto t1 = std::chrono::steady_clock::now();
        measure_errors(model, spec, batches, fp32, r.layers, o, g.outputs);
        r.report_seconds = seconds_since(t1);
    } else {
        for (auto& l : r.layers) l.sqnr_db = l.rel_l2 = l.max_abs_steps = NAN;
    }
    return r;
}

}  // namespace kiln
