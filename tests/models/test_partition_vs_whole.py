"""Partitioned inference (src/distributed/partition.h, docs/distributed.md "Partitioned graphs"):
every test model split over 2 ranks and run rank by rank in one process (`kiln run --partition 2`,
transfers through the in-memory rendezvous) must give the whole model's `kiln run` outputs bit for
bit, and match ONNX Runtime as the whole model does. Two splits per model: the cost-balanced one,
and an annotated one (`--stage NODE=1` on a Conv/MatMul/Gemm a third of the way through the
graph; the nodes after it inherit rank 1 from their producers).
"""
import os
import re
import shutil
import subprocess
import sys

import onnx
import onnx.numpy_helper
import numpy as np
import pytest

from kiln_helpers import (KILN_TIMEOUT_S, assert_matches_ort, kiln_bin, kiln_run_model, load_npz, make_models,
                          ort_outputs, run_kiln)
from test_models_vs_ort import TOLERANCE, _model_files

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "distributed"))
import netns  # noqa: E402
from mpi_jobs import mpi_env, rank_pids  # noqa: E402


@pytest.fixture(autouse=True)
def _rule_only_kernel_choice(monkeypatch):
    """The kernel choice by the rule alone (KILN_KERNEL_PROBE=0) in the whole and the partitioned
    compiles: the compile-time probe measures in each compile, and its verdicts could differ
    between the two (seen in CI: mobilenetv2_96's balanced split off by 6.9e-5 with the probe on,
    bitwise equal by the rule alone on the same kernel cache; which unit differed was not traced,
    docs/distributed.md). The property tested is the partition's, given the same kernels."""
    monkeypatch.setenv("KILN_KERNEL_PROBE", "0")


def _third_node(model):
    """The first Conv/MatMul/Gemm from a third of the way on: the stage map names nodes of the
    rewritten graph (a BatchNormalization folded into its Conv is gone), and these survive; the
    last node for a model without them."""
    nodes = [n for n in onnx.load(model, load_external_data=False).graph.node if n.op_type != "Constant"]
    return next((n.name for n in nodes[len(nodes) // 3:] if n.op_type in ("Conv", "MatMul", "Gemm")),
                nodes[-1].name)


def _assert_bitwise(got, whole, label):
    assert sorted(got) == sorted(whole), f"{label}: outputs {sorted(got)} vs whole {sorted(whole)}"
    for name, ref in whole.items():
        assert got[name].dtype == ref.dtype and got[name].shape == ref.shape, f"{label}: {name}"
        same = got[name].tobytes() == ref.tobytes()
        if not same:
            diff = np.abs(got[name].astype(np.float64) - ref.astype(np.float64)).max()
            pytest.fail(f"{label}: output {name} differs from the whole model's run (max |diff| {diff:g})")


@pytest.mark.parametrize("name", list(make_models.TEST_MODELS))
def test_partitioned_run_equals_whole_model(models_dir, tmp_path, name):
    model, inputs = _model_files(models_dir, name)
    whole, _ = kiln_run_model(model, inputs, str(tmp_path / "whole"), extra=["--repeat", "1"])
    ref = ort_outputs(model, load_npz(inputs))
    rtol, atol = TOLERANCE.get(name, (1e-4, 1e-5))
    for label, extra in [("balanced", []), ("annotated", ["--stage", f"{_third_node(model)}=1"])]:
        got, proc = kiln_run_model(model, inputs, str(tmp_path / label),
                                   extra=["--repeat", "1", "--partition", "2"] + extra)
        m = re.search(r"partitioned over 2 ranks \(.*\): (\d+) transfers", proc.stdout)
        assert m and int(m.group(1)) > 0, f"{name} {label}: nothing crosses the cut\n{proc.stdout}"
        _assert_bitwise(got, whole, f"{name} {label}")
        assert_matches_ort(got, ref, f"{name} partitioned {label}", rtol, atol)


def test_inspect_partition_prints_ranks_and_transfers(models_dir):
    model, _ = _model_files(models_dir, "small_cnn")
    proc = run_kiln(["inspect", model, "--partition", "2"])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "// rank 0:" in out and "// rank 1:" in out
    assert "KilnSend(" in out and "KilnRecv()" in out
    transfers = [l for l in out.splitlines() if l.startswith("transfer ")]
    assert transfers, out
    # type, bytes and key: the bytes are the type's element count times 4 (f32); the key names
    # source rank/incarnation, destination, tensor and frame:iteration (no step until a run).
    m = re.fullmatch(r"transfer f32\[([\d,]+)\] (\d+) bytes: 0/1 -> 1 '(.+)' frame 0:0", transfers[0])
    assert m, transfers[0]
    assert int(m.group(2)) == 4 * int(np.prod([int(d) for d in m.group(1).split(",")]))
    assert f"KilnRecv() {{from=0, key=\"0/1 -> 1 '{m.group(3)}' frame 0:0\"}}" in out


def test_stage_naming_no_node_is_an_error(models_dir):
    model, _ = _model_files(models_dir, "mlp")
    proc = run_kiln(["inspect", model, "--partition", "2", "--stage", "no_such_node=1"])
    assert proc.returncode != 0
    assert "no_such_node" in proc.stderr and "no node" in proc.stderr


def test_kiln_rank_attribute_places_nodes(tmp_path):
    """An ONNX node attribute `kiln.rank` places its node (every op accepts it); the nodes after
    it inherit its rank (the Add, the MatMul's fused epilogue, with it). The split run equals the
    whole run and numpy."""
    from onnx import TensorProto, helper
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["m2"], name="mm2", **{"kiln.rank": 1}),
             helper.make_node("Add", ["m2", "bias"], ["y"], name="add")]
    rng = np.random.default_rng(5)
    w = rng.standard_normal((8, 6)).astype(np.float32)
    w2 = rng.standard_normal((6, 5)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    graph = helper.make_graph(nodes, "ranked", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])],
                              [onnx.numpy_helper.from_array(a, n) for a, n in [(w, "w"), (w2, "w2"), (bias, "bias")]])
    model = str(tmp_path / "ranked.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    inputs = str(tmp_path / "in.npz")
    np.savez(inputs, x=x)
    proc = run_kiln(["inspect", model, "--partition", "2"])
    assert proc.returncode == 0, proc.stderr
    rank1 = proc.stdout.split("// rank 1:")[1]
    assert 'name="mm2"' in rank1 and 'name="add"' in rank1 and 'name="mm"' not in rank1
    assert "kiln.rank" not in proc.stdout  # the split drops the annotation
    whole, _ = kiln_run_model(model, inputs, str(tmp_path / "whole"), extra=["--repeat", "1"])
    got, _ = kiln_run_model(model, inputs, str(tmp_path / "split"), extra=["--repeat", "1", "--partition", "2"])
    _assert_bitwise(got, whole, "kiln.rank")
    h = np.maximum(x.astype(np.float64) @ w.astype(np.float64), 0)
    np.testing.assert_allclose(got["y"], h @ w2.astype(np.float64) + bias, rtol=1e-5, atol=1e-5)


# ---- over MPI: one process per rank (mpirun -np 2 kiln run --partition 2) ------------------------

MPIEXEC = shutil.which("mpiexec")
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="Open MPI (mpiexec) not installed (scripts/install_deps.sh)")


def _mpi_run(model, inputs, out_dir, extra=(), prefix=None):
    """`mpiexec -n 2 kiln run --partition 2`; `prefix`: another mpiexec command (netns.py's)."""
    args = [*(prefix or [MPIEXEC, "-n", "2"]), kiln_bin(), "run", model, "--inputs", inputs, "--output-dir", out_dir,
            "--threads", "1", "--partition", "2", *extra]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=KILN_TIMEOUT_S, env=mpi_env())
    assert proc.returncode == 0, f"{' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir) if f.endswith(".npy")}, proc


@needs_mpi
@pytest.mark.parametrize("name", list(make_models.TEST_MODELS))
def test_partitioned_run_over_mpi_equals_whole_model(models_dir, tmp_path, name):
    """Each rank in its own process, the transfers and the outputs over MPI (the rendezvous of
    src/distributed/rendezvous.h): bit for bit the whole model's outputs, for the cost-balanced
    and the annotated split."""
    model, inputs = _model_files(models_dir, name)
    whole, _ = kiln_run_model(model, inputs, str(tmp_path / "whole"), extra=["--repeat", "1", "--threads", "1"])
    for label, extra in [("balanced", []), ("annotated", ["--stage", f"{_third_node(model)}=1"]),
                         ("replicated", ["--dispatch", "replicated"])]:
        got, proc = _mpi_run(model, inputs, str(tmp_path / label), ["--repeat", "2", *extra])
        assert "one MPI process each" in proc.stdout, proc.stdout
        _assert_bitwise(got, whole, f"{name} over MPI, {label}")


def _mpmd(rank0, rank1, env=None):
    """mpiexec with one command line per rank (Open MPI's MPMD form) and per-rank variables."""
    cmd = [MPIEXEC, "-n", "1", *rank0, ":", "-n", "1"]
    for k, v in (env or {}).items():
        cmd += ["-x", f"{k}={v}"]
    return subprocess.run(cmd + rank1, capture_output=True, text=True, timeout=KILN_TIMEOUT_S, env=mpi_env())


@needs_mpi
def test_the_master_ships_the_worker_its_graph_and_inputs(models_dir, tmp_path):
    """Master and workers: rank 1 is given neither the model nor the inputs (paths that do not
    exist): rank 0 partitions, ships rank 1 its graph (weights as tensors) and the inputs it reads,
    orders the runs ahead, and the outputs are the whole model's bit for bit."""
    model, inputs = _model_files(models_dir, "resnet_block")
    whole, _ = kiln_run_model(model, inputs, str(tmp_path / "whole"), extra=["--repeat", "1", "--threads", "1"])
    common = ["--threads", "1", "--partition", "2", "--repeat", "3"]
    missing = str(tmp_path / "nowhere")
    out = str(tmp_path / "master")
    proc = _mpmd([kiln_bin(), "run", model, "--inputs", inputs, "--output-dir", out, *common],
                 [kiln_bin(), "run", missing + ".onnx", "--inputs", missing + ".npz", *common])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}
    _assert_bitwise(got, whole, "resnet_block, the worker's graph shipped by the master")


@needs_mpi
def test_a_failed_worker_is_reported_by_the_master(models_dir, tmp_path):
    """Rank 1's compiler is broken (KILN_CC=false, an empty kernel cache of its own): the worker
    reports the error to the master, and the job ends non-zero with the master's message naming
    rank 1 and the compiler's failure, not a hang."""
    model, inputs = _model_files(models_dir, "small_cnn")
    common = [kiln_bin(), "run", model, "--inputs", inputs, "--threads", "1", "--partition", "2"]
    proc = _mpmd(common, common, env={"KILN_CC": "false", "KILN_CACHE_DIR": str(tmp_path / "rank1_cache")})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "worker rank 1 failed" in out, out[-3000:]
    assert "false" in out.split("worker rank 1 failed", 1)[1], out[-3000:]


@needs_mpi
def test_partition_count_must_match_the_job(models_dir, tmp_path):
    model, inputs = _model_files(models_dir, "mlp")
    args = [MPIEXEC, "-n", "2", kiln_bin(), "run", model, "--inputs", inputs, "--partition", "3"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=KILN_TIMEOUT_S, env=mpi_env())
    assert proc.returncode != 0
    assert "--partition 3 under mpirun needs 3 processes, the job has 2" in proc.stderr, proc.stderr


@needs_mpi
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGSTOP"])
def test_a_lost_rank_ends_the_partitioned_run(models_dir, tmp_path, sig):
    """Rank 1 killed (the launcher notices) or stopped (alive to the launcher: only the heartbeat
    notices) while the ranks run steps: the job exits non-zero naming rank 1 within 10 s of the
    signal (heartbeat timeout 3 s here)."""
    import signal
    import time
    model, inputs = _model_files(models_dir, "small_cnn")
    args = [MPIEXEC, "-n", "2", kiln_bin(), "run", model, "--inputs", inputs, "--threads", "1", "--partition", "2",
            "--repeat", "1000000"]
    env = mpi_env()
    env["KILN_DIST_HEARTBEAT_TIMEOUT"] = "3"
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        pids, deadline = {}, time.monotonic() + 60
        while 1 not in pids and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            pids = rank_pids(proc.pid)
        assert 1 in pids, f"rank 1 never started: {pids}"
        time.sleep(2)  # past loading: the ranks are running steps
        os.kill(pids[1], getattr(signal, sig))
        t0 = time.monotonic()
        out = proc.communicate(timeout=60)[0]
        seconds = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0, out[-2000:]
    assert ("lost rank 1" in out) or ("rank 1" in out and "exited on signal 9" in out), out[-2000:]
    if sig == "SIGSTOP":
        assert "lost rank 1: no heartbeat for" in out, out[-2000:]
    assert seconds < 10, f"took {seconds:.1f} s to end after rank 1 was lost\n{out[-2000:]}"


def _symbolic_batch_mlp(path, seed=8):
    """x[batch, 64] -> MatMul -> Relu -> MatMul -> Softmax, the batch symbolic (microbatches cut it)."""
    rng = np.random.default_rng(seed)
    w1 = onnx.numpy_helper.from_array(rng.standard_normal((64, 96)).astype(np.float32) * 0.2, "w1")
    w2 = onnx.numpy_helper.from_array(rng.standard_normal((96, 10)).astype(np.float32) * 0.2, "w2")
    nodes = [onnx.helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             onnx.helper.make_node("Relu", ["h"], ["r"], name="relu"),
             onnx.helper.make_node("MatMul", ["r", "w2"], ["logits"], name="mm2"),
             onnx.helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1)]
    graph = onnx.helper.make_graph(
        nodes, "batch_mlp", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 64])],
        [onnx.helper.make_tensor_value_info("probs", onnx.TensorProto.FLOAT, ["batch", 10])], initializer=[w1, w2])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), path)


@needs_mpi
def test_pipeline_microbatches_over_mpi(tmp_path):
    """--microbatches 4 over 2 ranks (GPipe forward): the inputs cut along the batch, each part a
    step; over MPI bit for bit the in-process pipeline and the unpartitioned model run on the whole
    batch, and ONNX Runtime's outputs."""
    model = str(tmp_path / "batch_mlp.onnx")
    _symbolic_batch_mlp(model)
    feed = {"x": np.random.default_rng(9).standard_normal((8, 64)).astype(np.float32)}
    inputs = str(tmp_path / "in.npz")
    np.savez(inputs, **feed)
    extra = ["--dim", "batch=8", "--microbatches", "4", "--stage", "mm2=1"]
    local, proc = kiln_run_model(model, inputs, str(tmp_path / "local"), extra=["--partition", "2", *extra])
    assert "4 microbatches per run" in proc.stdout, proc.stdout
    over_mpi, _ = _mpi_run(model, inputs, str(tmp_path / "mpi"), extra)
    _assert_bitwise(over_mpi, local, "batch_mlp pipeline over MPI")
    # The whole batch in one process, not cut: a row's result does not depend on the batch it is in.
    whole, _ = kiln_run_model(model, inputs, str(tmp_path / "whole"), extra=["--dim", "batch=8", "--threads", "1"])
    _assert_bitwise(over_mpi, whole, "batch_mlp pipeline vs the whole batch in one process")
    assert_matches_ort(over_mpi, ort_outputs(model, feed), "batch_mlp pipeline", 1e-4, 1e-6)


def test_microbatches_need_a_symbolic_batch_that_they_divide(models_dir, tmp_path):
    model = str(tmp_path / "batch_mlp.onnx")
    _symbolic_batch_mlp(model)
    proc = run_kiln(["run", model, "--dim", "batch=6", "--partition", "2", "--microbatches", "4"])
    assert proc.returncode != 0 and "--microbatches 4 does not divide batch=6" in proc.stderr, proc.stderr
    static, _ = _model_files(models_dir, "mlp")
    proc = run_kiln(["run", static, "--partition", "2", "--microbatches", "2"])
    assert proc.returncode != 0 and "must be one symbolic dim" in proc.stderr, proc.stderr
    proc = run_kiln(["run", model, "--dim", "batch=8", "--microbatches", "2"])
    assert proc.returncode != 0 and "--microbatches goes with --partition" in proc.stderr, proc.stderr


@needs_mpi
@pytest.mark.skipif(not netns.available(), reason="needs root and ip netns")
def test_partitioned_run_across_network_namespaces(models_dir, tmp_path):
    """The ranks in two network namespaces (TCP over a veth pair, tests/distributed/netns.py): a
    CNN's cost-balanced split, and the 4-microbatch pipeline, bit for bit the single-process runs."""
    model, inputs = _model_files(models_dir, "resnet_block")
    whole, _ = kiln_run_model(model, inputs, str(tmp_path / "whole"), extra=["--repeat", "1", "--threads", "1"])
    mlp = str(tmp_path / "batch_mlp.onnx")
    _symbolic_batch_mlp(mlp)
    mlp_inputs = str(tmp_path / "mlp_in.npz")
    np.savez(mlp_inputs, x=np.random.default_rng(10).standard_normal((8, 64)).astype(np.float32))
    pipe = ["--dim", "batch=8", "--microbatches", "4", "--stage", "mm2=1"]
    local, _ = kiln_run_model(mlp, mlp_inputs, str(tmp_path / "local"), extra=["--partition", "2", *pipe])
    with netns.two_namespaces() as prefix:
        got, _ = _mpi_run(model, inputs, str(tmp_path / "cnn"), ["--repeat", "2"], prefix=prefix)
        piped, _ = _mpi_run(mlp, mlp_inputs, str(tmp_path / "mlp"), pipe, prefix=prefix)
    _assert_bitwise(got, whole, "resnet_block across namespaces")
    _assert_bitwise(piped, local, "batch_mlp pipeline across namespaces")
