"""Commands for pipelines and shell scripts: compare, sweep, baseline, check."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from dnnperf.cli import (BatchOpt, DimOpt, Fmt, FmtOpt, Fusion, FusionOpt, OutOpt, PrecOpt, Precision, QuietOpt,
                         ShapeOpt, _emit,
                         _inspect_many, _models, _overrides, _run, app)
from dnnperf.errors import DnnperfError


def _parse_time(s: Optional[str]) -> Optional[float]:
    if s is None:
        return None
    txt = s.strip().lower()
    for suf, scale in (("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("s", 1.0)):
        if txt.endswith(suf):
            try:
                v = float(txt[: -len(suf)]) * scale
            except ValueError:
                break
            if v > 0:
                return v
            break
    raise DnnperfError(f"--max-latency expects a positive time like 5ms, 200us or 0.01s, got '{s}'")


def _parse_list(s: str, what: str, conv=int) -> list:
    out = []
    for part in s.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            out.append(conv(part))
        except ValueError:
            raise DnnperfError(f"{what}: '{part}' is not valid") from None
    if not out:
        raise DnnperfError(f"{what}: empty list")
    return out


@app.command()
def compare(
    model: str = typer.Argument(..., help="ONNX model file."),
    hw: List[str] = typer.Option(["all"], "--hw", help="Profiles: comma list, repeatable, or 'all'."),
    batch: Optional[int] = BatchOpt,
    input_shape: Optional[List[str]] = ShapeOpt,
    dim: Optional[List[str]] = DimOpt,
    precision: Optional[Precision] = PrecOpt,
    fusion: Fusion = FusionOpt,
    sort: str = typer.Option("latency", "--sort", help="latency|throughput|peak|fraction|cost|name"),
    max_latency: Optional[str] = typer.Option(None, "--max-latency", help="Requirement, e.g. 5ms: rank the targets that meet it."),
    min_throughput: Optional[float] = typer.Option(None, "--min-throughput", help="Requirement in inferences/s."),
    fmt: Fmt = FmtOpt,
    output: Optional[str] = OutOpt,
):
    """One row per hardware target (model parsed once): latency, throughput, achieved vs peak TOP/s,
    cost per million inferences, top cause and top bottleneck layer."""

    def body():
        from dnnperf.analysis import Settings
        from dnnperf.api import inspect_model
        from dnnperf.gate import compare as run_compare
        from dnnperf.hardware import load_profiles
        from dnnperf.render import csvfmt, markdown, table, to_json
        from dnnperf.render import units as u

        if min_throughput is not None and not min_throughput > 0:
            raise DnnperfError("--min-throughput must be > 0")
        profiles = load_profiles(hw)
        insp = inspect_model(model, _overrides(batch, input_shape, dim))
        settings = Settings(batch, precision.value if precision else None, fusion.value, False)
        d = run_compare(insp, profiles, settings, sort, _parse_time(max_latency), min_throughput)
        if fmt == Fmt.json:
            _emit(to_json(d), output)
            return
        if fmt == Fmt.csv:
            _emit(csvfmt.table(d["rows"], list(d["rows"][0])), output)
            return
        hdr = ["hardware", "latency", "throughput/s", "achieved TOP/s", "% of peak", "lanes busy", "$/1M inf",
               "top cause", "top bottleneck"]
        rows = [[r["hardware"], u.t(r["latency_s"]), f"{r['throughput_per_s']:.4g}",
                 f"{r['achieved_tops']:.3g} / {r['peak_tops']:g}", u.pct(r["fraction_of_peak"]),
                 u.pct(r["mean_occupancy"]),
                 "-" if r["cost_per_million_usd"] is None else f"{r['cost_per_million_usd']:.3g}",
                 r["top_cause"] + ("" if r["meets_requirement"] else " (misses)"), r["top_layer"] or "-"] for r in d["rows"]]
        title = f"{d['model']} across {len(rows)} targets (batch {insp.batch})"
        rec = d.get("recommendation")
        if fmt == Fmt.md or output:
            text = markdown.table(hdr, rows, title)
            if rec:
                text += f"\nRecommended: **{rec['chosen']}** ({rec.get('basis', '')}). {rec.get('note', '')}\n"
            _emit(text, output)
        else:
            con = table.console()
            table.simple(con, title, hdr, rows)
            if rec:
                con.print(f"recommended: {rec['chosen']} ({rec.get('basis', '')}). {rec.get('note', '')}", markup=False)
                for m in rec["misses"]:
                    con.print(f"  misses: {m['hardware']} {u.t(m['latency_s'])} (limited by {m['top_cause']})", markup=False)

    _run(body)


@app.command()
def sweep(
    model: str = typer.Argument(..., help="ONNX model file."),
    hw: str = typer.Option("v100", "--hw", help="One profile name or YAML path."),
    batch: str = typer.Option("1,2,4,8,16,32,64,128,256", "--batch", "-b", help="Comma list of batch sizes."),
    precision: str = typer.Option("model", "--precision", "-p", help="Comma list: model,fp32,fp16,bf16,int8..."),
    input_shape: Optional[List[str]] = ShapeOpt,
    dim: Optional[List[str]] = DimOpt,
    fusion: Fusion = FusionOpt,
    fmt: Fmt = FmtOpt,
    output: Optional[str] = OutOpt,
):
    """Latency, throughput, lane occupancy and % of peak per batch size (and precision), and the batch
    where starvation stops being the limiting cause."""

    def body():
        from dnnperf.gate import ModelSource, sweep as run_sweep
        from dnnperf.hardware import PRECISIONS, load_profile
        from dnnperf.render import csvfmt, markdown, table, to_json
        from dnnperf.render import units as u

        batches = _parse_list(batch, "--batch")
        if any(b < 1 for b in batches):
            raise DnnperfError("--batch values must be >= 1")
        precs = _parse_list(precision, "--precision", str)
        for p in precs:
            if p != "model" and p not in PRECISIONS:
                raise DnnperfError(f"--precision: unknown '{p}' (use model or {', '.join(PRECISIONS)})")
        profile = load_profile(hw)
        ov = _overrides(None, input_shape, dim)
        d = run_sweep(ModelSource(model), ov, profile, batches, [None if p == "model" else p for p in precs], fusion.value)
        if fmt == Fmt.json:
            _emit(to_json(d), output)
            return
        if fmt == Fmt.csv:
            _emit(csvfmt.table(d["rows"], list(d["rows"][0])), output)
            return
        hdr = ["precision", "batch", "latency", "throughput/s", "lanes busy", "TOP/s", "% of peak", "top cause"]
        rows = [[r["precision"], r["batch"], u.t(r["latency_s"]), f"{r['throughput_per_s']:.4g}", u.pct(r["mean_occupancy"]),
                 f"{r['achieved_tops']:.3g}", u.pct(r["fraction_of_peak"]), r["top_cause"]] for r in d["rows"]]
        stops = "; ".join(f"{p}: {'batch ' + str(b) if b else 'not within the swept range'}"
                          for p, b in d["starvation_ends_at_batch"].items())
        title = f"{d['model']} on {d['hardware']}: batch sweep"
        if fmt == Fmt.md or output:
            _emit(markdown.table(hdr, rows, title) + f"\nStarvation (idle lanes) drops below 10% of the latency at: {stops}\n", output)
        else:
            con = table.console()
            table.simple(con, title, hdr, rows)
            con.print(f"starvation (idle lanes) drops below 10% of the latency at: {stops}", markup=False)

    _run(body)


def _collect(models, hw, batch, input_shape, dim, precision, fusion, quiet):
    from dnnperf.analysis import Settings
    from dnnperf.hardware import expand_specs, load_profile

    ov = _overrides(batch, input_shape, dim)
    if len(models) > 1:  # one set of --dim/--input-shape serves several models
        from dataclasses import replace

        ov = replace(ov, strict=False)
    specs = expand_specs(hw)
    for s in specs:
        load_profile(s)  # validate before any work
    insps = _inspect_many(_models(models), ov, quiet)
    settings = Settings(batch, precision.value if precision else None, fusion.value, False)
    return [(m, i, s, settings, list(ov.dims)) for m, i in zip(models, insps) for s in specs]


@app.command()
def baseline(
    models: List[str] = typer.Argument(..., help="ONNX model files to record."),
    hw: List[str] = typer.Option(["v100"], "--hw", help="Profiles (repeatable, comma lists)."),
    batch: Optional[int] = BatchOpt,
    input_shape: Optional[List[str]] = ShapeOpt,
    dim: Optional[List[str]] = DimOpt,
    precision: Optional[Precision] = PrecOpt,
    fusion: Fusion = FusionOpt,
    output: str = typer.Option("dnnperf-baseline.json", "--output", "-o", help="Baseline file (written atomically)."),
    quiet: bool = QuietOpt,
):
    """Record estimated latency per model x profile x settings, with per-layer figures, for `check`."""

    def body():
        from dnnperf.gate import make_baseline
        from dnnperf.render import to_json

        data = make_baseline(_collect(models, hw, batch, input_shape, dim, precision, fusion, quiet))
        _emit(to_json(data), output)
        if not quiet:
            sys.stderr.write(f"wrote {output}: {len(data['entries'])} entries\n")

    _run(body)


@app.command()
def check(
    models: List[str] = typer.Argument(..., help="The models recorded in the baseline (matched by file name)."),
    baseline_path: str = typer.Option("dnnperf-baseline.json", "--baseline", help="Baseline JSON from `dnnperf baseline`."),
    max_regression: str = typer.Option("5%", "--max-regression", help="Tolerance: 5% or 0.05."),
    update: bool = typer.Option(False, "--update", help="Rewrite the baseline with the new estimates (exit 0)."),
    fmt: Fmt = FmtOpt,
    summary_file: Optional[str] = typer.Option(None, "--summary-file", help="Append a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)."),
    quiet: bool = QuietOpt,
):
    """CI gate: exit 0 when no estimate got slower than the tolerance, 1 when one did, 2 on bad input."""

    def body():
        from dnnperf.api import inspect_model
        from dnnperf.gate import check as run_check, make_baseline, read_baseline
        from dnnperf.files import atomic_write_bytes
        from dnnperf.ir import ShapeOverrides
        from dnnperf.render import to_json
        from dnnperf.render import units as u

        tol = _tolerance(max_regression)
        base = read_baseline(baseline_path)

        def insp_fn(path, settings, dims):
            # the recorded --dim pairs served every model of the baseline: symbols a model lacks are fine
            return inspect_model(path, ShapeOverrides(batch=settings.batch, dims=tuple(dims), strict=False))

        res = run_check(base, _models(models), tol, insp_fn)
        if update:
            items = []
            from dnnperf.gate import model_key

            by = {model_key(m): m for m in models}
            from dnnperf.analysis import Settings

            for e in base["entries"]:
                s = e["settings"]
                st = Settings(s.get("batch"), None if s.get("precision") in (None, "model") else s["precision"],
                              s.get("fusion", "none"), bool(s.get("overlap_input", False)))
                dims = [tuple(x) for x in s.get("dims", [])]
                items.append((by[e["model"]], insp_fn(by[e["model"]], st, dims), e["hardware"], st, dims))
            atomic_write_bytes(baseline_path, to_json(make_baseline(items)).encode())
            if not quiet:
                sys.stderr.write(f"updated {baseline_path}\n")
        md = _check_md(res)
        if summary_file:
            try:
                with open(summary_file, "a", encoding="utf-8") as fh:
                    fh.write(md)
            except OSError as exc:
                raise DnnperfError(f"cannot append to --summary-file '{summary_file}': {exc.strerror}") from None
        if fmt == Fmt.json:
            _emit(to_json(res), None)
        elif fmt == Fmt.md:
            _emit(md, None)
        else:
            for r in res["results"]:
                line = (f"{r['status'].upper():<6} {r['model']} on {r['hardware']}: {u.t(r['old_latency_s'])} -> "
                        f"{u.t(r['new_latency_s'])} ({'+' if (r['change'] or 0) >= 0 else ''}{(r['change'] or 0) * 100:.1f}%)")
                sys.stdout.write(line + "\n")
                for n in r["layers"][:10]:
                    sys.stdout.write(f"    {n['change']:<7} {n['layer']} ({n['op_type']}): {u.t(n['old_s'])} -> "
                                     f"{u.t(n['new_s'])}, cause {n['cause']}\n")
            sys.stdout.write(("PASSED" if res["passed"] else "FAILED") + f" (tolerance {tol * 100:g}%)\n")
        if not res["passed"] and not update:
            raise typer.Exit(1)

    _run(body)


def _tolerance(s: str) -> float:
    txt = s.strip()
    try:
        v = float(txt[:-1]) / 100 if txt.endswith("%") else float(txt)
    except ValueError:
        raise DnnperfError(f"--max-regression expects 5% or 0.05, got '{s}'") from None
    if not (0 <= v < 100):
        raise DnnperfError(f"--max-regression must be between 0% and 10000%, got '{s}'")
    return v


def _check_md(res: dict) -> str:
    from dnnperf.render import units as u

    lines = [f"### dnnperf latency gate: {'passed' if res['passed'] else 'FAILED'} "
             f"(tolerance {res['tolerance'] * 100:g}%)\n", "| model | hardware | baseline | now | change | status |",
             "|---|---|---|---|---|---|"]
    for r in res["results"]:
        ch = "n/a" if r["change"] is None else f"{r['change'] * 100:+.1f}%"
        lines.append(f"| {r['model']} | {r['hardware']} | {u.t(r['old_latency_s'])} | {u.t(r['new_latency_s'])} | {ch} | {r['status']} |")
    for r in res["results"]:
        if r["status"] == "slower" and r["layers"]:
            lines.append(f"\nLayers behind the regression of {r['model']} on {r['hardware']}:\n")
            for n in r["layers"][:10]:
                lines.append(f"- `{n['layer']}` ({n['op_type']}) {n['change']}: {u.t(n['old_s'])} -> {u.t(n['new_s'])}, cause `{n['cause']}`")
    return "\n".join(lines) + "\n\n"


@app.command()
def calibrate(
    output: str = typer.Option("profiles/local.yaml", "--output", "-o", help="Where to write the measured profile."),
    quick: bool = typer.Option(False, "--quick", help="About 15 s instead of about 60 s."),
    threads: Optional[int] = typer.Option(None, "--threads", help="ONNX Runtime intra-op threads (default: ORT's)."),
    quiet: bool = QuietOpt,
):
    """Measure this machine through ONNX Runtime (needs dnnperf[measure]) and write a profile:
    peak GEMM throughput, bandwidth, per-op dispatch cost, per-family efficiency."""

    def body():
        import yaml

        from dnnperf.files import atomic_write_bytes
        from dnnperf.measure import calibrate as run_calibrate, micro_models

        if threads is not None and threads < 1:
            raise DnnperfError("--threads must be >= 1")
        total = len(micro_models(True))
        if quiet or not sys.stderr.isatty():
            prof = run_calibrate(quick, threads)
        else:
            from rich.console import Console
            from rich.progress import Progress

            with Progress(console=Console(file=sys.stderr), transient=True) as p:
                task = p.add_task("calibrating", total=total)
                prof = run_calibrate(quick, threads, progress=lambda name: p.advance(task))
        text = "# Measured by `dnnperf calibrate`; see `measured:` for how.\n" + yaml.safe_dump(prof, sort_keys=False)
        atomic_write_bytes(output, text.encode("utf-8"))  # checks the folder, writes all or nothing
        if not quiet:
            sys.stderr.write(f"wrote {output}: fp32 {prof['units'][0]['peak_tops']['fp32']} TOP/s, "
                             f"{prof['memory']['dram_gbs']} GB/s, dispatch {prof['launch_overhead_us']} us "
                             f"({prof['measured']['seconds']} s)\n")

    _run(body)


@app.command()
def validate(
    model: str = typer.Argument(..., help="ONNX model (skeletons get random weights)."),
    hw: str = typer.Option("profiles/local.yaml", "--hw", help="A calibrated profile of this machine."),
    batch: Optional[int] = BatchOpt,
    input_shape: Optional[List[str]] = ShapeOpt,
    dim: Optional[List[str]] = DimOpt,
    threads: Optional[int] = typer.Option(None, "--threads", help="ONNX Runtime threads (use the calibration's)."),
    runs: int = typer.Option(20, "--runs", help="Timed runs (median)."),
    fmt: Fmt = FmtOpt,
    output: Optional[str] = OutOpt,
):
    """Run the model in ONNX Runtime with profiling, map its kernels back to dnnperf's layers
    (fusions included) and print predicted vs measured per layer and for the model."""

    def body():
        from dnnperf.hardware import load_profile
        from dnnperf.measure import validate as run_validate
        from dnnperf.render import table, to_json
        from dnnperf.render import units as u

        if runs < 1:
            raise DnnperfError("--runs must be >= 1")
        profile = load_profile(hw)
        d = run_validate(model, profile, _overrides(batch, input_shape, dim), threads, runs)
        if fmt == Fmt.json:
            _emit(to_json(d), output)
            return
        rows = sorted(d["layers"], key=lambda r: -(r["measured_s"] or 0))[:15]
        con = table.console()
        table.simple(con, f"{d['model']} on {d['hardware']}: predicted vs measured (ONNX Runtime, {d['threads']} threads)",
                     ["layer", "op", "predicted", "measured", "error"],
                     [[r["layer"][-48:], r["op_type"], u.t(r["predicted_s"]), u.t(r["measured_s"]),
                       "-" if r["error"] is None else f"{r['error'] * 100:+.0f}%"] for r in rows])
        con.print(f"model: predicted {u.t(d['predicted_s'])}, measured {u.t(d['measured_s'])}, "
                  f"error {d['error'] * 100:+.1f}%; measured top-5 inside predicted top-10: "
                  f"{d['top5_inside_predicted_top10']}; unmatched kernels: {len(d['kernels_unmatched'])}", markup=False)

    _run(body)


def _one_report(model, hw_spec, batch, input_shape, dim, precision, fusion):
    from dnnperf.analysis import Settings
    from dnnperf.api import analyze, inspect_model
    from dnnperf.hardware import load_profile

    insp = inspect_model(model, _overrides(batch, input_shape, dim))
    settings = Settings(batch, precision.value if precision else None, fusion.value, False)
    return insp, settings, analyze(insp, load_profile(hw_spec), settings)


@app.command()
def plot(
    model: str = typer.Argument(..., help="ONNX model file."),
    hw: str = typer.Option("v100", "--hw", help="Profile name or YAML path."),
    output: str = typer.Option("roofline.svg", "--output", "-o", help=".svg (no extra needed) or .png (needs dnnperf[plot])."),
    chart: str = typer.Option("roofline", "--chart", help="roofline | waterfall"),
    batch: Optional[int] = BatchOpt,
    input_shape: Optional[List[str]] = ShapeOpt,
    dim: Optional[List[str]] = DimOpt,
    precision: Optional[Precision] = PrecOpt,
    fusion: Fusion = FusionOpt,
):
    """Log-log roofline of the profile with every layer (sized by time, coloured by cause), or the
    loss waterfall from the time at quoted peak to the estimate."""

    def body():
        from dnnperf.api import report_dict
        from dnnperf.files import atomic_write_bytes
        from dnnperf.render import svg

        if chart not in ("roofline", "waterfall"):
            raise DnnperfError(f"--chart must be roofline or waterfall, got '{chart}'")
        low = output.lower()
        if not low.endswith((".svg", ".png")):
            raise DnnperfError(f"--output must end in .svg or .png, got '{output}'")
        _, _, rep = _one_report(model, hw, batch, input_shape, dim, precision, fusion)
        d = report_dict(rep)
        text = svg.roofline(d, svg.roofs_for(rep)) if chart == "roofline" else svg.waterfall(d)
        if low.endswith(".svg"):
            atomic_write_bytes(output, text.encode("utf-8"))
            return
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise DnnperfError('PNG output needs matplotlib: pip install "dnnperf[plot]" (or write .svg)') from None
        from dnnperf.render.png import save_png

        save_png(d, svg.roofs_for(rep), chart, output)

    _run(body)


@app.command()
def report(
    model: str = typer.Argument(..., help="ONNX model file."),
    hw: List[str] = typer.Option(["v100"], "--hw", help="First profile is the main one; the others are compared."),
    output: str = typer.Option("report.html", "--output", "-o", help="The self-contained HTML file."),
    batch: Optional[int] = BatchOpt,
    input_shape: Optional[List[str]] = ShapeOpt,
    dim: Optional[List[str]] = DimOpt,
    precision: Optional[Precision] = PrecOpt,
    fusion: Fusion = FusionOpt,
    top: int = typer.Option(15, "--top", "-n"),
):
    """One self-contained HTML file (no network, inline SVG/CSS): summary, roofline, loss waterfall,
    ranked bottlenecks with fixes, comparison across the requested profiles, settings."""

    def body():
        from dnnperf.api import analyze, report_dict
        from dnnperf.files import atomic_write_bytes
        from dnnperf.hardware import load_profiles
        from dnnperf.render import html, svg

        if top < 1:
            raise DnnperfError(f"--top must be >= 1, got {top}")
        profiles = load_profiles(hw)
        insp, settings, rep = _one_report(model, profiles[0].path or profiles[0].name, batch, input_shape, dim,
                                          precision, fusion)
        main = report_dict(rep)
        others = [report_dict(analyze(insp, p, settings)) for p in profiles[1:]]
        page = html.report(main, (svg.roofline(main, svg.roofs_for(rep)), svg.waterfall(main)),
                           [main] + others if others else None, top)
        atomic_write_bytes(output, page.encode("utf-8"))

    _run(body)


@app.command()
def lut(
    hw: str = typer.Option("v100", "--hw", help="Profile name or YAML path."),
    space: Optional[str] = typer.Option(None, "--space", help="Search space YAML (see README)."),
    from_model: Optional[str] = typer.Option(None, "--from", help="Emit the table for the layers of this model."),
    batch: Optional[int] = BatchOpt,
    dim: Optional[List[str]] = DimOpt,
    precision: Optional[Precision] = PrecOpt,
    fmt: Fmt = typer.Option(Fmt.csv, "--format", "-f", help="csv (default) or json."),
    output: Optional[str] = OutOpt,
):
    """Latency lookup table for NAS (FBNet/SqueezeNAS style): one row per layer configuration,
    indexed by `key` = op|cin|cout|k|s|res|e|b|prec."""

    def body():
        from dnnperf.design import KEY_DOC, lut_from_report, lut_space, read_space
        from dnnperf.hardware import load_profile
        from dnnperf.render import csvfmt, to_json

        if (space is None) == (from_model is None):
            raise DnnperfError("pass exactly one of --space SPACE.yaml or --from MODEL.onnx")
        profile = load_profile(hw)
        if space:
            rows = lut_space(read_space(space), profile)
        else:
            from dnnperf.analysis import Settings
            from dnnperf.api import analyze, inspect_model

            insp = inspect_model(from_model, _overrides(batch, None, dim))
            rows = lut_from_report(analyze(insp, profile, Settings(batch, precision.value if precision else None),
                                           with_fixes=False))
        if not rows:
            raise DnnperfError("the table is empty: no configuration (or layer) could be costed")
        if fmt == Fmt.json:
            _emit(to_json({"schema_version": "dnnperf-lut/1", "hardware": profile.name, "key": KEY_DOC if space else
                           "key = layer name", "rows": rows}), output)
        else:
            _emit(csvfmt.table(rows, list(rows[0])), output)

    _run(body)


@app.command()
def shapes(
    model: str = typer.Argument(..., help="ONNX model file."),
    hw: str = typer.Option("tpu-v1", "--hw", help="Profile name or YAML path."),
    span: str = typer.Option("12.5%", "--span", help="How far to look around each width."),
    batch: Optional[int] = BatchOpt,
    dim: Optional[List[str]] = DimOpt,
    precision: Optional[Precision] = PrecOpt,
    top: int = typer.Option(20, "--top", "-n"),
    fmt: Fmt = FmtOpt,
    output: Optional[str] = OutOpt,
):
    """For each layer, nearby channel counts / hidden sizes that estimate faster per MAC on this
    profile (tile fit, alignment, parallelism), ranked by gain."""

    def body():
        from dnnperf.analysis import Settings
        from dnnperf.api import analyze, inspect_model
        from dnnperf.design import shape_advice
        from dnnperf.hardware import load_profile
        from dnnperf.render import table, to_json
        from dnnperf.render import units as u

        sp = _tolerance(span)
        if not 0 < sp <= 1:
            raise DnnperfError("--span must be between 0% and 100%")
        if top < 1:
            raise DnnperfError(f"--top must be >= 1, got {top}")
        insp = inspect_model(model, _overrides(batch, None, dim))
        rep = analyze(insp, load_profile(hw), Settings(batch, precision.value if precision else None), with_fixes=False)
        rows = shape_advice(rep, sp)
        if fmt == Fmt.json:
            _emit(to_json({"schema_version": "dnnperf-shapes/1", "model": insp.model_name, "hardware": rep.hw.name,
                           "span": sp, "layers": rows}), output)
            return
        data = [[r["layer"][-48:], r["op_type"], u.t(r["latency_s"]), u.pct(r["tile_efficiency"]), r["text"]]
                for r in rows[:top]]
        table.simple(table.console(), f"{insp.model_name} on {rep.hw.name}: widths that fit the hardware better",
                     ["layer", "op", "time", "tile fit", "nearby widths (this layer only)"], data)

    _run(body)


@app.command()
def diff(
    model_a: str = typer.Argument(..., help="Baseline variant."),
    model_b: str = typer.Argument(..., help="New variant."),
    hw: str = typer.Option("v100", "--hw"),
    batch: Optional[int] = BatchOpt,
    dim: Optional[List[str]] = DimOpt,
    precision: Optional[Precision] = PrecOpt,
    fusion: Fusion = FusionOpt,
    top: int = typer.Option(20, "--top", "-n"),
    fmt: Fmt = FmtOpt,
    output: Optional[str] = OutOpt,
):
    """Layer-by-layer comparison of two variants (matched by name, then by position)."""

    def body():
        from dnnperf.analysis import Settings
        from dnnperf.api import analyze, inspect_model
        from dnnperf.design import diff as run_diff
        from dnnperf.hardware import load_profile
        from dnnperf.render import csvfmt, table, to_json
        from dnnperf.render import units as u

        profile = load_profile(hw)
        ov = _overrides(batch, None, dim)
        st = Settings(batch, precision.value if precision else None, fusion.value)
        ra = analyze(inspect_model(model_a, ov), profile, st, with_fixes=False)
        rb = analyze(inspect_model(model_b, ov), profile, st, with_fixes=False)
        d = run_diff(ra, rb)
        if fmt == Fmt.json:
            _emit(to_json(d), output)
            return
        if fmt == Fmt.csv:
            _emit(csvfmt.table(d["layers"], list(d["layers"][0])) if d["layers"] else "", output)
            return
        con = table.console()
        table.simple(con, f"{d['a']} -> {d['b']} on {d['hardware']}: {u.t(d['a_latency_s'])} -> {u.t(d['b_latency_s'])}",
                     ["layer (A / B)", "op", "A", "B", "delta", "matched by", "cause B"],
                     [[(r["layer_a"] or r["layer_b"])[-44:], r["op_type"], u.t(r["a_s"]), u.t(r["b_s"]),
                       ("+" if r["delta_s"] >= 0 else "-") + u.t(abs(r["delta_s"])), r["matched_by"], r["cause_b"] or "-"]
                      for r in d["layers"][:top]])

    _run(body)
