"""Fixtures of the `kiln serve` end-to-end tests: a temporary model repository (repo_models.py),
the server under test started on it once per session (server_process.py; SIGTERM at the end
must exit 0), ONNX Runtime as the reference, and a factory for extra servers that a test stops
itself.

Run: KILN_BIN=build/bin/kiln build/serve-venv/bin/python -m pytest -q tests/serve
(scripts/serve_test_env.sh makes the venv with tritonclient). KILN_SERVE_REFERENCE=1 runs the
same tests against tests/serve/reference_server.py (ONNX Runtime) instead of `kiln serve`.

No test may hang: clients and process waits have timeouts, and a watchdog (faulthandler) dumps
every thread's stack and ends the run when one test passes TEST_LIMIT_S.
"""
import faulthandler
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import clients  # noqa: E402
import repo_models  # noqa: E402
from server_process import ServerProcess, kiln_binary_missing, server_command  # noqa: E402

TEST_LIMIT_S = float(os.environ.get("KILN_SERVE_TEST_LIMIT", "300"))


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    if kiln_binary_missing():
        skip = pytest.mark.skip(reason=f"kiln binary not built: {server_command()[0]}")
        for item in items:
            if str(item.fspath).startswith(here):
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _watchdog():
    faulthandler.dump_traceback_later(TEST_LIMIT_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def repo_dir(tmp_path_factory):
    return repo_models.write_repository(tmp_path_factory.mktemp("serve") / "repo")


@pytest.fixture(scope="session")
def reference(repo_dir):
    return repo_models.Reference(repo_dir)


@pytest.fixture(scope="session")
def server(repo_dir):
    # Every model loaded at start, and the repository API on (Triton's explicit mode with "*").
    srv = ServerProcess(repo_dir, ["--model-control-mode", "explicit", "--load-model", "*"]).start()
    yield srv
    alive = srv.alive()
    code = srv.terminate()
    assert alive, f"the server died during the tests:\n{srv.log()}"
    assert code == 0, f"server exit code after SIGTERM: {code}\n{srv.log()}"


@pytest.fixture
def start_server(tmp_path):
    """Factory: start_server(models, *extra_args, env=None) -> a started ServerProcess on a
    repository of `models` only, with `env` added to its environment; killed at teardown if the
    test left it running."""
    started = []

    def start(models, *extra_args, env=None):
        root = repo_models.write_repository(tmp_path / f"repo{len(started)}", models)
        srv = ServerProcess(root, extra_args, log_path=tmp_path / f"server{len(started)}.log", env=env)
        started.append(srv)
        return srv.start()

    yield start
    for srv in started:
        srv.kill()


@pytest.fixture(params=["http", "grpc"])
def triton(request, server):
    pytest.importorskip("tritonclient.http")
    pytest.importorskip("tritonclient.grpc")
    client = clients.Triton(request.param, server)
    yield client
    client.close()


@pytest.fixture(scope="session")
def slow_latency_s(server):
    """Seconds one request to the slow model takes on an idle server (measured, best of 3)."""
    x = repo_models.sample_inputs("slow", rows=1)
    best = None
    for _ in range(3):
        t0 = time.monotonic()
        r = clients.http_infer(server.http_port, "slow", x, binary=True)
        assert r.status == 200, r.error()
        dt = time.monotonic() - t0
        best = dt if best is None else min(best, dt)
    return best
