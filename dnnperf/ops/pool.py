"""Pooling, reductions, resize and sorting.

Windowed pooling: one op per window element per output. Global pooling and Reduce*: one op per
input element. Resize: nearest 1 op per output element, linear 2^(spatial dims) x 2, cubic 4^d x 2.
TopK: n x log2(k) comparisons along the axis, spread over its input like a reduction (each thread
keeps a running top k of its share, then the shares merge; a radix select counts digits the same way),
not over its k outputs a row.
"""

from __future__ import annotations

from math import log2, prod

from dnnperf.ops import Ctx, register


def pool(ctx: Ctx):
    k = ctx.attr("kernel_shape", [1])
    return ctx.workload("pool", other=ctx.out_numel(0) * prod(k))


def global_pool(ctx: Ctx):
    """Reductions parallelise over their input (tree reduction), not over their few outputs."""
    n = ctx.in_numel(0)
    return ctx.workload("pool", other=n, parallel=n)


def reduce(ctx: Ctx):
    """One op an input element. ONNX Runtime's ReduceLogSumExp evaluates an exponential for each in a
    scalar loop (2.0-2.4 ns an element on a 2-core EPYC VM, 30x a ReduceSum): loop kernel 'ReduceLogSumExp'."""
    n = ctx.in_numel(0)
    kernel = "ReduceLogSumExp" if ctx.node.op_type == "ReduceLogSumExp" else ""
    return ctx.workload("reduce", other=n, parallel=n, kernel=kernel)


def argmax(ctx: Ctx):
    """ArgMax / ArgMin: ONNX Runtime compares one element at a time, with no vector instructions, along any
    axis (0.24-0.48 ns an input element on a 2-core EPYC VM, 8x a reduction's pace: loop_ns 'ArgMax')."""
    n = ctx.in_numel(0)
    return ctx.workload("reduce", other=n, parallel=n, kernel="ArgMax")


def cumsum(ctx: Ctx):
    """A running sum. Along the last axis ONNX Runtime adds one element at a time (1.6-3 ns an element on a
    2-core EPYC VM: 'CumSum.last'); along an outer axis it adds whole rows (0.11)."""
    x = ctx.in_shape(0)
    ax = ctx.value(1)
    last = False
    if x and ax is not None and ax.size == 1:
        a = int(ax.reshape(-1)[0])
        a = a + len(x) if a < 0 else a
        last = 0 <= a < len(x) and all(d == 1 for d in x[a + 1:])
    n = ctx.in_numel(0)
    return ctx.workload("reduce", other=n, parallel=n, kernel="CumSum.last" if last else "")


def resize(ctx: Ctx):
    mode = str(ctx.attr("mode", "nearest"))
    mode = "linear" if mode == "bilinear" else mode  # Upsample-1's name for it
    nsp = max(len(ctx.out_shape(0)) - 2, 1)
    per = {"nearest": 1, "linear": 2 * 2**nsp, "cubic": 2 * 4**nsp}.get(mode, 1)
    return ctx.workload("resize", other=per * ctx.out_numel(0), kernel=f"Resize.{mode}")


def topk(ctx: Ctx):
    x = ctx.in_shape(0)
    k = ctx.value(1)
    kk = int(k.reshape(-1)[0]) if k is not None else ctx.out_shape(0)[int(ctx.attr("axis", -1))]
    n = int(prod(x))
    return ctx.workload("reduce", other=int(n * max(1.0, log2(max(kk, 2)))), parallel=n)


def roi(ctx: Ctx):
    out = ctx.out_numel(0)
    sr = int(ctx.attr("sampling_ratio", 2)) or 2
    return ctx.workload("pool", other=out * sr * sr * 4)


register({
    "LpPool": pool, "MaxUnpool": pool, "GlobalLpPool": global_pool, "ReduceMin": reduce,
    "ReduceProd": reduce, "ReduceL1": reduce, "ReduceL2": reduce, "ReduceLogSum": reduce,
    "ReduceLogSumExp": reduce, "ReduceSumSquare": reduce, "ArgMax": argmax, "ArgMin": argmax,
    "CumSum": cumsum,
    "Resize": resize, "Upsample": resize, "TopK": topk, "RoiAlign": roi, "MaxRoiPool": roi,
})
register({"MaxPool": pool, "AveragePool": pool, "GlobalAveragePool": global_pool, "GlobalMaxPool": global_pool,
          "ReduceMean": reduce, "ReduceSum": reduce, "ReduceMax": reduce}, pure=True)
