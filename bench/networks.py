"""Whole networks against published throughputs (issue 14).

    python bench/networks.py [--data bench/data/networks-published.json]

For every published row (model, GPU, precision, batch, images/s; sources in the data file), dnnperf
estimates the same configuration with the shipped profile (eager runtime, no fusion: the
frameworks measured run one kernel per op) and prints predicted / measured time per image, the
median error factor, the share within 1.5x, and whether the order of the rows by time is kept.
The baseline of every ratio is the published measurement itself. Held-out rows were never tuned on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from dnnperf.api import analyze, inspect_model  # noqa: E402
from dnnperf.hardware import load_profile  # noqa: E402
from dnnperf.ir import ShapeOverrides  # noqa: E402
from dnnperf.published import stats  # noqa: E402
from dnnperf.scoring import Settings  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(HERE, "data", "networks-published.json"))
    ap.add_argument("--runtime", default="eager")
    args = ap.parse_args()
    with open(args.data, encoding="utf-8") as fh:
        data = json.load(fh)
    samples = os.path.join(os.path.dirname(HERE), "sample_models")
    print(f"{'model':<15} {'hw':<5} {'prec':<5} {'batch':>5}  {'measured/img':>12} {'predicted/img':>13}  {'pred/meas':>9}  source")
    rows = []
    for r in data["rows"]:
        path = os.path.join(HERE, r["path"]) if "path" in r else os.path.join(samples, r["model"] + ".onnx")
        insp = inspect_model(path, ShapeOverrides(batch=r["batch"]))
        rep = analyze(insp, load_profile(r["hw"]), Settings(batch=r["batch"], precision=r["precision"],
                                                             runtime=args.runtime))
        pred = rep.score.totals["latency_s"] / r["batch"]
        meas = 1.0 / r["images_per_s"]
        rows.append((r, pred, meas))
        tag = " (held out)" if r.get("held_out") else ""
        print(f"{r['model']:<15} {r['hw']:<5} {r['precision']:<5} {r['batch']:>5}  {meas * 1e3:10.3f} ms {pred * 1e3:11.3f} ms"
              f"  {pred / meas:8.2f}x  {r['source']}{tag}")
    for name, sel in (("all", rows), ("held out", [x for x in rows if x[0].get("held_out")])):
        st = stats([{"predicted_s": p, "measured_s": m} for _, p, m in sel])
        print(f"{name}: {len(sel)} rows, median error {st['median_error']:.2f}x, within 1.25x {st['within_1_25']:.0%}, "
              f"within 1.5x {st['within_1_5']:.0%}, rank rho {st['rho']:.3f}")


if __name__ == "__main__":
    main()
