// OpRegistry::global(): the explicit list of op families Kiln ships (no static initializers).
#include "op/registry.h"

namespace kiln::op {

const OpRegistry& OpRegistry::global() {
    static const OpRegistry registry = [] {
        OpRegistry r;
        // keep-sorted
        register_attention_ops(r);
        register_blocked_attention_ops(r);
        register_affine_grid_ops(r);
        register_blocked_ops(r);
        register_cast_ops(r);
        register_col2im_ops(r);
        register_collective_ops(r);
        register_compare_logic_ops(r);
        register_control_flow_ops(r);
        register_conv_ops(r);
        register_conv_grad_ops(r);
        register_pool_grad_ops(r);
        register_batch_norm_grad_ops(r);
        register_conv_nchwc_ops(r);
        register_conv_transpose_ops(r);
        register_det_ops(r);
        register_deform_conv_ops(r);
        register_dft_ops(r);
        register_einsum_ops(r);
        register_elementwise_ops(r);
        register_gather_ops(r);
        register_generator_ops(r);
        register_grid_sample_ops(r);
        register_max_unpool_ops(r);
        register_index_ops(r);
        register_loss_ops(r);
        register_matmul_ops(r);
        register_ml_label_encoder_ops(r);
        register_ml_linear_ops(r);
        register_ml_ops(r);
        register_ml_tree_classic_ops(r);
        register_ml_tree_ensemble_ops(r);
        register_movement_ops(r);
        register_nn_ops(r);
        register_non_max_suppression_ops(r);
        register_nonzero_unique_ops(r);
        register_norm_extra_ops(r);
        register_norm_ops(r);
        register_optional_ops(r);
        register_pool_ops(r);
        register_quantize_ops(r);
        register_recurrent_ops(r);
        register_reduce_ops(r);
        register_resize_ops(r);
        register_rms_norm_ops(r);
        register_roi_align_ops(r);
        register_scan_ops(r);
        register_sequence_ops(r);
        register_shape_ops(r);
        register_slice_pad_ops(r);
        register_softmax_ops(r);
        register_string_ops(r);
        register_tensor_scatter_ops(r);
        register_tf_control_flow_ops(r);
        register_tfidf_vectorizer_ops(r);
        register_training_ops(r);
        register_transfer_ops(r);
        register_unary_math_ops(r);
        register_variadic_ops(r);
        register_window_ops(r);
        return r;
    }();
    return registry;
}

}  // namespace kiln::op
