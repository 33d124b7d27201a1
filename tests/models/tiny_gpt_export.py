"""Exports a 2-layer GPT-2-style decoder (HF GPT2Model's structure: pre-norm blocks, fused c_attn,
causal mask from a tril buffer, gelu_new; random weights) to ONNX, opset 14. Run by Debian's
/usr/bin/python3 (python3-torch): tiny_gpt_export.py OUT.onnx"""
import math
import sys

import torch
from torch import nn

H, HEADS, LAYERS, VOCAB, MAXPOS = 32, 2, 2, 100, 64
def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln_1, s.ln_2 = nn.LayerNorm(H), nn.LayerNorm(H)
        s.c_attn, s.c_proj = nn.Linear(H, 3 * H), nn.Linear(H, H)
        s.c_fc, s.mlp_proj = nn.Linear(H, 4 * H), nn.Linear(4 * H, H)
        s.register_buffer("bias", torch.tril(torch.ones(MAXPOS, MAXPOS, dtype=torch.uint8)).view(1, 1, MAXPOS, MAXPOS))
        s.register_buffer("masked_bias", torch.tensor(-1e4))
    def split(s, t):
        return t.view(t.size(0), t.size(1), HEADS, H // HEADS).permute(0, 2, 1, 3)
    def forward(s, x, am):
        q, k, v = s.c_attn(s.ln_1(x)).split(H, dim=2)
        q, k, v = s.split(q), s.split(k), s.split(v)
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(H // HEADS)
        n = w.size(-2)
        causal = s.bias[:, :, :n, :n].bool()
        w = torch.where(causal, w, s.masked_bias.to(w.dtype))
        w = w + am
        a = torch.matmul(torch.softmax(w, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        a = a.view(a.size(0), a.size(1), H)
        x = x + s.c_proj(a)
        return x + s.mlp_proj(gelu_new(s.c_fc(s.ln_2(x))))
class GPT(nn.Module):
    def __init__(s):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(VOCAB, H), nn.Embedding(MAXPOS, H)
        s.h = nn.ModuleList(Block() for _ in range(LAYERS)); s.ln_f = nn.LayerNorm(H)
    def forward(s, ids, mask):
        pos = torch.arange(ids.size(1)).unsqueeze(0)
        x = s.wte(ids) + s.wpe(pos)
        am = (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0
        for b in s.h: x = b(x, am)
        return s.ln_f(x)
torch.manual_seed(0)
m = GPT().eval()
torch.onnx.export(m, (torch.randint(0, VOCAB, (2, 8)), torch.ones(2, 8, dtype=torch.int64)), sys.argv[1], opset_version=14,
    input_names=["input_ids", "attention_mask"], output_names=["hidden"], dynamic_axes={"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "s"}})
