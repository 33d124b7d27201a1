"""Fixtures of the model tests: the random-weight test models are generated once per session."""
import pytest

from kiln_helpers import make_models


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory):
    """A directory holding every test model of scripts/make_models.py and its _inputs.npz."""
    out = tmp_path_factory.mktemp("models")
    make_models.write_test_models(str(out), check=False)
    return out
