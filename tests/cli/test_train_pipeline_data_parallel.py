"""`mpirun -np 4 kiln train ... --pipeline-parallel --pipeline-stages 2 --data-parallel`
(docs/distributed.md): 2 stages x 2 data-parallel replicas, each replica on its slice of every
global batch (batch 8 per replica, 2 microbatches), against one process stepping on the global
batch of 16, as the data-parallel tests compare (the single process's batch i is the replicas'
batches i concatenated, with shuffling on or off): parameters within 1e-6 relative after 32 steps,
SGD with shuffling, Adam (and 1F1B), momentum with a binding --clip-norm, and the held-out loss
of each epoch. Checkpoints: one file, written by replica 0; a run stopped after epoch 1 and
resumed ends bitwise equal to an uninterrupted one; a 1-replica checkpoint is refused. The
misconfigurations are clean errors naming what is wrong.

The binary is $KILN_BIN, or <repo>/build/bin/kiln; mpiexec from PATH."""
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_train import KILN, assert_clean_error, blobs, initializers, mlp, read_csv  # noqa: E402
from test_train_data_parallel import assert_close, mpi_env  # noqa: E402

MPIEXEC = shutil.which("mpiexec")
pytestmark = [pytest.mark.skipif(not KILN.is_file(), reason=f"kiln binary not built: {KILN}"),
              pytest.mark.skipif(MPIEXEC is None, reason="Open MPI (mpiexec) not installed")]

PP_DP = ["--pipeline-parallel", "--pipeline-stages", "2", "--data-parallel", "--microbatches", "2"]


def run(tmp, name, model, data, batch, *extra, ranks=1, epochs=2):
    args = [str(KILN), "train", str(model), "--data", str(data), "--batch-size", str(batch), "--threads", "1",
            "--epochs", str(epochs), "--seed", "3", "--export", str(tmp / f"{name}.onnx"), *map(str, extra)]
    if ranks > 1:
        args = [MPIEXEC, "-n", str(ranks), *args]
    return subprocess.run(args, capture_output=True, text=True, timeout=240, env=mpi_env())


@pytest.mark.parametrize("optimizer,order,extra,pipeline_extra", [
    ("sgd", "--shuffle", [], []),
    ("adam", "--no-shuffle", [], ["--pipeline-schedule", "1f1b"]),
    ("momentum", "--no-shuffle", ["--clip-norm", "0.3"], []),
    ("adam", "--shuffle", [], ["--bucket-mb", "0", "--no-overlap"]),
])
def test_stages_x_replicas_train_as_one_process_with_the_global_batch(tmp_path, optimizer, order, extra,
                                                                     pipeline_extra):
    # 260 records, the last 52 held out (--eval-split 0.2): 208 to train, 13 global batches of 16
    # per epoch; the held-out set in 4 batches of 16 (one process) or 7 of 8 (each replica).
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=260)
    lr = "0.01" if optimizer == "adam" else "0.1"
    common = ["--optimizer", optimizer, "--lr", lr, order, "--eval-split", "0.2", *extra]
    one = run(tmp_path, "one", model, data, 16, *common, "--metrics-csv", tmp_path / "one.csv")
    assert one.returncode == 0, one.stderr
    pd = run(tmp_path, "pd", model, data, 8, *common, *PP_DP, *pipeline_extra, "--metrics-csv", tmp_path / "pd.csv",
             ranks=4)
    assert pd.returncode == 0, pd.stderr
    assert "pipeline-parallel over 2 ranks per replica, 2 replicas" in pd.stderr
    assert "data-parallel: 2 replicas of the pipeline x batch 8 = 16 records per step" in pd.stderr
    assert "gradient buckets per step" in pd.stderr
    assert pd.stderr.count("trained 26 steps") == 1  # world rank 0 alone reports
    assert pd.stderr.count("epoch 2/2 eval: loss") == 1 and "(52 records)" in pd.stderr
    start, want, got = initializers(model), initializers(tmp_path / "one.onnx"), initializers(tmp_path / "pd.onnx")
    assert any(np.max(np.abs(want[k] - start[k])) > 1e-2 for k in start)  # it did train
    assert_close(got, want)
    # The printed loss is the global batch's (the replicas' mean), the held-out figures one process's.
    w, g = read_csv(tmp_path / "one.csv"), read_csv(tmp_path / "pd.csv")
    assert len(w) == len(g) == 28
    for a, b in zip(w, g):
        assert (a["epoch"], a["step"], a["eval_accuracy"]) == (b["epoch"], b["step"], b["eval_accuracy"])
        for col in ("train_loss", "eval_loss"):
            if a[col]:
                np.testing.assert_allclose(float(b[col]), float(a[col]), rtol=1e-5, err_msg=f"{col} {a}")
    if extra:  # the clip binds: without it one process ends elsewhere
        free = run(tmp_path, "free", model, data, 16, *common[:-len(extra)])
        assert free.returncode == 0, free.stderr
        loose = initializers(tmp_path / "free.onnx")
        assert max(float(np.max(np.abs(loose[k] - want[k]))) for k in want) > 1e-2


def test_resumed_run_matches_uninterrupted_and_one_replica_refuses_the_checkpoint(tmp_path):
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=128)
    ck = tmp_path / "ck"
    adam = ["--optimizer", "adam", "--lr", "0.01"]  # constant: a cosine schedule would depend on --epochs
    straight = run(tmp_path, "straight", model, data, 8, *adam, *PP_DP, ranks=4)
    assert straight.returncode == 0, straight.stderr
    first = run(tmp_path, "first", model, data, 8, *adam, *PP_DP, "--checkpoint-dir", ck, "--checkpoint-every", "3",
                ranks=4, epochs=1)
    assert first.returncode == 0, first.stderr
    assert sorted(p.name for p in ck.iterdir()) == ["checkpoint.kiln"]  # written once, by replica 0
    saved = (ck / "checkpoint.kiln").read_bytes()
    resumed = run(tmp_path, "resumed", model, data, 8, *adam, *PP_DP, "--checkpoint-dir", ck, "--resume", ranks=4)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stderr and "epoch 2, batch 0/8, step 8" in resumed.stderr
    want, got = initializers(tmp_path / "straight.onnx"), initializers(tmp_path / "resumed.onnx")
    assert max(float(np.max(np.abs(want[k] - initializers(tmp_path / "first.onnx")[k]))) for k in want) > 1e-3
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    # One replica would read other records from the same position: refused.
    (ck / "checkpoint.kiln").write_bytes(saved)
    one = run(tmp_path, "one", model, data, 8, *adam, "--pipeline-parallel", "--microbatches", "2",
              "--checkpoint-dir", ck, "--resume", ranks=2)
    assert_clean_error(one, "was trained by 2 data-parallel rank(s), this run has 1")


@pytest.mark.parametrize("ranks,extra,needles", [
    (3, PP_DP, ["--pipeline-stages 2 does not divide the job's 3 ranks", "ranks = stages x replicas"]),
    (2, ["--pipeline-parallel", "--pipeline-stages", "1", "--data-parallel"],
     ["--pipeline-stages 1: a pipeline needs at least 2 stages"]),
    (2, ["--pipeline-parallel", "--data-parallel"], ["--pipeline-parallel with --data-parallel needs --pipeline-stages S"]),
    (4, ["--pipeline-parallel", "--pipeline-stages", "2"],
     ["--pipeline-stages 2 over 4 ranks would make 2 replicas of the pipeline: add --data-parallel"]),
    (2, [*PP_DP, "--sync-batch-norm"], ["--sync-batch-norm does not go with --pipeline-parallel"]),
    (1, ["--pipeline-stages", "2"], ["--pipeline-stages goes with --pipeline-parallel"]),
])
def test_misconfigurations_are_clean_errors(tmp_path, ranks, extra, needles):
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=64)
    assert_clean_error(run(tmp_path, "pd", model, data, 8, *extra, ranks=ranks), *needles)
