"""Tensor sequences whose elements are known at load time.

A sequence value is a handle (shape ``()``, dtype ``"sequence"``) to a list of tensors. ONNX's own
inference keeps one element type for a whole sequence, and a sequence filled inside a Loop leaves it
with no sizes at all: the legacy PyTorch exporter writes ``torch.tensor_split`` (MViT's class-token
split, for one) as SequenceEmpty -> Loop { Slice at the iteration number -> SequenceInsert } ->
SequenceAt, and every layer after the SequenceAt stayed unscored (3,652 of mvit_v2_s's 12,234 nodes).

Here a resolver's ``seqs`` maps a sequence to the (dims, dtype) of each element, in order, when
every one is known: SequenceEmpty / SequenceConstruct / SequenceInsert / SequenceErase /
SplitToSequence build the list, SequenceAt / SequenceLength / ConcatFromSequence read it, and a Loop
with a known trip count (at most ``MAX_UNROLL``) that carries a known sequence is run trip by trip
with its iteration number as a value, so what each trip inserts is sized. Nothing is guessed: an
element, a position or a trip count that is not known leaves the outputs open, as before.
"""

from __future__ import annotations

import numpy as np

from dnnperf.load.read import static
from dnnperf.load.shapes import axis_index

SEQ_OPS = frozenset({"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
                     "SequenceLength", "SplitToSequence", "ConcatFromSequence"})
MAX_UNROLL = 64  # trips of a Loop run one by one (tensor_split's loops run once per split point)
_HANDLE = ((), "sequence")


def counter_shape(vi, counter: bool = True) -> tuple:
    """The shape a Loop feeds its body's iteration number (``counter``) or condition: the rank the body
    declares, a scalar or [1] (ONNX Runtime hands the body that rank; torch.onnx declares the number
    [1]). A body that leaves the number without a shape cannot run on ONNX Runtime at all
    (``untyped_counters`` says so in a note): it is taken as [1], the form under which torch.onnx's
    bodies index their tables (torchvision's MViT-V2 export leaves 48 of its 51 so); a condition left
    so, as a scalar."""
    t = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
    if t is None or not t.HasField("shape"):
        return (1,) if counter else ()
    return (1,) if len(t.shape.dim) == 1 else ()


def untyped_counters(nodes) -> list[str]:
    """The Loops among ``nodes`` whose body leaves its iteration number without a shape."""
    out = []
    for n in nodes:
        if n.op_type == "Loop" and n.domain in ("", "ai.onnx"):
            body = next((a.g for a in n.attribute if a.name == "body"), None)
            t = body.input[0].type if body is not None and body.input else None
            if t is not None and not (t.HasField("tensor_type") and t.tensor_type.HasField("shape")):
                out.append(n.name or n.output[0])
    return out


def untyped_note(loops: list[str]) -> str:
    return (f"{len(loops)} Loop(s) ({', '.join(loops[:3])}{', ...' if len(loops) > 3 else ''}) leave their body's "
            "iteration number without a shape, which ONNX Runtime refuses to run: costed with it as [1], as "
            "torch.onnx declares it")


def _elem(res, name):
    t = res.types.get(name) if name else None
    dims = static(t[0]) if t is not None and t[1] != "sequence" else None
    return None if dims is None else (tuple(dims), t[1])


def _pos(res, node, k: int, default: int | None, n: int, end_ok: bool) -> int | None:
    """Position input ``k`` of ``node`` as an index into a list of ``n`` (None: unknown or out of range)."""
    if len(node.input) <= k or not node.input[k]:
        return default
    v = res.value(node.input[k])
    if v is None or np.asarray(v).size != 1:
        return None
    p = int(np.asarray(v).reshape(-1)[0])
    hi = n if end_ok else n - 1
    if not -n <= p <= hi:
        return None
    return p + n if p < 0 else p


def infer(res, node) -> None:
    """Resolve sequence op ``node`` (default domain) from and into ``res.seqs``."""
    op, ins, outs = node.op_type, list(node.input), list(node.output)
    out = outs[0] if outs else ""
    if not out:
        return
    seqs, types = res.seqs, res.types
    a = res.attrs(node)
    if op in ("SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SplitToSequence"):
        types[out] = _HANDLE
        items = _build(res, node, op, ins, a)
        if items is not None:
            seqs[out] = items
        return
    items = seqs.get(ins[0]) if ins and ins[0] else None
    if items is None:
        return
    if op == "SequenceLength":
        types[out] = ((), "int64")
        res.values[out] = np.array(len(items), dtype=np.int64)
    elif op == "SequenceAt":
        p = _pos(res, node, 1, None, len(items), end_ok=False)
        if p is not None:
            types[out] = items[p]
    elif op == "ConcatFromSequence" and items:
        shape = _concat(items, a)
        if shape is not None:
            types[out] = (shape, items[0][1])


def _build(res, node, op, ins, a) -> list | None:
    if op == "SequenceEmpty":
        return []
    if op == "SequenceConstruct":
        items = [_elem(res, i) for i in ins]
        return None if any(e is None for e in items) else items
    items = res.seqs.get(ins[0]) if ins and ins[0] else None
    if op == "SplitToSequence":
        return _split(res, node, ins, a)
    if items is None:
        return None
    if op == "SequenceInsert":
        e = _elem(res, ins[1]) if len(ins) > 1 else None
        p = _pos(res, node, 2, len(items), len(items), end_ok=True)
        if e is None or p is None:
            return None
        return items[:p] + [e] + items[p:]
    # SequenceErase: the last element unless a position is given
    if not items:
        return None
    p = _pos(res, node, 1, len(items) - 1, len(items), end_ok=False)
    return None if p is None else items[:p] + items[p + 1:]


def _split(res, node, ins, a) -> list | None:
    x = _elem(res, ins[0]) if ins else None
    if x is None or not x[0]:
        return None
    dims, dtype = x
    try:
        ax = axis_index(int(a.get("axis", 0)), len(dims))
    except ValueError:
        return None
    size = dims[ax]
    if len(ins) < 2 or not ins[1]:  # one element per index along the axis
        keep = int(a.get("keepdims", 1))
        one = dims[:ax] + ((1,) if keep else ()) + dims[ax + 1:]
        return [(one, dtype)] * size
    v = res.value(ins[1])
    if v is None:
        return None
    v = np.asarray(v)
    if v.ndim == 0:
        step = int(v)
        if step <= 0:
            return None
        sizes = [min(step, size - s) for s in range(0, size, step)]
    else:
        sizes = [int(s) for s in v.reshape(-1)]
        if sum(sizes) != size or min(sizes, default=0) < 0:
            return None
    return [(dims[:ax] + (s,) + dims[ax + 1:], dtype) for s in sizes]


def _concat(items, a) -> tuple | None:
    """ConcatFromSequence's output dims: the elements joined along ``axis`` (stacked on a new axis
    with ``new_axis=1``); None where they do not line up."""
    first = items[0][0]
    new = int(a.get("new_axis", 0)) == 1
    if "axis" not in a:
        return None
    try:
        ax = axis_index(int(a["axis"]), len(first) + (1 if new else 0))
    except ValueError:
        return None
    if new:
        if any(e[0] != first for e in items):
            return None
        return first[:ax] + (len(items),) + first[ax:]
    if ax >= len(first):
        return None
    rest = first[:ax] + first[ax + 1:]
    if any(len(e[0]) != len(first) or e[0][:ax] + e[0][ax + 1:] != rest for e in items):
        return None
    return first[:ax] + (sum(e[0][ax] for e in items),) + first[ax + 1:]


def unroll(node, res, body, trips: int, inner, settle) -> dict | None:
    """Run Loop ``node`` trip by trip when it carries a sequence whose elements are known: each trip
    sees its iteration number as a value, so a Slice at that number is sized and what the trip
    inserts is known. Sets the Loop's state outputs (sequences and tensors) and the scan outputs
    whose per-trip shape does not change; returns the first trip's resolved body shapes (for the
    Loop's cost), or None (nothing set) when a trip leaves a state unknown or its condition open.
    ``inner(res, body)`` makes a body resolver, ``settle(sub, first)`` resolves the body with ``sub``."""
    ins = list(node.input)
    states = ins[2:]
    if trips > MAX_UNROLL or not any(s in res.seqs for s in states):
        return None
    n_state = len(states)
    cur = [res.types.get(s) for s in states]
    cur_seq = [res.seqs.get(s) for s in states]
    scans: list[list] = [[] for _ in range(len(body.output) - 1 - n_state)]
    first = None
    # the condition the first trip starts with; an absent one is true (a Loop run by its count alone)
    cond = res.value(ins[1]) if len(ins) > 1 and ins[1] else np.array(True)
    for it in range(trips):
        sub = inner(res, body)
        count, flag = counter_shape(body.input[0]), counter_shape(body.input[1], False)
        sub.types[body.input[0].name] = (count, "int64")
        sub.values[body.input[0].name] = np.array(it, dtype=np.int64).reshape(count)
        sub.types[body.input[1].name] = (flag, "bool")
        if cond is not None:  # the condition each trip starts with (a body passing it on folds)
            sub.values[body.input[1].name] = np.asarray(cond).reshape(flag)
        for k in range(n_state):
            name = body.input[2 + k].name
            if cur[k] is None or static(cur[k][0]) is None or (cur[k][1] == "sequence" and cur_seq[k] is None):
                return None
            sub.types[name] = cur[k]
            if cur_seq[k] is not None:
                sub.seqs[name] = list(cur_seq[k])
        settle(sub, it == 0)
        if first is None:
            first = sub
        for k in range(n_state):
            o = body.output[1 + k].name
            t = sub.types.get(o)
            cur[k] = (tuple(static(t[0])), t[1]) if t is not None and static(t[0]) is not None else None
            cur_seq[k] = sub.seqs.get(o)
        for j, vi in enumerate(body.output[1 + n_state:]):
            scans[j].append(_elem(sub, vi.name))
        cond = sub.value(body.output[0].name)
        if cond is None or np.asarray(cond).size != 1:
            if it + 1 < trips:
                return None
        elif not bool(np.asarray(cond).reshape(-1)[0]):
            break
    if any(t is None or static(t[0]) is None or (t[1] == "sequence" and s is None) for t, s in zip(cur, cur_seq)):
        return None
    for outer, t, s in zip(node.output, cur, cur_seq):
        if outer:
            res.types[outer] = t
            if s is not None:
                res.seqs[outer] = s
    for outer, per in zip(node.output[n_state:], scans):
        if outer and per and all(e is not None and e == per[0] for e in per):
            res.types[outer] = ((len(per),) + per[0][0], per[0][1])
    return first
