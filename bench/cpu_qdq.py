"""CPU estimates of QDQ models as ONNX Runtime's own quantizer writes them, against ONNX Runtime running them.

    pip install ".[measure]" && python bench/cpu_qdq.py [--set tune|held_out|all] [--runs 5]

Each model (sample models and bench/models/cpu skeletons) gets stand-in weights (scaled by 1/sqrt(fan-in),
so that activations stay finite), its batch fixed at 1, and is quantized by
``onnxruntime.quantization.quantize_static`` in QDQ form (uint8 activations, int8 weights, three random
calibration images). Then, as a user does: a fresh ``calibrate`` (default mode) and ``validate`` on every
model. Per model: measured latency, predicted / measured error, and the kinds of layer that carry the most
time (predicted / measured); per set, the median |error|. The "tune" set is the models the ONNX Runtime QDQ
rules were worked out on (MobileNetV2, SqueezeNet 1.1, ShuffleNetV2 1.0, ResNet-50); "held_out" was looked at
only after (GoogLeNet, EfficientNet-B0, MnasNet 1.0, RegNetX-400MF, ResNet-18, MobileNetV3-Large). The
baseline of every error is the measurement taken in the same run; nothing is asserted.
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
sys.path.insert(0, HERE)

SETS = {"tune": [("sample_models", m) for m in ("mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0", "resnet50")],
        "held_out": [("bench/models/cpu", m) for m in ("googlenet", "efficientnet_b0", "mnasnet1_0", "regnet_x_400mf",
                                                       "resnet18", "mobilenet_v3_large")]}


def quantized(folder: str, name: str, out: str) -> str:
    """``name``'s skeleton with stand-in weights, quantized to QDQ by ONNX Runtime's quantizer; its path."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from bench_inspect import materialise

    full = os.path.join(out, f"{name}_full.onnx")
    materialise(os.path.join(ROOT, folder, f"{name}.onnx"), full)
    m = onnx.load(full)
    for i in m.graph.input:
        d = i.type.tensor_type.shape.dim[0]
        d.ClearField("dim_param")
        d.dim_value = 1
    for init in m.graph.initializer:
        a = numpy_helper.to_array(init)
        if a.dtype == np.float32 and a.ndim >= 2:
            a = a * np.float32(np.sqrt(1.0 / int(np.prod(a.shape[1:]))))
        elif a.dtype == np.float32 and a.ndim == 1:
            a = a * np.float32(0.01)
        init.CopyFrom(numpy_helper.from_array(a.astype(a.dtype), init.name))
    onnx.save(m, full)
    name_in = m.graph.input[0].name

    class Images(CalibrationDataReader):
        def __init__(self):
            self.n = 0

        def get_next(self):
            if self.n >= 3:
                return None
            self.n += 1
            return {name_in: np.random.default_rng(self.n).standard_normal((1, 3, 224, 224)).astype(np.float32)}

    path = os.path.join(out, f"{name}_qdq.onnx")
    quantize_static(full, path, Images(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=("tune", "held_out", "all"), default="all")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    import logging

    import yaml

    from dnnperf.hardware import load_profile
    from dnnperf.ir import ShapeOverrides
    from dnnperf.measure import calibrate, validate

    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's advice to pre-process
    tmp = tempfile.mkdtemp()
    sets = ("tune", "held_out") if a.set == "all" else (a.set,)
    paths = {s: [quantized(folder, name, tmp) for folder, name in SETS[s]] for s in sets}
    prof = calibrate(quick=False, strict=False)
    cal = os.path.join(tmp, "local.yaml")
    with open(cal, "w", encoding="utf-8") as fh:
        yaml.safe_dump(prof, fh, sort_keys=False)
    hw = load_profile(cal)
    print(f"calibrated: {prof['headline']['tops']} TOP/s, {prof['memory']['dram_gbs']} GB/s; DequantizeLinear "
          f"{prof['op_efficiency'].get('DequantizeLinear')}, QLinearAdd {prof['op_efficiency'].get('QLinearAdd')} of "
          f"their roofline, 8-bit MaxPool {prof['loop_ns'].get('MaxPool.int8')} ns an output", flush=True)
    for s in sets:
        errs = []
        print(f"\n{s}:")
        for p in paths[s]:
            d = validate(p, hw, ShapeOverrides(batch=1), runs=a.runs, strict=False, steady_retries=2)
            errs.append(abs(d["error"]))
            kinds = sorted(d["by_op"], key=lambda r: -max(r["measured_s"], r["predicted_s"]))[:4]
            parts = [f"{r['op_type']} x{r['layers']} {r['predicted_s'] * 1e6:.0f}/{r['measured_s'] * 1e6:.0f} us"
                     for r in kinds]
            print(f"  {os.path.basename(p):<30} measured {d['measured_s'] * 1e3:7.3f} ms  "
                  f"error {d['error'] * 100:+6.1f}%  | " + "; ".join(parts), flush=True)
        print(f"  median |error| {statistics.median(errs) * 100:.1f}% over {len(errs)} models")


if __name__ == "__main__":
    main()
