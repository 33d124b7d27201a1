"""`mpirun -np N kiln train ... --parameter-servers S` (docs/distributed.md, src/distributed/
parameter_server.h) against `--data-parallel`, its independent reference here: in sync mode,
2 workers x batch 8 train as 2 data-parallel ranks x batch 8 — every step's loss (the metrics CSV)
and the final weights within 1e-6 relative — with 1 server and with 2 (whose shards rank 0 gathers
for the export). Async mode trains and reports a lead within its staleness bound. The refused
arguments name the problem.

The binary is $KILN_BIN, or <repo>/build/bin/kiln; mpiexec from PATH."""
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_train import KILN, blobs, initializers, mlp, read_csv  # noqa: E402
from test_train_data_parallel import MPIEXEC, assert_close, mpi_env  # noqa: E402

pytestmark = [pytest.mark.skipif(not KILN.is_file(), reason=f"kiln binary not built: {KILN}"),
              pytest.mark.skipif(MPIEXEC is None, reason="Open MPI (mpiexec) not installed")]


def train(tmp, name, ranks, *extra, check=True):
    model, data = tmp / "mlp.onnx", tmp / "blobs.npz"
    if not model.exists():
        mlp(model), blobs(data, n=260)  # 16 global batches of 16 + 4 dropped
    args = [MPIEXEC, "-n", str(ranks), str(KILN), "train", str(model), "--data", str(data), "--batch-size", "8",
            "--threads", "1", "--epochs", "2", "--seed", "3", "--export", str(tmp / f"{name}.onnx"),
            "--metrics-csv", str(tmp / f"{name}.csv"), *map(str, extra)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=240, env=mpi_env())
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.mark.parametrize("servers,optimizer", [(1, "sgd"), (2, "momentum")])
def test_sync_parameter_servers_train_as_data_parallel(tmp_path, servers, optimizer):
    common = ["--optimizer", optimizer, "--lr", "0.1"]
    train(tmp_path, "dp", 2, *common, "--data-parallel")
    r = train(tmp_path, "ps", servers + 2, *common, "--parameter-servers", servers)
    assert f"parameter servers: {servers} servers" in r.stderr and "2 workers x batch 8 = 16 records per step" in r.stderr
    assert r.stderr.count("trained 32 steps") == 1  # rank 0 alone reports
    dp, ps = read_csv(tmp_path / "dp.csv"), read_csv(tmp_path / "ps.csv")
    assert len(ps) == len(dp) == 32
    np.testing.assert_allclose([float(x["train_loss"]) for x in ps], [float(x["train_loss"]) for x in dp], rtol=1e-6)
    start = initializers(tmp_path / "mlp.onnx")
    assert any(np.max(np.abs(initializers(tmp_path / "dp.onnx")[k] - start[k])) > 1e-2 for k in start)  # it trained
    assert_close(initializers(tmp_path / "ps.onnx"), initializers(tmp_path / "dp.onnx"))


def test_async_parameter_servers_train_within_the_staleness_bound(tmp_path):
    r = train(tmp_path, "async", 3, "--lr", "0.1", "--parameter-servers", "1", "--ps-mode", "async", "--staleness", "1")
    assert "async, staleness at most 1" in r.stderr
    rows = read_csv(tmp_path / "async.csv")
    assert len(rows) == 64  # one row per update: 2 workers x 32 steps
    losses = [float(x["train_loss"]) for x in rows]
    assert np.mean(losses[-8:]) < 0.8 * np.mean(losses[:8]), losses
    lead = re.search(r"largest lead of a worker over the slowest (\d+) \(bound 1\)", r.stderr)
    assert lead and int(lead.group(1)) <= 1, r.stderr


@pytest.mark.parametrize("ranks,extra,message", [
    (2, ["--parameter-servers", "2"], "--parameter-servers 2 leaves no worker: the job has 2 rank(s)"),
    (2, ["--parameter-servers", "1", "--clip-norm", "1"], "--parameter-servers does not support --clip-norm"),
    (2, ["--parameter-servers", "1", "--data-parallel"], "excludes"),
])
def test_refused_parameter_server_arguments(tmp_path, ranks, extra, message):
    r = train(tmp_path, "bad", ranks, *extra, check=False)
    assert r.returncode != 0
    assert message in r.stdout + r.stderr, r.stdout + r.stderr
