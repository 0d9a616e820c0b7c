"""Pictures: plot (roofline / loss waterfall as SVG or PNG) and report (one self-contained HTML page)."""


from typing import Annotated

import typer

from dnnperf.cli.app import (Batch, Context, Dim, Format, Fusion, HwList, HwOne, InputShape, Output, OverlapInput,
                             Phase, TensorParallel, Precision, Prompt, Quiet, Runtime, Top, Value, app, command, inspected, overrides,
                             positive, settings, tp_needs_phase)
from dnnperf.documents import Document
from dnnperf.errors import DnnperfError

ModelArg = Annotated[str, typer.Argument(help="ONNX model file.")]


def _report_dict(insp, profile, st, full: bool = True):
    """The JSON report; ``full=False`` for a target the HTML page only compares (its totals, top cause
    and memory: no fixes nor fusion what-if)."""
    from dnnperf.api import analyze
    from dnnperf.documents import report_dict

    return report_dict(analyze(insp, profile, st, with_fixes=full, what_if=full))


@command(app, "plot", kinds=("chart",), default_format="svg")
def plot(
    model: ModelArg,
    hw: HwOne = "v100",
    output: Output = "roofline.svg",
    chart: Annotated[str, typer.Option("--chart", help="roofline | waterfall")] = "roofline",
    batch: Batch = None,
    input_shape: InputShape = None,
    dim: Dim = None,
    value: Value = None,
    precision: Precision = None,
    fusion: Fusion = "none",
    runtime: Runtime = "eager",
    overlap_input: OverlapInput = False,
    phase: Phase = None,
    prompt: Prompt = 512,
    context: Context = None,
    tp: TensorParallel = 1,
    fmt: Format = None,
    quiet: Quiet = False,
):
    """Log-log roofline of the profile with every layer (sized by time, coloured by cause), or the
    loss waterfall from the time at quoted peak to the estimate (.svg; .png needs dnnperf[plot]).
    With --phase prefill or decode: a decoder's step (with --tp, one device's layers of it)."""
    from dnnperf.hardware import load_profile

    if chart not in ("roofline", "waterfall"):
        raise DnnperfError(f"--chart must be roofline or waterfall, got '{chart}'")
    insp = inspected(model, overrides(batch, input_shape, dim, value=value), phase, prompt, context, tp)
    d = _report_dict(insp, load_profile(hw), settings(batch, precision, fusion, runtime, overlap_input))
    notes = tuple(insp.warnings) + ((f"--tp {tp}: the chart is one device's layers of the step (their share of the split "
                                     "layers, the replicated ones whole); the step's collectives are not drawn",)
                                    if tp > 1 else ())
    return Document("chart", {"report": d, "chart": chart}, notes=notes)


@command(app, "report", kinds=("html_report",), default_format="html")
def report(
    model: ModelArg,
    hw: HwList = None,
    output: Output = "report.html",
    batch: Batch = None,
    input_shape: InputShape = None,
    dim: Dim = None,
    value: Value = None,
    precision: Precision = None,
    fusion: Fusion = "none",
    runtime: Runtime = "eager",
    overlap_input: OverlapInput = False,
    top: Top = 15,
    phase: Phase = None,
    prompt: Prompt = 512,
    context: Context = None,
    tp: TensorParallel = 1,
    fmt: Format = None,
    quiet: Quiet = False,
):
    """One self-contained HTML file (no network, inline SVG/CSS): summary, roofline, loss waterfall,
    ranked bottlenecks with fixes, comparison across the requested profiles (first is the main one).
    With --phase prefill or decode: a decoder's step (with --tp, one device's share of it)."""
    from dnnperf.hardware import load_profiles

    positive(top, "--top")
    profiles = load_profiles(list(hw or ["v100"]))
    tp_needs_phase(tp, phase)
    if tp != 1 and len(profiles) > 1:
        raise DnnperfError("--tp with --phase takes one --hw: the page's comparison rows would be whole steps")
    ov = overrides(batch, input_shape, dim, value=value)
    insp = inspected(model, ov, phase, prompt, context)
    st = settings(batch, precision, fusion, runtime, overlap_input)
    if phase is None:
        reports = [_report_dict(insp, p, st, full=k == 0) for k, p in enumerate(profiles)]
    else:  # the main target's step as `analyze --phase` scores it, with its serving figures
        from dnnperf.documents import report_dict
        from dnnperf.llm import rounded
        from dnnperf.llm.phases import PhaseRequest, analyze_phases

        rep, llm = analyze_phases(model, profiles[0], st, PhaseRequest(phase, prompt, context, tp=tp), ov,
                                  strict_memory=False)
        reports = [dict(report_dict(rep), llm=rounded(llm))] + [_report_dict(insp, p, st, full=False) for p in profiles[1:]]
    notes = tuple(insp.warnings) + tuple(reports[0].get("warnings", ())) if phase is not None else tuple(insp.warnings)
    return Document("html_report", {"reports": reports}, {"top": top}, notes=tuple(dict.fromkeys(notes)))
