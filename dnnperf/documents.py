"""Documents: what each command returns, as JSON-ready data, before any rendering.

A ``Document`` is a kind (which renderers apply), its data (numbers stay numbers, SI units, rounded
by ``fmt.sig``), rendering options (e.g. how many rows a table shows) and notes for stderr. The JSON
contracts are ``schema/*.schema.json``; the same input always gives the same document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dnnperf import CONVENTION, __version__
from dnnperf.scoring import Score
from dnnperf.api import Report, ranked
from dnnperf.fmt import sig as _r
from dnnperf.inspection import Inspection
from dnnperf.ops import key_of
from dnnperf.workload import FREE_FAMILIES

SCHEMA_VERSION = "dnnperf-report/1"


@dataclass(frozen=True)
class Document:
    kind: str
    data: Any
    options: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _library(hw):
    """The GPU library table entry a GPU profile's estimates use (None for other kinds)."""
    if hw.kind != "gpu":
        return None
    from dnnperf.gpu import library_summary

    return library_summary(hw)


def ranked_groups(order: list, top: int | None = None) -> list[dict]:
    """The ranking (``order``: every ranked LayerCost) with alike layers as one entry: the same op,
    output shape, time, time lost, cause and first fix (a decoder's 80 equal blocks, BERT's 12 equal
    products) are one group, in the place of its first layer, which names it; ``alike`` lists the
    others. The first ``top`` groups (every group without one)."""
    groups: dict[tuple, dict] = {}
    for c in order:
        key = (c.layer.op_type, c.layer.output_shape, _r(c.time_s), _r(c.lost_s), c.cause,
               c.fixes[0]["text"] if c.fixes else None)
        g = groups.get(key)
        if g is None:
            groups[key] = {"layer": c.name, "alike": []}
        else:
            g["alike"].append(c.name)
    out = list(groups.values())
    return out if top is None else out[:top]


def report_dict(report: Report, top: int | None = None) -> dict:
    """The JSON contract (schema/report.schema.json). Numbers stay numbers, in SI units."""
    sc = report.score
    insp = report.inspection
    hw = sc.hw
    layers = []
    for c in sc.layers:
        w = c.layer.workload
        if w.family in FREE_FAMILIES:
            continue
        layers.append({
            "name": c.name,
            "op_type": c.layer.op_type,
            "nodes": list(c.layer.nodes),
            "family": w.family,
            "output_shape": list(c.layer.output_shape) if c.layer.output_shape is not None else None,
            "dtype": w.dtype,
            "macs": w.macs,
            "other_ops": w.other_ops,
            "ops": w.ops,
            "bytes_read": w.bytes_read,
            "act_bytes_read": w.act_bytes_read,
            "weight_bytes": w.weight_bytes,
            "bytes_written": w.bytes_written,
            "intensity_ops_per_byte": _r(w.intensity),
            "parallel_work": w.parallel_work,
            "launches": w.launches,
            "unit": c.unit,
            "algorithm": c.algorithm or None,
            "precision": c.precision,
            "tile_efficiency": _r(c.tile_efficiency),
            "occupancy": _r(c.occupancy),
            "ideal_s": _r(c.t_ideal),
            "compute_s": _r(c.t_compute),
            "memory_s": _r(c.t_memory),
            "launch_s": _r(c.t_launch),
            "device_s": _r(c.t_device),
            "latency_s": _r(c.time_s),
            "lost_s": _r(c.lost_s),
            "losses_s": {k: _r(v) for k, v in c.losses.items()},
            "cause": c.cause,
            "fixes": c.fixes,
        })
    order = ranked(report)
    rank = [c.name for c in (order if top is None else order[:top])]
    t = sc.totals
    cov = coverage_dict(insp, report)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "dnnperf", "version": __version__, "convention": CONVENTION},
        "model": {"path": insp.path, "name": insp.model_name, "graph": insp.graph.name, "opset": insp.graph.opset,
                  "nodes": len(insp.rows), "input_bytes": insp.input_bytes},
        "hardware": {"name": hw.name, "title": hw.title, "kind": hw.kind, "peak_tops": hw.headline_tops,
                     "peak_precision": hw.headline_precision, "dram_gbs": hw.dram_gbs, "lanes": hw.lanes,
                     "launch_overhead_us": hw.launch_overhead_us, "host_link_gbs": hw.host_link_gbs,
                     "price_per_hour": hw.price_per_hour,
                     "validation": hw.validation_summary(),
                     "assumed": list(hw.assumed),
                     "library": _library(hw),
                     "roofs": [{"label": k, "ops_per_s": v} for k, v in roofs(report)]},
        "settings": sc.settings.as_dict(),
        "totals": {
            "macs": t["macs"], "ops": t["ops"], "other_ops": t["other_ops"], "bytes": t["bytes"],
            "weight_bytes": t["weight_bytes"], "launches": t["launches"], "kernels": t["kernels"],
            "latency_s": _r(t["latency_s"]), "ideal_s": _r(t["ideal_s"]),
            "input_transfer_s": _r(t["input_transfer_s"]), "call_s": _r(t["call_s"]),
            "throughput_per_s": _r(t["throughput_per_s"]),
            "achieved_tops": _r(t["achieved_tops"]), "peak_tops": t["peak_tops"], "peak_precision": t["peak_precision"],
            "fraction_of_peak": _r(t["fraction_of_peak"]), "mean_occupancy": _r(t["mean_occupancy"]),
            "losses_s": {k: _r(v) for k, v in sc.losses.items()},
            "loss_where": _loss_where(sc),
            "top_cause": report.top_cause,
            "fusion_whatif_latency_s": {k: _r(v) for k, v in sorted(report.alt_latency_s.items())},
            "coverage": cov["scored_share"],
        },
        "coverage": cov,
        "memory": report.memory_figures.as_dict() if report.memory_figures is not None else None,
        "model_fixes": report.model_fixes,
        "ranking": rank,
        "ranked_groups": ranked_groups(order, top),
        "layers": layers,
        "unsupported_ops": _unsupported_summary(insp.unsupported),
        "warnings": list(insp.warnings) + list(report.notes),
    }


def coverage_dict(insp: Inspection, report: Report | None = None) -> dict:
    """``Inspection.coverage()`` plus, with a hardware report, a lower bound on the unscored nodes'
    time and the share of the (estimate + that bound) the scored nodes represent."""
    cov = insp.coverage()
    if report is not None:
        from dnnperf.scoring import unscored_floor

        floor = unscored_floor(insp.rows, insp.graph.tensors, report.hw) if not cov["complete"] else 0.0
        lat = report.score.totals["latency_s"]
        cov["unscored_floor_s"] = _r(floor)
        cov["scored_share"] = _r(lat / (lat + floor)) if lat + floor > 0 else 1.0
    return cov


def roofs(report: Report) -> list[tuple[str, float]]:
    """The quoted peak, then one roof per unit x precision the model's layers actually ran on."""
    hw = report.hw
    used = sorted({(c.unit, c.precision) for c in report.score.layers if c.time_s > 0 and c.unit != "-"})
    out = [(f"quoted peak {hw.headline_precision}", hw.headline_rate)]
    for unit_name, prec in used:
        unit = hw.unit_named(unit_name)
        if unit is None or unit.rate(prec) is None or unit.rate(prec) == hw.headline_rate:
            continue
        out.append((f"{unit_name} {prec}", unit.rate(prec)))
    return out


def _loss_where(sc: Score) -> dict:
    """For each cause, the op family that carries the largest part of it (and that part's share)."""
    out = {}
    for cause in sorted(sc.losses):
        by: dict[str, float] = {}
        for c in sc.layers:
            v = c.losses.get(cause, 0.0)
            if v > 0:
                by[c.layer.workload.family] = by.get(c.layer.workload.family, 0.0) + v
        total = sum(by.values())
        if total > 0:
            fam = max(by, key=lambda k: (by[k], k))
            out[cause] = {"family": fam, "share": _r(by[fam] / total),
                          "layers": sum(1 for c in sc.layers if c.losses.get(cause, 0.0) > 0
                                        and c.layer.workload.family == fam)}
    return out


def _unsupported_summary(items: list[dict]) -> list[dict]:
    by: dict[str, dict] = {}
    for it in items:
        e = by.setdefault(it["op_type"], {"op_type": it["op_type"], "count": 0, "nodes": [], "reason": it["reason"],
                                          "kind": it.get("kind", "unsupported")})
        e["count"] += 1
        if len(e["nodes"]) < 20:
            e["nodes"].append(it["node"])
    return [by[k] for k in sorted(by)]


def inspection_dict(insp: Inspection) -> dict:
    rows = []
    for r in insp.rows:
        w = r.workload
        if w is not None and w.family in FREE_FAMILIES:
            continue
        rows.append({
            "name": r.node.name, "op_type": key_of(r.node),
            "output_shape": list(r.output_shape) if r.output_shape is not None else None,
            "dtype": r.dtype,
            "family": w.family if w else None,
            "macs": w.macs if w else None, "other_ops": w.other_ops if w else None,
            "act_bytes_read": w.act_bytes_read if w else None, "weight_bytes": w.weight_bytes if w else None,
            "bytes_written": w.bytes_written if w else None,
            "intensity_ops_per_byte": _r(w.intensity) if w else None,
            "parallel_work": w.parallel_work if w else None,
            "supported": w is not None,
        })
    return {
        "schema_version": "dnnperf-inspect/1",
        "tool": {"name": "dnnperf", "version": __version__, "convention": CONVENTION},
        "model": {"path": insp.path, "name": insp.model_name, "opset": insp.graph.opset, "nodes": len(insp.rows),
                  "input_bytes": insp.input_bytes, "batch": insp.batch},
        "totals": {k: (_r(v) if isinstance(v, float) else v) for k, v in insp.totals().items()},
        "coverage": coverage_dict(insp),
        "layers": rows,
        "unsupported_ops": _unsupported_summary(insp.unsupported),
        "warnings": list(insp.warnings),
    }
