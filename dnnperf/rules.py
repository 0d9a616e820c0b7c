"""The performance rules: each a small pure function whose docstring states its assumption.

They are composed in ``dnnperf.scoring``; none of them prints or reads files.
"""

from __future__ import annotations

from math import ceil, log2

from dnnperf.hardware import HardwareProfile, Unit
from dnnperf.vocab import PLAIN_CONV
from dnnperf.workload import Gemm


def dim_fit(size: int, tile: int) -> float:
    """Fraction of padded work that is useful when ``size`` is cut into ``tile``-sized pieces.

    The last partial piece costs a full piece: 100 on a 256-wide side is 100/256 = 39%.
    """
    if size <= 0 or tile <= 1:
        return 1.0
    return size / (ceil(size / tile) * tile)


def tile_efficiency(gemm: Gemm | None, tile: tuple[int, int, int] | None) -> float:
    """Useful MACs / MACs of all launched tiles for an M x N x K product on an (M, N, K) tile.

    A weight-stationary R x C systolic array is the tile (1, C, R): the weight block is K x N.
    """
    if gemm is None or tile is None:
        return 1.0
    tm, tn, tk = tile
    return dim_fit(gemm.m, tm) * dim_fit(gemm.n, tn) * dim_fit(gemm.k, tk)


def occupancy(parallel_work: int, lanes: int) -> float:
    """Fraction of the device's lanes a kernel can keep busy (work starvation below 1).

    Assumes one lane per independent output element, so a layer with fewer outputs than lanes
    leaves the rest idle for its whole duration. Above ``lanes`` the work is spread in waves
    that each keep every lane busy.
    """
    if lanes <= 0 or parallel_work >= lanes:
        return 1.0
    return max(parallel_work, 1) / lanes


def padded_work(parallel_work: int, gemm: Gemm | None, tile: tuple[int, int, int] | None) -> float:
    """Lanes a product's outputs occupy once its output sides are padded to the unit's tile: a
    padded lane is busy (on wasted work, which ``tile_efficiency`` charges), not idle. An 8 x 1
    product on a 4-wide vector fills 8 x 4 lanes at a quarter of their work, the time of an 8 x 2
    one: counting its 8 outputs as the only busy lanes charged the padding twice (once as idle
    lanes, once as wasted work), and doubling N halved the time."""
    if gemm is None or tile is None:
        return parallel_work
    fit = dim_fit(gemm.m, tile[0]) * dim_fit(gemm.n, tile[1])
    return parallel_work / fit if fit > 0 else parallel_work


def static_split_share(runs: tuple[tuple[int, float], ...], repeats: int, threads: int) -> float:
    """Share of ``threads`` busy on average when a kernel's units of work are cut, in order, into
    ``threads`` contiguous ranges of equal count (the first ``n % threads`` one unit longer) and each
    thread works through its range alone: the kernel ends with its busiest thread. The units are
    ``runs`` ((count, cost of each), ...) in order, the whole pattern ``repeats`` times. ONNX Runtime's
    blocked convolutions split their work this way (MLAS ``MlasPartitionWork``, units of one output
    row of one set of up to four 16-channel filter blocks). Example, two threads: 160 output channels
    are 10 blocks, sets of 4, 4 and 2; at 14 x 14 that is 14 rows of cost 4, 14 of 4, 14 of 2 (42
    units): one thread gets 14 x 4 + 7 x 4 = 84, the other 7 x 4 + 14 x 2 = 56; the kernel takes 84
    where an even split takes 70: 0.833."""
    period = sum(c for c, _ in runs)
    n = period * repeats
    if threads <= 1 or n <= 0:
        return 1.0
    cost_period = sum(c * u for c, u in runs)

    def prefix(i: int) -> float:  # cost of the first i units
        q, r = divmod(i, period)
        total = q * cost_period
        for c, u in runs:
            take = min(c, r)
            total += take * u
            r -= take
            if r <= 0:
                break
        return total

    per, extra = divmod(n, threads)
    start, worst = 0, 0.0
    for t in range(min(threads, n)):
        size = per + (1 if t < extra else 0)
        worst = max(worst, prefix(start + size) - prefix(start))
        start += size
    return min(1.0, cost_period * repeats / (threads * worst)) if worst > 0 else 1.0


def systolic_arrays(unit: Unit | None, w, precision: str) -> int | None:
    """How many weight-stationary arrays (``Unit.arrays``) run matrix work ``w`` in ``precision`` on
    ``unit``; None for any other unit or work (their occupancy is outputs over lanes)."""
    if unit is None or not unit.arrays or not w.is_matrix or w.gemm is None or precision not in unit.tile:
        return None
    return unit.arrays


def systolic_occupancy(gemm: Gemm, tile: tuple[int, int, int], arrays: int) -> float:
    """Fraction of ``arrays`` weight-stationary R x C systolic arrays (tile (1, C, R)) kept busy by
    ``gemm``, beyond the padding of each weight block (``tile_efficiency``).

    The product is cut into ``count x ceil(K/R) x ceil(N/C)`` weight blocks; the M rows of the left
    operand stream through each block at one row a cycle, and loading a block takes R cycles (hidden
    behind the previous block's rows when there are at least R of them: double-buffered weights, as
    in the TPU v1 paper). So a block costs max(M, R) cycles. With at least as many blocks as
    arrays, they run in ceil(blocks / arrays) rounds; with fewer, the arrays hold copies of the
    blocks and split the rows (still R cycles at least). Useful work is blocks x M row-cycles.

    Lanes counted as outputs (the GPU rule, ``occupancy``) would count a block's columns twice (the
    tile fit already has them) and never its rows: 6 outputs reduced over 6,728 inputs were 0.005%
    of a TPU v4's MACs, 160x below what its 53 blocks in 7 rounds of 128 cycles keep busy.
    """
    _, c, r = tile
    m = max(gemm.m, 1)
    blocks = max(gemm.count, 1) * ceil(max(gemm.k, 1) / r) * ceil(max(gemm.n, 1) / c)
    if blocks >= arrays:
        cycles = ceil(blocks / arrays) * max(m, r)
    else:
        cycles = max(ceil(m * blocks / arrays), r)
    return min(1.0, blocks * m / (arrays * cycles))


def work_per_item_fit(ops: float, parallel_work: int, ops_per_item: float) -> float:
    """Fraction of speed kept when each work item has too little to do to hide its latency.

    A lane needs ``ops_per_item`` operations of its own to stay busy (the article's "many MACs per
    thread"); with fewer, it idles in proportion. 1 (the default) means no such requirement."""
    if ops_per_item <= 1 or parallel_work <= 0:
        return 1.0
    return min(1.0, (ops / parallel_work) / ops_per_item)


def aligned(gemm: Gemm | None, alignment: int | None) -> bool:
    """A matrix unit with an alignment rule only takes products whose N and K (channels) are
    multiples of it (e.g. fp16 tensor cores and multiples of 8 in older cuDNN/cuBLAS)."""
    if gemm is None or not alignment or alignment <= 1:
        return True
    return gemm.n % alignment == 0 and gemm.k % alignment == 0


def pick_unit(hw: HardwareProfile, precision: str, matrix: bool, gemm: Gemm | None) -> tuple[Unit, str, float, float]:
    """The unit a runtime would use: the fastest (peak x tile fit) that serves the work type
    and precision and accepts its alignment. Returns (unit, precision run, rate ops/s, tile eff).

    Work whose precision no unit supports runs in fp32 on the unit that serves it fastest (the
    runtime's upcast), else at the vector unit's fp32 rate.
    """
    return pick_from(hw.units, precision, matrix, gemm)


def pick_from(units, precision: str, matrix: bool, gemm: Gemm | None,
              check_alignment: bool = True) -> tuple[Unit, str, float, float]:
    """``pick_unit`` among ``units``; ``check_alignment`` False for libraries that pad any shape to
    the unit (GPU GEMMs)."""
    best = None
    kind = "matrix" if matrix else "vector"
    for u in units:
        if kind not in u.serves:
            continue
        r = u.rate(precision)
        if r is None:
            continue
        if matrix and check_alignment and not aligned(gemm, u.alignment.get(precision)):
            continue
        eff = tile_efficiency(gemm, u.tile.get(precision)) if matrix else 1.0
        score = r * eff
        if best is None or score > best[0]:
            best = (score, u, precision, r, eff)
    if best is None and precision != "fp32" and any("fp32" in u.peak_tops for u in units):
        # no unit runs it: the runtime computes it in fp32 (XLA on a TPU: fp16 on the MXU's fp32 passes)
        return pick_from(units, "fp32", matrix, gemm, check_alignment)
    if best is None:
        for u in units:
            if "vector" in u.serves:
                p = "fp32" if "fp32" in u.peak_tops else next(iter(u.peak_tops))
                r = u.rate(p)
                cand = (r, u, p, r, 1.0)
                if best is None or r > best[0]:
                    best = cand
    _, u, p, r, eff = best
    return u, p, r, eff


def bandwidth_for(nbytes: int, hw: HardwareProfile) -> float:
    """Bytes/s for a layer's traffic: the on-chip bandwidth when the profile gives one and the
    layer's whole working set fits in on-chip memory (it stays in cache between layers), else DRAM.
    A calibrated ``bandwidth_curve`` (measured bandwidth by working-set size) replaces that step."""
    if hw.bandwidth_curve:
        if nbytes > hw.bandwidth_curve[-1][0] * 1e6:
            return hw.dram_bps
        return interp_log(max(nbytes, 1) / 1e6, hw.bandwidth_curve) * 1e9
    if hw.onchip_gbs and hw.onchip_mb and nbytes <= hw.onchip_mb * 1e6:
        return hw.onchip_gbs * 1e9
    return hw.dram_bps


def memory_time(act_bytes: int, weight_bytes: int, hw: HardwareProfile, weights_resident: bool = False,
                weight_reach: int = 0, arena: int = 0) -> float:
    """Seconds of memory traffic: activations at ``bandwidth_for`` their size (or free when the
    profile keeps activations on chip, like TPU v1's unified buffer); weights from DRAM unless the
    whole model's weights stay resident on chip. On a profile with a bandwidth curve (a calibrated
    CPU), ``weight_reach`` (bytes, 0: unknown) is how far back a weight was last read: a network run
    again and again reads each weight once per inference, and in between touches every other weight
    and its activation buffers (``arena`` bytes of them, ``dnnperf.reuse.arena_bytes``) once each; the
    weight comes back at ``weight_bandwidth``."""
    t_act = 0.0 if hw.activations_onchip else act_bytes / bandwidth_for(act_bytes, hw)
    if weights_resident and hw.onchip_gbs:
        w_bw = hw.onchip_gbs * 1e9
    elif weight_reach and hw.bandwidth_curve:
        w_bw = weight_bandwidth(max(weight_reach - arena, 0), arena, hw)
    else:
        w_bw = hw.dram_bps
    return t_act + weight_bytes / w_bw


def weight_bandwidth(weights: int, arena: int, hw: HardwareProfile) -> float:
    """Bytes/s at which a network run again and again reads its ``weights`` back (bytes, each read once
    per inference) while its ``arena`` of activation buffers is read and written over and over in
    between. Everything fits the cache (``onchip_mb``): the bandwidth curve at that working set. Past
    it, the busy buffers keep their place and the weights share what they leave: the share of the
    weights that room holds comes at the curve's pace for a full cache, the rest at DRAM's. Reading
    them at the curve's figure for weights + arena, as a uniform sweep of that size streams, had the
    classifiers of the 2-core EPYC VM's mid-size networks (1.6-5.1 MB of weights in 17-22 MB) at
    120-150 GB/s where they ran at 46-101 (EfficientNet-B0, its 9.6 MB arena leaving 3 MB: 46;
    MnasNet-1.0, 3.2 MB: 101); this rule gives 58-86."""
    reach = weights + arena
    cache = (hw.onchip_mb or 0) * 1e6
    if not hw.bandwidth_curve or not cache or reach <= cache or weights <= 0 \
            or reach > hw.bandwidth_curve[-1][0] * 1e6:  # past the curve: DRAM's measured pace, as bandwidth_for
        return bandwidth_for(reach, hw)
    held = min(1.0, max(cache - arena, 0.0) / weights)
    if held <= 0.0:
        return hw.dram_bps
    return 1.0 / (held / bandwidth_for(int(cache), hw) + (1.0 - held) / hw.dram_bps)


def prices_far_reads(hw: HardwareProfile) -> bool:
    """Whether ``hw`` reads an activation by how far back it was written (``far_read_time``): a
    calibrated bandwidth curve, activations not kept on chip."""
    return bool(hw.bandwidth_curve) and not hw.activations_onchip


def far_read_time(reads, working_set: int, hw: HardwareProfile) -> float:
    """Seconds that reads from further back add to ``memory_time``: each (bytes, reuse distance) whose
    distance plus its own size exceeds the layer's working set streams at ``bandwidth_for`` that
    size instead (what was written since has pushed it out of the nearer caches)."""
    near = bandwidth_for(working_set, hw)
    extra = 0.0
    for nbytes, distance in reads:
        reach = nbytes + max(distance, 0)
        if reach > working_set:
            extra += nbytes / bandwidth_for(reach, hw) - nbytes / near
    return max(extra, 0.0)


def cold_start_time(cold_bytes: int, working_set: int, reach: int, hw: HardwareProfile) -> float:
    """Seconds a layer waits for what it touches first in an inference (``cold_bytes``: a first
    convolution's image and the buffer it writes, ``dnnperf.reuse.cold_start_bytes``) when the whole
    network ran since: those bytes come from DRAM instead of the cache the layer's working set would
    put them in, in proportion to how far the network's per-inference ``reach`` (weights and buffers,
    bytes) lies past the cache (``beyond_cache``), and the kernel waits for them rather than hiding
    them behind its math (first touches of lines nothing prefetched). On the 2-core EPYC VM (50 GB/s,
    12.6-25 MB cache knee) the 3 x 3 stems of networks that reach past the cache ran 20-50 us over an
    estimate that had their 2.2 MB of image and output in cache (EfficientNet-B0, RegNetY-400MF,
    MnasNet-1.0, ShuffleNetV2 x1.5; EfficientNet-B0's and RegNetY-400MF's ranked 17th-21st predicted
    where they were measured among the top 5), while those of networks within the cache did not
    (MobileNetV3-Small, MnasNet-0.5); ShuffleNetV2's stem alone took 55 us, 111-129 us after a 32 MB
    sweep between runs. 0 without a reach, or where ``hw`` does not price reads by distance
    (``prices_far_reads``: no bandwidth curve, or activations kept on chip)."""
    if cold_bytes <= 0 or not reach or not prices_far_reads(hw):
        return 0.0
    near = bandwidth_for(working_set, hw)
    if near <= hw.dram_bps:
        return 0.0  # the working set already streams at DRAM's pace: nothing was in the cache to lose
    return cold_bytes * (1.0 / hw.dram_bps - 1.0 / near) * beyond_cache(reach, hw)


def beyond_cache(nbytes: float, hw: HardwareProfile) -> float:
    """How much of a read whose reuse distance is ``nbytes`` misses the cache, 0 to 1: 0 up to half
    the profile's cache (``onchip_mb``, the knee of its calibrated bandwidth sweep), 1 from twice it
    on, linear in the log of the size between (the sweep doubles its working set from one point to
    the next, so the cache's edge is known to within a factor of two either way). A profile without
    a bandwidth curve has no cache figures: 1 (everything from DRAM)."""
    if not hw.bandwidth_curve or not hw.onchip_mb:
        return 1.0
    x = nbytes / (hw.onchip_mb * 1e6)
    if x <= 0.5:
        return 0.0
    return min(1.0, log2(2.0 * x) / 2.0)


def exposed_weight_time(weight_bytes: int, reach: int, shorter_s: float, hw: HardwareProfile) -> float:
    """Seconds a convolution's weight reads add beyond what ``memory_overlap`` already leaves exposed:
    ONNX Runtime's CPU convolutions hide weights that stay in the cache behind their math, not weights
    that come back from beyond it. A network reads each weight again every inference, ``reach`` bytes
    later (every weight and activation buffer it touches in between, ``Score.weight_reach``; a
    layer alone: its own bytes); ``conv_weight_exposure`` (calibrated) of the weights' DRAM read time
    is exposed, in proportion to ``beyond_cache(reach)``. Bounded by the shorter of the layer's math
    and memory time (the part an overlap could have hidden at all). On a 2-core EPYC VM (cache knee
    12.6 MB) chains of 1 x 1 convolutions at 7 x 7 paid nothing up to 5 MB of weights and 0.35-0.6 of
    the weights' DRAM time from 17 MB on, as much as a chain of 201 MB; at 14 x 14 (4x the math per
    weight) nothing (bench/RESULTS.md, "Forty-third session")."""
    if not hw.conv_weight_exposure or not weight_bytes:
        return 0.0
    exposed = hw.conv_weight_exposure * beyond_cache(reach, hw)
    extra = exposed - (1.0 - hw.memory_overlap)  # what the plain overlap already exposes
    return max(0.0, extra) * min(weight_bytes / hw.dram_bps, shorter_s)


def call_time(call_us: dict, inputs: int, outputs: int) -> float:
    """Seconds of one inference call through a CPU runtime's Python API besides its kernels (``call_us``): a
    fixed cost with one graph input and one output, plus one per further input (bound in) and output (handed
    out); calibrated (ONNX Runtime 1.32, a 2-core EPYC VM: 3.1 us, 0.69 an input, 0.40 an output: a decoder
    step's 5 inputs and 5 outputs 7.9 us of its 117). 0 without the figure, or for a graph with no inputs."""
    if not call_us or inputs <= 0:
        return 0.0
    more_in, more_out = max(inputs - 1, 0), max(outputs - 1, 0)
    return (call_us.get("fixed", 0.0) + more_in * call_us.get("per_input", 0.0)
            + more_out * call_us.get("per_output", 0.0)) * 1e-6


def launch_time(launches: int, overhead_us: float) -> float:
    """Host-side cost of submitting kernels, paid once per launch and not hidden by the device
    (the pessimistic case of eager execution; graph capture or fusion removes launches)."""
    return launches * overhead_us * 1e-6


def stream_timeline(device_s: list[float], host_s: list[float], waits: list[tuple[float, float]] | None = None) -> list[float]:
    """How much each kernel adds to an asynchronous device's timeline (a CUDA stream) when a host
    enqueues the kernels in order, kernel i costing the host ``host_s[i]`` and the device
    ``device_s[i]``: the host runs ahead, so kernel i starts at the later of the previous kernel's end
    and the moment the host has enqueued it (the sum of the host costs up to it). A long kernel builds
    a backlog behind which the host's next launches are hidden; the device idles only when the host
    falls behind. The increments add up to the time the last kernel ends (at least the host's total,
    at least the device's). Example: device 10, 1, 1, 1, 1 us, host 5 us each: 15, 1, 1, 4, 5 us
    (26 us; one max(device, host) per kernel would say 30).

    ``waits[i]``: (before, after) host seconds of reading a result back from the device before kernel
    i is queued or once it has run (0: none). At a wait the host stops until the device has finished
    everything queued so far, then pays the read: its backlog is gone, and the next kernel starts only
    once the host has queued it. Example: device 10, 10 us, host 5 us each, a 5 us read after the first:
    15, 20 us (35: the second kernel waits for the read and its own launch; without the read 15, 10)."""
    out = []
    host = end = 0.0
    for i, (d, h) in enumerate(zip(device_s, host_s)):
        before, after = waits[i] if waits else (0.0, 0.0)
        if before:
            host = max(host, end) + before
        host += h
        start = max(end, host)
        out.append((start - end) + d)  # exactly d when the device is the bottleneck
        end = start + d
        if after:
            host = max(host, end) + after
    return out


def transfer_time(nbytes: int, link_gbs: float | None) -> float:
    """Time to move ``nbytes`` over a host link of ``link_gbs`` GB/s (0 when there is no link)."""
    if not link_gbs:
        return 0.0
    return nbytes / (link_gbs * 1e9)


def lanes_needed_batch(parallel_work: int, batch: int, lanes: int) -> int:
    """Smallest batch whose outputs cover every lane, given the work at the current batch."""
    per_sample = max(parallel_work // max(batch, 1), 1)
    return max(1, ceil(lanes / per_sample))


def interp_log(x: float, points: tuple[tuple[int, float], ...]) -> float:
    """Piecewise-linear in log(x) through calibrated (x, value) points, flat beyond the ends.

    Used for the efficiency of GEMMs by row count M: few rows reuse each packed weight panel
    little, so small-M products run further below the roof."""
    import math

    if not points:
        return 1.0
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            f = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + f * (y1 - y0)
    return points[-1][1]


def blocked_pool(channels: int, block: int, pool_align: int | None = None) -> bool:
    """Whether a CPU runtime with a channel-blocked layout runs this pooling blocked: it pads a
    convolution's channels up to whole blocks, but pools only a channel count that is a multiple of
    ``pool_align`` (measured by calibrate; default the block). ONNX Runtime on x86 pools 24 or 116
    channels with its plain kernel, converting out of the blocked layout before and back after."""
    return channels % (pool_align or block) == 0


def reads_nchw(w, block: int) -> bool:
    """A plain (ungrouped) convolution with fewer input channels than one ``block``: ONNX Runtime's
    blocked layout runs it with a kernel of its own that reads the NCHW input as it is (a network's
    first layer on the image; its nchwc_transformer); grouped and depthwise ones always take a blocked
    input."""
    return (w.family == "conv" and bool(w.conv) and w.gemm is not None and w.gemm.count == 1
            and w.conv[0] < block)


def blocked_conv(w, block: int, grouped_min: int, align: int | None = None) -> bool:
    """Whether a CPU runtime with a channel-blocked layout (ONNX Runtime's NCHWc, ``block`` channels
    per block, channel counts padded up to whole blocks from a multiple of ``align``) runs this
    convolution blocked: a plain convolution's input channels a multiple of ``align`` or fewer than
    one block (an RGB image is read as it is), whatever its output channels (padded up to whole blocks:
    ONNX Runtime 1.32 ran 64 -> 58, 64 -> 3, 64 -> 1 and 840 -> 151 blocked, 58 -> 64 and 70 -> 840
    plain); a grouped or depthwise one's output channels a multiple of ``align`` too; depthwise
    channels a multiple of ``align``; a grouped one's channels per group from ``grouped_min`` in whole
    multiples. ``align`` and ``grouped_min`` are measured by calibrate (default: the block). Anything
    else runs the plain NCHW kernel."""
    if not w.conv or w.gemm is None or w.kernel == PLAIN_CONV:
        return False
    align = align or block
    groups = w.gemm.count
    cin_g = w.conv[0]
    cout, cin = w.gemm.n * groups, cin_g * groups
    if groups > 1 and cout % align:
        return False
    if w.family == "depthwise_conv":
        return cin % align == 0
    if groups > 1:
        return grouped_width_blocked(cin_g, grouped_min)
    return cin < block or cin % align == 0


def grouped_width_blocked(width: int, grouped_min: int) -> bool:
    """Whether a channel-blocked CPU runtime takes a grouped convolution of ``width`` channels per
    group: from ``grouped_min`` (measured by calibrate) in whole multiples of it."""
    return width >= grouped_min and width % grouped_min == 0
