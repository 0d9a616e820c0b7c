"""Shape arithmetic: the small integer values a model computes from the Shape (or Size) of its
tensors. A runtime folds it once at load time when the model's input dims are static in the file;
when they are symbolic (a dynamic batch) it cannot fold the part that starts from the Shape of a
computed tensor and redoes it on the host every inference (``dnnperf.scoring`` prices that per op on
CPU runtimes, ``host_op_us``), less what its basic graph optimisations remove.
"""

from __future__ import annotations

import numpy as np

from dnnperf.load.read import static, type_shape


def symbolic_inputs(model) -> bool:
    """Are dims of the graph's (non-weight) tensor inputs left symbolic in the file? A runtime then
    cannot fold the Shape ops of the model."""
    g = model.graph
    weights = {i.name for i in g.initializer}
    return any(static(type_shape(vi.type)[0]) is None for vi in g.input if vi.name not in weights
               and vi.type.WhichOneof("value") == "tensor_type")


_SHAPE_DTYPES = frozenset({"int64", "int32", "bool"})


def shape_arithmetic(ir_nodes, res, inits: frozenset, dynamic: bool) -> tuple[set[str], set[str]]:
    """Small integer values computed from a Shape or Size: every one is folded (ONNX's own inference
    may have resolved what they feed without the folder evaluating them), so such arithmetic is
    never costed as a device kernel. With ``dynamic`` (input dims symbolic in the file) a runtime
    cannot fold the part that starts from the Shape of a computed tensor: it redoes it on the host
    every inference. Returns (that part, the outputs of the nodes in it that a runtime's basic graph
    optimisations remove: a repeat of an earlier node on the same inputs - common-subexpression
    elimination; exporters write one Shape per use - and a Cast to the type its input already has)."""
    types = res.types
    chain: dict[str, bool] = {}  # value -> computed at run time; in graph order
    nodes = []
    get = chain.get
    for n in ir_nodes:
        ins = n.inputs
        seed = n.op_type in ("Shape", "Size")
        if not seed:
            for i in ins:
                if i in chain:
                    break
            else:
                continue
        if n.domain not in ("", "ai.onnx"):
            continue
        runtime = seed and bool(ins) and ins[0] not in inits
        if not runtime:
            for i in ins:
                if i and get(i, False):
                    runtime = True
                    break
        outs = []
        named = 0
        for o in n.outputs:
            if not o:
                continue
            named += 1
            t = types.get(o)
            if t is None or t[1] not in _SHAPE_DTYPES:  # bool: an Equal of two shape vectors
                continue
            dims = static(t[0])
            if dims is None:
                continue
            numel = 1
            for d in dims:
                numel *= d
            if numel <= 64:
                chain[o] = runtime
                outs.append(o)
        if outs and runtime and len(outs) == named:
            nodes.append((n, outs))
    values = res.values
    for name in chain:
        if name not in values:
            res.value(name)
    if not dynamic or not nodes:
        return set(), set()
    host = {o for o, rt in chain.items() if rt and o in values}
    canon: dict[str, object] = {}

    def same(i: str):
        c = canon.get(i)
        if c is None:
            if i not in host and i in values:  # a constant: equal by value
                v = np.asarray(values[i])
                c = canon[i] = ("value", v.dtype.str, v.shape, v.tobytes())
            else:
                c = i
        return c

    removed: set[str] = set()
    seen: dict[tuple, list[str]] = {}
    for n, outs in nodes:
        if not all(o in host for o in outs):
            continue
        if n.op_type == "Cast" and len(n.inputs) == 1 and n.inputs[0] in values \
                and np.asarray(values[n.inputs[0]]).dtype == np.asarray(values[outs[0]]).dtype:
            canon[outs[0]] = same(n.inputs[0])  # a no-op cast: removed
            removed.update(outs)
            continue
        a = n.attrs
        key = (n.op_type, tuple([same(i) for i in n.inputs]), repr(sorted(a.items())) if len(a) > 1 else repr(a))
        first = seen.get(key)
        if first is not None:
            for o, f in zip(n.outputs, first):
                if o:
                    canon[o] = f
            removed.update(outs)
            continue
        seen[key] = list(n.outputs)
    return host, removed
