"""What the tests that run jobs under mpiexec share: Open MPI's environment as root, the pids of
a job's ranks, and a rank lost on purpose while the job runs."""
import contextlib
import os
import subprocess
import time


def mpi_env(**extra):
    """This environment with what Open MPI needs as root in a sandbox, and `extra`."""
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
    env.update(extra)
    return env


def rank_pids(parent):
    """{rank: pid} of mpiexec's children (the ranks it launched on this host)."""
    out = {}
    for pid in subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True).stdout.split():
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        for kv in env:
            if kv.startswith(b"OMPI_COMM_WORLD_RANK="):
                out[int(kv.split(b"=")[1])] = int(pid)
    return out


@contextlib.contextmanager
def mpi_job(cmd, **env):
    """`cmd` started with stdout and stderr piped together (mpi_env(**env)); killed on the way out
    if it still runs, so a failed assertion never leaves a job behind."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=mpi_env(**env))
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def lose_rank(proc, pid, sig):
    """Sends signal `sig` to the rank process `pid` of the running job `proc` and waits (60 s at
    most) for the job to end: (its output from then on, seconds from the signal to the end)."""
    os.kill(pid, sig)
    start = time.monotonic()
    out = proc.communicate(timeout=60)[0]
    return out, time.monotonic() - start
