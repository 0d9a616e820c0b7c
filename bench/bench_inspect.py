"""Issue 2 benchmark: `dnnperf inspect` (in-process) against the floor of onnx.load +
onnx.shape_inference.infer_shapes on the same files, measured in the same run.

    python bench/bench_inspect.py [--repeat 7]

Prints, per file, the fastest of --repeat interleaved runs of both and the ratio dnnperf / floor.
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


def interleaved(fa, fb, repeat):
    """The fastest of ``repeat`` timed runs of each of two functions, run in turn (a busy moment
    of a shared machine only ever slows a run down, and it hits both sides alike)."""
    ta, tb = [], []
    fa(), fb()  # warm-up
    for _ in range(repeat):
        t = time.perf_counter()
        fa()
        ta.append(time.perf_counter() - t)
        t = time.perf_counter()
        fb()
        tb.append(time.perf_counter() - t)
    return min(ta), min(tb)


def materialise(src: str, dst: str) -> None:
    """Give every stripped initializer real (random) bytes, as in a full export."""
    import numpy as np
    import onnx

    m = onnx.load(src, load_external_data=False)
    rng = np.random.default_rng(0)
    for init in m.graph.initializer:
        if init.data_location == onnx.TensorProto.EXTERNAL:
            del init.external_data[:]
            init.data_location = onnx.TensorProto.DEFAULT
            n = int(np.prod(init.dims)) if len(init.dims) else 1
            dt = onnx.helper.tensor_dtype_to_np_dtype(init.data_type)
            init.raw_data = rng.standard_normal(n).astype(dt).tobytes()
    onnx.save(m, dst)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--nodes", type=int, default=50_000)
    args = ap.parse_args()

    import onnx

    from dnnperf.api import inspect_model
    from dnnperf.ir import ShapeOverrides
    from gen import transformer_like

    tmp = tempfile.mkdtemp()
    big = os.path.join(tmp, f"generated_{args.nodes}.onnx")
    with open(big, "wb") as fh:
        fh.write(transformer_like(args.nodes).SerializeToString())
    # every sample model; dims a model leaves symbolic besides the batch are given (ignored where absent)
    dims = (("sequence_length", 128), ("past_sequence_length", 128), ("total_sequence_length", 256))
    files = [(os.path.join(ROOT, "sample_models", f"{f}.onnx"), ShapeOverrides(batch=1, dims=dims, strict=False))
             for f in ("resnet50", "mobilenet_v2", "shufflenet_v2_x1_0", "squeezenet1_1", "vit_b_16", "swin_t", "gpt2",
                       "bert_base", "tiny_llama_kv", "tiny_llama_genai")]
    files.append((big, ShapeOverrides()))
    # the same architectures with their weights materialised (what a user usually has on disk)
    for name in ("resnet50", "vit_b_16"):
        full = os.path.join(tmp, f"{name}_full.onnx")
        materialise(os.path.join(ROOT, "sample_models", f"{name}.onnx"), full)
        files.append((full, ShapeOverrides(batch=1)))

    def floor(path):
        m = onnx.load(path, load_external_data=False)
        onnx.shape_inference.infer_shapes(m)

    print(f"{'file':<28} {'nodes':>7} {'floor s':>9} {'dnnperf s':>10} {'ratio':>7}")
    ratios = []
    for path, ov in files:
        n = len(onnx.load(path, load_external_data=False).graph.node)
        tf, td = interleaved(lambda p=path: floor(p), lambda p=path, o=ov: inspect_model(p, o), args.repeat)
        ratios.append(td / tf)
        print(f"{os.path.basename(path):<28} {n:>7} {tf:>9.3f} {td:>10.3f} {td / tf:>7.2f}")
    print(f"median ratio {statistics.median(ratios):.2f}  (floor = onnx.load + onnx.shape_inference.infer_shapes)")


if __name__ == "__main__":
    main()
