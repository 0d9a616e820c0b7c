"""Markdown: for pull-request comments, CI step summaries and docs."""

from __future__ import annotations

from dnnperf.render import units as u


def _table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
    return "\n".join(out) + "\n"


def report(d: dict, top: int = 10) -> str:
    t = d["totals"]
    hw = d["hardware"]
    s = [f"## {d['model']['name']} on {hw['title']}\n",
         f"- estimated latency: **{u.t(t['latency_s'])}** (batch {d['settings']['batch']}, precision "
         f"{d['settings']['precision']}, fusion {d['settings']['fusion']}), throughput {t['throughput_per_s']:.4g}/s",
         f"- achieved {t['achieved_tops']:.3g} TOP/s of the quoted {hw['peak_tops']:g} TOP/s {hw['peak_precision']} "
         f"({u.pct(t['fraction_of_peak'])}); top cause: `{t['top_cause']}`",
         f"- {u.count(t['macs'])}MACs, {u.b(t['bytes'])} moved, {t['launches']} kernel launches\n",
         "### Where the time goes\n",
         _table(["", "time", "share", "mostly in"],
                [["at quoted peak", u.t(t["ideal_s"]), u.pct(t["ideal_s"] / t["latency_s"] if t["latency_s"] else 0), ""]]
                + [[k, u.t(v), u.pct(v / t["latency_s"] if t["latency_s"] else 0), _where(t, k)]
                   for k, v in sorted(t["losses_s"].items(), key=lambda kv: -kv[1]) if v > 0]),
         f"\n### Top {top} bottlenecks\n"]
    by = {l["name"]: l for l in d["layers"]}
    rows = []
    for i, name in enumerate(d["ranking"][:top], 1):
        l = by[name]
        rows.append([str(i), f"`{name}`", l["op_type"], u.t(l["latency_s"]), u.t(l["lost_s"]), l["cause"],
                     l["fixes"][0]["text"] if l["fixes"] else ""])
    s.append(_table(["#", "layer", "op", "time", "lost", "cause", "fix"], rows))
    if d.get("model_fixes"):
        s.append("\n### Model-level fixes\n")
        s.extend(f"- **{f['id']}** ({f['difficulty']}): {f['text']}" for f in d["model_fixes"])
        s.append("")
    if d["unsupported_ops"]:
        s.append("\n### Unsupported ops (not scored)\n")
        s.extend(f"- {x['op_type']} x{x['count']}: {x['reason']}" for x in d["unsupported_ops"])
        s.append("")
    return "\n".join(s) + "\n"


def _where(t: dict, cause: str) -> str:
    w = t.get("loss_where", {}).get(cause)
    return f"{u.pct(w['share'])} in {w['layers']} {w['family']} layers" if w else ""


def inspection(d: dict) -> str:
    rows = [[f"`{l['name']}`", l["op_type"], u.shape(l["output_shape"]), l["dtype"], u.count(l["macs"]),
             u.count(l["other_ops"]), u.b(l["act_bytes_read"]), u.b(l["weight_bytes"]), u.b(l["bytes_written"]),
             f"{l['intensity_ops_per_byte']:.3g}" if l["intensity_ops_per_byte"] is not None else "-"]
            for l in d["layers"]]
    t = d["totals"]
    rows.append(["**total**", "", "", "", u.count(t["macs"]), u.count(t["other_ops"]), u.b(t["act_bytes_read"]),
                 u.b(t["weight_bytes"]), u.b(t["bytes_written"]), f"{t['intensity']:.3g}"])
    out = f"## {d['model']['name']}: per-layer workloads (1 MAC = 2 ops)\n\n"
    out += _table(["layer", "op", "output", "dtype", "MACs", "other ops", "act read", "weights", "written", "ops/B"], rows)
    if d["unsupported_ops"]:
        out += "\nUnsupported: " + ", ".join(f"{x['op_type']} x{x['count']}" for x in d["unsupported_ops"]) + "\n"
    return out


def table(headers: list[str], rows: list[list[str]], title: str = "") -> str:
    return (f"## {title}\n\n" if title else "") + _table(headers, rows)
