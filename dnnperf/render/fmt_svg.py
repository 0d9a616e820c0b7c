"""SVG: the roofline and loss-waterfall charts (drawn by ``render.svg``, no plotting library)."""

from __future__ import annotations

from dnnperf.render import svg

EXTENSIONS = (".svg",)


def _chart(doc, style) -> str:
    d = doc.data["report"]
    return svg.roofline(d) if doc.data["chart"] == "roofline" else svg.waterfall(d)


RENDERERS = {"chart": _chart}
