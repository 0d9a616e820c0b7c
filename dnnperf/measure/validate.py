"""Validation: run a model in ONNX Runtime, map its kernels back to dnnperf's layers, compare."""

from __future__ import annotations

import gc
import os
import time

from dnnperf.errors import TooNoisy
from dnnperf.fmt import sig
from dnnperf.fmt import t as fmt_time
from dnnperf.measure.kernel_map import map_kernels
from dnnperf.measure.ort import (CAL_TIMING, cpu_name, feeds_for, profiled_kernels, profiler_inflation_us, runnable_bytes,
                                 session, settled_times)


def _sig(x: float) -> float:
    return sig(x, 4)


def _quick_calibration(hw) -> bool:
    """Was ``hw`` calibrated with ``--quick`` (smaller anchors, fewer runs per round)?"""
    return (getattr(hw, "measured", None) or {}).get("mode") == "quick"


def anchors_of(hw, threads: int | None) -> list:
    """[(micro-benchmark, its seconds at calibration)] for the calibration's anchor entries
    (``micro.ANCHORS``, and the cache sweep's ``ONCHIP_ANCHOR_KB`` point where the calibration timed
    it), when ``hw`` was calibrated on this machine's thread count; [] otherwise."""
    from dnnperf.measure.micro import ANCHORS, ONCHIP_ANCHOR_KB, anchor_models

    meas = getattr(hw, "measured", None) or {}
    then = meas.get("micro_benchmarks_s") or {}
    if not isinstance(then, dict) or any(not isinstance(then.get(a), (int, float)) or then[a] <= 0 for a in ANCHORS):
        return []
    cal = meas.get("threads")
    if cal and (not isinstance(cal, int) or cal != int(threads or os.cpu_count() or 1)):
        return []  # another thread count (or a record that does not say): nothing to compare against
    onchip = then.get(f"cache_{ONCHIP_ANCHOR_KB}k")
    onchip = isinstance(onchip, (int, float)) and onchip > 0
    return [(mb, float(then[mb.name])) for mb in anchor_models(_quick_calibration(hw), onchip)]


# how far the profiled run's kernels may add up from the unprofiled latency before a note says so
PROFILE_INFLATED = 1.2  # many tiny kernels: the profiler's own cost per kernel inflates them
PROFILE_SHORT = 0.95  # a few large kernels: time outside the kernels (executor, allocation) is not in them


def profile_note(profiled_s: float, latency_s: float) -> str | None:
    """The note a validation carries when the per-layer measured times (ONNX Runtime's profiled run)
    do not add up to the model's unprofiled latency: on graphs of many tiny kernels the profiler inflates
    them; on networks of a few large kernels they sum to 3-10% less than the wall time (resnets,
    wide_resnet50_2, resnext101_32x8d on a 2-core VM), so each layer's measured time reads that much
    short. None when they agree within those bounds."""
    if latency_s <= 0 or profiled_s <= 0:
        return None
    r = profiled_s / latency_s
    if r > PROFILE_INFLATED:
        return (f"the per-layer measured times come from ONNX Runtime's profiled run, whose kernels add up to "
                f"{r:.2f}x the model's unprofiled latency ({fmt_time(profiled_s)} vs {fmt_time(latency_s)}): "
                "compare the layers' ranks and shares, not their absolute errors")
    if r < PROFILE_SHORT:
        return (f"the per-layer measured times come from ONNX Runtime's profiled run, whose kernels add up to "
                f"only {r:.2f}x the model's latency ({fmt_time(profiled_s)} vs {fmt_time(latency_s)}): the rest "
                "is spent between kernels, so each layer's estimate reads that much slow against its kernel")
    return None


def floored_note(n: int, inflation_us: float) -> str:
    """The note on kernels the node profiler could not time: reported at little more than its own time
    per kernel, their measured time is an assumed tenth of what it reported."""
    return (f"{n} kernel{'s' if n > 1 else ''} ran faster than ONNX Runtime's profiler can time (reported at little "
            f"more than its own {inflation_us:.1f} us per kernel): the measured time of such a kernel is taken as a "
            "tenth of the reported one, an assumption; judge the layers it belongs to by the model's error, not "
            "their own")


def at_current_speed(hw, compute: float, memory: float):
    """``hw`` with its arithmetic rates (and per-op host, fixed kernel and epilogue costs) scaled by ``compute``
    and its bandwidths by ``memory``: the machine as fast as it is now, relative to its calibration."""
    from dataclasses import replace

    units = tuple(replace(u, peak_tops={k: v * compute for k, v in u.peak_tops.items()}) for u in hw.units)
    return replace(hw, units=units, headline_tops=hw.headline_tops * compute, dram_gbs=hw.dram_gbs * memory,
                   onchip_gbs=None if hw.onchip_gbs is None else hw.onchip_gbs * memory,
                   bandwidth_curve=tuple((mb, gbs * memory) for mb, gbs in hw.bandwidth_curve),
                   launch_overhead_us=hw.launch_overhead_us / compute,
                   host_op_us=None if hw.host_op_us is None else hw.host_op_us / compute,
                   call_us={k: v / compute for k, v in hw.call_us.items()},
                   kernel_fixed_us={k: v / compute for k, v in hw.kernel_fixed_us.items()},
                   epilogue_ns={k: v / compute for k, v in hw.epilogue_ns.items()})


def measure(path: str, graph, threads: int | None, runs: int = 20, warmup: int = 3, strict: bool = True,
            anchors=(), quick_anchors: bool = False):
    """(robust median model latency s, {ORT kernel name: (op, median us)} from a profiled run, the
    settled record). ``anchors``: micro-benchmarks timed in the same interleaved rounds (their
    times are in the record under "anchor:<name>"). The kernel times are less the node profiler's
    own time per kernel, measured here too (the record's ``profiler_inflation_us``), and the record's
    ``kernel_shapes`` holds each kernel's (input shapes, output shapes), ``kernels_floored`` the kernels
    too fast for the profiler to time (``profiled_kernels``)."""
    from dnnperf.tanh_gelu import tanh_gelu_constants

    stand_ins: list[str] = []
    data = runnable_bytes(path, tanh_gelu_constants(graph), stand_ins)
    feeds = feeds_for(graph)
    # plain session for the end-to-end latency (profiling adds overhead per node)
    sess = session(data, threads)
    jobs = {"model": (sess, feeds)}
    for mb in anchors:
        jobs[f"anchor:{mb.name}"] = (lambda b=mb.model.SerializeToString(): session(b, threads), mb.feeds)
    # the anchors ride along (their medians over the same rounds), each timed as calibrate timed it
    settled = settled_times(jobs, rounds_min=3, rounds_max=8, runs=max(3, runs // 3), budget_s=3.0, strict=strict,
                            settle_on=("model",),
                            timing={f"anchor:{mb.name}": CAL_TIMING[quick_anchors] for mb in anchors})
    latency = settled["times"]["model"]
    del sess  # an idle session's worker threads may keep spinning: free it before the profiled run
    gc.collect()
    settled["profiler_inflation_us"] = inflation = profiler_inflation_us(threads)
    settled["kernel_shapes"] = shapes = {}
    settled["kernels_floored"] = floored = set()
    settled["stand_in_constants"] = sorted(set(stand_ins))
    return latency, profiled_kernels(data, feeds, threads, runs, warmup, inflation, shapes, floored), settled


def _pace(x: float) -> str:
    return f"{abs(x - 1) * 100:.0f}% {'faster' if x >= 1 else 'slower'}"


# how far an anchor may move from its calibrated time before the machine counts as another machine: a
# steady one repeats its anchors within a few percent; a 2-core VM in its slow state ran models 1.5-2.5x
# slower while its memory anchor read 1.5-1.9x *faster* and its GEMM anchor unchanged
ANCHOR_MOVE = 1.25
# validate --retry-unsteady measures again from a smaller move than it marks: the per-resource
# correction leaves part of a state change unexplained. Rows of bench/cpu_unseen.py (5 runs x 32
# models, 2-core EPYC VM) whose anchors moved 15-18% missed by 13-33% (RegNetX-400MF -13%,
# EfficientNet-B1 -30%, MobileNetV3-Small -33%); 12% of all rows moved more than 10%
RETRY_MOVE = 1.10


def anchor_move(speed: dict) -> float:
    """How far the furthest anchor moved since calibration, as a factor >= 1 either way (1: none)."""
    return max((max(v, 1 / v) for v in speed.values() if v > 0), default=1.0)


def unsteady(speed: dict) -> str | None:
    """A note when an anchor moved past ``ANCHOR_MOVE`` either way since calibration (``speed``: role ->
    calibrated time / time now): the per-resource correction cannot describe such a change, so the
    comparison is not one of dnnperf's model against this machine."""
    moved = {role: v for role, v in speed.items() if v > ANCHOR_MOVE or v < 1 / ANCHOR_MOVE}
    if not moved:
        return None
    named = {"peak": "compute", "dram": "memory", "onchip": "cache"}  # as speed_vs_calibration names them
    said = ", ".join(f"{named.get(role, role)} x{v:.2f}" for role, v in sorted(moved.items()))
    return (f"UNRELIABLE: an anchor micro-benchmark moved by more than {round((ANCHOR_MOVE - 1) * 100)}% since "
            f"calibration ({said}): this machine is not in the state it was calibrated in (a shared or "
            "throttled machine); run validate again when it settles, or calibrate again")


# predicted times closer than this (relative) are ties: no estimate resolves layers that finely
# (ViT-L/32's 48 MLP products of one shape: 1.206-1.207 ms predicted, 1.209-1.261 measured)
TIE_TOLERANCE = 0.01


def predicted_top(pred: dict, k: int) -> list:
    """The layers "in the predicted top-``k``", ties included: every layer whose predicted time reaches
    the k-th largest within ``TIE_TOLERANCE`` (identical encoder blocks predict one time, and which
    of them the measurement ranks first is noise)."""
    ranked = sorted(pred.values(), reverse=True)
    if not ranked:
        return []
    kth = ranked[min(k, len(ranked)) - 1]
    return [name for name in pred if pred[name] >= kth * (1 - TIE_TOLERANCE)]


def op_summary(rows: list[dict]) -> list[dict]:
    """Predicted and measured time summed by layer kind (``op_type``: "Conv+Relu", "LayoutReorder",
    "Gemm"...), the kinds that took longest first, each with predicted / measured: where a model's error
    comes from when no single layer shows it (a network's 16 squeeze-excite convolutions at 0.4x, its 55
    layout conversions at 2.8x). A kind nothing was measured for has no ratio."""
    agg: dict[str, list] = {}
    for r in rows:
        a = agg.setdefault(r["op_type"], [0, 0.0, 0.0])
        a[0] += 1
        a[1] += r["predicted_s"] or 0.0
        a[2] += r["measured_s"] or 0.0
    out = [{"op_type": op, "layers": n, "predicted_s": _sig(p), "measured_s": _sig(m),
            "ratio": _sig(p / m) if m > 0 else None} for op, (n, p, m) in agg.items()]
    return sorted(out, key=lambda r: (-r["measured_s"], -r["predicted_s"], r["op_type"]))


# how long validate waits before measuring again when the machine is not in its calibrated state
# (``unsteady``): a shared 2-core VM's slow stretches (memory anchor x1.6-1.8, models 1.3-2x slower) last
# from seconds to a few minutes
STEADY_WAIT_S = 20.0


def validate(path: str, hw, overrides, threads: int | None = None, runs: int = 20, strict: bool = True,
             drift: bool = True, steady_retries: int = 0, wait_s: float = STEADY_WAIT_S) -> dict:
    """Predicted vs measured for one model. With ``drift`` (and a profile calibrated here), the
    calibration's anchor micro-benchmarks are re-timed in the same rounds as the model and the
    estimate is made for the machine as fast as it is now (``at_current_speed``); the JSON keeps
    the estimate of the profile as calibrated too. ``steady_retries``: when an anchor moved past
    ``RETRY_MOVE`` or the model's timings did not settle (the machine is not in the state it was
    calibrated in, or too busy this minute), wait ``wait_s`` and measure again, up to that many times;
    the steadiest measurement (its anchors nearest the calibration's, settled before unsettled; the
    later on a tie) is the one compared. The JSON's ``remeasured`` counts the repeats; the note
    UNRELIABLE stays when even that one moved past ``ANCHOR_MOVE``. A strict run whose every try
    failed to settle exits 4 as before."""
    from dnnperf.scoring import Settings
    from dnnperf.api import analyze, checked, inspect_graph
    from dnnperf.load import load_graph

    graph = load_graph(path, overrides)
    insp = checked(inspect_graph(graph, path), overrides)
    settings = Settings(fusion="typical")
    anchors = anchors_of(hw, threads) if drift else []
    remeasured = 0
    tries = []  # (unsettled, anchor move, -try number, (latency, kernels, settled record, speed))
    while True:
        try:
            latency, kernels, settled = measure(path, graph, threads, runs=runs, strict=strict,
                                                anchors=[mb for mb, _ in anchors], quick_anchors=_quick_calibration(hw))
        except TooNoisy:
            if remeasured >= steady_retries:
                if tries:  # an earlier try settled: it stands
                    break
                raise
            remeasured += 1
            time.sleep(wait_s)
            continue
        speed = {}
        if anchors:
            now = settled["times"]
            speed = {mb.role: then / now[f"anchor:{mb.name}"] for mb, then in anchors}  # > 1: faster now
        move = anchor_move(speed) if speed else 1.0
        tries.append((not settled["settled"], move, -len(tries), (latency, kernels, settled, speed)))
        if (settled["settled"] and move <= RETRY_MOVE) or remeasured >= steady_retries:
            break
        remeasured += 1
        time.sleep(wait_s)
    latency, kernels, settled, speed = min(tries)[3]
    calibrated_s = None
    if anchors:
        calibrated_s = analyze(insp, hw, settings, with_fixes=False).score.totals["latency_s"]
        hw = at_current_speed(hw, speed["peak"], speed["dram"])
    rep = analyze(insp, hw, settings, with_fixes=False)
    layers = [c.layer for c in rep.score.layers]
    meas, unmatched = map_kernels(kernels, graph, layers, settled.get("kernel_shapes"))
    pred = {c.name: c.time_s for c in rep.score.layers if c.time_s > 0}
    rows = []
    for c in rep.score.layers:
        if c.name not in meas and c.time_s == 0:
            continue
        m_s = meas.get(c.name, 0.0) * 1e-6
        rows.append({"layer": c.name, "op_type": c.layer.op_type, "predicted_s": _sig(c.time_s),
                     "measured_s": _sig(m_s), "error": _sig((c.time_s - m_s) / m_s) if m_s > 0 else None})
    by_op = op_summary(rows)
    top_meas = [k for k, _ in sorted(meas.items(), key=lambda kv: (-kv[1], kv[0]))[:5]]
    top_pred5, top_pred10 = predicted_top(pred, 5), predicted_top(pred, 10)
    predicted = rep.score.totals["latency_s"]
    rank_p = {k: i + 1 for i, k in enumerate(sorted(pred, key=lambda k: (-pred[k], k)))}
    rank_m = {k: i + 1 for i, k in enumerate(sorted(meas, key=lambda k: (-meas[k], k)))}
    shown = list(dict.fromkeys(top_meas + sorted(pred, key=lambda k: (-pred[k], k))[:5]))
    top_layers = [{"layer": k, "measured_s": _sig(meas.get(k, 0.0) * 1e-6), "measured_rank": rank_m.get(k),
                   "predicted_s": _sig(pred.get(k, 0.0)), "predicted_rank": rank_p.get(k)} for k in shown]
    notes = list(dict.fromkeys(insp.warnings + rep.notes))  # what the estimate assumed (bounds, partial coverage)
    if speed and max(abs(speed[r] - 1) for r in ("peak", "dram")) > 0.02:
        notes.append(f"this machine multiplies {_pace(speed['peak'])} and streams memory {_pace(speed['dram'])} than "
                     f"when {hw.name} was calibrated (its anchor micro-benchmarks, timed next to the model): the "
                     f"estimate is for its speed now; as calibrated: {fmt_time(calibrated_s)} (--no-drift)")
    if speed and (moved := unsteady(speed)):
        notes.append(moved)
    profiled_s = sum(us for _op, us in kernels.values()) * 1e-6  # every kernel of the profiled run
    note = profile_note(profiled_s, latency)
    if note:
        notes.append(note)
    stand_ins = settled.get("stand_in_constants")
    if stand_ins:
        notes.append(f"{len(stand_ins)} constant(s) of the model's tanh GELUs had no value in the file (a weightless "
                     "skeleton): the run gives them gelu_new's own (3, 0.044715, sqrt(2/pi), 1, 0.5), as the estimate "
                     "reads the pattern as ONNX Runtime's FastGelu kernel; with other values the runtime would run "
                     "another function, node by node")
    floored = settled.get("kernels_floored")
    if floored:
        notes.append(floored_note(len(floored), settled["profiler_inflation_us"]))
    here = cpu_name()
    on = (getattr(hw, "measured", None) or {}).get("cpu")
    if on != here:  # a spec-sheet profile, or one calibrated on another CPU
        notes.append(f"{hw.name} was {'calibrated on ' + repr(on) if on else 'not calibrated on any machine'}, "
                     f"not on this one ({here!r}): the error compares that profile with this CPU, not dnnperf's model "
                     "with the machine it describes — dnnperf calibrate -o local.yaml, then validate with --hw local.yaml")
    measured = getattr(hw, "measured", None) or {}
    if measured.get("caches_apart") and hw.onchip_mb and measured.get("cache_reported_mb"):
        from dnnperf.measure.calibrate import caches_apart_note

        notes.append(caches_apart_note(hw.name, hw.onchip_mb, measured["cache_reported_mb"]))
    cal = measured.get("threads")
    used = threads or os.cpu_count()
    if isinstance(cal, int) and cal != int(used):
        notes.append(f"{hw.name} was calibrated with {cal} threads but this run uses {used}: calibrate with "
                     f"--threads {used} (or validate with --threads {cal}) for a like-for-like comparison")
    return {
        "schema_version": "dnnperf-validate/1",
        "model": os.path.basename(path),
        "hardware": hw.name,
        "threads": threads or os.cpu_count(),
        "predicted_s": _sig(predicted),
        "measured_s": _sig(latency),
        "error": _sig((predicted - latency) / latency),
        "measured_top5": top_meas,
        "top5_also_predicted_top5": [k for k in top_meas if k in top_pred5],
        "top5_inside_predicted_top10": all(k in top_pred10 for k in top_meas),
        "top_layers": top_layers,
        "by_op": by_op,
        "predicted_as_calibrated_s": None if calibrated_s is None else _sig(calibrated_s),
        "speed_vs_calibration": {"compute": _sig(speed["peak"]), "memory": _sig(speed["dram"]),
                                 **({"cache": _sig(speed["onchip"])} if "onchip" in speed else {})} if speed else None,
        "rounds": settled["rounds"],
        "remeasured": remeasured,  # measurements taken again because the machine was not in its calibrated state
        "settled": settled["settled"],
        "spread": _sig(settled["spread"]["model"]),
        "notes": notes,
        "profiled_kernels_s": _sig(profiled_s),  # less the profiler's own time per kernel (below)
        "profiler_inflation_us": _sig(settled.get("profiler_inflation_us", 0.0)),
        "kernels_matched": len(kernels) - len(unmatched),
        "kernels_unmatched": {k: _sig(v * 1e-6) for k, v in sorted(unmatched.items())},
        "layers": rows,
    }
