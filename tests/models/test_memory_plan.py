"""Memory plans of every generated test model, through `kiln inspect --memory` and `kiln run`.

Every compile runs the plan checker (compiler/plan_executable.cc: a violation is an internal
error), so `kiln inspect --memory` succeeding on a model means its plan was verified; here the
figures are also checked against each other, for the sequential and the concurrent (dataflow)
plan. The budget tests run `kiln run --memory-limit` just below and at the planned bytes.
"""
import re

import pytest

from kiln_helpers import make_models, run_kiln

FIGURES = ("arena", "naive sum", "lower bound", "in-place steps", "planned tensors")


def memory_figures(model, executor="sequential", opt_level=3):
    r = run_kiln(["inspect", model, "--memory", "--executor", executor, f"-O{opt_level}"])
    assert r.returncode == 0, r.stderr
    figs = {}
    for key in FIGURES:
        m = re.search(rf"^{key}: (\d+)$", r.stdout, re.M)
        assert m, f"no '{key}:' line in:\n{r.stdout}"
        figs[key] = int(m.group(1))
    return figs, r.stdout


@pytest.mark.parametrize("name", sorted(make_models.TEST_MODELS))
@pytest.mark.parametrize("executor", ["sequential", "dataflow"])
def test_plan_figures(models_dir, name, executor):
    figs, text = memory_figures(str(models_dir / f"{name}.onnx"), executor)
    padding = 64 * figs["planned tensors"]  # offsets are 64-byte aligned
    assert figs["lower bound"] <= figs["arena"] <= figs["naive sum"] + padding, text
    assert "largest tensors:" in text
    if executor == "sequential" and figs["planned tensors"] > 4:
        # Reuse must actually happen on every model with a few intermediates.
        assert figs["arena"] < figs["naive sum"], text


def test_sequential_arena_reaches_the_lower_bound_on_resnet18(models_dir):
    # -O0: BatchNormalization, Relu and Add are steps of their own and run in place; at -O3
    # they ride in conv kernels, so nothing is left to run in place.
    for level in (0, 3):
        figs, text = memory_figures(str(models_dir / "resnet18.onnx"), opt_level=level)
        if level == 0:
            assert figs["in-place steps"] > 0, text
        assert figs["arena"] <= 1.1 * figs["lower bound"], text


def _arena_bytes(model):
    return memory_figures(model)[0]["arena"]


def test_memory_limit_one_byte_short_is_a_clean_out_of_memory(models_dir):
    model = str(models_dir / "small_cnn.onnx")
    inputs = str(models_dir / "small_cnn_inputs.npz")
    arena = _arena_bytes(model)
    r = run_kiln(["run", model, "--inputs", inputs, "--repeat", "1", "--executor", "sequential",
                  "--memory-limit", arena - 1])
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(rf"error: OutOfMemory: out of memory budget: allocating {arena} bytes for "
                     rf"'arena for \d+ model intermediates' with 0 bytes in use exceeds the budget "
                     rf"of {arena - 1} bytes", r.stderr), r.stderr
    # Enough for the arena and the outputs of a few runs in flight: it runs.
    r = run_kiln(["run", model, "--inputs", inputs, "--repeat", "3", "--executor", "sequential",
                  "--memory-limit", arena + (1 << 20), "--memory"])
    assert r.returncode == 0, r.stderr
    assert re.search(r"allocator: .* (\d+) hits", r.stdout), r.stdout
    hits = int(re.search(r"(\d+) hits", r.stdout).group(1))
    assert hits >= 1, r.stdout  # later runs' outputs come from the cache
