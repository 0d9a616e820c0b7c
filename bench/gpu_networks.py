"""Whole networks against times measured on a real GPU by bench/gpu_measure.py (issue 14, item 5).

    python bench/gpu_networks.py [--data bench/data/h200-networks.json] [--hw h200] [--show]

Each measured row (model, precision, batch, runtime eager|graph, ms per batch) is estimated with
the matching profile and runtime (BERT and GPT-2 at the measured sequence length), and the script
prints predicted / measured per row (--show) and, per runtime and for the held-out models (never
looked at while setting a constant), the median error factor, the share within 1.25x and 1.5x, the
median predicted/measured, and the Spearman rank correlation of predicted vs measured. The baseline
of every ratio is the measurement in the data file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from dnnperf.api import analyze, inspect_model  # noqa: E402
from dnnperf.hardware import load_profile  # noqa: E402
from dnnperf.ir import ShapeOverrides  # noqa: E402
from dnnperf.published import stats  # noqa: E402
from dnnperf.scoring import Settings  # noqa: E402


def model_path(name: str) -> str:
    root = os.path.dirname(HERE)
    for p in (os.path.join(root, "sample_models", name + ".onnx"), os.path.join(HERE, "models", "cpu", name + ".onnx")):
        if os.path.exists(p):
            return p
    raise SystemExit(f"no ONNX skeleton for '{name}' in sample_models/ or bench/models/cpu/")


def summary(label: str, rows: list) -> str:
    if not rows:
        return f"{label:<28} (none)"
    s = stats([{"predicted_s": p, "measured_s": m} for _, p, m in rows])
    return (f"{label:<28} {len(rows):>4} rows  pred/meas {s['median_ratio']:5.2f}x  |err| {s['median_error']:5.2f}x"
            f"  <=1.25x {s['within_1_25']:5.0%}  <=1.5x {s['within_1_5']:5.0%}  rho {s['rho']:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(HERE, "data", "h200-bnfolded-networks.json"))
    ap.add_argument("--hw", default=None, help="profile (default: the GPU named in the data file)")
    ap.add_argument("--show", action="store_true", help="print every row")
    args = ap.parse_args()
    with open(args.data, encoding="utf-8") as fh:
        data = json.load(fh)
    hw_name = args.hw or data["system"]["gpu"].lower().replace("nvidia ", "").split()[0]
    hw = load_profile(hw_name)
    seq = int(re.search(r"(\d+) tokens", data["conventions"]["sequence"]).group(1))
    cache: dict = {}
    out = []
    for r in data["rows"]:
        key = (r["model"], r["batch"])
        if key not in cache:
            dims = (("sequence_length", seq),) if r["model"] in ("bert_base", "gpt2") else ()
            cache[key] = inspect_model(model_path(r["model"]), ShapeOverrides(batch=r["batch"], dims=dims))
        rep = analyze(cache[key], hw, Settings(batch=r["batch"], precision=r["precision"], runtime=r["runtime"]))
        pred = rep.score.totals["latency_s"]
        out.append((r, pred, r["ms"] * 1e-3))
    if args.show:
        print(f"{'model':<20} {'prec':<5} {'batch':>5} {'runtime':<7} {'measured':>10} {'predicted':>10} {'pred/meas':>9}")
        for r, p, m in out:
            print(f"{r['model']:<20} {r['precision']:<5} {r['batch']:>5} {r['runtime']:<7} {m * 1e3:8.3f} ms {p * 1e3:8.3f} ms"
                  f" {p / m:8.2f}x{'  (held out)' if r.get('held_out') else ''}")
        print()
    print(f"{hw.name}: {data['source']}")
    for rt in ("eager", "graph"):
        sel = [x for x in out if x[0]["runtime"] == rt]
        print(summary(f"{rt}, all", sel))
        print(summary(f"{rt}, tuned-on models", [x for x in sel if not x[0].get("held_out")]))
        print(summary(f"{rt}, held-out models", [x for x in sel if x[0].get("held_out")]))
        for prec in ("fp32", "fp16"):
            for b in (1, 8, 64):
                sub = [x for x in sel if x[0]["precision"] == prec and x[0]["batch"] == b]
                if sub:
                    print("  " + summary(f"{prec} batch {b}", sub))
    print(runtime_ratio(out))


def runtime_ratio(out: list) -> str:
    """Eager over graph time per (model, precision, batch), predicted against measured: what the
    runtime model alone decides (the device model's error cancels in the ratio)."""
    by = {(r["model"], r["precision"], r["batch"], r["runtime"]): (p, m) for r, p, m in out}
    errs: dict = {}
    for (model, prec, b, rt), (p, m) in by.items():
        g = by.get((model, prec, b, "graph"))
        if rt == "eager" and g:
            r = (p / g[0]) / (m / g[1])
            errs.setdefault(b, []).append(max(r, 1 / r))
    every = sorted(e for v in errs.values() for e in v)
    if not every:
        return "eager / graph: no pair measured both ways"
    per = ", ".join(f"batch {b} {statistics.median(v):.2f}x" for b, v in sorted(errs.items()))
    return (f"eager / graph time, predicted vs measured: {len(every)} pairs, median error {statistics.median(every):.2f}x, "
            f"within 10% {sum(e <= 1.1 for e in every)} ({per})")


if __name__ == "__main__":
    main()
