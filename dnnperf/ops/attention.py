"""Attention ops: two batched products (Q K^T and P V) per head plus a softmax.

Softmax is counted as 5 ops per score (max, subtract, exp, sum, divide); the 1/sqrt(d) scale as 1.
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf.ops import (Contradiction, Ctx, Unsupported, broadcasts_to, length_value, register, register_shapes,
                         takes_values)
from dnnperf.ops.elementwise import same_as_first
from dnnperf.workload import Gemm

_SOFTMAX_OPS = 5


def _attn(ctx: Ctx, b: int, hq: int, s: int, l: int, d: int, dv: int, proj_macs: int = 0, proj_gemm=None):
    scores = b * hq * s * l
    macs = scores * d + scores * dv + proj_macs
    other = scores * (_SOFTMAX_OPS + 1)
    gemm = proj_gemm or Gemm(s, l, d, b * hq)
    return ctx.workload("attention", macs=macs, other=other, gemm=gemm, parallel=max(scores, ctx.out_numel()))


def _heads_view(shape, heads: int, what: str) -> tuple:
    """(batch, heads, length, head size) of an ONNX Attention operand, 4-D as given or 3-D (B, L, H*D)."""
    if len(shape) == 4:
        return tuple(shape)
    if len(shape) == 3:
        if heads <= 0:
            raise Contradiction(f"its {what} {list(shape)} is 3-D: q_num_heads and kv_num_heads must say how it "
                                "splits into heads")
        if shape[2] % heads:
            raise Contradiction(f"its {what} {list(shape)} does not split into {heads} heads")
        return shape[0], heads, shape[1], shape[2] // heads
    raise Contradiction(f"its {what} {list(shape)} is neither (B, heads, length, size) nor (B, length, hidden)")


def _attention_fits(ctx: Ctx) -> tuple:
    """Q, K and V of one ONNX Attention as (batch, heads, length, head size), once they are checked to
    agree: one batch, K and V one head count that divides Q's, Q and K one head size, K and V one
    length, and the past K / V 4-D (B, kv heads, P, size) of one length. ONNX checks this only inside
    the operator's function body (which the loader does not hold against the node); ONNX Runtime
    refuses the model."""
    q, k, v = ctx.in_shape(0), ctx.in_shape(1), ctx.in_shape(2)
    if len({len(q), len(k), len(v)}) != 1:
        raise Contradiction(f"its query, key and value {list(q)}, {list(k)}, {list(v)} differ in rank")
    qh, kh = int(ctx.attr("q_num_heads", 0)), int(ctx.attr("kv_num_heads", 0))
    views = _heads_view(q, qh, "query"), _heads_view(k, kh, "key"), _heads_view(v, kh, "value")
    (bq, hq, _, dq), (bk, hk, lk, dk), (bv, hv, lv, _) = views
    why = ("batch sizes differ" if len({bq, bk, bv}) != 1 else "key and value head counts differ" if hk != hv else
           "the key's heads do not divide the query's" if hk < 1 or hq % hk else
           "query and key head sizes differ" if dq != dk else "key and value lengths differ" if lk != lv else "")
    if not why and ctx.has_input(4) and ctx.has_input(5):
        pk, pv = ctx.in_shape(4), ctx.in_shape(5)
        if len(pk) != 4 or len(pv) != 4 or tuple(pk[:2]) != (bk, hk) or tuple(pv[:2]) != (bk, hk) \
                or pk[2] != pv[2] or pk[3] != dk:
            why = f"its past key and value {list(pk)}, {list(pv)} do not fit the key {list(k)}"
    if why:
        raise Contradiction(why if why.startswith("its") else
                            f"{why} (query {list(q)}, key {list(k)}, value {list(v)})")
    past = ctx.known_shape(4) or ()
    _mask_fits(ctx, bq, hq, views[0][2], lk + (past[2] if len(past) == 4 else 0))
    return views


def _mask_fits(ctx: Ctx, batch: int, heads: int, length: int, total: int) -> None:
    """The attn_mask fits (batch, query heads, query length, total length), the total the key's length plus
    the past's: its last axis holds up to the total (a shorter mask is padded, ONNX's reference masks the
    keys past it; ONNX Runtime 1.32 refuses it, and its local-window path reads a longer 1-D one: the
    definition wins), the others broadcast; the nonpad_kv_seqlen (opset 24) holds one length per sample."""
    nonpad = ctx.known_shape(6)
    if nonpad is not None and nonpad != (batch,):
        raise Contradiction(f"its nonpad_kv_seqlen {list(nonpad)} is not one length per sample ({batch})")
    m = ctx.known_shape(3) or ()
    full = (batch, heads, length, total)
    if m and not (len(m) <= 4 and m[-1] <= total and broadcasts_to(m[:-1], full[:-1])):
        raise Contradiction(f"its attn_mask {list(m)} does not fit (batch, heads, query length, total length) "
                            f"{list(full)}")


def attention_onnx(ctx: Ctx):
    """ONNX Attention (opset 23): Q (B,Hq,S,D) or (B,S,Hq*D); K/V (B,Hkv,L,D) or 3-D."""
    (b, hq, s, d), (_, _, l, _), (_, _, _, dv) = _attention_fits(ctx)
    if ctx.has_input(4):  # past_key (B, Hkv, P, D)
        l += ctx.in_shape(4)[2]
    return _attn(ctx, b, hq, s, l, d, dv)


def attention_ms(ctx: Ctx, past_idx: int = 4):
    """com.microsoft Attention: fused QKV projection (Hin x 3H) + multi-head attention."""
    x, w = ctx.in_shape(0), ctx.in_shape(1)
    heads = int(ctx.attr("num_heads", 1))
    b, s, hin = x
    if w[0] != hin:
        raise Contradiction(f"input of hidden size {hin} but the QKV weights {list(w)} take {w[0]}")
    sizes = ctx.attr("qkv_hidden_sizes") or [w[1] // 3] * 3
    hq, hk, hv = sizes
    proj = b * s * hin * (hq + hk + hv)
    l = s
    if ctx.has_input(past_idx):  # past (2, B, heads, P, head)
        l += ctx.in_shape(past_idx)[3]
    return _attn(ctx, b, heads, s, l, hq // heads, hv // heads, proj_macs=proj,
                 proj_gemm=Gemm(b * s, hq + hk + hv, hin))


def qattention_ms(ctx: Ctx):
    """com.microsoft QAttention (dynamically quantized BERT): Attention whose QKV projection multiplies a
    uint8 input by int8 weights (input, weight, bias, input_scale, weight_scale, mask_index,
    input_zero_point, weight_zero_point, past)."""
    return attention_ms(ctx, past_idx=8)


def _mha_dims(q, k, v, heads: int):
    """(batch, query length, key length, head size, value head size) of a MultiHeadAttention: query
    (B, S, D) or packed Q/K/V (B, S, H, 3, d); key (B, L, D), (B, H, L, d) or packed K/V
    (B, L, H, 2, d); value (B, L, Dv) or (B, H, L, dv). None where a layout is not one of these."""
    if len(q) == 5:  # packed QKV: no key or value input
        return (q[0], q[1], q[1], q[4], q[4]) if q[3] == 3 else None
    if len(q) != 3 or k is None:
        return None
    b, s, d = q
    if len(k) == 5:  # packed KV
        return (b, s, k[1], d // heads, k[4]) if k[3] == 2 else None
    if v is None or len(k) not in (3, 4) or len(v) not in (3, 4):
        return None
    l = k[1] if len(k) == 3 else k[2]
    dv = v[2] // heads if len(v) == 3 else v[3]
    return b, s, l, d // heads, dv


def mha_ms(ctx: Ctx):
    """com.microsoft MultiHeadAttention (``_mha_dims``' layouts); past_key / past_value (B, H, P, d)
    add P cached tokens to every query's keys."""
    heads = int(ctx.attr("num_heads", 1))
    k = ctx.in_shape(1) if ctx.has_input(1) else None
    v = ctx.in_shape(2) if ctx.has_input(2) else None
    dims = _mha_dims(ctx.in_shape(0), k, v, heads)
    if dims is None:
        raise Unsupported("MultiHeadAttention's query / key / value layouts are not one ONNX Runtime takes")
    b, s, l, d, dv = dims
    if ctx.has_input(6):  # past_key (B, H, P, d)
        l += ctx.in_shape(6)[2]
    return _attn(ctx, b, heads, s, l, d, dv)


def gqa_ms(ctx: Ctx):
    """com.microsoft GroupQueryAttention: query (B,S,D) with num_heads / kv_num_heads. Each query
    attends to total_sequence_length keys when that input's value is known (a past buffer longer
    than that, ONNX Runtime's shared-buffer mode, is not read past it), else the past's and this
    step's tokens."""
    q = ctx.in_shape(0)
    hq = int(ctx.attr("num_heads", 1))
    hkv = int(ctx.attr("kv_num_heads", hq))
    b, s, dq = q
    if ctx.has_input(1):
        head = dq // hq
    else:  # packed QKV
        head = dq // (hq + 2 * hkv)
    l = s
    total = length_value(ctx.value(6))
    note = ""
    if total is not None:
        l = total
    elif ctx.has_input(3):  # past_key (B, Hkv, P, head)
        l += ctx.in_shape(3)[2]
        if ctx.has_input(6):
            note = (f"total_sequence_length '{ctx.node.inputs[6]}' not known at load time: each query taken to attend "
                    f"to {l - s} past + {s} new tokens (give it with --value if the past is a buffer longer than "
                    "the sequence)")
    # the query heads that share a key/value head multiply the same keys and values: grouped-query kernels
    # (TensorRT-LLM's XQA, FlashDecoding's GQA packing) stack a group's rows into one product per
    # key/value head, S x group rows deep (a decoded token: group rows, not 1 padded to a tile)
    group = hq // hkv if hkv > 0 and hq % hkv == 0 else 1
    w = _attn(ctx, b, hq, s, l, head, head, proj_gemm=Gemm(s * group, l, head, b * hq // group))
    if int(ctx.attr("do_rotary", 0)):  # rotary on q and k inside the kernel: 3 ops per element
        rot = 3 * b * s * (hq + hkv) * head
        w = ctx.workload("attention", macs=w.macs, other=w.other_ops + rot, gemm=w.gemm, parallel=w.parallel_work)
    return replace(w, note=note) if note else w


def rotary(ctx: Ctx):
    """RotaryEmbedding (opset 23, com.microsoft): x * cos + rotate(x) * sin, 3 ops per element. ONNX's
    takes [batch, sequence, hidden] only with num_heads (it splits the hidden size into heads)."""
    if ctx.node.domain in ("", "ai.onnx"):
        if len(ctx.in_shape(0)) == 3 and not ctx.attr("num_heads", 0):
            raise Contradiction("a 3-D input needs the num_heads attribute to split its hidden size into heads")
        _caches_fit(ctx)
    return ctx.workload("elementwise", other=3 * ctx.in_numel(0), parallel=ctx.out_numel(0))


def _caches_fit(ctx: Ctx) -> None:
    """ONNX's RotaryEmbedding: cos and sin caches of one shape, [positions, rotated size / 2] with
    position_ids [batch, sequence], else [batch, sequence, rotated size / 2]; the rotated size is
    rotary_embedding_dim, else the head size."""
    x = ctx.known_shape(0)
    if x is None or len(x) not in (3, 4):
        return
    heads = int(ctx.attr("num_heads", 0) or 0)
    if len(x) == 4:
        b, seq, head = x[0], x[2], x[3]
    elif heads and x[2] % heads == 0:
        b, seq, head = x[0], x[1], x[2] // heads
    else:
        return
    half = (int(ctx.attr("rotary_embedding_dim", 0) or 0) or head) // 2
    cos, sin, pos = ctx.known_shape(1), ctx.known_shape(2), ctx.known_shape(3)
    if cos is not None and sin is not None and cos != sin:
        raise Contradiction(f"its cos and sin caches {list(cos)} and {list(sin)} differ")
    if pos is not None and pos != (b, seq):
        raise Contradiction(f"its position_ids {list(pos)} are not [batch, sequence] ({[b, seq]})")
    if cos is not None:
        ok = (len(cos) == 2 and cos[1] == half) if ctx.has_input(3) else cos == (b, seq, half)
        if not ok:
            want = f"[positions, {half}]" if ctx.has_input(3) else str([b, seq, half])
            raise Contradiction(f"its cos cache {list(cos)} is not {want}")


register({
    "RotaryEmbedding": rotary,
    "com.microsoft:RotaryEmbedding": rotary,
    "Attention": attention_onnx,
    "com.microsoft:Attention": attention_ms,
    "com.microsoft:QAttention": qattention_ms,
    "com.microsoft:MultiHeadAttention": mha_ms,
    "com.microsoft:GroupQueryAttention": gqa_ms,
})


# -- shape rules ----------------------------------------------------------------------------------


def _attention_ms_shape(attrs, ins, n_out, past_idx: int = 4):
    """Attention: input (B, S, Hin), weights (Hin, 3H) or qkv_hidden_sizes -> output (B, S, H_v);
    present (2, B, heads, P + S, head): the past (2, B, heads, P, head) grown by this step's tokens."""
    x, w = ins[0], ins[1] if len(ins) > 1 else None
    if x is None or w is None or x[0] is None or w[0] is None or len(x[0]) != 3:
        return []
    hid = w[0][1] // 3
    if attrs.get("qkv_hidden_sizes"):
        hid = list(attrs["qkv_hidden_sizes"])[2]
    out = [((x[0][0], x[0][1], hid), x[1])]
    heads = int(attrs.get("num_heads", 1))
    past = ins[past_idx] if len(ins) > past_idx else None
    if n_out > 1 and heads > 0:
        p = past[0][3] if past is not None and past[0] is not None and len(past[0]) == 5 else 0
        out.append(((2, x[0][0], heads, p + x[0][1], hid // heads), x[1]))
    return out


def _qattention_shape(attrs, ins, n_out):
    """QAttention: as Attention (its past is input 8), the outputs in the bias's float type."""
    out = _attention_ms_shape(attrs, ins, n_out, past_idx=8)
    bias = ins[2] if len(ins) > 2 else None
    dtype = bias[1] if bias is not None and bias[1] else "float32"
    return [(o[0], dtype) for o in out]


def _mha_shape(attrs, ins, n_out):
    """output (B, S, heads x value head); present key / value (B, heads, P + L, head): the past's
    tokens and this step's keys."""
    q = ins[0]
    if q is None or q[0] is None:
        return []
    heads = int(attrs.get("num_heads", 1))
    k, v = (ins[i][0] if len(ins) > i and ins[i] is not None else None for i in (1, 2))
    dims = _mha_dims(q[0], k, v, heads)
    if dims is None or heads <= 0:
        return []
    b, s, l, d, dv = dims
    out = [((b, s, heads * dv), q[1])]
    if n_out > 1:
        past = ins[6] if len(ins) > 6 and ins[6] is not None else None
        p = past[0][2] if past is not None and past[0] is not None and len(past[0]) == 4 else 0
        out += [((b, heads, p + l, d), q[1]), ((b, heads, p + l, dv), q[1])]
    return out[:max(n_out, 1)]


@takes_values
def _gqa_shape(attrs, ins, n_out, values=()):
    """output (B, S, heads x head); present key/value (B, kv_heads, T, head): T = the larger of the
    past's length and total_sequence_length when that input's value is known (ONNX Runtime's
    shared-buffer mode passes a past as long as the longest sequence and gets it back), else the past
    grown by this step's tokens."""
    q = ins[0]
    if q is None or q[0] is None or len(q[0]) != 3:
        return []
    b, s, dq = q[0]
    hq = int(attrs.get("num_heads", 1))
    hkv = int(attrs.get("kv_num_heads", hq))
    packed = len(ins) < 2 or ins[1] is None
    head = dq // (hq + 2 * hkv) if packed else dq // hq
    out = [((b, s, hq * head), q[1])]
    past = ins[3] if len(ins) > 3 else None
    if n_out > 1 and past is not None and past[0] is not None and len(past[0]) == 4:
        total = length_value(values[6]) if len(values) > 6 else None
        t = past[0][2] + s if total is None else max(past[0][2], total)
        pres = (past[0][0], past[0][1], t, past[0][3])
        out += [(pres, past[1]), (pres, past[1])]
    return out[:max(n_out, 1)]


register_shapes({
    "RotaryEmbedding": same_as_first,
    "com.microsoft:RotaryEmbedding": same_as_first,
    "com.microsoft:Attention": _attention_ms_shape,
    "com.microsoft:QAttention": _qattention_shape,
    "com.microsoft:MultiHeadAttention": _mha_shape,
    "com.microsoft:GroupQueryAttention": _gqa_shape,
})
