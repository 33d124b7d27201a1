#include "compiler/workload.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "ir/attr.h"

namespace kiln::compiler {

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

}  // namespace kiln::compiler
