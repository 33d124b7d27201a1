"""Training step time: Kiln (kiln.training, fused step) vs PyTorch eager, on 2 threads each.

    python3 bench/train_vs_torch.py [--models mlp,digits,resnet18,bert] [--rounds 5] [--steps 3]
    python3 bench/train_vs_torch.py --smoke      # 1 step each: both losses finite and equal at step 0

PyTorch runs in a /usr/bin/python3 subprocess (the Debian interpreter that has torch; this one
has Kiln), this same file with --torch-worker, driven in lockstep over stdin/stdout: each round
times `--steps` SGD(momentum) steps of Kiln, then the same number of PyTorch's, so both see the
same machine load; the table gives per-step medians over rounds and Kiln's time over PyTorch's.
Both start from the same weights (the worker builds the model with tests/training/torch_reference
.py and exports it to ONNX for Kiln) and train on the same two batches, in float32. Kiln's first
step includes compiling the training step; it is reported apart and not timed in the rounds.

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
TORCH_PYTHON = "/usr/bin/python3"
MODELS = ["mlp", "digits", "resnet18", "bert"]
LR, MOMENTUM, THREADS = 0.01, 0.9, 2


# ---- the PyTorch side (run by /usr/bin/python3) ----
def torch_worker():
    import warnings
    warnings.filterwarnings("ignore")  # the ONNX exporter's notes on BatchNorm's in-place updates
    import numpy as np
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, TRAINING_TESTS)
    import torch_reference as R

    torch.set_num_threads(THREADS)
    model = opt = x = y = None
    step = 0
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "export":
            model, xs, ys = R.build("bench_" + req["model"], batches=2)
            R.export(model, xs[0], os.path.join(req["dir"], "model.onnx"))
            np.savez(os.path.join(req["dir"], "batches.npz"), x=xs, y=ys)
            model.train()
            x, y = torch.from_numpy(xs), torch.from_numpy(ys)
            opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
            step = 0
            reply = {"ok": True}
        elif req["cmd"] == "steps":
            times, losses = [], []
            for _ in range(req["n"]):
                t = time.perf_counter()
                opt.zero_grad()
                loss = F.cross_entropy(model(x[step % 2]), y[step % 2])
                loss.backward()
                opt.step()
                times.append(time.perf_counter() - t)
                losses.append(loss.item())
                step += 1
            reply = {"times": times, "losses": losses}
        else:
            reply = {"error": f"unknown command {req['cmd']}"}
        print(json.dumps(reply), flush=True)


# ---- the Kiln side ----
class TorchWorker:
    def __init__(self):
        self.proc = subprocess.Popen([TORCH_PYTHON, os.path.abspath(__file__), "--torch-worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, **req):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the PyTorch worker ({TORCH_PYTHON}) exited: see its stderr above")
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


class KilnTrainer:
    def __init__(self, onnx_path, batches):
        import kiln
        from kiln.training import CheckpointState, Module, Optimizer
        so = kiln.SessionOptions()
        so.intra_op_num_threads = THREADS
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


def bench_model(worker, name, rounds, steps, smoke):
    import numpy as np
    sys.path.insert(0, TRAINING_TESTS)
    from onnx_fixup import inference_batchnorm
    with tempfile.TemporaryDirectory() as d:
        worker.ask(cmd="export", model=name, dir=d)
        path = os.path.join(d, "model.onnx")
        inference_batchnorm(path, path)  # BN exported in training mode -> plain BN (Kiln trains it)
        batches = dict(np.load(os.path.join(d, "batches.npz")))
        kiln = KilnTrainer(path, batches)
        (first,), (k_loss0,) = kiln.steps(1)  # compiles the training step
        t_first = worker.ask(cmd="steps", n=1)
        p_loss0 = t_first["losses"][0]
        ok = np.isfinite(k_loss0) and np.isfinite(p_loss0) and abs(k_loss0 - p_loss0) <= 1e-3 * abs(p_loss0)
        row = {"model": name, "kiln_loss0": k_loss0, "torch_loss0": p_loss0, "agree": bool(ok), "first_step_s": first}
        if smoke:
            return row
        k_med, p_med = [], []
        for _ in range(rounds):
            kt, _ = kiln.steps(steps)
            pt = worker.ask(cmd="steps", n=steps)["times"]
            k_med.append(statistics.median(kt))
            p_med.append(statistics.median(pt))
        row.update(kiln_ms=1e3 * statistics.median(k_med), torch_ms=1e3 * statistics.median(p_med))
        row["ratio"] = row["kiln_ms"] / row["torch_ms"]
        return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=3, help="steps per engine per round")
    p.add_argument("--smoke", action="store_true", help="one step each, correctness only")
    p.add_argument("--json", help="also write the rows here")
    a = p.parse_args()
    if a.torch_worker:
        return torch_worker()
    worker = TorchWorker()
    rows, failed = [], []
    try:
        for name in a.models.split(","):
            if name not in MODELS:
                raise SystemExit(f"unknown model '{name}' (have {MODELS})")
            row = bench_model(worker, name, a.rounds, a.steps, a.smoke)
            rows.append(row)
            if not row["agree"]:
                failed.append(name)
            if a.smoke:
                print(f"{name:9s} step-0 loss: Kiln {row['kiln_loss0']:.6f}  PyTorch {row['torch_loss0']:.6f}  "
                      f"{'ok' if row['agree'] else 'MISMATCH'}  (Kiln's first step incl. compile "
                      f"{row['first_step_s']:.1f} s)", flush=True)
            else:
                print(f"{name:9s} Kiln {row['kiln_ms']:9.1f} ms/step   PyTorch {row['torch_ms']:9.1f} ms/step   "
                      f"Kiln/PyTorch {row['ratio']:.2f}   (step-0 losses {'agree' if row['agree'] else 'DIFFER'}; "
                      f"Kiln compile+first step {row['first_step_s']:.1f} s)", flush=True)
    finally:
        worker.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if failed:
        raise SystemExit(f"step-0 losses differ (or are not finite) for: {', '.join(failed)}")


if __name__ == "__main__":
    main()
