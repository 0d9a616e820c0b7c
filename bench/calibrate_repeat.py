"""Issue 15: does `dnnperf calibrate` repeat? Runs it N times in a row and compares every figure.

    python bench/calibrate_repeat.py [--runs 3] [--quick] [--threads N]

Prints, for the figures that moved most, their values in each run and max/min - 1 across the runs
(``dnnperf.measure.repeat.figure_gaps``: a figure at 0 in some runs only is infinitely apart); how
many of all numeric figures agree within 5%; the rounds each run needed; what each run's own check found
(``measured.repeat``: its figures from the first and the second half of its rounds). A run that exits 4
("too busy", or figures that do not repeat) is reported as such.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HERE = os.path.dirname(os.path.abspath(__file__))


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
    from dnnperf.measure.repeat import figure_gaps, numeric_figures

    figs = [numeric_figures(d) for d in profiles]
    rows = []
    for k in sorted(set.intersection(*(set(f) for f in figs))):
        vals = [f[k] for f in figs]
        gap = figure_gaps({"x": min(vals, key=abs)}, {"x": max(vals, key=abs)})["x"]
        rows.append((gap, k, vals))
    rows.sort(key=lambda r: (-r[0], r[1]))
    for spread, k, vals in rows[:12]:
        print(f"{spread * 100:6.1f}%  {k:<36} {' / '.join(f'{v:g}' for v in vals)}")
    print(f"{sum(r[0] <= 0.05 for r in rows)} of {len(rows)} figures agree within 5% (a figure at 0 in some runs "
          f"only does not); rounds per run: {[d['measured'].get('rounds') for d in profiles]}")
    for i, d in enumerate(profiles, 1):
        rep = d["measured"].get("repeat", {})
        print(f"run {i}: settled {d['measured'].get('settled')}, its halves agree on {rep.get('within')} of "
              f"{rep.get('figures')} figures within {rep.get('tolerance')}; widest {rep.get('widest')}")

if __name__ == "__main__":
    main()
