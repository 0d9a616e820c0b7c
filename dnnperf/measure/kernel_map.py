"""ONNX Runtime's profiled kernels mapped back to dnnperf's layers (``map_kernels``): by node name, by the tensor a
fused kernel is named after, by the runtime's own fused-kernel names, its layout conversions by shape, and the
nodes it made of a function op's body (``validate`` compares each layer's estimate with what it measured)."""

from __future__ import annotations

import re


def map_kernels(kernels: dict, graph, layers, shapes: dict | None = None) -> tuple[dict, dict]:
    """Attribute each ORT kernel to the dnnperf layer it implements.

    ORT fuses nodes and renames them (e.g. ``<tensor>_nchwc`` for layout-transformed convs). A
    kernel is matched by its node name, else by the tensor its name is derived from (the output of
    the last fused node); the layout conversions ORT adds, by their shapes (``shapes``: kernel ->
    (input shapes, output shapes)) against dnnperf's LayoutReorder layers; the nodes it made of a function op's
    body, by their ops and creation order (``_expanded``); else it stays unmatched and is reported.
    The casts ORT inserts around ops without 16-bit kernels map to ``dnnperf.upcast``'s Cast layers
    by the tensor they convert; the Transposes its transpose optimizer makes of one it pushes past the Gathers
    that read it, to that Transpose's layer by their input shapes (``_pushed``).
    Returns ({layer name: measured us}, {unmatched kernel: us}).
    """
    kernel_ops = {k: op for k, (op, _us) in kernels.items()}
    node_to_layer = {}
    for l in layers:
        for n in l.nodes:
            node_to_layer[n] = l.name
    producer = {}
    for n in graph.nodes:
        for o in n.outputs:
            producer[o] = n.name
    measured: dict[str, float] = {}
    unmatched: dict[str, float] = {}
    casts = {l.name.split(" ", 3)[3]: l.name for l in layers if l.op_type == "Cast" and not l.nodes
             and l.name.startswith("cast to ")}  # dnnperf.upcast's layers, by the tensor they convert
    # ORT names its own fused kernels "<Kernel>", "<Kernel>_token_<n>": the n-th goes to the n-th
    # layer dnnperf made of that pattern, in graph order (dnnperf.fusion.RUNTIME_KERNELS)
    from dnnperf.vocab import RUNTIME_KERNEL_NAMES, RUNTIME_KERNELS

    for kind in RUNTIME_KERNELS:
        ours = [l.name for l in layers if l.op_type == kind and len(l.nodes) > 1]  # groups, not a lone Gelu op
        names = "|".join(RUNTIME_KERNEL_NAMES.get(kind, (kind,)))
        theirs = sorted((k for k in kernels if re.fullmatch(rf"({names})(_token_\d+)?", k)),
                        key=lambda k: -1 if "_token_" not in k else int(k.rsplit("_", 1)[1]))
        if ours and len(ours) == len(theirs):
            for layer_name, k in zip(ours, theirs):
                measured[layer_name] = measured.get(layer_name, 0.0) + kernels[k][1]
            kernels = {k: v for k, v in kernels.items() if k not in set(theirs)}
    shared = None  # the model's shared 16-bit weights, found when a cast needs them
    for k, (_op, us) in sorted(kernels.items()):
        target = None
        if k.startswith("InsertedPrecisionFreeCast_"):  # ORT's casts around ops without 16-bit kernels
            cast = re.sub(r"/[A-Za-z0-9]*Fusion/?$", "", k[len("InsertedPrecisionFreeCast_"):])
            if cast not in casts and shared is None:
                from dnnperf.upcast import shared_half_weights

                shared = shared_half_weights(graph)
            # (a shared 16-bit scalar's cast is named after any of the constants merged into it)
            target = casts.get(cast) or casts.get((shared or {}).get(cast, ""))
            if target is not None:
                measured[target] = measured.get(target, 0.0) + us
                continue
        cands = [k]
        if k.startswith("fused "):  # ORT's FusedGemm (Gemm + activation): "fused <Gemm node>"
            cands.append(k[len("fused "):])
        if k.startswith("InsertedPrecisionFreeCast_"):
            # a blocked convolution of a 16-bit model named after its output, which the runtime's cast had renamed
            # (a fp16 MobileNetV2's: 'InsertedPrecisionFreeCast_<its Conv's output>_nchwc')
            cands.append(k[len("InsertedPrecisionFreeCast_"):])
        for c in list(cands):
            for suf in ("_nchwc", "_output_0_nchwc", "_bn_nchwc"):
                if c.endswith(suf):
                    cands.append(c[: -len(suf)])
        for c in cands:
            if c in node_to_layer:
                target = node_to_layer[c]
                break
            if c in producer and producer[c] in node_to_layer:
                target = node_to_layer[producer[c]]
                break
        if target is None:
            # ORT names fused kernels "<first node>/<SomethingFusion>/" or "<node>_token_<n>"
            base = re.sub(r"/[A-Za-z0-9]*Fusion/?$", "", k).split("_token_")[0]
            if base in node_to_layer:
                target = node_to_layer[base]
        if target is None:
            unmatched[k] = us
        else:
            measured[target] = measured.get(target, 0.0) + us
    if shapes:
        for k, target in _conversions(unmatched, kernel_ops, shapes, layers).items():
            measured[target] = measured.get(target, 0.0) + unmatched.pop(k)
        for k, target in _pushed(unmatched, kernel_ops, shapes, layers, graph).items():
            measured[target] = measured.get(target, 0.0) + unmatched.pop(k)
    for k, target in _expanded(unmatched, kernel_ops, layers, measured, graph).items():
        measured[target] = measured.get(target, 0.0) + unmatched.pop(k)
    return measured, unmatched


def _body_ops(layer, graph, nodes: dict) -> tuple:
    """The ops of the ONNX function body the runtime runs for a one-node layer (``functions.function_ops``),
    () for an op without one. A 16-bit op's body that depends on the node's attributes (a Softmax's axis) is
    the one ``functions.HALF`` costs it as."""
    from dnnperf.functions import HALF, function_ops

    if layer.op_type in HALF:
        return tuple(op for op, _, _ in HALF[layer.op_type][2])
    node = nodes.get(layer.nodes[0])
    return function_ops(graph, node) if node is not None else ()


def _expanded(unmatched: dict, ops: dict, layers, measured: dict, graph) -> dict:
    """{kernel: layer} for the nodes a runtime made of a layer's function body where it has no kernel of its own
    (ONNX Runtime's CPU provider runs a HardSwish as HardSigmoid and Mul, naming them '<Op>_<n>' with n in creation
    order): each layer of such an op that nothing was matched to takes, in graph order, the next run of those
    kernels whose ops are its body's. Matched by name it had none and read 0 us (a QDQ MobileNetV3's 21)."""
    runs = sorted((int(k.rsplit("_", 1)[1]), k) for k in unmatched if re.fullmatch(r"[A-Za-z]+_\d+", k))
    queue, index = [k for _, k in runs], [n for n, _ in runs]
    out, i = {}, 0

    def expansion(j, body) -> bool:  # the body's ops, created one after the other
        return tuple(ops.get(k) for k in queue[j:j + len(body)]) == body \
            and index[j + len(body) - 1] - index[j] == len(body) - 1

    nodes = {n.name: n for n in graph.nodes}
    for layer in layers:
        skip = layer.name in measured or "+" in layer.op_type or not layer.nodes
        body = () if skip else _body_ops(layer, graph, nodes)
        if not body:
            continue
        j = i
        while j + len(body) <= len(queue) and not expansion(j, body):
            j += 1
        if j + len(body) > len(queue):
            break
        out.update((k, layer.name) for k in queue[j:j + len(body)])
        i = j + len(body)
    return out


# ONNX Runtime's conversions into and out of its blocked layout -> how dnnperf.layout names the layer
_CONVERSIONS = {"ReorderInput": "reorder into ", "ReorderOutput": "reorder out of "}


def _conversions(unmatched: dict, ops: dict, shapes: dict, layers) -> dict:
    """{kernel: layer} for the runtime's layout conversions (named by the runtime, not after a node)
    against dnnperf's LayoutReorder layers: by direction and by the plain (NCHW) side's shape (a
    conversion in reads it, one out writes it; the blocked side pads the channels), the n-th kernel
    of a (direction, shape) in run order to the n-th such layer in graph order."""
    queues: dict[tuple, list] = {}
    for l in layers:
        if l.op_type != "LayoutReorder" or l.nodes or l.output_shape is None:
            continue
        for op, prefix in _CONVERSIONS.items():
            if l.name.startswith(prefix):
                queues.setdefault((op, tuple(l.output_shape)), []).append(l.name)
    out = {}
    for k in list(unmatched):
        op = ops.get(k)
        if op not in _CONVERSIONS:
            continue
        ins, outs = shapes.get(k, ((), ()))
        plain = (ins if op == "ReorderInput" else outs)[:1]
        queue = queues.get((op, plain[0])) if plain else None
        if queue:
            out[k] = queue.pop(0)
    return out


def _pushed(unmatched: dict, ops: dict, shapes: dict, layers, graph) -> dict:
    """{kernel: layer} for the Transposes ONNX Runtime's transpose optimizer makes when it pushes one past the
    Gathers that read it (named 'Transpose_token_<n>'; ``dnnperf.rewrites.pushed_transposes``: Swin's q and v
    branches) against the pushed Transpose's layer: by input shape, the n-th such kernel in run order to the
    n-th branch in graph order."""
    from dnnperf.kernel_groups import users_of
    from dnnperf.rewrites import pushed_transposes

    pushed = pushed_transposes(graph)
    if not pushed:
        return {}
    users = users_of(graph)
    nodes = {n.name: n for n in graph.nodes}
    queues: dict[tuple, list] = {}
    for layer in layers:
        node = nodes.get(layer.nodes[0]) if layer.op_type == "Transpose" and len(layer.nodes) == 1 else None
        if node is None or not pushed.get(node.name) \
                or not all(g.op_type == "Gather" for g in users.get(node.outputs[0], ())):  # (not a composed one)
            continue
        for shape, _perm in pushed[node.name]:
            queues.setdefault(tuple(shape), []).append(layer.name)
    out = {}
    for k in [k for k in ops if k in unmatched and ops[k] == "Transpose" and "_token_" in k]:
        ins = shapes.get(k, ((), ()))[0]
        queue = queues.get(tuple(ins[0])) if ins else None
        if queue:
            out[k] = queue.pop(0)
    return out
