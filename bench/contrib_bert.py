"""Kiln on a BERT-style encoder saved by ONNX Runtime's transformer optimizer (com.microsoft ops,
decomposed by Kiln's importer and fused again) and by its graph optimizer at ORT_ENABLE_EXTENDED
(FusedMatMul, BiasGelu, LayerNormalization at opset 14) vs Kiln on the same model as PyTorch
exported it (standard ops) vs ONNX Runtime on the transformer-optimized model. Interleaved rounds,
medians, ratios.

    python3 bench/contrib_bert.py [--smoke] [--hidden 256 --heads 4 --layers 4 --seq 128]

The model comes from tests/models/tiny_bert_export.py run by Debian's /usr/bin/python3 (torch).
--smoke: one run of each, outputs compared (no timing claims). Needs onnxruntime with its
transformers optimizer and sympy (the test environment's python3; the peers venv lacks sympy)."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILN = os.environ.get("KILN_BIN", os.path.join(ROOT, "build", "bin", "kiln"))
MEDIAN_RE = re.compile(r"median\s+([0-9.]+)\s*ms")


def kiln_ms(model, npz, out_dir, repeat, threads):
    proc = subprocess.run([KILN, "run", model, "--inputs", npz, "--output-dir", out_dir, "--repeat", str(repeat),
                           "--threads", str(threads)], capture_output=True, text=True, check=True)
    m = MEDIAN_RE.search(proc.stdout + proc.stderr)
    return float(m.group(1)) if m else None


def ort_ms(sess, feed, repeat):
    sess.run(None, feed)
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, feed)
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    from onnxruntime.transformers import optimizer

    tmp = tempfile.mkdtemp(prefix="kiln_contrib_bert_")
    plain = os.path.join(tmp, "bert.onnx")
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "models", "tiny_bert_export.py"), plain,
                    str(a.hidden), str(a.heads), str(a.layers)], check=True, capture_output=True)
    opt = os.path.join(tmp, "bert_opt.onnx")
    optimizer.optimize_model(plain, model_type="bert", num_heads=a.heads, hidden_size=a.hidden,
                             opt_level=0).save_model_to_file(opt)
    ext = os.path.join(tmp, "bert_ext.onnx")  # ORT's graph optimizer at the extended level
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = ext
    ort.InferenceSession(plain, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    mask = np.ones((1, a.seq), np.int64)
    feed = {"input_ids": rng.integers(0, 50, (1, a.seq)).astype(np.int64), "attention_mask": mask,
            "token_type_ids": np.zeros((1, a.seq), np.int64)}
    npz = os.path.join(tmp, "in.npz")
    np.savez(npz, **feed)
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    sess = ort.InferenceSession(opt, so, providers=["CPUExecutionProvider"])
    if a.smoke:
        ref = sess.run(None, feed)[0]
        for name, model in [("plain", plain), ("optimized", opt), ("extended", ext)]:
            out = os.path.join(tmp, name)
            os.makedirs(out, exist_ok=True)
            kiln_ms(model, npz, out, 1, a.threads)
            got = np.load(os.path.join(out, "last_hidden_state.npy"))
            err = float(np.abs(got - ref).max())
            print(f"{name}: max |kiln - ort| = {err:.2e}")
            assert err < 1e-3, name
        return
    times = {"kiln_plain": [], "kiln_opt": [], "kiln_ext": [], "ort_opt": []}
    for _ in range(a.rounds):  # interleaved: the machine is shared
        times["kiln_plain"].append(kiln_ms(plain, npz, tmp, a.repeat, a.threads))
        times["kiln_opt"].append(kiln_ms(opt, npz, tmp, a.repeat, a.threads))
        times["kiln_ext"].append(kiln_ms(ext, npz, tmp, a.repeat, a.threads))
        times["ort_opt"].append(ort_ms(sess, feed, a.repeat))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"BERT-style H={a.hidden} heads={a.heads} layers={a.layers} seq={a.seq} batch=1 threads={a.threads}, "
          f"medians of {a.rounds} rounds x {a.repeat} runs")
    for k, v in med.items():
        print(f"  {k:<11} {v:8.3f} ms")
    print(f"  kiln_opt / kiln_plain = {med['kiln_opt'] / med['kiln_plain']:.3f}")
    print(f"  kiln_ext / kiln_plain = {med['kiln_ext'] / med['kiln_plain']:.3f}")
    print(f"  kiln_opt / ort_opt    = {med['kiln_opt'] / med['ort_opt']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
