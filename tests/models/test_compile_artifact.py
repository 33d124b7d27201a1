"""Compiled artifacts end to end: `kiln compile MODEL.onnx -o MODEL.kiln`, then the artifact run by
`kiln run MODEL.kiln` and by `kiln-run-artifact` (the program that links only libkiln_runtime),
each compared with ONNX Runtime on the same inputs; what `kiln inspect` shows of an artifact
against the ONNX model's own fields (read with the onnx package); and the errors: models an
artifact cannot hold, a missing --dim, an output in a missing directory, a truncated artifact.

kiln-run-artifact is looked up beside the kiln binary ($KILN_BIN, default build/bin/kiln).
The kernels come from the kernel cache ($KILN_CACHE_DIR): a second compile of a model compiles
nothing, so ResNet-50 costs its C compiles once per cache.
"""
import os
import re
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from kiln_helpers import (REPO, assert_matches_ort, kiln_bin, kiln_run_model, load_npz, make_models,
                          ort_outputs, run_kiln, KILN_TIMEOUT_S)
from test_cli_errors import assert_clean_error
from test_models_vs_ort import TOLERANCE

DIGITS = os.path.join(REPO, "models", "digits", "digits_cnn.onnx")


def run_artifact_bin():
    """Path of kiln-run-artifact (beside the kiln binary); fails (not skips) when missing."""
    path = os.path.join(os.path.dirname(kiln_bin()), "kiln-run-artifact")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"kiln-run-artifact not found at {path}: build it (ninja -C build kiln-run-artifact)",
                    pytrace=False)
    return path


def compile_model(model, out, dims=None, extra=()):
    """`kiln compile` that must succeed; returns its stdout."""
    args = ["compile", model, "-o", out]
    for k, v in (dims or {}).items():
        args += ["--dim", f"{k}={v}"]
    proc = run_kiln(args + list(extra))
    assert proc.returncode == 0, (f"kiln {' '.join(map(str, args))} exited {proc.returncode}\n"
                                  f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    assert os.path.isfile(out)
    return proc.stdout


def run_with_runtime_only(artifact, feed, out_dir):
    """kiln-run-artifact on `feed` (one .npy per input); returns ({name: array}, stdout)."""
    out_dir = str(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    args = [run_artifact_bin(), str(artifact), "--output-dir", out_dir, "--repeat", "2"]
    for name, value in feed.items():
        path = os.path.join(out_dir, f"input_{len(args)}.npy")
        np.save(path, value)
        args += ["--input", f"{name}={path}"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=KILN_TIMEOUT_S)
    assert proc.returncode == 0, f"{' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert re.search(r"load_ms=[0-9.]+", proc.stdout), proc.stdout
    outs = {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir)
            if f.endswith(".npy") and not f.startswith("input_")}
    return outs, proc.stdout


def check_artifact_against_ort(tmp_path, model, feed, label, dims=None, tolerance=None):
    """Compiles `model`, runs the artifact both ways on `feed`, compares each with ORT."""
    artifact = str(tmp_path / (os.path.basename(model)[:-5] + ".kiln"))
    compile_model(model, artifact, dims)
    inputs = str(tmp_path / "inputs.npz")
    np.savez(inputs, **feed)
    rtol, atol = tolerance or (1e-4, 1e-5)
    ref = ort_outputs(model, feed)
    outs, proc = kiln_run_model(artifact, inputs, str(tmp_path / "kiln_run"))
    assert_matches_ort(outs, ref, f"{label} (kiln run .kiln)", rtol, atol)
    outs, _ = run_with_runtime_only(artifact, feed, tmp_path / "runtime_only")
    assert_matches_ort(outs, ref, f"{label} (kiln-run-artifact)", rtol, atol)
    return artifact


def test_digits_artifact_matches_ort(tmp_path):
    images = load_npz(os.path.join(REPO, "models", "digits", "test_images.npz"))["image"][:8]
    check_artifact_against_ort(tmp_path, DIGITS, {"image": images}, "digits N=8", dims={"N": 8})


@pytest.mark.parametrize("name", ["mlp", "resnet18", "mobilenetv2_96", "bert_tiny"])
def test_test_model_artifact_matches_ort(models_dir, tmp_path, name):
    model = str(models_dir / f"{name}.onnx")
    feed = load_npz(str(models_dir / f"{name}_inputs.npz"))
    check_artifact_against_ort(tmp_path, model, feed, name, tolerance=TOLERANCE.get(name))


@pytest.fixture(scope="module")
def resnet50_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("resnet50")
    make_models.write_test_model("resnet50", str(out), check=False)
    return out


def test_resnet50_artifact_matches_ort_and_recompiles_from_the_cache(resnet50_dir, tmp_path):
    model = str(resnet50_dir / "resnet50.onnx")
    feed = load_npz(str(resnet50_dir / "resnet50_inputs.npz"))
    artifact = check_artifact_against_ort(tmp_path, model, feed, "resnet50", tolerance=TOLERANCE["resnet50"])
    # The constants are in the artifact: it is about the size of the ONNX file's weights.
    assert os.path.getsize(artifact) > 0.9 * os.path.getsize(model)
    # The first compile above filled the kernel cache: a second one runs no C compiler.
    again = compile_model(model, str(tmp_path / "again.kiln"))
    assert re.search(r"\(0 compiled now,", again), again


def test_second_compile_compiles_nothing(models_dir, tmp_path):
    model = str(models_dir / "resnet_block.onnx")
    compile_model(model, str(tmp_path / "a.kiln"))
    out = compile_model(model, str(tmp_path / "b.kiln"))
    assert re.search(r"\(0 compiled now, [1-9][0-9]* from the cache\)", out), out


def test_inspect_shows_what_the_artifact_records(tmp_path):
    artifact = str(tmp_path / "digits.kiln")
    compile_model(DIGITS, artifact, {"N": 2}, extra=["-O2"])
    proc = run_kiln(["inspect", artifact])
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    m = onnx.load(DIGITS)
    expected = {
        "source_model": "digits_cnn.onnx",
        "opt_level": "2",
        "dims": "N=2",
        "model.producer_name": m.producer_name,
        "model.graph_name": m.graph.name,
        "model.opset_import": f"ai.onnx:{m.opset_import[0].version}",
    }
    for key, value in expected.items():
        assert f"\n{key}: {value}\n" in text, f"expected '{key}: {value}' in:\n{text}"
    assert re.search(r"^producer: kiln \d", text, re.M), text
    assert "\ninput image: f32 [2,1,8,8]\n" in text, text
    kernels = re.findall(r"^kernel \d+: ", text, re.M)
    assert kernels and f"{len(kernels)} kernels" in text, text


def test_compiler_options_are_ignored_with_a_note_when_running_an_artifact(models_dir, tmp_path):
    artifact = str(tmp_path / "mlp.kiln")
    compile_model(str(models_dir / "mlp.onnx"), artifact)
    inputs = str(models_dir / "mlp_inputs.npz")
    outs, proc = kiln_run_model(artifact, inputs, str(tmp_path / "out"), extra=["-O1", "--kernels", "generated"])
    assert "note:" in proc.stderr and "-O" in proc.stderr and "--kernels" in proc.stderr, proc.stderr
    assert_matches_ort(outs, ort_outputs(str(models_dir / "mlp.onnx"), load_npz(inputs)), "mlp")


# ---- errors -------------------------------------------------------------------------------------

def save_model(tmp_path, name, nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_model_needing_the_interpreter_is_refused(tmp_path):
    model = save_model(tmp_path, "nonzero", [helper.make_node("NonZero", ["x"], ["idx"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
                       [helper.make_tensor_value_info("idx", TensorProto.INT64, [1, None])])
    out = tmp_path / "nonzero.kiln"
    proc = run_kiln(["compile", model, "-o", str(out)])
    assert_clean_error(proc, must_contain=("artifacts hold a compiled executable", "graph interpreter", "NonZero"))
    assert not out.exists()


def test_input_that_shapes_the_graph_is_refused(tmp_path):
    model = save_model(tmp_path, "reshape_by_input", [helper.make_node("Reshape", ["x", "shape"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                        helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    proc = run_kiln(["compile", model, "-o", str(tmp_path / "r.kiln")])
    assert_clean_error(proc, must_contain=("artifacts hold a compiled executable", "'shape'", "shapes the graph"))


def test_missing_dim_is_refused(tmp_path):
    proc = run_kiln(["compile", DIGITS, "-o", str(tmp_path / "digits.kiln")])
    assert_clean_error(proc, must_contain=("symbolic dimension 'N'", "--dim N=VALUE"))
    proc = run_kiln(["compile", DIGITS, "-o", str(tmp_path / "digits.kiln"), "--dim", "N=1", "--dim", "B=2"])
    assert_clean_error(proc, must_contain=("--dim B=2", "symbolic dimensions: N"))


def test_output_in_a_missing_directory_is_refused(tmp_path):
    target = tmp_path / "no" / "such" / "dir" / "digits.kiln"
    proc = run_kiln(["compile", DIGITS, "-o", str(target), "--dim", "N=1"])
    assert_clean_error(proc, must_contain=("does not exist", str(target.parent)))


def test_truncated_artifact_is_a_clean_error(models_dir, tmp_path):
    artifact = tmp_path / "mlp.kiln"
    compile_model(str(models_dir / "mlp.onnx"), str(artifact))
    data = artifact.read_bytes()
    inputs = str(models_dir / "mlp_inputs.npz")
    for cut in (len(data) // 2, len(data) - 1, 64):
        bad = tmp_path / f"cut_{cut}.kiln"
        bad.write_bytes(data[:cut])
        proc = run_kiln(["run", str(bad), "--inputs", inputs])
        assert_clean_error(proc)
        proc = subprocess.run([run_artifact_bin(), str(bad)], capture_output=True, text=True,
                              timeout=KILN_TIMEOUT_S)
        assert 0 < proc.returncode < 128 and proc.stderr.strip(), \
            f"kiln-run-artifact on a truncated artifact: exit {proc.returncode}\n{proc.stderr}"


# ---- symbolic dims: one artifact for every shape ----------------------------------------------

def save_symbolic_encoder(tmp_path, width=16, vocab=50, seed=4):
    """An attention-shaped encoder with batch and seq left symbolic: an embedding Gather, a
    projection, scores over seq with a Softmax, a context product and a mean over seq."""
    rng = np.random.default_rng(seed)

    def init(name, *shape):
        return onnx.numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.3, name)

    nodes = [
        helper.make_node("Gather", ["emb", "ids"], ["e"]),
        helper.make_node("MatMul", ["e", "w"], ["p"]),
        helper.make_node("Add", ["p", "b"], ["h"]),
        helper.make_node("Transpose", ["h"], ["ht"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["h", "ht"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "h"], ["ctx"]),
        helper.make_node("ReduceMean", ["ctx"], ["pooled"], axes=[1], keepdims=0),
    ]
    inits = [init("emb", vocab, width), init("w", width, width), init("b", width)]
    graph = helper.make_graph(
        nodes, "symbolic_encoder", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", width]),
         helper.make_tensor_value_info("ctx", TensorProto.FLOAT, ["batch", "seq", width])], initializer=inits)
    path = str(tmp_path / "symbolic_encoder.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_one_symbolic_artifact_runs_every_shape_in_the_runtime_only_process(tmp_path):
    model = save_symbolic_encoder(tmp_path)
    artifact = str(tmp_path / "encoder.kiln")
    compile_model(model, artifact)  # no --dim: a symbolic compile
    shown = run_kiln(["inspect", artifact]).stdout
    assert "symbolic_dims: batch,seq" in shown, shown
    assert "input ids: i64 [batch,seq]" in shown, shown
    rng = np.random.default_rng(5)
    for batch, seq in [(1, 7), (3, 64), (8, 128), (2, 1)]:
        feed = {"ids": rng.integers(0, 50, (batch, seq)).astype(np.int64)}
        ref = ort_outputs(model, feed)
        outs, _ = run_with_runtime_only(artifact, feed, tmp_path / f"rt_{batch}_{seq}")
        assert_matches_ort(outs, ref, f"symbolic artifact batch {batch} seq {seq}", 1e-4, 1e-5)


def test_symbolic_artifact_wrong_input_names_the_input_and_dim(tmp_path):
    model = save_symbolic_encoder(tmp_path)
    artifact = str(tmp_path / "encoder.kiln")
    compile_model(model, artifact)
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((2, 3, 4), np.int64))
    proc = subprocess.run([run_artifact_bin(), artifact, "--input", f"ids={bad}"], capture_output=True, text=True,
                          timeout=KILN_TIMEOUT_S)
    assert_clean_error(proc, must_contain=("input 'ids'", "i64[batch,seq]", "i64[2,3,4]"))


def test_symbolic_artifact_keeps_static_dims_given_with_dim(tmp_path):
    model = save_symbolic_encoder(tmp_path)
    artifact = str(tmp_path / "encoder_b2.kiln")
    compile_model(model, artifact, dims={"batch": 2})  # batch bound, seq symbolic
    shown = run_kiln(["inspect", artifact]).stdout
    assert "input ids: i64 [2,seq]" in shown, shown
    feed = {"ids": np.random.default_rng(6).integers(0, 50, (2, 33)).astype(np.int64)}
    outs, _ = run_with_runtime_only(artifact, feed, tmp_path / "rt")
    assert_matches_ort(outs, ort_outputs(model, feed), "batch=2 artifact at seq 33", 1e-4, 1e-5)


def test_real_minilm_as_one_symbolic_artifact(tmp_path):
    """The real all-MiniLM-L6-v2 (`/usr/bin/python3 scripts/export_minilm.py` exports it; skipped
    when absent): one artifact, three shapes, in the runtime-only process, against ONNX Runtime."""
    cache = os.environ.get("KILN_MINILM_REAL_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kiln",
                                                                   "models", "minilm-real")
    model = os.path.join(cache, "model.onnx")
    if not os.path.isfile(model):
        pytest.skip(f"no real MiniLM export at {model} (scripts/export_minilm.py)")
    artifact = str(tmp_path / "minilm.kiln")
    compile_model(model, artifact)
    rng = np.random.default_rng(7)
    for batch, seq in [(1, 7), (3, 64), (8, 128)]:
        mask = np.ones((batch, seq), np.int64)
        mask[0, (seq + 1) // 2:] = 0
        feed = {"input_ids": rng.integers(0, 30000, (batch, seq)).astype(np.int64), "attention_mask": mask,
                "token_type_ids": np.zeros((batch, seq), np.int64)}
        outs, _ = run_with_runtime_only(artifact, feed, tmp_path / f"rt_{batch}_{seq}")
        assert_matches_ort(outs, ort_outputs(model, feed), f"MiniLM artifact {batch}x{seq}", 1e-4, 1e-5)
