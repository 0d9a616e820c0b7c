"""BERT under TensorRT against NVIDIA's published latencies (issue 14: transformers, graph runtime).

    python bench/trt_bert.py [--held-out]
    python bench/trt_bert.py --data bench/data/trt-bert-8.4-published.json
    python bench/trt_bert.py --data FILE --records t4   # the t4 profile's `validation` records from FILE

Every row of the data file (default bench/data/trt-bert-published.json: GPU, model, precision, batch,
sequence length, average latency of NVIDIA's TensorRT BERT demo) is estimated with the row's model
(``MODELS``) at that batch and sequence length, ``--runtime tensorrt``, the row's precision and the
row's profile: a shipped one by name, or a profile written from a spec sheet alone
(``bench/data/spec-profiles/NAME.yaml``, for a GPU with no shipped profile). Prints predicted / measured
per row, and per GPU, model and precision and overall the median error, the shares within 1.25x and
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
from dnnperf.published import network_records, stats  # noqa: E402
from dnnperf.scoring import Settings  # noqa: E402


MODELS = {"bert_base": os.path.join(ROOT, "sample_models", "bert_base.onnx"),
          "bert_large": os.path.join(HERE, "models", "networks", "bert_large.onnx")}
SPEC_PROFILES = os.path.join(HERE, "data", "spec-profiles")


def _profile(name: str):
    """A shipped profile, else the spec-sheet one of that name."""
    spec = os.path.join(SPEC_PROFILES, f"{name}.yaml")
    return load_profile(spec if os.path.exists(spec) else name)


def estimate(rows: list[dict]) -> list[tuple[dict, float]]:
    """(row, predicted seconds) for each row (one inspection per model, batch and sequence length)."""
    inspections: dict = {}
    profiles: dict = {}
    out = []
    for r in rows:
        model = r.get("model", "bert_base")
        key = (model, r["batch"], r["sequence"])
        if key not in inspections:
            dims = (("sequence_length", r["sequence"]),)
            inspections[key] = inspect_model(MODELS[model], ShapeOverrides(batch=r["batch"], dims=dims))
        if r["hw"] not in profiles:
            profiles[r["hw"]] = _profile(r["hw"])
        hw = profiles[r["hw"]]
        rep = analyze(inspections[key], hw, Settings(batch=r["batch"], precision=r["precision"], runtime="tensorrt"),
                      with_fixes=False, what_if=False)
        out.append((r, rep.score.totals["latency_s"]))
    return out


DEFAULT_DATA = os.path.join(HERE, "data", "trt-bert-published.json")


def load_rows(path: str = DEFAULT_DATA) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)["rows"]


def records(path: str, hw: str) -> list[dict]:
    """The ``validation`` records of profile ``hw`` from the table at ``path``: one per precision, over
    the rows measured on that GPU, counted as whole-network latencies (``networks``)."""
    with open(path, encoding="utf-8") as fh:
        label = json.load(fh)["label"]
    res = estimate([r for r in load_rows(path) if r["hw"] == hw])
    return network_records([(r["precision"], p, r["latency_ms"] * 1e-3) for r, p in res],
                           os.path.relpath(path, ROOT).replace(os.sep, "/"), label)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--held-out", action="store_true", help="only the rows nothing was set from")
    ap.add_argument("--data", default=DEFAULT_DATA, help="published rows (default: the TensorRT 7.1 table)")
    ap.add_argument("--records", metavar="PROFILE", help="print PROFILE's `validation` records from --data (YAML list "
                    "items to paste into profiles/PROFILE.yaml) and stop")
    a = ap.parse_args()
    if a.records:
        import yaml

        print(yaml.safe_dump(records(a.data, a.records), sort_keys=False), end="")
        return
    rows = [r for r in load_rows(a.data) if r["held_out"] or not a.held_out]
    res = estimate(rows)
    print(f"{'hw':<10} {'model':<10} {'prec':<5} {'seq':>4} {'batch':>5}  {'published':>10} {'predicted':>10}  pred/meas")
    for r, p in res:
        tag = "" if r["held_out"] else "  (seen)"
        print(f"{r['hw']:<10} {r.get('model', 'bert_base'):<10} {r['precision']:<5} {r['sequence']:>4} {r['batch']:>5}  "
              f"{r['latency_ms']:8.2f}ms {p * 1e3:8.2f}ms  {p * 1e3 / r['latency_ms']:8.2f}x{tag}")

    def line(name, sel):
        st = stats([{"predicted_s": p, "measured_s": r["latency_ms"] * 1e-3} for r, p in sel])
        print(f"{name:<28} {len(sel):>3} rows  median error {st['median_error']:.2f}x  within 1.25x "
              f"{st['within_1_25']:.0%}  within 1.5x {st['within_1_5']:.0%}  rho {st['rho']:.3f}")

    for hw in dict.fromkeys(r["hw"] for r, _ in res):
        for model in dict.fromkeys(r.get("model", "bert_base") for r, _ in res):
            for prec in ("fp16", "int8"):
                sel = [x for x in res if x[0]["hw"] == hw and x[0].get("model", "bert_base") == model
                       and x[0]["precision"] == prec]
                if sel:
                    line(f"{hw} {model} {prec}", sel)
    line("all", res)
    line("held out", [x for x in res if x[0]["held_out"]])


if __name__ == "__main__":
    main()
