"""Elementwise unary and binary ops (with broadcasting): ops per output element from one table.

Weights count elementary operations: arithmetic and comparisons 1; exp/log/tanh/erf and friends 1
each as a single hardware-supported instruction is assumed; composite activations add their parts.
"""

from __future__ import annotations

from dnnperf.ir import DTYPE_BITS, LEGACY_BROADCAST, legacy_operand
from dnnperf.ops import Contradiction, Ctx, broadcast_conflict, broadcasts_to, register, register_check, register_shapes
from dnnperf.vocab import BROADCAST_SPANS

# GELU counted as its exported graph computes it: the exact form x * 0.5 * (1 + erf(x / sqrt 2)) is a
# Div, an Erf, an Add and two Muls (5); the tanh approximation 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715
# x^3))) a Pow, four Muls, two Adds and a Tanh (8). A fused GELU op costs what the nodes it replaces do.
ERF_GELU, TANH_GELU = 5, 8
OPS_PER_ELEMENT = {
    # arithmetic / logic
    "Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "Pow": 1, "Mod": 1, "Max": 1, "Min": 1, "Mean": 1, "Sum": 1,
    "Equal": 1, "Less": 1, "Greater": 1, "LessOrEqual": 1, "GreaterOrEqual": 1, "And": 1, "Or": 1,
    "Xor": 1, "Not": 1, "BitShift": 1, "BitwiseAnd": 1, "BitwiseOr": 1, "BitwiseXor": 1, "BitwiseNot": 1,
    "Where": 1, "PRelu": 2, "Neg": 1, "Abs": 1, "Sign": 1, "Reciprocal": 1, "Floor": 1, "Ceil": 1,
    "Round": 1, "Sqrt": 1, "IsNaN": 1, "IsInf": 1, "Cast": 1, "CastLike": 1,
    # transcendental
    "Exp": 1, "Log": 1, "Tanh": 1, "Erf": 1, "Sin": 1, "Cos": 1, "Tan": 1, "Asin": 1, "Acos": 1,
    "Atan": 1, "Sinh": 1, "Cosh": 1, "Asinh": 1, "Acosh": 1, "Atanh": 1,
    # activations
    "Relu": 1, "LeakyRelu": 2, "Sigmoid": 3, "HardSigmoid": 3, "HardSwish": 4, "Clip": 2, "Elu": 3,
    "Selu": 4, "Celu": 4, "Softplus": 3, "Softsign": 3, "ThresholdedRelu": 1, "Mish": 6, "Gelu": ERF_GELU,
    "Shrink": 2, "Swish": 4,
    # quantisation
    "QuantizeLinear": 3, "DequantizeLinear": 2, "DynamicQuantizeLinear": 5,
}
MS_OPS_PER_ELEMENT = {"BiasGelu": ERF_GELU + 1, "FastGelu": TANH_GELU, "QuickGelu": 5, "Gelu": ERF_GELU, "BiasAdd": 2,
                      "QuickGeluGrad": 6, "BiasDropout": 2}


def activation_ops(op_type: str) -> int:
    """Ops per element of an activation fused into a producer (``activation`` attribute of FusedConv /
    FusedGemm): the same figure as the standalone op, 1 for an unlisted one, 0 for none."""
    if not op_type:
        return 0
    return OPS_PER_ELEMENT.get(op_type, 1)


def same_as_first(attrs, ins, n_out):
    """Shape rule: the first output has the first input's dims and dtype."""
    x = ins[0] if ins else None
    return [x] if x is not None and x[0] is not None else []


# ops whose inputs broadcast against each other (numpy rules): known inputs that cannot do so make
# the node's shapes contradict each other (a position table of 197 tokens added to 577 patches)
BROADCAST = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Mean", "Sum", "Equal", "Less",
                       "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "BitShift", "BitwiseAnd",
                       "BitwiseOr", "BitwiseXor", "Where"})


def _check_broadcast(ctx: Ctx) -> None:
    """Raise Contradiction when the node's known inputs do not broadcast (every axis, aligned from the
    right, must be equal or 1): its output shape is then unknown, or was carried through by a lenient
    rule (ONNX's per-node inference gives [1, 8, 768] + [1, 0, 768] the shape [1, 8, 768])."""
    node = ctx.node
    if node.op_type not in BROADCAST or node.domain not in ("", "ai.onnx") or not node.outputs:
        return
    tensors = ctx.graph.tensors
    out = tensors.get(node.outputs[0])
    known = out.shape if out is not None else None
    shapes = []
    for name in node.inputs:
        t = tensors.get(name) if name else None
        if t is None or t.shape is None:
            return  # an input unknown: not a contradiction, a lost shape
        shapes.append(t.shape)
    if known is not None and all(x == known for x in shapes):
        return
    if ctx.graph.opset < 7 and node.op_type in LEGACY_BROADCAST and len(shapes) == 2:
        if legacy_operand(node.op_type, node.attrs, shapes[0], shapes[1], ctx.graph.opset) is None:
            raise Contradiction(f"its second input {list(shapes[1])} does not fit the first {list(shapes[0])} "
                                f"(broadcast={node.attrs.get('broadcast', 0)}, axis={node.attrs.get('axis')})")
        return
    conflict = broadcast_conflict(shapes)
    if conflict:
        raise Contradiction(f"inputs {conflict}")


def _slope_fits(ctx: Ctx) -> None:
    """PRelu's slope broadcasts to its input one way (every slope axis, aligned from the right, equal
    to the input's or 1): a --dim that changed the channels left 16 slopes on 12 channels, costed."""
    if len(ctx.node.inputs) > 1 and ctx.has_input(1):
        x, s = tuple(ctx.in_shape(0)), tuple(ctx.in_shape(1))
        if ctx.graph.opset < 7 and len(x) > 1 and s in ((x[1],), (1,)):
            return  # PRelu-6: one slope per channel (axis 1) or one for all, whatever the rank
        if not broadcasts_to(s, x):
            raise Contradiction(f"its slope {list(s)} does not broadcast to the input {list(x)}")


def broadcast_spans(inputs: list, out: tuple) -> tuple[int, list[bool]]:
    """How many calls of its vector loop ONNX Runtime's broadcasting binary kernel makes (its
    Broadcaster, broadcaster.h), and which inputs it reads as a vector in each call. Walking the
    output's axes from the innermost (axes of extent 1 take no part), each input's first run ends
    where the input switches between broadcast (extent 1) and not; the span is the shorter of the two
    first runs, and the loop runs once per span. An input broadcast over the span is one value for
    the call (a register); one that is not is read as a vector, again at every span it repeats over.
    Same shapes, or a scalar against a tensor, are one span; a bias of 96 added to [4096, 96] is 4,096
    spans reading the bias each time; a per-channel scale [1, C, 1, 1] times [1, C, H, W] is C spans
    of H x W, the scale one value in each."""
    n = 1
    for d in out:
        n *= d
    if n == 0:
        return 0, [False] * len(inputs)
    span = n
    vector = []
    for shape in inputs:
        shape = (1,) * (len(out) - len(shape)) + tuple(shape)
        run, state = 1, None
        for d_in, d_out in zip(reversed(shape), reversed(out)):
            if d_out == 1:
                continue
            b = d_in == 1
            if state is not None and b != state:
                break
            state = b
            run *= d_out
        span = min(span, run)
        vector.append(state is False)
    return n // span, vector


def _spans(ctx: Ctx) -> tuple[int, int]:
    """The broadcast spans of a two-input op and the bytes its kernel reads again from cache (an
    input read as a vector in every span, over the spans after its own elements'); (0, 0) for one
    input or a variadic call: no such loop."""
    node = ctx.node
    if node.op_type not in BROADCAST or node.op_type == "Where" or len(node.inputs) != 2 \
            or not all(node.inputs) or node.domain not in ("", "ai.onnx"):
        return 0, 0
    out = tuple(ctx.out_shape(0))
    a, b = tuple(ctx.in_shape(0)), tuple(ctx.in_shape(1))
    b = legacy_operand(node.op_type, node.attrs, a, b, ctx.graph.opset) or b  # opset 1-6: aligned at axis
    spans, vector = broadcast_spans([a, b], out)
    n = ctx.numel(out)
    again = 0
    for i in (0, 1):
        if vector[i] and spans > 1:
            again += (n - ctx.in_numel(i)) * DTYPE_BITS.get(ctx.dtype(i), 32) // 8
    return spans, again


def _squares(ctx: Ctx) -> bool:
    """A Pow whose exponent is a constant 2 or 3 (one value): ONNX Runtime's CPU kernel squares or cubes by
    multiplying, at a few tenths of a ns an element (2-core EPYC VM: 0.25-0.5 for [1, 64, 56, 56]), where any
    other exponent calls the C library's powf per element (2.4-2.9 ns)."""
    v = ctx.graph.values.get(ctx.node.inputs[1]) if len(ctx.node.inputs) > 1 else None
    return ctx.node.domain in ("", "ai.onnx") and v is not None and getattr(v, "size", 0) == 1 \
        and float(v.reshape(-1)[0]) in (2.0, 3.0)


def _make(weight: int):
    def cost(ctx: Ctx):
        _check_broadcast(ctx)
        kernel, items, again = "", 0, 0
        if ctx.node.op_type == "Clip" and ctx.node.domain in ("", "ai.onnx"):
            for i in (1, 2):  # min and max: one value each (ONNX Runtime takes [] or [1])
                if ctx.has_input(i) and ctx.in_numel(i) != 1:
                    raise Contradiction(f"Clip's {('min', 'max')[i - 1]} is {list(ctx.in_shape(i))}, not one value")
        if ctx.node.op_type == "Pow" and _squares(ctx):
            kernel = "Pow.square"  # ONNX Runtime multiplies: no powf call per element
        elif ctx.node.op_type == "PRelu":
            _slope_fits(ctx)
            kernel = "PRelu"  # ONNX Runtime's PRelu: a loop over its outputs, whatever the slope's shape
        else:
            spans, again = _spans(ctx)
            if spans > 1:
                kernel, items = BROADCAST_SPANS, spans
        n = sum(ctx.out_numel(i) for i, o in enumerate(ctx.node.outputs) if o and i == 0)
        w = weight
        if ctx.node.op_type == "Gelu" and ctx.attr("approximate", "none") == "tanh":
            w = TANH_GELU  # ONNX's Gelu-20 with approximate="tanh"
        elif ctx.node.op_type == "FastGelu" and ctx.has_input(1):
            w = TANH_GELU + 1  # its bias added first, as BiasGelu's
        if ctx.node.op_type in ("Cast", "CastLike", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"):
            family = "cast"
        else:
            family = "elementwise"
        return ctx.workload(family, other=w * n, dtype=ctx.compute_dtype(), kernel=kernel, loop_items=items,
                            rereads=again)

    return cost


def _dyn_quant(ctx: Ctx):
    n = ctx.in_numel(0)
    return ctx.workload("cast", other=5 * n, parallel=n)


register({op: _make(w) for op, w in OPS_PER_ELEMENT.items()}, pure=True)
register_check({op: _check_broadcast for op in BROADCAST})
register({"DynamicQuantizeLinear": _dyn_quant})
register({f"com.microsoft:{op}": _make(w) for op, w in MS_OPS_PER_ELEMENT.items()}, pure=True)
register_shapes({f"com.microsoft:{op}": same_as_first for op in MS_OPS_PER_ELEMENT})
