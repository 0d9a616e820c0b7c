"""Tables for people at a terminal (rich): colour and box drawing only when the terminal wants them,
plain aligned text otherwise (pipes, files, NO_COLOR). Returns text; never prints."""

from __future__ import annotations

import io

from dnnperf.render.views import HUMAN, Lines, Tab

EXTENSIONS = (".txt",)


def _plain(blocks) -> str:
    """Aligned plain text (pipes, files, NO_COLOR): no rich import, no padding, no wrapping."""
    out: list[str] = []
    for k, blk in enumerate(blocks):
        if k:
            out.append("")
        if isinstance(blk, Tab):
            cells = [[" ".join(str(c).split()) for c in r] for r in [blk.headers] + blk.rows]
            widths = [max(len(r[i]) for r in cells) for i in range(len(blk.headers))]
            if blk.title:
                out.append(" ".join(blk.title.split()))
            for r in cells:
                parts = [c.ljust(w) if i in blk.left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))]
                out.append("  ".join(parts).rstrip())
        else:
            if blk.title and not blk.panel:
                out.append(blk.title + ":")
            for line in blk.lines:
                out.append(("  - " if blk.title and not blk.panel else "") + " ".join(line.split(" ")))
    return "\n".join(out) + "\n"


def blocks_to_text(blocks, style) -> str:
    if not style.color:
        return _plain(blocks)
    from rich import box
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=True, color_system="standard", width=style.width or 200, highlight=False,
                  emoji=False, markup=False, soft_wrap=False)
    for k, blk in enumerate(blocks):
        if k:
            con.print("")
        if isinstance(blk, Tab):
            tbl = Table(title=Text(blk.title) if blk.title else None, box=box.SIMPLE_HEAD,
                        show_edge=False, pad_edge=False, title_justify="left")
            for i, h in enumerate(blk.headers):
                tbl.add_column(Text(h), justify="left" if i in blk.left else "right", overflow="fold")
            for r in blk.rows:
                tbl.add_row(*[Text(str(c)) for c in r])  # Text: names are never read as markup
            con.print(tbl)
        elif blk.panel:
            con.print(Panel(Text("\n".join(blk.lines)), title=blk.title, expand=False))
        else:
            if blk.title and not blk.panel:
                con.print(Text(blk.title + ":"), soft_wrap=True)
            for line in blk.lines:
                con.print(Text(("  - " if blk.title and not blk.panel else "") + line), soft_wrap=True)
    return buf.getvalue()


def _make(view):
    def render(doc, style) -> str:
        return blocks_to_text(view(doc), style)

    return render


def _profile(doc, style) -> str:
    head = f"# validation: {doc.data['validation']}\n" if doc.data.get("validation") else ""
    if doc.data.get("assumed"):
        head += f"# not in the profile, assumed: {'; '.join(doc.data['assumed'])}\n"
    if doc.data.get("library"):
        head += f"# GPU library knowledge: {doc.data['library']}\n"
    return head + doc.data["yaml"]


RENDERERS = {kind: _make(view) for kind, view in HUMAN.items()}
RENDERERS["profile"] = _profile
