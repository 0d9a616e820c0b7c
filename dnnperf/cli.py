"""dnnperf command line: parse options, call the API, pick a renderer, set the exit code.

Exit codes: 0 ok; 1 the CI gate found a regression (`check`); 2 usage or input error (one line on
stderr, nothing written); 3 internal error (a bug: please report it with the command line).
Counting convention: 1 MAC = one multiply + one add = 2 ops; TOP/s counts 10^12 ops per second.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import List, Optional

import typer

from dnnperf.errors import DnnperfError

HELP = (
    "Explain why a DNN does not run at the quoted TOP/s: per-layer workloads, roofline, starvation, "
    "tile fit, launch and input-I/O rules, ranked bottlenecks with fixes.\n\n"
    "Convention: 1 MAC = one multiply + one add = 2 ops; TOP/s = 10^12 ops/s.\n\n"
    "Exit codes: 0 ok, 1 regression found by `check`, 2 usage/input error, 3 internal error."
)

app = typer.Typer(help=HELP, no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None)
hw_app = typer.Typer(help="List, show and document hardware profiles.", no_args_is_help=True)
app.add_typer(hw_app, name="hw")


class Fmt(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    md = "md"


class Fusion(str, Enum):
    none = "none"
    typical = "typical"


class Precision(str, Enum):
    fp32 = "fp32"
    tf32 = "tf32"
    fp16 = "fp16"
    bf16 = "bf16"
    int8 = "int8"
    fp8 = "fp8"


BatchOpt = typer.Option(None, "--batch", "-b", help="Batch size: sets the first dim of every model input.")
ShapeOpt = typer.Option(None, "--input-shape", help="NAME=1x3x224x224 for one input (repeatable).")
DimOpt = typer.Option(None, "--dim", help="SYMBOL=VALUE for a symbolic dim, e.g. sequence_length=128 (repeatable).")
FmtOpt = typer.Option(Fmt.table, "--format", "-f", help="Output format: table (people) or json/csv/md (scripts).")
OutOpt = typer.Option(None, "--output", "-o", help="Write the output to this file (atomically) instead of stdout.")
QuietOpt = typer.Option(False, "--quiet", "-q", help="No progress or notes on stderr.")
PrecOpt = typer.Option(None, "--precision", "-p", help="What-if precision (default: the model's dtypes).")
FusionOpt = typer.Option(Fusion.none, "--fusion", help="none: every node is a kernel; typical: what ORT/TensorRT fuse.")


# --------------------------------------------------------------------------------------------
# helpers


def _fail(msg: str, code: int = 2):
    sys.stderr.write(f"dnnperf: error: {' '.join(str(msg).split())}\n")
    raise typer.Exit(code)


def _overrides(batch, input_shape, dim):
    from dnnperf.ir import ShapeOverrides

    if batch is not None and batch < 1:
        raise DnnperfError(f"--batch must be >= 1, got {batch}")
    shapes = []
    for s in input_shape or []:
        if "=" not in s:
            raise DnnperfError(f"--input-shape expects NAME=1x3x224x224, got '{s}'")
        name, dims = s.rsplit("=", 1)
        try:
            vals = tuple(int(x) for x in dims.lower().replace(",", "x").split("x") if x)
        except ValueError:
            raise DnnperfError(f"--input-shape {s}: dims must be integers separated by 'x'") from None
        if not vals or any(v < 1 for v in vals):
            raise DnnperfError(f"--input-shape {s}: every dim must be >= 1")
        shapes.append((name, vals))
    dims = []
    for s in dim or []:
        if "=" not in s:
            raise DnnperfError(f"--dim expects SYMBOL=VALUE, got '{s}'")
        name, v = s.rsplit("=", 1)
        try:
            iv = int(v)
        except ValueError:
            raise DnnperfError(f"--dim {s}: value must be an integer") from None
        if iv < 1:
            raise DnnperfError(f"--dim {s}: value must be >= 1")
        dims.append((name, iv))
    return ShapeOverrides(batch=batch, input_shapes=tuple(shapes), dims=tuple(dims))


def _emit(text: str, output: Optional[str]) -> None:
    if output:
        from dnnperf.files import atomic_write_bytes

        atomic_write_bytes(output, text.encode("utf-8"))
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _run(fn):
    """Run a command body with the exit-code contract: 2 for bad input, 3 for bugs, no traceback."""
    try:
        return fn()
    except DnnperfError as exc:
        _fail(str(exc), exc.exit_code)
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        sys.stderr.write("dnnperf: interrupted\n")
        raise typer.Exit(130) from None
    except MemoryError:
        _fail("out of memory while reading the input — is it a real model/profile?", 2)
    except RecursionError:
        _fail("input nests too deeply to process", 2)
    except BrokenPipeError:
        raise typer.Exit(0) from None
    except Exception as exc:  # a bug: still one line, never a traceback
        if os.environ.get("DNNPERF_DEBUG"):
            raise
        _fail(f"internal error ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}) — "
              "please report it with the command line (DNNPERF_DEBUG=1 shows the traceback)", 3)


def _models(models: List[str]) -> List[str]:
    if not models:
        raise DnnperfError("no model given: pass one or more .onnx files")
    return models


def _inspect_many(models, ov, quiet):
    from dnnperf.api import inspect_model

    out = []
    if len(models) > 3 and not quiet and sys.stderr.isatty():
        from rich.progress import Progress

        with Progress(transient=True) as prog:
            task = prog.add_task("parsing models", total=len(models))
            for m in models:
                out.append(inspect_model(m, ov))
                prog.advance(task)
    else:
        for m in models:
            out.append(inspect_model(m, ov))
    return out


# --------------------------------------------------------------------------------------------
# inspect / analyze / strip


@app.command()
def inspect(
    model: str = typer.Argument(..., help="ONNX model file (weights optional: skeletons work)."),
    batch: Optional[int] = BatchOpt,
    input_shape: Optional[List[str]] = ShapeOpt,
    dim: Optional[List[str]] = DimOpt,
    fmt: Fmt = FmtOpt,
    output: Optional[str] = OutOpt,
    quiet: bool = QuietOpt,
):
    """Per-layer workloads: MACs (1 MAC = 2 ops), other ops, bytes read (activations, weights), bytes
    written, arithmetic intensity, and totals. No hardware involved."""

    def body():
        from dnnperf.api import inspect_model, inspection_dict
        from dnnperf.render import csvfmt, markdown, table, to_json

        insp = inspect_model(model, _overrides(batch, input_shape, dim))
        d = inspection_dict(insp)
        if fmt == Fmt.json:
            _emit(to_json(d), output)
        elif fmt == Fmt.csv:
            _emit(csvfmt.inspection(d), output)
        elif fmt == Fmt.md:
            _emit(markdown.inspection(d), output)
        else:
            if output:
                _emit(markdown.inspection(d), output)
            else:
                table.inspection(table.console(), d)

    _run(body)


@app.command()
def analyze(
    models: List[str] = typer.Argument(..., help="One or more ONNX model files."),
    hw: List[str] = typer.Option(["v100"], "--hw", help="Profile name or YAML path; comma lists and 'all' work."),
    batch: Optional[int] = BatchOpt,
    input_shape: Optional[List[str]] = ShapeOpt,
    dim: Optional[List[str]] = DimOpt,
    precision: Optional[Precision] = PrecOpt,
    fusion: Fusion = FusionOpt,
    overlap_input: bool = typer.Option(False, "--overlap-input", help="Assume the next input is prefetched during compute."),
    top: int = typer.Option(10, "--top", "-n", help="How many bottleneck layers to show."),
    totals_only: bool = typer.Option(False, "--totals-only", help="One row per model x profile (for sweeps over many files)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Worker processes for many files (default: all cores)."),
    fmt: Fmt = FmtOpt,
    output: Optional[str] = OutOpt,
    quiet: bool = QuietOpt,
):
    """Score every layer against a hardware profile: latency, loss breakdown, ranked bottlenecks
    with concrete fixes."""

    def body():
        from dnnperf.analysis import Settings
        from dnnperf.batch import analyze_many
        from dnnperf.hardware import load_profiles
        from dnnperf.render import csvfmt, markdown, table, to_json

        if top < 1:
            raise DnnperfError(f"--top must be >= 1, got {top}")
        if jobs is not None and jobs < 1:
            raise DnnperfError(f"--jobs must be >= 1, got {jobs}")
        ov = _overrides(batch, input_shape, dim)
        load_profiles(hw)  # validate profiles before any work
        paths = _models(models)
        if len(paths) > 1:
            from dataclasses import replace

            ov = replace(ov, strict=False)
        settings = Settings(batch, precision.value if precision else None, fusion.value, overlap_input)
        dicts = _with_progress(lambda tick: analyze_many(paths, ov, list(hw), settings, totals_only, jobs, tick),
                               len(paths), quiet)
        if totals_only:
            if fmt == Fmt.csv:
                _emit(csvfmt.table(dicts, list(dicts[0])), output)
            elif fmt == Fmt.json:
                _emit(to_json({"schema_version": "dnnperf-totals/1", "rows": dicts}), output)
            else:
                from dnnperf.render import units as u

                hdr = ["model", "hardware", "latency", "TOP/s", "% of peak", "top cause"]
                rows = [[d["model"], d["hardware"], u.t(d["latency_s"]), f"{d['achieved_tops']:.3g}",
                         u.pct(d["fraction_of_peak"]), d["top_cause"]] for d in dicts]
                if fmt == Fmt.md or output:
                    _emit(markdown.table(hdr, rows, "dnnperf totals"), output)
                else:
                    table.simple(table.console(), "dnnperf totals", hdr, rows)
            return
        if fmt == Fmt.json:
            _emit(to_json(dicts[0] if len(dicts) == 1 else {"schema_version": "dnnperf-reports/1", "reports": dicts}), output)
        elif fmt == Fmt.csv:
            _emit(csvfmt.reports(dicts), output)
        elif fmt == Fmt.md or output:
            _emit("".join(markdown.report(d, top) for d in dicts), output)
        else:
            con = table.console()
            for k, d in enumerate(dicts):
                if k:
                    con.print("")
                table.report(con, d, top)

    _run(body)


def _with_progress(fn, total: int, quiet: bool):
    """Run ``fn(tick)`` with a rich progress bar on stderr when there are many files."""
    if total <= 3 or quiet or not sys.stderr.isatty():
        return fn(None)
    from rich.progress import Progress

    with Progress(transient=True, console=__import__("rich.console").console.Console(file=sys.stderr)) as prog:
        task = prog.add_task("analysing models", total=total)
        return fn(lambda: prog.advance(task))


@app.command()
def strip(
    model: str = typer.Argument(..., help="ONNX model with weights."),
    output: str = typer.Option(..., "--output", "-o", help="Where to write the weightless skeleton."),
):
    """Write a weightless copy (dims and dtypes kept, payloads removed) that dnnperf analyses exactly
    like the original: share graphs in CI without shipping weights."""

    def body():
        from dnnperf.load.weights import strip_file

        info = strip_file(model, output)
        sys.stderr.write(f"wrote {output}: {info['output_bytes']:,} bytes (was {info['input_bytes']:,}; "
                         f"{info['weight_bytes_removed']:,} weight bytes removed)\n")

    _run(body)


# --------------------------------------------------------------------------------------------
# hw


@hw_app.command("list")
def hw_list(fmt: Fmt = FmtOpt):
    """Shipped profiles with their quoted peak, bandwidth and lanes."""

    def body():
        from dnnperf.hardware import load_profile, shipped_names
        from dnnperf.render import csvfmt, markdown, table, to_json

        rows = []
        for n in shipped_names():
            p = load_profile(n)
            rows.append({"name": n, "title": p.title, "kind": p.kind, "peak_tops": p.headline_tops,
                         "peak_precision": p.headline_precision, "dram_gbs": p.dram_gbs, "lanes": p.lanes,
                         "launch_overhead_us": p.launch_overhead_us, "price_per_hour": p.price_per_hour})
        if fmt == Fmt.json:
            _emit(to_json(rows), None)
        elif fmt == Fmt.csv:
            _emit(csvfmt.table(rows, list(rows[0])), None)
        else:
            hdr = ["name", "title", "peak", "DRAM", "lanes", "launch"]
            data = [[r["name"], r["title"], f"{r['peak_tops']:g} TOP/s {r['peak_precision']}", f"{r['dram_gbs']:g} GB/s",
                     f"{r['lanes']:,}", f"{r['launch_overhead_us']:g} us"] for r in rows]
            if fmt == Fmt.md:
                _emit(markdown.table(hdr, data, "Hardware profiles"), None)
            else:
                table.simple(table.console(), "Hardware profiles", hdr, data)

    _run(body)


@hw_app.command("show")
def hw_show(name: str = typer.Argument(..., help="Profile name or YAML path.")):
    """Print a profile's YAML (with its sources and unverified fields)."""

    def body():
        from dnnperf.hardware import load_profile

        p = load_profile(name)
        with open(p.path, encoding="utf-8") as fh:
            sys.stdout.write(fh.read())

    _run(body)


@hw_app.command("schema")
def hw_schema():
    """Document the profile schema (every key, whether it is required, what it means)."""

    def body():
        from dnnperf.hardware import SCHEMA

        for k, (typ, req, desc) in SCHEMA.items():
            sys.stdout.write(f"{k:<26} {typ:<10} {'required' if req else 'optional':<9} {desc}\n")

    _run(body)


def main() -> None:
    try:
        app(prog_name="dnnperf")
    except SystemExit as exc:
        code = exc.code
        if code not in (None, 0, 1, 2, 3, 130):
            code = 2
        sys.exit(code)


from dnnperf import cli_more  # noqa: E402,F401  (registers compare/sweep/baseline/check)
