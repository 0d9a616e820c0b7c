"""What a file states, checked against ONNX's operator schemas: the element types of its inputs and
weights against what the ops that read them accept (``check_types``), and its nodes' attributes against the
ones their operators define (``unknown_attributes``).

Shape rules carry an element type forward from the tensors the file declares, so a type code that is
not ONNX's would be read as float32, and text or flags fed to arithmetic would be priced at some
width, all without a word, where ONNX Runtime refuses the file. Those are refused here. A number of
another width than the op's schema allows (an int8 tensor into a Conv: hand-built or converted
files say "this layer is int8" that way) is analysed at the stated width, with a note that the file
is not valid ONNX. Only the first readers of declared tensors are checked: everything after them
takes its type from a rule. The check reads ONNX's operator schemas (default domain, at the model's
opset) and skips what it cannot look up.
"""

from __future__ import annotations

from functools import lru_cache

from dnnperf.errors import DnnperfError
from dnnperf.ir import DTYPE_NAMES

# dnnperf's dtype names -> the names ONNX's type constraints use
_ONNX_NAME = {"float32": "float", "float64": "double"}
_NOT_NUMBERS = frozenset({"string", "bool"})


def check_types(graph, nodes, opset: int, path: str) -> list[str]:
    """Raises DnnperfError (exit 2) for an input or initializer whose element type is not an ONNX
    type, or a node (``nodes``: the top graph's, NodeViews) that reads a stated string or bool tensor
    where its op takes neither. Returns the note for stated numbers of a width the reader does not
    accept (empty when there are none)."""
    stated = {}
    for what, items in (("input", graph.input), ("initializer", graph.initializer)):
        for x in items:
            if what == "input":
                if not x.type.HasField("tensor_type"):
                    continue  # a sequence, map or optional: its elements are costed where they are made
                code = x.type.tensor_type.elem_type
            else:
                code = x.data_type
            if code not in DTYPE_NAMES:
                raise DnnperfError(f"{what} '{x.name}' in '{path}' has element type {code}, which is not an ONNX data "
                                   "type — the file is corrupt; re-export it")
            stated[x.name] = DTYPE_NAMES[code]
    odd = _readers(nodes, stated, opset, path)
    if not odd:
        return []
    n, name, dtype, kinds = odd[0]
    return [f"{len({id(x[0]) for x in odd})} node(s) read a tensor the file states in a type their op does not accept (node "
            f"'{n.name or n.op_type}' ({n.op_type}) reads '{name}' as {dtype}; {n.op_type} takes {kinds} at opset "
            f"{opset}): ONNX Runtime would refuse the file — the figures price each at its stated type"]


@lru_cache(maxsize=4096)  # (op, opset) pairs: a hostile file's made-up op names stay bounded
def _schema(op: str, opset: int):
    """What ONNX's schema of default-domain ``op`` at ``opset`` says, read once per process: (per formal
    input, (the allowed type strings or None, variadic?); the attribute names it defines), or None when
    ONNX has no schema for it."""
    from dnnperf.load import onnx_lite

    defs = onnx_lite.defs()
    try:
        schema = defs.get_schema(op, opset, "")
    except Exception:
        return None
    constraints = {t.type_param_str: frozenset(t.allowed_type_strs) for t in schema.type_constraints}
    variadic = defs.OpSchema.FormalParameterOption.Variadic
    inputs = []
    for formal in schema.inputs:
        ts = formal.type_str
        inputs.append((constraints.get(ts, frozenset({ts}) if ts.startswith("tensor(") else None),
                       formal.option == variadic))
    return tuple(inputs), frozenset(schema.attributes)


def _readers(nodes, stated: dict, opset: int, path: str) -> list:
    """(node, tensor, dtype, accepted kinds) for each node reading a stated number its op does not accept."""
    odd = []
    for n in nodes:
        if n.domain not in ("", "ai.onnx"):
            continue
        formals = None
        for i, name in enumerate(n.input):
            dtype = stated.get(name) if name else None
            if dtype is None:
                continue
            if formals is None:
                schema = _schema(n.op_type, opset)
                formals = schema[0] if schema is not None else ()
                if not formals:
                    break
            if i < len(formals):
                allowed = formals[i][0]
            elif formals[-1][1]:
                allowed = formals[-1][0]
            else:
                continue  # more inputs than the schema has: the structural checks' business
            if allowed is None or f"tensor({_ONNX_NAME.get(dtype, dtype)})" in allowed:
                continue
            names = sorted(a[7:-1] for a in allowed if a.startswith("tensor("))
            kinds = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
            if dtype in _NOT_NUMBERS:
                raise DnnperfError(
                    f"node '{n.name or n.op_type}' ({n.op_type}) in '{path}' reads '{name}' as {dtype}, which "
                    f"{n.op_type} does not accept at opset {opset} ({kinds}) — the file is inconsistent; re-export it")
            odd.append((n, name, dtype, kinds))
    return odd


def unknown_attributes(nodes, opset: int) -> list[str]:
    """The note for default-domain nodes (IR nodes of the top graph) that carry an attribute their
    operator does not define at ``opset`` (a Relu with ``strides``): ONNX Runtime refuses such a file as
    an invalid graph, and nothing here reads the attribute; empty when there are none. Ops ONNX has
    no schema for are skipped."""
    odd = []
    for n in nodes:
        attrs = n.attrs
        if not attrs or n.domain not in ("", "ai.onnx"):
            continue
        schema = _schema(n.op_type, opset)
        if schema is None:
            continue  # no schema: nothing to check against
        extra = attrs.keys() - schema[1]
        if extra:
            odd.append((n, sorted(extra)))
    if not odd:
        return []
    n, extra = odd[0]
    return [f"{len(odd)} node(s) carry attributes their operator does not define at opset {opset} (node "
            f"'{n.name or n.op_type}' ({n.op_type}): {', '.join(extra)}): ONNX Runtime refuses such a file as an "
            "invalid graph — the figures ignore them"]
