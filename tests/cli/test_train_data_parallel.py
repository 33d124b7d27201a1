"""`mpirun -np 2 kiln train ... --data-parallel` (docs/distributed.md) against one process, as
PyTorch tests DDP: 2 ranks x batch 16 train the same parameters as 1 process x batch 32 for 50
SGD and 50 Adam steps (the global batch i of the single process is the concatenation of the
ranks' batches i, with and without shuffling): every step's global loss and the final parameters
within 1e-6 relative (the gradient sums are grouped differently, so not bitwise). Checkpoints are written by rank 0 and resumed on every rank, bitwise.

The binary is $KILN_BIN, or <repo>/build/bin/kiln; mpiexec from PATH."""
import csv
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "distributed"))
import netns  # noqa: E402
from mpi_jobs import mpi_env, rank_pids  # noqa: E402
from test_train import KILN, blobs, initializers, mlp  # noqa: E402

MPIEXEC = shutil.which("mpiexec")
pytestmark = [pytest.mark.skipif(not KILN.is_file(), reason=f"kiln binary not built: {KILN}"),
              pytest.mark.skipif(MPIEXEC is None, reason="Open MPI (mpiexec) not installed")]


def train(tmp, name, model, data, batch, *extra, ranks=1, prefix=None):
    args = [str(KILN), "train", str(model), "--data", str(data), "--batch-size", str(batch), "--threads", "1",
            "--epochs", "2", "--seed", "3", "--export", str(tmp / f"{name}.onnx"), *map(str, extra)]
    if ranks > 1:
        args = [*(prefix or [MPIEXEC, "-n", str(ranks)]), *args, "--data-parallel"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=240, env=mpi_env())
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def assert_close(got, want):
    assert want.keys() == got.keys()
    for name in want:
        scale = float(np.max(np.abs(want[name])))
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6 * scale, err_msg=name)


def step_losses(csv_path):
    with open(csv_path) as f:
        return [float(row["train_loss"]) for row in csv.DictReader(f) if row["train_loss"]]


@pytest.mark.parametrize("optimizer,order", [("sgd", "--shuffle"), ("adam", "--no-shuffle")])
def test_two_ranks_train_as_one_process_with_twice_the_batch(tmp_path, optimizer, order):
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=804)  # 25 global batches + 4 dropped
    lr = "0.1" if optimizer == "sgd" else "0.01"
    train(tmp_path, "one", model, data, 32, "--optimizer", optimizer, "--lr", lr, order,
          "--metrics-csv", tmp_path / "one.csv")
    r = train(tmp_path, "two", model, data, 16, "--optimizer", optimizer, "--lr", lr, order,
              "--metrics-csv", tmp_path / "two.csv", ranks=2)
    assert "data-parallel: 2 ranks x batch 16 = 32 records per step" in r.stderr
    assert r.stderr.count("trained 50 steps") == 1  # rank 0 alone reports
    one_losses, two_losses = step_losses(tmp_path / "one.csv"), step_losses(tmp_path / "two.csv")
    assert len(one_losses) == len(two_losses) == 50
    np.testing.assert_allclose(two_losses, one_losses, rtol=1e-6, err_msg="a step's global loss")
    start, one, two = initializers(model), initializers(tmp_path / "one.onnx"), initializers(tmp_path / "two.onnx")
    assert any(np.max(np.abs(one[k] - start[k])) > 1e-2 for k in start)  # it did train
    assert_close(two, one)


def mlp_bn(path, seed=0):
    """x f32[N,4] -> Gemm(4->8) -> BatchNormalization -> Relu -> Gemm(8->3) -> logits."""
    rng = np.random.default_rng(seed)
    params = {"W1": rng.standard_normal((8, 4)) * 0.5, "b1": np.zeros(8), "gamma": np.ones(8), "beta": np.zeros(8),
              "rmean": np.zeros(8), "rvar": np.ones(8), "W2": rng.standard_normal((3, 8)) * 0.5, "b2": np.zeros(3)}
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], transB=1),
             helper.make_node("BatchNormalization", ["h", "gamma", "beta", "rmean", "rvar"], ["hn"], name="bn"),
             helper.make_node("Relu", ["hn"], ["r"]),
             helper.make_node("Gemm", ["r", "W2", "b2"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "mlp_bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3])],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in params.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]), str(path))
    return path


def test_sync_batch_norm_trains_as_one_process_with_twice_the_batch(tmp_path):
    """--sync-batch-norm: BatchNormalization over both ranks' rows, so parameters and running
    statistics follow the single process of batch 16; without it each rank's statistics are its
    own 8 rows' and they do not."""
    model, data = mlp_bn(tmp_path / "mlp_bn.onnx"), blobs(tmp_path / "blobs.npz", n=128)
    common = ["--optimizer", "sgd", "--lr", "0.1", "--no-shuffle"]
    train(tmp_path, "one", model, data, 16, *common)
    r = train(tmp_path, "sync", model, data, 8, *common, "--sync-batch-norm", ranks=2)
    assert "BatchNormalization statistics over the global batch" in r.stderr
    train(tmp_path, "local", model, data, 8, *common, ranks=2)
    one, sync, local = (initializers(tmp_path / f"{n}.onnx") for n in ("one", "sync", "local"))
    for name in one:
        np.testing.assert_allclose(sync[name], one[name], rtol=1e-4, atol=1e-5, err_msg=name)
    assert not np.allclose(local["rvar"], one["rvar"], rtol=1e-3)


def test_sync_batch_norm_needs_data_parallel(tmp_path):
    r = subprocess.run([str(KILN), "train", str(mlp_bn(tmp_path / "m.onnx")), "--data", "x.npz", "--sync-batch-norm"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--data-parallel" in r.stderr, r.stderr


def test_checkpoint_by_rank_zero_resumed_on_every_rank(tmp_path):
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=128)
    common = ["--optimizer", "adam", "--lr", "0.01"]
    train(tmp_path, "straight", model, data, 8, *common, ranks=2)
    ck = tmp_path / "ck"
    # Stop after the first epoch (--epochs 1), then continue to 2 with --resume on both ranks.
    first = [str(KILN), "train", str(model), "--data", str(data), "--batch-size", "8", "--threads", "1",
             "--epochs", "1", "--seed", "3", "--checkpoint-dir", str(ck), *common, "--data-parallel"]
    r = subprocess.run([MPIEXEC, "-n", "2", *first], capture_output=True, text=True, timeout=240, env=mpi_env())
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in ck.iterdir()) == ["checkpoint.kiln"]
    r = train(tmp_path, "resumed", model, data, 8, *common, "--checkpoint-dir", ck, "--resume", ranks=2)
    assert "resumed from" in r.stderr
    want, got = initializers(tmp_path / "straight.onnx"), initializers(tmp_path / "resumed.onnx")
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    # One process cannot continue a 2-rank run: the data position means something else.
    one = subprocess.run([str(KILN), "train", str(model), "--data", str(data), "--batch-size", "8", "--epochs", "2",
                          "--checkpoint-dir", str(ck), "--resume", *common], capture_output=True, text=True, timeout=240)
    assert one.returncode != 0
    assert "was trained by 2 data-parallel rank(s), this run has 1" in one.stderr


@pytest.mark.skipif(not netns.available(), reason="needs root and ip netns")
def test_two_ranks_across_network_namespaces(tmp_path):
    """The same equivalence with the gradients crossing a network stack (TCP over a veth pair)."""
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=128)
    train(tmp_path, "one", model, data, 16, "--optimizer", "adam", "--lr", "0.01")
    with netns.two_namespaces() as prefix:
        train(tmp_path, "two", model, data, 8, "--optimizer", "adam", "--lr", "0.01", ranks=2, prefix=prefix)
    assert_close(initializers(tmp_path / "two.onnx"), initializers(tmp_path / "one.onnx"))


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGSTOP"])
def test_a_lost_rank_ends_the_training_job(tmp_path, sig):
    """Rank 1 killed (the launcher notices) or stopped (only the heartbeat notices) mid-training:
    the job ends non-zero, naming rank 1, within 10 s of the signal (asserted loosely: 20 s)."""
    import signal
    import time
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=256)
    args = [MPIEXEC, "-n", "2", str(KILN), "train", str(model), "--data", str(data), "--batch-size", "8",
            "--threads", "1", "--epochs", "100000", "--log-every", "1", "--data-parallel"]
    env = mpi_env()
    env["KILN_DIST_HEARTBEAT_TIMEOUT"] = "3"
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        lines = []
        for line in proc.stdout:  # wait until training runs (steps being logged)
            lines.append(line)
            if "epoch 1/100000 step 5/" in line:
                break
        pids = rank_pids(proc.pid)
        assert 1 in pids, (pids, "".join(lines))
        os.kill(pids[1], getattr(signal, sig))
        t0 = time.monotonic()
        rest = proc.communicate(timeout=60)[0]
        seconds = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "".join(lines) + rest
    assert proc.returncode != 0, out[-2000:]
    assert ("lost rank 1" in out) or ("rank 1" in out and "exited on signal 9" in out), out[-2000:]
    if sig == "SIGSTOP":
        assert "lost rank 1: no heartbeat for" in out, out[-2000:]
    print(f"{sig}: the job ended {seconds:.1f} s after the signal")
    assert seconds < 20, (seconds, out[-2000:])
