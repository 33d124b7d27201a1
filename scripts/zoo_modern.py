"""The zoo's newer families, written out with plain PyTorch modules as their reference code does
(imported by scripts/export_zoo.py): a LLaMA-style decoder (RMSNorm, rotary embeddings, a
SiLU-gated MLP), a Whisper-style audio encoder (strided 1-D convs, attention over 1500 frames), a
wav2vec2-style feature extractor (GroupNorm over time, strided 1-D convs), a Stable-Diffusion
UNet block (GroupNorm, SiLU, attention over 32x32 tokens, GEGLU), a YOLOv5-style detector
(SiLU, C3 blocks, SPPF max pools, nearest upsampling, concats), a HiFi-GAN vocoder, Conformer
blocks, ESPCN super-resolution, PointNet and a DCGAN generator."""
from __future__ import annotations

import math


def _nn():
    import torch
    return torch, torch.nn


def llama_decoder(vocab=8000, hidden=512, heads=8, layers=4, ffn=1376, seq=128):
    torch, nn = _nn()
    hd = hidden // heads

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(hidden) + 0.1 * torch.randn(hidden))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w

    def rotate_half(x):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return torch.cat((-x2, x1), dim=-1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden, bias=False) for _ in range(4))
            inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
            freqs = torch.outer(torch.arange(seq).float(), inv)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos", emb.cos())
            self.register_buffer("sin", emb.sin())
            self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1))

        def forward(self, x):
            b, s, _ = x.shape
            split = lambda t: t.reshape(b, s, heads, hd).transpose(1, 2)  # noqa: E731
            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            q = q * self.cos + rotate_half(q) * self.sin
            k = k * self.cos + rotate_half(k) * self.sin
            att = (q @ k.transpose(-1, -2)) / math.sqrt(hd) + self.mask
            y = att.softmax(-1) @ v
            return self.o(y.transpose(1, 2).reshape(b, s, hidden))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2, self.att = RMSNorm(), RMSNorm(), Attention()
            self.gate, self.up = nn.Linear(hidden, ffn, bias=False), nn.Linear(hidden, ffn, bias=False)
            self.down = nn.Linear(ffn, hidden, bias=False)

        def forward(self, x):
            x = x + self.att(self.n1(x))
            h = self.n2(x)
            return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, hidden)
            self.layers = nn.Sequential(*[Layer() for _ in range(layers)])
            self.norm, self.head = RMSNorm(), nn.Linear(hidden, vocab, bias=False)

        def forward(self, ids):
            return self.head(self.norm(self.layers(self.tok(ids))))

    return Model()


def whisper_encoder(mels=80, frames=3000, hidden=384, heads=6, layers=4):
    torch, nn = _nn()
    tokens = frames // 2

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.q, self.k, self.v = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden, bias=False), nn.Linear(hidden, hidden)
            self.o = nn.Linear(hidden, hidden)
            self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

        def forward(self, x):
            b, s, _ = x.shape
            h = self.ln1(x)
            split = lambda t: t.reshape(b, s, heads, hidden // heads).transpose(1, 2)  # noqa: E731
            q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
            y = ((q @ k.transpose(-1, -2)) / math.sqrt(hidden // heads)).softmax(-1) @ v
            x = x + self.o(y.transpose(1, 2).reshape(b, s, hidden))
            return x + self.mlp(self.ln2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv1d(mels, hidden, 3, padding=1)
            self.conv2 = nn.Conv1d(hidden, hidden, 3, stride=2, padding=1)
            self.pos = nn.Parameter(torch.randn(tokens, hidden) * 0.02)
            self.layers = nn.Sequential(*[Layer() for _ in range(layers)])
            self.ln = nn.LayerNorm(hidden)

        def forward(self, mel):
            x = nn.functional.gelu(self.conv2(nn.functional.gelu(self.conv1(mel))))
            return self.ln(self.layers(x.transpose(1, 2) + self.pos))

    return Model()


def wav2vec_features():
    _, nn = _nn()
    layers = [nn.Conv1d(1, 512, 10, stride=5, bias=False), nn.GroupNorm(512, 512), nn.GELU()]
    for k in (3, 3, 3, 3, 2, 2):
        layers += [nn.Conv1d(512, 512, k, stride=2, bias=False), nn.GELU()]
    return nn.Sequential(*layers)


def sd_unet_block(channels=320, heads=8, context_free=True):
    torch, nn = _nn()
    hd = channels // heads

    class ResBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.GroupNorm(32, channels), nn.GroupNorm(32, channels)
            self.c1 = nn.Conv2d(channels, channels, 3, padding=1)
            self.c2 = nn.Conv2d(channels, channels, 3, padding=1)

        def forward(self, x):
            h = self.c1(nn.functional.silu(self.n1(x)))
            return x + self.c2(nn.functional.silu(self.n2(h)))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.GroupNorm(32, channels, eps=1e-6)
            self.proj_in, self.proj_out = nn.Conv2d(channels, channels, 1), nn.Conv2d(channels, channels, 1)
            self.ln1, self.ln2 = nn.LayerNorm(channels), nn.LayerNorm(channels)
            self.q, self.k, self.v = (nn.Linear(channels, channels, bias=False) for _ in range(3))
            self.o = nn.Linear(channels, channels)
            self.geglu = nn.Linear(channels, 8 * channels)
            self.ff_out = nn.Linear(4 * channels, channels)

        def forward(self, x):
            b, c, hh, ww = x.shape
            h = self.proj_in(self.norm(x)).flatten(2).transpose(1, 2)
            n = self.ln1(h)
            split = lambda t: t.reshape(b, hh * ww, heads, hd).transpose(1, 2)  # noqa: E731
            q, k, v = split(self.q(n)), split(self.k(n)), split(self.v(n))
            y = ((q @ k.transpose(-1, -2)) / math.sqrt(hd)).softmax(-1) @ v
            h = h + self.o(y.transpose(1, 2).reshape(b, hh * ww, c))
            a, gate = self.geglu(self.ln2(h)).chunk(2, dim=-1)
            h = h + self.ff_out(a * nn.functional.gelu(gate))
            return x + self.proj_out(h.transpose(1, 2).reshape(b, c, hh, ww))

    return nn.Sequential(ResBlock(), Transformer(), ResBlock())


def yolo_nano(width=16, classes=80):
    torch, nn = _nn()

    def conv(cin, cout, k=1, s=1):
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, (k - 1) // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())

    class Bottleneck(nn.Module):
        def __init__(self, c, shortcut):
            super().__init__()
            self.a, self.b, self.shortcut = conv(c, c), conv(c, c, 3), shortcut

        def forward(self, x):
            y = self.b(self.a(x))
            return x + y if self.shortcut else y

    class C3(nn.Module):
        def __init__(self, cin, cout, n, shortcut=True):
            super().__init__()
            c = cout // 2
            self.a, self.b, self.out = conv(cin, c), conv(cin, c), conv(2 * c, cout)
            self.m = nn.Sequential(*[Bottleneck(c, shortcut) for _ in range(n)])

        def forward(self, x):
            return self.out(torch.cat([self.m(self.a(x)), self.b(x)], 1))

    class SPPF(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a, self.out, self.pool = conv(c, c // 2), conv(2 * c, c), nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.a(x)
            y1 = self.pool(x)
            y2 = self.pool(y1)
            return self.out(torch.cat([x, y1, y2, self.pool(y2)], 1))

    w = width

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = conv(3, w, 6, 2)
            self.d1, self.c1 = conv(w, 2 * w, 3, 2), C3(2 * w, 2 * w, 1)
            self.d2, self.c2 = conv(2 * w, 4 * w, 3, 2), C3(4 * w, 4 * w, 2)
            self.d3, self.c3 = conv(4 * w, 8 * w, 3, 2), C3(8 * w, 8 * w, 3)
            self.d4, self.c4, self.sppf = conv(8 * w, 16 * w, 3, 2), C3(16 * w, 16 * w, 1), SPPF(16 * w)
            self.l1, self.u1 = conv(16 * w, 8 * w), C3(16 * w, 8 * w, 1, False)
            self.l2, self.u2 = conv(8 * w, 4 * w), C3(8 * w, 4 * w, 1, False)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.heads = nn.ModuleList([nn.Conv2d(c, 3 * (5 + classes), 1) for c in (4 * w, 8 * w)])

        def forward(self, x):
            p3 = self.c2(self.d2(self.c1(self.d1(self.stem(x)))))
            p4 = self.c3(self.d3(p3))
            p5 = self.sppf(self.c4(self.d4(p4)))
            t5 = self.l1(p5)
            n4 = self.u1(torch.cat([self.up(t5), p4], 1))
            t4 = self.l2(n4)
            n3 = self.u2(torch.cat([self.up(t4), p3], 1))
            outs = [h(f).flatten(2) for h, f in zip(self.heads, (n3, n4))]
            return torch.cat(outs, 2).sigmoid()

    return Model()


def hifigan_generator(mels=80, base=128):
    """A HiFi-GAN-style vocoder: ConvTranspose1d upsampling (8, 8, 2, 2), each followed by
    residual blocks of dilated 1-D convs (1, 3, 5) with LeakyReLU."""
    torch, nn = _nn()

    class ResBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.convs = nn.ModuleList([nn.Conv1d(c, c, 3, dilation=d, padding=d) for d in (1, 3, 5)])

        def forward(self, x):
            for conv in self.convs:
                x = x + conv(nn.functional.leaky_relu(x, 0.1))
            return x

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.pre = nn.Conv1d(mels, base, 7, padding=3)
            ups, blocks, c = [], [], base
            for r in (8, 8, 2, 2):
                ups.append(nn.ConvTranspose1d(c, c // 2, 2 * r, stride=r, padding=r // 2))
                c //= 2
                blocks.append(ResBlock(c))
            self.ups, self.blocks = nn.ModuleList(ups), nn.ModuleList(blocks)
            self.post = nn.Conv1d(c, 1, 7, padding=3)

        def forward(self, mel):
            x = self.pre(mel)
            for up, block in zip(self.ups, self.blocks):
                x = block(up(nn.functional.leaky_relu(x, 0.1)))
            return torch.tanh(self.post(nn.functional.leaky_relu(x, 0.1)))

    return Model()


def conformer_block(dim=256, heads=4, kernel=31, layers=2, frames=400):
    """Conformer encoder blocks: half-step feed-forwards with SiLU, attention, and the conv
    module (pointwise conv, GLU, depthwise Conv1d of 31 taps, BatchNorm1d, SiLU)."""
    torch, nn = _nn()

    def ff():
        return nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.SiLU(), nn.Linear(4 * dim, dim))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ff1, self.ff2 = ff(), ff()
            self.ln_att, self.ln_conv, self.ln_out = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.o = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.pw1, self.pw2 = nn.Conv1d(dim, 2 * dim, 1), nn.Conv1d(dim, dim, 1)
            self.dw = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=dim)
            self.bn = nn.BatchNorm1d(dim)

        def forward(self, x):
            x = x + 0.5 * self.ff1(x)
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln_att(x)).chunk(3, dim=-1)
            split = lambda t: t.reshape(b, s, heads, dim // heads).transpose(1, 2)  # noqa: E731
            y = ((split(q) @ split(k).transpose(-1, -2)) / math.sqrt(dim // heads)).softmax(-1) @ split(v)
            x = x + self.o(y.transpose(1, 2).reshape(b, s, dim))
            c = self.ln_conv(x).transpose(1, 2)
            c = nn.functional.glu(self.pw1(c), dim=1)
            c = self.pw2(nn.functional.silu(self.bn(self.dw(c))))
            x = x + c.transpose(1, 2)
            return self.ln_out(x + 0.5 * self.ff2(x))

    return nn.Sequential(*[Block() for _ in range(layers)])


def espcn(scale=3, channels=64):
    """ESPCN super-resolution: convs with Tanh, then PixelShuffle (DepthToSpace)."""
    _, nn = _nn()
    return nn.Sequential(nn.Conv2d(3, channels, 5, padding=2), nn.Tanh(), nn.Conv2d(channels, 32, 3, padding=1),
                         nn.Tanh(), nn.Conv2d(32, 3 * scale * scale, 3, padding=1), nn.PixelShuffle(scale))


def pointnet(points=4096, classes=40):
    """PointNet classification: shared 1x1 Conv1d MLPs with BatchNorm and ReLU, a max over the
    points, a classifier MLP."""
    torch, nn = _nn()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            chans = [3, 64, 64, 64, 128, 1024]
            layers = []
            for a, b in zip(chans, chans[1:]):
                layers += [nn.Conv1d(a, b, 1), nn.BatchNorm1d(b), nn.ReLU()]
            self.mlp = nn.Sequential(*layers)
            self.head = nn.Sequential(nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                                      nn.Linear(256, classes))

        def forward(self, pts):
            return self.head(torch.max(self.mlp(pts), 2)[0])

    return Model()


def dcgan_generator(z=100, base=64):
    """DCGAN's generator: ConvTranspose2d 4x4 stride 2 stacks with BatchNorm, ReLU, Tanh."""
    _, nn = _nn()
    layers = [nn.ConvTranspose2d(z, base * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(base * 8), nn.ReLU()]
    for a, b in ((8, 4), (4, 2), (2, 1)):
        layers += [nn.ConvTranspose2d(base * a, base * b, 4, 2, 1, bias=False), nn.BatchNorm2d(base * b), nn.ReLU()]
    layers += [nn.ConvTranspose2d(base, 3, 4, 2, 1, bias=False), nn.Tanh()]
    return nn.Sequential(*layers)
