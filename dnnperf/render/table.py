"""Rich tables and panels for people at a terminal (plain text, no box drawing when piped)."""

from __future__ import annotations

import os
import sys

from dnnperf.render import units as u


def console(stderr: bool = False):
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    plain = not tty or bool(os.environ.get("NO_COLOR"))
    return Console(file=stream, no_color=plain, highlight=False, width=None if tty else 200,
                   force_terminal=False if not tty else None, emoji=False)


def _box(con):
    from rich import box

    return box.SIMPLE_HEAD if con.is_terminal and not con.no_color else None


def _tbl(con, title, columns):
    from rich.table import Table

    t = Table(title=title, box=_box(con), show_edge=False, pad_edge=False, title_justify="left")
    for name, just in columns:
        t.add_column(name, justify=just, overflow="fold")
    return t


def report(con, d: dict, top: int = 10) -> None:
    t = d["totals"]
    hw = d["hardware"]
    st = d["settings"]
    lat = t["latency_s"] or 1.0
    lines = [
        f"[bold]{d['model']['name']}[/bold] on [bold]{hw['title']}[/bold]  "
        f"(batch {st['batch']}, precision {st['precision']}, fusion {st['fusion']})",
        f"estimated latency {u.t(t['latency_s'])}   throughput {t['throughput_per_s']:.4g}/s   "
        f"{u.count(t['macs'])}MACs  {u.b(t['bytes'])} moved  {t['launches']} launches",
        f"quoted {hw['peak_tops']:g} TOP/s {hw['peak_precision']}; this model reaches {t['achieved_tops']:.3g} TOP/s "
        f"({u.pct(t['fraction_of_peak'])}); top cause: {t['top_cause']}",
    ]
    gap = lat - t["ideal_s"]
    losses = sorted(((k, v) for k, v in t["losses_s"].items() if v > 0), key=lambda kv: -kv[1])
    if losses and gap > 0:
        where = t.get("loss_where", {})

        def part(k, v):
            w = where.get(k)
            tail = f"; {w['share']:.0%} of it in {w['layers']} {w['family']} layers" if w else ""
            return f"{k} {u.t(v)} ({v / gap:.0%} of the gap{tail})"

        lines.append("where the time goes: at peak " + u.t(t["ideal_s"]) + " + " + ", ".join(part(k, v) for k, v in losses[:4]))
    wf = t.get("fusion_whatif_latency_s", {})
    if len(wf) == 2:
        lines.append("fusion what-if: " + ", ".join(f"{k} {u.t(v)}" for k, v in wf.items()))
    if con.is_terminal and not con.no_color:
        from rich.panel import Panel

        con.print(Panel("\n".join(lines), title="dnnperf", expand=False))
    else:
        for line in lines:
            con.print(line)
        con.print("")
    tbl = _tbl(con, f"Top {top} bottlenecks (ranked by time lost against the quoted peak)",
               [("#", "right"), ("layer", "left"), ("op", "left"), ("time", "right"), ("lost", "right"),
                ("occ", "right"), ("tile", "right"), ("cause", "left"), ("fix", "left")])
    by = {l["name"]: l for l in d["layers"]}
    for i, name in enumerate(d["ranking"][:top], 1):
        l = by[name]
        fix = l["fixes"][0]["text"] if l["fixes"] else "-"
        tbl.add_row(str(i), _short(name), l["op_type"], u.t(l["latency_s"]), u.t(l["lost_s"]), u.pct(l["occupancy"]),
                    u.pct(l["tile_efficiency"]), l["cause"], fix)
    con.print(tbl)
    if d.get("model_fixes"):
        con.print("")
        con.print("Model-level fixes:")
        for f in d["model_fixes"]:
            con.print(f"  - {f['id']} [{f['difficulty']}]: {f['text']}", markup=False)
    if d["unsupported_ops"]:
        con.print("")
        con.print(f"Unsupported ops, NOT scored ({sum(x['count'] for x in d['unsupported_ops'])} nodes):")
        for x in d["unsupported_ops"]:
            con.print(f"  - {x['op_type']} x{x['count']}: {x['reason']}", markup=False)
    _notes(d)


def inspection(con, d: dict) -> None:
    tbl = _tbl(con, f"{d['model']['name']}: per-layer workloads (1 MAC = 2 ops)",
               [("layer", "left"), ("op", "left"), ("output", "left"), ("dtype", "left"), ("MACs", "right"),
                ("other ops", "right"), ("act read", "right"), ("weights", "right"), ("written", "right"),
                ("ops/B", "right")])
    for l in d["layers"]:
        tbl.add_row(_short(l["name"]), l["op_type"], u.shape(l["output_shape"]), l["dtype"] or "-", u.count(l["macs"]),
                    u.count(l["other_ops"]), u.b(l["act_bytes_read"]), u.b(l["weight_bytes"]), u.b(l["bytes_written"]),
                    "-" if l["intensity_ops_per_byte"] is None else f"{l['intensity_ops_per_byte']:.3g}")
    t = d["totals"]
    tbl.add_row("TOTAL", "", "", "", u.count(t["macs"]), u.count(t["other_ops"]), u.b(t["act_bytes_read"]),
                u.b(t["weight_bytes"]), u.b(t["bytes_written"]), f"{t['intensity']:.3g}")
    con.print(tbl)
    con.print(f"{t['nodes']} nodes, {u.count(t['macs'])}MACs = {u.count(t['ops'])}ops "
              f"({u.count(t['other_ops'])} of them non-MAC), {u.b(t['bytes'])} moved")
    if d["unsupported_ops"]:
        con.print(f"Unsupported ops ({sum(x['count'] for x in d['unsupported_ops'])} nodes, NOT counted):")
        for x in d["unsupported_ops"]:
            con.print(f"  - {x['op_type']} x{x['count']}: {x['reason']}", markup=False)
    _notes(d)


def _notes(d: dict) -> None:
    """Notes (e.g. an assumed batch size) go to stderr, like every other diagnostic."""
    err = console(stderr=True)
    for w in d.get("warnings", [])[:10]:
        err.print(f"note: {w}", markup=False)


def simple(con, title: str, headers: list[str], rows: list[list[str]]) -> None:
    tbl = _tbl(con, title, [(h, "left" if i == 0 else "right") for i, h in enumerate(headers)])
    for r in rows:
        tbl.add_row(*[str(c) for c in r])
    con.print(tbl)


def _short(name: str, n: int = 48) -> str:
    return name if len(name) <= n else "..." + name[-(n - 3):]
