#!/usr/bin/env python3
"""Flags an #include that crosses a missing arrow of DESIGN.md's layer table.

Each src/<layer> may include only itself and the layers listed for it below (the same table
CMakeLists.txt links); the Python extension (python/src) only the public API (include/kiln/).
Exit 1 with one line per violation.
"""
import os
import re
import sys

ALLOWED = {
    "support": {"kiln"},  # the public value types (include/kiln/tensor.h, ...) are support's
    "ir": {"support"},
    "te": {"support"},
    "tir": {"te", "support"},
    "runtime": {"support", "kiln"},  # kiln/session.h: the artifact session (runtime/artifact.h)
    "codegen": {"tir", "te", "runtime", "support"},
    "op": {"ir", "te", "support"},
    "plan": {"ir", "op", "te", "support"},
    "frontend": {"op", "ir", "te", "support"},
    "pass": {"ir", "op", "te", "support"},
    "topi": {"op", "ir", "te", "support"},
    "tune": {"te", "tir", "codegen", "runtime", "support"},
    "capi": {"support", "kiln"},
    "autodiff": {"ir", "op", "pass", "support"},
    # The input pipeline: the runtime's pools; user map stages run models through the public API.
    "data": {"runtime", "support", "kiln"},
    # libkiln_runtime.so's own sources (Session::load for artifacts only): never the compiler.
    "runtime_lib": {"runtime", "support", "kiln"},
    # The server runs models through the public API (kiln/session.h) and the runtime's pools.
    "serve": {"runtime", "support", "kiln"},
    # Collectives over MPI and data-parallel training through the public TrainingSession; the
    # partition (ir, op, pass) and its in-process run, which compiles each rank's graph; and
    # pipeline-parallel training, which imports the model (frontend) and splits its training
    # graph into stages with autodiff's vjp (pipeline_stage_graph.h). All of these come with
    # kiln_compiler, which CMake links.
    "distributed": {"compiler", "autodiff", "frontend", "runtime", "pass", "op", "ir", "support", "kiln"},
    "compiler": {"autodiff", "frontend", "pass", "plan", "op", "ir", "te", "tir", "topi", "tune", "codegen", "runtime", "support", "kiln"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    src = os.path.join(root, "src")
    bad = []
    for layer in sorted(os.listdir(src)):
        if layer not in ALLOWED:
            bad.append(f"src/{layer}: not a layer of DESIGN.md's table (add it to check_layering.py)")
            continue
        for dirpath, _, files in os.walk(os.path.join(src, layer)):
            for f in files:
                path = os.path.join(dirpath, f)
                with open(path, errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if m and m.group(1) != layer and m.group(1) not in ALLOWED[layer]:
                            bad.append(f"{os.path.relpath(path, root)}:{n}: {layer} may not include {m.group(1)}/")
    # The Python extension (python/src) binds the public API only: include/kiln/.
    for dirpath, _, files in os.walk(os.path.join(root, "python", "src")):
        for f in files:
            path = os.path.join(dirpath, f)
            with open(path, errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if m and m.group(1) != "kiln":
                        bad.append(f"{os.path.relpath(path, root)}:{n}: python/src may include only kiln/")
    for b in bad:
        print(b)
    print(f"layering: {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
