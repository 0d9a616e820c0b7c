"""Recurrent layers against DeepBench's published inference times (issue 14: a transfer check).

    python bench/rnn_published.py

Every row of bench/data/deepbench-rnn-readme.json (one LSTM or GRU layer, input size = hidden size,
fp32, on a Pascal GPU) becomes a one-node ONNX model, analysed with the spec-sheet profile of that GPU
(bench/data/spec-profiles/, eager: DeepBench times the library call from the host). Prints predicted /
measured per row and the median error factor; the baseline of every ratio is the published time.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from dnnperf.api import analyze, inspect_model  # noqa: E402
from dnnperf.hardware import load_profile  # noqa: E402
from dnnperf.published import stats  # noqa: E402
from dnnperf.scoring import Settings  # noqa: E402

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def rnn_model(op: str, hidden: int, batch: int, steps: int):
    """One recurrent layer, sequence-first input of ``hidden`` features (as DeepBench runs them); the
    GRU with PyTorch's and cuDNN's linear_before_reset."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    g = GATES[op]
    extra = {"linear_before_reset": 1} if op == "GRU" else {}
    node = helper.make_node(op, ["x", "w", "r"], ["y"], hidden_size=hidden, name="rnn", **extra)
    weights = [numpy_helper.from_array(np.zeros((1, g * hidden, hidden), np.float32), n) for n in ("w", "r")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, batch, hidden])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "rnn", [x], [y], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def rows(path: str | None = None) -> list[tuple[dict, float]]:
    """(row, predicted seconds) for every published row."""
    import onnx

    with open(path or os.path.join(HERE, "data", "deepbench-rnn-readme.json"), encoding="utf-8") as fh:
        data = json.load(fh)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in data["rows"]:
            p = os.path.join(tmp, "rnn.onnx")
            onnx.save(rnn_model(r["op"], r["hidden"], r["batch"], r["steps"]), p)
            hw = load_profile(os.path.join(HERE, "data", "spec-profiles", r["gpu"] + ".yaml"))
            rep = analyze(inspect_model(p), hw, Settings(runtime="eager"), with_fixes=False)
            out.append((r, rep.score.totals["latency_s"]))
    return out


def main() -> None:
    res = rows()
    print(f"{'layer':<5} {'hidden':>6} {'batch':>5} {'steps':>5} {'gpu':<10} {'measured':>10} {'predicted':>10}"
          "  pred/meas")
    for r, pred in res:
        print(f"{r['op']:<5} {r['hidden']:>6} {r['batch']:>5} {r['steps']:>5} {r['gpu']:<10} {r['ms']:8.2f}ms "
              f"{pred * 1e3:8.2f}ms  {pred * 1e3 / r['ms']:8.2f}x")
    st = stats([{"predicted_s": p, "measured_s": r["ms"] * 1e-3} for r, p in res])
    print(f"{len(res)} rows: median error {st['median_error']:.2f}x, within 1.25x {st['within_1_25']:.0%}, "
          f"within 1.5x {st['within_1_5']:.0%}")


if __name__ == "__main__":
    main()
