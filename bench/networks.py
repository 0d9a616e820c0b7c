"""Whole networks against published throughputs (issue 14).

    python bench/networks.py [--data bench/data/networks-published.json]
    python bench/networks.py --records v100   # the v100 profile's `validation` records from the table
    python bench/networks.py --data bench/data/timm-rtx-published.json   # timm's RTX 4090/3090/5090/PRO 6000 table

For every published row (model, GPU, precision, batch, images/s; sources in the data file), dnnperf
estimates the same configuration with the row's profile (a shipped name, or a spec-sheet profile's path
under bench/; eager runtime, no fusion: the frameworks measured run one kernel per op; `overlap_input`
where the benchmark made its input on the GPU) and prints predicted / measured time per image, the
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
from dnnperf.published import network_records, stats  # noqa: E402
from dnnperf.scoring import Settings  # noqa: E402


ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data", "networks-published.json")


def profile_of(row: dict):
    """A row's profile: a shipped name, or a spec-sheet profile's path relative to bench/."""
    hw = row["hw"]
    return load_profile(os.path.join(HERE, hw) if hw.endswith(".yaml") else hw)


def estimate(rows: list[dict], runtime: str = "eager") -> list[tuple[dict, float, float]]:
    """(row, predicted seconds per image, published seconds per image) for each row."""
    samples = os.path.join(ROOT, "sample_models")
    out = []
    for r in rows:
        path = os.path.join(HERE, r["path"]) if "path" in r else os.path.join(samples, r["model"] + ".onnx")
        insp = inspect_model(path, ShapeOverrides(batch=r["batch"]))
        settings = Settings(batch=r["batch"], precision=r["precision"], runtime=runtime,
                            overlap_input=bool(r.get("overlap_input")))
        rep = analyze(insp, profile_of(r), settings, with_fixes=False)
        out.append((r, rep.score.totals["latency_s"] / r["batch"], 1.0 / r["images_per_s"]))
    return out


def records(path: str, hw: str) -> list[dict]:
    """Profile ``hw``'s ``validation`` records from the table at ``path`` (one per precision, ``networks``)."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    res = estimate([r for r in data["rows"] if r["hw"] == hw])
    return network_records([(r["precision"], p, m) for r, p, m in res],
                           os.path.relpath(path, ROOT).replace(os.sep, "/"), data["label"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--runtime", default="eager")
    ap.add_argument("--records", metavar="PROFILE", help="print PROFILE's `validation` records from --data (YAML list "
                    "items to paste into profiles/PROFILE.yaml) and stop")
    args = ap.parse_args()
    if args.records:
        import yaml

        print(yaml.safe_dump(records(args.data, args.records), sort_keys=False), end="")
        return
    with open(args.data, encoding="utf-8") as fh:
        data = json.load(fh)
    print(f"{'model':<15} {'hw':<5} {'prec':<5} {'batch':>5}  {'measured/img':>12} {'predicted/img':>13}  {'pred/meas':>9}  source")
    rows = estimate(data["rows"], args.runtime)
    for r, pred, meas in rows:
        tag = " (held out)" if r.get("held_out") else ""
        hw = os.path.basename(r["hw"]).removesuffix(".yaml")
        print(f"{r['model']:<15} {hw:<5} {r['precision']:<5} {r['batch']:>5}  {meas * 1e3:10.3f} ms "
              f"{pred * 1e3:11.3f} ms  {pred / meas:8.2f}x  {r['source']}{tag}")
    gpus = sorted({r["hw"] for r, _, _ in rows})
    parts = [("all", rows), ("held out", [x for x in rows if x[0].get("held_out")])]
    if len(gpus) > 1:
        parts += [(os.path.basename(g).removesuffix(".yaml"), [x for x in rows if x[0]["hw"] == g]) for g in gpus]
    for name, sel in parts:
        st = stats([{"predicted_s": p, "measured_s": m} for _, p, m in sel])
        print(f"{name}: {len(sel)} rows, median error {st['median_error']:.2f}x, within 1.25x {st['within_1_25']:.0%}, "
              f"within 1.5x {st['within_1_5']:.0%}, rank rho {st['rho']:.3f}")


if __name__ == "__main__":
    main()
