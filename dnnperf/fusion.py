"""What a typical inference runtime fuses (ONNX Runtime / TensorRT style), as a what-if.

Rules: an elementwise op, a BatchNormalization or a Cast fuses into the layer that produced its
input when that input has no other consumer, is not a model output and is as large as the op's
output (a broadcast to a larger tensor, like a squeeze-excite gate, is a kernel of its own); and
x * Sigmoid(x) (SiLU / Swish) is one kernel that reads x once; the producer may be a
Conv/ConvTranspose/Gemm/MatMul (epilogue fusion: Conv+BN+ReLU, MatMul+bias+GELU) or another
fused elementwise chain. A fused group launches one kernel and never writes or re-reads the
intermediate tensors.

Without fusion, groups of nodes still run as one kernel where the runtime has one for them
(``dnnperf.kernel_groups``: ONNX Runtime's CPU kernels and, on GPUs, the framework ops an export
spells as several nodes); ``fuse`` builds their layers too.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from dnnperf.ir import DTYPE_BITS, Graph
from dnnperf.kernel_groups import group_candidates, runtime_kernel_groups, silu_gate
from dnnperf.rewrites import product_takes
from dnnperf.vocab import BLOCKED_ACTIVATIONS, EPILOGUE_ACTIVATIONS, GEMM_ACTIVATIONS, NORM_KERNELS
from dnnperf.workload import FREE_FAMILIES, MATRIX_FAMILIES, Gemm, Workload

EPILOGUE_OPS = frozenset({
    "BatchNormalization", "Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
    "Gelu", "Erf", "Add", "Sub", "Mul", "Div", "Elu", "Selu", "Softplus", "Mish", "PRelu", "Swish",
    "Cast", "Sqrt", "Pow", "Neg", "Exp", "Where", "BiasGelu", "FastGelu", "QuickGelu", "BiasAdd",
    "QuantizeLinear",  # a QDQ layer requantizes its output in its epilogue (dnnperf.qdq)
})
ANCHOR_FAMILIES = MATRIX_FAMILIES | {"elementwise", "cast"}
# ops outside those families that runtimes run as a kernel taking an epilogue (ONNX Runtime runs a
# standalone BatchNormalization as a per-channel convolution)
KERNEL_ANCHOR_OPS = frozenset({"BatchNormalization"})
# matrix-family ops ONNX Runtime's CPU provider runs with no epilogue: an Add, a Relu or any other op after
# an Einsum, a ConvTranspose or a recurrent layer stays a kernel of its own (each probed in the runtime's
# optimised graph; MaxViT's 22 attention-score Einsums each keep their position-bias Add)
CPU_PLAIN_PRODUCTS = frozenset({"Einsum", "ConvTranspose", "LSTM", "GRU", "RNN"})
# what ONNX Runtime's CPU provider folds into a convolution or GEMM kernel: the activations its MLAS
# kernels apply in their epilogue (Relu, LeakyRelu, Tanh, Sigmoid, Clip, HardSigmoid, HardSwish), a
# BatchNormalization or a constant scale/shift folded into the weights (a MatMul's scale: Mul or Div),
# the bias, and one residual Add ahead of the activation (``_sums``); a Mul, Sub or Div of two computed
# tensors stays a kernel of its own. Any other op (Erf, PRelu, Elu, Mish, Softplus, Exp...) after a convolution
# is a kernel of its own (checked op by op in the runtime's optimised graph), and most of them take the
# tensor out of the blocked layout and back (dnnperf.layout): a chain of twelve 128-channel 14 x 14
# convolutions ran 37 us per block slower with an Erf after each (bench/cpu_blocks.py)
CPU_CONV_ACTIVATIONS = frozenset({"Relu", *EPILOGUE_ACTIVATIONS})
CPU_KERNEL_EPILOGUES = CPU_CONV_ACTIVATIONS | GEMM_ACTIVATIONS | {"BatchNormalization", "Add", "Sub", "Mul", "Div",
                                                                  "QuantizeLinear"}


def consumers_of(graph: Graph) -> dict[str, int]:
    n: dict[str, int] = {}
    for node in graph.nodes:
        for i in set(node.inputs):
            if i:
                n[i] = n.get(i, 0) + 1
    for o in graph.outputs:
        n[o] = n.get(o, 0) + 1
    return n


# products whose bias Add ONNX Runtime folds in (a Gemm's C), and which take no other Add: a residual
# Add after them is a kernel of its own (unlike a convolution's, which its kernel sums in)
_BIAS_ONLY_ANCHORS = frozenset({"MatMul", "Gemm"})


def fusion_candidates(graph: Graph, rows, chains: bool = True,
                      groups: list[tuple[str, list[str]]] | None = None,
                      attention: bool = True, unsummed: frozenset = frozenset(),
                      unfused: frozenset = frozenset()) -> dict[str, tuple[str, str]]:
    """node name -> (producer node name, shared tensor) for every node a runtime would fuse.

    ``chains``: elementwise ops also fuse into elementwise producers (GPU compilers such as
    TensorRT/XLA do). Without: ONNX Runtime's CPU provider, which fuses the epilogues its kernels take
    (``CPU_KERNEL_EPILOGUES``) into Conv/MatMul/Gemm
    and into a standalone BatchNormalization (it runs one as a per-channel convolution), and runs
    the patterns of ``runtime_kernel_groups`` (``groups`` when the caller has them) as kernels of
    their own. ``attention``: whether attention (scores, softmax, product with V) becomes one kernel
    (``_attention_step``; not where the engine has no fused attention kernel). ``unsummed``: Adds no
    kernel takes as its summed input (``dnnperf.layout``: their other operand is not blocked), and the activations
    of standalone BatchNormalizations on a plain tensor (the runtime's own BatchNormalization kernel takes none).
    ``unfused``: nodes that fuse into nothing (``dnnperf.upcast.cast_bound_clips``)."""
    cons = consumers_of(graph)
    produced: dict[str, object] = {}
    out = {}
    grouped: set[str] = set()
    epilogues = EPILOGUE_OPS if chains else CPU_KERNEL_EPILOGUES
    anchor_of: dict[str, object] = {}  # fused node -> its group's first node
    taken: set[str] = set()  # CPU: anchors whose kernel already sums an operand or applies its activation
    activated: set[str] = set()  # CPU: anchors whose kernel applies its activation
    gemm_made: set[str] = set()  # CPU: 2-D MatMuls whose bias Add (or BatchNormalization) makes them a Gemm
    biased: set[str] = set()  # CPU: MatMuls that took their bias Add (a Gemm, at any rank)
    if not chains:
        groups = runtime_kernel_groups(graph) if groups is None else groups
        for _kernel, names in groups:
            grouped.update(names)
        out.update(group_candidates(graph, groups))
    for row in rows:
        node = row.node
        if node.name in grouped:
            for o in node.outputs:
                if o:
                    produced[o] = row
            continue
        if node.op_type in epilogues and row.workload is not None and row.workload.family not in FREE_FAMILIES \
                and node.name not in unfused:
            # (a node that launches nothing, a QuantizeLinear its QDQ producer writes through, has no
            # bytes of its own to save)
            for i in node.inputs:
                prod = produced.get(i)
                if prod is None or cons.get(i, 0) != 1:
                    continue
                if prod.workload is None:
                    continue
                kernel = prod.workload.family in MATRIX_FAMILIES or prod.node.op_type in KERNEL_ANCHOR_OPS
                if not (kernel or prod.workload.family in ANCHOR_FAMILIES):
                    continue
                if not chains and not kernel and prod.node.name not in out:
                    continue
                if not chains and prod.node.name in grouped:
                    continue  # the runtime's own kernels (Gelu, QuickGelu, SkipLayerNormalization) take no epilogue
                if not chains and prod.node.op_type in CPU_PLAIN_PRODUCTS:
                    continue
                if _broadcasts(graph, i, node.outputs[0] if node.outputs else ""):
                    continue
                anchor = anchor_of.get(prod.node.name, prod.node)
                if not chains and anchor.op_type in _BIAS_ONLY_ANCHORS \
                        and not product_takes(graph, anchor, node, i, anchor.name in biased):
                    continue
                if not chains and node.op_type in CPU_CONV_ACTIVATIONS | GEMM_ACTIVATIONS \
                        and not _applies(anchor, node, gemm_made, unsummed):
                    break
                if not chains and node.op_type in ("Sub", "Mul", "Div") and any(
                        x not in graph.constants for x in node.inputs if x and x != i):
                    break  # a product of two computed tensors (StarNet's gate) is a kernel of its own
                # ONNX Runtime folds a BatchNormalization into a Conv's or a MatMul's weights, not into a Gemm's, and
                # never past an activation
                if not chains and node.op_type == "BatchNormalization" and (anchor.op_type == "Gemm"
                                                                            or anchor.name in activated):
                    break
                if not chains and anchor.op_type == "Conv" and not _per_channel(graph, node, i):
                    break  # a constant over the whole map (a position embedding) folds into no bias
                summed = not chains and _sums(graph, node)
                if summed and (anchor.name in taken or node.name in unsummed or not _planar(graph, anchor)):
                    continue  # that kernel already takes a sum or applies its activation: try the next input
                if not chains and not summed and node.op_type in ("Add", "Sub", "Mul", "Div") \
                        and anchor.name in activated:
                    break  # a constant scale or shift folds into the weights only ahead of the activation
                out[node.name] = (prod.node.name, i)
                anchor_of[node.name] = anchor
                if not chains and anchor.op_type == "MatMul" and node.op_type in ("Add", "BatchNormalization") \
                        and len(getattr(graph.tensors.get(i), "shape", None) or ()) == 2:
                    gemm_made.add(anchor.name)  # a 2-D MatMul and its bias (or folded BatchNormalization): a Gemm
                if not chains and anchor.op_type == "MatMul" and node.op_type == "Add":
                    biased.add(anchor.name)  # (a Gemm at any rank, Reshapes around it)
                if not chains and (summed or node.op_type in CPU_CONV_ACTIVATIONS):
                    taken.add(anchor.name)
                if not chains and node.op_type in CPU_CONV_ACTIVATIONS:
                    activated.add(anchor.name)
                break
        if chains and attention and node.name not in out and row.workload is not None:
            joined = _attention_step(graph, node, produced, cons, anchor_of)
            if joined is not None:
                out[node.name] = joined
                anchor_of[node.name] = anchor_of.get(joined[0], produced[joined[1]].node)
        if node.op_type == "Mul" and node.name not in out and row.workload is not None:
            # x * sigmoid(x) (SiLU / Swish): one kernel reads x once and writes the product
            gate = silu_gate(node, lambda t: produced[t].node if t in produced else None,
                              lambda t: cons.get(t, 0) == 1 and produced[t].workload is not None)
            if gate is not None:
                out[node.name] = (produced[gate].node.name, gate)
        for o in node.outputs:
            if o:
                produced[o] = row
    return out


def _applies(anchor, node, gemm_made: set, plain: frozenset) -> bool:
    """Whether ONNX Runtime's CPU kernel for ``anchor`` applies the activation ``node``: a Gemm (``gemm_made``: a
    2-D MatMul its bias made one) GEMM_ACTIVATIONS, a standalone BatchNormalization BLOCKED_ACTIVATIONS (none on a
    plain tensor: ``plain`` names them), any other kernel CPU_CONV_ACTIVATIONS."""
    op = node.op_type
    if anchor.op_type in _BIAS_ONLY_ANCHORS:
        return op in GEMM_ACTIVATIONS and (anchor.op_type == "Gemm" or anchor.name in gemm_made)
    if anchor.op_type == "BatchNormalization":
        return op in BLOCKED_ACTIVATIONS and node.name not in plain
    return op in CPU_CONV_ACTIVATIONS


def _per_channel(graph: Graph, node, shared: str) -> bool:
    """Whether an arithmetic op's constant operands broadcast over a convolution's output as one value
    per channel or one in all (shape [C, 1, 1] or a scalar), what ONNX Runtime folds into the
    kernel's weights or bias. A constant of the map's own size (ViT-style position embedding added
    to a patch convolution: Visformer) is an elementwise kernel of its own, on the plain layout."""
    if node.op_type not in ("Add", "Sub", "Mul", "Div"):
        return True
    for x in node.inputs:
        if not x or x == shared or x not in graph.constants:
            continue
        t = graph.tensors.get(x)
        if t is None or t.shape is None:
            return False
        dims = [1] * (4 - len(t.shape)) + list(t.shape)
        if len(dims) != 4 or dims[0] != 1 or dims[2] != 1 or dims[3] != 1:
            return False
    return True


def _sums(graph: Graph, node) -> bool:
    """An Add or Sum of two or more computed tensors (a residual or branch sum, not a bias). ONNX
    Runtime's CPU provider hands such a sum to a convolution as its extra summed input: the first
    input, in order, made by a single-use convolution (or a BatchNormalization run as one) whose kernel
    has no summed input and no activation yet; an activation after the sum joins the same kernel.
    MobileOne's branch sums Add(Add(conv0, conv1), conv2) so become one convolution each, every one
    summing the previous total."""
    return node.op_type in ("Add", "Sum") and sum(1 for x in node.inputs if x and x not in graph.constants) >= 2


def _planar(graph: Graph, anchor) -> bool:
    """Whether ONNX Runtime's CPU kernel for ``anchor`` takes a summed input: its 2-D convolutions (4-D
    tensors, the NCHWc kernels) do; a 1-D or 3-D convolution (R3D-18's, R(2+1)D's) runs the residual
    Add and the activation after it as kernels of their own (its optimised graph: Conv, Add, Relu)."""
    if anchor.op_type != "Conv" or not anchor.outputs:
        return True
    t = graph.tensors.get(anchor.outputs[0])
    return t is None or t.shape is None or len(t.shape) == 4


def _attention_step(graph: Graph, node, produced: dict, cons: dict, anchor_of: dict) -> tuple[str, str] | None:
    """(producer, shared tensor) when ``node`` continues a fused attention kernel (FlashAttention
    style, what TensorRT and the fused SDPA kernels run): a Softmax of scores from a product of two
    computed tensors (its scale and mask already in that product's epilogue), then the MatMul of those
    probabilities with a computed V. The score matrix never leaves the chip."""
    if node.op_type not in ("Softmax", "MatMul") or not node.inputs:
        return None
    i = node.inputs[0]
    prod = produced.get(i)
    if prod is None or cons.get(i, 0) != 1 or prod.workload is None:
        return None
    anchor = anchor_of.get(prod.node.name, prod.node)
    if anchor.op_type != "MatMul" or any(x in graph.constants for x in anchor.inputs):
        return None  # not a product of two computed tensors (Q K^T)
    if node.op_type == "Softmax":
        return None if prod.node.op_type == "Softmax" else (prod.node.name, i)
    if prod.node.op_type != "Softmax" or len(node.inputs) < 2 or node.inputs[1] in graph.constants:
        return None
    return prod.node.name, i


def _broadcasts(graph: Graph, shared: str, out: str) -> bool:
    """True when the op writes more elements than its producer made (the gate of a squeeze-excite
    block, [N, C, 1, 1] times the feature map): an epilogue runs once per element the producer
    computes, so such an op is a kernel of its own over the larger tensor."""
    a, b = graph.tensors.get(shared), graph.tensors.get(out) if out else None
    return a is not None and b is not None and a.numel is not None and b.numel is not None and b.numel > a.numel


def intermediate_bytes(t, w: Workload) -> int:
    """Bytes of the tensor a fusion keeps on chip, in the precision the (what-if) workload uses."""
    if t is None or not t.nbytes:
        return 0
    if t.dtype == w.dtype or t.dtype in ("int64", "int32", "bool"):
        return t.nbytes
    return t.nbytes * DTYPE_BITS.get(w.dtype, 32) // DTYPE_BITS.get(t.dtype, 32)


def _joined_gemm(g1, g2):
    """The product a fused group runs: its first product's, or for attention (scores S x L x D, then
    probabilities times V, S x Dv x L) one product of S x L with D + Dv per score, as a fused attention
    kernel does the work of both over the same tiles of scores."""
    if g1 is None or g2 is None:
        return g1
    if (g2.m, g2.k, g2.count) == (g1.m, g1.n, g1.count):
        return Gemm(g1.m, g1.n, g1.k + g2.n, g1.count)
    return g1


def _in_run_order(groups: list[list]) -> list[list]:
    """The groups in the order a runtime can run them: a fused kernel starts once everything it reads
    is made, so a group whose later member reads a tensor made after its first member (a convolution
    that sums in a tensor of a convolution further on) moves after that tensor's producer. Otherwise
    the first members' order is kept."""
    made_by = {o: gi for gi, g in enumerate(groups) for row, _ in g for o in row.node.outputs if o}
    after: list[set[int]] = [set() for _ in groups]
    late = False
    for gi, g in enumerate(groups):
        for row, _ in g[1:]:
            for i in row.node.inputs:
                gj = made_by.get(i, gi)
                if gj != gi:
                    after[gi].add(gj)
                    late = late or gj > gi
    if not late:
        return groups
    waiting = [len(a) for a in after]
    readers: list[list[int]] = [[] for _ in groups]
    for gi, a in enumerate(after):
        for gj in a:
            readers[gj].append(gi)
    ready = [gi for gi, n in enumerate(waiting) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        gi = heapq.heappop(ready)
        order.append(groups[gi])
        for r in readers[gi]:
            waiting[r] -= 1
            if waiting[r] == 0:
                heapq.heappush(ready, r)
    return order if len(order) == len(groups) else groups


def fuse(graph: Graph, rows, make_layer, cands: dict[str, tuple[str, str]],
         kernels: dict[str, str] | None = None):
    """Group rows into fused layers along ``cands`` (from ``fusion_candidates``). ``rows`` carry
    (node, workload); ``make_layer`` builds a Layer. ``kernels``: first member -> kernel name of the
    ``runtime_kernel_groups``; such a group takes that name as its op type (its calibrated figure)."""
    groups: list[list] = []
    group_of: dict[str, int] = {}
    for row in rows:
        if row.workload is None:
            continue
        c = cands.get(row.node.name)
        if c is not None and c[0] in group_of:
            gi = group_of[c[0]]
            groups[gi].append((row, c[1]))
            group_of[row.node.name] = gi
        else:
            group_of[row.node.name] = len(groups)
            groups.append([(row, None)])
    cons = consumers_of(graph)
    kernels = kernels or {}
    layers = []
    for g in _in_run_order(groups):
        parts = [make_layer(row) for row, _ in g]  # precision what-ifs already applied per part
        if len(g) == 1:
            layers.append(parts[0])
            continue
        total: Workload = parts[0].workload
        read = {i for i in g[0][0].node.inputs if i}
        made = {o for o in g[0][0].node.outputs if o}
        inside = [i for r, _ in g for i in r.node.inputs if i]
        unwritten: set[str] = set()  # tensors made inside whose write the fused kernel skips
        attention = False  # scores, softmax and the product with V as one kernel (``_joined_gemm``)
        for part, (row, shared) in zip(parts[1:], g[1:]):
            w = part.workload
            saved = intermediate_bytes(graph.tensors.get(shared), w)
            # a tensor another kernel still reads is written all the same (a residual sum)
            kept = saved if cons.get(shared, 0) > inside.count(shared) else 0
            if not kept and shared is not None:
                unwritten.add(shared)
            again = {i for i in row.node.inputs if i and i != shared and (i in read or i in made)
                     and i not in graph.constants}
            read.update(i for i in row.node.inputs if i)
            made.update(o for o in row.node.outputs if o)
            reread = sum(intermediate_bytes(graph.tensors.get(i), w) for i in again)  # already in registers
            # a tensor made inside that only members read, none of them as the tensor joining it to the
            # group (a tanh GELU's 0.5 x, read by its last product): not written either
            skipped = [i for i in again if i in made and i not in unwritten and cons.get(i, 0) <= inside.count(i)
                       and i not in graph.outputs]
            unwritten.update(skipped)
            unwrit = sum(intermediate_bytes(graph.tensors.get(i), w) for i in skipped)
            gemm = _joined_gemm(total.gemm, w.gemm)
            attention = attention or (gemm is not total.gemm and gemm is not None)
            total = Workload(
                family=total.family, dtype=total.dtype, macs=total.macs + w.macs,
                other_ops=total.other_ops + w.other_ops,
                act_bytes_read=total.act_bytes_read + w.act_bytes_read - saved - reread,
                weight_bytes=total.weight_bytes + w.weight_bytes,
                bytes_written=total.bytes_written + w.bytes_written - saved - unwrit + kept,
                parallel_work=max(total.parallel_work, w.parallel_work), gemm=gemm,
                launches=total.launches, conv=total.conv, row=total.row or w.row,
                subnormals=total.subnormals + w.subnormals, taps=total.taps,  # the anchor's MACs: its taps
                operands=total.operands,  # ... and its integer kernel
                kernel=total.kernel,  # ... and the runtime kernel it names (a 3-D convolution's)
                loop_items=total.loop_items,  # ... and that kernel's steps (a MatMulNBits' weights)
                host_waits=total.host_waits + w.host_waits,
                weights_unread=total.weights_unread + w.weights_unread,
            )
        if attention:  # a fused attention kernel (FlashAttention style): what an attention op is
            total = replace(total, family="attention")
        if kernels.get(g[0][0].node.name) in NORM_KERNELS:  # a layer norm spelled as nodes: the norm op it becomes
            shape = parts[-1].output_shape
            total = replace(total, family="norm", row=int(shape[-1]) if shape else 0)
        joined = "+".join(r.node.op_type for r, _ in g)
        layers.append(replace(
            parts[0],
            name="+".join(r.node.name for r, _ in g),
            op_type=kernels.get(g[0][0].node.name, joined),
            nodes=tuple(r.node.name for r, _ in g),
            workload=total,
            output_shape=parts[-1].output_shape,
        ))
    return layers


def merge_siblings(layers: list, groups: list[list[str]], kernel: str = "Split") -> list:
    """``layers`` with each group of sibling nodes (``dnnperf.rewrites.split_groups``: parts of one tensor
    read by several nodes) as one layer where its first member was: one kernel that reads every part
    once and writes each (the sum of the members' traffic). A group some member of which was fused
    into another layer stays as it is."""
    if not groups:
        return layers
    at = {layer.nodes: k for k, layer in enumerate(layers) if len(layer.nodes) == 1}
    merged: dict[int, object] = {}
    dropped: set[int] = set()
    for names in groups:
        idx = [at.get((n,)) for n in names]
        if any(k is None for k in idx):
            continue
        parts = [layers[k] for k in idx]
        ws = [p.workload for p in parts]
        total = replace(ws[0], act_bytes_read=sum(w.act_bytes_read for w in ws),
                        weight_bytes=sum(w.weight_bytes for w in ws), bytes_written=sum(w.bytes_written for w in ws),
                        weights_unread=sum(w.weights_unread for w in ws),
                        parallel_work=sum(w.parallel_work for w in ws), other_ops=sum(w.other_ops for w in ws),
                        launches=1, pieces=(), kernel=kernel)  # the runtime's Split: a copy on one thread
        first = min(idx)
        merged[first] = replace(parts[0], name="+".join(p.name for p in parts), op_type=kernel,
                                nodes=tuple(n for p in parts for n in p.nodes), workload=total,
                                fusable_into=None, saved_bytes_if_fused=0)
        dropped.update(k for k in idx if k != first)
    return [merged.get(k, layer) for k, layer in enumerate(layers) if k not in dropped]
