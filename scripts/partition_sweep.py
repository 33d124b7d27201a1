#!/usr/bin/env python3
"""Cuts a model after each of its nodes in turn (`kiln run --partition 2 --stage NODE=1`) and
reports which cuts give outputs that are not bit-for-bit the whole model's (docs/distributed.md,
"Partitioned graphs"). Slow (two compiles per node, mostly cached): a check, not a CI test.

    python3 scripts/partition_sweep.py build/test_models/mobilenetv2_96.onnx \
        --inputs build/test_models/mobilenetv2_96_inputs.npz [--kiln build/bin/kiln] [-- EXTRA KILN ARGS]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np


def run(kiln, model, inputs, out, extra):
    cmd = [kiln, "run", model, "--inputs", inputs, "--repeat", "1", "--output-dir", out] + extra
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip()}")
    return {f: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--kiln", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "kiln"))
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []  # more `kiln run` arguments
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    a.extra = extra
    report = subprocess.run([a.kiln, "inspect", a.model, "--partition", "1"],
                            capture_output=True, text=True, check=True).stdout
    names = re.findall(r'# (?:group=\d+ )?name="([^"]+)"', report)
    with tempfile.TemporaryDirectory() as tmp:
        whole = run(a.kiln, a.model, a.inputs, os.path.join(tmp, "whole"), a.extra)
        differ = 0
        for i, name in enumerate(names):
            got = run(a.kiln, a.model, a.inputs, os.path.join(tmp, str(i)),
                      a.extra + ["--partition", "2", "--stage", f"{name}=1"])
            bad = [k for k in whole if got[k].tobytes() != whole[k].tobytes()]
            differ += bool(bad)
            worst = max((float(np.abs(got[k].astype(np.float64) - whole[k]).max()) for k in bad), default=0.0)
            print(f"{name}: {'DIFF %g' % worst if bad else 'bitwise'}", flush=True)
    print(f"{len(names)} cuts, {len(names) - differ} bitwise")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
