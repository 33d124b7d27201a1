#!/usr/bin/env python3
"""Runs the ONNX backend node test suite (shipped in the installed `onnx` wheel) through
`kiln test-onnx` and checks it against the checked-in list of expected passes.

Fails (exit 1) if a test on the expected list does not pass: a regression. Tests that pass
but are not on the list are reported so the list can be updated deliberately
(`--update` rewrites it).
"""
import argparse
import os
import re
import subprocess
import sys


def node_test_dir():
    import onnx

    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    if not os.path.isdir(d):
        sys.exit(f"error: {d} not found: install onnx==1.19.1 (scripts/install_deps.sh)")
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kiln", required=True, help="path of the kiln binary")
    ap.add_argument("--expected", required=True, help="expected-pass list (one test name per line)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--update", action="store_true", help="rewrite the expected list with today's passes")
    args = ap.parse_args()

    proc = subprocess.run([args.kiln, "test-onnx", node_test_dir(), "--jobs", str(args.jobs)],
                          capture_output=True, text=True)
    status = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^(PASS|FAIL|UNSUPPORTED) (\S+?)(:|$)", line)
        if m:
            status[m.group(2)] = m.group(1)
    if not status:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        sys.exit("error: kiln test-onnx produced no results")

    with open(args.expected) as f:
        expected = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    passed = {t for t, s in status.items() if s == "PASS"}
    regressions = sorted(t for t in expected if status.get(t) != "PASS")
    new = sorted(passed - expected)
    counts = {k: sum(1 for s in status.values() if s == k) for k in ("PASS", "FAIL", "UNSUPPORTED")}
    print(f"conformance: {len(status)} tests: {counts['PASS']} pass, {counts['FAIL']} fail, "
          f"{counts['UNSUPPORTED']} unsupported; {len(expected)} expected to pass")
    if new:
        print(f"{len(new)} tests pass that are not on the expected list: {' '.join(new)}")
    if args.update:
        with open(args.expected, "w") as f:
            f.write("# ONNX backend node tests Kiln passes (tests/conformance/run_conformance.py --update)\n")
            for t in sorted(passed):
                f.write(t + "\n")
        print(f"wrote {len(passed)} names to {args.expected}")
        return 0
    if regressions:
        for t in regressions:
            line = next((l for l in proc.stdout.splitlines() if re.match(rf"^\S+ {re.escape(t)}(:|$)", l)), t)
            print(f"REGRESSION {line}")
        print(f"{len(expected) - len(regressions)} passed, {len(regressions)} failed")
        return 1
    print(f"{len(expected)} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
