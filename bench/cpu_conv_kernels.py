"""Convolutions ONNX Runtime's CPU provider runs with kernels of their own, timed alone against dnnperf's estimate.

    pip install ".[measure]" && python bench/cpu_conv_kernels.py [--hw PROFILE.yaml] [--runs 300]

Two sets of one-layer models, each timed in a session of its own (2 threads unless --threads; the median of
--runs runs, less a one-Identity session's time on the same input), next to dnnperf's estimate on a calibrated
profile (``--hw``; without it a fresh ``calibrate`` of this machine, about a minute and a half):

- ``int8``: ONNX Runtime's channels-last 8-bit convolution (com.microsoft QLinearConv, uint8 data, int8 weights
  with zero points of 0), the kernel a QDQ model's quantized convolutions run as: depthwise layers at channel
  counts in and out of whole groups of 16 (MLAS's fast and generic depthwise kernels) and pointwise ones whose
  channels are 2 mod 4 (ShuffleNet's 58) next to aligned neighbours;
- ``plain``: a float depthwise Conv whose weights a DequantizeLinear makes at run time (a QDQ model's float layers:
  no blocked layout) or whose channel count no block takes, stride 1 and 2, from 49 to 12,544 output pixels.

Per shape: measured and predicted time and their ratio; per set, the median ratio and the range. The baseline of
every ratio is the measurement taken in the same run; nothing is asserted. The shapes at the calibration's own
points (``dnnperf.measure.micro``: 58 channels at 28 x 28 and 56 x 56, 234 at 7 x 7, 84 / 88 / 96 at 56 x 56) are
marked ``*``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from cpu_blocks import calibrated_path  # noqa: E402  (the given profile, or a fresh calibration)

# (input channels, output channels, input side, kernel, stride, groups)
INT8 = [(80, 80, 56, 3, 1, 80), (72, 72, 56, 3, 1, 72), (88, 88, 56, 3, 1, 88), (72, 72, 28, 3, 1, 72),
        (58, 58, 28, 3, 1, 58), (58, 58, 56, 3, 2, 58), (116, 116, 14, 3, 1, 116), (232, 232, 7, 3, 1, 232),
        (24, 24, 112, 3, 2, 24), (96, 96, 56, 3, 1, 96), (144, 144, 56, 3, 1, 144),
        (56, 56, 28, 1, 1, 1), (58, 58, 28, 1, 1, 1), (64, 64, 56, 1, 1, 1), (62, 64, 56, 1, 1, 1),
        (24, 56, 56, 1, 1, 1), (24, 58, 56, 1, 1, 1), (256, 256, 14, 1, 1, 1), (256, 250, 14, 1, 1, 1)]
# (channels, input side, stride)
PLAIN = [(58, 28, 1), (234, 7, 1), (58, 56, 1), (576, 14, 1), (960, 7, 1), (144, 56, 1), (116, 14, 1), (32, 112, 1),
         (58, 112, 1), (16, 112, 1), (58, 56, 2), (234, 14, 2), (58, 112, 2), (576, 14, 2), (192, 28, 2),
         (96, 112, 2), (32, 224, 2)]
CALIBRATED_INT8 = {(96, 56, 96), (84, 56, 84), (88, 56, 88)}
CALIBRATED_PLAIN = {(58, 28, 1), (234, 7, 1), (58, 56, 1), (58, 56, 2), (234, 14, 2), (58, 112, 2)}


def _int8_model(cin, cout, side, k, stride, group):
    import numpy as np
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    inits = [nh.from_array(np.array(0.02, np.float32), "s"), nh.from_array(np.array(128, np.uint8), "z"),
             nh.from_array(rng.integers(-3, 4, (cout, cin // group, k, k)).astype(np.int8), "w"),
             nh.from_array(np.array(0.01, np.float32), "ws"), nh.from_array(np.array(0, np.int8), "wz"),
             nh.from_array(np.array(0.05, np.float32), "ys")]
    node = h.make_node("QLinearConv", ["x", "s", "z", "w", "ws", "wz", "ys", "z"], ["y"], domain="com.microsoft",
                       channels_last=1, group=group, kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride] * 2)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.UINT8, [1, side, side, cin])],
                     [h.make_tensor_value_info("y", T.UINT8, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)])
    return m, rng.integers(0, 255, (1, side, side, cin)).astype(np.uint8)


def _plain_model(c, side, stride):
    import numpy as np
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.integers(-3, 4, (c, 1, 3, 3)).astype(np.int8), "wq"),
             nh.from_array(np.array(0.01, np.float32), "ws"), nh.from_array(np.array(0, np.int8), "wz")]
    nodes = [h.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
             h.make_node("Conv", ["x", "w"], ["y"], group=c, pads=[1, 1, 1, 1], strides=[stride] * 2)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, c, side, side])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    return m, rng.standard_normal((1, c, side, side)).astype(np.float32)


def _median_run(model, x, threads: int, runs: int) -> float:
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    for _ in range(20):
        s.run(None, {"x": x})
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        s.run(None, {"x": x})
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def _session_floor(x, threads: int, runs: int) -> float:
    from onnx import helper as h

    elem = 2 if x.dtype.name == "uint8" else 1
    g = h.make_graph([h.make_node("Identity", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", elem, list(x.shape))],
                     [h.make_tensor_value_info("y", elem, None)])
    return _median_run(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), x, threads, runs)


def _estimate(model, hw, work: str) -> float:
    import onnx

    from dnnperf.api import analyze, inspect_model
    from dnnperf.ir import ShapeOverrides
    from dnnperf.scoring import Settings

    path = os.path.join(work, "one.onnx")
    onnx.save(model, path)
    rep = analyze(inspect_model(path, ShapeOverrides(batch=1)), hw, Settings(fusion="typical"), with_fixes=False)
    return sum(c.time_s for c in rep.score.layers)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hw", help="a calibrated CPU profile (default: calibrate this machine now)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=300)
    a = ap.parse_args()
    from dnnperf.hardware import load_profile

    work = tempfile.mkdtemp()
    hw = load_profile(calibrated_path(a.hw, a.threads))
    for name, shapes, build, mark in (
            ("int8", INT8, lambda s: _int8_model(*s), lambda s: (s[0], s[2], s[5]) in CALIBRATED_INT8),
            ("plain", PLAIN, lambda s: _plain_model(*s), lambda s: s in CALIBRATED_PLAIN)):
        print(f"\n{name}:")
        ratios = []
        for shape in shapes:
            model, x = build(shape)
            measured = _median_run(model, x, a.threads, a.runs) - _session_floor(x, a.threads, a.runs)
            predicted = _estimate(model, hw, work)
            ratio = predicted / max(measured, 1e-9)
            ratios.append(ratio)
            print(f"  {str(shape):28} measured {measured * 1e6:8.1f} us  predicted {predicted * 1e6:8.1f} us  "
                  f"{ratio:5.2f}x{' *' if mark(shape) else ''}", flush=True)
        print(f"  median {statistics.median(ratios):.2f}x, {min(ratios):.2f}-{max(ratios):.2f}x over {len(ratios)} shapes")


if __name__ == "__main__":
    main()
