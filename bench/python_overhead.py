#!/usr/bin/env python3
"""Python-call overhead per `run` on a tiny MLP: kiln.InferenceSession vs
onnxruntime.InferenceSession in the same process, interleaved rounds, median of many calls.

The model (x[B,16] -> MatMul+Add+Relu -> MatMul+Add -> y[B,4]) computes in well under a
microsecond, so a call's time is the API's cost: feed checks and conversion, the native call,
the executor's dispatch and the output arrays. Also timed: each runtime's native session object
without its Python wrapper (kiln._kiln.Session.run; ORT's C.InferenceSession.run), which
splits that cost between the Python layer and the binding + runtime; and run_with_iobinding
with the output bound to a preallocated buffer (written in place: no output array per call).

    python3 bench/python_overhead.py [--calls 2000] [--rounds 7] [--batch 1] [--threads 1]
"""
import argparse
import statistics
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import kiln


def tiny_mlp(rng):
    def init(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["a"]), helper.make_node("Add", ["a", "b1"], ["b"]),
         helper.make_node("Relu", ["b"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["c"]),
         helper.make_node("Add", ["c", "b2"], ["y"])],
        "tiny_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 4])],
        [init("w1", 16, 32), init("b1", 32), init("w2", 32, 4), init("b2", 4)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def time_calls(fn, calls):
    """Per-call times in microseconds."""
    out = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000, help="calls per runtime per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads of both runtimes")
    args = ap.parse_args()

    model = tiny_mlp(np.random.default_rng(0))
    x = np.random.default_rng(1).standard_normal((args.batch, 16)).astype(np.float32)
    feed = {"x": x}

    oso = ort.SessionOptions()
    oso.intra_op_num_threads = args.threads
    oso.inter_op_num_threads = 1
    o = ort.InferenceSession(model, oso, providers=["CPUExecutionProvider"])
    kso = kiln.SessionOptions()
    kso.intra_op_num_threads = args.threads
    k = kiln.InferenceSession(model, kso)
    np.testing.assert_allclose(k.run(None, feed)[0], o.run(None, feed)[0], rtol=1e-5, atol=1e-6)

    ort_native, ort_ro = o._sess, ort.RunOptions()
    kiln_native = k._sess
    # IOBinding: x bound, y written into a preallocated buffer (no output array made per call).
    bindings = {}
    for name, sess in (("kiln", k), ("ORT", o)):
        io, y = sess.io_binding(), np.empty((args.batch, 4), np.float32)
        io.bind_cpu_input("x", x)
        io.bind_output("y", "cpu", 0, np.float32, list(y.shape), y.ctypes.data)
        sess.run_with_iobinding(io)
        bindings[name] = (io, y)
    np.testing.assert_allclose(bindings["kiln"][1], bindings["ORT"][1], rtol=1e-5, atol=1e-6)
    cases = {
        "kiln InferenceSession.run": lambda: k.run(None, feed),
        "ORT  InferenceSession.run": lambda: o.run(None, feed),
        "kiln native _kiln.Session.run": lambda: kiln_native.run(feed, None, None),
        "ORT  native C.InferenceSession.run": lambda: ort_native.run(["y"], feed, ort_ro),
        "kiln run_with_iobinding": lambda: k.run_with_iobinding(bindings["kiln"][0]),
        "ORT  run_with_iobinding": lambda: o.run_with_iobinding(bindings["ORT"][0]),
    }
    times = {name: [] for name in cases}
    for fn in cases.values():  # warm-up (first-run compile, caches)
        time_calls(fn, 200)
    for _ in range(args.rounds):
        for name, fn in cases.items():  # interleaved: every round runs every case
            times[name] += time_calls(fn, args.calls)

    print(f"tiny MLP, batch {args.batch}, {args.threads} intra-op thread(s): "
          f"{args.rounds} interleaved rounds x {args.calls} calls")
    print(f"{'':36s} {'median us':>10s} {'p10':>8s} {'p90':>8s}")
    med = {}
    for name, t in times.items():
        t.sort()
        med[name] = statistics.median(t)
        print(f"{name:36s} {med[name]:10.2f} {t[len(t) // 10]:8.2f} {t[len(t) * 9 // 10]:8.2f}")
    print(f"kiln / ORT per run call: {med['kiln InferenceSession.run'] / med['ORT  InferenceSession.run']:.2f}x")
    print(f"kiln / ORT per run_with_iobinding call: "
          f"{med['kiln run_with_iobinding'] / med['ORT  run_with_iobinding']:.2f}x")


if __name__ == "__main__":
    main()
