#!/usr/bin/env python3
"""Checks that libkiln_runtime.so is the runtime alone.

Fails (exit 1, one line per finding) when `ldd` shows protobuf or ONNX libraries, or when
`nm -DC` shows a defined or undefined symbol of the compiler's layers (kiln::ir::,
kiln::compiler::, kiln::frontend::, ...), protobuf (google::protobuf::) or ONNX (onnx::); and
when the symbols a user of the library needs are missing (so an empty library cannot pass).

Programs given after the library (kiln-run-artifact) must link it and none of the above.

usage: check_runtime_library.py build/lib/libkiln_runtime.so [build/bin/kiln-run-artifact ...]
"""
import re
import subprocess
import sys

FORBIDDEN_LIBS = re.compile(r"protobuf|libonnx|libkiln_(compiler|frontend|ir|op|pass|plan|te|tir|topi|tune|codegen)")
COMPILER_LAYERS = ["ir", "op", "pass", "plan", "te", "tir", "topi", "tune", "codegen", "frontend", "compiler"]
FORBIDDEN_SYMBOLS = re.compile(r"\bkiln::(%s)::|google::protobuf::|\bonnx::" % "|".join(COMPILER_LAYERS))
REQUIRED_SYMBOLS = [
    "kiln::Session::load(",
    "kiln::runtime::load_artifact(",
    "kiln::runtime::save_artifact(",
    "kiln::runtime::load_artifact_session(",
    "kiln::read_npy(",
]


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def forbidden(path):
    """ldd and nm -DC lines of `path` naming the compiler, protobuf or ONNX; and its symbols."""
    bad = []
    for line in run(["ldd", path]).splitlines():
        if FORBIDDEN_LIBS.search(line):
            bad.append(f"{path}: ldd: {line.strip()}")
    symbols = run(["nm", "-DC", path]).splitlines()
    for line in symbols:
        if FORBIDDEN_SYMBOLS.search(line):
            bad.append(f"{path}: nm: {line.strip()}")
    return bad, symbols


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    lib = sys.argv[1]
    bad, symbols = forbidden(lib)
    defined = [l for l in symbols if not l.lstrip().startswith("U ")]
    for need in REQUIRED_SYMBOLS:
        if not any(need in l for l in defined):
            bad.append(f"nm: {need}...) is not exported")
    for program in sys.argv[2:]:
        found, _ = forbidden(program)
        bad += found
        if "libkiln_runtime.so" not in run(["ldd", program]):
            bad.append(f"{program}: does not link libkiln_runtime.so")
    for b in bad:
        print(b)
    print(f"{lib}: {len(symbols)} dynamic symbols, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
