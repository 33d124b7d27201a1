#!/usr/bin/env python3
"""What the pass pipeline buys, per model, measured in one run (issue 4's figures).

For each model: the node count before and after every pass of -O3 (from `kiln inspect`'s pass
table), the kernels a run launches at -O0 and -O3 (`kiln inspect --kernels`), and the
end-to-end latency at -O0 and -O3: `kiln run -O0` and `kiln run -O3` alternate `--rounds`
times (each reporting the median of `--repeat` runs), the figure is the median over rounds.
ONNX Runtime (all graph optimizations, same threads) is timed in the same rounds as the
external reference. Prints Markdown tables (docs/passes.md holds the last measured ones).

    python3 bench/opt_levels.py [--models resnet50,mobilenetv2,bert_base] [--threads 1]
        [--repeat 5] [--rounds 3]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_models  # noqa: E402  (model files, kiln/ORT timing helpers)

PASS_ROW = re.compile(r"^//\s+(\S+)\s+(\d+)\s+(\d+)\s+([0-9.]+)$")


def kiln_text(kiln, args, env):
    proc = subprocess.run([kiln] + args, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"kiln {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stdout


def dim_args(dims):
    out = []
    for k, v in dims.items():
        out += ["--dim", f"{k}={v}"]
    return out


def pass_table(kiln, model, dims, env):
    """[(pass, nodes in, nodes out, ms)] of the -O3 pipeline."""
    rows = []
    for line in kiln_text(kiln, ["inspect", model] + dim_args(dims), env).splitlines():
        m = PASS_ROW.match(line)
        if m and m.group(1) not in ("pass", "total"):
            rows.append((m.group(1), int(m.group(2)), int(m.group(3)), float(m.group(4))))
    return rows


def kernel_count(kiln, model, dims, level, env):
    last = kiln_text(kiln, ["inspect", model, f"-O{level}", "--kernels"] + dim_args(dims), env).split("\n")
    last = [l for l in last if l.strip()][-1]
    return int(last.split()[0])


def kiln_level_ms(kiln, files, threads, repeat, level, env):
    model, inputs, dims = files
    cmd = [kiln, "run", model, "--inputs", inputs, "--repeat", str(repeat), "--threads", str(threads),
           f"-O{level}"] + dim_args(dims)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return float(bench_models.MEDIAN_RE.search(proc.stdout).group(1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.path.join(bench_models.REPO, "build", "bin", "kiln"))
    ap.add_argument("--models", default="resnet50,mobilenetv2,bert_base")
    ap.add_argument("--models-dir", default=os.path.join(bench_models.REPO, "build", "models"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    env = dict(os.environ)
    summary = []
    for name in args.models.split(","):
        files = bench_models.model_files(name, args.models_dir)
        model, _, dims = files
        print(f"\n### {name}: node count through the -O3 pipeline\n")
        print("| pass | nodes before | nodes after | ms |\n|---|---:|---:|---:|")
        for p, a, b, ms in pass_table(args.kiln, model, dims, env):
            print(f"| {p} | {a} | {b} | {ms:.1f} |")
        k0 = kernel_count(args.kiln, model, dims, 0, env)
        k3 = kernel_count(args.kiln, model, dims, 3, env)
        ort = bench_models.OrtModel(files, args.threads)
        t0, t3, to = [], [], []
        for _ in range(args.rounds):
            t0.append(kiln_level_ms(args.kiln, files, args.threads, args.repeat, 0, env))
            t3.append(kiln_level_ms(args.kiln, files, args.threads, args.repeat, 3, env))
            to.append(ort.median_ms(args.repeat))
        summary.append((name, k0, k3, statistics.median(t0), statistics.median(t3), statistics.median(to)))
    print(f"\n### kernels and latency ({args.threads} thread(s), median of {args.rounds} rounds x "
          f"{args.repeat} runs)\n")
    print("| model | kernels -O0 | kernels -O3 | -O0 ms | -O3 ms | -O0/-O3 | ORT ms | -O3/ORT |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, k0, k3, a, b, o in summary:
        print(f"| {name} | {k0} | {k3} | {a:.1f} | {b:.1f} | {a / b:.2f} | {o:.1f} | {b / o:.2f} |")


if __name__ == "__main__":
    main()
