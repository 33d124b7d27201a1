#include "compiler/index_checks.h"

#include <algorithm>
#include <optional>
#include <string>

namespace kiln::compiler {
namespace {

/// The index input of `n` and what it addresses: the data input's axis.
struct IndexInput {
    size_t slot = 1;
    size_t data = 0;
    int64_t axis = 0;
    bool negative_from_end = true;
    std::optional<int64_t> ignore;
    const char* what = "indices";
};

std::optional<IndexInput> index_input(const ir::Node& n) {
    const std::string& op = n.op();
    IndexInput in;
    if (op == "GatherND") {
        in.axis = n.attr_int("batch_dims", 0);  // the first of the axes the last index axis addresses
    } else if (op == "Gather" || op == "GatherElements" || op == "ScatterElements") {
        in.axis = n.attr_int("axis", 0);
    } else if (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss") {
        in.axis = 1;  // the classes
        in.negative_from_end = false;
        if (n.has_attr("ignore_index")) in.ignore = n.attr_int("ignore_index", 0);
        in.what = "target";
    } else {
        return std::nullopt;
    }
    if (n.num_inputs() <= in.slot || !n.input(in.slot) || !n.input(in.data)) return std::nullopt;
    const int64_t rank = static_cast<int64_t>(n.input(in.data)->type().shape.size());
    if (in.axis < 0) in.axis += rank;
    if (in.axis < 0 || in.axis >= rank) return std::nullopt;  // shape inference refused it already
    return in;
}

/// Position of `v` among the unit's inputs (its step's leading args), or -1.
int arg_of(const KernelUnit& unit, const ir::Value* v) {
    auto it = std::find(unit.inputs.begin(), unit.inputs.end(), v);
    return it == unit.inputs.end() ? -1 : static_cast<int>(it - unit.inputs.begin());
}

/// The extent of `data`'s `axis` for `c`: static, or the dim of a symbolic axis when the data is
/// an input of the unit (its buffer names the dim); false when neither is known.
bool set_extent(runtime::IndexCheck& c, const runtime::Executable& exe, const KernelUnit& unit, const ir::Value& data,
                int64_t axis) {
    const std::vector<ir::Dim>& shape = data.type().shape;
    if (axis < 0 || static_cast<size_t>(axis) >= shape.size()) return false;
    if (shape[static_cast<size_t>(axis)].is_static()) {
        c.extent = shape[static_cast<size_t>(axis)].value;
        return true;
    }
    const int data_arg = arg_of(unit, &data);
    if (data_arg < 0) return false;
    const runtime::BufferDesc& b = exe.buffers.at(static_cast<size_t>(exe.steps.at(static_cast<size_t>(c.step)).args.at(static_cast<size_t>(data_arg))));
    if (static_cast<size_t>(axis) >= b.dim_of.size() || b.dim_of[static_cast<size_t>(axis)] < 0) return false;
    c.extent_dim = b.dim_of[static_cast<size_t>(axis)];
    return true;
}

}  // namespace

std::vector<runtime::IndexCheck> index_checks(const runtime::Executable& exe, const std::vector<const KernelUnit*>& units) {
    std::vector<runtime::IndexCheck> out;
    for (size_t s = 0; s < units.size() && s < exe.steps.size(); ++s) {
        for (const ir::Node* n : units[s]->nodes) {
            std::optional<IndexInput> in = index_input(*n);
            if (!in) continue;
            const ir::Value* idx = n->input(in->slot);
            const int arg = arg_of(*units[s], idx);
            const DType t = idx->type().dtype;
            if (idx->is_constant() || arg < 0 || (t != DType::kInt32 && t != DType::kInt64)) continue;
            // GatherND: the indices' last axis holds one index per data axis from batch_dims on.
            const std::vector<ir::Dim>& is = idx->type().shape;
            int period = 1;
            if (n->op() == "GatherND") {
                if (is.empty() || !is.back().is_static()) continue;
                period = static_cast<int>(is.back().value);
            }
            for (int phase = 0; phase < period; ++phase) {
                runtime::IndexCheck c;
                c.step = static_cast<int>(s);
                c.arg = arg;
                c.period = period;
                c.phase = phase;
                if (!set_extent(c, exe, *units[s], *n->input(in->data), in->axis + phase)) continue;
                c.negative_from_end = in->negative_from_end;
                c.has_ignore = in->ignore.has_value();
                c.ignore = in->ignore.value_or(0);
                c.node = n->describe();
                c.what = in->what;
                out.push_back(std::move(c));
            }
        }
    }
    return out;
}

}  // namespace kiln::compiler
