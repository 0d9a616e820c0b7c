"""Outputs whose size depends on the data (Unique, NonZero, NonMaxSuppression, Compress, a
StringNormalizer's stopwords, a Slice at run-time offsets), filled with their upper bound where ONNX's
inference leaves them open; the cost functions say they were costed at the bound, the loader notes
the Slices. A Compress whose condition is known at load time gets the count it keeps, and a
StringNormalizer without stopwords its input's shape: exact, not bounds.
"""

from __future__ import annotations

import numpy as np

from dnnperf.load.read import static
from dnnperf.load.shapes import axis_index

_DEFAULT = ("", "ai.onnx")
_SIZED_BY_DATA = frozenset({"Unique", "NonMaxSuppression", "NonZero", "Slice", "Compress", "StringNormalizer"})


def bound_shapes(ordered, types, res, sliced: list | None = None) -> bool:
    """Upper bounds for outputs whose size depends on the data (Unique, NonMaxSuppression, NonZero,
    Compress, a Slice at run-time offsets: at most its input); the cost functions of the first four say
    that they were costed at the bound, and the names of bounded Slices are appended to ``sliced``."""
    changed = False
    for n in ordered:
        if n.op_type not in _SIZED_BY_DATA or n.domain not in _DEFAULT:
            continue
        if all(o and static(types.get(o, (None, ""))[0]) is not None for o in n.output if o):
            continue
        x = types.get(n.input[0]) if n.input else None
        dims = static(x[0]) if x is not None else None
        if dims is None:
            continue
        numel = 1
        for d in dims:
            numel *= d
        if n.op_type == "Slice":
            shapes = [(tuple(dims), x[1])]
            if sliced is not None:
                sliced.append(n.name or n.output[0])
        elif n.op_type == "Unique":
            axis = res.attrs(n).get("axis")
            if axis is None:
                shapes = [((numel,), x[1]), ((numel,), "int64"), ((numel,), "int64"), ((numel,), "int64")]
            else:
                try:
                    a = axis_index(int(axis), len(dims))
                except ValueError:  # a malformed axis: the outputs stay open (never wrapped round)
                    continue
                shapes = [(tuple(dims), x[1])] + [((dims[a],), "int64")] * 3
        elif n.op_type == "NonZero":
            shapes = [((len(dims), numel), "int64")]
        elif n.op_type == "StringNormalizer":  # as many strings (at most, with stopwords: its cost says so)
            shapes = [(tuple(dims), x[1])]
        elif n.op_type == "Compress":
            kept = _compressed(n, dims, numel, types, res)
            if kept is None:
                continue
            shapes = [(kept, x[1])]
        else:
            sc = types.get(n.input[1]) if len(n.input) > 1 else None
            sdims = static(sc[0]) if sc is not None else None
            if sdims is None or len(sdims) != 3:
                continue
            b, c, boxes = sdims
            cap = res.value(n.input[2]) if len(n.input) > 2 and n.input[2] else None
            if cap is not None and cap.size == 1:
                boxes = min(boxes, max(0, int(cap.reshape(-1)[0])))
            shapes = [((b * c * boxes, 3), "int64")]
        for o, t in zip(n.output, shapes):
            if o:
                types[o] = t
                changed = True
    return changed


def _compressed(n, dims: tuple, numel: int, types: dict, res) -> tuple | None:
    """Compress's output: the slices (along ``axis``; without one, the flattened elements) its 1-D
    condition selects; the condition is read up to the input's length. With the condition known at
    load time, the count it selects; otherwise the upper bound (every one kept: the cost function
    says so). None when the condition's length or the axis is not known or malformed."""
    c = types.get(n.input[1]) if len(n.input) > 1 and n.input[1] else None
    cdims = static(c[0]) if c is not None else None
    if cdims is None or len(cdims) != 1:
        return None
    axis = res.attrs(n).get("axis")
    if axis is None:
        a, length = None, numel
    else:
        try:
            a = axis_index(int(axis), len(dims))
        except ValueError:
            return None
        length = dims[a]
    cond = res.value(n.input[1])
    keep = min(cdims[0], length) if cond is None else int(np.count_nonzero(np.asarray(cond).reshape(-1)[:length]))
    return (keep,) if a is None else tuple(keep if i == a else d for i, d in enumerate(dims))
