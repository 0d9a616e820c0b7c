"""Renderers: a Document -> text (or bytes). Nothing here computes a figure, and nothing prints:
the CLI's emitter writes what a renderer returns.

One module per output format, named ``fmt_<format>.py``, each with ``EXTENSIONS`` (file endings
that select it for ``-o``) and ``RENDERERS`` {document kind: function(document, style) -> str | bytes}.
The formats are discovered from the module names (nothing is imported until used), so a new
format is one new module; a (kind, format) pair without a renderer is refused, never approximated.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from dataclasses import dataclass
from functools import lru_cache

from dnnperf.errors import DnnperfError


@dataclass(frozen=True)
class Style:
    """How a terminal wants text: ANSI colour and box drawing, and the line width (None: the terminal's)."""

    color: bool = False
    width: int | None = None


@lru_cache(maxsize=1)
def format_names() -> tuple[str, ...]:
    return tuple(sorted(m.name[4:] for m in pkgutil.iter_modules(__path__) if m.name.startswith("fmt_")))


def _module(fmt: str):
    return importlib.import_module(f"{__name__}.fmt_{fmt}")


def formats_for(kind: str) -> list[str]:
    return [f for f in format_names() if kind in _module(f).RENDERERS]


def format_for_path(path: str) -> str | None:
    """The format a file name asks for by its extension (``.json`` -> json), or None."""
    ext = os.path.splitext(path)[1].lower()
    for f in format_names():
        if ext and ext in _module(f).EXTENSIONS:
            return f
    return None


def check_format(kinds: tuple[str, ...] | list[str], fmt: str, command: str) -> None:
    """Refuse a format that none of a command's document kinds can be rendered in."""
    if fmt not in format_names():
        raise DnnperfError(f"unknown format '{fmt}' (formats: {', '.join(format_names())})")
    if not any(k in _module(fmt).RENDERERS for k in kinds):
        avail = sorted({f for k in kinds for f in formats_for(k)})
        raise DnnperfError(f"-f {fmt} is not available for `{command}` — use one of: {', '.join(avail)}")


def render(doc, fmt: str, style: Style = Style(), command: str = "this command") -> str | bytes:
    check_format((doc.kind,), fmt, command)
    return _module(fmt).RENDERERS[doc.kind](doc, style)
