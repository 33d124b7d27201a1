#!/usr/bin/env python3
"""Per-node minima of one zoo model: Kiln's kernels, ONNX Runtime's nodes and OpenVINO's layers.

Each engine runs the model `--repeat` times at `--threads` threads with its own profiler on
(Kiln `--profile`, ORT `enable_profiling`, OpenVINO `PERF_COUNT`), and every node's minimum over
those runs is printed, largest first, with the sum of the minima: the time each node takes when
it has its cores, which a loaded machine moves far less than a whole run's time. Node names
differ between engines (ORT's fused nodes are named after their last output, OpenVINO's after
the ONNX node with `/WithoutBiases`), so the lists are side by side, not joined.

    /work/peers-venv/bin/python bench/node_minima.py --model squeezenet [--kiln build/bin/kiln]
        [--zoo-dir /work/zoo] [--batch 1] [--threads 1] [--repeat 200] [--top 30] [--engines kiln,ort,ov]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_ab import kernel_events  # noqa: E402


def kiln_minima(kiln: str, model: str, inputs: str, threads: int, repeat: int) -> dict[str, tuple[float, str]]:
    """Microseconds per step: (minimum, kernel name and node)."""
    out: dict[str, tuple[float, str]] = {}
    for e in kernel_events(kiln, model, inputs, threads, repeat):
        key = str(e["args"]["step"])
        label = f"{e['name']}  {e['args'].get('node', '')}"
        out[key] = (min(out.get(key, (float("inf"), ""))[0], e["dur"]), label)
    return out


def ort_minima(model: str, feeds: dict, threads: int, repeat: int) -> dict[str, tuple[float, str]]:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.gettempdir(), "node_minima_ort")
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    for _ in range(repeat + 1):
        sess.run(None, feeds)
    path = sess.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.unlink(path)
    out: dict[str, tuple[float, str]] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            node = e["name"][: -len("_kernel_time")]
            label = f"{e['args'].get('op_name', '')}  {node}"
            out[node] = (min(out.get(node, (float("inf"), ""))[0], float(e["dur"])), label)
    return out


def ov_minima(model: str, feeds: dict, threads: int, repeat: int) -> dict[str, tuple[float, str]]:
    import openvino as ov
    config = {"PERF_COUNT": "YES", "INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
              "INFERENCE_PRECISION_HINT": "f32"}
    request = ov.Core().compile_model(model, "CPU", config).create_infer_request()
    request.infer(feeds)
    out: dict[str, tuple[float, str]] = {}
    for _ in range(repeat):
        request.infer(feeds)
        for p in request.profiling_info:
            if p.status != p.Status.EXECUTED:
                continue
            us = p.real_time.total_seconds() * 1e6
            label = f"{p.node_type} {p.exec_type}  {p.node_name}"
            out[p.node_name] = (min(out.get(p.node_name, (float("inf"), ""))[0], us), label)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="zoo name (ZOO/<name>_b<batch>.onnx and its _inputs.npz)")
    ap.add_argument("--batch", type=int, default=1, help="the export's batch")
    ap.add_argument("--kiln", default="build/bin/kiln")
    ap.add_argument("--zoo-dir", default="/work/zoo")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--engines", default="kiln,ort,ov")
    args = ap.parse_args()
    model = os.path.join(args.zoo_dir, f"{args.model}_b{args.batch}.onnx")
    inputs = os.path.join(args.zoo_dir, f"{args.model}_b{args.batch}_inputs.npz")
    npz = np.load(inputs)
    feeds = {k: npz[k] for k in npz.files}
    engines = args.engines.split(",")
    for engine in engines:
        if engine not in ("kiln", "ort", "ov"):
            sys.exit(f"--engines: unknown engine '{engine}' (expected kiln, ort or ov)")
    runs = collections.OrderedDict()
    for engine in engines:
        if engine == "kiln":
            runs["Kiln"] = kiln_minima(args.kiln, model, inputs, args.threads, args.repeat)
        elif engine == "ort":
            runs["ONNX Runtime"] = ort_minima(model, feeds, args.threads, args.repeat)
        else:
            runs["OpenVINO"] = ov_minima(model, feeds, args.threads, args.repeat)
    for name, minima in runs.items():
        total = sum(us for us, _ in minima.values())
        print(f"== {name}, {args.model}, {args.threads} thread(s): sum of {len(minima)} node minima {total:.0f} us")
        for us, label in sorted(minima.values(), key=lambda v: -v[0])[: args.top]:
            print(f"{us:10.1f}  {label}")


if __name__ == "__main__":
    main()
