"""The library API: functions that return data and never print.

    inspect_model(path)            -> Inspection (per-node workloads, no hardware)
    analyze(inspection, hw, ...)   -> Report (scored layers, totals, loss breakdown, fixes)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from dnnperf import CONVENTION, __version__
from dnnperf.analysis import Layer, Score, Settings, score, top_cause, with_precision
from dnnperf.errors import DnnperfError
from dnnperf.ir import Graph, Node, ShapeOverrides
from dnnperf.load import load_graph
from dnnperf.hardware import HardwareProfile
from dnnperf.ops import Unsupported, cost_node
from dnnperf.workload import FREE_FAMILIES, Workload

SCHEMA_VERSION = "dnnperf-report/1"


@dataclass
class Row:
    node: Node
    workload: Workload | None
    output_shape: tuple[int, ...] | None
    dtype: str
    reason: str = ""


@dataclass
class Inspection:
    path: str
    graph: Graph
    rows: list[Row]
    unsupported: list[dict]
    warnings: list[str]
    input_bytes: int
    batch: int | None

    @property
    def model_name(self) -> str:
        return os.path.basename(self.path)

    def costed(self) -> list[Row]:
        return [r for r in self.rows if r.workload is not None]

    def totals(self) -> dict:
        ws = [r.workload for r in self.costed()]
        macs = sum(w.macs for w in ws)
        other = sum(w.other_ops for w in ws)
        nbytes = sum(w.bytes_total for w in ws)
        return {
            "nodes": len(self.rows),
            "macs": macs,
            "ops": 2 * macs + other,
            "other_ops": other,
            "act_bytes_read": sum(w.act_bytes_read for w in ws),
            "weight_bytes": sum(w.weight_bytes for w in ws),
            "bytes_written": sum(w.bytes_written for w in ws),
            "bytes": nbytes,
            "intensity": (2 * macs + other) / nbytes if nbytes else 0.0,
            "unsupported": len(self.unsupported),
        }


def inspect_model(path: str, overrides: ShapeOverrides = ShapeOverrides()) -> Inspection:
    graph = load_graph(path, overrides)
    return inspect_graph(graph, path)


def inspect_graph(graph: Graph, path: str) -> Inspection:
    rows: list[Row] = []
    unsupported: list[dict] = []
    warnings: list[str] = list(graph.notes)
    unresolved = set(graph.unresolved)
    for node in graph.nodes:
        out = graph.tensors.get(node.outputs[0]) if node.outputs and node.outputs[0] else None
        shape = out.shape if out is not None else None
        dtype = out.dtype if out is not None else ""
        try:
            w = cost_node(graph, node)
        except Unsupported as exc:
            reason = str(exc)
            if node.name in unresolved and "shape" not in reason:
                reason = f"output shape unresolved; {reason}"
            rows.append(Row(node, None, shape, dtype, reason))
            unsupported.append({"node": node.name, "op_type": _key(node), "reason": reason})
            continue
        except (ArithmeticError, ValueError, TypeError, KeyError, IndexError) as exc:
            reason = f"malformed attributes or shapes ({type(exc).__name__})"
            rows.append(Row(node, None, shape, dtype, reason))
            unsupported.append({"node": node.name, "op_type": _key(node), "reason": reason})
            continue
        if w.note:
            warnings.append(f"{node.name} ({node.op_type}): {w.note}")
            if "unknown trip count" in w.note:
                unsupported.append({"node": node.name, "op_type": _key(node), "reason": w.note})
        rows.append(Row(node, w, shape, dtype))
    input_bytes = 0
    batch = None
    for name in graph.inputs:
        t = graph.tensors.get(name)
        if t is not None and t.nbytes:
            input_bytes += t.nbytes
            if batch is None and t.shape:
                batch = t.shape[0]
    return Inspection(path, graph, rows, unsupported, warnings, input_bytes, batch)


def _key(node: Node) -> str:
    return f"{node.domain}:{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type


# --------------------------------------------------------------------------------------------


@dataclass
class Report:
    inspection: Inspection
    score: Score
    alt_latency_s: dict = field(default_factory=dict)  # fusion what-if: {"none": s, "typical": s}
    model_fixes: list = field(default_factory=list)

    @property
    def hw(self) -> HardwareProfile:
        return self.score.hw

    @property
    def top_cause(self) -> str:
        return top_cause(self.score)


def build_layers(insp: Inspection, fusion: str = "none", precision: str | None = None, chains: bool = True) -> list[Layer]:
    from dnnperf.fusion import intermediate_bytes, fuse, fusion_candidates

    cands = fusion_candidates(insp.graph, insp.rows)  # every fusable node, for the fix hints

    def make(row: Row) -> Layer:
        w = row.workload
        if precision:
            w = with_precision(w, precision)
        c = cands.get(row.node.name)
        saved = 2 * intermediate_bytes(insp.graph.tensors.get(c[1]), w) if c is not None else 0
        return Layer(row.node.name, row.node.op_type, (row.node.name,), w, row.output_shape,
                     fusable_into=c[0] if c else None, saved_bytes_if_fused=saved)

    if fusion == "typical":
        return fuse(insp.graph, insp.rows, make, cands if chains else fusion_candidates(insp.graph, insp.rows, False))
    if fusion != "none":
        raise DnnperfError(f"--fusion must be 'none' or 'typical', got '{fusion}'")
    return [make(r) for r in insp.rows if r.workload is not None]


def analyze(insp: Inspection, hw: HardwareProfile, settings: Settings, with_fixes: bool = True) -> Report:
    if settings.batch is None:
        settings = Settings(insp.batch, settings.precision, settings.fusion, settings.overlap_input)
    chains = hw.kind != "cpu"
    layers = build_layers(insp, settings.fusion, settings.precision, chains)
    sc = score(layers, hw, settings, insp.input_bytes)
    alt = {settings.fusion: sc.totals["latency_s"]}
    other = "typical" if settings.fusion == "none" else "none"
    alt_settings = Settings(settings.batch, settings.precision, other, settings.overlap_input)
    alt[other] = score(build_layers(insp, other, settings.precision, chains), hw, alt_settings,
                       insp.input_bytes).totals["latency_s"]
    report = Report(insp, sc, alt_latency_s=alt)
    if with_fixes:
        from dnnperf.fixes import attach_fixes

        attach_fixes(report)
    return report


def ranked(report: Report, top: int | None = None) -> list:
    """Layers that cost time, ranked by time lost against the quoted peak (then name)."""
    rows = [c for c in report.score.layers if c.layer.workload.family not in FREE_FAMILIES]
    rows.sort(key=lambda c: (-c.lost_s, c.name))
    return rows if top is None else rows[:top]


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
            "precision": c.precision,
            "tile_efficiency": _r(c.tile_efficiency),
            "occupancy": _r(c.occupancy),
            "ideal_s": _r(c.t_ideal),
            "compute_s": _r(c.t_compute),
            "memory_s": _r(c.t_memory),
            "launch_s": _r(c.t_launch),
            "latency_s": _r(c.time_s),
            "lost_s": _r(c.lost_s),
            "losses_s": {k: _r(v) for k, v in c.losses.items()},
            "cause": c.cause,
            "fixes": c.fixes,
        })
    rank = [c.name for c in ranked(report, top)]
    t = sc.totals
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "dnnperf", "version": __version__, "convention": CONVENTION},
        "model": {"path": insp.path, "name": insp.model_name, "graph": insp.graph.name, "opset": insp.graph.opset,
                  "nodes": len(insp.rows), "input_bytes": insp.input_bytes},
        "hardware": {"name": hw.name, "title": hw.title, "kind": hw.kind, "peak_tops": hw.headline_tops,
                     "peak_precision": hw.headline_precision, "dram_gbs": hw.dram_gbs, "lanes": hw.lanes,
                     "launch_overhead_us": hw.launch_overhead_us, "host_link_gbs": hw.host_link_gbs,
                     "price_per_hour": hw.price_per_hour},
        "settings": sc.settings.as_dict(),
        "totals": {
            "macs": t["macs"], "ops": t["ops"], "other_ops": t["other_ops"], "bytes": t["bytes"],
            "weight_bytes": t["weight_bytes"], "launches": t["launches"],
            "latency_s": _r(t["latency_s"]), "ideal_s": _r(t["ideal_s"]),
            "input_transfer_s": _r(t["input_transfer_s"]),
            "throughput_per_s": _r(t["throughput_per_s"]),
            "achieved_tops": _r(t["achieved_tops"]), "peak_tops": t["peak_tops"],
            "fraction_of_peak": _r(t["fraction_of_peak"]), "mean_occupancy": _r(t["mean_occupancy"]),
            "losses_s": {k: _r(v) for k, v in sc.losses.items()},
            "loss_where": _loss_where(sc),
            "top_cause": report.top_cause,
            "fusion_whatif_latency_s": {k: _r(v) for k, v in sorted(report.alt_latency_s.items())},
        },
        "model_fixes": report.model_fixes,
        "ranking": rank,
        "layers": layers,
        "unsupported_ops": _unsupported_summary(insp.unsupported),
        "warnings": list(insp.warnings),
    }


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
        e = by.setdefault(it["op_type"], {"op_type": it["op_type"], "count": 0, "nodes": [], "reason": it["reason"]})
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
            "name": r.node.name, "op_type": _key(r.node),
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
        "layers": rows,
        "unsupported_ops": _unsupported_summary(insp.unsupported),
        "warnings": list(insp.warnings),
    }


def _r(x: float) -> float:
    """Round floats to 6 significant digits so JSON is stable and readable."""
    if x == 0 or x != x:
        return 0.0
    return float(f"{x:.6g}")
