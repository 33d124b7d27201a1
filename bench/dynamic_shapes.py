#!/usr/bin/env python3
"""Dynamic shapes on a MiniLM-style encoder: Kiln (one session, its specializations cached)
vs ONNX Runtime in the same process, interleaved.

The model is all-MiniLM-L6-v2's architecture with random weights (6 layers, hidden 384, 12
heads, FFN 1536, vocabulary 30522), batch and sequence left symbolic, built here with
onnx.helper (input_ids and attention_mask, int64 [batch, seq]; output last_hidden_state).
For each batch size and each sequence length, in order:

  first      the first call at that length: Kiln compiles a specialization (with the kernel
             cache as it stands, or --cold-cache: a fresh one, as for a length never seen);
             ORT's first call at the length beside it; "cached": the first call of a second Kiln
             session, every kernel in the on-disk cache by then
  warm       the median of --rounds calls at that shape, Kiln and ORT alternating
  alternate  the steady state of calls cycling through every length (and batch size): the
             median per shape; a Kiln session that held one specialization recompiled on every
             change here, now each call is a warm one

Memory (a child process, Kiln only): RSS after load and after each new shape for one session
holding every shape's specialization, vs one session per shape (what `kiln serve` did per batch
size), with the session's weight and constant bytes.

    python3 bench/dynamic_shapes.py [--smoke] [--batches 1,8] [--lengths 8,16,32,64,128,256]
                                    [--rounds 9] [--threads 2] [--cold-cache]

--smoke: two lengths at batch 1, one round; Kiln's outputs are compared with ORT's (max abs
difference <= 1e-3) and no timing is judged. Needs the kiln Python package (pip install, or
PYTHONPATH at a directory holding kiln/ with its _kiln extension).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

LAYERS, HIDDEN, HEADS, FFN, VOCAB, MAX_POS = 6, 384, 12, 1536, 30522, 512


def minilm_model(path, layers=LAYERS, hidden=HIDDEN, heads=HEADS, ffn=FFN, vocab=VOCAB, seed=0,
                 position_ids_input=False):
    """Writes the encoder to `path` (batch and seq symbolic). position_ids_input: the position
    ids are a third input (int64 [batch, seq], as HF exports with position_ids take them) instead
    of Range(0, Shape(input_ids)[1]) inside the graph (bench/symbolic_shapes.py uses it: the
    symbolic compile does not take that data-dependent shape yet)."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def weight(name, *shape, std=0.05):
        return init(name, (rng.standard_normal(shape) * std).astype(np.float32))

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def linear(x, fi, fo, name):
        return node("Add", [node("MatMul", [x, weight(name + ".w", fi, fo)], name + ".mm"),
                            weight(name + ".b", fo, std=0.02)], name)

    def layer_norm(x, name):
        g = init(name + ".g", rng.uniform(0.8, 1.2, hidden).astype(np.float32))
        b = weight(name + ".beta", hidden, std=0.02)
        return node("LayerNormalization", [x, g, b], name, axis=-1, epsilon=1e-12)

    d = hidden // heads
    init("heads_shape", np.array([0, 0, heads, d], np.int64))
    init("hidden_shape", np.array([0, 0, hidden], np.int64))
    init("sqrt_d", np.array(np.sqrt(d), np.float32))
    init("one", np.array(1.0, np.float32))
    init("neg_big", np.array(-10000.0, np.float32))
    init("half", np.array(0.5, np.float32))
    init("inv_sqrt2", np.array(1 / np.sqrt(2), np.float32))
    init("zero_i", np.array(0, np.int64))
    init("one_i", np.array(1, np.int64))
    init("axes12", np.array([1, 2], np.int64))
    words = node("Gather", [weight("word_emb", vocab, hidden), "input_ids"], "words", axis=0)
    if position_ids_input:
        positions = "position_ids"
    else:
        seq_len = node("Gather", [node("Shape", ["input_ids"], "ids_shape"), "one_i"], "seq_len", axis=0)
        positions = node("Range", ["zero_i", seq_len, "one_i"], "positions")
    pos = node("Gather", [weight("pos_emb", MAX_POS, hidden), positions], "pos", axis=0)
    emb = node("Add", [node("Add", [words, pos], "words_pos"), weight("type_emb", hidden)], "emb")
    h = layer_norm(emb, "emb_ln")
    mask = node("Unsqueeze", [node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT), "axes12"], "mask4")
    bias = node("Mul", [node("Sub", ["one", mask], "inv_mask"), "neg_big"], "mask_bias")  # [b,1,1,s]
    for i in range(layers):
        p = f"l{i}"
        def heads_of(x, perm, name):
            return node("Transpose", [node("Reshape", [x, "heads_shape"], name + ".r")], name, perm=perm)
        q = heads_of(linear(h, hidden, hidden, p + ".q"), [0, 2, 1, 3], p + ".qh")
        k = heads_of(linear(h, hidden, hidden, p + ".k"), [0, 2, 3, 1], p + ".kh")
        v = heads_of(linear(h, hidden, hidden, p + ".v"), [0, 2, 1, 3], p + ".vh")
        scores = node("Add", [node("Div", [node("MatMul", [q, k], p + ".qk"), "sqrt_d"], p + ".scaled"), bias],
                      p + ".scores")
        probs = node("Softmax", [scores], p + ".probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], p + ".ctx")], p + ".ctx_t", perm=[0, 2, 1, 3])
        attn = linear(node("Reshape", [ctx, "hidden_shape"], p + ".ctx_r"), hidden, hidden, p + ".o")
        h1 = layer_norm(node("Add", [attn, h], p + ".res1"), p + ".ln1")
        f = linear(h1, hidden, ffn, p + ".ff1")
        erf = node("Erf", [node("Mul", [f, "inv_sqrt2"], p + ".fs")], p + ".erf")
        gelu = node("Mul", [node("Mul", [f, "half"], p + ".fh"), node("Add", [erf, "one"], p + ".erf1")], p + ".gelu")
        h = layer_norm(node("Add", [linear(gelu, ffn, hidden, p + ".ff2"), h1], p + ".res2"), p + ".ln2")
    node("Identity", [h], "last_hidden_state")
    graph = helper.make_graph(
        nodes, "minilm_dyn",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])] +
        ([helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "seq"])]
         if position_ids_input else []),
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", hidden])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def feed_of(batch, seq, seed=0, vocab=VOCAB):
    rng = np.random.default_rng(seed + 1000 * batch + seq)
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    for b in range(1, batch):  # padded rows, as a batch of sentences of different lengths has
        mask[b, seq - (b * seq) // (2 * batch):] = 0
    return {"input_ids": ids, "attention_mask": mask}


# Every timed call starts after this pause: ONNX Runtime's intra-op threads spin after a run
# (session.intra_op.allow_spinning, on by default) and take the cores from a Kiln call that
# follows at once (2x on a small CNN, bench/real_models.py), which no process running one engine
# sees. Every engine's calls get the same pause.
SETTLE_S = 0.05


def timed(fn):
    time.sleep(SETTLE_S)
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1e3, out


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def kiln_options(kiln, threads, extra=None):
    o = kiln.SessionOptions()
    o.intra_op_num_threads = threads
    for k, v in (extra or {}).items():
        o.add_session_config_entry(k, v)
    return o


def memory_child(args):
    """RSS per added shape: one session with every shape vs one session per shape (dims bound)."""
    import kiln
    shapes = [(b, s) for b in args.batches for s in args.lengths]
    base = rss_mib()
    sess = kiln.InferenceSession(args.model, kiln_options(kiln, args.threads))
    after_load = rss_mib()
    one = []
    for b, s in shapes:
        sess.run(None, feed_of(b, s))
        st = sess.stats()
        one.append({"shape": [b, s], "rss_mib": rss_mib(), "specializations": st.get("specializations"),
                    "constant_bytes": st.get("constant_bytes"), "weight_bytes": st.get("weight_bytes")})
    del sess
    mid = rss_mib()
    many, sessions = [], []
    for b, s in shapes:  # the old server: a session per binding of the dims
        o = kiln_options(kiln, args.threads)
        o.add_free_dimension_override_by_name("batch", b)
        o.add_free_dimension_override_by_name("seq", s)
        sessions.append(kiln.InferenceSession(args.model, o))
        sessions[-1].run(None, feed_of(b, s))
        many.append({"shape": [b, s], "rss_mib": rss_mib()})
    print(json.dumps({"base_mib": base, "after_load_mib": after_load, "one_session": one,
                      "after_drop_mib": mid, "session_per_shape": many}))


def phase_first_and_warm(kiln_sess, ort_sess, shapes, rounds, smoke):
    rows = {}
    for b, s in shapes:
        feed = feed_of(b, s)
        k_first, k_out = timed(lambda: kiln_sess.run(None, feed))
        kiln_sess.wait_for_optimized_kernels()  # a cold cache's tiered compile: warm calls on -O3 kernels
        o_first, o_out = timed(lambda: ort_sess.run(None, feed))
        diff = float(np.max(np.abs(k_out[0] - o_out[0])))
        if smoke and not diff <= 1e-3:
            raise SystemExit(f"batch {b} seq {s}: Kiln differs from ORT by {diff}")
        k_warm, o_warm = [], []
        for _ in range(rounds):
            k_warm.append(timed(lambda: kiln_sess.run(None, feed))[0])
            o_warm.append(timed(lambda: ort_sess.run(None, feed))[0])
        rows[(b, s)] = {"kiln_first": k_first, "ort_first": o_first, "kiln_warm": statistics.median(k_warm),
                        "ort_warm": statistics.median(o_warm), "max_diff": diff}
    return rows


def phase_alternate(kiln_sess, ort_sess, shapes, rounds, rows):
    feeds = {sh: feed_of(*sh) for sh in shapes}
    k_t = {sh: [] for sh in shapes}
    o_t = {sh: [] for sh in shapes}
    for _ in range(rounds):
        for sh in shapes:  # every call changes the shape
            k_t[sh].append(timed(lambda: kiln_sess.run(None, feeds[sh]))[0])
            o_t[sh].append(timed(lambda: ort_sess.run(None, feeds[sh]))[0])
    for sh in shapes:
        rows[sh]["kiln_alt"] = statistics.median(k_t[sh])
        rows[sh]["ort_alt"] = statistics.median(o_t[sh])


def phase_first_cached(kiln, model, threads, extra, shapes, rows):
    """First calls of a second session: every kernel is in the on-disk cache by now, so this is
    a compile without the C compiler (what a one-specialization session paid at every change)."""
    sess = kiln.InferenceSession(model, kiln_options(kiln, threads, extra))
    for sh in shapes:
        rows[sh]["kiln_first_cached"] = timed(lambda: sess.run(None, feed_of(*sh)))[0]


def print_table(rows):
    print(f"{'batch':>5} {'seq':>4} | {'Kiln first':>10} {'cached':>6} {'ORT first':>9} | {'Kiln warm':>9} "
          f"{'ORT warm':>8} {'ratio':>5} | {'Kiln alt':>8} {'ORT alt':>7} {'ratio':>5} {'alt/warm':>8}   (ms)")
    for (b, s), r in rows.items():
        print(f"{b:>5} {s:>4} | {r['kiln_first']:>10.1f} {r['kiln_first_cached']:>6.0f} {r['ort_first']:>9.1f} | "
              f"{r['kiln_warm']:>9.2f} "
              f"{r['ort_warm']:>8.2f} {r['kiln_warm'] / r['ort_warm']:>5.2f} | {r['kiln_alt']:>8.2f} "
              f"{r['ort_alt']:>7.2f} {r['kiln_alt'] / r['ort_alt']:>5.2f} {r['kiln_alt'] / r['kiln_warm']:>8.2f}")
    med = lambda key: statistics.median(r[key] for r in rows.values())  # noqa: E731
    print(f"median ratios over shapes: warm Kiln/ORT {statistics.median(r['kiln_warm'] / r['ort_warm'] for r in rows.values()):.2f}, "
          f"alternating Kiln/ORT {statistics.median(r['kiln_alt'] / r['ort_alt'] for r in rows.values()):.2f}, "
          f"Kiln alternating/warm {statistics.median(r['kiln_alt'] / r['kiln_warm'] for r in rows.values()):.2f}; "
          f"first call Kiln {med('kiln_first'):.0f} ms (kernels cached: {med('kiln_first_cached'):.0f} ms) vs ORT "
          f"{med('ort_first'):.1f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="two lengths, batch 1, one round; compare outputs only")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--lengths", default="8,16,32,64,128,256")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads of both runtimes")
    ap.add_argument("--cold-cache", action="store_true",
                    help="first calls compile every kernel (a fresh KILN_CACHE_DIR)")
    ap.add_argument("--max-specializations", type=int, default=0,
                    help="the Kiln session's bound (0: the default); 1 shows the one-specialization session")
    ap.add_argument("--no-memory", action="store_true", help="skip the memory phase")
    ap.add_argument("--model", default="", help="the model file (default: generated in a temporary directory)")
    ap.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", default="", help="write the figures here")
    args = ap.parse_args()
    args.batches = [int(v) for v in args.batches.split(",")]
    args.lengths = [int(v) for v in args.lengths.split(",")]
    if args.smoke:
        args.batches, args.lengths, args.rounds = [1], [8, 32], 1
    if args.memory_child:
        return memory_child(args)

    tmp = tempfile.TemporaryDirectory(prefix="kiln_dynamic_shapes_")
    if not args.model:
        args.model = os.path.join(tmp.name, "minilm_dyn.onnx")
        minilm_model(args.model)
    if args.cold_cache:
        os.environ["KILN_CACHE_DIR"] = os.path.join(tmp.name, "kernel_cache")
    import kiln
    import onnxruntime as ort

    extra = {"kiln.max_specializations": str(args.max_specializations)} if args.max_specializations else {}
    t_load, ks = timed(lambda: kiln.InferenceSession(args.model, kiln_options(kiln, args.threads, extra)))
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    o_load, osess = timed(lambda: ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"]))
    print(f"MiniLM-style encoder ({LAYERS} layers, hidden {HIDDEN}), {args.threads} threads; load: Kiln "
          f"{t_load:.0f} ms, ORT {o_load:.0f} ms; kernel cache {'cold' if args.cold_cache else 'as it stands'}")
    shapes = [(b, s) for b in args.batches for s in args.lengths]
    rows = phase_first_and_warm(ks, osess, shapes, args.rounds, args.smoke)
    phase_alternate(ks, osess, shapes, max(args.rounds, 3), rows)
    phase_first_cached(kiln, args.model, args.threads, extra, shapes, rows)
    print_table(rows)
    st = ks.stats()
    print(f"Kiln session: {st.get('compiles', '?')} compiles, {st.get('specializations', '?')} specializations held, "
          f"weights {st.get('weight_bytes', 0) / 2**20:.1f} MiB, distinct constants {st.get('constant_bytes', 0) / 2**20:.1f} MiB")
    memory = None
    if not args.no_memory and not args.smoke:
        child = [sys.executable, __file__, "--memory-child", "--model", args.model, "--threads", str(args.threads),
                 "--batches", ",".join(map(str, args.batches)), "--lengths", ",".join(map(str, args.lengths))]
        memory = json.loads(subprocess.run(child, check=True, capture_output=True, text=True).stdout)
        one, many = memory["one_session"], memory["session_per_shape"]
        per_one = (one[-1]["rss_mib"] - one[0]["rss_mib"]) / max(1, len(one) - 1)
        per_many = (many[-1]["rss_mib"] - many[0]["rss_mib"]) / max(1, len(many) - 1)
        print(f"memory: load {memory['after_load_mib'] - memory['base_mib']:.0f} MiB; one session, {len(one)} shapes: "
              f"{one[-1]['rss_mib'] - memory['base_mib']:.0f} MiB ({per_one:.1f} MiB per added shape, "
              f"constants {(one[-1]['constant_bytes'] or 0) / 2**20:.1f} MiB); a session per shape: "
              f"{many[-1]['rss_mib'] - memory['after_drop_mib']:.0f} MiB ({per_many:.1f} MiB per added shape)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": [{"batch": b, "seq": s, **r} for (b, s), r in rows.items()], "stats": st,
                       "memory": memory}, f, indent=1)
    if args.smoke:
        print("smoke: outputs match ONNX Runtime")


if __name__ == "__main__":
    main()
