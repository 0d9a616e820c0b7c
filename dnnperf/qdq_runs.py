"""QDQ models as each runtime runs them: the inspection's plan (``dnnperf.qdq.plan``: matrix layers run
quantized, the Q/DQ nodes around them folded) applied to its rows, and two views of an inspection that
runtimes with further QDQ fusions get: a TensorRT engine's (``engine_quantized``) and ONNX Runtime's CPU
provider's (``ort_cpu_quantized``). Each view is derived once per inspection and leaves the inspection as it is."""

from __future__ import annotations

from dataclasses import replace

from dnnperf import qdq, qdq_ort
from dnnperf.inspection import Inspection, Row
from dnnperf.ir import Graph
from dnnperf.ops import Unsupported, cost_node
from dnnperf.vocab import PLAIN_CONV
from dnnperf.workload import Workload


def quantized_layers(graph: Graph, rows: list[Row], warnings: list[str]) -> None:
    """Operators in QDQ form cost as the quantized kernels runtimes run (``dnnperf.qdq``)."""
    misscaled: dict = {}
    nodes, free = qdq.plan(graph, misscaled=misscaled)
    warnings.extend(qdq.plan_warnings(nodes, free, misscaled))
    state = (nodes, free, *qdq.runtime_dequantizers(graph, nodes))
    for r in rows:
        if r.workload is not None:
            r.workload = _planned(graph, r, r.workload, state)


def _planned(graph: Graph, r: Row, w: Workload, state: tuple) -> Workload:
    """``w`` (a node's float workload) as a QDQ plan runs it; ``state``: the plan's (nodes run quantized,
    Q/DQ nodes that launch nothing, weight DequantizeLinear nodes run at every inference, convolutions that
    read such weights: ``qdq.plan`` and ``qdq.runtime_dequantizers``)."""
    nodes, free, run, plain = state
    name = r.node.name
    if name in plain:  # (a 1-D or 3-D one runs the plain kernel anyway: its kernel keeps its size, "Conv1d.k3")
        return replace(w, kernel=PLAIN_CONV) if w.conv else w
    if name in nodes:
        return _quantized_group(graph, r, w, nodes[name])
    if name in free:
        return qdq.free_workload(r.node.op_type)
    if name in run and w.family == "shape":
        try:
            return cost_node(graph, r.node, fold=False)
        except (Unsupported, ArithmeticError, ValueError, TypeError, KeyError, IndexError):
            pass
    return w


def engine_quantized(insp: Inspection) -> Inspection:
    """``insp`` as a TensorRT engine runs a QDQ model (``dnnperf.qdq.plan(..., engine=True)``): besides its
    matrix layers, the adds, poolings, concatenations and data movement between Q/DQ pairs run quantized and
    those Q/DQ nodes launch nothing; a layer whose bias scale ONNX Runtime would refuse runs quantized too, its
    weights folded when the engine is built. ``derived["engine_quantized_nodes"]``: ``_runtime_view``'s counts.
    Derived once per inspection; the inspection itself (what other runtimes run) is left as it is."""
    return _runtime_view(insp, "engine_quantized", engine=True)


def ort_cpu_quantized(insp: Inspection) -> Inspection:
    """``insp`` as ONNX Runtime's CPU provider runs a QDQ model (``dnnperf.qdq.plan(..., ort_cpu=True)``):
    besides its matrix layers, the adds, multiplies, concatenations, average poolings and activations between
    Q/DQ pairs run as its QLinear kernels, and max pooling and data movement between a pair of one scale run on
    the 8-bit tensor, those Q/DQ nodes launching nothing; a convolution whose output no QuantizeLinear takes
    runs in float (there is no QLinearConv with a float output), its weights dequantized at every inference.
    ``derived["ort_cpu_quantized_nodes"]``: ``_runtime_view``'s counts. Derived once per inspection."""
    return _runtime_view(insp, "ort_cpu_quantized", ort_cpu=True)


def _runtime_view(insp: Inspection, key: str, **how) -> Inspection:
    """``insp`` with the QDQ plan ``qdq.plan(**how)`` in place of the inspection's: the rows whose state differs
    (run quantized, launching nothing, a weight dequantized at every inference, a convolution reading one) are
    costed again from their float workloads. ``derived[key + "_nodes"]``: (ops run quantized beyond the
    inspection's, Q/DQ nodes folded beyond its, {why: layers it runs quantized that this plan leaves in float}
    with ``qdq_ort.FLOAT_WHY``'s keys)."""
    cached = insp.derived.get(key)
    if cached is not None:
        return cached
    out = insp
    graph = insp.graph
    if any(n.op_type == "DequantizeLinear" for n in graph.nodes):
        base_nodes, base_free = qdq.plan(graph)
        base = (base_nodes, base_free, *qdq.runtime_dequantizers(graph, base_nodes))
        refused: dict = {}
        nodes, free = qdq.plan(graph, refused=refused, **how)
        state = (nodes, free, *qdq.runtime_dequantizers(graph, nodes))
        changed = {name for a, b in zip(base, state) for name in set(a) ^ set(b)}
        if changed:
            touched = set().union(*base)  # rows the inspection's plan rewrote: their float workload is costed again
            rows = []
            for r in insp.rows:
                if r.workload is not None and r.node.name in changed:
                    w = r.workload
                    if r.node.name in touched:
                        try:
                            w = replace(cost_node(graph, r.node), subnormals=r.workload.subnormals)
                        except (Unsupported, ArithmeticError, ValueError, TypeError, KeyError, IndexError):
                            w = None
                    if w is not None:
                        r = replace(r, workload=_planned(graph, r, w, state))
                rows.append(r)
            out = Inspection(insp.path, insp.graph, rows, insp.unsupported, insp.warnings, insp.input_bytes, insp.batch,
                             insp.no_batch_axis)
            floats: dict = {}
            for name in set(base_nodes) - set(nodes):
                why = refused.get(name, "")
                floats[why] = floats.get(why, 0) + 1
            out.derived[key + "_nodes"] = (len(set(nodes) - set(base_nodes)), len(free - base_free), floats)
    insp.derived[key] = out
    return out


def _quantized_group(graph: Graph, r: Row, w: Workload, q) -> Workload:
    """A node run quantized with its Q/DQ group: the kernel the runtime runs instead (``q.twin``, costed as
    that op is), or the node read and written at the quantized width."""
    if q.twin is not None:
        try:
            w = cost_node(graph, q.twin, fold=False)
            # the kernel it runs: a loop's, or the QLinear op itself (its figures are looked up by that op)
            return replace(w, kernel=q.kernel or w.kernel or (q.twin.op_type if q.twin.domain else ""),
                           note=(w.note + "; " if w.note else "") + f"{qdq.NOTE} {q.precision} "
                                f"(ONNX Runtime's {q.twin.op_type} on the 8-bit tensors)")
        except (Unsupported, ArithmeticError, ValueError, TypeError, KeyError, IndexError):
            pass
    return qdq.quantized_workload(graph, r.node, w, q)


def runtime_notes(insp: Inspection, ort_cpu: bool, engine: bool) -> list[str]:
    """What a report says of the QDQ groups a runtime runs otherwise than the inspection: ONNX Runtime's CPU
    provider (``ort_cpu``) or a TensorRT engine (``engine``)."""
    notes = []
    if ort_cpu:
        more, freed, floats = ort_cpu_quantized(insp).derived.get("ort_cpu_quantized_nodes", (0, 0, {}))
        if more:
            notes.append(f"QDQ on ONNX Runtime's CPU provider: {more} more op(s) between Q/DQ pairs run as its QLinear "
                         f"kernels (adds, multiplies, concatenations, average pooling, activations) or on the 8-bit "
                         f"tensors (max pooling, data movement between a pair of one scale), and {freed} more Q/DQ "
                         "node(s) fold into them, as its QDQ transformers rewrite the graph")
        for why, text in qdq_ort.FLOAT_WHY.items():
            if floats.get(why):
                notes.append(f"QDQ on ONNX Runtime's CPU provider: {floats[why]} {text}")
    if engine:
        more, freed, _ = engine_quantized(insp).derived.get("engine_quantized_nodes", (0, 0, {}))
        if more:
            notes.append(f"QDQ under TensorRT: {more} more op(s) between Q/DQ pairs (adds, pooling, concatenation, "
                         f"data movement) run quantized and {freed} more Q/DQ node(s) fold into them, as the "
                         "engine's explicit quantization fuses them")
    return notes
