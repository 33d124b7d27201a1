"""PyTorch references for Kiln's training (run by /usr/bin/python3, which has torch 1.13).

    /usr/bin/python3 tests/training/torch_reference.py OUT_DIR [--models mlp,digits,...]

For each model it builds the network in PyTorch with a fixed seed, exports it to OUT_DIR/<name>
.onnx (float32, logits as the one output) and writes OUT_DIR/<name>.npz:
  x, y                 the batches, stacked: x[k] is batch k's input, y[k] its int64 labels
  param_names          the trained parameters, named as the ONNX initializers are
  grad/<param>         d mean-cross-entropy / d param on batch 0 at the initial weights
  loss0                the loss of batch 0 at the initial weights
  sgd_loss, adam_loss  50-step loss curves (step s trains on batch s % len(x); the loss
                       recorded is the one of step s's forward pass, before its update)
  sgd_lr, sgd_momentum, adam_lr

The references are computed in float64 (the float32 model's weights and inputs widened), so
they carry no float32 rounding of their own: what the test measures is Kiln's error. Models
with BatchNormalization are exported in training mode (else the exporter folds BN into the
convolution); tests/training/onnx_fixup.py turns those nodes back into plain BatchNormalization,
which Kiln's training graph runs with batch statistics, as PyTorch's model.train() does.
"""
import argparse
import copy
import math
import os
import sys

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

STEPS = 50
SGD_LR, SGD_MOMENTUM, ADAM_LR = 0.01, 0.9, 1e-3
DIGITS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models", "digits")


class MLP(nn.Module):
    def __init__(self, d_in=64, hidden=32, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class DigitsCNN(nn.Module):
    """models/digits/digits_cnn.onnx's architecture: two conv-relu-maxpool stages and a Gemm."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(torch.relu(self.conv2(x)), 2, 2)
        return self.fc(torch.flatten(x, 1))


class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.down = None
        if stride != 1 or c_in != c_out:
            self.down = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """ResNet-18 (four stages of two basic blocks). `widths` scales it down for tests; `imagenet_stem`
    is the 7x7/2 convolution and 3x3/2 max-pool of the original (else one 3x3 convolution, for
    32x32 inputs)."""

    def __init__(self, widths=(64, 128, 256, 512), classes=1000, imagenet_stem=True):
        super().__init__()
        w0 = widths[0]
        if imagenet_stem:
            self.stem = nn.Sequential(nn.Conv2d(3, w0, 7, 2, 3, bias=False), nn.BatchNorm2d(w0), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
        else:
            self.stem = nn.Sequential(nn.Conv2d(3, w0, 3, 1, 1, bias=False), nn.BatchNorm2d(w0), nn.ReLU())
        blocks, c = [], w0
        for i, w in enumerate(widths):
            blocks += [BasicBlock(c, w, 1 if i == 0 else 2), BasicBlock(w, w, 1)]
            c = w
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class EncoderLayer(nn.Module):
    """A post-norm transformer encoder layer written out (as nn.TransformerEncoderLayer computes
    it with dropout 0 and GELU): self-attention by MatMul/Softmax, LayerNorm, a GELU MLP."""

    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        b, s, d = x.shape
        h, dh = self.heads, d // self.heads

        def split(t):
            return t.reshape(b, s, h, dh).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = torch.softmax(torch.matmul(q, k.transpose(2, 3)) / math.sqrt(dh), dim=-1)
        a = torch.matmul(att, v).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.o(a))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class Encoder(nn.Module):
    """`layers` encoder layers, mean-pooled over the sequence, then a linear classifier."""

    def __init__(self, d=32, heads=4, ff=64, layers=1, classes=5):
        super().__init__()
        self.layers = nn.Sequential(*(EncoderLayer(d, heads, ff) for _ in range(layers)))
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.layers(x).mean(dim=1))


def _digits(batch, n):
    images = np.load(os.path.join(DIGITS, "test_images.npz"))["image"]
    labels = np.load(os.path.join(DIGITS, "test_labels.npy")).astype(np.int64)
    return images[:batch * n].reshape(n, batch, 1, 8, 8), labels[:batch * n].reshape(n, batch)


def _random(shape, classes, n, seed):
    g = np.random.default_rng(seed)
    x = g.standard_normal((n,) + tuple(shape)).astype(np.float32)
    y = g.integers(0, classes, (n, shape[0])).astype(np.int64)
    return x, y


def _perturb_norms(model):
    """Normalization scales and shifts away from 1 and 0: the exporter merges initializers of
    equal value (every fresh LayerNorm's), which would leave some parameters without a name."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.LayerNorm, nn.BatchNorm2d)):
                m.weight.add_(0.1 * torch.randn_like(m.weight))
                m.bias.add_(0.1 * torch.randn_like(m.bias))
    return model


def build(name, batches=4):
    """(model, x, y) of a named configuration; the test models are small (2 CPU cores),
    the bench_* ones are the sizes bench/train_vs_torch.py times."""
    torch.manual_seed(0)
    model, x, y = _build(name, batches)
    return _perturb_norms(model), x, y


def _build(name, batches):
    if name == "mlp":
        x, y = _digits(16, batches)
        return MLP(), x.reshape(batches, 16, 64), y
    if name == "digits":
        x, y = _digits(16, batches)
        return DigitsCNN(), x, y
    if name == "resnet":
        return ResNet18((8, 16, 16, 32), 10, imagenet_stem=False), *_random((8, 3, 16, 16), 10, batches, 1)
    if name == "transformer":
        return Encoder(32, 4, 64, 1, 5), *_random((4, 8, 32), 5, batches, 2)
    if name == "bench_mlp":
        return MLP(784, 512, 10), *_random((64, 784), 10, batches, 3)
    if name == "bench_digits":
        x, y = _digits(64, batches)
        return DigitsCNN(), x, y
    if name == "bench_resnet18":
        return ResNet18(classes=1000), *_random((16, 3, 112, 112), 1000, batches, 4)
    if name == "bench_bert":
        return Encoder(768, 12, 3072, 2, 2), *_random((8, 128, 768), 2, batches, 5)
    raise SystemExit(f"unknown model '{name}'")


def has_batchnorm(model):
    return any(isinstance(m, nn.BatchNorm2d) for m in model.modules())


def export(model, x, path):
    """Exports with initializers named as the state dict; BN models in training mode (the
    exporter would fold BN into the convolutions otherwise), their state restored afterwards
    (the export runs a forward pass that moves the running statistics)."""
    state = copy.deepcopy(model.state_dict())
    bn = has_batchnorm(model)
    model.train(bn)
    mode = torch.onnx.TrainingMode.TRAINING if bn else torch.onnx.TrainingMode.EVAL
    # torch >= 2.9 exports through dynamo (onnxscript) by default; the TorchScript exporter writes
    # the graphs 1.13 writes (bench/train_vs_torch.py runs this under PyTorch 2.x).
    legacy = {"dynamo": False} if int(torch.__version__.split(".")[0]) >= 2 else {}
    torch.onnx.export(model, torch.from_numpy(x), path, input_names=["input"], output_names=["logits"],
                      opset_version=17, training=mode, do_constant_folding=False, **legacy)
    model.load_state_dict(state)


def loss_and_grads(model, x, y):
    model.zero_grad()
    loss = F.cross_entropy(model(torch.from_numpy(x).double()), torch.from_numpy(y))
    loss.backward()
    return loss.item(), {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()}


def curve(model, x, y, make_opt):
    m = copy.deepcopy(model).double().train()
    opt = make_opt(m.parameters())
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(m(torch.from_numpy(x[s % len(x)]).double()), torch.from_numpy(y[s % len(x)]))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


def reference(name, out_dir):
    model, x, y = build(name)
    export(model, x[0], os.path.join(out_dir, name + ".onnx"))
    wide = copy.deepcopy(model).double().train()
    loss0, grads = loss_and_grads(wide, x[0], y[0])
    sgd_lr, sgd_momentum, adam_lr = SGD_LR, SGD_MOMENTUM, ADAM_LR
    out = {"x": x, "y": y, "param_names": np.array(list(grads)), "loss0": loss0,
           "sgd_lr": sgd_lr, "sgd_momentum": sgd_momentum, "adam_lr": adam_lr}
    out.update({"grad/" + n: g for n, g in grads.items()})
    out["sgd_loss"] = curve(model, x, y, lambda p: torch.optim.SGD(p, lr=sgd_lr, momentum=sgd_momentum))
    out["adam_loss"] = curve(model, x, y, lambda p: torch.optim.Adam(p, lr=adam_lr))
    np.savez(os.path.join(out_dir, name + ".npz"), **out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir")
    p.add_argument("--models", default="mlp,digits,resnet,transformer")
    a = p.parse_args()
    torch.set_num_threads(2)
    os.makedirs(a.out_dir, exist_ok=True)
    for name in a.models.split(","):
        reference(name, a.out_dir)
        print("wrote", name, file=sys.stderr)


if __name__ == "__main__":
    main()
