"""/metrics on the metrics port: Prometheus text exposition format (0.0.4), parsed strictly here,
with Kiln's counter labelled by model and outcome and Triton's nv_inference_* families counting
exactly the requests just made, and well-formed histograms (cumulative buckets ending in +Inf
equal to _count)."""
import collections
import math
import re

from clients import http_infer, http_request
from repo_models import sample_inputs

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(rf"^({NAME})(?:\{{(.*)\}})?\s+(\S+)(?:\s+(-?\d+))?$")
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def parse_prometheus(text):
    """{family: {"type": t, "samples": [(name, {labels}, value)]}}; asserts on any bad line."""
    families = collections.OrderedDict()
    types = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] == "TYPE":
                assert re.fullmatch(NAME, parts[2]), f"line {n}: bad metric name {line!r}"
                assert parts[3] in ("counter", "gauge", "histogram", "summary", "untyped"), line
                types[parts[2]] = parts[3]
            continue
        m = SAMPLE.match(line)
        assert m, f"line {n}: not a Prometheus sample: {line!r}"
        name, labels_text, value = m.group(1), m.group(2) or "", m.group(3)
        labels = {}
        pos = 0
        while pos < len(labels_text):
            lm = LABEL.match(labels_text, pos)
            assert lm, f"line {n}: bad labels {labels_text!r}"
            labels[lm.group(1)] = lm.group(2)
            pos = lm.end()
        v = float(value)  # accepts NaN, +Inf
        family = name
        for suffix in ("_bucket", "_sum", "_count", "_total", "_created"):
            if name.endswith(suffix) and name[:-len(suffix)] in types:
                family = name[:-len(suffix)]
        families.setdefault(family, {"type": types.get(family, "untyped"), "samples": []})
        families[family]["samples"].append((name, labels, v))
    return families


def scrape(server):
    r = http_request(server.metrics_port, "GET", "/metrics")
    assert r.status == 200, r.status
    assert r.headers.get("Content-Type", "").startswith("text/plain"), r.headers
    return parse_prometheus(r.body.decode())


def model_counters(families, model):
    """{(sample name, frozen labels): value} of every counter sample labelled with `model`."""
    out = {}
    for fam in families.values():
        if fam["type"] != "counter":
            continue
        for name, labels, v in fam["samples"]:
            if labels.get("model") == model:
                out[(name, tuple(sorted(labels.items())))] = v
    return out


def test_metrics_count_requests(server):
    before = model_counters(scrape(server), "digits")
    n = 7
    for i in range(n):
        r = http_infer(server.http_port, "digits", sample_inputs("digits", rows=1, seed=i))
        assert r.status == 200, r.error()
    r = http_infer(server.http_port, "digits", {"image": sample_inputs("digits")["image"][:, :, :4]})
    assert r.status == 400
    after = model_counters(scrape(server), "digits")
    deltas = {k: v - before.get(k, 0.0) for k, v in after.items()}

    def delta(name, **labels):
        found = [d for (sample, lab), d in deltas.items()
                 if sample == name and all(dict(lab).get(k) == v for k, v in labels.items())]
        assert len(found) == 1, f"{name} {labels}: {len(found)} series among {sorted(deltas)}"
        return found[0]

    # Kiln's own counter, by outcome: the 7 answers and the 400 each counted once, apart.
    assert delta("kiln_inference_requests_total", outcome="success") == n, deltas
    assert delta("kiln_inference_requests_total", outcome="invalid_argument") == 1, deltas
    # Triton's families, as Triton names and means them.
    assert delta("nv_inference_request_success", version="1") == n, deltas
    assert delta("nv_inference_request_failure", version="1") == 1, deltas
    assert delta("nv_inference_count", version="1") == n, deltas  # one row each
    assert 1 <= delta("nv_inference_exec_count", version="1") <= n, deltas
    for family in ("nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                   "nv_inference_compute_infer_duration_us"):
        assert delta(family, version="1") >= 0, (family, deltas)
    assert delta("nv_inference_request_duration_us", version="1") >= \
        delta("nv_inference_compute_infer_duration_us", version="1"), deltas


def test_metrics_histograms_well_formed(server):
    r = http_infer(server.http_port, "mlp", sample_inputs("mlp"))
    assert r.status == 200
    families = scrape(server)
    histograms = {k: f for k, f in families.items() if f["type"] == "histogram"}
    assert histograms, f"no histogram among {list(families)}"
    for fam_name, fam in histograms.items():
        series = collections.defaultdict(list)
        counts = {}
        for name, labels, v in fam["samples"]:
            key = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
            if name.endswith("_bucket"):
                series[key].append((float(labels["le"]), v))
            elif name.endswith("_count"):
                counts[key] = v
        for key, buckets in series.items():
            les = [le for le, _ in buckets]
            vals = [v for _, v in buckets]
            assert les == sorted(les) and math.isinf(les[-1]), (fam_name, key, les)
            assert vals == sorted(vals), f"{fam_name} {key}: buckets not cumulative {vals}"
            assert key in counts and counts[key] == vals[-1], (fam_name, key, counts.get(key))
