"""If nodes whose condition is known at load time, replaced by the nodes of the branch they take.

A runtime runs a taken branch node by node with its ordinary kernels (ONNX Runtime's If kernel hands
the branch to a subgraph executor; its graph optimiser inlines the branch outright when the condition
is a constant), so each of those nodes is costed as the kernel it is: a convolution at a convolution's
pace, a view as a view. Costed as one lumped control-flow layer, silero-vad's LSTM decoder (an If on
the state's shape around Ifs on its size) took the whole branch's bytes at the pace of code with no
fast kernel: 289 us against 93-125 us measured (ONNX Runtime, 2-core VM).

Only a branch that can stand in the graph as it is: every node's outputs resolved, no control flow
left inside it (nested Ifs that are known are inlined first), and each of its outputs made by one of
its own nodes (renamed to the If's output). Anything else stays a control-flow node: its branch's nodes
are still scored each as its kernel (``scoring._control``), but as one layer, fused with nothing around it.
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf.ir import Graph, Node, taken_branch_label


def inline(nodes: list[Node], tensors: dict, res, unresolved: list[str], inits: frozenset,
           notes: list[str]) -> tuple[list[Node], frozenset]:
    """The loader's step: ``inline_taken_branches`` over the main graph, the branches' tensors added
    to ``res``'s types, a note when any If was replaced. Returns (nodes, the weights' names)."""
    weights = set(inits)
    nodes, inlined = inline_taken_branches(nodes, tensors, res.values, set(unresolved), weights)
    if not inlined:
        return nodes, inits
    res.types.update({k: (t.shape, t.dtype) for k, t in tensors.items() if k not in res.types})
    notes.append(f"{inlined} If node(s) whose condition is known at load time are costed as the nodes of the "
                 "branch they take (not the If's own dispatch nor a runtime's set-up of the branch)")
    return nodes, frozenset(weights)


def inline_taken_branches(nodes: list[Node], tensors: dict, values: dict, unresolved: set[str],
                          inits: set[str]) -> tuple[list[Node], int]:
    """``nodes`` with every If whose condition ``values`` holds replaced by its taken branch's nodes
    (recursively); ``tensors``, ``values`` and ``inits`` (weight names) gain the branch's own. Returns
    (nodes, Ifs inlined)."""
    out: list[Node] = []
    count = 0
    names = {n.name for n in nodes}
    for node in nodes:
        body = _taken(node, values)
        inner = None if body is None or node.name in unresolved else _branch_nodes(node, body, values)
        if inner is None:
            out.append(node)
            continue
        branch, k = inner
        count += 1 + k
        tensors.update({k2: t for k2, t in body.tensors.items() if k2 not in tensors})
        inits.update(body.initializers)
        for n in branch:
            name = n.name
            i = 1
            while name in names:
                i += 1
                name = f"{n.name}#{i}"
            names.add(name)
            out.append(replace(n, name=name))
    return out, count


def _taken(node: Node, values: dict) -> Graph | None:
    if node.op_type != "If" or node.domain not in ("", "ai.onnx") or not node.inputs:
        return None
    label = taken_branch_label(values.get(node.inputs[0]))
    return None if label is None else node.subgraphs.get(label)


def _branch_nodes(node: Node, body: Graph, values: dict) -> tuple[list[Node], int] | None:
    """The branch's nodes with its outputs renamed to the If's, or None when it cannot stand inline."""
    if body.unresolved or len(body.outputs) != len(node.outputs) or len(set(body.outputs)) != len(body.outputs):
        return None
    scope = dict(values)
    scope.update(body.values)
    inits = set(body.initializers)
    inner, k = inline_taken_branches(list(body.nodes), body.tensors, scope, set(), inits)
    if any(n.subgraphs for n in inner):
        return None  # a Loop, a Scan or an If decided at run time inside it: the branch stays one node
    made = {o for n in inner for o in n.outputs if o}
    if any(o not in made for o in body.outputs):
        return None  # an output passed straight through from outside: nothing to rename
    rename = {b: o for b, o in zip(body.outputs, node.outputs) if o}
    for b, o in rename.items():
        if b in scope and o not in values:
            values[o] = scope[b]
    values.update({k2: v for k2, v in scope.items() if k2 not in values})
    body.initializers = frozenset(inits)
    return [replace(n, inputs=tuple(rename.get(i, i) for i in n.inputs),
                    outputs=tuple(rename.get(o, o) for o in n.outputs)) for n in inner], k
