"""--batch, verified: the batch reaches every tensor that carried it, or the load is refused.

Exporters trace a model at batch 1 and sometimes bake that 1 into a shape constant: a Reshape to
[1, -1, 768] then folds a larger batch into the sequence (GPT-2 at --batch 4 would compute 512 x 512
attention instead of four 128 x 128). dnnperf

1. finds such pins (a Reshape whose input carries the batch but whose constant target shape keeps
   the batch-1 first dim literally while a -1 absorbs the batch elsewhere) and rewrites that first
   entry to B times it (in a copy of the model used for this batch only); then
2. verifies the result against a batch-1 load of the same model: every activation's element count
   must scale by 1 (batch-independent) or by B, and every matrix layer with weights by B. Anything
   else is refused (exit 2) naming the node, instead of printing a number that is quietly wrong.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dnnperf.errors import DnnperfError
from dnnperf.ir import Graph, ShapeOverrides

MAX_ROUNDS = 8


def pinned_reshapes(g: Graph, ref: Graph, batch: int) -> list[tuple[str, str, np.ndarray]]:
    """(output tensor, shape input, rewritten shape value) for each Reshape that pins the batch:
    its input carries the batch (B x the elements it has at batch 1) but its constant target shape
    repeats the batch-1 first dim literally while a -1 absorbs the batch somewhere else."""
    out = []
    ref_t = ref.tensors
    for n in g.nodes:
        if n.op_type != "Reshape" or len(n.inputs) < 2 or not n.outputs:
            continue
        x, y = g.tensors.get(n.inputs[0]), g.tensors.get(n.outputs[0])
        x1, y1 = ref_t.get(n.inputs[0]), ref_t.get(n.outputs[0])
        val = g.values.get(n.inputs[1])
        if val is None or None in (x, y, x1, y1) or None in (x.numel, y.shape, x1.numel, y1.shape) or not x1.numel:
            continue
        v = [int(e) for e in np.asarray(val).reshape(-1)]
        if not v or not y.shape or -1 not in v or x.numel != batch * x1.numel:
            continue
        if v[0] > 0 and v[0] == y1.shape[0] and y.shape[0] == y1.shape[0]:
            new = np.asarray(v, dtype=np.int64)
            new[0] = v[0] * batch
            out.append((n.outputs[0], n.inputs[1], new))
    return out


def rewrite_pins(model, pins) -> list[str]:
    """Point each pinning Reshape at a new shape initializer; return the names of the nodes rewritten."""
    from onnx import numpy_helper

    by_output = {o: n for n in model.graph.node for o in n.output if o}
    notes = []
    for k, (out_name, shape_name, new) in enumerate(pins):
        node = by_output.get(out_name)
        if node is None:
            continue
        name = f"{shape_name}__dnnperf_batch{k}"
        model.graph.initializer.append(numpy_helper.from_array(new, name))
        node.input[1] = name
        notes.append(node.name or out_name)
    return notes


def pin_note(names: list[str], batch: int) -> str:
    shown = ", ".join(f"'{n}'" for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (f"{len(names)} Reshape(s) fixed the exported batch in their shape constants ({shown}); rewritten so that "
            f"--batch {batch} reaches them (verified against a batch-1 load)")


def verify(g: Graph, ref: Graph, batch: int, flag: str) -> None:
    """Refuse when ``g`` (at ``batch``) does not scale from ``ref`` (batch 1) as a batch should; a
    tensor that grows as the batch squared (or cubed) is a product of samples with samples, noted in
    ``g.notes``."""
    from dnnperf.ops import Unsupported, cost_node

    ref_nodes = {n.name: n for n in ref.nodes}
    mixed: list[str] = []
    for n in g.nodes:
        r = ref_nodes.get(n.name)
        if r is None or n.op_type in ("Shape", "Size", "Constant"):
            continue
        for o in n.outputs:
            if not o or o in g.constants or o in g.values:
                continue
            a, b = g.tensors.get(o), ref.tensors.get(o)
            if a is None or b is None or a.numel is None or b.numel is None or not b.numel:
                continue
            ratio = a.numel / b.numel
            if ratio in (batch ** 2, batch ** 3) and batch > 1:
                # samples against samples (CLIP's [images, texts] logits, a batch's pairwise
                # similarities): real work at this batch, not a pin; said, since it does not scale
                if not mixed:
                    mixed.append(f"--batch {batch}: node '{n.name}' ({n.op_type}) gives '{o}' {ratio:g}x its size at "
                                 "batch 1: it relates the batch's samples to each other (an outer product over the "
                                 "batch), so its cost grows faster than the batch and the figures at this batch do "
                                 "not carry to another")
                continue
            if ratio not in (1, batch):
                raise DnnperfError(
                    f"{flag} is not applied consistently: node '{n.name}' ({n.op_type}) gives '{o}' shape "
                    f"{list(a.shape)}, {ratio:g}x its size at batch 1 {list(b.shape)} (expected 1x or {batch}x) — "
                    "the export fixes the batch inside the graph; re-export with a dynamic batch, or analyse at --batch 1"
                )
        if n.op_type in ("Conv", "Gemm", "MatMul", "ConvTranspose") and any(i in g.initializers for i in n.inputs[1:2]) \
                and not all(i in g.constants for i in n.inputs[:1]):
            try:
                ma, mb = cost_node(g, n).macs, cost_node(ref, r).macs
            except (Unsupported, ArithmeticError, ValueError, TypeError, KeyError, IndexError):
                continue
            if mb and ma != batch * mb:
                raise DnnperfError(
                    f"{flag} is not applied consistently: layer '{n.name}' ({n.op_type}) does {ma:,} MACs, "
                    f"{ma / mb:g}x its {mb:,} at batch 1 (a layer with weights should do {batch}x) — the export fixes "
                    "the batch inside the graph; re-export with a dynamic batch, or analyse at --batch 1"
                )
    g.notes.extend(mixed)


def batch_one(ov: ShapeOverrides, axes: dict[str, int]) -> ShapeOverrides:
    """The same overrides at batch 1 (the reference the verification compares against)."""
    shapes = []
    for name, dims in ov.input_shapes:
        ax = axes.get(name, 0)
        shapes.append((name, tuple(1 if i == ax else d for i, d in enumerate(dims))))
    return replace(ov, batch=1, input_shapes=tuple(shapes))
