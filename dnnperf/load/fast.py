"""Shapes without ONNX's shape inference, for graphs whose every op has a rule here.

ONNX's C++ inference is fast per node, but the first call in a process builds its operator-schema
registry (~9 ms on the reference VM, the largest fixed cost of a one-model command after the
imports), and run without data propagation it leaves every shape computed by shape arithmetic open
(swin_t: 1,706 of 6,284 tensors), which the loader then folds in Python anyway, after reading all of
ONNX's answers back out of protobuf. A graph made only of ops whose output shape and dtype follow
from their inputs by a known rule (convolutions, pooling, elementwise, reshapes, products, the shape
arithmetic itself, ONNX Runtime's contrib ops with a rule next to their cost) is resolved here in
one Python pass instead: 10-30% less time on every sample model, transformers included, and on a
50,000-node graph. Anything else (control flow, an op without a rule here, a shape a rule cannot
settle, a malformed node a rule declines) returns None and the caller runs ONNX's inference as
before. ``tests/test_load_fast.py`` checks that both ways give the same shape and dtype for every
tensor of every bundled model.
"""

from __future__ import annotations

from dnnperf.ir import BOOL_OUT, DTYPE_NAMES, attrs_key, cast_target, op_key
from dnnperf.load.fold import Resolver, tensor_value
from dnnperf.load.read import static, type_shape
from dnnperf.load.shapes import split
from dnnperf.load.uninferred import RULES, VERSIONED
from dnnperf.ops import shape_rule
from dnnperf.ops.windows import windowed

# ops of RULES whose output dtype is their first input's (comparisons: bool, ir.BOOL_OUT; Where: its
# second input's; ConstantOfShape: its value attribute's; CastLike is left to ONNX), less the rules
# for one old version of an op (``uninferred.VERSIONED``: a graph with a later one goes to ONNX at once)
_SAME_DTYPE = frozenset(RULES) - {"Where", "ConstantOfShape", "CastLike", "Cast", "Dropout", "BatchNormalization"} \
    - VERSIONED
_WINDOWED = frozenset({"Conv", "MaxPool", "AveragePool", "LpPool"})
# every op this path has a rule for: a graph with any other op goes to ONNX before any work is done
# (shufflenet_v2's last node, a ReduceMean, used to be found after 12 ms of rules spent for nothing)
_COVERED = (frozenset({"Constant", "Shape", "Cast", "BatchNormalization", "Dropout", "Where", "ConstantOfShape", "Split"})
            | _WINDOWED | _SAME_DTYPE | BOOL_OUT)


def python_shapes(model, opset: int, ordered: list, weights: dict, shape_weights: list) -> Resolver | None:
    """A Resolver holding every tensor's (dims, dtype) for ``model`` (overrides already written into
    its inputs), or None when this path does not cover the graph. ``weights``: each initializer's
    Tensor; ``shape_weights``: the initializers whose values may decide shapes (``is_shape_like``)."""
    g = model.graph
    if len(model.functions):
        return None
    contrib = {}  # op key -> the shape rule next to the op's cost (ORT's contrib ops and the like)
    for n in ordered:
        if n.op_type not in _COVERED or n.domain not in ("", "ai.onnx"):
            key = op_key(n.domain, n.op_type)
            if key not in contrib:
                contrib[key] = shape_rule(key)
            if contrib[key] is None:
                return None
    res = Resolver(model, opset, ordered)
    types = res.types
    # (op, input shapes, attributes) -> output shape, for the rules that read no values: a transformer's
    # blocks ask the same questions block after block (the rules are functions of these and the opset)
    memo: dict = {}
    for vi in g.input:
        dims, dtype = type_shape(vi.type)
        if dims is not None and static(dims) is None:
            return None  # a symbolic input dim: the folding and inference rules downstream need ONNX
        types[vi.name] = (dims, dtype)
    for name, t in weights.items():
        types[name] = (t.shape, t.dtype)
    for init in shape_weights:  # Reshape targets and the like: their values decide shapes
        v = tensor_value(init)
        if v is not None:
            res.values[init.name] = v
    for n in ordered:
        if contrib and op_key(n.domain, n.op_type) in contrib:
            res.infer_node(n)  # the contrib rule, as after ONNX's inference
            for o in n.output:
                if o:
                    t = types.get(o)
                    if t is None or t[0] is None or static(t[0]) is None:
                        return None
            continue
        if n.domain not in ("", "ai.onnx") or not _node(n, res, types, opset, memo):
            return None
        for o in n.output:  # the rules here give plain int tuples: set or not
            if o:
                t = types.get(o)
                if t is None or t[0] is None:
                    return None
    return res


def _node(n, res: Resolver, types: dict, opset: int, memo: dict) -> bool:
    op = n.op_type
    if op == "Constant":  # one tensor-valued attribute (read by ``views``, never decoded into a dict)
        t = n.const
        outs = [o for o in n.output if o]
        if t is None or len(outs) != 1:
            return False
        types[outs[0]] = (tuple(t.dims), DTYPE_NAMES.get(t.data_type, "float32"))
        return True
    if n.attribute and len(res.attrs(n)) < len(n.attribute):
        return False  # a graph-valued (or exotic) attribute: control flow, left to ONNX
    outs = [o for o in n.output if o]
    # every type recorded on this path is static (``python_shapes`` checks each node's outputs)
    ins = [types.get(i) if i else None for i in n.input]
    if not ins or ins[0] is None or ins[0][0] is None:
        return False
    x, dtype = ins[0]
    if op == "Shape":
        a = res.attrs(n)
        types[outs[0]] = ((len(x[slice(a.get("start", 0), a.get("end", len(x)))]),), "int64")
        return True
    if op == "Cast":
        to = cast_target(res.attrs(n).get("to"))
        if to is None:
            return False
        types[outs[0]] = (x, to)
        return True
    if op in _WINDOWED:
        if len(outs) != 1:  # MaxPool's indices output: ONNX
            return False
        shape = windowed(op, res.attrs(n), x, [t[0] if t else None for t in ins])
        if shape is None:
            return False
        types[outs[0]] = (shape, dtype)
        return True
    if op == "Split":
        sizes = res.value(n.input[1]) if len(n.input) > 1 and n.input[1] else None
        if len(n.input) > 1 and n.input[1] and sizes is None:
            return False
        try:
            shapes = split(res.attrs(n), x, sizes, len(n.output), opset)
        except (ValueError, TypeError, IndexError):
            return False
        if shapes is None or len(outs) != len(n.output):
            return False
        for o, d in zip(n.output, shapes):
            types[o] = (d, dtype)
        return True
    if op in ("BatchNormalization", "Dropout"):
        if len(outs) != 1:  # training-mode statistics, the dropout mask: ONNX
            return False
        types[outs[0]] = (x, dtype)
        return True
    if op == "Where":
        if len(ins) != 3 or ins[1] is None:
            return False
        dtype = ins[1][1]
    elif op == "ConstantOfShape":
        a = n.attribute[0] if len(n.attribute) == 1 else None
        if len(n.attribute) > 1 or (a is not None and a.name != "value"):
            return False
        dtype = DTYPE_NAMES.get(a.t.data_type) if a is not None else "float32"
        if dtype is None:
            return False
    elif op not in _SAME_DTYPE and op not in BOOL_OUT:
        return False
    fn, value_inputs = RULES[op]
    if value_inputs or len(n.output) != 1:
        if not res._by_rule(n, fn, value_inputs, static_types=True) or len(outs) != 1:
            return False
        dims = types[outs[0]][0]
    else:  # a rule that reads no values (MatMul, Add, Softmax...): called here, without the folding walk
        shapes = tuple([t[0] if t is not None else None for t in ins])
        if n.attribute:
            a = res.attrs(n)
            key = (op, shapes, attrs_key(a))
        else:
            a, key = _NO_ATTRS, (op, shapes)
        try:
            dims = memo.get(key)
        except TypeError:  # an attribute that stays unhashable
            dims, key = None, None
        if dims is None:
            try:
                out = fn(a, list(shapes), [None] * len(ins), opset)
            except (ArithmeticError, ValueError, TypeError, KeyError, IndexError):
                return False
            if not out or out[0] is None:
                return False
            dims = tuple(map(int, out[0]))
            if key is not None and len(memo) < _MEMO_MAX:
                memo[key] = dims
    types[outs[0]] = (dims, "bool" if op in BOOL_OUT else dtype)
    return True


_NO_ATTRS: dict = {}  # a node without attributes (the rules only read them)
_MEMO_MAX = 4096  # distinct (op, shapes, attributes) kept per graph
