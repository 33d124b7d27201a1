// kiln::supported_ops(): the public view of the operator registry.
#include <algorithm>

#include "frontend/onnx/contrib_ops.h"
#include "kiln/ops.h"
#include "op/registry.h"

namespace kiln {

std::vector<OpInfo> supported_ops() {
    std::vector<OpInfo> out;
    for (const op::OpDef* d : op::OpRegistry::global().all()) {
        OpInfo i;
        i.name = d->name;
        i.domain = d->domain.empty() ? "ai.onnx" : d->domain;
        i.onnx_versions = d->onnx_versions;
        i.runs_as = d->frame_control ? "frames"  // a control step of the frames executor
                    : d->compute && d->host ? "kernel + host" : d->compute ? "kernel" : d->host ? "host"
                    : "lowered";  // KilnSend/KilnRecv, the collectives: distributed runs lower them before compiling
        i.pattern = op::op_pattern_name(d->pattern);
        i.min_inputs = d->min_inputs;
        i.max_inputs = d->max_inputs;
        i.min_outputs = d->min_outputs;
        i.max_outputs = d->max_outputs;
        i.gradient = static_cast<bool>(d->gradient);
        out.push_back(std::move(i));
    }
    // ONNX Runtime's contrib ops, which the ONNX importer decomposes into the ops above.
    for (const frontend::ContribOpInfo& c : frontend::contrib_ops()) {
        OpInfo i;
        i.name = c.name;
        i.domain = c.domain;
        i.onnx_versions = {1};
        i.runs_as = "decomposed";
        i.pattern = "-";
        i.min_inputs = c.min_inputs;
        i.max_inputs = c.max_inputs;
        i.min_outputs = c.min_outputs;
        i.max_outputs = c.max_outputs;
        out.push_back(std::move(i));
    }
    std::stable_sort(out.begin(), out.end(), [](const OpInfo& a, const OpInfo& b) { return a.name < b.name; });
    return out;
}

}  // namespace kiln
