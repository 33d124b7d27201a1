"""Training step time: Kiln (kiln.training, fused step) vs PyTorch eager, on 2 threads each (--threads).

    bench/setup_peers.sh --torch     # once: PyTorch 2.x from PyPI in build/torch-venv
    python3 bench/train_vs_torch.py [--models mlp,digits,resnet18,bert] [--rounds 5] [--steps 3] [--compile]
    python3 bench/train_vs_torch.py --smoke      # 1 step each: both losses finite and equal at step 0
    python3 bench/train_vs_torch.py --models resnet18 --profile 15   # + Kiln's top 15 kernels per step
    python3 bench/train_vs_torch.py --models resnet18 --kiln-baseline /tmp/main_py   # + another build, same rounds

PyTorch runs in a subprocess of its own interpreter (`--torch-python`; default the venv that
`bench/setup_peers.sh --torch` makes, build/torch-venv, else $KILN_TORCH_PYTHON; without either
it falls back to Debian's /usr/bin/python3 with torch 1.13, whose matrix products run on the
reference BLAS: good for --smoke, never for timing, and the script says so), this same file with
--torch-worker, driven in lockstep over stdin/stdout: each round times `--steps` SGD(momentum)
steps of Kiln, then the same number of PyTorch eager's (and with `--compile`, of the same step
under `torch.compile`), so all see the same machine load; the table gives per-step medians over
rounds and Kiln's time over PyTorch's. With `--kiln-baseline DIR` a second Kiln (the package
found first in DIR, e.g. another build's python/kiln with its _kiln*.so) runs in a worker of its
own in the same rounds (this process's Kiln, the baseline's, then PyTorch's), for a before/after
of a change under the same load.
Both start from the same weights (the worker builds the model with tests/training/torch_reference
.py and exports it to ONNX for Kiln) and train on the same two batches, in float32. Kiln's first
step includes compiling the training step; it is reported apart and not timed in the rounds.

On a machine loaded by other work, PyTorch's OpenMP threads spin and lose several times their
calm time; `OMP_WAIT_POLICY=PASSIVE` in the environment makes them sleep instead (it changes only
PyTorch: Kiln's oneDNN calls run one OpenMP thread). Say which was used when quoting ratios.

Models: the MLP (784-512-512-10, batch 64), the digits CNN (batch 64), ResNet-18 (batch 16,
112x112, 1000 classes) and two BERT-base encoder layers (hidden 768, 12 heads, FFN 3072, batch 8,
sequence 128; a 2-class head on the mean-pooled output).
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
TRAINING_TESTS = os.path.join(os.path.dirname(HERE), "tests", "training")
ROOT = os.path.dirname(HERE)
DEBIAN_TORCH = "/usr/bin/python3"
MODELS = ["mlp", "digits", "resnet18", "bert"]
LR, MOMENTUM = 0.01, 0.9
# Threads of each engine: --threads, passed to the workers through the environment.
THREADS = int(os.environ.get("KILN_BENCH_THREADS", "2"))


# ---- the PyTorch side (run by /usr/bin/python3) ----
def default_torch_python():
    """The training peer's interpreter: $KILN_TORCH_PYTHON, else bench/setup_peers.sh --torch's venv,
    else Debian's torch 1.13 (reference BLAS: correctness only)."""
    if os.environ.get("KILN_TORCH_PYTHON"):
        return os.environ["KILN_TORCH_PYTHON"]
    venv = os.path.join(os.environ.get("KILN_BUILD_DIR", os.path.join(ROOT, "build")), "torch-venv", "bin", "python")
    return venv if os.path.exists(venv) else DEBIAN_TORCH


def torch_worker():
    import warnings
    warnings.filterwarnings("ignore")  # the ONNX exporter's notes on BatchNorm's in-place updates
    # torch.compile's pool of compile processes stays alive and busy-polls: with it, eager steps
    # timed after a compile ran 40x slower on 2 cores. Compile in this process instead.
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import numpy as np
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, TRAINING_TESTS)
    import torch_reference as R

    torch.set_num_threads(THREADS)
    runs = {}  # "eager" / "compile" -> [module, optimizer, step]
    x = y = None
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "export":
            model, xs, ys = R.build("bench_" + req["model"], batches=2)
            R.export(model, xs[0], os.path.join(req["dir"], "model.onnx"))
            np.savez(os.path.join(req["dir"], "batches.npz"), x=xs, y=ys)
            x, y = torch.from_numpy(xs), torch.from_numpy(ys)
            runs = {"eager": model}
            if req.get("compile"):
                import copy
                runs["compile"] = torch.compile(copy.deepcopy(model))
            runs = {k: [m.train(), torch.optim.SGD(m.parameters(), lr=LR, momentum=MOMENTUM), 0]
                    for k, m in runs.items()}
            reply = {"ok": True, "torch": torch.__version__}
        elif req["cmd"] == "steps":
            run = runs[req.get("mode", "eager")]
            m, opt = run[0], run[1]
            times, losses = [], []
            for _ in range(req["n"]):
                t = time.perf_counter()
                opt.zero_grad()
                loss = F.cross_entropy(m(x[run[2] % 2]), y[run[2] % 2])
                loss.backward()
                opt.step()
                times.append(time.perf_counter() - t)
                losses.append(loss.item())
                run[2] += 1
            reply = {"times": times, "losses": losses}
        else:
            reply = {"error": f"unknown command {req['cmd']}"}
        print(json.dumps(reply), flush=True)


def kiln_worker():
    """A second Kiln (another build's package, put first on PYTHONPATH by --kiln-baseline) timed in
    lockstep with this process's: the same commands as the PyTorch worker."""
    import numpy as np
    trainer = None
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "load":
            trainer = KilnTrainer(req["path"], dict(np.load(req["batches"])))
            import kiln
            reply = {"ok": True, "kiln": os.path.dirname(kiln.__file__)}
        elif req["cmd"] == "steps":
            times, losses = trainer.steps(req["n"])
            reply = {"times": times, "losses": losses}
        else:
            reply = {"error": f"unknown command {req['cmd']}"}
        print(json.dumps(reply), flush=True)


# ---- the Kiln side ----
class TorchWorker:
    def __init__(self, python, flag="--torch-worker", env=None):
        self.python = python
        self.proc = subprocess.Popen([python, os.path.abspath(__file__), flag],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def ask(self, **req):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the PyTorch worker ({self.python}) exited: see its stderr above")
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


class KilnTrainer:
    def __init__(self, onnx_path, batches, profile_prefix=None):
        import kiln
        from kiln.training import CheckpointState, Module, Optimizer
        so = kiln.SessionOptions()
        so.intra_op_num_threads = THREADS
        if profile_prefix:
            so.enable_profiling = True
            so.profile_file_prefix = profile_prefix
        self.module = Module(onnx_path, CheckpointState(), session_options=so, fused_step=True)
        self.opt = Optimizer(self.module, "sgd", lr=LR, momentum=MOMENTUM)
        self.x, self.y = batches["x"], batches["y"]
        self.step = 0

    def steps(self, n):
        times, losses = [], []
        for _ in range(n):
            t = time.perf_counter()
            loss = self.module(self.x[self.step % 2], self.y[self.step % 2])
            self.opt.step()
            self.module.lazy_reset_grad()
            times.append(time.perf_counter() - t)
            losses.append(float(loss))
            self.step += 1
        return times, losses


def profile_kiln(path, batches, steps, top):
    """Kiln's kernels per training step (a profiled trainer's Chrome trace, first step left out):
    ms per step and GFLOP/s, largest first."""
    import gc
    import glob
    with tempfile.TemporaryDirectory() as d:
        trainer = KilnTrainer(path, batches, profile_prefix=os.path.join(d, "trace"))
        trainer.steps(1 + steps)
        del trainer
        gc.collect()  # the session writes its trace when it closes
        traces = glob.glob(os.path.join(d, "trace*.json"))
        if not traces:
            return "  (no profile written)"
        with open(traces[0]) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e["args"].get("run", 0) > 0]
    runs = len({e["args"]["run"] for e in events}) or 1
    rows = {}
    for e in events:
        key = (e["name"], e["args"].get("shapes", ""))
        r = rows.setdefault(key, [0.0, 0.0, 0])
        r[0] += e["dur"] / 1e3
        r[1] += e["args"].get("flops", 0)
        r[2] += 1
    total = sum(r[0] for r in rows.values()) / runs
    lines = [f"  Kiln kernels per step ({runs} runs, {total:.1f} ms of kernels; top {top}):"]
    for (nm, shapes), (ms, flops, calls) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:top]:
        gf = f"{flops / (ms * 1e6):6.1f} GFLOP/s" if flops and ms else " " * 14
        lines.append(f"  {ms / runs:8.2f} ms  {gf}  x{calls // runs:<3d} {nm}  {shapes}")
    return "\n".join(lines)


def bench_model(worker, name, rounds, steps, smoke, compiled, profile=0, base=None):
    import numpy as np
    sys.path.insert(0, TRAINING_TESTS)
    from onnx_fixup import inference_batchnorm
    with tempfile.TemporaryDirectory() as d:
        worker.torch_version = worker.ask(cmd="export", model=name, dir=d, compile=compiled)["torch"]
        path = os.path.join(d, "model.onnx")
        inference_batchnorm(path, path)  # BN exported in training mode -> plain BN (Kiln trains it)
        batches = dict(np.load(os.path.join(d, "batches.npz")))
        kiln = KilnTrainer(path, batches)
        (first,), (k_loss0,) = kiln.steps(1)  # compiles the training step
        if base:  # the baseline Kiln: same model, same batches, its first step untimed
            base.kiln_dir = base.ask(cmd="load", path=path, batches=os.path.join(d, "batches.npz"))["kiln"]
            base.ask(cmd="steps", n=1)
        t_first = worker.ask(cmd="steps", n=1)
        p_loss0 = t_first["losses"][0]
        ok = np.isfinite(k_loss0) and np.isfinite(p_loss0) and abs(k_loss0 - p_loss0) <= 1e-3 * abs(p_loss0)
        row = {"model": name, "kiln_loss0": k_loss0, "torch_loss0": p_loss0, "agree": bool(ok), "first_step_s": first}
        if smoke:
            return row
        modes = ["eager", "compile"] if compiled else ["eager"]
        if compiled:
            row["compile_first_step_s"] = sum(worker.ask(cmd="steps", n=2, mode="compile")["times"])
        med = {m: [] for m in ["kiln", "base"] + modes}
        for _ in range(rounds):
            med["kiln"].append(statistics.median(kiln.steps(steps)[0]))
            if base:
                med["base"].append(statistics.median(base.ask(cmd="steps", n=steps)["times"]))
            for m in modes:
                med[m].append(statistics.median(worker.ask(cmd="steps", n=steps, mode=m)["times"]))
        row.update(kiln_ms=1e3 * statistics.median(med["kiln"]), torch_ms=1e3 * statistics.median(med["eager"]))
        row["ratio"] = row["kiln_ms"] / row["torch_ms"]
        if base:
            row.update(base_ms=1e3 * statistics.median(med["base"]), base_kiln=base.kiln_dir)
            row["ratio_base"] = row["kiln_ms"] / row["base_ms"]
            row["base_ratio"] = row["base_ms"] / row["torch_ms"]
        if compiled:
            row["compile_ms"] = 1e3 * statistics.median(med["compile"])
            row["ratio_compile"] = row["kiln_ms"] / row["compile_ms"]
        if profile:
            del kiln
            row["profile"] = profile_kiln(path, batches, steps, profile)
        return row


def main():
    global THREADS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--kiln-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--kiln-baseline", metavar="PYTHONPATH",
                   help="also time another Kiln build (its package first on this PYTHONPATH) in the same rounds")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=3, help="steps per engine per round")
    p.add_argument("--threads", type=int, default=THREADS, help="intra-op threads of each engine (default 2)")
    p.add_argument("--smoke", action="store_true", help="one step each, correctness only")
    p.add_argument("--json", help="also write the rows here")
    p.add_argument("--torch-python", default=default_torch_python(),
                   help="the interpreter with the PyTorch peer (default: build/torch-venv, see setup_peers.sh --torch)")
    p.add_argument("--compile", action="store_true", help="also time the step under torch.compile")
    p.add_argument("--profile", type=int, default=0, metavar="TOP",
                   help="after timing, profile Kiln's step and print its TOP kernels (ms/step, GFLOP/s)")
    a = p.parse_args()
    if a.torch_worker:
        return torch_worker()
    if a.kiln_worker:
        return kiln_worker()
    THREADS = a.threads
    os.environ["KILN_BENCH_THREADS"] = str(a.threads)  # the workers' threads
    if a.torch_python == DEBIAN_TORCH and not a.smoke:
        print("train_vs_torch: PyTorch peer is Debian's torch 1.13 (reference BLAS): not a fair timing peer; "
              "run bench/setup_peers.sh --torch", file=sys.stderr)
    worker = TorchWorker(a.torch_python)
    base = None
    if a.kiln_baseline:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([a.kiln_baseline, os.environ.get("PYTHONPATH", "")]))
        base = TorchWorker(sys.executable, "--kiln-worker", env)
    rows, failed = [], []
    try:
        for name in a.models.split(","):
            if name not in MODELS:
                raise SystemExit(f"unknown model '{name}' (have {MODELS})")
            row = bench_model(worker, name, a.rounds, a.steps, a.smoke, a.compile, a.profile, base)
            rows.append(row)
            if not row["agree"]:
                failed.append(name)
            if a.smoke:
                print(f"{name:9s} step-0 loss: Kiln {row['kiln_loss0']:.6f}  PyTorch {row['torch_loss0']:.6f}  "
                      f"{'ok' if row['agree'] else 'MISMATCH'}  (Kiln's first step incl. compile "
                      f"{row['first_step_s']:.1f} s)", flush=True)
            else:
                compiled = (f"   compile {row['compile_ms']:9.1f} ms/step   Kiln/compile {row['ratio_compile']:.2f}"
                            if a.compile else "")
                print(f"{name:9s} Kiln {row['kiln_ms']:9.1f} ms/step   PyTorch {worker.torch_version} eager "
                      f"{row['torch_ms']:9.1f} ms/step   Kiln/eager {row['ratio']:.2f}{compiled}   (step-0 losses "
                      f"{'agree' if row['agree'] else 'DIFFER'}; Kiln compile+first step {row['first_step_s']:.1f} s)",
                      flush=True)
                if base:
                    print(f"{'':9s} baseline Kiln ({row['base_kiln']}) {row['base_ms']:9.1f} ms/step   "
                          f"Kiln/baseline {row['ratio_base']:.2f}   baseline/eager {row['base_ratio']:.2f}", flush=True)
                if row.get("profile"):
                    print(row["profile"], flush=True)
    finally:
        worker.close()
        if base:
            base.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if failed:
        raise SystemExit(f"step-0 losses differ (or are not finite) for: {', '.join(failed)}")


if __name__ == "__main__":
    main()
