"""perf_analyzer (Triton's load tool, from scripts/serve_test_env.sh) drives the server at several
concurrency levels over HTTP and gRPC and reports a throughput for each; the server's statistics
count at least the requests it reports. Short windows: a smoke test, not a benchmark."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from clients import Triton, stat_of


def perf_analyzer_path():
    for cand in (os.environ.get("PERF_ANALYZER"), str(pathlib.Path(sys.prefix) / "bin" /
                                                      "perf_analyzer"),
                 shutil.which("perf_analyzer")):
        if cand and pathlib.Path(cand).is_file():
            return cand
    return None


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_analyzer_concurrency_sweep(server, protocol):
    pa = perf_analyzer_path()
    if pa is None:
        pytest.skip("perf_analyzer not installed (scripts/serve_test_env.sh installs it)")
    url = server.http_url if protocol == "http" else server.grpc_url
    before = stat_of(Triton("http", server).statistics("mlp"), "mlp")
    cmd = [pa, "-m", "mlp", "-u", url, "-i", protocol, "-b", "1",
           "--concurrency-range", "1:4:3", "--measurement-interval", "400",
           "--max-trials", "4", "--stability-percentage", "500"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{out[-3000:]}"
    rows = re.findall(r"Concurrency: (\d+), throughput: ([\d.]+) infer/sec", out)
    assert [int(c) for c, _ in rows] == [1, 4], out[-3000:]
    assert all(float(t) > 0 for _, t in rows), rows
    after = stat_of(Triton("http", server).statistics("mlp"), "mlp")
    assert after["success"] - before["success"] >= 10, (before, after)
