"""The rest of the ONNX standard: losses, sampling grids, signal processing, linear algebra,
newer fused ops, strings and the training domain.

Counting conventions (ops are additions, multiplications, comparisons, exp/log each 1):

- NegativeLogLikelihoodLoss: 1 gather + 1 weight multiply per target element, plus the reduction.
- SoftmaxCrossEntropyLoss: softmax (5 per score) + log (1) per score, then the NLL above.
- GridSample: per output element, the source coordinate (4), and per tap (nearest 1, bilinear 4,
  bicubic 16) a weight multiply and add (2): 4 + 2 x taps.
- AffineGrid: a 2x3 (3x4) matrix times the homogeneous coordinate per output point: 2 x 3 (3 x 4) MACs.
- DeformConv: the convolution's MACs plus bilinear sampling of every input tap (8 ops per tap).
- DFT: an FFT of length n costs 5 n log2(n) real ops per transform (the radix-2 count); STFT frames
  the signal and runs one DFT per frame; window functions 4 ops per sample; MelWeightMatrix 10 per entry.
- Det: LU factorisation, 2/3 n^3 multiply-adds per matrix.
- CumSum / CumProd: 1 op per element. BitCast: a view (no bytes move).
- SwiGLU: x W (gate) and x V (up) are outside the op; inside: sigmoid (4), multiply x2 = 6 per output.
- LinearAttention / CausalConvWithState: per step, the recurrent state update (MACs of the state
  matrix) and the readout; TensorScatter: the written slices' bytes.
- Host work (strings, training updates): ops per element read, run on the host CPU (family
  ``host``): StringConcat/Split/Normalizer/RegexFullMatch 8 per element (a short string),
  TfIdfVectorizer 8 per input element, the training optimizers (Adagrad, Adam, Momentum) 10 per
  parameter. The ai.onnx.ml domain has its own module, ``dnnperf.ops.ml``.
"""

from __future__ import annotations

from math import log2, prod

from dnnperf.ops import Contradiction, Ctx, Unsupported, register, scalar_int
from dnnperf.workload import Gemm


def _numel(shape) -> int:
    return int(prod(shape)) if shape else 1


def _loss_fit(ctx: Ctx) -> None:
    """A loss's scores (N, C, d1..dk), target (N, d1..dk) and optional weight (C) must agree: ONNX's
    inference refuses them otherwise (on SoftmaxCrossEntropyLoss only inside its function body, which
    the loader does not hold against a node)."""
    x, t = ctx.in_shape(0), ctx.in_shape(1)
    if len(x) < 2 or tuple(t) != tuple(x[:1]) + tuple(x[2:]):
        raise Contradiction(f"scores {list(x)} and target {list(t)} do not agree "
                            "(scores N x C x d..., target N x d...)")
    if ctx.has_input(2) and tuple(ctx.in_shape(2)) != (x[1],):
        raise Contradiction(f"its class weights {list(ctx.in_shape(2))} are not one per class ({x[1]})")


def nll_loss(ctx: Ctx):
    _loss_fit(ctx)
    n = ctx.in_numel(1)  # target
    return ctx.workload("reduce", other=3 * n, parallel=max(1, ctx.out_numel()))


def softmax_ce_loss(ctx: Ctx):
    _loss_fit(ctx)
    scores = ctx.in_numel(0)
    n = ctx.in_numel(1)
    return ctx.workload("softmax", other=6 * scores + 3 * n, parallel=max(1, n))


_TAPS = {"nearest": 1, "linear": 4, "bilinear": 4, "cubic": 16, "bicubic": 16}


def grid_sample(ctx: Ctx):
    taps = _TAPS.get(str(ctx.attr("mode", "linear")), 4)
    if len(ctx.out_shape()) == 5:
        taps = {1: 1, 4: 8, 16: 64}[taps]  # trilinear / tricubic on volumes
    return ctx.workload("resize", other=(4 + 2 * taps) * ctx.out_numel())


def affine_grid(ctx: Ctx):
    out = ctx.out_shape()  # (N, H, W, 2) or (N, D, H, W, 3)
    dims = out[-1]
    points = ctx.out_numel() // dims
    return ctx.workload("elementwise", macs=points * dims * (dims + 1))


def deform_conv(ctx: Ctx):
    x, w = ctx.in_shape(0), ctx.in_shape(1)
    out = ctx.out_shape()
    group = int(ctx.attr("group", 1))
    cout, cin_g = w[0], w[1]
    k = _numel(w[2:])
    spatial = _numel(out[2:])
    macs = out[0] * cout * spatial * cin_g * k
    sampling = 8 * out[0] * cin_g * group * k * spatial
    return ctx.workload("conv", macs=macs, other=sampling, gemm=Gemm(spatial * out[0], cout // group, cin_g * k, group))


def _fft_ops(n: int) -> float:
    return 5.0 * n * log2(n) if n > 1 else 1.0


def dft(ctx: Ctx):
    out = ctx.out_shape()
    if ctx.has_input(2) and ctx.value(2) is not None:
        axis = int(ctx.value(2))
    else:
        axis = int(ctx.attr("axis", -2 if len(out) > 1 else 0))
    n = out[axis]
    transforms = ctx.out_numel() // max(1, n * out[-1])
    return ctx.workload("elementwise", other=int(transforms * _fft_ops(n)))


def stft(ctx: Ctx):
    # its window, where given, is one weight per sample of a frame (ONNX Runtime aborts the process on
    # another shape, and its frame length is the window's when the frame_length input is left out)
    if ctx.has_input(2):
        win, length = ctx.in_shape(2), scalar_int(ctx.value(3)) if ctx.has_input(3) else None
        if len(win) != 1 or win[0] < 1 or (length is not None and length != win[0]):
            raise Contradiction(f"its window {list(win)} is not one weight per sample of a frame"
                                + (f" ({length})" if length is not None else ""))
    out = ctx.out_shape()  # (batch, frames, bins, 2)
    frames, bins = out[1], out[2]
    # a real signal's one-sided spectrum keeps n // 2 + 1 of the n bins the transform computes
    onesided = ctx.attr("onesided", 1) and ctx.in_shape(0)[-1] == 1
    n = (2 * (bins - 1) if bins > 1 else 1) if onesided else bins
    return ctx.workload("elementwise", other=int(out[0] * frames * (_fft_ops(n) + n)))


def window(ctx: Ctx):
    return ctx.workload("elementwise", other=4 * ctx.out_numel())


def mel(ctx: Ctx):
    return ctx.workload("elementwise", other=10 * ctx.out_numel())


def det(ctx: Ctx):
    x = ctx.in_shape(0)
    n = x[-1]
    mats = _numel(x[:-2])
    return ctx.workload("matmul", macs=mats * (2 * n ** 3) // 3, parallel=max(1, mats * n))


def per_element(k: int, family: str = "elementwise", of_output: bool = True):
    def cost(ctx: Ctx):
        n = ctx.out_numel() if of_output else ctx.in_numel(0)
        return ctx.workload(family, other=k * n)

    return cost


def bitcast(ctx: Ctx):
    return ctx.workload("view")


def swiglu(ctx: Ctx):
    return ctx.workload("elementwise", other=6 * ctx.out_numel())


def tensor_scatter(ctx: Ctx):
    upd = ctx.in_numel(1) if ctx.has_input(1) else ctx.out_numel()
    return ctx.workload("movement", other=upd)


def linear_attention(ctx: Ctx):
    """(B, H, T, Dk) queries/keys, (B, H, T, Dv) values: per step the state S (Dk x Dv) decays,
    gains k v^T and is read by q: 3 Dk Dv MACs per step and head."""
    q, v = ctx.in_shape(0), ctx.in_shape(2)
    if len(q) == 4:
        b, h, t, dk = q
        dv = v[-1]
    elif len(q) == 3:
        hq = int(ctx.attr("q_num_heads", 0) or ctx.attr("num_heads", 0) or 1)
        b, t = q[0], q[1]
        dk = q[2] // hq
        hv = int(ctx.attr("kv_num_heads", 0) or hq)
        dv = v[2] // hv
        h = hq
    else:
        raise Unsupported(f"LinearAttention query rank {len(q)} not understood")
    macs = 3 * b * h * t * dk * dv
    return ctx.workload("attention", macs=macs, other=2 * b * h * t * dk * dv, gemm=Gemm(dk, dv, 1, b * h * t))


def causal_conv_with_state(ctx: Ctx):
    x, w = ctx.in_shape(0), ctx.in_shape(1)
    out = ctx.out_shape()
    k = w[-1]
    ch = w[0]
    macs = _numel(out) // max(1, out[1] if len(out) > 2 else 1) * ch * k if len(out) > 2 else _numel(out) * k
    return ctx.workload("depthwise_conv", macs=macs)


def flex_attention(ctx: Ctx):
    """ai.onnx.preview FlexAttention: Q (B, Hq, L, E), K (B, Hkv, S, E), V (B, Hkv, S, Ev): two
    products and a softmax, plus the score-modifying subgraph's elementwise work (1 op per score)."""
    q, k, v = ctx.in_shape(0), ctx.in_shape(1), ctx.in_shape(2)
    b, hq, l, e = q
    s, ev = k[2], v[3]
    scores = b * hq * l * s
    return ctx.workload("attention", macs=scores * (e + ev), other=scores * 7, gemm=Gemm(l, s, e, b * hq),
                        parallel=max(scores, ctx.out_numel()))


def nms(ctx: Ctx):
    """NonMaxSuppression: per batch and class, sort the boxes (n log n) and compare each kept box
    with the rest (IoU, ~12 ops): bounded by every pair, n^2 / 2. Its output size depends on the
    data: costed at the upper bound (every box of every class selected)."""
    boxes = ctx.in_shape(0)  # (batch, spatial, 4)
    scores = ctx.in_shape(1)  # (batch, classes, spatial)
    b, c, n = scores
    pairs = b * c * n * max(n - 1, 0) // 2
    sort = int(b * c * n * max(log2(n), 1)) if n > 1 else b * c
    w = ctx.workload("host", other=12 * pairs + sort, parallel=max(1, b * c * n))
    return _with_note(w, "data-dependent output: costed at its upper bound (every box kept)", waits=1)


def unique(ctx: Ctx):
    """Unique: a sort of the input (n log n comparisons) and one pass; outputs at their upper bound."""
    n = ctx.in_numel(0)
    w = ctx.workload("host", other=int(n * max(log2(n), 1)) + n if n > 1 else 1)
    return _with_note(w, "data-dependent output: costed at its upper bound (every element unique)", waits=1)


def nonzero(ctx: Ctx):
    """NonZero: one pass over the input; its output (the indices) is costed at its upper bound."""
    return _with_note(ctx.workload("movement"), "data-dependent output: costed at its upper bound (every element non-zero)",
                      waits=1)


def _with_note(w, note: str, waits: int = 0):
    """``w`` with ``note``; ``waits``: an output whose size the host learns only by reading it back
    (``Workload.host_waits``)."""
    from dataclasses import replace

    return replace(w, note=note, host_waits=waits)


def host_per_input(k: int):
    """Host-side work proportional to every input element read."""

    def cost(ctx: Ctx):
        n = 0
        for i, name in enumerate(ctx.node.inputs):
            if name:
                n += ctx.in_numel(i)
        return ctx.workload("host", other=k * max(n, 1))

    return cost


def host_per_output(k: int):
    def cost(ctx: Ctx):
        n = sum(ctx.out_numel(i) for i, o in enumerate(ctx.node.outputs) if o)
        return ctx.workload("host", other=k * max(n, 1))

    return cost


def string_normalizer(ctx: Ctx):
    """StringNormalizer: host work per string; with stopwords the strings it drops are known only at
    run time, so the output is at its upper bound (``load.data_sized``: every string kept)."""
    w = host_per_input(8)(ctx)
    if ctx.attr("stopwords", None):
        return _with_note(w, "data-dependent output: costed at its upper bound (no string a stopword)")
    return w


register({
    "NegativeLogLikelihoodLoss": nll_loss,
    "SoftmaxCrossEntropyLoss": softmax_ce_loss,
    "GridSample": grid_sample,
    "AffineGrid": affine_grid,
    "DeformConv": deform_conv,
    "DFT": dft,
    "STFT": stft,
    "HannWindow": window,
    "HammingWindow": window,
    "BlackmanWindow": window,
    "MelWeightMatrix": mel,
    "Det": det,
    "CumProd": per_element(1),
    "BitCast": bitcast,
    "SwiGLU": swiglu,
    "TensorScatter": tensor_scatter,
    "LinearAttention": linear_attention,
    "CausalConvWithState": causal_conv_with_state,
    "ai.onnx.preview:FlexAttention": flex_attention,
    "NonMaxSuppression": nms,
    "Unique": unique,
    "NonZero": nonzero,
    "StringConcat": host_per_output(8),
    "StringSplit": host_per_input(8),
    "StringNormalizer": string_normalizer,
    "RegexFullMatch": host_per_input(8),
    "TfIdfVectorizer": host_per_input(8),
    # training domain: one optimizer step over every parameter
    "ai.onnx.preview.training:Adagrad": host_per_input(10),
    "ai.onnx.preview.training:Adam": host_per_input(10),
    "ai.onnx.preview.training:Momentum": host_per_input(10),
    "ai.onnx.preview.training:Gradient": host_per_input(10),
})
