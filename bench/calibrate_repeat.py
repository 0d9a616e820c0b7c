"""Issue 15: does `dnnperf calibrate` repeat? Runs it N times in a row and compares every figure.

    python bench/calibrate_repeat.py [--runs 3] [--quick] [--threads N]

Prints, for the figures that moved most, their values in each run and max/min - 1; how many of all
numeric figures agree within 5%; the rounds each run needed. A run that exits 4 ("too busy") is
reported as such. The baseline of every ratio is the first run's own figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))


def flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        k = str(k)
        if k in ("measured", "sources", "title"):
            continue
        if isinstance(v, dict):
            out.update(flat(v, prefix + k + "."))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                if isinstance(x, dict):
                    out.update(flat(x, prefix + f"{k}[{i}]."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[prefix + k] = v
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    profiles = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            out = os.path.join(tmp, f"run{i}.yaml")
            cmd = [sys.executable, "-m", "dnnperf", "calibrate", "-o", out, "-q"]
            cmd += ["--quick"] if args.quick else []
            cmd += ["--threads", str(args.threads)] if args.threads else []
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=os.path.dirname(HERE))
            if p.returncode:
                print(f"run {i + 1}: exit {p.returncode}: {p.stderr.strip()}")
                continue
            with open(out, encoding="utf-8") as fh:
                profiles.append(yaml.safe_load(fh))
    if len(profiles) < 2:
        print("fewer than two runs succeeded: nothing to compare")
        return
    figs = [flat(d) for d in profiles]
    rows = []
    for k in figs[0]:
        vals = [f.get(k) for f in figs]
        if None in vals or min(vals) <= 0:
            continue
        rows.append((max(vals) / min(vals) - 1, k, vals))
    rows.sort(reverse=True)
    for spread, k, vals in rows[:12]:
        print(f"{spread * 100:6.1f}%  {k:<36} {' / '.join(f'{v:g}' for v in vals)}")
    print(f"{sum(r[0] <= 0.05 for r in rows)} of {len(rows)} figures agree within 5%; rounds per run: "
          f"{[d['measured'].get('rounds') for d in profiles]}")


if __name__ == "__main__":
    main()
