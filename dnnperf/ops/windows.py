"""The output dims of a sliding window (convolution or pooling) from its input's dims and attributes:
one formula for the loader's own rules (``dnnperf.load.fast``), ONNX's gaps (``dnnperf.load.onnx_fixes``,
``dnnperf.load.uninferred``) and the contrib ops' shape rules (FusedConv, QLinearConv,
QLinearAveragePool; in channels-last layout NhwcConv, NhwcMaxPool, QLinearAveragePool's)."""

from __future__ import annotations


def windowed(op: str, a: dict, x: tuple, dims: list) -> tuple | None:
    """Output dims of a convolution or pooling window over N x C x spatial input ``x`` (ONNX's
    formulas: explicit pads, SAME_UPPER / SAME_LOWER / VALID auto_pad, dilations, ceil_mode)."""
    if len(x) < 3:
        return None
    spatial = x[2:]
    r = len(spatial)
    if op == "Conv":
        w = dims[1] if len(dims) > 1 else None
        if w is None or len(w) != len(x):
            return None
        kernel = a.get("kernel_shape") or list(w[2:])
        channels = w[0]
    else:
        kernel = a.get("kernel_shape")
        channels = x[1]
    if not kernel or len(kernel) != r or min(kernel) < 1:
        return None
    strides = a.get("strides") or [1] * r
    dil = a.get("dilations") or [1] * r
    pads = a.get("pads") or [0] * (2 * r)
    auto = a.get("auto_pad", "NOTSET")
    ceil_mode = bool(a.get("ceil_mode", 0)) and op != "Conv"
    if len(strides) != r or len(dil) != r or len(pads) != 2 * r or min(strides) <= 0 or min(dil) <= 0:
        return None
    out = []
    for i in range(r):
        ext = dil[i] * (kernel[i] - 1) + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-spatial[i] // strides[i])
        elif auto in ("VALID", "NOTSET"):  # VALID: no padding, ceil_mode as with explicit pads (ONNX's
            # inference and ONNX Runtime: MaxPool k = 4, stride 3 on 12 with ceil_mode gives 4)
            span = spatial[i] - ext if auto == "VALID" else spatial[i] + pads[i] + pads[i + r] - ext
            o = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
            if ceil_mode and (o - 1) * strides[i] >= spatial[i] + (pads[i] if auto == "NOTSET" else 0):
                o -= 1  # the last window would start in the end padding
        else:
            return None
        if o <= 0:
            return None
        out.append(o)
    return (x[0], channels) + tuple(out)


def channels_first(shape) -> tuple:
    """N x spatial x C (or a channels-last kernel M x kH x kW x C) as N x C x spatial."""
    return (shape[0], shape[-1]) + tuple(shape[1:-1]) if len(shape) >= 3 else tuple(shape)


def windowed_channels_last(op: str, a: dict, x: tuple, dims: list) -> tuple | None:
    """``windowed`` over a channels-last input (and channels-last weights in ``dims``), its output
    channels-last too."""
    y = windowed(op, a, channels_first(x), [channels_first(d) if d is not None else None for d in dims])
    return (y[0],) + y[2:] + (y[1],) if y is not None else None
