"""CSV: one row per layer, raw numbers in SI units (seconds, bytes, ops)."""

from __future__ import annotations

import csv
import io

REPORT_COLUMNS = ["model", "hardware", "name", "op_type", "family", "output_shape", "dtype", "macs", "other_ops",
                  "ops", "act_bytes_read", "weight_bytes", "bytes_written", "intensity_ops_per_byte", "unit",
                  "precision", "tile_efficiency", "occupancy", "ideal_s", "compute_s", "memory_s", "launch_s",
                  "latency_s", "lost_s", "cause", "fix"]
INSPECT_COLUMNS = ["name", "op_type", "family", "output_shape", "dtype", "macs", "other_ops", "act_bytes_read",
                   "weight_bytes", "bytes_written", "intensity_ops_per_byte", "parallel_work", "supported"]


def _out(rows, columns) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def reports(dicts: list[dict]) -> str:
    rows = []
    for d in dicts:
        for l in d["layers"]:
            r = dict(l)
            r["model"] = d["model"]["name"]
            r["hardware"] = d["hardware"]["name"]
            r["output_shape"] = "x".join(map(str, l["output_shape"])) if l["output_shape"] is not None else ""
            r["fix"] = l["fixes"][0]["text"] if l["fixes"] else ""
            rows.append(r)
    return _out(rows, REPORT_COLUMNS)


def inspection(d: dict) -> str:
    rows = []
    for l in d["layers"]:
        r = dict(l)
        r["output_shape"] = "x".join(map(str, l["output_shape"])) if l["output_shape"] is not None else ""
        rows.append(r)
    return _out(rows, INSPECT_COLUMNS)


def table(rows: list[dict], columns: list[str]) -> str:
    return _out(rows, columns)
