"""The runtime's layout conversions as calibration sees them.

ONNX Runtime converts tensors into and out of its channel-blocked layout (NCHWc) with kernels of
their own (``ReorderInput`` / ``ReorderOutput``). A one-node micro-model pays them at its edges: the
conversion in reads the caller's freshly written input and the conversion out writes the output the
caller receives. Those edge conversions are excluded from a micro-benchmark's figure (``layout_share``)
and say little about the conversions inside a network, which read a tensor a kernel has just written
and write a buffer the runtime reuses: timed on the reference VM (ONNX Runtime 1.32, 2 threads, the
node profiler), a 64 x 56 x 56 float tensor took 25-36 us inside a conv -> broadcast Mul -> conv
chain against 41-52 us at the edges, and 32 x 112 x 112 72-81 against 99-117.

So the conversions' pace is read from probes of their own (``dnnperf.measure.micro.REORDER_PROBES``):
a convolution, a multiply by a per-channel input (which the blocked layout does not take) and a second
convolution. The runtime converts the first convolution's output out of the blocked layout and the
product back in: the kernels that are neither the first nor the last the probe runs.
"""

from __future__ import annotations

import statistics

from dnnperf.measure.ort import profiled_kernels

# the runtime's kernels that convert between NCHW and its blocked NCHWc layout
LAYOUT_OPS = ("ReorderInput", "ReorderOutput")


def layout_kernels(mb, threads: int | None) -> dict:
    """ORT's node profile of a micro-model: {kernel: (op, us)}, in the order the kernels ran."""
    return profiled_kernels(mb.model.SerializeToString(), mb.feeds, threads, runs=10, warmup=3)


def layout_share(mb, threads: int | None, kernels: dict | None = None) -> float:
    """The fraction of a micro-model's kernel time spent in layout reorders (ORT's node profiler)."""
    kernels = kernels if kernels is not None else layout_kernels(mb, threads)
    total = sum(us for _op, us in kernels.values())
    reorder = sum(us for op, us in kernels.values() if op in LAYOUT_OPS)
    return reorder / total if total > 0 else 0.0


def _against_copy(times: list[float], tensor_bytes: int, base) -> float | None:
    """How close conversions of a ``tensor_bytes`` tensor that took ``times`` (us) come to reading and
    writing it at the profile's bandwidth for that many bytes (``rules.bandwidth_for``)."""
    from dnnperf import rules

    if not times:
        return None
    moved = 2 * tensor_bytes
    ideal = moved / rules.bandwidth_for(moved, base)
    return min(1.0, max(0.01, ideal / (statistics.median(times) * 1e-6)))


def edge_efficiency(mb, kernels: dict, base) -> float | None:
    """The one-node convolution's edge conversions (in, and out of every copy) against a copy of its
    input: recorded with a calibration for comparison (``measured.layout_reorder_edge_efficiency``);
    it is not what a network pays (module docstring)."""
    x = next(iter(mb.feeds.values()))
    return _against_copy([us for op, us in kernels.values() if op in LAYOUT_OPS], x.nbytes, base)


def internal_efficiency(mb, kernels: dict, base) -> float | None:
    """A reorder probe's conversions inside the chain (neither its first nor its last kernel) against
    a copy of the tensor they convert (the probe's input size: its convolutions keep the channels).
    None when the runtime made no such conversion (no blocked layout)."""
    inner = list(kernels.values())[1:-1]
    x = next(v for v in mb.feeds.values() if v.ndim == 4 and v.shape[2] > 1)
    return _against_copy([us for op, us in inner if op in LAYOUT_OPS], x.nbytes, base)
