"""Tensor parallelism over more devices than a model has key/value heads (``dnnperf.llm.parallel``,
``--tp N`` with N a multiple of the heads), as vLLM and TensorRT-LLM split a grouped- or multi-query
decoder: each device computes, holds and reads one whole key/value head (replicated N / heads times) and
its N-th of the query heads. ``ways_of`` finds, for each split tensor, over how many devices it is spread;
``share_replicated`` is one device's part of a layer under that split.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dnnperf.errors import DnnperfError
from dnnperf.llm.parallel import COLUMN, ROW, SPLIT, kv_heads, share
from dnnperf.workload import Workload


@dataclass(frozen=True)
class Ways:
    """Over how many devices each split tensor is spread (``tensors``; the key/value path's at the KV
    heads' count, every other at n), and the key/value projections' output widths a device computes
    (``widths``: node name -> the product's N on one device)."""

    tensors: dict
    widths: dict


def ways_of(graph, role: dict, cache, n: int, r: int, work: dict) -> Ways:
    """The split of a step over ``n`` devices when the model has ``r`` < n key/value heads (as vLLM and
    TensorRT-LLM serve it): each device computes, holds and reads one head's keys and values (the heads
    replicated n / r times), and its n-th of the query heads. The key/value projections are the column
    products that feed a cache (found walking back from a node that reads one: a Concat that extends it,
    or a fused attention op's key and value inputs, packed into its query input when those are empty);
    a product that packs the queries with them computes its n-th of the query columns and one head of
    each of the others. Walking forward, a tensor made only from key/value tensors is spread r ways,
    unless it is larger than those inputs (the repeat of a head for its query heads: n ways), and any
    other split tensor n ways. Refuses query heads that ``n`` does not divide."""
    caches = {c.name for c in cache}
    made = {o: node for node in graph.nodes for o in node.outputs if o}
    split = set(caches) | {o for node in graph.nodes if role.get(node.name) in (COLUMN, SPLIT) for o in node.outputs if o}
    heads, dim = _head_shape(cache)
    # the past as a node reads it: a cache input, or one taken apart or reordered on the way (GPT-2's [2, ...]
    # past split into keys and values, a transposed or cast cache)
    past = set(caches)
    seeds = []
    for node in graph.nodes:
        if role.get(node.name) != SPLIT or not past.intersection(node.inputs):
            continue
        acts = [i for i in node.inputs if i in split]
        if node.op_type == "Concat":
            seeds.extend(i for i in acts if i not in past)
        elif all(i in past for i in acts) and len(acts) == 1:
            past.update(o for o in node.outputs if o)
        else:  # a fused attention op: (query, key, value, past key, past value, ...)
            kv = [i for i in node.inputs[1:3] if i and i not in past]
            seeds.extend(kv or node.inputs[:1])
    kv_width = 2 * heads * dim  # the keys' and values' columns of one token, every head
    widths, packed = {}, set()
    for t in seeds:
        for node in _back_to(t, made, role, split, COLUMN):
            g = getattr(work.get(node.name), "gemm", None)
            if g is None:
                continue
            q = g.n - kv_width if g.n > kv_width else 0  # the queries' columns packed with them
            widths[node.name] = -(-q // n) + -(-min(g.n, kv_width) // r)
            if q:
                packed.add(node.name)
    if not widths:
        # no product writes the cache as this walk knows (a Concat with the past, a fused attention op): its
        # key/value projections would be split n ways as if they held whole heads, quietly too small
        raise DnnperfError(f"--tp {n}: the model's {r} key/value heads are fewer than the devices, and no product that "
                           "writes its KV cache (through a Concat with the past or a fused attention op) was found to "
                           f"hold them whole — pick a --tp that divides {r}")
    tensors = {c: r for c in caches}
    for node in graph.nodes:
        ro = role.get(node.name)
        outs = [o for o in node.outputs if o]
        if ro == COLUMN:  # a key/value projection's output r ways; one packed with the queries, as the rest, n
            w = r if node.name in widths and node.name not in packed else n
        elif ro == SPLIT:
            ins = [(tensors[i], i) for i in node.inputs if i in tensors]
            w = max((k for k, _ in ins), default=n)
            if w < n and outs and _numel(graph, outs[0]) > sum(_numel(graph, i) for _, i in ins):
                w = n  # a key/value head repeated for its query heads: each device makes its own queries' copies
        else:
            continue
        for o in outs:
            tensors[o] = w
        if past.intersection(node.inputs):  # the present caches a node extending a past one writes
            for k, o in enumerate(node.outputs):
                if o and o in graph.outputs and (node.op_type == "Concat" or k >= 1):
                    tensors[o] = r
    _check_query_heads(graph, role, made, split, tensors, n, r, dim, work)
    return Ways(tensors, widths)


def _check_query_heads(graph, role, made, split, tensors, n, r, dim, work) -> None:
    """Refuse a split whose ``n`` does not divide the query heads: the K of a row-parallel product that
    reads attention's output (a split tensor made from key/value tensors upstream) over the head dim."""
    for node in graph.nodes:
        if role.get(node.name) != ROW:
            continue
        cone = _back_to(next((i for i in node.inputs if i in split), ""), made, role, split, None)
        if not any(tensors.get(i) == r for m in cone for i in m.inputs):
            continue
        g = getattr(work.get(node.name), "gemm", None)
        if g is not None and dim and g.k % dim == 0 and (g.k // dim) % n:
            raise DnnperfError(f"--tp {n} does not divide the model's {g.k // dim} query heads: each device holds whole "
                               f"heads — pick a divisor of {g.k // dim}")


def _back_to(t: str, made: dict, role: dict, split: set, stop: str | None, limit: int = 64) -> list:
    """The nodes walking back from tensor ``t`` through split nodes' split inputs: the ones of role
    ``stop`` met on the way (not walked past), or (``stop`` None) every node walked."""
    out, stack, seen = [], [t], set()
    while stack and len(seen) < limit:
        node = made.get(stack.pop())
        if node is None or node.name in seen:
            continue
        seen.add(node.name)
        ro = role.get(node.name)
        if stop is not None and ro == stop:
            out.append(node)
            continue
        if stop is None:
            out.append(node)
        if ro in (SPLIT, COLUMN) and (stop is not None or ro == SPLIT):
            stack.extend(i for i in node.inputs if i in split)
    return out


def _head_shape(cache) -> tuple[int, int]:
    """(key/value heads, head dim) of the caches: the axes next to the sequence axis."""
    for c in cache:
        h = kv_heads(c)
        tail = c.dims[c.seq_axis + 1:]
        if h and tail and all(isinstance(d, int) for d in tail):
            dim = 1
            for d in tail:
                dim *= d
            return h, dim
    return 0, 0


def _numel(graph, name: str) -> int:
    t = graph.tensors.get(name)
    return (t.numel or 0) if t is not None else 0


def share_replicated(row, ro: str, n: int, r: int, ways: Ways, graph) -> Workload:
    """One device's part of ``row`` when the key/value heads are spread over ``r`` < ``n`` devices
    (``ways_of``): a key/value projection at the width a device computes, a split node at the share
    of its output a device makes, each input read at the share of it a device holds."""
    w = row.workload
    node = row.node
    if ro == COLUMN and node.name in ways.widths:
        return w.with_width(ways.widths[node.name])
    if ro != SPLIT:
        return share(w, ro, n)
    outs = [o for o in node.outputs if o]
    k = ways.tensors.get(outs[0], n) if outs else n
    out = share(w, SPLIT, k)
    g = w.gemm
    if w.family == "attention" and g is not None and r < k:
        # a fused attention op's products, one per key/value head (its query heads' rows stacked): a device
        # runs its one head's with its k-th of the query heads as rows
        c = -(-g.count // r)
        out = replace(out, gemm=replace(g, count=c, m=-(-g.m * g.count // (c * k))))
    # each input at the share of it a device holds (a replicated one at the node's, as for any split node)
    consts = graph.constants or ()
    known = [graph.tensors.get(i) for i in node.inputs if i and i not in consts]
    ins = [(t.nbytes, ways.tensors.get(t.name, k)) for t in known if t is not None and t.shape is not None]
    total = sum(b for b, _ in ins)
    if total and any(m != k for _, m in ins):
        out = replace(out, act_bytes_read=int(round(w.act_bytes_read * sum(b / m for b, m in ins) / total)))
    # and each output written at its own share: a fused attention op's output over the device's query heads,
    # its present caches (what it writes of them: only the new tokens in a phase) at the key/value heads'
    made = [(graph.tensors[o].nbytes, ways.tensors.get(o, k)) for o in outs
            if o in graph.tensors and graph.tensors[o].shape is not None]
    others = [m for _, m in made if m != k]
    if others:
        own = min(w.bytes_written, sum(b for b, m in made if m == k))
        out = replace(out, bytes_written=int(round(own / k + (w.bytes_written - own) / min(others))))
    return out
