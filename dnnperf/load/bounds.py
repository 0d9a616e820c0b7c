"""Gathers that index past their table: a model that cannot run at the dims it was given.

A learned position table (GPT-2's 1,024-row ``wpe``) is read at positions computed from the sequence
length (``Range(0, sequence_length)``): at ``--dim sequence_length=2000`` the model reads row 1,999 of
a 1,024-row table, which ONNX forbids and no runtime executes, yet every shape still resolves and
the estimate came out confident. The indices follow from shapes alone, so they are known at load
time: ``check`` evaluates them (numpy, at most ``MAX_INDEX_ELEMS`` elements, kept apart from the
loader's table of folded values) for every Gather from a weight, and refuses an index outside the
table with the node, the row and the table's length. Indices that come from the model's inputs
(token ids) are data, never checked.
"""

from __future__ import annotations

from dnnperf.errors import DnnperfError
from dnnperf.load.shapes import axis_index

MAX_INDEX_ELEMS = 1 << 20


def check(ordered, res, weights: dict, path: str) -> None:
    """Raise DnnperfError for a Gather of ``ordered`` whose folded indices leave its weight's axis.
    ``weights``: {initializer name: its dims}."""
    store: dict = {}
    for n in ordered:
        if n.op_type != "Gather" or n.domain not in ("", "ai.onnx") or len(n.input) < 2 or not n.input[1]:
            continue
        dims = weights.get(n.input[0])
        if not dims:
            continue
        try:
            rows = dims[axis_index(int(res.attrs(n).get("axis", 0)), len(dims))]
        except (ValueError, TypeError, IndexError):
            continue  # a malformed axis: the shape rules leave the node to ONNX, which says so
        idx = res.value(n.input[1], limit=MAX_INDEX_ELEMS, store=store)
        if idx is None or idx.size == 0 or idx.dtype.kind not in "iu":
            continue
        hi, lo = int(idx.max()), int(idx.min())
        if hi >= rows or lo < -rows:
            bad = hi if hi >= rows else lo
            raise DnnperfError(f"'{path}': node '{n.name or n.output[0]}' (Gather) reads row {bad} of '{n.input[0]}', "
                               f"which has {rows}: the model cannot run at these dims (a sequence past its maximum "
                               "positions?) — lower the --dim / --input-shape sizes")
