"""Renderers: Report/Inspection data -> text. Nothing here computes a figure."""

from __future__ import annotations

import json


def to_json(data) -> str:
    """Stable JSON: insertion-ordered keys, fixed separators, trailing newline."""
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
