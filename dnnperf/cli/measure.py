"""Measuring this machine through ONNX Runtime (dnnperf[measure]): calibrate, validate."""


from typing import Annotated, Optional

import typer

from dnnperf.cli.app import (Batch, Context, Dim, Format, HwOne, InputShape, Output, Prompt, Quiet, Value, app, command,
                             overrides, positive, progress)
from dnnperf.documents import Document

Threads = Annotated[Optional[int], typer.Option("--threads", help="ONNX Runtime intra-op threads (default: ORT's).")]
AcceptNoisy = Annotated[bool, typer.Option(
    "--accept-noisy", help="On a machine whose timings never settle (a shared runner): keep the medians of the "
                           "rounds so far instead of exiting 4; the result records settled: false and a note says so.")]


def thread_count(threads: Optional[int]) -> Optional[int]:
    """--threads: at least 1 and at most the logical CPUs this process may run on. More threads than
    that only wait on each other (ONNX Runtime's pool spins: 999 threads on 2 CPUs did not finish a
    squeezenet run in 5 minutes), so the figures would describe no real setting."""
    import os

    from dnnperf.errors import DnnperfError

    if threads is None:
        return None
    positive(threads, "--threads")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if threads > cpus:
        raise DnnperfError(f"--threads {threads}: this machine gives the process {cpus} logical CPU{'s' if cpus > 1 else ''} "
                           f"— pass 1..{cpus}, or leave --threads out for ONNX Runtime's default")
    return threads


def _unsettled_note(rounds: int, spread: float, why: str | None = None) -> str:
    what = f"; {why}" if why else ""
    return (f"measurements did not settle in {rounds} rounds (largest spread between rounds {spread:.0%}{what}): the "
            "figures are the medians so far (settled: false) — repeat on a quieter machine for figures that repeat")


def _knee_note(chosen: float, lo: float, hi: float) -> str:
    return (f"the cache size is uncertain on this machine: its bandwidth falls without a sharp cliff, so "
            f"memory.onchip_mb ({chosen:g} MB) could as well read {lo:g}-{hi:g} MB, and which layers count as "
            "in cache may change between calibrations (measured.cache_knee_range_mb; set memory.onchip_mb "
            "by hand to pin it)")


@command(app, "calibrate", kinds=("calibration",), default_format="yaml")
def calibrate(
    output: Output = "profiles/local.yaml",
    quick: Annotated[bool, typer.Option("--quick", help="A few seconds instead of about a minute.")] = False,
    threads: Threads = None,
    accept_noisy: AcceptNoisy = False,
    fmt: Format = None,
    quiet: Quiet = False,
):
    """Measure this machine through ONNX Runtime (needs dnnperf[measure]) and write a profile:
    peak GEMM throughput, bandwidth, per-op dispatch cost, per-family efficiency."""
    from dnnperf.measure import calibrate as run_calibrate, micro_models
    from dnnperf.measure.calibrate import caches_apart_note

    thread_count(threads)
    with progress(sum(mb.role != "probe" for mb in micro_models(True)), "calibrating", quiet) as tick:
        prof = run_calibrate(quick, threads, progress=tick, strict=not accept_noisy)
    m = prof["measured"]
    notes = [] if m["settled"] else [_unsettled_note(m["rounds"], m["spread_max"], m.get("unsettled"))]
    if m.get("cache_knee_range_mb"):
        notes.append(_knee_note(prof["memory"]["onchip_mb"], *m["cache_knee_range_mb"]))
    if m.get("caches_apart"):
        notes.append(caches_apart_note("this profile", prof["memory"]["onchip_mb"], m["cache_reported_mb"]))
    if m.get("int8_without_kernel"):
        notes.append(f"ONNX Runtime {m['onnxruntime']} has no integer product of the 8-bit pairing(s) "
                     f"{', '.join(m['int8_without_kernel'])} (data x weights): not timed, and int8_operands leaves "
                     "them out (a model of that pairing does not run on this release)")
    notes.append(f"wrote {output}: fp32 {prof['units'][0]['peak_tops']['fp32']} TOP/s, {prof['memory']['dram_gbs']} GB/s, "
                 f"dispatch {prof['launch_overhead_us']} us ({m['seconds']} s)")
    return Document("calibration", prof, notes=tuple(notes))


@command(app, "validate", kinds=("validate", "published"))
def validate(
    model: Annotated[Optional[str], typer.Argument(help="ONNX model (skeletons get random weights).")] = None,
    hw: HwOne = "profiles/local.yaml",
    published: Annotated[Optional[str], typer.Option(
        "--published", help="Instead of a model: a JSON file of published kernel times (e.g. "
                            "bench/data/deepbench-v100-t4.json); every kernel is estimated on --hw and compared.")] = None,
    worst: Annotated[int, typer.Option("--worst", help="With --published: how many of the worst kernels to list.")] = 10,
    batch: Batch = None,
    input_shape: InputShape = None,
    dim: Dim = None,
    value: Value = None,
    threads: Threads = None,
    phase: Annotated[Optional[str], typer.Option(
        "--phase", help="Decoders with a KV cache: prefill or decode, one step run and estimated.")] = None,
    prompt: Prompt = 512,
    context: Context = None,
    runs: Annotated[int, typer.Option("--runs", help="Timed runs (robust median).")] = 20,
    drift: Annotated[bool, typer.Option(
        "--drift/--no-drift", help="Re-time the calibration's anchor micro-benchmarks next to the model and "
                                   "estimate for the machine's speed now (a calibrated profile only); "
                                   "--no-drift: as calibrated.")] = True,
    accept_noisy: AcceptNoisy = False,
    retry_unsteady: Annotated[int, typer.Option(
        "--retry-unsteady", help="When an anchor micro-benchmark moved by more than 10% since calibration (the "
                                 "machine is not in the state it was calibrated in) or the timings did not settle, "
                                 "wait 20 s and measure again, up to this many times (0: never); the steadiest "
                                 "measurement is the one compared.")] = 2,
    fmt: Format = None,
    output: Output = None,
    quiet: Quiet = False,
):
    """Run the model in ONNX Runtime with profiling, map its kernels back to dnnperf's layers
    (fusions included) and print predicted vs measured per layer and for the model. With --phase
    prefill or decode: one step of a decoder with a KV cache. With --published FILE --hw NAME:
    compare estimates with published kernel times instead (no ONNX Runtime needed)."""
    from dnnperf.errors import DnnperfError
    from dnnperf.hardware import load_profile

    if published is not None:
        if model is not None:
            raise DnnperfError("validate takes a model or --published FILE, not both")
        from dnnperf.published import published_document

        positive(worst + 1, "--worst")
        return Document("published", published_document(published, load_profile(hw), worst))
    if model is None:
        raise DnnperfError("validate needs a model (dnnperf validate model.onnx --hw local) or --published FILE --hw NAME")
    from dnnperf.measure import validate as run_validate

    positive(runs, "--runs")
    thread_count(threads)
    profile = load_profile(hw)
    if profile.kind != "cpu":  # refused before ONNX Runtime spends a minute measuring
        raise DnnperfError(f"validate times the model with ONNX Runtime on this machine's CPU, and {profile.name} is a "
                           f"{profile.kind} profile: the two would not describe the same device — validate a profile "
                           "of this machine (dnnperf calibrate -o local.yaml, then --hw local.yaml), or check a GPU "
                           "profile against published kernel times (dnnperf validate --published FILE --hw NAME)")
    ov = overrides(batch, input_shape, dim, value=value)
    if phase is not None:
        from dnnperf.llm.phases import PhaseRequest, phase_overrides

        ov = phase_overrides(model, PhaseRequest(phase, prompt, context), ov)
    if retry_unsteady < 0:
        raise DnnperfError(f"--retry-unsteady must be 0 or more, got {retry_unsteady}")
    d = run_validate(model, profile, ov, threads, runs, strict=not accept_noisy, drift=drift,
                     steady_retries=retry_unsteady)
    notes = tuple(d.get("notes", ()))
    if not d["settled"]:
        notes = (_unsettled_note(d["rounds"], d["spread"]),) + notes
    return Document("validate", d, notes=notes)
