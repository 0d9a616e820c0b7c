"""ONNX Runtime's contrib ops that its own tools write into models users hand us: its quantizer's
QuantizeLinear / DequantizeLinear (16- and 4-bit QDQ models) and QOperator ops (QLinearAdd,
QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearGlobalAveragePool,
QLinearAveragePool, QLinearConcat, QGemm, DynamicQuantizeMatMul), and its transformer optimizer's
fused ops (EmbedLayerNormalization and GemmFastGelu for BERT-style encoders; GroupNorm and
BiasSplitGelu for diffusion UNets; QAttention lives with Attention in ``dnnperf.ops.attention``).
Each costs like the standard op it stands for, plus the quantisation arithmetic: dequantising an
input is 2 ops per element (subtract the zero point, multiply by the scale), and requantising an
output 3 (multiply, round, clamp), as ``QLinearConv`` counts it. ONNX's shape inference does not know
these ops, so each has its shape rule here (input layouts from ONNX Runtime's contrib operator
documentation).
"""

from __future__ import annotations

from dnnperf.ir import DTYPE_BITS
from dnnperf.ops import Contradiction, Ctx, Unsupported, broadcast_conflict, register_pairs
from dnnperf.ops.elementwise import MS_OPS_PER_ELEMENT, OPS_PER_ELEMENT, same_as_first
from dnnperf.ops.matrix import known, matmul, matmul_shape, with_operands
from dnnperf.ops.norm import PER_ELEMENT as NORM_OPS
from dnnperf.ops.windows import windowed, windowed_channels_last
from dnnperf.workload import Gemm, Workload

DEQUANT, REQUANT = 2, 3


def _bcast(a: tuple, b: tuple) -> tuple | None:
    """numpy broadcasting of two shapes (None when they do not broadcast)."""
    r = max(len(a), len(b))
    a, b = (1,) * (r - len(a)) + tuple(a), (1,) * (r - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(out)


# -- quantised elementwise ops ------------------------------------------------------------------

def _qbinary(ctx: Ctx):
    """QLinearAdd / QLinearMul (A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp): both inputs
    dequantised, one op, the result requantised."""
    conflict = broadcast_conflict([ctx.in_shape(0), ctx.in_shape(3)])
    if conflict:
        raise Contradiction(f"inputs {conflict}")
    return ctx.workload("elementwise", other=(2 * DEQUANT + 1 + REQUANT) * ctx.out_numel(0))


def _qbinary_shape(attrs, ins, n_out):
    a, b = (ins[0] if ins else None), (ins[3] if len(ins) > 3 else None)
    if not (known(a) and known(b)):
        return []
    out = _bcast(a[0], b[0])
    return [(out, a[1])] if out is not None else []


def _qunary(op_ops: int, family: str = "elementwise"):
    """A quantised activation or softmax (X, X_scale, X_zp, Y_scale, Y_zp): dequantise, the op, requantise."""
    def cost(ctx: Ctx):
        return ctx.workload(family, other=(DEQUANT + op_ops + REQUANT) * ctx.in_numel(0))

    return cost


def _qgap(ctx: Ctx):
    """QLinearGlobalAveragePool: one add per input element (a tree reduction), each mean requantised."""
    n = ctx.in_numel(0)
    return ctx.workload("pool", other=n + REQUANT * ctx.out_numel(0), parallel=n)


def _qgap_shape(attrs, ins, n_out):
    x = ins[0] if ins else None
    if not known(x) or len(x[0]) < 3:
        return []
    d = x[0]
    if attrs.get("channels_last", 0):
        return [((d[0],) + (1,) * (len(d) - 2) + (d[-1],), x[1])]
    return [(tuple(d[:2]) + (1,) * (len(d) - 2), x[1])]


def _qavgpool(ctx: Ctx):
    """QLinearAveragePool (X, x_scale, x_zp, y_scale, y_zp): one add per window element per output, the
    input dequantized and each mean requantized."""
    kernel = ctx.attr("kernel_shape", [1])
    window = 1
    for k in kernel:
        window *= int(k)
    n_out = ctx.out_numel(0)
    return ctx.workload("pool", other=n_out * window + DEQUANT * ctx.in_numel(0) + REQUANT * n_out,
                        kernel="QLinearAveragePool")  # ONNX Runtime's: a loop over its outputs


def _qavgpool_shape(attrs, ins, n_out):
    """The pooling window's outputs (ceil_mode included); ``channels_last``: N x spatial x C in and out."""
    x = ins[0] if ins else None
    if not known(x) or len(x[0]) < 3:
        return []
    window = windowed_channels_last if attrs.get("channels_last", 0) else windowed
    y = window("AveragePool", attrs, tuple(x[0]), [])
    return [(y, x[1])] if y is not None else []


def _qconcat(ctx: Ctx):
    """QLinearConcat (Y_scale, Y_zp, then X, X_scale, X_zp per input): each piece copied into place and
    requantised to the output's scale."""
    idx = range(2, len(ctx.node.inputs), 3)
    pieces = tuple(ctx.in_numel(i) for i in idx if ctx.has_input(i))
    return ctx.workload("movement", other=(DEQUANT + REQUANT) * ctx.out_numel(0), pieces=pieces,
                        kernel="QLinearConcat",  # ONNX Runtime's: a loop over its outputs
                        dtype=ctx.dtype(2) if ctx.has_input(2) else None)  # the pieces' type, not the scale's


def _qconcat_shape(attrs, ins, n_out):
    xs = [ins[i] for i in range(2, len(ins), 3)]
    if not xs or not all(known(x) for x in xs):
        return []
    rank = len(xs[0][0])
    axis = int(attrs.get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank or any(len(x[0]) != rank for x in xs):
        return []
    out = list(xs[0][0])
    out[axis] = sum(x[0][axis] for x in xs)
    return [(tuple(out), xs[0][1])]


# -- quantised products -------------------------------------------------------------------------

def _qgemm(ctx: Ctx):
    """QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp): an integer GEMM; a bias C and an
    output scale add an op and a requantisation per output."""
    a, b = ctx.in_shape(0), ctx.in_shape(3)
    if len(a) != 2 or len(b) != 2:
        raise Unsupported("QGemm needs 2-D inputs")
    m, k = (a[1], a[0]) if ctx.attr("transA", 0) else (a[0], a[1])
    kb, n = (b[1], b[0]) if ctx.attr("transB", 0) else (b[0], b[1])
    if kb != k:
        raise Contradiction(f"QGemm inner dims differ ({k} vs {kb})")
    per_out = (1 if ctx.has_input(6) else 0) + (REQUANT if ctx.has_input(7) else 1)
    return with_operands(ctx, ctx.workload("matmul", macs=m * n * k, other=m * n * per_out, gemm=Gemm(m, n, k),
                                           dtype=ctx.dtype(0)), 0, 3)


def _qgemm_shape(attrs, ins, n_out):
    a, b = (ins[0] if ins else None), (ins[3] if len(ins) > 3 else None)
    if not (known(a) and known(b)) or len(a[0]) != 2 or len(b[0]) != 2:
        return []
    m = a[0][1] if attrs.get("transA", 0) else a[0][0]
    n = b[0][0] if attrs.get("transB", 0) else b[0][1]
    quantised = len(ins) > 7 and ins[7] is not None  # y_scale given: the output stays integer
    return [((m, n), a[1] if quantised else "float32")]


def _dq_matmul(ctx: Ctx):
    """DynamicQuantizeMatMul (A float, B int8/uint8, b_scale, b_zp, bias): A quantised on the fly (its
    range found, then each element scaled: 5 ops, as DynamicQuantizeLinear), an integer product, the
    result scaled back to float (1 op per output, 1 more with the bias). ONNX Runtime quantizes A to
    uint8, as DynamicQuantizeLinear does."""
    w = matmul(ctx, a_idx=0, b_idx=1, extra_per_out=1 + (1 if ctx.has_input(4) else 0))
    w = Workload(w.family, ctx.dtype(1), w.macs, w.other_ops + 5 * ctx.in_numel(0), w.act_bytes_read,
                 w.weight_bytes, w.bytes_written, w.parallel_work, w.gemm)
    return with_operands(ctx, w, 0, 1, data="uint8")


# -- the transformer optimizer's fused ops ----------------------------------------------------------

def _gemm_fast_gelu(ctx: Ctx):
    """GemmFastGelu (X, W, bias): a product whose epilogue adds the bias and applies FastGelu."""
    per_out = MS_OPS_PER_ELEMENT["FastGelu"] + (1 if ctx.has_input(2) else 0)
    return matmul(ctx, extra_per_out=per_out)


def _embed_layer_norm(ctx: Ctx):
    """EmbedLayerNormalization (input_ids, segment_ids, word_embedding, position_embedding,
    segment_embedding, gamma, beta, mask, position_ids): three embedding rows gathered per token
    (only the rows picked are read), summed (2 adds per element), then layer-normalised."""
    ids = ctx.in_shape(0)
    if len(ids) != 2:
        raise Unsupported("EmbedLayerNormalization needs input_ids of shape (batch, sequence)")
    word = ctx.in_shape(2)
    hidden = word[-1]
    tokens = ids[0] * ids[1]
    elems = tokens * hidden
    ebytes = DTYPE_BITS.get(ctx.dtype(2), 32) // 8
    tables = [i for i in (2, 3, 4) if ctx.has_input(i)]
    weights = sum(min(ctx.in_numel(i), elems) * ebytes for i in tables)
    weights += sum(ctx.in_numel(i) * ebytes for i in (5, 6) if ctx.has_input(i))
    act = sum(ctx.in_numel(i) * DTYPE_BITS.get(ctx.dtype(i), 32) // 8 for i in (0, 1, 7, 8) if ctx.has_input(i))
    _, _, written = ctx.byte_split()
    other = (len(tables) - 1) * elems + NORM_OPS["LayerNormalization"] * elems
    return Workload("norm", ctx.dtype(2), 0, other, act, weights, written, elems, row=hidden)


def _embed_layer_norm_shape(attrs, ins, n_out):
    ids, word = (ins[0] if ins else None), (ins[2] if len(ins) > 2 else None)
    if not (known(ids) and known(word)) or len(ids[0]) != 2:
        return []
    b, s = ids[0]
    out = ((b, s, word[0][-1]), word[1])
    return [out, ((b,), "int32"), out][:max(n_out, 1)]


def _group_norm(ctx: Ctx):
    """GroupNorm (com.microsoft; NHWC input, gamma, beta; a diffusion UNet's normalisation, optionally
    with a Swish): statistics per group, then a scale and shift per element."""
    n = ctx.in_numel(0)
    swish = OPS_PER_ELEMENT["Swish"] if ctx.attr("activation", 0) else 0
    return ctx.workload("norm", other=(NORM_OPS["GroupNormalization"] + swish) * n, parallel=ctx.out_numel(0))


def _bias_split_gelu(ctx: Ctx):
    """BiasSplitGelu (X (N, HW, D), bias (D)): X + bias split in halves along D, the first times the
    GELU of the second: a bias add per input element, a GELU and a product per output element."""
    return ctx.workload("elementwise", other=ctx.in_numel(0) + (OPS_PER_ELEMENT["Gelu"] + 1) * ctx.out_numel(0))


def _bias_split_gelu_shape(attrs, ins, n_out):
    x = ins[0] if ins else None
    if not known(x) or not x[0] or x[0][-1] % 2:
        return []
    return [(tuple(x[0][:-1]) + (x[0][-1] // 2,), x[1])]


def _ms_quantize_shape(attrs, ins, n_out):
    """com.microsoft QuantizeLinear (x, y_scale, y_zero_point): x's shape in the zero point's type (uint8
    without one), as the standard op; the contrib form also takes 16- and 4-bit types."""
    x, zp = (ins[0] if ins else None), (ins[2] if len(ins) > 2 else None)
    if not known(x):
        return []
    return [(x[0], zp[1] if zp is not None and zp[1] else "uint8")]


def _ms_dequantize_shape(attrs, ins, n_out):
    """com.microsoft DequantizeLinear (x, x_scale, x_zero_point): x's shape in the scale's float type."""
    x, scale = (ins[0] if ins else None), (ins[1] if len(ins) > 1 else None)
    if not known(x):
        return []
    return [(x[0], scale[1] if scale is not None and scale[1] else "float32")]


def _cast_like(op_ops: int):
    """A quantize or dequantize: the standard op's cost (family ``cast``)."""
    def cost(ctx: Ctx):
        return ctx.workload("cast", other=op_ops * ctx.in_numel(0), dtype=ctx.compute_dtype())

    return cost


_MS = {
    # ONNX Runtime's quantizer writes these for 16-bit and 4-bit QDQ models (use_qdq_contrib_ops)
    "QuantizeLinear": (_cast_like(OPS_PER_ELEMENT["QuantizeLinear"]), _ms_quantize_shape),
    "DequantizeLinear": (_cast_like(OPS_PER_ELEMENT["DequantizeLinear"]), _ms_dequantize_shape),
    "QLinearAdd": (_qbinary, _qbinary_shape),
    "QLinearMul": (_qbinary, _qbinary_shape),
    "QLinearSigmoid": (_qunary(OPS_PER_ELEMENT["Sigmoid"]), same_as_first),
    "QLinearLeakyRelu": (_qunary(OPS_PER_ELEMENT["LeakyRelu"]), same_as_first),
    "QLinearSoftmax": (_qunary(NORM_OPS["Softmax"], "softmax"), same_as_first),
    "QLinearGlobalAveragePool": (_qgap, _qgap_shape),
    "QLinearAveragePool": (_qavgpool, _qavgpool_shape),
    "QLinearConcat": (_qconcat, _qconcat_shape),
    "QGemm": (_qgemm, _qgemm_shape),
    "DynamicQuantizeMatMul": (_dq_matmul, matmul_shape),
    "EmbedLayerNormalization": (_embed_layer_norm, _embed_layer_norm_shape),
    "GroupNorm": (_group_norm, same_as_first),
    "GemmFastGelu": (_gemm_fast_gelu, matmul_shape),
    "BiasSplitGelu": (_bias_split_gelu, _bias_split_gelu_shape),
}
register_pairs("com.microsoft", _MS)
