"""Exports a BERT-style encoder (HF BertModel's structure, random weights) to ONNX, opset 14,
batch and sequence dynamic. Run by Debian's /usr/bin/python3 (python3-torch):
tiny_bert_export.py OUT.onnx [HIDDEN HEADS LAYERS] (default 32 2 2; bench/contrib_bert.py uses larger)."""
import math
import sys

import torch
from torch import nn

H, HEADS, LAYERS = (int(a) for a in sys.argv[2:5]) if len(sys.argv) > 4 else (32, 2, 2)
VOCAB, MAXPOS, S = 600, 512, 8  # vocab > positions, else the optimizer skips EmbedLayerNormalization


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(H, H) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(H, eps=1e-12), nn.LayerNorm(H, eps=1e-12)
        self.up, self.down = nn.Linear(H, 4 * H), nn.Linear(4 * H, H)

    def heads(self, t):
        return t.view(t.size(0), t.size(1), HEADS, H // HEADS).permute(0, 2, 1, 3)

    def forward(self, x, ext_mask):
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(H // HEADS) + ext_mask
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(ctx.size(0), ctx.size(1), H)
        a = self.ln1(self.o(ctx) + x)
        return self.ln2(self.down(nn.functional.gelu(self.up(a))) + a)


class TinyBert(nn.Module):
    def __init__(self):
        super().__init__()
        self.word, self.pos, self.tok = nn.Embedding(VOCAB, H), nn.Embedding(MAXPOS, H), nn.Embedding(2, H)
        self.ln = nn.LayerNorm(H, eps=1e-12)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.register_buffer("position_ids", torch.arange(MAXPOS).unsqueeze(0))

    def forward(self, input_ids, attention_mask, token_type_ids):
        pos = self.position_ids[:, : input_ids.size(1)]
        x = self.ln(self.word(input_ids) + self.tok(token_type_ids) + self.pos(pos))
        ext = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, ext)
        return x


torch.manual_seed(0)
model = TinyBert().eval()
ids = torch.randint(0, VOCAB, (2, S))
mask = torch.ones(2, S, dtype=torch.int64)
types = torch.zeros(2, S, dtype=torch.int64)
torch.onnx.export(model, (ids, mask, types), sys.argv[1], opset_version=14,
                  input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["last_hidden_state"],
                  dynamic_axes={k: {0: "batch", 1: "seq"} for k in ["input_ids", "attention_mask", "token_type_ids"]})
