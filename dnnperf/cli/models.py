"""Commands on model files: inspect (workloads), analyze (the estimate), strip (weightless copy)."""


from typing import Annotated, List, Optional

import typer

from dnnperf.cli.app import (Batch, Context, Dim, Format, Fusion, Generate, HwList, InputShape, Out, Output, TensorParallel,
                             OverlapInput, Phase, Precision, Prompt, Quiet, Runtime, Top, Value, app, command,
                             overrides, positive, progress, settings, tp_needs_phase)
from dnnperf.documents import Document
from dnnperf.errors import DnnperfError

ModelArg = Annotated[str, typer.Argument(help="ONNX model file (weights optional: skeletons work).")]


@command(app, "inspect", kinds=("inspection",))
def inspect(model: ModelArg, batch: Batch = None, input_shape: InputShape = None, dim: Dim = None,
            value: Value = None, fmt: Format = None, output: Output = None, quiet: Quiet = False):
    """Per-layer workloads: MACs (1 MAC = 2 ops), other ops, bytes read (activations, weights), bytes
    written, arithmetic intensity, and totals. No hardware involved."""
    from dnnperf.api import inspect_model
    from dnnperf.documents import inspection_dict

    insp = inspect_model(model, overrides(batch, input_shape, dim, value=value))
    return Document("inspection", inspection_dict(insp), notes=tuple(insp.warnings))


@command(app, "analyze", kinds=("report", "reports", "totals"))
def analyze(
    models: Annotated[List[str], typer.Argument(help="One or more ONNX model files.")],
    hw: HwList = None,
    batch: Batch = None,
    input_shape: InputShape = None,
    dim: Dim = None,
    value: Value = None,
    precision: Precision = None,
    fusion: Fusion = "none",
    runtime: Runtime = "eager",
    overlap_input: OverlapInput = False,
    top: Top = 10,
    phase: Phase = None,
    prompt: Prompt = 512,
    context: Context = None,
    generate: Generate = 128,
    tp: TensorParallel = 1,
    totals_only: Annotated[bool, typer.Option("--totals-only", help="One row per model x profile (for many files).")] = False,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", help="Worker processes for many files (default: all cores).")] = None,
    fmt: Format = None,
    output: Output = None,
    quiet: Quiet = False,
):
    """Score every layer against a hardware profile: latency, loss breakdown, ranked bottlenecks
    with concrete fixes."""
    from dnnperf.batch import analyze_many
    from dnnperf.hardware import load_profiles

    positive(top, "--top")
    if jobs is not None:
        positive(jobs, "--jobs")
    specs = list(hw or ["v100"])
    ov = overrides(batch, input_shape, dim, strict=len(models) == 1, value=value)
    load_profiles(specs)  # validate profiles before any work
    st = settings(batch, precision, fusion, runtime, overlap_input)
    tp_needs_phase(tp, phase, "prefill, decode or both")
    if phase is not None:
        from dnnperf.llm import phase_report_dicts
        from dnnperf.llm.phases import PhaseRequest

        if len(models) != 1 or totals_only:
            raise DnnperfError("--phase analyses one decoder at a time (without --totals-only)")
        req = PhaseRequest(phase, prompt, context, generate, tp)
        dicts = phase_report_dicts(models[0], ov, specs, st, req, top)
        notes = [n for d in dicts for n in d.get("warnings", [])]
        if len(dicts) == 1:
            return Document("report", dicts[0], {"top": top}, notes=tuple(notes))
        return Document("reports", {"schema_version": "dnnperf-reports/1", "reports": dicts}, {"top": top}, tuple(notes))
    with progress(len(models), "analysing models", quiet) as tick:
        dicts, notes = analyze_many(list(models), ov, specs, st, totals_only, jobs, tick)
    if totals_only:
        return Document("totals", {"schema_version": "dnnperf-totals/1", "rows": dicts}, notes=tuple(notes))
    if len(dicts) == 1:
        return Document("report", dicts[0], {"top": top}, notes=tuple(notes))
    return Document("reports", {"schema_version": "dnnperf-reports/1", "reports": dicts}, {"top": top}, tuple(notes))


@command(app, "strip", kinds=("model",), no_output=True)
def strip(
    model: Annotated[str, typer.Argument(help="ONNX model with weights.")],
    output: Output = None,
    in_place: Annotated[bool, typer.Option("--in-place", help="Replace MODEL itself with its skeleton.")] = False,
    drop_metadata: Annotated[bool, typer.Option("--drop-metadata", help="Also remove doc strings and node metadata.")] = False,
    quiet: Quiet = False,
):
    """Write a weightless copy (dims and dtypes kept, payloads removed) that dnnperf analyses exactly
    like the original: share graphs in CI without shipping weights."""
    from dnnperf.load.weights import skeleton_of

    if in_place and output is not None:
        raise DnnperfError("pass either -o FILE or --in-place, not both")
    if not in_place and output is None:
        raise DnnperfError("strip needs -o FILE (or --in-place to replace the model itself)")
    target = model if in_place else output
    out = Out("strip", ("model",), "onnx", target, quiet, [] if in_place else [model])
    data, info = skeleton_of(model, drop_metadata)
    removed, external = info["weight_bytes_removed"], info["external_weights"]
    note = (f"wrote {target}: {info['output_bytes']:,} bytes (was {info['input_bytes']:,}; "
            + (f"{removed:,} weight bytes removed" if removed else
               "no weight payloads in the file" if external else "no weight payloads found: it was already a skeleton")
            + (f"; {external:,} weight(s), {info['external_weight_bytes']:,} bytes by their dims, were in external data "
               "files, which are never opened: the skeleton no longer refers to them)" if external else ")"))
    out.emit(Document("model", data, notes=(note,)))
    return None
