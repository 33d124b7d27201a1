"""kiln.training.DataParallel (python/kiln/training/data_parallel.py over
kiln::distributed::DataParallel): `mpiexec -n 2 python3` steps a linear classifier on each rank's
half of every global batch, and after each step both ranks hold the parameters that numpy's
closed-form gradient of the whole global batch gives (softmax cross-entropy of x W^T + b), with
the global batch's loss; rank 1 starts from other weights, which rank 0's broadcast replaces."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from linear_classifier import np_loss_grads, save_linear_model

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "distributed"))
from mpi_jobs import mpi_env  # noqa: E402

MPIEXEC = shutil.which("mpiexec")
RNG = np.random.default_rng(11)
W0 = RNG.standard_normal((3, 4)).astype(np.float32)
B0 = RNG.standard_normal(3).astype(np.float32)
STEPS, PER_RANK, LR = 4, 5, 0.5
X = RNG.standard_normal((STEPS, 2, PER_RANK, 4)).astype(np.float32)  # [step, rank, row, feature]
Y = RNG.integers(0, 3, (STEPS, 2, PER_RANK)).astype(np.int64)

WORKER = """
import sys
import numpy as np
import kiln
from kiln.training import CheckpointState, DataParallel, Module, Optimizer

model, data, out = sys.argv[1:4]
d = np.load(data)
so = kiln.SessionOptions()
so.intra_op_num_threads = 1
state = CheckpointState()
m = Module(model, state, session_options=so)
Optimizer(m, "sgd", lr=float(d["lr"]))
dp = DataParallel(m)
if dp.rank == 1:  # rank 0's weights must reach rank 1 before the first step
    state.parameters["W"].data = np.zeros((3, 4), np.float32)
losses = [float(dp(d["x"][s, dp.rank], d["y"][s, dp.rank])) for s in range(d["x"].shape[0])]
np.savez(f"{out}/rank{dp.rank}.npz", W=state.parameters["W"].data, b=state.parameters["b"].data,
         losses=np.array(losses), size=dp.size, buckets=dp.buckets)
"""


@pytest.mark.skipif(MPIEXEC is None, reason="Open MPI (mpiexec) not installed (scripts/install_deps.sh)")
def test_two_ranks_step_as_one_process_on_the_global_batch(tmp_path):
    model = save_linear_model(tmp_path / "linear.onnx", W0, B0)
    data = str(tmp_path / "data.npz")
    np.savez(data, x=X, y=Y, lr=LR)
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(script), model, data, str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=mpi_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    w, b = W0.astype(np.float64), B0.astype(np.float64)
    want_losses = []
    for s in range(STEPS):
        loss, gw, gb = np_loss_grads(w, b, X[s].reshape(-1, 4), Y[s].reshape(-1))
        want_losses.append(loss)
        w, b = w - LR * gw, b - LR * gb
    for r, got in enumerate(ranks):
        assert int(got["size"]) == 2 and int(got["buckets"]) >= 1
        np.testing.assert_allclose(got["losses"], want_losses, rtol=1e-5, err_msg=f"rank {r} losses")
        np.testing.assert_allclose(got["W"], w, rtol=1e-5, atol=1e-6, err_msg=f"rank {r} W")
        np.testing.assert_allclose(got["b"], b, rtol=1e-5, atol=1e-6, err_msg=f"rank {r} b")
    assert ranks[0]["W"].tobytes() == ranks[1]["W"].tobytes(), "the ranks' weights drifted apart"
