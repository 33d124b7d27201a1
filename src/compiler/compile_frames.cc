#include "compiler/compile_frames.h"

#include <map>
#include <string>
#include <utility>

#include "support/error.h"

namespace kiln::compiler {
namespace {

/// Each NextIteration must feed its Merge a value of the Merge's type.
void check_loop_carried_types(const ir::Graph& g) {
    std::map<std::pair<std::string, int64_t>, const ir::Node*> merges;
    for (const ir::Node* n : g.nodes())
        if (n->op() == "Merge" && n->num_inputs() == 1)
            merges[{n->attr_string("frame", ""), n->attr_int("slot", -1)}] = n;
    for (const ir::Node* n : g.nodes()) {
        if (n->op() != "NextIteration") continue;
        const std::string frame = n->attr_string("frame", "");
        auto it = merges.find({frame, n->attr_int("slot", -1)});
        KILN_CHECK(it != merges.end(), kInternal) << "bug in Kiln: " << n->describe() << " has no Merge";
        const ir::TensorType& want = it->second->output(0)->type();
        const ir::TensorType& got = n->input(0)->type();
        KILN_CHECK(want == got, kUnsupported)
            << "Loop '" << frame << "': loop-carried value " << n->attr_int("slot", -1) - 2 << " enters as "
            << want.str() << " but the body returns " << got.str()
            << "; control_flow=frames compiles the body for one shape (use the VM for shapes that change)";
    }
}

}  // namespace

CompiledModel compile_frames(ir::Graph& g, const CompileOptions& opts, const FramesLoweringOptions& lowering) {
    bind_input_shapes(g, opts.dims);  // the lowering then infers the bodies' types at these shapes
    lower_to_frames(g, lowering);
    CompiledModel m = compile(g, opts);
    check_loop_carried_types(g);
    return m;
}

}  // namespace kiln::compiler
