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
