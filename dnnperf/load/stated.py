"""What a file states, checked against ONNX's operator schemas: the element types of its inputs and
weights against what the ops that read them accept (``check_types``), its nodes' attributes against the
ones their operators define (``unknown_attributes``) and the types they define them in
(``check_attribute_types``), and the inputs an operator ties to one element type against each other
(``mixed_types``).

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
from dnnperf.load.topology import MAX_DEPTH

# dnnperf's dtype names -> the names ONNX's type constraints use
_ONNX_NAME = {"float32": "float", "float64": "double"}
_NOT_NUMBERS = frozenset({"string", "bool"})
_NOT_TENSORS = frozenset({None, "sequence", "map"})  # handles (their elements are typed where they are made)


def check_types(graph, nodes, opset: int, path: str, weights: dict) -> list[str]:
    """Raises DnnperfError (exit 2) for an input or initializer (``weights``: name -> element type
    code, as stored) whose element type is not an ONNX type, or a node (``nodes``: the top graph's,
    NodeViews) that reads a stated string or bool tensor where its op takes neither. Returns the note for stated numbers of a width the reader does not
    accept (empty when there are none)."""
    stated = {}
    inputs = [(x.name, x.type.tensor_type.elem_type) for x in graph.input
              if x.type.HasField("tensor_type")]  # a sequence, map or optional: costed where its elements are made
    for what, items in (("input", inputs), ("initializer", weights.items())):
        for name, code in items:
            if code not in DTYPE_NAMES:
                raise DnnperfError(f"{what} '{name}' in '{path}' has element type {code}, which is not an ONNX data "
                                   "type — the file is corrupt; re-export it")
            stated[name] = DTYPE_NAMES[code]
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
    input, (the allowed type strings or None, variadic?); the attribute names it defines; per formal
    input, the type parameter it shares with others (None for a fixed type or one no other input has;
    a variadic input's only where its values must all be of one type); each attribute's type, as
    AttributeProto numbers it), or None when ONNX has no schema for it."""
    from dnnperf.load import onnx_lite

    defs = onnx_lite.defs()
    try:
        schema = defs.get_schema(op, opset, "")
    except Exception:
        return None
    constraints = {t.type_param_str: frozenset(t.allowed_type_strs) for t in schema.type_constraints}
    variadic = defs.OpSchema.FormalParameterOption.Variadic
    inputs = []
    params = []
    for formal in schema.inputs:
        ts = formal.type_str
        inputs.append((constraints.get(ts, frozenset({ts}) if ts.startswith("tensor(") else None),
                       formal.option == variadic))
        shared = ts in constraints and (formal.option != variadic or formal.is_homogeneous)
        params.append(ts if shared else None)
    counts = {p: params.count(p) for p in params if p is not None}
    last_variadic = bool(inputs) and inputs[-1][1] and params[-1] is not None
    params = [p if p is not None and (counts[p] > 1 or (last_variadic and k == len(params) - 1)) else None
              for k, p in enumerate(params)]
    return (tuple(inputs), frozenset(schema.attributes), tuple(params),
            {name: int(a.type) for name, a in schema.attributes.items()})


def _readers(nodes, stated: dict, opset: int, path: str) -> list:
    """(node, tensor, dtype, accepted kinds) for each node reading a stated number its op does not accept."""
    odd = []
    accepted: dict[tuple, bool] = {}  # (op, input position, dtype) -> the schema accepts it
    get = stated.get
    for n in nodes:
        if n.domain not in ("", "ai.onnx"):
            continue
        formals = None
        for i, name in enumerate(n.input):
            dtype = get(name) if name else None
            if dtype is None:
                continue
            key = (n.op_type, i, dtype)
            if accepted.get(key):
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
                accepted[key] = True
                continue
            names = sorted(a[7:-1] for a in allowed if a.startswith("tensor("))
            kinds = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
            if dtype in _NOT_NUMBERS:
                raise DnnperfError(
                    f"node '{n.name or n.op_type}' ({n.op_type}) in '{path}' reads '{name}' as {dtype}, which "
                    f"{n.op_type} does not accept at opset {opset} ({kinds}) — the file is inconsistent; re-export it")
            odd.append((n, name, dtype, kinds))
    return odd


_GRAPH, _GRAPHS = 5, 10
# AttributeProto's type numbers -> the names ONNX's checker gives them
_ATTR_TYPES = {1: "FLOAT", 2: "INT", 3: "STRING", 4: "TENSOR", 5: "GRAPH", 6: "FLOATS", 7: "INTS", 8: "STRINGS",
               9: "TENSORS", 10: "GRAPHS", 11: "SPARSE_TENSOR", 12: "SPARSE_TENSORS", 13: "TYPE_PROTO",
               14: "TYPE_PROTOS"}


def check_attribute_types(nodes, opset: int, path: str, depth: int = 0) -> None:
    """Raises DnnperfError (exit 2) for a default-domain node (``nodes``: NodeViews of the top graph, or
    a control-flow body's NodeProtos) that gives an attribute its operator defines in another type (a
    Transpose's ``perm`` as floats): ONNX's checker and ONNX Runtime refuse such a file, and the shape
    rules read it as something else (that Transpose came out a scalar of 4 bytes). An attribute without a
    type (files of before IR version 2 may leave it out) and ops ONNX has no schema for are skipped. The
    bodies of control-flow nodes are checked too, down to ``MAX_DEPTH`` levels (deeper nesting is refused
    elsewhere)."""
    ok: set = set()  # (op, attribute, type) seen to match
    for n in nodes:
        attrs = n.attribute
        if not attrs or getattr(n, "const", None) is not None or n.domain not in ("", "ai.onnx"):
            continue  # (a view's ``const``: a Constant's one attribute, a tensor named value, as defined)
        op = n.op_type
        for a in attrs:
            key = (op, a.name, a.type)
            if key[2] in (_GRAPH, _GRAPHS) and depth < MAX_DEPTH:  # an If's branches, a Loop's body
                for g in ([a.g] if key[2] == _GRAPH else a.graphs):
                    check_attribute_types(g.node, opset, path, depth + 1)
            if key in ok or not key[2]:
                continue
            schema = _schema(op, opset)
            if schema is None:
                break
            want = schema[3].get(key[1])
            if want is not None and want != key[2]:
                raise DnnperfError(
                    f"node '{n.name or op}' ({op}) in '{path}' gives attribute '{key[1]}' as "
                    f"{_ATTR_TYPES.get(key[2], key[2])} where {op} defines {_ATTR_TYPES.get(want, want)} at opset "
                    f"{opset} — ONNX Runtime refuses such a file; re-export it")
            ok.add(key)


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


def mixed_types(nodes, tensors: dict, opset: int) -> list[str]:
    """The note for default-domain nodes (IR nodes of the top graph) whose inputs of one type parameter
    are of different element types (an int64 tensor rewired into a Gemm whose other input is float32;
    the Add of a float16 and a float32 tensor): ONNX Runtime refuses such a file when it checks the
    graph's types; the figures price each such node at its first input's type. Empty when there are
    none; inputs whose type is unknown, and ops ONNX has no schema for, are skipped."""
    odd = []
    specs: dict[str, tuple] = {}  # op -> (each input's shared type parameter, a homogeneous variadic's)
    get = tensors.get
    for n in nodes:
        ins = n.inputs
        if len(ins) < 2 or n.domain not in ("", "ai.onnx"):
            continue
        spec = specs.get(n.op_type)
        if spec is None:
            schema = _schema(n.op_type, opset)
            params = schema[2] if schema is not None and any(schema[2]) else ()
            spec = specs[n.op_type] = (params, params[-1] if params and schema[0][-1][1] else None)
        params, last = spec
        if not params:
            continue
        seen: dict[str, tuple[str, str]] = {}
        for k, name in enumerate(ins):
            p = params[k] if k < len(params) else last
            if p is None or not name:
                continue
            t = get(name)
            if t is None or t.dtype in _NOT_TENSORS:
                continue
            first = seen.get(p)
            if first is None:
                seen[p] = (name, t.dtype)
            elif first[1] != t.dtype:
                odd.append((n, first, (name, t.dtype)))
                break
    if not odd:
        return []
    n, (a, ta), (b, tb) = odd[0]
    return [f"{len(odd)} node(s) read inputs of different element types where their operator requires one (node "
            f"'{n.name or n.op_type}' ({n.op_type}): '{a}' is {ta}, '{b}' is {tb}): ONNX Runtime refuses such a file "
            "— the figures price each at the type of its first input"]
