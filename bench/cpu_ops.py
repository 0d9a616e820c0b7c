"""Issue 15: single elementwise ops on the CPU, measured against their estimate.

    pip install ".[measure]" && python bench/cpu_ops.py --hw local.yaml [--only Add PRelu ...]

Each case is a one-node model (393,216 float32 elements unless its name says otherwise): an Add, Mul or
Sub of two tensors of one shape, a bias added in spans of 16 to 768 elements (ONNX Runtime's broadcast
loop), a per-channel scale, a scalar, PRelu with its slope per channel, per element and scalar, and the
unary ops calibrate times one by one. Every case is timed by ONNX Runtime (default threads, the median of
the faster half of its runs, the best of three such medians) and estimated with ``--hw`` (a profile from
``dnnperf calibrate`` on this machine). The measured time is a whole ``session.run``: it holds the run's
fixed cost (a few microseconds here), which the estimate of one kernel does not. Nothing is asserted: the
table is for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def cases():
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def vi(n, s):
        return helper.make_tensor_value_info(n, TensorProto.FLOAT, s)

    def w(n, s):
        return numpy_helper.from_array(np.random.default_rng(1).standard_normal(s).astype(np.float32), n)

    def case(name, op, ins, out, inits=()):
        node = helper.make_node(op, [n for n, _ in ins] + [t.name for t in inits], ["y"])
        g = helper.make_graph([node], name, [vi(n, s) for n, s in ins], [vi("y", out)], list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        feeds = {n: np.random.default_rng(0).standard_normal(s).astype(np.float32) for n, s in ins}
        return name, m, feeds

    s, c = [1, 64, 64, 96], [1, 64, 56, 56]
    out = [case(f"{op} same shape {s}", op, [("a", s), ("b", s)], s) for op in ("Add", "Mul", "Sub", "Max", "Min")]
    out.append(case(f"Add same shape {c}", "Add", [("a", c), ("b", c)], c))
    for width in (16, 48, 96, 192, 768):
        rows = 393_216 // width
        out.append(case(f"Add bias [{rows}, {width}] + [{width}]", "Add", [("a", [rows, width])], [rows, width],
                        [w("b", [width])]))
    out.append(case(f"Mul {c} x [1, 64, 1, 1]", "Mul", [("a", c)], c, [w("b", [1, 64, 1, 1])]))
    out.append(case(f"Mul {s} x scalar", "Mul", [("a", s)], s, [w("b", [])]))
    out.append(case("Add [64, 3, 64, 64] + [1, 3, 64, 64]", "Add", [("a", [64, 3, 64, 64])], [64, 3, 64, 64],
                    [w("b", [1, 3, 64, 64])]))
    out.append(case("Mul [3136, 64] x [3136, 1]", "Mul", [("a", [3136, 64]), ("b", [3136, 1])], [3136, 64]))
    out.append(case(f"PRelu {c} slope [64, 1, 1]", "PRelu", [("a", c)], c, [w("b", [64, 1, 1])]))
    out.append(case(f"PRelu {s} slope per element", "PRelu", [("a", s), ("b", s)], s))
    out.append(case(f"PRelu {s} scalar slope", "PRelu", [("a", s)], s, [w("b", [1])]))
    for op in ("Relu", "Abs", "Neg", "Clip", "HardSigmoid", "HardSwish", "LeakyRelu", "Reciprocal", "Floor",
               "Softsign"):
        out.append(case(f"{op} {s}", op, [("a", s)], s))
    out.append(case(f"Sigmoid {c}", "Sigmoid", [("a", c)], c))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hw", required=True, help="a profile from dnnperf calibrate on this machine")
    ap.add_argument("--only", nargs="*", default=(), help="cases whose name holds one of these words")
    a = ap.parse_args()
    from dnnperf.api import analyze, inspect_graph
    from dnnperf.hardware import load_profile
    from dnnperf.ir import ShapeOverrides
    from dnnperf.load import load_graph
    from dnnperf.measure.ort import median_run, session
    from dnnperf.scoring import Settings

    hw = load_profile(a.hw)
    print(f"{'case':46s} {'measured':>10s} {'estimated':>10s} {'est/meas':>9s}")
    for name, m, feeds in cases():
        if a.only and not any(o in name for o in a.only):
            continue
        data = m.SerializeToString()
        sess = session(data, None)
        measured = min(median_run(sess, feeds, 5, 200, 0.5) for _ in range(3))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "op.onnx")
            with open(path, "wb") as fh:
                fh.write(data)
            rep = analyze(inspect_graph(load_graph(path, ShapeOverrides()), path), hw, Settings(fusion="typical"),
                          with_fixes=False)
        est = rep.score.totals["latency_s"]
        print(f"{name:46s} {measured * 1e6:8.1f} us {est * 1e6:7.1f} us {est / measured:8.2f}x")


if __name__ == "__main__":
    main()
