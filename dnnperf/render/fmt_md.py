"""Markdown: for pull-request comments, CI step summaries and docs.

Everything a document carries (node names come from the model file) is escaped: a newline, a pipe
or ``<img ...>`` in a name stays text and never breaks the table or reaches a page as markup.
"""

from __future__ import annotations

import re

from dnnperf.render.views import HUMAN, HUMAN_MD, Lines, Tab

EXTENSIONS = (".md", ".markdown")
_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def escape(text) -> str:
    s = " ".join(str(text).split())  # newlines, tabs and runs of spaces -> one space
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _SPECIAL.sub(r"\\\1", s)


def _tab(tb: Tab) -> str:
    out = [f"### {escape(tb.title)}\n"] if tb.title else []
    out.append("| " + " | ".join(escape(h) for h in tb.headers) + " |")
    out.append("|" + "|".join(":---" if i in tb.left else "---:" for i in range(len(tb.headers))) + "|")
    for r in tb.rows:
        out.append("| " + " | ".join(escape(c) for c in r) + " |")
    return "\n".join(out) + "\n"


def _lines(ln: Lines) -> str:
    head = f"### {escape(ln.title)}\n\n" if ln.title and ln.title != "dnnperf" else ""
    return head + "\n".join(f"- {escape(x)}" for x in ln.lines) + "\n"


def blocks_to_md(blocks) -> str:
    return "\n".join(_tab(b) if isinstance(b, Tab) else _lines(b) for b in blocks) + "\n"


def _make(view):
    def render(doc, style) -> str:
        return blocks_to_md(view(doc))

    return render


RENDERERS = {kind: _make(HUMAN_MD.get(kind, view)) for kind, view in HUMAN.items()}
