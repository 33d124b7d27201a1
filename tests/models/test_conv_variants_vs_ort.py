"""Convolution variants against ONNX Runtime, under `--kernels auto`, `generated` and `dnnl`.

ConvTranspose (strides 1/2, output_padding, pads, groups, dilations, 1-D/2-D/3-D, bias, fused
ReLU) and the Conv variants that used to fall off the fast path (dilated, asymmetric pads, 1-D,
3-D, depthwise with a channel multiplier, a dilated window wider than its input, grouped 2-D,
dense convs with 8-channel output blocks): each case is one
small model; under auto it must run as a oneDNN extern kernel (`kiln inspect` names dnnl_conv,
with `kind=deconv` for ConvTranspose, so the kernel choice is tested) where Kiln has oneDNN,
except the cases the rule keeps generated (AUTO_GENERATED; the rule alone: KILN_KERNEL_PROBE=0), and
every source must agree with ONNX
Runtime at 1 and 2 threads. Tolerance: FMA and reassociated
reductions of at most a few hundred O(1) terms: rtol/atol 1e-4.
"""
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import assert_matches_ort, kiln_has_dnnl, kiln_run_model, ort_outputs, run_kiln
from test_cli_errors import assert_clean_error

RTOL, ATOL = 1e-4, 1e-4
# The kernel-choice assertions test the rule itself, without the compile-time probe that
# overrides it where a measurement says so (compiler/kernel_probe.h).
RULE_ONLY = {"KILN_KERNEL_PROBE": "0"}


def _rand(rng, *shape):
    return (rng.standard_normal(shape) * 0.5).astype(np.float32)


def _save(tmp_path, node, x_shape, w, bias, relu, rng):
    inits = [numpy_helper.from_array(w.astype(np.float32), "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(_rand(rng, bias), "b"))
        ins.append("b")
    node.input[:] = ins
    nodes = [node]
    if relu:
        nodes.append(helper.make_node("Relu", ["y0"], ["y"]))
    out = nodes[-1].output[0]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    np.savez(tmp_path / "in.npz", x=_rand(rng, *x_shape))
    return str(path), str(tmp_path / "in.npz")


def deconv(rng, tmp_path, cin, cout, spatial, k, group=1, relu=False, bias=True, **attrs):
    """ConvTranspose of x [1, cin, *spatial] by W [cin, cout/group, k...] (+ bias, ReLU)."""
    sp = len(spatial)
    w = _rand(rng, cin, cout // group, *([k] * sp)) / np.sqrt(cin // group * k ** sp)
    node = helper.make_node("ConvTranspose", [], ["y0" if relu else "y"], kernel_shape=[k] * sp, group=group,
                            **attrs)
    return _save(tmp_path, node, [1, cin, *spatial], w, cout if bias else 0, relu, rng)


def conv(rng, tmp_path, cin, cout, spatial, k, group=1, relu=False, bias=True, batch=1, **attrs):
    """Conv of x [batch, cin, *spatial] by W [cout, cin/group, k...] (+ bias, ReLU)."""
    sp = len(spatial)
    ks = k if isinstance(k, list) else [k] * sp
    w = _rand(rng, cout, cin // group, *ks) / np.sqrt(cin // group * int(np.prod(ks)))
    node = helper.make_node("Conv", [], ["y0" if relu else "y"], kernel_shape=ks, group=group, **attrs)
    return _save(tmp_path, node, [batch, cin, *spatial], w, cout if bias else 0, relu, rng)


CASES = {
    # ConvTranspose
    "deconv2d_s1": lambda r, t: deconv(r, t, 16, 16, [9, 9], 3, pads=[1, 1, 1, 1]),
    "deconv2d_s2_k2": lambda r, t: deconv(r, t, 32, 16, [8, 8], 2, strides=[2, 2], relu=True),
    "deconv2d_s2_outpad": lambda r, t: deconv(r, t, 16, 32, [7, 7], 3, strides=[2, 2], pads=[1, 1, 1, 1],
                                              output_padding=[1, 1], relu=True),
    # output_padding beyond the end pad: the last row and column get only the bias.
    "deconv2d_outpad_beyond_pads": lambda r, t: deconv(r, t, 16, 16, [8, 8], 3, strides=[2, 2], output_padding=[1, 1]),
    "deconv2d_s2_k4_nobias": lambda r, t: deconv(r, t, 16, 16, [6, 6], 4, strides=[2, 2], pads=[1, 1, 1, 1],
                                                 bias=False),
    "deconv2d_asym_pads": lambda r, t: deconv(r, t, 16, 16, [8, 9], 3, strides=[2, 2], pads=[0, 1, 2, 1]),
    "deconv2d_groups": lambda r, t: deconv(r, t, 32, 32, [6, 6], 3, group=2, strides=[2, 2], pads=[1, 1, 1, 1],
                                           output_padding=[1, 1]),
    "deconv2d_depthwise": lambda r, t: deconv(r, t, 64, 64, [12, 12], 4, group=64, strides=[2, 2],
                                              pads=[1, 1, 1, 1]),
    "deconv2d_dilated": lambda r, t: deconv(r, t, 16, 16, [8, 8], 3, dilations=[2, 2], pads=[2, 2, 2, 2]),
    "deconv2d_output_shape": lambda r, t: deconv(r, t, 16, 16, [8, 8], 3, strides=[2, 2], output_shape=[16, 16]),
    "deconv1d_s2": lambda r, t: deconv(r, t, 16, 32, [80], 4, strides=[2], pads=[1, 1], relu=True),
    "deconv3d_s2": lambda r, t: deconv(r, t, 16, 16, [4, 4, 4], 2, strides=[2, 2, 2]),
    # Conv variants
    "conv2d_dilated_rate4": lambda r, t: conv(r, t, 32, 32, [13, 13], 3, dilations=[4, 4], pads=[4] * 4, relu=True),
    # A 3x3 of rate 12 on 9x9: only the centre tap reads the input (the rest is padding).
    "conv2d_dilated_wider_than_input": lambda r, t: conv(r, t, 32, 32, [9, 9], 3, dilations=[12, 12],
                                                         pads=[12] * 4),
    # Rate 6 on 9x9: every tap reads the input for some outputs; rows differ per tap.
    "conv2d_dilated_partial": lambda r, t: conv(r, t, 32, 16, [9, 9], 3, dilations=[6, 6], pads=[6] * 4),
    "conv2d_asym_pads": lambda r, t: conv(r, t, 32, 32, [12, 12], 3, pads=[0, 1, 2, 1], relu=True),
    "conv2d_asym_pads_s2": lambda r, t: conv(r, t, 16, 32, [17, 17], 3, strides=[2, 2], pads=[1, 0, 0, 1]),
    "conv1d": lambda r, t: conv(r, t, 32, 32, [60], 3, pads=[1, 1], relu=True),
    "conv1d_dilated_stack_d4": lambda r, t: conv(r, t, 32, 32, [50], 3, dilations=[4], pads=[4, 4]),
    "conv1d_s2_asym": lambda r, t: conv(r, t, 16, 32, [161], 5, strides=[2], pads=[2, 1]),
    "conv3d": lambda r, t: conv(r, t, 16, 32, [4, 8, 8], 3, pads=[1] * 6, relu=True),
    "conv3d_s2_batch2": lambda r, t: conv(r, t, 16, 16, [4, 6, 6], [1, 3, 3], strides=[1, 2, 2], pads=[0, 1, 1] * 2,
                                          batch=2),
    "depthwise_multiplier2": lambda r, t: conv(r, t, 32, 64, [16, 16], 3, group=32, pads=[1] * 4, relu=True),
    "grouped_1d": lambda r, t: conv(r, t, 32, 64, [100], 3, group=4, pads=[1, 1]),
    # Grouped 2-D (generated: conv.cc's grouped register tile): 8 channels per group and tile,
    # stride 2 with 4 per group, 12 per group (a tile of 6), 67 columns (a guarded tail), and
    # 32 columns at stride 2 (a tile of two whole vectors).
    "grouped_g4": lambda r, t: conv(r, t, 32, 32, [12, 12], 3, group=4, pads=[1] * 4, relu=True),
    "grouped_g16_s2": lambda r, t: conv(r, t, 64, 64, [17, 17], 3, group=16, strides=[2, 2], pads=[1] * 4),
    "grouped_g2_mg12": lambda r, t: conv(r, t, 16, 24, [10, 10], 3, group=2, pads=[1] * 4, bias=False),
    "grouped_g2_wide_tail": lambda r, t: conv(r, t, 16, 16, [5, 67], 3, group=2, pads=[1] * 4),
    "grouped_g4_two_vectors_s2": lambda r, t: conv(r, t, 32, 32, [6, 64], 3, group=4, strides=[2, 2],
                                                   pads=[1] * 4),
    # Dense convs with 8-channel output blocks (the layout pass's KilnConv2dNCHWc [..., 8]).
    "block8_1x1": lambda r, t: conv(r, t, 48, 24, [10, 10], 1),
    "block8_3x3_relu": lambda r, t: conv(r, t, 32, 40, [9, 9], 3, pads=[1] * 4, relu=True),
    # A few output maps over a long last axis (a vocoder's final conv): tiles of 64 in registers,
    # in parallel (conv.cc few_long_maps); 3001 samples end in a partial tile.
    "few_maps_1d": lambda r, t: conv(r, t, 8, 1, [3001], 7, pads=[3, 3]),
    "few_maps_2d": lambda r, t: conv(r, t, 16, 2, [6, 300], 3, pads=[1] * 4, relu=True),
}


# Cases auto leaves to Kiln's generated kernel, its fast path there (docs/kernels.md's rule).
AUTO_GENERATED = {"depthwise_multiplier2", "few_maps_1d", "few_maps_2d"}
# ConvTransposes whose kernel is a multiple of the stride run as a conv over their phases
# (pass/polyphase_conv_transpose.h): oneDNN's kernel is a plain convolution.
POLYPHASE = {"deconv1d_s2", "deconv2d_s2_k4_nobias"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_variant_matches_ort(tmp_path, name):
    rng = np.random.default_rng(sorted(CASES).index(name) + 100)
    path, inputs = CASES[name](rng, tmp_path)
    if kiln_has_dnnl():  # auto must take the fast path: a oneDNN (de)convolution, or the rule's pick
        proc = run_kiln(["inspect", path, "--kernel-source", "auto"], env=RULE_ONLY)
        assert proc.returncode == 0, proc.stderr
        kinds = [line for line in proc.stdout.splitlines() if "extern kernel dnnl_conv" in line]
        if name in AUTO_GENERATED:
            assert not kinds, f"{name}: auto should keep Kiln's kernel: {kinds}"
        elif name in POLYPHASE:  # a conv, oneDNN's or generated by the rule: no deconvolution
            assert "polyphase" in proc.stdout and not any("kind=deconv" in k for k in kinds), kinds
        else:
            assert kinds, f"{name}: auto chose no oneDNN kernel:\n{proc.stdout[-3000:]}"
            assert ("kind=deconv" in kinds[0]) == name.startswith("deconv"), kinds[0]
    feed = dict(np.load(inputs))
    ref = ort_outputs(path, feed)
    for source in ("auto", "generated", "dnnl"):
        for threads in ("1", "2"):
            outs, _ = kiln_run_model(path, inputs, str(tmp_path / f"{source}{threads}"),
                                     extra=["--kernels", source, "--threads", threads])
            assert_matches_ort(outs, ref, f"{name} --kernels {source} --threads {threads}", RTOL, ATOL)


def test_dilated_conv_wider_than_input_runs_only_the_taps_it_reads(tmp_path):
    """The rate-12 3x3 on 9x9 reads the input at its centre tap only: oneDNN runs a 1x1 window."""
    if not kiln_has_dnnl():
        pytest.skip("kiln built without oneDNN")
    path, _ = CASES["conv2d_dilated_wider_than_input"](np.random.default_rng(0), tmp_path)
    proc = run_kiln(["inspect", path, "--kernel-source", "auto"], env=RULE_ONLY)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if "extern kernel dnnl_conv" in ln)
    assert "taps_begin=1,1" in line and "taps=1,1" in line and "pads_begin=0,0" in line, line


def test_conv_transpose_keeps_bias_and_runs_relu_apart(tmp_path):
    """oneDNN 2.6 runs a deconv's post-ops in a reference loop (15x the deconv's time): the bias
    rides in the deconv, the ReLU is a kernel of its own."""
    if not kiln_has_dnnl():
        pytest.skip("kiln built without oneDNN")
    path, _ = CASES["deconv2d_s2_outpad"](np.random.default_rng(0), tmp_path)
    proc = run_kiln(["inspect", path, "--kernel-source", "auto"], env=RULE_ONLY)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if "extern kernel dnnl_conv" in ln)
    assert "kind=deconv" in line and "b=2" in line and "post=" not in line, line
    assert "pads_begin=1,1" in line and "pads_end=0,0" in line, line  # ONNX end pad 1 less output_padding 1


def test_conv_transpose_with_wrong_weight_shape_names_the_node(tmp_path):
    """W's first dim must be X's channels: an error naming the node, not a crash."""
    w = np.zeros((8, 4, 3, 3), np.float32)  # X has 16 channels
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up_bad", kernel_shape=[3, 3])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w")])
    path = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    np.savez(tmp_path / "in.npz", x=np.zeros((1, 16, 5, 5), np.float32))
    out = tmp_path / "out"
    out.mkdir()
    proc = run_kiln(["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--output-dir", str(out)])
    assert_clean_error(proc, must_contain=("up_bad", "W's first dim (8)", "(16)"))


@pytest.mark.parametrize("batch,cin,cout,width,dil", [(2, 24, 40, 37, 1), (1, 64, 128, 300, 8)])
def test_conv1d_channels_last_reorders_match_ort(tmp_path, batch, cin, cout, width, dil):
    """oneDNN's 1-D convs compute on nwc; Kiln's activations are ncw, transposed in and out around
    the primitive (runtime/transpose_2d.h): channel and width counts with and without whole 8x8
    blocks, two images, a dilated window."""
    rng = np.random.default_rng(7 + batch)
    path, inputs = conv(rng, tmp_path, cin, cout, [width], 3, batch=batch, relu=True, dilations=[dil],
                        pads=[dil, dil])
    feed = dict(np.load(inputs))
    ref = ort_outputs(path, feed)
    for threads in ("1", "2"):
        outs, _ = kiln_run_model(path, inputs, str(tmp_path / f"t{threads}"), extra=["--threads", threads])
        assert_matches_ort(outs, ref, f"conv1d b{batch} c{cin}->{cout} w{width} --threads {threads}", RTOL, ATOL)


def _conv1d_stack(rng, tmp_path, batch, channels, width):
    """A 1-D conv stack as a TCN or an audio front end has it: a dilated conv with bias, ReLU, a
    per-channel scale [C, 1], a strided grouped conv with asymmetric pads, GELU (Erf form), PReLU
    with a [C, 1] slope, a residual add of a strided 1x1 conv of the input, and the ReLU's output
    as a second graph output (a value inside the lifted region)."""
    c = channels

    def w(cout, cin, k):
        return numpy_helper.from_array((_rand(rng, cout, cin, k) / np.sqrt(cin * k)).astype(np.float32), f"w{len(inits)}")

    inits = []
    inits.append(w(c, c, 3))                                                      # w0
    inits.append(numpy_helper.from_array(_rand(rng, c), "b0"))
    inits.append(numpy_helper.from_array((_rand(rng, c, 1) + 1).astype(np.float32), "scale"))
    inits.append(w(c, c // 2, 5))                                                 # w3: group 2
    inits.append(numpy_helper.from_array(np.array(np.sqrt(2), np.float32), "sqrt2"))
    inits.append(numpy_helper.from_array(np.array(1, np.float32), "one"))
    inits.append(numpy_helper.from_array(np.array(0.5, np.float32), "half"))
    inits.append(numpy_helper.from_array((_rand(rng, c, 1) * 0.5).astype(np.float32), "slope"))
    inits.append(w(c, c, 1))                                                      # w8
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w0", "b0"], ["c0"], dilations=[4], pads=[4, 4]),
        n("Relu", ["c0"], ["r0"]),
        n("Mul", ["r0", "scale"], ["s0"]),
        n("Conv", ["s0", "w3"], ["c1"], group=2, strides=[2], pads=[1, 3]),
        n("Div", ["c1", "sqrt2"], ["g0"]), n("Erf", ["g0"], ["g1"]), n("Add", ["g1", "one"], ["g2"]),
        n("Mul", ["c1", "g2"], ["g3"]), n("Mul", ["g3", "half"], ["g4"]),
        n("PRelu", ["g4", "slope"], ["p0"]),
        n("Conv", ["x", "w8"], ["skip"], strides=[2]),
        n("Add", ["p0", "skip"], ["y"]),
    ]
    out_w = (width - 1) // 2 + 1
    g = helper.make_graph(nodes, "tcn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, c, out_w]),
                           helper.make_tensor_value_info("r0", TensorProto.FLOAT, [batch, c, width])], inits)
    path = tmp_path / "tcn.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    np.savez(tmp_path / "in.npz", x=_rand(rng, batch, c, width))
    return str(path), str(tmp_path / "in.npz")


@pytest.mark.parametrize("batch,channels,width,blocked", [(1, 32, 1024, 3), (2, 24, 61, 2), (1, 10, 40, 0)])
def test_conv1d_stack_lifted_to_2d_matches_ort(tmp_path, batch, channels, width, blocked):
    """pass/lift_conv_1d.h: the 1-D convs run as 2-D ones over a unit height, blocked where the
    channels allow (32: blocks of 16; 24: one NHWC block, the grouped conv's 12 channels a group
    plain; 10: no block, plain 2-D convs), with their elementwise ops; at -O2 (no lifting) the same model runs 1-D. Both against ORT."""
    path, inputs = _conv1d_stack(np.random.default_rng(channels), tmp_path, batch, channels, width)
    ir = run_kiln(["inspect", path])
    assert ir.returncode == 0, ir.stderr
    graph = ir.stdout.split("// passes")[0]
    convs = [ln for ln in graph.splitlines() if re.search(r"= (Conv|KilnConv2dNCHWc)\(", ln)]
    ranks = [len(re.search(r": f32\[([^\]]*)\]", ln).group(1).split(",")) for ln in convs]
    assert len(convs) == 3 and all(r >= 4 for r in ranks), graph  # no conv left 1-D
    assert graph.count("KilnConv2dNCHWc(") == blocked, graph
    feed = dict(np.load(inputs))
    ref = ort_outputs(path, feed)
    for opt in ("3", "2"):
        for threads in ("1", "2"):
            outs, _ = kiln_run_model(path, inputs, str(tmp_path / f"O{opt}t{threads}"),
                                     extra=["--threads", threads, "-O", opt])
            assert_matches_ort(outs, ref, f"conv1d stack c{channels} w{width} -O{opt} --threads {threads}", RTOL, ATOL)


def _conv1d_then(tmp_path, rng, tail, auto_pad=None):
    """x [2, 16, 50] -> Conv1d 16->32 (k3; pads 1 or auto_pad) + Relu -> `tail` nodes reading "r"."""
    c_attrs = dict(auto_pad=auto_pad, strides=[2]) if auto_pad else dict(pads=[1, 1])
    w = numpy_helper.from_array((_rand(rng, 32, 16, 3) / 7).astype(np.float32), "w")
    w2 = numpy_helper.from_array((_rand(rng, 32, 32, 1) / 6).astype(np.float32), "w2")
    proj = numpy_helper.from_array((_rand(rng, 32, 8) / 6).astype(np.float32), "proj")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3], **c_attrs),
             helper.make_node("Relu", ["c"], ["r"])] + tail
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 50])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, w2, proj])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    np.savez(tmp_path / "in.npz", x=_rand(rng, 2, 16, 50))
    return str(path), str(tmp_path / "in.npz")


N_ = helper.make_node
LIFTED_TAILS = {
    # a 1-D MaxPool between two convs: the lifted region ends before it and starts again after
    "maxpool_then_conv": [N_("MaxPool", ["r"], ["p"], kernel_shape=[2], strides=[2]),
                          N_("Conv", ["p", "w2"], ["y"])],
    # the audio-encoder pattern: conv front end, then [N, W, C] for a projection
    "transpose_matmul": [N_("Transpose", ["r"], ["t"], perm=[0, 2, 1]), N_("MatMul", ["t", "proj"], ["y"])],
    "global_pool": [N_("Conv", ["r", "w2"], ["c2"]), N_("GlobalAveragePool", ["c2"], ["y"])],
    "reduce_mean_last": [N_("Conv", ["r", "w2"], ["c2"]), N_("ReduceMean", ["c2"], ["y"], axes=[2], keepdims=0)],
}


@pytest.mark.parametrize("tail", sorted(LIFTED_TAILS))
def test_lifted_conv1d_region_ends_where_1d_ops_start(tmp_path, tail):
    """pass/lift_conv_1d.h: the lifted region meets ops that stay 1-D (pools, transposes, products,
    reductions over the width) through the squeezing Reshape; the results against ONNX Runtime."""
    path, inputs = _conv1d_then(tmp_path, np.random.default_rng(len(tail)), LIFTED_TAILS[tail])
    ref = ort_outputs(path, dict(np.load(inputs)))
    for threads in ("1", "2"):
        outs, _ = kiln_run_model(path, inputs, str(tmp_path / f"t{threads}"), extra=["--threads", threads])
        assert_matches_ort(outs, ref, f"{tail} --threads {threads}", RTOL, ATOL)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_lifted_conv1d_keeps_auto_pad(tmp_path, auto_pad):
    """auto_pad with stride 2 on an even width: SAME_UPPER and SAME_LOWER pad the two ends
    differently; the lifted 2-D conv pads only the width."""
    path, inputs = _conv1d_then(tmp_path, np.random.default_rng(3), [N_("Conv", ["r", "w2"], ["y"])], auto_pad)
    ir = run_kiln(["inspect", path])
    assert ir.returncode == 0 and "kernel_shape=[1,3]" in ir.stdout.replace(" ", ""), ir.stdout[-2000:]
    ref = ort_outputs(path, dict(np.load(inputs)))
    outs, _ = kiln_run_model(path, inputs, str(tmp_path / "out"), extra=["--threads", "2"])
    assert_matches_ort(outs, ref, f"auto_pad {auto_pad}", RTOL, ATOL)
