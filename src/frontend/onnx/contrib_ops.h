// ONNX Runtime's contrib ops (domain com.microsoft, and ORT's LayerNormalization in the default
// domain before opset 17), imported by decomposing each into the standard ops it stands for.
// Kiln's fusion pass then fuses the decomposition back into kernels (docs/architecture.md).
#pragma once

#include <string>
#include <vector>

#include "frontend/onnx/adapters.h"

namespace kiln::frontend {

inline constexpr const char* kMicrosoftDomain = "com.microsoft";

/// One contrib op the importer decomposes, as `kiln ops` lists it.
struct ContribOpInfo {
    const char* name;
    const char* domain;  // "com.microsoft", or "ai.onnx" for ORT's pre-17 LayerNormalization
    int min_inputs, max_inputs, min_outputs, max_outputs;
};

/// Every decomposed contrib op, sorted by name.
const std::vector<ContribOpInfo>& contrib_ops();

/// True if the node (op type, domain "" = ai.onnx, model's default opset) is imported through
/// import_contrib_node rather than an OpDef.
bool is_contrib_node(const std::string& op, const std::string& domain, int default_opset);

/// Emits (through ctx.emit) the standard ops that `n` stands for; the nodes producing n's
/// outputs carry n.output_names. An attribute, input or output form Kiln does not implement is
/// kUnsupported naming the node.
void import_contrib_node(const PendingNode& n, AdapterContext& ctx);

}  // namespace kiln::frontend
