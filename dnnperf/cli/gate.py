"""The CI regression gate: baseline (record estimates), check (compare against them)."""


from typing import Annotated, List, Optional

import typer

from dnnperf.cli.app import (Batch, Context, Dim, Format, Fusion, HwList, InputShape, Output, OverlapInput, Phase,
                             Precision, Prompt, Quiet, Runtime, TensorParallel, Value, app, command, inspected, overrides, parse_fraction,
                             parse_time, progress, settings)
from dnnperf.documents import Document
from dnnperf.errors import DnnperfError

ModelsArg = Annotated[List[str], typer.Argument(help="ONNX model files (matched to the baseline by file name).")]


@command(app, "baseline", kinds=("baseline",), default_format="json")
def baseline(
    models: ModelsArg,
    hw: HwList = None,
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
    output: Output = "dnnperf-baseline.json",
    fmt: Format = None,
    quiet: Quiet = False,
):
    """Record estimated latency per model x profile x settings, with per-layer figures, for `check`.
    With --phase prefill or decode: a decoder's step (time to first token, or per output token); with
    --tp N, that step split over N devices (one device's layers, the step's time with its collectives)."""
    from dnnperf.gate import make_baseline
    from dnnperf.hardware import expand_specs, load_profile

    ov = overrides(batch, input_shape, dim, strict=len(models) == 1, value=value)
    specs = expand_specs(list(hw or ["v100"]))
    for s in specs:
        load_profile(s)  # validate before any work
    st = settings(batch, precision, fusion, runtime, overlap_input)
    insps = []
    with progress(len(models), "parsing models", quiet) as tick:
        for m in models:
            insps.append(inspected(m, ov, phase, prompt, context, tp))
            if tick:
                tick()
    items = [(m, i, s, st, ov) for m, i in zip(models, insps) for s in specs]
    room: list[str] = []
    step = None if phase is None else {"phase": phase, "prompt": prompt, "context": context, **({"tp": tp} if tp > 1 else {})}
    data = make_baseline(items, output, step, room)
    notes = [w for i in insps for w in i.warnings] + room + [f"wrote {output}: {len(data['entries'])} entries"]
    return Document("baseline", data, notes=tuple(notes))


@command(app, "check", kinds=("check",))
def check(
    models: ModelsArg,
    baseline_path: Annotated[str, typer.Option("--baseline", help="Baseline JSON from `dnnperf baseline`.")] = "dnnperf-baseline.json",
    max_regression: Annotated[str, typer.Option("--max-regression", help="Relative tolerance: 5% or 0.05.")] = "5%",
    abs_tolerance: Annotated[str, typer.Option("--abs-tolerance", help="Changes smaller than this (e.g. 5us) are never SLOWER/FASTER.")] = "0s",
    max_unscored: Annotated[int, typer.Option("--max-unscored", help="Nodes that may stay unscored (accept a known custom op).")] = 0,
    hw: HwList = None,
    update: Annotated[bool, typer.Option("--update", help="Rewrite the baseline with the new estimates (exit 0).")] = False,
    summary_file: Annotated[Optional[str], typer.Option("--summary-file", help="Append a Markdown summary (e.g. $GITHUB_STEP_SUMMARY).")] = None,
    fmt: Format = None,
    output: Output = None,
    quiet: Quiet = False,
):
    """CI gate: exit 0 when every estimate is within tolerance, fully scored and on an unchanged
    profile; 1 when one got slower, lost coverage or its profile changed; 2 on bad input. Checks
    the baseline entries of the models given (a subset is fine; --hw selects profiles)."""
    from dnnperf.api import inspect_model
    from dnnperf.files import atomic_write_bytes
    from dnnperf.gate import check as run_check, entry_inspection, entry_settings, make_baseline, model_key, read_baseline
    from dnnperf.hardware import expand_specs
    from dnnperf.render import render
    from dnnperf.render.fmt_json import to_json

    tol = parse_fraction(max_regression, "--max-regression")
    abs_s = 0.0 if abs_tolerance.strip() in ("0", "0s") else parse_time(abs_tolerance, "--abs-tolerance")
    if max_unscored < 0:
        raise DnnperfError(f"--max-unscored must be >= 0, got {max_unscored}")
    base = read_baseline(baseline_path)

    # 'all' selects every recorded profile; profiles named one by one must each be in the baseline
    every = not hw or any(part.strip() == "all" for h in hw for part in h.split(","))
    res = run_check(base, list(models), tol, inspect_model, baseline_path, abs_s, max_unscored,
                    None if every else expand_specs(list(hw)))
    notes: list[str] = [f"skipped (model not given or --hw not selected): {', '.join(res['skipped'])}"] if res["skipped"] else []
    if update:
        from dnnperf.gate import profile_from_entry

        by = {model_key(m): m for m in models}
        fresh = []
        for e in base["entries"]:
            if e["model"] not in by:
                continue
            st, ov = entry_settings(e)
            spec = profile_from_entry(e["hardware"], baseline_path).path if e["hardware"] not in expand_specs(["all"]) \
                else e["hardware"]
            item = (by[e["model"]], entry_inspection(e, by[e["model"]], ov, inspect_model), spec, st, ov)
            fresh += make_baseline([item], baseline_path, e["settings"].get("phase"))["entries"]
        kept = [e for e in base["entries"] if e["model"] not in by]
        entries = sorted(kept + fresh, key=lambda e: (e["model"], e["hardware"]))
        atomic_write_bytes(baseline_path, to_json({"schema_version": "dnnperf-baseline/2", "entries": entries}).encode())
        notes.append(f"updated {baseline_path}")
    doc = Document("check", res, notes=tuple(notes))
    if summary_file:
        md = render(doc, "md")
        try:
            with open(summary_file, "a", encoding="utf-8") as fh:
                fh.write(md if isinstance(md, str) else md.decode())
        except OSError as exc:
            raise DnnperfError(f"cannot append to --summary-file '{summary_file}': {exc.strerror}") from None
    return doc, (0 if res["passed"] or update else 1)
