#include "topi/batchnorm_training_match.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace kiln::topi {
namespace {

int index_of(const std::vector<ir::Value*>& vs, const ir::Value* v) {
    auto it = std::find(vs.begin(), vs.end(), v);
    return it == vs.end() ? -1 : static_cast<int>(it - vs.begin());
}

std::string real(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

// (key, argument index) for each value; false when one is missing, not static float32, or
// an output the unit does not write.
bool bind(const std::vector<std::pair<const char*, const ir::Value*>>& values, const std::vector<ir::Value*>& inputs,
          const std::vector<ir::Value*>& outputs, std::vector<std::pair<std::string, std::string>>& p) {
    for (const auto& [key, v] : values) {
        if (!v || !v->type().is_static() || v->type().dtype != DType::kFloat32) return false;
        int i = index_of(inputs, v);
        if (i < 0 && (i = index_of(outputs, v)) >= 0) i += static_cast<int>(inputs.size());
        if (i < 0) return false;
        p.emplace_back(key, std::to_string(i));
    }
    return true;
}

}  // namespace

std::optional<ExternChoice> match_batchnorm_training(const std::vector<ir::Node*>& nodes,
                                                     const std::vector<ir::Value*>& inputs,
                                                     const std::vector<ir::Value*>& outputs) {
    // The forward may carry the ReLU reading its Y (pass/fuse_operators.cc).
    const bool relu = nodes.size() == 2 && nodes[1]->op() == "Relu" && nodes[1]->input(0) == nodes[0]->output(0);
    if ((nodes.size() != 1 && !relu) || nodes[0]->num_outputs() != 3 || outputs.size() != 3) return std::nullopt;
    const ir::Node& n = *nodes[0];
    const bool fwd = n.op() == "BatchNormalization" && n.attr_int("training_mode", 0) != 0;
    if (!fwd && (relu || n.op() != "KilnBatchNormGrad")) return std::nullopt;
    const ir::Value* x = n.input(0);
    if (!x->type().is_static() || x->type().rank() < 2) return std::nullopt;
    const Shape xs = x->type().static_shape();
    int64_t hw = 1;
    for (size_t d = 2; d < xs.size(); ++d) hw *= xs[d];
    std::vector<std::pair<std::string, std::string>> p = {
        {"n", std::to_string(xs[0])}, {"c", std::to_string(xs[1])}, {"hw", std::to_string(hw)},
        {"epsilon", real(n.attr_float("epsilon", 1e-5))}};
    if (fwd) {
        p.emplace_back("momentum", real(n.attr_float("momentum", 0.9)));
        if (relu) p.emplace_back("relu", "1");
        if (!bind({{"x", x}, {"scale", n.input(1)}, {"bias", n.input(2)}, {"mean", n.input(3)}, {"var", n.input(4)},
                   {"y", relu ? nodes[1]->output(0) : n.output(0)}, {"rmean", n.output(1)}, {"rvar", n.output(2)}},
                  inputs, outputs, p))
            return std::nullopt;
        return ExternChoice{"kiln_bn_train", std::move(p)};
    }
    std::vector<std::pair<const char*, const ir::Value*>> v = {
        {"x", x}, {"dy", n.input(1)}, {"scale", n.input(2)}, {"dx", n.output(0)}, {"dscale", n.output(1)},
        {"dbias", n.output(2)}};
    if (n.num_inputs() > 3 && n.input(3)) v.emplace_back("r", n.input(3));
    if (!bind(v, inputs, outputs, p)) return std::nullopt;
    return ExternChoice{"kiln_bn_grad", std::move(p)};
}

}  // namespace kiln::topi
