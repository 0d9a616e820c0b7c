"""Issue 15: what a network's far weights cost it, measured by making them near.

    pip install ".[measure]" && python bench/cpu_shared_weights.py --hw local.yaml [--rounds 10] [MODEL ...]

Each Conv / Gemm / MatMul of a model is pointed at the first initializer of its op, weight shape and group
count: the same work on the same shapes, with fewer distinct weight bytes, so a weight comes back from
much nearer (often from the layer before: RegNet's and EfficientNet's equal blocks). Both models are timed
in interleaved rounds on ONNX Runtime (the median of each round's faster runs, the median of the rounds);
the ratio shared / own is what the far weights cost. Next to it, dnnperf's estimate with ``--hw`` (a
profile from ``dnnperf calibrate`` on this machine, ``--fusion typical``) as it is and with every weight
read from 2 MB back (all weights near): its ratio is what the model thinks all far weights cost, so it
should sit at or below the measured ratio (the measured one shares only part of the weights). Prints the
weight bytes shared and the cost of a far weight per MB measured. Nothing is asserted: the table is for
bench/RESULTS.md (forty-fourth session: RegNetX-400MF 0.872 measured, 0.941 estimated with all weights near).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

DEFAULT_MODELS = ("regnet_x_400mf", "efficientnet_b0", "mobilenet_v3_large", "mnasnet1_0", "mobilenet_v3_small")
NEAR_BYTES = 2_000_000  # the reach every weight is read from in the "all weights near" estimate


def shared_copy(data: bytes) -> tuple[bytes, int, int]:
    """(the model with every matrix layer pointed at the first initializer of its kind, layers re-pointed,
    weight bytes no longer distinct)."""
    import numpy as np
    import onnx

    m = onnx.load_from_string(data)
    inits = {i.name: i for i in m.graph.initializer}
    first: dict[tuple, str] = {}
    moved = saved = 0
    for node in m.graph.node:
        if node.op_type not in ("Conv", "Gemm", "MatMul") or len(node.input) < 2 or node.input[1] not in inits:
            continue
        w = inits[node.input[1]]
        group = next((a.i for a in node.attribute if a.name == "group"), 1)
        key = (node.op_type, tuple(w.dims), w.data_type, group)
        if key in first and first[key] != node.input[1]:
            saved += int(np.prod(w.dims)) * np.dtype(onnx.helper.tensor_dtype_to_np_dtype(w.data_type)).itemsize
            moved += 1
            node.input[1] = first[key]
        else:
            first.setdefault(key, node.input[1])
    return m.SerializeToString(), moved, saved


def timed(jobs: dict, rounds: int, runs: int = 25) -> dict:
    """{name: (model bytes, feeds)} -> {name: median over rounds of each round's robust median}. A
    session lives only while its model is timed: an idle session's worker threads keep spinning and
    would slow the other one."""
    from dnnperf.measure.ort import robust_median, session

    seen: dict[str, list] = {k: [] for k in jobs}
    for _ in range(rounds):
        for k, (data, feeds) in jobs.items():
            sess = session(data, None)
            for _ in range(5):
                sess.run(None, feeds)
            ts = []
            for _ in range(runs):
                t = time.perf_counter()
                sess.run(None, feeds)
                ts.append(time.perf_counter() - t)
            seen[k].append(robust_median(ts))
            del sess
    return {k: statistics.median(v) for k, v in seen.items()}


def estimates(path: str, hw) -> tuple[float, float, int]:
    """(dnnperf's estimate, the same with every weight read from NEAR_BYTES back, the weight bytes)."""
    import dnnperf.reuse as reuse
    from dnnperf.api import _score, inspect_model
    from dnnperf.ir import ShapeOverrides
    from dnnperf.scoring import Settings

    insp = inspect_model(path, ShapeOverrides(batch=1))
    sc = _score(insp, hw, Settings(fusion="typical"))
    weights = sum(c.layer.workload.weight_bytes for c in sc.layers)
    arena = reuse.arena_bytes
    try:
        reuse.arena_bytes = lambda _insp, _layers: NEAR_BYTES - weights  # reach = weights + arena
        near = _score(insp, hw, Settings(fusion="typical")).totals["latency_s"]
    finally:
        reuse.arena_bytes = arena
    return sc.totals["latency_s"], near, weights


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", help="names in bench/models/cpu (default: five of them)")
    ap.add_argument("--hw", required=True, help="a profile calibrated on this machine")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()

    from dnnperf.hardware import load_profile
    from dnnperf.load import load_graph
    from dnnperf.measure.ort import feeds_for, runnable_bytes

    hw = load_profile(args.hw)
    dram = hw.dram_gbs * 1e9
    print(f"{'model':22s} {'weights':>8s} {'shared':>7s} {'own ms':>8s} {'shared ms':>9s} {'measured':>8s} "
          f"{'us per MB':>9s} {'x DRAM':>6s} {'est.':>6s} {'est. all near':>13s}")
    for name in args.models or DEFAULT_MODELS:
        path = os.path.join(HERE, "models", "cpu", f"{name}.onnx")
        data = runnable_bytes(path)
        feeds = feeds_for(load_graph(path))
        shared, moved, saved = shared_copy(data)
        t = timed({"own": (data, feeds), "shared": (shared, feeds)}, args.rounds)
        est, near, weights = estimates(path, hw)
        per_mb = (t["own"] - t["shared"]) / max(saved / 1e6, 1e-9) * 1e6
        print(f"{name:22s} {weights / 1e6:6.1f}MB {saved / 1e6:5.1f}MB {t['own'] * 1e3:8.3f} {t['shared'] * 1e3:9.3f} "
              f"{t['shared'] / t['own']:8.3f} {per_mb:9.1f} {per_mb * 1e-6 * dram / 1e6:6.2f} {est * 1e3:6.3f} "
              f"{near / est:13.3f}   ({moved} layers re-pointed)")


if __name__ == "__main__":
    main()
