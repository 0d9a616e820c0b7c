"""Where ONNX's own shape inference is wrong (onnx 1.23) and dnnperf has the rule: each such op's
output shape from its rule (``dnnperf.load.shapes.RULES``) on what the inference left, to be declared
so that a second pass of the inference keeps it and carries it downstream (it keeps a declared shape
over its own). Found by ONNX's node tests run as a shape oracle (``bench/onnx_suite.py``)."""

from __future__ import annotations

import itertools

from dnnperf.load.fold import constant_value, tensor_value
from dnnperf.load.read import plain_attrs, static, type_shape
from dnnperf.ops.windows import windowed
from dnnperf.load.shapes import RULES


def _pool(attrs, dims, vals, opset):
    """A pooling window's outputs (``dnnperf.ops.windows``): with ``ceil_mode`` a last window that would
    start in the end padding is dropped, as the ONNX spec, ONNX Runtime and PyTorch do; ONNX's inference
    keeps it (MaxPool k = [5, 1], strides 3 on 20 x 5: [6, 3] where ONNX Runtime gives [6, 2])."""
    x = dims[0] if dims else None
    if x is None:
        return None
    y = windowed("MaxPool", attrs, tuple(x), dims)
    return [y, y] if y is not None else None  # MaxPool's indices: the same shape


def _conv_transpose(attrs, dims, vals, opset):
    """ConvTranspose with SAME padding and no output_shape: each side is input x stride (the padding
    takes the output_padding), unless that padding would be negative, where ONNX Runtime pads nothing:
    stride x (input - 1) + output_padding + dilated kernel. ONNX's inference adds the output_padding to
    input x stride (a [20, 15] input at strides [2, 3] with output_padding [1, 1]: [41, 45], ONNX Runtime
    [40, 45])."""
    x, w = (dims + [None, None])[:2]
    if x is None or w is None or len(x) < 3 or len(w) != len(x) or attrs.get("output_shape") \
            or attrs.get("auto_pad") not in ("SAME_UPPER", "SAME_LOWER"):
        return None
    r = len(x) - 2
    kernel = list(attrs.get("kernel_shape") or w[2:])
    strides = list(attrs.get("strides") or [1] * r)
    dil = list(attrs.get("dilations") or [1] * r)
    extra = list(attrs.get("output_padding") or [0] * r)
    if not len(kernel) == len(strides) == len(dil) == len(extra) == r:
        return None
    out = []
    for i in range(r):
        full = strides[i] * (x[2 + i] - 1) + extra[i] + dil[i] * (kernel[i] - 1) + 1
        out.append(min(x[2 + i] * strides[i], full))
    return [(x[0], w[1] * int(attrs.get("group", 1))) + tuple(out)]


# ops whose shape ONNX's own inference gets wrong (onnx 1.23), with dnnperf's rule for each: STFT gives
# frame_length bins whatever ``onesided`` says; pooling keeps a ceil_mode window that starts in the
# padding; ConvTranspose with SAME padding adds the output_padding to input x stride
ONNX_WRONG = {"STFT": RULES["STFT"], "MaxPool": (_pool, ()), "AveragePool": (_pool, ()), "LpPool": (_pool, ()),
              "ConvTranspose": (_conv_transpose, ())}


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
        fn, value_inputs = ONNX_WRONG[n.op_type]
        dims = [static(type_shape(types[i])[0]) if i in types else tuple(inits[i].dims) if i in inits else None
                for i in n.input]
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
        for o, shape in zip(n.output, shapes or ()):
            if shape is not None and o and (o not in types or static(type_shape(types[o])[0]) != tuple(shape)):
                elem = types[o].tensor_type.elem_type if o in types and types[o].HasField("tensor_type") else 1
                out.append((o, elem, list(shape)))
    return out
