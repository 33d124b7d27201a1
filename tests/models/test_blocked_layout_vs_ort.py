"""Blocks that must stay in the blocked NCHWc layout, against ONNX Runtime.

Grouped convs whose groups are whole blocks (RegNetY, ResNeXt) and squeeze-and-excitation
(EfficientNet, RegNetY, MobileNetV3): GlobalAveragePool -> 1x1 conv ->
activation -> 1x1 conv -> Sigmoid -> Mul with the block's activation; the channel scale
[1, C, 1, 1] multiplies the blocked tensor without a layout round trip. DenseNet: a channel
Concat -> BatchNormalization -> Relu -> 1x1 conv, and a transition whose AveragePool reads a
Pad by zeros. Inception: a Pad by zeros before an AveragePool becomes the pool's pads. `kiln inspect --kernels` must show no layout transform between the first and the
last conv, and the outputs must match ONNX Runtime at 1 and 2 threads under every kernel source
(auto, generated, oneDNN).
Tolerance: FMA and reassociated reductions of a few hundred O(1) terms: rtol/atol 1e-4.
"""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import assert_matches_ort, kiln_has_dnnl, kiln_run_model, ort_outputs, run_kiln

RTOL, ATOL = 1e-4, 1e-4


def every_source():
    """The kernel sources this build has."""
    return ("auto", "generated") + (("dnnl",) if kiln_has_dnnl() else ())


def assert_every_source_matches(tmp_path, path, ref, label, sources=("auto", "generated")):
    """`kiln run` of the model with each kernel source at one and two threads, against `ref`."""
    for source in sources:
        for threads in ("1", "2"):
            outs, _ = kiln_run_model(str(path), str(tmp_path / "in.npz"), str(tmp_path / f"{source}{threads}"),
                                     extra=["--kernels", source, "--threads", threads])
            assert_matches_ort(outs, ref, f"{label} --kernels {source} --threads {threads}", RTOL, ATOL)


class Builder:
    """A small ONNX graph: nodes, constant initializers and fresh value names."""

    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.count = rng, [], [], 0

    def name(self, hint):
        self.count += 1
        return f"{hint}{self.count}"

    def const(self, array):
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(array, np.float32), n))
        return n

    def op(self, op, inputs, **attrs):
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def conv(self, x, cin, cout, k=1, group=1, **attrs):
        w = self.rng.standard_normal((cout, cin // group, k, k)) / np.sqrt(cin // group * k * k)
        b = self.rng.standard_normal(cout) * 0.1
        return self.op("Conv", [x, self.const(w), self.const(b)], kernel_shape=[k, k], group=group,
                       pads=[k // 2] * 4, **attrs)

    def batch_norm(self, x, c):
        r = self.rng
        params = [r.uniform(0.5, 1.5, c), r.standard_normal(c) * 0.1, r.standard_normal(c) * 0.1, r.uniform(0.5, 2, c)]
        return self.op("BatchNormalization", [x] + [self.const(p) for p in params], epsilon=1e-5)

    def save(self, path, x_shape, out):
        g = helper.make_graph(self.nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], self.inits)
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def squeeze_excite(b, x, c, squeeze, act):
    s = b.op("GlobalAveragePool", [x])
    s = b.conv(s, c, squeeze)
    s = b.op("Mul", [s, b.op("Sigmoid", [s])]) if act == "silu" else b.op("Relu", [s])
    s = b.op("Sigmoid", [b.conv(s, squeeze, c)])
    return b.op("Mul", [x, s])


def se_model(b, squeeze, act):
    """conv 16->32, depthwise 3x3, SE (squeeze channels), conv 32->16 + residual."""
    h = b.op("Relu", [b.conv("x", 16, 32)])
    h = b.op("Relu", [b.conv(h, 32, 32, k=3, group=32)])
    h = squeeze_excite(b, h, 32, squeeze, act)
    return b.op("Add", [b.conv(h, 32, 16), "x"]), [1, 16, 10, 10]


def dense_model(b, _squeeze, _act):
    """Two dense layers (Concat -> BN -> Relu -> 1x1 conv -> BN folded -> 3x3 conv), a transition."""
    feats, c = [b.conv("x", 32, 32)], 32
    for _ in range(2):
        cat = b.op("Concat", feats, axis=1) if len(feats) > 1 else feats[0]
        h = b.op("Relu", [b.batch_norm(cat, c)])
        h = b.op("Relu", [b.batch_norm(b.conv(h, c, 32), 32)])
        feats.append(b.conv(h, 32, 16, k=3))
        c += 16
    h = b.op("Relu", [b.batch_norm(b.op("Concat", feats, axis=1), c)])
    h = b.conv(h, c, 32)
    h = b.op("Pad", [h, b.const_i64([0] * 8)], mode="constant")
    h = b.op("AveragePool", [h], kernel_shape=[2, 2], strides=[2, 2])
    cat = b.op("Concat", [h], axis=1)
    return b.conv(b.op("Relu", [b.batch_norm(cat, 32)]), 32, 16), [1, 32, 8, 8]


def const_i64(self, values):
    n = self.name("i")
    self.inits.append(numpy_helper.from_array(np.asarray(values, np.int64), n))
    return n


Builder.const_i64 = const_i64

def inception_pool_model(b, _squeeze, _act):
    """Inception's branches: 1x1 conv, 3x3 conv, and Pad by zeros -> AveragePool 3x3 -> 1x1 conv; Concat."""
    h = b.op("Relu", [b.conv("x", 16, 32)])
    pooled = b.op("AveragePool", [b.op("Pad", [h, b.const_i64([0, 0, 1, 1, 0, 0, 1, 1])], mode="constant")],
                  kernel_shape=[3, 3], strides=[1, 1])
    branches = [b.op("Relu", [b.conv(h, 32, 16)]), b.op("Relu", [b.conv(h, 32, 16, k=3)]),
                b.op("Relu", [b.conv(pooled, 32, 16)])]
    return b.conv(b.op("Concat", branches, axis=1), 48, 16), [1, 16, 9, 9]


def regnet_model(b, squeeze, group_width):
    """RegNetY's block: 1x1 conv, grouped 3x3 (strided), squeeze-excite, 1x1 conv, residual."""
    c = 48
    h = b.op("Relu", [b.conv("x", 32, c)])
    h = b.op("Relu", [b.conv(h, c, c, k=3, group=c // group_width, strides=[2, 2])])
    h = squeeze_excite(b, h, c, squeeze, "relu")
    shortcut = b.conv("x", 32, 32, strides=[2, 2])
    return b.op("Relu", [b.op("Add", [b.conv(h, c, 32), shortcut])]), [1, 32, 10, 10]


CASES = {
    "regnet_groups_of_8": (regnet_model, 12, 8),     # blocks of 8 from the producer on
    "resnext_groups_of_16": (regnet_model, 16, 16),  # the producer's blocks of 16
    "groups_of_4_stay_nchw": (regnet_model, 8, 4),   # groups narrower than a block: NCHW, still right
    "inception_pool_branch": (inception_pool_model, 0, None),
    "se_silu_squeeze4": (se_model, 4, "silu"),     # squeeze below the block: its convs stay NCHW
    "se_relu_squeeze16": (se_model, 16, "relu"),   # squeeze of a whole block: blocked convs
    "densenet_blocks": (dense_model, 0, None),
}


def middle_kernels(model):
    """`kiln inspect --kernels` lines between the first and the last dense conv kernel."""
    proc = run_kiln(["inspect", model, "--kernels"])
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("kernel ")]
    convs = [i for i, ln in enumerate(lines) if "KilnConv2dNCHWc" in ln]
    return lines[convs[0] + 1:convs[-1]]


@pytest.mark.parametrize("name", sorted(CASES))
def test_block_stays_blocked_and_matches_ort(tmp_path, name):
    make, squeeze, act = CASES[name]
    rng = np.random.default_rng(sorted(CASES).index(name) + 7)
    b = Builder(rng)
    out, x_shape = make(b, squeeze, act)
    path = tmp_path / "m.onnx"
    b.save(path, x_shape, out)
    np.savez(tmp_path / "in.npz", x=rng.standard_normal(x_shape).astype(np.float32))
    middle = middle_kernels(str(path))
    if name != "groups_of_4_stay_nchw":
        assert not [ln for ln in middle if "KilnLayout" in ln or "BatchNormalization" in ln], "\n".join(middle)
    ref = ort_outputs(str(path), dict(np.load(tmp_path / "in.npz")))
    assert_every_source_matches(tmp_path, path, ref, name, every_source())


def padded_depthwise_model(b, channels, stride):
    """ShuffleNetV2's branch on a channel count no block divides: 1x1 conv, Relu, depthwise 3x3
    (padded to whole blocks around the blocked conv), Relu, 1x1 conv."""
    h = b.op("Relu", [b.conv("x", 24, channels)])
    h = b.op("Relu", [b.conv(h, channels, channels, k=3, group=channels, strides=[stride, stride])])
    return b.conv(h, channels, 24), [1, 24, 13, 13]


@pytest.mark.parametrize("channels,stride", [(58, 1), (58, 2), (20, 1), (116, 2)])
def test_padded_depthwise_matches_ort(tmp_path, channels, stride):
    """58 and 116 channels pad to blocks of 16, 20 to blocks of 8 (16 would add 60%): the
    depthwise conv runs blocked (`kiln inspect --kernels` names KilnDepthwiseConv2dNCHWc) and
    the output, padding channels dropped, matches ONNX Runtime."""
    rng = np.random.default_rng(channels * 10 + stride)
    b = Builder(rng)
    out, x_shape = padded_depthwise_model(b, channels, stride)
    path = tmp_path / "m.onnx"
    b.save(path, x_shape, out)
    np.savez(tmp_path / "in.npz", x=rng.standard_normal(x_shape).astype(np.float32))
    proc = run_kiln(["inspect", str(path), "--kernels"])
    assert proc.returncode == 0, proc.stderr
    assert "KilnDepthwiseConv2dNCHWc" in proc.stdout, proc.stdout
    ref = ort_outputs(str(path), dict(np.load(tmp_path / "in.npz")))
    assert_every_source_matches(tmp_path, path, ref, f"{channels} channels stride {stride}",
                                every_source())


def detector_heads_model(b):
    """A YOLO-style neck and heads: two blocked maps (40x40 and 20x20, a stride-2 conv between),
    a 1x1 head conv of 255 channels (not a whole number of blocks) on each, flattened, joined
    along the positions and through a sigmoid: the blocked-to-plain transposes run alone
    (pass/fuse_operators.cc flattened_from_blocked), the Concat+Sigmoid kernel splits at the
    boundary (1600, a multiple of the vector length)."""
    p3 = b.op("Relu", [b.conv("x", 8, 32, k=3)])
    p4 = b.op("Relu", [b.conv(p3, 32, 64, k=3, strides=[2, 2])])
    shape = b.name("shape")
    b.inits.append(numpy_helper.from_array(np.array([1, 255, -1], np.int64), shape))
    flat = [b.op("Reshape", [b.conv(p, c, 255), shape]) for p, c in ((p3, 32), (p4, 64))]
    return b.op("Sigmoid", [b.op("Concat", flat, axis=2)]), [1, 8, 40, 40]


def test_detector_heads_match_ort(tmp_path):
    rng = np.random.default_rng(7)
    b = Builder(rng)
    out, x_shape = detector_heads_model(b)
    path = tmp_path / "m.onnx"
    b.save(path, x_shape, out)
    np.savez(tmp_path / "in.npz", x=rng.standard_normal(x_shape).astype(np.float32))
    ref = ort_outputs(str(path), dict(np.load(tmp_path / "in.npz")))
    assert next(iter(ref.values())).shape == (1, 255, 2000)
    assert_every_source_matches(tmp_path, path, ref, "heads")


def group_norm_silu(b, x, c, groups):
    """GroupNorm as PyTorch exports it at opset 17 (Reshape, InstanceNormalization over the
    groups, Reshape back, the affine Mul and Add), then SiLU."""
    shape_g, shape_back = b.name("shape"), b.name("shape")
    b.inits.append(numpy_helper.from_array(np.array([0, groups, -1], np.int64), shape_g))
    b.inits.append(numpy_helper.from_array(np.array([1, c, 32, 32], np.int64), shape_back))
    g = b.op("Reshape", [x, shape_g])
    g = b.op("InstanceNormalization", [g, b.const(np.ones(groups)), b.const(np.zeros(groups))], epsilon=1e-5)
    g = b.op("Reshape", [g, shape_back])
    scale = b.const(b.rng.uniform(0.5, 1.5, (c, 1, 1)))
    g = b.op("Add", [b.op("Mul", [g, scale]), b.const(b.rng.standard_normal((c, 1, 1)) * 0.1)])
    return b.op("Mul", [g, b.op("Sigmoid", [g])])


def test_res_block_with_group_norm_matches_ort(tmp_path):
    """A Stable-Diffusion-style residual block over 32x32 maps (each channel's plane 4 KB): the
    GroupNorm+SiLU before each conv writes the blocked layout (op_def.cc
    schedule_to_blocked_rows), and the block's input, added after the last conv, is transposed
    to blocked on its own so that the conv keeps oneDNN's sum post-op
    (pass/fuse_operators.cc blocked_into_anchor_epilogue)."""
    rng = np.random.default_rng(11)
    b = Builder(rng)
    h = b.conv(group_norm_silu(b, "x", 64, 8), 64, 64, k=3)
    h = b.conv(group_norm_silu(b, h, 64, 8), 64, 64, k=3)
    out = b.op("Add", [h, "x"])
    path = tmp_path / "m.onnx"
    b.save(path, [1, 64, 32, 32], out)
    np.savez(tmp_path / "in.npz", x=rng.standard_normal((1, 64, 32, 32)).astype(np.float32))
    ref = ort_outputs(str(path), dict(np.load(tmp_path / "in.npz")))
    lines = run_kiln(["inspect", str(path), "--kernels"]).stdout.splitlines()
    last_conv = [ln for ln in lines if "KilnConv2dNCHWc" in ln][-1]
    assert "KilnLayoutToBlocked" not in last_conv, lines
    if kiln_has_dnnl():
        assert "[dnnl_conv]" in last_conv, lines
    assert_every_source_matches(tmp_path, path, ref, "res block")


def conv1d(b, x, cin, cout):
    w = b.rng.standard_normal((cout, cin, 1)) / np.sqrt(cin)
    return b.op("Relu", [b.op("Conv", [x, b.const(w), b.const(b.rng.standard_normal(cout) * 0.1)], kernel_shape=[1])])


@pytest.mark.parametrize("case", ["max1d", "max1d_keep", "mean2d", "max2d_neg", "max_channels"])
def test_global_reduce_of_blocked_matches_ort(tmp_path, case):
    """ReduceMax / ReduceMean over a conv's whole map (PointNet's max over points after 1-D
    convs, a mean over H and W) runs as the blocked global pool (transform_layout.cc
    sink_reduce), no transpose to plain; a reduction over the channels stays as it was."""
    rng = np.random.default_rng(13)
    b = Builder(rng)
    if case.startswith("max1d"):
        h = conv1d(b, conv1d(b, "x", 3, 32), 32, 64)
        out, x_shape = b.op("ReduceMax", [h], axes=[2], keepdims=int(case == "max1d_keep")), [2, 3, 200]
    else:
        h = b.op("Relu", [b.conv(b.op("Relu", [b.conv("x", 8, 32, k=3)]), 32, 48, k=3)])
        op, axes, keep = {"mean2d": ("ReduceMean", [2, 3], 1), "max2d_neg": ("ReduceMax", [-1, -2], 0),
                          "max_channels": ("ReduceMax", [1], 0)}[case]
        out, x_shape = b.op(op, [h], axes=axes, keepdims=keep), [2, 8, 20, 24]
    path = tmp_path / "m.onnx"
    b.save(path, x_shape, out)
    np.savez(tmp_path / "in.npz", x=rng.standard_normal(x_shape).astype(np.float32))
    ref = ort_outputs(str(path), dict(np.load(tmp_path / "in.npz")))
    kernels = run_kiln(["inspect", str(path), "--kernels"]).stdout
    if case == "max_channels":
        assert "GlobalMaxPoolNCHWc" not in kernels, kernels
    else:
        assert "GlobalMaxPoolNCHWc" in kernels or "GlobalAveragePoolNCHWc" in kernels, kernels
        assert "KilnLayoutFromBlocked\n" not in kernels, kernels
    assert_every_source_matches(tmp_path, path, ref, case)
