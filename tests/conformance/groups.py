"""Op groups of the ONNX backend node tests, for the per-group conformance table.

A test's group comes from the op types of its model's top-level nodes: each op maps to one
group (OP_GROUPS, anything unknown is "other"); a model with ops of several groups goes to the
one that comes first in GROUP_PRIORITY (a Loop holding a Conv is control flow; a Conv followed by
an Add is nn). An `_expanded` test (the op's ONNX function body inlined by the test generator) is
grouped by its stem test's ops (`test_x_expanded_ver18` -> `test_x`), so that it sits beside the
op it expands.

Tests whose expected output is random are put in RANDOM_GROUP, which the report counts for
neither runtime: a model with a random op (Bernoulli, RandomUniform[Like], RandomNormal[Like],
Multinomial), or a Dropout in training mode with a ratio above zero (training_mode and ratio
read from initializers, Constant nodes or the first data set's input files; opset < 7 Dropout
trains when is_test = 0). An `_expanded` test is random when its stem is.
"""
import glob
import os
import re

ELEMENTWISE = "elementwise"
REDUCTION = "reduction"
SHAPE = "shape/data movement"
NN = "nn"
QUANT = "quantization"
CONTROL = "control flow/sequence/optional"
TRAINING = "losses & training"
OTHER = "other"
RANDOM_GROUP = "random"

# Groups in table order; a multi-group model goes to the first of its groups in this order.
GROUP_PRIORITY = [CONTROL, TRAINING, QUANT, NN, REDUCTION, SHAPE, ELEMENTWISE, OTHER]
TABLE_GROUPS = [ELEMENTWISE, REDUCTION, SHAPE, NN, QUANT, CONTROL, TRAINING, OTHER]

RANDOM_OPS = {"Bernoulli", "RandomUniform", "RandomUniformLike", "RandomNormal",
              "RandomNormalLike", "Multinomial"}

_OPS = {
    ELEMENTWISE: """Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift BitwiseAnd BitwiseNot
        BitwiseOr BitwiseXor Cast CastLike Ceil Celu Clip Cos Cosh Div Elu Equal Erf Exp Floor
        Gelu Greater GreaterOrEqual HardSigmoid HardSwish Identity IsInf IsNaN LeakyRelu Less
        LessOrEqual Log Max Mean Min Mish Mod Mul Neg Not Or PRelu Pow Reciprocal Relu Round Selu
        Shrink Sigmoid Sign Sin Sinh Softplus Softsign Sqrt Sub Sum Swish Tan Tanh
        ThresholdedRelu Where Xor""",
    REDUCTION: """ArgMax ArgMin CumSum Hardmax LogSoftmax Softmax TopK ReduceL1 ReduceL2
        ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum
        ReduceSumSquare""",
    SHAPE: """CenterCropPad Compress Concat Constant ConstantOfShape DepthToSpace Expand EyeLike
        Flatten Gather GatherElements GatherND NonZero OneHot Pad Range Reshape Resize
        ReverseSequence Scatter ScatterElements ScatterND Shape Size Slice SpaceToDepth Split
        Squeeze TensorScatter Tile Transpose Trilu Unique Unsqueeze Upsample""",
    NN: """AffineGrid Attention AveragePool BatchNormalization BlackmanWindow Col2Im Conv
        ConvTranspose DFT DeformConv Det Dropout Einsum GRU Gemm GlobalAveragePool GlobalLpPool
        GlobalMaxPool GridSample GroupNormalization HammingWindow HannWindow
        InstanceNormalization LRN LSTM LayerNormalization LpNormalization LpPool MatMul
        MatMulInteger MaxPool MaxRoiPool MaxUnpool MeanVarianceNormalization MelWeightMatrix
        NonMaxSuppression RMSNormalization RNN RoiAlign RotaryEmbedding STFT""",
    QUANT: """ConvInteger DequantizeLinear DynamicQuantizeLinear QLinearConv QLinearMatMul
        QuantizeLinear""",
    CONTROL: """If Loop Scan ConcatFromSequence SequenceAt SequenceConstruct SequenceEmpty
        SequenceErase SequenceInsert SequenceLength SequenceMap SplitToSequence Optional
        OptionalGetElement OptionalHasElement""",
    TRAINING: """SoftmaxCrossEntropyLoss NegativeLogLikelihoodLoss Adam Adagrad Momentum
        Gradient""",
}
OP_GROUPS = {op: group for group, ops in _OPS.items() for op in ops.split()}

_EXPANDED = re.compile(r"_expanded(_ver\d+)?$")


def op_group(op_type):
    """The group of one op type ("other" for ops not in OP_GROUPS)."""
    return OP_GROUPS.get(op_type, OTHER)


def group_of_ops(op_types):
    """The group of a model whose top-level nodes have these op types (by GROUP_PRIORITY)."""
    groups = {op_group(op) for op in op_types if op != "Constant"} or {
        op_group(op) for op in op_types}
    for g in GROUP_PRIORITY:
        if g in groups:
            return g
    return OTHER


def expanded_stem(name):
    """`test_x_expanded` / `test_x_expanded_ver18` -> `test_x`; None for other names."""
    stem = _EXPANDED.sub("", name)
    return stem if stem != name else None


def _scalar(value):
    """The Python scalar held by a 0- or 1-element array, or None."""
    try:
        flat = value.reshape(-1)
        return flat[0].item() if flat.size == 1 else None
    except AttributeError:
        return None


def dropout_is_random(node, attrs, opset, known_values):
    """Whether a Dropout node drops at random: training mode with ratio > 0.

    `attrs` maps attribute names to values; `known_values` maps tensor names to arrays (from
    initializers, Constants and the test inputs); an unknown training_mode counts as training
    (we cannot tell, so we do not claim the output is deterministic) only when it is given.
    """
    if opset < 7:
        training = attrs.get("is_test", 0) == 0
        ratio = attrs.get("ratio", 0.5)
        return training and ratio > 0
    if opset < 12:
        return False  # opsets 7-11: Dropout is identity at inference, no training input
    inputs = list(node["inputs"])
    if len(inputs) < 3 or not inputs[2]:
        return False
    training = _scalar(known_values.get(inputs[2]))
    if training is None:
        training = True
    if not training:
        return False
    ratio = 0.5
    if len(inputs) >= 2 and inputs[1]:
        r = _scalar(known_values.get(inputs[1]))
        ratio = 0.5 if r is None else r
    return ratio > 0


def is_random(info):
    """Whether a test's expected output is random, from its ModelInfo-like dict
    (keys: ops, nodes [{op, inputs, attrs}], opset, values)."""
    if any(op in RANDOM_OPS for op in info["ops"]):
        return True
    return any(n["op"] == "Dropout" and
               dropout_is_random(n, n["attrs"], info["opset"], info["values"])
               for n in info["nodes"])


def classify(infos):
    """Map test name -> group for a dict of test name -> model info (see is_random); random
    tests get RANDOM_GROUP, `_expanded` tests their stem's group when the stem is present."""
    own = {name: (RANDOM_GROUP if is_random(info) else group_of_ops(info["ops"]))
           for name, info in infos.items()}
    out = {}
    for name, group in own.items():
        stem = expanded_stem(name)
        if stem in own and group != RANDOM_GROUP:
            group = own[stem]
        out[name] = group
    return out


# ---- reading the models -------------------------------------------------------------------

def _default_opset(model):
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return 0


def model_info(test_dir):
    """Op types, Dropout-relevant nodes and known scalar values of a test's model."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(os.path.join(test_dir, "model.onnx"))
    g = model.graph
    values = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    nodes = []
    for n in g.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute
                 if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.FLOAT)}
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value" and n.output:
                    values[n.output[0]] = numpy_helper.to_array(a.t)
        nodes.append({"op": n.op_type, "inputs": list(n.input), "attrs": attrs})
    if any(n["op"] == "Dropout" for n in nodes):
        # Dropout's ratio / training_mode often come as graph inputs: read data set 0.
        init = {t.name for t in g.initializer}
        names = [i.name for i in g.input if i.name not in init]
        files = sorted(glob.glob(os.path.join(test_dir, "test_data_set_0", "input_*.pb")),
                       key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))
        for name, path in zip(names, files):
            t = onnx.TensorProto()
            with open(path, "rb") as f:
                t.ParseFromString(f.read())
            try:
                arr = numpy_helper.to_array(t)
            except Exception:  # noqa: BLE001 - not a tensor: not a ratio/training flag
                continue
            if arr.size == 1:
                values[name] = arr
    return {"ops": [n["op"] for n in nodes], "nodes": nodes, "opset": _default_opset(model),
            "values": values}
