"""`mpirun -np N kiln train ... --pipeline-parallel --microbatches M` (docs/distributed.md)
against one process: N stages over M microbatches of each batch of 16 train the same parameters
as one process stepping on the same batches of 16, within 1e-6 relative (each gradient is a sum
over M microbatches instead of one sum over the batch, so not bitwise). The combinations it
refuses. A stage lost mid-training: tests/distributed/test_failures.py.

The binary is $KILN_BIN, or <repo>/build/bin/kiln; mpiexec from PATH."""
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_train import KILN, assert_clean_error, blobs, initializers, mlp  # noqa: E402
from test_train_data_parallel import assert_close, mpi_env  # noqa: E402

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
    import onnx
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
    (2, ["--data-parallel"], ["--pipeline-parallel cannot be combined with --data-parallel", "not a replica"]),
    (2, ["--parameter-servers", "1"], ["--pipeline-parallel cannot be combined with --parameter-servers"]),
    (2, ["--microbatches", "3"], ["--microbatches 3 does not divide N=16"]),
    (4, [], ["has 3 nodes to train, fewer than the ranks"]),
    (2, ["--clip-norm", "1"], ["--pipeline-parallel does not support --clip-norm"]),
    (2, ["--checkpoint-dir", "ck"], ["--pipeline-parallel does not support --checkpoint-dir"]),
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
