"""16-bit floats on a CPU without 16-bit arithmetic.

A CPU profile whose units list no fp16/bf16 rate computes such models in fp32. ONNX Runtime's CPU
provider does it this way: ops that only move data (Reshape, Transpose, Slice, Concat, Gather,
Split...) have 16-bit kernels and run as they are; before any other op it inserts a Cast of each
16-bit input to fp32, runs the op in fp32, and casts the result back where it meets a data-movement
op or a graph output. Consecutive fp32 ops pass the fp32 tensor on (no cast between them), and a
Cast of a weight is folded once at load time (the weight is then an fp32 weight) unless several nodes
share the weight: then it stays a Cast run at every inference, and a convolution reading it runs
outside the blocked layout (``shared_half_weights``). A data-movement op fed by fp32 layers alone and
read by fp32 layers alone runs in fp32 itself (the runtime's isolated-node rule: no cast either side).

So a 16-bit model costs the fp32 model's compute and traffic, plus a Cast kernel at each boundary:
measured on a 2-core x86 VM, a Llama-architecture decoder step in fp16 took 371 us, the same model
in fp32 336 us (32 Casts in the fp16 run's profile); costed with 16-bit bytes it came out at 172 us.

Each Cast becomes a layer of its own (op type ``Cast``, family ``elementwise``) so it shows in the
table and the totals. The Casts of ONNX Runtime 1.32's optimised graphs of fp16 ResNet-50, SqueezeNet 1.1
and ShuffleNet V2 (8, 9 and 41) are those this module adds; MobileNetV2 14 against 12, a decoder 32
against 35. Those CNNs' exporter shared equal biases between convolutions, which put 53 of ResNet-50's
53 convolutions outside the blocked layout (the fp16 model 1.4x the fp32 one's time on a 2-core x86 VM).

Exceptions, read off the runtime's optimised graphs of one-op 16-bit models (version 1.32): Tile, Pad,
DepthToSpace, SpaceToDepth and Trilu have no 16-bit kernel (cast like the compute ops); and an op with
no 16-bit kernel whose ONNX schema defines it as a function runs as that function's nodes, each an
fp32 kernel of its own (``INLINED``): a 16-bit Softmax is ReduceMax, Sub, Exp, ReduceSum and Div, five
passes where the fp32 model runs one (a [1, 12, 128, 128] Softmax on a 2-core x86 VM: 63 us in fp16,
24 in fp32, where one cast pass each way came to 36).
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf.ir import Graph, Node, Tensor
from dnnperf.layout import convert_once, layer_io
from dnnperf.scoring import Layer, with_precision
from dnnperf.vocab import HOST_SHAPE_FAMILIES, PLAIN_CONV
from dnnperf.workload import Workload

HALF = frozenset({"float16", "bfloat16"})
# families whose kernels take 16-bit tensors as they are (data movement, and no kernel at all) ...
HALF_NATIVE = frozenset({"movement", "view", "shape"}) | HOST_SHAPE_FAMILIES
# ... but for these data movement ops, cast like any compute op
HALF_CAST_MOVEMENT = frozenset({"Tile", "Pad", "DepthToSpace", "SpaceToDepth", "Trilu"})
# element ops the runtime has 16-bit kernels of its own for: they take 16-bit tensors as they are, no casts;
# those of HALF_LOOPS convert element by element, at a pace calibrate times (loop_ns '<op>.half'; a 2-core
# x86 VM, 196,608-786,432 fp16 elements: Clip 1.8-2.2 ns an element where the fp32 kernel takes 0.05, Max
# 0.41, Min 0.59, Round 5.4, Shrink 7.2), the others as fast as a cast would be
HALF_LOOPS = ("Clip", "Max", "Min", "Round", "Shrink")
HALF_ELEMENT_NATIVE = frozenset(HALF_LOOPS) | {"Sign", "IsNaN", "IsInf"}
CONVS = frozenset({"Conv", "ConvTranspose"})  # whose weight or bias a shared 16-bit weight unblocks

# ONNX function bodies the runtime runs for a 16-bit op it has no kernel for: op -> (first opset, last
# opset or None, steps). A step is (op, inputs, output): inputs name the op's input 'x', its second input
# 's' (PRelu's slope), a scalar constant 'c' or an earlier step by index; the output has the input's
# shape ('x', 'b' as booleans), the op's reduced shape ('r': its output's, or Softmax's with the axis
# kept as 1) or is a scalar ('c'). HardSwish at opset 18 was seen to expand its HardSigmoid too (five
# kernels), Mish at 18 its Softplus (three): costed here as the shorter bodies.
BODY_NOTE = "no 16-bit"  # how the note of a layer run as its function body begins (dnnperf.fixes reads it)
_SOFTMAX = (("ReduceMax", ("x",), "r"), ("Sub", ("x", 0), "x"), ("Exp", (1,), "x"), ("ReduceSum", (2,), "r"))
_RELU_WHERE = (("Less", ("x", "c"), "b"), ("Where", (1, 0, "x"), "x"))
INLINED = {
    "Softmax": (13, None, _SOFTMAX + (("Div", (2, 3), "x"),)),
    "LogSoftmax": (13, None, _SOFTMAX + (("Log", (3,), "r"), ("Sub", (1, 4), "x"))),
    "HardSwish": (14, None, (("HardSigmoid", ("x",), "x"), ("Mul", ("x", 0), "x"))),
    "LeakyRelu": (16, 18, (("Mul", ("x", "c"), "x"),) + _RELU_WHERE),
    "PRelu": (16, 18, (("Mul", ("x", "s"), "x"),) + _RELU_WHERE),
    "Gelu": (20, None, (("Mul", ("x", "c"), "x"), ("Sqrt", ("c",), "c"), ("Div", ("x", 1), "x"), ("Erf", (2,), "x"),
                        ("Sum", (3, "c"), "x"), ("Mul", (0, 4), "x"))),
    "Gelu.tanh": (20, None, (("Mul", ("c", "x"), "x"), ("Pow", ("x", "c"), "x"), ("Mul", ("c", 1), "x"),
                             ("Sum", ("x", 2), "x"), ("Sqrt", ("c",), "c"), ("Mul", (4, 3), "x"), ("Tanh", (5,), "x"),
                             ("Sum", ("c", 6), "x"), ("Mul", (0, 7), "x"))),
    "Mish": (18, None, (("Softplus", ("x",), "x"), ("Tanh", (0,), "x"), ("Mul", ("x", 1), "x"))),
    "ReduceL1": (18, None, (("Abs", ("x",), "x"), ("ReduceSum", (0,), "r"))),
    "ReduceLogSum": (18, None, (("ReduceSum", ("x",), "r"), ("Log", (0,), "r"))),
    "ReduceSumSquare": (18, None, (("Mul", ("x", "x"), "x"), ("ReduceSum", (0,), "r"))),
}


def _cast(graph: Graph, tensor: str, to: str) -> Layer | None:
    t = graph.tensors.get(tensor)
    if t is None or not t.numel:
        return None
    n = t.numel
    half, full = 2 * n, 4 * n
    w = Workload("elementwise", dtype="float32", other_ops=n,
                 act_bytes_read=half if to == "fp32" else full, bytes_written=full if to == "fp32" else half,
                 parallel_work=n, note="precision cast added by the runtime (no 16-bit arithmetic on this CPU)")
    return Layer(f"cast to {to} {tensor}", "Cast", (), w, t.shape)


def _body_key(node: Node, opset: int) -> str | None:
    """The ``INLINED`` entry a 16-bit node of the default domain runs as, at the model's opset."""
    if node.domain not in ("", "ai.onnx"):
        return None
    key = f"{node.op_type}.tanh" if node.op_type == "Gelu" and node.attrs.get("approximate") == "tanh" else node.op_type
    first, last, _ = INLINED.get(key, (0, -1, ()))
    return key if first <= opset and (last is None or opset <= last) else None


def inlined_body(graph: Graph, node: Node, family: str) -> Workload | None:
    """The fp32 kernels of the function body ONNX Runtime runs for ``node`` (``INLINED``), each costed by
    its own op's cost function, as the parts of one workload (scored one by one, as a control-flow
    body's are); None when the op is not one of them or a shape is missing."""
    from dnnperf.ops import Unsupported, cost_node

    key = _body_key(node, graph.opset)
    x = graph.tensors.get(node.inputs[0]) if node.inputs else None
    y = graph.tensors.get(node.outputs[0]) if node.outputs else None
    if key is None or x is None or x.shape is None or y is None or y.shape is None:
        return None
    reduced = y.shape
    if node.op_type in ("Softmax", "LogSoftmax"):
        axis = int(node.attrs.get("axis", -1)) % max(len(x.shape), 1)
        reduced = tuple(1 if i == axis else d for i, d in enumerate(x.shape))
    shapes = {"x": (x.shape, "float32"), "b": (x.shape, "bool"), "r": (reduced, "float32"), "c": ((), "float32")}
    tensors = {"x": Tensor("x", x.shape, "float32"), "c": Tensor("c", (), "float32")}
    if len(node.inputs) > 1 and graph.tensors.get(node.inputs[1]) is not None:
        s = graph.tensors[node.inputs[1]]
        tensors["s"] = Tensor("s", s.shape, "float32")
    nodes = []
    for i, (op, ins, out) in enumerate(INLINED[key][2]):
        tensors[f"t{i}"] = Tensor(f"t{i}", *shapes[out])
        nodes.append(Node(f"{node.name}/{op}", op, "", tuple(a if isinstance(a, str) else f"t{a}" for a in ins),
                          (f"t{i}",), {}))
    body = Graph(node.name, nodes, tensors, frozenset({"c", "s"} & set(tensors)), ("x",), (nodes[-1].outputs[0],),
                 graph.opset)
    total, parts = Workload(family, launches=0), []
    for n in nodes:
        try:
            w = cost_node(body, n)
        except Unsupported:
            return None
        total = total + w
        parts.append((n.op_type, w, 1))
    ops = ", ".join(op for op, _, _ in parts)
    return replace(total, family=family, dtype="float32", parts=tuple(parts),
                   note=f"{BODY_NOTE} {node.op_type} kernel: the runtime runs its ONNX function body, {len(parts)} "
                        f"fp32 kernels ({ops})")


def shared_half_weights(graph: Graph) -> dict[str, str]:
    """The 16-bit initializers (and their Identity copies) that more than one node reads, each -> the
    initializer. The runtime casts a 16-bit weight to fp32 once at load time when one node reads it, but
    one that several nodes share (after it drops the Identity nodes between) stays a Cast node run at every
    inference (a Cast layer here, before the first fp32 layer that reads it); a convolution
    whose weights or bias come from one is then not blocked (the blocked layout reorders constant
    weights at load time): its optimised graph of a ResNet-50 whose 53 convolutions share their biases
    (an exporter's dedup of equal tensors) keeps all 53 in the plain kernel, where each with a bias of
    its own runs blocked."""
    from dnnperf.kernel_groups import reads_through_identity, users_of

    users = users_of(graph)
    out: dict[str, str] = {}
    made = {n.outputs[0] for n in graph.nodes if n.op_type == "Constant" and n.outputs and n.outputs[0]}
    for name in sorted(graph.initializers | made):
        t = graph.tensors.get(name)
        if t is None or t.dtype not in HALF:
            continue
        reads = reads_through_identity(users, name)
        if len(reads) > 1:
            out.update(dict.fromkeys({name} | {alias for _, alias in reads}, name))
    return out


def add_casts(graph: Graph, layers: list[Layer]) -> list[Layer]:
    """``layers`` with the 16-bit compute layers costed in fp32 and a ``Cast`` layer at each
    boundary between them and 16-bit data (see the module docstring)."""
    nodes = {n.name: n for n in graph.nodes}
    shared = shared_half_weights(graph)
    full: set[str] = set()  # 16-bit tensors that exist as fp32 (cast up, or computed in fp32)
    produced_full: set[str] = set()  # ... of them, those that exist ONLY as fp32 (computed in fp32)
    cast_back: set[str] = set()
    out: list[Layer] = []

    def half(name: str) -> bool:
        t = graph.tensors.get(name)
        return t is not None and t.dtype in HALF

    def down(t: str):
        return _cast(graph, t, "fp16")

    info = []  # per layer: (its nodes, the activations it reads, runs as a 16-bit element op, takes 16 bits)
    readers: dict[str, list[int]] = {}
    for k, layer in enumerate(layers):
        members, ins = layer_io(graph, layer, nodes)
        own = len(members) == 1 and members[0].op_type in HALF_ELEMENT_NATIVE \
            and members[0].domain in ("", "ai.onnx") and layer.workload.dtype in HALF
        native = own or (layer.workload.family in HALF_NATIVE and not any(n.op_type in HALF_CAST_MOVEMENT
                                                                          for n in members))
        info.append((members, ins, own, native))
        for i in ins:
            readers.setdefault(i, []).append(k)
    outputs = set(graph.outputs)
    producer = {o for members, _, _, _ in info for n in members for o in n.outputs if o}

    def to_fp32(k: int) -> bool:
        """A 16-bit-capable layer between fp32 ones (the runtime's isolated-node rule, ONNX Runtime 1.32's
        InsertCastTransformer): every 16-bit input another layer writes exists only as fp32 (computed in
        fp32), it writes no graph output, and only fp32 layers read its 16-bit outputs. The runtime runs
        it in fp32, casting up any 16-bit graph input or weight it reads instead of its outputs (a
        SqueezeNet's Concats between its ReLUs and convolutions)."""
        members, ins, _, _ = info[k]
        made = [i for i in ins if half(i) and i in producer]
        houts = [o for n in members for o in n.outputs if o and half(o)]
        return bool(made) and all(i in produced_full for i in made) and bool(houts) and all(
            o not in outputs and readers.get(o) and not any(info[j][3] for j in readers[o]) for o in houts)

    for k, layer in enumerate(layers):
        members, ins, own, native = info[k]
        if not members:
            out.append(layer)
            continue
        outs = [o for n in members for o in n.outputs if o]
        if native and to_fp32(k):
            convert_once(out, ins, half, full, lambda t: _cast(graph, t, "fp32"))
            out.append(replace(layer, workload=with_precision(layer.workload, "fp32")))
            full.update(o for o in outs if half(o))
            produced_full.update(o for o in outs if half(o))
            continue
        if native:
            convert_once(out, ins, produced_full.__contains__, cast_back, down)
            op = members[0].op_type
            out.append(replace(layer, workload=replace(layer.workload, kernel=f"{op}.half")) if own and op in HALF_LOOPS
                       else layer)
            continue
        if layer.workload.dtype not in HALF and not any(half(i) for i in ins):
            out.append(layer)
            continue
        convert_once(out, ins, half, full, lambda t: _cast(graph, t, "fp32"))
        # (a runtime's own fused kernel reads no pattern scalars; a contrib op may have a 16-bit kernel of its own:
        # ONNX Runtime's GroupQueryAttention reads a decoder's fp16 rotary caches as they are)
        fused = len(members) > 1 and "+" not in layer.op_type
        roots = [shared[i] for n in members if n.domain in ("", "ai.onnx") for i in n.inputs
                 if i in shared and not (fused and (graph.tensors[i].numel or 0) <= 1)]
        convert_once(out, roots, bool, full, lambda t: _cast(graph, t, "fp32"))
        w = with_precision(layer.workload, "fp32") if layer.workload.dtype in HALF else layer.workload
        if w.conv and layer.workload.dtype in HALF and any(i in shared for n in members if n.op_type in CONVS
                                                           for i in n.inputs[1:3]):
            w = replace(w, kernel=PLAIN_CONV)
        body = inlined_body(graph, members[0], w.family) if len(members) == 1 else None
        out.append(replace(layer, workload=body or w))
        for o in outs:
            if half(o):
                full.add(o)
                produced_full.add(o)
    convert_once(out, graph.outputs, produced_full.__contains__, cast_back, down)
    return out
