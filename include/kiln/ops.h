// The operators Kiln implements, as the public API sees them (for `kiln ops` and docs/ops.md).
#pragma once

#include <string>
#include <vector>

namespace kiln {

struct OpInfo {
    std::string name;
    std::string domain;              // "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training", "com.microsoft"
    std::vector<int> onnx_versions;  // ONNX since-versions implemented (in the domain's opset), ascending
    /// How it runs: "kernel" (TE compute, compiled), "host" (host kernel, graph interpreter), or
    /// "kernel + host" (compiled; the host kernel takes strings or sequences), "decomposed" (an
    /// ONNX Runtime contrib op the importer rewrites into standard ops), or "frames" (a TF1
    /// control step of the frames executor: Switch, Merge, Enter, Exit, NextIteration).
    std::string runs_as;
    std::string pattern;             // fusion pattern: elemwise, broadcast, injective, ...
    int min_inputs = 0, max_inputs = 0;  // max_inputs < 0: variadic
    int min_outputs = 0, max_outputs = 0;
    /// Autodiff differentiates through it (a gradient entry; each is checked against central
    /// differences in tests/autodiff/gradient_registry_test.cc).
    bool gradient = false;
};

/// Every registered op and every decomposed contrib op, sorted by name.
std::vector<OpInfo> supported_ops();

}  // namespace kiln
