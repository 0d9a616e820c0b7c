"""CSV: one row per layer (or per target, batch, configuration...), raw numbers in SI units."""

from __future__ import annotations

import csv
import io
import json

from dnnperf.render.views import MACHINE

EXTENSIONS = (".csv",)


def _cell(v):
    if isinstance(v, (list, tuple)):
        return ";".join(str(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return v


def rows_to_csv(columns: list[str], rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: _cell(r.get(k)) for k in columns})
    return buf.getvalue()


def _make(view):
    def render(doc, style) -> str:
        return rows_to_csv(*view(doc))

    return render


RENDERERS = {kind: _make(view) for kind, view in MACHINE.items()}
