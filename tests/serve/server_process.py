"""Starts and stops the server under test as a child process, every wait bounded.

The command is `kiln serve` ($KILN_BIN, default build/bin/kiln) or, with KILN_SERVE_REFERENCE=1,
tests/serve/reference_server.py (the tests' own check). Ports are 0 (the OS picks); the server
prints "kiln serve: HTTP on HOST:PORT" (and gRPC, metrics) lines that are parsed here.
"""
import http.client
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
PORT_LINE = re.compile(r"kiln serve: (HTTP|gRPC|metrics) on (\S+):(\d+)")

START_TIMEOUT_S = float(os.environ.get("KILN_SERVE_START_TIMEOUT", "240"))
STOP_TIMEOUT_S = 60


def server_command():
    if os.environ.get("KILN_SERVE_REFERENCE") == "1":
        return [sys.executable, str(HERE / "reference_server.py")]
    kiln = os.environ.get("KILN_BIN", str(REPO_ROOT / "build" / "bin" / "kiln"))
    return [kiln, "serve"]


def kiln_binary_missing():
    cmd = server_command()
    return cmd[-1] == "serve" and not pathlib.Path(cmd[0]).is_file()


class ServerProcess:
    def __init__(self, repository, extra_args=(), log_path=None, env=None):
        """`env`: variables added to the server's environment (e.g. KILN_PREEMPT_TRACE)."""
        self.repository = pathlib.Path(repository)
        self.extra_env = dict(env or {})
        self.args = [*server_command(), "--model-repository", str(repository),
                     "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0", *extra_args]
        self.log_path = pathlib.Path(log_path or self.repository.parent / "server.log")
        self.ports = {}
        self.proc = None
        self._lines = []
        self._ports_seen = threading.Event()

    # ---- lifecycle ----------------------------------------------------------------------------
    def start(self):
        env = {**os.environ, **self.extra_env}
        env["PYTHONPATH"] = str(HERE) + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, text=True, bufsize=1)
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._ports_seen.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"server did not print its ports: {self.args}\n{self.log()}")
        while True:
            status = self._get_status("/v2/health/ready")
            if status == 200:
                return self
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"server not ready after {START_TIMEOUT_S}s "
                                   f"(last /v2/health/ready: {status})\n{self.log()}")
            time.sleep(0.2)

    def _pump(self):
        with open(self.log_path, "w") as log:
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                self._lines.append(line)
                m = PORT_LINE.search(line)
                if m:
                    self.ports[m.group(1)] = int(m.group(3))
                    if len(self.ports) == 3:
                        self._ports_seen.set()

    def _get_status(self, path):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=5)
            conn.request("GET", path)
            status = conn.getresponse().status
            conn.close()
            return status
        except OSError as e:
            return repr(e)

    def terminate(self, timeout=STOP_TIMEOUT_S):
        """SIGTERM, then the exit code (the process is killed, and None returned, when it does
        not exit within `timeout`)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def alive(self):
        return self.proc.poll() is None

    def log(self, last=60):
        return "".join(self._lines[-last:])

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    # ---- addresses ----------------------------------------------------------------------------
    @property
    def http_port(self):
        return self.ports["HTTP"]

    @property
    def grpc_port(self):
        return self.ports["gRPC"]

    @property
    def metrics_port(self):
        return self.ports["metrics"]

    @property
    def http_url(self):
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self):
        return f"127.0.0.1:{self.grpc_port}"
