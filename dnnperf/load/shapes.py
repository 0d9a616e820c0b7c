"""Output shapes of the ops ONNX's shape inference (run without data propagation) most often leaves
open (Reshape, Slice, Expand... behind shape subgraphs), computed on plain tuples: a fraction of the cost of a per-node call into
ONNX's inference. Each rule gets the node's attributes, its inputs' dims (None when unknown) and the
folded values of the inputs it names, and returns the outputs' dims, or None to defer to ONNX.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from dnnperf.ir import LEGACY_BROADCAST, legacy_operand

Dims = tuple[int, ...]


def _bcast(*shapes) -> Dims | None:
    if len(shapes) == 2 and shapes[0] == shapes[1]:  # the common case (None == None stays None below)
        return shapes[0]
    if any(s is None for s in shapes):
        return None
    r = max(len(s) for s in shapes)
    out = []
    for i in range(r):
        d = 1
        for s in shapes:
            k = i - (r - len(s))
            if k < 0:
                continue
            x = s[k]
            if x != 1:
                if d != 1 and d != x:
                    return None
                d = x
        out.append(d)
    return tuple(out)


def _ints(v) -> list[int] | None:
    if v is None:
        return None
    a = np.asarray(v).reshape(-1)
    return a.tolist() if a.dtype.kind in "iu" else [int(x) for x in a.tolist()]


def axis_index(a: int, rank: int) -> int:
    """An axis in [-rank, rank) as its index; any other raises (the rule then leaves the node to ONNX,
    whose inference refuses it: taken modulo the rank, a malformed axis would give a quiet wrong shape)."""
    if not -rank <= a < rank:
        raise ValueError(f"axis {a} out of range for rank {rank}")
    return a % rank


def _same(attrs, dims, vals, opset):
    return [dims[0]] if dims and dims[0] is not None else None


def _vector(dims, i: int) -> None:
    """Input ``i`` (a target shape) is 1-D where its dims are known; else the rule declines (ONNX refuses it)."""
    if len(dims) > i and dims[i] is not None and len(dims[i]) != 1:
        raise ValueError("a shape input that is not 1-D")


def _reshape(attrs, dims, vals, opset):
    if opset < 5:  # Reshape-1: the target shape is an attribute
        x, shape = dims[0], attrs.get("shape")
        shape = list(shape) if shape is not None else None
    else:
        _vector(dims, 1)
        x, shape = dims[0], _ints(vals[1])
    if x is None or shape is None:
        return None
    out = [x[i] if s == 0 and not attrs.get("allowzero", 0) and i < len(x) else s for i, s in enumerate(shape)]
    if out.count(-1) > 1:
        return None
    n = 1
    for d in x:
        n *= d
    if -1 in out:
        rest = 1
        for d in out:
            if d != -1:
                rest *= d
        if rest == 0 or n % rest:
            return None
        out[out.index(-1)] = n // rest
    return [tuple(out)]


def _slice(attrs, dims, vals, opset):
    x = dims[0]
    if x is None:
        return None
    if opset < 10:
        starts, ends, axes, steps = attrs.get("starts"), attrs.get("ends"), attrs.get("axes"), None
    else:
        starts, ends = _ints(vals[1]), _ints(vals[2])
        axes = _ints(vals[3]) if len(vals) > 3 and vals[3] is not None else None
        steps = _ints(vals[4]) if len(vals) > 4 and vals[4] is not None else None
        if (len(dims) > 3 and dims[3] is not None and axes is None) or (len(dims) > 4 and dims[4] is not None and steps is None):
            return None
    if starts is None or ends is None:
        return None
    axes = list(axes) if axes is not None else list(range(len(starts)))
    steps = list(steps) if steps is not None else [1] * len(starts)
    out = list(x)
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        if sp == 0:
            return None
        ax = axis_index(ax, len(x))
        out[ax] = slice_length(st, en, sp, x[ax])
    return [tuple(out)]


def slice_length(start: int, end: int, step: int, dim: int) -> int:
    """Elements a Slice keeps on an axis of ``dim``, clamped as ONNX's spec and ONNX Runtime clamp (stepping
    backwards: start to [0, dim - 1], end to [-1, dim - 1]; Python's slice clamps a start before 0 to -1)."""
    if dim <= 0:
        return 0
    start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return max(0, -(-(end - start) // step))
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return max(0, -(-(start - end) // -step))


def _transpose(attrs, dims, vals, opset):
    x = dims[0]
    if x is None:
        return None
    perm = attrs.get("perm") or list(range(len(x)))[::-1]
    if sorted(perm) != list(range(len(x))):
        raise ValueError("perm is not a permutation of the input's axes")
    return [tuple(x[p] for p in perm)]


def _expand(attrs, dims, vals, opset):
    _vector(dims, 1)
    shape = _ints(vals[1])
    if dims[0] is None or shape is None:
        return None
    return [_bcast(dims[0], tuple(shape))]


def _unsqueeze(attrs, dims, vals, opset):
    x = dims[0]
    axes = attrs.get("axes") if opset < 13 else _ints(vals[1] if len(vals) > 1 else None)
    if x is None or axes is None:
        return None
    r = len(x) + len(axes)
    out = list(x)
    at = sorted(axis_index(a, r) for a in axes)
    if len(set(at)) != len(at):
        raise ValueError(f"axes {list(axes)} name one axis twice")  # ONNX refuses it; the rule declines
    for a in at:
        out.insert(a, 1)
    return [tuple(out)]


def _squeeze(attrs, dims, vals, opset):
    x = dims[0]
    if x is None:
        return None
    axes = attrs.get("axes") if opset < 13 else _ints(vals[1] if len(vals) > 1 else None)
    if axes is None:
        if opset >= 13 and len(dims) > 1 and dims[1] is not None:
            return None  # axes given but not constant
        return [tuple(d for d in x if d != 1)]
    drop = {axis_index(a, len(x)) for a in axes}
    return [tuple(d for i, d in enumerate(x) if i not in drop)]


def _matmul(attrs, dims, vals, opset):
    a, b = dims[0], dims[1]
    if a is None or b is None or not a or not b:
        return None
    sa, sb = len(a) == 1, len(b) == 1
    a2 = (1,) + a if sa else a
    b2 = b + (1,) if sb else b
    batch = _bcast(a2[:-2], b2[:-2])
    if batch is None or a2[-1] != b2[-2]:
        return None
    out = batch + (a2[-2], b2[-1])
    if sa:
        out = out[:-2] + out[-1:]
    if sb:
        out = out[:-1]
    return [out]


def _range(attrs, dims, vals, opset):
    if any(v is None for v in vals[:3]):
        return None
    start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in vals[:3])
    if delta == 0:
        return None
    return [(max(int(np.ceil((limit - start) / delta)), 0),)]


def _concat(attrs, dims, vals, opset):
    if any(d is None for d in dims) or not dims:
        return None
    ax = axis_index(attrs.get("axis", 1 if opset < 4 else 0), len(dims[0]))  # Concat-1's default axis: 1
    out = list(dims[0])
    out[ax] = sum(d[ax] for d in dims)
    return [tuple(out)]


def _gather(attrs, dims, vals, opset):
    x, idx = dims[0], dims[1]
    if x is None or idx is None:
        return None
    ax = axis_index(attrs.get("axis", 0), len(x))
    return [tuple(x[:ax]) + tuple(idx) + tuple(x[ax + 1:])]


def split(attrs: dict, x: Dims | None, sizes, n_out: int, opset: int) -> list[Dims] | None:
    """Split's output dims (``sizes``: the folded ``split`` input, opset 13 on and Split-1's optional one):
    the sizes given (by input or, before opset 13, attribute); else ``num_outputs`` parts (opset 18 on;
    the last one smaller when the axis does not divide, ONNX's rule), else equal parts, which must divide."""
    if x is None or n_out < 1:
        return None
    ax = axis_index(attrs.get("axis", 0), len(x))
    d = x[ax]
    parts = _ints(sizes) if opset >= 13 or (opset < 2 and sizes is not None) else attrs.get("split")
    if parts:
        if len(parts) != n_out or sum(parts) != d or min(parts) < 0:
            return None
    elif opset >= 18 and "num_outputs" in attrs:
        if attrs["num_outputs"] != n_out:
            return None
        chunk = -(-d // n_out)
        parts = [chunk] * (n_out - 1) + [d - chunk * (n_out - 1)]
        if parts[-1] < 0:
            return None
    elif d % n_out == 0:
        parts = [d // n_out] * n_out
    else:
        return None
    return [tuple(x[:ax]) + (p,) + tuple(x[ax + 1:]) for p in parts]


def _constant_of_shape(attrs, dims, vals, opset):
    _vector(dims, 0)
    shape = _ints(vals[0])
    return None if shape is None else [tuple(shape)]


def _pad(attrs, dims, vals, opset):
    x = dims[0]
    pads = (attrs.get("pads", attrs.get("paddings")) if opset < 11  # Pad-1 named them paddings
            else _ints(vals[1] if len(vals) > 1 else None))
    if x is None or pads is None:
        return None
    axes = _ints(vals[3]) if len(vals) > 3 and vals[3] is not None else list(range(len(x)))
    if len(dims) > 3 and dims[3] is not None and axes is None:
        return None
    out = list(x)
    k = len(axes)
    for j, a in enumerate(axes):
        a = axis_index(a, len(x))
        out[a] = x[a] + pads[j] + pads[j + k]
    return [tuple(out)]


def _flatten(attrs, dims, vals, opset):
    x = dims[0]
    if x is None:
        return None
    r, ax = len(x), attrs.get("axis", 1)
    ax = r if ax == r else axis_index(ax, r)  # the axis may be the rank itself (everything in the first dim)
    a = 1
    for d in x[:ax]:
        a *= d
    b = 1
    for d in x[ax:]:
        b *= d
    return [(a, b)]


def _gemm(attrs, dims, vals, opset):
    a, b = dims[0], dims[1]
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return None
    m = a[1] if attrs.get("transA") else a[0]
    n = b[0] if attrs.get("transB") else b[1]
    return [(m, n)]


def _global_pool(attrs, dims, vals, opset):
    x = dims[0]
    if x is None or len(x) < 3:  # N x C x spatial...: no shape follows from a rank below 3
        return None
    return [tuple(x[:2]) + (1,) * (len(x) - 2)]


def _where(attrs, dims, vals, opset):
    return [_bcast(*dims)] if len(dims) == 3 and all(d is not None for d in dims) else None


def _broadcast(attrs, dims, vals, opset):
    """Max and Min take one input or more."""
    return [_bcast(*dims)] if dims and all(d is not None for d in dims) else None


def _binary(attrs, dims, vals, opset, op_type=""):
    """Add, Mul, comparisons...: exactly two inputs (one alone is a malformed node for ONNX's checks);
    before opset 7 with the old broadcast (``ir.legacy_operand``): the first input's shape."""
    if len(dims) != 2 or any(d is None for d in dims):
        return None
    if opset < 7 and op_type in LEGACY_BROADCAST:
        b = legacy_operand(op_type, attrs, dims[0], dims[1], opset)
        return [tuple(dims[0])] if b is not None else None
    return [_bcast(*dims)]


def _legacy(op: str):  # a binary op's rule that knows its name (opset 1-6 broadcasting)
    return lambda attrs, dims, vals, opset: _binary(attrs, dims, vals, opset, op)


def _gather_nd(attrs, dims, vals, opset):
    x, idx = dims[0], dims[1]
    if x is None or idx is None:
        return None
    b = attrs.get("batch_dims", 0)
    if not idx or not 0 <= b < min(len(idx), len(x)) or idx[-1] > len(x) - b:
        raise ValueError("GatherND's indices reach past its data's rank")  # ONNX and ONNX Runtime refuse it
    return [tuple(idx[:-1]) + tuple(x[b + idx[-1]:])]


def _index_like(attrs, dims, vals, opset):
    return [dims[1]] if len(dims) > 1 and dims[1] is not None else None


def _layer_norm(attrs, dims, vals, opset):
    x = dims[0]
    if x is None:
        return None
    axis_index(attrs.get("axis", -1), len(x))
    return [x]  # Mean / InvStdDev outputs are left to ONNX


def _reduce(attrs, dims, vals, opset, axes_input_from=18):
    """ReduceMean and its kind: the axes come from input 1 from ``axes_input_from`` on (ReduceSum 13,
    the rest 18), from the attribute before; none given reduces every axis unless
    noop_with_empty_axes; keepdims (default 1) keeps them as 1s."""
    x = dims[0]
    if x is None:
        return None
    if opset >= axes_input_from:
        if len(dims) > 1 and vals[1] is None:
            return None  # axes computed at run time (or an empty name in their place): left to ONNX
        axes = _ints(vals[1]) if len(dims) > 1 else []
    else:
        axes = list(attrs.get("axes") or [])
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(len(x)))
    if any(not -len(x) <= a < len(x) for a in axes):
        return None
    axes = {axis_index(a, len(x)) for a in axes}
    if attrs.get("keepdims", 1):
        return [tuple(1 if i in axes else d for i, d in enumerate(x))]
    return [tuple(d for i, d in enumerate(x) if i not in axes)]


def _reduce_sum(attrs, dims, vals, opset):
    return _reduce(attrs, dims, vals, opset, axes_input_from=13)


# op -> (rule, indices of the inputs whose folded values the rule needs)
RULES: dict[str, tuple[Callable, tuple[int, ...]]] = {
    "Reshape": (_reshape, (1,)),
    "Slice": (_slice, (1, 2, 3, 4)),
    "Transpose": (_transpose, ()),
    "Expand": (_expand, (1,)),
    "Unsqueeze": (_unsqueeze, (1,)),
    "Squeeze": (_squeeze, (1,)),
    "MatMul": (_matmul, ()),
    "Range": (_range, (0, 1, 2)),
    "Concat": (_concat, ()),
    "Gather": (_gather, ()),
    "ConstantOfShape": (_constant_of_shape, (0,)),
    "ScatterND": (_same, ()),
    "ScatterElements": (_same, ()),
    "Pad": (_pad, (1, 3)),
    "Flatten": (_flatten, ()),
    "Gemm": (_gemm, ()),
    "GlobalAveragePool": (_global_pool, ()),
    "GlobalMaxPool": (_global_pool, ()),
    "Where": (_where, ()),
    "GatherND": (_gather_nd, ()),
    "GatherElements": (_index_like, ()),
    "LayerNormalization": (_layer_norm, ()),
    "ReduceSum": (_reduce_sum, (1,)),
}
for _op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
            "ReduceLogSumExp", "ReduceSumSquare"):
    RULES[_op] = (_reduce, (1,))
for _op in ("Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
            "Xor", "Mod", "BitShift", "PRelu"):
    RULES[_op] = (_legacy(_op) if _op in LEGACY_BROADCAST else _binary, ())
RULES["Max"] = RULES["Min"] = RULES["Sum"] = RULES["Mean"] = (_broadcast, ())


def _stft(attrs, dims, vals, opset):
    """STFT (signal [batch, length, 1 or 2], frame_step, window, frame_length): [batch, frames, bins, 2], bins
    = frame_length // 2 + 1 for a real signal with ``onesided`` (the default; ONNX's inference ignores it)."""
    x = dims[0]
    step = _ints(vals[1]) if len(vals) > 1 else None
    length = _ints(vals[3]) if len(vals) > 3 and vals[3] is not None else None
    if length is None and len(dims) > 2 and dims[2] is not None and len(dims[2]) == 1:
        length = [dims[2][0]]  # the window's length
    if x is None or len(x) != 3 or not step or not length or step[0] < 1 or not 1 <= length[0] <= x[1]:
        return None
    n = length[0]
    return [(x[0], (x[1] - n) // step[0] + 1, n // 2 + 1 if attrs.get("onesided", 1) and x[2] == 1 else n, 2)]


def _batch_norm(attrs, dims, vals, opset):
    """Y as X; in training mode the running mean and variance (and before opset 14 the saved mean
    and variance) are per channel, the scale's shape: ONNX's own inference leaves them open, and a
    training-mode export (TrainingMode.TRAINING) stayed PARTIAL."""
    x = dims[0] if dims else None
    if x is None:
        return None
    scale = dims[1] if len(dims) > 1 else None
    return [x] + ([scale] * 4 if scale is not None else [])


RULES["BatchNormalization"] = (_batch_norm, ())
RULES["STFT"] = (_stft, (1, 3))
for _op in ("Erf", "Not", "Cast", "CastLike", "Softmax", "LogSoftmax", "Relu", "Sigmoid", "Tanh", "Sqrt", "Neg", "Abs",
            "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "CumSum", "Identity", "Dropout", "Clip",
            "LeakyRelu", "Elu", "Gelu", "HardSigmoid", "HardSwish", "Softplus", "IsNaN", "IsInf", "Sin", "Cos",
            "BatchNormalization", "InstanceNormalization", "Trilu", "Mish", "Selu", "Celu"):
    RULES.setdefault(_op, (_same, ()))
