"""Mixture-of-experts layers as ONNX Runtime fuses them: com.microsoft ``MoE`` (float expert weights)
and ``QMoE`` (expert weights packed at 2-8 bits, dequantised on the fly), the feed-forward block of
Mixtral, Phi-3.5-MoE or gpt-oss exports.

Each token row (``input``: [tokens, hidden] or [batch, sequence, hidden]) is sent to the ``k`` experts
its ``router_probs`` row ranks first; each expert is a feed-forward block of two or three matrices
(fc1, optionally fused gate and up of a gated activation; fc2; fc3, the unfused up projection). So:

- MACs: tokens x k x the elements of one expert's matrices (however they are laid out: the layout
  of these inputs changed between ONNX Runtime releases; their element counts did not).
- Weights read: only the experts some token is routed to. Which ones depends on the data; with
  routing spread evenly (each token picks k of E experts, independently), E x (1 - (1 - k/E)^tokens)
  experts are expected to be reached: k of them for one decoded token, nearly all of them for a long
  prompt. That is an assumption and the layer's note says so; the experts no token reaches are held
  in memory all the same (``Workload.weights_unread``).
- The kernels between: ONNX Runtime's implementation routes (softmax and top-k over the experts),
  permutes the token rows by expert, runs fc1 with its activation (a gated activation in a kernel of
  its own), fc2, and a final weighted combine of each token's k results: each of those intermediate
  tensors is written once and read once.
- Packed weights (QMoE) cost 2 ops a weight element read to dequantise (scale, zero point), as
  MatMulNBits does (``dnnperf.ops.matrix.matmul_nbits``).
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf.ir import DTYPE_BITS
from dnnperf.ops import Contradiction, Ctx, Unsupported, register, register_shapes
from dnnperf.ops.elementwise import OPS_PER_ELEMENT, same_as_first
from dnnperf.vocab import EXPERTS_KERNEL
from dnnperf.workload import Gemm

# activation_type -> (ops per element of the expert's hidden layer, whether fc1 carries gate and up)
ACTIVATIONS = {"relu": (OPS_PER_ELEMENT["Relu"], False), "gelu": (OPS_PER_ELEMENT["Gelu"], False),
               "silu": (OPS_PER_ELEMENT["Swish"], False), "identity": (0, False), "relu2": (2, False),
               "swiglu": (OPS_PER_ELEMENT["Swish"] + 1, True), "geglu": (OPS_PER_ELEMENT["Gelu"] + 1, True)}
# routing: a softmax over the experts (exp, sum, divide) and a top-k pass (one compare an expert)
ROUTE_OPS_PER_EXPERT = 4
# the kernels of one layer: routing, the permutation of rows by expert, fc1, fc2, the combine; a gated
# activation adds one, an unfused up projection (fc3) one more
KERNELS = 5

# inputs: (fc1, fc2, fc3) weights
_MOE_WEIGHTS = (2, 4, 6)
_QMOE_WEIGHTS = (2, 5, 8)


def experts_reached(experts: int, k: int, tokens: int) -> float:
    """Experts some token is routed to, expected when each of ``tokens`` rows picks ``k`` of ``experts``
    evenly and independently: E x (1 - (1 - k/E)^tokens)."""
    if experts <= 0 or tokens <= 0:
        return 0.0
    return experts * (1.0 - (1.0 - min(k, experts) / experts) ** tokens)


def _elems(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _moe(ctx: Ctx, quantized: bool):
    x = ctx.in_shape(0)
    if len(x) not in (2, 3):
        raise Contradiction(f"input of rank {len(x)}: a mixture of experts takes [tokens, hidden] or "
                            "[batch, sequence, hidden]")
    hidden, tokens = x[-1], _elems(x[:-1])
    probs = ctx.in_shape(1)
    experts = probs[-1] if probs else 0
    if _elems(probs[:-1]) != tokens:
        raise Contradiction(f"router_probs {list(probs)} has not one row for each of the {tokens} token(s)")
    k = int(ctx.attr("k", 1))
    if not 1 <= k <= experts:
        raise Contradiction(f"k = {k} experts a token out of {experts}")
    bits = int(ctx.attr("expert_weight_bits", 4)) if quantized else 0
    per_expert = []  # elements of one expert's fc1, fc2, fc3
    for j, i in enumerate(_QMOE_WEIGHTS if quantized else _MOE_WEIGHTS):
        if not ctx.has_input(i):
            per_expert.append(0)
            continue
        w = ctx.in_shape(i)
        if not w or w[0] != experts:
            raise Contradiction(f"fc{j + 1} weights {list(w)} are not one matrix for each of the {experts} experts "
                                "router_probs ranks")
        n = _elems(w[1:])
        if quantized:  # packed bytes: bits per element (a per-matrix override)
            wb = int(ctx.attr(f"fc{j + 1}_expert_weight_bits", bits))
            if wb not in (2, 3, 4, 8):
                raise Unsupported(f"QMoE with {wb}-bit weights is not costed")
            n = n * 8 // wb
        per_expert.append(n)
    fc1, fc2, fc3 = per_expert
    if not fc1 or not fc2:
        raise Unsupported("a mixture of experts without its fc1 and fc2 weights")
    inter = fc2 // hidden
    if inter * hidden != fc2:
        raise Contradiction(f"fc2 holds {fc2} elements an expert, not a multiple of the hidden size {hidden}")
    act = str(ctx.attr("activation_type", "relu"))
    if act not in ACTIVATIONS:
        raise Unsupported(f"activation_type '{act}' is not costed")
    act_ops, gated = ACTIVATIONS[act]
    rows = tokens * k  # token rows the experts compute
    macs = rows * (fc1 + fc2 + fc3)
    other = rows * inter * act_ops + tokens * experts * ROUTE_OPS_PER_EXPERT + rows * hidden * 2  # + combine
    widths = (fc1 // hidden, hidden, fc3 // hidden)  # each matrix's outputs a row
    for i, width in zip((4, 7, 10) if quantized else (3, 5, 7), widths):  # biases: one add an output
        if ctx.has_input(i):
            other += rows * width
    reached = experts_reached(experts, k, tokens)
    share = reached / experts
    # intermediates written once and read once: the permuted rows, fc1's (and fc3's) output, a gated
    # activation's, fc2's output before the combine
    size = DTYPE_BITS.get(ctx.dtype(0), 16) // 8 or 2
    between = rows * (hidden + widths[0] + widths[2] + (inter if gated else 0) + hidden) * size
    if quantized:
        other += 2 * int(round((fc1 + fc2 + fc3) * reached))
    act_read, wgt, out = ctx.byte_split()
    read = int(round(wgt * share))
    per_row = -(-rows // max(1, round(reached)))
    note = (f"routing assumed even: {tokens} token(s) x top-{k} of {experts} experts reach ~{reached:.1f} of them, "
            f"whose weights are read ({share:.0%} of the layer's)")
    w = ctx.workload("matmul", macs=macs, other=other,
                     gemm=Gemm(per_row, (fc1 + fc2 + fc3) // hidden, hidden, max(1, round(reached))),
                     parallel=rows * hidden)
    return replace(w, act_bytes_read=act_read + between, weight_bytes=read, bytes_written=out + between,
                   weights_unread=wgt - read, launches=KERNELS + gated + (1 if fc3 else 0), kernel=EXPERTS_KERNEL,
                   note=note if reached < experts - 0.05 else "")


def moe(ctx: Ctx):
    return _moe(ctx, quantized=False)


def qmoe(ctx: Ctx):
    return _moe(ctx, quantized=True)


register({"com.microsoft:MoE": moe, "com.microsoft:QMoE": qmoe})
register_shapes({"com.microsoft:MoE": same_as_first, "com.microsoft:QMoE": same_as_first})


def step_weights(layers, graph, factor: float) -> int:
    """The weight bytes ``layers`` (scored layers: ``.workload``, ``.nodes``) read with ``factor``
    times their token rows: a mixture-of-experts layer reaches more of its experts as the rows grow
    (``experts_reached``), every other layer reads its weights once whatever the rows."""
    total = 0
    by_name = None
    for la in layers:
        w = la.workload
        moe = None
        if "MoE" in la.op_type:
            if by_name is None:
                by_name = {n.name: n for n in graph.nodes}
            moe = next((by_name[n] for n in la.nodes if n in by_name and by_name[n].op_type in ("MoE", "QMoE")), None)
        if moe is None:
            total += w.weight_bytes
            continue
        x, probs = graph.tensors[moe.inputs[0]].shape, graph.tensors[moe.inputs[1]].shape
        experts, k, tokens = probs[-1], int(moe.attrs.get("k", 1)), _elems(x[:-1])
        held = w.weight_bytes + w.weights_unread
        now = experts_reached(experts, k, tokens)
        # the layer's other weights (none in a lone MoE node) read as before
        own = held * now / experts
        total += int(round(w.weight_bytes - own + held * experts_reached(experts, k, round(tokens * factor)) / experts))
    return total
