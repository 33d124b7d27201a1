"""Synchronized BatchNorm in data-parallel training (kiln.training.DataParallel(sync_batch_norm=
True) over kiln::distributed::SyncBatchNormGradients; docs/distributed.md, "Synchronized
BatchNorm"), under `mpiexec -n 2`.

A conv -> BatchNormalization -> ReLU -> global average pool -> linear model trains on each rank's
half of every global batch. With sync_batch_norm the parameters, losses and running statistics
of both ranks equal those of PyTorch (sync_bn_reference.py, float64 BatchNorm2d) training one
process on the whole global batch; without it they do not (each rank normalizes its own half),
which shows the comparison can fail. One process with the flag (no mpirun) trains as Kiln's
per-rank BatchNormalization does. Uneven halves (3 and 5 rows) weight the statistics by
count. Misuse: ranks that disagree on sync_batch_norm, or whose BatchNormalization has other
channels, fail on every rank with an error naming the rank and the tensor; a model without
BatchNormalization trains as without the flag."""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from linear_classifier import save_linear_model

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "distributed"))
from mpi_jobs import mpi_env  # noqa: E402

MPIEXEC = shutil.which("mpiexec")
TORCH_PYTHON = "/usr/bin/python3"
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="Open MPI (mpiexec) not installed (scripts/install_deps.sh)")

C_IN, C, CLASSES, HW = 2, 4, 3, 5
STEPS, ROWS, LR, MOMENTUM, EPS = 3, 4, 0.5, 0.9, 1e-5


def weights(rng, channels=C):
    return {"W1": rng.standard_normal((channels, C_IN, 3, 3)) * 0.5, "b1": rng.standard_normal(channels),
            "gamma": 1 + 0.2 * rng.standard_normal(channels), "beta": 0.2 * rng.standard_normal(channels),
            "rmean": 0.1 * rng.standard_normal(channels), "rvar": 1 + 0.1 * rng.random(channels),
            "W2": rng.standard_normal((CLASSES, channels)), "b2": rng.standard_normal(CLASSES)}


def save_bn_model(path, w):
    """Conv(3x3, pad 1) -> BatchNormalization -> Relu -> GlobalAveragePool -> Flatten -> Gemm."""
    nodes = [helper.make_node("Conv", ["x", "W1", "b1"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["h", "gamma", "beta", "rmean", "rvar"], ["hn"], name="bn",
                              epsilon=EPS, momentum=MOMENTUM),
             helper.make_node("Relu", ["hn"], ["a"]),
             helper.make_node("GlobalAveragePool", ["a"], ["pooled"]),
             helper.make_node("Flatten", ["pooled"], ["f"]),
             helper.make_node("Gemm", ["f", "W2", "b2"], ["logits"], transB=1)]
    g = helper.make_graph(nodes, "conv_bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", C_IN, HW, HW])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", CLASSES])],
                          [numpy_helper.from_array(v.astype(np.float32), k) for k, v in w.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]), str(path))
    return str(path)


WORKER = """
import sys
import numpy as np
import kiln
from kiln.training import CheckpointState, DataParallel, Module, Optimizer
from kiln.training.checkpoint_state import _read_checkpoint

model, data, out, sync = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
d = np.load(data)
so = kiln.SessionOptions()
so.intra_op_num_threads = 1
state = CheckpointState()
m = Module(model, state, session_options=so)
Optimizer(m, "sgd", lr=float(d["lr"]))
dp = DataParallel(m, sync_batch_norm=sync)
rows = [int(r) for r in d["rows"]]  # per rank: this rank's rows of the global batch
start = sum(rows[:dp.rank])
losses = []
for s in range(d["x"].shape[0]):
    xs, ys = d["x"][s].reshape(-1, *d["x"].shape[3:]), d["y"][s].reshape(-1)
    losses.append(float(dp(xs[start:start + rows[dp.rank]], ys[start:start + rows[dp.rank]])))
CheckpointState.save_checkpoint(state, f"{out}/rank{dp.rank}.ckpt")
tensors = _read_checkpoint(f"{out}/rank{dp.rank}.ckpt")[2]
np.savez(f"{out}/rank{dp.rank}.npz", losses=np.array(losses), synchronized=dp.synchronized_batch_norms,
         **{k.split(":", 1)[1]: v for k, v in tensors.items() if k.startswith(("param:", "stat:"))})
"""


def run_ranks(tmp_path, model, data, sync, name):
    out = tmp_path / name
    out.mkdir()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(script), model, data, str(out), "1" if sync else "0"],
                          capture_output=True, text=True, timeout=600, env=mpi_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [np.load(out / f"rank{r}.npz") for r in range(2)]


def reference(tmp_path, w, x, y):
    src, dst = tmp_path / "ref_in.npz", tmp_path / "ref_out.npz"
    np.savez(src, x=x, y=y, lr=LR, momentum=MOMENTUM, eps=EPS, **{k: v.astype(np.float32) for k, v in w.items()})
    subprocess.run([TORCH_PYTHON, os.path.join(HERE, "sync_bn_reference.py"), str(src), str(dst)], check=True, timeout=300)
    return np.load(dst)


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    if not os.path.exists(TORCH_PYTHON) or subprocess.run([TORCH_PYTHON, "-c", "import torch"]).returncode != 0:
        pytest.skip("PyTorch (Debian's python3-torch) not installed")
    tmp = tmp_path_factory.mktemp("sync_bn")
    rng = np.random.default_rng(25)
    w = weights(rng)
    # Rank 1's inputs are shifted and scaled: its own batch statistics differ from the global ones.
    x = rng.standard_normal((STEPS, 2, ROWS, C_IN, HW, HW))
    x[:, 1] = x[:, 1] * 2.0 + 1.5
    x = x.astype(np.float32)
    y = rng.integers(0, CLASSES, (STEPS, 2, ROWS)).astype(np.int64)
    model = save_bn_model(tmp / "conv_bn.onnx", w)
    data = str(tmp / "data.npz")
    np.savez(data, x=x, y=y, lr=LR, rows=[ROWS, ROWS])
    return tmp, model, data, reference(tmp, w, x, y)


def close_to_reference(got, ref):
    """Every parameter and running statistic after the last step, and the losses of every step."""
    last = STEPS - 1
    np.testing.assert_allclose(got["losses"], ref["loss"], rtol=1e-5, err_msg="losses")
    for k in ("W1", "b1", "gamma", "beta", "W2", "b2"):
        np.testing.assert_allclose(got[k], ref[k][last], rtol=1e-4, atol=1e-5, err_msg=k)
    for k in ("rmean", "rvar"):
        np.testing.assert_allclose(got[k], ref[k][last], rtol=1e-5, atol=1e-6, err_msg=k)


def test_synchronized_ranks_train_as_one_process_on_the_global_batch(tmp_path, problem):
    _, model, data, ref = problem
    ranks = run_ranks(tmp_path, model, data, True, "sync")
    for r, got in enumerate(ranks):
        assert int(got["synchronized"]) == 1, f"rank {r}"
        close_to_reference(got, ref)
    for k in ("W1", "gamma", "W2", "rmean", "rvar"):
        assert ranks[0][k].tobytes() == ranks[1][k].tobytes(), f"the ranks' {k} drifted apart"


def test_without_sync_each_rank_normalizes_its_own_half(tmp_path, problem):
    _, model, data, ref = problem
    ranks = run_ranks(tmp_path, model, data, False, "local")
    for r, got in enumerate(ranks):
        assert int(got["synchronized"]) == 0
        with pytest.raises(AssertionError):
            close_to_reference(got, ref)
    # Each rank's running statistics are its own half's: rank 1's inputs are shifted.
    assert not np.allclose(ranks[0]["rmean"], ranks[1]["rmean"], rtol=1e-3)


def test_uneven_halves_weight_the_statistics_by_count(tmp_path, problem):
    """Rank 0 takes 3 rows, rank 1 five: the running statistics after one step are those of the
    8-row global batch (a mean of the ranks' means would weight rank 0's rows 5/3 as much)."""
    tmp, model, _, _ = problem
    rng = np.random.default_rng(7)
    w = weights(rng)
    x = rng.standard_normal((1, 1, 8, C_IN, HW, HW))
    x[..., 3:, :, :, :] = x[..., 3:, :, :, :] * 3.0 + 2.0
    x = x.astype(np.float32)
    y = rng.integers(0, CLASSES, (1, 1, 8)).astype(np.int64)
    model = save_bn_model(tmp_path / "uneven.onnx", w)
    data = str(tmp_path / "uneven.npz")
    np.savez(data, x=x, y=y, lr=LR, rows=[3, 5])
    ref = reference(tmp_path, w, x, y)
    for got in run_ranks(tmp_path, model, data, True, "uneven"):
        for k in ("rmean", "rvar"):
            np.testing.assert_allclose(got[k], ref[k][0], rtol=1e-5, atol=1e-6, err_msg=k)


ONE_RANK = """
import sys
import numpy as np
import kiln
from kiln.training import CheckpointState, DataParallel, Module, Optimizer
from kiln.training.checkpoint_state import _read_checkpoint

model, data, out = sys.argv[1:4]
d = np.load(data)
so = kiln.SessionOptions()
so.intra_op_num_threads = 1
for name, sync in (("plain", None), ("sync", True)):
    state = CheckpointState()
    m = Module(model, state, session_options=so)
    opt = Optimizer(m, "sgd", lr=float(d["lr"]))
    dp = DataParallel(m, sync_batch_norm=True) if sync else None
    for s in range(d["x"].shape[0]):
        xs, ys = d["x"][s].reshape(-1, *d["x"].shape[3:]), d["y"][s].reshape(-1)
        if dp:
            dp(xs, ys)
        else:
            m(xs, ys)
            opt.step()
            m.lazy_reset_grad()
    CheckpointState.save_checkpoint(state, f"{out}/{name}.ckpt")
    tensors = _read_checkpoint(f"{out}/{name}.ckpt")[2]
    np.savez(f"{out}/{name}.npz", synchronized=dp.synchronized_batch_norms if dp else 0,
             **{k.split(":", 1)[1]: v for k, v in tensors.items() if k.startswith(("param:", "stat:"))})
"""


def test_one_rank_with_the_flag_trains_as_without_it(tmp_path, problem):
    """Outside mpirun (a job of one rank) the synchronized graph's collectives are the identity:
    the rewrite alone must then train as Kiln's own BatchNormalization does."""
    _, model, data, _ = problem
    script = tmp_path / "one_rank.py"
    script.write_text(ONE_RANK)
    proc = subprocess.run([sys.executable, str(script), model, data, str(tmp_path)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plain, sync = np.load(tmp_path / "plain.npz"), np.load(tmp_path / "sync.npz")
    assert int(sync["synchronized"]) == 1
    for k in ("W1", "b1", "gamma", "beta", "W2", "b2", "rmean", "rvar"):
        np.testing.assert_allclose(sync[k], plain[k], rtol=1e-5, atol=1e-6, err_msg=k)


MISUSE = """
import sys
import numpy as np
import kiln
from kiln.training import CheckpointState, DataParallel, Module, Optimizer
from kiln.training.data_parallel import rank as mpi_rank

bn4, bn6, linear, out = sys.argv[1:5]
rank = mpi_rank()
so = kiln.SessionOptions()
so.intra_op_num_threads = 1
rng = np.random.default_rng(rank)
x = rng.standard_normal((2, 2, 5, 5)).astype(np.float32)
y = np.array([0, 1], np.int64)
lines = []

def step(model, sync, inputs):
    m = Module(model, CheckpointState(), session_options=so)
    Optimizer(m, "sgd", lr=0.1)
    dp = DataParallel(m, sync_batch_norm=sync)
    try:
        dp(*inputs)
        return f"ok synchronized={dp.synchronized_batch_norms}"
    except kiln.InvalidArgument as e:
        return "error " + str(e).replace(chr(10), " ")

# Ranks that disagree on the flag; then BatchNormalization of 4 channels on rank 0, 6 on rank 1.
lines.append(step(bn4, rank == 0, (x, y)))
lines.append(step(bn4 if rank == 0 else bn6, True, (x, y)))
# No BatchNormalization: the flag changes nothing, and the communicator still works.
lines.append(step(linear, True, (rng.standard_normal((2, 4)).astype(np.float32), y)))
open(f"{out}/rank{rank}.txt", "w").write(chr(10).join(lines))
"""


def test_ranks_that_disagree_fail_with_an_error_naming_the_rank(tmp_path):
    rng = np.random.default_rng(3)
    bn4 = save_bn_model(tmp_path / "bn4.onnx", weights(rng))
    bn6 = save_bn_model(tmp_path / "bn6.onnx", weights(rng, channels=6))
    linear = save_linear_model(tmp_path / "linear.onnx", rng.standard_normal((3, 4)).astype(np.float32),
                               rng.standard_normal(3).astype(np.float32))
    script = tmp_path / "misuse.py"
    script.write_text(MISUSE)
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(script), bn4, bn6, linear, str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=mpi_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for r in range(2):
        flag, channels, plain = (tmp_path / f"rank{r}.txt").read_text().split("\n")
        assert flag.startswith("error ") and "rank 1 disagrees with rank 0" in flag, flag
        assert "sync batch norm: rmean f32[4]" in flag, flag
        assert channels.startswith("error ") and "rank 1 disagrees with rank 0" in channels, channels
        # Caught as early as the broadcast of rank 0's parameters, before any statistic moves.
        assert "f32[4," in channels and "f32[6," in channels, channels
        assert plain == "ok synchronized=0", plain
