"""ONNX Runtime's CPU provider and QDQ models: the groups its QDQ transformers rewrite (1.32; every rule read off
the graph it optimises a small model into, uint8 and int8, one scale and two; ``dnnperf.qdq.plan(...,
ort_cpu=True)`` applies them): a DequantizeLinear -> op -> QuantizeLinear group run as its QLinear kernel
(``ORT_QLINEAR``), an op run on the 8-bit tensor with the pair dropped (``ORT_DROP``), an activation folded into
the QuantizeLinear after it (``folded_activations``), and the layout its 8-bit MaxPool runs in."""

from __future__ import annotations

import numpy as np

from dnnperf.ir import Graph, Node
from dnnperf.qdq import _DEFAULT, _EIGHT_BIT, QUANTIZED, Quantized

# ONNX Runtime's CPU QDQ transformers (1.32; each checked against the graph it optimises, u8 and s8): a
# DequantizeLinear -> op -> QuantizeLinear group it rewrites into its QOperator kernel, whatever the scales
# (every data input dequantized, the output requantized by one QuantizeLinear of the same 8-bit type) ...
ORT_QLINEAR = {"Add": "QLinearAdd", "Mul": "QLinearMul", "Concat": "QLinearConcat",
               "GlobalAveragePool": "QLinearGlobalAveragePool", "AveragePool": "QLinearAveragePool",
               "Sigmoid": "QLinearSigmoid", "LeakyRelu": "QLinearLeakyRelu", "Softmax": "QLinearSoftmax"}
# ... and ops it runs on the 8-bit tensor itself, dropping the pair, when the DequantizeLinear and the
# QuantizeLinear carry the same scale and zero point (Sub, Relu, Clip, Pad, SpaceToDepth, GlobalMaxPool and
# ReduceMean keep theirs and run in float)
ORT_DROP = frozenset({"MaxPool", "Transpose", "Flatten", "Resize", "Reshape", "Squeeze", "Unsqueeze", "Gather", "Slice",
                      "Expand", "Tile", "DepthToSpace"})


def group(graph: Graph, n, producer: dict, consumers: dict, run_dtype, q_dtype, nodes: dict,
               folded: dict) -> Quantized | None:
    """How ONNX Runtime's CPU provider runs ``n`` between DequantizeLinear and QuantizeLinear nodes, or None
    where it leaves the group in float: its QLinear kernel (``ORT_QLINEAR``: every data input dequantized from
    8 bits, one QuantizeLinear of the same type after it) or ``n`` itself on the 8-bit tensor (``ORT_DROP``:
    its first input's DequantizeLinear and the QuantizeLinear with the same scale and zero point). ``nodes``:
    the nodes run quantized so far (a MaxPool after a QLinearConv runs in its channels-last layout);
    ``run_dtype`` / ``q_dtype``: the 8-bit types a DequantizeLinear reads and a QuantizeLinear writes as that
    provider runs them (``plan``'s)."""
    out = n.outputs[0] if n.outputs else ""
    users = consumers.get(out, []) if out else []
    if len(users) == 1 and users[0].name in folded and out not in graph.outputs:  # through a folded activation
        out = users[0].outputs[0]
        users = consumers.get(out, [])
    if len(n.outputs) != 1 or out in graph.outputs or len(users) != 1 or users[0].op_type != "QuantizeLinear" \
            or users[0].domain not in _DEFAULT or not users[0].outputs:
        return None
    q = users[0]
    qt = graph.tensors.get(q.outputs[0])
    if qt is None or qt.dtype not in _EIGHT_BIT:
        return None
    qparams = (q.inputs[1:3] + ("", ""))[:2]
    data = [i for i in n.inputs if i] if n.op_type in ORT_QLINEAR else n.inputs[:1]
    if not data or any(run_dtype(i) != q_dtype(q) for i in data):
        return None
    dq = [producer[i] for i in data]
    dparams = [(d.inputs[1:3] + ("", ""))[:2] for d in dq]
    srcs = tuple(graph.tensors[producer[i].inputs[0]].dtype if i in data else None for i in n.inputs)
    if n.op_type in ORT_DROP:
        if n.op_type == "MaxPool" and graph.opset < 12:  # 8-bit MaxPool came with opset 12
            return None

        def value(t):
            v = graph.values.get(t) if t else None
            return None if v is None else np.asarray(v).tolist()

        # one tensor on both sides (the quantizer's way), or equal values where both are known at load time
        same = all(a == b or (value(a) is not None and value(a) == value(b)) for a, b in zip(dparams[0], qparams))
        if not same or not dparams[0][0]:
            return None
        twin = Node(n.name, n.op_type, n.domain, (dq[0].inputs[0],) + n.inputs[1:], (q.outputs[0],), dict(n.attrs))
        loop = "MaxPool.int8" if n.op_type == "MaxPool" and not after_qlinear_conv(dq[0], producer, nodes) else ""
        return Quantized(QUANTIZED[qt.dtype], srcs, qt.dtype, twin=twin, kernel=loop)
    quantized = [(d.inputs[0],) + p for d, p in zip(dq, dparams)]
    kind = ORT_QLINEAR[n.op_type]
    if kind in ("QLinearAdd", "QLinearMul"):
        if len(quantized) != 2:
            return None
        ins = quantized[0] + quantized[1] + qparams
    elif kind == "QLinearConcat":
        ins = qparams + tuple(x for piece in quantized for x in piece)
    else:
        ins = quantized[0] + qparams
    attrs = dict(n.attrs)
    if kind == "QLinearGlobalAveragePool":
        attrs["channels_last"] = 0
    twin = Node(n.name, kind, "com.microsoft", ins, (q.outputs[0],), attrs)
    return Quantized(QUANTIZED[qt.dtype], srcs, qt.dtype, twin=twin)


def folded_activations(graph: Graph, consumers: dict) -> dict:
    """{name: node} of the Relu and Clip nodes ONNX Runtime's CPU provider removes because the QuantizeLinear
    they alone feed already clips as much: a Relu before a zero point at its type's minimum (uint8 0, int8
    -128), a Clip whose bounds hold the QuantizeLinear's whole range (checked against its optimised graph: a
    Conv -> Relu -> QuantizeLinear with zero point 0 runs as QLinearConv, with zero point 3 as a float
    FusedConv; a Clip(0, 6) before a scale of 0.05 stays). The layer before is then requantized directly."""
    out = {}
    for n in graph.nodes:
        if n.op_type not in ("Relu", "Clip") or n.domain not in _DEFAULT or not n.inputs or not n.outputs:
            continue
        users = consumers.get(n.outputs[0], [])
        if len(users) != 1 or users[0].op_type != "QuantizeLinear" or n.outputs[0] in graph.outputs \
                or len(consumers.get(n.inputs[0], [])) != 1 or len(users[0].inputs) < 3:
            continue
        q = users[0]
        t = graph.tensors.get(q.outputs[0]) if q.outputs else None
        scale, zero = graph.values.get(q.inputs[1]), graph.values.get(q.inputs[2])
        if t is None or t.dtype not in _EIGHT_BIT or scale is None or zero is None \
                or np.size(scale) != 1 or np.size(zero) != 1:
            continue
        lo_q, hi_q = (0, 255) if t.dtype == "uint8" else (-128, 127)
        zp, sc = int(np.asarray(zero).reshape(-1)[0]), float(np.asarray(scale).reshape(-1)[0])
        if n.op_type == "Relu":
            if zp == lo_q:
                out[n.name] = n
            continue
        names = (list(n.inputs[1:3]) + ["", ""])[:2]
        bounds = [graph.values.get(i) if i else n.attrs.get(k) for i, k in zip(names, ("min", "max"))]
        if any(i and b is None for i, b in zip(names, bounds)):
            continue  # a bound not known at load time
        lo = float(np.asarray(bounds[0]).reshape(-1)[0]) if bounds[0] is not None else -np.inf
        hi = float(np.asarray(bounds[1]).reshape(-1)[0]) if bounds[1] is not None else np.inf
        low, high = sc * (lo_q - zp), sc * (hi_q - zp)
        # (a float32 scale of 6 / 255 reaches 6.0000001)
        if lo <= low + 1e-6 * abs(low) and hi >= high - 1e-6 * abs(high):
            out[n.name] = n
    return out


def after_qlinear_conv(dq, producer: dict, nodes: dict) -> bool:
    """Whether the tensor ``dq`` dequantizes was requantized from a convolution run quantized (through its
    activation, which the QLinearConv takes in): ONNX Runtime's CPU provider then keeps the channels-last layout
    of that QLinearConv and runs an 8-bit MaxPool on it as NhwcMaxPool (0.2 ns an output on a 2-core EPYC VM);
    otherwise its 8-bit MaxPool runs in NCHW, an element at a time (~8 ns an output). Checked against its
    optimised graphs: ResNet-50's and SqueezeNet 1.1's first pools (after the stem) NhwcMaxPool, SqueezeNet's
    two after a QLinearConcat and one on a graph input MaxPool, GoogLeNet's 13 alike (its third, after the
    second pool, NhwcMaxPool)."""
    q = producer.get(dq.inputs[0]) if dq.inputs else None
    p = producer.get(q.inputs[0]) if q is not None and q.op_type == "QuantizeLinear" and q.inputs else None
    while p is not None and p.op_type in ("Relu", "Clip") and p.inputs:
        p = producer.get(p.inputs[0])
    if p is None or p.name not in nodes:
        return False
    # a channels-last MaxPool passes its layout on (GoogLeNet's pool after its second pool: NhwcMaxPool)
    q = nodes[p.name]
    return (p.op_type == "Conv" and not q.weight_only) or (p.op_type == "MaxPool" and not q.kernel)


# Why ONNX Runtime's CPU provider leaves a matrix op of a QDQ model in float (``qdq.plan(..., refused=...)``
# maps each such node to one of these keys; ``dnnperf.qdq_runs.runtime_notes`` words them). Each rule was read
# off the graph ONNX Runtime 1.32 optimises a one-layer model into.
FLOAT_WHY = {
    "no_requantize": "convolution(s) with dequantized inputs but no QuantizeLinear on their output run in float "
                     "(its QLinearConv writes 8 bits), their weights dequantized at every inference: a model "
                     "quantized for TensorRT (Q/DQ on inputs only) keeps its float convolutions here",
    "one_type": "matrix layer(s) reading int8 and writing uint8 (or the reverse) run in float: its quantized "
                "kernels read and write one 8-bit type",
    "int8_data": "convolution(s) or MatMul(s) reading int8 data its uint8 rewrite leaves signed (a tensor read by "
                 "two nodes) run in float: its QLinearConv and QLinearMatMul take uint8 data only (QGemm takes int8)",
    "not_8bit": "matrix layer(s) with operands dequantized from types other than 8-bit integers (4-bit, float8) "
                "run in float, their weights dequantized at every inference: its quantized products take int8 "
                "and uint8 only",
    "blocked": "matrix layer(s) with block-quantized weights and 8-bit inputs run in float, their weights "
               "dequantized at every inference: its quantized products take one scale per tensor or per channel",
    "gemm_zero_point": "Gemm layer(s) whose weight DequantizeLinear gives no zero point run in float (its QDQ Gemm "
                       "fusion asks for one)",
    "clip_between": "matrix layer(s) followed by a Relu or Clip that no QuantizeLinear after it absorbs run in "
                    "float, their weights dequantized at every inference (its QDQ fusions take such an activation "
                    "only where the QuantizeLinear clips as much)",
    "conv_transpose": "ConvTranspose layer(s) between Q/DQ nodes run in float (no quantized kernel of it)",
    "nbits": "MatMul / Gemm layer(s) with quantized weights and float inputs run in float, their weights "
             "dequantized at every inference: it fuses such a pair into MatMulNBits only for a MatMul or an "
             "untransposed Gemm with 8- or 4-bit integer weights quantized per tensor, per column, or in blocks "
             "of 16, 32, 64... along K",
}


def _blocked(dq) -> bool:
    return int(dq.attrs.get("block_size", 0) or 0) > 0


def qlinear_refusal(graph: Graph, n, a: str, b: str, wdq, consumers: dict, folded: dict) -> str | None:
    """Why ONNX Runtime's CPU provider runs matrix op ``n``, whose data and weights are dequantized from types
    ``a`` and ``b`` (weights by ``wdq``), in float rather than as QLinearConv / QLinearMatMul / QGemm /
    MatMulIntegerToFloat (a ``FLOAT_WHY`` key), or None. The provider's quantized products take 8-bit integer
    operands with one scale per tensor or per channel (4-bit or float8 weights, 16-bit or 4-bit activations and
    block-quantized weights stay in float, checked both as QDQ convolutions and as products), its QLinearConv and
    QLinearMatMul uint8 data only (``a`` as the provider runs it: int8 data read once is turned uint8); its QDQ Gemm
    fusion needs the weight's zero point given; it has no quantized ConvTranspose; and a layer whose output
    goes to one Relu or Clip (read once, not a graph output) stays in float unless a QuantizeLinear after the
    activation absorbs it (``folded_activations``): a Relu before a zero point above the type's minimum, a Clip(0,
    6) before a narrower range, a Relu read by anything else (Sigmoid, Tanh, LeakyRelu or HardSigmoid there leave a
    MatMul quantized, writing float)."""
    if n.op_type == "ConvTranspose":
        return "conv_transpose"
    if a not in _EIGHT_BIT or b not in _EIGHT_BIT:
        return "not_8bit"
    if _blocked(wdq):
        return "blocked"
    if a == "int8" and n.op_type in ("Conv", "MatMul"):
        return "int8_data"
    if n.op_type == "Gemm" and (len(wdq.inputs) < 3 or not wdq.inputs[2]):
        return "gemm_zero_point"
    users = consumers.get(n.outputs[0], []) if n.outputs else []
    act = users[0] if len(users) == 1 else None
    if act is not None and act.op_type in ("Relu", "Clip") and act.name not in folded and act.outputs \
            and act.outputs[0] not in graph.outputs and len(consumers.get(act.outputs[0], [])) == 1:
        return "clip_between"
    return None


def nbits_refusal(graph: Graph, n, wdq, b: str, producer: dict, consumers: dict) -> str | None:
    """"nbits" when ONNX Runtime's CPU provider does not fuse a float-input MatMul / Gemm ``n`` and the
    DequantizeLinear ``wdq`` of its weights (type ``b``) into MatMulNBits, leaving both to run at every
    inference; None when it does. It fuses a MatMul or a Gemm without transposes whose 2-D weights are int8,
    uint8, int4 or uint4 quantized per tensor, per column (axis 1), or in blocks along K (axis 0) of a power of
    two of at least 16: per-row scales, blocks along N or of 8 or 24, transB = 1 and float8 weights stay
    unfused, and so does a product of an input no DequantizeLinear makes whose output goes straight to a
    QuantizeLinear (an input dequantized from 16 bits, or an activation between, and it fuses; checked against
    its optimised graphs)."""
    if b not in ("int8", "uint8", "int4", "uint4"):
        return "nbits"
    if n.op_type == "Gemm" and (n.attrs.get("transA", 0) or n.attrs.get("transB", 0)):
        return "nbits"
    src = producer.get(n.inputs[0])
    users = consumers.get(n.outputs[0], []) if n.outputs else []
    if (src is None or src.op_type != "DequantizeLinear") and users \
            and all(u.op_type == "QuantizeLinear" for u in users):
        return "nbits"
    w = graph.tensors.get(wdq.inputs[0]) if wdq.inputs else None
    if w is None or w.shape is None or len(w.shape) != 2:
        return "nbits"
    axis = int(wdq.attrs.get("axis", 1)) % 2
    if _blocked(wdq):
        block = int(wdq.attrs["block_size"])
        return None if axis == 0 and block >= 16 and block & (block - 1) == 0 else "nbits"
    s = graph.tensors.get(wdq.inputs[1]) if len(wdq.inputs) > 1 else None
    per_tensor = s is not None and s.numel == 1
    return None if per_tensor or axis == 1 else "nbits"
