"""Ops ONNX listed as experimental up to opset 9 and then removed from the standard: ImageScaler,
Crop, Affine, Scale, ScaledTanh and ParametricSoftplus. Exporters of that time (CNTK, Caffe2, early
PyTorch and WinML tools) wrote them, and the model zoo's opset 1-8 files still hold them (tiny-yolov2
and emotion-ferplus open with an ImageScaler). ONNX's current shape inference no longer knows them, so
one at the input left every later layer without a shape; their shape rules live here with their costs.

Counting conventions (ops per output element, as ``dnnperf.ops.elementwise``):

- ImageScaler: ``scale * x + bias[c]``, 2. Affine: ``alpha * x + beta``, 2. Scale: ``scale * x``, 1.
- ScaledTanh: ``alpha * tanh(beta * x)``, 3. ParametricSoftplus: ``alpha * log(1 + exp(beta * x))``, 5.
- Crop: a copy of the kept window (``border`` = left, top, right, bottom; with ``scale`` = height,
  width, the window of that size from the left and top borders), no arithmetic.
"""

from __future__ import annotations

from dnnperf.ops import Contradiction, Ctx, register, register_check, register_shapes
from dnnperf.ops.elementwise import _make, same_as_first
from dnnperf.ops.movement import _picked

OPS_PER_ELEMENT = {"ImageScaler": 2, "Affine": 2, "Scale": 1, "ScaledTanh": 3, "ParametricSoftplus": 5}


def crop_shape(attrs, ins, n_out):
    """Shape rule of Crop on an N x C x H x W input: H and W less the borders, or ``scale``'s size."""
    x = ins[0] if ins else None
    if x is None or x[0] is None or len(x[0]) != 4 or any(not isinstance(d, int) for d in x[0]):
        return []
    n, c, h, w = x[0]
    border = list(attrs.get("border") or [])
    scale = list(attrs.get("scale") or [])
    if len(border) != 4 or any(b < 0 for b in border):
        return []
    left, top, right, bottom = border
    if scale:
        if len(scale) != 2 or top + scale[0] > h or left + scale[1] > w or min(scale) < 1:
            return []
        oh, ow = scale
    else:
        oh, ow = h - top - bottom, w - left - right
    if oh < 1 or ow < 1:
        return []
    return [((n, c, int(oh), int(ow)), x[1])]


def crop(ctx: Ctx):
    """Reads and writes the kept window only (a strided copy of rows), as a Slice does."""
    return _picked(ctx)


def _scaler_bias(ctx: Ctx) -> None:
    """ImageScaler's bias holds one value per channel (axis 1 of its N x C x H x W input)."""
    bias = ctx.attr("bias", None)
    x = ctx.in_shape(0)
    if bias is not None and len(x) > 1 and len(list(bias)) != x[1]:
        raise Contradiction(f"its bias has {len(list(bias))} values for {x[1]} channels")


_SCALE = _make(OPS_PER_ELEMENT["ImageScaler"])


def _scaler(ctx: Ctx):
    _scaler_bias(ctx)
    return _SCALE(ctx)


register({op: _make(w) for op, w in OPS_PER_ELEMENT.items() if op != "ImageScaler"})
register({"ImageScaler": _scaler})
register_check({"ImageScaler": _scaler_bias})
register_shapes({op: same_as_first for op in OPS_PER_ELEMENT})
register({"Crop": crop})
register_shapes({"Crop": crop_shape})
