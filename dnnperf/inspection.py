"""Per-node costing: a loaded Graph -> an Inspection (one Row per node: its Workload, or the reason
it could not be costed). Hardware-independent; nothing is printed."""

from __future__ import annotations

import os
from dataclasses import dataclass

from dnnperf.ir import Graph, Node
from dnnperf.ops import Unsupported, cost_node, key_of
from dnnperf.workload import Workload


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
            unsupported.append({"node": node.name, "op_type": key_of(node), "reason": reason})
            continue
        except (ArithmeticError, ValueError, TypeError, KeyError, IndexError) as exc:
            reason = f"malformed attributes or shapes ({type(exc).__name__})"
            rows.append(Row(node, None, shape, dtype, reason))
            unsupported.append({"node": node.name, "op_type": key_of(node), "reason": reason})
            continue
        if w.note:
            warnings.append(f"{node.name} ({node.op_type}): {w.note}")
            if "unknown trip count" in w.note:
                unsupported.append({"node": node.name, "op_type": key_of(node), "reason": w.note})
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
