"""JSON: the document's data as is (numbers in SI units), stable bytes for the same input."""

from __future__ import annotations

import json

EXTENSIONS = (".json",)


def to_json(data) -> str:
    """Stable JSON: insertion-ordered keys, fixed separators, trailing newline.

    Small documents are indented for people; large ones (many layers) are written compactly,
    which keeps the fast C encoder (``jq .`` pretty-prints them). Same input, same bytes."""
    compact = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    if len(compact) > 2_000_000:
        return compact + "\n"
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _data(doc, style) -> str:
    return to_json(doc.data)


def _profile(doc, style) -> str:
    return to_json(doc.data["profile"])


RENDERERS = {kind: _data for kind in (
    "report", "reports", "inspection", "totals", "compare", "sweep", "llm_sweep", "baseline", "check", "lut", "shapes", "diff",
    "validate", "published", "hw_list", "hw_schema", "calibration")}
RENDERERS["profile"] = _profile
