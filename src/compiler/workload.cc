#include "compiler/workload.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "ir/attr.h"

namespace kiln::compiler {
namespace {

/// The values of a constant of at most 4096 f32/f64/i32/i64 elements (scalars and small vectors a
/// kernel may have folded in), else none: weights are measured on random data.
std::vector<double> small_constant_values(const Tensor& t) {
    std::vector<double> v;
    if (t.numel() > 4096) return v;
    for (int64_t i = 0; i < t.numel(); ++i) {
        switch (t.dtype()) {
            case DType::kFloat32: v.push_back(t.data_as<float>()[i]); break;
            case DType::kFloat64: v.push_back(t.data_as<double>()[i]); break;
            case DType::kInt32: v.push_back(t.data_as<int32_t>()[i]); break;
            case DType::kInt64: v.push_back(static_cast<double>(t.data_as<int64_t>()[i])); break;
            default: return {};
        }
    }
    return v;
}

}  // namespace


std::string workload_text(const KernelUnit& unit) {
    std::ostringstream os;
    std::map<const ir::Value*, std::string> name;
    for (size_t i = 0; i < unit.inputs.size(); ++i) {
        const ir::Value* v = unit.inputs[i];
        name[v] = "%in" + std::to_string(i);
        os << name[v] << ":" << v->type().str() << (v->is_constant() ? " const" : "") << "\n";
    }
    for (size_t j = 0; j < unit.nodes.size(); ++j) {
        const ir::Node* n = unit.nodes[j];
        for (size_t o = 0; o < n->num_outputs(); ++o)
            if (n->output(o)) name[n->output(o)] = "%n" + std::to_string(j) + "." + std::to_string(o);
        os << n->op() << "(";
        for (size_t i = 0; i < n->num_inputs(); ++i) {
            const ir::Value* v = n->input(i);
            os << (i ? "," : "") << (v && name.count(v) ? name[v] : "-");
        }
        os << ")";
        for (const auto& [k, a] : n->attrs()) os << " " << k << "=" << ir::attr_str(a);
        os << "\n";
    }
    for (const ir::Value* v : unit.outputs) os << "out " << name[v] << ":" << v->type().str() << "\n";
    return os.str();
}

std::string workload_key(const KernelUnit& unit) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : workload_text(unit)) {
        h ^= c;
        h *= 1099511628211ull;
    }
    char buf[24];
    std::snprintf(buf, sizeof(buf), "w%016llx", static_cast<unsigned long long>(h));
    return buf;
}

std::string workload_description(const KernelUnit& unit) {
    std::string s = unit.ops();
    if (!unit.inputs.empty()) s += " " + unit.inputs[0]->type().str();
    if (!unit.outputs.empty()) s += " -> " + unit.outputs[0]->type().str();
    return s;
}

std::vector<tune::ArgSpec> workload_args(const KernelUnit& unit) {
    std::vector<tune::ArgSpec> args;
    for (const ir::Value* v : unit.inputs) {
        args.push_back({v->type().dtype, v->type().static_shape(), false, v->is_constant(), {}});
        if (v->is_constant()) args.back().values = small_constant_values(v->constant());
    }
    for (const ir::Value* v : unit.outputs) args.push_back({v->type().dtype, v->type().static_shape(), true, false, {}});
    return args;
}

}  // namespace kiln::compiler
