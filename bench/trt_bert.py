"""BERT-Base under TensorRT against NVIDIA's published latencies (issue 14: transformers, graph runtime).

    python bench/trt_bert.py [--held-out]

Every row of bench/data/trt-bert-published.json (GPU, precision, batch, sequence length, average
latency of NVIDIA's TensorRT BERT demo) is estimated with sample_models/bert_base.onnx at that batch and
sequence length, ``--runtime tensorrt``, the row's precision and the shipped profile; prints predicted /
measured per row, and per GPU and precision and overall the median error, the shares within 1.25x and
1.5x and the rank correlation. The baseline of every ratio is the published latency.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from dnnperf.api import analyze, inspect_model  # noqa: E402
from dnnperf.hardware import load_profile  # noqa: E402
from dnnperf.ir import ShapeOverrides  # noqa: E402
from dnnperf.published import stats  # noqa: E402
from dnnperf.scoring import Settings  # noqa: E402


def estimate(rows: list[dict]) -> list[tuple[dict, float]]:
    """(row, predicted seconds) for each row (one inspection per batch and sequence length)."""
    path = os.path.join(ROOT, "sample_models", "bert_base.onnx")
    inspections: dict = {}
    profiles: dict = {}
    out = []
    for r in rows:
        key = (r["batch"], r["sequence"])
        if key not in inspections:
            dims = (("sequence_length", r["sequence"]),)
            inspections[key] = inspect_model(path, ShapeOverrides(batch=r["batch"], dims=dims))
        hw = profiles.setdefault(r["hw"], load_profile(r["hw"]))
        rep = analyze(inspections[key], hw, Settings(batch=r["batch"], precision=r["precision"], runtime="tensorrt"),
                      with_fixes=False, what_if=False)
        out.append((r, rep.score.totals["latency_s"]))
    return out


def load_rows() -> list[dict]:
    with open(os.path.join(HERE, "data", "trt-bert-published.json"), encoding="utf-8") as fh:
        return json.load(fh)["rows"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--held-out", action="store_true", help="only the rows nothing was set from")
    a = ap.parse_args()
    rows = [r for r in load_rows() if r["held_out"] or not a.held_out]
    res = estimate(rows)
    print(f"{'hw':<10} {'prec':<5} {'seq':>4} {'batch':>5}  {'published':>10} {'predicted':>10}  pred/meas")
    for r, p in res:
        tag = "" if r["held_out"] else "  (seen)"
        print(f"{r['hw']:<10} {r['precision']:<5} {r['sequence']:>4} {r['batch']:>5}  {r['latency_ms']:8.2f}ms "
              f"{p * 1e3:8.2f}ms  {p * 1e3 / r['latency_ms']:8.2f}x{tag}")

    def line(name, sel):
        st = stats([{"predicted_s": p, "measured_s": r["latency_ms"] * 1e-3} for r, p in sel])
        print(f"{name:<22} {len(sel):>3} rows  median error {st['median_error']:.2f}x  within 1.25x "
              f"{st['within_1_25']:.0%}  within 1.5x {st['within_1_5']:.0%}  rho {st['rho']:.3f}")

    for hw in dict.fromkeys(r["hw"] for r, _ in res):
        for prec in ("fp16", "int8"):
            sel = [x for x in res if x[0]["hw"] == hw and x[0]["precision"] == prec]
            if sel:
                line(f"{hw} {prec}", sel)
    line("all", res)
    line("held out", [x for x in res if x[0]["held_out"]])


if __name__ == "__main__":
    main()
