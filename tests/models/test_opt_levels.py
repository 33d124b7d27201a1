"""The property test of the pass pipeline: on every test model, the -O3 graph (folded,
simplified, BN-folded, fused) gives the same outputs as -O0 (every node its own kernel),
within float tolerance, and launches no more kernels. -O0 is the reference here because it is
the unoptimized graph; both are also checked against ONNX Runtime by test_models_vs_ort.py
(-O3, the default) and here (-O0), so neither level can drift with the other."""
import numpy as np
import pytest

from kiln_helpers import (RTOL, ATOL, kiln_run_model, load_npz, make_models, ort_outputs,
                          assert_matches_ort, run_kiln)
from test_models_vs_ort import TOLERANCE, _model_files


def kernel_count(model, level):
    proc = run_kiln(["inspect", model, f"-O{level}", "--kernels"])
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.endswith(" kernels"), last
    return int(last.split()[0])


@pytest.mark.parametrize("name", list(make_models.TEST_MODELS))
def test_o3_matches_o0(models_dir, tmp_path, name):
    model, inputs = _model_files(models_dir, name)
    (tmp_path / "o0").mkdir()
    (tmp_path / "o3").mkdir()
    o0, _ = kiln_run_model(model, inputs, str(tmp_path / "o0"), extra=["-O0", "--repeat", "1"])
    o3, _ = kiln_run_model(model, inputs, str(tmp_path / "o3"), extra=["-O3", "--repeat", "1"])
    rtol, atol = TOLERANCE.get(name, (RTOL, ATOL))
    assert sorted(o0) == sorted(o3)
    for k in o0:
        assert o0[k].shape == o3[k].shape and o0[k].dtype == o3[k].dtype, k
        np.testing.assert_allclose(o3[k], o0[k], rtol=rtol, atol=atol, err_msg=f"{name}/{k}")
    assert_matches_ort(o0, ort_outputs(model, load_npz(inputs)), name + " -O0", rtol, atol)
    assert kernel_count(model, 3) <= kernel_count(model, 0)


def test_fusion_reaches_the_expected_kernel_counts(models_dir):
    """resnet_block (6 Conv+BN, 5 Relu, 2 residual Add, MaxPool, GlobalAveragePool, Flatten,
    Gemm): after BN folding and fusion every BN, Relu and Add rides in a conv kernel, so the
    model runs one kernel per convolution plus the MaxPool, GlobalAveragePool and Gemm, plus at
    -O3 the way out of the blocked NCHWc layout after the blocked GlobalAveragePool: a 1x1 map in
    the blocked layout has NCHW's element order, so the transform out is a Reshape, in one kernel
    with the Flatten. The way in is no kernel: the image's 3 channels are blocks of one channel,
    NCHW's own memory (a view)."""
    model, _ = _model_files(models_dir, "resnet_block")
    proc = run_kiln(["inspect", model, "--kernels"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    convs = sum(1 for line in lines if "Conv" in line)
    assert convs == 6, proc.stdout
    assert "BatchNormalization" not in proc.stdout and ": Relu" not in proc.stdout
    assert sum(1 for line in lines if ": KilnLayout" in line) == 0, proc.stdout
    assert any(": Reshape+Flatten" in line for line in lines), proc.stdout
    assert int(lines[-1].split()[0]) == convs + 3 + 1, proc.stdout
