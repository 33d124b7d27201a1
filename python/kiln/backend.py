"""ONNX's backend API (onnx.backend.base.Backend) on Kiln, so ONNX's own backend test suite and
tools written against that API run on Kiln:

    import kiln.backend
    outputs = kiln.backend.run_model(model, [x])           # a ModelProto, its bytes, or a path
    rep = kiln.backend.prepare(model); rep.run([x]); rep.run([y])
    outputs = kiln.backend.run_node(node, [a, b])          # one NodeProto as a one-node model

    import onnx.backend.test
    globals().update(onnx.backend.test.BackendTest(kiln.backend, __name__).test_cases)

Keyword arguments of prepare/run_model set kiln.SessionOptions attributes by ONNX Runtime's names
(intra_op_num_threads, inter_op_num_threads, graph_optimization_level, execution_mode); rtol and
atol (which ONNX's test runner passes along) are ignored. Kiln runs on the CPU only.
"""
import numpy as np
import onnx
from onnx import helper, shape_inference
from onnx.backend.base import Backend, BackendRep, namedtupledict

from . import InferenceSession, SessionOptions

DEVICE = "CPU"

# SessionOptions attributes a prepare() keyword may set, and keywords ONNX's test runner passes
# that are not session options.
_SESSION_OPTIONS = frozenset({"intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level",
                              "execution_mode"})
_IGNORED = frozenset({"rtol", "atol"})


def _session_options(kwargs):
    options = SessionOptions()
    for key, value in kwargs.items():
        if key in _SESSION_OPTIONS:
            setattr(options, key, value)
        elif key not in _IGNORED and key != "opset_version":
            raise TypeError(f"kiln.backend: unknown keyword argument '{key}' (session options: "
                            f"{', '.join(sorted(_SESSION_OPTIONS))})")
    return options


def _as_input(value):
    """A value as InferenceSession.run takes it: numpy scalars become 0-d arrays, lists stay
    lists (sequences), None stays None (an empty optional)."""
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


class KilnBackendRep(BackendRep):
    """A prepared model: a kiln.InferenceSession to run repeatedly."""

    def __init__(self, session):
        self.session = session
        self._input_names = [i.name for i in session.get_inputs()]
        self._output_names = [o.name for o in session.get_outputs()]

    def run(self, inputs, **kwargs):
        """Runs on `inputs`: a list in model-input order (the leading inputs; optional trailing
        ones may be left out), a dict by name, or one value for a one-input model. Returns the
        outputs in model order as a named tuple (index or output name)."""
        if isinstance(inputs, dict):
            feed = {name: _as_input(v) for name, v in inputs.items()}
        elif isinstance(inputs, (list, tuple)):
            if len(inputs) > len(self._input_names):
                raise ValueError(f"kiln.backend: {len(inputs)} inputs given, the model takes "
                                 f"{len(self._input_names)} ({', '.join(self._input_names)})")
            feed = {name: _as_input(v) for name, v in zip(self._input_names, inputs)}
        else:
            if len(self._input_names) != 1:
                raise ValueError(f"kiln.backend: one input given, the model takes {len(self._input_names)} "
                                 f"({', '.join(self._input_names)})")
            feed = {self._input_names[0]: _as_input(inputs)}
        outputs = self.session.run(None, feed)
        return namedtupledict("Outputs", self._output_names)(*outputs)


def _value_info(name, value):
    """A graph input declaring `value`'s type: a tensor, or a sequence of tensors (a list)."""
    if isinstance(value, (list, tuple)):
        elem = np.asarray(value[0]) if value else np.zeros(0, np.float32)
        return helper.make_tensor_sequence_value_info(name, helper.np_dtype_to_tensor_dtype(elem.dtype), None)
    a = np.asarray(value)
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)


def _opset_imports(node, opset_version):
    """The default domain at `opset_version` (the newest ONNX release when None), and the node's
    own domain at the version of its newest schema."""
    imports = [helper.make_opsetid("", opset_version or onnx.defs.onnx_opset_version())]
    if node.domain not in ("", "ai.onnx"):
        schema = onnx.defs.get_schema(node.op_type, domain=node.domain)
        imports.append(helper.make_opsetid(node.domain, schema.since_version))
    return imports


def node_model(node, inputs, outputs_info=None, opset_version=None):
    """The one-node model run_node runs, and its feed {input name: value}.

    `inputs` match the node's non-empty input names in order (or are a dict by name); a None
    input is left out (an omitted optional input). Output types come from `outputs_info`
    ((dtype, shape) per output) or from ONNX shape inference."""
    node = onnx.NodeProto.FromString(node.SerializeToString())
    names = [n for n in node.input if n]
    if isinstance(inputs, dict):
        given = dict(inputs)
    else:
        if len(inputs) != len(names):
            raise ValueError(f"kiln.backend.run_node: node '{node.name or node.op_type}' has {len(names)} "
                             f"inputs ({', '.join(names)}), {len(inputs)} given")
        given = dict(zip(names, inputs))
    for i, n in enumerate(node.input):
        if n and given.get(n) is None:
            node.input[i] = ""
            given.pop(n, None)
    graph_inputs = [_value_info(n, given[n]) for n in dict.fromkeys(n for n in node.input if n)]
    outputs = [n for n in node.output if n]
    if outputs_info is not None:
        graph_outputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shape)
                         for n, (dt, shape) in zip(outputs, outputs_info)]
    else:
        graph_outputs = [onnx.ValueInfoProto(name=n) for n in outputs]
    graph = helper.make_graph([node], f"run_node_{node.op_type}", graph_inputs, graph_outputs)
    model = helper.make_model(graph, opset_imports=_opset_imports(node, opset_version))
    if outputs_info is None:
        inferred = shape_inference.infer_shapes(model)
        types = {v.name: v.type for v in list(inferred.graph.value_info) + list(inferred.graph.output)
                 if v.type.WhichOneof("value")}
        for out in model.graph.output:
            if out.name not in types:
                raise ValueError(f"kiln.backend.run_node: ONNX shape inference gives no type for output "
                                 f"'{out.name}' of {node.op_type}: pass outputs_info")
            out.type.CopyFrom(types[out.name])
    return model, {n: given[n] for n in node.input if n}


class KilnBackend(Backend):
    @classmethod
    def supports_device(cls, device):
        return device.split(":")[0] == DEVICE

    @classmethod
    def is_compatible(cls, model, device=DEVICE, **kwargs):
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model, device=DEVICE, **kwargs):
        """A KilnBackendRep for `model`: a ModelProto (checked with onnx.checker), its serialized
        bytes, or a path (an ONNX model or a compiled .kiln artifact)."""
        if not cls.supports_device(device):
            raise RuntimeError(f"kiln.backend: device '{device}' is not supported (Kiln runs on {DEVICE})")
        options = _session_options(kwargs)
        if isinstance(model, onnx.ModelProto):
            onnx.checker.check_model(model)
            model = model.SerializeToString()
        return KilnBackendRep(InferenceSession(model, options))

    @classmethod
    def run_model(cls, model, inputs, device=DEVICE, **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device=DEVICE, outputs_info=None, **kwargs):
        """Runs one node on `inputs` (see node_model) and returns its outputs as a named tuple."""
        super().run_node(node, inputs, device=device, outputs_info=outputs_info, **kwargs)  # check_node
        model, feed = node_model(node, inputs, outputs_info, kwargs.get("opset_version"))
        return cls.prepare(model, device, **kwargs).run(feed)


# The module is the backend (onnx.backend.test.BackendTest(kiln.backend, ...)), as onnxruntime's is.
prepare = KilnBackend.prepare
run_model = KilnBackend.run_model
run = KilnBackend.run_model
run_node = KilnBackend.run_node
supports_device = KilnBackend.supports_device
is_compatible = KilnBackend.is_compatible
