"""Attributes a node's own input contradicts: an axis past the input's rank, a window whose lengths are
not its spatial rank's, a stride of 0. ONNX Runtime refuses such a node when it loads the model; priced
as given, the figures would be those of another layer (a MaxPool given a 1-D kernel_shape over a 2-D
map was scored at ONNX's guess of its output, a Flatten at axis 7 of a 4-D input likewise). ``check``
raises Contradiction naming the attribute; the node is left unscored and counted in the coverage.

Only what ONNX's operator definitions state is checked, by attribute name, for the default domain:
``axis`` within [-r, r - 1] of input 0's rank r (Flatten [-r, r]; OneHot [-r - 1, r], its output having
one axis more; DFT and STFT, whose axis counts a signal's own layout, and the ops whose axis is a new
one, not checked); ``axes`` within the same range and without repeats where they name input 0's axes;
a windowed op's ``kernel_shape``, ``strides``, ``dilations`` and ``output_padding`` one value per
spatial axis and ``pads`` two, windows, strides and dilations of 1 or more, pads of 0 or more (and a
pooling window's pads smaller than the window: ONNX Runtime and cuDNN refuse it otherwise), a
ConvTranspose's ``output_shape`` one value per spatial axis (or per axis); ``blocksize``, ``num_groups``
and LRN's ``size`` of 1 or more; and input 0's rank where the operator's definition bounds it (``_RANKS``:
a Softmax or an ArgMax of a scalar, a Trilu of a vector, a DepthToSpace of a 3-D tensor, a pooling
window over a 2-D one), as ONNX's shape inference does on the path that does not run it (``load.fast``).
Called by ``cost_node`` before the cost function (and
memoised with it: the check reads the attributes and input shapes the memo's signature holds).
"""

from __future__ import annotations

from dnnperf.ops import Contradiction, Ctx, operands

# op -> (how far below -r, how far above r - 1 its axis may go)
_AXIS_RANGE = {"Flatten": (0, 1), "OneHot": (1, 1)}
# ops whose axis is not one of input 0's axes as they stand (a new axis, a signal's layout)
_AXIS_NOT_INPUT = frozenset({"DFT", "STFT", "ConcatFromSequence", "SequenceInsert", "Scan", "Unsqueeze"})
# ops whose ``axes`` attribute names input 0's axes (opsets before axes became an input for some)
_AXES_OF_INPUT = frozenset({"ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
                            "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "Squeeze", "Slice",
                            "CenterCropPad", "Resize", "MeanVarianceNormalization"})
_WINDOWED = frozenset({"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool", "AveragePool", "LpPool",
                       "MaxUnpool", "DeformConv", "MaxRoiPool"})
_POOLS = frozenset({"MaxPool", "AveragePool", "LpPool"})
_AT_LEAST_ONE = ("kernel_shape", "strides", "dilations")
# op -> (least, greatest or None) rank of input 0, as ONNX's shape inference requires it
_RANKS = {**{op: (1, None) for op in ("Softmax", "LogSoftmax", "Hardmax", "ArgMax", "ArgMin", "TopK", "Compress",
                                      "BatchNormalization", "LayerNormalization", "RMSNormalization", "CumSum",
                                      "CumProd")},
          **{op: (2, None) for op in ("Trilu", "Det", "ReverseSequence", "MaxUnpool", "DFT", "GroupNormalization")},
          **{op: (3, None) for op in ("MaxPool", "AveragePool", "LpPool", "DeformConv")},
          "EyeLike": (2, 2), "DepthToSpace": (4, 4), "SpaceToDepth": (4, 4), "RotaryEmbedding": (3, 4),
          "Col2Im": (3, 3), "TfIdfVectorizer": (1, 2), "StringNormalizer": (1, 2)}
RANKED = frozenset(_RANKS) | operands.CHECKED  # ops checked here even without attributes


def check(ctx: Ctx) -> None:
    node = ctx.node
    attrs = node.attrs
    op = node.op_type
    t = ctx.graph.tensors.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
    rank = len(t.shape) if t is not None and t.shape is not None else None
    bounds = _RANKS.get(op)
    if bounds is not None and rank is not None and (rank < bounds[0] or (bounds[1] is not None and rank > bounds[1])):
        least, most = bounds
        need = f"rank {least}" if least == most else f"rank {least} or more" if most is None else \
            f"rank {least} to {most}"
        raise Contradiction(f"its input has rank {rank} where {op} takes {need}")
    if "axis" in attrs and rank is not None and op not in _AXIS_NOT_INPUT:
        below, above = _AXIS_RANGE.get(op, (0, 0))
        a = attrs["axis"]
        if isinstance(a, int) and not -rank - below <= a < rank + above:
            raise Contradiction(f"axis {a} is out of range for a rank-{rank} input")
    if op in _AXES_OF_INPUT and rank is not None:
        axes = attrs.get("axes")
        if axes and all(isinstance(a, int) for a in axes):
            if any(not -rank <= a < rank for a in axes):
                raise Contradiction(f"axes {list(axes)} are out of range for a rank-{rank} input")
            if len({a % rank for a in axes}) != len(axes):
                raise Contradiction(f"axes {list(axes)} name an axis twice")
    if op in _WINDOWED:
        _window(attrs, rank, op in _POOLS)
    elif op == "Col2Im":  # its window's rank is its image_shape input's length (its value may come at run time)
        image = ctx.known_shape(1)
        _window(attrs, image[0] + 2 if image is not None and len(image) == 1 else None, False)
    for name in ("blocksize", "num_groups", "size"):  # (DepthToSpace/SpaceToDepth, GroupNormalization, LRN)
        v = attrs.get(name)
        if isinstance(v, int) and v < 1:
            raise Contradiction(f"{name} {v} must be 1 or more")
    if op in operands.CHECKED:
        operands.check(ctx)


def _window(attrs: dict, rank: int | None, pool: bool) -> None:
    spatial = rank - 2 if rank is not None and rank > 2 else None
    for name in _AT_LEAST_ONE + ("output_padding", "pads", "output_shape"):
        v = attrs.get(name)
        if not isinstance(v, list) or not all(isinstance(x, int) for x in v):
            continue
        want = None if spatial is None else (2 * spatial,) if name == "pads" else \
            (spatial, spatial + 2) if name == "output_shape" else (spatial,)  # (ConvTranspose's: N x C too, or not)
        if want is not None and len(v) not in want:
            raise Contradiction(f"{name} {v} has {len(v)} values where a {spatial}-D window needs {want[0]}")
        least = 1 if name in _AT_LEAST_ONE else 0
        if v and name != "output_shape" and min(v) < least:
            raise Contradiction(f"{name} {v}: each must be {least} or more")
    kernel, pads = attrs.get("kernel_shape"), attrs.get("pads")
    if pool and isinstance(kernel, list) and isinstance(pads, list) and len(pads) == 2 * len(kernel) and \
            any(p >= k for p, k in zip(pads, kernel + kernel)):
        # ONNX Runtime ('Pad should be smaller than kernel') and cuDNN refuse a window that can lie in the padding
        raise Contradiction(f"pads {pads} are not all smaller than the window {kernel}")
