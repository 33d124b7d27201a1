"""PyTorch reference for synchronized BatchNorm in data-parallel training (run by /usr/bin/python3,
which has torch 1.13; test_sync_batch_norm.py calls it).

    /usr/bin/python3 tests/training/sync_bn_reference.py IN.npz OUT.npz

One process trains the conv -> BatchNorm -> ReLU -> global average pool -> linear model of
IN.npz on each step's WHOLE global batch (x[s] reshaped to [ranks * rows, ...]) with plain SGD,
in float64, torch.nn.BatchNorm2d in training mode: what the ranks with synchronized statistics
must reproduce. OUT.npz holds the parameters after each step (<name>[s]) under their ONNX
initializer names, the losses, and the running statistics after each step. The running
statistics follow ONNX BatchNormalization, as Kiln does in every mode: running = running *
momentum + batch * (1 - momentum) with the batch's population variance (PyTorch's own
running_var takes the unbiased one, so it is computed here from the BatchNorm's input).
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F


def main(src, dst):
    d = np.load(src)
    p = {k: torch.tensor(d[k], dtype=torch.float64, requires_grad=True) for k in ("W1", "b1", "gamma", "beta", "W2", "b2")}
    rm, rv = d["rmean"].astype(np.float64), d["rvar"].astype(np.float64)
    momentum, eps, lr = float(d["momentum"]), float(d["eps"]), float(d["lr"])
    bn = torch.nn.BatchNorm2d(p["gamma"].shape[0], eps=eps, momentum=1 - momentum, dtype=torch.float64)
    bn.train()
    out = {k: [] for k in list(p) + ["rmean", "rvar", "loss"]}
    for s in range(d["x"].shape[0]):
        x = torch.tensor(d["x"][s].reshape(-1, *d["x"].shape[3:]), dtype=torch.float64)
        y = torch.tensor(d["y"][s].reshape(-1), dtype=torch.int64)
        h = F.conv2d(x, p["W1"], p["b1"], padding=1)
        hn = h.detach().numpy()
        rm = rm * momentum + hn.mean(axis=(0, 2, 3)) * (1 - momentum)
        rv = rv * momentum + hn.var(axis=(0, 2, 3)) * (1 - momentum)
        bn.weight, bn.bias = torch.nn.Parameter(p["gamma"]), torch.nn.Parameter(p["beta"])
        a = F.relu(bn(h)).mean(dim=(2, 3))
        loss = F.cross_entropy(a @ p["W2"].T + p["b2"], y)
        grads = torch.autograd.grad(loss, [bn.weight, bn.bias] + [p[k] for k in ("W1", "b1", "W2", "b2")])
        named = dict(zip(["gamma", "beta", "W1", "b1", "W2", "b2"], grads))
        with torch.no_grad():
            p = {k: (v - lr * named[k]).detach().requires_grad_(True) for k, v in p.items()}
        for k, v in p.items():
            out[k].append(v.detach().numpy().copy())
        out["rmean"].append(rm.copy())
        out["rvar"].append(rv.copy())
        out["loss"].append(float(loss))
    np.savez(dst, **{k: np.array(v) for k, v in out.items()})


if __name__ == "__main__":
    main(*sys.argv[1:3])
