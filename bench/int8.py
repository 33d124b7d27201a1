#!/usr/bin/env python3
"""Int8 (QDQ) inference: Kiln vs ONNX Runtime vs OpenVINO on the same quantized model, and Kiln's
int8 against its own fp32.

The model: a ResNet-50 (torchvision, random weights, exported by `--exporter-python`, Debian's
PyTorch; `--torchvision mobilenet_v2` another) or any fp32 ONNX file (`--model`), quantized here by
ONNX Runtime's `quantize_static` (QDQ format, per-channel s8 weights, u8 activations, MinMax
calibration on `--calib` random inputs) or, with `--quantizer kiln`, by `kiln quantize` with the
same settings (its calibration time printed). Kiln runs the QDQ file as it is (pass/fuse_qdq.h -> int8 kernels, docs/int8.md).

Per round (the order rotates each round, so load from other processes falls on all alike):
Kiln int8, ONNX Runtime int8 (as bench/peers.py runs it, and again with its threads not spinning:
session.intra_op.allow_spinning=0, which a loaded machine favours), OpenVINO int8 (when installed: CPU plugin, LATENCY hint, no
precision hint, so its low-precision transformations run the quantized graph in int8) and Kiln
fp32; each `--runs` timed runs after a warm-up (Kiln: one `kiln run --repeat` process per round,
kernels cached by the first). Medians over all rounds, with 10th percentiles and minima; ratios
Kiln int8 / ORT int8, Kiln int8 / OpenVINO int8, Kiln int8 / Kiln fp32, of the medians and of the
10th percentiles. Kiln's int8 output is compared with ORT's
(both dequantize the same u8 logits: the largest difference in steps of the output scale).

    /work/peers-venv/bin/python bench/int8.py --threads 2 --rounds 5     # ResNet-50
    /work/peers-venv/bin/python bench/int8.py --quantizer kiln --calib 100   # quantized by `kiln quantize`
    /work/peers-venv/bin/python bench/int8.py --quantizer kiln --torchvision mobilenet_v2
    /work/peers-venv/bin/python bench/int8.py --model build/models/bert_base.onnx --quantizer kiln-dynamic
    /work/peers-venv/bin/python bench/int8.py --model build/models/bert_base.onnx --calib 4 --kiln-before OLD/kiln  # static QDQ BERT
    python3 bench/int8.py --smoke      # CI: a small conv net quantized, Kiln vs ORT once, no timing
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import Kiln, OnnxRuntime  # noqa: E402

EXPORT_TORCHVISION = """
import sys, torch, torchvision
m = getattr(torchvision.models, sys.argv[2])().eval()
torch.onnx.export(m, torch.randn(1, 3, 224, 224), sys.argv[1], opset_version=13,
                  input_names=["input"], output_names=["logits"])
"""


def small_net(path):
    """A conv net with a stem, a max pool and a residual block (the smoke model)."""
    rng = np.random.default_rng(7)
    nodes, inits = [], []

    def conv(name, x, cin, cout, k, s, p, relu=True):
        w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, name + "_w"),
                      numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), name + "_b")])
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], kernel_shape=[k, k],
                                      strides=[s, s], pads=[p] * 4))
        if not relu:
            return name
        nodes.append(helper.make_node("Relu", [name], [name + "_r"]))
        return name + "_r"

    a = conv("stem", "input", 3, 32, 7, 2, 3)
    nodes.append(helper.make_node("MaxPool", [a], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
    b = conv("c1", "pool", 32, 64, 3, 1, 1)
    c = conv("c2", b, 64, 64, 1, 1, 0, relu=False)
    nodes += [helper.make_node("Add", [c, b], ["sum"]), helper.make_node("Relu", ["sum"], ["logits"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 64, 64])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def kiln_quantize(kiln, f32, out, shape, calib, work_dir, method):
    """`kiln quantize` on the same random calibration inputs quantize() gives ORT; returns seconds."""
    import time
    rng = np.random.default_rng(0)
    name = onnx.load(f32, load_external_data=False).graph.input[0].name
    data = os.path.join(work_dir, "calib.npz")
    np.savez(data, **{name: np.stack([rng.standard_normal(shape).astype(np.float32) for _ in range(calib)])})
    t0 = time.perf_counter()
    proc = subprocess.run([kiln, "quantize", f32, "-o", out, "--calibration", data, "--method", method,
                           "--no-error-report", "-q"], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"kiln quantize failed:\n{proc.stderr}")
    print(f"kiln quantize ({method}, {calib} calibration inputs): {seconds:.1f} s")
    return seconds


def quantize(f32, out, shape, calib):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    rng = np.random.default_rng(0)
    name = onnx.load(f32, load_external_data=False).graph.input[0].name

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(calib)])

        def get_next(self):
            return next(self.it, None)

    quantize_static(f32, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return name


def quantize_dynamic(kiln, quantizer, f32, out):
    """MatMul weights int8 per tensor (ORT) / per column (Kiln), activations quantized at run time."""
    if quantizer == "kiln-dynamic":
        proc = subprocess.run([kiln, "quantize", f32, "-o", out, "--dynamic", "-q"], capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"kiln quantize --dynamic failed:\n{proc.stderr}")
    elif not os.path.exists(out):
        from onnxruntime.quantization import QuantType
        from onnxruntime.quantization import quantize_dynamic as ort_quantize_dynamic
        ort_quantize_dynamic(f32, out, weight_type=QuantType.QInt8)


class OrtNoSpin(OnnxRuntime):
    """ONNX Runtime with its intra-op threads not spinning: on a machine loaded by other
    processes a spinning worker that loses its core stalls every parallel region (ORT's median
    was 5-7x its unloaded figure here, Kiln's and OpenVINO's 2-3x)."""

    def __init__(self, model, feed, threads):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        self.feed = feed
        self.names = [o.name for o in self.sess.get_outputs()]
        self.outputs = dict(zip(self.names, self.sess.run(self.names, feed)))


class OpenVinoInt8:
    name = "openvino"

    def __init__(self, model, feed, threads):
        import openvino as ov
        compiled = ov.Core().compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY",
                                                           "INFERENCE_NUM_THREADS": threads})
        self.request = compiled.create_infer_request()
        self.feed = feed
        self.request.infer(feed, share_inputs=True)

    def timed_runs(self, repeat, names=None):
        import time
        self.request.infer(self.feed, share_inputs=True)
        ms = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            self.request.infer(self.feed, share_inputs=True)
            ms.append((time.perf_counter() - t0) * 1e3)
        return ms


def steps_off(kiln_out, ort_out, q_model):
    """The largest |Kiln - ORT| of the dequantized output in steps of its scale."""
    g = onnx.load(q_model, load_external_data=False).graph
    out = g.output[0].name
    dq = next((n for n in g.node if n.output[0] == out and n.op_type == "DequantizeLinear"), None)
    scale = 1.0
    if dq is not None:
        scale = float(next(numpy_helper.to_array(t) for t in g.initializer if t.name == dq.input[1]))
    d = np.abs(kiln_out.astype(np.float64) - ort_out.astype(np.float64)) / scale
    return float(np.rint(d).max()), float((np.rint(d) > 0).mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="an fp32 ONNX model (default: torchvision ResNet-50, exported)")
    ap.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "kiln-bench-int8"))
    ap.add_argument("--exporter-python", default="/usr/bin/python3", help="a Python with torch + torchvision")
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN", "build/bin/kiln"))
    ap.add_argument("--kiln-before", help="another kiln binary (e.g. main's build), run on the int8 file as one more "
                                           "engine of the interleaved rounds: before / after in the same run")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--calib", type=int, default=8, help="calibration inputs (random)")
    ap.add_argument("--quantizer", choices=["ort", "kiln", "ort-dynamic", "kiln-dynamic"], default="ort",
                    help="who writes the QDQ model: ONNX Runtime's quantize_static or `kiln quantize`; "
                         "*-dynamic: dynamic quantization (quantize_dynamic / `kiln quantize --dynamic`)")
    ap.add_argument("--method", default="minmax", help="calibration method of --quantizer kiln")
    ap.add_argument("--torchvision", default="resnet50", help="the torchvision model exported when --model is not given")
    ap.add_argument("--smoke", action="store_true", help="a small net, one run each, outputs compared, no timing")
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    f32 = args.model
    if args.smoke:
        f32 = os.path.join(args.work_dir, "small_f32.onnx")
        small_net(f32)
    elif f32 is None:
        f32 = os.path.join(args.work_dir, f"{args.torchvision}_f32.onnx")
        if not os.path.exists(f32):
            subprocess.run([args.exporter_python, "-c", EXPORT_TORCHVISION, f32, args.torchvision], check=True)
    shape = [d.dim_value or 1 for d in onnx.load(f32, load_external_data=False).graph.input[0].type.tensor_type.shape.dim]
    q = os.path.splitext(os.path.join(args.work_dir, os.path.basename(f32)))[0] + f".{args.quantizer}.qdq.onnx"
    if args.quantizer == "kiln":
        kiln_quantize(args.kiln, f32, q, shape, args.calib, args.work_dir, args.method)
    elif args.quantizer.endswith("-dynamic"):
        quantize_dynamic(args.kiln, args.quantizer, f32, q)
    elif not os.path.exists(q) or args.smoke:
        quantize(f32, q, shape, args.calib)
    name = onnx.load(q, load_external_data=False).graph.input[0].name
    feed = {name: np.random.default_rng(1).standard_normal(shape).astype(np.float32)}
    inputs = os.path.join(args.work_dir, "inputs.npz")
    np.savez(inputs, **feed)
    cache = os.environ.get("KILN_CACHE_DIR", os.path.expanduser("~/.cache/kiln"))

    kiln_q = Kiln(args.kiln, q, inputs, args.threads, None, cache)
    kiln_f = Kiln(args.kiln, f32, inputs, args.threads, None, cache)
    ort_q = OnnxRuntime(q, feed, args.threads)
    out_name = ort_q.names[0]
    kiln_q.timed_runs(1, [out_name])  # compiles and keeps the outputs
    worst, frac = steps_off(kiln_q.outputs[out_name], ort_q.outputs[out_name], q)
    if args.quantizer.endswith("-dynamic"):  # a float output: its largest difference, relative
        ref = ort_q.outputs[out_name].astype(np.float64)
        rel = np.abs(kiln_q.outputs[out_name] - ref).max() / max(np.abs(ref).max(), 1e-30)
        print(f"int8 output vs ONNX Runtime: largest difference {rel:.2e} of the largest |output|")
        worst = 0 if rel < 1e-2 else worst
    else:
        print(f"int8 output vs ONNX Runtime: at most {worst:g} step(s) off, {frac:.1%} of the elements off")
    if worst > 1:  # in a deep net a 1-step rounding difference at a half can grow layer by layer
        if args.smoke:
            sys.exit(f"MISMATCH: Kiln's int8 output is {worst:g} steps from ONNX Runtime's")
        print(f"WARNING: Kiln's int8 output is {worst:g} steps from ONNX Runtime's (timing anyway)")
    kernels = subprocess.run([args.kiln, "inspect", q, "--kernels"], capture_output=True, text=True).stdout
    fused = kernels.count("Add+QuantizeLinear") - kernels.count("[kiln_qadd]")  # residual adds in their convs
    print(f"Kiln int8 kernels: {kernels.count('[dnnl_qconv]')} dnnl_qconv ({fused} with the residual add fused), "
          f"{kernels.count('[kiln_qadd]')} kiln_qadd, "
          f"{kernels.count('[dnnl_qmatmul]')} dnnl_qmatmul, {kernels.count('[dnnl_dqmatmul]')} dnnl_dqmatmul, "
          f"{kernels.count('QLinearConv') - kernels.count('[dnnl_qconv]')} generated QLinearConv")
    if args.smoke:
        if "[dnnl_qconv]" not in kernels and "(oneDNN kernels)" in subprocess.run(
                [args.kiln, "--version"], capture_output=True, text=True).stdout:
            sys.exit("the QDQ convs did not become int8 kernels")
        return
    engines = [("kiln int8", kiln_q), ("ort int8", ort_q), ("ort int8 nospin", OrtNoSpin(q, feed, args.threads)),
               ("kiln fp32", kiln_f)]
    try:
        engines.insert(3, ("openvino int8", OpenVinoInt8(q, feed, args.threads)))
    except Exception as e:  # noqa: BLE001 - not installed, or it cannot load the model
        print(f"OpenVINO: not measured ({str(e).splitlines()[0][:120] if str(e) else type(e).__name__})")
    if args.kiln_before:
        before = Kiln(args.kiln_before, q, inputs, args.threads, None, cache)
        before.timed_runs(1)  # its kernels compiled outside the timed rounds
        engines.append(("kiln int8 before", before))
    kiln_f.timed_runs(1)  # compile the fp32 kernels outside the timed rounds
    ms = {n: [] for n, _ in engines}
    for r in range(args.rounds):
        k = r % len(engines)
        for n, e in engines[k:] + engines[:k]:
            ms[n] += e.timed_runs(args.runs)
    med = {n: statistics.median(v) for n, v in ms.items()}
    # The 10th percentile beside the median: on a machine loaded by other processes it moves far
    # less than the median (a run that kept its cores), so the ratios are printed for both.
    p10 = {n: float(np.percentile(v, 10)) for n, v in ms.items()}
    print(f"\n{os.path.basename(q)}, {args.threads} thread(s), {args.rounds} rounds x {args.runs} runs, "
          f"medians (10th percentiles, minima):")
    for n, v in med.items():
        print(f"  {n:16s} {v:8.2f} ms  ({p10[n]:.2f}, {min(ms[n]):.2f})")

    def ratio(label, a, b):
        print(f"  {label:27s} {med[a] / med[b]:.2f}  ({p10[a] / p10[b]:.2f})")

    ratio("kiln int8 / ort int8", "kiln int8", "ort int8")
    ratio("kiln int8 / ort int8 nospin", "kiln int8", "ort int8 nospin")
    if "openvino int8" in med:
        ratio("kiln int8 / openvino int8", "kiln int8", "openvino int8")
    ratio("kiln int8 / kiln fp32", "kiln int8", "kiln fp32")
    if "kiln int8 before" in med:
        ratio("kiln int8 / before", "kiln int8", "kiln int8 before")

if __name__ == "__main__":
    main()
