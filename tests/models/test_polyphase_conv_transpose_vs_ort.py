"""ConvTranspose as a stride-1 Conv over its phases, a pixel shuffle and a crop
(pass/polyphase_conv_transpose.h), against ONNX Runtime: 1-D upsamplers as vocoders write them
(kernel 2s, pads s/2), kernels of three strides, output_padding within pads_end, no bias, 2-D
4x4 stride 2 (DCGAN, also with its Tanh after: the shuffle's interleave is then a Transpose kernel
of its own, or read ahead of the vectorized tanh, codegen/staged_gathers.h) and mixed strides, at 1 and 2 threads under every kernel source. The
rewritten ones must show the polyphase Conv in `kiln inspect --kernels`; the ones the pass
leaves (output_padding past pads_end, kernel equal to the stride, many 2-D output channels)
must not, and still match."""
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kiln_helpers import assert_matches_ort, kiln_has_dnnl, kiln_run_model, ort_outputs, run_kiln  # noqa: E402

# name -> (x shape, W shape [C, M, k..], attrs, bias, rewritten[, activation after])
CASES = {
    "1d_k2s_vocoder": ([1, 32, 50], [32, 16, 16], dict(strides=[8], pads=[4, 4]), True, True),
    "1d_k3s_no_bias": ([2, 8, 21], [8, 12, 6], dict(strides=[2], pads=[1, 2]), False, True),
    "1d_outpad_within": ([1, 16, 30], [16, 8, 4], dict(strides=[2], pads=[1, 2], output_padding=[1]), True, True),
    "1d_outpad_past": ([1, 16, 30], [16, 8, 4], dict(strides=[2], pads=[1, 0], output_padding=[1]), True, False),
    "2d_dcgan": ([1, 24, 9, 7], [24, 20, 4, 4], dict(strides=[2, 2], pads=[1, 1, 1, 1]), True, True),
    "2d_dcgan_tanh": ([1, 64, 32, 32], [64, 3, 4, 4], dict(strides=[2, 2], pads=[1, 1, 1, 1]), True, True, "Tanh"),
    "2d_mixed_strides": ([1, 8, 6, 10], [8, 5, 4, 3], dict(strides=[2, 1], pads=[1, 0, 2, 1]), True, True),
    "2d_kernel_is_stride": ([1, 16, 8, 8], [16, 8, 2, 2], dict(strides=[2, 2]), True, False),
    "2d_many_channels": ([1, 32, 4, 4], [32, 80, 4, 4], dict(strides=[2, 2], pads=[1, 1, 1, 1]), True, False),
}


def _model(path, x_shape, w_shape, attrs, bias, rng, activation=None):
    inits = [numpy_helper.from_array((rng.standard_normal(w_shape) * 0.2).astype(np.float32), "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(w_shape[1]).astype(np.float32), "b"))
        ins.append("b")
    nodes = [helper.make_node("ConvTranspose", ins, ["t" if activation else "y"], kernel_shape=w_shape[2:], **attrs)]
    if activation:
        nodes.append(helper.make_node(activation, ["t"], ["y"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_transpose_matches_ort(tmp_path, name):
    x_shape, w_shape, attrs, bias, rewritten, *activation = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    path = str(tmp_path / "m.onnx")
    _model(path, x_shape, w_shape, attrs, bias, rng, *activation)
    np.savez(tmp_path / "in.npz", x=rng.standard_normal(x_shape).astype(np.float32))
    listing = run_kiln(["inspect", path, "--kernels"]).stdout
    assert ("polyphase" in listing) == rewritten, listing
    if activation:
        source = run_kiln(["inspect", path]).stdout
        # The interleave either runs as a Transpose kernel of its own (it moves the contiguous
        # axis before a Reshape, pass/fuse_operators.cc; the Tanh then reads contiguously) or
        # is read ahead of the vectorized Tanh (codegen/staged_gathers.h): never gathered lane
        # by lane under the Tanh.
        tanh_with_transpose = [line for line in listing.splitlines() if "Tanh" in line and "Transpose" in line]
        assert "gather(s) staged" in source or not tanh_with_transpose, \
            f"the interleave before the Tanh was neither a kernel of its own nor read ahead: {tanh_with_transpose}"
    ref = ort_outputs(path, dict(np.load(tmp_path / "in.npz")))
    for source in ("auto", "generated") + (("dnnl",) if kiln_has_dnnl() else ()):
        for threads in ("1", "2"):
            outs, _ = kiln_run_model(path, str(tmp_path / "in.npz"), str(tmp_path / f"{source}{threads}"),
                                     extra=["--kernels", source, "--threads", threads])
            assert_matches_ort(outs, ref, f"{name} --kernels {source} --threads {threads}", 1e-4, 1e-4)
