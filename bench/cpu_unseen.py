"""Issue 15's acceptance benchmark: CPU estimates on torchvision models the sample set does not have.

    pip install ".[measure]" && python bench/cpu_unseen.py [--runs 3] [--set held_out|tune|fresh|all|every]
    python bench/cpu_unseen.py --models DIR     # every .onnx skeleton in DIR instead (one set)
    python bench/cpu_unseen.py --threads 1      # calibrate and validate with one intra-op thread

Each run is what a user does: a fresh ``calibrate`` (default mode, this machine's default thread
count), then ``validate`` on every model of ``bench/models/cpu`` (weightless skeletons made by
``scripts/export_sample_models.py --cpu-sets``). Per run it prints, for the held-out set (models
never looked at while the CPU model was built), the tune set and the later fresh set separately: median |error|, models
within +-10%, Spearman rank correlation of predicted against measured latency, and how many models
have their measured top-5 layers inside the predicted top-10. Then the spread of each model's
measured latency across the protocol's rounds, and how far the calibrations of the runs disagree
(the largest relative difference of any figure between two runs).

The baseline of every error is the measurement taken in the same run. Nothing here is asserted:
the figures are printed for the closing note and ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
MODELS = os.path.join(HERE, "models", "cpu")

from dnnperf.measure.repeat import numeric_figures  # noqa: E402  (every numeric figure, as calibrate compares them)
from dnnperf.published import spearman  # noqa: E402


def summarise(rows: list[dict]) -> str:
    if not rows:
        return "no models"
    errs = [abs(r["error"]) for r in rows]
    rho = spearman([r["predicted_s"] for r in rows], [r["measured_s"] for r in rows])
    return (f"median |error| {statistics.median(errs) * 100:5.1f}%   within +-10% {sum(e <= 0.10 for e in errs):2d}/{len(rows)}"
            f"   Spearman {rho:.3f}   top-5 inside top-10 {sum(r['top5_inside_predicted_top10'] for r in rows):2d}/{len(rows)}")


def _unreliable(d: dict) -> bool:
    """validate's note that an anchor moved too far since calibration (``measure.validate.unsteady``)."""
    return any(n.startswith("UNRELIABLE") for n in d.get("notes", ()))


def _as_calibrated(d: dict) -> dict:
    """A validate row as it would read with --no-drift (the top-layer check is the same: one scale
    factor per resource moves the layers' ranks little)."""
    p = d["predicted_as_calibrated_s"]
    return {**d, "predicted_s": p, "error": (p - d["measured_s"]) / d["measured_s"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--set", choices=("held_out", "tune", "fresh", "all", "every"), default="all",
                    help="all: held_out and tune (the issue's series); fresh: the later set no constant is fitted on; every: all three")
    ap.add_argument("--quick", action="store_true", help="quick calibration (a smoke test, not the figures)")
    ap.add_argument("--json", help="write every run's rows here (and run N's calibrated profile to <json stem>.runN.yaml)")
    ap.add_argument("--models", help="a folder of .onnx models to use instead of bench/models/cpu (one set, 'given')")
    ap.add_argument("--retry-unsteady", type=int, default=3,
                    help="measure a model again (after 20 s) while validate finds the machine out of its calibrated "
                         "state, up to this many times (as validate --retry-unsteady)")
    ap.add_argument("--threads", type=int, default=None,
                    help="intra-op threads for calibrate and validate alike (default: ONNX Runtime's, one per core)")
    a = ap.parse_args()
    import yaml

    from dnnperf.hardware import load_profile
    from dnnperf.ir import ShapeOverrides
    from dnnperf.measure import calibrate, validate

    models = a.models or MODELS
    if a.models:
        sets = {"given": sorted(f[:-5] for f in os.listdir(models) if f.endswith(".onnx"))}
        chosen = ["given"]
    else:
        with open(os.path.join(MODELS, "sets.json")) as fh:
            sets = json.load(fh)["sets"]
        chosen = [s for s in ("held_out", "tune", "fresh")
                  if a.set in (s, "every") or (a.set == "all" and s != "fresh")]
    runs, figures = [], []
    for run in range(1, a.runs + 1):
        prof = calibrate(quick=a.quick, threads=a.threads, strict=False)
        figures.append(numeric_figures(prof))
        path = os.path.join(tempfile.mkdtemp(), "local.yaml")
        if a.json:  # kept next to the rows: the run's estimates can be made again from the same profile
            path = f"{os.path.splitext(a.json)[0]}.run{run}.yaml"
        with open(path, "w") as fh:
            yaml.safe_dump(prof, fh, sort_keys=False)
        hw = load_profile(path)
        m = prof["measured"]
        print(f"run {run}: calibrated in {m['seconds']} s ({m['rounds']} rounds, settled {m['settled']}, "
              f"largest spread {m['spread_max'] * 100:.0f}%, its halves agree on {m['repeat']['within']} of "
              f"{m['repeat']['figures']} figures): fp32 {prof['headline']['tops']} TOP/s, "
              f"{prof['memory']['dram_gbs']} GB/s, cache {prof['memory']['onchip_mb']} MB"
              f"{' (CACHES APART: more than the OS reports)' if m.get('caches_apart') else ''}, "
              f"dispatch {prof['launch_overhead_us']} us", flush=True)
        rows = {}
        for s in chosen:
            for name in sets[s]:
                d = validate(os.path.join(models, f"{name}.onnx"), hw, ShapeOverrides(batch=1), threads=a.threads,
                             strict=False, steady_retries=a.retry_unsteady)
                d["set"] = s
                rows[name] = d
                sp = d.get("speed_vs_calibration") or {}
                print(f"  {s:<8} {name:<20} predicted {d['predicted_s'] * 1e3:8.3f} ms  measured "
                      f"{d['measured_s'] * 1e3:8.3f} ms  error {d['error'] * 100:+6.1f}%  spread "
                      f"{d['spread'] * 100:4.1f}%  top5-in-top10 {d['top5_inside_predicted_top10']}"
                      + (f"  speed now x{sp['compute']:.3f} / x{sp['memory']:.3f}"
                         + (f" / cache x{sp['cache']:.3f}" if "cache" in sp else "") + ", as calibrated "
                         f"{_as_calibrated(d)['error'] * 100:+6.1f}%" if sp else "")
                      + ("  UNRELIABLE" if _unreliable(d) else "")
                      + (f"  (measured {d['remeasured'] + 1} times)" if d.get("remeasured") else ""), flush=True)
        for s in chosen:
            print(f"  run {run} {s:<8}: " + summarise([r for r in rows.values() if r["set"] == s]), flush=True)
            steady = [r for r in rows.values() if r["set"] == s and not _unreliable(r)]
            print(f"  run {run} {s:<8} without the rows marked UNRELIABLE ({len(steady)}): " + summarise(steady), flush=True)
        runs.append(rows)
    print("\nsummary (one line per run and set; 'as calibrated': the same runs without validate's speed "
          "re-timing, as --no-drift)")
    for i, rows in enumerate(runs, 1):
        for s in chosen:
            print(f"  run {i} {s:<8}: " + summarise([r for r in rows.values() if r["set"] == s]))
            if all(r.get("predicted_as_calibrated_s") for r in rows.values()):
                print(f"  run {i} {s:<8} as calibrated: "
                      + summarise([_as_calibrated(r) for r in rows.values() if r["set"] == s]))
    if len(runs) > 1:
        names = sorted(runs[0])
        worst = max(names, key=lambda n: max(r[n]["error"] for r in runs) - min(r[n]["error"] for r in runs))
        print(f"  largest move of one model's error across runs: {worst} "
              + " / ".join(f"{r[worst]['error'] * 100:+.1f}%" for r in runs))
        keys = sorted(k for k in set.intersection(*(set(f) for f in figures)) if min(f[k] for f in figures) > 0)
        diffs = {k: max(f[k] for f in figures) / min(f[k] for f in figures) - 1 for k in keys}
        within = sum(v <= 0.05 for v in diffs.values())
        top = sorted(diffs.items(), key=lambda kv: -kv[1])[:5]
        print(f"  calibrations: {within}/{len(diffs)} figures agree within 5% across runs; widest: "
              + ", ".join(f"{k} {v * 100:.0f}%" for k, v in top))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"runs": runs, "calibrations": figures}, fh, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
