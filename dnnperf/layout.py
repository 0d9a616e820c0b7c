"""Layout conversions a CPU runtime adds between its blocked layout and the model's NCHW.

ONNX Runtime's CPU provider runs convolutions and pooling in a channel-blocked layout (NCHWc:
channels in blocks of 8 or 16, the SIMD width). Elementwise ops take whatever layout their input
has; any other op (a broadcast multiply, Flatten, Reshape, Transpose, a matrix product...) needs
plain NCHW, so the runtime converts a blocked tensor back before it (a reorder that reads and
writes the whole tensor) and converts again before the next convolution. A lone convolution in a
one-node model pays both conversions; inside a network they appear only at these boundaries. A
Transpose that moves a blocked tensor's channels last (ConvNeXt's permute after its depthwise
convolution) is folded into the conversion out (the runtime's ReorderOutput writes NHWC directly).
A few more ops keep the blocked layout, each as the runtime's optimised graph shows it: a per-channel
[N, C, 1, 1] tensor added to a blocked map, a Resize by whole factors in the modes of its blocked
Upsample, a channel-aligned Concat; a zero Pad read by one convolution is folded into it, and a Shape
folded at load time reads nothing.

Which convolutions run blocked is ``rules.blocked_conv`` (channel counts a multiple of the
alignment the runtime pads up to a block; grouped ones from a minimum width per group), which
pooling ops ``rules.blocked_pool`` (a channel multiple of their own: pooling is not padded); the
others run ONNX Runtime's plain kernel, with conversions around them like any other plain op. An
ungrouped convolution with fewer input channels than one block runs blocked but reads its input in
NCHW (an image as it is), so a blocked input is converted back out before it.

The rule runs on profiles whose ``cpu_layout`` is set (``dnnperf calibrate`` measures whether the
runtime uses the blocked layout, its channel alignment and the grouped widths it takes). Each conversion becomes a layer of
its own (op type ``LayoutReorder``, family ``movement``) so it shows in the table and the totals.
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf import rules
from dnnperf.fusion import BLOCKED_ACTIVATIONS, consumers_of
from dnnperf.ir import Graph
from dnnperf.kernel_groups import users_of
from dnnperf.scoring import Layer
from dnnperf.workload import PRECISION_OF_DTYPE, Workload

BLOCKED_OPS = frozenset({"Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
# ops that keep their input's layout when every activation input has the same 4-D shape: the
# activations ONNX Runtime's blocked layout takes standalone (Relu, Sigmoid, Tanh, HardSigmoid; HardSwish is
# HardSigmoid and Mul to it), Gelu, a BatchNormalization (run as a blocked per-channel convolution) and
# Add/Sum/Mul. Checked op by op between two 64-channel convolutions: Clip, LeakyRelu, Elu, Selu, Softplus,
# Mish, Erf, Exp, Neg, Abs, Sub, Div and Max each got a conversion out of the blocked layout and one back in
# (a Clip or LeakyRelu right after a convolution is that convolution's epilogue instead)
LAYOUT_AGNOSTIC = BLOCKED_ACTIVATIONS | {"HardSwish", "Swish", "Gelu", "BatchNormalization", "Add", "Sum", "Mul"}


def _blocked_anchor(graph: Graph, node, layer: Layer, block: int, grouped_min: int, align: int,
                    pool_align: int) -> bool:
    if node.op_type not in BLOCKED_OPS:
        return False
    x = graph.tensors.get(node.inputs[0]) if node.inputs else None
    if x is None or x.shape is None or len(x.shape) != 4:
        return False
    if node.op_type == "Conv":
        # a quantized one (QDQ form) becomes the runtime's QLinearConv, which runs channels-last, not
        # in the float blocked layout (ResNet-18 in QDQ form, uint8 activations: 20 QLinearConv
        # kernels and two transposes at the ends, no reorder between)
        if PRECISION_OF_DTYPE.get(layer.workload.dtype) == "int8":
            return False
        return rules.blocked_conv(layer.workload, block, grouped_min, align)
    return rules.blocked_pool(x.shape[1], block, pool_align)


def _removed(layer: Layer, note: str = "removed by the runtime's transpose optimizer (the tensor stays "
                                        "channels-last)") -> Layer:
    """A node the runtime's graph optimisations take out: a Transpose (``free_transposes``), a Pad folded
    into the layer that reads it (``_fused_pad``). No kernel."""
    w = Workload("view", dtype=layer.workload.dtype, launches=0, note=note)
    return replace(layer, workload=w, reads=())


def _fused_pad(graph: Graph, node, users: dict) -> bool:
    """A Pad ONNX Runtime folds into the padding of the layer after it (its PadFusion, as its optimised
    graph shows: ONNX Runtime 1.32, a 32-channel map): zeros (constant mode, no value or 0) added on the
    spatial axes only, read by nothing but one Conv or AveragePool (a MaxPool keeps its Pad: zeros are
    not the identity of a max; a second reader, a non-zero value, reflect mode or padded channels keep
    it too). TensorFlow exports write one before every strided convolution ('SAME' padding)."""
    if node.op_type != "Pad" or node.attrs.get("mode", "constant") != "constant" or not node.outputs:
        return False
    readers = users.get(node.outputs[0], ())
    if len(readers) != 1 or readers[0].op_type not in ("Conv", "AveragePool") or node.outputs[0] in graph.outputs:
        return False
    x = graph.tensors.get(node.inputs[0]) if node.inputs else None
    if x is None or x.shape is None or len(x.shape) < 3:
        return False
    if len(node.inputs) > 3 and node.inputs[3]:
        return False  # explicit axes (opset 18): left as it is
    pads = node.attrs.get("pads") if len(node.inputs) < 2 or not node.inputs[1] else graph.values.get(node.inputs[1])
    value = node.attrs.get("value", 0.0)
    if len(node.inputs) > 2 and node.inputs[2]:
        v = graph.values.get(node.inputs[2])
        value = None if v is None else float(v.reshape(-1)[0])
    if pads is None or value != 0.0:
        return False
    pads = [int(p) for p in list(pads.reshape(-1) if hasattr(pads, "reshape") else pads)]
    r = len(x.shape)
    if len(pads) != 2 * r or min(pads) < 0:
        return False
    return pads[0] == pads[1] == pads[r] == pads[r + 1] == 0


def _reorder(graph: Graph, tensor: str, where: str) -> Layer | None:
    t = graph.tensors.get(tensor)
    if t is None or not t.nbytes:
        return None
    w = Workload("movement", dtype=t.dtype, act_bytes_read=t.nbytes, bytes_written=t.nbytes,
                 parallel_work=t.numel or 1, note="layout conversion added by the runtime")
    return Layer(f"reorder {where} {tensor}", "LayoutReorder", (), w, t.shape)


def layer_io(graph: Graph, layer: Layer, nodes: dict) -> tuple[list, list[str]]:
    """(the layer's nodes, the activations it reads from outside itself, in order): what a pass
    that adds the runtime's conversion layers (this module, ``dnnperf.upcast``) looks at."""
    members = [nodes[n] for n in layer.nodes if n in nodes]
    internal = {o for n in members for o in n.outputs}
    ins = [i for n in members for i in n.inputs if i and i not in internal and i not in graph.constants]
    return members, ins


def convert_once(out: list[Layer], tensors, needs, done: set[str], make) -> None:
    """Append ``make(t)`` for each of ``tensors`` that ``needs`` converting and has not been yet
    (one conversion serves every later reader); ``done`` records them."""
    for t in dict.fromkeys(tensors):
        if needs(t) and t not in done:
            c = make(t)
            if c is not None:
                out.append(c)
            done.add(t)


def add_reorders(graph: Graph, layers: list[Layer], block: int, grouped_min: int, align: int | None = None,
                 pool_align: int | None = None, plain_sums: set | None = None) -> list[Layer]:
    """``layers`` with a ``LayoutReorder`` layer before each layer whose input layout differs from
    the one its producer left (see the module docstring). ``plain_sums``, when given, collects the
    residual Adds fused into a blocked convolution whose other operand is in the plain layout: the
    runtime sums into a blocked convolution only tensors that are blocked too, so such an Add is a
    plain kernel of its own after the convolution's conversion out (``_score`` then builds the layers
    again without fusing it); and the activations fused into a standalone BatchNormalization that reads a
    plain tensor (the runtime's own BatchNormalization kernel applies none)."""
    nodes = {n.name: n for n in graph.nodes}
    readers = consumers_of(graph)  # tensor -> how many nodes (and graph outputs) read it
    users = users_of(graph)  # tensor -> the nodes that read it
    blocked: set[str] = set()  # tensors currently held in the blocked layout
    plain_copy: set[str] = set()  # blocked tensors already converted back (one conversion serves all)
    blocked_copy: set[str] = set()  # plain tensors already converted in (a model input three convolutions read)
    out: list[Layer] = []
    layer_of = {n: layer for layer in layers for n in layer.nodes}
    free = free_transposes(graph, lambda node: node.name in layer_of and _blocked_anchor(
        graph, node, layer_of[node.name], block, grouped_min, align or block, pool_align or block), users)
    for layer in layers:
        members, ins = layer_io(graph, layer, nodes)
        if not members or layer.workload.family == "shape":
            # (a Shape of a blocked tensor folded at load time reads nothing when the model runs: the
            # runtime converts out of the layout only for a Shape it runs, with symbolic dims)
            out.append(layer)
            continue
        if len(members) == 1 and members[0].name in free:
            out.append(_removed(layer))
            continue
        if len(members) == 1 and _fused_pad(graph, members[0], users):
            # the next layer reads the Pad's input in whatever layout it is in, padding as it goes
            out.append(_removed(layer, "folded into the next layer's padding by the runtime (its Pad fusion)"))
            if ins and all(i in blocked for i in ins):
                blocked.update(o for o in members[0].outputs if o and _rank4(graph, o))
            continue
        anchor = members[0]
        outs = [o for o in members[-1].outputs if o]
        # a global pooling runs blocked only on a blocked input: the runtime does not convert into the
        # layout for it (RegNetY's squeeze-excite pools a plain grouped convolution's output as it is),
        # as it does for a convolution or a windowed pooling (PoolFormer's token mixer)
        if _blocked_anchor(graph, anchor, layer, block, grouped_min, align or block, pool_align or block) and (
                not anchor.op_type.startswith("Global") or anchor.inputs[0] in blocked):
            unsummed_here = False  # the layer sums a plain tensor: as rebuilt, its sum runs plain
            for i in dict.fromkeys(ins):
                if i == anchor.inputs[0] and rules.reads_nchw(layer.workload, block):
                    # a plain convolution with fewer input channels than one block reads its input
                    # in NCHW as it is (an RGB image): a blocked one (MnasNet-0.5's 8-channel
                    # projection) is converted back out of the blocked layout first
                    convert_once(out, (i,), blocked.__contains__, plain_copy, lambda t: _reorder(graph, t, "out of"))
                    continue
                if i in blocked:
                    continue
                if plain_sums is not None:
                    # (a copy converted in for another convolution does not count: the runtime sums the
                    # blocked outputs of its own kernels only)
                    sums = [n.name for n in members[1:] if i in n.inputs and n.op_type in ("Add", "Sum")]
                    plain_sums.update(sums)
                    unsummed_here = unsummed_here or bool(sums)
                if i in blocked_copy:
                    continue
                r = _reorder(graph, i, "into")
                if r is not None:
                    out.append(r)
                blocked_copy.add(i)
            out.append(replace(layer, blocked=True))
            if not unsummed_here:  # (so the Adds after it are found in the same pass)
                blocked.update(o for o in outs if _rank4(graph, o))
            continue
        shapes = {graph.tensors[i].shape if i in graph.tensors else None for i in ins}
        # a runtime kernel spelled as several nodes (the erf GELU as Div, Erf, Add, Mul, Mul: op type
        # Gelu) keeps the layout as its kernel does, its constants inside the kernel
        kernel = "+" not in layer.op_type and layer.op_type not in {n.op_type for n in members}
        keeps = (kernel and layer.op_type in LAYOUT_AGNOSTIC) or (
            all(n.op_type in LAYOUT_AGNOSTIC for n in members) and (kernel or not _constant_operand(graph, members)))
        agnostic = keeps and ins and all(i in blocked for i in ins) and len(shapes) == 1 and None not in shapes
        if not agnostic and len(members) == 1 and anchor.op_type == "Add" and len(ins) == 2 \
                and all(i in blocked for i in ins) and _channel_broadcast(shapes):
            agnostic = True  # the runtime adds a per-channel [N, C, 1, 1] tensor to a blocked map as it is
        if len(members) == 1 and ins and all(i in blocked for i in ins) and _blocked_upsample(graph, anchor):
            agnostic = True
        if anchor.op_type == "Concat" and len(members) == 1 and ins and all(i in blocked for i in ins) \
                and _channel_concat(graph, anchor, block):
            agnostic = True  # channel-aligned concatenation stays blocked
        if agnostic:
            out.append(replace(layer, blocked=True))
            blocked.update(o for o in outs if _rank4(graph, o))
            continue
        if plain_sums is not None and anchor.op_type == "BatchNormalization" and len(members) > 1 \
                and not all(i in blocked for i in ins):
            # a BatchNormalization on a plain tensor is the runtime's own kernel, which applies no activation
            # (only the blocked layout's per-channel convolution does): rebuilt with its activation apart
            plain_sums.update(n.name for n in members[1:] if n.op_type in BLOCKED_ACTIVATIONS)
        if _channels_last_transpose(members, ins, blocked, plain_copy, readers):
            # the runtime's conversion out of the blocked layout writes channels-last directly
            # (ReorderOutput with channels_last): one pass over the tensor, the Transpose is gone
            r = _reorder(graph, ins[0], "out of")
            if r is not None:
                out.append(Layer(f"{r.name} (channels last, absorbs {layer.name})", "LayoutReorder", layer.nodes,
                                 r.workload, layer.output_shape))
                plain_copy.add(ins[0])
                continue
        convert_once(out, ins, blocked.__contains__, plain_copy, lambda t: _reorder(graph, t, "out of"))
        out.append(layer)
    convert_once(out, graph.outputs, blocked.__contains__, plain_copy, lambda t: _reorder(graph, t, "out of"))
    return out


def laid_out(graph: Graph, layers: list[Layer], cpu_layout: tuple, rebuilt=None) -> list[Layer]:
    """``add_reorders`` with the profile's ``cpu_layout``. ``rebuilt(unsummed)``, when given (fused
    layers), builds the layers again with those residual Adds left out of their convolutions: the ones
    whose other operand turned out plain (``plain_sums``; the pass already treats their outputs as
    plain, so a chain of them is found at once). The rebuilt layers are checked again (three rounds
    at most)."""
    unsummed: set = set()
    for _ in range(3):
        found: set = set()
        laid = add_reorders(graph, layers, *cpu_layout, plain_sums=found)
        if rebuilt is None or not found - unsummed:
            return laid
        unsummed |= found
        layers = rebuilt(frozenset(unsummed))
    return add_reorders(graph, layers, *cpu_layout)


# ops ONNX Runtime's transpose optimizer moves a Transpose through (their other inputs constants, or
# transposed the same way): elementwise arithmetic and activations
TRANSPOSE_PUSH = frozenset({"Add", "Sub", "Mul", "Div", "Sum", "Relu", "Sigmoid", "Tanh", "Erf", "Clip", "LeakyRelu",
                            "HardSigmoid", "HardSwish", "Gelu", "Identity"})
TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def free_transposes(graph: Graph, is_blocked_conv, users: dict | None = None) -> frozenset[str]:
    """Transposes ONNX Runtime's transpose optimizer removes: one that moves channels back to axis 1
    (perm 0, 3, 1, 2) whose result, through elementwise ops only, reaches nothing but convolutions the
    blocked layout takes (their conversion in reads the channels-last tensor: ReorderInput with
    channels_last) and Transposes that move the channels last again (they cancel). The elementwise
    ops in between run on the channels-last tensor (a constant operand is transposed at load time;
    any other operand must come from such a Transpose too). ConvNeXt is made so: every block ends in
    a Transpose back to NCHW before its layer scale and residual Add, and every stage starts with a
    Transpose to channels-last around its LayerNorm; in the runtime's optimized graph (ONNX Runtime
    1.32) none of them is left, the residual stream stays channels-last, and the node profiler shows
    no Transpose kernel. Returns the node names of the removed Transposes of both kinds.
    ``is_blocked_conv(node)`` says whether a Conv node runs in the blocked layout; ``users``: ``users_of(graph)``
    when the caller has it."""
    consumers = users_of(graph) if users is None else users
    outputs = set(graph.outputs)
    cands = {n.name for n in graph.nodes if _transposes(n, TO_NCHW) and n.inputs and _rank4(graph, n.inputs[0])
             and n.outputs and n.outputs[0]}
    while cands:
        src: dict[str, frozenset] = {}  # channels-last-able tensor -> the candidate Transposes it comes from
        for n in graph.nodes:  # topological order
            if n.name in cands:
                src[n.outputs[0]] = frozenset((n.name,))
            elif n.op_type in TRANSPOSE_PUSH and n.domain in ("", "ai.onnx"):
                acts = [i for i in n.inputs if i and i not in graph.constants]
                if acts and all(i in src for i in acts):
                    for o in n.outputs:
                        if o:
                            src[o] = frozenset().union(*(src[i] for i in acts))
        bad: set[str] = set()
        for t, origin in src.items():
            ok = t not in outputs
            for c in consumers.get(t, ()):
                if _transposes(c, TO_NHWC):
                    continue  # cancels
                if c.op_type == "Conv" and c.inputs[0] == t and is_blocked_conv(c):
                    continue  # its conversion into the blocked layout reads channels-last
                if c.op_type in TRANSPOSE_PUSH and all(o in src for o in c.outputs if o):
                    continue
                ok = False
            if not ok:
                bad |= origin
        if not bad:
            inverse = {c.name for t in src for c in consumers.get(t, ()) if _transposes(c, TO_NHWC)}
            return frozenset(cands | inverse)
        cands -= bad
    return frozenset()


def _transposes(node, perm: list[int]) -> bool:
    return node.op_type == "Transpose" and list(node.attrs.get("perm") or ()) == perm


def _channels_last_transpose(members, ins, blocked, plain_copy, readers) -> bool:
    """A lone Transpose that moves the channels last (perm 0, 2, 3, 1) of a blocked tensor nothing
    else reads: ONNX Runtime folds it into the conversion out of the blocked layout."""
    if len(members) != 1 or not _transposes(members[0], TO_NHWC) or len(ins) != 1:
        return False
    t = ins[0]
    return t in blocked and t not in plain_copy and readers.get(t, 0) == 1


def _constant_operand(graph: Graph, members) -> bool:
    """An Add, Sum, Mul or Div of the layer that takes a stored operand: the runtime runs a binary op
    blocked only when every operand is a blocked tensor, so it converts out first (NF-ResNet's gain,
    x * 0.98). An Add of 0 or a Mul or Div by 1 the runtime removes (MobileOne adds 0 after each block),
    and a single value the loader does not know is given the same benefit."""
    def stored(n, x):
        if x not in graph.constants:
            return False
        t = graph.tensors.get(x)
        if t is None or t.numel is None or t.numel > 1:
            return True
        v = graph.values.get(x)
        if v is None:
            return False
        neutral = 0.0 if n.op_type in ("Add", "Sum") else 1.0
        return float(v.reshape(-1)[0]) != neutral
    return any(stored(n, x) for n in members if n.op_type in ("Add", "Sum", "Mul", "Div") for x in n.inputs if x)


def _blocked_upsample(graph: Graph, node) -> bool:
    """A Resize ONNX Runtime runs on a blocked tensor (its NCHWc Upsample), as its optimised graph shows
    (ONNX Runtime 1.32, a 16-channel map between two convolutions): scales, or sizes, known when the
    model loads (a constant, or shape arithmetic folded at static input dims: torchvision's FPN sizes
    each top-down map from the Shape of the lateral one), whole-number factors of at least 1 on height
    and width only, and either mode "linear" with coordinate_transformation_mode half_pixel, asymmetric
    or align_corners, or mode "nearest" with asymmetric coordinates and nearest_mode "floor". Anything
    else (the defaults of nearest, a factor of 1.5 or 0.5, pytorch_half_pixel, cubic, sizes the runtime
    computes every inference from symbolic dims) runs the plain kernel. HRNet's branch fusions upsample
    so, and the FPNs of torchvision's detectors."""
    if node.op_type != "Resize":
        return False
    scales = node.inputs[2] if len(node.inputs) > 2 else ""
    sizes = node.inputs[3] if len(node.inputs) > 3 else ""
    if scales and (sizes or scales not in graph.constants):
        return False
    if not scales and (not sizes or sizes not in graph.constants or sizes in graph.host_shape):
        return False
    a = node.attrs
    mode, ctm = a.get("mode", "nearest"), a.get("coordinate_transformation_mode", "half_pixel")
    if mode == "linear":
        if ctm not in ("half_pixel", "asymmetric", "align_corners"):
            return False
    elif mode != "nearest" or ctm != "asymmetric" or a.get("nearest_mode", "round_prefer_floor") != "floor":
        return False
    x, y = graph.tensors.get(node.inputs[0]), graph.tensors.get(node.outputs[0]) if node.outputs else None
    if x is None or y is None or x.shape is None or y.shape is None or len(x.shape) != 4 or len(y.shape) != 4:
        return False
    if tuple(x.shape[:2]) != tuple(y.shape[:2]) or not all(isinstance(d, int) and d > 0 for d in (*x.shape, *y.shape)):
        return False
    return all(b % a_ == 0 for a_, b in zip(x.shape[2:], y.shape[2:]))


def _channel_broadcast(shapes: set) -> bool:
    """Two 4-D shapes of the same batch and channels, one of them 1 x 1 in space ([N, C, H, W] and
    [N, C, 1, 1]): ONNX Runtime adds such a per-channel tensor to a blocked map in the blocked layout (its
    optimised graph reshapes both and runs the Add there; a global-context block's context), where it
    multiplies by one in the plain layout (a squeeze-excite gate: both converted out, probed)."""
    if len(shapes) != 2 or None in shapes or any(len(x) != 4 for x in shapes):
        return False
    a, b = sorted(shapes, key=lambda x: x[2] * x[3])
    return a[:2] == b[:2] and a[2:] == (1, 1) and b[2:] != (1, 1)


def _rank4(graph: Graph, name: str) -> bool:
    t = graph.tensors.get(name)
    return t is not None and t.shape is not None and len(t.shape) == 4


def _channel_concat(graph: Graph, node, block: int) -> bool:
    axis = node.attrs.get("axis")
    shapes = [graph.tensors[i].shape if i in graph.tensors else None for i in node.inputs if i]
    if any(s is None or len(s) != 4 for s in shapes):
        return False
    return axis in (1, -3) and all(s[1] % block == 0 for s in shapes)
