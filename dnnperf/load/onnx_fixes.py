"""Where ONNX's own shape inference is wrong (onnx 1.23) and dnnperf has the rule: each such op's
output shape from its rule (``dnnperf.load.shapes.RULES``) on what the inference left, to be declared
so that a second pass of the inference keeps it and carries it downstream (it keeps a declared shape
over its own). Found by ONNX's node tests run as a shape oracle (``bench/onnx_suite.py``)."""

from __future__ import annotations

import itertools

from dnnperf.load.fold import constant_value, tensor_value
from dnnperf.load.read import plain_attrs, static, type_shape
from dnnperf.load.shapes import RULES

# ops whose shape ONNX's own inference gets wrong (onnx 1.23), with dnnperf's rule for them
# (``RULES``): STFT gives frame_length bins whatever ``onesided`` says
ONNX_WRONG = frozenset({"STFT"})


def onnx_wrong_shapes(inferred, opset: int) -> list:
    """(output, element type, dims) for the outputs of ``ONNX_WRONG`` ops whose rule, on the shapes and
    constants ONNX's inference left, gives another shape than ONNX's."""
    g = inferred.graph
    nodes = [n for n in g.node if n.op_type in ONNX_WRONG and n.domain in ("", "ai.onnx")]
    if not nodes:
        return []
    types = {vi.name: vi.type for vi in itertools.chain(g.input, g.value_info, g.output)}
    inits = {i.name: i for i in g.initializer}
    consts = {n.output[0]: n for n in g.node if n.op_type == "Constant" and n.output}
    out = []
    for n in nodes:
        fn, value_inputs = RULES[n.op_type]
        dims = [static(type_shape(types[i])[0]) if i in types else None for i in n.input]
        vals = [None] * len(n.input)
        for k in value_inputs:
            name = n.input[k] if k < len(n.input) else ""
            if name in inits:
                vals[k] = tensor_value(inits[name])
            elif name in consts:
                vals[k] = constant_value(consts[name])
        try:
            shapes = fn(plain_attrs(n), dims, vals, opset)
        except (ArithmeticError, ValueError, TypeError, KeyError, IndexError):
            continue
        o = n.output[0] if n.output else ""
        if shapes and shapes[0] is not None and o and (o not in types or static(type_shape(types[o])[0]) != shapes[0]):
            elem = types[o].tensor_type.elem_type if o in types and types[o].HasField("tensor_type") else 1
            out.append((o, elem, list(shapes[0])))
    return out
