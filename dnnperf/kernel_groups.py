"""Groups of ONNX nodes that a runtime runs as one kernel of its own even without fusion: ONNX
Runtime's CPU kernels for activation and transformer patterns (``runtime_kernel_groups``) and the
framework ops a GPU framework runs as one kernel where the export spells several nodes
(``framework_op_groups``). ``dnnperf.fusion`` turns the groups into fused layers."""

from __future__ import annotations

from dnnperf.ir import Graph
from dnnperf.tanh_gelu import ort_fuses_tanh_gelu, tanh_gelu_nodes

# ONNX Runtime's CPU provider replaces transformer patterns with kernels of its own, separate from
# the MatMul before them: an erf GELU (one Gelu op, or x * 0.5 * (1 + Erf(x / sqrt 2))) becomes a
# Gelu kernel, with the bias Add before it a BiasGelu kernel; a residual Add and the
# LayerNormalization after it a SkipLayerNormalization kernel, on 3-D tensors only ([1, 56, 56, 96]
# keeps its Add and LayerNormalization: 41 + 214 us, where [1, 3136, 96] fused took 685) and only
# where the LayerNormalization is the sum's one reader (post-norm BERT; a pre-norm block - ViT, GPT-2 -
# reads the sum again in the next residual and keeps both kernels: ORT 1.32's optimised graphs). A bias Add
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


def users_of(graph: Graph) -> dict[str, list]:
    """tensor -> the nodes that read it, each once, in graph order."""
    by: dict[str, list] = {}
    for node in graph.nodes:
        for i in dict.fromkeys(node.inputs):
            if i:
                by.setdefault(i, []).append(node)
    return by


def reads_through_identity(users: dict[str, list], tensor: str) -> list[tuple]:
    """(reader, the tensor it reads) for every node other than an Identity that reads ``tensor`` or an
    Identity copy of it (``users``: ``users_of``): who reads it once a runtime has removed its Identity
    nodes, as ONNX Runtime does before its fusions."""
    reads, seen, todo = [], set(), [tensor]
    while todo:
        t = todo.pop()
        for u in users.get(t, []):
            if u.op_type != "Identity":
                reads.append((u, t))
            elif u.name not in seen:
                seen.add(u.name)
                todo.extend(o for o in u.outputs if o)
    return reads


def _bias_add(graph: Graph, node) -> bool:
    """An Add of a constant vector to a computed tensor (a bias, which ORT folds into these kernels)."""
    if node is None or node.op_type != "Add" or len(node.inputs) != 2:
        return False
    consts = [i for i in node.inputs if i in graph.constants]
    if len(consts) != 1 or consts[0] == node.inputs[0] == node.inputs[1]:
        return False
    t = graph.tensors.get(consts[0])
    return t is not None and t.shape is not None and len(t.shape) <= 1


def becomes_gemm(graph: Graph, mm) -> bool:
    """Whether ONNX Runtime turns this MatMul and a bias Add after it into a Gemm: an input that is 2-D
    or whose shape the runtime knows (it reshapes 3-D and 4-D ones around a Gemm only when their dims
    are static: BERT-base with symbolic batch and sequence dims kept BiasGelu kernels)."""
    a = graph.tensors.get(mm.inputs[0]) if mm.inputs else None
    return a is not None and a.shape is not None and (len(a.shape) == 2 or not graph.symbolic_inputs)


def gemm_takes(graph: Graph, mm, bias: str) -> bool:
    """Whether ONNX Runtime turns MatMul ``mm`` and an Add of ``bias`` to its product into a Gemm
    (MatMulAddFusion): a 2-D second operand, an input whose shape it knows (``becomes_gemm``), and a
    bias a Gemm's C broadcasts: [N], or on a 2-D input [1, N], [M, 1] or [M, N]. Attention's scores
    (q times k^T, both 4-D) plus a position bias stay a MatMul and an Add (Swin-T's optimised graph)."""
    w = graph.tensors.get(mm.inputs[1]) if len(mm.inputs) > 1 else None
    a = graph.tensors.get(mm.inputs[0])
    c = graph.tensors.get(bias)
    if w is None or w.shape is None or len(w.shape) != 2 or c is None or c.shape is None or not becomes_gemm(graph, mm):
        return False
    n = w.shape[1]
    if len(c.shape) == 1:
        return c.shape[0] == n
    return len(a.shape) == 2 and len(c.shape) == 2 and (c.shape in ((1, n), (a.shape[0], 1), (a.shape[0], n)))


def _linear_product(graph: Graph, add, producer: dict, only_user):
    """The MatMul whose output only the bias Add ``add`` reads (a Linear's two nodes); else None."""
    if not _bias_add(graph, add):
        return None
    x = next(i for i in add.inputs if i not in graph.constants)
    mm = producer.get(x)
    if mm is None or mm.op_type != "MatMul" or len(mm.inputs) < 2 or only_user(x) is not add:
        return None
    return mm


def _gemm_bias(graph: Graph, add, producer: dict, only_user) -> bool:
    """A bias Add ONNX Runtime folds into the MatMul before it (2-D weights, ``becomes_gemm``)."""
    mm = _linear_product(graph, add, producer, only_user)
    if mm is None:
        return False
    return gemm_takes(graph, mm, next(i for i in add.inputs if i in graph.constants))


def silu_gate(mul, node_of, sole_reader) -> str | None:
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


def _sole_user(graph: Graph, users: dict | None = None):
    """t -> the one node that reads tensor t (None when several do, or t is a graph output); ``users``:
    ``users_of(graph)`` when the caller has it."""
    users = users_of(graph) if users is None else users

    def only_user(t):
        u = users.get(t, [])
        return u[0] if len(u) == 1 and t not in graph.outputs else None
    return only_user


def _kernel_groups(graph: Graph, match) -> list[tuple[str, list[str]]]:
    """(kernel, member node names in graph order) for every default-domain node ``match(graph, node,
    producer, only_user, users)`` turns into (kernel, member nodes); a node joins one group at most."""
    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    users = users_of(graph)
    only_user = _sole_user(graph, users)
    order = {n.name: k for k, n in enumerate(graph.nodes)}
    groups: list[tuple[str, list[str]]] = []
    taken: set[str] = set()
    for node in graph.nodes:
        found = match(graph, node, producer, only_user, users) if node.domain in ("", "ai.onnx") else None
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


def _framework_op(graph: Graph, node, producer: dict, only_user, _users: dict):
    if node.op_type == "Erf":
        found = _erf_gelu(node, producer, only_user)
        return None if found is None else ("Gelu", found[0])
    if node.op_type == "Add":
        mm = _linear_product(graph, node, producer, only_user)
        if mm is None or mm.inputs[1] not in graph.constants:
            return None
        a = graph.tensors.get(mm.inputs[0])
        if a is None or a.shape is None or len(a.shape) > 3:
            return None  # torch's linear folds the bias into addmm for 2-D and 3-D inputs only
        return "MatMul", [mm, node]
    if node.op_type == "Mul":
        gate = silu_gate(node, producer.get, lambda t: only_user(t) is node)
        return None if gate is None else ("Silu", [producer[gate], node])
    return None


def transposed_operands(graph: Graph, through: frozenset[str] = frozenset(),
                        users: dict | None = None) -> frozenset[str]:
    """Transpose nodes that swap the last two axes of a tensor only MatMuls read (attention's K^T): the
    product reads its operand transposed instead (cuBLAS and MLAS take a transposed operand; PyTorch's
    transpose is a view its matmul reads with strides; ONNX Runtime's MatMul + Transpose fusion makes a
    FusedMatMul, seen in its optimised graph of an exported Phi; TensorRT folds the shuffle into the
    product), so no kernel runs for them on any runtime. ``through``: nodes between the Transpose and
    its MatMul that the product also takes in (a scale folded into its alpha,
    ``dnnperf.rewrites.scaled_operands``); ``users``: ``users_of(graph)`` when the caller has it."""
    users = users_of(graph) if users is None else users
    out = set()
    for node in graph.nodes:
        if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx") or not node.outputs:
            continue
        perm = list(node.attrs.get("perm") or ())
        n = len(perm)
        if n < 2 or perm != list(range(n - 2)) + [n - 1, n - 2]:
            continue
        readers = users.get(node.outputs[0], [])
        if through:
            readers = [u for r in readers for u in (users.get(r.outputs[0], []) if r.name in through else [r])]
        if readers and node.outputs[0] not in graph.outputs and all(r.op_type == "MatMul" for r in readers):
            out.add(node.name)
    return frozenset(out)


def group_candidates(graph: Graph, groups: list[tuple[str, list[str]]]) -> dict[str, tuple[str, str]]:
    """``fuse`` candidates of kernel groups: each member after the first -> (the member that made
    the tensor it reads, that tensor), or (the member before it, None) when it reads none of theirs."""
    nodes = {n.name: n for n in graph.nodes}
    out: dict[str, tuple[str, str]] = {}
    for _kernel, names in groups:
        made: dict[str, str] = {}
        for k, name in enumerate(names):
            node = nodes[name]
            if k:  # a member that reads only what the first one reads (a tanh GELU's cube of x) joins too
                shared = next((i for i in reversed(node.inputs) if i in made), None)
                out[name] = (made[shared], shared) if shared is not None else (names[k - 1], None)
            for o in node.outputs:
                if o:
                    made[o] = name
    return out


def _const_value(graph: Graph, name: str):
    """The value of a small constant input of one element, None when it is not one."""
    v = graph.values.get(name) if name in graph.constants else None
    return float(v.reshape(-1)[0]) if v is not None and getattr(v, "size", 0) == 1 else None


def _last_axis_mean(graph: Graph, node) -> bool:
    """A ReduceMean over the last axis, keeping it (the output is the input with its last axis 1)."""
    if node is None or node.op_type != "ReduceMean" or not node.inputs or not node.outputs:
        return False
    x, y = graph.tensors.get(node.inputs[0]), graph.tensors.get(node.outputs[0])
    return x is not None and y is not None and x.shape is not None and y.shape is not None and len(x.shape) >= 2 \
        and tuple(y.shape) == tuple(x.shape[:-1]) + (1,) and x.shape[-1] > 1


def _spelled_norm(graph: Graph, p, producer: dict, only_user, users: dict):
    """A layer normalisation spelled as nodes, from its Pow(x, 2): x^2 -> ReduceMean over the last axis
    -> + eps -> Sqrt -> x / that -> * a constant scale. ONNX Runtime's SimplifiedLayerNormFusion makes
    one SimplifiedLayerNormalization kernel of it (RMSNorm: Llama's, T5's; ORT 1.32's profile of a
    Llama block: one 9 us kernel named after the scale's Mul, where the six ops were 87 us estimated,
    the Pow alone at its calibrated figure). When x is itself x0 minus the mean of x0 over the last
    axis and a constant shift is added after the scale, LayerNormFusion makes one LayerNormalization
    kernel of the whole: a layer norm exported before opset 17, or from TensorFlow. Probed in ORT
    1.32's optimised graphs: without the shift the Pow onwards is a SimplifiedLayerNormalization and
    the centring stays; without the scale, with x * Reciprocal(...) for the division, or over
    another axis than the last, nothing fuses. (kernel, members) or None."""
    if len(p.inputs) != 2 or _const_value(graph, p.inputs[1]) != 2.0 or not p.outputs:
        return None
    x = p.inputs[0]
    mean = only_user(p.outputs[0])
    if not _last_axis_mean(graph, mean):
        return None
    eps = only_user(mean.outputs[0])
    if eps is None or eps.op_type != "Add" or not any(i in graph.constants for i in eps.inputs):
        return None
    sq = only_user(eps.outputs[0])
    if sq is None or sq.op_type != "Sqrt":
        return None
    div = only_user(sq.outputs[0])
    if div is None or div.op_type != "Div" or list(div.inputs) != [x, sq.outputs[0]]:
        return None  # (x * Reciprocal(...) stays as it is: ORT 1.32 fuses the division only)
    scale = only_user(div.outputs[0])
    if scale is None or scale.op_type != "Mul" or not any(i in graph.constants for i in scale.inputs):
        return None  # no scale: no fusion
    members = [p, mean, eps, sq, div, scale]
    sub = producer.get(x)
    shift = only_user(scale.outputs[0])
    if sub is not None and sub.op_type == "Sub" and len(sub.inputs) == 2 and shift is not None \
            and _bias_add(graph, shift):  # (without the shift the runtime fuses the Pow onwards only)
        centre = producer.get(sub.inputs[1])
        readers = {u.name for u in users.get(x, [])}
        if _last_axis_mean(graph, centre) and centre.inputs[0] == sub.inputs[0] and readers == {p.name, div.name}:
            return "LayerNormalization", [centre, sub, *members, shift]
    return "SimplifiedLayerNormalization", members


def runtime_kernel_groups(graph: Graph) -> list[tuple[str, list[str]]]:
    """(kernel, member node names in graph order) for each pattern ONNX Runtime's CPU provider runs
    as one kernel of its own (``RUNTIME_KERNELS``)."""
    return _kernel_groups(graph, _ort_cpu_kernel)


def _ort_cpu_kernel(graph: Graph, node, producer: dict, only_user, users: dict):
    if node.op_type in ("Erf", "Tanh"):
        erf = node.op_type == "Erf"
        found = _erf_gelu(node, producer, only_user) if erf else tanh_gelu_nodes(graph, node, producer, only_user)
        if found is None or (not erf and not ort_fuses_tanh_gelu(graph, *found)):
            return None
        members, x = found
        head = producer.get(x)
        if _bias_add(graph, head) and not _gemm_bias(graph, head, producer, only_user):
            return "BiasGelu" if erf else "FastGelu", [head] + members  # (FastGelu takes the bias as an input)
        return "Gelu" if erf else "FastGelu", members
    if node.op_type == "Gelu":
        head = producer.get(node.inputs[0]) if node.inputs else None
        if not (_bias_add(graph, head) and only_user(head.outputs[0]) is node) \
                or _gemm_bias(graph, head, producer, only_user):
            return None  # a Gelu kernel, as the op already is
        return "BiasGelu", [head, node]
    if node.op_type == "Pow":
        return _spelled_norm(graph, node, producer, only_user, users)
    if node.op_type == "Mul":
        # x * Sigmoid(x) (SiLU / Swish): ONNX Runtime's QuickGelu kernel (alpha 1)
        gate = silu_gate(node, producer.get, lambda t: only_user(t) is node)
        return None if gate is None else ("QuickGelu", [producer[gate], node])
    if node.op_type == "LayerNormalization" and node.inputs:
        res = producer.get(node.inputs[0])
        if res is None or res.op_type != "Add" or any(i in graph.constants for i in res.inputs) \
                or only_user(node.inputs[0]) is not node:
            return None  # a pre-norm block reads the sum again (the next residual): Add and LayerNorm stay apart
        t = graph.tensors.get(node.inputs[0])
        if t is None or t.shape is None or len(t.shape) != 3:
            return None  # the runtime fuses 3-D tensors only
        for i in res.inputs:
            head = producer.get(i)
            if _bias_add(graph, head) and only_user(i) is res and not _gemm_bias(graph, head, producer, only_user):
                return "SkipLayerNormalization", [head, res, node]
        return "SkipLayerNormalization", [res, node]
    return None
