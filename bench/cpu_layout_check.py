"""Issue 15: the CPU model's structure against ONNX Runtime's own optimised graph, with no timing.

    pip install ".[measure]" && python bench/cpu_layout_check.py --hw local.yaml [DIR_OR_MODEL ...]
    python bench/cpu_layout_check.py --layout 16,16,4,16 bench/models/cpu

For every model (default: ``bench/models/cpu`` and the sample models), ONNX Runtime (all graph
optimisations, this machine's instruction set) writes its optimised graph; the script counts the layout
conversions in it (``ReorderInput`` / ``ReorderOutput`` of the channel-blocked NCHWc layout) and the
``LayoutReorder`` layers dnnperf predicts with ``--fusion typical`` on the profile's ``cpu_layout``,
and lists the tensors converted by one side only. The profile must describe this machine's blocked
layout: a profile from ``dnnperf calibrate`` here, or ``--layout BLOCK,GROUPED_MIN,ALIGN,POOL_ALIGN``
laid over the shipped ``cpu-avx512`` profile (this machine's calibration: 16,16,4,16).

Unlike ``validate`` this does not depend on how busy the machine is: a conversion is in the runtime's
graph or it is not. Skeletons get random weights first (ONNX Runtime needs the bytes). Nothing is
asserted; the counts go in the closing notes and ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

SAMPLES = ("resnet50", "mobilenet_v2", "shufflenet_v2_x1_0", "squeezenet1_1", "vit_b_16", "swin_t")


def _models(args: list[str]) -> list[str]:
    if not args:
        return sorted(glob.glob(os.path.join(HERE, "models", "cpu", "*.onnx"))) + [
            os.path.join(ROOT, "sample_models", f"{m}.onnx") for m in SAMPLES]
    out = []
    for a in args:
        out += sorted(glob.glob(os.path.join(a, "*.onnx"))) if os.path.isdir(a) else [a]
    return out


def _profile(hw: str | None, layout: str | None):
    from dnnperf.hardware import load_profile

    prof = load_profile(hw or "cpu-avx512")
    if layout:
        from dataclasses import replace

        prof = replace(prof, cpu_layout=tuple(int(v) for v in layout.split(",")))
    if prof.cpu_layout is None:
        sys.exit("the profile has no cpu_layout: pass a profile from `dnnperf calibrate` or --layout B,G,A,P")
    return prof


def runtime_conversions(path: str, work: str) -> set[tuple[str, str]]:
    """(direction, tensor) of every layout conversion in ONNX Runtime's optimised graph of ``path``."""
    import onnx
    import onnxruntime as ort

    from bench_inspect import materialise

    full = os.path.join(work, "full.onnx")
    materialise(path, full)
    so = ort.SessionOptions()
    so.optimized_model_filepath = os.path.join(work, "optimised.onnx")
    so.log_severity_level = 3
    ort.InferenceSession(full, so, providers=["CPUExecutionProvider"])
    g = onnx.load(so.optimized_model_filepath, load_external_data=False).graph
    return ({("into", n.input[0]) for n in g.node if n.op_type == "ReorderInput"}
            | {("out of", n.output[0]) for n in g.node if n.op_type == "ReorderOutput"})


def typical_layers(path: str, hw):
    """dnnperf's layers of ``path`` at batch 1 with ``--fusion typical`` on ``hw``: a transformer's sequence
    length as the other benchmarks give it (ignored where the model has none; the runtime's graph keeps it
    symbolic, and neither side converts a layout around a product)."""
    from dnnperf.api import analyze, inspect_model
    from dnnperf.errors import DnnperfError
    from dnnperf.ir import ShapeOverrides
    from dnnperf.scoring import Settings

    dims = (("sequence_length", 128),)
    try:
        insp = inspect_model(path, ShapeOverrides(batch=1, dims=dims, strict=False))
    except DnnperfError:  # a detector that takes one image without a batch axis: --batch is refused
        insp = inspect_model(path, ShapeOverrides(dims=dims, strict=False))
    return analyze(insp, hw, Settings(fusion="typical"), with_fixes=False).score.layers


def predicted_conversions(path: str, hw) -> set[tuple[str, str]]:
    out = set()
    for c in typical_layers(path, hw):
        if c.layer.op_type == "LayoutReorder":
            for way in ("into", "out of"):
                head = f"reorder {way} "
                if c.layer.name.startswith(head):
                    out.add((way, c.layer.name[len(head):].split(" (channels last")[0]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", help="model files or folders (default: bench/models/cpu + samples)")
    ap.add_argument("--hw", help="a calibrated CPU profile of this machine")
    ap.add_argument("--layout", help="BLOCK,GROUPED_MIN,ALIGN,POOL_ALIGN laid over the profile")
    ap.add_argument("--show", type=int, default=0, help="list up to N tensors converted by one side only")
    a = ap.parse_args()
    hw = _profile(a.hw, a.layout)
    exact, total_rt, total_pred, total_diff = 0, 0, 0, 0
    rows = _models(a.models)
    print(f"{'model':<28} {'runtime':>8} {'dnnperf':>8} {'only runtime':>13} {'only dnnperf':>13}")
    for path in rows:
        with tempfile.TemporaryDirectory() as work:
            rt = runtime_conversions(path, work)
        pred = predicted_conversions(path, hw)
        only_rt, only_pred = rt - pred, pred - rt
        exact += not only_rt and not only_pred
        total_rt, total_pred, total_diff = total_rt + len(rt), total_pred + len(pred), total_diff + len(only_rt) + len(only_pred)
        print(f"{os.path.basename(path)[:-5]:<28} {len(rt):>8} {len(pred):>8} {len(only_rt):>13} {len(only_pred):>13}",
              flush=True)
        for way, t in sorted(only_rt)[:a.show]:
            print(f"    only runtime: {way} {t}")
        for way, t in sorted(only_pred)[:a.show]:
            print(f"    only dnnperf: {way} {t}")
    print(f"{exact}/{len(rows)} models with the same conversions; runtime {total_rt}, dnnperf {total_pred}, "
          f"tensors converted by one side only {total_diff}")


if __name__ == "__main__":
    main()
