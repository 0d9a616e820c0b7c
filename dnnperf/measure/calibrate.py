"""Calibration: run the micro-benchmark table and turn its timings into a hardware profile.

Why one module this long: the figures come out of one ordered derivation (``_figures``: the peak,
then the profile at efficiency 1 the ratios are read against, the families and curves, the blocked
layout, then the exposures solved on the model with those figures in), each step reading the ones
before it; the protocol around it (``calibrate``) runs that derivation again on each half of its rounds
(``dnnperf.measure.repeat``). The micro-benchmarks themselves live in ``dnnperf.measure.micro``, the
reorder probes in ``dnnperf.measure.reorder``."""

from __future__ import annotations

import copy
import datetime
import os
import statistics
import time

from dnnperf.fmt import sig
from dnnperf.layout import BLOCKED_OPS
from dnnperf.efficiency import narrow_k1_timed
from dnnperf.errors import DnnperfError, TooNoisy
from dnnperf.measure.micro import (FIXED_CHAIN, SPAN_ELEMENTS, SPAN_WIDTHS, SWEEP_CHAIN, micro_models, os_cache_mb,
                                   reported_cache_mb)
from dnnperf.measure.ort import CAL_TIMING, cpu_name, ort, profiler_inflation_us, session, settled_times
from dnnperf.measure.repeat import FIGURE_TOLERANCE, MAX_GAP, apart, figure_gaps, half_times, widest
from dnnperf.measure.reorder import REORDER_ROUNDS, edge_efficiency, layout_kernels, layout_share, reorder_figures, reorder_rounds
from dnnperf.vocab import BROADCAST_SPANS

# runs, budget (s) and rounds for the cold convolution chain (9-18 ms a run; making its session, 100-200
# MB of filters to pack, takes 0.2-0.45 s a round), default and quick: the fewest runs the protocol
# takes, in the first rounds only (the median of those rounds), so that it adds ~2.5 s to a calibration
COLD_CONV_TIMING = {False: (3, 0.05, 5), True: (3, 0.05, 2)}


def inspect_micro(m):
    """dnnperf's inspection of a micro-model (loaded from a copy: the loader writes into its input)."""
    from onnx import ModelProto

    from dnnperf.api import inspect_graph
    from dnnperf.load import graph_from_model

    m2 = ModelProto()
    m2.CopyFrom(m)
    return inspect_graph(graph_from_model(m2), "<micro>")


def host_shape_ops(mb) -> int:
    """The shape-arithmetic ops dnnperf costs in a micro-model (its own loader counts them)."""
    insp = inspect_micro(mb.model)
    return sum(1 for r in insp.rows if r.workload is not None and r.workload.family == "shape_runtime")


# a sweep point "fits" while it streams at more than this share of the best on-chip speed: the
# middle of the cliff between the cache (0.74-0.95 of the best on this VM) and DRAM (0.33-0.45); at
# three quarters, one calibration in three put the 3 MB point outside (0.743) and halved the cache
KNEE_SHARE = 0.6


# how far a sweep point may sit from the knee's threshold before the choice is called uncertain: a
# Xeon VM whose 48 MB L3 is shared put its points at 0.98-1.1 of it, and five calibrations read the
# cache as 1.6, 6.3, 6.3, 12.6 and 12.6 MB (the AMD VM's cliff: cache points at 1.23-1.58 of it, DRAM
# ones at 0.55-0.75)
KNEE_MARGIN = 0.15


def cache_knee(sweep: list[tuple[int, float]], dram_gbs: float, share: float = KNEE_SHARE) -> float | None:
    """The cache that matters, in MB: the largest working set of the bandwidth sweep ((bytes, GB/s),
    ascending) that still streams at ``share`` of the sweep's best speed and well above DRAM;
    None when no point does (the caller falls back to the size the CPU reports)."""
    best = max(b for _, b in sweep)
    fits = [n for n, b in sweep if b >= share * best and b > 1.5 * dram_gbs]
    return max(fits) / 1e6 if fits else None


def knee_range(sweep: list[tuple[int, float]], dram_gbs: float) -> tuple[float, float] | None:
    """(smallest, largest) cache in MB the knee falls on when its threshold moves by KNEE_MARGIN either
    way, when they differ: a sweep without a sharp cliff, whose cache figure can flip between
    calibrations; None when the knee is the same (or absent) both ways."""
    lo = cache_knee(sweep, dram_gbs, KNEE_SHARE * (1 + KNEE_MARGIN))
    hi = cache_knee(sweep, dram_gbs, KNEE_SHARE * (1 - KNEE_MARGIN))
    return (lo, hi) if lo is not None and hi is not None and lo != hi else None


# a measured cache this many times the largest one the OS reports was not one cache the threads shared
APART_FACTOR = 1.25


def caches_apart(onchip_mb: float | None, reported_mb: float | None, threads: int) -> bool:
    """Whether a calibration with ``threads`` threads streamed a working set at cache speed that
    exceeds, by APART_FACTOR, the largest cache the OS reports (``reported_mb``, None: no report):
    the threads ran on caches of their own (a VM's vCPUs placed on two core complexes or sockets,
    whatever the OS says they share), so together they held more than any one cache. The 2-core
    EPYC VM does this at times (bench/RESULTS.md, "the VM's other state": the one such calibration
    whose record was kept read a 50.3 MB knee where the OS reports one shared 32.8 MB L3, and DRAM at
    87 GB/s instead of 45-52); that run left 14 of 32 models within +-10%, every miss optimistic (-17
    to -46%), and two more calibrated with DRAM at 78-79 GB/s left 12 and 14: a kernel that reads what
    the other thread wrote fetches it from the other cache, which none of the calibration's figures
    time."""
    return bool(onchip_mb and reported_mb and threads > 1 and onchip_mb > APART_FACTOR * reported_mb)


def caches_apart_note(name: str, onchip_mb: float, reported_mb: float) -> str:
    """One line for calibrate and validate when ``caches_apart``."""
    return (f"{name} was calibrated on threads that did not share one cache: they streamed {onchip_mb:g} MB at cache "
            f"speed where this CPU reports a {reported_mb:g} MB last-level cache (measured.caches_apart); a layer that "
            "reads what another thread wrote pays the trip between the caches, which no calibrated figure includes, "
            "so estimates can be optimistic — calibrate again when the machine shares its cache, or calibrate and "
            "validate with --threads 1")


def _sig(x: float) -> float:
    return sig(x, 4)


def calibrate(quick: bool = False, threads: int | None = None, progress=None, strict: bool = True) -> dict:
    """Measure this CPU and return a profile dict (schema dnnperf-hw/1)."""
    rt = ort()
    t0 = time.perf_counter()
    table, no_kernel = _with_kernels(micro_models(quick), threads)
    runs, budget = CAL_TIMING[quick]
    jobs = {mb.name: (lambda b=mb.model.SerializeToString(): session(b, threads), mb.feeds) for mb in table
            if mb.role not in ("probe", "reorder")}
    # the fixed-time chains ride along (timed in every round, their figure the median of the rounds)
    # without holding the protocol back: tens of microseconds of tiny kernels move by more than the
    # tolerance from round to round on a shared machine, and a fixed time is a small share of a layer
    # and so do the convolution chains of the conv.k1 / conv.k3 curves and the pool chain (milliseconds
    # of work through the cache: 5-20% apart from round to round on a shared VM, where the figure they
    # give moves less)
    # and the cold convolution chain (a DRAM-bound 10-20 ms run, timed a few times a round: its
    # figure is a share of a large time)
    # and so do the activation epilogue chains (convolution chains like those; their figure is a difference)
    # and the two bias adds whose difference is the broadcast spans' figure
    # the reorder probes are profiled in rounds spread over the calibration: some now, the rest after
    # the timed rounds (reorder_figures)
    probes = [mb for mb in table if mb.role == "reorder"]
    early_reorders = reorder_rounds(probes, threads, REORDER_ROUNDS[0])
    ride = {mb.name for mb in table if mb.role in ("fixed", "cold_conv", "epilogue", "span", "call")
            or mb.key.startswith("conv.k") or (mb.role == "family" and mb.key == "pool")}
    ctx = _Derivation(table, threads)

    def check(history: dict) -> str | None:  # the figures the halves of the rounds give agree
        return apart(ctx.split_gaps(history, early_reorders, 0))  # the reorder probes' halves: after the rounds

    settled = settled_times(jobs, rounds_min=2 if quick else 5, rounds_max=5 if quick else 10, runs=runs,
                            budget_s=budget, progress=progress, strict=strict,
                            settle_on=tuple(n for n in jobs if n not in ride),
                            timing={mb.name: COLD_CONV_TIMING[quick] for mb in table if mb.role == "cold_conv"},
                            check=check)
    del jobs
    reorders = early_reorders + reorder_rounds(probes, threads, REORDER_ROUNDS[1])
    profile, record = ctx.figures(settled["times"], reorders)
    gaps = ctx.split_gaps(settled["history"], reorders, len(probes))
    repeat = {"tolerance": FIGURE_TOLERANCE, "figures": len(gaps),
              "within": sum(1 for g in gaps.values() if g <= FIGURE_TOLERANCE),
              "widest": {k: _sig(min(gaps[k], MAX_GAP)) for k in widest(gaps)[:5]}}
    # the rounds checked the times' figures; this adds the reorder probes' halves
    differs = apart(gaps)
    if strict and differs:
        raise TooNoisy(f"the figures did not repeat: {differs} — the machine is too busy; stop other work or pin the "
                       "run (--threads), then try again; --accept-noisy keeps such figures")
    unsettled = settled.get("unsettled") or differs
    n_threads = threads or os.cpu_count() or 1
    profile["measured"] = {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_name(),
        "threads": n_threads,
        "onnxruntime": rt.__version__,
        "mode": "quick" if quick else "default",
        "protocol": "interleaved rounds, the median of the rounds' robust medians, repeated until one more "
                    "round moves none by more than 3% (10% under 50 us) and the figures of the rounds' first and second "
                    "halves agree within 5% (measured.repeat)",
        "rounds": settled["rounds"],
        "settled": settled["settled"] and not differs,
        "spread_max": _sig(max(settled["spread"].values(), default=0.0)),
        "spread": {k: _sig(v) for k, v in sorted(settled["spread"].items())},
        "seconds": round(time.perf_counter() - t0, 1),
        "micro_benchmarks_s": {k: _sig(v) for k, v in sorted(settled["times"].items())},
        "repeat": repeat,
        **({"unsettled": unsettled} if unsettled else {}),
        **({"int8_without_kernel": no_kernel} if no_kernel else {}),
        **record,
    }
    return profile


def _with_kernels(table: list, threads: int | None) -> tuple[list, list[str]]:
    """(the micro-benchmarks, the 8-bit pairings of data and weights this ONNX Runtime has no kernel
    for): those pairings are left out of the table, the int8 peak is the fastest of the others (fp32's
    if none runs) and ``int8_operands`` names only the pairings timed. ONNX Runtime 1.23, the last
    release for Python 3.10, has no MatMulInteger of int8 data; 1.32 runs all four."""
    kept, missing = [], []
    for mb in table:
        if mb.role == "peak_int8":
            try:
                session(mb.model.SerializeToString(), threads)
            except DnnperfError as exc:
                if "NOT_IMPLEMENTED" not in str(exc):  # (no kernel registered for these element types)
                    raise
                missing.append(mb.key)
                continue
        kept.append(mb)
    return kept, missing


class _Derivation:
    """The calibration's figures as a function of its micro-benchmarks' times: the ORT node profiles
    the figures also read (each blocked micro-model's, taken once) are kept between calls."""

    def __init__(self, table, threads):
        self.table, self.threads = table, threads
        self.kernels_of: dict[str, dict] = {}  # ORT's node profile of each blocked micro-model, taken once
        self.inflation = profiler_inflation_us(threads)  # what the node profiler adds to each kernel it times

    def kernels(self, mb):
        if mb.name not in self.kernels_of:
            self.kernels_of[mb.name] = layout_kernels(mb, self.threads, self.inflation)
        return self.kernels_of[mb.name]

    def figures(self, times: dict, reorders: list) -> tuple[dict, dict]:
        """(the profile without its ``measured`` record, the record's entries read off the times)."""
        return _figures(self.table, self.threads, times, reorders, self.kernels, self.inflation)

    def split_gaps(self, history: dict, reorders: list, per_round: int) -> dict[str, float]:
        """How far apart each figure comes out from the first and from the second half of the rounds
        (``figure_gaps``): the times' rounds (``half_times``) and the reorder probes' (``per_round``
        profiles a round; 0: every profile in both halves; one round's profiles count in both)."""
        k = (len(reorders) // per_round + 1) // 2 * per_round if per_round else len(reorders)
        first, second = half_times(history)
        return figure_gaps(self.figures(first, reorders[:k])[0], self.figures(second, reorders[k:] or reorders)[0])


def _figures(table, threads: int | None, times: dict, reorders: list, kernels, inflation: float) -> tuple[dict, dict]:
    """The profile ``times`` (seconds per micro-benchmark) give, with the reorder probes' profiles
    (``reorders``), the node profile of a blocked micro-model (``kernels(mb)``) and the profiler's own
    time per kernel (``inflation``), and the ``measured`` record's entries read off them."""
    peak_fp32 = max(mb.ops / times[mb.name] for mb in table if mb.role == "peak") / 1e12
    peak_int8 = max((mb.ops / times[mb.name] for mb in table if mb.role == "peak_int8"), default=0.0) / 1e12
    dram = max((mb for mb in table if mb.role == "dram"), key=lambda mb: mb.nbytes / times[mb.name])
    bw = dram.nbytes / times[dram.name] / 1e9
    dispatch_us = max((times["dispatch_200"] - times["dispatch_1"]) / 199 * 1e6, 0.05)
    # shape arithmetic on symbolic dims, per op dnnperf counts in it: the symbolic chain less the
    # static one (whose arithmetic the runtime folds)
    host_op_us = max((times["host_shape_dynamic"] - times["host_shape_static"]) * 1e6
                     / max(host_shape_ops(next(mb for mb in table if mb.name == "host_shape_dynamic")), 1), dispatch_us)
    # a sweep job is a chain of adds: less the fixed cost of one run (a one-op model's time, its own
    # op's dispatch included) and the dispatch of the chain's other ops
    sweep = sorted((int(mb.key), mb.nbytes / max(times[mb.name] - times["dispatch_1"]
                                                 - (SWEEP_CHAIN - 1) * dispatch_us * 1e-6, 1e-9) / 1e9)
                   for mb in table if mb.role == "onchip")
    onchip_bw = max(b for _, b in sweep)
    os_mb = os_cache_mb()  # sysfs, read once per derivation (the rounds' checks derive the figures again and again)
    reported = os_mb or reported_cache_mb()  # (4 MB when the OS reports none)
    cache_mb = cache_knee(sweep, bw) or reported
    knee_alt = knee_range(sweep, bw)  # no sharp cliff: the cache figures the knee could also have read
    n_threads = threads or os.cpu_count() or 1
    profile = {
        "schema": "dnnperf-hw/1",
        "name": "local",
        "title": f"{cpu_name()} ({n_threads} threads, ONNX Runtime CPU), calibrated",
        "kind": "cpu",
        "headline": {"precision": "fp32", "tops": _sig(peak_fp32)},
        "units": [{"name": "cpu", "serves": ["matrix", "vector"],
                   "peak_tops": {"fp32": _sig(peak_fp32), "int8": _sig(max(peak_int8, peak_fp32))}}],
        "memory": {"dram_gbs": _sig(bw), "onchip_mb": _sig(cache_mb), "onchip_gbs": _sig(max(onchip_bw, bw)),
                   "bandwidth_curve": {_sig(n / 1e6): _sig(max(b, bw)) for n, b in sweep},
                   "dram_measured_mb": _sig(dram.nbytes / 1e6)},
        "parallelism": {"compute_units": n_threads, "lanes": n_threads * 8},
        "launch_overhead_us": _sig(dispatch_us),
        "host_op_us": _sig(host_op_us),
        "call_us": call_us(times, dispatch_us),
        "host_link_gbs": None,
        "sources": {"all": "measured on this machine by `dnnperf calibrate` (medians after warm-up)"},
    }
    from dnnperf.hardware import profile_from_dict

    bare = profile_from_dict(profile, "calibration")
    # the recurrent family's entry is one op of FIXED_CHAIN steps: no dispatch between its "kernels"
    fixed = profile["kernel_fixed_us"] = {
        mb.key: _sig(fixed_us(times[mb.name], times["dispatch_1"], predict_micro(mb.model, bare),
                              0.0 if mb.key == "rnn" else dispatch_us, FIXED_CHAIN))
        for mb in table if mb.role == "fixed" and mb.key != "control"}
    # a loop's per iteration: what its FIXED_CHAIN runs of one Add took beyond their Adds (each a dispatch
    # and the elementwise family's fixed time)
    for mb in (mb for mb in table if mb.role == "fixed" and mb.key == "control"):
        adds = FIXED_CHAIN * fixed.get("elementwise", 0.0) * 1e-6
        fixed["control"] = _sig(fixed_us(times[mb.name], times["dispatch_1"], predict_micro(mb.model, bare) + adds,
                                         dispatch_us, FIXED_CHAIN))
    # the peak is the fastest rate a dense kernel reached: the runtime's blocked convolution kernel can
    # outrun the GEMMs it is read from (reference VM: the 64 -> 64 3 x 3 convolution at 56 x 56 at 222
    # GFLOP/s in the node profiler, the 1024^3 GEMM at 182 and the 197 x 768 x 3072 one at 194). Read
    # against the GEMMs alone, the convolution's efficiency sat at its 1.0 cap in two calibrations of
    # three, and every large plain convolution (VGG's, ResNet's) came out slow by what the cap cut off
    conv = next(mb for mb in table if mb.role == "family" and mb.key == "conv")
    over = _raw_ratio(conv, profile_from_dict(profile, "calibration"), times, dispatch_us, kernels)
    gemm_peak = peak_fp32
    if over > 1.0:
        peak_fp32 *= over
        profile["headline"]["tops"] = _sig(peak_fp32)
        profile["units"][0]["peak_tops"] = {"fp32": _sig(peak_fp32), "int8": _sig(max(peak_int8, peak_fp32))}
    base_dict = copy.deepcopy(profile)  # what the ratios are read against (efficiency 1 everywhere)
    base = profile_from_dict(base_dict, "calibration")
    eff: dict[str, list] = {}
    op_eff = {}
    m_curve: dict[int, float] = {}
    nk_curve: dict[int, float] = {}
    shape_eff: dict[str, dict[int, float]] = {}
    shares = {}
    edge = None  # the one-node convolution's edge conversions against a copy (a record only)
    for mb in table:
        if mb.role not in ("family", "op", "kernel", "m_curve", "nk_curve", "shape") and not (mb.role == "peak" and mb.key):
            continue
        ratio = min(1.0, max(0.01, _raw_ratio(mb, base, times, dispatch_us, kernels)))
        if _blocked(mb):
            shares[mb.name] = layout_share(mb, threads, kernels(mb))
            if mb is conv:
                edge = edge_efficiency(mb, kernels(mb), base)
        if mb.role in ("op", "kernel"):
            op_eff[mb.key] = _sig(ratio)
        elif mb.role == "shape":
            curve, x = mb.key.rsplit(":", 1)
            shape_eff.setdefault(curve, {})[int(x)] = _sig(ratio)
        elif mb.role in ("m_curve", "nk_curve"):
            curve = m_curve if mb.role == "m_curve" else nk_curve
            curve[int(mb.key)] = _sig(min(ratio, curve.get(int(mb.key), 1.0)))
        else:
            eff.setdefault(mb.key, []).append(ratio)
    # the runtime's conversions inside a chain, by the converted tensor's pixels (dnnperf.measure.reorder);
    # the scalar is the largest map's, for readers of the profile without the curve
    inner, reorder_spread = reorder_figures(reorders, base)
    if inner:
        shape_eff["layout.reorder"] = inner
        op_eff["LayoutReorder"] = inner[max(inner)]
    # the blocked layout: the one-node convolution got layout conversions; grouped ones only from
    # the narrowest width that did (the block size)
    if shares.get("conv", 0.0) > 0.0:
        widths = sorted(int(mb.key.split(".w")[1].split(":")[0].split("s")[0]) for mb in table
                        if mb.key.startswith("grouped_conv.w") and shares.get(mb.name, 0.0) > 0.0)
        block = widths[0] if widths else 8
        # the channel multiple the runtime pads up to a block: the smallest power of two dividing
        # the channel count of every probe it took blocked
        took = [mb.key for mb in table if mb.role == "probe" and layout_share(mb, threads, kernels(mb)) > 0.0]
        align = min((int(c) & -int(c) for c in took if c.isdigit()), default=block)
        # pooling is not padded: the smallest power of two dividing every pool probe taken blocked
        pool_align = min((int(c[4:]) & -int(c[4:]) for c in took if c.startswith("pool")), default=block)
        profile["cpu_layout"] = {"block": block, "grouped_min_width": widths[0] if widths else 1 << 20,
                                 "channel_alignment": min(align, block), "pool_alignment": min(max(pool_align, 1), block)}
        layout_basis = ("block: the narrowest grouped width run blocked" if widths else
                        "block: ASSUMED 8 (no grouped convolution ran blocked; grouped ones are costed as plain)")
    else:
        layout_basis = "no blocked layout: the one-node convolution ran without layout conversions"
    # the narrow 1 x 1 point timed the image-reading kernel only where its input is under one block
    if "cpu_layout" not in profile or not narrow_k1_timed(profile["cpu_layout"]["block"]):
        shape_eff.pop("conv.rgb_k1", None)
    profile["efficiency"] = {k: _sig(statistics.median(v)) for k, v in sorted(eff.items())}
    profile["op_efficiency"] = dict(sorted(op_eff.items()))
    # each pairing of 8-bit data and weight types against the int8 peak (its fastest, or fp32's)
    int8_peak = profile["units"][0]["peak_tops"]["int8"] * 1e12
    profile["int8_operands"] = {mb.key: _sig(min(1.0, mb.ops / times[mb.name] / int8_peak))
                                for mb in sorted(table, key=lambda mb: mb.key) if mb.role == "peak_int8"}
    profile["matrix_m_efficiency"] = dict(sorted(m_curve.items()))
    profile["matrix_nk_efficiency"] = dict(sorted(nk_curve.items()))
    profile["shape_efficiency"] = {k: dict(sorted(v.items())) for k, v in sorted(shape_eff.items())}
    profile["subnormal_ns"] = subnormal_ns(times)
    profile["epilogue_ns"] = epilogue_ns(times)
    profile["loop_ns"] = loop_ns(table, times, dispatch_us)
    cold = next(mb for mb in table if mb.role == "cold")
    profile["product_overlap"] = _sig(cold_overlap(cold, profile, times[cold.name] - times["dispatch_1"]
                                                  + dispatch_us * 1e-6))
    cold_conv = next(mb for mb in table if mb.role == "cold_conv")
    cold_s = times[cold_conv.name] - times["dispatch_1"] + dispatch_us * 1e-6
    profile["conv_weight_exposure"] = _sig(weight_exposure(cold_conv, profile, cold_s))
    shapes = [mb for mb in table if mb.role == "shape" and mb.key.startswith("conv.")
              and mb.key.rsplit(":", 1)[0] in profile["shape_efficiency"]]
    rounds = settle_exposure(profile, shapes,
                             lambda e: profile_from_dict({**base_dict, "conv_weight_exposure": e}, "calibration"),
                             lambda mb, hw: _raw_ratio(mb, hw, times, dispatch_us, kernels),
                             lambda prof: weight_exposure(cold_conv, prof, cold_s))
    dw8 = next((mb for mb in table if mb.role == "int8_depthwise"), None)
    if dw8 is not None:
        profile["int8_depthwise_share"] = _sig(int8_depthwise_share(
            dw8, profile, times[dw8.name] - times["dispatch_1"] + dispatch_us * 1e-6))
        generic = int8_depthwise_generic(profile, {
            mb.name: (mb, times[mb.name] - times["dispatch_1"] + dispatch_us * 1e-6)
            for mb in table if mb.role == "int8_depthwise_generic"})
        if generic:
            profile["int8_depthwise_generic"] = generic
    record = {
        "cache_sweep_gbs": {f"{n / 1e6:g} MB": _sig(b) for n, b in sweep},
        "cache_reported_mb": _sig(reported),
        **({"caches_apart": True} if caches_apart(cache_mb, os_mb, n_threads) else {}),
        **({"cache_knee_range_mb": [_sig(x) for x in knee_alt]} if knee_alt else {}),
        "layout_reorder_share": {k: _sig(v) for k, v in sorted(shares.items())},
        "profiler_inflation_us": _sig(inflation),
        **({"layout_reorder_spread": _sig(reorder_spread)} if inner else {}),
        **({"layout_reorder_edge_efficiency": _sig(edge)} if edge is not None else {}),
        "gemm_peak_tops": _sig(gemm_peak),  # the GEMMs' best; the peak is the convolution's when faster
        "cpu_layout": layout_basis,
        "exposure_rounds": rounds,  # the shape curves read with the exposure known (settle_exposure)
    }
    return profile, record


def int8_depthwise_share(mb, profile: dict, kernel_s: float) -> float:
    """ONNX Runtime's 8-bit depthwise convolution's share of the pace its layer gets from the float depthwise
    figures (``int8_depthwise_share``): the micro-benchmark's estimate under the finished ``profile`` with a share
    of 1, over its time (``kernel_s``: the session's fixed cost taken off), less the fixed kernel time the
    estimate adds apart. Capped to [0.05, 1]: the estimate already floors an 8-bit depthwise layer at the float
    rate (a depthwise filter cannot fill the byte dot products)."""
    from dnnperf.hardware import profile_from_dict

    hw = profile_from_dict({**profile, "int8_depthwise_share": 1.0}, "calibration")
    roof_s, fixed_s, _ = micro_costs(mb.model, hw)
    return min(1.0, max(0.05, roof_s / max(kernel_s - fixed_s, 1e-7)))


def int8_depthwise_generic(profile: dict, timed: dict) -> dict | None:
    """The generic 8-bit depthwise kernel (``int8_depthwise_generic``): its share of the float depthwise pace, as
    ``int8_depthwise_share`` reads one, from the micro-benchmark on channels in no whole group of 8; and the channel
    multiple the fast kernel takes: 8 when the one on channels in groups of 8 (not 16) runs nearer the fast kernel's
    share than the generic one's, else 16. ``timed``: {name: (micro, its kernel time)}; None without both."""
    shares = {}
    for mb, kernel_s in timed.values():
        ch = int(mb.name.rsplit("_", 1)[1])  # (micro.INT8_DEPTHWISE_GENERIC: int8_depthwise_<channels>)
        shares[ch % 8 == 0] = int8_depthwise_share(mb, profile, kernel_s)
    if len(shares) < 2:
        return None
    fast = profile["int8_depthwise_share"]
    multiple = 8 if abs(shares[True] - fast) < abs(shares[True] - shares[False]) else 16
    return {"channel_multiple": multiple, "share": _sig(min(shares[False], fast))}


EXPOSURE_ROUNDS = 4  # at most: the shape curves and the weight exposure read again in turn


def settle_exposure(profile: dict, shapes, base_at, ratio_of, exposure_of) -> int:
    """Read the convolution shape curves and ``conv_weight_exposure`` again in turn until the exposure
    settles (moves by under 0.005; at most EXPOSURE_ROUNDS rounds). The shape curves' chains whose
    weights reach past the cache (3 x 3 at 7 x 7: 38 MB) paid the exposed weight reads too: read
    against an estimate without them (the first reading), their figure took the exposure in, and a
    network then paid it twice. ``base_at(exposure)``: the profile the ratios are read against, with
    that exposure (built once a round); ``ratio_of(micro, base)``: the micro's raw ratio against it;
    ``exposure_of(profile)``: the exposure the cold chain gives under ``profile``. Each figure is capped
    to [0.01, 1] as the first reading caps it. Returns the rounds taken."""
    rounds = 0
    while rounds < EXPOSURE_ROUNDS:
        rounds += 1
        before = profile["conv_weight_exposure"]
        base = base_at(before)
        for mb in shapes:
            curve, x = mb.key.rsplit(":", 1)
            profile["shape_efficiency"][curve][int(x)] = _sig(min(1.0, max(0.01, ratio_of(mb, base))))
        profile["conv_weight_exposure"] = _sig(exposure_of(profile))
        if abs(profile["conv_weight_exposure"] - before) < 0.005:
            break
    return rounds


def _blocked(mb) -> bool:
    return any(n.op_type in BLOCKED_OPS for n in mb.model.graph.node)


def _raw_ratio(mb, base, times: dict, dispatch_us: float, kernels) -> float:
    """A micro-benchmark's roof (dnnperf's estimate at efficiency 1 under ``base``) over its kernel
    time, uncapped: the measured time less the fixed cost of one session.run (binding, allocation)
    measured on a 1-op model, the fixed time of its kernels (``kernel_fixed_us``: the estimate adds it
    back per kernel) and the layout reorders a lone convolution or pooling gets (a network pays them
    once; ``kernels(mb)`` is its node profile)."""
    fusion = "typical" if mb.role == "kernel" else "none"  # a kernel entry: costed as ORT's kernels of it
    image = mb.key.startswith("conv.rgb")  # the image kernel's first touches: the estimate adds them back apart
    # the plain depthwise kernel's figures are read against its math alone, as the estimate applies them
    # (efficiency.plain_depthwise)
    math = mb.key.startswith("depthwise_conv.unblocked_k")
    roof_s, fixed_s, cold_s = micro_costs(mb.model, base, fusion, image, math)
    kernel_s = max(times[mb.name] - times["dispatch_1"] + dispatch_us * 1e-6 - fixed_s, 1e-7)
    if image:
        kernel_s = max(kernel_s - cold_s, 1e-7)
    if _blocked(mb):
        kernel_s *= 1.0 - layout_share(mb, None, kernels(mb))
    return roof_s / kernel_s


def subnormal_ns(times: dict) -> dict:
    """Nanoseconds per subnormal probability: the masked Softmax less the unmasked one, over the values
    the mask makes subnormal; the MatMul's share is what the pair adds beyond that (0 on a CPU that
    flushes subnormals)."""
    from dnnperf.measure.micro import subnormal_count

    n = subnormal_count()
    sm = times["subnormal_softmax_masked"] - times["subnormal_softmax_clear"]
    pair = times["subnormal_matmul_masked"] - times["subnormal_matmul_clear"]
    return {"softmax": _sig(max(sm, 0.0) / n * 1e9), "matmul": _sig(max(pair - max(sm, 0.0), 0.0) / n * 1e9)}


def epilogue_ns(times: dict) -> dict:
    """Nanoseconds per output element of each activation a blocked convolution applies in a pass of its
    own: its convolution chain less the same chain without activations, over the elements they pass
    through (0 where the two chains tie or the difference is negative: no cost measured)."""
    from dnnperf.measure.micro import epilogue_elements
    from dnnperf.vocab import EPILOGUE_ACTIVATIONS

    n = epilogue_elements()
    base = times["epilogue_none"]
    return {act: _sig(max(times[f"epilogue_{act}"] - base, 0.0) / n * 1e9) for act in EPILOGUE_ACTIVATIONS}


def loop_ns(table, times: dict, dispatch_us: float) -> dict:
    """Nanoseconds per output element of each kernel the runtime runs as one loop over its outputs
    (``vocab.LOOP_KERNELS``): its one-node model's time less a run's fixed cost (the one-node dispatch
    model's time, less the op's own dispatch), over the output elements."""
    from dnnperf.measure.micro import loop_elements

    out = {}
    for mb in table:
        t = times[mb.name] - times["dispatch_1"] + dispatch_us * 1e-6 if mb.role == "loop" else 0.0
        if t > 0:
            out[mb.key] = _sig(t / loop_elements(mb.key) * 1e9)
    span = broadcast_span_ns(times)
    if span is not None:
        out[BROADCAST_SPANS] = span
    return dict(sorted(out.items()))


def broadcast_span_ns(times: dict) -> float | None:
    """Nanoseconds each span of a broadcasting binary op adds to its stream: two bias adds of the same
    elements, in narrow and in wide spans, differ only in their count of spans (None without the two
    timings, or where the narrow spans came out no slower: no cost measured, the profile has no figure)."""
    narrow, wide = (f"span_{w}" for w in SPAN_WIDTHS)
    if narrow not in times or wide not in times:
        return None
    spans = SPAN_ELEMENTS // SPAN_WIDTHS[0] - SPAN_ELEMENTS // SPAN_WIDTHS[1]
    extra = times[narrow] - times[wide]
    return _sig(extra / spans * 1e9) if extra > 0 else None


def cold_overlap(cold, profile: dict, kernel_s: float) -> float:
    """How much of a cache-busting GEMM's weight streaming hides behind its math: the
    ``product_overlap`` (matrix products only: a figure read off weights streaming from DRAM says
    nothing of a convolution's or a pointwise op's cached activations; as the one global
    memory_overlap it slowed every CNN layer, ResNets +5-7%) at which dnnperf's own estimate of that
    GEMM (with the thin-GEMM and matmul efficiencies just measured) equals its measured ``kernel_s``.
    The estimate is linear in the overlap, from T0 (none hidden) to T1 (all of the shorter side
    hidden). Solving the model, rather than subtracting the peak-rate math time from the measurement,
    keeps the thin GEMM's own slowness (measured apart, by the m curve) out of the overlap, and the
    peak's noise with it: both sides share the calibration."""
    from dnnperf.hardware import profile_from_dict

    t0, t1 = (predict_micro(cold.model, profile_from_dict({**profile, "product_overlap": ov}, "calibration"))
              for ov in (0.0, 1.0))
    if t0 <= t1:
        return 1.0
    return min(1.0, max(0.0, (t0 - kernel_s) / (t0 - t1)))


def weight_exposure(chain, profile: dict, kernel_s: float) -> float:
    """The share of a convolution's weight reads from DRAM that its math does not hide: the
    ``conv_weight_exposure`` at which dnnperf's estimate of the cold convolution chain (its weights as
    large as the DRAM measurement's working set, so every read comes from DRAM) equals its measured
    ``kernel_s``. The estimate does not move while the exposure is below what ``memory_overlap``
    already leaves exposed (1 - memory_overlap: the floor returned when the chain runs no slower than
    that), then rises linearly to the whole weight time at 1."""
    from dnnperf.hardware import profile_from_dict

    floor = 1.0 - float(profile.get("memory_overlap", 1.0))
    t0, t1 = (predict_micro(chain.model, profile_from_dict({**profile, "conv_weight_exposure": e}, "calibration"))
              for e in (floor, 1.0))
    if t1 <= t0:
        return floor
    return min(1.0, max(floor, floor + (1.0 - floor) * (kernel_s - t0) / (t1 - t0)))


FIXED_RESOLUTION_US = 0.1  # the smallest fixed kernel time a chain of FIXED_CHAIN tiny kernels resolves


def call_us(times: dict, dispatch_us: float) -> dict:
    """The runtime's call cost (``rules.call_time``): the one-op model's run less its op's dispatch; each
    further input from the CALL_TENSORS-input model's excess over it, each further output from the
    CALL_TENSORS-output one's, less its further ops' dispatch."""
    from dnnperf.measure.micro import CALL_TENSORS

    one, more = times["dispatch_1"] * 1e6, CALL_TENSORS - 1
    return {"fixed": _sig(max(one - dispatch_us, 0.0)),
            "per_input": _sig(max(times["call_inputs"] * 1e6 - one, 0.0) / more),
            "per_output": _sig(max(times["call_outputs"] * 1e6 - one - more * dispatch_us, 0.0) / more)}


def fixed_us(chain_s: float, one_op_s: float, arithmetic_s: float, dispatch_us: float, n: int) -> float:
    """A family's fixed time per kernel (us) from a chain of ``n`` tiny kernels of it that took
    ``chain_s``: less the fixed cost of one run (``one_op_s``, a one-op model, its op's dispatch
    included), the other ops' dispatch and the chain's arithmetic (``arithmetic_s``, dnnperf's
    roofline estimate: negligible by design). Under FIXED_RESOLUTION_US it is 0: the protocol settles
    a chain of tiny kernels (tens of us) to within 10%, a few us, so a smaller figure is noise."""
    us = ((chain_s - one_op_s - arithmetic_s) * 1e6 - (n - 1) * dispatch_us) / n
    return us if us >= FIXED_RESOLUTION_US else 0.0


def micro_costs(m, hw, fusion: str = "none", image: bool = False, math: bool = False) -> tuple[float, float, float]:
    """From one analysis of a micro-model: (``predict_micro``'s estimate, with ``math`` its compute time alone,
    the fixed kernel time
    (``kernel_fixed_us``) dnnperf charges its kernels, and with ``image`` the first-touch time
    (``rules.cold_start_time``) of its convolutions that read its input, else 0). The fixed time is
    taken off the measured time before an efficiency is read from it, as the estimate adds it back
    apart; so is the first-touch time of the image-kernel points, whose copies each write a buffer of
    their own on every run (3 -> 64 7 x 7: 8 x 3.2 MB), cold past the cache as a network's first layer
    is (the network's stem gets it back by the same rule)."""
    from dnnperf import rules
    from dnnperf.api import analyze
    from dnnperf.reuse import cold_start_bytes
    from dnnperf.scoring import Settings

    insp = inspect_micro(m)
    sc = analyze(insp, hw, Settings(fusion=fusion), with_fixes=False).score
    roof = sum(c.t_compute if math else c.time_s - c.t_launch for c in sc.layers) + hw.launch_overhead_us * 1e-6
    fixed = sum(_fixed_us(c.layer.workload, hw) for c in sc.layers) * 1e-6
    cold_s = 0.0
    if image:
        layers = [c.layer for c in sc.layers]
        cold = cold_start_bytes(insp, layers, lambda la: la.workload.family == "conv")
        cold_s = sum(rules.cold_start_time(cold[la.name], la.workload.act_bytes_read + la.workload.bytes_written,
                                           sc.weight_reach, hw) for la in layers if la.name in cold)
    return roof, fixed, cold_s


def _fixed_us(w, hw) -> float:
    """The fixed kernel time (us) the estimate charges ``w``: its launches at its family's figure; a
    control-flow layer's body parts theirs, and each iteration the loop's."""
    if w.parts:
        return sum(n * _fixed_us(pw, hw) for _, pw, n in w.parts) + w.iterations * hw.kernel_fixed_us.get("control", 0.0)
    return w.launches * hw.kernel_fixed_us.get(w.family, 0.0)


def predict_micro(m, hw, fusion: str = "none") -> float:
    """dnnperf's estimate for a micro-model (efficiency 1, no launch cost): the roofline part."""
    return micro_costs(m, hw, fusion)[0]
