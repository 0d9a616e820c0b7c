"""Where a CPU estimate goes wrong inside a real network: the network cut into pieces, each timed alone.

    pip install ".[measure]" && python bench/cpu_pieces.py MODEL.onnx [--hw PROFILE.yaml] [--pieces 6]
                                                        [--cut TENSOR ...]

``validate`` splits a network's time over its layers with ONNX Runtime's profiler, which adds a few
microseconds to every kernel it records, and ``bench/cpu_blocks.py`` times blocks built by hand,
which the runtime does not always treat like the exported network (synthetic residual blocks got a
layout conversion pair per block that torchvision exports never get). This bench cuts the real
network instead: at points where a single activation is live (between residual blocks and stages),
spread evenly over the estimated time (``--pieces``), or at the tensors named with ``--cut``. Each
piece is extracted from the runnable copy ``validate`` runs (weights materialised), timed without the
profiler in interleaved rounds together with the whole network, and estimated on its own
(``--fusion typical``). A piece pays the layout conversions at its own edges; so does its estimate.

Without ``--hw`` a fresh ``dnnperf calibrate`` is taken first (about a minute). Nothing is asserted:
the table is for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from cpu_blocks import profile_or_calibrate  # noqa: E402  (a profile, or a fresh calibration)


def single_tensor_cuts(graph) -> list[tuple[int, str]]:
    """(node index, tensor) for every node after which its own output is the only live activation:
    a piece boundary that cuts one tensor."""
    consts = {i.name for i in graph.initializer}
    acts = {x.name for x in graph.input if x.name not in consts}
    for n in graph.node:  # activations: what depends on the graph's inputs (not weights made by nodes)
        if any(x in acts for x in n.input):
            acts.update(o for o in n.output if o)
    consts |= {o for n in graph.node for o in n.output if o not in acts}
    last_use: dict[str, int] = {}
    for i, n in enumerate(graph.node):
        for x in n.input:
            if x and x not in consts:
                last_use[x] = i
    for o in graph.output:
        last_use[o.name] = len(graph.node)
    live: set[str] = {x.name for x in graph.input if x.name not in consts}
    cuts = []
    for i, n in enumerate(graph.node):
        live |= {o for o in n.output if o and last_use.get(o, -1) > i}
        live = {t for t in live if last_use.get(t, -1) > i}
        if len(live) == 1 and len(n.output) == 1 and n.output[0] in live and i < len(graph.node) - 1:
            cuts.append((i, n.output[0]))
    return cuts


def spread(cuts: list[tuple[int, str]], node_time: list[float], pieces: int) -> list[str]:
    """``pieces - 1`` of ``cuts`` nearest to equal shares of the estimated time."""
    total = sum(node_time) or 1.0
    acc, run = [], 0.0
    for t in node_time:
        run += t
        acc.append(run / total)
    chosen: list[str] = []
    for k in range(1, pieces):
        best = min(cuts, key=lambda c: abs(acc[c[0]] - k / pieces), default=None)
        if best is not None and best[1] not in chosen:
            chosen.append(best[1])
    order = {t: i for i, t in cuts}
    return sorted(chosen, key=order.get)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--hw", help="a calibrated profile (default: calibrate now)")
    ap.add_argument("--pieces", type=int, default=6)
    ap.add_argument("--cut", action="append", default=[], help="cut after this tensor (repeatable)")
    a = ap.parse_args()
    import onnx
    from onnx import shape_inference, utils

    from dnnperf.api import analyze
    from dnnperf.measure.calibrate import inspect_micro
    from dnnperf.measure.ort import feeds_for, runnable_bytes, session, settled_times
    from dnnperf.scoring import Settings

    hw = profile_or_calibrate(a.hw)
    settings = Settings(fusion="typical")
    full = shape_inference.infer_shapes(onnx.load_from_string(runnable_bytes(a.model)))
    g = full.graph
    cuts = a.cut
    if not cuts:
        rep = analyze(inspect_micro(full), hw, settings, with_fixes=False)
        index = {n.name: i for i, n in enumerate(g.node)}
        node_time = [0.0] * len(g.node)
        for c in rep.score.layers:
            at = [index[n] for n in c.layer.nodes if n in index]
            if at:
                node_time[max(at)] += c.time_s
        cuts = spread(single_tensor_cuts(g), node_time, a.pieces)
    bounds = [g.input[0].name] + cuts + [g.output[0].name]
    models = {}
    for i, (x, y) in enumerate(zip(bounds[:-1], bounds[1:])):
        models[f"piece {i + 1}"] = (x, y, utils.Extractor(full).extract_model([x], [y]))
    models["whole network"] = (bounds[0], bounds[-1], full)

    inspected = {k: inspect_micro(m) for k, (_, _, m) in models.items()}  # one inspection: feeds and estimate
    jobs = {k: (lambda b=m.SerializeToString(): session(b, None), feeds_for(inspected[k].graph))
            for k, (_, _, m) in models.items()}
    st = settled_times(jobs, rounds_min=3, rounds_max=8, runs=20, budget_s=1.0, strict=False)
    t = st["times"]
    print(f"{os.path.basename(a.model)} on {hw.title}; rounds {st['rounds']}, settled {st['settled']}")
    print(f"{'piece':<14} {'nodes':>5} {'measured us':>12} {'estimated':>10} {'est/meas':>9}  ends at")
    sums = [0.0, 0.0]
    for k, (_x, y, m) in models.items():
        p = analyze(inspected[k], hw, settings, with_fixes=False).score.totals["latency_s"]
        if k != "whole network":
            sums[0] += t[k]
            sums[1] += p
        print(f"{k:<14} {len(m.graph.node):5d} {t[k] * 1e6:12.0f} {p * 1e6:10.0f} {p / t[k]:8.2f}x  {y[-60:]}")
    print(f"{'sum of pieces':<14} {'':5} {sums[0] * 1e6:12.0f} {sums[1] * 1e6:10.0f} {sums[1] / sums[0]:8.2f}x")


if __name__ == "__main__":
    main()
