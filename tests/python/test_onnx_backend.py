"""ONNX's own backend test suite, onnx.backend.test.BackendTest(kiln.backend, __name__), on Kiln.

    pytest tests/python/test_onnx_backend.py
        the whole suite (node tests, the light real models, simple and PyTorch-converted models;
        nothing that downloads) in crash-isolated worker processes (backend_suite.py), then the
        node tests' results against tests/conformance/expected_pass.txt, the list of what
        `kiln test-onnx` passes: at least as many must pass, and each test on the list must pass
        unless EXCLUDED below says why not. $KILN_BACKEND_REPORT: write per-test results (JSON).
    KILN_BACKEND_CASES=1 pytest tests/python/test_onnx_backend.py -k test_abs_cpu
        the suite's cases themselves, in this process (to debug one).
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import backend_suite  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXPECTED = os.path.join(REPO, "tests", "conformance", "expected_pass.txt")

# Node tests `kiln test-onnx` passes that the backend API cannot, and why.
EXCLUDED = {
    "test_loop16_seq_none": "ONNX's runner (Runner.assert_similar_outputs) compares a sequence output by "
                            "recursing into its tensors as if they were output lists; len() of a 0-d tensor "
                            "raises TypeError, for every backend (onnxruntime.backend too)",
}


def read_expected():
    with open(EXPECTED) as f:
        return {l.strip() for l in f if l.strip() and not l.startswith("#")}


if os.environ.get("KILN_BACKEND_CASES"):
    globals().update(backend_suite.backend_test_cases())
else:

    def test_backend_suite_passes_what_kiln_test_onnx_passes():
        t0 = time.monotonic()
        results = backend_suite.run_suite(jobs=int(os.environ.get("KILN_BACKEND_JOBS", "2")), log=print)
        seconds = time.monotonic() - t0
        if os.environ.get("KILN_BACKEND_REPORT"):
            with open(os.environ["KILN_BACKEND_REPORT"], "w") as f:
                json.dump(results, f, indent=1, sort_keys=True)
        by_category = {}
        for test_id, r in results.items():
            counts = by_category.setdefault(test_id.split(".")[0], {})
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        print(f"\nONNX backend suite on kiln.backend: {len(results)} tests in {seconds:.0f} s")
        for category, counts in sorted(by_category.items()):
            print(f"  {category}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))

        node = {backend_suite.node_name(t): r for t, r in results.items()
                if t.startswith("OnnxBackendNodeModelTest.")}
        expected = read_expected()
        passed = {n for n, r in node.items() if r["status"] == "PASS"}
        print(f"  node tests: {len(passed)} pass; kiln test-onnx passes {len(expected)} (expected_pass.txt), "
              f"{len(EXCLUDED)} of them excluded here")
        unknown = sorted(set(EXCLUDED) - set(node))
        assert not unknown, f"EXCLUDED names tests the suite does not have: {unknown}"
        regressions = sorted(n for n in expected - passed if n not in EXCLUDED)
        assert not regressions, (f"{len(regressions)} node tests that kiln test-onnx passes do not pass "
                                 f"through kiln.backend:\n" + "\n".join(
                                     f"  {n}: {node[n]['status'] if n in node else 'not run'} "
                                     f"{node.get(n, {}).get('reason', '')}" for n in regressions))
        comparable = expected - set(EXCLUDED)
        assert len(passed) >= len(comparable), (f"{len(passed)} node tests pass through kiln.backend, fewer than "
                                                f"the {len(comparable)} of kiln test-onnx's not EXCLUDED")
