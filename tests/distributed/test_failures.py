"""Failures never hang (src/distributed, docs/distributed.md): a rank killed (SIGKILL), stopped
(SIGSTOP: alive but silent, which only the heartbeat notices) or failing with an error makes
every rank exit non-zero within 10 s, with a message naming the lost rank. Runs
tests/distributed/fault_probe.cc under mpiexec (ctest sets KILN_FAULT_PROBE and MPIEXEC), on
shared memory and across two network namespaces (netns.py: TCP; where root allows).
The time is asserted loosely; a hang is the failure (the subprocess timeout)."""
import os
import shutil
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402
from mpi_jobs import lose_rank, mpi_env, mpi_job, rank_pids  # noqa: E402

PROBE = os.environ.get("KILN_FAULT_PROBE", "")
MPIEXEC = os.environ.get("MPIEXEC") or shutil.which("mpiexec") or "mpiexec"

pytestmark = pytest.mark.skipif(not PROBE or not os.path.exists(PROBE), reason="KILN_FAULT_PROBE not built")


def run_probe(np, *args, prefix=None, **env):
    """(returncode, output, seconds from the start to the exit). `prefix`: an mpiexec command
    with its -n (netns.two_namespaces())."""
    cmd = [*(prefix or [MPIEXEC, "-n", str(np)]), PROBE, "--steps", "2000", *args]
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=mpi_env(**env))
    # The fault comes at step 25, after ~0.5 s of 20 ms steps plus the start-up.
    return p.returncode, p.stdout + p.stderr, time.monotonic() - start


def test_clean_run_exits_zero():
    cmd = [MPIEXEC, "-n", "2", PROBE, "--steps", "20"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=mpi_env())
    assert p.returncode == 0, p.stdout + p.stderr
    assert "20 steps done" in p.stderr


def test_killed_rank_ends_the_job():
    rc, out, seconds = run_probe(2, "--rank", "1", "--at-step", "25", "--signal", "KILL")
    assert rc != 0, out
    assert "rank 1: KILL at step 25" in out
    # mpirun notices the dead process and names it; the heartbeat would too.
    assert "rank 1" in out and ("exited on signal 9" in out or "lost rank 1" in out), out
    assert seconds < 30, (seconds, out)


def test_stopped_rank_is_noticed_by_the_heartbeat():
    # A stopped process is alive to mpirun: only the heartbeat can notice it.
    rc, out, seconds = run_probe(3, "--rank", "2", "--at-step", "25", "--signal", "STOP",
                                 KILN_DIST_HEARTBEAT_TIMEOUT="2")
    assert rc != 0, out
    assert "lost rank 2: no heartbeat for" in out, out
    assert seconds < 30, (seconds, out)


def test_rank_that_skips_a_collective_ends_the_job_at_the_deadline():
    # Rank 1 is alive (its heartbeat beats) but never joins step 25's allreduce: rank 0 waits in
    # a blocking MPI call, which only the heartbeat thread's watchdog can end.
    rc, out, seconds = run_probe(2, "--rank", "1", "--at-step", "25", "--signal", "SKIP", KILN_DIST_TIMEOUT="2")
    assert rc != 0, out
    assert "rank 0: allreduce(sum) did not complete within 2 s while every rank's heartbeat is alive" in out, out
    assert seconds < 30, (seconds, out)


def test_error_on_one_rank_aborts_every_rank():
    rc, out, seconds = run_probe(2, "--rank", "0", "--at-step", "25", "--signal", "ERROR")
    assert rc != 0, out
    assert "rank 0 of 2 aborting the job" in out and "a bad batch on rank 0" in out, out
    assert seconds < 30, (seconds, out)


@pytest.mark.skipif(not netns.available(), reason="needs root and ip netns")
@pytest.mark.parametrize("signal_name", ["KILL", "STOP"])
def test_lost_rank_across_network_namespaces(signal_name):
    with netns.two_namespaces() as prefix:
        rc, out, seconds = run_probe(2, "--rank", "1", "--at-step", "25", "--signal", signal_name, prefix=prefix,
                                     KILN_DIST_HEARTBEAT_TIMEOUT="2")
    assert rc != 0, out
    assert f"rank 1: {signal_name} at step 25" in out
    if signal_name == "STOP":
        assert "lost rank 1: no heartbeat for" in out, out
    else:
        assert "exited on signal 9" in out or "lost rank 1" in out, out
    assert seconds < 30, (seconds, out)


KILN = os.environ.get("KILN_BIN") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
                                                  "bin", "kiln")


def train_and_lose_rank(tmp_path, train_args, lost, sig, ranks=3):
    """`kiln train` of the CLI tests' MLP on `ranks` ranks with `train_args`, rank `lost` sent `sig` once
    rank 0 has logged its fifth step: (the job's exit status, its whole output, seconds from the
    signal to the end). The heartbeat's timeout is 3 s here."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
    import pathlib
    from test_train import blobs, mlp
    model, data = mlp(pathlib.Path(tmp_path / "mlp.onnx")), blobs(pathlib.Path(tmp_path / "blobs.npz"), n=256)
    args = [MPIEXEC, "-n", str(ranks), KILN, "train", str(model), "--data", str(data), "--batch-size", "8", "--threads", "1",
            "--epochs", "100000", "--log-every", "1", *train_args]
    with mpi_job(args, KILN_DIST_HEARTBEAT_TIMEOUT="3") as proc:
        lines = []
        for line in proc.stdout:  # until training runs (rank 0 logs steps)
            lines.append(line)
            if "epoch 1/100000 step 5/" in line:
                break
        pids = rank_pids(proc.pid)
        assert lost in pids, (pids, "".join(lines))
        rest, seconds = lose_rank(proc, pids[lost], sig)
    return proc.returncode, "".join(lines) + rest, seconds


@pytest.mark.skipif(not os.path.exists(KILN), reason="kiln binary not built")
@pytest.mark.parametrize("mode,lost", [("sync", 0), ("async", 2)])
def test_lost_parameter_server_or_worker_ends_the_job(tmp_path, mode, lost):
    """`kiln train --parameter-servers 1` on 3 ranks (rank 0 serves, ranks 1 and 2 work): the server
    (sync) or a worker (async, where the other worker runs on until the staleness bound holds it)
    stopped mid-training. The peers wait on it in a rendezvous receive; the heartbeat ends the job
    non-zero, naming the lost rank, within 10 s of the signal (timeout 3 s here)."""
    import signal
    returncode, out, seconds = train_and_lose_rank(
        tmp_path, ["--parameter-servers", "1", "--ps-mode", mode], lost, signal.SIGSTOP)
    assert returncode != 0, out[-2000:]
    assert f"lost rank {lost}: no heartbeat for" in out, out[-2000:]
    assert seconds < 10, (seconds, out[-2000:])


@pytest.mark.skipif(not os.path.exists(KILN), reason="kiln binary not built")
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGSTOP"])
@pytest.mark.parametrize("dispatch", ["replicated", "master"])
def test_lost_pipeline_stage_ends_the_job(tmp_path, sig, dispatch):
    """`kiln train --pipeline-parallel` on 3 ranks (the MLP's Gemm, Relu and Gemm, one stage
    each): the middle stage killed (the launcher notices) or stopped (only the heartbeat notices,
    timeout 3 s here) mid-training. Its neighbours wait on it in rendezvous receives (activations
    on rank 2, gradients on rank 0; under --dispatch master rank 2 may also wait for its next
    order, which has no deadline of its own); the job ends non-zero, naming rank 1, within 10 s
    of the signal."""
    import signal
    returncode, out, seconds = train_and_lose_rank(
        tmp_path, ["--pipeline-parallel", "--microbatches", "2", "--dispatch", dispatch], 1, getattr(signal, sig))
    assert returncode != 0, out[-2000:]
    if sig == "SIGSTOP":
        assert "lost rank 1: no heartbeat for" in out, out[-2000:]
    else:
        assert "lost rank 1" in out or ("rank 1" in out and "exited on signal 9" in out), out[-2000:]
    print(f"pipeline stage {sig}: the job ended {seconds:.1f} s after the signal")
    assert seconds < 10, (seconds, out[-2000:])


@pytest.mark.skipif(not os.path.exists(KILN), reason="kiln binary not built")
def test_lost_replica_stage_ends_the_job(tmp_path):
    """Pipeline and data parallelism together on 4 ranks (2 stages x 2 replicas, batch 8 per
    replica): rank 2 (replica 1's first stage) stopped mid-training. Rank 3 waits on it in its
    replica's rendezvous receives, rank 0 in the stage's gradient allreduce over the replicas
    (both on split communicators); the world's heartbeat ends the job non-zero, naming rank 2,
    within 10 s of the signal (timeout 3 s here)."""
    import signal
    returncode, out, seconds = train_and_lose_rank(
        tmp_path, ["--pipeline-parallel", "--pipeline-stages", "2", "--data-parallel", "--microbatches", "2"], 2,
        signal.SIGSTOP, ranks=4)
    assert returncode != 0, out[-2000:]
    assert "lost rank 2: no heartbeat for" in out, out[-2000:]
    print(f"replica stage SIGSTOP: the job ended {seconds:.1f} s after the signal")
    assert seconds < 10, (seconds, out[-2000:])
