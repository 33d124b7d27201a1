"""`mpirun -np N kiln train ... --pipeline-parallel --microbatches M` (docs/distributed.md)
against one process: N stages over M microbatches of each batch of 16 train the same parameters
as one process stepping on the same batches of 16, within 1e-6 relative (each gradient is a sum
over M microbatches instead of one sum over the batch, so not bitwise). The combinations it
refuses. A stage lost mid-training: tests/distributed/test_failures.py. Checkpoints: a pipeline
whose rank 1 is SIGKILLed after a checkpoint and which is resumed ends bitwise equal to an
uninterrupted pipeline, with the same metrics; one process and a 3-stage pipeline continue a
2-stage checkpoint; a checkpoint of another optimizer is a clean error naming the tensor.
--clip-norm: the pipeline clips as one process does. Evaluation (--eval-split): the held-out loss
and accuracy of each epoch are one process's, Dropout off.

The binary is $KILN_BIN, or <repo>/build/bin/kiln; mpiexec from PATH."""
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_train import KILN, assert_clean_error, blobs, initializers, mlp, read_csv  # noqa: E402
from test_train_data_parallel import assert_close, mpi_env, rank_pids  # noqa: E402

MPIEXEC = shutil.which("mpiexec")
pytestmark = [pytest.mark.skipif(not KILN.is_file(), reason=f"kiln binary not built: {KILN}"),
              pytest.mark.skipif(MPIEXEC is None, reason="Open MPI (mpiexec) not installed")]


def run(tmp, name, model, data, *extra, ranks=1):
    args = [str(KILN), "train", str(model), "--data", str(data), "--batch-size", "16", "--threads", "1",
            "--epochs", "2", "--seed", "3", "--export", str(tmp / f"{name}.onnx"), *map(str, extra)]
    if ranks > 1:
        args = [MPIEXEC, "-n", str(ranks), *args]
    return subprocess.run(args, capture_output=True, text=True, timeout=240, env=mpi_env())


@pytest.mark.parametrize("ranks,optimizer,order,extra", [(2, "sgd", "--shuffle", []),
                                                         (2, "adam", "--no-shuffle", []),
                                                         (2, "adam", "--no-shuffle", ["--rematerialize"]),
                                                         (3, "momentum", "--shuffle", []),
                                                         (3, "adam", "--shuffle", ["--pipeline-schedule", "1f1b"])])
def test_stages_train_as_one_process(tmp_path, ranks, optimizer, order, extra):
    # The MLP is Gemm, Relu, Gemm: over 3 ranks the middle stage holds the Relu and no parameter.
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=260)  # 16 batches + 4 dropped
    lr = "0.01" if optimizer == "adam" else "0.1"
    one = run(tmp_path, "one", model, data, "--optimizer", optimizer, "--lr", lr, order)
    assert one.returncode == 0, one.stderr
    pp = run(tmp_path, "pp", model, data, "--optimizer", optimizer, "--lr", lr, order, "--pipeline-parallel",
             "--microbatches", "4", *extra, ranks=ranks)
    assert pp.returncode == 0, pp.stderr
    assert f"pipeline-parallel over {ranks} ranks" in pp.stderr
    assert pp.stderr.count("trained 32 steps") == 1  # rank 0 alone reports
    # Rank 0 holds every microbatch's stash under GPipe, at most N of them under 1F1B.
    assert f"At most {ranks if '1f1b' in extra else 4} microbatches' forward values held" in pp.stderr
    start, want, got = initializers(model), initializers(tmp_path / "one.onnx"), initializers(tmp_path / "pp.onnx")
    assert any(np.max(np.abs(want[k] - start[k])) > 1e-2 for k in start)  # it did train
    assert_close(got, want)


def test_annotated_stages(tmp_path):
    """--stage names a node of the model: the second Gemm and what follows go to rank 1."""
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=64)
    m = onnx.load(str(model))
    for i, n in enumerate(m.graph.node):
        n.name = f"n{i}"
    onnx.save(m, str(model))
    one = run(tmp_path, "one", model, data)
    pp = run(tmp_path, "pp", model, data, "--pipeline-parallel", "--microbatches", "2", "--stage", "n2=1", ranks=2)
    assert pp.returncode == 0, pp.stderr
    assert "(--stage;" in pp.stderr and "stage 0: 2 parameters" in pp.stderr and "stage 1: 2 parameters" in pp.stderr
    assert_close(initializers(tmp_path / "pp.onnx"), initializers(tmp_path / "one.onnx"))


@pytest.mark.parametrize("ranks,extra,needles", [
    (1, [], ["pipeline-parallel training needs at least 2 ranks (one stage each); the job has 1"]),
    (2, ["--data-parallel"], ["--pipeline-parallel with --data-parallel needs --pipeline-stages S"]),
    (2, ["--parameter-servers", "1"], ["--pipeline-parallel cannot be combined with --parameter-servers"]),
    (2, ["--microbatches", "3"], ["--microbatches 3 does not divide N=16"]),
    (4, [], ["has 3 nodes to train, fewer than the ranks"]),
    (2, ["--recompute", "sqrt"], ["--pipeline-parallel does not support --recompute"]),
    (2, ["--resume"], ["--resume needs --checkpoint-dir"]),
])
def test_refused_combinations(tmp_path, ranks, extra, needles):
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=64)
    r = run(tmp_path, "pp", model, data, "--pipeline-parallel", *extra, ranks=ranks)
    assert_clean_error(r, *needles)


def test_microbatches_without_pipeline_is_refused(tmp_path):
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=64)
    assert_clean_error(run(tmp_path, "one", model, data, "--microbatches", "4"),
                       "--microbatches goes with --pipeline-parallel")
    assert_clean_error(run(tmp_path, "one", model, data, "--rematerialize"),
                       "--rematerialize goes with --pipeline-parallel")
    assert_clean_error(run(tmp_path, "one", model, data, "--pipeline-schedule", "1f1b"),
                       "--pipeline-schedule goes with --pipeline-parallel")


def test_clip_norm_spans_the_stages(tmp_path):
    """--clip-norm 0.3 over 2 stages trains as one process with --clip-norm 0.3 (whose clipping
    is clip_grad_norm_'s, tests/autodiff/training_session_test.cc); without it the weights differ,
    so the clip binds."""
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=128)
    common = ["--optimizer", "momentum", "--lr", "0.1", "--no-shuffle"]
    for name, extra in [("one", ["--clip-norm", "0.3"]), ("free", [])]:
        r = run(tmp_path, name, model, data, *common, *extra)
        assert r.returncode == 0, r.stderr
    pp = run(tmp_path, "pp", model, data, *common, "--clip-norm", "0.3", "--pipeline-parallel", "--microbatches", "4",
             ranks=2)
    assert pp.returncode == 0, pp.stderr
    want, got = initializers(tmp_path / "one.onnx"), initializers(tmp_path / "pp.onnx")
    assert_close(got, want)
    free = initializers(tmp_path / "free.onnx")
    assert max(float(np.max(np.abs(free[k] - want[k]))) for k in want) > 1e-2


def checkpointed(model, data, tmp, name, epochs, *extra, ranks=2):
    """The args of a pipeline run (or one process: ranks=1) with checkpoints in tmp/ck."""
    args = [str(KILN), "train", str(model), "--data", str(data), "--batch-size", "16", "--threads", "1",
            "--epochs", str(epochs), "--seed", "5", "--optimizer", "adam", "--lr", "0.01",
            "--metrics-csv", str(tmp / f"{name}.csv"), "--export", str(tmp / f"{name}.onnx"), *map(str, extra)]
    if ranks > 1:
        args = [MPIEXEC, "-n", str(ranks), *args, "--pipeline-parallel", "--microbatches", "4"]
    return args


def test_rank_killed_after_a_checkpoint_then_resumed_matches_uninterrupted_run(tmp_path):
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=480)
    cosine = ["--schedule", "cosine", "--warmup", "5", "--eval-split", "0.25"]  # 22 steps per epoch
    ref = subprocess.run(checkpointed(model, data, tmp_path, "ref", 6, *cosine), capture_output=True, text=True,
                         timeout=240, env=mpi_env())
    assert ref.returncode == 0, ref.stderr
    ck = tmp_path / "ck"
    run_args = checkpointed(model, data, tmp_path, "run", 6, *cosine, "--checkpoint-dir", ck, "--checkpoint-every", "1")
    # A checkpoint every step and a progress line per step: rank 1 is killed once 10 steps are
    # reported and a checkpoint exists, out of 132 steps, so the job cannot finish before it.
    proc = subprocess.Popen(run_args + ["--log-every", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=mpi_env())
    try:
        steps, deadline = 0, time.time() + 120
        while time.time() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            steps += line.startswith("epoch ")
            if steps >= 10 and (ck / "checkpoint.kiln").exists():
                break
        pids = rank_pids(proc.pid)
        assert proc.poll() is None and 1 in pids, f"the job ended after {steps} steps, before the kill"
        os.kill(pids[1], signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert not (tmp_path / "run.onnx").exists()
    assert sorted(p.name for p in ck.iterdir()) in (["checkpoint.kiln"], ["checkpoint.kiln", "checkpoint.kiln.tmp"])

    resumed = subprocess.run(run_args + ["--resume"], capture_output=True, text=True, timeout=240, env=mpi_env())
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stderr and "note: --resume" not in resumed.stderr
    print(next(line for line in resumed.stderr.splitlines() if line.startswith("resumed from")),
          f"(killed after {steps} steps were reported)")
    want, got = initializers(tmp_path / "ref.onnx"), initializers(tmp_path / "run.onnx")
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    cols = ["epoch", "step", "train_loss", "eval_loss", "eval_accuracy", "lr"]
    assert [[r[c] for c in cols] for r in read_csv(tmp_path / "run.csv")] == \
        [[r[c] for c in cols] for r in read_csv(tmp_path / "ref.csv")]


def test_a_pipeline_checkpoint_resumes_in_one_process_and_over_another_split(tmp_path):
    """The checkpoint is the single-process format: one process continues a 2-stage run's epoch 1
    to epoch 2, as does a 3-stage pipeline in 2 microbatches (with a note naming the split it was
    written with); both end within 1e-6 of the uninterrupted 2-stage run."""
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=128)
    ck = tmp_path / "ck"

    def go(name, epochs, *extra, ranks=2):
        args = checkpointed(model, data, tmp_path, name, epochs, *extra, ranks=ranks)
        r = subprocess.run(args, capture_output=True, text=True, timeout=240, env=mpi_env())
        assert r.returncode == 0, r.stderr
        return r.stderr

    go("straight", 2)
    go("first", 1, "--checkpoint-dir", ck)
    saved = (ck / "checkpoint.kiln").read_bytes()
    for name in ("one", "three"):  # each continues the first run's metrics
        shutil.copy(tmp_path / "first.csv", tmp_path / f"{name}.csv")
    out = go("one", 2, "--checkpoint-dir", ck, "--resume", ranks=1)
    assert "resumed from" in out
    (ck / "checkpoint.kiln").write_bytes(saved)
    args = checkpointed(model, data, tmp_path, "three", 2, "--checkpoint-dir", ck, "--resume")
    args[args.index("-n") + 1], args[args.index("--microbatches") + 1] = "3", "2"
    r = subprocess.run(args, capture_output=True, text=True, timeout=240, env=mpi_env())
    assert r.returncode == 0, r.stderr
    assert "note: --resume: it was written by 2 stages (W1,b1 | W2,b2) in 4 microbatches; this run has 3 stages " \
        "(W1,b1 |  | W2,b2) in 2" in r.stderr
    want = initializers(tmp_path / "straight.onnx")
    assert max(float(np.max(np.abs(want[k] - initializers(tmp_path / "first.onnx")[k]))) for k in want) > 1e-3
    assert_close(initializers(tmp_path / "one.onnx"), want)
    assert_close(initializers(tmp_path / "three.onnx"), want)


def test_resume_with_another_optimizer_is_a_clean_error(tmp_path):
    model, data = mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz", n=64)
    ck = tmp_path / "ck"
    first = run(tmp_path, "first", model, data, "--optimizer", "adam", "--checkpoint-dir", ck, "--pipeline-parallel",
                ranks=2)
    assert first.returncode == 0, first.stderr
    start = time.monotonic()
    r = run(tmp_path, "again", model, data, "--optimizer", "momentum", "--checkpoint-dir", ck, "--resume",
            "--pipeline-parallel", ranks=2)
    assert_clean_error(r, "has no tensor 'state:opt/W1/momentum'", "another model, trainable set or optimizer")
    assert time.monotonic() - start < 60


def dropout_mlp(path):
    """mlp() with Dropout(ratio 0.5) after the Relu: training draws masks, evaluation must not."""
    m = onnx.load(str(mlp(path)))
    nodes = list(m.graph.node)
    nodes[1].output[0] = "r0"
    drop = helper.make_node("Dropout", ["r0", "ratio"], ["r"], name="drop")
    m.graph.initializer.append(numpy_helper.from_array(np.array(0.5, np.float32), "ratio"))
    del m.graph.node[:]
    m.graph.node.extend([nodes[0], nodes[1], drop, nodes[2]])
    onnx.save(m, str(path))
    return path


@pytest.mark.parametrize("ranks,maker,lr", [(2, mlp, "0.01"), (3, mlp, "0.01"), (2, dropout_mlp, "1e-9")])
def test_evaluation_matches_one_process(tmp_path, ranks, maker, lr):
    """--eval-split 0.3: 38 held-out records, two whole batches and one padded one, each epoch.
    With Dropout and --lr 1e-9 the weights stay put (to ~1e-9) and the evaluation is the model's own in
    inference mode; a mask drawn at evaluation would move the loss far beyond the tolerance."""
    model, data = maker(tmp_path / "model.onnx"), blobs(tmp_path / "blobs.npz", n=128)
    common = ["--optimizer", "adam", "--lr", lr, "--eval-split", "0.3"]
    one = run(tmp_path, "one", model, data, *common, "--metrics-csv", tmp_path / "one.csv")
    assert one.returncode == 0, one.stderr
    pp = run(tmp_path, "pp", model, data, *common, "--metrics-csv", tmp_path / "pp.csv", "--pipeline-parallel",
             "--microbatches", "4", ranks=ranks)
    assert pp.returncode == 0, pp.stderr
    assert pp.stderr.count("epoch 2/2 eval: loss") == 1 and "(38 records)" in pp.stderr
    want = [r for r in read_csv(tmp_path / "one.csv") if r["eval_loss"]]
    got = [r for r in read_csv(tmp_path / "pp.csv") if r["eval_loss"]]
    assert len(want) == len(got) == 2
    for w, g in zip(want, got):
        assert (w["epoch"], w["step"], w["eval_accuracy"]) == (g["epoch"], g["step"], g["eval_accuracy"])
        np.testing.assert_allclose(float(g["eval_loss"]), float(w["eval_loss"]), rtol=1e-6)


def test_evaluation_with_the_models_own_loss(tmp_path):
    """--loss output: the model computes its loss (a scalar: nothing to join over microbatches);
    the held-out loss over 2 stages is one process's. The padded batch is skipped, as there."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Gemm", ["x", "W1"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "W2"], ["p"], transB=1), helper.make_node("Sub", ["p", "y"], ["d"]),
             helper.make_node("Mul", ["d", "d"], ["sq"]), helper.make_node("ReduceMean", ["sq"], ["loss"], keepdims=0)]
    graph = helper.make_graph(
        nodes, "regression", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 4]),
                              helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 1])],
        [helper.make_tensor_value_info("loss", onnx.TensorProto.FLOAT, [])],
        [numpy_helper.from_array((rng.standard_normal((8, 4)) * 0.5).astype(np.float32), "W1"),
         numpy_helper.from_array((rng.standard_normal((1, 8)) * 0.5).astype(np.float32), "W2")])
    model = tmp_path / "regression.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    x = rng.standard_normal((64, 4)).astype(np.float32)
    np.savez(tmp_path / "reg.npz", x=x, y=x.sum(1, keepdims=True))
    common = ["--loss", "output", "--eval-split", "0.3"]
    one = run(tmp_path, "one", model, tmp_path / "reg.npz", *common, "--metrics-csv", tmp_path / "one.csv")
    assert one.returncode == 0, one.stderr
    pp = run(tmp_path, "pp", model, tmp_path / "reg.npz", *common, "--metrics-csv", tmp_path / "pp.csv",
             "--pipeline-parallel", "--microbatches", "2", ranks=2)
    assert pp.returncode == 0, pp.stderr
    assert "epoch 2/2 eval: loss" in pp.stderr and "(16 records)" in pp.stderr
    want = [float(r["eval_loss"]) for r in read_csv(tmp_path / "one.csv") if r["eval_loss"]]
    got = [float(r["eval_loss"]) for r in read_csv(tmp_path / "pp.csv") if r["eval_loss"]]
    assert len(want) == 2
    np.testing.assert_allclose(got, want, rtol=1e-6)
