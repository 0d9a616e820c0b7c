"""Output shapes of ops no rule knows, from what the file declares for them.

An op of a custom domain has no shape rule in ONNX or here: it stays unscored, and every layer after
it would lose its shapes too. Exporters often write such an op's output shape into the graph's
``value_info``; the loader drops those entries (elsewhere they could disagree with the user's dims),
so they are read first (``declared_shapes``), their symbols bound to the sizes the user gave
(``input_bindings``) and used for those ops' open outputs only (``declared_outputs``).
"""

from __future__ import annotations

from dnnperf.ir import op_key
from dnnperf.load import dim_expr
from dnnperf.load.gaps import _DEFAULT
from dnnperf.load.read import static, type_shape


def has_rule(node) -> bool:
    """Whether ONNX (a schema with inference) or dnnperf (a contrib op's shape rule) knows ``node``'s
    output shapes."""
    from dnnperf.load import onnx_lite
    from dnnperf.ops import shape_rule

    if shape_rule(op_key(node.domain, node.op_type)) is not None:
        return True
    try:
        return onnx_lite.defs().has_schema(node.op_type, node.domain)
    except Exception:
        return False


def declared_shapes(graph, nodes) -> dict:
    """name -> (dims, dtype) the graph's value_info declares (read before the loader drops those
    entries: elsewhere they could disagree with the user's dims; ``declared_outputs`` rebinds them).
    Empty without a node outside the default domains (``nodes``): only such ops' outputs are ever
    taken, and reading every entry cost a transformer export ~2 ms a load (BERT: 503 entries)."""
    if not any(n.domain not in _DEFAULT for n in nodes):
        return {}
    out = {}
    for vi in graph.value_info:
        dims, dtype = type_shape(vi.type)
        if dims is not None:
            out[vi.name] = (tuple(dims), dtype)
    return out


def input_bindings(before: dict, after: dict) -> dict | None:
    """symbol -> size the user's overrides gave each symbolic input dim (``before``: the inputs' dims
    as the file states them; ``after``: as overridden). None when an override changed a size the file
    fixed (--input-shape over a static dim): declared shapes computed for the old size are stale."""
    bound: dict = {}
    for name, old in before.items():
        new = after.get(name)
        if old is None or new is None or len(old) != len(new):
            continue
        for o, n in zip(old, new):
            if o.__class__ is int:
                if n.__class__ is int and n != o:
                    return None
            elif o and n.__class__ is int:
                bound[o] = n
    return bound


def declared_outputs(ordered, types, declared: dict, bindings: dict | None, known) -> list:
    """Fill the open outputs of ops with no shape rule anywhere (``known(node)`` false: a custom
    domain's op that neither ONNX nor dnnperf has a rule for) from the shapes the file declares for
    them, symbols replaced by the sizes the user gave (``input_bindings``); a declared shape with a
    symbol no input binds, or any declared shape after a fixed size was overridden (``bindings``
    None), is not used. Returns the nodes whose outputs were filled (for the note that says so)."""
    if bindings is None or not declared:
        return []
    filled = []
    for n in ordered:
        if n.domain in _DEFAULT or known(n):
            continue
        took = False
        for o in n.output:
            t = types.get(o) if o else None
            if not o or (t is not None and static(t[0]) is not None) or o not in declared:
                continue
            dims, dtype = declared[o]
            dims = tuple(dim_expr.resolved(d, bindings) for d in dims)
            if static(dims) is None:
                continue
            types[o] = (dims, dtype)
            took = True
        if took:
            filled.append(n)
    return filled
