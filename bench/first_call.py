#!/usr/bin/env python3
"""First call at a new shape against a warm call at that shape (issue 23's target: at most 1.2x),
one symbolic session alone, Kiln through the C API and ONNX Runtime, each in a process of its own.
Kiln's calls are timed around kiln_session_run with the inputs borrowed beforehand (a C
caller's call; see c_call), ONNX Runtime's around InferenceSession.run.

The model is bench/dynamic_shapes.py's MiniLM-style encoder (batch and seq symbolic), or with
--bert-base the same encoder at BERT-base's size. Each
process makes one session and walks the shapes in increasing order (batch 1 then 8, lengths
8..256): per shape the first call, then --warm calls (the median), with a 2 ms pause before
each call. The first shape's first call is also the process's first run. A first Kiln process
fills the kernel cache (not reported), so the reported ones compile nothing. Kiln builds
compare as `--lib A.so,B.so` (each a libkiln.so), alternating by round.

    python3 bench/first_call.py [--lib build/lib/libkiln.so] [--ort] [--rounds 2] [--threads 2] [--bert-base]

ORT needs onnxruntime (the peers venv: /work/peers-venv/bin/python). Prints one row per shape
and build: the medians over processes of the first call and the warm call, the median of the
processes' first / warm ratios (a single first call is one sample: a VM's jitter of a few
hundred microseconds moves a 2 ms call's ratio by 0.2 or more), and each process's ratio.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHAPES = [(b, q) for b in (1, 8) for q in (8, 16, 32, 64, 128, 256)]


def c_call(sess, feed):
    """A call of kiln_session_run on `feed` with its borrowed tensors made beforehand (a C
    caller's call: what CapiSession.run adds around it in Python, ctypes arrays built per call,
    costs about 0.25 ms more on its first call in a process), the output copied into numpy."""
    import ctypes
    import numpy as np
    import kiln_capi
    lib = kiln_capi._load()
    arrays = [np.ascontiguousarray(v) for v in feed.values()]
    names = (ctypes.c_char_p * len(arrays))(*[k.encode() for k in feed])
    tensors = (ctypes.c_void_p * len(arrays))()
    for i, a in enumerate(arrays):
        t = ctypes.c_void_p()
        shape = (ctypes.c_int64 * a.ndim)(*a.shape)
        kiln_capi._check(lib.kiln_tensor_borrow(kiln_capi._CODES[a.dtype], shape, a.ndim,
                                                a.ctypes.data_as(ctypes.c_void_p), ctypes.byref(t)), "borrow")
        tensors[i] = t.value
    outs = (ctypes.c_void_p * len(sess.output_names))()

    def run(_feed):
        kiln_capi._check(lib.kiln_session_run(sess._s, None, names, tensors, len(arrays), outs, len(outs)), "run")
        result = [kiln_capi._to_numpy(lib, o) for o in outs]
        for o in outs:
            lib.kiln_tensor_free(o)
        return result
    run.keep = (arrays, names, tensors)  # borrowed: alive as long as the closure
    return run


def child(engine, model, threads, warm):
    """One process: one session over every shape; prints JSON rows [batch, seq, first, warm]."""
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(REPO, "tests", "models"))
    from dynamic_shapes import feed_of
    from kiln_capi import CapiSession
    if engine == "ort":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        run = lambda f: sess.run(None, f)  # noqa: E731
    else:
        sess = CapiSession(model, threads=threads)
    rows = []
    for b, q in SHAPES:
        feed = feed_of(b, q)
        if engine == "kiln":
            run = c_call(sess, feed)
        times = []
        for _ in range(1 + warm):
            time.sleep(0.002)
            t0 = time.perf_counter()
            run(feed)
            times.append((time.perf_counter() - t0) * 1e3)
        rows.append([b, q, times[0], statistics.median(times[1:])])
    print(json.dumps(rows))


def measure(engine, lib, model, threads, warm):
    env = dict(os.environ)
    if lib:
        env["KILN_LIB"] = lib
    cmd = [sys.executable, os.path.abspath(__file__), "--child", engine, "--model", model,
           "--threads", str(threads), "--warm", str(warm)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", default=os.path.join(REPO, "build", "lib", "libkiln.so"),
                    help="libkiln.so of each Kiln build, comma-separated")
    ap.add_argument("--ort", action="store_true", help="also ONNX Runtime")
    ap.add_argument("--rounds", type=int, default=2, help="processes per build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warm", type=int, default=5, help="warm calls per shape (their median)")
    ap.add_argument("--model", default="", help="the model file (default: generated)")
    ap.add_argument("--bert-base", action="store_true",
                    help="generate a BERT-base-sized encoder (12 layers, hidden 768, FFN 3072) instead of MiniLM's")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.model, a.threads, a.warm)
        return
    model = a.model
    if not model:
        sys.path.insert(0, HERE)
        from dynamic_shapes import minilm_model
        model = os.path.join(tempfile.mkdtemp(prefix="kiln-first-call-"), "encoder.onnx")
        if a.bert_base:
            minilm_model(model, layers=12, hidden=768, heads=12, ffn=3072)
        else:
            minilm_model(model)
    libs = [x for x in a.lib.split(",") if x]
    for lib in libs:  # fills the kernel cache: the reported processes compile nothing
        measure("kiln", lib, model, a.threads, 1)
    engines = [("kiln", lib, f"kiln {lib}") for lib in libs] + ([("ort", "", "ORT")] if a.ort else [])
    results = {label: [] for _, _, label in engines}
    for _ in range(a.rounds):
        for engine, lib, label in engines:
            results[label].append(measure(engine, lib, model, a.threads, a.warm))
    print(f"first call / warm call, {a.threads} threads, {a.rounds} processes per build (ms)")
    for label, runs in results.items():
        print(f"\n{label}")
        print("batch  seq    first     warm   median ratio   ratio (per process)")
        medians = []
        for k, (b, q) in enumerate(SHAPES):
            firsts = [r[k][2] for r in runs]
            warms = [r[k][3] for r in runs]
            ratio = [r[k][2] / r[k][3] for r in runs]
            medians.append(statistics.median(ratio))
            print(f"{b:5d} {q:4d} {statistics.median(firsts):8.2f} {statistics.median(warms):8.2f}   "
                  f"{medians[-1]:12.2f}   {' '.join(f'{x:.2f}' for x in ratio)}")
        later = [r[k][2] / r[k][3] for r in runs for k in range(1, len(SHAPES))]
        print(f"the process's first call: median {medians[0]:.2f}; the other shapes' medians: "
              f"{min(medians[1:]):.2f}-{max(medians[1:]):.2f} (single processes up to {max(later):.2f})")


if __name__ == "__main__":
    main()
