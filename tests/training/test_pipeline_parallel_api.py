"""kiln.training.PipelineParallel (python/kiln/training/pipeline_parallel.py over
kiln::PipelineTrainer): `mpiexec -n 2 python3` trains a two-layer MLP split into two stages, the
batch cut into microbatches, and after every step the loss and, at the end, every parameter
(gathered on rank 0, and in the exported model) equal what numpy's closed-form gradients of the
whole batch give (x -> Gemm -> Relu -> Gemm -> softmax cross-entropy, SGD); with 4 ranks as 2
replicas of the 2-stage pipeline (data_parallel=True), each replica on its half of the global
batch, the same. Outside mpirun a pipeline of one rank is refused with a clear error."""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "distributed"))
from mpi_jobs import mpi_env  # noqa: E402

MPIEXEC = shutil.which("mpiexec")
RNG = np.random.default_rng(5)
W1 = (RNG.standard_normal((8, 4)) * 0.5).astype(np.float32)
B1 = (RNG.standard_normal(8) * 0.1).astype(np.float32)
W2 = (RNG.standard_normal((3, 8)) * 0.5).astype(np.float32)
B2 = (RNG.standard_normal(3) * 0.1).astype(np.float32)
STEPS, BATCH, LR = 3, 12, 0.3
X = RNG.standard_normal((STEPS, BATCH, 4)).astype(np.float32)
Y = RNG.integers(0, 3, (STEPS, BATCH)).astype(np.int64)


def save_mlp(path):
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], transB=1),
         helper.make_node("Relu", ["h"], ["a"]),
         helper.make_node("Gemm", ["a", "W2", "b2"], ["logits"], transB=1)], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(B1, "b1"),
         numpy_helper.from_array(W2, "W2"), numpy_helper.from_array(B2, "b2")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def numpy_training():
    """The losses of each step and the final parameters, float64, SGD on the whole batch."""
    p = {k: v.astype(np.float64) for k, v in dict(W1=W1, b1=B1, W2=W2, b2=B2).items()}
    losses = []
    for s in range(STEPS):
        x, y = X[s].astype(np.float64), Y[s]
        h = x @ p["W1"].T + p["b1"]
        a = np.maximum(h, 0)
        logits = a @ p["W2"].T + p["b2"]
        e = np.exp(logits - logits.max(1, keepdims=True))
        prob = e / e.sum(1, keepdims=True)
        losses.append(-np.log(prob[np.arange(BATCH), y]).mean())
        d = prob.copy()
        d[np.arange(BATCH), y] -= 1
        d /= BATCH
        da = (d @ p["W2"]) * (h > 0)
        grads = dict(W2=d.T @ a, b2=d.sum(0), W1=da.T @ x, b1=da.sum(0))
        p = {k: p[k] - LR * grads[k] for k in p}
    return np.array(losses), p


WORKER = """
import sys
import numpy as np
import kiln
from kiln.training import CheckpointState, Module, Optimizer, PipelineParallel

model, data, out, mode = sys.argv[1:5]
d = np.load(data)
so = kiln.SessionOptions()
so.intra_op_num_threads = 1
m = Module(model, CheckpointState(), session_options=so, loss="cross_entropy")
Optimizer(m, "sgd", lr=float(d["lr"]))
if mode == "replicas":
    pp = PipelineParallel(m, microbatches=2, pipeline_stages=2, data_parallel=True)
else:
    pp = PipelineParallel(m, microbatches=3, schedule=mode)
half = d["x"].shape[1] // 2
losses = []
for s in range(d["x"].shape[0]):
    x, y = d["x"][s], d["y"][s]
    if mode == "replicas":  # replica r trains on its half of the global batch
        x, y = x[pp.rank // 2 * half:(pp.rank // 2 + 1) * half], y[pp.rank // 2 * half:(pp.rank // 2 + 1) * half]
    losses.append(float(pp(x, y)))
params = pp.parameters()
pp.export_model_for_inferencing(f"{out}/trained.onnx")
np.savez(f"{out}/rank{pp.rank}.npz", losses=np.array(losses), stage=pp.stage, stages=pp.stages,
         replicas=pp.replicas, steps=pp.step_count, n_stage_params=len(pp.stage_parameter_names()),
         **{"param_" + k: v for k, v in params.items()})
"""


def run_job(tmp_path, ranks, mode):
    model = save_mlp(tmp_path / "mlp.onnx")
    data = str(tmp_path / "data.npz")
    np.savez(data, x=X, y=Y, lr=LR)
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    proc = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, str(script), model, data, str(tmp_path), mode],
                          capture_output=True, text=True, timeout=300, env=mpi_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [np.load(tmp_path / f"rank{r}.npz") for r in range(ranks)]


def check_against_numpy(tmp_path, ranks, stages):
    want_losses, want = numpy_training()
    for r, got in enumerate(ranks):
        assert int(got["stages"]) == stages and int(got["steps"]) == STEPS
        np.testing.assert_allclose(got["losses"], want_losses, rtol=1e-5, err_msg=f"rank {r} losses")
    assert sorted(int(g["stage"]) for g in ranks[:stages]) == list(range(stages))
    assert all(int(g["n_stage_params"]) > 0 for g in ranks), "a stage holds no parameters: not a real split"
    for name, value in want.items():  # gathered on rank 0
        np.testing.assert_allclose(ranks[0]["param_" + name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    exported = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "trained.onnx")).graph.initializer}
    for name, value in want.items():
        np.testing.assert_allclose(exported[name], value, rtol=1e-5, atol=1e-6, err_msg=f"exported {name}")


@pytest.mark.skipif(MPIEXEC is None, reason="Open MPI (mpiexec) not installed (scripts/install_deps.sh)")
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_two_stages_train_as_one_process_on_the_whole_batch(tmp_path, schedule):
    ranks = run_job(tmp_path, 2, schedule)
    check_against_numpy(tmp_path, ranks, stages=2)
    assert "param_W1" not in ranks[1], "only the first stage gathers the parameters"


@pytest.mark.skipif(MPIEXEC is None, reason="Open MPI (mpiexec) not installed (scripts/install_deps.sh)")
def test_two_replicas_of_two_stages_train_as_one_process_on_the_global_batch(tmp_path):
    ranks = run_job(tmp_path, 4, "replicas")
    assert all(int(g["replicas"]) == 2 for g in ranks)
    check_against_numpy(tmp_path, ranks, stages=2)


ONE_RANK = """
import sys
import numpy as np
import kiln
from kiln.training import CheckpointState, Module, Optimizer, PipelineParallel

model, data = sys.argv[1:3]
d = np.load(data)
m = Module(model, CheckpointState(), loss="cross_entropy")
Optimizer(m, "sgd", lr=0.1)
for make in (lambda: PipelineParallel(m, schedule="zigzag"), lambda: PipelineParallel(m, microbatches=2)(d["x"][0], d["y"][0])):
    try:
        make()
        print("no error")
    except kiln.InvalidArgument as e:
        print("InvalidArgument:", e)
"""


def test_one_rank_and_a_bad_schedule_are_refused_with_clear_errors(tmp_path):
    """Outside mpirun (a job of one rank: MPI's singleton, in a process of its own)."""
    model = save_mlp(tmp_path / "mlp.onnx")
    data = str(tmp_path / "data.npz")
    np.savez(data, x=X, y=Y)
    script = tmp_path / "one_rank.py"
    script.write_text(ONE_RANK)
    proc = subprocess.run([sys.executable, str(script), model, data], capture_output=True, text=True, timeout=120,
                          env=mpi_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2, proc.stdout + proc.stderr
    assert lines[0].startswith("InvalidArgument:") and "'zigzag'" in lines[0], lines[0]
    assert lines[1].startswith("InvalidArgument:") and "rank" in lines[1], lines[1]
