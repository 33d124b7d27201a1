"""Every test model of scripts/make_models.py (the list tests/models/test_models_vs_ort.py runs
through the CLI) and the digits CNN, through kiln.InferenceSession, against
onnxruntime.InferenceSession on the same inputs, with the CLI tests' tolerances."""
import os

import numpy as np
import pytest

from conftest import DIGITS_IMAGES, DIGITS_MODEL
from kiln_helpers import ATOL, RTOL, assert_matches_ort, load_npz, make_models, ort_outputs
from test_models_vs_ort import TOLERANCE

import kiln


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    make_models.write_test_models(str(out), check=False)
    return out


def kiln_outputs(model, feed, threads=1):
    so = kiln.SessionOptions()
    so.intra_op_num_threads = threads
    sess = kiln.InferenceSession(model, so)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feed)))


@pytest.mark.parametrize("name", list(make_models.TEST_MODELS))
def test_model_matches_ort(models_dir, name):
    model = str(models_dir / f"{name}.onnx")
    feed = load_npz(str(models_dir / f"{name}_inputs.npz"))
    rtol, atol = TOLERANCE.get(name, (RTOL, ATOL))
    assert_matches_ort(kiln_outputs(model, feed), ort_outputs(model, feed), name, rtol, atol)


def test_digits_matches_ort():
    feed = load_npz(DIGITS_IMAGES)
    assert_matches_ort(kiln_outputs(DIGITS_MODEL, feed, threads=2), ort_outputs(DIGITS_MODEL, feed), "digits")
