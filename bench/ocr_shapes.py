#!/usr/bin/env python3
"""PP-OCR models at several input sizes in one session: Kiln vs ONNX Runtime, interleaved (issue 23).

RapidOCR feeds its models images of every size: PP-OCRv4 detection takes [1, 3, H, W] (the page
scaled to a multiple of 32), recognition [1, 3, 48, W] (the text line's width), the direction
classifier [n, 3, 48, 192] (n text lines). One Kiln session (its Python package, or --api capi: bench/kiln_session.py)
and one ORT session per model, both with --threads intra-op threads, in one process. Per size,
in order: the first call at that size of each engine (Kiln's includes a compile when the model
does not compile symbolically: docs/dynamic_shapes.md), outputs compared, then --rounds rounds
of --calls calls of Kiln then of ORT (medians over all calls). Kiln's load + first call is the
first size's. --cold-cache points KILN_CACHE_DIR at a fresh directory first, so every kernel is
compiled as for a shape never seen.

    python3 bench/ocr_shapes.py [--threads 2] [--rounds 3] [--calls 15] [--api package|capi] [--only det,rec,cls] [--cold-cache]
    python3 bench/ocr_shapes.py --smoke     # each model at each size once, outputs vs ORT
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
sys.path.insert(0, os.path.join(REPO, "bench"))
import fetch_pypi_models  # noqa: E402
from kiln_session import add_api_argument, open_kiln  # noqa: E402
from real_models import compare, ort_session, timed_calls  # noqa: E402

SIZES = {"det": ("ch_PP-OCRv4_det_infer.onnx", [(1, 3, 320, 320), (1, 3, 640, 480), (1, 3, 736, 736)]),
         "rec": ("ch_PP-OCRv4_rec_infer.onnx", [(1, 3, 48, 160), (1, 3, 48, 320), (1, 3, 48, 640)]),
         "cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", [(1, 3, 48, 192), (6, 3, 48, 192)])}


def first(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t0) * 1e3


def bench_model(key, args):
    name, sizes = SIZES[key]
    path = os.path.join(args.models_dir, name)
    t0 = time.perf_counter()
    kiln = open_kiln(path, args.threads, args.api)
    load = (time.perf_counter() - t0) * 1e3
    ort_run, _ = ort_session(path, args.threads)
    rows = []
    for shape in sizes:
        x = np.random.default_rng(sum(shape)).uniform(-1, 1, shape).astype(np.float32)
        k_call, o_call = (lambda: kiln.run({"x": x})), (lambda: ort_run({"x": x}))
        got, k_first = first(k_call)
        want, o_first = first(o_call)
        compare(f"{key} {shape}", got, want)
        if args.smoke:
            print(f"{key} {'x'.join(map(str, shape))}: outputs match ONNX Runtime (first Kiln call {k_first:.0f} ms)")
            continue
        kms, oms = [], []
        for _ in range(args.rounds):
            kms += timed_calls(k_call, args.calls)
            oms += timed_calls(o_call, args.calls)
        k, o = statistics.median(kms), statistics.median(oms)
        rows.append((key, shape, k_first, o_first, k, o, load + k_first if not rows else None))
    kiln.close()
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", default=fetch_pypi_models.DEFAULT_OUT)
    ap.add_argument("--threads", type=int, default=2)
    add_api_argument(ap)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=15, help="consecutive calls per round and engine")
    ap.add_argument("--only", default="det,rec,cls")
    ap.add_argument("--cold-cache", action="store_true", help="a fresh KILN_CACHE_DIR: every kernel compiles")
    ap.add_argument("--smoke", action="store_true", help="each size once vs ORT; no timing")
    args = ap.parse_args(argv)
    try:
        fetch_pypi_models.fetch(args.models_dir, quiet=True)
    except fetch_pypi_models.Offline as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cache = tempfile.TemporaryDirectory(prefix="kiln-cold-") if args.cold_cache else None
    if cache:
        os.environ["KILN_CACHE_DIR"] = cache.name
    rows = []
    for key in args.only.split(","):
        rows += bench_model(key, args)
    if args.smoke:
        return 0
    print(f"\nthreads {args.threads}, {args.rounds} rounds x {args.calls} calls per engine (medians); "
          f"kernel cache {'cold' if cache else 'as it stands'}; ms\n")
    print("| model | input | Kiln first call | ORT first call | Kiln warm | ORT warm | Kiln / ORT warm "
          "| Kiln first / warm | Kiln load + first call |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for key, shape, kf, of, k, o, lf in rows:
        print(f"| {key} | {'x'.join(map(str, shape))} | {kf:.0f} | {of:.0f} | {k:.2f} | {o:.2f} | {k / o:.2f}x "
              f"| {kf / k:.1f} | {'' if lf is None else f'{lf:.0f}'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
