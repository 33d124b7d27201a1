"""Exports a GPT-2-style decoder with past state, written as HF transformers' GPT2Model (3.x) is
(Conv1D = addmm, fused c_attn split, keys transposed, `past` per layer stacked (2, B, heads, P, d),
`present` = stack(key, value), causal mask sliced from a tril buffer by [ns - nd : ns], gelu_new),
random weights, opset 14, so that onnxruntime.transformers.optimizer fuses it into Attention with
past/present and unidirectional=1 as it does HF's. Run by Debian's /usr/bin/python3 (python3-torch):

    gpt2_past_export.py OUT.onnx [HIDDEN HEADS LAYERS]     (default 64 4 2; GPT-2 small: 768 12 12)

Inputs: input_ids (B, S), position_ids (B, S), attention_mask (B, P + S), past_i (2, B, heads, P, d).
Outputs: last_hidden_state, present_i."""
import math
import sys

import torch
from torch import nn

H, HEADS, LAYERS = (int(a) for a in sys.argv[2:5]) if len(sys.argv) > 4 else (64, 4, 2)
VOCAB, MAXPOS = 2000, 1024  # vocab > positions, else the optimizer fuses no EmbedLayerNormalization
D = H // HEADS


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.randn(nf) * 0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(*size_out)


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(MAXPOS, MAXPOS, dtype=torch.uint8)).view(1, 1, MAXPOS, MAXPOS))
        self.register_buffer("masked_bias", torch.tensor(-1e4))
        self.c_attn, self.c_proj = Conv1D(3 * H, H), Conv1D(H, H)

    def _attn(self, q, k, v, attention_mask):
        w = torch.matmul(q, k) / (float(v.size(-1)) ** 0.5)
        nd, ns = w.size(-2), w.size(-1)
        mask = self.bias[:, :, ns - nd:ns, :ns]
        w = torch.where(mask.bool(), w, self.masked_bias.to(w.dtype))
        w = w + attention_mask
        return torch.matmul(nn.functional.softmax(w, dim=-1), v)

    def split_heads(self, x, k=False):
        x = x.view(*(x.size()[:-1] + (HEADS, D)))
        return x.permute(0, 2, 3, 1) if k else x.permute(0, 2, 1, 3)

    def forward(self, x, layer_past, attention_mask):
        query, key, value = self.c_attn(x).split(H, dim=2)
        query, key, value = self.split_heads(query), self.split_heads(key, k=True), self.split_heads(value)
        past_key, past_value = layer_past[0].transpose(-2, -1), layer_past[1]
        key = torch.cat((past_key, key), dim=-1)
        value = torch.cat((past_value, value), dim=-2)
        present = torch.stack((key.transpose(-2, -1), value))
        a = self._attn(query, key, value, attention_mask).permute(0, 2, 1, 3).contiguous()
        a = a.view(*(a.size()[:-2] + (a.size(-2) * a.size(-1),)))
        return self.c_proj(a), present


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(H, eps=1e-5), nn.LayerNorm(H, eps=1e-5)
        self.attn = Attn()
        self.c_fc, self.mlp_proj = Conv1D(4 * H, H), Conv1D(H, 4 * H)

    def forward(self, x, layer_past, attention_mask):
        a, present = self.attn(self.ln_1(x), layer_past, attention_mask)
        x = x + a
        return x + self.mlp_proj(gelu_new(self.c_fc(self.ln_2(x)))), present


class GPT2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, H), nn.Embedding(MAXPOS, H)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(H, eps=1e-5)

    def forward(self, input_ids, position_ids, attention_mask, *past):
        x = self.wte(input_ids) + self.wpe(position_ids)
        am = attention_mask.view(input_ids.size(0), -1)[:, None, None, :].to(x.dtype)
        am = (1.0 - am) * -10000.0
        presents = []
        for block, layer_past in zip(self.h, past):
            x, present = block(x, layer_past, am)
            presents.append(present)
        return (self.ln_f(x), *presents)


torch.manual_seed(0)
model = GPT2().eval()
with torch.no_grad():  # non-trivial layer norms (distinct per layer, so none is shared by dedup)
    for name, p in model.named_parameters():
        if "ln_" in name:
            p.copy_(1.0 + 0.1 * torch.randn_like(p) if name.endswith("weight") else 0.1 * torch.randn_like(p))
B, S, P = 2, 3, 4
ids = torch.randint(0, VOCAB, (B, S))
pos = torch.arange(P, P + S).unsqueeze(0).repeat(B, 1)
mask = torch.ones(B, P + S, dtype=torch.int64)
past = [torch.randn(2, B, HEADS, P, D) for _ in range(LAYERS)]
past_names = [f"past_{i}" for i in range(LAYERS)]
present_names = [f"present_{i}" for i in range(LAYERS)]
dyn = {"input_ids": {0: "batch", 1: "seq"}, "position_ids": {0: "batch", 1: "seq"},
       "attention_mask": {0: "batch", 1: "total_seq"}}
dyn.update({n: {1: "batch", 3: "past_seq"} for n in past_names})
dyn.update({n: {1: "batch", 3: "total_seq"} for n in present_names})
torch.onnx.export(model, (ids, pos, mask, *past), sys.argv[1], opset_version=14,
                  input_names=["input_ids", "position_ids", "attention_mask"] + past_names,
                  output_names=["last_hidden_state"] + present_names, dynamic_axes=dyn)
