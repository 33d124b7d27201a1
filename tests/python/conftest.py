"""Fixtures of the Python API tests: the runtime module under test (onnxruntime or kiln) and the
small models of small_models.py written to disk."""
import importlib
import os
import sys

import numpy as np
import onnx
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))  # kiln_helpers (and make_models)

import small_models  # noqa: E402


class Runtime:
    """A runtime module and the exception classes a test expects from it. Tests call only
    `rt.mod.<ORT API>`: the same code runs against both (switching is one import)."""

    def __init__(self, name):
        self.name = name
        self.mod = importlib.import_module(name)
        if name == "onnxruntime":
            from onnxruntime.capi import onnxruntime_pybind11_state as state
            self.InvalidArgument = state.InvalidArgument
            self.Terminated = state.Fail      # "Exiting due to terminate flag being set to true"
            self.NoSuchFile = state.NoSuchFile
        else:
            self.InvalidArgument = self.mod.InvalidArgument
            self.Terminated = self.mod.Cancelled
            self.NoSuchFile = self.mod.NoSuchFile


@pytest.fixture(params=["onnxruntime", "kiln"])
def rt(request):
    return Runtime(request.param)


@pytest.fixture(scope="session")
def mlp_model(tmp_path_factory):
    """(path, ModelProto, numpy reference) of small_models.mlp."""
    model, reference = small_models.mlp(np.random.default_rng(7))
    path = tmp_path_factory.mktemp("mlp") / "mlp.onnx"
    onnx.save(model, str(path))
    return str(path), model, reference


@pytest.fixture(scope="session")
def chain_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("chain") / "matmul_chain.onnx"
    onnx.save(small_models.matmul_chain(np.random.default_rng(3)), str(path))
    return str(path)


DIGITS_MODEL = os.path.join(REPO, "models", "digits", "digits_cnn.onnx")
DIGITS_IMAGES = os.path.join(REPO, "models", "digits", "test_images.npz")
