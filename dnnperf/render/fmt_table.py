"""Tables for people at a terminal (rich): colour and box drawing only when the terminal wants them,
plain aligned text otherwise (pipes, files, NO_COLOR). Returns text; never prints."""

from __future__ import annotations

import io

from dnnperf.render.views import HUMAN, Lines, Tab

EXTENSIONS = (".txt",)


def blocks_to_text(blocks, style) -> str:
    from rich import box
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=style.color, no_color=not style.color, color_system="standard" if style.color else None,
                  width=style.width or 200, highlight=False, emoji=False, markup=False, soft_wrap=False)
    for k, blk in enumerate(blocks):
        if k:
            con.print("")
        if isinstance(blk, Tab):
            tbl = Table(title=Text(blk.title) if blk.title else None, box=box.SIMPLE_HEAD if style.color else None,
                        show_edge=False, pad_edge=False, title_justify="left")
            for i, h in enumerate(blk.headers):
                tbl.add_column(Text(h), justify="left" if i in blk.left else "right", overflow="fold")
            for r in blk.rows:
                tbl.add_row(*[Text(str(c)) for c in r])  # Text: names are never read as markup
            con.print(tbl)
        elif blk.panel and style.color:
            con.print(Panel(Text("\n".join(blk.lines)), title=blk.title, expand=False))
        else:
            if blk.title and not blk.panel:
                con.print(Text(blk.title + ":"), soft_wrap=True)
            for line in blk.lines:
                con.print(Text(("  - " if blk.title and not blk.panel else "") + line), soft_wrap=True)
    text = buf.getvalue()
    if not style.color:  # plain text: no padding to the console width
        text = "\n".join(line.rstrip() for line in text.split("\n"))
    return text


def _make(view):
    def render(doc, style) -> str:
        return blocks_to_text(view(doc), style)

    return render


def _profile(doc, style) -> str:
    return doc.data["yaml"]


RENDERERS = {kind: _make(view) for kind, view in HUMAN.items()}
RENDERERS["profile"] = _profile
