"""Starting and stopping the servers under test, and reading their Prometheus metrics.

`start_kiln(...)` runs `kiln serve --model-repository DIR --http-port 0 --grpc-port 0
--metrics-port 0 [--threads N] [extra flags]`, `start_ort(...)` runs bench/ort_kserve_server.py
on the same repository; both print one "... HTTP on HOST:PORT" line per bound port, which is
parsed here. `ServerProc.wait_ready()` polls /v2/health/ready, `stop()` sends SIGTERM (both
servers stop gracefully) and kills after a grace period.
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

import serve_client

HERE = os.path.dirname(os.path.abspath(__file__))
PORT_LINE = re.compile(r"\b(HTTP|gRPC|metrics) on ([0-9.]+|\[[0-9a-f:]*\]|[\w.-]+):(\d+)")


class ServerProc:
    def __init__(self, name, cmd, env=None):
        self.name, self.cmd = name, cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, start_new_session=True)
        self.ports, self.log = {}, []
        self._have_http = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.log.append(line.rstrip("\n"))
            if len(self.log) > 200:
                del self.log[:100]
            m = PORT_LINE.search(line)
            if m:
                self.ports[m.group(1)] = int(m.group(3))
                if m.group(1) == "HTTP":
                    self._have_http.set()
        self._have_http.set()  # exited: wake a waiter

    def tail(self, n=20):
        return "\n".join(self.log[-n:])

    @property
    def addr(self):
        return ("127.0.0.1", self.ports["HTTP"])

    @property
    def metrics_addr(self):
        port = self.ports.get("metrics", self.ports.get("HTTP"))
        return ("127.0.0.1", port)

    def wait_ready(self, seconds=600, models=()):
        """Waits for the port line and readiness; raises with the server's log on failure."""
        self._have_http.wait(seconds)
        if "HTTP" not in self.ports:
            self.stop()
            raise RuntimeError(f"{self.name}: no 'HTTP on' line from {' '.join(self.cmd)}:\n"
                               f"{self.tail()}")
        if not serve_client.wait_ready(self.addr, seconds, models, self.proc):
            self.stop()
            raise RuntimeError(f"{self.name}: not ready within {seconds} s:\n{self.tail()}")
        return self

    def rss_mb(self):
        """Resident memory of the server process (MiB), None when gone."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def metrics(self):
        """The parsed samples of GET /metrics on the metrics port ([] for a server that
        exports none: the ORT peer)."""
        if "metrics" not in self.ports:
            return []
        conn = serve_client.Connection(self.metrics_addr, timeout=10)
        try:
            status, _, data = conn.request("GET", "/metrics")
        finally:
            conn.close()
        if status != 200:
            raise RuntimeError(f"{self.name}: GET /metrics answered {status}")
        return parse_prometheus(data.decode())

    def stop(self, grace=30):
        """SIGTERM, then SIGKILL after `grace` seconds; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start_kiln(kiln, repo, threads=None, extra=(), cache_dir=None):
    """`kiln serve` on `repo`; $KILN_SERVE_ARGS (shell words) are appended to every start."""
    cmd = [kiln, "serve", "--model-repository", repo, "--http-port", "0", "--grpc-port", "0",
           "--metrics-port", "0"]
    if threads:
        cmd += ["--threads", str(threads)]
    cmd += list(extra) + shlex.split(os.environ.get("KILN_SERVE_ARGS", ""))
    env = dict(os.environ)
    if cache_dir:
        env["KILN_CACHE_DIR"] = cache_dir
    return ServerProc("kiln" + "".join(" " + e for e in extra), cmd, env)


def start_ort(repo, threads=None, python=None):
    cmd = [python or sys.executable, os.path.join(HERE, "ort_kserve_server.py"),
           "--model-repository", repo, "--http-port", "0", "--host", "127.0.0.1"]
    if threads:
        cmd += ["--threads", str(threads)]
    return ServerProc("ort", cmd)


# ---- Prometheus text ---------------------------------------------------------------------------

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text):
    """[(name, {label: value}, float)] of every sample line."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if m:
            labels = dict(LABEL.findall(m.group(2) or ""))
            out.append((m.group(1), labels, float(m.group(3))))
    return out


def metric_sum(samples, name, **labels):
    """Sum of the samples named `name` whose labels include `labels`."""
    return sum(v for n, ls, v in samples
               if n == name and all(ls.get(k) == w for k, w in labels.items()))


def histogram(samples, name, **labels):
    """[(upper bound, cumulative count)] of histogram `name` (its _bucket samples, summed over
    label sets that match `labels`)."""
    buckets = {}
    for n, ls, v in samples:
        if n == name + "_bucket" and all(ls.get(k) == w for k, w in labels.items()):
            le = float("inf") if ls["le"] in ("+Inf", "Inf") else float(ls["le"])
            buckets[le] = buckets.get(le, 0.0) + v
    return sorted(buckets.items())


def histogram_delta(after, before):
    """Bucket counts of `after` minus `before` (same bounds): the observations between."""
    b = dict(before)
    return [(le, c - b.get(le, 0.0)) for le, c in after]


def histogram_quantile(buckets, q):
    """Prometheus' histogram_quantile: linear inside the bucket holding the q-th observation;
    the bucket's upper bound for the last finite one; None without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return prev_le
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le
