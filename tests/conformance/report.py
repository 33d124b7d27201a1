"""The per-group conformance table: Kiln against ONNX Runtime on the same tests.

Input: per-test group (groups.py) and per-runtime results {name: {"status", "reason"}} with
status PASS / FAIL / UNSUPPORTED. Tests in the random group are counted for neither runtime and
listed apart; every other test counts once in its group's row and in the totals.
"Kiln-fail-ORT-pass" counts tests where Kiln did not pass (FAIL or UNSUPPORTED) and ORT passed.
"""
from groups import RANDOM_GROUP, TABLE_GROUPS

COLUMNS = ["group", "tests", "Kiln pass", "ORT pass", "Kiln-fail-ORT-pass"]


def _passed(results, name):
    return results is not None and results.get(name, {}).get("status") == "PASS"


def build(groups, kiln, ort=None):
    """Summary dict: rows (one per group present, then "total"), random (names), and
    kiln_fail_ort_pass ([{name, group, kiln_status, kiln_reason, ort_status}]) -- the ORT columns
    are None when ort is None."""
    counted = {n: g for n, g in groups.items() if g != RANDOM_GROUP}
    order = [g for g in TABLE_GROUPS if g in counted.values()]
    order += sorted(set(counted.values()) - set(order))
    rows = []
    for g in order + ["total"]:
        names = [n for n, gg in counted.items() if g in ("total", gg)]
        rows.append({
            "group": g,
            "tests": len(names),
            "kiln_pass": sum(_passed(kiln, n) for n in names),
            "ort_pass": None if ort is None else sum(_passed(ort, n) for n in names),
            "kiln_fail_ort_pass": None if ort is None else sum(
                not _passed(kiln, n) and _passed(ort, n) for n in names),
        })
    gaps = []
    if ort is not None:
        for n in sorted(counted):
            if not _passed(kiln, n) and _passed(ort, n):
                k = kiln.get(n, {"status": "MISSING", "reason": "not run by kiln"})
                gaps.append({"name": n, "group": counted[n], "kiln_status": k["status"],
                             "kiln_reason": k.get("reason", "")})
    random = []
    for n in sorted(set(groups) - set(counted)):
        random.append({"name": n,
                       "kiln_status": kiln.get(n, {}).get("status", "MISSING"),
                       "ort_status": None if ort is None else ort.get(n, {}).get("status",
                                                                              "MISSING")})
    return {"rows": rows, "random": random, "kiln_fail_ort_pass": gaps}


def _cell(v):
    return "-" if v is None else str(v)


def format_table(summary, markdown=False):
    """The rows as an aligned text table, or a Markdown table."""
    cells = [[r["group"], _cell(r["tests"]), _cell(r["kiln_pass"]), _cell(r["ort_pass"]),
              _cell(r["kiln_fail_ort_pass"])] for r in summary["rows"]]
    if markdown:
        lines = ["| " + " | ".join(COLUMNS) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(COLUMNS) - 1)) + "|"]
        for c in cells:
            if c[0] == "total":
                c = [f"**{x}**" for x in c]
            lines.append("| " + " | ".join(c) + " |")
        return "\n".join(lines)
    widths = [max(len(COLUMNS[i]), *(len(c[i]) for c in cells)) for i in range(len(COLUMNS))]

    def line(c):
        return "  ".join(c[i].ljust(widths[i]) if i == 0 else c[i].rjust(widths[i])
                         for i in range(len(c)))

    out = [line(COLUMNS), "  ".join("-" * w for w in widths)]
    for c in cells:
        if c[0] == "total":
            out.append("  ".join("-" * w for w in widths))
        out.append(line(c))
    return "\n".join(out)


def format_report(summary, markdown=False):
    """Table, then the Kiln-fail-ORT-pass list with Kiln's reasons, then the random tests."""
    out = [format_table(summary, markdown), ""]
    gaps = summary["kiln_fail_ort_pass"]
    if summary["rows"] and summary["rows"][-1]["ort_pass"] is not None:
        out.append(f"{len(gaps)} tests fail in Kiln and pass in ONNX Runtime:")
        for g in gaps:
            out.append(f"  {g['name']} [{g['group']}] {g['kiln_status']}: {g['kiln_reason']}")
        out.append("")
    rnd = summary["random"]
    out.append(f"{len(rnd)} tests with random expected output (counted for neither):")
    for r in rnd:
        ort = "" if r["ort_status"] is None else f", ORT {r['ort_status']}"
        out.append(f"  {r['name']}: Kiln {r['kiln_status']}{ort}")
    return "\n".join(out)
