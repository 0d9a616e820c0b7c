"""Design-space commands: lut (latency tables for NAS), shapes (widths that fit), diff (two variants)."""


from typing import Annotated, Optional

import typer

from dnnperf.cli.app import (Batch, Dim, Format, Fusion, HwOne, InputShape, Output, OverlapInput, Precision, Quiet,
                             Runtime, Top, Value, app, command, overrides, parse_fraction, positive, settings)
from dnnperf.documents import Document
from dnnperf.errors import DnnperfError


@command(app, "lut", kinds=("lut",), default_format="csv")
def lut(
    hw: HwOne = "v100",
    space: Annotated[Optional[str], typer.Option("--space", help="Search space YAML (see README).")] = None,
    from_model: Annotated[Optional[str], typer.Option("--from", help="Emit the table for the layers of this model.")] = None,
    batch: Batch = None,
    input_shape: InputShape = None,
    dim: Dim = None,
    value: Value = None,
    precision: Precision = None,
    runtime: Runtime = "eager",
    fmt: Format = None,
    output: Output = None,
    quiet: Quiet = False,
):
    """Latency lookup table for NAS (FBNet/SqueezeNAS style): one row per layer configuration,
    indexed by `key` = op|cin|cout|k|s|res|e|b|prec (CSV by default)."""
    from dnnperf.design import KEY_DOC, lut_from_report, lut_space, read_space
    from dnnperf.hardware import load_profile

    if (space is None) == (from_model is None):
        raise DnnperfError("pass exactly one of --space SPACE.yaml or --from MODEL.onnx")
    profile = load_profile(hw)
    notes: tuple = ()
    if space:
        found: list[str] = []
        rows = lut_space(read_space(space), profile, found, settings(None, None, "none", runtime).runtime)
        notes = tuple(found)
    else:
        from dnnperf.api import analyze, inspect_model

        insp = inspect_model(from_model, overrides(batch, input_shape, dim, value=value))
        notes = tuple(insp.warnings)
        rows = lut_from_report(analyze(insp, profile, settings(batch, precision, "none", runtime), with_fixes=False,
                                       what_if=False))
    if not rows:
        raise DnnperfError("the table is empty: no configuration (or layer) could be costed")
    return Document("lut", {"schema_version": "dnnperf-lut/1", "hardware": profile.name,
                            "key": KEY_DOC if space else "key = layer name", "rows": rows, "warnings": list(notes)},
                    notes=notes)


@command(app, "shapes", kinds=("shapes",))
def shapes(
    model: Annotated[str, typer.Argument(help="ONNX model file.")],
    hw: HwOne = "tpu-v1",
    span: Annotated[str, typer.Option("--span", help="How far to look around each width.")] = "12.5%",
    batch: Batch = None,
    input_shape: InputShape = None,
    dim: Dim = None,
    value: Value = None,
    precision: Precision = None,
    runtime: Runtime = "eager",
    top: Top = 20,
    fmt: Format = None,
    output: Output = None,
    quiet: Quiet = False,
):
    """For each layer, nearby channel counts / hidden sizes that estimate faster per MAC on this
    profile (tile fit, alignment, parallelism), ranked by gain."""
    from dnnperf.api import analyze, inspect_model
    from dnnperf.design import shape_advice
    from dnnperf.hardware import load_profile

    sp = parse_fraction(span, "--span")
    if not 0 < sp <= 1:
        raise DnnperfError("--span must be between 0% and 100%")
    positive(top, "--top")
    insp = inspect_model(model, overrides(batch, input_shape, dim, value=value))
    rep = analyze(insp, load_profile(hw), settings(batch, precision, "none", runtime), with_fixes=False, what_if=False)
    d = {"schema_version": "dnnperf-shapes/1", "model": insp.model_name, "hardware": rep.hw.name, "span": sp,
         "layers": shape_advice(rep, sp)}
    return Document("shapes", d, {"top": top}, notes=tuple(insp.warnings))


@command(app, "diff", kinds=("diff",))
def diff(
    model_a: Annotated[str, typer.Argument(help="Baseline variant.")],
    model_b: Annotated[str, typer.Argument(help="New variant.")],
    hw: HwOne = "v100",
    batch: Batch = None,
    input_shape: InputShape = None,
    dim: Dim = None,
    value: Value = None,
    precision: Precision = None,
    fusion: Fusion = "none",
    runtime: Runtime = "eager",
    overlap_input: OverlapInput = False,
    top: Top = 20,
    fmt: Format = None,
    output: Output = None,
    quiet: Quiet = False,
):
    """Layer-by-layer comparison of two variants (matched by name, then by position)."""
    from dnnperf.api import analyze, inspect_model
    from dnnperf.design import diff as run_diff
    from dnnperf.design import diff_note
    from dnnperf.hardware import load_profile

    positive(top, "--top")
    profile = load_profile(hw)
    ov = overrides(batch, input_shape, dim, value=value)
    st = settings(batch, precision, fusion, runtime, overlap_input)
    ia, ib = inspect_model(model_a, ov), inspect_model(model_b, ov)
    d = run_diff(analyze(ia, profile, st, with_fixes=False, what_if=False), analyze(ib, profile, st, with_fixes=False, what_if=False))
    note = diff_note(d)
    return Document("diff", d, {"top": top}, notes=tuple(ia.warnings) + tuple(ib.warnings) + ((note,) if note else ()))
