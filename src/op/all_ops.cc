// OpRegistry::global(): the explicit list of op families Kiln ships (no static initializers).
#include "op/registry.h"

namespace kiln::op {

const OpRegistry& OpRegistry::global() {
    static const OpRegistry registry = [] {
        OpRegistry r;
        // keep-sorted
        register_conv_ops(r);
        register_elementwise_ops(r);
        register_gather_ops(r);
        register_matmul_ops(r);
        register_nn_ops(r);
        register_norm_ops(r);
        register_pool_ops(r);
        register_shape_ops(r);
        return r;
    }();
    return registry;
}

}  // namespace kiln::op
