// Before/after tests of passes, in the IR text form (the FileCheck habit): parse a graph, run a
// pass, verify, and compare with the expected text. Both sides are compared in a canonical
// form that renames intermediate values and constants by order of definition/first use, so a
// test states structure (ops, attributes, types, constant data, groups), not fresh names.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "compiler/compile.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "pass/pass.h"
#include "pass/verify_typed.h"
#include "support/error.h"

namespace kiln::pass::testing {

/// Canonical text: inputs and graph outputs keep their names; node results become %v0, %v1, ...
/// and constants %c0, %c1, ... in order of first use; constants are listed after the nodes.
inline std::string canonical(const ir::Graph& g) {
    std::map<const ir::Value*, std::string> name;
    std::vector<const ir::Value*> consts;
    for (const ir::Value* v : g.inputs()) name[v] = v->name();
    for (const ir::Value* v : g.outputs()) name[v] = v->name();
    int nv = 0;
    auto ref = [&](const ir::Value* v) -> std::string {
        if (!v) return "_";
        auto it = name.find(v);
        if (it != name.end()) return "%" + it->second;
        if (v->is_constant()) {
            consts.push_back(v);
            return "%" + (name[v] = "c" + std::to_string(consts.size() - 1));
        }
        return "%" + (name[v] = "v" + std::to_string(nv++));
    };
    std::string out;
    for (const ir::Node* n : g.nodes()) {
        std::string outs;
        for (const ir::Value* o : n->outputs()) outs += (outs.empty() ? "" : ", ") + ref(o);
        std::string line = outs + " = " + n->op() + "(";
        for (size_t i = 0; i < n->num_inputs(); ++i) line += (i ? ", " : "") + ref(n->input(i));
        line += ")";
        if (!n->attrs().empty()) {
            line += " {";
            bool first = true;
            for (const auto& [k, a] : n->attrs()) {
                line += (first ? "" : ", ") + k + "=" + ir::attr_str(a);
                first = false;
            }
            line += "}";
        }
        for (size_t i = 0; i < n->num_outputs(); ++i) line += (i ? ", " : " : ") + n->output(i)->type().str();
        if (n->group() >= 0) line += " group=" + std::to_string(n->group());
        out += line + "\n";
    }
    std::string outs_line = "return";
    for (const ir::Value* v : g.outputs()) outs_line += " " + ref(v);
    out += outs_line + "\n";
    for (const ir::Value* c : consts)
        out += "%" + name[c] + " : " + c->type().str() + " = " + ir::tensor_data_str(c->constant()) + "\n";
    return out;
}

inline std::string canonical_text(const std::string& text) { return canonical(ir::parse_graph(text)); }

/// Parses `before`, runs `pass` (with the compiler's evaluator), verifies, returns canonical text.
template <typename PassFn>
std::string run_pass(const std::string& before, PassFn pass) {
    ir::Graph g = ir::parse_graph(before);
    ir::verify_graph(g);  // structure only: input types may be provisional (infer_shapes tests)
    pass(g, compiler::pass_context());
    verify_typed_graph(g);
    return canonical(g);
}

#define EXPECT_PASS_GIVES(PASS_FN, BEFORE, AFTER) \
    EXPECT_EQ(::kiln::pass::testing::run_pass(BEFORE, PASS_FN), ::kiln::pass::testing::canonical_text(AFTER))

}  // namespace kiln::pass::testing
