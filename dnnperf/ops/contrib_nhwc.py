"""ONNX Runtime contrib ops its transformer optimizer writes for its CUDA provider (diffusion UNets in
channels-last layout, T5's and WavLM's position biases), and the channels-last QLinearConv its CPU provider's
NHWC pass writes, each a cost and a shape rule (layouts as ONNX Runtime's own shape inference for these ops
states them):

- QLinearConv (com.microsoft): the standard QLinearConv; with ``channels_last`` its input and output are
  N x spatial x C and its weights stay [M, C / group, kH, kW] (an optimised QDQ model saved to disk has one
  for every 8-bit convolution).

- NhwcConv / NhwcFusedConv: a convolution over N x H x W x C with [M, kH, kW, C / group] weights,
  costed as the NCHW convolution it is (the fused form adds its activation and optional sum input).
- SkipGroupNorm: the residual (and a bias) added, then GroupNorm (channels last), optionally SiLU;
  outputs the normalised tensor and the sum.
- RelativePositionBias (T5): [1, heads, query length, key length] gathered from a bucket table; the
  lengths are input values.
- GatedRelativePositionBias (WavLM): a per-head gate from a small projection of the query, times
  the relative position bias: [batch, heads, S, S].
"""

from __future__ import annotations

from dnnperf.ops import Contradiction, Ctx, length_value, register_pairs, takes_values
from dnnperf.ops.elementwise import OPS_PER_ELEMENT, activation_ops
from dnnperf.ops.matrix import _conv, _qlinear_conv_shape, conv_out_shape, known, qlinear_conv
from dnnperf.ops.norm import PER_ELEMENT as NORM_OPS
from dnnperf.ops.windows import channels_first, windowed_channels_last
from dnnperf.workload import Gemm


class _ChannelsFirst(Ctx):
    """The node seen in NCHW: its input, its weights and its output permuted (bytes are the same)."""

    __slots__ = ()

    def in_shape(self, i: int) -> tuple[int, ...]:
        s = Ctx.in_shape(self, i)
        return channels_first(s) if i in (0, 1) else s

    def out_shape(self, i: int = 0) -> tuple[int, ...]:
        s = Ctx.out_shape(self, i)
        return channels_first(s) if i == 0 else s


class _DataChannelsFirst(_ChannelsFirst):
    """A channels-last QLinearConv seen in NCHW: its input and output permuted, its weights as they are."""

    __slots__ = ()

    def in_shape(self, i: int) -> tuple[int, ...]:
        s = Ctx.in_shape(self, i)
        return channels_first(s) if i == 0 else s


def contrib_qlinear_conv(ctx: Ctx):
    if int(ctx.attr("channels_last", 0)):
        ctx = _DataChannelsFirst(ctx.graph, ctx.node)
    return qlinear_conv(ctx)


def _contrib_qlinear_conv_shape(attrs, ins, n_out):
    x, w = ins[0] if ins else None, ins[3] if len(ins) > 3 else None
    if not attrs.get("channels_last", 0) or not known(x) or len(x[0]) < 3:
        return _qlinear_conv_shape(attrs, ins, n_out)
    if not known(w):
        return []
    y = conv_out_shape(attrs, channels_first(tuple(x[0])), w[0])
    return [((y[0],) + tuple(y[2:]) + (y[1],), x[1])] if y is not None else []


def nhwc_conv(ctx: Ctx):
    return _conv(_ChannelsFirst(ctx.graph, ctx.node))


def nhwc_fused_conv(ctx: Ctx):
    """NhwcFusedConv (X, W, B, Z): the activation and the sum input Z one op an output element each."""
    extra = activation_ops(ctx.attr("activation", "")) + (1 if ctx.has_input(3) else 0)
    return _conv(_ChannelsFirst(ctx.graph, ctx.node), extra_per_out=extra)


def _nhwc_conv_shape(attrs, ins, n_out):
    x, w = ins[0] if ins else None, ins[1] if len(ins) > 1 else None
    if not (known(x) and known(w)) or len(x[0]) < 3 or len(w[0]) != len(x[0]):
        return []
    y = windowed_channels_last("Conv", attrs, tuple(x[0]), [x[0], w[0]])
    return [(y, x[1])] if y is not None else []


def skip_group_norm(ctx: Ctx):
    """GroupNorm's 7 ops an element, the skip added (and the bias), SiLU's 4 with ``activation``."""
    x = ctx.in_shape(0)
    if ctx.has_input(1) and x and tuple(ctx.in_shape(1)) != (x[-1],):
        raise Contradiction(f"gamma {list(ctx.in_shape(1))} is not one value per channel ({x[-1]})")
    n = ctx.in_numel(0)
    per = NORM_OPS["GroupNormalization"] + 1 + (1 if ctx.has_input(4) else 0)
    per += OPS_PER_ELEMENT["Swish"] if int(ctx.attr("activation", 0)) else 0
    return ctx.workload("norm", other=per * n, parallel=n)


def _skip_group_norm_shape(attrs, ins, n_out):
    x = ins[0] if ins else None
    return [x, x][:max(n_out, 1)] if known(x) else []


_BUCKET_OPS = 6  # a relative position's bucket: subtract, magnitude, compare, log, scale, clamp


def relative_position_bias(ctx: Ctx):
    """One bucket computed a (query, key) pair, one table row gathered a head."""
    y = ctx.out_shape(0)
    pairs = y[-1] * y[-2] if len(y) == 4 else ctx.out_numel(0)
    return ctx.workload("movement", other=_BUCKET_OPS * pairs + ctx.out_numel(0))


@takes_values
def _relative_position_bias_shape(attrs, ins, n_out, values=()):
    table = ins[0] if ins else None
    q, k = (length_value(values[i]) if len(values) > i else None for i in (1, 2))
    if not known(table) or len(table[0]) != 2 or q is None or k is None:
        return []
    return [((1, table[0][1], q, k), table[1])]


def gated_relative_position_bias(ctx: Ctx):
    """query_layer [B, S, H x d] + query_bias, projected per head by weight [d, D] (+ bias) into two
    gates (a sigmoid and a sum each), then the gated bias: rel_pos x (gate_a x (gate_b x eco_a - 1) + 2),
    4 ops an output element."""
    q = ctx.in_shape(0)
    w = ctx.in_shape(3)
    heads = int(ctx.attr("num_heads", 1))
    if len(q) != 3 or len(w) != 2 or heads <= 0 or q[2] != heads * w[0]:
        raise Contradiction(f"query layer {list(q)} is not {heads} heads of the weight's {w[0] if w else '?'} values")
    rows = q[0] * q[1] * heads
    macs = rows * w[0] * w[1]
    other = q[0] * q[1] * q[2] + rows * (w[1] + OPS_PER_ELEMENT["Sigmoid"] * 2 + 4) + 4 * ctx.out_numel(0)
    return ctx.workload("matmul", macs=macs, other=other, gemm=Gemm(rows, w[1], w[0]), parallel=ctx.out_numel(0))


def _gated_rpb_shape(attrs, ins, n_out):
    q = ins[0] if ins else None
    offset = ins[6] if len(ins) > 6 else None
    heads = int(attrs.get("num_heads", 0))
    if heads <= 0:
        return []
    if known(offset) and len(offset[0]) == 2:  # padding removed: (batch, sequence) from the offsets
        b, s = offset[0]
    elif known(q) and len(q[0]) == 3:
        b, s = q[0][0], q[0][1]
    else:
        return []
    return [((b, heads, s, s), q[1] if q is not None else "float32")]


_OPS = {
    "QLinearConv": (contrib_qlinear_conv, _contrib_qlinear_conv_shape),
    "NhwcConv": (nhwc_conv, _nhwc_conv_shape),
    "NhwcFusedConv": (nhwc_fused_conv, _nhwc_conv_shape),
    "SkipGroupNorm": (skip_group_norm, _skip_group_norm_shape),
    "RelativePositionBias": (relative_position_bias, _relative_position_bias_shape),
    "GatedRelativePositionBias": (gated_relative_position_bias, _gated_rpb_shape),
}
register_pairs("com.microsoft", _OPS)
