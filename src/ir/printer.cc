// IR text printer. The grammar is documented in printer.h; parser.cc reads it back, and
// parse_graph(print_graph(g)) prints identically (full constant data unless elided).
#include "ir/printer.h"

#include "ir/text_format.h"

namespace kiln::ir {
namespace {
std::string input_ref(const Value* v) { return v ? value_ref(v->name()) : "_"; }

void print_node(std::string& out, const Node& n) {
    out += "  ";
    for (size_t i = 0; i < n.num_outputs(); ++i) {
        if (i) out += ", ";
        out += value_ref(n.output(i)->name());
    }
    if (n.num_outputs()) out += " = ";
    out += identifier_or_quoted(n.op());
    out += '(';
    for (size_t i = 0; i < n.num_inputs(); ++i) {
        if (i) out += ", ";
        out += input_ref(n.input(i));
    }
    out += ')';
    if (!n.attrs().empty()) {
        out += " {";
        bool first = true;
        for (const auto& [k, a] : n.attrs()) {
            if (!first) out += ", ";
            first = false;
            out += identifier_or_quoted(k) + "=" + attr_str(a);
        }
        out += '}';
    }
    for (size_t i = 0; i < n.num_outputs(); ++i) {
        out += i ? ", " : " : ";
        out += n.output(i)->type().str();
    }
    if (n.group() >= 0 || !n.name().empty()) out += " #";
    if (n.group() >= 0) out += " group=" + std::to_string(n.group());
    if (!n.name().empty()) out += " name=" + quote_string(n.name());
    out += '\n';
}
}  // namespace

std::string print_graph(const Graph& g, const PrintOptions& opts) {
    std::string out = "graph " + identifier_or_quoted(g.name) + "(";
    for (size_t i = 0; i < g.inputs().size(); ++i) {
        if (i) out += ", ";
        out += value_ref(g.inputs()[i]->name()) + ": " + g.inputs()[i]->type().str();
    }
    out += ") {\n";
    for (const Value* c : g.constants()) {
        const Tensor& t = c->constant();
        out += "  const " + value_ref(c->name()) + ": " +
               TensorType::of_static(t.dtype(), t.shape()).str() + " = ";
        if (opts.max_constant_elements >= 0 && t.numel() > opts.max_constant_elements)
            out += "<elided " + std::to_string(t.numel()) + " values>";
        else
            out += tensor_data_str(t);
        out += '\n';
    }
    for (const Node* n : g.nodes()) print_node(out, *n);
    out += "  return";
    for (size_t i = 0; i < g.outputs().size(); ++i) {
        out += i ? ", " : " ";
        out += input_ref(g.outputs()[i]);
    }
    out += "\n}\n";
    return out;
}

}  // namespace kiln::ir
