"""Issue 5 accuracy benchmark: calibrate once, validate every sample model, report the figures.

    pip install ".[measure]" && python bench/fidelity.py [--quick]

Prints per model predicted vs measured latency (ONNX Runtime CPU, default thread count), the median
absolute % error, the share within +-10%, the Spearman rank correlation across models, and how often
the measured top-5 layers sit inside the predicted top-10. The baseline for the error is the
measurement itself, taken in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=1,
                    help="validate every model this many times and keep its fastest measurement")
    a = ap.parse_args()
    import yaml

    from dnnperf.ir import ShapeOverrides
    from dnnperf.hardware import load_profile
    from dnnperf.measure import calibrate, validate
    from dnnperf.published import spearman

    # what a user does: one fresh calibration (an earlier version merged the best figure of three
    # calibrations, which reads every figure at its luckiest and made every estimate optimistic)
    prof = calibrate(quick=a.quick, strict=False)
    path = os.path.join(tempfile.mkdtemp(), "local.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(prof, fh, sort_keys=False)
    hw = load_profile(path)
    print(f"calibrated in {prof['measured']['seconds']} s: fp32 {prof['headline']['tops']} TOP/s, "
          f"{prof['memory']['dram_gbs']} GB/s, dispatch {prof['launch_overhead_us']} us, efficiency {prof['efficiency']}")
    names = sorted(f for f in os.listdir(os.path.join(ROOT, "sample_models")) if f.endswith(".onnx"))
    best: dict = {}
    for _ in range(a.rounds):
        for f in names:
            p = os.path.join(ROOT, "sample_models", f)
            ov = ShapeOverrides(batch=1, dims=(("sequence_length", 128),) if f.startswith(("gpt2", "bert")) else ())
            if f.startswith("tiny_llama"):  # decoders with a KV cache: one decode step at 128 cached tokens
                from dnnperf.llm.phases import find_decoder

                ov = find_decoder(p).overrides(ov, 1, 128)
            # a noisy moment must not abort the benchmark: unsettled measurements are kept and counted
            d = validate(p, hw, ov, runs=a.runs, strict=False, steady_retries=2)  # as `dnnperf validate` by default
            if f not in best or d["measured_s"] < best[f]["measured_s"]:
                best[f] = d
    rows = []
    for f in names:
        d = best[f]
        rows.append(d)
        print(f"{f:<26} predicted {d['predicted_s'] * 1e3:8.3f} ms  measured {d['measured_s'] * 1e3:8.3f} ms  "
              f"error {d['error'] * 100:+6.1f}%  top5-in-top10 {d['top5_inside_predicted_top10']}  "
              f"unmatched kernels {len(d['kernels_unmatched'])}")
    errs = [abs(r["error"]) for r in rows]
    print(f"median |error| {statistics.median(errs) * 100:.1f}%   within +-10%: {sum(e <= 0.10 for e in errs)}/{len(errs)}   "
          f"Spearman {spearman([r['predicted_s'] for r in rows], [r['measured_s'] for r in rows]):.3f}   "
          f"measured top-5 inside predicted top-10: {sum(r['top5_inside_predicted_top10'] for r in rows)}/{len(rows)}")
    misses = [r for r in rows if abs(r["error"]) > 0.10]
    for r in misses:
        worst = sorted((x for x in r["layers"] if x["measured_s"]), key=lambda x: -abs(x["predicted_s"] - x["measured_s"]))[:3]
        print(f"  miss {r['model']}: worst layers " + "; ".join(
            f"{x['layer'][-40:]} ({x['op_type']}) {x['predicted_s'] * 1e6:.0f} vs {x['measured_s'] * 1e6:.0f} us" for x in worst))


if __name__ == "__main__":
    main()
