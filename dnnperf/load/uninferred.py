"""Shape rules for the ops ONNX's own inference has no shape function for (``onnx.defs``: a schema
without ``has_type_and_shape_inference_function``), so that one such node no longer leaves every later
layer unscored. Checked against the installed onnx's schema list by ``tests/test_workloads.py``.

- GroupNormalization (opsets 18 and 21) and MeanVarianceNormalization (9, 13): function ops whose
  output is their input's shape; ONNX's inference of their function bodies gives nothing (MVN's body
  even raises), so a diffusion UNet exported with opset 21's GroupNormalization lost every layer.
- Tile-1 (opsets 1-5): ``input``, ``tiles``, ``axis``; the last two are one-element tensors of the
  input's (float) type. The output repeats the input ``tiles`` times along ``axis``.
- Upsample-1 (opsets 1-6, experimental): an N x C x H x W input and the attributes ``height_scale`` and
  ``width_scale``; the output is N x C x floor(H x height_scale) x floor(W x width_scale).
- LpPool-1 and GlobalLpPool-1: the pooling windows (``dnnperf.ops.windows``) and N x C x 1 x ... x 1.
- Split-1: the parts' sizes given as the optional second input or the ``split`` attribute (equal parts
  without them would need the node's output count, which a rule is not given: left open, listed).

Compress-9 has no shape function either: its output size depends on the data
(``dnnperf.load.data_sized``). GRU-1 (opsets 1-2) keeps none: listed unscored.
Where a later version of the op has ONNX's rule, these return None (defer to it).
Registered into ``dnnperf.load.shapes.RULES`` on import (``dnnperf.load.fold`` imports this module).
"""

from __future__ import annotations

import math

import numpy as np

from dnnperf.load.shapes import RULES, _global_pool, _same, axis_index, split
from dnnperf.ops.windows import windowed

# ops without ONNX's shape function that this module does not give one, with the reason
WITHOUT_RULE = {"GRU": "GRU-1 (opsets 1-2): listed unscored", "Compress": "data-dependent: dnnperf.load.data_sized"}


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


def _lp_pool_1(attrs, dims, vals, opset):
    if opset >= 2 or not dims or dims[0] is None:
        return None
    y = windowed("LpPool", attrs, tuple(dims[0]), dims)
    return [y] if y is not None else None


def _split_1(attrs, dims, vals, opset):
    if opset >= 2 or not dims or dims[0] is None:
        return None
    sizes = vals[1] if len(vals) > 1 and vals[1] is not None else attrs.get("split")
    if sizes is None or not len(sizes):
        return None
    return split({**attrs, "split": [int(v) for v in np.asarray(sizes).reshape(-1)]}, tuple(dims[0]), None,
                 int(np.asarray(sizes).size), opset)


def _global_lp_pool_1(attrs, dims, vals, opset):
    return _global_pool(attrs, dims, vals, opset) if opset < 2 else None


# the rules above that cover one old version of an op only (a later one defers to ONNX's inference)
VERSIONED = frozenset({"Tile", "Upsample", "LpPool", "GlobalLpPool", "Split"})

RULES["Tile"] = (_tile_1, (1, 2))
RULES["Upsample"] = (_upsample_1, ())
RULES["LpPool"] = (_lp_pool_1, ())
RULES["GlobalLpPool"] = (_global_lp_pool_1, ())
RULES["Split"] = (_split_1, (1,))
RULES["GroupNormalization"] = RULES["MeanVarianceNormalization"] = (_same, ())
