"""Issue 14: the kernels dnnperf says a framework runs, against the torch profiler's count.

    python bench/kernel_counts.py [--data bench/data/h200-bnfolded-networks.json] [--hw h200]

`bench/gpu_measure.py` recorded, for each network's batch-1 eager row, the kernels the torch profiler
counted in one forward pass (`kernels_per_pass`). For the same network, precision and runtime this
prints the device kernels of dnnperf's estimate (each layer's launches, the library's layout reorders
and split-K reductions, a framework's bias kernel: the report's `totals.kernels`), the difference, and how many
networks match exactly. The baseline is the profiler's count in the data file; a count says nothing of
time, but a kernel the model misses or invents is a term of its estimate that cannot be right.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from dnnperf.api import analyze, inspect_model  # noqa: E402
from dnnperf.hardware import load_profile  # noqa: E402
from dnnperf.ir import ShapeOverrides  # noqa: E402
from dnnperf.scoring import Settings  # noqa: E402
from gpu_networks import model_path  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(HERE, "data", "h200-bnfolded-networks.json"))
    ap.add_argument("--hw", default=None, help="profile (default: the GPU named in the data file)")
    args = ap.parse_args()
    with open(args.data, encoding="utf-8") as fh:
        data = json.load(fh)
    hw = load_profile(args.hw or data["system"]["gpu"].lower().replace("nvidia ", "").split()[0])
    seq = int(re.search(r"(\d+) tokens", data["conventions"]["sequence"]).group(1))
    # one row per network and precision (the graph replays run the same kernels)
    rows = [r for r in data["rows"] if r.get("kernels_per_pass") and r["runtime"] == "eager"]
    print(f"{'model':<20} {'prec':<5} {'batch':>5} {'profiler':>8} {'dnnperf':>8} {'diff':>6}")
    exact = {}
    for r in rows:
        dims = (("sequence_length", seq),) if r["model"] in ("bert_base", "gpt2") else ()
        insp = inspect_model(model_path(r["model"]), ShapeOverrides(batch=r["batch"], dims=dims))
        sc = analyze(insp, hw, Settings(batch=r["batch"], precision=r["precision"], runtime=r["runtime"]),
                     with_fixes=False).score
        n = sc.totals["kernels"]
        d = n - r["kernels_per_pass"]
        exact.setdefault(r["precision"], []).append(d == 0)
        print(f"{r['model']:<20} {r['precision']:<5} {r['batch']:>5} {r['kernels_per_pass']:>8} {n:>8} {d:>+6}")
    for p, hits in exact.items():
        print(f"{p}: {sum(hits)} of {len(hits)} networks at the profiler's exact kernel count")


if __name__ == "__main__":
    main()
