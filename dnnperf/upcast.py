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
fp32 kernel of its own (``dnnperf.functions.HALF``): a 16-bit Softmax is ReduceMax, Sub, Exp, ReduceSum
and Div, five passes where the fp32 model runs one (a [1, 12, 128, 128] Softmax on a 2-core x86 VM: 63 us in fp16,
24 in fp32, where one cast pass each way came to 36).
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf.functions import inlined_body
from dnnperf.ir import Graph
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


def shared_half_weights(graph: Graph) -> dict[str, str]:
    """The 16-bit initializers (and their Identity copies) that more than one node reads, each -> the
    initializer. The runtime casts a 16-bit weight to fp32 once at load time when one node reads it, but
    one that several nodes share (after it drops the Identity nodes between) stays a Cast node run at every
    inference (a Cast layer here, before the first fp32 layer that reads it); a convolution
    whose weights or bias come from one is then not blocked (the blocked layout reorders constant
    weights at load time): its optimised graph of a ResNet-50 whose 53 convolutions share their biases
    (an exporter's dedup of equal tensors) keeps all 53 in the plain kernel, where each with a bias of
    its own runs blocked.

    Scalars share by value: before the casts the runtime makes every constant holding one value ([] or
    [1]) one initializer per (type, value, rank) (its ConstantSharing pass), so a MobileNetV2's 35 ReLU6
    Clips, each with Constants 0 and 6 of its own, read two shared 16-bit scalars, cast every inference:
    each such scalar -> the first of its group by name."""
    from dnnperf.kernel_groups import reads_through_identity, users_of

    users = users_of(graph)
    out: dict[str, str] = {}
    made = {n.outputs[0] for n in graph.nodes if n.op_type == "Constant" and n.outputs and n.outputs[0]}
    scalars: dict[tuple, list] = {}
    for name in sorted(graph.initializers | made):
        t = graph.tensors.get(name)
        if t is None or t.dtype not in HALF:
            continue
        reads = reads_through_identity(users, name)
        value = graph.values.get(name)
        if t.shape in ((), (1,)) and value is not None and getattr(value, "size", 0) == 1:
            scalars.setdefault((t.dtype, len(t.shape), float(value.reshape(-1)[0])), []).append((name, reads))
        elif len(reads) > 1:
            out.update(dict.fromkeys({name} | {alias for _, alias in reads}, name))
    for group in scalars.values():
        if sum(len(reads) for _, reads in group) > 1:
            root = group[0][0]
            for name, reads in group:
                out.update(dict.fromkeys({name} | {alias for _, alias in reads}, root))
    return out


def cast_bound_clips(graph: Graph, shared: dict | None = None) -> frozenset[str]:
    """The 16-bit Clips whose bounds are shared 16-bit scalars (``shared_half_weights``): the runtime fuses a
    Clip into the convolution before it only when its bounds are constants, and these read Casts run every
    inference, so each is a kernel of its own (in fp32, between the runtime's conversions out of its blocked
    layout and back: ONNX Runtime 1.32's optimised graph of a fp16 MobileNetV2 whose convolutions have biases
    of their own holds 52 blocked convolutions, 35 plain Clips, 69 conversions and 4 Casts). ``shared``: the
    graph's ``shared_half_weights``, when already known."""
    shared = shared_half_weights(graph) if shared is None else shared
    out = set()
    for n in graph.nodes:
        x = graph.tensors.get(n.inputs[0]) if n.op_type == "Clip" and n.inputs else None
        if x is not None and x.dtype in HALF and n.domain in ("", "ai.onnx") \
                and any(i in shared for i in n.inputs[1:3]):
            out.add(n.name)
    return frozenset(out)


def add_casts(insp, layers: list[Layer]) -> list[Layer]:
    """``layers`` with the 16-bit compute layers costed in fp32 and a ``Cast`` layer at each
    boundary between them and 16-bit data (see the module docstring); ``insp``: their inspection (its
    shared weights are found once per inspection, ``layers.shared_weights``)."""
    from dnnperf.layers import shared_weights

    graph = insp.graph
    nodes = {n.name: n for n in graph.nodes}
    shared = shared_weights(insp)
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
        # (a runtime's own fused kernel reads no pattern scalars; a contrib op may have a 16-bit kernel of its own:
        # ONNX Runtime's GroupQueryAttention reads a decoder's fp16 rotary caches as they are)
        fused = len(members) > 1 and "+" not in layer.op_type
        roots = [shared[i] for n in members if n.domain in ("", "ai.onnx") for i in n.inputs
                 if i in shared and not (fused and (graph.tensors[i].numel or 0) <= 1)]
        if native and to_fp32(k):
            convert_once(out, ins + roots, half, full, lambda t: _cast(graph, t, "fp32"))
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
        convert_once(out, ins + roots, half, full, lambda t: _cast(graph, t, "fp32"))
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
