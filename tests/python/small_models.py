"""Small ONNX models for the Python API tests, built with onnx.helper, with numpy references."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _model(graph, opset=OPSET, **fields):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **fields)
    m.ir_version = 8  # what ONNX Runtime releases since 1.14 read
    return m


def mlp(rng, features=16, hidden=32, classes=4):
    """x[batch, features] -> Gemm+Relu -> Gemm -> logits; probs = Softmax(logits); label = ArgMax.
    The batch dimension is the symbol 'batch'. Returns (ModelProto, numpy reference function)."""
    w1 = (rng.standard_normal((features, hidden)) / np.sqrt(features)).astype(np.float32)
    b1 = (rng.standard_normal(hidden) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((hidden, classes)) / np.sqrt(hidden)).astype(np.float32)
    b2 = (rng.standard_normal(classes) * 0.1).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h0"]),
            helper.make_node("Add", ["h0", "b1"], ["h1"]),
            helper.make_node("Relu", ["h1"], ["h"]),
            helper.make_node("MatMul", ["h", "w2"], ["l0"]),
            helper.make_node("Add", ["l0", "b2"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
            helper.make_node("ArgMax", ["logits"], ["label"], axis=-1, keepdims=0),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", features])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", classes]),
         helper.make_tensor_value_info("label", TensorProto.INT64, ["batch"])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2")],
        doc_string="a two-layer perceptron",
    )
    model = _model(graph, producer_name="kiln-tests", producer_version="1.0", domain="ai.kiln.test",
                   model_version=7, doc_string="MLP of the Python API tests")
    helper.set_model_props(model, {"author": "tests/python", "purpose": "parity"})

    def reference(x):
        logits = np.maximum(x @ w1 + b1, 0) @ w2 + b2
        e = np.exp(logits - logits.max(-1, keepdims=True))
        return {"logits": logits, "probs": e / e.sum(-1, keepdims=True), "label": logits.argmax(-1)}
    return model, reference


def matmul_chain(rng, layers=300, width=256, batch=64):
    """x[batch, width] through `layers` x (MatMul by one shared weight, Tanh): a model whose run
    takes long enough (a good fraction of a second) to be stopped midway by RunOptions.terminate."""
    w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
    nodes, prev = [], "x"
    for i in range(layers):
        nodes.append(helper.make_node("MatMul", [prev, "w"], [f"m{i}"]))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}"]))
        prev = f"t{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    graph = helper.make_graph(
        nodes, "matmul_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, width])],
        [numpy_helper.from_array(w, "w")])
    return _model(graph)


def strings_and_sequences():
    """Runs in Kiln's graph interpreter: text[n] (strings) -> tagged = StringConcat(text, "_k");
    seq = SequenceConstruct(a, b); n = SequenceLength(seq); back = SequenceAt(seq, 1)."""
    graph = helper.make_graph(
        [
            helper.make_node("StringConcat", ["text", "suffix"], ["tagged"]),
            helper.make_node("SequenceConstruct", ["a", "b"], ["seq"]),
            helper.make_node("SequenceLength", ["seq"], ["n"]),
            helper.make_node("SequenceAt", ["seq", "one"], ["back"]),
        ],
        "strings_and_sequences",
        [helper.make_tensor_value_info("text", TensorProto.STRING, ["n_text"]),
         helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("tagged", TensorProto.STRING, ["n_text"]),
         helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("n", TensorProto.INT64, []),
         helper.make_tensor_value_info("back", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.array(1, np.int64), "one"),
         helper.make_tensor("suffix", TensorProto.STRING, [], [b"_k"])])
    return _model(graph, opset=20)


def sequence_input():
    """A sequence input and an optional input: total = ConcatFromSequence(seq, axis=0);
    has = OptionalHasElement(opt)."""
    opt_type = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [3]))
    graph = helper.make_graph(
        [
            helper.make_node("ConcatFromSequence", ["seq"], ["total"], axis=0),
            helper.make_node("OptionalHasElement", ["opt"], ["has"]),
        ],
        "sequence_input",
        [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, [None, 3]),
         helper.make_value_info("opt", opt_type)],
        [helper.make_tensor_value_info("total", TensorProto.FLOAT, [None, 3]),
         helper.make_tensor_value_info("has", TensorProto.BOOL, [])])
    return _model(graph, opset=18)
