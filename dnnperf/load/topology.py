"""Topology: execution order, structural checks (cycles, duplicate producers, dangling names) and
the one walker over control-flow subgraphs that every other loader step uses."""

from __future__ import annotations

import heapq

from dnnperf.errors import DnnperfError

SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
_TENSOR, _GRAPH, _GRAPHS = 4, 5, 10  # AttributeProto types


def node_subgraphs(n):
    """(attribute label, GraphProto) for every body a node carries."""
    for a in n.attribute:
        if a.type == _GRAPH:
            yield a.name, a.g
        elif a.type == _GRAPHS:
            for k, g in enumerate(a.graphs):
                yield f"{a.name}[{k}]", g


class NodeView:
    """A NodeProto's names read once into plain Python (reading a repeated string field through the
    protobuf runtime costs about a microsecond per element, and the loader walks every node several
    times). It answers to the same field names as the proto (``op_type``, ``domain``, ``name``,
    ``input``, ``output``, ``attribute``), so every loader step takes either; ``proto`` is the node
    itself, for ONNX's own functions; ``const`` the TensorProto of a Constant whose one attribute is its
    ``value`` tensor (None for any other node: the loader reads that tensor several times). Made by
    ``views``; after ONNX's inference the loader points ``attribute`` and ``proto`` at the same node of
    the inferred copy (whose control-flow bodies carry the shapes inference found)."""

    __slots__ = ("op_type", "domain", "name", "input", "output", "attribute", "proto", "const")


def views(nodes) -> list[NodeView]:
    """A ``NodeView`` of each node, in the order given (filled here rather than by an ``__init__``:
    one Python call less per node, a third of the time on a 6,000-node graph)."""
    out = []
    append = out.append
    new = NodeView.__new__
    for n in nodes:
        v = new(NodeView)
        v.op_type = op = n.op_type
        v.domain = n.domain
        v.name = n.name
        v.input = tuple(n.input[:])
        v.output = tuple(n.output[:])
        v.attribute = attrs = n.attribute
        v.proto = n
        v.const = None
        if op == "Constant" and len(attrs) == 1:
            a = attrs[0]
            if a.type == _TENSOR and a.name == "value":
                v.const = a.t
        append(v)
    return out


def walk_graphs(g, max_depth: int = 64, _depth: int = 0):
    """``g`` and every subgraph nested in its nodes, depth first, at most ``max_depth`` levels down."""
    yield g
    if _depth >= max_depth:
        return
    for n in g.node:
        if n.attribute:
            for _, sg in node_subgraphs(n):
                yield from walk_graphs(sg, max_depth, _depth + 1)


def check_bodies(nodes, path: str) -> None:
    """Each control-flow node's bodies have the inputs and outputs its operator defines (ONNX's own
    inference, run without strict mode, lets a Loop body short of outputs through, and the loader then
    indexed past them): a Loop with N carried values and K scan outputs has a body of 2 + N inputs and
    1 + N + K outputs; a Scan's body and an If's branches have one output per node output (their inputs
    are left to the checks that read them). ``nodes``: the main graph's nodes (views); the bodies nested
    in them are reached with ``walk_graphs``."""
    for n in nodes:
        if n.op_type in _CONTROL and n.domain in ("", "ai.onnx"):
            _check_arity(n, path)
            for _, body in node_subgraphs(n):
                for g in walk_graphs(body, MAX_DEPTH):
                    for m in g.node:
                        if m.op_type in _CONTROL and m.domain in ("", "ai.onnx"):
                            _check_arity(m, path)


_CONTROL = frozenset({"Loop", "Scan", "If"})
# default-domain ops that carry graphs (other domains' ops may carry any: ORT's BeamSearch its decoder)
WITH_BODIES = _CONTROL | {"SequenceMap"}


def _check_arity(n, path: str) -> None:
    """``check_bodies`` for one node's own bodies."""
    op = n.op_type
    outs = len(n.output)
    for label, g in node_subgraphs(n):
        if op == "Loop":
            carried = max(len(n.input) - 2, 0)
            want_in, want_out = 2 + carried, 1 + outs
            ok = len(g.input) == want_in and len(g.output) == want_out and outs >= carried
        else:  # Scan, If: one body output per node output
            want_in, want_out = None, outs
            ok = len(g.output) == want_out
        if not ok:
            need = f"{want_in} inputs and {want_out} outputs" if want_in is not None else f"{want_out} outputs"
            raise DnnperfError(f"node '{n.name or op}' ({op}) in '{path}': its {label} has {len(g.input)} inputs "
                               f"and {len(g.output)} outputs where the node's {len(n.input)} inputs and {outs} "
                               f"outputs need {need} — the model is malformed; re-export it")


def all_initializers(g):
    """Initializers of ``g`` and of every nested subgraph."""
    for sg in walk_graphs(g, max_depth=10_000):
        yield from sg.initializer


def topo_order(nodes, available: set[str], graph_name: str = "main graph") -> list:
    """Nodes in a valid execution order; reject cycles, duplicate producers and dangling inputs.

    ONNX requires nodes to be stored sorted, so one pass usually confirms the order; otherwise
    Kahn's algorithm sorts them (and finds cycles), as it does for a graph with control flow (a body may
    read a name produced further down; of the default domain's ops only those of ``SUBGRAPH_OPS`` carry
    bodies, and a custom op's attributes are looked at)."""
    seen = set(available)
    add = seen.add
    for n in nodes:
        if n.op_type in SUBGRAPH_OPS:
            return _kahn(nodes, available, graph_name)  # bodies may read outer names
        if n.attribute and n.domain not in ("", "ai.onnx"):  # a custom op may carry a body too
            for a in n.attribute:
                if a.type == _GRAPH or a.type == _GRAPHS:
                    return _kahn(nodes, available, graph_name)
        for i in n.input:
            if i not in seen and i:
                return _kahn(nodes, available, graph_name)
        for o in n.output:
            if o:
                if o in seen:
                    return _kahn(nodes, available, graph_name)
                add(o)
    return nodes  # already in order (the same list object)


def _kahn(nodes, available: set[str], graph_name: str) -> list:
    produced_by: dict[str, int] = {}
    for idx, n in enumerate(nodes):
        for o in n.output:
            if o:
                if o in produced_by or o in available:
                    raise DnnperfError(
                        f"tensor '{o}' is produced twice in the {graph_name} (node '{n.name or n.op_type}') — "
                        "the model is malformed; re-export it"
                    )
                produced_by[o] = idx
    indeg = [0] * len(nodes)
    users: dict[int, list[int]] = {}
    for idx, n in enumerate(nodes):
        deps = set()
        direct = {i for i in n.input if i}
        for i in _inputs_with_subgraphs(n):
            if not i or i in available:
                continue
            p = produced_by.get(i)
            if p is None:
                if i in direct:
                    raise DnnperfError(
                        f"node '{n.name or n.op_type}' reads tensor '{i}', which no node, input or initializer "
                        f"produces in the {graph_name} — the model is malformed; re-export it"
                    )
                continue  # an outer-scope name a body reads from further out: tolerated
            deps.add(p)
        indeg[idx] = len(deps)
        for p in deps:
            users.setdefault(p, []).append(idx)
    ready = [i for i in range(len(nodes)) if indeg[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users.get(i, ()):
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        stuck = [nodes[i].name or nodes[i].op_type for i in range(len(nodes)) if indeg[i] > 0][:3]
        raise DnnperfError(
            f"the {graph_name} has a cycle (nodes {', '.join(stuck)} ... depend on each other) — "
            "ONNX graphs must be acyclic; re-export the model"
        )
    return [nodes[i] for i in order]


MAX_DEPTH = 64


def _inputs_with_subgraphs(n, depth: int = 0):
    """A node's inputs plus the outer-scope names its bodies read."""
    yield from n.input
    for _, g in node_subgraphs(n):
        yield from outer_names(g, depth + 1)


def outer_names(g, depth: int = 1):
    """Names a (sub)graph reads without defining them (from an enclosing scope), nested bodies included."""
    if depth > MAX_DEPTH:
        raise DnnperfError(f"the model nests control-flow subgraphs more than {MAX_DEPTH} deep — refusing to analyse it")
    local = {i.name for i in g.input} | {i.name for i in g.initializer}
    for n in g.node:
        local.update(o for o in n.output if o)
    for n in g.node:
        for i in _inputs_with_subgraphs(n, depth):
            if i and i not in local:
                yield i
