"""Runs ONNX backend node tests through `kiln test-onnx` and parses its per-test lines.

`kiln test-onnx DIR --jobs N` prints one line per test, "PASS name", "FAIL name: reason" or
"UNSUPPORTED name: reason", then "<P> passed, <F> failed, <U> unsupported".
"""
import re
import subprocess

_LINE = re.compile(r"^(PASS|FAIL|UNSUPPORTED) (\S+?)(?::\s?(.*))?$")


def parse(stdout):
    """{name: {"status", "reason"}} from kiln test-onnx output."""
    results = {}
    for line in stdout.splitlines():
        m = _LINE.match(line)
        if m:
            results[m.group(2)] = {"status": m.group(1), "reason": m.group(3) or ""}
    return results


def run(kiln, node_dir, jobs=2, filter_substr=None, opt_level=3):
    """(results, completed process) of `kiln test-onnx node_dir -O<opt_level>`."""
    cmd = [kiln, "test-onnx", node_dir, "--jobs", str(jobs), f"-O{opt_level}"]
    if filter_substr:
        cmd += ["--filter", filter_substr]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return parse(proc.stdout), proc
