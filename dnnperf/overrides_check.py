"""The user's sizes (--batch, --dim, --input-shape) against the model they were given for: a node they
leave contradicting itself is an error naming the flags and the node, unless the file contradicts
itself there without them; a --batch that rewrote the channels of an input with no batch axis is said
as that. Every command that loads with overrides goes through ``checked``."""

from __future__ import annotations

import os
from dataclasses import replace

from dnnperf.errors import DnnperfError
from dnnperf.inspection import Inspection, Row, inspect_graph
from dnnperf.ir import ShapeOverrides
from dnnperf.load import load_graph


# ops whose output size a constant input states: a contradiction there is a size the export baked in
_SHAPED_BY_CONSTANTS = frozenset({"Reshape", "Expand", "Tile", "ConstantOfShape", "Resize", "Upsample"})


def checked(insp: Inspection, overrides: ShapeOverrides) -> Inspection:
    """``insp`` unless the shapes the user gave leave a node with contradicting shapes: then an
    error naming the flags and the node (every command that loads with overrides goes through it).
    --batch 1 on a model whose input has no batch axis is what one run of it is: the model as the file
    states it (its note says one run is one sample); any other --batch there is refused."""
    if overrides.batch == 1 and (insp.no_batch_axis or any(r.kind == "contradiction" for r in insp.rows)):
        plain = _unbatched(insp.path, overrides)
        if plain is not None:
            return checked(plain, replace(overrides, batch=None))
    if overrides.input_shapes or overrides.dims or overrides.batch:
        bad = next((r for r in insp.rows if r.kind == "contradiction"), None)
        if bad is not None:  # the flags are at fault only where the file does not contradict itself already
            bad = _not_in_the_file(insp)
        if bad is not None and overrides.batch not in (None, 1):  # (--batch 1 was read without it above)
            _refuse_batch_without_axis(insp.path, overrides)  # --batch rewrote the channels: say that instead
        if bad is not None:
            flags = " ".join([f"--input-shape {n}={'x'.join(map(str, d))}" for n, d in overrides.input_shapes]
                             + [f"--dim {k}={v}" for k, v in overrides.dims] + ([f"--batch {overrides.batch}"] if overrides.batch else []))
            fix = ("the export fixes that size inside the graph (a constant target shape): re-export with dynamic "
                   "axes, or analyse at the exported size" if bad.node.op_type in _SHAPED_BY_CONSTANTS else
                   "pass sizes every branch maps alike (a multiple of the network's total stride: 32 for most "
                   "detectors and U-Nets)" if bad.node.op_type == "Concat" else "pass shapes that match the model's weights")
            raise DnnperfError(f"{flags} contradicts the model: node '{bad.node.name}' ({bad.node.op_type}): {bad.reason} "
                               f"— {fix}")
    if overrides.batch is not None and insp.no_batch_axis:  # --batch rewrote its first dim, the channels
        raise _no_batch_axis(overrides.batch, insp.no_batch_axis)
    return insp


def _not_in_the_file(insp: Inspection) -> Row | None:
    """The first contradicting node of ``insp`` (loaded with the user's sizes) that the file loaded as it
    is (its symbols at their defaults) does not contradict: a node the file contradicts at any size is
    its own fault, shown as in a load without flags (PARTIAL, the node named), not the flags'. Every
    contradicting node counts as the flags' when the file does not load without them (a symbol only
    --dim resolves)."""
    rows = [r for r in insp.rows if r.kind == "contradiction"]
    if not os.path.isfile(insp.path):
        return rows[0]
    try:
        plain = inspect_graph(load_graph(insp.path), insp.path)
    except DnnperfError:
        return rows[0]
    own = {r.node.name for r in plain.rows if r.kind == "contradiction"}
    return next((r for r in rows if r.node.name not in own), None)


def _no_batch_axis(batch: int, name: str) -> DnnperfError:
    return DnnperfError(f"--batch {batch}: input '{name}' has no batch axis (the model stacks one sample into the "
                        "batch its first convolution reads) — analyse without --batch")


def _unbatched(path: str, overrides: ShapeOverrides) -> Inspection | None:
    """The model read without --batch when its input then has no batch axis (a detector's [3, H, W]
    image, whose first dim --batch rewrote), else None."""
    if not os.path.isfile(path):
        return None
    try:
        plain = inspect_graph(load_graph(path, replace(overrides, batch=None)), path)
    except DnnperfError:
        return None
    return plain if plain.no_batch_axis else None


def _refuse_batch_without_axis(path: str, overrides: ShapeOverrides) -> None:
    """Where --batch left a node contradicting itself, the model read without it: when its input has no
    batch axis, --batch rewrote the channels, and that is the error."""
    plain = _unbatched(path, overrides)
    if plain is not None:
        raise _no_batch_axis(overrides.batch, plain.no_batch_axis)
