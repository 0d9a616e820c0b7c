"""Issue 8 benchmark: LUT generation speed, against the floor of building each configuration as
an ONNX model and running onnx.shape_inference on it (what a naive tool would do), same run.

    python bench/bench_lut.py
"""

from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SPACE = {"ops": ["conv", "dwconv", "pwconv", "mbconv", "linear"], "channels_in": [16, 24, 32, 48, 64, 96],
         "channels_out": [16, 24, 32, 48, 64, 96], "kernel": [3, 5], "stride": [1, 2], "resolution": [112, 56, 28, 14],
         "expansion": [1, 3, 6], "batch": [1], "precision": ["fp32", "fp16"]}


def main() -> None:
    import onnx
    from onnx import TensorProto as T
    from onnx import helper

    from dnnperf.design import lut_space
    from dnnperf.hardware import load_profile

    hw = load_profile("v100")
    t = time.perf_counter()
    rows = lut_space(SPACE, hw)
    dt = time.perf_counter() - t
    print(f"dnnperf lut: {len(rows)} configurations in {dt:.3f} s = {len(rows) / dt:,.0f} configs/s")
    sample = rows[:300]
    t = time.perf_counter()
    for r in sample:
        k = r["kernel"]
        m = helper.make_model(helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["y"], pads=[k // 2] * 4, strides=[r["stride"]] * 2)], "g",
            [helper.make_tensor_value_info("x", T.FLOAT, [r["batch"], r["cin"], r["resolution"], r["resolution"]])],
            [helper.make_tensor_value_info("y", T.FLOAT, None)],
            [helper.make_tensor("w", T.FLOAT, [r["cout"], r["cin"], k, k], b"\x00" * (4 * r["cout"] * r["cin"] * k * k), raw=True)]))
        onnx.shape_inference.infer_shapes(m)
    df = (time.perf_counter() - t) / len(sample)
    print(f"floor (build one ONNX model + shape inference per configuration): {1 / df:,.0f} configs/s")
    print(f"ratio dnnperf / floor throughput: {(len(rows) / dt) * df:.2f}x")


if __name__ == "__main__":
    main()
