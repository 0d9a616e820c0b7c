"""How far back each activation a layer reads was written: its reuse distance, in bytes.

A layer's inputs are not all equally warm. The output of the layer just before is still in cache;
a tensor written many layers earlier (DenseNet's Concat gathers every feature map of its block, a
skip connection reads the block's input) has had every byte written since then pass through the
cache after it. Counting those bytes gives each read its reuse distance, hardware-independent; a
calibrated CPU profile reads it back at the bandwidth its ``bandwidth_curve`` gives for a working set
of that size (``dnnperf.scoring._memory``), where the layer's own working set alone would have put it
in cache.

Measured on the stored two-thread series (DenseNet-121's 62 Concats: 1.4-1.8 ms predicted against
2.1-2.2 measured with every input priced as warm; 2.2-2.8 with the distances) and at one thread
(2.2 -> 3.1 against 2.6). See bench/RESULTS.md, "Fourteenth session".

Weights have a reuse distance too: a network run again and again reads each weight once per
inference and, in between, every other weight and its activation buffers (``arena_bytes``). Where
that sum stays inside the curve the weights come back from the cache, not DRAM
(``rules.memory_time``): on a 2-core EPYC VM (32 MB L3), the 4-5 MB classifier of a network whose
weights and buffers stay under ~15 MB (MnasNet-0.5, MobileNetV3-Small, ShuffleNetV2-0.5) took 27-42
us in the network, 150-240 GB/s, where DRAM (50 GB/s) had it at 104-132 us; ResNet-18's (53 MB
reached) took the DRAM time. See bench/RESULTS.md, "Forty-third session".
"""

from __future__ import annotations


def reuse_reads(insp, layers) -> dict[str, tuple[tuple[int, int], ...]]:
    """{layer name: ((bytes, distance), ...)} for the activations each layer reads from another
    layer: ``distance`` is the bytes every node wrote between the write of the tensor and the start
    of the reading layer (its first node in execution order). Weights, folded constants and the
    model's inputs (never written by a node) are left out, as are tensors of unknown size."""
    g = insp.graph
    layer_of: dict[str, str] = {}
    for layer in layers:
        for n in layer.nodes:
            layer_of.setdefault(n, layer.name)
    constants = g.constants | g.initializers
    written_at: dict[str, int] = {}  # tensor -> bytes written by the time its producer finished
    producer_layer: dict[str, str] = {}
    start: dict[str, int] = {}
    out: dict[str, dict[str, tuple[int, int]]] = {}
    total = 0
    for row in insp.rows:
        node = row.node
        name = layer_of.get(node.name)
        if name is not None:
            first = start.setdefault(name, total)
            for i in node.inputs:
                if i and i in written_at and i not in constants and producer_layer.get(i) != name:
                    t = g.tensors.get(i)
                    out.setdefault(name, {})[i] = (t.nbytes, first - written_at[i])
        for o in node.outputs:
            t = g.tensors.get(o) if o else None
            if t is not None and t.shape is not None:
                total += t.nbytes
                written_at[o] = total
                if name is not None:
                    producer_layer[o] = name
    return {k: tuple(v.values()) for k, v in out.items()}


def repeated_weight_bytes(insp, layers, held: bool = False) -> int:
    """The part of the layers' summed weight bytes that reads an initializer a layer before it has
    read already (layers sharing one set of weights: a model with tied weights, or calibrate's
    micro-benchmarks, whose copies of one node all read the same filters). A network touches such a
    weight once per inference, so it counts once in how far back a weight comes from (``score``'s
    reach and footprint). Each layer's share is its weight bytes in proportion to the initializer
    bytes it reads that an earlier layer had read (its own precision and padding kept). ``held``: the
    same over the bytes each layer holds (``Workload.weights_unread`` too: an embedding table a Gather
    picks rows from and a product reads whole is held once), for the memory check; there a weight
    folded at load time from an initializer by a layout op (GPT-2's output product reads the embedding
    table transposed) is that initializer: a runtime may hold both, but at least one."""
    g = insp.graph
    inits = g.initializers
    by_name = {row.node.name: row.node for row in insp.rows}
    layout = {o: n.inputs[0] for n in g.nodes if n.op_type in _LAYOUT_OPS and n.inputs for o in n.outputs if o} \
        if held else {}
    seen: set[str] = set()
    repeated = 0
    for layer in layers:
        own = layer.workload.weight_bytes + (layer.workload.weights_unread if held else 0)
        if not own:
            continue
        mine: dict[str, int] = {}
        for n in layer.nodes:
            node = by_name.get(n)
            for x in node.inputs if node is not None else ():
                if layout and x not in inits and x in g.constants:
                    x = _layout_root(x, layout, inits, g.tensors)
                t = g.tensors.get(x) if x in inits else None
                if t is not None and t.shape is not None:
                    mine[x] = t.nbytes
        total = sum(mine.values())
        again = sum(b for x, b in mine.items() if x in seen)
        if total and again:
            repeated += round(own * again / total)
        seen.update(mine)
    return repeated


# ops that rearrange a tensor's elements without changing them or their count
_LAYOUT_OPS = frozenset({"Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})


def _layout_root(x: str, layout: dict, inits, tensors) -> str:
    """The initializer a folded constant rearranges (itself when it is not one, or changes bytes)."""
    root = x
    for _ in range(8):
        if root in inits or root not in layout:
            break
        root = layout[root]
    if root in inits and root != x:
        a, b = tensors.get(root), tensors.get(x)
        if a is not None and b is not None and a.nbytes == b.nbytes:
            return root
    return x


def _own_bytes(t) -> int:
    return t.nbytes


def arena_bytes(insp, layers, internal: bool = False, size=None) -> int:
    """The activation bytes live at once at the peak of one inference: what a runtime that reuses
    its buffers (ONNX Runtime's planned arena) touches per inference besides the weights. A tensor
    counts from the node that writes it until the layer that reads it last has finished (a fused
    layer holds its input and its output at once), when it leaves its layer (a fused layer's inner
    tensors are never stored) or is a graph output; the model's inputs count until their last
    reader. Views and shape values (free layers) add nothing. ``internal``: the model's inputs and
    outputs left out (the buffers a caller holds, or a serving runtime updates in place: a decoder's
    KV cache), a graph output counting only while a layer still reads it. ``size``: a tensor's bytes
    (default ``Tensor.nbytes``; a precision what-if's, ``dnnperf.api``)."""
    from dnnperf.vocab import FREE_FAMILIES

    g = insp.graph
    rows = insp.rows
    layer_of: dict[str, object] = {}
    for layer in layers:
        for n in layer.nodes:
            layer_of.setdefault(n, layer)
    end: dict[int, int] = {}  # layer -> its last row
    for i, row in enumerate(rows):
        mine = layer_of.get(row.node.name)
        if mine is not None:
            end[id(mine)] = i
    constants = g.constants | g.initializers
    last: dict[str, int] = {}
    readers: dict[str, set] = {}
    for i, row in enumerate(rows):
        mine = layer_of.get(row.node.name)
        done = end.get(id(mine), i) if mine is not None else i
        for x in row.node.inputs:
            if x and x not in constants:
                last[x] = max(last.get(x, -1), done)
                readers.setdefault(x, set()).add(id(mine))
    outputs = set(g.outputs)
    if size is None:
        size = _own_bytes
    live = {} if internal else {x: size(g.tensors[x]) for x in g.inputs
                                if x not in constants and x in g.tensors and g.tensors[x].shape is not None}
    frees: dict[int, list[str]] = {}
    for x in live:
        frees.setdefault(last.get(x, -1), []).append(x)
    now = peak = sum(live.values())
    for i, row in enumerate(rows):
        mine = layer_of.get(row.node.name)
        if mine is not None and mine.workload.family not in FREE_FAMILIES:
            for o in row.node.outputs:
                t = g.tensors.get(o) if o else None
                if t is None or t.shape is None or o in constants or o in live:
                    continue
                kept = o in outputs and not internal
                if kept or readers.get(o, set()) - {id(mine)}:
                    n = size(t)
                    now += n
                    live[o] = n
                    frees.setdefault(len(rows) if kept else last.get(o, i), []).append(o)
        peak = max(peak, now)
        for x in frees.pop(i, ()):
            now -= live.pop(x, 0)
    return peak


def cold_start_bytes(insp, layers, first_touch) -> dict[str, int]:
    """{layer name: bytes it touches first in an inference}: a network run again and again touches
    its whole reach between two inferences, so the image a first convolution reads and the buffer it
    writes (nothing in the network wrote there since the last inference) are cold when that reach
    passes the cache (``rules.cold_start_time``). Only layers ``first_touch(layer)`` accepts (a CPU's
    image-reading convolutions) that read a model input: the input's bytes to the first such reader of
    it, the layer's output bytes to each (every one writes a buffer of its own)."""
    g = insp.graph
    inputs = set(g.inputs) - g.initializers
    if not inputs:
        return {}
    by_name = {row.node.name: row.node for row in insp.rows}
    taken: set[str] = set()
    out: dict[str, int] = {}
    for layer in layers:
        reads = [x for n in layer.nodes if (node := by_name.get(n)) is not None for x in node.inputs if x in inputs]
        if not reads or not first_touch(layer):
            continue
        fresh = [x for x in dict.fromkeys(reads) if x not in taken]
        taken.update(fresh)
        image = sum(g.tensors[x].nbytes for x in fresh if g.tensors.get(x) is not None and g.tensors[x].shape is not None)
        out[layer.name] = image + layer.workload.bytes_written
    return out
