"""Channel counts no block divides (ShuffleNetV2's 58 and 116): the layout pass zero-pads them to
a multiple of 16 around dense and depthwise convs and keeps the padding between them
(docs/passes.md, transform-layout). A ShuffleNetV2-style unit against ONNX Runtime, with the
generated kernels and with oneDNN's."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import assert_matches_ort, kiln_has_dnnl, kiln_run_model, ort_outputs


def make_unit(path, ch):
    """x [1, ch, 14, 14] -> 1x1 conv + BN + ReLU -> 3x3 depthwise + BN -> 1x1 conv + ReLU, plus
    the input (residual) -> Clip(0, 6) -> a strided 3x3 conv to ch + 6 channels."""
    rng = np.random.default_rng(ch)
    c = lambda name, *s: numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype(np.float32), name)  # noqa: E731
    inits = [c("w1", ch, ch, 1, 1), c("b1", ch), c("wd", ch, 1, 3, 3), c("w2", ch, ch, 1, 1), c("b2", ch),
             c("w3", ch + 6, ch, 3, 3),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, ch).astype(np.float32), "s"),
             numpy_helper.from_array((rng.standard_normal(ch) * 0.1).astype(np.float32), "t"),
             numpy_helper.from_array(np.zeros(ch, np.float32), "mean"),
             numpy_helper.from_array(np.ones(ch, np.float32), "var"),
             numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(6, np.float32), "hi")]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]),
        helper.make_node("BatchNormalization", ["c1", "s", "t", "mean", "var"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "wd"], ["d"], group=ch, pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["d", "s", "t", "mean", "var"], ["n2"]),
        helper.make_node("Conv", ["n2", "w2", "b2"], ["c2"]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Add", ["r2", "x"], ["sum"]),
        helper.make_node("Clip", ["sum", "lo", "hi"], ["cl"]),
        helper.make_node("Conv", ["cl", "w3"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(nodes, "padded_unit", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, ch, 14, 14])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, ch + 6, 7, 7])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


@pytest.mark.parametrize("ch", [58, 116])
@pytest.mark.parametrize("kernels", ["generated", "auto"])
def test_padded_channel_unit_matches_ort(tmp_path, ch, kernels):
    if kernels == "auto" and not kiln_has_dnnl():
        pytest.skip("oneDNN not built in")
    path = str(tmp_path / "unit.onnx")
    make_unit(path, ch)
    feed = {"x": np.random.default_rng(7).standard_normal((1, ch, 14, 14)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **feed)
    got, _ = kiln_run_model(path, str(tmp_path / "in.npz"), str(tmp_path / "out"),
                            extra=["--repeat", "1", "--kernels", kernels])
    assert_matches_ort(got, ort_outputs(path, feed), f"{ch} channels, {kernels}", rtol=1e-4, atol=1e-4)
