"""torchvision classifiers under TensorRT on two Jetson boards, against torch2trt's published latencies
(issue 14: a transfer check on embedded GPUs that have no shipped profile).

    python bench/torch2trt_jetson.py [--eager]

Every row of bench/data/torch2trt-jetson-published.json (board, model, batch 1, fp16, the latency
torch2trt's benchmark published for the TensorRT engine) is estimated with the row's torchvision model
(``model_path``), ``--runtime tensorrt --precision fp16 --batch 1`` and the board's profile written from
its datasheet alone (``bench/data/spec-profiles/``). Prints predicted / published per row, and per board
and overall the median error, the shares within 1.25x and 1.5x and the rank correlation. The Xavier's
TensorRT column set ``soc_launch_us`` (a system-on-chip GPU's launch per kernel, in
``dnnperf/data/gpu_generations.yaml``); the Nano's rows were not used for anything. ``--eager``
compares the eager PyTorch column instead: the boards' ARM hosts pay tens of microseconds per kernel, a
figure no spec sheet gives (the profiles leave ``launch_overhead_us`` at the GPU default), so those rows
say how far the default is from such a host, not how good the device model is.
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

DATA = os.path.join(HERE, "data", "torch2trt-jetson-published.json")
FOLDERS = (os.path.join(ROOT, "sample_models"), os.path.join(HERE, "models", "cpu"), os.path.join(HERE, "models", "networks"))


def model_path(name: str) -> str:
    """The project's skeleton of torchvision model ``name`` (the first folder that holds it)."""
    for folder in FOLDERS:
        path = os.path.join(folder, f"{name}.onnx")
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"no skeleton of {name}: scripts/export_sample_models.py --networks exports it")


def load_rows(path: str = DATA) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)["rows"]


def estimate(rows: list[dict], runtime: str = "tensorrt") -> list[tuple[dict, float]]:
    """(row, predicted seconds) for each row."""
    inspections: dict = {}
    profiles: dict = {}
    out = []
    for r in rows:
        if r["model"] not in inspections:
            inspections[r["model"]] = inspect_model(model_path(r["model"]), ShapeOverrides(batch=r["batch"]))
        if r["hw"] not in profiles:
            profiles[r["hw"]] = load_profile(os.path.join(HERE, "data", "spec-profiles", f"{r['hw']}.yaml"))
        hw = profiles[r["hw"]]
        rep = analyze(inspections[r["model"]], hw, Settings(batch=r["batch"], precision=r["precision"], runtime=runtime),
                      with_fixes=False, what_if=False)
        out.append((r, rep.score.totals["latency_s"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--eager", action="store_true", help="the eager PyTorch column (see the module docstring)")
    a = ap.parse_args()
    col = "pytorch_ms" if a.eager else "tensorrt_ms"
    res = estimate(load_rows(), "eager" if a.eager else "tensorrt")
    print(f"{'board':<18} {'model':<20} {'published':>10} {'predicted':>10}  pred/meas")
    for r, p in res:
        print(f"{r['hw']:<18} {r['model']:<20} {r[col]:8.2f}ms {p * 1e3:8.2f}ms  {p * 1e3 / r[col]:8.2f}x")

    def line(name, sel):
        st = stats([{"predicted_s": p, "measured_s": r[col] * 1e-3} for r, p in sel])
        print(f"{name:<20} {len(sel):>3} rows  median pred/meas {st['median_ratio']:.2f}x  median error "
              f"{st['median_error']:.2f}x  within 1.25x {st['within_1_25']:.0%}  within 1.5x {st['within_1_5']:.0%}  "
              f"within 2x {st['within_2']:.0%}  rho {st['rho']:.3f}")

    for hw in dict.fromkeys(r["hw"] for r, _ in res):
        line(hw, [x for x in res if x[0]["hw"] == hw])
    line("all", res)


if __name__ == "__main__":
    main()
