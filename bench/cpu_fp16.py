"""16-bit models on a CPU without 16-bit arithmetic: dnnperf's estimates against ONNX Runtime's CPU provider.

    pip install ".[measure]" && python bench/cpu_fp16.py [--hw local.yaml] [--old-root DIR --old-hw OLD.yaml]

Each model is converted to fp16 here (every float tensor, initializer, constant and Cast target; weightless
skeletons stay weightless: validate fills stand-in weights of the new type) and validated next to its fp32
original on this machine: predicted / measured latency (``dnnperf validate``'s figures, the estimate as
calibrated). Two sets: ``tune`` (the sample CNNs, looked at while dnnperf.upcast's rules were built) and
``held_out`` (torchvision models of bench/models/cpu nothing was fitted on). Per set: median |error| of
the fp16 and of the fp32 models, measured in the same run (the fp32 line is the baseline: what the
machine's state does to every estimate alike). ``--old-root``: a checkout of another commit whose estimate
of the same fp16 files is printed beside (with ``--old-hw``: its own profile, for a calibration whose
figures the older code does not read). Without ``--hw`` a fresh calibration is taken first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from cpu_blocks import calibrated_path  # noqa: E402  (the given profile, or a fresh calibration)

SETS = {
    "tune": [os.path.join(ROOT, "sample_models", f"{m}.onnx")
             for m in ("resnet50", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0")],
    "held_out": [os.path.join(HERE, "models", "cpu", f"{m}.onnx")
                 for m in ("efficientnet_b0", "regnet_x_400mf", "densenet121", "mnasnet1_0", "resnet18", "googlenet",
                           "mobilenet_v3_large", "convnext_tiny")],
}
# a second interpreter's estimate (--old-root): the same files through another checkout's code
OLD_ESTIMATE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from dnnperf.api import analyze, inspect_model
from dnnperf.hardware import load_profile
from dnnperf.ir import ShapeOverrides
from dnnperf.scoring import Settings
hw = load_profile(sys.argv[2])
print(json.dumps({p: analyze(inspect_model(p, ShapeOverrides(batch=1)), hw, Settings(fusion="typical"),
                             with_fixes=False).score.totals["latency_s"] for p in sys.argv[3:]}))
"""


def to_fp16(src: str, dst: str) -> None:
    """``src`` with every float32 tensor made float16: graph inputs, outputs and value infos, initializers
    (their bytes converted; an external one keeps its reference, as a skeleton's does), Constant values and
    Cast targets. A model's own shape arithmetic (int64) is left as it is."""
    import numpy as np
    import onnx
    from onnx import TensorProto

    m = onnx.load(src, load_external_data=False)
    for v in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16

    def half(t) -> None:
        if t.data_type != TensorProto.FLOAT:
            return
        if t.raw_data:
            t.raw_data = np.frombuffer(t.raw_data, np.float32).astype(np.float16).tobytes()
        elif len(t.float_data):
            values = np.array(t.float_data, np.float32).astype(np.float16)
            del t.float_data[:]
            t.raw_data = values.tobytes()
        t.data_type = TensorProto.FLOAT16

    for t in m.graph.initializer:
        half(t)
    for n in m.graph.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
            if a.type == onnx.AttributeProto.TENSOR:
                half(a.t)
    onnx.save(m, dst)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hw", help="a calibrated profile (default: calibrate now)")
    ap.add_argument("--old-root", help="another checkout whose estimate of the fp16 files is printed beside")
    ap.add_argument("--old-hw", help="the profile the --old-root code reads (default: --hw)")
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    from dnnperf.hardware import load_profile
    from dnnperf.ir import ShapeOverrides
    from dnnperf.measure import validate

    work = tempfile.mkdtemp()
    path = calibrated_path(a.hw)
    hw = load_profile(path)
    halves = {}
    for name, models in SETS.items():
        for p in models:
            halves[p] = os.path.join(work, os.path.basename(p).replace(".onnx", "_fp16.onnx"))
            to_fp16(p, halves[p])
    old = {}
    if a.old_root:
        out = subprocess.run([sys.executable, "-c", OLD_ESTIMATE, a.old_root, a.old_hw or path, *halves.values()],
                             capture_output=True, text=True, check=True).stdout
        old = json.loads(out)
    for name, models in SETS.items():
        print(f"\n{name}: model, measured fp32 / fp16, error fp32 / fp16" + (" / fp16 with --old-root" if old else ""))
        e32, e16, eold = [], [], []
        for p in models:
            rows = []
            for f in (p, halves[p]):
                d = validate(f, hw, ShapeOverrides(batch=1), runs=a.runs, strict=False, drift=False)
                rows.append(d)
            m32, m16 = rows[0]["measured_s"], rows[1]["measured_s"]
            e32.append(rows[0]["error"])
            e16.append(rows[1]["error"])
            line = (f"  {os.path.basename(p)[:-5]:20} {m32 * 1e3:8.2f} / {m16 * 1e3:8.2f} ms   "
                    f"{rows[0]['error'] * 100:+6.1f}% / {rows[1]['error'] * 100:+6.1f}%")
            if old:
                eold.append((old[halves[p]] - m16) / m16)
                line += f" / {eold[-1] * 100:+6.1f}%"
            print(line, flush=True)
        med = lambda xs: statistics.median(abs(x) for x in xs) * 100  # noqa: E731
        print(f"  median |error|: fp32 {med(e32):.1f}%, fp16 {med(e16):.1f}%" + (f", fp16 --old-root {med(eold):.1f}%"
                                                                                 if old else ""))


if __name__ == "__main__":
    main()
