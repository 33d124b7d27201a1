#!/usr/bin/env python3
"""The machine's measured FP32 peak (GFLOP/s) for 1..T threads, from bench/fma_peak.c.

Compiles fma_peak.c with the system C compiler (-O2 -march=native) into build/bench/ (again only
when the source changed) and runs it per thread count; the peak is the best ISA width (AVX-512,
AVX2) of the best of several trials, as FLOPs per thread CPU second (summed over threads), so
time a thread spends descheduled on a shared machine does not lower it (the wall-clock figure,
which it does lower, is printed beside it by main()).

    python3 bench/fma_peak.py [--threads 1,2]
"""
import argparse
import hashlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SOURCE = os.path.join(HERE, "fma_peak.c")
ISAS = ("avx512", "avx2")


def build(out_dir=os.path.join(REPO, "build", "bench")):
    """Path of the compiled probe (compiled when missing or when the source changed)."""
    with open(SOURCE, "rb") as f:
        tag = hashlib.sha256(f.read()).hexdigest()[:12]
    exe = os.path.join(out_dir, f"fma_peak_{tag}")
    if not os.path.exists(exe):
        os.makedirs(out_dir, exist_ok=True)
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-O2", "-march=native", "-pthread", "-o", exe, SOURCE], check=True)
    return exe


def measure(threads, tries=2, wall=None):
    """{isa: GFLOP/s by CPU time} for `threads` threads, best of `tries` runs of the probe
    (`wall`, a dict, receives the best wall-clock figures)."""
    exe = build()
    best = {}
    wall = {} if wall is None else wall
    for _ in range(tries):
        for isa in ISAS:  # one process per width: see the NOTE in fma_peak.c
            proc = subprocess.run([exe, isa, str(threads)], capture_output=True, text=True)
            if proc.returncode == 3:
                continue  # not compiled in for this machine
            if proc.returncode != 0:
                raise RuntimeError(f"{exe} {isa} {threads} failed: {proc.stderr.strip()}")
            _, _, cpu, w = proc.stdout.split()
            best[isa] = max(best.get(isa, 0.0), float(cpu))
            wall[isa] = max(wall.get(isa, 0.0), float(w))
    if not best:
        raise RuntimeError("fma_peak measured nothing: the compiler targets neither AVX2 nor "
                           "AVX-512")
    return best


def measure_peak(thread_counts, tries=2):
    """{threads: (GFLOP/s, isa)}: the best ISA width per thread count."""
    out = {}
    for t in thread_counts:
        per_isa = measure(t, tries)
        isa = max(per_isa, key=per_isa.get)
        out[t] = (per_isa[isa], isa)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--tries", type=int, default=3)
    args = ap.parse_args(argv)
    for t in [int(x) for x in args.threads.split(",")]:
        wall = {}
        per_isa = measure(t, args.tries, wall)
        row = ", ".join(f"{isa} {g:.1f} (wall {wall[isa]:.1f})"
                        for isa, g in sorted(per_isa.items()))
        print(f"threads {t}: peak {max(per_isa.values()):.1f} GFLOP/s ({row})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
