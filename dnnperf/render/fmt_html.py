"""One self-contained HTML report: inline CSS and SVG, no script from anywhere, prints cleanly."""

from __future__ import annotations

from html import escape

from dnnperf import __version__
from dnnperf import fmt as u
from dnnperf.render import svg
from dnnperf.render.views import coverage_line, listed_ops, llm_block, ranked_entries

EXTENSIONS = (".html", ".htm")

CSS = """
:root { --fg:#1b1b1b; --muted:#555; --line:#ddd; --accent:#0072B2; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; color: var(--fg);
       margin: 0 auto; padding: 24px 28px 60px; max-width: 1180px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 34px 0 10px; border-bottom: 1px solid var(--line); }
.sub { color: var(--muted); margin: 0 0 18px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(190px, 1fr)); gap: 12px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; }
.card b { display: block; font-size: 20px; } .card span { color: var(--muted); font-size: 13px; }
table { border-collapse: collapse; width: 100%; font-size: 13.5px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: #f4f4f4; } td.num, th.num { text-align: right; white-space: nowrap; }
code { font-size: 12.5px; word-break: break-all; }
.cause { display: inline-block; padding: 0 6px; border-radius: 4px; color: white; font-size: 12px; }
figure { margin: 12px 0; } figure svg { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 13px; }
.fix { color: #222; } .diff { color: var(--muted); font-size: 12px; }
@media print { body { max-width: none; padding: 0; font-size: 11px; } h2 { break-after: avoid; }
  figure, tr { break-inside: avoid; } a { color: inherit; text-decoration: none; } }
"""

# Checks the page rendered (used by the headless-browser test; harmless for readers).
SELF_CHECK = """
window.addEventListener('error', function (e) { document.body.setAttribute('data-errors',
  (document.body.getAttribute('data-errors') || '') + e.message + ';'); });
window.addEventListener('load', function () {
  var s = Array.prototype.map.call(document.querySelectorAll('svg.chart'), function (c) {
    var r = c.getBoundingClientRect(); return Math.round(r.width) + 'x' + Math.round(r.height); });
  document.body.setAttribute('data-charts', s.join(','));
});
"""


def _cause(c: str) -> str:
    from dnnperf.render.svg import CAUSE_COLOURS

    col = CAUSE_COLOURS.get(c, "#888")
    fg = "#111" if c in ("thermal",) else "white"
    return f"<span class='cause' style='background:{col};color:{fg}'>{escape(c)}</span>"


def _no_fit(d: dict) -> str:
    """' (does not fit)' for a compared target whose report says its memory cannot hold the run
    (the report's ``memory`` section, ``dnnperf.capacity``), else ''."""
    return " (does not fit)" if (d.get("memory") or {}).get("fits") is False else ""


def report(main: dict, comparison: list[dict] | None, top: int = 15) -> str:
    charts = (svg.roofline(main), svg.waterfall(main))
    t = main["totals"]
    hw = main["hardware"]
    st = main["settings"]
    cards = [
        ("estimated latency", u.t(t["latency_s"])),
        ("throughput", f"{u.rate(t['throughput_per_s'])} / s"),
        ("achieved", f"{u.tops(t['achieved_tops'])} TOP/s"),
        ("of quoted peak" if t.get("peak_tops", hw["peak_tops"]) == hw["peak_tops"] else f"of its {t['peak_precision']} peak",
         f"{u.pct(t['fraction_of_peak'])} of {t.get('peak_tops', hw['peak_tops']):g}"),
        ("work", u.counted(t['macs'], "MACs")),
        ("top cause", t["top_cause"]),
    ]
    mem = main.get("memory")
    if mem and mem.get("device_bytes") and not main.get("llm"):  # a decoder's request: its own figures
        cards.append(("memory held, at least" if mem["fits"] else "memory: does NOT fit",
                      f"{u.b(mem['needed_bytes'])} of {u.b(mem['device_bytes'])}{' a die' if mem['dies'] > 1 else ''}"))
    by = {l["name"]: l for l in main["layers"]}
    partial = coverage_line(main)
    rows = []
    entries = ranked_entries(main, top)
    for i, (n, count) in enumerate(entries, 1):
        l = by[n]
        alike = f" <span class='diff'>and {count - 1} alike</span>" if count > 1 else ""
        fixes = "".join(f"<div class='fix'>{escape(f['text'])} <span class='diff'>[{escape(f['id'])}, "
                        f"{escape(f['difficulty'])}]</span></div>" for f in l["fixes"][:2]) or "-"
        rows.append(f"<tr><td class='num'>{i}</td><td><code>{escape(n)}</code>{alike}<div class='diff'>{escape(l['op_type'])} "
                    f"{u.shape(l['output_shape'])}</div></td><td class='num'>{u.t(l['latency_s'])}</td>"
                    f"<td class='num'>{u.t(l['lost_s'])}</td><td class='num'>{u.pct(l['occupancy'])}</td>"
                    f"<td class='num'>{u.pct(l['tile_efficiency'])}</td><td>{_cause(l['cause'])}</td><td>{fixes}</td></tr>")
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>dnnperf: {escape(main['model']['name'])} on {escape(hw['name'])}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{escape(main['model']['name'])} on {escape(hw['title'])}</h1>",
        *([f"<p class='sub'><b>{escape(partial)}</b></p>"] if partial else []),
        f"<p class='sub'>batch {st['batch']}, precision {escape(str(st['precision']))}, fusion {escape(st['fusion'])}, "
        + (f"runtime {escape(str(st.get('runtime')))}, " if hw.get("kind") == "gpu" and st.get("runtime") else "")
        + f"input {'prefetched' if st['overlap_input'] else 'not overlapped'}. Convention: 1 MAC = 2 ops.</p>",
        "<div class='cards'>" + "".join(f"<div class='card'><span>{k}</span><b>{escape(v)}</b></div>" for k, v in cards)
        + "</div>",
        "<h2>Roofline</h2>",
        f"<figure>{charts[0]}<figcaption>Each layer at its arithmetic intensity and achieved rate, sized by its share "
        "of time and coloured by its limiting cause; roofs for every unit and precision the model runs on.</figcaption></figure>",
        "<h2>Where the time goes</h2>",
        f"<figure>{charts[1]}<figcaption>From the time at the quoted peak to the estimate, one step per cause."
        "</figcaption></figure>",
        f"<h2>Top {len(entries)} bottlenecks</h2>",
        "<table><thead><tr><th class='num'>#</th><th>layer</th><th class='num'>time</th><th class='num'>lost</th>"
        "<th class='num'>lanes</th><th class='num'>tile</th><th>cause</th><th>fix</th></tr></thead><tbody>"
        + "".join(rows) + "</tbody></table>",
    ]
    if main.get("llm"):  # a decoder's step: its serving figures, cache and memory, the LLM fixes
        block = llm_block(main["llm"])
        parts.append(f"<h2>{escape(block.title)}</h2><ul>" + "".join(f"<li>{escape(x)}</li>" for x in block.lines)
                     + "</ul>")
    if main.get("model_fixes"):
        parts.append("<h2>Model-level fixes</h2><ul>" + "".join(
            f"<li><b>{escape(f['id'])}</b> ({escape(f['difficulty'])}): {escape(f['text'])}</li>" for f in main["model_fixes"])
            + "</ul>")
    if comparison:
        crow = "".join(
            f"<tr><td>{escape(c['hardware']['name'])}</td><td class='num'>{u.t(c['totals']['latency_s'])}</td>"
            f"<td class='num'>{u.rate(c['totals']['throughput_per_s'])}</td><td class='num'>{u.tops(c['totals']['achieved_tops'])} / "
            f"{c['totals'].get('peak_tops', c['hardware']['peak_tops']):g}</td><td class='num'>{u.pct(c['totals']['fraction_of_peak'])}</td>"
            f"<td>{_cause(c['totals']['top_cause'])}{_no_fit(c)}</td></tr>"
            for c in sorted(comparison, key=lambda c: (c["totals"]["latency_s"], c["hardware"]["name"])))
        parts.append("<h2>Across targets</h2><table><thead><tr><th>hardware</th><th class='num'>latency</th>"
                     "<th class='num'>throughput/s</th><th class='num'>TOP/s achieved / quoted</th>"
                     "<th class='num'>% of peak</th><th>top cause</th></tr></thead><tbody>" + crow + "</tbody></table>")
    notes = [w for w in main.get("warnings", []) if not w.startswith("PARTIAL ESTIMATE")]  # that one heads the page
    if notes:  # the assumptions made for the user
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{escape(w)}</li>" for w in notes) + "</ul>")
    for xs, title in zip(listed_ops(main), ("Unsupported ops (not scored)", "Costed at a stated bound (scored)")):
        if xs:  # left out of the figures; counted at an upper (or lower) bound of their run-time cost
            parts.append(f"<h2>{title}</h2><ul>" + "".join(
                f"<li>{escape(x['op_type'])} x{x['count']}: {escape(x['reason'])}</li>" for x in xs) + "</ul>")
    parts.append("<h2>Settings</h2><table><tbody>" + "".join(
        f"<tr><td>{escape(k)}</td><td>{escape(str(v))}</td></tr>" for k, v in [
            ("model", main["model"]["name"]), ("nodes", main["model"]["nodes"]), ("opset", main["model"]["opset"]),
            ("hardware", hw["title"]), ("profile validated", hw.get("validation") or "not validated"), ("DRAM bandwidth", f"{hw['dram_gbs']:g} GB/s"), ("lanes", f"{hw['lanes']:,}"),
            ("launch overhead", f"{hw['launch_overhead_us']:g} us"), ("batch", st["batch"]), ("precision", st["precision"]),
            ("fusion", st["fusion"]), ("tool", f"dnnperf {__version__}")]) + "</tbody></table>")
    parts.append(f"<script>{SELF_CHECK}</script></body></html>\n")
    return "\n".join(parts)


def _html_report(doc, style) -> str:
    reports = doc.data["reports"]
    return report(reports[0], reports if len(reports) > 1 else None, doc.options.get("top", 15))


def _report(doc, style) -> str:
    return report(doc.data, None, doc.options.get("top", 15))


RENDERERS = {"html_report": _html_report, "report": _report}
