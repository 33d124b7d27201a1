#!/usr/bin/env python3
"""Turns a `kiln train --metrics-csv` file into curves: OUT_DIR/curves.csv (per epoch: mean
train loss, eval loss, eval accuracy) and OUT_DIR/curves.png (train loss per step with its
moving average and the eval loss per epoch; eval accuracy per epoch). Needs only the standard
library and matplotlib (run it with the python that has matplotlib, e.g. /usr/bin/python3).

    python3 scripts/train_curves.py METRICS.csv OUT_DIR [--title TITLE]
"""
import argparse
import csv
import os
import sys


def read_metrics(path):
    steps, losses, epochs = [], [], {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            epoch, step = int(row["epoch"]), int(row["step"])
            e = epochs.setdefault(epoch, {"train": [], "eval_loss": None, "eval_accuracy": None, "step": step})
            if row["train_loss"]:
                steps.append(step)
                losses.append(float(row["train_loss"]))
                e["train"].append(float(row["train_loss"]))
            if row["eval_loss"]:
                e["eval_loss"] = float(row["eval_loss"])
                e["step"] = step
            if row["eval_accuracy"]:
                e["eval_accuracy"] = float(row["eval_accuracy"])
    return steps, losses, epochs


def write_epoch_csv(epochs, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["epoch", "step", "train_loss_mean", "eval_loss", "eval_accuracy"])
        for epoch in sorted(epochs):
            e = epochs[epoch]
            mean = sum(e["train"]) / len(e["train"]) if e["train"] else ""
            w.writerow([epoch, e["step"], mean, "" if e["eval_loss"] is None else e["eval_loss"],
                        "" if e["eval_accuracy"] is None else e["eval_accuracy"]])


def moving_average(xs, n):
    out, total = [], 0.0
    for i, x in enumerate(xs):
        total += x - (xs[i - n] if i >= n else 0.0)
        out.append(total / min(i + 1, n))
    return out


def plot(steps, losses, epochs, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
    ax_loss.plot(steps, losses, color="0.8", lw=0.8, label="train loss (batch)")
    ax_loss.plot(steps, moving_average(losses, 20), color="C0", label="train loss (moving avg, 20 steps)")
    ev = [(epochs[e]["step"], epochs[e]["eval_loss"]) for e in sorted(epochs) if epochs[e]["eval_loss"] is not None]
    if ev:
        ax_loss.plot(*zip(*ev), "o-", color="C1", ms=3, label="eval loss (per epoch)")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("loss")
    ax_loss.set_yscale("log")
    ax_loss.legend()
    acc = [(e, 100 * epochs[e]["eval_accuracy"]) for e in sorted(epochs) if epochs[e]["eval_accuracy"] is not None]
    if acc:
        ax_acc.plot(*zip(*acc), "o-", color="C2", ms=3)
    ax_acc.set_xlabel("epoch")
    ax_acc.set_ylabel("eval accuracy (%)")
    ax_acc.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description="loss and accuracy curves of a kiln train metrics CSV")
    ap.add_argument("metrics")
    ap.add_argument("out_dir")
    ap.add_argument("--title", default="kiln train")
    args = ap.parse_args(argv)
    steps, losses, epochs = read_metrics(args.metrics)
    if not steps:
        sys.exit(f"error: {args.metrics} has no training rows")
    os.makedirs(args.out_dir, exist_ok=True)
    write_epoch_csv(epochs, os.path.join(args.out_dir, "curves.csv"))
    plot(steps, losses, epochs, os.path.join(args.out_dir, "curves.png"), args.title)
    print(f"wrote {args.out_dir}/curves.csv and curves.png")


if __name__ == "__main__":
    main()
