#!/usr/bin/env python3
"""Prints the digits CNN's predictions next to the true labels, and its accuracy.

    python3 scripts/digits_report.py OUTPUT_DIR [--labels models/digits/test_labels.npy]

OUTPUT_DIR is the --output-dir of `kiln run models/digits/digits_cnn.onnx ...`; this reads
OUTPUT_DIR/digit.npy (int64 [N]). Pure numpy.
"""
import argparse
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def report(pred, labels, show=20):
    """Returns the report text for predicted digits `pred` against `labels`."""
    pred = np.asarray(pred).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    if pred.shape != labels.shape:
        raise ValueError(f"expected {labels.shape[0]} predictions (one per label), "
                         f"got {pred.shape[0]}")
    lines = ["  #  predicted  true"]
    for i in range(min(show, len(pred))):
        mark = "" if pred[i] == labels[i] else "  <- wrong"
        lines.append(f"{i:3d}  {int(pred[i]):9d}  {int(labels[i]):4d}{mark}")
    correct = int((pred == labels).sum())
    acc = 100.0 * correct / len(labels) if len(labels) else 0.0
    lines.append(f"accuracy: {acc:.1f}% ({correct}/{len(labels)})")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description="digits CNN prediction report")
    ap.add_argument("output_dir", help="the --output-dir given to `kiln run`")
    ap.add_argument("--labels", default=os.path.join(REPO, "models", "digits", "test_labels.npy"))
    ap.add_argument("--show", type=int, default=20, help="how many predictions to list")
    args = ap.parse_args(argv)
    digit_path = os.path.join(args.output_dir, "digit.npy")
    for path in (digit_path, args.labels):
        if not os.path.exists(path):
            print(f"error: file not found: {path}", file=sys.stderr)
            return 1
    try:
        print(report(np.load(digit_path), np.load(args.labels), args.show))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
