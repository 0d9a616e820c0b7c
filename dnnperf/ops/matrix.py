"""Convolutions and matrix products: the ops whose multiply-accumulates count as MACs.

Convolutions are costed as implicit GEMMs: M = batch x output pixels, N = output channels per
group, K = input channels per group x kernel window, one GEMM per group.
"""

from __future__ import annotations

import re
from dataclasses import replace
from math import prod

from dnnperf.ops import Contradiction, Ctx, Unsupported, broadcast_conflict, broadcasts_to, register, register_shapes
from dnnperf.ops.elementwise import activation_ops
from dnnperf.ops.windows import windowed
from dnnperf.vocab import int8_operands
from dnnperf.workload import Gemm, Workload


def _conv(ctx: Ctx, x_idx: int = 0, w_idx: int = 1, bias_idx: int | None = 2, extra_per_out: int = 0,
          separate_bias: bool = False):
    x = ctx.in_shape(x_idx)
    w = ctx.in_shape(w_idx)
    y = ctx.out_shape(0)
    if len(x) < 3 or len(w) != len(x):
        raise Unsupported(f"Conv input rank {len(x)} / weight rank {len(w)} not understood")
    groups = int(ctx.attr("group", 1))
    cin_g = w[1]
    cout = y[1]
    if groups <= 0 or cout % groups:
        raise Unsupported(f"group={groups} does not divide {cout} output channels")
    if x[1] != cin_g * groups:
        raise Contradiction(f"input has {x[1]} channels but the weights {list(w)} (group {groups}) expect {cin_g * groups}")
    if w[0] != cout:
        raise Contradiction(f"weights {list(w)} give {w[0]} output channels but the output has {cout}")
    auto, pads = str(ctx.attr("auto_pad", "NOTSET") or "NOTSET"), ctx.attr("pads")
    if auto != "NOTSET" and pads and (auto != "VALID" or any(pads)):
        raise Contradiction(f"auto_pad {auto} and explicit pads {list(pads)}: one of the two says the padding")
    _kernel_fits(ctx, w)
    if bias_idx is not None and ctx.has_input(bias_idx) and tuple(ctx.in_shape(bias_idx)) != (cout,):
        raise Contradiction(f"bias {list(ctx.in_shape(bias_idx))} is not one value per output channel ({cout})")
    window = prod(w[2:])
    out_pixels = prod(y[2:])
    batch = y[0]
    macs = batch * cout * out_pixels * cin_g * window
    gemm = Gemm(m=batch * out_pixels, n=cout // groups, k=cin_g * window, count=groups)
    cin = x[1]
    if groups == 1:
        family = "conv"
    elif groups == cin and cout // groups <= 4:
        family = "depthwise_conv"
    else:
        family = "grouped_conv"
    other = batch * cout * out_pixels * extra_per_out
    if bias_idx is not None and ctx.has_input(bias_idx):
        other += batch * cout * out_pixels
    conv = ()
    taps = 1.0
    if len(w) == 4:
        strides = list(ctx.attr("strides") or [1, 1])
        dil = list(ctx.attr("dilations") or [1, 1])
        conv = (cin_g, w[2], w[3], strides[0], strides[-1], any(d != 1 for d in dil))
        if conv[5] and len(strides) == 2 and len(dil) == 2:
            taps = _dilated_taps(ctx, x[2:], y[2:], w[2:], strides, dil)
    bias = separate_bias and bias_idx is not None and ctx.has_input(bias_idx)
    # a 1-D or 3-D convolution: named with its longest kernel side, for the CPU's plain-kernel figures
    # (dnnperf.efficiency.shape_efficiency: ONNX Runtime blocks 2-D convolutions only)
    kernel = f"Conv{len(w) - 2}d.k{max(w[2:])}" if len(w) != 4 and len(w) > 2 else ""
    return ctx.workload(family, macs=macs, other=other, gemm=gemm, conv=conv, bias=bias, taps=taps, kernel=kernel)


def _pad_begin(ctx: Ctx, i: int, n: int, o: int, k: int, s: int, d: int) -> int:
    auto = str(ctx.attr("auto_pad", "NOTSET"))
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        total = max((o - 1) * s + (k - 1) * d + 1 - n, 0)
        return total // 2 if auto == "SAME_UPPER" else total - total // 2
    if auto == "VALID":
        return 0
    pads = list(ctx.attr("pads") or [0] * 4)
    return int(pads[i]) if len(pads) == 4 else 0


def _dilated_taps(ctx: Ctx, ins, outs, kernel, strides, dil) -> float:
    """A dilated convolution's kernel taps that fall inside its input, over the taps a dilation-1
    kernel centred at the same places would have inside it (both summed over the output positions,
    multiplied over the two axes). ONNX Runtime's blocked CPU kernel skips the taps that land in the
    padding: DeepLabV3's atrous branches over a 16 x 16 map (dilations 12, 24, 36, padded as much)
    took 2.0, 0.85 and 0.83 ms for the same MACs, 2.35 : 1 where their taps inside are 2.25 : 1. The
    dilation-1 share is already in a calibrated convolution's pace (its 7 x 7 3 x 3 layers), so only
    the dilation's own share is given here: 1 for an undilated convolution."""
    share = 1.0
    for i in range(2):
        n, o, k, s, d = int(ins[i]), int(outs[i]), int(kernel[i]), int(strides[i]), int(dil[i])
        p = _pad_begin(ctx, i, n, o, k, s, d)
        inside = plain = 0
        for j in range(o):
            start = j * s - p
            inside += sum(1 for t in range(k) if 0 <= start + t * d < n)
            centre = start + (k - 1) * d / 2  # the dilation-1 kernel centred where the dilated one is
            plain += sum(1 for t in range(k) if 0 <= centre + t - (k - 1) / 2 < n)
        if plain:
            share *= inside / plain
    return min(1.0, share)


def _kernel_fits(ctx: Ctx, w) -> None:
    """A convolution's (or transposed one's) kernel_shape, where given, is its weights' window (ONNX
    Runtime refuses any other when it runs the node)."""
    kernel = ctx.attr("kernel_shape")
    if kernel and list(kernel) != list(w[2:]):
        raise Contradiction(f"kernel_shape {list(kernel)} but the weights {list(w)} hold {' x '.join(map(str, w[2:]))} windows")


def _same_type(ctx: Ctx, n: int) -> None:
    """A Conv's or ConvTranspose's input, weights and bias share one element type (ONNX's T)."""
    types = [ctx.dtype(i) for i in range(n) if ctx.has_input(i)]
    if len(set(types)) > 1:
        raise Contradiction(f"input, weights and bias are {', '.join(types)}: one element type is required")


def conv(ctx: Ctx):
    _same_type(ctx, 3)
    return _conv(ctx, separate_bias=True)


def fused_conv(ctx: Ctx):
    extra = activation_ops(ctx.attr("activation", "")) + (1 if ctx.has_input(3) else 0)  # Z (sum) input
    return _conv(ctx, extra_per_out=extra)


def with_operands(ctx: Ctx, w: Workload, a_idx: int, b_idx: int, data: str | None = None) -> Workload:
    """An integer product's workload with its data x weight element types (``Workload.operands``);
    ``data``: the type the data is quantized to on the fly, when it comes in float."""
    return replace(w, operands=int8_operands(data or ctx.dtype(a_idx), ctx.dtype(b_idx)))


def qlinear_conv(ctx: Ctx):
    # x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B ; requantisation ~3 ops / output
    return with_operands(ctx, _conv(ctx, x_idx=0, w_idx=3, bias_idx=8, extra_per_out=3), 0, 3)


def conv_integer(ctx: Ctx):
    return with_operands(ctx, _conv(ctx, x_idx=0, w_idx=1, bias_idx=None), 0, 1)


def matmul_integer(ctx: Ctx):
    """MatMulInteger, and ONNX Runtime's MatMulIntegerToFloat (the same product, scaled to float)."""
    return with_operands(ctx, matmul(ctx), 0, 1)


def conv_transpose(ctx: Ctx):
    _same_type(ctx, 3)
    x = ctx.in_shape(0)
    w = ctx.in_shape(1)
    groups = int(ctx.attr("group", 1))
    cin = x[1]
    cout_g = w[1]
    if len(x) >= 2 and len(w) >= 2 and w[0] != cin:
        raise Contradiction(f"input has {cin} channels but the weights {list(w)} expect {w[0]}")
    if groups < 1 or cin % groups:  # (checked before the output, which such a node leaves unresolved)
        raise Contradiction(f"group={groups} does not divide the input's {cin} channels")
    y = ctx.out_shape(0)
    _kernel_fits(ctx, w)
    if ctx.has_input(2) and len(y) >= 2 and tuple(ctx.in_shape(2)) != (y[1],):
        raise Contradiction(f"bias {list(ctx.in_shape(2))} is not one value per output channel ({y[1]})")
    window = prod(w[2:])
    in_pixels = prod(x[2:])
    macs = x[0] * cin * in_pixels * cout_g * window
    gemm = Gemm(m=x[0] * in_pixels, n=cout_g * window, k=cin // max(groups, 1), count=groups)
    other = prod(y) if ctx.has_input(2) else 0
    # scattered accumulation (col2im) adds one add per MAC-output contribution: counted in MACs
    return ctx.workload("conv" if groups == 1 else "grouped_conv", macs=macs, other=other, gemm=gemm,
                        bias=ctx.has_input(2))


def gemm(ctx: Ctx):
    a = ctx.in_shape(0)
    b = ctx.in_shape(1)
    if len(a) != 2 or len(b) != 2:
        raise Unsupported("Gemm needs 2-D inputs")
    m, k = (a[1], a[0]) if ctx.attr("transA", 0) else (a[0], a[1])
    n, kb = (b[0], b[1]) if ctx.attr("transB", 0) else (b[1], b[0])
    if kb != k:
        raise Contradiction(f"Gemm inner dims differ ({k} vs {kb})")
    c = tuple(ctx.in_shape(2)) if ctx.has_input(2) else ()
    if not broadcasts_to(c, (m, n)):
        raise Contradiction(f"the bias {list(c)} does not broadcast to the [{m}, {n}] product")
    other = m * n if ctx.has_input(2) else 0
    return ctx.workload("matmul", macs=m * n * k, other=other, gemm=Gemm(m, n, k))


def _matmul_dims(a, b):
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    m, k = a2[-2], a2[-1]
    n = b2[-1]
    if b2[-2] != k:
        raise Contradiction(f"MatMul inner dims differ ({k} vs {b2[-2]})")
    batch = 1
    ba, bb = a2[:-2], b2[:-2]
    conflict = broadcast_conflict([ba, bb])
    if conflict is not None:
        raise Contradiction(f"MatMul batch dims {conflict}")
    r = max(len(ba), len(bb))
    ba = (1,) * (r - len(ba)) + ba
    bb = (1,) * (r - len(bb)) + bb
    for x, y in zip(ba, bb):
        batch *= max(x, y)
    return m, n, k, batch


def matmul(ctx: Ctx, a_idx: int = 0, b_idx: int = 1, extra_per_out: int = 0, trans=(False, False)):
    a = list(ctx.in_shape(a_idx))
    b = list(ctx.in_shape(b_idx))
    if trans[0] and len(a) >= 2:
        a[-1], a[-2] = a[-2], a[-1]
    if trans[1] and len(b) >= 2:
        b[-1], b[-2] = b[-2], b[-1]
    m, n, k, batch = _matmul_dims(a, b)
    # a batched product whose right operand is a weight and whose batch comes from the left
    # operand is one big GEMM with M = batch x m (the weight is shared): same MACs, better tiles
    if b_idx < len(ctx.node.inputs) and ctx.is_weight(ctx.node.inputs[b_idx]) and len(b) == 2:
        g = Gemm(batch * m, n, k, 1)
    else:
        g = Gemm(m, n, k, batch)
    return ctx.workload("matmul", macs=m * n * k * batch, other=m * n * batch * extra_per_out, gemm=g)


def matmul_nbits(ctx: Ctx):
    """com.microsoft MatMulNBits: A [..., K] x a K x N weight stored as packed 2-8-bit blocks (the
    weight bytes are the packed initializers'); dequantised on the fly, computed in A's precision.
    Dequantisation is 2 ops per weight element (scale, zero point) per pass."""
    a = ctx.in_shape(0)
    k, n = int(ctx.attr("K", a[-1])), int(ctx.attr("N", 0))
    if n <= 0:
        raise Unsupported("MatMulNBits without its N attribute")
    if a and a[-1] != k:
        raise Contradiction(f"input of {a[-1]} features but the packed weights are {k} x {n}")
    m = 1
    for d in a[:-1]:
        m *= d
    # the CPU kernel's path for 4-bit weights, as calibrated (vocab.NBITS_KERNELS): int8 products at
    # accuracy_level 4, float32 below; other widths keep the roofline
    kernel = "" if int(ctx.attr("bits", 4)) != 4 else \
        "MatMulNBits.int8" if int(ctx.attr("accuracy_level", 0)) == 4 else "MatMulNBits.fp32"
    return ctx.workload("matmul", macs=m * n * k, other=2 * n * k, gemm=Gemm(m, n, k, 1), kernel=kernel,
                        loop_items=n * k if kernel else 0)


def _matmul_nbits_shape(attrs, ins, n_out):
    a = ins[0] if ins else None
    if a is None or a[0] is None or "N" not in attrs:
        return []
    return [(tuple(a[0][:-1]) + (int(attrs["N"]),), a[1])]


def fused_matmul(ctx: Ctx):
    return matmul(ctx, trans=(bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))))


def qlinear_matmul(ctx: Ctx):
    # a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp
    return with_operands(ctx, matmul(ctx, a_idx=0, b_idx=3, extra_per_out=3), 0, 3)


def fused_gemm(ctx: Ctx):
    w = gemm(ctx)
    extra = activation_ops(ctx.attr("activation", ""))
    return ctx.workload("matmul", macs=w.macs, other=w.other_ops + extra * ctx.out_numel(), gemm=w.gemm)


def _expand_ellipsis(ctx: Ctx, eq: str) -> str:
    """Replace '...' by explicit letters (unused capitals): as many as the input has extra dims."""
    lhs, arrow, rhs = eq.partition("->")
    spare = [c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in eq]
    terms, width = [], 0
    for i, term in enumerate(lhs.split(",")):
        if "..." in term:
            n = len(ctx.in_shape(i)) - (len(term) - 3)
            if n < 0 or n > len(spare):
                raise Unsupported(f"Einsum term '{term}' does not match input rank {len(ctx.in_shape(i))}")
            width = max(width, n)
            term = term.replace("...", "".join(spare[len(spare) - n:]))  # right-aligned: broadcasting
        terms.append(term)
    dots = "".join(spare[len(spare) - width:]) if width else ""
    if arrow:
        rhs = rhs.replace("...", dots)
    else:
        letters = "".join(terms).replace(",", "")
        rhs = dots + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in dots))
    return ",".join(terms) + "->" + rhs


def einsum(ctx: Ctx):
    eq = str(ctx.attr("equation", "")).replace(" ", "")
    if "..." in eq:
        eq = _expand_ellipsis(ctx, eq)
    if "->" in eq:
        lhs, rhs = eq.split("->")
    else:
        lhs = eq
        letters = [c for c in lhs.replace(",", "")]
        rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    terms = lhs.split(",")
    sizes: dict[str, int] = {}
    for i, term in enumerate(terms):
        shape = ctx.in_shape(i)
        if len(term) != len(shape) or not re.fullmatch(r"[A-Za-z]*", term):
            raise Unsupported(f"Einsum term '{term}' does not match input rank {len(shape)}")
        for c, d in zip(term, shape):
            if c in sizes and 1 not in (sizes[c], d) and sizes[c] != d:
                raise Contradiction(f"Einsum '{eq}': index '{c}' is {sizes[c]} in one operand and {d} in another")
            sizes[c] = max(sizes.get(c, 1), d)
    total = prod(sizes.values())
    if len(terms) == 1:
        return ctx.workload("reduce", other=total)
    contracted = [c for c in sizes if c not in rhs]
    k = prod(sizes[c] for c in contracted)
    t0, t1 = set(terms[0]), set(terms[1])
    batch = prod(sizes[c] for c in rhs if c in t0 and c in t1)
    m = prod(sizes[c] for c in rhs if c in t0 and c not in t1)
    n = prod(sizes[c] for c in rhs if c in t1 and c not in t0)
    macs = total * (len(terms) - 1)
    return ctx.workload("matmul", macs=macs, gemm=Gemm(max(m, 1), max(n, 1), max(k, 1), max(batch, 1)))


# -- shape rules for the com.microsoft ops (ONNX's inference does not know them) -----------------


def conv_out_shape(attrs: dict, x: tuple, w: tuple) -> tuple | None:
    """Output dims of a convolution from its input/weight dims and attributes (None when they give none)."""
    return windowed("Conv", attrs, tuple(x), [x, w])


def matmul_out_shape(a: tuple, b: tuple) -> tuple:
    """numpy.matmul broadcasting of two shapes."""
    sa, sb = len(a) == 1, len(b) == 1
    a = (1,) + tuple(a) if sa else tuple(a)
    b = tuple(b) + (1,) if sb else tuple(b)
    ba, bb = a[:-2], b[:-2]
    r = max(len(ba), len(bb))
    ba = (1,) * (r - len(ba)) + ba
    bb = (1,) * (r - len(bb)) + bb
    batch = tuple(max(x, y) for x, y in zip(ba, bb))
    out = batch + (a[-2], b[-1])
    if sa:
        out = out[:-2] + out[-1:]
    if sb:
        out = out[:-1]
    return out


def known(t) -> bool:
    """A shape rule's input type whose dims are all known integers."""
    return t is not None and t[0] is not None and all(isinstance(d, int) for d in t[0])


def _fused_conv_shape(attrs, ins, n_out):
    x, w = ins[0], ins[1] if len(ins) > 1 else None
    y = conv_out_shape(attrs, x[0], w[0]) if known(x) and known(w) else None
    return [(y, x[1])] if y is not None else []


def matmul_shape(attrs, ins, n_out):
    """A product of inputs 0 and 1 (numpy.matmul broadcasting, transposed by transA / transB when the op
    has them), in input 0's type: FusedMatMul, DynamicQuantizeMatMul, GemmFastGelu."""
    a, b = ins[0], ins[1] if len(ins) > 1 else None
    if not (known(a) and known(b)):
        return []
    ad, bd = list(a[0]), list(b[0])
    if attrs.get("transA") and len(ad) >= 2:
        ad[-1], ad[-2] = ad[-2], ad[-1]
    if attrs.get("transB") and len(bd) >= 2:
        bd[-1], bd[-2] = bd[-2], bd[-1]
    return [(matmul_out_shape(tuple(ad), tuple(bd)), a[1])]


def _fused_gemm_shape(attrs, ins, n_out):
    a, b = ins[0], ins[1] if len(ins) > 1 else None
    if not (known(a) and known(b)):
        return []
    m = a[0][1] if attrs.get("transA") else a[0][0]
    n = b[0][0] if attrs.get("transB") else b[0][1]
    return [((m, n), a[1])]


def _qlinear_conv_shape(attrs, ins, n_out):
    x, w = ins[0], ins[3] if len(ins) > 3 else None
    y = conv_out_shape(attrs, x[0], w[0]) if known(x) and known(w) else None
    return [(y, x[1])] if y is not None else []


def _matmul_to_float_shape(attrs, ins, n_out):
    a, b = ins[0], ins[1] if len(ins) > 1 else None
    if not (known(a) and known(b)):
        return []
    return [(matmul_out_shape(a[0], b[0]), "float32")]


register_shapes({
    "com.microsoft:MatMulNBits": _matmul_nbits_shape,
    "com.microsoft:FusedConv": _fused_conv_shape,
    "com.microsoft:FusedMatMul": matmul_shape,
    "com.microsoft:FusedGemm": _fused_gemm_shape,
    "com.microsoft:MatMulIntegerToFloat": _matmul_to_float_shape,
})

register({
    "com.microsoft:MatMulNBits": matmul_nbits,
    "ConvInteger": conv_integer,
    "QLinearConv": qlinear_conv,
    "MatMulInteger": matmul_integer,
    "QLinearMatMul": qlinear_matmul,
    "Einsum": einsum,
    "com.microsoft:FusedConv": fused_conv,
    "com.microsoft:FusedMatMul": fused_matmul,
    "com.microsoft:FusedGemm": fused_gemm,
    "com.microsoft:MatMulIntegerToFloat": matmul_integer,
})
register({"Conv": conv, "ConvTranspose": conv_transpose, "Gemm": gemm, "MatMul": matmul}, pure=True)
