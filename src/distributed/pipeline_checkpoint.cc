// Pipeline-parallel checkpoints (pipeline_checkpoint.h).
#include "distributed/pipeline_checkpoint.h"

#include <optional>

#include <sstream>

#include "support/error.h"

namespace kiln::distributed {
namespace {

/// "W1,b1 | W2,b2" and its stage count, from stage_split_text's form.
std::string readable(const std::string& split, int& stages) {
    std::string out;
    stages = 1;
    for (char c : split) {
        if (c == '|') {
            out += " | ";
            ++stages;
        } else {
            out += c;
        }
    }
    return out;
}

}  // namespace

std::string checkpoint_param_name(const std::string& name) { return "param:" + name; }
std::string checkpoint_state_name(const std::string& state_name) { return "state:" + state_name; }

CheckpointLayout checkpoint_layout(const std::map<std::string, std::pair<DType, Shape>>& params,
                                   const autodiff::OptimizerSpec& optimizer) {
    CheckpointLayout layout;
    for (const auto& [name, type] : params) {
        layout[checkpoint_param_name(name)] = type;
        for (const std::string& slot : autodiff::optimizer_state_slots(optimizer))
            layout[checkpoint_state_name(autodiff::optimizer_state_name(name, slot))] = type;
    }
    return layout;
}

void check_checkpoint_tensors(const std::string& path, const compiler::Checkpoint& c, const CheckpointLayout& layout) {
    // A tensor of the file, read (c.tensors) or skipped (c.skipped: its type only).
    auto type_of = [&](const std::string& name) -> std::optional<std::pair<DType, Shape>> {
        if (auto it = c.tensors.find(name); it != c.tensors.end()) return std::pair{it->second.dtype(), it->second.shape()};
        if (auto it = c.skipped.find(name); it != c.skipped.end()) return it->second;
        return std::nullopt;
    };
    for (const auto& [name, type] : layout) {
        const std::optional<std::pair<DType, Shape>> t = type_of(name);
        KILN_CHECK(t.has_value(), kInvalidArgument)
            << "checkpoint '" << path << "' has no tensor '" << name
            << "' (written for another model, trainable set or optimizer?)";
        KILN_CHECK(*t == type, kInvalidArgument)
            << "checkpoint '" << path << "': tensor '" << name << "' is " << dtype_name(t->first) << shape_str(t->second)
            << ", this model's is " << dtype_name(type.first) << shape_str(type.second);
    }
    auto check_known = [&](const std::string& name) {
        KILN_CHECK(layout.count(name), kInvalidArgument)
            << "checkpoint '" << path << "' holds tensor '" << name
            << "' that this model and optimizer do not have (written for another model, trainable set or optimizer?)";
    };
    for (const auto& [name, t] : c.tensors) check_known(name);
    for (const auto& [name, t] : c.skipped) check_known(name);
}

std::string stage_split_text(const std::vector<std::vector<std::string>>& stage_params) {
    std::string out;
    for (size_t r = 0; r < stage_params.size(); ++r) {
        if (r > 0) out += '|';
        for (size_t i = 0; i < stage_params[r].size(); ++i) out += (i ? "," : "") + stage_params[r][i];
    }
    return out;
}

std::string split_difference(const std::map<std::string, std::string>& extra, const std::string& split,
                             int microbatches) {
    auto it = extra.find("pipeline_stages");
    if (it == extra.end()) return "it was written by one process (or data-parallel ranks), not a pipeline";
    auto m = extra.find("pipeline_microbatches");
    const std::string theirs_m = m == extra.end() ? "?" : m->second;
    if (it->second == split && theirs_m == std::to_string(microbatches)) return "";
    int theirs = 0, ours = 0;
    const std::string a = readable(it->second, theirs), b = readable(split, ours);
    std::ostringstream os;
    os << "it was written by " << theirs << " stages (" << a << ") in " << theirs_m << " microbatches; this run has "
       << ours << " stages (" << b << ") in " << microbatches;
    return os.str();
}

}  // namespace kiln::distributed
