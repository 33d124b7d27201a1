// The operator registry: an explicit list (op/all_ops.cc), no static initializers.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "op/op_def.h"

namespace kiln::op {

class OpRegistry {
public:
    /// The registry with every op Kiln ships.
    static const OpRegistry& global();

    void add(OpDef def);  // throws kInternal on a duplicate name
    /// nullptr if unknown.
    const OpDef* find(const std::string& name) const;
    std::vector<const OpDef*> all() const;  // sorted by name

private:
    std::map<std::string, OpDef> ops_;
};

// One function per family (op/defs/<family>.cc), called from all_ops.cc.
void register_elementwise_ops(OpRegistry& r);
void register_unary_math_ops(OpRegistry& r);     // Floor, Sin, Elu, IsNaN, Not, ...
void register_compare_logic_ops(OpRegistry& r);  // Equal, Less, And, Bitwise*, Mod, Where
void register_variadic_ops(OpRegistry& r);       // Max, Min, Sum, Mean
void register_cast_ops(OpRegistry& r);           // Cast, CastLike
void register_nn_ops(OpRegistry& r);    // BatchNormalization
void register_conv_ops(OpRegistry& r);  // Conv
void register_conv_grad_ops(OpRegistry& r);  // KilnConvGradData, KilnConvGradWeight
void register_pool_grad_ops(OpRegistry& r);  // KilnMaxPoolGrad
void register_batch_norm_grad_ops(OpRegistry& r);  // KilnBatchNormGrad
void register_conv_nchwc_ops(OpRegistry& r);  // KilnConv2dNCHWc, KilnLayoutToBlocked/FromBlocked
void register_blocked_ops(OpRegistry& r);  // KilnDepthwiseConv2dNCHWc, Kiln*PoolNCHWc
void register_pool_ops(OpRegistry& r);  // MaxPool, AveragePool, LpPool, Global*Pool
void register_matmul_ops(OpRegistry& r);  // MatMul, Gemm
void register_shape_ops(OpRegistry& r);
void register_norm_ops(OpRegistry& r);    // LayerNormalization
void register_gather_ops(OpRegistry& r);  // Gather
void register_reduce_ops(OpRegistry& r);   // Reduce*, ArgMax, ArgMin
void register_softmax_ops(OpRegistry& r);  // Softmax, LogSoftmax, Hardmax
void register_scan_ops(OpRegistry& r);     // CumSum, TopK
void register_norm_extra_ops(OpRegistry& r);  // Instance/Group/LpNormalization, MVN, LRN
void register_conv_transpose_ops(OpRegistry& r);  // ConvTranspose
void register_movement_ops(OpRegistry& r);   // Expand, Tile, DepthToSpace, SpaceToDepth, Trilu, ReverseSequence, Dropout
void register_slice_pad_ops(OpRegistry& r);  // Slice, Split, Pad, Compress, CenterCropPad
void register_index_ops(OpRegistry& r);      // GatherElements, GatherND, Scatter*, ScatterND, OneHot
void register_generator_ops(OpRegistry& r);  // Range, ConstantOfShape, EyeLike
void register_resize_ops(OpRegistry& r);       // Resize
void register_grid_sample_ops(OpRegistry& r);  // GridSample
void register_max_unpool_ops(OpRegistry& r);   // MaxUnpool
void register_deform_conv_ops(OpRegistry& r);  // DeformConv
void register_attention_ops(OpRegistry& r);  // Attention, RotaryEmbedding
void register_blocked_attention_ops(OpRegistry& r);  // KilnBlockedAttention
void register_rms_norm_ops(OpRegistry& r);   // RMSNormalization
void register_loss_ops(OpRegistry& r);       // NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void register_recurrent_ops(OpRegistry& r);  // RNN, GRU, LSTM
void register_window_ops(OpRegistry& r);      // Hann/Hamming/BlackmanWindow, MelWeightMatrix
void register_dft_ops(OpRegistry& r);         // DFT, STFT
void register_roi_align_ops(OpRegistry& r);   // RoiAlign
void register_affine_grid_ops(OpRegistry& r);  // AffineGrid
void register_col2im_ops(OpRegistry& r);       // Col2Im
void register_einsum_ops(OpRegistry& r);       // Einsum
void register_det_ops(OpRegistry& r);          // Det
void register_tensor_scatter_ops(OpRegistry& r);  // TensorScatter
void register_quantize_ops(OpRegistry& r);  // Quantize/DequantizeLinear, QLinear*, *Integer
void register_sequence_ops(OpRegistry& r);  // SequenceConstruct/Empty/At/Insert/Erase/Length, SplitToSequence, ConcatFromSequence (host)
void register_optional_ops(OpRegistry& r);  // Optional, OptionalHasElement, OptionalGetElement (host)
void register_control_flow_ops(OpRegistry& r);  // If, Loop, Scan, SequenceMap (host)
void register_tf_control_flow_ops(OpRegistry& r);  // Switch, Merge, Enter, Exit, NextIteration (frames executor)
void register_string_ops(OpRegistry& r);  // StringConcat, StringSplit, RegexFullMatch, StringNormalizer (host)
void register_tfidf_vectorizer_ops(OpRegistry& r);  // TfIdfVectorizer (host)
void register_ml_label_encoder_ops(OpRegistry& r);  // ai.onnx.ml LabelEncoder (host)
void register_nonzero_unique_ops(OpRegistry& r);       // NonZero, Unique (host)
void register_non_max_suppression_ops(OpRegistry& r);  // NonMaxSuppression (host)
void register_ml_ops(OpRegistry& r);                   // ai.onnx.ml ArrayFeatureExtractor, Binarizer, Scaler, Normalizer, Imputer, CategoryMapper (host)
void register_ml_tree_ensemble_ops(OpRegistry& r);     // ai.onnx.ml TreeEnsemble (host)
void register_ml_tree_classic_ops(OpRegistry& r);      // ai.onnx.ml TreeEnsembleRegressor/Classifier (host)
void register_ml_linear_ops(OpRegistry& r);            // ai.onnx.ml LinearRegressor/Classifier (host)
void register_training_ops(OpRegistry& r);  // ai.onnx.preview.training Adagrad, Adam, Momentum
void register_collective_ops(OpRegistry& r);  // AllReduce, Broadcast, AllGather, ReduceScatter (ai.kiln.distributed)
void register_transfer_ops(OpRegistry& r);  // KilnSend, KilnRecv (distributed/partition.h)

/// Validates a node against its OpDef: arity (max_inputs < 0: unbounded), attribute kinds, required attributes. Throws
/// kiln::Error naming the node. Fills in defaults for missing attributes that have one.
void check_node(ir::Node& n, const OpDef& def);

/// Runs def.infer and sets the node's output types.
void infer_node(ir::Node& n);

}  // namespace kiln::op
