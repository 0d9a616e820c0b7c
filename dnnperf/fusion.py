"""What a typical inference runtime fuses (ONNX Runtime / TensorRT style), as a what-if.

Rules: an elementwise op, a BatchNormalization or a Cast fuses into the layer that produced its
input when that input has no other consumer, is not a model output and is as large as the op's
output (a broadcast to a larger tensor, like a squeeze-excite gate, is a kernel of its own); and
x * Sigmoid(x) (SiLU / Swish) is one kernel that reads x once; the producer may be a
Conv/ConvTranspose/Gemm/MatMul (epilogue fusion: Conv+BN+ReLU, MatMul+bias+GELU) or another
fused elementwise chain. A fused group launches one kernel and never writes or re-reads the
intermediate tensors.

Without fusion, groups of nodes still run as one kernel where the runtime has one for them: ONNX
Runtime's CPU kernels (``runtime_kernel_groups``) and, on GPUs, the framework ops an export spells as
several nodes (``framework_op_groups``: an erf GELU, a SiLU, a Linear's MatMul and bias Add).
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf.ir import DTYPE_BITS, Graph
from dnnperf.workload import MATRIX_FAMILIES, Workload

EPILOGUE_OPS = frozenset({
    "BatchNormalization", "Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
    "Gelu", "Erf", "Add", "Sub", "Mul", "Div", "Elu", "Selu", "Softplus", "Mish", "PRelu", "Swish",
    "Cast", "Sqrt", "Pow", "Neg", "Exp", "Where", "BiasGelu", "FastGelu", "QuickGelu", "BiasAdd",
})
ANCHOR_FAMILIES = MATRIX_FAMILIES | {"elementwise", "cast"}
# ops outside those families that runtimes run as a kernel taking an epilogue (ONNX Runtime runs a
# standalone BatchNormalization as a per-channel convolution)
KERNEL_ANCHOR_OPS = frozenset({"BatchNormalization"})
# what ONNX Runtime's CPU provider folds into a convolution or GEMM kernel: the activations its MLAS
# kernels apply in their epilogue (Relu, LeakyRelu, Tanh, Sigmoid, Clip, HardSigmoid, HardSwish), a
# BatchNormalization or a constant scale/shift folded into the weights (a MatMul's scale: Mul or Div),
# the bias or residual Add. Any other op (Erf, PRelu, Elu, Mish, Softplus, Exp...) after a convolution
# is a kernel of its own (checked op by op in the runtime's optimised graph), and most of them take the
# tensor out of the blocked layout and back (dnnperf.layout): a chain of twelve 128-channel 14 x 14
# convolutions ran 37 us per block slower with an Erf after each (bench/cpu_blocks.py)
CPU_CONV_ACTIVATIONS = frozenset({"Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh"})
CPU_KERNEL_EPILOGUES = CPU_CONV_ACTIVATIONS | {"BatchNormalization", "Add", "Sub", "Mul", "Div"}


def consumers_of(graph: Graph) -> dict[str, int]:
    n: dict[str, int] = {}
    for node in graph.nodes:
        for i in set(node.inputs):
            if i:
                n[i] = n.get(i, 0) + 1
    for o in graph.outputs:
        n[o] = n.get(o, 0) + 1
    return n


# ONNX Runtime's CPU provider replaces transformer patterns with kernels of its own, separate from
# the MatMul before them: an erf GELU (one Gelu op, or x * 0.5 * (1 + Erf(x / sqrt 2))) becomes a
# Gelu kernel, with the bias Add before it a BiasGelu kernel; a residual Add and the
# LayerNormalization after it a SkipLayerNormalization kernel, on 3-D tensors only ([1, 56, 56, 96]
# keeps its Add and LayerNormalization: 41 + 214 us, where [1, 3136, 96] fused took 685). A bias Add
# right after a MatMul with 2-D weights is not theirs: ONNX Runtime folds it into the product first
# (a Gemm, reshaped around 3-D and 4-D inputs), so the GELU after MatMul + bias is a Gelu kernel
# (profiled, ORT 1.32, x86: [1, 3136, 384]: Gemm 3,068 us, Gelu 404). Measured on ORT 1.2x, x86,
# [128, 768]: SkipLayerNormalization 240-256 us where a LayerNormalization alone takes 51-55 us;
# [128, 3072]: BiasGelu 205 us, Erf alone 104 us. x * Sigmoid(x) (SiLU, EfficientNet's and the
# YOLOs' activation) becomes a QuickGelu kernel whose sigmoid keeps it at one pace per element at any
# size (ORT 1.32, x86 with AVX-512, chains timed unprofiled: 4.0, 3.5, 3.3 and 3.3 G elements/s at
# 0.1, 0.17, 0.23 and 0.75 M elements, where an Add sped up to 7.1 G/s in cache and fell to 5.1 beyond
# it). (the names: dnnperf.vocab.RUNTIME_KERNELS)
_GELU_OPS = frozenset({"Div", "Mul", "Erf", "Add"})
# products whose bias Add ONNX Runtime folds in (a Gemm's C), and which take no other Add: a residual
# Add after them is a kernel of its own (unlike a convolution's, which its kernel sums in)
_BIAS_ONLY_ANCHORS = frozenset({"MatMul", "Gemm"})


def _users_of(graph: Graph) -> dict[str, list]:
    by: dict[str, list] = {}
    for node in graph.nodes:
        for i in dict.fromkeys(node.inputs):
            if i:
                by.setdefault(i, []).append(node)
    return by


def _bias_add(graph: Graph, node) -> bool:
    """An Add of a constant vector to a computed tensor (a bias, which ORT folds into these kernels)."""
    if node is None or node.op_type != "Add" or len(node.inputs) != 2:
        return False
    consts = [i for i in node.inputs if i in graph.constants]
    if len(consts) != 1 or consts[0] == node.inputs[0] == node.inputs[1]:
        return False
    t = graph.tensors.get(consts[0])
    return t is not None and t.shape is not None and len(t.shape) <= 1


def _becomes_gemm(graph: Graph, mm) -> bool:
    """Whether ONNX Runtime turns this MatMul and a bias Add after it into a Gemm: an input that is 2-D
    or whose shape the runtime knows (it reshapes 3-D and 4-D ones around a Gemm only when their dims
    are static: BERT-base with symbolic batch and sequence dims kept BiasGelu kernels)."""
    a = graph.tensors.get(mm.inputs[0]) if mm.inputs else None
    return a is not None and a.shape is not None and (len(a.shape) == 2 or not graph.symbolic_inputs)


def _gemm_bias(graph: Graph, add, producer: dict, only_user) -> bool:
    """A bias Add ONNX Runtime folds into the MatMul before it (2-D weights, ``_becomes_gemm``)."""
    if not _bias_add(graph, add):
        return False
    x = next(i for i in add.inputs if i not in graph.constants)
    mm = producer.get(x)
    if mm is None or mm.op_type != "MatMul" or len(mm.inputs) < 2 or only_user(x) is not add:
        return False
    w = graph.tensors.get(mm.inputs[1])
    return w is not None and w.shape is not None and len(w.shape) == 2 and _becomes_gemm(graph, mm)


def _silu_gate(mul, node_of, sole_reader) -> str | None:
    """The tensor s when ``mul`` computes x * s with s = Sigmoid(x) (SiLU / Swish) and
    ``sole_reader(s)`` holds (``mul`` is the only reader of s); else None. ``node_of``: tensor ->
    the node that produced it, or None."""
    for i in mul.inputs:
        sig = node_of(i) if i else None
        if sig is not None and sig.op_type == "Sigmoid" and sig.inputs and sig.inputs[0] in mul.inputs \
                and sole_reader(i):
            return i
    return None


def _erf_gelu(erf, producer: dict, only_user) -> tuple[list, str] | None:
    """(its nodes, x) when ``erf`` is the middle of an exported erf GELU, x * 0.5 * (1 + Erf(x / sqrt 2))
    (Div or Mul, Erf, then Add and Muls, each the only reader of what it reads)."""
    div = producer.get(erf.inputs[0]) if erf.inputs else None
    if div is None or div.op_type not in ("Div", "Mul") or not div.inputs:
        return None
    x = div.inputs[0]
    chain, cur = [div, erf], erf
    while len(chain) < 5:
        nxt = only_user(cur.outputs[0]) if cur.outputs else None
        if nxt is None or nxt.op_type not in _GELU_OPS:
            break
        chain.append(nxt)
        cur = nxt
    if not any(n.op_type == "Mul" and x in n.inputs for n in chain[2:]):
        return None  # not x * f(x): some other use of Erf
    return chain, x


def _sole_user(graph: Graph):
    """t -> the one node that reads tensor t (None when several do, or t is a graph output)."""
    users = _users_of(graph)

    def only_user(t):
        u = users.get(t, [])
        return u[0] if len(u) == 1 and t not in graph.outputs else None
    return only_user


def _kernel_groups(graph: Graph, match) -> list[tuple[str, list[str]]]:
    """(kernel, member node names in graph order) for every default-domain node ``match(graph, node,
    producer, only_user)`` turns into (kernel, member nodes); a node joins one group at most."""
    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    only_user = _sole_user(graph)
    order = {n.name: k for k, n in enumerate(graph.nodes)}
    groups: list[tuple[str, list[str]]] = []
    taken: set[str] = set()
    for node in graph.nodes:
        found = match(graph, node, producer, only_user) if node.domain in ("", "ai.onnx") else None
        if found is None:
            continue
        names = [m.name for m in found[1]]
        if any(n in taken for n in names):
            continue
        taken.update(names)
        groups.append((found[0], sorted(names, key=order.__getitem__)))
    return groups


def framework_op_groups(graph: Graph) -> list[tuple[str, list[str]]]:
    """(kernel, member node names in graph order) for each framework op that an ONNX export spells
    as several nodes and a GPU framework runs as one kernel: an erf GELU (five nodes; torch's
    ``nn.GELU``, ONNX Runtime's GeluFusion), x * Sigmoid(x) (``nn.SiLU``) and a Linear's bias Add
    after its MatMul on a 2-D or 3-D input (a constant vector added to the product with a constant
    matrix: torch's ``addmm``, ONNX Runtime's MatMul + Add fusion). The torch profiler on the H200
    counts convnext_tiny at 208 kernels (its export has 291 nodes that cost a kernel; 224 with these
    groups and the convolutions' bias kernels), swin_t at 433 (498; 427) and efficientnet_b0 at 254
    (303; 254)."""
    return _kernel_groups(graph, _framework_op)


def _framework_op(graph: Graph, node, producer: dict, only_user):
    if node.op_type == "Erf":
        found = _erf_gelu(node, producer, only_user)
        return None if found is None else ("Gelu", found[0])
    if node.op_type == "Add" and _bias_add(graph, node):
        mm = next((producer.get(i) for i in node.inputs if i not in graph.constants), None)
        if mm is None or mm.op_type != "MatMul" or len(mm.inputs) != 2 or mm.inputs[1] not in graph.constants \
                or only_user(mm.outputs[0]) is not node:
            return None
        a = graph.tensors.get(mm.inputs[0])
        if a is None or a.shape is None or len(a.shape) > 3:
            return None  # torch's linear folds the bias into addmm for 2-D and 3-D inputs only
        return "MatMul", [mm, node]
    if node.op_type == "Mul":
        gate = _silu_gate(node, producer.get, lambda t: only_user(t) is node)
        return None if gate is None else ("Silu", [producer[gate], node])
    return None


def group_candidates(graph: Graph, groups: list[tuple[str, list[str]]]) -> dict[str, tuple[str, str]]:
    """``fuse`` candidates of kernel groups: each member after the first -> (the member that made
    the tensor it reads, that tensor)."""
    nodes = {n.name: n for n in graph.nodes}
    out: dict[str, tuple[str, str]] = {}
    for _kernel, names in groups:
        made: dict[str, str] = {}
        for k, name in enumerate(names):
            node = nodes[name]
            if k:
                shared = next((i for i in reversed(node.inputs) if i in made), None)
                if shared is not None:
                    out[name] = (made[shared], shared)
            for o in node.outputs:
                if o:
                    made[o] = name
    return out


def runtime_kernel_groups(graph: Graph) -> list[tuple[str, list[str]]]:
    """(kernel, member node names in graph order) for each pattern ONNX Runtime's CPU provider runs
    as one kernel of its own (``RUNTIME_KERNELS``)."""
    return _kernel_groups(graph, _ort_cpu_kernel)


def _ort_cpu_kernel(graph: Graph, node, producer: dict, only_user):
    if node.op_type == "Erf":
        found = _erf_gelu(node, producer, only_user)
        if found is None:
            return None
        members, x = found
        head = producer.get(x)
        if _bias_add(graph, head) and not _gemm_bias(graph, head, producer, only_user):
            return "BiasGelu", [head] + members
        return "Gelu", members
    if node.op_type == "Gelu":
        head = producer.get(node.inputs[0]) if node.inputs else None
        if not (_bias_add(graph, head) and only_user(head.outputs[0]) is node) \
                or _gemm_bias(graph, head, producer, only_user):
            return None  # a Gelu kernel, as the op already is
        return "BiasGelu", [head, node]
    if node.op_type == "Mul":
        # x * Sigmoid(x) (SiLU / Swish): ONNX Runtime's QuickGelu kernel (alpha 1)
        gate = _silu_gate(node, producer.get, lambda t: only_user(t) is node)
        return None if gate is None else ("QuickGelu", [producer[gate], node])
    if node.op_type == "LayerNormalization" and node.inputs:
        res = producer.get(node.inputs[0])
        if res is None or res.op_type != "Add" or any(i in graph.constants for i in res.inputs):
            return None
        t = graph.tensors.get(node.inputs[0])
        if t is None or t.shape is None or len(t.shape) != 3:
            return None  # the runtime fuses 3-D tensors only
        for i in res.inputs:
            head = producer.get(i)
            if _bias_add(graph, head) and only_user(i) is res and not _gemm_bias(graph, head, producer, only_user):
                return "SkipLayerNormalization", [head, res, node]
        return "SkipLayerNormalization", [res, node]
    return None


def fusion_candidates(graph: Graph, rows, chains: bool = True,
                      groups: list[tuple[str, list[str]]] | None = None) -> dict[str, tuple[str, str]]:
    """node name -> (producer node name, shared tensor) for every node a runtime would fuse.

    ``chains``: elementwise ops also fuse into elementwise producers (GPU compilers such as
    TensorRT/XLA do). Without: ONNX Runtime's CPU provider, which fuses the epilogues its kernels take
    (``CPU_KERNEL_EPILOGUES``) into Conv/MatMul/Gemm
    and into a standalone BatchNormalization (it runs one as a per-channel convolution), and runs
    the patterns of ``runtime_kernel_groups`` (``groups`` when the caller has them) as kernels of
    their own."""
    cons = consumers_of(graph)
    produced: dict[str, object] = {}
    out = {}
    grouped: set[str] = set()
    epilogues = EPILOGUE_OPS if chains else CPU_KERNEL_EPILOGUES
    anchor_of: dict[str, object] = {}  # fused node -> its group's first node
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
        if node.op_type in epilogues and row.workload is not None:
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
                if _broadcasts(graph, i, node.outputs[0] if node.outputs else ""):
                    continue
                anchor = anchor_of.get(prod.node.name, prod.node)
                if not chains and anchor.op_type in _BIAS_ONLY_ANCHORS and not _product_takes(graph, anchor, node, i):
                    continue
                out[node.name] = (prod.node.name, i)
                anchor_of[node.name] = anchor
                break
        if node.op_type == "Mul" and node.name not in out and row.workload is not None:
            # x * sigmoid(x) (SiLU / Swish): one kernel reads x once and writes the product
            gate = _silu_gate(node, lambda t: produced[t].node if t in produced else None,
                              lambda t: cons.get(t, 0) == 1 and produced[t].workload is not None)
            if gate is not None:
                out[node.name] = (produced[gate].node.name, gate)
        for o in node.outputs:
            if o:
                produced[o] = row
    return out


def _product_takes(graph: Graph, anchor, node, shared: str) -> bool:
    """Whether ONNX Runtime's CPU provider folds ``node`` into the MatMul or Gemm ``anchor``: an
    activation, or an operation with a constant (a scale into the MatMul, a bias into a Gemm), never a
    computed operand (a residual Add is a kernel of its own). A MatMul's bias Add only where the
    runtime turns the two into a Gemm (``_becomes_gemm``)."""
    if node.op_type not in ("Add", "Sub", "Mul", "Div"):
        return True
    if any(x not in graph.constants for x in node.inputs if x and x != shared):
        return False
    return node.op_type != "Add" or anchor.op_type != "MatMul" or _becomes_gemm(graph, anchor)


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
    for g in groups:
        parts = [make_layer(row) for row, _ in g]  # precision what-ifs already applied per part
        if len(g) == 1:
            layers.append(parts[0])
            continue
        total: Workload = parts[0].workload
        read = {i for i in g[0][0].node.inputs if i}
        made = {o for o in g[0][0].node.outputs if o}
        inside = [i for r, _ in g for i in r.node.inputs if i]
        for part, (row, shared) in zip(parts[1:], g[1:]):
            w = part.workload
            saved = intermediate_bytes(graph.tensors.get(shared), w)
            # a tensor another kernel still reads is written all the same (a residual sum)
            kept = saved if cons.get(shared, 0) > inside.count(shared) else 0
            again = {i for i in row.node.inputs if i and i != shared and (i in read or i in made)
                     and i not in graph.constants}
            read.update(i for i in row.node.inputs if i)
            made.update(o for o in row.node.outputs if o)
            reread = sum(intermediate_bytes(graph.tensors.get(i), w) for i in again)  # already in registers
            total = Workload(
                family=total.family, dtype=total.dtype, macs=total.macs + w.macs,
                other_ops=total.other_ops + w.other_ops,
                act_bytes_read=total.act_bytes_read + w.act_bytes_read - saved - reread,
                weight_bytes=total.weight_bytes + w.weight_bytes,
                bytes_written=total.bytes_written + w.bytes_written - saved + kept,
                parallel_work=max(total.parallel_work, w.parallel_work), gemm=total.gemm,
                launches=total.launches, conv=total.conv, row=total.row or w.row,
                subnormals=total.subnormals + w.subnormals,
            )
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
