// kiln::quantize_dynamic_model (kiln/quantize.h): int8 weights for the MatMuls with constant
// weights, activations quantized at run time (frontend/onnx/qdq_model.h: onnx_to_dynamic).
#include <algorithm>
#include <fstream>
#include <set>

#include "compiler/quantize/quant_params.h"
#include "compiler/quantize/quantize_plan.h"
#include "frontend/onnx/qdq_model.h"
#include "kiln/quantize.h"
#include "support/error.h"

namespace kiln {

int quantize_dynamic_model(const std::string& model, const std::string& output, const QuantizeOptions& opts) {
    const frontend::OnnxGraphView g = frontend::read_onnx_graph_view(model);
    compiler::check_not_quantized(g, model);
    auto excluded = [&](const frontend::OnnxNodeView& n) {
        return std::count(opts.exclude.begin(), opts.exclude.end(), n.name) ||
               std::count(opts.exclude.begin(), opts.exclude.end(), n.op_type);
    };
    std::vector<int> candidates;
    std::set<std::string> weights;
    for (int k = 0; k < static_cast<int>(g.nodes.size()); ++k) {
        const auto& n = g.nodes[k];
        if (n.op_type != "MatMul" || n.inputs.size() != 2 || excluded(n) || !g.initializers.count(n.inputs[1]) ||
            g.initializers.count(n.inputs[0]))
            continue;
        candidates.push_back(k);
        weights.insert(n.inputs[1]);
    }
    const std::map<std::string, Tensor> values = frontend::read_onnx_constants(model, weights);
    std::vector<frontend::DynamicMatMul> matmuls;
    for (int k : candidates) {
        const Tensor& w = values.at(g.nodes[k].inputs[1]);
        if (w.dtype() != DType::kFloat32 || w.shape().size() != 2) continue;
        compiler::QuantizedWeight q =
            compiler::quantize_weight(w, opts.per_channel ? 1 : -1, compiler::quant_range(DType::kInt8, true));
        matmuls.push_back({k, std::move(q.values), std::move(q.scale)});
    }
    const std::string bytes = frontend::onnx_to_dynamic(model, matmuls);
    std::ofstream f(output, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    KILN_CHECK(f.good(), kIOError) << "cannot write '" << output << "'";
    return static_cast<int>(matmuls.size());
}

}  // namespace kiln
