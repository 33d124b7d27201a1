"""Post-training static quantization with ONNX Runtime's API shape (docs/quantization.md).

    from kiln.quantization import CalibrationDataReader, QuantType, quantize_static
    # was: from onnxruntime.quantization import ...
    quantize_static("model.onnx", "model.int8.onnx", reader, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)

The reader's batches are written to a temporary directory (one .npz per batch) and `kiln
quantize` (the CLI shipped in the package, or $KILN_BIN) calibrates in Kiln and writes the QDQ
model, so the Python form and the CLI are one code path. The defaults are ORT's (per-tensor
weights, int8 activations, MinMax); options Kiln does not implement raise kiln.NotImplemented
rather than being ignored. quantize_dynamic (int8 MatMul weights, activations quantized at run
time) runs `kiln quantize --dynamic` the same way.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from enum import Enum

import numpy as np

from .._errors import _BY_KIND, Fail, NotImplemented as KilnNotImplemented


class QuantFormat(Enum):
    QOperator = 0
    QDQ = 1


class QuantType(Enum):
    QInt8 = 0
    QUInt8 = 1


class CalibrationMethod(Enum):
    MinMax = 0
    Entropy = 1
    Percentile = 2


class CalibrationDataReader:
    """ORT's reader interface: get_next() returns {input name: array} or None at the end."""

    def get_next(self) -> dict | None:
        raise NotImplementedError

    def __iter__(self):
        return self

    def __next__(self):
        batch = self.get_next()
        if batch is None:
            raise StopIteration
        return batch


_METHODS = {CalibrationMethod.MinMax: "minmax", CalibrationMethod.Percentile: "percentile",
            CalibrationMethod.Entropy: "entropy"}


def _cli():
    path = os.environ.get("KILN_BIN") or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                      "bin", "kiln")
    if not os.access(path, os.X_OK):
        raise Fail(f"the kiln CLI is missing ({path}); reinstall kiln or set KILN_BIN")
    return path


def _unsupported(what):
    raise KilnNotImplemented(f"Unsupported: kiln.quantization.quantize_static: {what} is not implemented")


def _cli_args(quant_format, op_types_to_quantize, per_channel, reduce_range, activation_type, weight_type,
              nodes_to_quantize, nodes_to_exclude, calibrate_method, extra):
    if quant_format != QuantFormat.QDQ:
        _unsupported("QuantFormat.QOperator (Kiln writes QDQ)")
    if reduce_range:
        _unsupported("reduce_range")
    if weight_type != QuantType.QInt8:
        _unsupported("weight_type QUInt8 (weights are int8 symmetric)")
    if nodes_to_quantize:
        _unsupported("nodes_to_quantize (use nodes_to_exclude)")
    if extra.get("WeightSymmetric") is False or extra.get("CalibMovingAverage"):
        _unsupported("extra_options WeightSymmetric=False / CalibMovingAverage")
    args = ["--method", _METHODS[calibrate_method],
            "--activation-type", "uint8" if activation_type == QuantType.QUInt8 else "int8"]
    if not per_channel:
        args.append("--per-tensor")
    if extra.get("ActivationSymmetric"):
        args.append("--symmetric-activations")
    if "CalibPercentile" in extra:
        args += ["--percentile", str(extra["CalibPercentile"])]
    if nodes_to_exclude:
        args += ["--exclude", ",".join(nodes_to_exclude)]
    if op_types_to_quantize:
        args += ["--op-types", ",".join(op_types_to_quantize)]
    return args


def _raise_cli_error(stderr):
    """Turns `kiln`'s "error: <Kind>: message" into the matching kiln exception."""
    line = next((l for l in stderr.splitlines() if l.startswith("error: ")), stderr.strip())
    text = line[len("error: "):] if line.startswith("error: ") else line
    kind = text.split(":", 1)[0]
    raise _BY_KIND.get(kind, Fail)(text)


def quantize_static(model_input, model_output, calibration_data_reader, quant_format=QuantFormat.QDQ,
                    op_types_to_quantize=None, per_channel=False, reduce_range=False,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, nodes_to_quantize=None,
                    nodes_to_exclude=None, use_external_data_format=False,
                    calibrate_method=CalibrationMethod.MinMax, extra_options=None):
    """Calibrates `model_input` on the reader's batches in Kiln and writes the QDQ model to
    `model_output`. Returns Kiln's per-layer report (dict: each quantized tensor's range, scale,
    zero point and SQNR / relative L2 error against fp32; ORT returns None)."""
    extra = dict(extra_options or {})
    args = _cli_args(quant_format, op_types_to_quantize, per_channel, reduce_range, activation_type, weight_type,
                     nodes_to_quantize, nodes_to_exclude, calibrate_method, extra)
    with tempfile.TemporaryDirectory(prefix="kiln-calib-") as tmp:
        count = 0
        for count, batch in enumerate(iter(calibration_data_reader.get_next, None), 1):
            np.savez(os.path.join(tmp, f"batch_{count:06d}.npz"), **{k: np.asarray(v) for k, v in batch.items()})
        if count == 0:
            raise _BY_KIND["InvalidArgument"]("InvalidArgument: the calibration data reader returned no batch")
        report = os.path.join(tmp, "report.json")
        proc = subprocess.run([_cli(), "quantize", os.fspath(model_input), "-o", os.fspath(model_output),
                               "--calibration", tmp, "--report", report, "--quiet"] + args,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            _raise_cli_error(proc.stderr)
        with open(report) as f:
            return json.load(f)


def quantize_dynamic(model_input, model_output, op_types_to_quantize=None, per_channel=False, reduce_range=False,
                     weight_type=QuantType.QInt8, nodes_to_quantize=None, nodes_to_exclude=None,
                     use_external_data_format=False, extra_options=None):
    """Dynamic quantization (`kiln quantize --dynamic`): each MatMul with a constant 2-D weight gets
    int8 weights and its input quantized to u8 at run time (DynamicQuantizeLinear -> MatMulInteger
    -> Cast -> Mul), as ORT's quantize_dynamic writes it. Returns the number of MatMuls rewritten."""
    if reduce_range:
        _unsupported("reduce_range")
    if weight_type != QuantType.QInt8:
        _unsupported("weight_type QUInt8 (weights are int8 symmetric)")
    if nodes_to_quantize:
        _unsupported("nodes_to_quantize (use nodes_to_exclude)")
    if op_types_to_quantize and set(op_types_to_quantize) - {"MatMul"}:
        _unsupported(f"dynamic quantization of {sorted(set(op_types_to_quantize) - {'MatMul'})} (MatMul only)")
    args = [] if per_channel else ["--per-tensor"]
    if nodes_to_exclude:
        args += ["--exclude", ",".join(nodes_to_exclude)]
    proc = subprocess.run([_cli(), "quantize", os.fspath(model_input), "-o", os.fspath(model_output), "--dynamic"]
                          + args, capture_output=True, text=True)
    if proc.returncode != 0:
        _raise_cli_error(proc.stderr)
    return int(proc.stdout.split()[0])


__all__ = ["CalibrationDataReader", "CalibrationMethod", "QuantFormat", "QuantType", "quantize_dynamic",
           "quantize_static"]
