"""Data movement (bytes, no arithmetic), views (no kernel at all) and shape-only ops.

Views such as Reshape or Squeeze only relabel a buffer: runtimes launch nothing and move nothing.
Data movement ops (Concat, Gather, Pad...) read and write every byte and do no math; Transpose's
kinds are ``dnnperf.ops.transpose``.
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf.ir import SHAPE_VECTOR_INPUT
from dnnperf.ops import Contradiction, Ctx, broadcast_conflict, register, register_check
from dnnperf.workload import Workload


def _split_fits(ctx: Ctx) -> None:
    """A Split's stated sizes must add up to its input along the axis (a runtime refuses sizes that do
    not): a --dim that changed that axis left the pieces' shapes open, 'could not be resolved'."""
    t = ctx.graph.tensors.get(ctx.node.inputs[0]) if ctx.node.inputs else None
    x = t.shape if t is not None else None
    sizes = ctx.value(1) if len(ctx.node.inputs) > 1 and ctx.has_input(1) else ctx.attr("split", None)
    if not x or sizes is None:
        return
    pieces = [int(v) for v in (sizes.reshape(-1) if hasattr(sizes, "reshape") else sizes)]
    ax = int(ctx.attr("axis", 0))
    ax = ax + len(x) if ax < 0 else ax
    if 0 <= ax < len(x) and pieces and sum(pieces) != x[ax]:
        raise Contradiction(f"its pieces {pieces} add up to {sum(pieces)}, not the {x[ax]} of axis {ax}")


def _scatter_nd_fits(ctx: Ctx) -> None:
    """ScatterND's data and indices have an axis or more, and its updates the shape its indices pick
    (``indices.shape[:-1] + data.shape[k:]``, k the indices' last axis); ONNX Runtime refuses others when
    it runs the node."""
    if ctx.node.op_type != "ScatterND":
        return
    data, idx, upd = (ctx.known_shape(i) for i in range(3))
    if (data is not None and not data) or (idx is not None and not idx):
        raise Contradiction(f"its data {list(data or ())} and indices {list(idx or ())} must each have an axis or more")
    if data is None or idx is None or upd is None:
        return
    k = idx[-1]
    want = tuple(idx[:-1]) + tuple(data[k:])
    if k > len(data) or tuple(upd) != want:
        raise Contradiction(f"its updates {list(upd)} are not the shape its indices {list(idx)} pick "
                            f"from data {list(data)} ({list(want)})")


def movement(ctx: Ctx):
    if ctx.node.op_type == "Split":
        _split_fits(ctx)
    _shape_vector(ctx)  # Tile's repeats
    _scatter_nd_fits(ctx)
    if ctx.node.op_type == "ScatterElements" and ctx.has_input(2):
        # one update at a time, each to an index it reads (a GNN's scatter_add of 320,000 updates: 2.3-2.5
        # ms in ONNX Runtime on a 2-core EPYC, 7-8.6 ns an update): its work is its updates
        # (loop_ns 'ScatterElements' on a calibrated CPU)
        return ctx.workload("movement", parallel=ctx.in_numel(2), kernel="ScatterElements")
    # ONNX Runtime rearranges pixels and channels one element at a time (loop_ns on a calibrated CPU:
    # DepthToSpace 0.6-2.6 ns an element on a 2-core EPYC VM by shape, SpaceToDepth 0.25-0.33)
    # ... and splits on the calling thread alone (efficiency.SPLIT_KERNEL: the one-thread copy curve)
    kernel = ctx.node.op_type if ctx.node.op_type in ("DepthToSpace", "SpaceToDepth", "Split") else ""
    return ctx.workload("movement", kernel=kernel)


def concat(ctx: Ctx):
    """Every input copied into its place in the output; the size of each piece is kept (a CPU runtime
    copies small pieces with one thread: ``dnnperf.efficiency``). Inputs that differ off the joined
    axis contradict each other (a runtime refuses them): an FPN's upsampled map of 22 rows next to the
    backbone's 21 when the input's side is not a multiple of the network's stride."""
    _concat_fits(ctx)
    pieces = tuple(ctx.in_numel(i) for i in range(len(ctx.node.inputs)) if ctx.has_input(i))
    return ctx.workload("movement", pieces=pieces)


def _concat_fits(ctx: Ctx) -> None:
    """Concat's inputs agree off the joined axis (also checked for one computed from constants alone)."""
    tensors = ctx.graph.tensors
    shapes = [tensors[n].shape if n in tensors else None for n in ctx.node.inputs if n]
    if shapes and all(s is not None for s in shapes):
        rank = len(shapes[0])
        ax = int(ctx.attr("axis", 0))  # (within the rank: dnnperf.ops.attributes)
        ax = ax + rank if ax < 0 else ax
        for s in shapes[1:]:
            off = [k for k in range(min(rank, len(s))) if k != ax and s[k] != shapes[0][k]]
            if len(s) != rank or off:
                where = f"axis {off[0]} ({shapes[0][off[0]]} vs {s[off[0]]})" if off else f"rank ({rank} vs {len(s)})"
                raise Contradiction(f"inputs {list(shapes[0])} and {list(s)} differ on {where}; Concat joins them "
                                    f"along axis {ax} only")


# a Gather's picked blocks of at most this many elements: its loop over them, not the bandwidth, sets its
# pace (2-core EPYC VM, 200,704 floats gathered: 2.6-2.8 ns a block of 1-8 elements, 3.4 of 16, 3.8 of 32,
# 6.0 of 64, where the copy's bytes take over)
GATHER_LOOP_BLOCK = 16


def _indices_in_range(ctx: Ctx) -> None:
    """Indices known at load time (a constant or folded index tensor) must fall inside the axis they
    index: Gather's and GatherElements' in [-d, d) of their axis, each column of GatherND's last index
    axis in its own data axis after the batch dims. ONNX Runtime stops the run at an index out of range
    ('indices element out of data bounds')."""
    if ctx.node.domain not in ("", "ai.onnx") or len(ctx.node.inputs) < 2:
        return
    idx = ctx.value(1)
    if idx is None or not idx.size or idx.dtype.kind not in "iu":
        return
    x = tuple(ctx.in_shape(0))
    op = ctx.node.op_type
    if op == "GatherND":
        b = int(ctx.attr("batch_dims", 0))
        k = idx.shape[-1] if idx.ndim else 0
        if not 0 <= b or b + k > len(x):
            return  # the shape rule's business
        cols = idx.reshape(-1, k) if k else idx.reshape(0, 0)
        for j in range(k):
            d = x[b + j]
            lo, hi = int(cols[:, j].min()), int(cols[:, j].max())
            if lo < -d or hi >= d:
                raise Contradiction(f"its indices reach {lo if lo < -d else hi} on data axis {b + j} of size {d} "
                                    f"(data {list(x)})")
        return
    ax = int(ctx.attr("axis", 0))
    if not -len(x) <= ax < len(x):
        return
    d = x[ax]
    lo, hi = int(idx.min()), int(idx.max())
    if lo < -d or hi >= d:
        raise Contradiction(f"its indices reach {lo if lo < -d else hi} on axis {ax} of size {d} (data {list(x)})")


def _gather_nd_rank(ctx: Ctx) -> None:
    """GatherND's index vectors (its indices' last axis) address at most the data axes left after its
    batch dims, which both tensors share (ONNX's inference and ONNX Runtime refuse the node otherwise)."""
    if ctx.node.op_type != "GatherND" or ctx.node.domain not in ("", "ai.onnx") or len(ctx.node.inputs) < 2:
        return
    tensors = ctx.graph.tensors
    x, idx = (tensors.get(n) for n in ctx.node.inputs[:2])
    if x is None or idx is None or x.shape is None or idx.shape is None:
        return
    b = int(ctx.attr("batch_dims", 0))
    if not idx.shape or not 0 <= b < min(len(idx.shape), len(x.shape)) or idx.shape[-1] > len(x.shape) - b:
        raise Contradiction(f"its indices {list(idx.shape)} address more axes than data {list(x.shape)} has after "
                            f"{b} batch dims")


def _gather_nd_fits(ctx: Ctx) -> None:
    """GatherND's (and GatherElements') checks: index vectors within the data's rank, indices in range."""
    _gather_nd_rank(ctx)
    _indices_in_range(ctx)


def gather(ctx: Ctx):
    """Gather reads only the rows it picks (an embedding lookup does not stream the whole table). ONNX
    Runtime copies what each index picks (everything after the gathered axis) with one call: picking
    small blocks (single elements along the last axis, a box's 4 coordinates) is a loop over the blocks,
    2.6-3.4 ns a block of up to 16 elements on a 2-core EPYC VM against 0.08 ns an element for rows of
    56 ('Gather.blocks', its steps the blocks)."""
    _indices_in_range(ctx)
    x = ctx.in_shape(0)
    ax = int(ctx.attr("axis", 0))
    ax = ax + len(x) if ax < 0 else ax
    inner = 1
    for d in x[ax + 1:]:
        inner *= d
    if not x or inner > GATHER_LOOP_BLOCK:
        return _picked(ctx, weights_only_data=True)
    return _picked(ctx, weights_only_data=True, kernel="Gather.blocks",
                   loop_items=max(1, ctx.out_numel(0) // max(inner, 1)))


def reads_what_it_keeps(ctx: Ctx):
    """Slice reads only the region it keeps (one row of a rotary cos/sin table, the corner of a causal
    mask buffer), not its whole input: the data read is the output's bytes. A Slice at offsets known
    only at run time has its input's shape as output (an upper bound, noted by the loader), so it is
    costed at its whole input. GatherElements and GatherND likewise read only the elements they pick.
    A Slice that steps through the last axis (every other column, a flip) is copied one element at a
    time by ONNX Runtime, 0.8 ns an output element on a 2-core EPYC VM against 0.1-0.15 for one that
    keeps whole rows ('Slice.strided')."""
    if ctx.node.op_type != "Slice":
        _gather_nd_fits(ctx)
    return _picked(ctx, kernel="Slice.strided" if ctx.node.op_type == "Slice" and _steps_last_axis(ctx) else "")


def _slice_steps(ctx: Ctx) -> None:
    """A Slice's steps (input 4, from opset 10) may not be 0 (ONNX and ONNX Runtime refuse it)."""
    if ctx.node.op_type == "Slice" and ctx.node.domain in ("", "ai.onnx"):
        steps = ctx.value(4)
        if steps is not None and (steps == 0).any():
            raise Contradiction(f"its steps {steps.reshape(-1).tolist()} hold a 0")


def _slice(ctx: Ctx):
    _slice_steps(ctx)
    return reads_what_it_keeps(ctx)


def _steps_last_axis(ctx: Ctx) -> bool:
    """Whether a Slice's step along its input's last axis is not 1 (and the output keeps more than one
    element there). Opset 1-9 Slices have no steps."""
    x, y = ctx.in_shape(0), ctx.out_shape(0)
    if len(ctx.node.inputs) < 5 or not ctx.has_input(4) or not x or not y or y[-1] <= 1:
        return False
    steps = ctx.value(4)
    axes = ctx.value(3) if ctx.has_input(3) else None
    if steps is None or (axes is None and ctx.has_input(3)):
        return False  # steps or axes given at run time: not known to step
    steps = [int(v) for v in steps.reshape(-1)]
    axes = list(range(len(steps))) if axes is None else [int(a) for a in axes.reshape(-1)]
    rank = len(x)
    return any((a + rank if a < 0 else a) == rank - 1 and st != 1 for a, st in zip(axes, steps))


def _picked(ctx: Ctx, weights_only_data: bool = False, kernel: str = "", loop_items: int = 0):
    """Bytes of an op that reads from its data input (input 0) only the elements it writes out.
    ``weights_only_data``: Gather's older rule for a weight table, which also caps the other weight
    inputs (its indices) at the output's size."""
    act, wgt, out = ctx.byte_split()
    data = ctx.node.inputs[0]
    t = ctx.graph.tensors.get(data)
    data_bytes = (t.nbytes or 0) if t else 0
    unread = 0
    if ctx.is_weight(data):
        held = wgt
        wgt = min(wgt, out) if weights_only_data else wgt - data_bytes + min(data_bytes, out)
        unread = held - wgt  # the table's rows no index picks: held in memory all the same
    else:
        act = act - data_bytes + min(data_bytes, out)
    return Workload(family="movement", dtype=ctx.compute_dtype(), act_bytes_read=act, weight_bytes=wgt,
                    bytes_written=out, parallel_work=ctx.out_numel(0), kernel=kernel, loop_items=loop_items,
                    weights_unread=unread)


def _shape_vector(ctx: Ctx) -> None:
    """An op's target shape (``ir.SHAPE_VECTOR_INPUT``) is a 1-D tensor; a Tile's repeats, one per axis of
    its input."""
    i = SHAPE_VECTOR_INPUT.get(ctx.node.op_type)
    if i is None or ctx.node.domain not in ("", "ai.onnx") or not ctx.has_input(i):
        return
    if ctx.node.op_type == "Tile" and ctx.graph.opset < 6:
        return  # Tile-1's ``tiles`` is a one-element count (``dnnperf.load.uninferred``)
    t = ctx.known_shape(i)
    if t is not None and len(t) != 1:
        raise Contradiction(f"its shape input '{ctx.node.inputs[i]}' is {list(t)}, not a 1-D tensor")
    x = ctx.known_shape(0) if ctx.node.op_type == "Tile" else None
    if t is not None and x is not None and t[0] != len(x):
        raise Contradiction(f"its repeats hold {t[0]} values where {len(x)} are needed (one per axis of its input)")


def _crop_pad_fits(ctx: Ctx) -> None:
    """CenterCropPad's ``shape`` holds one size per axis it names (``axes``, else every axis of its
    input): ONNX's function body refuses another length (a Max of mismatched vectors)."""
    x, s = ctx.known_shape(0), ctx.known_shape(1)
    if x is None or s is None:
        return
    axes = ctx.attr("axes", None)
    want = len(axes) if axes else len(x)
    if len(s) != 1 or s[0] != want:
        raise Contradiction(f"its shape input is {list(s)} where {want} sizes are needed (one per axis "
                            f"{'it names' if axes else 'of its input'})")


def _check_expand(ctx: Ctx) -> None:
    """An Expand whose output is unknown because its input and target shape (both known) do not
    broadcast: a contradiction, not a lost shape."""
    _shape_vector(ctx)
    out = ctx.graph.tensors.get(ctx.node.outputs[0]) if ctx.node.outputs else None
    target = ctx.value(1)
    if (out is None or out.shape is None) and target is not None and ctx.has_input(0):
        t = ctx.graph.tensors.get(ctx.node.inputs[0])
        if t is not None and t.shape is not None:
            conflict = broadcast_conflict([t.shape, tuple(int(d) for d in target.reshape(-1))])
            if conflict:
                raise Contradiction(f"input and target shape {conflict}")


def expand(ctx: Ctx):
    """A broadcast copy. Broadcasting a last axis of one element (F.normalize's norms over q and k: [..., 1]
    -> [..., 32]) makes ONNX Runtime fill a run from each input element, then copy filled runs as blocks
    where outer axes broadcast: 23-25 ns an input element on a 2-core EPYC VM whatever the run's length
    (0.7-0.8 ns an output element for runs of 32, against 0.05-0.08 for a broadcast of whole rows, or of
    150 elements over 12,544 each, where the bytes take over): 'Expand.fill', its steps the input's elements."""
    _check_expand(ctx)
    x, y = ctx.in_shape(0), ctx.out_shape(0)
    if x and y and x[-1] == 1 and y[-1] > 1:
        return ctx.workload("movement", kernel="Expand.fill", loop_items=max(1, ctx.in_numel(0)))
    return ctx.workload("movement")


def view(ctx: Ctx):
    """A relabelled buffer: nothing moves, but the element count must survive the relabelling."""
    _reshape_fits(ctx)
    return Workload(family="view", dtype=ctx.dtype(0), launches=0)


def _reshape_fits(ctx: Ctx) -> None:
    """A view's checks: a 1-D target shape (Reshape), the element count kept."""
    _shape_vector(ctx)
    _same_count(ctx)


def _same_count(ctx: Ctx) -> None:
    """A relabelling keeps its input's element count (also checked for one computed from constants
    alone: a Reshape of a constant mask to a size the mask does not have is no less refused)."""
    if ctx.node.op_type in ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity") and ctx.has_input(0):
        tensors = ctx.graph.tensors
        a, b = tensors.get(ctx.node.inputs[0]), tensors.get(ctx.node.outputs[0]) if ctx.node.outputs else None
        if a is None or b is None or a.numel is None or b.numel is None:
            ctx.in_numel(0), ctx.out_numel(0)  # says which shape is unknown
        n_in, n_out = a.numel, b.numel
        if n_in != n_out:
            raise Contradiction(f"{ctx.node.op_type} changes the element count ({n_in} -> {n_out})")


def dropout(ctx: Ctx):
    """Inference Dropout passes its input through (a view). In training mode (a constant true
    ``training_mode`` input, or ``is_test`` 0 before opset 7) with a non-zero ratio it draws a random
    mask and scales the kept elements: a kernel reading the input and writing the output (and the mask
    when it is an output), 3 ops per element (draw, compare, scale). A ``training_mode`` known only at run
    time is costed as training and flagged as an upper bound."""
    flag = ctx.value(2) if ctx.has_input(2) else None
    unknown = ctx.has_input(2) and flag is None  # a run-time input: costed as training, an upper bound
    training = unknown or (flag is not None and bool(flag.reshape(-1)[0])) or ctx.attr("is_test", 1) == 0
    ratio = ctx.value(1) if ctx.has_input(1) else None
    ratio = float(ratio.reshape(-1)[0]) if ratio is not None and ratio.size == 1 else float(ctx.attr("ratio", 0.5))
    if not training or ratio == 0:
        return view(ctx)
    name = ctx.node.inputs[2] if unknown else ""
    note = (f"training_mode is given at run time: costed as training, an upper bound (--value {name}=0 for "
            "inference)" if unknown else "")
    return ctx.workload("elementwise", other=3 * ctx.out_numel(0), note=note)


def shape_only(ctx: Ctx):
    return Workload(family="shape", dtype="int64", launches=0)


def range_(ctx: Ctx):
    """Range: at run time (its limits computed then, not folded at load time) a kernel that writes its
    elements; its length is its limits' value, so with them unknown the output shape is unknown and
    the node is listed (with the input to give with --value), not counted as a free shape op."""
    ctx.out_shape(0)
    return fill(ctx)


def fill(ctx: Ctx):
    """ConstantOfShape / EyeLike / RandomX materialise a tensor: bytes written only."""
    _shape_vector(ctx)
    act, wgt, out = ctx.byte_split()
    return Workload(family="movement", dtype=ctx.compute_dtype(), bytes_written=out,
                    parallel_work=ctx.out_numel(0))


MOVEMENT = ["Split", "ScatterElements", "ScatterND",
            "Scatter", "Tile", "Pad", "DepthToSpace", "SpaceToDepth",
            "ReverseSequence", "Compress", "OneHot", "Trilu", "SplitToSequence",
            "ConcatFromSequence", "SequenceAt", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceEmpty",
            "SequenceLength", "CenterCropPad", "Col2Im", "ImageDecoder"]
VIEWS = ["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Optional",
         "OptionalGetElement", "OptionalHasElement"]
SHAPE_ONLY = ["Shape", "Size", "Constant"]
FILL = ["ConstantOfShape", "EyeLike", "RandomNormal", "RandomUniform", "RandomNormalLike",
        "RandomUniformLike", "Multinomial", "Bernoulli"]


def compress(ctx: Ctx):
    """Compress copies the slices its condition keeps. A condition known only at run time leaves the
    output at its upper bound (``load.data_sized``: every slice kept), and the host reads the
    count back before the next kernel can be sized."""
    w = movement(ctx)
    if ctx.value(1) is not None:
        return w
    return replace(w, note="data-dependent output: costed at its upper bound (every slice kept)", host_waits=1)


def crop_pad(ctx: Ctx):
    """CenterCropPad: a copy of the window it keeps, once its shape input is checked."""
    _crop_pad_fits(ctx)
    return movement(ctx)


register({op: movement for op in MOVEMENT})
register({"Compress": compress})
register({"CenterCropPad": crop_pad})
register({"Gather": gather, "Expand": expand, "Dropout": dropout})
register({"Concat": concat}, pure=True)
register({op: reads_what_it_keeps for op in ("GatherElements", "GatherND")})
register({"Slice": _slice})
register_check({"Slice": _slice_steps})
register_check({op: _indices_in_range for op in ("Gather", "GatherElements")})
register_check({"GatherND": _gather_nd_fits})
register_check({"Expand": _check_expand, "Concat": _concat_fits, "ScatterND": _scatter_nd_fits})
register_check({op: _same_count for op in ("Flatten", "Squeeze", "Unsqueeze", "Identity")})
register_check({"Reshape": _reshape_fits, "ConstantOfShape": _shape_vector, "Tile": _shape_vector,
                "CenterCropPad": _crop_pad_fits})
register({op: view for op in VIEWS})
register({op: shape_only for op in SHAPE_ONLY})
register({op: fill for op in FILL})
register({"Range": range_})
