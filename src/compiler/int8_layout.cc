#include "compiler/int8_layout.h"

#include <array>
#include <set>

#include "runtime/extern_kernel.h"

namespace kiln::compiler {
namespace {

using Params = std::vector<std::pair<std::string, std::string>>;

/// The value argument `key` of an extern step names (arguments are the unit's inputs, then its
/// outputs), or nullptr.
const ir::Value* arg_value(const KernelUnit& u, const runtime::ExternParams& p, const char* key) {
    if (!p.has(key)) return nullptr;
    const int64_t i = p.integer(key), n = static_cast<int64_t>(u.inputs.size());
    if (i >= 0 && i < n) return u.inputs[static_cast<size_t>(i)];
    if (i >= n && i < n + static_cast<int64_t>(u.outputs.size())) return u.outputs[static_cast<size_t>(i - n)];
    return nullptr;
}

}  // namespace

void assign_int8_layouts(const ir::Graph& g, const std::vector<const KernelUnit*>& units,
                         const std::vector<LoweredKernel*>& kernels) {
    // Per value: is it read as some int8 step's layout-free operand, and by anything else?
    std::set<const ir::Value*> nhwc, other_use;
    std::vector<std::array<const ir::Value*, 3>> adds;  // kiln_qadd: a, b, y (y nullptr: float)
    for (size_t i = 0; i < units.size(); ++i) {
        const KernelUnit& u = *units[i];
        const LoweredKernel* k = kernels[i];
        const std::string name = k ? k->extern_name : "";
        std::set<const ir::Value*> layout_free;
        if (name == "dnnl_qconv" || name == "kiln_qmaxpool" || name == "kiln_qadd") {
            const runtime::ExternParams p(k->extern_params);
            if (name != "kiln_qadd") {  // a conv or max pool reads x and writes y in either layout
                layout_free.insert(arg_value(u, p, "x"));
                nhwc.insert(arg_value(u, p, "y"));
                if (p.has("sum")) {  // a conv's fused residual: in y's layout, as an add's operand
                    adds.push_back({arg_value(u, p, "sum"), arg_value(u, p, "y"), nullptr});
                    layout_free.insert(adds.back()[0]);
                }
            } else {
                const bool q8 = p.str("out") == "q8";
                adds.push_back({arg_value(u, p, "a"), arg_value(u, p, "b"), q8 ? arg_value(u, p, "y") : nullptr});
                layout_free.insert(adds.back()[0]);
                layout_free.insert(adds.back()[1]);
                if (q8) nhwc.insert(adds.back()[2]);
            }
        }
        for (const ir::Value* v : u.inputs)
            if (!layout_free.count(v)) other_use.insert(v);
    }
    for (const ir::Value* v : g.outputs()) other_use.insert(v);
    // A node of no lowered unit reads its input in Kiln's NCHW too: a view (Flatten, Reshape:
    // its output aliases the buffer, and whatever reads the view expects NCHW order), as the
    // digits CNN's last pool feeds its classifier through a Flatten.
    std::set<const ir::Node*> lowered;
    for (const KernelUnit* u : units)
        for (const ir::Node* n : u->nodes) lowered.insert(n);
    for (const ir::Value* v : nhwc)
        if (v)
            for (const ir::Node* user : v->users())
                if (!lowered.count(user)) other_use.insert(v);
    for (const ir::Value* v : other_use) nhwc.erase(v);
    nhwc.erase(nullptr);
    for (auto it = nhwc.begin(); it != nhwc.end();)  // 2-D convolutions' activations only
        it = (*it)->type().rank() == 4 ? std::next(it) : nhwc.erase(it);
    // An add's operands and 8-bit result share one layout: drop all three where one is not NHWC.
    // An add with a float result (what a float op after the int8 part reads: ResNet's last block
    // feeding its average pool) writes NCHW whatever its operands' layout (ab_layout=nhwc: the
    // kernel transposes), so only its two operands must agree.
    for (bool changed = true; changed;) {
        changed = false;
        for (const auto& add : adds) {
            const bool all = nhwc.count(add[0]) && nhwc.count(add[1]) && (!add[2] || nhwc.count(add[2]));
            if (all) continue;
            for (const ir::Value* v : add) changed |= v && nhwc.erase(v) > 0;
        }
    }
    for (size_t i = 0; i < units.size(); ++i) {
        LoweredKernel* k = kernels[i];
        if (k && k->extern_name == "kiln_qadd") {
            const runtime::ExternParams p(k->extern_params);
            const ir::Value* a = arg_value(*units[i], p, "a");
            if (p.str("out") != "f32" || !nhwc.count(a)) continue;
            const Shape s = a->type().static_shape();
            k->extern_params += ";ab_layout=nhwc;shape=" + std::to_string(s[0]) + "," + std::to_string(s[1]) + "," +
                                std::to_string(s[2]) + "," + std::to_string(s[3]);
            continue;
        }
        if (!k || (k->extern_name != "dnnl_qconv" && k->extern_name != "kiln_qmaxpool")) continue;
        const runtime::ExternParams p(k->extern_params);
        const bool x = nhwc.count(arg_value(*units[i], p, "x")) > 0, y = nhwc.count(arg_value(*units[i], p, "y")) > 0;
        if (x) k->extern_params += ";x_layout=nhwc";
        if (y) k->extern_params += ";y_layout=nhwc";
    }
}

}  // namespace kiln::compiler
