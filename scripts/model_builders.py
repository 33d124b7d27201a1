"""The test and benchmark networks of scripts/make_models.py, built with EagerGraph (seeded
random weights): an MLP, small CNNs, ResNet-18/50 blocks, MobileNetV2, Inception, two-input and
two-tower nets, models at old opsets, and BERT-style encoders."""
from __future__ import annotations

import numpy as np

from eager_graph import EagerGraph, np_sigmoid, np_softmax, np_softmax_2d


def he(rng, shape):
    fan_in = int(np.prod(shape[1:]))
    return rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)


def conv_bn(g, rng, x, cin, cout, k, stride, relu=True, gamma=(0.5, 1.5), group=1):
    """Conv (no bias) + BatchNormalization with running stats set near the real statistics of
    the eager activations (so the net stays O(1)), perturbed so they are not trivial.
    `relu`: True (Relu), False (none) or "relu6" (Clip(0, 6), how torch exports ReLU6)."""
    p = k // 2
    y = g.conv(x, he(rng, (cout, cin // group, k, k)), None, (stride, stride), (p, p, p, p),
               group)
    act = g.vals[y]
    mu = act.mean(axis=(0, 2, 3))
    sd = act.std(axis=(0, 2, 3)) + 1e-3
    mean = mu + 0.1 * sd * rng.standard_normal(cout)
    var = (sd * rng.uniform(0.8, 1.25, cout)) ** 2
    scale = rng.uniform(*gamma, cout) * rng.choice([-1.0, 1.0], cout, p=[0.1, 0.9])
    bias = 0.2 * rng.standard_normal(cout)
    y = g.bn(y, scale, bias, mean, var)
    if relu == "relu6":
        return g.relu6(y)
    return g.relu(y) if relu else y


def basic_block(g, rng, x, cin, cout, stride):
    """torchvision BasicBlock: conv3x3-bn-relu-conv3x3-bn (+ shortcut) -> relu. The shortcut is
    a strided 1x1 conv + bn when the shape changes."""
    y = conv_bn(g, rng, x, cin, cout, 3, stride)
    y = conv_bn(g, rng, y, cout, cout, 3, 1, relu=False, gamma=(0.3, 0.7))
    sc = x if (stride == 1 and cin == cout) else \
        conv_bn(g, rng, x, cin, cout, 1, stride, relu=False, gamma=(0.3, 0.7))
    return g.relu(g.add(y, sc))


# --------------------------------------------------------------------------------------------
# test models
# --------------------------------------------------------------------------------------------


def build_mlp(rng):
    g = EagerGraph("mlp")
    x = g.input("x", rng.standard_normal((4, 64)).astype(np.float32))
    h = x
    for i, (fi, fo) in enumerate([(64, 128), (128, 64), (64, 10)]):
        h = g.gemm(h, he(rng, (fo, fi)), 0.1 * rng.standard_normal(fo))
        if i < 2:
            h = g.relu(h)
    g.op("Softmax", [h], lambda a: np_softmax(a, 1), out="probs", axis=1)
    g.output("probs")
    return g


def build_small_cnn(rng):
    g = EagerGraph("small_cnn")
    x = g.input("input", rng.standard_normal((2, 3, 32, 32)).astype(np.float32))
    h = g.relu(g.conv(x, he(rng, (16, 3, 3, 3)), 0.1 * rng.standard_normal(16),
                      pads=(1, 1, 1, 1)))
    h = g.maxpool(h, (2, 2), (2, 2))
    h = g.relu(g.conv(h, he(rng, (32, 16, 3, 3)), 0.1 * rng.standard_normal(32),
                      pads=(1, 1, 1, 1)))
    h = g.avgpool(h, (2, 2), (2, 2))
    h = g.flatten(h)
    g.gemm(h, he(rng, (10, 32 * 8 * 8)), 0.1 * rng.standard_normal(10), out="logits")
    g.output("logits")
    return g


def build_resnet_block(rng):
    g = EagerGraph("resnet_block")
    x = g.input("input", rng.standard_normal((1, 3, 64, 64)).astype(np.float32))
    h = conv_bn(g, rng, x, 3, 16, 7, 2)                 # [1,16,32,32]
    h = g.maxpool(h, (3, 3), (2, 2), (1, 1, 1, 1))       # [1,16,16,16]
    h = basic_block(g, rng, h, 16, 16, 1)                # identity shortcut
    h = basic_block(g, rng, h, 16, 32, 2)                # strided 1x1 projection shortcut
    h = g.flatten(g.gap(h))
    g.gemm(h, he(rng, (10, 32)), 0.1 * rng.standard_normal(10), out="logits")
    g.output("logits")
    return g


def build_resnet18(rng):
    g = EagerGraph("resnet18")
    x = g.input("input", rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
    h = conv_bn(g, rng, x, 3, 64, 7, 2)                  # conv1 -> [1,64,112,112]
    h = g.maxpool(h, (3, 3), (2, 2), (1, 1, 1, 1))       # -> [1,64,56,56]
    cin = 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:   # layer1..layer4
        h = basic_block(g, rng, h, cin, cout, stride)
        h = basic_block(g, rng, h, cout, cout, 1)
        cin = cout
    h = g.flatten(g.gap(h))                              # [1,512]
    g.gemm(h, rng.standard_normal((1000, 512)) / np.sqrt(512), 0.01 * rng.standard_normal(1000),
           out="logits")
    g.output("logits")
    return g


def build_two_input_mix(rng):
    """MatMul (batched, broadcasting batch dims), Transpose, Concat, Reshape (constant shape),
    Sub/Div/Mul broadcasting, Clip (opset-11+ inputs), Sigmoid, Tanh, Exp, Identity."""
    g = EagerGraph("two_input_mix")
    a = g.input("a", rng.standard_normal((2, 3, 4, 5)).astype(np.float32))
    b = g.input("b", rng.standard_normal((3, 5, 6)).astype(np.float32))
    m = g.op("MatMul", [a, b], np.matmul)                               # [2,3,4,6]
    s = g.op("Sigmoid", [m], np_sigmoid)
    t = g.op("Tanh", [m], np.tanh)
    c = g.op("Concat", [s, t], lambda p, q: np.concatenate([p, q], 3), axis=3)   # [2,3,4,12]
    shape = g.constant(np.array([2, 12, 12], np.int64), "shape")
    r = g.op("Reshape", [c, shape], lambda p, sh: p.reshape(sh))       # [2,12,12]
    mu = g.init(rng.standard_normal(12) * 0.3, "mu")                    # broadcast over last
    sd = g.init(rng.uniform(0.2, 0.6, (1, 12, 1)), "sd")                # broadcast middle
    z = g.op("Div", [g.op("Sub", [r, mu], np.subtract), sd], np.divide)
    lo = g.constant(np.array(-2.5, np.float32), "lo")
    hi = g.constant(np.array(2.0, np.float32), "hi")
    zc = g.op("Clip", [z, lo, hi], lambda p, l, h: np.clip(p, l, h))
    e = g.op("Exp", [zc], np.exp)
    et = g.op("Transpose", [e], lambda p: p.transpose(0, 2, 1), perm=[0, 2, 1])
    gram = g.op("MatMul", [et, e], np.matmul)                           # [2,12,12]
    scale = g.constant(np.array([0.05], np.float32), "scale")
    g.op("Identity", [g.op("Mul", [gram, scale], np.multiply)], lambda p: p, out="gram")
    # Second output: a 2-D @ 4-D broadcast MatMul on a transposed input.
    at = g.op("Transpose", [a], lambda p: p.transpose(1, 0, 3, 2), perm=[1, 0, 3, 2])  # [3,2,5,4]
    w = g.init(rng.standard_normal((7, 5)), "w")
    g.op("MatMul", [w, at], np.matmul, out="proj")                     # [3,2,7,4]
    g.output("gram")
    g.output("proj")
    return g


def build_old_opsets(rng):
    """Opset 10: Clip-6 with min/max attributes, Softmax-1 (2-D coercion at axis=1 of a 3-D
    tensor: softmax over the 12 trailing elements together), Reshape-5, Gemm-9."""
    g = EagerGraph("old_opsets")
    x = g.input("x", (2.0 * rng.standard_normal((2, 3, 4))).astype(np.float32))
    c = g.op("Clip", [x], lambda p: np.clip(p, -1.5, 1.25), min=-1.5, max=1.25)
    s = g.op("Softmax", [c], lambda p: np_softmax_2d(p, 1), out="softmax2d", axis=1)
    r = g.op("Reshape", [s, g.init(np.array([2, 12], np.int64), "shape")],
             lambda p, sh: p.reshape(sh))
    g.gemm(r, rng.standard_normal((5, 12)), 0.1 * rng.standard_normal(5), out="y")
    g.output("softmax2d")
    g.output("y")
    return g


def build_opset11(rng):
    """Opset 11: Clip-11 with only `min` given, Softmax-11 with a negative axis (2-D coercion
    at axis -2 of a 3-D tensor)."""
    g = EagerGraph("opset11")
    x = g.input("x", (2.0 * rng.standard_normal((2, 3, 4))).astype(np.float32))
    lo = g.init(np.array(-0.75, np.float32), "lo")
    c = g.op("Clip", [x, lo], lambda p, l: np.maximum(p, l))
    g.op("Softmax", [c], lambda p: np_softmax_2d(p, -2), out="y", axis=-2)
    g.output("y")
    return g


# ---- model-zoo nets (benchmarks) and their reduced-size variants (tests) -------------------


def bottleneck(g, rng, x, cin, width, stride):
    """torchvision Bottleneck (v1.5: stride on the 3x3): 1x1-bn-relu, 3x3-bn-relu, 1x1-bn
    (+ shortcut, a strided 1x1 conv + bn when the shape changes) -> relu. Expansion 4."""
    cout = 4 * width
    y = conv_bn(g, rng, x, cin, width, 1, 1)
    y = conv_bn(g, rng, y, width, width, 3, stride)
    y = conv_bn(g, rng, y, width, cout, 1, 1, relu=False, gamma=(0.3, 0.7))
    sc = x if (stride == 1 and cin == cout) else \
        conv_bn(g, rng, x, cin, cout, 1, stride, relu=False, gamma=(0.3, 0.7))
    return g.relu(g.add(y, sc))


def build_resnet50(rng):
    """torchvision resnet50: stem, layers of [3, 4, 6, 3] bottlenecks, GAP, fc 2048->1000."""
    g = EagerGraph("resnet50")
    x = g.input("input", rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
    h = conv_bn(g, rng, x, 3, 64, 7, 2)
    h = g.maxpool(h, (3, 3), (2, 2), (1, 1, 1, 1))
    cin = 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for i in range(blocks):
            h = bottleneck(g, rng, h, cin, width, stride if i == 0 else 1)
            cin = 4 * width
    h = g.flatten(g.gap(h))
    g.gemm(h, he(rng, (1000, 2048)), 0.1 * rng.standard_normal(1000), out="logits")
    g.output("logits")
    return g


# (expansion t, output channels c, repeats n, first stride s) of torchvision's MobileNetV2.
MOBILENETV2_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                        (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def build_mobilenetv2(rng, size=224, name="mobilenetv2"):
    """torchvision mobilenet_v2 (width 1.0): conv-bn-relu6 stem, inverted residuals (1x1 expand
    -> 3x3 depthwise (group = channels) -> 1x1 linear project, residual add when the shape is
    kept), 1x1 conv to 1280, GAP, fc 1280->1000. ReLU6 is Clip(0, 6)."""
    g = EagerGraph(name)
    x = g.input("input", rng.standard_normal((1, 3, size, size)).astype(np.float32))
    h = conv_bn(g, rng, x, 3, 32, 3, 2, relu="relu6")
    cin = 32
    for t, c, n, s in MOBILENETV2_SETTINGS:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = h if t == 1 else conv_bn(g, rng, h, cin, hidden, 1, 1, relu="relu6")
            y = conv_bn(g, rng, y, hidden, hidden, 3, stride, relu="relu6", group=hidden)
            y = conv_bn(g, rng, y, hidden, c, 1, 1, relu=False, gamma=(0.3, 0.7))
            h = g.add(h, y) if (stride == 1 and cin == c) else y
            cin = c
    h = conv_bn(g, rng, h, cin, 1280, 1, 1, relu="relu6")
    h = g.flatten(g.gap(h))
    g.gemm(h, he(rng, (1000, 1280)) * 0.5, 0.1 * rng.standard_normal(1000), out="logits")
    g.output("logits")
    return g


def build_mobilenetv2_96(rng):
    return build_mobilenetv2(rng, 96, "mobilenetv2_96")


def inception_block(g, rng, x, cin, c1, c3r, c3, c5r, c5, cp):
    """GoogLeNet inception: 1x1 | 1x1->3x3 | 1x1->5x5 | maxpool 3x3/1->1x1, concatenated."""
    b1 = conv_bn(g, rng, x, cin, c1, 1, 1)
    b2 = conv_bn(g, rng, conv_bn(g, rng, x, cin, c3r, 1, 1), c3r, c3, 3, 1)
    b3 = conv_bn(g, rng, conv_bn(g, rng, x, cin, c5r, 1, 1), c5r, c5, 5, 1)
    b4 = conv_bn(g, rng, g.maxpool(x, (3, 3), (1, 1), (1, 1, 1, 1)), cin, cp, 1, 1)
    return g.concat([b1, b2, b3, b4], 1), c1 + c3 + c5 + cp


def build_inception(rng):
    """A GoogLeNet-style net on 112x112: stem (7x7/2, maxpool, 1x1, 3x3, maxpool), inception
    3a, 3b, maxpool, 4a (torchvision GoogLeNet widths; conv + bn + relu everywhere), GAP, fc."""
    g = EagerGraph("inception")
    x = g.input("input", rng.standard_normal((1, 3, 112, 112)).astype(np.float32))
    h = conv_bn(g, rng, x, 3, 64, 7, 2)                      # 56
    h = g.maxpool(h, (3, 3), (2, 2), (1, 1, 1, 1))            # 28
    h = conv_bn(g, rng, h, 64, 64, 1, 1)
    h = conv_bn(g, rng, h, 64, 192, 3, 1)
    h = g.maxpool(h, (3, 3), (2, 2), (1, 1, 1, 1))            # 14
    h, c = inception_block(g, rng, h, 192, 64, 96, 128, 16, 32, 32)     # 256
    h, c = inception_block(g, rng, h, c, 128, 128, 192, 32, 96, 64)     # 480
    h = g.maxpool(h, (3, 3), (2, 2), (1, 1, 1, 1))            # 7
    h, c = inception_block(g, rng, h, c, 192, 96, 208, 16, 48, 64)      # 512
    h = g.flatten(g.gap(h))
    g.gemm(h, he(rng, (100, c)), 0.1 * rng.standard_normal(100), out="logits")
    g.output("logits")
    return g


def build_two_tower(rng):
    """Two independent towers joined at the end: a conv tower on an image and an MLP tower on
    a feature vector, Concat + Gemm head. Batch 2."""
    g = EagerGraph("two_tower")
    img = g.input("image", rng.standard_normal((2, 3, 32, 32)).astype(np.float32))
    feat = g.input("features", rng.standard_normal((2, 48)).astype(np.float32))
    a = conv_bn(g, rng, img, 3, 16, 3, 1)
    a = g.maxpool(a, (2, 2), (2, 2))
    a = conv_bn(g, rng, a, 16, 32, 3, 2)
    a = g.flatten(g.gap(a))                                            # [2,32]
    b = g.relu(g.gemm(feat, he(rng, (64, 48)), 0.1 * rng.standard_normal(64)))
    b = g.relu(g.gemm(b, he(rng, (32, 64)), 0.1 * rng.standard_normal(32)))   # [2,32]
    j = g.concat([a, b], 1)
    g.gemm(j, he(rng, (10, 64)), 0.1 * rng.standard_normal(10), out="logits")
    g.output("logits")
    return g


def bert_layer(g, rng, x, seq, hidden, heads, ffn):
    """One BERT encoder layer as torch.onnx exports HF BertLayer at opset 17: Q/K/V linears
    (MatMul + Add), heads split by Reshape + Transpose, scores / sqrt(d), Softmax, context
    Transpose + Reshape, output linear, residual + LayerNormalization, FFN with erf GELU,
    residual + LayerNormalization."""
    d = hidden // heads
    wstd = 1.0 / np.sqrt(hidden)
    def lin(h, fi, fo, std):
        return g.linear(h, rng.standard_normal((fo, fi)) * std, 0.1 * rng.standard_normal(fo))
    def split_heads(h, perm):
        return g.transpose(g.reshape(h, [1, seq, heads, d]), perm)
    q = split_heads(lin(x, hidden, hidden, wstd), (0, 2, 1, 3))          # [1,h,S,d]
    k = split_heads(lin(x, hidden, hidden, wstd), (0, 2, 3, 1))          # [1,h,d,S]
    v = split_heads(lin(x, hidden, hidden, wstd), (0, 2, 1, 3))
    scores = g.op("Div", [g.matmul(q, k), g.init(np.array(np.sqrt(d), np.float32), "sqrt_d")],
                  np.divide)
    probs = g.op("Softmax", [scores], lambda a: np_softmax(a, -1), axis=-1)
    ctx = g.reshape(g.transpose(g.matmul(probs, v), (0, 2, 1, 3)), [1, seq, hidden])
    attn = lin(ctx, hidden, hidden, wstd)
    def ln(h):
        return g.layer_norm(h, rng.uniform(0.5, 1.5, hidden), 0.1 * rng.standard_normal(hidden))
    h1 = ln(g.add(attn, x))
    f = g.gelu_erf(lin(h1, hidden, ffn, wstd))
    f = lin(f, ffn, hidden, 1.0 / np.sqrt(ffn))
    return ln(g.add(f, h1))


def build_bert(rng, name, layers, hidden, heads, ffn, seq, vocab=None):
    """A BERT encoder. With `vocab`, the input is input_ids [1, S] (i64) looked up by Gather in
    word and position embedding tables (+ LayerNormalization); otherwise the input is the
    embeddings f32[1, S, hidden]. Output: last_hidden_state [1, S, hidden]."""
    g = EagerGraph(name)
    if vocab:
        ids = g.input("input_ids", rng.integers(0, vocab, (1, seq)).astype(np.int64))
        take = lambda table, i: table[i]  # noqa: E731
        words = g.op("Gather", [g.init(rng.standard_normal((vocab, hidden)), "word_emb"), ids],
                     take, axis=0)
        pos = g.op("Gather", [g.init(rng.standard_normal((512, hidden)) * 0.5, "pos_emb"),
                              g.init(np.arange(seq, dtype=np.int64)[None, :], "pos_ids")],
                   take, axis=0)
        h = g.layer_norm(g.add(words, pos), rng.uniform(0.5, 1.5, hidden),
                         0.1 * rng.standard_normal(hidden))
    else:
        h = g.input("embeddings", rng.standard_normal((1, seq, hidden)).astype(np.float32))
    for i in range(layers):
        h = bert_layer(g, rng, h, seq, hidden, heads, ffn)
    g.op("Identity", [h], lambda a: a, out="last_hidden_state")
    g.output("last_hidden_state")
    return g


def build_bert_base(rng):
    return build_bert(rng, "bert_base", 12, 768, 12, 3072, 128)


def build_bert_tiny(rng):
    return build_bert(rng, "bert_tiny", 2, 128, 2, 512, 32, vocab=1000)
