"""ONNX Runtime's blocked-layout ops (domain com.microsoft.nchwc), which its CPU provider's NCHWc pass writes into a
graph it optimises (a model saved with ``optimized_model_filepath`` holds them): Conv (a FusedConv: an activation
and an optional sum input), MaxPool / AveragePool / GlobalMaxPool / GlobalAveragePool, and the ReorderInput /
ReorderOutput conversions. Their tensors keep NCHW dims and their weights OIHW; each op is costed as the standard op
it replaces, and the conversions launch nothing here: dnnperf's layout pass (``dnnperf.layout``) prices the
conversions a blocked CPU runtime makes wherever the layers call for them, as it does for the model before ONNX
Runtime optimised it (a saved ResNet-50 then costs what the original does with ``--fusion typical``)."""

from __future__ import annotations

from dnnperf.ops import Ctx, register_pairs
from dnnperf.ops.matrix import _fused_conv_shape, fused_conv, known
from dnnperf.ops.movement import view
from dnnperf.ops.pool import global_pool, pool
from dnnperf.ops.windows import channels_first, windowed


BLOCK_MAX = 16  # the widest channel block of ONNX Runtime's blocked layout (AVX-512; 8 with AVX2)


class _PaddedInput(Ctx):
    """A blocked convolution's input as its kernel reads it: padded up to whole channel blocks. The optimised graph
    records the padding in the weights it reorders (a ShuffleNet's 24-channel depthwise layer as 32 groups) but
    not in its tensors' dims, which keep the channels a model has; taken as the weights say where they ask for
    less than one block more."""

    __slots__ = ()

    def in_shape(self, i: int) -> tuple[int, ...]:
        s = Ctx.in_shape(self, i)
        if i != 0 or len(s) < 3 or not self.has_input(1):
            return s
        w = Ctx.in_shape(self, 1)
        need = w[1] * int(self.attr("group", 1)) if len(w) >= 2 else s[1]
        return (s[0], need) + tuple(s[2:]) if s[1] < need < s[1] + BLOCK_MAX else s


def blocked_conv(ctx: Ctx):
    return fused_conv(_PaddedInput(ctx.graph, ctx.node))


def _pool_shape(op: str):
    def rule(attrs, ins, n_out):
        x = ins[0] if ins else None
        if not known(x) or len(x[0]) < 3:
            return []
        y = windowed(op, attrs, tuple(x[0]), [])
        return [(y, x[1])] if y is not None else []
    return rule


def _global_pool_shape(attrs, ins, n_out):
    x = ins[0] if ins else None
    return [(tuple(x[0][:2]) + (1,) * (len(x[0]) - 2), x[1])] if known(x) and len(x[0]) >= 3 else []


def _reorder_input_shape(attrs, ins, n_out):
    """NCHW (or N x spatial x C with ``channels_last``) in, NCHW dims out (the blocks are the kernel's business)."""
    x = ins[0] if ins else None
    if not known(x) or len(x[0]) < 3:
        return []
    return [(channels_first(tuple(x[0])) if attrs.get("channels_last", 0) else tuple(x[0]), x[1])]


def _reorder_output_shape(attrs, ins, n_out):
    """Back to ``channels`` channels (the block padding dropped), NCHW or N x spatial x C."""
    x = ins[0] if ins else None
    if not known(x) or len(x[0]) < 3:
        return []
    y = (x[0][0], int(attrs.get("channels", x[0][1]))) + tuple(x[0][2:])
    return [((y[0],) + y[2:] + (y[1],) if attrs.get("channels_last", 0) else y, x[1])]


register_pairs("com.microsoft.nchwc", {
    "Conv": (blocked_conv, _fused_conv_shape),
    "MaxPool": (pool, _pool_shape("MaxPool")),
    "AveragePool": (pool, _pool_shape("AveragePool")),
    "GlobalMaxPool": (global_pool, _global_pool_shape),
    "GlobalAveragePool": (global_pool, _global_pool_shape),
    "ReorderInput": (view, _reorder_input_shape),
    "ReorderOutput": (view, _reorder_output_shape),
})
