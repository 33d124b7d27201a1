"""The model repository the `kiln serve` tests run against, in Triton's layout
(DIR/<model>/1/model.onnx + config.pbtxt), and ONNX Runtime as the reference for every output.

Models (the ONNX ones built here with onnx.helper, deterministic weights):
  digits       the repo's models/digits/digits_cnn.onnx, no config.pbtxt (defaults)
  mlp          x FP32 [N,16] -> logits [N,4], probs [N,4]; dynamic batching (max 16, 20 ms)
  intbool      x INT64 [N,4], mask BOOL [N,4] -> y INT64, notmask BOOL
  strings      s BYTES [N,1] -> id INT64 (LabelEncoder), echo BYTES (Identity)
  slow         x FP32 [N,256,128] -> a chain of MatMul+Tanh; max_batch_size 1, one instance
  bounded      the slow model with max_queue_size 2 (overload)
  victim       the slow model again (unloaded while requests are queued)
  load         a shorter chain with dynamic batching and a queue limit (the load test)
"""
import pathlib
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
DIGITS = REPO_ROOT / "models" / "digits" / "digits_cnn.onnx"
OPSET = [helper.make_opsetid("", 17)]

# The slow chain's length; tests measure the resulting latency, never assume it.
SLOW_LAYERS = 48
LOAD_LAYERS = 6
ROWS = 256  # rows of the chain models' [N, ROWS, 128] input


def _save(model, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def mlp_model():
    rng = np.random.default_rng(1)
    w1 = numpy_helper.from_array((rng.standard_normal((16, 32)) * 0.3).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32) * 0.1, "b1")
    w2 = numpy_helper.from_array((rng.standard_normal((32, 4)) * 0.3).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"]),
             helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h"]),
             helper.make_node("MatMul", ["h", "w2"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=-1)]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 4])], [w1, b1, w2])
    return helper.make_model(graph, opset_imports=OPSET)


def intbool_model():
    three = numpy_helper.from_array(np.array(3, np.int64), "three")
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    nodes = [helper.make_node("Mul", ["x", "three"], ["x3"]),
             helper.make_node("Sub", ["x", "one"], ["xm1"]),
             helper.make_node("Where", ["mask", "x3", "xm1"], ["y"]),
             helper.make_node("Not", ["mask"], ["notmask"])]
    graph = helper.make_graph(
        nodes, "intbool",
        [helper.make_tensor_value_info("x", TensorProto.INT64, ["N", 4]),
         helper.make_tensor_value_info("mask", TensorProto.BOOL, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, ["N", 4]),
         helper.make_tensor_value_info("notmask", TensorProto.BOOL, ["N", 4])], [three, one])
    return helper.make_model(graph, opset_imports=OPSET)


STRING_KEYS = ["apple", "banana", "cherry"]


def strings_model():
    enc = helper.make_node("LabelEncoder", ["s"], ["id"], domain="ai.onnx.ml",
                           keys_strings=STRING_KEYS, values_int64s=[10, 20, 30],
                           default_int64=-1)
    graph = helper.make_graph(
        [enc, helper.make_node("Identity", ["s"], ["echo"])], "strings",
        [helper.make_tensor_value_info("s", TensorProto.STRING, ["N", 1])],
        [helper.make_tensor_value_info("id", TensorProto.INT64, ["N", 1]),
         helper.make_tensor_value_info("echo", TensorProto.STRING, ["N", 1])])
    return helper.make_model(graph, opset_imports=OPSET + [helper.make_opsetid("ai.onnx.ml", 2)])


def chain_model(layers, name):
    """y = tanh(...tanh(tanh(x @ W) @ W)...) on [N,ROWS,128]: slow, and not constant-foldable."""
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(
        (rng.standard_normal((128, 128)) * (0.9 / np.sqrt(128))).astype(np.float32), "w")
    nodes, cur = [], "x"
    for i in range(layers):
        nodes.append(helper.make_node("MatMul", [cur, "w"], [f"m{i}"]))
        nxt = "y" if i == layers - 1 else f"t{i}"
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [nxt]))
        cur = nxt
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", ROWS, 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", ROWS, 128])], [w])
    return helper.make_model(graph, opset_imports=OPSET)


CONFIGS = {
    "mlp": """
max_batch_size: 16
dynamic_batching { preferred_batch_size: [4, 8] max_queue_delay_microseconds: 20000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
""",
    "intbool": "max_batch_size: 8\n",
    "strings": "max_batch_size: 8\n",
    "slow": """
max_batch_size: 1
dynamic_batching { }
instance_group [ { count: 1 } ]
parameters { key: "priority" value { string_value: "best_effort" } }
""",
    "bounded": """
max_batch_size: 1
dynamic_batching { default_queue_policy { max_queue_size: 2 } }
instance_group [ { count: 1 } ]
""",
    "victim": """
max_batch_size: 1
dynamic_batching { }
instance_group [ { count: 1 } ]
""",
    "load": """
max_batch_size: 4
dynamic_batching { max_queue_delay_microseconds: 2000 default_queue_policy { max_queue_size: 16 } }
instance_group [ { count: 1 } ]
""",
}

BUILDERS = {
    "mlp": mlp_model, "intbool": intbool_model, "strings": strings_model,
    "slow": lambda: chain_model(SLOW_LAYERS, "slow"),
    "bounded": lambda: chain_model(SLOW_LAYERS, "bounded"),
    "victim": lambda: chain_model(SLOW_LAYERS, "victim"),
    "load": lambda: chain_model(LOAD_LAYERS, "load"),
}


def write_repository(root, names=None):
    """Writes the repository under `root` (every model, or `names`); returns `root`."""
    root = pathlib.Path(root)
    for name in names or ["digits", *BUILDERS]:
        version_dir = root / name / "1"
        if name == "digits":
            version_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy(DIGITS, version_dir / "model.onnx")
            continue
        _save(BUILDERS[name](), version_dir / "model.onnx")
        if name in CONFIGS:
            (root / name / "config.pbtxt").write_text(CONFIGS[name].lstrip())
    return root


class Reference:
    """ONNX Runtime sessions over the repository's model files: the expected outputs."""

    def __init__(self, root):
        import onnxruntime as ort
        self.root = pathlib.Path(root)
        self._ort = ort
        self._sessions = {}

    def run(self, model, inputs, outputs=None):
        if model not in self._sessions:
            opts = self._ort.SessionOptions()
            opts.intra_op_num_threads = 1
            self._sessions[model] = self._ort.InferenceSession(
                str(self.root / model / "1" / "model.onnx"), opts,
                providers=["CPUExecutionProvider"])
        sess = self._sessions[model]
        names = outputs or [o.name for o in sess.get_outputs()]
        feeds = {k: (v.astype(str) if v.dtype == object else v) for k, v in inputs.items()}
        return dict(zip(names, sess.run(names, feeds)))


def sample_inputs(model, rows=2, seed=0):
    """Deterministic inputs for `model` with `rows` batch rows."""
    rng = np.random.default_rng(seed)
    if model == "digits":
        return {"image": rng.random((rows, 1, 8, 8), dtype=np.float32) * 16}
    if model == "mlp":
        return {"x": rng.standard_normal((rows, 16)).astype(np.float32)}
    if model == "intbool":
        return {"x": rng.integers(-50, 50, (rows, 4)).astype(np.int64),
                "mask": rng.random((rows, 4)) < 0.5}
    if model == "strings":
        words = STRING_KEYS + ["durian"]
        return {"s": np.array([[words[(seed + i) % 4].encode()] for i in range(rows)],
                              dtype=object)}
    if model in ("slow", "bounded", "victim", "load"):
        return {"x": rng.standard_normal((rows, ROWS, 128)).astype(np.float32)}
    raise KeyError(model)


def assert_outputs_match(got, expected, model, rtol=1e-4, atol=1e-5):
    """Every expected output is in `got` and matches (exact for ints, bools, strings)."""
    for name, exp in expected.items():
        assert name in got, f"{model}: output '{name}' missing (got {sorted(got)})"
        g = got[name]
        assert list(g.shape) == list(exp.shape), f"{model}.{name}: shape {g.shape} != {exp.shape}"
        if exp.dtype == object or exp.dtype.kind in "SU":
            norm = lambda a: [x.decode() if isinstance(x, bytes) else str(x) for x in a.reshape(-1)]
            assert norm(g) == norm(exp), f"{model}.{name}: strings differ"
        elif exp.dtype.kind in "biu":
            assert g.dtype == exp.dtype, f"{model}.{name}: dtype {g.dtype} != {exp.dtype}"
            np.testing.assert_array_equal(g, exp, err_msg=f"{model}.{name}")
        else:
            assert g.dtype == exp.dtype, f"{model}.{name}: dtype {g.dtype} != {exp.dtype}"
            np.testing.assert_allclose(g, exp, rtol=rtol, atol=atol, err_msg=f"{model}.{name}")
