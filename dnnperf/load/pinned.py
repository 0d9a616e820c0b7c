"""Values of small integer inputs that the model's declared output shapes pin down.

A model may compute shapes from the value of one of its inputs (AffineGrid's ``size``, a crop's
target ``shape``): forward inference cannot know those sizes. When the graph's outputs declare
static shapes, the value is often forced: each output axis that *is* one element of the input
(``grid`` is [size[0], size[2], size[3], 2]) names that element's value.

The search never guesses:

1. two probe loads with the candidates set to distinct primes the model does not use, outputs'
   declared shapes cleared: an output axis that equals the probed element in both loads is that
   element, so the element's value is the declared size of the axis;
2. a load with the values found must reproduce every declared output shape and leave fewer
   tensors unresolved than before; an element no axis names must not change any shape at all
   (checked by a second load with that element changed).

Anything else (a declared size that is a product of elements, conflicting axes, a load that fails
with the probe values) leaves the model as it was. The result says which values it used, so the
caller can state them as an assumption.
"""

from __future__ import annotations

import dataclasses

from dnnperf.errors import DnnperfError
from dnnperf.ir import Graph, ShapeOverrides
from dnnperf.load.read import static, type_shape

MAX_ELEMENTS = 8  # inputs with more values than this are data, not shape vectors
_PRIMES = (11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101, 103, 107,
           109, 113, 127, 131, 137, 139, 149, 151)
_INTEGER = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


def candidates(model, graph: Graph, given: set[str]) -> list[tuple[str, int]]:
    """(input name, number of values) of integer inputs with a small static shape that nobody gave
    a value."""
    out = []
    for vi in model.graph.input:
        t = graph.tensors.get(vi.name)
        if vi.name in graph.initializers or vi.name in given or t is None or t.shape is None:
            continue
        if t.dtype in _INTEGER and len(t.shape) <= 1 and 1 <= t.numel <= MAX_ELEMENTS:
            out.append((vi.name, t.numel))
    return out


def declared_outputs(model) -> dict[str, tuple[int, ...]]:
    out = {}
    for vi in model.graph.output:
        dims, _ = type_shape(vi.type)
        s = static(dims) if dims is not None else None
        if s is not None:
            out[vi.name] = s
    return out


def _used_sizes(model) -> set[int]:
    sizes = set()
    for coll in (model.graph.input, model.graph.output):
        for vi in coll:
            dims, _ = type_shape(vi.type)
            sizes.update(d for d in dims or () if isinstance(d, int))
    for init in model.graph.initializer:
        sizes.update(init.dims)
    return sizes


def _shapes(g: Graph) -> dict[str, tuple | None]:
    return {name: t.shape for name, t in g.tensors.items()}


def pin(model, graph: Graph, overrides: ShapeOverrides, load) -> tuple[Graph, list[tuple[str, list]]] | None:
    """``load(model_copy, overrides)`` -> Graph is the loader (without this step). Returns the graph
    loaded with the pinned values and [(input, [value or None per element])], or None."""
    import onnx

    given = {name for name, _ in overrides.values}
    cands = candidates(model, graph, given)
    declared = declared_outputs(model)
    if not cands or not declared:
        return None
    free = [p for p in _PRIMES if p not in _used_sizes(model)]
    need = sum(n for _, n in cands)
    if len(free) < 2 * need:
        return None
    probe_a = {}
    probe_b = {}
    k = 0
    for name, n in cands:
        probe_a[name] = free[k:k + n]
        probe_b[name] = free[need + k:need + k + n]
        k += n

    def run(vals: dict[str, list[int]]) -> Graph | None:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        for vi in m.graph.output:
            if vi.type.HasField("tensor_type"):
                vi.type.tensor_type.ClearField("shape")
        ov = dataclasses.replace(overrides, values=tuple(overrides.values) + tuple(
            (name, tuple(float(v) for v in vs)) for name, vs in vals.items()))
        try:
            return load(m, ov)
        except DnnperfError:
            return None

    ga, gb = run(probe_a), run(probe_b)
    if ga is None or gb is None:
        return None
    bound: dict[tuple[str, int], int] = {}
    for out, decl in declared.items():
        sa, sb = ga.tensors.get(out), gb.tensors.get(out)
        if sa is None or sb is None or sa.shape is None or sb.shape is None:
            continue
        if len(sa.shape) != len(decl) or len(sb.shape) != len(decl):
            return None
        for axis, want in enumerate(decl):
            hits = [(name, j) for name, vs in probe_a.items() for j, v in enumerate(vs)
                    if sa.shape[axis] == v and sb.shape[axis] == probe_b[name][j]]
            if len(hits) != 1:
                continue
            if bound.setdefault(hits[0], want) != want:
                return None  # two axes name one element with different sizes
    if not bound:
        return None
    final = {name: [bound.get((name, j), probe_a[name][j]) for j in range(len(vs))] for name, vs in probe_a.items()}
    gf = run(final)
    if gf is None or len(gf.unresolved) >= len(graph.unresolved):
        return None
    for out, decl in declared.items():
        t = gf.tensors.get(out)
        if t is None or t.shape != decl:
            return None
    loose = [(name, j) for name, vs in probe_a.items() for j in range(len(vs)) if (name, j) not in bound]
    if loose:
        other = {name: [bound.get((name, j), probe_b[name][j]) for j in range(len(vs))] for name, vs in probe_a.items()}
        gg = run(other)
        if gg is None or _shapes(gg) != _shapes(gf):
            return None  # an element no output names still changes some shape: not forced
    used = [(name, [bound.get((name, j)) for j in range(n)]) for name, n in cands
            if any((name, j) in bound for j in range(n))]
    return gf, used


def note(used: list[tuple[str, list]]) -> str:
    parts = []
    for name, vals in used:
        shown = ", ".join("any" if v is None else str(v) for v in vals)
        parts.append(f"'{name}' = [{shown}]")
    return ("shapes computed from the value of input(s) " + "; ".join(parts) + ": values read off the model's "
            "declared output shapes (checked: with them every declared shape holds; an element marked 'any' "
            "changes no shape); pass --value NAME=V,... to use others")
