"""Kiln vs ONNX Runtime on transformer models as ORT's own tools write them: BERT-base (12 layers,
hidden 768, 12 heads) and GPT-2 small (12 layers, 768, 12 heads, with past state) exported by
PyTorch and optimized by onnxruntime.transformers.optimizer (Attention, EmbedLayerNormalization,
SkipLayerNormalization, BiasGelu/FastGelu: com.microsoft ops, which Kiln's importer decomposes and
fuses again). Both run the same optimized file on the same inputs, batch 1, seq 128 (GPT-2: a
128-token prompt after `--past` cached tokens), `--threads` threads each; interleaved rounds,
medians, ratio Kiln / ORT. `--forms opt,ext` adds the file ORT's graph optimizer saves at
ORT_ENABLE_EXTENDED (FusedMatMul, BiasGelu, LayerNormalization at opset 14; saved by this ORT).

    /work/peers-venv/bin/python bench/ort_optimized.py [--smoke] [--models bert,gpt2] [--forms opt]
        [--layers 12] [--seq 128] [--past 0] [--threads 2]

Three interpreters, as the tools live: Debian's /usr/bin/python3 (python3-torch) exports,
`--opt-python` (default python3: onnxruntime with its transformers optimizer and sympy) optimizes,
and this script (the peers venv's newer onnxruntime) times. --smoke: 2 layers, seq 16, one run of
each, every output compared (no timing claims)."""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILN = os.environ.get("KILN_BIN", os.path.join(ROOT, "build", "bin", "kiln"))
MODELS = os.path.join(ROOT, "tests", "models")
MEDIAN_RE = re.compile(r"median\s+([0-9.]+)\s*ms")
HIDDEN, HEADS = 768, 12
EXPORT = {"bert": "tiny_bert_export.py", "gpt2": "gpt2_past_export.py"}
OPTIMIZE = ("from onnxruntime.transformers import optimizer; import sys; "
            "optimizer.optimize_model(sys.argv[1], model_type=sys.argv[3], num_heads=%d, hidden_size=%d, "
            "opt_level=0).save_model_to_file(sys.argv[2])" % (HEADS, HIDDEN))


def build(kind, form, layers, tmp, opt_python):
    plain = os.path.join(tmp, f"{kind}.onnx")
    if not os.path.exists(plain):
        subprocess.run(["/usr/bin/python3", os.path.join(MODELS, EXPORT[kind]), plain, str(HIDDEN), str(HEADS),
                        str(layers)], check=True, capture_output=True)
    out = os.path.join(tmp, f"{kind}_{form}.onnx")
    if form == "opt":
        subprocess.run([opt_python, "-c", OPTIMIZE, plain, out, kind], check=True, capture_output=True)
    else:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = out
        ort.InferenceSession(plain, so, providers=["CPUExecutionProvider"])
    return out


def feed(kind, seq, past, layers):
    rng = np.random.default_rng(0)
    if kind == "bert":
        return {"input_ids": rng.integers(0, 600, (1, seq)).astype(np.int64),
                "attention_mask": np.ones((1, seq), np.int64), "token_type_ids": np.zeros((1, seq), np.int64)}
    f = {"input_ids": rng.integers(0, 2000, (1, seq)).astype(np.int64),
         "position_ids": np.arange(past, past + seq)[None, :].astype(np.int64),
         "attention_mask": np.ones((1, past + seq), np.int64)}
    for i in range(layers):
        f[f"past_{i}"] = rng.standard_normal((2, 1, HEADS, past, HIDDEN // HEADS)).astype(np.float32)
    return f


def kiln_run(model, npz, out_dir, repeat, threads):
    proc = subprocess.run([KILN, "run", model, "--inputs", npz, "--output-dir", out_dir, "--repeat", str(repeat),
                           "--threads", str(threads)], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"kiln run {model} failed:\n{proc.stderr}")
    m = MEDIAN_RE.search(proc.stdout + proc.stderr)
    return float(m.group(1)) if m else None


def ort_ms(sess, f, repeat):
    sess.run(None, f)
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, f)
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def ort_session(model, threads, spin):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if not spin:  # ORT's pool spin-waits by default, which costs it on an oversubscribed machine
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def bench(kind, form, a, tmp):
    model = build(kind, form, a.layers, tmp, a.opt_python)
    f = feed(kind, a.seq, a.past, a.layers)
    npz = os.path.join(tmp, f"{kind}_in.npz")
    np.savez(npz, **f)
    spins = [int(v) for v in a.ort_spin.split(",")]
    sessions = {spin: ort_session(model, a.threads, spin) for spin in spins}
    out = os.path.join(tmp, f"{kind}_{form}_out")
    os.makedirs(out, exist_ok=True)
    if a.smoke:
        kiln_run(model, npz, out, 1, a.threads)
        sess = sessions[spins[0]]
        names = [o.name for o in sess.get_outputs()]
        for name, want in zip(names, sess.run(None, f)):
            err = float(np.abs(np.load(os.path.join(out, f"{name}.npy")) - want).max())
            print(f"{kind}/{form} {name}: max |kiln - ort| = {err:.2e}")
            assert err < 1e-3, (kind, name, err)
        return
    kiln, ortt = [], {spin: [] for spin in spins}
    for _ in range(a.rounds):  # interleaved: the machine is shared
        kiln.append(kiln_run(model, npz, out, a.repeat, a.threads))
        for spin, sess in sessions.items():
            ortt[spin].append(ort_ms(sess, f, a.repeat))
    k = statistics.median(kiln)
    shape = f"seq {a.seq}" + (f", past {a.past}" if kind == "gpt2" else "")
    line = f"{kind:<4} {form} {a.layers} layers, batch 1, {shape}, {a.threads} threads: kiln {k:8.2f} ms"
    for spin in spins:
        o = statistics.median(ortt[spin])
        line += f" | ort {ort.__version__}{'' if spin else ' no-spin'} {o:8.2f} ms, kiln/ort {k / o:.3f}"
    print(line + f"   (medians of {a.rounds} rounds x {a.repeat})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--models", default="bert,gpt2")
    ap.add_argument("--forms", default="opt", help="opt (transformers optimizer), ext (ORT_ENABLE_EXTENDED)")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--past", type=int, default=0, help="GPT-2's cached tokens before the seq new ones")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--opt-python", default="python3")
    ap.add_argument("--ort-spin", default="1",
                    help="1 (ORT's default), 0 (intra-op threads do not spin-wait) or 1,0 (both, interleaved)")
    a = ap.parse_args()
    if a.smoke:
        a.layers, a.seq, a.past = 2, 16, 5
    tmp = tempfile.mkdtemp(prefix="kiln_ort_optimized_")  # ~0.7 GB per 12-layer model and form
    try:
        for kind in a.models.split(","):
            for form in a.forms.split(","):
                bench(kind, form, a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
