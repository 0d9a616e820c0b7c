"""Issue 15: how many kernels ONNX Runtime's CPU provider runs per model, against dnnperf's count, with no
timing.

    pip install ".[measure]" && python bench/cpu_kernel_check.py --layout 16,16,4,16 [DIR_OR_MODEL ...]

For every model (default: ``bench/models/cpu`` and the sample models), its batch is fixed at 1 in a copy
of the file (so the runtime folds its shape arithmetic), ONNX Runtime (all graph optimisations, this
machine's instruction set) writes its optimised graph of that copy, and the script counts the kernels in it:
every node but the layout conversions (``ReorderInput`` / ``ReorderOutput``, which
``bench/cpu_layout_check.py`` compares) and the ops that only relabel a buffer (Reshape, Squeeze,
Unsqueeze, Flatten, Identity). dnnperf's count is the launches of its layers of the same copy with
``--fusion typical`` on the profile, conversions and free layers left out (dnnperf reads a file whose
batch is symbolic as the runtime runs that file: shape arithmetic on the host, fewer fusions). A difference says which fusion rule is off (a
kernel the runtime runs that dnnperf fused away, or the reverse), whatever the machine's load. Nothing is
asserted; the counts go in the closing notes and ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from cpu_layout_check import _models, _profile, typical_layers  # noqa: E402
from dnnperf.errors import DnnperfError  # noqa: E402

VIEWS = frozenset({"ReorderInput", "ReorderOutput", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"})


def static_copy(path: str, work: str) -> str:
    """A copy of ``path`` in ``work`` with its weights materialised and a symbolic batch fixed at 1."""
    import onnx

    from bench_inspect import materialise

    full = os.path.join(work, "full.onnx")
    materialise(path, full)
    m = onnx.load(full)
    for vi in list(m.graph.input) + list(m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if dims and dims[0].dim_param:
            dims[0].ClearField("dim_param")
            dims[0].dim_value = 1
    onnx.save(m, full)
    return full


def runtime_kernels(full: str, work: str) -> collections.Counter:
    """Op type -> count of the kernels in ONNX Runtime's optimised graph of ``full``."""
    import onnx
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.optimized_model_filepath = os.path.join(work, "optimised.onnx")
    so.log_severity_level = 3
    ort.InferenceSession(full, so, providers=["CPUExecutionProvider"])
    g = onnx.load(so.optimized_model_filepath, load_external_data=False).graph
    return collections.Counter(n.op_type for n in g.node if n.op_type not in VIEWS)


def predicted_kernels(path: str, hw) -> int:
    return sum(c.layer.workload.launches for c in typical_layers(path, hw)
               if c.layer.op_type != "LayoutReorder" and c.layer.workload.family not in ("view", "shape", "shape_runtime"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", help="model files or folders (default: bench/models/cpu + samples)")
    ap.add_argument("--hw", help="a calibrated CPU profile of this machine")
    ap.add_argument("--layout", help="BLOCK,GROUPED_MIN,ALIGN,POOL_ALIGN laid over the profile")
    a = ap.parse_args()
    hw = _profile(a.hw, a.layout)
    rows = _models(a.models)
    exact = total_rt = total_pred = 0
    print(f"{'model':<36} {'runtime':>8} {'dnnperf':>8}  runtime's most frequent kernels")
    skipped = []
    for path in rows:
        with tempfile.TemporaryDirectory() as work:
            full = static_copy(path, work)
            try:
                n_pred = predicted_kernels(full, hw)
            except DnnperfError as e:  # a decoder with a KV cache: its cache length is not the batch's
                skipped.append(os.path.basename(path)[:-5])
                print(f"{os.path.basename(path)[:-5]:<36} skipped: {str(e)[:120]}", flush=True)
                continue
            rt = runtime_kernels(full, work)
        n_rt = sum(rt.values())
        exact += n_rt == n_pred
        total_rt, total_pred = total_rt + n_rt, total_pred + n_pred
        top = ", ".join(f"{op} {k}" for op, k in rt.most_common(4))
        print(f"{os.path.basename(path)[:-5]:<36} {n_rt:>8} {n_pred:>8}  {top}", flush=True)
    print(f"{exact}/{len(rows) - len(skipped)} models with the runtime's kernel count; runtime {total_rt}, "
          f"dnnperf {total_pred}" + (f" ({len(skipped)} skipped: {', '.join(skipped)})" if skipped else ""))


if __name__ == "__main__":
    main()
