"""The model input that has no batch axis, if any: a detector traced on a list of images takes one
[3, H, W] image and stacks it into the [1, 3, H, W] its first convolution reads, so one run is one
sample and ``--batch`` would rewrite its channels (``dnnperf.api`` refuses it, the inspection notes it).
"""

from __future__ import annotations

from dnnperf.ir import Graph

__all__ = ["unbatched_input"]


def unbatched_input(graph: Graph, rows: list) -> str:
    """The first input when it has no batch axis (else ""): a detector traced on a list of images takes
    one [3, H, W] image and stacks it into the [1, 3, H, W] its first convolution reads (ONNX's Conv
    input is N x C x ...): its first dim is channels, and one run is one sample."""
    name = graph.inputs[0] if graph.inputs else None
    t = graph.tensors.get(name) if name else None
    if t is None or not t.shape:
        return ""
    conv = next((r for r in rows if r.node.op_type == "Conv" and r.workload is not None), None)
    x = graph.tensors.get(conv.node.inputs[0]) if conv is not None and conv.node.inputs else None
    if x is None or not x.shape or x.shape[0] != 1 or len(x.shape) != len(t.shape) + 1:
        return ""
    if not _prepared_from(graph, conv.node.inputs[0], name):
        return ""  # the convolution reads a computed tensor (Mamba's projected tokens, a spectrogram's frames)
    # the new leading axis is the batch when the input's first dim is the convolution's channels: more
    # than one of them, or (a --batch that rewrote them) not the channels the convolution reads. A
    # batch-1 spectrogram [1, 80, T] unsqueezed to [1, 1, 80, T] has its batch first: not flagged
    if t.shape[0] > 1 or x.shape[1] != t.shape[0]:
        return name
    return ""


# ops an image passes through on its way to a detector's first convolution (normalised, resized,
# padded, stacked, selected, laid out, cast), with the inputs that carry it: the first, or all
_IMAGE_PREP = {**dict.fromkeys(("Unsqueeze", "Reshape", "Squeeze", "Identity", "Cast", "Clip", "Resize", "Upsample",
                                "Pad", "Slice", "Expand", "Transpose", "Gather"), "first"),
               **dict.fromkeys(("Sub", "Div", "Mul", "Add", "Concat"), "all")}


def _prepared_from(graph: Graph, tensor: str, source: str, limit: int = 64) -> bool:
    """``tensor`` is ``source`` itself or made from it by image preparation alone (``_IMAGE_PREP``):
    the walk back stops at any other op (a product, a transform) and at an embedding's indices, so a
    convolution over a computed tensor is never read as taking the model's input."""
    producers = {o: n for n in graph.nodes for o in n.outputs if o}
    todo, seen = [tensor], set()
    while todo and len(seen) < limit:
        name = todo.pop()
        if name == source:
            return True
        if name in seen:
            continue
        seen.add(name)
        p = producers.get(name)
        carry = _IMAGE_PREP.get(p.op_type) if p is not None and p.domain in ("", "ai.onnx") else None
        if carry:
            todo.extend(i for i in (p.inputs if carry == "all" else p.inputs[:1]) if i and i not in graph.initializers)
    return False
