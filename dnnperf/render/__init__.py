"""Renderers: Report/Inspection data -> text. Nothing here computes a figure."""

from __future__ import annotations

import json


def to_json(data) -> str:
    """Stable JSON: insertion-ordered keys, fixed separators, trailing newline.

    Small documents are indented for people; large ones (many layers) are written compactly,
    which keeps the fast C encoder (``jq .`` pretty-prints them). Same input, same bytes."""
    compact = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    if len(compact) > 2_000_000:
        return compact + "\n"
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
