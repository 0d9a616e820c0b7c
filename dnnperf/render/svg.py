"""Charts as self-contained SVG (no plotting library): the roofline and the loss waterfall.

Both take the report dict (the JSON contract), so what is drawn is exactly what is reported.
"""

from __future__ import annotations

import math
from html import escape

from dnnperf import fmt as u

# colour-blind-safe palette (Okabe-Ito + greys), one colour per cause
CAUSE_COLOURS = {
    "compute": "#009E73", "memory": "#0072B2", "parallelism": "#E69F00", "specialization": "#CC79A7",
    "launch_overhead": "#D55E00", "unoptimized": "#000000", "heterogeneity": "#56B4E9", "thermal": "#F0E442",
    "input_io": "#999999", "overlap": "#666666",
}
FONT = "font-family='system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif'"


def _log_ticks(lo: float, hi: float) -> list[float]:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return [10.0 ** k for k in range(a, b + 1)]


def _fmt_rate(x: float) -> str:
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if x >= scale:
            return f"{x / scale:g}{unit}"
    return f"{x:g}"


def partial_mark(d: dict) -> str | None:
    """The short line a picture of a partial estimate carries (SVG here, PNG in ``fmt_png``)."""
    cov = d.get("coverage") or {}
    if cov.get("complete", True):
        return None
    return f"PARTIAL ESTIMATE: {cov['nodes_scored']} of {cov['nodes_total']} nodes scored"


def roofline(d: dict, width: int = 900, height: int = 540, labels: int = 8) -> str:
    """Log-log roofline: x = arithmetic intensity (ops/byte), y = achieved ops/s per layer.

    The report's ``hardware.roofs``: (label, peak ops/s) for the quoted peak and each unit x precision
    the model uses; the slanted roof is the
    DRAM bandwidth. Points are sized by share of time and coloured by cause; the top layers are
    labelled in a column at the right, joined to their points by leader lines (no overlaps).
    """
    bw = d["hardware"]["dram_gbs"] * 1e9
    roofs = [(r["label"], r["ops_per_s"]) for r in d["hardware"]["roofs"]]
    pts = [(l["intensity_ops_per_byte"], l["ops"] / l["latency_s"], l) for l in d["layers"]
           if l["latency_s"] > 0 and l["ops"] > 0 and l["intensity_ops_per_byte"] > 0]
    total = d["totals"]["latency_s"] or 1.0
    xs = [p[0] for p in pts] + [r[1] / bw for r in roofs]
    ys = [p[1] for p in pts] + [r[1] for r in roofs]
    xlo = max(min(xs, default=0.1) / 2, 1e-3)
    xhi = max(xs, default=100) * 3
    ylo = max(min(ys, default=1e9) / 3, 1e3)
    yhi = max(ys, default=1e12) * 3
    ml, mr, mt, mb = 78, 250, 40, 56
    pw, ph = width - ml - mr, height - mt - mb

    def X(v):
        return ml + (math.log10(v) - math.log10(xlo)) / (math.log10(xhi) - math.log10(xlo)) * pw

    def Y(v):
        return mt + ph - (math.log10(v) - math.log10(ylo)) / (math.log10(yhi) - math.log10(ylo)) * ph

    out = [f"<svg xmlns='http://www.w3.org/2000/svg' class='chart roofline' viewBox='0 0 {width} {height}' "
           f"width='{width}' height='{height}' role='img' aria-label='Roofline chart' {FONT} font-size='12'>",
           f"<title>Roofline: {escape(d['model']['name'])} on {escape(d['hardware']['title'])}</title>",
           f"<rect x='0' y='0' width='{width}' height='{height}' fill='white'/>",
           f"<rect x='{ml}' y='{mt}' width='{pw}' height='{ph}' fill='#fafafa' stroke='#bbb'/>"]
    mark = partial_mark(d)
    if mark:  # a picture of a partial estimate says so where it is seen
        out.append(f"<text x='{ml}' y='{mt - 12}' fill='#b00020' font-weight='bold'>{escape(mark)}</text>")
    for t in _log_ticks(xlo, xhi):
        if xlo <= t <= xhi:
            out.append(f"<line x1='{X(t):.1f}' y1='{mt}' x2='{X(t):.1f}' y2='{mt + ph}' stroke='#e3e3e3'/>")
            out.append(f"<text x='{X(t):.1f}' y='{mt + ph + 16}' text-anchor='middle' fill='#333'>{t:g}</text>")
    for t in _log_ticks(ylo, yhi):
        if ylo <= t <= yhi:
            out.append(f"<line x1='{ml}' y1='{Y(t):.1f}' x2='{ml + pw}' y2='{Y(t):.1f}' stroke='#e3e3e3'/>")
            out.append(f"<text x='{ml - 6}' y='{Y(t) + 4:.1f}' text-anchor='end' fill='#333'>{_fmt_rate(t)}</text>")
    out.append(f"<text x='{ml + pw / 2}' y='{height - 14}' text-anchor='middle' fill='#111' font-size='13'>"
               "arithmetic intensity (ops per DRAM byte, log)</text>")
    out.append(f"<text transform='translate(18 {mt + ph / 2}) rotate(-90)' text-anchor='middle' fill='#111' "
               "font-size='13'>achieved ops/s (log; 1 MAC = 2 ops)</text>")
    out.append(f"<clipPath id='plot'><rect x='{ml}' y='{mt}' width='{pw}' height='{ph}'/></clipPath>")
    out.append("<g clip-path='url(#plot)'>")
    dashes = ["", "6 3", "2 3", "8 3 2 3"]
    for k, (label, peak) in enumerate(roofs):
        ridge = peak / bw
        x0 = xlo
        out.append(f"<polyline points='{X(x0):.1f},{Y(max(x0 * bw, ylo)):.1f} {X(ridge):.1f},{Y(peak):.1f} "
                   f"{X(xhi):.1f},{Y(peak):.1f}' fill='none' stroke='#333' stroke-width='1.6' "
                   f"stroke-dasharray='{dashes[k % len(dashes)]}'/>")
        out.append(f"<circle cx='{X(ridge):.1f}' cy='{Y(peak):.1f}' r='3.5' fill='#333'/>")
        out.append(f"<text x='{X(xhi) - 6:.1f}' y='{Y(peak) - 6:.1f}' text-anchor='end' fill='#333'>"
                   f"{escape(label)}: {_fmt_rate(peak)}ops/s, ridge {ridge:.3g} ops/B</text>")
    for x, y, l in sorted(pts, key=lambda p: -p[2]["latency_s"]):
        r = 2.5 + 14 * math.sqrt(l["latency_s"] / total)
        c = CAUSE_COLOURS.get(l["cause"], "#888")
        out.append(f"<circle class='layer' data-layer='{escape(l['name'], quote=True)}' cx='{X(x):.1f}' cy='{Y(y):.1f}' "
                   f"r='{r:.1f}' fill='{c}' fill-opacity='0.55' stroke='{c}'><title>{escape(l['name'])} "
                   f"({escape(l['op_type'])}): {u.t(l['latency_s'])}, {l['cause']}</title></circle>")
    out.append("</g>")
    # labels for the top layers: a column at the right with leader lines
    by = {l["name"]: (x, y, l) for x, y, l in pts}
    top = [n for n in d["ranking"][:labels] if n in by]
    step = max(ph / max(len(top), 1), 18)
    for i, n in enumerate(top):
        x, y, l = by[n]
        ly = mt + 10 + i * min(step, 26)
        lx = ml + pw + 14
        out.append(f"<line x1='{X(x):.1f}' y1='{Y(y):.1f}' x2='{lx - 2}' y2='{ly - 4}' stroke='#999' stroke-width='0.7'/>")
        name = n if len(n) <= 30 else "..." + n[-27:]
        out.append(f"<text x='{lx}' y='{ly}' fill='#111' font-size='11'>{i + 1}. {escape(name)}</text>")
    # legend
    used = [c for c in CAUSE_COLOURS if any(l["cause"] == c for _, _, l in pts)]
    ly = mt + 10 + len(top) * min(step, 26) + 16
    out.append(f"<text x='{ml + pw + 14}' y='{ly}' fill='#111' font-weight='600'>cause</text>")
    for i, c in enumerate(used):
        yy = ly + 16 * (i + 1)
        out.append(f"<rect x='{ml + pw + 14}' y='{yy - 9}' width='10' height='10' fill='{CAUSE_COLOURS[c]}'/>"
                   f"<text x='{ml + pw + 30}' y='{yy}' fill='#111'>{c}</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def waterfall(d: dict, width: int = 900, height: int = 340) -> str:
    """From time at the quoted peak to the estimated time, one bar per cause (largest first)."""
    t = d["totals"]
    steps = [("at quoted peak", t["ideal_s"], "compute")]
    for k, v in sorted(t["losses_s"].items(), key=lambda kv: (-kv[1], kv[0])):
        if v > 0:
            steps.append((k, v, k))
    total = t["latency_s"] or 1.0
    ml, mr, mt, mb = 70, 20, 30, 70
    pw, ph = width - ml - mr, height - mt - mb
    n = len(steps) + 1
    bw = pw / n
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' class='chart waterfall' viewBox='0 0 {width} {height}' "
           f"width='{width}' height='{height}' role='img' aria-label='Loss waterfall' {FONT} font-size='12'>",
           f"<title>Where the time goes: {escape(d['model']['name'])} on {escape(d['hardware']['title'])}</title>",
           f"<rect x='0' y='0' width='{width}' height='{height}' fill='white'/>"]

    def Y(v):
        return mt + ph - v / total * ph

    for k in range(5):
        v = total * k / 4
        out.append(f"<line x1='{ml}' y1='{Y(v):.1f}' x2='{ml + pw}' y2='{Y(v):.1f}' stroke='#e3e3e3'/>"
                   f"<text x='{ml - 6}' y='{Y(v) + 4:.1f}' text-anchor='end' fill='#333'>{u.t(v)}</text>")
    acc = 0.0
    for i, (label, v, cause) in enumerate(steps):
        x = ml + i * bw + bw * 0.15
        top, bottom = Y(acc + v), Y(acc)
        c = CAUSE_COLOURS.get(cause, "#888")
        out.append(f"<rect class='step' x='{x:.1f}' y='{top:.1f}' width='{bw * 0.7:.1f}' height='{max(bottom - top, 0.5):.1f}' "
                   f"fill='{c}'><title>{escape(label)}: {u.t(v)} ({v / total:.0%})</title></rect>")
        out.append(f"<text x='{x + bw * 0.35:.1f}' y='{top - 4:.1f}' text-anchor='middle' fill='#111' font-size='11'>"
                   f"{u.t(v)}</text>")
        out.append(f"<text x='{x + bw * 0.35:.1f}' y='{mt + ph + 16}' text-anchor='middle' fill='#111' font-size='11'>"
                   f"{escape(label.replace('_', ' '))}</text>")
        acc += v
    x = ml + len(steps) * bw + bw * 0.15
    out.append(f"<rect x='{x:.1f}' y='{Y(total):.1f}' width='{bw * 0.7:.1f}' height='{ph:.1f}' fill='#444'/>"
               f"<text x='{x + bw * 0.35:.1f}' y='{Y(total) - 4:.1f}' text-anchor='middle' font-size='11'>{u.t(total)}</text>"
               f"<text x='{x + bw * 0.35:.1f}' y='{mt + ph + 16}' text-anchor='middle' font-size='11'>estimated</text>")
    out.append(f"<text x='{ml + pw / 2}' y='{height - 12}' text-anchor='middle' fill='#111' font-size='13'>"
               f"quoted {d['hardware']['peak_tops']:g} TOP/s {d['hardware']['peak_precision']}: "
               f"this model reaches {u.tops(t['achieved_tops'])} TOP/s ({t['fraction_of_peak']:.1%}"
               f"{escape(u.peak_basis(t, d['hardware']))})</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
