#!/usr/bin/env python3
"""Builds the ONNX models Kiln ships and tests against ONNX Runtime.

Two kinds of models:

* The digits CNN (models/digits/, committed): a small CNN trained here, in plain numpy
  (hand-written forward and backward passes, Adam), on scikit-learn's 8x8 `load_digits`.
* Test models with seeded random weights (written to --out, default build/models, not
  committed): mlp, small_cnn, resnet_block, resnet18, two_input_mix, old_opsets, opset11,
  bert_tiny, inception, two_tower, mobilenetv2_96 (the default set, used by the tests).
  Each comes with `<name>_inputs.npz` holding seeded random inputs.
* Benchmark models, built only when named with --only: resnet50, mobilenetv2 (torchvision
  layouts, 224x224) and bert_base (12-layer BERT-base encoder, seq 128; ~340 MB of weights).

Test models are built with `EagerGraph`, which emits ONNX nodes and at the same time evaluates
every node in float64 numpy. The eager values give (1) an independent reference checked against
ONNX Runtime before a model is written, and (2) the activation statistics used to set the
BatchNormalization running mean/variance so activations of the deep nets stay O(1) while
scale/bias/mean/var remain non-trivial.

Everything is deterministic (fixed seeds) and runs in well under a minute on two cores. The
pieces: eager_graph.py (EagerGraph, the numpy reference ops, ort_run), model_builders.py (the
networks), digits_model.py (the digits CNN's training and export); this file keeps the registry
(names, opsets, seeds), writing and checking, and the command line.

    python3 scripts/make_models.py                 # digits model + test models
    python3 scripts/make_models.py --out DIR --skip-digits
    python3 scripts/make_models.py --only mlp,small_cnn
    python3 scripts/make_models.py --skip-digits --only resnet50,mobilenetv2,bert_base
    python3 scripts/make_models.py --skip-digits --only resnet18 --batch 8   # + resnet18_b8
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import onnx

from digits_model import make_digits
from eager_graph import OPSET, ort_run
from model_builders import (build_bert, build_bert_base, build_bert_tiny, build_inception, build_mlp,  # noqa: F401 (build_bert: bench/)
                            build_mobilenetv2, build_mobilenetv2_96, build_old_opsets, build_opset11, build_resnet18,
                            build_resnet50, build_resnet_block, build_small_cnn, build_two_input_mix, build_two_tower)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TEST_MODELS = {
    "mlp": (build_mlp, OPSET),
    "small_cnn": (build_small_cnn, OPSET),
    "resnet_block": (build_resnet_block, OPSET),
    "resnet18": (build_resnet18, OPSET),
    "two_input_mix": (build_two_input_mix, OPSET),
    "old_opsets": (build_old_opsets, 10),
    "opset11": (build_opset11, 11),
    "bert_tiny": (build_bert_tiny, OPSET),
    "inception": (build_inception, OPSET),
    "two_tower": (build_two_tower, OPSET),
    "mobilenetv2_96": (build_mobilenetv2_96, OPSET),
}

# Benchmark-size models: built only when named (--only, bench/bench_models.py), never by the
# default set the tests use. bert_base's weights are ~340 MB: build/ only, never committed.
BIG_MODELS = {
    "resnet50": (build_resnet50, OPSET),
    "mobilenetv2": (build_mobilenetv2, OPSET),
    "bert_base": (build_bert_base, OPSET),
}
ALL_MODELS = {**TEST_MODELS, **BIG_MODELS}

# Fixed seeds (the first seven are the historical 1000 + sorted index) so adding a model never
# changes another model's weights.
SEEDS = {"mlp": 1000, "small_cnn": 1005, "resnet_block": 1004, "resnet18": 1003,
         "two_input_mix": 1006, "old_opsets": 1001, "opset11": 1002,
         "bert_tiny": 1010, "inception": 1011, "two_tower": 1012, "mobilenetv2_96": 1013,
         "resnet50": 1020, "mobilenetv2": 1021, "bert_base": 1022}


def write_test_model(name, out_dir, check=True):
    """Builds test model `name` into out_dir/<name>.onnx and out_dir/<name>_inputs.npz.
    With `check`, runs it under ONNX Runtime and compares to the float64 eager reference."""
    builder, opset = ALL_MODELS[name]
    g = builder(np.random.default_rng(SEEDS[name]))
    model = g.model(opset)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + ".onnx")
    onnx.save(model, path)
    np.savez(os.path.join(out_dir, name + "_inputs.npz"), **g.feed)
    if check:
        got = ort_run(path, g.feed)
        for o in g.outputs:
            ref = g.vals[o.name]
            err = np.abs(got[o.name] - ref).max()
            scale = np.abs(ref).max()
            if not np.allclose(got[o.name], ref, rtol=1e-3, atol=1e-4 * max(1.0, scale)):
                raise RuntimeError(f"{name}/{o.name}: ORT differs from numpy reference, "
                                   f"max abs err {err:g} (max |ref| {scale:g})")
    return path


def write_test_models(out_dir, names=None, check=True, verbose=False):
    paths = {}
    for name in names or TEST_MODELS:
        t0 = time.time()
        paths[name] = write_test_model(name, out_dir, check)
        if verbose:
            print(f"  {name:14s} {os.path.getsize(paths[name]) / 1e6:8.2f} MB  "
                  f"{time.time() - t0:5.2f} s")
    return paths


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "build", "models"),
                    help="directory for the random-weight test models (default build/models)")
    ap.add_argument("--digits-dir", default=os.path.join(REPO, "models", "digits"))
    ap.add_argument("--skip-digits", action="store_true", help="do not retrain the digits CNN")
    ap.add_argument("--skip-tests", action="store_true", help="do not write the test models")
    ap.add_argument("--only", default="", help="comma-separated test model names")
    ap.add_argument("--batch", type=int, default=0,
                    help="also write <name>_b<N> variants at batch N (scripts/batch_variants.py)")
    args = ap.parse_args(argv)
    if not args.skip_digits:
        print(f"digits CNN -> {args.digits_dir}")
        make_digits(args.digits_dir)
    if not args.skip_tests:
        names = [n for n in args.only.split(",") if n] or list(TEST_MODELS)
        unknown = [n for n in names if n not in ALL_MODELS]
        if unknown:
            ap.error(f"unknown model(s) {unknown}; known: {sorted(ALL_MODELS)}")
        print(f"test models -> {args.out}")
        write_test_models(args.out, names, verbose=True)
        if args.batch:
            from batch_variants import write_batched
            for n in names:
                print(f"  {n} at batch {args.batch}: {write_batched(n, args.out, args.batch)[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
