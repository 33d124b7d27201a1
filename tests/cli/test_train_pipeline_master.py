"""`kiln train --pipeline-parallel --dispatch master` (docs/distributed.md, "Master and workers
for training"): rank 0 alone reads the model and the data, builds every stage and ships it, feeds
the stages and orders each step; the workers are given paths that do not exist (Open MPI's
one-command-line-per-rank form), so they cannot read the model, the data or a checkpoint.

- The master-dispatched run ends with weights bitwise equal to today's run where every rank reads
  the model (`--dispatch replicated`), with the same metrics rows: 2 ranks (SGD with shuffling and
  held-out evaluation; Adam with --rematerialize, --clip-norm and checkpoints every 5 steps),
  3 ranks under 1F1B (a middle stage without parameters), and 4 ranks as 2 replicas x 2 stages.
- An independent reference: the numpy float64 SGD of tests/training/test_pipeline_parallel_api.py
  (the two-layer MLP on the whole batch): the master-dispatched weights within rtol 1e-5.
- A run resumed from a checkpoint under master dispatch (the master reads the file and sends each
  worker its stage's tensors) ends bitwise equal to the uninterrupted run.
- A worker that cannot compile (KILN_CC=false on rank 1), or whose step throws (its command line
  names another optimizer than the master's), is reported by the master: the job ends non-zero
  with `worker rank 1 failed: ...`, within seconds, not a hang.

The binary is $KILN_BIN, or <repo>/build/bin/kiln; mpiexec from PATH."""
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "training"))
from test_train import KILN, blobs, initializers, mlp, read_csv  # noqa: E402
from test_train_data_parallel import mpi_env  # noqa: E402
import test_pipeline_parallel_api as api  # noqa: E402  (the numpy float64 reference)

MPIEXEC = shutil.which("mpiexec")
pytestmark = [pytest.mark.skipif(not KILN.is_file(), reason=f"kiln binary not built: {KILN}"),
              pytest.mark.skipif(MPIEXEC is None, reason="Open MPI (mpiexec) not installed")]


def train_args(model, data, out, *extra):
    return [str(KILN), "train", str(model), "--data", str(data), "--threads", "1", "--export", str(out),
            "--pipeline-parallel", *map(str, extra)]


def replicated(tmp, name, model, data, ranks, *extra):
    args = [MPIEXEC, "-n", str(ranks), *train_args(model, data, tmp / f"{name}.onnx", *extra, "--dispatch",
                                                      "replicated")]
    r = subprocess.run(args, capture_output=True, text=True, timeout=240, env=mpi_env())
    assert r.returncode == 0, r.stderr
    return r


def master(tmp, name, model, data, ranks, *extra, stages=None, env=None, check=True):
    """The master's command line on each pipeline's rank 0 (world rank % stages == 0); every other
    rank gets a model and data that do not exist."""
    stages = stages or ranks
    nowhere = tmp / "nowhere"
    cmd = [MPIEXEC]
    for r in range(ranks):
        if r:
            cmd.append(":")
        cmd += ["-n", "1"]
        if r == 1:
            for k, v in (env or {}).items():
                cmd += ["-x", f"{k}={v}"]
        if r % stages == 0:
            cmd += train_args(model, data, tmp / f"{name}.onnx", *extra, "--dispatch", "master")
        else:
            cmd += train_args(f"{nowhere}.onnx", f"{nowhere}.npz", f"{nowhere}.out.onnx", *extra, "--dispatch",
                              "master")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=mpi_env())
    if check:
        assert r.returncode == 0, r.stderr
    assert not (tmp / "nowhere.out.onnx").exists(), "a worker wrote the export"
    return r


def assert_bitwise(got, want):
    assert got.keys() == want.keys()
    for k in want:
        assert np.array_equal(got[k], want[k]), f"{k}: max |diff| {np.max(np.abs(got[k] - want[k]))}"


@pytest.mark.parametrize("ranks,extra", [
    (2, ["--optimizer", "sgd", "--lr", "0.1", "--shuffle", "--microbatches", "4", "--eval-split", "0.2"]),
    (2, ["--optimizer", "adam", "--lr", "0.01", "--no-shuffle", "--microbatches", "2", "--rematerialize",
         "--clip-norm", "0.3", "--checkpoint-every", "5"]),
    (3, ["--optimizer", "momentum", "--lr", "0.1", "--shuffle", "--microbatches", "4", "--pipeline-schedule",
         "1f1b"]),
])
def test_master_dispatch_trains_bitwise_as_every_rank_reading(tmp_path, ranks, extra):
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=260)
    common = ["--batch-size", "16", "--epochs", "2", "--seed", "3", *extra]
    if "--checkpoint-every" in extra:
        common += ["--checkpoint-dir", tmp_path / "ck"]
    want = replicated(tmp_path, "replicated", model, data, ranks, *common, "--metrics-csv", tmp_path / "rep.csv")
    got = master(tmp_path, "master", model, data, ranks, *common, "--metrics-csv", tmp_path / "mas.csv")
    assert f"pipeline-parallel over {ranks} ranks" in got.stderr
    assert got.stderr.count("trained") == 1, got.stderr  # the master alone reports
    start, w = initializers(model), initializers(tmp_path / "replicated.onnx")
    assert any(np.max(np.abs(w[k] - start[k])) > 1e-2 for k in start)  # it did train
    assert_bitwise(initializers(tmp_path / "master.onnx"), w)
    drop = ("samples_per_s",)  # timing
    rows = lambda p: [{k: v for k, v in row.items() if k not in drop} for row in read_csv(p)]  # noqa: E731
    assert rows(tmp_path / "mas.csv") == rows(tmp_path / "rep.csv")
    if "--eval-split" in extra:
        assert "eval: loss" in got.stderr and any(r["eval_loss"] for r in read_csv(tmp_path / "mas.csv"))


def test_two_replicas_of_two_stages_under_masters(tmp_path):
    """4 ranks = 2 stages x 2 data-parallel replicas: each replica's rank 0 (world ranks 0 and 2)
    is its pipeline's master and reads its half of each global batch; ranks 1 and 3 read nothing."""
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=260)
    common = ["--batch-size", "8", "--epochs", "2", "--seed", "3", "--optimizer", "adam", "--lr", "0.01",
              "--microbatches", "2", "--pipeline-stages", "2", "--data-parallel"]
    replicated(tmp_path, "replicated", model, data, 4, *common)
    master(tmp_path, "master", model, data, 4, *common, stages=2)
    assert_bitwise(initializers(tmp_path / "master.onnx"), initializers(tmp_path / "replicated.onnx"))


def test_master_dispatch_matches_numpy_float64_sgd(tmp_path):
    """The MLP of tests/training/test_pipeline_parallel_api.py, its 3 batches of 12 in order
    (--no-shuffle), 3 microbatches: numpy's float64 closed-form SGD on the whole batch."""
    model = api.save_mlp(tmp_path / "mlp.onnx")
    data = tmp_path / "data.npz"
    np.savez(data, x=api.X.reshape(-1, 4), labels=api.Y.reshape(-1))
    common = ["--batch-size", str(api.BATCH), "--epochs", "1", "--no-shuffle", "--optimizer", "sgd", "--lr",
              str(api.LR), "--microbatches", "3", "--loss", "cross_entropy"]
    master(tmp_path, "master", model, data, 2, *common)
    replicated(tmp_path, "replicated", model, data, 2, *common)
    got = initializers(tmp_path / "master.onnx")
    assert_bitwise(got, initializers(tmp_path / "replicated.onnx"))
    _, want = api.numpy_training()
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    assert max(float(np.max(np.abs(value - getattr(api, name.upper())))) for name, value in want.items()) > 1e-2


def test_master_resumes_from_a_checkpoint(tmp_path):
    """Epoch 1 with a checkpoint, then --resume to epoch 2, both under master dispatch: the master
    reads the checkpoint and sends each worker its stage's parameters and Adam state; the result is
    bitwise the uninterrupted run's."""
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=128)
    common = ["--batch-size", "16", "--seed", "3", "--optimizer", "adam", "--lr", "0.01", "--shuffle",
              "--microbatches", "4", "--checkpoint-dir", tmp_path / "ck"]
    master(tmp_path, "first", model, data, 2, *common, "--epochs", "1")
    r = master(tmp_path, "resumed", model, data, 2, *common, "--epochs", "2", "--resume")
    assert "resumed from" in r.stderr
    master(tmp_path, "whole", model, data, 2, "--batch-size", "16", "--seed", "3", "--optimizer", "adam", "--lr",
           "0.01", "--shuffle", "--microbatches", "4", "--epochs", "2")
    assert_bitwise(initializers(tmp_path / "resumed.onnx"), initializers(tmp_path / "whole.onnx"))


def test_a_worker_that_cannot_compile_is_reported_by_the_master(tmp_path):
    """Rank 1's compiler is broken (KILN_CC=false, an empty kernel cache of its own): the worker
    sends the master its error, and the job ends non-zero with the master's message naming rank 1
    and the compiler's failure within seconds (a hang is the failure)."""
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=64)
    t0 = time.monotonic()
    r = master(tmp_path, "master", model, data, 2, "--batch-size", "16", "--epochs", "1", "--microbatches", "2",
               env={"KILN_CC": "false", "KILN_CACHE_DIR": str(tmp_path / "rank1_cache")}, check=False)
    elapsed = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "worker rank 1 failed" in out, out[-3000:]
    assert "false" in out.split("worker rank 1 failed", 1)[1], out[-3000:]
    assert elapsed < 60, elapsed  # loosely: measured well under 5 s


def test_a_worker_whose_step_fails_is_reported_by_the_master(tmp_path):
    """Rank 1's command line names another optimizer (SGD) than the master's (Adam): its stage
    compiles the master's Adam update but feeds it SGD's scalars, so its first step throws; the
    master ends the job with the worker's message, naming rank 1."""
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=64)
    common = ["--batch-size", "16", "--threads", "1", "--epochs", "1", "--lr", "0.01", "--pipeline-parallel",
              "--microbatches", "2", "--dispatch", "master"]
    t0 = time.monotonic()
    r = subprocess.run([MPIEXEC, "-n", "1", str(KILN), "train", str(model), "--data", str(data), *common, "--optimizer",
                        "adam", ":", "-n", "1", str(KILN), "train", str(model), "--data", str(data), *common,
                        "--optimizer", "sgd"], capture_output=True, text=True, timeout=240, env=mpi_env())
    elapsed = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "worker rank 1 failed: InvalidArgument: pipeline stage 1: no value for input 'opt/" in out, out[-3000:]
    assert elapsed < 60, elapsed


def test_dispatch_goes_with_pipeline_parallel(tmp_path):
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=64)
    r = subprocess.run([str(KILN), "train", str(model), "--data", str(data), "--dispatch", "master"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--dispatch goes with --pipeline-parallel" in r.stderr, r.stderr
