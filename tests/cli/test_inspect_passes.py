"""`kiln inspect` and the pass pipeline: -O levels, --print-after(-all), --kernels, and the
errors for a bad level or pass name. The model is built here with onnx.helper: Conv ->
BatchNormalization -> Relu -> Add(skip) -> Identity, whose optimized form is known from the
ops' definitions (BN folds into the conv, the Identity disappears, Conv+Relu+Add fuse)."""
import os
import pathlib
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
KILN = pathlib.Path(os.environ.get("KILN_BIN", REPO / "build" / "bin" / "kiln"))
pytestmark = pytest.mark.skipif(not KILN.is_file(), reason=f"kiln binary not built: {KILN}")

PASSES = ["infer-shapes", "fuse-qdq", "lower-einsum", "simplify-algebra", "fold-constants", "fold-batch-norm",
          "eliminate-common-subexpressions", "eliminate-dead-code", "fuse-long-attention", "polyphase-conv-transpose",
          "lift-conv-1d", "transform-layout",
          "pack-matmul-weights",
          "fuse-operators"]


def kiln(*args):
    return subprocess.run([str(KILN), *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    rng = np.random.default_rng(0)
    c = 4
    inits = [numpy_helper.from_array(rng.standard_normal((c, c, 3, 3)).astype(np.float32), "w")]
    for name in ("scale", "bias", "mean"):
        inits.append(numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), name))
    inits.append(numpy_helper.from_array(rng.uniform(0.5, 2, c).astype(np.float32), "var"))
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"]),
        helper.make_node("Relu", ["b"], ["r"]),
        helper.make_node("Add", ["r", "x"], ["a"]),
        helper.make_node("Identity", ["a"], ["y"]),
    ]
    t = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "g", [t("x", TensorProto.FLOAT, [1, c, 6, 6])],
                          [t("y", TensorProto.FLOAT, [1, c, 6, 6])], inits)
    path = tmp_path_factory.mktemp("m") / "block.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def kernel_lines(model, level):
    r = kiln("inspect", model, f"-O{level}", "--kernels")
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()


def test_kernels_per_level(model):
    o0 = kernel_lines(model, 0)
    assert o0[-1] == "5 kernels", o0
    for level in (2, 3):  # BN folded, Identity gone, the rest one fused kernel (4 channels: unblocked)
        lines = kernel_lines(model, level)
        assert len(lines) == 2 and lines[0].startswith("kernel 0: Conv+Relu+Add") and lines[1] == "1 kernels", lines


def test_print_after_all_shows_every_pass(model):
    r = kiln("inspect", model, "--print-after-all")
    assert r.returncode == 0, r.stderr
    shown = [line.split("pass ", 1)[1] for line in r.stdout.splitlines() if line.startswith("// IR after pass ")]
    assert set(shown) == set(PASSES), shown
    after_bn = r.stdout.split("// IR after pass fold-batch-norm")[1].split("// IR after pass")[0]
    assert "BatchNormalization" not in after_bn
    final = r.stdout.split("// IR after the -O3 pipeline")[1].split("// passes")[0]
    assert "Identity" not in final and "# group=0" in final, final


def test_print_after_one_pass_and_unknown_names(model):
    r = kiln("inspect", model, "--print-after", "simplify-algebra")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("// IR after pass ") == 1
    bad = kiln("inspect", model, "--print-after", "fold-everything")
    assert bad.returncode == 1 and "no pass named 'fold-everything'" in bad.stderr, bad.stderr
    assert "fuse-operators" in bad.stderr
    level = kiln("inspect", model, "-O7")
    assert level.returncode == 2, level.stderr


def test_levels_agree_numerically(model, tmp_path):
    x = np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    outs = {}
    for level in (0, 3):
        d = tmp_path / f"o{level}"
        r = kiln("run", model, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", d, "--repeat", "1", f"-O{level}")
        assert r.returncode == 0, r.stderr
        outs[level] = np.load(d / "y.npy")
    np.testing.assert_allclose(outs[3], outs[0], rtol=1e-5, atol=1e-5)


def test_internal_ops_are_not_importable(tmp_path):
    """The blocked-layout ops exist only between passes; a model naming one is rejected."""
    t = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("KilnLayoutToBlocked", ["x"], ["y"])], "g",
                          [t("x", TensorProto.FLOAT, [1, 16, 2, 2])], [t("y", TensorProto.FLOAT, [1, 1, 2, 2, 16])])
    path = tmp_path / "internal.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    r = kiln("run", path, "--repeat", "1")
    assert r.returncode == 1 and "Kiln-internal op" in r.stderr, r.stderr
