"""Per-node costing: a loaded Graph -> an Inspection (one Row per node: its Workload, or the reason
it could not be costed). Hardware-independent; nothing is printed.

Nothing is scored as a silent zero: a node that cannot be costed keeps its reason and one of three
kinds, and ``Inspection.coverage()`` says how much of the graph the totals stand for:

    unsupported     the op itself has no cost model (a custom op, a preview op...)
    shape_lost      its shapes are unknown because a node upstream of it could not be costed
    shape_unknown   its shapes are unknown for another reason (unresolved dims)
    contradiction   its shapes contradict each other (input channels vs weights, inner dims)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from dnnperf.fmt import counted
from dnnperf.ir import FOLDABLE, VALUE_DTYPES, Graph, Node
from dnnperf.ops import REGISTRY, Contradiction, Unsupported, cost_node, key_of, shape_rule
from dnnperf.unbatched import unbatched_input
from dnnperf.workload import Workload


@dataclass
class Row:
    node: Node
    workload: Workload | None
    output_shape: tuple[int, ...] | None
    dtype: str
    reason: str = ""
    kind: str = ""  # for unscored rows: unsupported | shape_lost | shape_unknown
    root: str = ""  # for shape_lost rows: the unscored node upstream that lost the shapes


@dataclass
class Inspection:
    path: str
    graph: Graph
    rows: list[Row]
    unsupported: list[dict]
    warnings: list[str]
    input_bytes: int
    batch: int | None
    no_batch_axis: str = ""  # the input whose first dim is not a batch (a detector's [3, H, W] image), if any
    # one device's share of a tensor-parallel decoder step: what the devices exchange during it
    # (``llm.parallel.Collectives``), whose time each target's link decides (``llm.parallel.collective_seconds``)
    collectives: object = None
    # what the scoring passes derive from the graph and rows alone (fusion candidates): computed once
    derived: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def model_name(self) -> str:
        return os.path.basename(self.path)

    def costed(self) -> list[Row]:
        return [r for r in self.rows if r.workload is not None]

    def unscored(self) -> list[Row]:
        return [r for r in self.rows if r.workload is None]

    def coverage(self) -> dict:
        """How much of the graph the figures stand for (every result carries this)."""
        un = self.unscored()
        kinds = {"unsupported": 0, "shape_lost": 0, "shape_unknown": 0, "contradiction": 0}
        for r in un:
            kinds[r.kind or "shape_unknown"] += 1
        return {
            "complete": not un,
            "nodes_total": len(self.rows),
            "nodes_scored": len(self.rows) - len(un),
            "nodes_unscored": len(un),
            "unscored_by_kind": kinds,
            "unscored_op_types": sorted({key_of(r.node) for r in un if r.kind != "shape_lost"}),
            "unscored_nodes": [r.node.name for r in un[:50]],
        }

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
            "unsupported": sum(u["kind"] != "bound" for u in self.unsupported),  # not counted above
            "bounded": sum(u["kind"] == "bound" for u in self.unsupported),  # counted, at a stated bound
        }


def _downstream_of_bounds(rows: list, warnings: list[str]) -> None:
    """Nodes computed from an output costed at its upper bound (NonZero's indices, Unique's values) are
    sized by that bound too: say so, naming them, next to the bound itself."""
    if not any(r.workload is not None and r.workload.note and "upper bound" in r.workload.note for r in rows):
        return
    bounded: dict[str, str] = {}  # tensor -> the bounded node it follows from
    after: dict[str, list[str]] = {}  # bounded node -> costed nodes downstream of it
    for r in rows:
        w = r.workload
        if w is not None and "upper bound" in w.note:
            root = r.node.name
        else:
            root = next((bounded[i] for i in r.node.inputs if i in bounded), None)
            if root is None:
                continue
            if w is not None and w.ops + w.bytes_total > 0:
                after.setdefault(root, []).append(r.node.name)
        for o in r.node.outputs:
            if o:
                bounded[o] = root
    if len(after) > 3:  # many bounded outputs (a detector's per-class NonZero): one line for them all
        roots = list(after)
        names = [n for r in roots for n in after[r]]
        warnings.append(f"{len(names)} node(s) downstream of {len(roots)} outputs costed at their upper bound "
                        f"({', '.join(roots[:3])}, ...) take their sizes from those bounds ({', '.join(names[:3])}, ...): "
                        "their figures are upper bounds too")
        return
    for root, names in after.items():
        warnings.append(f"{len(names)} node(s) downstream of {root} take their sizes from its upper bound "
                        f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}): their figures are upper bounds too")


_PRODUCTS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum"})


def _folded_products(graph: Graph, rows: list, warnings: list[str]) -> None:
    """Matrix products computed from weights alone (Swin V2's continuous position-bias MLP over a
    constant coordinate table) are folded once when a runtime loads the model and cost nothing per
    inference; a counter that runs the framework's modules (torchvision's published figures) counts
    them. Say how many MACs that leaves out, so the totals can be reconciled."""
    names, macs = [], 0
    for r in rows:
        w = r.workload
        if w is None or w.family != "shape" or r.node.op_type not in _PRODUCTS or w.dtype == "int64":
            continue
        try:
            macs += cost_node(graph, r.node, fold=False).macs
        except (Unsupported, ArithmeticError, ValueError, TypeError, KeyError, IndexError):
            continue
        names.append(r.node.name)
    if macs:
        warnings.append(f"{len(names)} matrix node(s) compute from weights alone ({', '.join(names[:2])}"
                        f"{', ...' if len(names) > 2 else ''}; {counted(macs, 'MACs')} if run): runtimes fold them once "
                        "when they load the model, so they cost nothing per inference and are not in the totals "
                        "(counters that run the framework's modules include them)")


# ops whose first input is a size too (the others' first input is the data they work on)
_SIZED_BY_FIRST = frozenset({"ConstantOfShape", "Range", "BlackmanWindow", "HammingWindow", "HannWindow",
                             "MelWeightMatrix"})


def _value_inputs(graph: Graph, node, producers: dict, limit: int = 64) -> list[str]:
    """Model inputs of at most ``limit`` elements that reach ``node``'s non-data inputs (its scales,
    sizes, shape, repeats...; an If's condition, which picks the branch) through small values the
    loader folds (``ir.FOLDABLE``; not through a Shape or Size, whose value is their input's shape):
    what ``--value`` would resolve. An input of a type ``--value`` does not take is not named, nor any input
    of another domain's op whose shape rule reads no values (a MultiHeadAttention's keys are data)."""
    if node.domain not in ("", "ai.onnx") and not getattr(shape_rule(key_of(node)), "takes_values", False):
        return []
    found: list[str] = []
    seen: set[str] = set()
    todo = [i for i in (node.inputs[:1] if node.op_type == "If" else node.inputs if node.op_type in _SIZED_BY_FIRST
                        else node.inputs[1:]) if i]
    while todo and len(seen) < 256:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        t = graph.tensors.get(name)
        if t is not None and t.numel is not None and t.numel > limit:
            continue  # a large tensor is data, not a size
        if name in graph.inputs and name not in graph.initializers:
            if name not in found and (t is None or t.dtype in VALUE_DTYPES):
                found.append(name)
            continue
        p = producers.get(name)
        if p is not None and not p.subgraphs and p.op_type in FOLDABLE and p.op_type not in ("Shape", "Size") \
                and p.domain in ("", "ai.onnx"):
            todo.extend(i for i in p.inputs if i)
    return sorted(found)


def _is_shape_reason(reason: str) -> bool:
    return "could not be resolved" in reason or "unresolved" in reason


# ops between a Softmax and the MatMul that reads its probabilities that move no value
_PASS_THROUGH = frozenset({"Reshape", "Unsqueeze", "Squeeze", "Identity", "Flatten", "Dropout"})


def _mark_subnormals(graph: Graph, rows: list[Row]) -> None:
    """A Softmax that stores subnormal probabilities (``graph.subnormal``, from its mask) and the
    MatMul that multiplies them (its left operand, through views) carry their count."""

    wanted = graph.subnormal
    by_output: dict[str, Row] = {}  # the Softmaxes that write them
    users: dict[str, list[Row]] = {}  # tensor -> views and MatMuls that take it as their first input
    for r in rows:
        node = r.node
        op = node.op_type
        if op == "Softmax":
            for o in node.outputs:
                if o in wanted:
                    by_output[o] = r
        elif (op == "MatMul" or op in _PASS_THROUGH) and node.inputs and node.inputs[0]:
            users.setdefault(node.inputs[0], []).append(r)
    for tensor, n in graph.subnormal.items():
        sm = by_output.get(tensor)
        if sm is None or sm.workload is None:
            continue
        sm.workload = replace(sm.workload, subnormals=n)
        frontier = [tensor]
        while frontier:
            t = frontier.pop()
            for r in users.get(t, []):
                if r.node.op_type in _PASS_THROUGH:
                    frontier.extend(o for o in r.node.outputs[:1] if o)
                elif r.workload is not None:  # a MatMul
                    r.workload = replace(r.workload, subnormals=n)


def recomputed(insp: Inspection) -> Inspection:
    """``insp`` as ONNX Runtime on a CPU runs it: with the model's input dims symbolic in the file,
    the values built from its shape arithmetic (``Graph.runtime_built``: a shifted-window attention
    mask of Where, ScatterND, Expand... over 64 x 49 x 49 elements) are not folded once but computed
    every inference, so their nodes are costed as the kernels they are (swin_t: 427 nodes, 5.6 ms of
    its 116 ms in ONNX Runtime 1.32's per-node profile on the reference VM). GPU runtimes keep them
    folded: a static-shape engine folds them, and eager PyTorch builds such a mask in a third of the
    export's kernels. Derived once per inspection; the inspection itself is left as it is."""
    built = insp.graph.runtime_built
    if not built:
        return insp
    cached = insp.derived.get("recomputed")
    if cached is not None:
        return cached
    rows, n, kept = [], 0, []
    for r in insp.rows:
        w = r.workload
        if w is not None and w.family == "shape" and any(o in built for o in r.node.outputs if o):
            try:
                w = cost_node(insp.graph, r.node, fold=False)
            except (Unsupported, ArithmeticError, ValueError, TypeError, KeyError, IndexError):
                kept.append(r.node.name)  # no cost as a kernel: it stays at 0, and the note says so
                w = r.workload
            if w is not r.workload:
                n += 1
                r = Row(r.node, w, r.output_shape, r.dtype)
        rows.append(r)
    out = Inspection(insp.path, insp.graph, rows, insp.unsupported, insp.warnings, insp.input_bytes, insp.batch,
                     insp.no_batch_axis)
    out.derived["recomputed_nodes"] = n
    out.derived["recomputed_kept"] = kept
    insp.derived["recomputed"] = out
    return out


def recomputed_note(insp: Inspection) -> str | None:
    """What ``recomputed`` changed, in one line for a CPU report (None when nothing)."""
    r = recomputed(insp)
    n, kept = r.derived.get("recomputed_nodes", 0), r.derived.get("recomputed_kept", [])
    if not n and not kept:
        return None
    text = (f"{n} node(s) build values from shape arithmetic over the input's symbolic dims (a mask): "
            "ONNX Runtime computes them every inference and they are costed as kernels; fixed dims in "
            "the export (--dim does not change the file) let it fold them")
    if kept:
        text += (f"; {len(kept)} more such node(s) could not be costed as kernels and count 0 s "
                 f"({', '.join(kept[:3])}{', ...' if len(kept) > 3 else ''}): the estimate is low by their time")
    return text


def inspect_graph(graph: Graph, path: str) -> Inspection:
    rows: list[Row] = []
    unsupported: list[dict] = []
    warnings: list[str] = list(graph.notes)
    unresolved = set(graph.unresolved)
    lost: dict[str, str] = {}  # tensor -> the unscored node upstream that made its shape unknown
    producers = None  # tensor -> node, built when a shape is unknown
    noted: dict[tuple[str, str], list[str]] = {}  # (op type, cost note) -> its nodes, in graph order
    for node in graph.nodes:
        out = graph.tensors.get(node.outputs[0]) if node.outputs and node.outputs[0] else None
        shape = out.shape if out is not None else None
        dtype = out.dtype if out is not None else ""
        reason = ""
        contradiction = False
        try:
            w = cost_node(graph, node)
        except Contradiction as exc:
            reason, contradiction = str(exc), True
        except Unsupported as exc:
            reason = str(exc)
        except (ArithmeticError, ValueError, TypeError, KeyError, IndexError) as exc:
            reason = f"malformed attributes or shapes ({type(exc).__name__})"
        if reason:
            root = next((lost[i] for i in node.inputs if i in lost), "")
            if key_of(node) not in REGISTRY:
                kind, root = "unsupported", root or node.name
            elif root and (_is_shape_reason(reason) or node.name in unresolved):
                kind = "shape_lost"
                reason = f"shapes lost downstream of unscored node '{root}'; {reason}"
            elif contradiction:
                kind = "contradiction"
            else:
                kind = "shape_unknown"
                if node.name in unresolved and "shape" not in reason:
                    reason = f"output shape unresolved; {reason}"
                if producers is None:
                    producers = {o: n for n in graph.nodes for o in n.outputs if o}
                fed = _value_inputs(graph, node, producers)
                if fed:
                    reason += (f"; it follows from the value of model input{'s' if len(fed) > 1 else ''} "
                               f"{', '.join(repr(f) for f in fed)}: give {'them' if len(fed) > 1 else 'it'} with "
                               + " ".join(f"--value {f}=V,..." for f in fed))
            for o in node.outputs:
                if o and (root or kind != "shape_unknown"):
                    lost[o] = root or node.name
            rows.append(Row(node, None, shape, dtype, reason, kind, root if kind == "shape_lost" else ""))
            unsupported.append({"node": node.name, "op_type": key_of(node), "reason": reason, "kind": kind})
            continue
        if w.note:
            noted.setdefault((node.op_type, w.note), []).append(node.name)
            if "unknown trip count" in w.note or "upper bound" in w.note:
                unsupported.append({"node": node.name, "op_type": key_of(node), "reason": w.note, "kind": "bound"})
        elif graph.bounded and (node.name in graph.bounded or (node.outputs and node.outputs[0] in graph.bounded)):
            # a Slice at run-time offsets (the loader's note says so): listed with the other bounds
            unsupported.append({"node": node.name, "op_type": key_of(node), "kind": "bound",
                                "reason": "offsets known only at run time: costed at its input's size (an upper bound)"})
        rows.append(Row(node, w, shape, dtype))
    for (op, note), names in noted.items():  # one line per op and note: a detector's 180 NonZero nodes
        who = names[0] if len(names) == 1 else \
            f"{len(names)} nodes: {', '.join(names[:3])}{', ...' if len(names) > 3 else ''}"
        warnings.append(f"{who} ({op}): {note}")
    _downstream_of_bounds(rows, warnings)
    _folded_products(graph, rows, warnings)
    if graph.subnormal:
        _mark_subnormals(graph, rows)
    if any(r.node.op_type == "DequantizeLinear" for r in rows):
        from dnnperf.qdq_runs import quantized_layers  # (it builds on this module's Inspection)

        quantized_layers(graph, rows, warnings)
    input_bytes = 0
    batch = None
    for name in graph.inputs:
        t = graph.tensors.get(name)
        if t is not None and t.shape is not None:
            input_bytes += t.nbytes or 0
            if batch is None and t.shape:  # an empty input (0 tokens) still has its batch
                batch = t.shape[graph.batch_axes.get(name, 0)] if len(t.shape) > graph.batch_axes.get(name, 0) else None
    unbatched = unbatched_input(graph, rows) if batch is not None else ""
    if unbatched:
        t = graph.tensors[unbatched]
        warnings.append(f"input '{unbatched}' {list(t.shape)} has no batch axis (the first convolution reads it with one "
                        f"more axis, of 1): one run is one sample" + (f", not {batch}" if batch != 1 else ""))
        batch = 1
    insp = Inspection(path, graph, rows, unsupported, warnings, input_bytes, batch, unbatched)
    cov = insp.coverage()
    if not cov["complete"]:
        k = cov["unscored_by_kind"]
        no_model = sorted({key_of(r.node) for r in insp.unscored() if r.kind == "unsupported"})
        parts = [f"{k['unsupported']} with no cost model ({', '.join(no_model[:6])})"] if k["unsupported"] else []
        if k["shape_lost"]:
            parts.append(f"{k['shape_lost']} downstream of them whose shapes are lost")
        if k["shape_unknown"]:
            parts.append(f"{k['shape_unknown']} whose shapes could not be resolved")
        if k["contradiction"]:
            parts.append(f"{k['contradiction']} whose shapes contradict each other")
        warnings.insert(0, f"PARTIAL: {cov['nodes_unscored']} of {cov['nodes_total']} nodes are NOT scored ("
                           + "; ".join(parts) + ") — the figures leave them out")
    return insp
