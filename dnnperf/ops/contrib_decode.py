"""ONNX Runtime contrib ops of decoder exports and its other tool chains, each a cost and a shape rule
(layouts as ONNX Runtime's CPU kernels take them; each rule is checked against them in
``tests/test_contrib_shapes.py``):

- GatherBlockQuantized: an embedding table stored as 4- or 8-bit blocks (ONNX Runtime GenAI's int4
  models); the picked rows are read and dequantised (2 ops an element: zero point, scale).
- DecoderMaskedMultiHeadAttention: one new token per sequence against a cache (Whisper's and GPT's
  decode step). With ``past_present_share_buffer`` the cache is a buffer as long as the longest
  sequence, read only up to ``past_sequence_length`` + 1; without a past, the key and value are the
  cross-attention's [B, heads, L, head].
- MatMulBnb4: a product with a bitsandbytes 4-bit (FP4 / NF4) weight, K and N as attributes;
  dequantised on the fly like MatMulNBits.
- TransposeMatMul: FusedMatMul's older name.
- NhwcMaxPool: a uint8 / int8 max pool over N x H x W x C.
- QLinearWhere: a quantised select (the condition broadcast with both quantised branches).
- Inverse: batched n x n inverses, n^3 ops each (an LU factorisation and two triangular solves).
- CDist: pairwise distances of [M, K] and [N, K] rows, 3 ops a term (subtract, square, add).
- ExpandDims: Unsqueeze at an axis given as a tensor: a view.
- UnfoldTensor: windows of ``size`` elements every ``step`` along ``dim`` (a strided copy).
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf.ops import Contradiction, Ctx, Unsupported, register_pairs, scalar_int, takes_values
from dnnperf.ops.attention import _attn
from dnnperf.ops.contrib import DEQUANT, REQUANT, _bcast
from dnnperf.ops.matrix import fused_matmul, known, matmul_shape
from dnnperf.ops.movement import view
from dnnperf.ops.pool import pool
from dnnperf.ops.windows import windowed_channels_last
from dnnperf.workload import Gemm, Workload

_PACKED = frozenset({"uint8", "int8"})  # a 4-bit table stored two values a byte


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


# -- GatherBlockQuantized -------------------------------------------------------------------------

def _gbq_dims(attrs, data: tuple, dtype: str) -> tuple:
    """The table's logical dims: a 4-bit table packed in bytes holds two values a byte along its
    quantize axis."""
    bits = int(attrs.get("bits", 4))
    dims = list(data)
    q = _axis(int(attrs.get("quantize_axis", 1)), len(dims))
    if dtype in _PACKED and 0 <= q < len(dims) and bits < 8:
        dims[q] = dims[q] * (8 // bits)
    return tuple(dims)


def _gbq_shape(attrs, ins, n_out):
    data, idx = ins[0] if ins else None, ins[1] if len(ins) > 1 else None
    scales = ins[2] if len(ins) > 2 else None
    if not (known(data) and known(idx)):
        return []
    dims = _gbq_dims(attrs, data[0], data[1])
    g = _axis(int(attrs.get("gather_axis", 0)), len(dims))
    if not 0 <= g < len(dims):
        return []
    return [(dims[:g] + tuple(idx[0]) + dims[g + 1:], scales[1] if scales is not None and scales[1] else "float32")]


def gather_block_quantized(ctx: Ctx):
    """The rows the indices pick, read packed with their scales (and zero points), dequantised."""
    data = ctx.in_shape(0)
    g = _axis(int(ctx.attr("gather_axis", 0)), len(data))
    if not 0 <= g < len(data):
        raise Contradiction(f"gather_axis {ctx.attr('gather_axis', 0)} outside its table's {len(data)} dims")
    picked = min(1.0, ctx.in_numel(1) / data[g]) if data[g] else 1.0
    act, wgt, out = ctx.byte_split()
    held = kept = 0
    for i in (0, 2, 3):  # the table, its scales and zero points: only the picked rows are read
        if ctx.has_input(i) and ctx.is_weight(ctx.node.inputs[i]):
            nb = ctx.graph.tensors[ctx.node.inputs[i]].nbytes or 0
            held += nb
            kept += int(nb * picked)
    n = ctx.out_numel(0)
    return Workload(family="movement", dtype=ctx.graph.tensors[ctx.node.outputs[0]].dtype, other_ops=DEQUANT * n,
                    act_bytes_read=act, weight_bytes=wgt - held + kept, bytes_written=out, parallel_work=n,
                    weights_unread=held - kept)


# -- DecoderMaskedMultiHeadAttention --------------------------------------------------------------

def _dmmha_dims(attrs, q, k, v):
    """(B, S, L new keys, head, value head) of query [B, S, D] with key / value [B, L, D] (self) or
    [B, heads, L, head] (cross)."""
    heads = int(attrs.get("num_heads", 1))
    if q is None or len(q) != 3 or heads <= 0:
        return None
    b, s, d = q
    if k is None or v is None:
        return None
    if len(k) == 4 and len(v) == 4:
        return b, s, k[2], k[3], v[3]
    if len(k) == 3 and len(v) == 3:
        return b, s, k[1], d // heads, v[2] // heads
    return None


def _dmmha_shape(attrs, ins, n_out):
    """output [B, S, heads x value head]; present key / value: the shared buffer itself, else the past
    grown by the new keys."""
    dims = [ins[i][0] if len(ins) > i and ins[i] is not None else None for i in range(7)]
    got = _dmmha_dims(attrs, dims[0], dims[1], dims[2])
    if got is None:
        return []
    b, s, l, d, dv = got
    heads = int(attrs.get("num_heads", 1))
    out = [((b, s, heads * dv), ins[0][1])]
    past_k, past_v = dims[5], dims[6]
    if n_out > 1 and past_k is not None and len(past_k) == 4 and past_v is not None and len(past_v) == 4:
        if int(attrs.get("past_present_share_buffer", 0)):
            out += [(tuple(past_k), ins[0][1]), (tuple(past_v), ins[0][1])]
        else:
            out += [((b, heads, past_k[2] + l, d), ins[0][1]), ((b, heads, past_v[2] + l, dv), ins[0][1])]
    return out[:max(n_out, 1)]


def decoder_masked_mha(ctx: Ctx):
    """Each new query attends to the cached tokens and its own: past_sequence_length (input 7) + L
    over a shared buffer, the whole past + L otherwise; cross-attention ([B, heads, L, head] keys, no
    past) to the L encoder keys."""
    k = ctx.in_shape(1) if ctx.has_input(1) else None
    v = ctx.in_shape(2) if ctx.has_input(2) else None
    got = _dmmha_dims(ctx.node.attrs, ctx.in_shape(0), k, v)
    if got is None:
        raise Unsupported("DecoderMaskedMultiHeadAttention's query / key / value layouts are not ones ONNX Runtime takes")
    b, s, l, d, dv = got
    heads = int(ctx.attr("num_heads", 1))
    note = ""
    if ctx.has_input(5) and len(k) == 3:
        shared = int(ctx.attr("past_present_share_buffer", 0))
        past = scalar_int(ctx.value(7)) if shared else None
        past = max(past, 0) if past is not None else None
        l += past if past is not None else ctx.in_shape(5)[2]
        if shared and past is None:
            note = (f"past_sequence_length not known at load time: each query taken to read the whole "
                    f"{ctx.in_shape(5)[2]}-slot cache buffer (give it with --value)")
    w = _attn(ctx, b, heads, s, l, d, dv)
    return replace(w, note=note) if note else w


# -- quantised products and the rest --------------------------------------------------------------

def _n_shape(attrs, ins, n_out):
    """A product of A [..., K] with a packed K x N weight: [..., N] in A's type."""
    a = ins[0] if ins else None
    if not known(a) or "N" not in attrs:
        return []
    return [(tuple(a[0][:-1]) + (int(attrs["N"]),), a[1])]


def matmul_bnb4(ctx: Ctx):
    """A [..., K] x a bitsandbytes 4-bit K x N weight, dequantised on the fly (2 ops a weight element:
    the code-book lookup, the block's absmax scale)."""
    a = ctx.in_shape(0)
    k, n = int(ctx.attr("K", a[-1])), int(ctx.attr("N", 0))
    if n <= 0:
        raise Unsupported("MatMulBnb4 without its N attribute")
    if a[-1] != k:
        raise Contradiction(f"input of {a[-1]} features but the packed weights are {k} x {n}")
    m = 1
    for x in a[:-1]:
        m *= x
    return ctx.workload("matmul", macs=m * n * k, other=DEQUANT * n * k, gemm=Gemm(m, n, k, 1))


def _nhwc_pool_shape(attrs, ins, n_out):
    x = ins[0] if ins else None
    if not known(x) or len(x[0]) < 3:
        return []
    y = windowed_channels_last("MaxPool", attrs, tuple(x[0]), [])
    return [(y, x[1])] if y is not None else []


def _qwhere_shape(attrs, ins, n_out):
    """condition, X, x_scale, x_zp, Y, y_scale, y_zp, z_scale, z_zp: the three broadcast, in Z's
    zero point's type."""
    c, x, y = (ins[i] if len(ins) > i else None for i in (0, 1, 4))
    zz = ins[8] if len(ins) > 8 else None
    if not (known(c) and known(x) and known(y)):
        return []
    out = _bcast(c[0], x[0])
    out = _bcast(out, y[0]) if out is not None else None
    return [(out, zz[1] if zz is not None and zz[1] else x[1])] if out is not None else []


def qlinear_where(ctx: Ctx):
    n = ctx.out_numel(0)
    return ctx.workload("elementwise", other=(2 * DEQUANT + 1 + REQUANT) * n, parallel=n)


def inverse(ctx: Ctx):
    x = ctx.in_shape(0)
    if len(x) < 2 or x[-1] != x[-2]:
        raise Contradiction(f"Inverse of {list(x)}: not square matrices")
    batch = ctx.in_numel(0) // max(x[-1] * x[-1], 1)
    return ctx.workload("matmul", other=batch * x[-1] ** 3, parallel=batch * x[-1])


def _cdist_shape(attrs, ins, n_out):
    a, b = ins[0] if ins else None, ins[1] if len(ins) > 1 else None
    if not (known(a) and known(b)) or len(a[0]) != 2 or len(b[0]) != 2:
        return []
    return [((a[0][0], b[0][0]), a[1])]


def cdist(ctx: Ctx):
    a, b = ctx.in_shape(0), ctx.in_shape(1)
    if a[1] != b[1]:
        raise Contradiction(f"CDist of rows of {a[1]} and {b[1]} elements")
    return ctx.workload("reduce", other=3 * a[0] * b[0] * a[1], parallel=a[0] * b[0])


@takes_values
def _expand_dims_shape(attrs, ins, n_out, values=()):
    x = ins[0] if ins else None
    a = scalar_int(values[1]) if len(values) > 1 else None
    if not known(x) or a is None:
        return []
    r = len(x[0]) + 1
    a = a + r if a < 0 else a
    if not 0 <= a < r:
        return []
    return [(tuple(x[0][:a]) + (1,) + tuple(x[0][a:]), x[1])]


def _unfold_shape(attrs, ins, n_out):
    """[..., (n - size) / step + 1 windows at dim, ..., size]."""
    x = ins[0] if ins else None
    if not known(x):
        return []
    d = list(x[0])
    dim = _axis(int(attrs.get("dim", -1)), len(d))
    size, step = int(attrs.get("size", 0)), int(attrs.get("step", 1))
    if not 0 <= dim < len(d) or size <= 0 or step <= 0 or size > d[dim]:
        return []
    d[dim] = (d[dim] - size) // step + 1
    return [(tuple(d) + (size,), x[1])]


def _copy(ctx: Ctx):
    return ctx.workload("movement", parallel=ctx.out_numel(0))


_OPS = {
    "GatherBlockQuantized": (gather_block_quantized, _gbq_shape),
    "DecoderMaskedMultiHeadAttention": (decoder_masked_mha, _dmmha_shape),
    "MatMulBnb4": (matmul_bnb4, _n_shape),
    "TransposeMatMul": (fused_matmul, matmul_shape),
    "NhwcMaxPool": (pool, _nhwc_pool_shape),
    "QLinearWhere": (qlinear_where, _qwhere_shape),
    "Inverse": (inverse, lambda attrs, ins, n: [ins[0]] if ins and known(ins[0]) else []),
    "CDist": (cdist, _cdist_shape),
    "ExpandDims": (view, _expand_dims_shape),
    "UnfoldTensor": (_copy, _unfold_shape),
}
register_pairs("com.microsoft", _OPS)
