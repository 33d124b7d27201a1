#!/usr/bin/env python3
"""Runs the ONNX backend node test suite (shipped in the installed `onnx` wheel) through
`kiln test-onnx` and, when onnxruntime is importable (--ort, the default then), through ONNX
Runtime in the same run, and prints the per-group table (tests, Kiln pass, ORT pass, tests that
fail in Kiln and pass in ORT), the list of those tests with Kiln's reason, and the tests whose
expected output is random (counted for neither). See docs/conformance.md.

With --expected, checks Kiln's results against the checked-in list of expected passes and fails
(exit 1) if a test on the list does not pass: a regression. Tests that pass but are not on the
list are reported so the list can be updated deliberately (`--update` rewrites it). The last
line is "<N> passed, <M> failed" for the expected list.
"""
import argparse
import importlib.util
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import groups as groups_mod  # noqa: E402
import kiln_runner  # noqa: E402
import report  # noqa: E402


def node_test_dir():
    import onnx

    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    if not os.path.isdir(d):
        sys.exit(f"error: {d} not found: install onnx==1.19.1 (scripts/install_deps.sh)")
    return d


def list_tests(root, filter_substr):
    return {n: os.path.join(root, n) for n in sorted(os.listdir(root))
            if os.path.isfile(os.path.join(root, n, "model.onnx"))
            and (not filter_substr or filter_substr in n)}


def check_expected(args, status):
    """The regression check against the expected-pass list; returns the exit status."""
    with open(args.expected) as f:
        expected = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    if args.filter:
        expected = {t for t in expected if args.filter in t}
    passed = {t for t, s in status.items() if s["status"] == "PASS"}
    regressions = sorted(t for t in expected if status.get(t, {}).get("status") != "PASS")
    new = sorted(passed - expected)
    counts = {k: sum(1 for s in status.values() if s["status"] == k)
              for k in ("PASS", "FAIL", "UNSUPPORTED")}
    print(f"conformance: {len(status)} tests: {counts['PASS']} pass, {counts['FAIL']} fail, "
          f"{counts['UNSUPPORTED']} unsupported; {len(expected)} expected to pass")
    if new:
        print(f"{len(new)} tests pass that are not on the expected list: {' '.join(new)}")
    if args.update:
        if args.filter:
            sys.exit("error: --update rewrites the whole list: run it without --filter")
        with open(args.expected, "w") as f:
            f.write("# ONNX backend node tests Kiln passes "
                    "(tests/conformance/run_conformance.py --update)\n")
            for t in sorted(passed):
                f.write(t + "\n")
        print(f"wrote {len(passed)} names to {args.expected}")
        return 0
    if regressions:
        for t in regressions:
            s = status.get(t)
            line = f"{s['status']} {t}: {s['reason']}" if s else f"{t}: not run"
            print(f"REGRESSION {line}")
        print(f"{len(expected) - len(regressions)} passed, {len(regressions)} failed")
        return 1
    print(f"{len(expected)} passed, 0 failed")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True, help="path of the kiln binary")
    ap.add_argument("--expected", help="expected-pass list (one test name per line)")
    ap.add_argument("--jobs", type=int, default=2, help="tests run at once (Kiln and ORT)")
    ap.add_argument("--update", action="store_true",
                    help="rewrite the expected list with today's passes")
    have_ort = importlib.util.find_spec("onnxruntime") is not None
    ap.add_argument("--ort", action=argparse.BooleanOptionalAction, default=have_ort,
                    help="also run the suite through ONNX Runtime (default: on when "
                         "onnxruntime is importable)")
    ap.add_argument("--ort-timeout", type=float, default=60.0,
                    help="seconds before an ORT test is killed (a FAIL)")
    ap.add_argument("--filter", help="run only tests whose name contains SUBSTR")
    ap.add_argument("-O", dest="opt_level", type=int, default=3, choices=range(4),
                    help="Kiln's graph optimization level (the -O0 run checks that the unoptimized "
                         "graph passes the same tests)")
    ap.add_argument("--json", metavar="OUT", help="write per-test results and the table here")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = ap.parse_args()
    if args.ort and not have_ort:
        sys.exit("error: --ort: onnxruntime is not importable")

    root = node_test_dir()
    tests = list_tests(root, args.filter)
    t0 = time.monotonic()
    kiln, proc = kiln_runner.run(args.kiln, root, args.jobs, args.filter, args.opt_level)
    kiln_s = time.monotonic() - t0
    if not kiln:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        sys.exit("error: kiln test-onnx produced no results")
    print(f"kiln: {len(kiln)} tests in {kiln_s:.1f} s")

    ort = None
    ort_s = None
    if args.ort:
        import ort_runner

        t0 = time.monotonic()
        ort = ort_runner.run_tests(tests, jobs=args.jobs, timeout=args.ort_timeout)
        ort_s = time.monotonic() - t0
        print(f"onnxruntime: {len(ort)} tests in {ort_s:.1f} s")

    infos = {n: groups_mod.model_info(d) for n, d in tests.items()}
    groups = groups_mod.classify(infos)
    summary = report.build(groups, kiln, ort)
    print()
    print(report.format_report(summary, markdown=args.markdown))
    print()

    if args.json:
        import onnx

        versions = {"onnx": onnx.__version__}
        if args.ort:
            import onnxruntime

            versions["onnxruntime"] = onnxruntime.__version__
        doc = {"versions": versions, "kiln": args.kiln, "seconds": {"kiln": kiln_s, "ort": ort_s},
               **summary,
               "tests": {n: {"group": groups[n], "ops": sorted(set(infos[n]["ops"])),
                             "kiln": kiln.get(n), "ort": None if ort is None else ort.get(n)}
                         for n in tests}}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {args.json}")

    if args.expected:
        return check_expected(args, kiln)
    return 0


if __name__ == "__main__":
    sys.exit(main())
