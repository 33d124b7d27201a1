"""`kiln tune` end to end on the shipped digits CNN: a few seconds of budget, the log read back by
`kiln run` / `kiln inspect`, the tuned model still matching ONNX Runtime, and remote measurement
through `kiln rpc-server` on localhost.

Reference: ONNX Runtime's outputs (tolerance: the tuned kernels reassociate the reductions and
use FMA, as the default ones do: the model tests' RTOL/ATOL).
"""
import json
import os
import re
import signal
import subprocess

import numpy as np
import pytest

from kiln_helpers import REPO, assert_matches_ort, kiln_bin, kiln_has_dnnl, kiln_run_model, ort_outputs, run_kiln

DIGITS = os.path.join(REPO, "models", "digits", "digits_cnn.onnx")
N = 4


@pytest.fixture(scope="module")
def tuned_log(tmp_path_factory):
    """A tuning log of the digits CNN at batch N, from an 8-second `kiln tune`."""
    log = tmp_path_factory.mktemp("tune") / "digits.jsonl"
    proc = run_kiln(["tune", DIGITS, "--dim", f"N={N}", "--budget", "8", "--threads", "1", "--log", log,
                     "--compare-runs", "3"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The model-level check ran (and kept or rejected the choices), or nothing changed to check.
    assert (("model latency" in proc.stdout and ("kept:" in proc.stdout or "rejected:" in proc.stdout))
            or "no workload changed" in proc.stdout), proc.stdout
    return str(log), proc.stdout


def _records(log):
    with open(log) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_log_holds_only_measured_matching_candidates(tuned_log):
    log, table = tuned_log
    recs = _records(log)
    assert recs, "kiln tune wrote no records"
    workloads = {r["workload"] for r in recs}
    m = re.search(r"tuned (\d+) workloads", table)
    assert m and int(m.group(1)) == len(workloads), table
    for r in recs:
        if r.get("verdict"):  # the model-level check rejected this workload's choice
            assert r["verdict"] == "rejected" and "rejected:" in table, r
        assert r["v"] == 1 and r["threads"] == 1 and r["seconds"] > 0
        assert re.fullmatch(r"w[0-9a-f]{16}", r["workload"]), r
        assert all(re.fullmatch(r"[a-z_.]+=-?\d+", kv) for kv in r["knobs"].split(",") if kv), r


def test_tuned_model_matches_ort(tuned_log, tmp_path):
    log, _ = tuned_log
    with np.load(os.path.join(REPO, "models", "digits", "test_images.npz")) as z:
        feed = {"image": z["image"][:N]}
    np.savez(tmp_path / "in.npz", **feed)
    outs, proc = kiln_run_model(DIGITS, str(tmp_path / "in.npz"), str(tmp_path),
                                extra=["--tuning-log", log, "--threads", "1"])
    assert_matches_ort(outs, ort_outputs(DIGITS, feed), "digits tuned")


@pytest.mark.skipif(not kiln_has_dnnl(), reason="built without oneDNN")
def test_log_choice_is_applied(tuned_log, tmp_path):
    """A record choosing oneDNN (source=1) for conv1's workload makes conv1 a oneDNN kernel."""
    log, _ = tuned_log
    conv = [r for r in _records(log) if r["desc"].startswith("KilnConv2dNCHWc+Relu f32[4,1,8,8,1]")]
    assert conv, "no record of conv1's workload"
    forced = tmp_path / "forced.jsonl"
    rec = dict(conv[0], knobs="source=1", seconds=1e-9)
    forced.write_text(json.dumps(rec) + "\n")

    def conv1_line(extra):
        proc = run_kiln(["inspect", DIGITS, "--dim", f"N={N}", "--kernels"] + extra)
        assert proc.returncode == 0, proc.stderr
        return next(line for line in proc.stdout.splitlines() if "'conv1'" in line)
    assert "[dnnl_conv]" in conv1_line(["--tuning-log", str(forced)])
    generated = dict(rec, knobs="source=0")
    forced.write_text(json.dumps(generated) + "\n")
    assert "[dnnl_conv]" not in conv1_line(["--tuning-log", str(forced)])


@pytest.mark.skipif(not kiln_has_dnnl(), reason="built without oneDNN")
def test_rejected_verdict_restores_the_default(tuned_log, tmp_path):
    """A model-level "rejected" verdict after a record makes later compiles ignore that record;
    a record measured after the verdict applies again."""
    log, _ = tuned_log
    conv = [r for r in _records(log) if r["desc"].startswith("KilnConv2dNCHWc+Relu f32[4,1,8,8,1]")]
    assert conv, "no record of conv1's workload"
    untuned = _conv1_line(["--tuning-log", "none"])
    forced = tmp_path / "forced.jsonl"
    choice = "source=0" if "[dnnl_conv]" in untuned else "source=1"  # the opposite of the default
    rec = dict(conv[0], knobs=choice, seconds=1e-9)
    rec.pop("verdict", None)
    verdict = dict(rec, knobs=conv[0]["knobs"], seconds=1e-3, verdict="rejected")
    forced.write_text(json.dumps(rec) + "\n")
    assert _conv1_line(["--tuning-log", str(forced)]) != untuned
    forced.write_text(json.dumps(rec) + "\n" + json.dumps(verdict) + "\n")
    assert _conv1_line(["--tuning-log", str(forced)]) == untuned
    forced.write_text(json.dumps(rec) + "\n" + json.dumps(verdict) + "\n" + json.dumps(rec) + "\n")
    assert _conv1_line(["--tuning-log", str(forced)]) != untuned


def test_log_of_another_machine_is_not_applied_silently(tuned_log, tmp_path):
    log, _ = tuned_log
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text("".join(json.dumps(dict(r, target="Some Other CPU | avx2")) + "\n"
                               for r in _records(log)))
    proc = run_kiln(["run", DIGITS, "--dim", f"N={N}", "--tuning-log", str(foreign)])
    assert proc.returncode == 0, proc.stderr
    assert "Some Other CPU" in proc.stderr and "not applied" in proc.stderr, proc.stderr


def test_log_from_another_knob_space_is_not_applied(tuned_log, tmp_path):
    """Records whose knob-space fingerprint differs from what the templates declare now (a
    template changed since the tuning) leave their workloads untuned, and the compile says so."""
    log, _ = tuned_log
    stale = tmp_path / "stale.jsonl"
    # Without the model-level verdicts (a "rejected" one would leave nothing applied to check).
    stale.write_text("".join(json.dumps(dict(r, space="0000000000000000")) + "\n" for r in _records(log)
                             if not r.get("verdict")))
    proc = run_kiln(["run", DIGITS, "--dim", f"N={N}", "--tuning-log", log])
    assert proc.returncode == 0 and "not applied" not in proc.stderr, proc.stderr
    proc = run_kiln(["run", DIGITS, "--dim", f"N={N}", "--tuning-log", str(stale)])
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"tuning log: \d+ tuned workload\(s\) not applied", proc.stderr), proc.stderr
    generated = {r["workload"] for r in _records(log) if "source=1" not in r["knobs"] and not r.get("verdict")}
    assert generated, "the tuning log holds no generated setting"  # the pools' and Gemm's are always generated
    if generated:  # every generated kernel is the untuned one
        def source(extra):
            p = run_kiln(["inspect", DIGITS, "--dim", f"N={N}"] + extra)
            assert p.returncode == 0, p.stderr
            return [line for line in p.stdout.splitlines() if not line.startswith("//")]  # not the pass timings
        assert source(["--tuning-log", str(stale), "--kernel-source", "generated"]) == \
            source(["--tuning-log", "none", "--kernel-source", "generated"])


def _conv1_line(extra):
    proc = run_kiln(["inspect", DIGITS, "--dim", f"N={N}", "--kernels"] + extra)
    assert proc.returncode == 0, proc.stderr
    return next(line for line in proc.stdout.splitlines() if "'conv1'" in line)


def test_missing_log_is_a_clear_error(tmp_path):
    proc = run_kiln(["run", DIGITS, "--dim", f"N={N}", "--tuning-log", str(tmp_path / "nope.jsonl")])
    assert proc.returncode == 1
    assert "tuning log" in proc.stderr and "does not exist" in proc.stderr


def test_rpc_to_a_closed_port_is_a_clear_error(tmp_path):
    proc = run_kiln(["tune", DIGITS, "--dim", f"N={N}", "--budget", "2", "--rpc", "127.0.0.1:1",
                     "--log", str(tmp_path / "x.jsonl"), "--compare-runs", "0"])
    assert proc.returncode == 1
    assert "127.0.0.1:1" in proc.stderr, proc.stderr


def test_tune_through_rpc_server(tmp_path):
    server = subprocess.Popen([kiln_bin(), "rpc-server", "--host", "127.0.0.1", "--port", "0", "--threads", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        m = re.search(r"listening on (\S+):(\d+)", line)
        assert m, f"rpc-server printed {line!r}"
        log = tmp_path / "rpc.jsonl"
        proc = run_kiln(["tune", DIGITS, "--dim", f"N={N}", "--budget", "4", "--threads", "1", "--log", log,
                         "--rpc", f"{m.group(1)}:{m.group(2)}", "--compare-runs", "0"])
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert _records(log), "no records measured through the rpc server"
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
