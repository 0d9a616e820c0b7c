"""Shape rules for two first-opset spellings ONNX's current inference gives no shape for, so that one
such node at the top of an old export no longer leaves every later layer unscored:

- Tile-1 (opsets 1-5): ``input``, ``tiles``, ``axis``; the last two are one-element tensors of the
  input's (float) type. The output repeats the input ``tiles`` times along ``axis``.
- Upsample-1 (opsets 1-6, experimental): an N x C x H x W input and the attributes ``height_scale`` and
  ``width_scale``; the output is N x C x floor(H x height_scale) x floor(W x width_scale).

From Tile-6 and Upsample-7 on, ONNX's own inference has the rule: these return None (defer to it).
Registered into ``dnnperf.load.shapes.RULES`` on import (``dnnperf.load.fold`` imports this module).
"""

from __future__ import annotations

import math

import numpy as np

from dnnperf.load.shapes import RULES, axis_index


def _one(v) -> float | None:
    """The single value of a one-element tensor (any type), else None."""
    if v is None:
        return None
    a = np.asarray(v).reshape(-1)
    return float(a[0]) if a.size == 1 else None


def _tile_1(attrs, dims, vals, opset):
    if opset >= 6:
        return None
    x = dims[0] if dims else None
    tiles = _one(vals[1]) if len(vals) > 1 else None
    axis = _one(vals[2]) if len(vals) > 2 else None
    if x is None or tiles is None or axis is None or tiles < 1 or tiles != int(tiles) or axis != int(axis):
        return None
    k = axis_index(int(axis), len(x))
    return [tuple(d * int(tiles) if i == k else d for i, d in enumerate(x))]


def _upsample_1(attrs, dims, vals, opset):
    if opset >= 7:
        return None
    x = dims[0] if dims else None
    hs, ws = attrs.get("height_scale"), attrs.get("width_scale")
    if x is None or len(x) != 4 or hs is None or ws is None or not (hs >= 1 and ws >= 1):
        return None  # the experimental op upsamples only (its scales are at least 1)
    return [(x[0], x[1], math.floor(x[2] * hs), math.floor(x[3] * ws))]


RULES["Tile"] = (_tile_1, (1, 2))
RULES["Upsample"] = (_upsample_1, ())
