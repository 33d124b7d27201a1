"""Collectives as graph ops (op/defs/collective_ops.cc, distributed/collective_model.h,
docs/distributed.md "Collectives as graph ops"): ONNX models holding AllReduce, Broadcast,
AllGather and ReduceScatter nodes run under `mpiexec -n N kiln run`, every rank the whole model.
Each rank's inputs are functions of its rank (one .npz per rank, `--inputs in_{rank}.npz`);
numpy computes every rank's expected outputs from all ranks' inputs. 2 and 3 ranks over shared
memory, f32 and i32, tensors whose sizes the rank count does not divide (7 elements). Also: the
fusion count (fewer MPI calls than nodes), the errors (shapes differing across ranks, a
world_size that is not the job's, an uneven ReduceScatter), the run without mpirun (each
collective the identity), and a lost rank ending the job within 10 s."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpi_jobs import lose_rank, mpi_env, mpi_job, rank_pids  # noqa: E402

KILN = os.environ.get("KILN_BIN", "")
MPIEXEC = os.environ.get("MPIEXEC") or shutil.which("mpiexec") or "mpiexec"
DOMAIN = "ai.kiln.distributed"

pytestmark = pytest.mark.skipif(not KILN or not os.path.exists(KILN), reason="KILN_BIN not built")

ONNX_TYPE = {np.float32: TensorProto.FLOAT, np.int32: TensorProto.INT32}


def coll(op, inp, out, **attrs):
    return helper.make_node(op, [inp], [out], name=out, domain=DOMAIN, **attrs)


def save_model(path, nodes, inputs, outputs):
    graph = helper.make_graph(nodes, "collectives", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])
    onnx.save(model, path)


def every_op_model(path, n, dtype):
    """Wave 0: AllReduce x5 reductions, AllReduce of x+x, Broadcast from the last rank, AllGather
    on axes 0 and 1, ReduceScatter (sum, axis 0; mean, axis -1). Stage 1 computes with a wave-0
    result; wave 1 reduces that (max)."""
    t = ONNX_TYPE[dtype]
    nodes = [coll("AllReduce", "x", f"s_{r}", reduce=r) for r in ("sum", "mean", "min", "max", "prod")]
    nodes += [helper.make_node("Add", ["x", "x"], ["twice"], name="twice"),
              coll("AllReduce", "twice", "ar_twice", reduce="sum"),
              helper.make_node("Mul", ["ar_twice", "x"], ["u"], name="u"),
              coll("AllReduce", "u", "ar_u", reduce="max"),
              coll("Broadcast", "x", "b", root=n - 1),
              coll("AllGather", "m", "g0", axis=0, world_size=n),
              coll("AllGather", "m", "g1", axis=1, world_size=n),
              coll("ReduceScatter", "r", "rs0", axis=0, reduce="sum", world_size=n),
              coll("ReduceScatter", "q", "rs1", axis=-1, reduce="mean", world_size=n)]
    shapes = {"x": [7], "m": [2, 5], "r": [2 * n, 3], "q": [3, 2 * n]}
    out_shapes = {"s_sum": [7], "s_mean": [7], "s_min": [7], "s_max": [7], "s_prod": [7], "ar_u": [7], "b": [7],
                  "g0": [2 * n, 5], "g1": [2, 5 * n], "rs0": [2, 3], "rs1": [3, 2]}
    save_model(path, nodes, [helper.make_tensor_value_info(k, t, s) for k, s in shapes.items()],
               [helper.make_tensor_value_info(k, t, s) for k, s in out_shapes.items()])
    return list(out_shapes)


def rank_inputs(rank, n, dtype):
    """Every rank's inputs, a function of its rank (small values: exact in both dtypes)."""
    step = 0.25 if dtype == np.float32 else 1
    x = (np.arange(7) % 4) * step + rank + 1
    m = np.arange(10).reshape(2, 5) + 10 * rank
    r = np.arange(2 * n * 3).reshape(2 * n, 3) - 2 * rank
    q = np.arange(3 * 2 * n).reshape(3, 2 * n) * (rank + 1)
    return {k: v.astype(dtype) for k, v in dict(x=x, m=m, r=r, q=q).items()}


def expected(ins, rank, n, dtype):
    """numpy's outputs for `rank`, from every rank's inputs `ins`."""
    def mean(a):
        return (a.sum(axis=0) // n) if dtype == np.int32 else (a.sum(axis=0) / np.float32(n))
    xs = np.stack([i["x"] for i in ins])
    ar_twice = (xs + xs).sum(axis=0)
    rs, qs = np.stack([i["r"] for i in ins]), np.stack([i["q"] for i in ins])
    return {"s_sum": xs.sum(axis=0), "s_mean": mean(xs), "s_min": xs.min(axis=0), "s_max": xs.max(axis=0),
            "s_prod": xs.prod(axis=0), "ar_u": (ar_twice[None] * xs).max(axis=0), "b": xs[n - 1],
            "g0": np.concatenate([i["m"] for i in ins], axis=0), "g1": np.concatenate([i["m"] for i in ins], axis=1),
            "rs0": rs.sum(axis=0)[2 * rank:2 * rank + 2], "rs1": mean(qs)[:, 2 * rank:2 * rank + 2]}


def write_inputs(tmp_path, n, dtype):
    ins = [rank_inputs(r, n, dtype) for r in range(n)]
    for r in range(n):
        np.savez(tmp_path / f"in_{r}.npz", **ins[r])
    return ins


def kiln_run(model, tmp_path, n, *extra, mpi=True, timeout=180, **env):
    cmd = [KILN, "run", str(model), "--inputs", str(tmp_path / "in_{rank}.npz"), "--output-dir",
           str(tmp_path / "out_{rank}"), "--repeat", "1", "--threads", "1", *extra]
    if mpi:
        cmd = [MPIEXEC, "-n", str(n), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=mpi_env(**env))


def check_outputs(tmp_path, names, ins, n, dtype):
    for rank in range(n):
        want = expected(ins, rank, n, dtype)
        for name in names:
            got = np.load(tmp_path / f"out_{rank}" / f"{name}.npy")
            assert got.dtype == dtype, (name, got.dtype)
            assert got.shape == want[name].shape, (rank, name, got.shape, want[name].shape)
            if dtype == np.float32:
                np.testing.assert_allclose(got, want[name], rtol=1e-6, atol=0, err_msg=f"rank {rank} {name}")
            else:
                np.testing.assert_array_equal(got, want[name], err_msg=f"rank {rank} {name}")


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=["f32", "i32"])
def test_every_op_against_numpy(tmp_path, n, dtype):
    names = every_op_model(tmp_path / "m.onnx", n, dtype)
    ins = write_inputs(tmp_path, n, dtype)
    p = kiln_run(tmp_path / "m.onnx", tmp_path, n)
    assert p.returncode == 0, p.stdout + p.stderr
    check_outputs(tmp_path, names, ins, n, dtype)
    # 12 nodes: wave 0's two AllReduce(sum) nodes share one fused call, every other group is one.
    assert f"collectives: 12 nodes in 2 waves over {n} rank(s); 11 MPI data calls per run" in p.stdout, p.stdout


def test_without_mpirun_each_collective_is_the_identity(tmp_path):
    names = every_op_model(tmp_path / "m.onnx", 1, np.float32)
    ins = write_inputs(tmp_path, 1, np.float32)
    p = kiln_run(tmp_path / "m.onnx", tmp_path, 1, mpi=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "(no mpirun: each is the identity); 0 MPI data calls per run" in p.stdout, p.stdout
    check_outputs(tmp_path, names, ins, 1, np.float32)


@pytest.mark.parametrize("n", [2, 3])
def test_fusion_packs_ready_nodes_into_one_call_per_dtype(tmp_path, n):
    """Six independent AllReduce(sum) nodes of one step: five f32 (sizes 1..5) and one i32. The
    f32 ones go in one fused buffer, the i32 one in its own: 2 MPI calls for 6 nodes."""
    sizes = [1, 2, 3, 4, 5, 7]
    types = [np.float32] * 5 + [np.int32]
    nodes = [coll("AllReduce", f"x{i}", f"y{i}", reduce="sum") for i in range(6)]
    save_model(tmp_path / "f.onnx", nodes,
               [helper.make_tensor_value_info(f"x{i}", ONNX_TYPE[t], [s]) for i, (s, t) in enumerate(zip(sizes, types))],
               [helper.make_tensor_value_info(f"y{i}", ONNX_TYPE[t], [s]) for i, (s, t) in enumerate(zip(sizes, types))])
    ins = []
    for r in range(n):
        ins.append({f"x{i}": (np.arange(s) * 0.5 + r * 3 + i).astype(t) for i, (s, t) in enumerate(zip(sizes, types))})
        np.savez(tmp_path / f"in_{r}.npz", **ins[r])
    p = kiln_run(tmp_path / "f.onnx", tmp_path, n)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"collectives: 6 nodes in 1 waves over {n} rank(s); 2 MPI data calls per run" in p.stdout, p.stdout
    for r in range(n):
        for i, t in enumerate(types):
            want = np.sum([ins[k][f"x{i}"] for k in range(n)], axis=0).astype(t)
            np.testing.assert_allclose(np.load(tmp_path / f"out_{r}" / f"y{i}.npy"), want, rtol=1e-6)


def test_shapes_differing_across_ranks_name_the_rank_and_the_node(tmp_path):
    """x has a symbolic dim bound to 3 on rank 0 and 4 on rank 1 (MPMD launch)."""
    save_model(tmp_path / "s.onnx", [coll("AllReduce", "x", "ar_x", reduce="sum")],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
               [helper.make_tensor_value_info("ar_x", TensorProto.FLOAT, ["n"])])
    base = [KILN, "run", str(tmp_path / "s.onnx"), "--repeat", "1", "--threads", "1"]
    cmd = [MPIEXEC, "-n", "1", *base, "--dim", "n=3", ":", "-n", "1", *base, "--dim", "n=4"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=mpi_env())
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "rank 1 disagrees with rank 0" in out, out
    assert "rank 0 has 'AllReduce reduce=sum ar_x f32[3]', rank 1 has 'AllReduce reduce=sum ar_x f32[4]'" in out, out


def test_world_size_other_than_the_jobs_is_an_error(tmp_path):
    every_op_model(tmp_path / "m.onnx", 2, np.float32)
    write_inputs(tmp_path, 3, np.float32)
    for r in range(3):  # the model's inputs are sized for 2 ranks
        np.savez(tmp_path / f"in_{r}.npz", **rank_inputs(r, 2, np.float32))
    p = kiln_run(tmp_path / "m.onnx", tmp_path, 3)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "AllGather node 'g0': world_size=2 in the model, but the job has 3 rank(s)" in out, out


def test_reduce_scatter_that_does_not_split_evenly_is_an_error(tmp_path):
    save_model(tmp_path / "u.onnx", [coll("ReduceScatter", "x", "rs", world_size=2)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [7])],
               [helper.make_tensor_value_info("rs", TensorProto.FLOAT, [3])])
    p = subprocess.run([KILN, "run", str(tmp_path / "u.onnx"), "--repeat", "1"], capture_output=True, text=True,
                       timeout=60, env=mpi_env())
    assert p.returncode != 0, p.stdout + p.stderr
    assert "ReduceScatter node 'rs': axis 0 of f32[7] has 7 elements, which 2 ranks cannot split evenly" in p.stderr, p.stderr


def test_partition_of_a_model_with_collectives_is_refused(tmp_path):
    every_op_model(tmp_path / "m.onnx", 1, np.float32)
    p = subprocess.run([KILN, "run", str(tmp_path / "m.onnx"), "--partition", "2"], capture_output=True, text=True,
                       timeout=60, env=mpi_env())
    assert p.returncode != 0, p.stdout + p.stderr
    assert "holds collective ops (ai.kiln.distributed): every rank runs it whole on the CPU" in p.stderr, p.stderr


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGSTOP"])
def test_a_lost_rank_ends_the_job_naming_it(tmp_path, sig):
    """Rank 1 killed (the launcher notices) or stopped (alive to the launcher: only the heartbeat,
    timeout 3 s here, notices) while the ranks run steps of collectives: the job must end non-zero
    naming rank 1 within 10 s of the signal."""
    every_op_model(tmp_path / "m.onnx", 2, np.float32)
    write_inputs(tmp_path, 2, np.float32)
    cmd = [MPIEXEC, "-n", "2", KILN, "run", str(tmp_path / "m.onnx"), "--inputs", str(tmp_path / "in_{rank}.npz"),
           "--threads", "1", "--repeat", "1000000"]
    with mpi_job(cmd, KILN_DIST_HEARTBEAT_TIMEOUT="3") as proc:
        pids, deadline = {}, time.monotonic() + 60
        while 1 not in pids and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            pids = rank_pids(proc.pid)
        assert 1 in pids, f"rank 1 never started: {pids}"
        time.sleep(3)  # past compiling: the ranks are running steps
        out, seconds = lose_rank(proc, pids[1], getattr(signal, sig))
    assert proc.returncode != 0, out[-2000:]
    assert ("lost rank 1" in out) or ("rank 1" in out and "exited on signal 9" in out), out[-2000:]
    if sig == "SIGSTOP":
        assert "lost rank 1: no heartbeat for" in out, out[-2000:]
    print(f"{sig}: the job ended {seconds:.1f} s after the signal")
    assert seconds < 10, f"took {seconds:.1f} s after rank 1 was lost\n{out[-2000:]}"
