"""Normalisation and softmax: a few ops per element, always memory-bound in practice.

Each counted as the nodes an exporter spells it with (so a fused op and its decomposed graph agree):
BatchNormalization at inference is a per-channel scale and shift (2 ops); Layer/Group/Instance norms
a mean, a subtraction, a square, a mean of squares, the multiplication by the reciprocal deviation,
a scale and a shift (7: the per-row epsilon and square root left out); MeanVarianceNormalization
the same without scale and shift (5); an RMS norm a square, a mean, the normalising multiplication
and a scale (4); softmax is max, subtract, exp, sum, divide (5 ops). ONNX Runtime's Skip norms add
the residual (and their bias) first: one more op an element each.
"""

from __future__ import annotations

from dnnperf.ops import Contradiction, Ctx, broadcasts_to, register, register_shapes
from dnnperf.ops.elementwise import same_as_first

_LN, _RMS = 7, 4
_PER_ELEMENT = {
    "BatchNormalization": 2, "LayerNormalization": _LN, "GroupNormalization": _LN,
    "InstanceNormalization": _LN, "MeanVarianceNormalization": 5, "RMSNormalization": _RMS,
    "SimplifiedLayerNormalization": _RMS, "LpNormalization": 3,
    "Softmax": 5, "LogSoftmax": 6, "Hardmax": 2,
}
PER_ELEMENT = _PER_ELEMENT  # ops per element of each normalisation (the contrib ops reuse them)
_MS = {"SkipLayerNormalization": _LN + 1, "SkipSimplifiedLayerNormalization": _RMS + 1, "LayerNormalization": _LN,
       "SimplifiedLayerNormalization": _RMS, "BiasSoftmax": 6}


# ops that normalise rows over their last axes (``axis`` to the end; the Skip* kernels over the
# last): their cost also has a part per row (two reductions, a pass of scaling), so short rows cost
# more per element (LayerNorm over 96 channels on a 2-core x86: 0.65 ns an element, over 768: 0.23)
_ROW_NORMS = frozenset({"LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization",
                        "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"})


def _row(ctx: Ctx) -> int:
    shape = ctx.in_shape(0)
    if not shape:
        return 0
    n = 1
    for d in shape[_row_axis(ctx, shape):]:
        n *= int(d)
    return n


def _row_axis(ctx: Ctx, shape) -> int:
    """The first normalised axis (``axis``, default the last), clamped into the input's rank."""
    axis = int(ctx.attr("axis", -1))
    axis = axis + len(shape) if axis < 0 else axis
    return max(0, min(axis, len(shape) - 1))


# ops whose parameters are one value per channel (axis 1); the input that is a Skip norm's scale (gamma)
_PER_CHANNEL = frozenset({"BatchNormalization", "InstanceNormalization", "GroupNormalization"})
_SCALE_INPUT = {"SkipLayerNormalization": 2, "SkipSimplifiedLayerNormalization": 2}
# the Skip norms' optional bias (input, skip, gamma[, beta], bias)
_SKIP_BIAS_INPUT = {"SkipLayerNormalization": 4, "SkipSimplifiedLayerNormalization": 3}


def _params_fit(ctx: Ctx, op: str) -> None:
    """A normalisation's parameters must fit its input (a runtime refuses them otherwise): one per
    channel for Batch/Instance norms (GroupNormalization: per channel, or per group before opset 21),
    and a row norm's scale broadcast to the input. A --dim that changed the channels or
    the hidden size was costed at the input's new size, silently."""
    x = tuple(ctx.in_shape(0))
    if op in _PER_CHANNEL and len(x) >= 2:
        allowed = {(x[1],)} | ({(int(ctx.attr("num_groups", 0)),)} if op == "GroupNormalization" else set())
        for i in range(1, len(ctx.node.inputs)):
            if ctx.has_input(i) and tuple(ctx.in_shape(i)) not in allowed:
                raise Contradiction(f"input has {x[1]} channels but its parameter {list(ctx.in_shape(i))} does not "
                                    "match them")
    elif op in _ROW_NORMS and x:
        i = _SCALE_INPUT.get(op, 1)
        rows = x[_row_axis(ctx, x):]
        for k, what in ((i, "scale"), (i + 1, "bias")) if op == "LayerNormalization" else ((i, "scale"),):
            if ctx.has_input(k):
                s = tuple(ctx.in_shape(k))
                # of at most the input's rank, broadcast to the input (ONNX's definition multiplies the
                # normalised input by it: [4, 64] or the input's own shape for rows of 64 over [1, 4, 64]), or
                # of the rows' size in another shape (older ONNX Runtime releases took any such)
                if len(s) > len(x) or (not broadcasts_to(s, x) and ctx.numel(s) != ctx.numel(rows)):
                    raise Contradiction(f"its {what} {list(s)} does not fit the normalised axes {list(rows)}")



_SOFTMAXES = frozenset({"Softmax", "LogSoftmax", "Hardmax"})


def _across(ctx: Ctx) -> bool:
    """A softmax over an axis that is not the last (opset 13 on; before, the input was coerced to 2-D at
    ``axis`` and each row is contiguous): YOLOv8's box head over 16 bins at [1, 16, 4, 2100], a
    segmentation head over its classes. ONNX Runtime's CPU kernel runs it at 8-13 ns an element
    where the last axis takes 0.2-0.9 (``loop_ns`` 'Softmax.axis')."""
    x = ctx.in_shape(0)
    if ctx.graph.opset < 13 or not x:
        return False
    axis = int(ctx.attr("axis", -1))
    axis = axis + len(x) if axis < 0 else axis
    return 0 <= axis < len(x) - 1 and ctx.numel(x[axis + 1:]) > 1


def _make(weight: int, family: str, op: str = ""):
    rows = op in _ROW_NORMS
    checked = op in _ROW_NORMS or op in _PER_CHANNEL
    softmax = op in _SOFTMAXES

    def cost(ctx: Ctx):
        if checked:
            _params_fit(ctx, op)
        extra = {"row": _row(ctx)} if rows else {}
        if softmax and ctx.node.domain in ("", "ai.onnx") and _across(ctx):
            extra["kernel"] = "Softmax.axis"
        w = weight
        bias = _SKIP_BIAS_INPUT.get(op) if ctx.node.domain == "com.microsoft" else None
        if bias is not None and ctx.has_input(bias):
            w += 1  # the bias added with the residual (the optimizer's "add bias" fusion): one more add
        return ctx.workload(family, other=w * ctx.in_numel(0), parallel=ctx.out_numel(0), **extra)

    return cost


def lrn(ctx: Ctx):
    """A window of ``size`` squares summed across channels, then x * (bias + alpha / size * sum) ^ -beta
    per element. ONNX Runtime's kernel raises to the power one element at a time on one thread (12 ns
    an element on a 2-core EPYC VM, at any size: AlexNet's and GoogLeNet's LRNs took 5.8 and 10.1 ms
    against 0.1 and 0.2 estimated from the op count): a calibrated CPU times an element
    (``loop_ns`` 'LRN')."""
    size = int(ctx.attr("size", 5))  # (1 or more: dnnperf.ops.attributes)
    n = ctx.in_numel(0)
    return ctx.workload("norm", other=(2 * size + 4) * n, kernel="LRN", loop_items=n)


register({op: _make(w, "softmax" if "max" in op.lower() else "norm", op) for op, w in _PER_ELEMENT.items()}, pure=True)
register({f"com.microsoft:{op}": _make(w, "norm", op) for op, w in _MS.items()}, pure=True)
register({"LRN": lrn})
def _skip_norm_shape(attrs, ins, n_out):
    """Skip(Simplified)LayerNormalization: output, mean, inv_std_var ([..., 1], fp32), the residual sum."""
    x = ins[0] if ins else None
    if x is None or x[0] is None:
        return []
    stat = (tuple(x[0][:-1]) + (1,), "float32")
    return [x, stat, stat, x][:max(n_out, 1)]


register_shapes({f"com.microsoft:{op}": same_as_first for op in _MS})
register_shapes({"com.microsoft:SkipLayerNormalization": _skip_norm_shape,
                 "com.microsoft:SkipSimplifiedLayerNormalization": _skip_norm_shape,
                 # ONNX Runtime registers SimplifiedLayerNormalization in the default domain too
                 "SimplifiedLayerNormalization": same_as_first})
