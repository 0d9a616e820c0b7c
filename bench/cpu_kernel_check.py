"""Issue 15: how many kernels ONNX Runtime's CPU provider runs per model, against dnnperf's count, with no
timing.

    pip install ".[measure]" && python bench/cpu_kernel_check.py --layout 16,16,4,16 [--diff] [DIR_OR_MODEL ...]

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
    """A copy of ``path`` in ``work`` with its weights materialised and a symbolic batch fixed at 1; a tanh GELU's
    scalars get gelu_new's values, as ``dnnperf validate`` gives them (random ones hide the FastGelu)."""
    import numpy as np
    import onnx

    from bench_inspect import materialise
    from dnnperf.ir import ShapeOverrides
    from dnnperf.load import load_graph
    from dnnperf.tanh_gelu import tanh_gelu_constants

    full = os.path.join(work, "full.onnx")
    materialise(path, full)
    m = onnx.load(full)
    try:
        gelu = tanh_gelu_constants(load_graph(path, ShapeOverrides(dims=(("sequence_length", 128),), strict=False)))
    except DnnperfError:  # (a decoder with a KV cache, which main() skips)
        gelu = {}
    for init in m.graph.initializer:
        if init.name in gelu:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(init.data_type)
            init.CopyFrom(onnx.numpy_helper.from_array(np.full(tuple(init.dims), gelu[init.name], dtype), init.name))
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


def predicted_kernels(path: str, hw) -> collections.Counter:
    """Op type -> dnnperf's kernels of ``path`` (a fused layer under its first op)."""
    out: collections.Counter = collections.Counter()
    for c in typical_layers(path, hw):
        w = c.layer.workload
        if c.layer.op_type != "LayoutReorder" and w.family not in ("view", "shape", "shape_runtime") and w.launches:
            out[c.layer.op_type.split("+")[0]] += w.launches
    return out


# the runtime's names for a product (a MatMul with its bias is a Gemm, with a scale or transpose a FusedMatMul)
_PRODUCTS = {"Gemm": "MatMul", "FusedMatMul": "MatMul", "FusedGemm": "MatMul"}


def op_differences(rt: collections.Counter, pred: collections.Counter) -> str:
    """'op runtime/dnnperf' for each op type whose kernel counts differ, products under one name."""
    a, b = collections.Counter(), collections.Counter()
    for src, dst in ((rt, a), (pred, b)):
        for op, k in src.items():
            dst[_PRODUCTS.get(op, op)] += k
    ops = sorted(set(a) | set(b), key=lambda o: -abs(a[o] - b[o]))
    return ", ".join(f"{o} {a[o]}/{b[o]}" for o in ops if a[o] != b[o])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", help="model files or folders (default: bench/models/cpu + samples)")
    ap.add_argument("--hw", help="a calibrated CPU profile of this machine")
    ap.add_argument("--layout", help="BLOCK,GROUPED_MIN,ALIGN,POOL_ALIGN laid over the profile")
    ap.add_argument("--diff", action="store_true",
                    help="for each model off the runtime's count, the op types that differ")
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
                pred = predicted_kernels(full, hw)
            except DnnperfError as e:  # a decoder with a KV cache: its cache length is not the batch's
                skipped.append(os.path.basename(path)[:-5])
                print(f"{os.path.basename(path)[:-5]:<36} skipped: {str(e)[:120]}", flush=True)
                continue
            rt = runtime_kernels(full, work)
        n_rt, n_pred = sum(rt.values()), sum(pred.values())
        exact += n_rt == n_pred
        total_rt, total_pred = total_rt + n_rt, total_pred + n_pred
        top = ", ".join(f"{op} {k}" for op, k in rt.most_common(4))
        print(f"{os.path.basename(path)[:-5]:<36} {n_rt:>8} {n_pred:>8}  {top}", flush=True)
        if a.diff and n_rt != n_pred:
            print(f"{'':<36} {'':>17}  differ (runtime/dnnperf): {op_differences(rt, pred)}", flush=True)
    print(f"{exact}/{len(rows) - len(skipped)} models with the runtime's kernel count; runtime {total_rt}, "
          f"dnnperf {total_pred}" + (f" ({len(skipped)} skipped: {', '.join(skipped)})" if skipped else ""))


if __name__ == "__main__":
    main()
