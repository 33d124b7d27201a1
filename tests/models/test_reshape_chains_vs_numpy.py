"""Reshape/Transpose chains fused with Slice/Concat/Add, against numpy: ShuffleNetV2's channel
shuffle (Concat -> Reshape [n, g, c/g, h, w] -> Transpose -> Reshape) at the sizes of its stages,
a shuffle fed by Slices of the previous one, DepthToSpace written as Reshape/Transpose, and a
Flatten of a transposed tensor. These kernels are scheduled with their leading axes as loops
(op_def.cc reshape_rows_split), so the reshape index arithmetic is folded per row; the cases
cover trailing extents that are not multiples of the vector width (14, 7, 5) and odd channel
counts. Exact: the kernels only move data (and add)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import kiln_run_model, run_kiln


def _const(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _shuffle(nodes, inits, x, c, h, w, tag, groups=2):
    """Channel shuffle of x [1, c, h, w] in `groups` groups (torchvision's channel_shuffle)."""
    inits += [_const(f"s1_{tag}", [1, groups, c // groups, h, w]), _const(f"s2_{tag}", [1, c, h, w])]
    nodes += [helper.make_node("Reshape", [x, f"s1_{tag}"], [f"r1_{tag}"]),
              helper.make_node("Transpose", [f"r1_{tag}"], [f"t_{tag}"], perm=[0, 2, 1, 3, 4]),
              helper.make_node("Reshape", [f"t_{tag}", f"s2_{tag}"], [f"y_{tag}"])]
    return f"y_{tag}"


def _ref_shuffle(x, groups=2):
    n, c, h, w = x.shape
    return x.reshape(n, groups, c // groups, h, w).transpose(0, 2, 1, 3, 4).reshape(n, c, h, w)


CASES = [(116, 28, 28), (232, 14, 14), (464, 7, 7), (30, 5, 9)]


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reshape_chains")
    rng = np.random.default_rng(3)
    nodes, inputs, outputs, inits, feed, refs = [], [], [], [], {}, {}

    def add_input(name, shape):
        feed[name] = rng.standard_normal(shape).astype(np.float32)
        inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return feed[name]

    def add_output(name, ref):
        refs[name] = ref
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(ref.shape)))

    for c, h, w in CASES:
        tag = f"{c}x{h}x{w}"
        a = add_input(f"a_{tag}", (1, c // 2, h, w))
        b = add_input(f"b_{tag}", (1, c // 2, h, w))
        nodes.append(helper.make_node("Concat", [f"a_{tag}", f"b_{tag}"], [f"cat_{tag}"], axis=1))
        y = _shuffle(nodes, inits, f"cat_{tag}", c, h, w, tag)
        shuffled = _ref_shuffle(np.concatenate([a, b], axis=1))
        # The next unit's split of the shuffled tensor (Slice) plus a branch, shuffled again.
        inits += [_const(f"st_{tag}", [0]), _const(f"mid_{tag}", [c // 2]), _const(f"end_{tag}", [c]),
                  _const(f"ax_{tag}", [1])]
        nodes += [helper.make_node("Slice", [y, f"st_{tag}", f"mid_{tag}", f"ax_{tag}"], [f"lo_{tag}"]),
                  helper.make_node("Slice", [y, f"mid_{tag}", f"end_{tag}", f"ax_{tag}"], [f"hi_{tag}"]),
                  helper.make_node("Add", [f"hi_{tag}", f"hi_{tag}"], [f"hi2_{tag}"]),
                  helper.make_node("Concat", [f"lo_{tag}", f"hi2_{tag}"], [f"cat2_{tag}"], axis=1)]
        y2 = _shuffle(nodes, inits, f"cat2_{tag}", c, h, w, tag + "_2")
        add_output(y, shuffled)
        add_output(y2, _ref_shuffle(np.concatenate([shuffled[:, :c // 2], 2 * shuffled[:, c // 2:]], axis=1)))

    # DepthToSpace (DCR) as Reshape/Transpose/Reshape, block 2, and a Flatten of a transpose.
    d = add_input("d", (1, 36, 13, 11))
    inits += [_const("d1", [1, 2, 2, 9, 13, 11]), _const("d2", [1, 9, 26, 22])]
    nodes += [helper.make_node("Reshape", ["d", "d1"], ["d_r"]),
              helper.make_node("Transpose", ["d_r"], ["d_t"], perm=[0, 3, 4, 1, 5, 2]),
              helper.make_node("Reshape", ["d_t", "d2"], ["d2s"])]
    add_output("d2s", d.reshape(1, 2, 2, 9, 13, 11).transpose(0, 3, 4, 1, 5, 2).reshape(1, 9, 26, 22))
    f = add_input("f", (2, 17, 6, 40))
    nodes += [helper.make_node("Transpose", ["f"], ["f_t"], perm=[0, 2, 3, 1]),
              helper.make_node("Flatten", ["f_t"], ["flat"], axis=2)]
    add_output("flat", f.transpose(0, 2, 3, 1).reshape(2 * 6, 40 * 17))

    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = tmp / "chains.onnx"
    onnx.save(model, str(path))
    np.savez(tmp / "in.npz", **feed)
    return tmp, path, refs


@pytest.mark.parametrize("threads", [1, 2])
def test_reshape_chains_match_numpy(chains, threads):
    tmp, model, refs = chains
    out = tmp / f"out{threads}"
    out.mkdir()
    outs, _ = kiln_run_model(str(model), str(tmp / "in.npz"), str(out),
                             extra=["--repeat", "1", "--threads", str(threads)])
    for name, ref in refs.items():
        np.testing.assert_array_equal(outs[name], ref, err_msg=name)


def test_channel_shuffle_kernel_keeps_its_channel_loop(chains):
    """The shuffle's kernel loops over channels with the spatial extent inside (not one flat loop
    of div/mod per element)."""
    _, model, _ = chains
    proc = run_kiln(["inspect", str(model)])
    assert proc.returncode == 0, proc.stderr
    loops = [ln for ln in proc.stdout.splitlines() if "for " in ln and "in 0..116 parallel" in ln]
    assert loops, "no parallel loop over the 116 channels of the first shuffle"
