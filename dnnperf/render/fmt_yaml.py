"""YAML: hardware profiles (``hw show -f yaml``, ``calibrate``), safe-dumped plain data."""

from __future__ import annotations

EXTENSIONS = (".yaml", ".yml")


def _profile(doc, style) -> str:
    return doc.data["yaml"]


def _calibration(doc, style) -> str:
    import yaml

    return "# Measured by `dnnperf calibrate`; see `measured:` for how.\n" + yaml.safe_dump(doc.data, sort_keys=False)


RENDERERS = {"profile": _profile, "calibration": _calibration}
