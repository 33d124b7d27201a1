#!/usr/bin/env python3
"""The GPU check's models, exported with the machine's own PyTorch, and PyTorch's own times.

    python3 scripts/gpu_models.py OUTDIR [--time | --time-compile] [--smoke] [--models NAME,...]

Writes OUTDIR/<name>.onnx and OUTDIR/<name>_inputs.npz for
  gpu_mlp      batch 256, 1024 -> 2048 -> 2048 -> 1024 with ReLU (matmul-heavy)
  gpu_encoder  one transformer encoder block (batch 8, seq 128, d 256, 4 heads, ff 1024;
               explicit ops: Linear, MatMul, Softmax, LayerNorm, GELU)
  gpu_resnet50 torchvision's ResNet-50 (random weights), batch 1, 224x224 (conv-heavy: cuDNN)
  gpu_bert     transformers' BERT-base (random weights), batch 1, sequence 128 (skipped without
               the transformers package)
  gpu_resnet50_b32, gpu_bert_b8: the same at batch 32 and 8 (the issue's other targets)
With --time instead (needs a CUDA GPU): PyTorch eager on the GPU, and the same replayed as a CUDA graph,
median ms over interleaved rounds, into OUTDIR/torch_times.json; --time-compile: torch.compile's
time added there. --smoke: one round. PyTorch runs with its defaults: FP32 matmuls in FP32, FP32
convolutions allowed TF32 (torch.backends.cudnn.allow_tf32); resnet50 is also timed with TF32 off
(key gpu_resnet50_fp32), the figure `kiln run --gpu-math fp32` compares with; every model also in
FP16 (model.half(), FP16 inputs; key <name>_fp16), the figure `--gpu-math fp16` compares with.
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(1024, 2048)
        self.l2 = torch.nn.Linear(2048, 2048)
        self.l3 = torch.nn.Linear(2048, 1024)

    def forward(self, x):
        return self.l3(torch.relu(self.l2(torch.relu(self.l1(x)))))


class Encoder(torch.nn.Module):
    def __init__(self, d=256, heads=4, ff=1024):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln1 = torch.nn.LayerNorm(d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.ff1 = torch.nn.Linear(d, ff)
        self.ff2 = torch.nn.Linear(ff, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q = q.reshape(b, s, self.heads, self.dh).transpose(1, 2)
        k = k.reshape(b, s, self.heads, self.dh).transpose(1, 2)
        v = v.reshape(b, s, self.heads, self.dh).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh), dim=-1) @ v
        x = self.ln1(x + self.proj(a.transpose(1, 2).reshape(b, s, d)))
        return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))


def resnet50():
    import torchvision  # only this model needs it
    return torchvision.models.resnet50()


class Bert(torch.nn.Module):
    """BERT-base's encoder stack (hidden 768, 12 layers, 12 heads) on token ids and a mask."""

    def __init__(self):
        super().__init__()
        import transformers  # only this model needs it
        self.m = transformers.BertModel(transformers.BertConfig())
        self.m.config.return_dict = False

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask)[0]


def float_input(*shape):
    return lambda: {"x": torch.randn(*shape)}


def bert_inputs(batch):
    return lambda: {"input_ids": torch.randint(0, 30000, (batch, 128)),
                    "attention_mask": torch.ones(batch, 128, dtype=torch.int64)}


# name -> (model factory, inputs factory: name -> CPU tensor); the batch sizes last
MODELS = {"gpu_mlp": (Mlp, float_input(256, 1024)), "gpu_encoder": (Encoder, float_input(8, 128, 256)),
          "gpu_resnet50": (resnet50, float_input(1, 3, 224, 224)), "gpu_bert": (Bert, bert_inputs(1)),
          "gpu_resnet50_b32": (resnet50, float_input(32, 3, 224, 224)), "gpu_bert_b8": (Bert, bert_inputs(8))}


def available(name):
    if not name.startswith("gpu_bert"):
        return True
    try:
        import transformers  # noqa: F401
        return True
    except ImportError:
        print(f"{name}: skipped (no transformers package)")
        return False


def export(out):
    for name, (cls, make_inputs) in MODELS.items():
        path = os.path.join(out, name + ".onnx")
        if os.path.exists(path) or not available(name):
            continue
        torch.manual_seed(0)
        model = cls().eval()
        inputs = make_inputs()
        args = tuple(inputs.values())
        kw = dict(input_names=list(inputs), output_names=["y"], opset_version=17)
        try:  # the TorchScript exporter (static shapes, plain ops)
            torch.onnx.export(model, args, path, dynamo=False, **kw)
        except TypeError:  # PyTorch before 2.5 has no dynamo argument
            torch.onnx.export(model, args, path, **kw)
        except Exception as e:  # a PyTorch without the TorchScript exporter: the dynamo one
            print(f"{name}: TorchScript export failed ({type(e).__name__}: {e}); trying dynamo=True")
            torch.onnx.export(model, args, path, dynamo=True, external_data=False, **kw)
        np.savez(os.path.join(out, name + "_inputs.npz"), **{k: v.numpy() for k, v in inputs.items()})
        print(f"exported {path}")


def median_ms(fn, runs):
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ts))


def cuda_inputs(make_inputs, half):
    """The inputs on the GPU; floats in FP16 for a half model (token ids stay integers)."""
    out = []
    for v in make_inputs().values():
        v = v.cuda()
        out.append(v.half() if half and v.is_floating_point() else v)
    return out


def time_torch(out, rounds):
    times = {}
    runs = []  # key, model factory, inputs factory, allow_tf32, half
    for name, (cls, make_inputs) in MODELS.items():
        if available(name):
            runs += [(name, cls, make_inputs, True, False), (name + "_fp16", cls, make_inputs, True, True)]
    if "gpu_resnet50" in MODELS:
        runs.append(("gpu_resnet50_fp32", resnet50, MODELS["gpu_resnet50"][1], False, False))
    for name, cls, make_inputs, allow_tf32, half in runs:
        torch.backends.cudnn.allow_tf32 = allow_tf32
        torch.manual_seed(0)
        model = cls().eval().cuda()
        if half:
            model = model.half()
        x = cuda_inputs(make_inputs, half)
        with torch.no_grad():
            for _ in range(3):
                model(*x)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                model(*x)
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(g):
                model(*x)
            eager, graph = [], []
            for _ in range(rounds):  # interleaved
                eager.append(median_ms(lambda: model(*x), 20))
                graph.append(median_ms(g.replay, 20))
        times[name] = {"eager_ms": float(np.median(eager)), "cuda_graph_ms": float(np.median(graph)),
                       "device": torch.cuda.get_device_name(0)}
        print(f"{name}: torch eager {times[name]['eager_ms']:.3f} ms, CUDA graph {times[name]['cuda_graph_ms']:.3f} ms")
    torch.backends.cudnn.allow_tf32 = True
    with open(os.path.join(out, "torch_times.json"), "w") as f:
        json.dump(times, f, indent=1)


def time_torch_compile(out, rounds):
    """torch.compile (default mode) of each model, FP32 and FP16, added to torch_times.json as compile_ms."""
    path = os.path.join(out, "torch_times.json")
    times = json.load(open(path)) if os.path.exists(path) else {}
    runs = [(n + suffix, cls, mk, half) for n, (cls, mk) in MODELS.items() if available(n)
            for suffix, half in (("", False), ("_fp16", True))]
    for name, cls, make_inputs, half in runs:
        torch.manual_seed(0)
        model = cls().eval().cuda()
        if half:
            model = model.half()
        x = cuda_inputs(make_inputs, half)
        try:
            t0 = time.perf_counter()
            compiled = torch.compile(model)
            with torch.no_grad():
                for _ in range(3):
                    compiled(*x)
                torch.cuda.synchronize()
                build_s = time.perf_counter() - t0
                ms = float(np.median([median_ms(lambda: compiled(*x), 20) for _ in range(rounds)]))
        except Exception as e:  # no Triton, no compiler: leave the column empty
            print(f"{name}: torch.compile failed: {type(e).__name__}: {e}")
            continue
        times.setdefault(name, {})["compile_ms"] = ms
        print(f"{name}: torch.compile {ms:.3f} ms (compiled in {build_s:.1f} s)")
        with open(path, "w") as f:
            json.dump(times, f, indent=1)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    if "--models" in sys.argv:  # a subset: --models gpu_bert,gpu_bert_b8
        keep = sys.argv[sys.argv.index("--models") + 1].split(",")
        for name in list(MODELS):
            if name not in keep:
                del MODELS[name]
    rounds = 1 if "--smoke" in sys.argv else 5
    if "--time" in sys.argv:
        time_torch(out, rounds)
    elif "--time-compile" in sys.argv:
        time_torch_compile(out, rounds)
    else:
        export(out)


if __name__ == "__main__":
    main()
