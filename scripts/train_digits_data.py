#!/usr/bin/env python3
"""Data, initial model and held-out evaluation of scripts/train_digits.sh.

`prepare OUT_DIR` writes what it trains on:

    train.npz   image f32 [1437, 1, 8, 8], labels i64 [1437]
    test.npz    image f32 [360, 1, 8, 8],  labels i64 [360]: models/digits' held-out images
    init.onnx   models/digits/digits_cnn.onnx's architecture with He-initialized weights (seeded)
                and the logits as its first output (the cross-entropy loss reads them)

The split is models/digits/README.md's: scikit-learn's load_digits, pixel / 16, stratified
train_test_split(test_size=360, random_state=0); the test set is checked to equal
models/digits/test_images.npz and test_labels.npy.

`evaluate MODEL.onnx TEST.npz` runs the trained model under ONNX Runtime (an engine independent
of Kiln), prints its held-out accuracy and exits 1 if it is below --min-accuracy.

    python3 scripts/train_digits_data.py prepare OUT_DIR [--seed 0]
    python3 scripts/train_digits_data.py evaluate MODEL.onnx TEST.npz [--min-accuracy 0.97]
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIGITS = os.path.join(REPO, "models", "digits")


def split():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None, :, :]
    y = d.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=360, stratify=y, random_state=0)
    ref_x = np.load(os.path.join(DIGITS, "test_images.npz"))["image"]
    ref_y = np.load(os.path.join(DIGITS, "test_labels.npy"))
    if not (np.array_equal(x_te, ref_x) and np.array_equal(y_te, ref_y)):
        sys.exit("error: this scikit-learn's split differs from models/digits' held-out set")
    return (x_tr, y_tr), (x_te, y_te)


def random_init_model(seed):
    """digits_cnn.onnx with He-normal weights (std sqrt(2 / fan_in)), zero biases, and the
    Gemm's `logits` added as the first graph output."""
    m = onnx.load(os.path.join(DIGITS, "digits_cnn.onnx"))
    rng = np.random.default_rng(seed)
    inits = []
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.ndim == 1:
            w = np.zeros_like(a)
        else:
            fan_in = int(np.prod(a.shape[1:]))
            w = (rng.standard_normal(a.shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, t.name))
    del m.graph.initializer[:]
    m.graph.initializer.extend(inits)
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])
    m.graph.output.insert(0, logits)
    onnx.checker.check_model(m)
    return m


def evaluate(model, test, min_accuracy):
    import onnxruntime as ort
    data = np.load(test)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    logits = sess.run(["logits"], {"image": data["image"]})[0]
    pred = logits.argmax(axis=1)
    correct = int((pred == data["labels"]).sum())
    acc = correct / len(pred)
    print(f"held-out accuracy (ONNX Runtime on {os.path.basename(model)}): {100 * acc:.2f}% ({correct}/{len(pred)})")
    if acc < min_accuracy:
        print(f"error: below the required {100 * min_accuracy:.1f}%", file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="write train.npz, test.npz and init.onnx")
    p.add_argument("out_dir")
    p.add_argument("--seed", type=int, default=0, help="seed of the He initialization")
    e = sub.add_parser("evaluate", help="held-out accuracy of a trained model under ONNX Runtime")
    e.add_argument("model")
    e.add_argument("test")
    e.add_argument("--min-accuracy", type=float, default=0.97)
    args = ap.parse_args(argv)
    if args.command == "evaluate":
        return evaluate(args.model, args.test, args.min_accuracy)
    os.makedirs(args.out_dir, exist_ok=True)
    (x_tr, y_tr), (x_te, y_te) = split()
    np.savez(os.path.join(args.out_dir, "train.npz"), image=x_tr, labels=y_tr)
    np.savez(os.path.join(args.out_dir, "test.npz"), image=x_te, labels=y_te)
    onnx.save(random_init_model(args.seed), os.path.join(args.out_dir, "init.onnx"))
    print(f"wrote {args.out_dir}/train.npz ({len(y_tr)} images), test.npz ({len(y_te)}), init.onnx (seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
