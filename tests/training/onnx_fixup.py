"""PyTorch's training-mode ONNX export, made into the plain inference model Kiln trains.

torch.onnx.export in eval mode folds BatchNormalization into the preceding convolution (so there
is nothing left to train in training mode); in training mode it writes BatchNormalization with
training_mode=1 and the running statistics as extra outputs. Kiln's training graph turns an
inference BatchNormalization into a training one itself, so this drops the extra outputs and
the attribute: the model is the one a user would deploy, with BN's parameters intact.
"""
import onnx


def inference_batchnorm(src, dst):
    m = onnx.load(src)
    for node in m.graph.node:
        if node.op_type != "BatchNormalization":
            continue
        keep = [a for a in node.attribute if a.name != "training_mode"]
        del node.attribute[:]
        node.attribute.extend(keep)
        del node.output[1:]
    onnx.checker.check_model(m)
    onnx.save(m, dst)


def to_float64(src, dst):
    """The model with its float32 initializers, inputs and outputs made float64 (every op Kiln
    trains here is type-generic): the same computation without float32's rounding."""
    from onnx import TensorProto, numpy_helper
    m = onnx.load(src)
    for t in m.graph.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype("float64"), t.name))
    for node in m.graph.node:
        for a in node.attribute:
            if node.op_type == "Constant" and a.name == "value" and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype("float64"), a.t.name))
    for v in list(m.graph.input) + list(m.graph.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.DOUBLE
    onnx.save(m, dst)
