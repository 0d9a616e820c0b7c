"""The runtime's layout conversions as calibration sees them.

ONNX Runtime converts tensors into and out of its channel-blocked layout (NCHWc) with kernels of
their own (``ReorderInput`` / ``ReorderOutput``). A one-node micro-model pays them at its edges: the
conversion in reads the caller's freshly written input and the conversion out writes the output the
caller receives. Those edge conversions are excluded from a micro-benchmark's figure (``layout_share``)
and say little about the conversions inside a network, which read a tensor a kernel has just written
and write a buffer the runtime reuses: timed on the reference VM (ONNX Runtime 1.32, 2 threads, the
node profiler), a 64 x 56 x 56 float tensor took 25-36 us inside a conv -> broadcast Mul -> conv
chain against 41-52 us at the edges, and 32 x 112 x 112 72-81 against 99-117. (Those figures are the
profiler's, whose own ~2.8 us per kernel they include, read in single profiles that a slow moment of
the VM could take whole; less that and in a quiet moment the 64 x 56 x 56 conversions inside the
chain took 9-13 us and 512 x 7 x 7 ones about 2.)

So the conversions' pace is read from probes of their own (``dnnperf.measure.micro.REORDER_PROBES``):
a convolution, a multiply by a per-channel input (which the blocked layout does not take) and a second
convolution. The runtime converts the first convolution's output out of the blocked layout and the
product back in: the kernels that are neither the first nor the last the probe runs.
"""

from __future__ import annotations

import statistics

from dnnperf.fmt import sig
from dnnperf.measure.ort import profiled_kernels, profiler_inflation_us, robust_median

# the runtime's kernels that convert between NCHW and its blocked NCHWc layout
LAYOUT_OPS = ("ReorderInput", "ReorderOutput")


def layout_kernels(mb, threads: int | None, inflation_us: float = 0.0) -> dict:
    """ORT's node profile of a micro-model: {kernel: (op, us)}, in the order the kernels ran, each
    less the profiler's own time per kernel (``dnnperf.measure.ort.profiler_inflation_us``): a
    conversion of a 7 x 7 map reported at 5 us took about 2."""
    return profiled_kernels(mb.model.SerializeToString(), mb.feeds, threads, runs=30, warmup=5,
                            inflation_us=inflation_us)


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


# profiles of the reorder probes (each round with the profiler's inflation read next to it): before the
# timed rounds of the calibration, and after them
REORDER_ROUNDS = (2, 4)


def reorder_rounds(probes, threads: int | None, rounds: int) -> list:
    """``rounds`` node profiles of every reorder probe: [(probe, {kernel: (op, us)})], each round
    with the profiler's own time per kernel read next to it and taken off."""
    out = []
    for _ in range(rounds if probes else 0):
        inflation = profiler_inflation_us(threads, runs=30)
        out += [(mb, layout_kernels(mb, threads, inflation)) for mb in probes]
    return out


def reorder_figures(rounds: list, base) -> tuple[dict, float]:
    """The conversions' pace inside the probe chains ({pixels: efficiency}, ``internal_efficiency``)
    from ``reorder_rounds``' profiles, and its spread (max/min - 1 of any probe over its rounds). The
    other figures come from interleaved rounds of unprofiled runs (``settled_times``); these come from
    the node profiler, so the probes are profiled in rounds spread over the calibration and a probe's
    figure is the robust median of its rounds (the faster half: neighbours only slow a run down). On a
    2-core VM whose second core is now and then taken by another tenant, a few seconds of profiles read
    the conversions of a 7 x 7 map at 8-10 us where the rest of the run read 2.2: a multi-threaded
    kernel waits for its second thread."""
    seen: dict[int, list[float]] = {}
    for mb, kernels in rounds:
        e = internal_efficiency(mb, kernels, base)
        if e is not None:
            seen.setdefault(int(mb.key), []).append(e)
    # efficiencies: the faster rounds are the higher figures
    inner = {px: sig(1.0 / robust_median([1.0 / e for e in v]), 4) for px, v in sorted(seen.items())}
    spread = max((max(v) / min(v) - 1 for v in seen.values()), default=0.0)
    return inner, spread
