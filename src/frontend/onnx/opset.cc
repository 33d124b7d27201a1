// Opset version selection: ONNX versions an op by "since-version"; a model at opset N uses the
// newest since-version <= N (an op unchanged since then keeps its semantics at N, even when N is
// newer than any opset Kiln knows).
#include "frontend/onnx/opset.h"

#include <sstream>

#include "support/error.h"

namespace kiln::frontend {

int select_since_version(const op::OpDef& def, int opset) {
    int selected = -1;
    for (int v : def.onnx_versions)
        if (v <= opset && v > selected) selected = v;
    if (selected < 0) {
        std::ostringstream vs;
        for (size_t i = 0; i < def.onnx_versions.size(); ++i) vs << (i ? ", " : "") << def.onnx_versions[i];
        KILN_THROW(kUnsupported) << "op '" << def.name << "' opset " << opset
                                 << " not supported (Kiln implements versions " << vs.str() << ")";
    }
    return selected;
}

}  // namespace kiln::frontend
