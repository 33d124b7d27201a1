#!/usr/bin/env python3
"""Thread scaling: Kiln against ONNX Runtime at 1, 2, 4, 8 and 16 threads, interleaved, in one run.

Made for the many-core machines that Kiln reaches only through a bundle (scripts/device_bundle.sh:
the GPU machines' 16 Xeon cores), and runnable anywhere:

    python3 bench/scaling.py --kiln BUNDLE/bin/kiln --out OUTDIR [--threads 1,2,4,8,16]
    python3 bench/scaling.py --smoke --exporter-python /usr/bin/python3   # CI-sized check here

The models are exported in this run by the machine's own PyTorch (random weights, seeded, batch
1, opset 17): ResNet-50 and MobileNetV2 from torchvision, BERT-base at sequence 128 from
transformers when it is installed (else an encoder of BERT-base's shape written with
torch.nn.TransformerEncoder). `--exporter-python` runs the export in another interpreter (the
Debian PyTorch here, whose interpreter lacks onnxruntime).

For every (round, model, threads) Kiln runs as one `kiln run --threads T --repeat R
--executor sequential --timings-json F` process on a warm kernel cache (its warm-up run is not
timed), and ONNX Runtime as a session with intra_op_num_threads=T, inter_op_num_threads=1, one
warm-up run and R timed runs; the order of the two alternates each round. Medians are over all
timed runs of all rounds. Kiln's outputs are compared with ORT's once per model (a mismatch is
marked). With --profiles, `kiln run --profile-summary` at 1, 4 and the largest thread count is
written to OUTDIR/profile_<model>_t<T>.txt. The table (Kiln ms, ORT ms, Kiln/ORT, each engine's
speed-up over its own 1-thread time) is printed last and written to OUTDIR/scaling.md, the raw
numbers to OUTDIR/scaling.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

EXPORT_SCRIPT = r'''
import os, sys
import numpy as np
import torch
torch.manual_seed(0)
out, which = sys.argv[1], sys.argv[2].split(",")
small = len(sys.argv) > 3 and sys.argv[3] == "small"

def export(name, model, args, input_names, dynamic=None):
    path = os.path.join(out, name + ".onnx")
    if os.path.exists(path):
        return
    model.eval()
    kw = dict(opset_version=17, input_names=input_names, do_constant_folding=True)
    try:
        torch.onnx.export(model, args, path, dynamo=False, **kw)
    except TypeError:  # PyTorch before 2.5 has no dynamo argument
        torch.onnx.export(model, args, path, **kw)
    np.savez(os.path.join(out, name + "_inputs.npz"),
             **{n: a.numpy() for n, a in zip(input_names, args)})

if "mobilenetv2" in which:
    import torchvision
    export("mobilenetv2", torchvision.models.mobilenet_v2(), (torch.randn(1, 3, 224, 224),), ["input"])
if "resnet50" in which:
    import torchvision
    export("resnet50", torchvision.models.resnet50(), (torch.randn(1, 3, 224, 224),), ["input"])
if "bert" in which:
    seq, hidden, layers, heads = (32, 128, 2, 2) if small else (128, 768, 12, 12)
    ids = torch.randint(0, 30000, (1, seq))
    mask = torch.ones(1, seq, dtype=torch.int64)
    try:
        import transformers
        cfg = transformers.BertConfig(hidden_size=hidden, num_hidden_layers=layers,
                                      num_attention_heads=heads, intermediate_size=4 * hidden)
        bert = transformers.BertModel(cfg)
        bert.config.return_dict = False
        class Wrap(torch.nn.Module):
            def __init__(self, m):
                super().__init__(); self.m = m
            def forward(self, input_ids, attention_mask):
                return self.m(input_ids=input_ids, attention_mask=attention_mask)[0]
        export("bert", Wrap(bert), (ids, mask), ["input_ids", "attention_mask"])
    except ImportError:
        class Encoder(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(30000, hidden)
                layer = torch.nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, batch_first=True,
                                                         activation="gelu")
                self.enc = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            def forward(self, input_ids, attention_mask):
                return self.enc(self.emb(input_ids), src_key_padding_mask=(attention_mask == 0))
        export("bert", Encoder(), (ids, mask), ["input_ids", "attention_mask"])
'''


def export_models(python: str, out: str, models: list[str], small: bool) -> None:
    script = os.path.join(out, "export_models.py")
    with open(script, "w") as f:
        f.write(EXPORT_SCRIPT)
    cmd = [python, script, out, ",".join(models)] + (["small"] if small else [])
    subprocess.run(cmd, check=True)


def time_kiln(kiln: str, model: str, inputs: str, threads: int, repeat: int, env: dict,
              extra: list[str] | None = None) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tf:
        timings = tf.name
    cmd = [kiln, "run", model, "--inputs", inputs, "--threads", str(threads), "--repeat", str(repeat),
           "--executor", "sequential", "--timings-json", timings] + (extra or [])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"kiln failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    with open(timings) as f:
        result = json.load(f)
    os.unlink(timings)
    result["stdout"] = proc.stdout
    return result


class OrtModel:
    def __init__(self, path: str, inputs: dict, threads: int):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        names = {i.name for i in self.sess.get_inputs()}
        self.feed = {k: v for k, v in inputs.items() if k in names}

    def run(self):
        return self.sess.run(None, self.feed)

    def time(self, repeat: int) -> list[float]:
        self.run()
        ms = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            self.run()
            ms.append((time.perf_counter() - t0) * 1e3)
        return ms


def check_outputs(kiln: str, model: str, inputs_npz: str, env: dict, ort_outputs: list) -> str:
    with tempfile.TemporaryDirectory() as d:
        time_kiln(kiln, model, inputs_npz, 1, 1, env, ["--output-dir", d])
        files = sorted(f for f in os.listdir(d) if f.endswith(".npy"))
        if not files:
            return "no outputs"
        # Compare the first output (all three models have one main output), scaled tolerance.
        ref = ort_outputs[0]
        got = np.load(os.path.join(d, files[0])) if len(files) == 1 else None
        if got is None:
            for f in files:
                a = np.load(os.path.join(d, f))
                if a.shape == ref.shape:
                    got = a
                    break
        if got is None or got.shape != ref.shape:
            return "MISMATCH (shape)"
        # Relative to the output's own scale: random-weight nets can end in tiny values.
        err = float(np.max(np.abs(got - ref)) / max(float(np.max(np.abs(ref))), 1e-30))
        return "ok" if err < 2e-3 else f"MISMATCH ({err:.2e})"


def run(args) -> int:
    os.makedirs(args.out, exist_ok=True)
    models = args.models.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    export_models(args.exporter_python, args.out, models, args.smoke)
    env = dict(os.environ)
    env.setdefault("KILN_CACHE_DIR", os.path.join(args.out, "kernel_cache"))
    results: dict = {}
    checks: dict = {}
    for name in models:
        path = os.path.join(args.out, name + ".onnx")
        npz = os.path.join(args.out, name + "_inputs.npz")
        inputs = dict(np.load(npz))
        t0 = time.perf_counter()
        first = time_kiln(args.kiln, path, npz, threads[-1], 1, env)  # warms the kernel cache
        results.setdefault(name, {})["cold_load_s"] = time.perf_counter() - t0
        results[name]["compile_s"] = first.get("compile_s")
        checks[name] = check_outputs(args.kiln, path, npz, env, OrtModel(path, inputs, 1).run())
        print(f"{name}: cold load + first run {results[name]['cold_load_s']:.1f} s, output {checks[name]}",
              flush=True)
    repeat = {name: (args.repeat if name != "bert" or args.smoke else max(3, args.repeat // 2)) for name in models}
    for r in range(args.rounds):
        for name in models:
            path = os.path.join(args.out, name + ".onnx")
            npz = os.path.join(args.out, name + "_inputs.npz")
            inputs = dict(np.load(npz))
            for t in threads:
                cell = results[name].setdefault(str(t), {"kiln": [], "ort": []})
                order = ("kiln", "ort") if (r + t) % 2 == 0 else ("ort", "kiln")
                for engine in order:
                    if engine == "kiln":
                        cell["kiln"] += time_kiln(args.kiln, path, npz, t, repeat[name], env)["runs_ms"]
                    else:
                        cell["ort"] += OrtModel(path, inputs, t).time(repeat[name])
                print(f"round {r} {name} t={t}: kiln {np.median(cell['kiln']):.2f} ms, "
                      f"ort {np.median(cell['ort']):.2f} ms", flush=True)
    if args.profiles:
        for name in models:
            path = os.path.join(args.out, name + ".onnx")
            npz = os.path.join(args.out, name + "_inputs.npz")
            for t in sorted({threads[0], 4, threads[-1]} & set(threads)):
                res = time_kiln(args.kiln, path, npz, t, repeat[name], env, ["--profile-summary"])
                with open(os.path.join(args.out, f"profile_{name}_t{t}.txt"), "w") as f:
                    f.write(res["stdout"])
    table = format_table(results, checks, models, threads)
    with open(os.path.join(args.out, "scaling.json"), "w") as f:
        json.dump({"results": results, "checks": checks, "cpu": cpu_name(), "nproc": os.cpu_count()}, f)
    with open(os.path.join(args.out, "scaling.md"), "w") as f:
        f.write(table)
    print(table)
    return 1 if any(c != "ok" for c in checks.values()) else 0


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def format_table(results: dict, checks: dict, models: list[str], threads: list[int]) -> str:
    lines = [f"CPU: {cpu_name()}, {os.cpu_count()} logical CPUs",
             "",
             "| model | threads | Kiln ms | ORT ms | Kiln / ORT | Kiln speed-up | ORT speed-up | output |",
             "|---|---|---|---|---|---|---|---|"]
    for name in models:
        base = results[name].get(str(threads[0]))
        for t in threads:
            cell = results[name].get(str(t))
            if not cell or not cell["kiln"] or not cell["ort"]:
                continue
            k, o = float(np.median(cell["kiln"])), float(np.median(cell["ort"]))
            ks = float(np.median(base["kiln"])) / k
            os_ = float(np.median(base["ort"])) / o
            lines.append(f"| {name} | {t} | {k:.2f} | {o:.2f} | {k / o:.2f} | {ks:.2f} | {os_:.2f} | {checks[name]} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN", "build/bin/kiln"))
    ap.add_argument("--out", default="build/scaling")
    ap.add_argument("--models", default="resnet50,mobilenetv2,bert")
    ap.add_argument("--threads", default=None, help="comma-separated thread counts (default 1,2,4,8,16 "
                                                      "capped at the machine's CPUs)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--profiles", action="store_true", help="write per-kernel profiles at 1, 4 and max threads")
    ap.add_argument("--exporter-python", default=sys.executable)
    ap.add_argument("--smoke", action="store_true",
                    help="MobileNetV2 and a 2-layer encoder, 1 and 2 threads, one round of 2 runs")
    args = ap.parse_args()
    if args.smoke:
        args.models = "mobilenetv2,bert" if args.models == "resnet50,mobilenetv2,bert" else args.models
        args.threads = args.threads or "1,2"
        args.rounds, args.repeat = 1, 2
    if args.threads is None:
        n = os.cpu_count() or 1
        args.threads = ",".join(str(t) for t in (1, 2, 4, 8, 16) if t <= n)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
