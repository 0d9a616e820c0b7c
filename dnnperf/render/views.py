"""What each document looks like to a person, as format-neutral blocks, and to a spreadsheet, as rows.

``human(doc)`` returns a list of blocks (``Lines``, ``Tab``) that the table and Markdown formats
draw; ``machine(doc)`` returns (columns, rows) of raw numbers for CSV. One view per document kind;
formats never look inside a document themselves, so a new format is one module and a new kind is
one view here.

Why one module this long: one view per document kind, side by side, so a new kind or a
changed field is seen against all the others; each view is a few lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dnnperf.fmt import b, count, counted, pct, peak_basis, rate, shape, t, tops


@dataclass
class Lines:
    """Free text: one string per line. ``title`` is a heading; ``panel`` boxes it on a terminal."""

    lines: list[str]
    title: str = ""
    panel: bool = False


@dataclass
class Tab:
    """A table of already formatted cells; the first column is left-aligned, the rest right-aligned
    unless ``left`` names more left-aligned columns."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    left: tuple[int, ...] = (0,)
    notes: list[str] = field(default_factory=list)


def _short(name: str, n: int = 48) -> str:
    return name if len(name) <= n else "..." + name[-(n - 3):]


# -- report -----------------------------------------------------------------------------------


def coverage_line(d: dict) -> str | None:
    cov = d.get("coverage")
    if not cov or cov.get("complete", True):
        return None
    k = cov["unscored_by_kind"]
    lost = f", {k['shape_lost']} more downstream with their shapes lost" if k["shape_lost"] else ""
    share = f"; scored nodes are at most {cov['scored_share']:.0%} of the time" if "scored_share" in cov else ""
    return (f"PARTIAL ESTIMATE: {cov['nodes_scored']} of {cov['nodes_total']} nodes scored — not scored: "
            f"{', '.join(cov.get('unscored_op_types', [])[:5])}{lost}{share}; the figures below leave them out")


def memory_line(m: dict | None) -> str | None:
    """The report's memory section in one line (None without one or without a device size)."""
    if not m or not m.get("device_bytes"):
        return None
    whose = {"model inputs": "the model's inputs", "live at the peak": "live at the peak"}.get(
        m["activations_of"], "the largest layer's input and output")
    share = f", a die's share of {m['dies']}" if m["dies"] > 1 else ""
    verdict = "" if m["fits"] else " — does NOT fit"
    return (f"memory held, at least: weights {b(m['weights_bytes'])} + activations {b(m['activation_bytes'])} ({whose}"
            f"{share}) = {b(m['needed_bytes'])} of {b(m['device_bytes'])}{' a die' if m['dies'] > 1 else ''}{verdict}")


def report_blocks(d: dict, top: int = 10) -> list:
    tot = d["totals"]
    hw = d["hardware"]
    st = d["settings"]
    lat = tot["latency_s"] or 1.0
    lines = []
    partial = coverage_line(d)
    if partial:
        lines.append(partial)
    lines += [
        f"{d['model']['name']} on {hw['title']}  (batch {st['batch']}, precision {st['precision']}, fusion {st['fusion']}"
        + (f", runtime {st['runtime']})" if hw.get("kind") == "gpu" else ")"),
        f"estimated latency {t(tot['latency_s'])}   throughput {rate(tot['throughput_per_s'])}/s   "
        f"{counted(tot['macs'], 'MACs')}  {b(tot['bytes'])} moved  {tot['launches']} launches"
        + (f" ({tot['kernels']} device kernels)" if tot.get("kernels", tot["launches"]) != tot["launches"] else ""),
        f"quoted {hw['peak_tops']:g} TOP/s {hw['peak_precision']}; this model reaches {tops(tot['achieved_tops'])} TOP/s "
        f"({pct(tot['fraction_of_peak'])}{peak_basis(tot, hw)}); top cause: {tot['top_cause']}",
    ]
    gap = lat - tot["ideal_s"]
    losses = sorted(((k, v) for k, v in tot["losses_s"].items() if v > 0), key=lambda kv: (-kv[1], kv[0]))
    if losses and gap > 0:
        where = tot.get("loss_where", {})

        def part(k, v):
            w = where.get(k)
            tail = f"; {w['share']:.0%} of it in {w['layers']} {w['family']} layers" if w else ""
            return f"{k} {t(v)} ({v / gap:.0%} of the gap{tail})"

        lines.append("where the time goes: at peak " + t(tot["ideal_s"]) + " + " + ", ".join(part(k, v) for k, v in losses[:4]))
    wf = tot.get("fusion_whatif_latency_s", {})
    if len(wf) == 2:
        lines.append("fusion what-if: " + ", ".join(f"{k} {t(v)}" for k, v in wf.items()))
    mem = memory_line(d.get("memory")) if not d.get("llm") else None  # (a decoder's request: its own line below)
    if mem:
        lines.append(mem)
    blocks: list = [Lines(lines, title="dnnperf", panel=True)]
    if d.get("llm"):
        blocks.append(llm_block(d["llm"]))
    by = {layer["name"]: layer for layer in d["layers"]}
    rows = []
    for i, (name, n) in enumerate(ranked_entries(d, top), 1):
        layer = by[name]
        fix = layer["fixes"][0]["text"] if layer["fixes"] else "-"
        rows.append([str(i), _short(name), str(n), layer["op_type"], t(layer["latency_s"]), t(layer["lost_s"]),
                     pct(layer["occupancy"]), pct(layer["tile_efficiency"]), layer["cause"], fix])
    blocks.append(Tab(f"Top {top} bottlenecks (ranked by time lost against the quoted peak; n: alike layers, each "
                      "with these figures)",
                      ["#", "layer", "n", "op", "time", "lost", "occ", "tile", "cause", "fix"], rows, left=(1, 3, 8, 9)))
    if d.get("model_fixes"):
        blocks.append(Lines([f"{f['id']} [{f['difficulty']}]: {f['text']}" for f in d["model_fixes"]],
                            title="Model-level fixes"))
    blocks += _listed_ops(d, "NOT scored ({n} nodes)")
    return blocks


def ranked_entries(d: dict, top: int) -> list[tuple[str, int]]:
    """(layer name, how many alike layers it stands for) for the first ``top`` entries of a report's
    ranking: its ``ranked_groups`` (alike layers once), or its plain ``ranking`` in a document that has
    none (a report written by an older version)."""
    groups = d.get("ranked_groups")
    if groups is None:
        return [(name, 1) for name in d["ranking"][:top]]
    return [(g["layer"], 1 + len(g["alike"])) for g in groups[:top]]


def llm_block(m: dict) -> Lines:
    """Serving figures of a decoder's phases (see dnnperf.llm.phases for the conventions)."""
    out = [f"PARTIAL: {m['partial']}"] if m.get("partial") else []
    dec = m["decoder"]
    cross = dec.get("cross_attention_inputs", 0)
    out.append(f"KV cache: {dec['cache_inputs']} inputs over {dec['layers']} layers"
               + (f" ({cross} of them cross-attention, as long as the encoder's input at every step)" if cross else "")
               + f", {dec['cache_dtype']}, {b(dec['kv_bytes_per_token'])} per token per sequence"
               + (f" ({m['kv_cache']['dtype']} under the precision what-if: {b(m['kv_cache']['bytes_per_token'])})"
                  if m["kv_cache"].get("dtype", dec["cache_dtype"]) != dec["cache_dtype"] else "") + "; symbols set: "
               + ", ".join(f"{k}={v}" for k, v in dec["symbols"].items() if v)
               + (f"; {dec['branch_input']} set to 1 for a step reading the cache, 0 for a prefill"
                  if dec.get("branch_input") else ""))
    if "prefill" in m:
        p = m["prefill"]
        out.append(f"prefill {p['prompt']} tokens x batch {m['batch']}: time to first token {t(p['ttft_s'])}, "
                   f"{rate(p['tokens_per_s'])} prompt tokens/s, {tops(p['achieved_tops'])} TOP/s, {p['bound']}-bound")
    if "decode" in m:
        q = m["decode"]
        out.append(f"decode at context {q['context']} x batch {m['batch']}: {t(q['latency_s'])} per output token = "
                   f"{rate(q['tokens_per_s_per_sequence'])} tokens/s per sequence, {rate(q['tokens_per_s'])} tokens/s in total, "
                   f"{tops(q['achieved_tops'])} TOP/s, {q['bound']}-bound")
    if "end_to_end" in m:
        e = m["end_to_end"]
        out.append(f"request of {e['prompt']} prompt + {e['generate']} output tokens: {t(e['seconds'])} end to end "
                   f"({t(e['mean_time_per_output_token_s'])} per output token on average, "
                   f"{rate(e['output_tokens_per_s'])} output tokens/s in total)")
    tp = m.get("tensor_parallel")
    if tp:
        out.append(f"tensor parallel over {tp['devices']} devices: every figure above is one device's (its share of the "
                   f"split layers, the replicated ones whole) with the step's collectives added: "
                   f"{tp['all_reduces_per_step']} all-reduces" + (f" + {tp['all_gathers_per_step']} all-gather"
                                                                  if tp["all_gathers_per_step"] else "")
                   + f" of {b(tp['bytes_per_step'])} in all per {tp['phase']} step, {t(tp['collective_seconds_per_step'])} "
                   f"({tp['share_of_step']:.0%} of it) at {tp['link_gbs']:g} GB/s and {tp['latency_us']:g} us each"
                   + (f" (assumed: {tp['assumed']})" if tp.get("assumed") else "")
                   + (f"; each key/value head is held, computed and read on {tp['key_value_head_copies']} devices "
                      "(fewer heads than devices)" if tp.get("key_value_head_copies") else ""))
    mem, kv = m["memory"], m["kv_cache"]
    cap = f" of {b(mem['device_bytes'])}" if mem.get("device_bytes") else ""
    n = mem.get("dies", 1)
    share = f" (a die's share of {n}: {b(mem['needed_bytes'] - mem['weights_bytes'])})" if n > 1 else ""
    act = mem.get("activation_bytes", 0)
    cross = kv.get("cross_attention_bytes", 0)
    devs = mem.get("tensor_parallel_devices", 1)
    spread = mem.get("cache_devices", devs)  # fewer than the devices when each key/value head is on several
    held = f"{b(kv['bytes'])} / {spread}" if spread > 1 else b(kv["bytes"])
    out.append(f"memory{' of each die' if n > 1 else ' of each device' if devs > 1 else ''}: weights "
               f"{b(mem['weights_bytes'])} + KV cache {held} "
               f"({kv['tokens']} tokens x batch {m['batch']}" + (f" + {b(cross)} cross-attention" if cross else "") + ")"
               + (f" + activations {b(act)}" if act else "")
               + f"{share} = {b(mem['needed_bytes'])}{cap}"
               + ("" if mem.get("fits") is not False else f" — does NOT fit ({b(mem['missing_bytes'])} missing)"))
    for f in m.get("fixes", []):
        out.append(f"fix {f['id']} [{f['difficulty']}]: {f['text']}"
                   + (f" (assumes {f['assumes']})" if f.get("assumes") and f["id"] == "speculative_decoding" else ""))
    return Lines(out, title=f"LLM phase: {m['phase']}")


def _report_doc(doc) -> list:
    return report_blocks(doc.data, doc.options.get("top", 10))


def _reports_doc(doc) -> list:
    out: list = []
    for d in doc.data["reports"]:
        out.extend(report_blocks(d, doc.options.get("top", 10)))
    return out


REPORT_COLUMNS = ["model", "hardware", "name", "op_type", "family", "output_shape", "dtype", "macs", "other_ops",
                  "ops", "act_bytes_read", "weight_bytes", "bytes_written", "intensity_ops_per_byte", "unit",
                  "algorithm", "precision", "tile_efficiency", "occupancy", "ideal_s", "compute_s", "memory_s", "launch_s",
                  "device_s", "latency_s", "lost_s", "cause", "fix"]


def _report_rows(reports: list[dict]):
    rows = []
    for d in reports:
        for layer in d["layers"]:
            r = dict(layer)
            r["model"] = d["model"]["name"]
            r["hardware"] = d["hardware"]["name"]
            r["output_shape"] = "x".join(map(str, layer["output_shape"])) if layer["output_shape"] is not None else ""
            r["fix"] = layer["fixes"][0]["text"] if layer["fixes"] else ""
            rows.append(r)
    return REPORT_COLUMNS, rows


# -- inspection -------------------------------------------------------------------------------

INSPECT_COLUMNS = ["name", "op_type", "family", "output_shape", "dtype", "macs", "other_ops", "act_bytes_read",
                   "weight_bytes", "bytes_written", "intensity_ops_per_byte", "parallel_work", "supported"]


def _inspection(doc) -> list:
    d = doc.data
    rows = []
    for layer in d["layers"]:
        ops_b = layer["intensity_ops_per_byte"]
        rows.append([_short(layer["name"]), layer["op_type"], shape(layer["output_shape"]), layer["dtype"] or "-",
                     count(layer["macs"]), count(layer["other_ops"]), b(layer["act_bytes_read"]),
                     b(layer["weight_bytes"]), b(layer["bytes_written"]), "-" if ops_b is None else f"{ops_b:.3g}"])
    tot = d["totals"]
    rows.append(["TOTAL", "", "", "", count(tot["macs"]), count(tot["other_ops"]), b(tot["act_bytes_read"]),
                 b(tot["weight_bytes"]), b(tot["bytes_written"]), f"{tot['intensity']:.3g}"])
    blocks: list = []
    partial = coverage_line(d)
    if partial:
        blocks.append(Lines([partial]))
    blocks.append(Tab(f"{d['model']['name']}: per-layer workloads (1 MAC = 2 ops)",
                      ["layer", "op", "output", "dtype", "MACs", "other ops", "act read", "weights", "written", "ops/B"],
                      rows, left=(0, 1, 2, 3)))
    blocks.append(Lines([f"{tot['nodes']} nodes, {counted(tot['macs'], 'MACs')} = {counted(tot['ops'], 'ops')} "
                         f"({count(tot['other_ops'])} of them non-MAC), {b(tot['bytes'])} moved"]))
    blocks += _listed_ops(d, "Unsupported ops ({n} nodes, NOT counted)")
    return blocks


def listed_ops(d: dict) -> tuple[list, list]:
    """A document's ``unsupported_ops`` entries in two lists: those left out of the figures, and those
    counted at a stated bound rather than their exact run-time cost (a NonZero at every element
    non-zero, a Loop of unknown count). Every renderer lists them apart."""
    bounded = [x for x in d["unsupported_ops"] if x.get("kind") == "bound"]
    return [x for x in d["unsupported_ops"] if x.get("kind") != "bound"], bounded


def _listed_ops(d: dict, missing_title: str) -> list[Lines]:
    """``listed_ops`` as blocks, the left-out ones under ``missing_title`` (formatted with their count ``n``)."""
    out = []
    for xs, title in zip(listed_ops(d), (missing_title, "Costed at a stated bound ({n} nodes, counted)")):
        if xs:
            out.append(Lines([f"{x['op_type']} x{x['count']}: {x['reason']}" for x in xs],
                             title=title.format(n=sum(x["count"] for x in xs))))
    return out


def _inspection_rows(doc):
    rows = []
    for layer in doc.data["layers"]:
        r = dict(layer)
        r["output_shape"] = "x".join(map(str, layer["output_shape"])) if layer["output_shape"] is not None else ""
        rows.append(r)
    return INSPECT_COLUMNS, rows


# -- rows documents ---------------------------------------------------------------------------


def _totals(doc) -> list:
    rows = [[r["model"], r["hardware"], t(r["latency_s"]), f"{tops(r['achieved_tops'])}", pct(r["fraction_of_peak"]),
             pct(r.get("coverage")) if r.get("coverage", 1.0) < 1 else "100%", r["top_cause"]] for r in doc.data["rows"]]
    return [Tab("dnnperf totals", ["model", "hardware", "latency", "TOP/s", "% of peak", "scored", "top cause"], rows,
                left=(0, 1, 6))]


def _compare(doc) -> list:
    d = doc.data
    rows = [[r["hardware"], t(r["latency_s"]), rate(r['throughput_per_s']),
             f"{tops(r['achieved_tops'])} / {r.get('peak_basis_tops', r['peak_tops']):g}", pct(r["fraction_of_peak"]),
             pct(r["mean_occupancy"]),
             "unpriced" if r["cost_per_million_usd"] is None else f"{r['cost_per_million_usd']:.3g}",
             r["top_cause"] + (" (does not fit)" if r.get("fits_memory") is False else
                               "" if r["meets_requirement"] else " (misses)"), _short(r["top_layer"] or "-", 40)]
            for r in d["rows"]]
    n = max((r.get("tensor_parallel_devices", 1) for r in d["rows"]), default=1)
    split = (f", each target {n} devices (--tp {n}: latency and $ the step's with its collectives, TOP/s and memory one "
             "device's)") if n > 1 else ""
    blocks: list = [Tab(f"{d['model']} across {len(rows)} targets (batch {d['settings']['batch']}{split})",
                        ["hardware", "latency", "throughput/s", "achieved TOP/s", "% of peak", "lanes busy", "$/1M inf",
                         "top cause", "top bottleneck"], rows, left=(0, 7, 8))]
    rec = d.get("recommendation")
    if rec:
        lines = []
        if rec["chosen"]:
            lines.append(f"recommended: {rec['chosen']} ({rec.get('basis', '')}). {rec.get('note', '')}".rstrip())
        else:
            lines.append(f"no target meets the requirement. {rec.get('note', '')}".rstrip())
        for m in rec["misses"]:
            why = "its memory cannot hold the run" if m.get("fits_memory") is False else f"limited by {m['top_cause']}"
            lines.append(f"misses: {m['hardware']} {t(m['latency_s'])} ({why})")
        blocks.append(Lines(lines))
    return blocks


def _sweep(doc) -> list:
    d = doc.data
    rows = [[r["precision"] if r.get("runs_as", r["precision"]) == r["precision"] else f"{r['precision']} ({r['runs_as']})",
             str(r["batch"]), t(r["latency_s"]), rate(r['throughput_per_s']), pct(r["mean_occupancy"]),
             f"{tops(r['achieved_tops'])}", pct(r["fraction_of_peak"]),
             r["top_cause"] + (" (does not fit)" if r.get("fits_memory") is False else "")] for r in d["rows"]]
    stops = "; ".join(f"{p}: {'batch ' + str(x) if x else 'not within the swept range'}"
                      for p, x in d["starvation_ends_at_batch"].items())
    limits = "; ".join(f"{p}: {x:,}" for p, x in d.get("memory_holds_batch", {}).items() if x is not None)
    return [Tab(f"{d['model']} on {d['hardware']}: batch sweep",
                ["precision", "batch", "latency", "throughput/s", "lanes busy", "TOP/s", "% of peak", "top cause"], rows,
                left=(0, 7)),
            Lines([f"starvation (idle lanes) stays below 10% of the latency from: {stops}"]
                  + ([f"memory holds at most batch: {limits} (the weights and the activations held next to them; "
                      "a runtime's workspaces come on top)"] if limits else []))]


def _llm_sweep(doc) -> list:
    d = doc.data
    rows = [[str(r["batch"]), str(r["context"]), t(r["latency_s"]), rate(r['tokens_per_s']),
             rate(r['tokens_per_s_per_sequence']), f"{tops(r['achieved_tops'])}", r["bound"], b(r["kv_cache_bytes"]),
             b(r["needed_bytes"]), {True: "yes", False: "NO", None: "-"}[r["fits"]]] for r in d["rows"]]
    s = d["summary"]
    lines = [f"decode turns compute-bound at batch {s['compute_bound_from_batch']}" if s["compute_bound_from_batch"]
             else "memory- or overhead-bound over the whole swept range",
             f"memory holds up to batch {s['fits_up_to_batch']}" if s["fits_up_to_batch"] is not None
             else "the device's memory size is not in the profile",
             f"best total throughput that fits: {rate(s['best_tokens_per_s'])} tokens/s at batch {s['best_batch']}"
             if s["best_batch"] else "no swept batch fits in memory"]
    n = d.get("tensor_parallel_devices", 1)
    over = f" over {n} devices (--tp {n}: step, TOP/s and needs are one device's, the step with its collectives)" if n > 1 else ""
    return [Tab(f"{d['model']} on {d['hardware']}{over}: {d['phase']} sweep (tokens/s: per step x batch)",
                ["batch", "context", "step", "tokens/s", "per sequence", "TOP/s", "bound", "KV cache", "needs", "fits"],
                rows, left=(6, 9)), Lines(lines)]


def _change(r) -> str:
    return "n/a" if r["change"] is None else f"{r['change'] * 100:+.1f}%"


def _check(doc) -> list:
    res = doc.data
    lines = []
    for r in res["results"]:
        mark = r["status"].upper() if r.get("passed", True) or r["status"] == "slower" else "FAILED"
        lines.append(f"{mark:<6} {r['model']} on {r['hardware']}: {t(r['old_latency_s'])} -> "
                     f"{t(r['new_latency_s'])} ({_change(r)})")
        for p in r.get("problems", []):
            lines.append(f"    problem: {p}")
        for n in r["layers"][:10]:
            lines.append(f"    {n['change']:<7} {n['layer']} ({n['op_type']}): {t(n['old_s'])} -> "
                         f"{t(n['new_s'])}, cause {n['cause']}")
        if len(r["layers"]) > 10:
            lines.append(f"    ... {len(r['layers']) - 10} more changed layers (-f json lists all)")
    tol = f"tolerance {res['tolerance'] * 100:g}%" + (f" and {t(res['abs_tolerance_s'])}" if res.get("abs_tolerance_s") else "")
    lines.append(("PASSED" if res["passed"] else "FAILED") + f" ({tol})")
    return [Lines(lines)]


def _check_md(doc) -> list:
    """The shape a CI step summary wants: a results table, then the layers behind each failure."""
    res = doc.data
    blocks: list = [Tab(f"dnnperf latency gate: {'passed' if res['passed'] else 'FAILED'} "
                        f"(tolerance {res['tolerance'] * 100:g}%)",
                        ["model", "hardware", "baseline", "now", "change", "status"],
                        [[r["model"], r["hardware"], t(r["old_latency_s"]), t(r["new_latency_s"]), _change(r),
                          r["status"] if r.get("passed", True) or r["status"] == "slower" else "failed"]
                         for r in res["results"]], left=(0, 1, 5))]
    for r in res["results"]:
        if r.get("problems"):
            blocks.append(Lines(r["problems"], title=f"Problems with {r['model']} on {r['hardware']}"))
        if r["status"] == "slower" and r["layers"]:
            blocks.append(Lines([f"{n['layer']} ({n['op_type']}) {n['change']}: {t(n['old_s'])} -> {t(n['new_s'])}, "
                                 f"cause {n['cause']}" for n in r["layers"][:10]],
                                title=f"Layers behind the regression of {r['model']} on {r['hardware']}"))
    return blocks


def _check_rows(doc):
    cols = ["model", "hardware", "status", "passed", "old_latency_s", "new_latency_s", "change", "coverage", "problems"]
    return cols, [{k: r.get(k) for k in cols} for r in doc.data["results"]]


def _lut(doc) -> list:
    rows = doc.data["rows"]
    cols = list(rows[0]) if rows else []
    return [Tab(f"latency lookup table for {doc.data['hardware']} ({len(rows)} rows)", cols,
                [[_cell(r[c]) for c in cols] for r in rows], left=(0, 1))]


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _shapes(doc) -> list:
    d = doc.data
    top = doc.options.get("top", 20)
    alike = _alike(d["layers"], lambda r: (r["op_type"], r["latency_s"], r["tile_efficiency"], r["text"]), top)
    rows = [[_short(r["layer"]), str(n), r["op_type"], t(r["latency_s"]), pct(r["tile_efficiency"]), r["text"]]
            for r, n in alike]
    return [Tab(f"{d['model']} on {d['hardware']}: widths that fit the hardware better (n: alike layers)",
                ["layer", "n", "op", "time", "tile fit", "nearby widths (this layer only)"], rows, left=(0, 2, 5))]


def _shapes_rows(doc):
    cols = ["layer", "op_type", "dim", "current", "latency_s", "unit", "tile_efficiency", "best_to",
            "best_time_per_mac_gain", "text"]
    rows = []
    for r in doc.data["layers"]:
        s = r["suggestions"][0]
        rows.append({**r, "best_to": s["to"], "best_time_per_mac_gain": s["time_per_mac_gain"]})
    return cols, rows


def _alike(rows: list, key, top: int) -> list[tuple]:
    """(the first row, how many rows share its ``key``) for the first ``top`` distinct keys, in order:
    a table's alike layers (a transformer's equal products) once, with their number."""
    groups: dict = {}
    for r in rows:
        k = key(r)
        if k in groups:
            groups[k][1] += 1
        else:
            groups[k] = [r, 1]
    return [tuple(g) for g in list(groups.values())[:top]]


def _diff(doc) -> list:
    d = doc.data
    top = doc.options.get("top", 20)
    alike = _alike(d["layers"], lambda r: (r["op_type"], r["a_s"], r["b_s"], r["matched_by"], r["cause_b"]), top)
    rows = [[_short(r["layer_a"] or r["layer_b"], 44), str(n), r["op_type"], t(r["a_s"]), t(r["b_s"]),
             ("+" if r["delta_s"] >= 0 else "-") + t(abs(r["delta_s"])), r["matched_by"], r["cause_b"] or "-"]
            for r, n in alike]
    return [Tab(f"{d['a']} -> {d['b']} on {d['hardware']}: {t(d['a_latency_s'])} -> {t(d['b_latency_s'])} "
                "(n: alike layers, each with these figures)",
                ["layer (A / B)", "n", "op", "A", "B", "delta", "matched by", "cause B"], rows, left=(0, 2, 6, 7))]


def _validate(doc) -> list:
    d = doc.data
    rows = sorted(d["layers"], key=lambda r: (-(r["measured_s"] or 0), r["layer"]))[:15]
    return [Tab(f"{d['model']} on {d['hardware']}: predicted vs measured (ONNX Runtime, {d['threads']} threads)",
                ["layer", "op", "predicted", "measured", "error"],
                [[_short(r["layer"]), r["op_type"], t(r["predicted_s"]), t(r["measured_s"]),
                  "-" if r["error"] is None else f"{r['error'] * 100:+.0f}%"] for r in rows], left=(0, 1)),
            Lines([f"model: predicted {t(d['predicted_s'])}, measured {t(d['measured_s'])}, "
                   f"error {d['error'] * 100:+.1f}%; measured top-5 inside predicted top-10: "
                   f"{d['top5_inside_predicted_top10']}; unmatched kernels: {len(d['kernels_unmatched'])}"
                   + (f"; {d['rounds']} measurement rounds, spread {d['spread'] * 100:.1f}%" if "rounds" in d else "")
                   + (f"; machine speed vs calibration: compute x{d['speed_vs_calibration']['compute']:.3f}, memory "
                      f"x{d['speed_vs_calibration']['memory']:.3f}"
                      + (f", cache x{d['speed_vs_calibration']['cache']:.3f}" if "cache" in d["speed_vs_calibration"] else "")
                      + f" (as calibrated: {t(d['predicted_as_calibrated_s'])})"
                      if d.get("speed_vs_calibration") else "")]),
            Tab("Top layers: measured next to predicted (rank in each)",
                ["layer", "measured", "rank", "predicted", "rank"],
                [[_short(r["layer"]), t(r["measured_s"]), str(r["measured_rank"] or "-"), t(r["predicted_s"]),
                  str(r["predicted_rank"] or "-")] for r in d.get("top_layers", [])], left=(0,)),
            Tab("By kind of layer: predicted vs measured",
                ["kind", "layers", "predicted", "measured", "predicted / measured"],
                [[r["op_type"], str(r["layers"]), t(r["predicted_s"]), t(r["measured_s"]),
                  "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"] for r in d.get("by_op", [])[:12]], left=(0,))]


def _published(doc) -> list:
    d = doc.data

    def x(v):
        return "-" if v is None else f"{v:.2f}x"

    rows = [[r["set"], str(r["kernels"]), x(r["median_ratio"]), x(r["median_ratio_gemm"]), x(r["median_ratio_conv"]),
             x(r.get("median_ratio_elementwise")), x(r["median_error"]), pct(r["within_1_25"]), pct(r["within_2"]),
             f"{r['rho']:.3f}"]
            for r in d["rows"] if r.get("kernels")]
    worst = [[r["kernel"], r["precision"], t(r["predicted_s"]), t(r["measured_s"]), f"{r['ratio']:.2f}x", r["cause"],
              "yes" if r.get("held_out") else ""] for r in d["worst"]]
    classes = [[c["precision"], c["class"], str(c["kernels"]), x(c["median_ratio"]),
                "-" if c["within_1_25"] is None else pct(c["within_1_25"]), str(c["held_out_kernels"]),
                x(c["held_out_median_ratio"])] for c in d.get("classes", ())]
    return [Tab(f"{d['hardware']} against published kernel times ({d['data']})",
                ["set", "kernels", "pred/meas", "GEMM", "conv", "elementwise", "median error", "<=1.25x", "<=2x",
                 "rank rho"], rows, notes=[d["convention"]]),
            Tab("By class of kernel, as the model runs it (fitted kernels, then the held-out quarter)",
                ["precision", "class", "fitted", "pred/meas", "<=1.25x", "held out", "pred/meas"], classes,
                left=(0, 1)),
            Tab("Worst kernels", ["kernel", "precision", "predicted", "measured", "ratio", "cause", "held out"], worst,
                left=(0, 1, 5, 6))]


def _hw_list(doc) -> list:
    rows = [[r["name"], r["title"], f"{r['peak_tops']:g} TOP/s {r['peak_precision']}", f"{r['dram_gbs']:g} GB/s",
             f"{r['lanes']:,}", f"{r['launch_overhead_us']:g} us", r.get("validation") or "not validated"]
            for r in doc.data["rows"]]
    return [Tab("Hardware profiles", ["name", "title", "peak", "DRAM", "lanes", "launch", "validated"], rows,
                left=(0, 1, 6))]


def _hw_schema(doc) -> list:
    rows = [[r["key"], r["type"], "required" if r["required"] else "optional", r["description"]] for r in doc.data["rows"]]
    return [Tab("Hardware profile schema (dnnperf-hw/1)", ["key", "type", "required", "description"], rows,
                left=(0, 1, 2, 3))]


def _rows_of(doc):
    rows = doc.data["rows"]
    return (list(rows[0]) if rows else []), rows


HUMAN = {
    "report": _report_doc,
    "reports": _reports_doc,
    "inspection": _inspection,
    "totals": _totals,
    "compare": _compare,
    "sweep": _sweep,
    "llm_sweep": _llm_sweep,
    "check": _check,
    "lut": _lut,
    "shapes": _shapes,
    "diff": _diff,
    "validate": _validate,
    "published": _published,
    "hw_list": _hw_list,
    "hw_schema": _hw_schema,
}
# Markdown views that differ from the terminal's (a CI step summary wants a table)
HUMAN_MD = {"check": _check_md}

MACHINE = {
    "report": lambda doc: _report_rows([doc.data]),
    "reports": lambda doc: _report_rows(doc.data["reports"]),
    "inspection": _inspection_rows,
    "totals": _rows_of,
    "compare": _rows_of,
    "sweep": _rows_of,
    "llm_sweep": _rows_of,
    "check": _check_rows,
    "lut": _rows_of,
    "shapes": _shapes_rows,
    "diff": lambda doc: ((list(doc.data["layers"][0]) if doc.data["layers"] else []), doc.data["layers"]),
    "validate": lambda doc: (["layer", "op_type", "predicted_s", "measured_s", "error"], doc.data["layers"]),
    "published": _rows_of,
    "hw_list": _rows_of,
    "hw_schema": _rows_of,
}
