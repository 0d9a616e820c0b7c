"""Control flow: the cost of If/Loop/Scan is the cost of the subgraphs they run, each body node costed
as the kernel it is (``Workload.parts``, scored one by one) and each run of a Loop or Scan body counted
(``Workload.iterations``: a CPU runtime's fixed cost per iteration, ``kernel_fixed_us`` "control").

If: the branch taken when the condition folds at load time, else the dearer branch. Loop: body x
trip count when the trip count is a constant or a scan output's length is known (one value per
iteration that ran); otherwise one iteration, flagged in the workload's note; a constant trip count
with a condition computed at run time is an upper bound, flagged as one. Scan: body x the scanned
axis length.
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf.ir import taken_branch_label
from dnnperf.ops import Ctx, Unsupported, cost_node, register
from dnnperf.workload import FREE_FAMILIES, Workload


def _body(graph, label: str) -> Workload:
    """The sum of a body's nodes, carrying each assumption they were costed under (a nested Loop's
    unknown trip count, an If's dearer branch, an output at its upper bound) in the note, so the
    enclosing node is flagged too."""
    total = Workload(family="control", launches=0)
    notes, parts, inner = [], [], 0
    for n in graph.nodes:
        try:
            w = cost_node(graph, n)
        except Unsupported as exc:
            raise Unsupported(f"{label} node '{n.name}': {exc}") from None
        if w.note:
            notes.append(f"{label} node '{n.name}' ({n.op_type}): {w.note}")
        w = _output_copy(graph, n, w)
        total = total + w
        if w.parts:  # a nested If, Loop or Scan: its own parts, as many times as it runs them
            parts += w.parts
            inner += w.iterations
        else:
            parts.append((n.op_type, w, 1))
    return Workload(family="control", dtype=total.dtype, macs=total.macs, other_ops=total.other_ops,
                    act_bytes_read=total.act_bytes_read, weight_bytes=total.weight_bytes,
                    bytes_written=total.bytes_written, parallel_work=total.parallel_work,
                    gemm=total.gemm, launches=total.launches, note="; ".join(notes), parts=tuple(parts),
                    iterations=inner, host_waits=total.host_waits, weights_unread=total.weights_unread)


def _output_copy(graph, node, w: Workload) -> Workload:
    """An Identity that writes one of a body's outputs is a copy: a runtime cannot remove it as it
    removes one in the main graph (the body hands each run's outputs over in buffers of their own).
    ONNX Runtime copies the 40 KB state of skl2onnx's k-nearest-neighbours Scan at every one of its
    iterations (a [512, 20] batch)."""
    if node.op_type != "Identity" or w.family not in FREE_FAMILIES or not node.outputs \
            or node.outputs[0] not in graph.outputs:
        return w
    t = graph.tensors.get(node.outputs[0])
    if t is None or not t.nbytes:
        return w
    return Workload("movement", dtype=t.dtype, act_bytes_read=t.nbytes, bytes_written=t.nbytes,
                    parallel_work=t.numel or 1)


def _runs(w: Workload, trips: int, decides: bool = False) -> Workload:
    """A Loop or Scan body (``_body``) run ``trips`` times: each run is one iteration more, besides the
    iterations of the loops nested in it; ``decides``: the body computes the Loop's next condition,
    which the runtime reads back after every run (``Workload.host_waits``)."""
    return replace(w, iterations=w.iterations + 1, host_waits=w.host_waits + int(decides)).scaled(trips)


def _noted(w: Workload, note: str) -> Workload:
    """``w`` with ``note`` put before the notes its body's nodes carry."""
    return replace(w, note=f"{note}; {w.note}" if w.note else note)


def if_(ctx: Ctx):
    label = taken_branch_label(ctx.value(0))
    if label is not None:  # known at load time (folded from shapes): that branch
        taken = ctx.node.subgraphs.get(label)
        if taken is not None:
            return _body(taken, "If branch taken")
    branches = [_body(g, f"If branch {k}") for k, g in sorted(ctx.node.subgraphs.items())]
    if not branches:
        raise Unsupported("If without branches")
    best = max(branches, key=lambda w: (w.ops, w.bytes_total))
    best = replace(best, host_waits=best.host_waits + 1)  # the runtime reads the condition to pick the branch
    cond_name = ctx.node.inputs[0] if ctx.node.inputs else ""
    hint = (f"; give it with --value {cond_name}=1 or --value {cond_name}=0"
            if cond_name in ctx.graph.inputs and not ctx.graph.is_body else "")
    return _noted(best, "dearer branch costed (condition unknown before run time)" + hint)


def loop(ctx: Ctx):
    body = ctx.node.subgraphs.get("body")
    if body is None:
        raise Unsupported("Loop without body")
    w = _body(body, "Loop body")
    decides = _body_decides(body)
    m = ctx.value(0)
    if m is not None and m.size == 1 and 0 <= int(m.reshape(-1)[0]) < 2**31:
        trips = int(m.reshape(-1)[0])
        if trips > 1 and _may_stop_early(ctx, decides):
            return _noted(_runs(w, trips, decides),
                          f"costed at its maximum trip count {trips} (an upper bound): its "
                          "condition, computed at run time, may end it earlier")
        return _runs(w, trips, decides)
    # a scan output stacks one value per iteration that ran: its length is the trip count
    n_state = len(ctx.node.inputs) - 2
    for o in ctx.node.outputs[n_state:]:
        t = ctx.graph.tensors.get(o) if o else None
        if t is not None and t.shape:
            return _runs(w, t.shape[0], decides)
    return _noted(_runs(w, 1, decides), "unknown trip count: costed as ONE iteration (a lower bound)" + _trip_hint(ctx))


def _may_stop_early(ctx, decides: bool) -> bool:
    """Whether a Loop's condition can end it before its trip count: its starting condition is not a
    constant true, or the body computes the next one (``decides``: ``_body_decides``)."""
    cond = ctx.node.inputs[1] if len(ctx.node.inputs) > 1 else ""
    if cond:
        v = ctx.value(1)
        if v is None or v.size != 1 or not bool(v.reshape(-1)[0]):
            return True
    return decides


def _body_decides(body) -> bool:
    """Whether a Loop's body computes its next condition (a `while`), rather than passing its own
    condition input through or writing a constant true (a `for i in range(n)` export)."""
    if len(body.inputs) < 2 or not body.outputs:
        return False
    out = body.outputs[0]
    seen = set()
    while out not in seen:  # through Identity nodes back to the body's own condition input
        seen.add(out)
        if out == body.inputs[1]:
            return False
        made = next((n for n in body.nodes if out in n.outputs), None)
        if made is not None and made.op_type == "Constant":
            return False  # a constant condition (exporters write true; a do-once false is not told apart)
        if made is None or made.op_type != "Identity" or not made.inputs:
            break
        out = made.inputs[0]
    v = body.values.get(out)
    return not (out in body.constants and v is not None and v.size == 1 and bool(v.reshape(-1)[0]))


def _trip_hint(ctx) -> str:
    """How to give the trip count when it is a model input (``--value NAME=N`` folds it)."""
    m = ctx.node.inputs[0] if ctx.node.inputs else ""
    if not m:
        return "; the loop runs until its condition turns false"
    if m in ctx.graph.inputs and not ctx.graph.is_body:
        return f"; give it with --value {m}=N"
    return ""


def scan(ctx: Ctx):
    body = ctx.node.subgraphs.get("body")
    if body is None:
        raise Unsupported("Scan without body")
    w = _body(body, "Scan body")
    n_scan = int(ctx.attr("num_scan_inputs", 1))
    n_state = len(ctx.node.inputs) - n_scan
    if n_scan < 1 or n_state < 0:  # (2^31 scan inputs built a list of 2^31 axes: 16 GB)
        raise Unsupported(f"Scan with num_scan_inputs {n_scan} and {len(ctx.node.inputs)} inputs")
    axes = ctx.attr("scan_input_axes") or [0]
    first = ctx.in_shape(n_state)
    ax = int(axes[0])
    if not -len(first) <= ax < len(first):
        raise Unsupported(f"Scan input axis {ax} is out of range for a rank-{len(first)} input")
    return _runs(w, first[ax])


def sequence_map(ctx: Ctx):
    """SequenceMap: the body once per element of the input sequence; the length is known only at
    run time, so one iteration is costed (an explicit lower bound, as for Loop)."""
    body = ctx.node.subgraphs.get("body")
    if body is None:
        raise Unsupported("SequenceMap without body")
    w = _body(body, "SequenceMap body")
    return _noted(_runs(w, 1), "unknown trip count (sequence length): costed as ONE iteration (a lower bound)")


register({"If": if_, "Loop": loop, "Scan": scan, "SequenceMap": sequence_map})
