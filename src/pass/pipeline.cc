// The pass pipeline (STYLE rule 2: the -O levels are this one list).
//
//   -O0  infer-shapes only: every node is its own kernel (the reference for -O3).
//   -O1  + simplify, constant folding, dead code: less work, same kernels.
//   -O2  + BatchNorm/scale folding, CSE, fusion: fewer kernels.
//   -O3  (default) + layout transformation: convolutions in the blocked NCHW{c} layout.
//
// Order matters where noted.
#include "pass/pipeline.h"

#include "pass/eliminate_common_subexpressions.h"
#include "pass/eliminate_dead_code.h"
#include "pass/fold_batch_norm.h"
#include "pass/fold_constants.h"
#include "pass/fuse_operators.h"
#include "pass/fuse_long_attention.h"
#include "pass/fuse_qdq.h"
#include "pass/infer_shapes.h"
#include "pass/lift_conv_1d.h"
#include "pass/pack_matmul_weights.h"
#include "pass/polyphase_conv_transpose.h"
#include "pass/lower_einsum.h"
#include "pass/simplify_algebra.h"
#include "pass/transform_layout.h"
#include "support/error.h"

namespace kiln::pass {

const std::vector<Pass>& all_passes() {
    static const std::vector<Pass> passes = {
        // Static types and constant shape operands first: every later pass relies on them.
        {"infer-shapes", 0, "re-infer types; evaluate Shape/Size and shape arithmetic", infer_shapes},
        // Before fold-constants, which would fold DequantizeLinear(W_q) into float weights.
        {"fuse-qdq", 1, "DQ -> Conv / MatMul -> Q sandwiches -> QLinearConv / QLinearMatMul (int8)", fuse_qdq},
        // Before simplify-algebra, which merges the transposes and reshapes it adds.
        {"lower-einsum", 1, "two-input Einsums that are matrix products -> MatMul", lower_einsum},
        // Before folding: reassociation leaves constant-only nodes for fold-constants.
        {"simplify-algebra", 1, "identities, transpose/reshape chains, constant reassociation", simplify_algebra},
        {"fold-constants", 1, "evaluate nodes whose inputs are all constants", fold_constants},
        // Writes the new weights as constant-only nodes: fold again right after.
        {"fold-batch-norm", 2, "fold BatchNormalization and per-channel Mul/Add into Conv", fold_batch_norm},
        {"fold-constants", 2, "evaluate the folded weights", fold_constants},
        {"eliminate-common-subexpressions", 2, "merge equal constants and equal nodes", eliminate_common_subexpressions},
        {"eliminate-dead-code", 1, "drop unused nodes and constants", eliminate_dead_code},
        // After BN folding (the blocked conv takes the folded weights); its weight repacking is
        // constant-only nodes, evaluated right after, and the unpacked weights then die.
        // Before transform-layout, which then blocks the lifted convs as 2-D ones.
        {"fuse-long-attention", 3, "MatMul -> scale -> Softmax -> MatMul over 512+ keys -> KilnBlockedAttention",
         fuse_long_attention},
        {"polyphase-conv-transpose", 3, "ConvTranspose with kernel a multiple of its stride -> Conv + pixel shuffle",
         polyphase_conv_transpose},
        {"lift-conv-1d", 3, "1-D convs as 2-D over a unit height, their elementwise ops lifted too", lift_conv_1d},
        {"transform-layout", 3, "blocked NCHWc convolutions, layout transforms hoisted", transform_layout},
        // Before the fold below, which evaluates the packing (constant B -> [N/nb, K, nb]).
        {"pack-matmul-weights", 3, "MatMul/Gemm with constant B read a packed B", pack_matmul_weights},
        {"fold-constants", 3, "pre-pack the blocked weights", fold_constants},
        {"eliminate-dead-code", 3, "drop the unpacked weights", eliminate_dead_code},
        // Types may have changed under rewrites; fusion reads final types.
        {"infer-shapes", 1, "re-infer types after the rewrites", infer_shapes},
        // Last: groups refer to the final nodes.
        {"fuse-operators", 2, "fusion groups on the post-dominator tree (one kernel each)", fuse_operators},
    };
    return passes;
}

std::vector<Pass> passes_for_level(int opt_level) {
    KILN_CHECK(opt_level >= 0 && opt_level <= kMaxOptLevel, kInvalidArgument)
        << "optimization level must be 0.." << kMaxOptLevel << ", got " << opt_level;
    std::vector<Pass> out;
    for (const Pass& p : all_passes())
        if (p.level <= opt_level) out.push_back(p);
    return out;
}

}  // namespace kiln::pass
