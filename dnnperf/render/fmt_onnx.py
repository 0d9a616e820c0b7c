"""ONNX: a model file (``dnnperf strip`` writes a weightless skeleton)."""

from __future__ import annotations

EXTENSIONS = (".onnx",)


def _model(doc, style) -> bytes:
    return doc.data


RENDERERS = {"model": _model}
