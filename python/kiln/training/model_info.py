"""What the training API reads of an ONNX model file with the onnx package: its inputs and outputs,
and the loss metadata kiln.training.artifacts.generate_artifacts writes into a training model.
Shared by artifacts.py and module.py (which used to import each other for these)."""
import json

LOSS_KEY = "kiln.training.loss"


def model_inputs(path):
    """([(name, [int size or str symbol or None])] of the model's graph inputs that are no
    initializer, [output names]), read with the onnx package (dims the first batch binds); None
    without onnx."""
    try:
        import onnx
    except ImportError:
        return None
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    out = []
    for i in m.graph.input:
        if i.name in inits:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in i.type.tensor_type.shape.dim]
        out.append((i.name, dims))
    return out, [o.name for o in m.graph.output]


def read_loss_spec(model_path):
    """The loss metadata generate_artifacts wrote into a training model, or None."""
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    for p in m.metadata_props:
        if p.key == LOSS_KEY:
            return json.loads(p.value)
    return None
