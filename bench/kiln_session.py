"""Kiln's session for the benchmarks that run real models from Python beside ONNX Runtime.

`--api package` (the default where `import kiln` works): the Python package users install
(`kiln.InferenceSession`, ONNX Runtime's shape), as they call it; `--api capi`: the C API through
ctypes (tests/models/kiln_capi.py, build/lib/libkiln.so), for a build that is not installed.
The ctypes wrapper costs about 0.03 ms more per call than the package (Silero VAD: 0.071 vs
0.042 ms per chunk, ORT 0.057), which dominates models that run in tens of microseconds.
Both give run(feeds) -> {output name: array} and close().
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))


def default_api():
    try:
        import kiln  # noqa: F401
        return "package"
    except ImportError:
        return "capi"


class PackageSession:
    def __init__(self, path, threads):
        import kiln
        so = kiln.SessionOptions()
        so.intra_op_num_threads = threads
        self._s = kiln.InferenceSession(str(path), so)
        self.output_names = [o.name for o in self._s.get_outputs()]
        self._optimized = False

    def run(self, feeds):
        out = dict(zip(self.output_names, self._s.run(self.output_names, feeds)))
        if not self._optimized:  # a cold cache's quick kernels (tiered compile): time the -O3 ones
            self._optimized = True
            if hasattr(self._s, "wait_for_optimized_kernels"):
                self._s.wait_for_optimized_kernels()
        return out

    def close(self):
        self._s = None


def open_kiln(path, threads, api):
    """A Kiln session on `path` with `threads` intra-op threads through `api` (package|capi)."""
    if api == "package":
        return PackageSession(path, threads)
    from kiln_capi import CapiSession
    return CapiSession(path, threads=threads)


def add_api_argument(ap):
    ap.add_argument("--api", choices=["package", "capi"], default=default_api(),
                    help="Kiln's Python package (default where importable) or its C API through ctypes")
