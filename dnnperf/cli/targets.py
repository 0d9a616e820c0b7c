"""Commands that compare hardware targets and settings: compare, sweep."""


from typing import Annotated, Optional

import typer

from dnnperf.cli.app import (Batch, Context, Dim, Format, Fusion, HwList, HwOne, InputShape, Output, OverlapInput, TensorParallel,
                             Phase, Precision, Prompt, Quiet, Runtime, Value, app, command, inspected, overrides, parse_list, tp_needs_phase,
                             parse_time, precision_value, settings)
from dnnperf.documents import Document
from dnnperf.errors import DnnperfError

ModelArg = Annotated[str, typer.Argument(help="ONNX model file.")]


@command(app, "compare", kinds=("compare",))
def compare(
    model: ModelArg,
    hw: HwList = None,
    batch: Batch = None,
    input_shape: InputShape = None,
    dim: Dim = None,
    value: Value = None,
    precision: Precision = None,
    fusion: Fusion = "none",
    runtime: Runtime = "eager",
    overlap_input: OverlapInput = False,
    sort: Annotated[str, typer.Option("--sort", help="latency|throughput|peak|fraction|cost|name")] = "latency",
    max_latency: Annotated[Optional[str], typer.Option("--max-latency", help="Requirement, e.g. 5ms: rank the targets that meet it.")] = None,
    min_throughput: Annotated[Optional[float], typer.Option("--min-throughput", help="Requirement in inferences/s.")] = None,
    phase: Phase = None,
    prompt: Prompt = 512,
    context: Context = None,
    tp: TensorParallel = 1,
    fmt: Format = None,
    output: Output = None,
    quiet: Quiet = False,
):
    """One row per hardware target (model parsed once): latency, throughput, achieved vs peak TOP/s,
    cost per million inferences, top cause and top bottleneck layer. With a requirement
    (--max-latency / --min-throughput), exits 1 when no target meets it. With --phase prefill or
    decode, a decoder's one step (a row's latency is then the time to first token, or per output token);
    with --tp N, that step split over N devices of each target (their collectives and their cost)."""
    from dnnperf.gate import compare as run_compare
    from dnnperf.hardware import load_profiles

    if min_throughput is not None and not 0 < min_throughput < float("inf"):
        raise DnnperfError(f"--min-throughput must be a positive number of inferences/s, got {min_throughput:g}")
    max_lat = parse_time(max_latency)
    profiles = load_profiles(list(hw or ["all"]))
    insp = inspected(model, overrides(batch, input_shape, dim, value=value), phase, prompt, context, tp)
    d = run_compare(insp, profiles, settings(batch, precision, fusion, runtime, overlap_input), sort, max_lat, min_throughput)
    rec = d.get("recommendation")
    code = 1 if rec is not None and rec["chosen"] is None else 0
    notes = tuple(insp.warnings) + tuple(d.pop("notes")) + tuple(f"skipped {x['hardware']}: {x['reason']}" for x in d["skipped"])
    d["warnings"] = list(dict.fromkeys(notes))  # what stderr says, for scripts reading the JSON
    return Document("compare", d, notes=notes), code


@command(app, "sweep", kinds=("sweep", "llm_sweep"))
def sweep(
    model: ModelArg,
    hw: HwOne = "v100",
    batch: Annotated[str, typer.Option("--batch", "-b", help="Batch sizes: 1,2,4 or 1..256 (powers of two) or 1,2,...,256.")] = "1,2,4,8,16,32,64,128,256",
    precision: Annotated[str, typer.Option("--precision", "-p", help="Comma list: model,fp32,fp16,bf16,int8...")] = "model",
    input_shape: InputShape = None,
    dim: Dim = None,
    value: Value = None,
    fusion: Fusion = "none",
    runtime: Runtime = "eager",
    overlap_input: OverlapInput = False,
    phase: Phase = None,
    prompt: Prompt = 512,
    context: Context = None,
    tp: TensorParallel = 1,
    fmt: Format = None,
    output: Output = None,
    quiet: Quiet = False,
):
    """Latency, throughput, lane occupancy and % of peak per batch size (and precision), and the batch
    where starvation stops being the limiting cause. With --phase decode (or prefill) on a decoder:
    tokens/s per batch, where decode turns compute-bound and where the KV cache stops fitting."""
    from dnnperf.gate import ModelSource, sweep as run_sweep
    from dnnperf.hardware import load_profile

    batches = parse_list(batch, "--batch")
    if any(b < 1 for b in batches):
        raise DnnperfError("--batch values must be >= 1")
    from dnnperf.ir import size_fits

    size_fits(max(batches, default=None), "--batch")
    tp_needs_phase(tp, phase)
    if phase is not None:
        from dnnperf.llm.phases import PhaseRequest, sweep_document

        precs = [precision_value(p) for p in parse_list(precision, "--precision", str)]
        if len(precs) != 1:
            raise DnnperfError("--phase sweeps one precision at a time")
        st = settings(None, None if precs[0] == "model" else precs[0], fusion, runtime, overlap_input)
        d = sweep_document(model, load_profile(hw), st, PhaseRequest(phase, prompt, context, tp=tp), batches,
                           overrides(None, input_shape, dim, value=value))
        return Document("llm_sweep", d)
    precs = [precision_value(p) for p in parse_list(precision, "--precision", str)]
    profile = load_profile(hw)
    ov = overrides(None, input_shape, dim, value=value)
    st = settings(None, None, fusion, runtime, overlap_input)
    d = run_sweep(ModelSource(model), ov, profile, batches, precs, st.fusion, runtime, overlap_input)
    return Document("sweep", d, notes=tuple(d.pop("notes", ())))
