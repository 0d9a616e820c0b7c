"""CPU Transposes, one node each, measured against their estimate.

    pip install ".[measure]" && python bench/cpu_transposes.py --hw local.yaml

ONNX Runtime's CPU Transpose runs a permutation in one of four ways (``dnnperf.ops.transpose``): one memcpy
when the axes larger than 1 keep their order, a tiled 2-D transpose when the last axis moves with one other,
one copy call per run of the trailing axes it leaves in place, and a loop over every element otherwise.
Each case below is a one-node model; its kernel time is read off ONNX Runtime's profiler
(``dnnperf.measure.ort.profiled_kernels``: default threads, the robust median of 50 runs after 10, the best of
``--rounds`` such medians) and set against dnnperf's estimate of
that layer with ``--hw`` (a profile from ``dnnperf calibrate`` on this machine), the layer alone (no call
cost). The "held out" cases were never looked at while the rules were built. Prints each case and, per
group, the median |error| and the share within 1.25x and 1.5x. Nothing is asserted: the table is for
bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

# (shape, perm, dtype): the shapes the rules were read from (attention heads, channel shuffles, NCHW <->
# NHWC, Swin's partitions, runs of 4 to 3,072 elements, past the cache)...
SEEN = [((1, 12, 197, 64), (0, 2, 1, 3), "f32"), ((1, 128, 12, 64), (0, 2, 1, 3), "f32"),
        ((1, 2, 58, 28, 28), (0, 2, 1, 3, 4), "f32"), ((1, 64, 56, 56), (0, 2, 3, 1), "f32"),
        ((1, 56, 56, 64), (0, 3, 1, 2), "f32"), ((16, 32, 49, 12), (2, 0, 3, 1), "f32"),
        ((1, 8, 7, 8, 7, 96), (0, 1, 3, 2, 4, 5), "f32"), ((64, 49, 3, 3, 32), (2, 0, 3, 1, 4), "f32"),
        ((1, 12, 16384, 4), (0, 2, 1, 3), "f32"), ((1, 12, 4096, 16), (0, 2, 1, 3), "f32"),
        ((1, 12, 85, 768), (0, 2, 1, 3), "f32"), ((1, 12, 5461, 64), (0, 2, 1, 3), "f32"),
        ((1, 768, 3136), (0, 2, 1), "f32"), ((1, 197, 768), (1, 0, 2), "f32"),
        ((1, 12, 1024, 64), (0, 2, 1, 3), "f16"), ((1, 64, 56, 56), (0, 2, 3, 1), "f16")]
# ... and cases never looked at
HELD_OUT = [((1, 16, 384, 64), (0, 2, 1, 3), "f32"), ((8, 197, 12, 64), (0, 2, 1, 3), "f32"),
            ((1, 3, 40, 28, 28), (0, 2, 1, 3, 4), "f32"), ((1, 112, 112, 32), (0, 3, 1, 2), "f32"),
            ((4, 64, 56, 56), (0, 2, 3, 1), "f32"), ((1, 8, 7, 8, 7, 128), (0, 1, 3, 2, 4, 5), "f32"),
            ((1, 3, 85, 20, 20), (0, 1, 3, 4, 2), "f32"), ((1, 16, 2, 2, 56, 56), (0, 1, 4, 2, 5, 3), "f32"),
            ((1, 512, 1, 1024), (0, 2, 1, 3), "f32"), ((1, 16, 256, 64), (0, 2, 1, 3), "f16"),
            ((1, 1536, 3136), (0, 2, 1), "f32"), ((2, 24, 4096, 32), (0, 2, 1, 3), "f32")]


def _model(shape, perm, dtype: str) -> bytes:
    from onnx import TensorProto, helper

    t = TensorProto.FLOAT16 if dtype == "f16" else TensorProto.FLOAT
    g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=list(perm), name="t")], "t",
                          [helper.make_tensor_value_info("x", t, list(shape))],
                          [helper.make_tensor_value_info("y", t, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def kernel_us(model: bytes, shape, dtype: str, rounds: int) -> float:
    import numpy as np

    from dnnperf.measure.ort import profiled_kernels

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float16 if dtype == "f16" else np.float32)
    return min(profiled_kernels(model, {"x": x}, None, runs=50, warmup=10)["t"][1] for _ in range(rounds))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hw", default="profiles/local.yaml")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    from dnnperf.api import analyze, inspect_model
    from dnnperf.hardware import load_profile
    from dnnperf.scoring import Settings

    hw = load_profile(a.hw)
    tmp = tempfile.mkdtemp()
    print(f"{'shape':24s} {'perm':20s} dtype {'measured':>9s} {'estimate':>9s} ratio  kind")
    for group, cases in (("seen", SEEN), ("held out", HELD_OUT)):
        ratios = []
        for shape, perm, dtype in cases:
            path, model = os.path.join(tmp, "t.onnx"), _model(shape, perm, dtype)
            with open(path, "wb") as fh:
                fh.write(model)
            meas = kernel_us(model, shape, dtype, a.rounds)
            rep = analyze(inspect_model(path), hw, Settings(fusion="typical"), with_fixes=False)
            layer = rep.score.layers[0]
            est = layer.time_s * 1e6
            kind = layer.layer.workload.kernel or "2-D"
            ratios.append(est / meas)
            print(f"{str(shape):24s} {str(perm):20s} {dtype:5s} {meas:9.1f} {est:9.1f} {est / meas:5.2f}  {kind}",
                  flush=True)
        errs = [max(r, 1 / r) for r in ratios]
        print(f"{group}: {len(ratios)} cases, median estimate/measured {statistics.median(ratios):.2f}x, "
              f"median |error| {statistics.median(errs):.2f}x, within 1.25x {sum(e <= 1.25 for e in errs)}/"
              f"{len(errs)}, within 1.5x {sum(e <= 1.5 for e in errs)}/{len(errs)}\n", flush=True)


if __name__ == "__main__":
    main()
