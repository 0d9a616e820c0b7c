"""Inputs whose shape an operator's definition fixes: the lists and single numbers some ops take as
tensors (a Slice's starts, a Reduce's axes, a Pad's pads, a Resize's scales, a TopK's k, a Range's
limits), and the index and update tensors of the element-wise gathers and scatters. ONNX's shape
inference checks them only where it knows their values; given at run time (a graph input, a value
computed on the way) a Slice with starts of [2, 1], a TopK with a scalar k or a Resize with three
scales for a 4-D image was priced as though it were well formed, and ONNX Runtime refuses each when
it runs the node. ``check`` raises Contradiction naming the input and the shape it needs; it runs
with ``dnnperf.ops.attributes.check``, before the cost function.

Only what the operator definitions state is checked, and each rule was tried on ONNX Runtime 1.32, which
refuses the same shapes when it runs the node; it reads some inputs more loosely than their definition
(a Pad's constant_value or a Resize's scales of any shape holding the right count) and those forms pass
here too; where the two differ the definition wins. Rules an op's cost module already held stay there,
beside the op's other checks: a Tile's repeats and ScatterND's operands (``ops.movement``), ONNX
Attention's mask and RotaryEmbedding's caches (``ops.attention``), a recurrent layer's weights
(``ops.rnn``).
"""

from __future__ import annotations

from dnnperf.ops import Contradiction, Ctx

VECTOR, ONE, SHORT, ELEMENT = "a 1-D tensor", "one value", "a scalar or a 1-D tensor", "one element"
_ONE_VECTOR = "a 1-D tensor of one value"
_REDUCES = ("ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
            "ReduceLogSum", "ReduceLogSumExp")
# op -> ((input, the first opset in which it is an input, the form its shape must have), ...). ONE: a
# scalar or a 1-D tensor of one value; ELEMENT: one value in any shape (ONNX Runtime reads a Pad's
# constant_value so, while a CumSum's axis of [1, 1] is refused)
_FORMS = {
    "Slice": ((1, 10, VECTOR), (2, 10, VECTOR), (3, 10, VECTOR), (4, 10, VECTOR)),
    "ReduceSum": ((1, 13, VECTOR),), **{op: ((1, 18, VECTOR),) for op in _REDUCES},
    "Squeeze": ((1, 13, VECTOR),), "Unsqueeze": ((1, 13, SHORT),),
    "TopK": ((1, 10, _ONE_VECTOR),), "Split": ((1, 13, VECTOR),),
    "Pad": ((1, 11, VECTOR), (2, 11, ELEMENT), (3, 18, VECTOR)),
    "CumSum": ((1, 11, ONE),), "CumProd": ((1, 1, ONE),),
    "OneHot": ((1, 9, ONE), (2, 9, VECTOR)),
    "Range": ((0, 11, ONE), (1, 11, ONE), (2, 11, ONE)),
    "ReverseSequence": ((1, 10, VECTOR),), "MaxUnpool": ((2, 11, VECTOR),),
}


def _fits(form: str, shape: tuple) -> bool:
    if form == VECTOR:
        return len(shape) == 1
    if form == SHORT:
        return len(shape) <= 1
    if form == _ONE_VECTOR:
        return shape == (1,)
    if form == ELEMENT:
        return all(d == 1 for d in shape)
    return len(shape) <= 1 and (not shape or shape[0] == 1)  # ONE


def _length(ctx: Ctx, i: int) -> int | None:
    s = ctx.known_shape(i)
    return s[0] if s is not None and len(s) == 1 else None


def _need(ctx: Ctx, i: int, want: int, what: str) -> None:
    n = _length(ctx, i)
    if n is not None and n != want:
        raise Contradiction(f"its {_NAMES[ctx.node.op_type][i]} hold {n} values where {want} are needed ({what})")


_NAMES = {"Slice": ("data", "starts", "ends", "axes", "steps"), "Pad": ("data", "pads", "constant_value", "axes"),
          **{op: ("data", "axes") for op in _REDUCES + ("ReduceSum", "Squeeze", "Unsqueeze")},
          "TopK": ("X", "k"), "Split": ("input", "split"), "CumSum": ("x", "axis"), "CumProd": ("x", "axis"),
          "Range": ("start", "limit", "delta"),
          "MaxUnpool": ("X", "I", "output_shape"), "ReverseSequence": ("input", "sequence_lens"),
          "OneHot": ("indices", "depth", "values")}


def _rank(ctx: Ctx) -> int | None:
    s = ctx.known_shape(0)
    return None if s is None else len(s)


def _slice(ctx: Ctx) -> None:
    """starts, ends, axes and steps hold one value per sliced axis; without axes, the first axes."""
    if ctx.graph.opset < 10:
        return
    n = _length(ctx, 1)
    for i in (2, 3, 4):
        if n is not None:
            _need(ctx, i, n, "one per sliced axis, as its starts")
    r = _rank(ctx)
    if n is not None and r is not None and not ctx.has_input(3) and n > r:
        raise Contradiction(f"its starts hold {n} values for a rank-{r} input (and no axes say which)")


def _pad(ctx: Ctx) -> None:
    """pads: a start and an end for each axis padded (``axes``, else every axis)."""
    if ctx.graph.opset < 11:
        return
    r = _rank(ctx)
    axes = _length(ctx, 3) if ctx.graph.opset >= 18 else None
    n = axes if axes is not None else r
    if n is not None and not (ctx.graph.opset >= 18 and ctx.has_input(3) and axes is None):
        _need(ctx, 1, 2 * n, "a start and an end for each axis " + ("it names" if axes is not None else "of its input"))


def _per_axis(ctx: Ctx) -> int | None:
    """A Resize's axes: those its ``axes`` attribute names (opset 18), else every axis of its input."""
    axes = ctx.attr("axes", None) if ctx.graph.opset >= 18 else None
    return len(axes) if axes else _rank(ctx)


def _count(ctx: Ctx, i: int) -> int | None:
    s = ctx.known_shape(i)
    return None if s is None else ctx.numel(s)


def _resize(ctx: Ctx) -> None:
    """scales: one per axis resized, and sizes likewise; a roi, read only by tf_crop_and_resize, a start
    and an end for each. ONNX Runtime counts their elements, whatever their shape; an empty tensor
    stands for an absent one."""
    n = _per_axis(ctx)
    if n is None:
        return
    if ctx.node.op_type == "Upsample" or ctx.graph.opset < 11:
        wants = ((1, n, "scales", "one per axis"),)
    else:
        crop = str(ctx.attr("coordinate_transformation_mode", "")) == "tf_crop_and_resize"
        wants = (((1, 2 * n, "roi", "a start and an end for each axis"),) if crop else ()) + \
            ((2, n, "scales", "one per axis"), (3, n, "sizes", "one per axis"))
    for i, want, name, what in wants:
        got = _count(ctx, i)
        if got is not None and got != want and (got or name == "roi"):
            raise Contradiction(f"its {name} hold {got} values where {want} are needed ({what})")


def _one_hot(ctx: Ctx) -> None:
    _need(ctx, 2, 2, "the off and on values")


def _reverse_sequence(ctx: Ctx) -> None:
    x = ctx.known_shape(0)
    axis = int(ctx.attr("batch_axis", 1))
    if x is not None and 0 <= axis < len(x):
        _need(ctx, 1, x[axis], f"one per sequence of batch axis {axis}")


def _max_unpool(ctx: Ctx) -> None:
    x, i = ctx.known_shape(0), ctx.known_shape(1)
    if x is not None and i is not None and x != i:
        raise Contradiction(f"its indices {list(i)} are not the shape of its input {list(x)}")
    if x is not None:
        _need(ctx, 2, len(x), "one per axis of its input")


def _nms(ctx: Ctx) -> None:
    """boxes [batch, boxes, 4] and scores [batch, classes, boxes]."""
    b, s = ctx.known_shape(0), ctx.known_shape(1)
    if b is not None and (len(b) != 3 or b[2] != 4):
        raise Contradiction(f"its boxes {list(b)} are not [batch, boxes, 4]")
    if s is not None and len(s) != 3:
        raise Contradiction(f"its scores {list(s)} are not [batch, classes, boxes]")
    if b is not None and s is not None and (b[0] != s[0] or b[1] != s[2]):
        raise Contradiction(f"its boxes {list(b)} and scores {list(s)} differ in batch or box count")


def _elements(ctx: Ctx) -> None:
    """GatherElements, ScatterElements and Scatter: indices of the data's rank, no longer than the data
    on any axis but ``axis``, and updates of the indices' shape."""
    x, idx = ctx.known_shape(0), ctx.known_shape(1)
    if x is not None and idx is not None:
        if len(x) != len(idx):
            raise Contradiction(f"its indices {list(idx)} are not of its data's rank ({list(x)})")
        axis = int(ctx.attr("axis", 0))
        axis = axis + len(x) if axis < 0 else axis
        if any(j != axis and i > d for j, (i, d) in enumerate(zip(idx, x))):
            raise Contradiction(f"its indices {list(idx)} reach past its data {list(x)} on an axis other than {axis}")
    upd = ctx.known_shape(2) if ctx.node.op_type != "GatherElements" else None
    if idx is not None and upd is not None and upd != idx:
        raise Contradiction(f"its updates {list(upd)} are not the shape of its indices {list(idx)}")


def _space_to_depth(ctx: Ctx) -> None:
    x, b = ctx.known_shape(0), ctx.attr("blocksize", None)
    if x is None or len(x) != 4 or not isinstance(b, int) or b < 1:
        return
    if ctx.node.op_type == "SpaceToDepth" and (x[2] % b or x[3] % b):
        raise Contradiction(f"its input's height and width {x[2]} x {x[3]} are not multiples of blocksize {b}")
    if ctx.node.op_type == "DepthToSpace" and x[1] % (b * b):
        raise Contradiction(f"its input's {x[1]} channels are not a multiple of blocksize {b} squared")


def _affine_grid(ctx: Ctx) -> None:
    """theta: [N, 2, 3] for a 2-D grid (a size of 4 values), [N, 3, 4] for a 3-D one, N the size's first."""
    theta, n = ctx.known_shape(0), _length(ctx, 1)
    if theta is None or n not in (4, 5):
        return
    want = (2, 3) if n == 4 else (3, 4)
    if len(theta) != 3 or theta[1:] != want:
        raise Contradiction(f"its theta {list(theta)} is not [N, {want[0]}, {want[1]}] for a {n - 2}-D grid")
    size = ctx.value(1)
    if size is not None and int(size.reshape(-1)[0]) != theta[0]:
        raise Contradiction(f"its theta holds {theta[0]} matrices for a batch of {int(size.reshape(-1)[0])}")


def _deform_conv(ctx: Ctx) -> None:
    """offset [N, offset_group x 2 x window, output H, W], mask likewise with one value a tap, bias one value
    per output channel."""
    x, w = ctx.known_shape(0), ctx.known_shape(1)
    t = ctx.graph.tensors.get(ctx.node.outputs[0]) if ctx.node.outputs else None
    if x is None or w is None or t is None or t.shape is None or len(w) < 3 or len(t.shape) != len(w):
        return
    taps = int(ctx.attr("offset_group", 1)) * ctx.numel(w[2:])
    for i, name, per in ((2, "offset", 2), (4, "mask", 1)):
        s = ctx.known_shape(i)
        need = (x[0], per * taps, *t.shape[2:])
        if s is not None and s != need:
            raise Contradiction(f"its {name} is {list(s)} where its window and output need {list(need)}")
    b = ctx.known_shape(3)
    if b is not None and b != (w[0],):
        raise Contradiction(f"its bias {list(b)} is not one value per output channel ({w[0]})")


def _quantized(ctx: Ctx) -> None:
    """QLinearMatMul and QLinearConv: the input's and the output's scale and zero point one value each (per
    tensor), the weight's one value or one per output column (channel)."""
    w = ctx.known_shape(3)
    per_column = None if w is None or not w else w[0] if ctx.node.op_type == "QLinearConv" else w[-1]
    for i, name in ((1, "x_scale"), (2, "x_zero_point"), (4, "w_scale"), (5, "w_zero_point"), (6, "y_scale"),
                    (7, "y_zero_point")):
        s = ctx.known_shape(i)
        if s is None or _fits(ONE, s) or (i in (4, 5) and s == (per_column,)):
            continue
        if ctx.node.op_type == "QLinearMatMul":
            name = name.replace("x_", "a_").replace("w_", "b_")
        raise Contradiction(f"its {name} is {list(s)} where it takes one value" +
                            (f" or one per output {'channel' if ctx.node.op_type == 'QLinearConv' else 'column'} "
                             f"({per_column})" if i in (4, 5) and per_column is not None else ""))


def _dft(ctx: Ctx) -> None:
    """A signal's last axis holds 1 value (real) or 2 (complex) a sample."""
    x = ctx.known_shape(0)
    if x and x[-1] not in (1, 2):
        raise Contradiction(f"its input {list(x)} ends in {x[-1]} values a sample where DFT takes 1 (real) or 2 "
                            "(complex)")


_RELATIONS = {"AffineGrid": _affine_grid, "QLinearMatMul": _quantized, "QLinearConv": _quantized, "DFT": _dft,
              "DeformConv": _deform_conv, "Slice": _slice, "Pad": _pad, "Resize": _resize, "Upsample": _resize,
              "OneHot": _one_hot, "ReverseSequence": _reverse_sequence, "MaxUnpool": _max_unpool,
              "NonMaxSuppression": _nms, "GatherElements": _elements, "ScatterElements": _elements,
              "Scatter": _elements, "SpaceToDepth": _space_to_depth, "DepthToSpace": _space_to_depth}
CHECKED = frozenset(_FORMS) | frozenset(_RELATIONS)


def check(ctx: Ctx) -> None:
    op = ctx.node.op_type
    opset = ctx.graph.opset
    for i, since, form in _FORMS.get(op, ()):
        s = ctx.known_shape(i)
        if s is not None and opset >= since and not _fits(form, s):
            what = _NAMES[op][i]
            raise Contradiction(f"its {what} is {list(s)} where {op} takes {form}")
    fit = _RELATIONS.get(op)
    if fit is not None:
        fit(ctx)
