"""Rewrites ONNX Runtime's CPU provider makes to a graph before it runs it (its level-1 and level-2
graph optimisations), which change how many kernels run without changing what is computed: sibling
Gathers and Slices merged into one Split, a constant scale folded into the MatMul it feeds, arithmetic
that changes nothing removed. ``dnnperf.layers`` applies them with ``--fusion typical`` on CPU
profiles; each rule names the optimised graph it was read from (ONNX Runtime 1.32, x86)."""

from __future__ import annotations

from dnnperf.ir import Graph
from dnnperf.kernel_groups import gemm_takes, transposed_operands, users_of


def cpu_absorbed(graph: Graph, groups: list[tuple[str, list[str]]]) -> frozenset[str]:
    """Nodes ONNX Runtime's CPU provider runs no kernel for: a constant scalar scale it folds into the
    MatMul it feeds (``scaled_operands``; not one its own kernels take, ``groups``: an erf GELU's last
    half), attention's K^T, also behind such a scale (``kernel_groups.transposed_operands``), and
    arithmetic that changes nothing (``neutral_arithmetic``)."""
    users = users_of(graph)
    grouped = {n for _kernel, names in groups for n in names}
    scaled = frozenset(n for n in scaled_operands(graph, users) if n not in grouped)
    folded = scaled | transposed_operands(graph, through=scaled, users=users)
    return folded | batch_transposed_operands(graph, folded, users) | neutral_arithmetic(graph)


# the types whose Transpose ORT's CPU provider folds into a FusedMatMul: an fp16 model on a CPU without fp16
# arithmetic keeps its Transpose (probed: Cast, Cast, Relu, Transpose, MatMul, Cast; fp32 and fp64: FusedMatMul)
_FUSED_MATMUL_TYPES = frozenset({"float32", "float64"})


def batch_transposed_operands(graph: Graph, folded: frozenset[str], users: dict) -> frozenset[str]:
    """Transposes that bring an operand's first axis next to its last (perm (1, ..., r-2, 0, r-1), or
    (1, ..., r-2, r-1, 0) with the last two swapped too) for MatMuls only: ONNX Runtime's MatMul + Transpose
    fusion reads such an operand in place (a FusedMatMul's transBatchA / transBatchB), when the product's two
    operands have the same rank. Attention written as q.view(L, heads, d).transpose(0, 1) (torchvision's
    ViT) is the case. ``folded``: nodes the product takes in already (a constant scale, a K^T transpose,
    which composes with this one into another such permutation). Between the Transpose and the product
    may sit one Reshape to constant dims that splits only the leading (batch) axes, any 1s in front (the
    runtime moves it before the Transpose); not where the file's input dims are symbolic. Probed, ORT
    1.32's optimised graphs: (1, 0, 2) and (1, 2, 0, 3) into a MatMul, also behind a constant scale and
    with the batch symbolic: FusedMatMul, no Transpose; (0, 2, 1, 3) and (0, 2, 3, 1): Transpose and
    MatMul; against a 2-D weight or through a Reshape to a higher rank than the other operand's: the
    Transpose runs; through Reshapes of [12, 197, 64] to [1, 12, 197, 64], [2, 6, 197, 64] and, with the
    key's (0, 1, 3, 2) after it, [1, 12, 197, 64]: FusedMatMul; to [12, 1, 197, 64] or [12, 197, 8, 8],
    through an Unsqueeze, or with the batch symbolic: the Transpose runs. One with a reader that is no
    product runs (the products still read their operand in place)."""
    tensors = graph.tensors
    out = set()
    for node in graph.nodes:
        if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx") or not node.outputs \
                or not node.inputs or node.name in folded:
            continue
        x = tensors.get(node.inputs[0])
        if x is None or x.shape is None or x.dtype not in _FUSED_MATMUL_TYPES or len(x.shape) < 3:
            continue
        r = len(x.shape)
        perm = [int(p) for p in node.attrs.get("perm") or range(r - 1, -1, -1)]
        if perm[0] == 1 and read_in_place(perm) and _only_products(graph, node.outputs[0], folded, users, False):
            out.add(node.name)
    return frozenset(out)


def read_in_place(perm) -> bool:
    """Whether ONNX Runtime's FusedMatMul reads an operand so permuted in place: its last two axes swapped, or
    its first axis moved next to its last ((1, ..., r-2, 0, r-1), or (1, ..., r-2, r-1, 0) with the swap)."""
    r = len(perm)
    perm = list(perm)
    if r >= 2 and perm == list(range(r - 2)) + [r - 1, r - 2]:
        return True
    return r >= 3 and perm[:r - 2] == list(range(1, r - 1)) and sorted(perm[r - 2:]) == [0, r - 1]


def _only_products(graph: Graph, tensor: str, folded: frozenset[str], users: dict, reshaped: bool) -> bool:
    """Whether every reader of ``tensor`` is a MatMul whose operands have one rank, reached through nodes the
    product takes in (``folded``) and at most one Reshape that splits only leading axes (``_leading_split``)."""
    readers = [r for r in users.get(tensor, []) if not _folded_shape(graph, r)]
    if not readers or tensor in graph.outputs:
        return False
    for r in readers:
        if r.name in folded and r.outputs:
            ok = _only_products(graph, r.outputs[0], folded, users, reshaped)
        elif r.op_type == "MatMul" and r.domain in ("", "ai.onnx") and len(r.inputs) == 2:
            a, b = (graph.tensors.get(i) for i in r.inputs)
            ok = a is not None and b is not None and a.shape is not None and b.shape is not None \
                and len(a.shape) == len(b.shape)
        elif r.op_type == "Reshape" and not reshaped and not graph.symbolic_inputs and r.outputs \
                and len(r.inputs) > 1 and r.inputs[1] in graph.constants:
            ok = _leading_split(graph.tensors.get(tensor), graph.tensors.get(r.outputs[0])) \
                and _only_products(graph, r.outputs[0], folded, users, reshaped=True)
        else:
            ok = False
        if not ok:
            return False
    return True


def _folded_shape(graph: Graph, node) -> bool:
    """A Shape (or Size) of a tensor whose value the runtime folds at load time: it reads no data."""
    return node.op_type in ("Shape", "Size") and bool(node.outputs) and node.outputs[0] in graph.constants \
        and node.outputs[0] not in graph.host_shape


def _leading_split(before, after) -> bool:
    """A reshape that keeps the last two axes and cuts each leading axis into factors larger than 1 in
    order, with any 1s in front only ([12, 197, 64] -> [1, 12, 197, 64] or [2, 6, 197, 64]; not
    [12, 1, 197, 64])."""
    if before is None or after is None or before.shape is None or after.shape is None:
        return False
    b, a = before.shape, after.shape
    if len(b) < 3 or len(a) < len(b) or a[-2:] != b[-2:]:
        return False
    lead = list(a[:-2])
    while lead and lead[0] == 1:
        lead.pop(0)
    if any(d <= 1 for d in lead):
        return False
    for d in b[:-2]:
        prod = 1
        while lead and prod < d and d % (prod * lead[0]) == 0:
            prod *= lead.pop(0)
        if prod != d:
            return False
    return not lead


def product_takes(graph: Graph, anchor, node, shared: str, biased: bool = False) -> bool:
    """Whether ONNX Runtime's CPU provider folds ``node``, an epilogue candidate reading ``shared``, into the
    MatMul or Gemm ``anchor`` (``dnnperf.fusion``): an activation; into a MatMul a scale by one constant value
    (times, or divided by, a scalar: the FusedMatMul's alpha) and a bias Add where the runtime turns the two
    into a Gemm (``gemm_takes``); never a computed operand (a residual Add is a kernel of its own). Probed,
    ORT 1.32's optimised graphs: a MatMul times or divided by a scalar, [1] or [1, 1, 1]: FusedMatMul; times a
    [64] vector or a [12, 1, 1] per-head scale (Swin V2's logit scale), minus a scalar, or a Gemm (``biased``:
    a MatMul that took its bias) times a scalar or plus a vector: the Mul, Sub or Add runs as a kernel."""
    if node.op_type not in ("Add", "Sub", "Mul", "Div"):
        return True
    others = [x for x in node.inputs if x and x != shared]
    if len(others) != 1 or others[0] not in graph.constants or anchor.op_type != "MatMul" or biased:
        return False
    if node.op_type == "Add":
        return gemm_takes(graph, anchor, others[0])
    t = graph.tensors.get(others[0])
    return node.op_type != "Sub" and t is not None and t.numel == 1 and (node.op_type == "Mul"
                                                                         or node.inputs[1] == others[0])


def split_groups(graph: Graph) -> list[list[str]]:
    """Sibling Gathers and Slices that ONNX Runtime's CPU provider runs as one Split (its
    GatherSliceToSplitFusion): every Gather and Slice reading one tensor t, each taking a constant part
    of the same axis of t (a Gather one constant int64 index; a Slice constant starts, ends and axes
    on one axis, steps 1), the parts together covering the axis exactly once. Other readers of t do not
    stop it. The runtime needs the axis's size from the file: with the input dims symbolic, a tensor
    reshaped to a shape computed at run time (torchvision's exports: ShuffleNetV2, ViT, Swin) has none
    (``_sized_at_run_time``), and axis 0 is taken for the batch. Probed, ORT 1.32: q, k, v taken by
    three Gathers, a channel split by two Slices (ShuffleNetV2) and a roll (two Slices, Swin) become a
    Split, also on a symbolic batch where the runtime knows the axis; two Gathers of three rows,
    overlapping or uncovering Slices, Slices on two axes, or a missing axes input stay apart."""
    values = graph.values
    unknown = _sized_at_run_time(graph) if graph.symbolic_inputs else frozenset()
    readers: dict[str, list] = {}
    for node in graph.nodes:
        if node.op_type in ("Gather", "Slice") and node.domain in ("", "ai.onnx") and node.inputs and node.inputs[0]:
            readers.setdefault(node.inputs[0], []).append(node)
    out = []
    for t, nodes in readers.items():
        tensor = graph.tensors.get(t)
        if len(nodes) < 2 or tensor is None or not tensor.shape or t in graph.constants:
            continue
        parts = [_part(n, tensor.shape, values) for n in nodes]
        if any(p is None for p in parts) or len({p[0] for p in parts}) != 1:
            continue
        if graph.symbolic_inputs and (t in unknown or parts[0][0] == 0):
            continue  # the runtime cannot know that axis's size (or it is the symbolic batch)
        spans = sorted(p[1:] for p in parts)
        if spans[0][0] == 0 and spans[-1][1] == tensor.shape[parts[0][0]] \
                and all(a[1] == b[0] for a, b in zip(spans, spans[1:])):
            out.append([n.name for n in nodes])
    return out


def _sized_at_run_time(graph: Graph) -> frozenset[str]:
    """With the input dims symbolic in the file: the tensors whose shape the runtime learns only when it
    runs, because some node before them takes a shape computed from a Shape at run time
    (``Graph.host_shape``; a Reshape to x.size(0), groups, -1...) or a value built from one."""
    host = graph.host_shape | graph.runtime_built
    out: set[str] = set()
    for node in graph.nodes:
        outs = [o for o in node.outputs if o]
        if not outs or all(o in host for o in outs):
            continue  # the shape arithmetic itself
        if any(i in out or i in host for i in node.inputs if i):
            out.update(outs)
    return frozenset(out)


def _part(node, shape: tuple, values: dict) -> tuple[int, int, int] | None:
    """(axis, start, end) of the part of its input a Gather or Slice takes, None when the runtime
    cannot split it (a computed index, several axes, a step other than 1, an empty part)."""
    rank = len(shape)
    if node.op_type == "Gather":
        idx = values.get(node.inputs[1]) if len(node.inputs) > 1 else None
        if idx is None or idx.dtype != "int64" or idx.size != 1:
            return None
        axis = int(node.attrs.get("axis", 0))
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            return None
        i = int(idx.reshape(-1)[0])
        i = i + shape[axis] if i < 0 else i
        return (axis, i, i + 1) if 0 <= i < shape[axis] else None
    if len(node.inputs) < 4 or not node.inputs[3]:
        return None  # the runtime takes a Slice without its axes input as it is
    got = [values.get(i) for i in node.inputs[1:4]]
    steps = values.get(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] else None
    if any(v is None or v.size != 1 for v in got) or (len(node.inputs) > 4 and node.inputs[4] and steps is None):
        return None
    if steps is not None and (steps.size != 1 or int(steps.reshape(-1)[0]) != 1):
        return None
    start, end, axis = (int(v.reshape(-1)[0]) for v in got)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        return None
    n = shape[axis]
    start = min(max(start + n if start < 0 else start, 0), n)
    end = min(max(end + n if end < 0 else end, 0), n)
    return (axis, start, end) if start < end else None


def scaled_operands(graph: Graph, users: dict | None = None) -> frozenset[str]:
    """Mul (or Div) nodes that scale one MatMul operand by a constant scalar: ONNX Runtime folds the
    scale into the product (MatMulScaleFusion: a FusedMatMul's alpha), so no kernel runs for them on a
    CPU. Attention's q and k scaled apart (torch's scaled_dot_product_attention) become one FusedMatMul
    in its optimised graph of ViT-B/16 at a static batch; with the batch symbolic in the file the scale
    is computed at run time from a Shape and the Muls run (``Graph.runtime_built``). ``users``:
    ``users_of(graph)`` when the caller has it."""
    users = users_of(graph) if users is None else users
    out = set()
    for node in graph.nodes:
        if node.op_type not in ("Mul", "Div") or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2 \
                or not node.outputs or node.outputs[0] in graph.outputs:
            continue
        scale = node.inputs[1] if node.op_type == "Div" else next(
            (i for i in node.inputs if i in graph.constants), None)
        x = node.inputs[0] if scale == node.inputs[1] else node.inputs[1]
        if scale is None or scale not in graph.constants or scale in graph.runtime_built or x in graph.constants:
            continue
        t = graph.tensors.get(scale)
        if t is None or t.shape is None or t.numel != 1:
            continue
        readers = users.get(node.outputs[0], [])
        if len(readers) == 1 and readers[0].op_type == "MatMul" and not _into_gemm(graph, readers[0], users):
            out.add(node.name)
    return frozenset(out)


def _into_gemm(graph: Graph, mm, users: dict) -> bool:
    """Whether the runtime first turns MatMul ``mm`` and the Add after it into a Gemm (its bias): the
    scale before it then runs (probed: x * c -> MatMul(W) -> + b ran Mul, Gemm; without the bias one
    FusedMatMul)."""
    after = users.get(mm.outputs[0], []) if mm.outputs else []
    if len(after) != 1 or after[0].op_type != "Add" or mm.outputs[0] in graph.outputs:
        return False
    bias = [i for i in after[0].inputs if i and i != mm.outputs[0]]
    return len(bias) == 1 and gemm_takes(graph, mm, bias[0])


def neutral_arithmetic(graph: Graph) -> frozenset[str]:
    """Add or Sub of 0, Mul or Div by 1 (one constant value, on the right for Sub and Div) that changes
    neither the values nor the shape of its other operand: ONNX Runtime's optimiser removes them
    (NoopElimination; not one whose output is a graph output, nor a per-channel constant of ones, which
    it runs as a 1x1 depthwise convolution). Exports leave them behind (MobileOne's + 0 after each
    block, a residual branch scaled by 1.0)."""
    out = set()
    for node in graph.nodes:
        if node.op_type not in ("Add", "Sub", "Mul", "Div") or node.domain not in ("", "ai.onnx") \
                or len(node.inputs) != 2 or not node.outputs or node.outputs[0] in graph.outputs:
            continue
        sides = (1,) if node.op_type in ("Sub", "Div") else (0, 1)
        for k in sides:
            c, x = node.inputs[k], node.inputs[1 - k]
            v = graph.values.get(c) if c in graph.constants and x not in graph.constants else None
            if v is None or v.size != 1:
                continue
            tx, to = graph.tensors.get(x), graph.tensors.get(node.outputs[0])
            neutral = 0.0 if node.op_type in ("Add", "Sub") else 1.0
            if float(v.reshape(-1)[0]) == neutral and tx is not None and to is not None and tx.shape == to.shape:
                out.add(node.name)
                break
    return frozenset(out)


def pushed_transposes(graph: Graph) -> dict[str, list[tuple[tuple, list[int]]]]:
    """The Transposes ONNX Runtime's transpose optimizer pushes through the Gathers that read them, and the
    Transposes they then become: {node: [(input shape, permutation), ...]}. A Transpose every reader of which
    is a Gather of one constant scalar index (Swin's and timm's q, k, v taken from one permuted qkv tensor)
    runs no kernel of its own ([]); each Gather takes its index from the Transpose's input instead, and its
    result is transposed by the rest of the permutation: a Transpose of its own, listed under the pushed one,
    or, where the Gather's one reader is a Transpose, composed with that one (listed under it; a key transpose
    (0, 1, 3, 2) after (0, 2, 1, 3) becomes (0, 2, 3, 1), which a MatMul cannot take as a transposed operand).
    ORT 1.32's optimised graphs of [1, 49, 3, 3, 32] (2, 0, 3, 1, 4) followed by three such Gathers, static
    and symbolic batch, with attention after them, as graph outputs or under a Relu each: always pushed, each
    branch a Transpose (0, 2, 1, 3), the key's (0, 2, 3, 1) before a FusedMatMul that takes neither."""
    users = users_of(graph)
    out: dict[str, list] = {}
    for node in graph.nodes:
        if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx") or not node.outputs \
                or node.outputs[0] in graph.outputs or node.name in out:  # (already composed with one before it)
            continue
        x = graph.tensors.get(node.inputs[0]) if node.inputs else None
        readers = users.get(node.outputs[0], [])
        if x is None or not x.shape or not readers or not all(_scalar_gather(g, node.outputs[0], graph)
                                                               for g in readers):
            continue
        rank = len(x.shape)
        perm = [int(p) for p in node.attrs.get("perm") or range(rank - 1, -1, -1)]
        if sorted(perm) != list(range(rank)):
            continue
        out[node.name] = []
        for g in readers:
            a = int(g.attrs.get("axis", 0)) % rank
            src = perm[a]
            shape = tuple(d for i, d in enumerate(x.shape) if i != src)
            rest = [p - (p > src) for i, p in enumerate(perm) if i != a]
            after = users.get(g.outputs[0], []) if g.outputs and g.outputs[0] not in graph.outputs else []
            if len(after) == 1 and after[0].op_type == "Transpose" and after[0].domain in ("", "ai.onnx") \
                    and len(after[0].attrs.get("perm") or ()) == len(rest):
                out[after[0].name] = [(shape, [rest[int(q)] for q in after[0].attrs["perm"]])]
            else:
                out[node.name].append((shape, rest))
    _merged_through_split(graph, users, out)
    return out


def _merged_through_split(graph: Graph, users: dict, out: dict) -> None:
    """Adds to ``out`` (``pushed_transposes``) a Transpose whose one reader is a Reshape to constant dims that only
    splits axes (each into factors larger than 1, in order) and is read by one other Transpose: ONNX Runtime's
    transpose optimizer reshapes the first one's input instead and composes the two into one permutation, listed
    under the second (the first runs no kernel). MaxViT's grid departition: (0, 2, 1, 3) on [1, 64, 49, 64],
    Reshape to [1, 7, 7, 8, 8, 64], (0, 5, 1, 3, 2, 4) -> one Transpose (0, 5, 3, 1, 4, 2) of [1, 8, 8, 7, 7, 64]
    (9 kernels fewer, as its optimised graph; 4 more it merges where the Reshapes also move axes of size 1 are not
    followed). Probed (ORT 1.32): a split of one axis also merges; a Reshape that merges axes, a first Transpose
    read by another node too, or a symbolic batch: both stay."""
    for t1 in graph.nodes:
        if t1.op_type != "Transpose" or t1.domain not in ("", "ai.onnx") or t1.name in out or not t1.outputs \
                or not t1.inputs or t1.outputs[0] in graph.outputs:
            continue
        readers = [r for r in users.get(t1.outputs[0], []) if not _folded_shape(graph, r)]
        if len(readers) != 1 or readers[0].op_type != "Reshape" or len(readers[0].inputs) < 2 \
                or readers[0].inputs[1] not in graph.constants or not readers[0].outputs:
            continue
        z = readers[0].outputs[0]
        after = [r for r in users.get(z, []) if not _folded_shape(graph, r)]
        if z in graph.outputs or len(after) != 1 or after[0].op_type != "Transpose" or after[0].name in out \
                or graph.symbolic_inputs:
            continue
        x, y, zt = (graph.tensors.get(t) for t in (t1.inputs[0], t1.outputs[0], z))
        if x is None or y is None or zt is None or x.shape is None or y.shape is None or zt.shape is None:
            continue
        groups = _split_axes(y.shape, zt.shape)
        rank = len(x.shape)
        p = [int(a) for a in t1.attrs.get("perm") or range(rank - 1, -1, -1)]
        q = [int(a) for a in after[0].attrs.get("perm") or range(len(zt.shape) - 1, -1, -1)]
        if groups is None or sorted(p) != list(range(rank)) or sorted(q) != list(range(len(zt.shape))):
            continue
        start, shape = {}, []  # the first Transpose's input, each axis j cut as the group of the axis it went to
        for j in range(rank):
            i = p.index(j)
            start[i] = len(shape)
            shape += groups[i]
        pairs = [(i, k) for i, g in enumerate(groups) for k in range(len(g))]  # the Reshape's axes
        out[t1.name] = []
        out[after[0].name] = [(tuple(shape), [start[pairs[a][0]] + pairs[a][1] for a in q])]


def _split_axes(before: tuple, after: tuple) -> list[list[int]] | None:
    """For each axis of ``before``, the axes of ``after`` it is cut into, when a reshape only splits axes (a 1
    stays one axis of 1, every other into factors larger than 1, in order); None for any other reshape."""
    groups, k = [], 0
    for d in before:
        if d == 1:
            if k >= len(after) or after[k] != 1:
                return None
            groups.append([1])
            k += 1
            continue
        g, prod = [], 1
        while k < len(after) and after[k] > 1 and prod < d and d % (prod * after[k]) == 0:
            prod *= after[k]
            g.append(after[k])
            k += 1
        if prod != d:
            return None
        groups.append(g)
    return groups if k == len(after) else None


def _scalar_gather(node, tensor: str, graph: Graph) -> bool:
    """A Gather of ``tensor`` at one constant scalar index."""
    if node.op_type != "Gather" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 2 \
            or node.inputs[0] != tensor or not node.outputs:
        return False
    idx = graph.values.get(node.inputs[1])
    return idx is not None and getattr(idx, "ndim", 1) == 0 and node.inputs[1] in graph.constants
