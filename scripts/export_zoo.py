#!/usr/bin/env python3
"""Exports the benchmark zoo: 42 architectures beyond bench/peers.py's five, chosen for breadth.

Run by Debian's PyTorch (python3-torch 1.13 + python3-torchvision 0.14, installed by
scripts/install_deps.sh): `/usr/bin/python3 scripts/export_zoo.py`. Random weights (seeded),
eval mode, static shapes, opset 17. Each model is written as `<name>_b<batch>.onnx` with
`<name>_b<batch>_inputs.npz` (seeded random inputs; token ids in range), and skipped when both
files exist. bench/peers.py --zoo runs them against ONNX Runtime and OpenVINO.

Families: torchvision classification (ResNeXt, RegNet, EfficientNet, MobileNetV3, ShuffleNet,
DenseNet, ConvNeXt, ViT, Swin, MNASNet, SqueezeNet, Inception, GoogLeNet), segmentation heads
(DeepLabV3 with dilated convs, FCN, LR-ASPP), video (R3D-18, 3-D convs), transformer encoders of
three widths and a GPT-2-style decoder with a causal mask (written out here with plain Linear /
MatMul / Softmax / LayerNorm, as exporters of HF models emit them), recurrent models (the LSTM
and GRU ops: stacked, bidirectional), 1-D convolution stacks (dilated temporal convs, a strided
audio front end), an MLP-Mixer and a small U-Net with ConvTranspose; and (scripts/zoo_modern.py)
EfficientNetV2-S, a LLaMA-style decoder, a Whisper-style encoder, a wav2vec2-style feature
extractor, a Stable-Diffusion UNet block, a YOLOv5-style detector, a HiFi-GAN vocoder, Conformer
blocks, ESPCN super-resolution, PointNet and a DCGAN generator.

    /usr/bin/python3 scripts/export_zoo.py --out build/zoo [--only a,b] [--batch 1,8] [--list]
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_modern  # noqa: E402

OPSET = 17
SEED = 0


# ---- models written out here ------------------------------------------------------------------

def _torch():
    import torch  # noqa: F401  (imported lazily: --list works without PyTorch)
    return torch


def encoder_model(vocab, hidden, heads, layers, ffn, seq, causal=False):
    """A BERT-style encoder (or, with `causal`, a GPT-2-style decoder: pre-LN, causal mask)."""
    torch = _torch()
    nn = torch.nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.out = nn.Linear(hidden, hidden)
            mask = torch.triu(torch.full((seq, seq), -1e4), diagonal=1)
            self.register_buffer("mask", mask)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            split = lambda t: t.reshape(b, s, heads, hidden // heads).transpose(1, 2)  # noqa: E731
            q, k, v = split(q), split(k), split(v)
            att = q @ k.transpose(-1, -2) / math.sqrt(hidden // heads)
            if causal:
                att = att + self.mask
            y = att.softmax(-1) @ v
            return self.out(y.transpose(1, 2).reshape(b, s, hidden))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.att, self.ln1, self.ln2 = Attention(), nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.ffn = nn.Sequential(nn.Linear(hidden, ffn), nn.GELU(), nn.Linear(ffn, hidden))

        def forward(self, x):
            if causal:  # pre-LN (GPT-2)
                x = x + self.att(self.ln1(x))
                return x + self.ffn(self.ln2(x))
            x = self.ln1(x + self.att(x))  # post-LN (BERT)
            return self.ln2(x + self.ffn(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, hidden), nn.Parameter(torch.randn(seq, hidden) * 0.02)
            self.layers = nn.Sequential(*[Layer() for _ in range(layers)])
            self.ln = nn.LayerNorm(hidden)
            self.head = nn.Linear(hidden, vocab if causal else 2)

        def forward(self, ids):
            x = self.layers(self.tok(ids) + self.pos)
            return self.head(self.ln(x)) if causal else self.head(self.ln(x[:, 0]))

    return Model()


def recurrent_model(kind, vocab_or_feats, hidden, layers, bidirectional, classes, tokens):
    """Embedding (or features) -> nn.LSTM / nn.GRU -> Linear per step: the ONNX LSTM/GRU ops."""
    torch = _torch()
    nn = torch.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            width = hidden if tokens else vocab_or_feats
            self.embed = nn.Embedding(vocab_or_feats, hidden) if tokens else None
            rnn = nn.LSTM if kind == "lstm" else nn.GRU
            self.rnn = rnn(width, hidden, num_layers=layers, bidirectional=bidirectional, batch_first=True)
            self.head = nn.Linear(hidden * (2 if bidirectional else 1), classes)

        def forward(self, x):
            if self.embed is not None:
                x = self.embed(x)
            y, _ = self.rnn(x)
            return self.head(y)

    return Model()


def conv1d_model(kind):
    """A dilated temporal conv stack (TCN) or a strided audio front end (wav2letter-like)."""
    torch = _torch()
    nn = torch.nn
    layers = []
    if kind == "tcn":
        c = 128
        layers += [nn.Conv1d(64, c, 1)]
        for d in (1, 2, 4, 8, 16, 32):
            layers += [nn.Conv1d(c, c, 3, padding=d, dilation=d), nn.BatchNorm1d(c), nn.ReLU()]
        layers += [nn.Conv1d(c, 10, 1)]
    else:
        chans = [1, 64, 128, 128, 256, 256]
        for i in range(5):
            layers += [nn.Conv1d(chans[i], chans[i + 1], 9 if i == 0 else 5, stride=4 if i == 0 else 2,
                                 padding=2), nn.BatchNorm1d(chans[i + 1]), nn.GELU()]
        layers += [nn.Conv1d(256, 32, 1)]
    return nn.Sequential(*layers)


def mixer_model(patch=16, image=224, hidden=512, tokens_mlp=256, channels_mlp=2048, depth=8, classes=1000):
    torch = _torch()
    nn = torch.nn
    n = (image // patch) ** 2

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.tok = nn.Sequential(nn.Linear(n, tokens_mlp), nn.GELU(), nn.Linear(tokens_mlp, n))
            self.ch = nn.Sequential(nn.Linear(hidden, channels_mlp), nn.GELU(), nn.Linear(channels_mlp, hidden))

        def forward(self, x):
            x = x + self.tok(self.ln1(x).transpose(1, 2)).transpose(1, 2)
            return x + self.ch(self.ln2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, hidden, patch, stride=patch)
            self.blocks = nn.Sequential(*[Block() for _ in range(depth)])
            self.ln, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, classes)

        def forward(self, x):
            x = self.stem(x).flatten(2).transpose(1, 2)
            return self.head(self.ln(self.blocks(x)).mean(1))

    return Model()


def unet_model():
    """A small encoder-decoder with three ConvTranspose upsamplings and skip concats."""
    torch = _torch()
    nn = torch.nn

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.e = nn.ModuleList([block(3, 32), block(32, 64), block(64, 128), block(128, 256)])
            self.up = nn.ModuleList([nn.ConvTranspose2d(c, c // 2, 2, stride=2) for c in (256, 128, 64)])
            self.d = nn.ModuleList([block(c, c // 2) for c in (256, 128, 64)])
            self.pool, self.head = nn.MaxPool2d(2), nn.Conv2d(32, 2, 1)

        def forward(self, x):
            skips = []
            for i, enc in enumerate(self.e):
                x = enc(x if i == 0 else self.pool(x))
                skips.append(x)
            for up, dec, skip in zip(self.up, self.d, reversed(skips[:-1])):
                x = dec(torch.cat([up(x), skip], 1))
            return self.head(x)

    return Model()


# ---- the zoo ------------------------------------------------------------------------------------

def _tv(fn_name, **kw):
    def make():
        import torchvision
        return getattr(torchvision.models, fn_name)(weights=None, **kw)
    return make


def _seg(fn_name, **kw):
    def make():
        import torchvision

        class Out(_torch().nn.Module):  # the dict output -> its "out" tensor
            def __init__(self):
                super().__init__()
                self.m = getattr(torchvision.models.segmentation, fn_name)(weights=None, weights_backbone=None, **kw)

            def forward(self, x):
                return self.m(x)["out"]
        return Out()
    return make


def _video(fn_name):
    def make():
        import torchvision
        return getattr(torchvision.models.video, fn_name)(weights=None)
    return make


IMG = ("image", (3, 224, 224), "float")
# name -> (builder, [(input name, per-sample shape, "float" | ("int", high))], what it stresses)
ZOO = {
    "resnext50": (_tv("resnext50_32x4d"), [IMG], "grouped 3x3 convs"),
    "regnety_400mf": (_tv("regnet_y_400mf"), [IMG], "grouped convs, squeeze-and-excitation"),
    "efficientnet_b0": (_tv("efficientnet_b0"), [IMG], "depthwise convs, SE, SiLU"),
    "mobilenetv3_small": (_tv("mobilenet_v3_small"), [IMG], "hard-swish, SE, depthwise"),
    "mobilenetv3_large": (_tv("mobilenet_v3_large"), [IMG], "hard-swish, SE, depthwise"),
    "shufflenetv2": (_tv("shufflenet_v2_x1_0"), [IMG], "channel shuffle (reshape/transpose)"),
    "densenet121": (_tv("densenet121"), [IMG], "concat-heavy blocks"),
    "convnext_tiny": (_tv("convnext_tiny"), [IMG], "7x7 depthwise, LayerNorm over channels"),
    "vit_b16": (_tv("vit_b_16"), [IMG], "attention at hidden 768, 197 tokens"),
    "swin_t": (_tv("swin_t"), [IMG], "windowed attention, rolls, relative bias"),
    "mnasnet": (_tv("mnasnet1_0"), [IMG], "depthwise, 5x5 kernels"),
    "squeezenet": (_tv("squeezenet1_1"), [IMG], "fire modules, concat"),
    "inception_v3": (_tv("inception_v3", aux_logits=False, init_weights=False),
                     [("image", (3, 299, 299), "float")], "asymmetric 1x7/7x1 convs, branchy"),
    "googlenet": (_tv("googlenet", aux_logits=False, init_weights=False), [IMG], "branchy blocks"),
    "wide_resnet50": (_tv("wide_resnet50_2"), [IMG], "wide 3x3 convs"),
    "deeplabv3_mbv3": (_seg("deeplabv3_mobilenet_v3_large", aux_loss=False),
                       [("image", (3, 320, 320), "float")], "dilated convs (ASPP), upsampling"),
    "fcn_resnet50": (_seg("fcn_resnet50", aux_loss=False), [("image", (3, 320, 320), "float")],
                     "dilated ResNet-50 backbone, bilinear Resize"),
    "lraspp_mbv3": (_seg("lraspp_mobilenet_v3_large"), [("image", (3, 320, 320), "float")],
                    "segmentation head, global pooling gate"),
    "r3d_18": (_video("r3d_18"), [("clip", (3, 8, 112, 112), "float")], "3-D convolutions"),
    "bert_small": (lambda: encoder_model(8000, 512, 8, 4, 2048, 128), [("ids", (128,), ("int", 8000))],
                   "encoder, hidden 512"),
    "minilm": (lambda: encoder_model(8000, 384, 12, 6, 1536, 128), [("ids", (128,), ("int", 8000))],
               "encoder, hidden 384, 12 small heads"),
    "bert_wide": (lambda: encoder_model(8000, 1024, 16, 2, 4096, 128), [("ids", (128,), ("int", 8000))],
                  "encoder, hidden 1024"),
    "gpt2_small": (lambda: encoder_model(8000, 512, 8, 4, 2048, 128, causal=True),
                   [("ids", (128,), ("int", 8000))], "decoder, causal mask, pre-LN, LM head"),
    "lstm_tagger": (lambda: recurrent_model("lstm", 5000, 256, 2, False, 20, True),
                    [("ids", (128,), ("int", 5000))], "2-layer LSTM op, hidden 256"),
    "bigru": (lambda: recurrent_model("gru", 5000, 128, 1, True, 20, True), [("ids", (64,), ("int", 5000))],
              "bidirectional GRU op"),
    "bilstm_speech": (lambda: recurrent_model("lstm", 80, 256, 2, True, 40, False),
                      [("feats", (100, 80), "float")], "stacked bidirectional LSTM over features"),
    "tcn": (lambda: conv1d_model("tcn"), [("signal", (64, 1024), "float")], "dilated 1-D convs"),
    "audio_conv1d": (lambda: conv1d_model("audio"), [("wave", (1, 16000), "float")],
                     "strided 1-D convs, GELU"),
    "mixer_s16": (mixer_model, [IMG], "MLP-Mixer: token-mixing transposes, LayerNorm"),
    "unet_small": (unet_model, [("image", (3, 128, 128), "float")], "ConvTranspose, skip concats"),
    # Session 21's families (scripts/zoo_modern.py).
    "efficientnet_v2_s": (_tv("efficientnet_v2_s"), [IMG], "fused MBConv, SiLU, SE"),
    "llama_decoder": (lambda: zoo_modern.llama_decoder(), [("ids", (128,), ("int", 8000))],
                      "RMSNorm, rotary embeddings, SiLU-gated MLP, causal mask"),
    "whisper_encoder": (lambda: zoo_modern.whisper_encoder(), [("mel", (80, 3000), "float")],
                        "strided 1-D convs, attention over 1500 frames"),
    "wav2vec_features": (lambda: zoo_modern.wav2vec_features(), [("wave", (1, 16000), "float")],
                         "GroupNorm over time, strided 1-D convs, GELU"),
    "sd_unet_block": (lambda: zoo_modern.sd_unet_block(), [("latent", (320, 32, 32), "float")],
                      "GroupNorm, SiLU, attention over 1024 tokens, GEGLU"),
    "yolo_nano": (lambda: zoo_modern.yolo_nano(), [("image", (3, 320, 320), "float")],
                  "SiLU, C3 blocks, SPPF max pools, nearest upsampling"),
    "hifigan": (lambda: zoo_modern.hifigan_generator(), [("mel", (80, 64), "float")],
                "ConvTranspose1d upsampling, dilated 1-D convs, LeakyReLU"),
    "conformer": (lambda: zoo_modern.conformer_block(), [("feats", (400, 256), "float")],
                  "GLU, depthwise Conv1d of 31 taps, BatchNorm1d, SiLU, attention"),
    "espcn": (lambda: zoo_modern.espcn(), [("image", (3, 224, 224), "float")], "Tanh, PixelShuffle (DepthToSpace)"),
    "pointnet": (lambda: zoo_modern.pointnet(), [("points", (3, 4096), "float")],
                 "1x1 Conv1d MLPs over points, max over points"),
    "dcgan": (lambda: zoo_modern.dcgan_generator(), [("z", (100, 1, 1), "float")],
              "ConvTranspose2d 4x4 stride 2 stacks, BatchNorm, Tanh"),
}


def model_file(out_dir, name, batch):
    return os.path.join(out_dir, f"{name}_b{batch}.onnx"), os.path.join(out_dir, f"{name}_b{batch}_inputs.npz")


def _randomize_norm_stats(model, torch):
    """BatchNorm running stats away from (0, 1), so folding them is not a no-op."""
    g = torch.Generator().manual_seed(SEED)
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 0.5 + 0.75)


def export(name, batch, out_dir):
    torch = _torch()
    path, inputs_path = model_file(out_dir, name, batch)
    if os.path.exists(path) and os.path.exists(inputs_path):
        return path
    make, inputs, _ = ZOO[name]
    torch.manual_seed(SEED)
    model = make().eval()
    _randomize_norm_stats(model, torch)
    rng = np.random.default_rng(SEED)
    feed = {}
    for in_name, shape, kind in inputs:
        full = (batch, *shape)
        feed[in_name] = (rng.integers(0, kind[1], full).astype(np.int64) if isinstance(kind, tuple)
                         else rng.standard_normal(full).astype(np.float32))
    args = tuple(torch.from_numpy(v) for v in feed.values())
    tmp = path + ".tmp"
    # Not under torch.no_grad(): there, eval-mode nn.MultiheadAttention takes PyTorch 1.13's fused
    # fast path (aten::_native_multi_head_attention), which has no ONNX export.
    torch.onnx.export(model, args, tmp, opset_version=OPSET, input_names=list(feed),
                      output_names=["out"], do_constant_folding=True)
    np.savez(inputs_path, **feed)
    os.replace(tmp, path)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                  "build", "zoo"))
    ap.add_argument("--only", default=None, help="comma-separated names (default: all)")
    ap.add_argument("--batch", default="1", help="comma-separated batch sizes")
    ap.add_argument("--list", action="store_true", help="print the zoo (name, what it stresses)")
    args = ap.parse_args(argv)
    if args.list:
        for name, (_, _, what) in ZOO.items():
            print(f"{name}\t{what}")
        return 0
    names = args.only.split(",") if args.only else list(ZOO)
    unknown = [n for n in names if n not in ZOO]
    if unknown:
        ap.error(f"unknown zoo model(s) {unknown}; known: {', '.join(ZOO)}")
    os.makedirs(args.out, exist_ok=True)
    failed = []
    for name in names:
        for b in (int(x) for x in args.batch.split(",")):
            try:
                print(export(name, b, args.out), flush=True)
            except Exception as e:  # go on with the others; the exit status says it failed
                print(f"export_zoo: {name} batch {b} failed: {type(e).__name__}: {e}", file=sys.stderr)
                failed.append(f"{name}_b{b}")
    if failed:
        print(f"export_zoo: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
