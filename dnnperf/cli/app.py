"""The CLI's leaf module: the app object, the options every command shares, and the ``command``
decorator that carries the exit-code contract and the output plumbing for every command.

A command body parses its own options, calls the library and returns a ``Document`` (or
``(Document, exit_code)``); the decorator checks ``-f``/``-o`` before any work, renders the
document, writes it to stdout or atomically to ``-o`` (never over one of the command's inputs),
and prints notes to stderr unless ``-q``. Command modules import this one; nothing imports them
back but the package's ``__init__``.

Why one module this long: the shared option declarations, the output plumbing and the decorator
that applies both are one contract; split, a command would import its options from one place and
their meaning from another.

Exit codes: 0 ok; 1 a gate or requirement failed (`check`, `compare` with a requirement nothing
meets); 2 usage or input error (one line on stderr, nothing written); 3 internal error (a bug); 4 the
machine was too busy to measure on (`calibrate`, `validate`: try again when it is quieter).
"""


import functools
import os
import sys
from contextlib import contextmanager
from dataclasses import replace
from typing import Annotated, List, Optional

import typer

from dnnperf.errors import DnnperfError

HELP = (
    "Explain why a DNN does not run at the quoted TOP/s: per-layer workloads, roofline, starvation, "
    "tile fit, launch and input-I/O rules, ranked bottlenecks with fixes.\n\n"
    "Convention: 1 MAC = one multiply + one add = 2 ops; TOP/s = 10^12 ops/s.\n\n"
    "Exit codes: 0 ok, 1 a gate or requirement failed, 2 usage/input error, 3 internal error, "
    "4 machine too busy to measure on."
)

app = typer.Typer(help=HELP, no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None)
hw_app = typer.Typer(help="List, show and document hardware profiles.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(hw_app, name="hw")
llm_app = typer.Typer(help="Large language models: weightless decoder skeletons of any configuration.",
                      no_args_is_help=True, rich_markup_mode=None)
app.add_typer(llm_app, name="llm")

# -- options shared by the commands (one declaration each; the same meaning everywhere) ----------

Batch = Annotated[Optional[int], typer.Option("--batch", "-b", help="Batch size: sets the first dim of every model input.")]
InputShape = Annotated[Optional[List[str]], typer.Option("--input-shape", help="NAME=1x3x224x224 for one input (repeatable).")]
Dim = Annotated[Optional[List[str]], typer.Option(
    "--dim", help="SYMBOL=VALUE for a symbolic dim, e.g. sequence_length=128 (repeatable).")]
Value = Annotated[Optional[List[str]], typer.Option(
    "--value", help="NAME=V[,V...]: the value of a model input that shapes are computed from (a window's size, "
                    "Range's limits, a crop's target shape), as the runtime would receive it (repeatable).")]
OverlapInput = Annotated[bool, typer.Option("--overlap-input", help="Assume the next input is prefetched during compute.")]
Format = Annotated[Optional[str], typer.Option(
    "--format", "-f", help="table (people), json, csv, md, html... (default: from the -o extension, else table).")]
Output = Annotated[Optional[str], typer.Option(
    "--output", "-o", help="Write to this file (atomically; never over an input) instead of stdout.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress or notes on stderr.")]
Precision = Annotated[Optional[str], typer.Option(
    "--precision", "-p", help="What-if precision: fp32, tf32, fp16, bf16, fp8, int8, fp4, int4, or best (the fastest the "
                              "device runs); default: the model's dtypes. Precisions a device lacks are refused.")]
Fusion = Annotated[str, typer.Option("--fusion", help="none: every node is a kernel; typical: what ORT/TensorRT fuse.")]
Top = Annotated[int, typer.Option("--top", "-n", help="How many rows (bottleneck layers) to show.")]
Phase = Annotated[Optional[str], typer.Option(
    "--phase", help="Decoders with a KV cache: prefill (time to first token), decode (time per output token) "
                    "or both (and the end-to-end time of a request).")]
Prompt = Annotated[int, typer.Option("--prompt", help="With --phase: prompt tokens prefilled.")]
Context = Annotated[Optional[int], typer.Option(
    "--context", help="With --phase decode: tokens already in the KV cache (default: --prompt).")]
Generate = Annotated[int, typer.Option("--generate", help="With --phase both: output tokens generated.")]
TensorParallel = Annotated[int, typer.Option(
    "--tp", help="With --phase: tensor-parallel devices the decoder is split over (heads and MLP columns, "
                 "Megatron-style); figures are one device's plus the step's all-reduces over the profile's "
                 "interconnect.")]
Runtime = Annotated[str, typer.Option(
    "--runtime", help="GPU runtime the estimate describes: eager (a framework launching each kernel from the host; "
                      "default), graph (a captured CUDA graph), tensorrt (graph + TensorRT's fusions, no layout "
                      "reorders; on a Jetson-class GPU each kernel still waits for its launch, so it can be slower "
                      "than graph).")]
HwList = Annotated[Optional[List[str]], typer.Option("--hw", help="Profile name or YAML path; comma lists and 'all' work.")]
HwOne = Annotated[str, typer.Option("--hw", help="Profile name or YAML path.")]


# -- parsing helpers --------------------------------------------------------------------------


def _assignment(s: str, flag: str, form: str) -> tuple[str, str]:
    """``NAME=REST`` -> (NAME, REST), split at the last '='; a one-line error naming the form otherwise."""
    if "=" not in s:
        raise DnnperfError(f"{flag} expects {form}, got '{s}'")
    name, rest = s.rsplit("=", 1)
    return name, rest


def tp_needs_phase(tp: int, phase: str | None, phases: str = "prefill or decode") -> None:
    """Refuse --tp without --phase: it splits a decoder's step (``phases``: those the command takes)."""
    if tp != 1 and phase is None:
        raise DnnperfError(f"--tp splits a decoder's step over devices: it needs --phase {phases}")


def inspected(model: str, ov, phase: str | None, prompt: int = 512, context: int | None = None, tp: int = 1):
    """The model's inspection, or with --phase prefill|decode its decoder step (``phase_inspection``; with
    --tp N one device's share of it): what compare, baseline, report and plot score."""
    from dnnperf.api import inspect_model

    if phase is None:
        tp_needs_phase(tp, phase)
        return inspect_model(model, ov)
    from dnnperf.llm.phases import PhaseRequest, phase_inspection

    return phase_inspection(model, PhaseRequest(phase, prompt, context, tp=tp), ov)


def overrides(batch, input_shape, dim, strict: bool = True, value=None):
    """--batch / --input-shape / --dim / --value -> ShapeOverrides (each value checked, one-line errors)."""
    from dnnperf.ir import ShapeOverrides, size_fits

    if batch is not None and batch < 1:
        raise DnnperfError(f"--batch must be >= 1, got {batch}")
    size_fits(batch, "--batch")
    shapes = []
    for s in input_shape or []:
        name, dims = _assignment(s, "--input-shape", "NAME=1x3x224x224")
        try:
            vals = tuple(int(x) for x in dims.lower().replace(",", "x").split("x") if x)
        except ValueError:
            raise DnnperfError(f"--input-shape {s}: dims must be integers separated by 'x'") from None
        if not vals or any(v < 1 for v in vals):
            raise DnnperfError(f"--input-shape {s}: every dim must be >= 1")
        for v in vals:
            size_fits(v, f"--input-shape {s}: a dim")
        shapes.append((name, vals))
    dims = []
    for s in dim or []:
        name, v = _assignment(s, "--dim", "SYMBOL=VALUE")
        try:
            iv = int(v)
        except ValueError:
            raise DnnperfError(f"--dim {s}: value must be an integer") from None
        if iv < 0:
            raise DnnperfError(f"--dim {s}: value must be >= 0 (0 only for an empty cache or sequence)")
        size_fits(iv, f"--dim {s}: the value")
        dims.append((name, iv))
    values = []
    for s in value or []:
        name, v = _assignment(s, "--value", "NAME=V[,V...]")
        try:
            vals = tuple(float(x) for x in v.split(",") if x.strip())
        except ValueError:
            raise DnnperfError(f"--value {s}: values must be numbers separated by commas") from None
        if not name or not vals:
            raise DnnperfError(f"--value {s}: give the input's name and at least one value")
        values.append((name, vals))
    return ShapeOverrides(batch=batch, input_shapes=_once(shapes, "--input-shape"), dims=_once(dims, "--dim"),
                          values=_once(values, "--value"), strict=strict)


def _once(pairs: list, flag: str) -> tuple:
    """(name, value) pairs of a repeatable flag with one value per name: a name given twice with
    different values is refused (which one was meant?), the same value twice counts once."""
    def show(x) -> str:  # as the flag spells it: 1x3x224x224, 1,2,3 or 128
        if flag == "--input-shape":
            return "x".join(map(str, x))
        return ",".join(f"{y:g}" for y in x) if flag == "--value" else str(x)

    seen: dict = {}
    for name, v in pairs:
        if name in seen and seen[name] != v:
            raise DnnperfError(f"{flag} gives '{name}' twice ({show(seen[name])} and {show(v)}) — keep one")
        seen[name] = v
    return tuple(seen.items())


def fusion_value(fusion: str) -> str:
    if fusion not in ("none", "typical"):
        raise DnnperfError(f"--fusion must be 'none' or 'typical', got '{fusion}'")
    return fusion


def settings(batch, precision, fusion, runtime: str = "eager", overlap_input: bool = False):
    """Settings from the shared options (checked). TensorRT fuses like ``--fusion typical``."""
    from dnnperf.scoring import RUNTIMES, Settings

    if runtime not in RUNTIMES:
        raise DnnperfError(f"--runtime must be one of {', '.join(RUNTIMES)}, got '{runtime}'")
    f = fusion_value(fusion)
    if runtime == "tensorrt":
        f = "typical"
    return Settings(batch, precision_value(precision), f, overlap_input, runtime)


def precision_value(precision: Optional[str]) -> Optional[str]:
    """A what-if precision name, "best", or None for the model's own dtypes (`model`). Whether the
    device runs it is checked per profile (dnnperf.precision)."""
    from dnnperf.hardware import PRECISIONS

    if precision is None or precision == "model":
        return None
    if precision != "best" and precision not in PRECISIONS:
        raise DnnperfError(f"--precision: unknown '{precision}' (use model, best or {', '.join(PRECISIONS)})")
    return precision


def positive(value: int, flag: str) -> int:
    if value < 1:
        raise DnnperfError(f"{flag} must be >= 1, got {value}")
    return value


def parse_list(s: str, what: str, conv=int) -> list:
    """'1,2,4' -> [1, 2, 4]; a range 'A..B' (powers of two, e.g. 1..256) and 'A,B,...,C' (doubling
    from the last explicit value) are accepted for batch lists."""
    out: list = []
    parts = [p.strip() for p in s.split(",")]
    i = 0
    while i < len(parts):
        part = parts[i]
        i += 1
        if not part:
            continue
        if conv is int and (part == "..." or ".." in part):
            lo, hi = (part.split("..") + [""])[:2] if part != "..." else ("", "")
            if part == "...":
                if not out or i >= len(parts):
                    raise DnnperfError(f"{what}: '...' needs a value before and after it (e.g. 1,2,4,...,256)")
                lo_v, hi_v = out[-1], _int(parts[i], what)
                i += 1
            else:
                lo_v, hi_v = _int(lo, what), _int(hi, what)
            if lo_v < 1 or hi_v < lo_v:
                raise DnnperfError(f"{what}: range {lo_v}..{hi_v} must go up from 1 or more")
            v = lo_v * 2 if part == "..." else lo_v
            while v <= hi_v:
                out.append(v)
                v *= 2
            if out[-1] != hi_v:
                out.append(hi_v)
            continue
        try:
            out.append(conv(part))
        except ValueError:
            raise DnnperfError(f"{what}: '{part}' is not valid") from None
    if not out:
        raise DnnperfError(f"{what}: empty list")
    return list(dict.fromkeys(out))


def _int(s: str, what: str) -> int:
    try:
        return int(s)
    except ValueError:
        raise DnnperfError(f"{what}: '{s}' is not a whole number") from None


def parse_time(s: Optional[str], flag: str = "--max-latency") -> Optional[float]:
    if s is None:
        return None
    txt = s.strip().lower()
    for suf, scale in (("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("s", 1.0)):
        if txt.endswith(suf):
            try:
                v = float(txt[: -len(suf)]) * scale
            except ValueError:
                break
            if 0 < v < float("inf"):
                return v
            break
    raise DnnperfError(f"{flag} expects a positive time like 5ms, 200us or 0.01s, got '{s}'")


def parse_fraction(s: str, flag: str) -> float:
    """'5%' or '0.05' -> 0.05."""
    txt = s.strip()
    try:
        v = float(txt[:-1]) / 100 if txt.endswith("%") else float(txt)
    except ValueError:
        raise DnnperfError(f"{flag} expects 5% or 0.05, got '{s}'") from None
    if not (0 <= v < 100) or v != v:
        raise DnnperfError(f"{flag} must be between 0% and 10000%, got '{s}'")
    return v


# -- output -------------------------------------------------------------------------------------


class Out:
    """Where and how a command's document goes; checked before the command does any work."""

    def __init__(self, command: str, kinds: tuple[str, ...], fmt: Optional[str], output: Optional[str], quiet: bool,
                 inputs: list[str], default_format: str = "table"):
        from dnnperf.render import check_format, format_for_path, formats_for

        self.command = command
        self.quiet = quiet
        self.output = None if output in (None, "-") else output
        if self.output is not None:
            check_output_path(self.output, inputs)
        if fmt is None:
            by_ext = format_for_path(self.output) if self.output else None
            # only a file name that asks for a format needs the list of usable ones (which imports
            # every renderer)
            fmt = by_ext if by_ext is not None and by_ext in {f for k in kinds for f in formats_for(k)} \
                else default_format
        check_format(kinds, fmt, command)
        self.fmt = fmt

    def emit(self, doc) -> None:
        from dnnperf.render import Style, render

        tty = self.output is None and sys.stdout.isatty()
        style = Style(color=tty and not os.environ.get("NO_COLOR") and self.fmt == "table", width=None if tty else 200)
        if tty and self.fmt == "table":
            import shutil

            style = Style(color=style.color, width=shutil.get_terminal_size((200, 40)).columns)
        body = render(doc, self.fmt, style, self.command)
        data = body if isinstance(body, bytes) else body.encode("utf-8")
        if self.output is not None:
            from dnnperf.files import atomic_write_bytes

            atomic_write_bytes(self.output, data)
        else:
            if isinstance(body, bytes) and sys.stdout.isatty():
                raise DnnperfError(f"{self.fmt} output is binary: pass -o FILE")
            _write_stdout(data)
        self.notes(doc.notes)

    def notes(self, notes) -> None:
        if self.quiet:
            return
        for n in dict.fromkeys(notes):  # once each, in order (a note repeated per profile is one note)
            sys.stderr.write(f"note: {' '.join(str(n).split())}\n")


def _write_stdout(data: bytes) -> None:
    """The document on standard output; a write that fails (a full disk, ``> /dev/full``) is one line and
    exit 2, not an internal error (a closed pipe stays exit 0: ``run`` handles BrokenPipeError)."""
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data) if hasattr(sys.stdout, "buffer") else sys.stdout.write(data.decode())
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        try:  # what is left in the buffer would fail again (with a traceback) when Python exits
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        raise DnnperfError(f"cannot write to standard output: {exc.strerror or exc} — free space, or pass "
                           "-o FILE on another disk") from None


def check_output_path(output: str, inputs: list[str]) -> None:
    """-o must name a file in an existing folder, and never one of the command's inputs."""
    if os.path.isdir(output):
        raise DnnperfError(f"-o '{output}' is a directory — pass a file name")
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        raise DnnperfError(f"cannot write '{output}': folder '{folder}' does not exist")
    real = os.path.realpath(output)
    for p in inputs:
        if not p:
            continue
        same = os.path.realpath(p) == real
        if not same and os.path.exists(p) and os.path.exists(output):
            try:
                same = os.path.samefile(p, output)
            except OSError:
                same = False
        if same:
            raise DnnperfError(f"-o '{output}' is one of this command's inputs — refusing to write over it; "
                               "pick another output path")


@contextmanager
def progress(total: int, label: str, quiet: bool):
    """A progress bar on stderr (never stdout) for long runs at a terminal; yields a tick function.
    Redrawn on each tick, never by a thread of its own: ``--jobs`` forks worker processes while the bar
    is up, and a fork taken while a refresh thread holds the console's or stderr's lock leaves that
    lock held for good in the child (Python 3.12 warns of it)."""
    if total <= 3 or quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(transient=True, console=Console(file=sys.stderr), auto_refresh=False) as prog:
        task = prog.add_task(label, total=total)
        prog.refresh()
        yield lambda *_: prog.update(task, advance=1, refresh=True)


# -- the command decorator ----------------------------------------------------------------------

_INPUT_PARAMS = ("model", "models", "hw", "baseline_path", "space", "from_model", "model_a", "model_b")


def _input_paths(kw: dict) -> list[str]:
    out = []
    for k in _INPUT_PARAMS:
        v = kw.get(k)
        for x in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(x, str):
                out.extend(p.strip() for p in x.split(",") if p.strip())
    return out


def command(group, name: str, kinds: tuple[str, ...], default_format: str = "table", no_output: bool = False):
    """Register ``fn`` as ``dnnperf [group] name``. ``fn`` returns a Document, ``(Document, code)``,
    or None when it wrote nothing (``no_output``)."""

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(**kw):
            def body():
                out = None if no_output else Out(name, kinds, kw.get("fmt"), kw.get("output"), kw.get("quiet", False),
                                                  _input_paths(kw), default_format)
                _assumed_notes()  # none left over from an earlier command of this process
                res = fn(**kw)
                doc, code = res if isinstance(res, tuple) else (res, 0)
                if out is not None and doc is not None:
                    # a profile that left figures to its kind's defaults says so, whichever path read it
                    extra = _assumed_notes()
                    out.emit(replace(doc, notes=tuple(doc.notes) + tuple(extra)) if extra else doc)
                if code:
                    raise typer.Exit(code)

            run(body)

        group.command(name)(wrapper)
        return wrapper

    return deco


def _assumed_notes() -> list[str]:
    """The notes of profiles loaded with kind defaults since the last call (none when no profile was
    read: the hardware module is not even imported then)."""
    hw = sys.modules.get("dnnperf.hardware")
    return hw.assumed_notes(clear=True) if hw is not None else []


def fail(msg: str, code: int = 2):
    sys.stderr.write(f"dnnperf: error: {' '.join(str(msg).split())}\n")
    raise typer.Exit(code)


def run(fn):
    """Run a command body with the exit-code contract: 2 for bad input, 3 for bugs, 4 for a machine too
    busy to measure on, no traceback."""
    try:
        return fn()
    except DnnperfError as exc:
        fail(str(exc), exc.exit_code)
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        sys.stderr.write("dnnperf: interrupted\n")
        raise typer.Exit(130) from None
    except MemoryError:
        fail("out of memory while reading the input — is it a real model/profile?", 2)
    except RecursionError:
        fail("input nests too deeply to process", 2)
    except BrokenPipeError:
        raise typer.Exit(0) from None
    except Exception as exc:  # a bug: still one line, never a traceback
        if os.environ.get("DNNPERF_DEBUG"):
            raise
        fail(f"internal error ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}) — "
             "please report it with the command line (DNNPERF_DEBUG=1 shows the traceback)", 3)


def _only(first: list) -> typer.Typer:
    """The app to build for this run: when the first argument names a top-level command, an app of
    that command alone (building the options of every command costs ~7 ms a run); else the whole
    app (--help, groups, completion, a misspelt command: click's own messages)."""
    name = first[0] if first else ""
    info = [c for c in app.registered_commands if c.name == name]
    if not info:
        return app
    one = typer.Typer(help=HELP, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    one.registered_commands = info
    return one


def _no_full_collections() -> None:
    """Let the cycle collector sweep young objects only. A run builds a large object graph that is
    alive until it ends (a 50,000-node graph's tensors, nodes, workloads, layers and costs) and makes
    almost no reference cycles, so each full collection, which Python starts every time the heap has
    grown by a quarter, walks every live object and finds nothing: 13 of them took a quarter of
    `dnnperf analyze` on bench/bench_scale.py's 50,000-node graph (9-10 s -> 7.2 s without them; 500
    objects freed in all). Young collections still free what cycles a run does make."""
    import gc

    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 1_000_000_000)


def main() -> None:
    """Entry point: usage errors from option parsing are one line and exit 2, like every other error."""
    import importlib

    _no_full_collections()

    # click's exception classes, whether typer vendors click or depends on it
    click_exc = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    mod = importlib.import_module(click_exc.__module__)
    no_args = getattr(mod, "NoArgsIsHelpError", ())
    abort = tuple({typer.Abort, getattr(mod, "Abort", typer.Abort)})
    one = _only(sys.argv[1:2])
    cmd = typer.main.get_command(one)
    # an app of one command is that command itself: it is called with the arguments after its name
    args, prog = (sys.argv[1:], "dnnperf") if one is app else (sys.argv[2:], f"dnnperf {sys.argv[1]}")
    try:
        code = cmd.main(args=args, prog_name=prog, standalone_mode=False)
    except no_args as exc:
        exc.show()
        sys.exit(2)
    except click_exc as exc:
        msg = exc.format_message()
        ctx = getattr(exc, "ctx", None)
        where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        sys.stderr.write(f"dnnperf: error: {' '.join(msg.split())}{where}\n")
        sys.exit(2)
    except abort:
        sys.stderr.write("dnnperf: interrupted\n")
        sys.exit(130)
    if code not in (None, 0, 1, 2, 3, 4, 130):  # the contract's codes (4: too busy to measure on)
        code = 2
    sys.exit(code or 0)
