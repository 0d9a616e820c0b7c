"""Issue 15: convolution weights read back from beyond the cache, measured against their estimate.

    pip install ".[measure]" && python bench/cpu_reach.py --hw local.yaml [--only "1 x 1, 512"] [--rounds 5]

A network run again and again reads each weight once per inference; between two reads it touches every
other weight and its activation buffers (dnnperf's ``weight_reach``). Here the reach is set by hand: a
chain of n equal convolutions (each followed by a ReLU, which the runtime fuses into it) holds n filter
sets, so running the chain again and again reads each filter set back after n of them. Each shape is timed
at several n, all chains interleaved in rounds (the median of a round's runs, the fastest round), and
estimated with ``--hw`` (a profile from ``dnnperf calibrate`` on this machine, ``--fusion typical``). Per
chain it prints the time per convolution measured and estimated, and the extra time per convolution over
the chain of that shape with the least reach, as a share of the filter set's DRAM read time (what
``conv_weight_exposure`` x ``rules.beyond_cache`` stands for). Nothing is asserted: the table is for
bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

# (label, channels in, channels out, side, kernel, chain lengths); a pair of channel counts alternates
SHAPES = (
    ("1 x 1, 400 ch, 7 x 7", 400, 400, 7, 1, (2, 4, 8, 12, 24, 48, 96)),
    ("1 x 1, 512 ch, 7 x 7", 512, 512, 7, 1, (2, 4, 8, 12, 16, 24, 48)),
    ("1 x 1, 2048 <-> 512 ch, 7 x 7", 2048, 512, 7, 1, (2, 4, 8, 16, 48)),
    ("3 x 3, 512 ch, 7 x 7", 512, 512, 7, 3, (1, 2, 4, 8)),
    ("1 x 1, 256 ch, 14 x 14", 256, 256, 14, 1, (4, 16, 48, 96, 192)),
    ("3 x 3, 256 ch, 14 x 14", 256, 256, 14, 3, (1, 4, 8, 16)),
)


def chain(a: int, b: int, side: int, k: int, n: int):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev, cin = [], [], "x", a
    for i in range(n):
        cout = b if i % 2 == 0 else a
        inits.append(numpy_helper.from_array((rng.standard_normal((cout, cin, k, k)) * 0.02).astype(np.float32),
                                             f"w{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], name=f"conv{i}", pads=[k // 2] * 4))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        prev, cin = f"r{i}", cout
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, a, side, side])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, {"x": rng.standard_normal((1, a, side, side)).astype(np.float32)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hw", required=True, help="a profile from dnnperf calibrate on this machine")
    ap.add_argument("--only", nargs="*", default=(), help="shapes whose label holds one of these strings")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    from dnnperf.api import analyze, inspect_graph
    from dnnperf.hardware import load_profile
    from dnnperf.load import graph_from_model
    from dnnperf.measure.ort import session
    from dnnperf.scoring import Settings

    hw = load_profile(a.hw)
    jobs = {}
    for label, ca, cb, side, k, ns in SHAPES:
        if a.only and not any(o in label for o in a.only):
            continue
        for n in ns:
            m, feeds = chain(ca, cb, side, k, n)
            data = m.SerializeToString()  # (before the loader, which strips the weights it reads)
            est = analyze(inspect_graph(graph_from_model(m), "chain.onnx"), hw, Settings(fusion="typical"),
                          with_fixes=False).score
            jobs[(label, n)] = (data, feeds, est, ca * cb * k * k * 4)
    best = {key: float("inf") for key in jobs}
    for _ in range(a.rounds):
        for key, (data, feeds, _est, _w) in jobs.items():
            # a session lives only while its chain is timed: an idle session's worker threads keep
            # spinning, and with every chain's session alive a chain ran at one thread's pace (2x)
            sess = session(data, None)
            for _ in range(2):
                sess.run(None, feeds)
            ts, stop = [], time.perf_counter() + 0.3
            while len(ts) < 5 or (time.perf_counter() < stop and len(ts) < 40):
                t0 = time.perf_counter()
                sess.run(None, feeds)
                ts.append(time.perf_counter() - t0)
            best[key] = min(best[key], statistics.median(ts))
            del sess
    print(f"{hw.title}: cache knee {hw.onchip_mb:g} MB, DRAM {hw.dram_gbs:g} GB/s, conv_weight_exposure "
          f"{hw.conv_weight_exposure:g}")
    print(f"{'chain':32s} {'n':>4s} {'weights MB':>10s} {'reach MB':>9s} {'meas us/conv':>12s} {'est us/conv':>11s} "
          f"{'est/meas':>8s} {'extra/DRAM time':>15s}")
    for label, *_rest in SHAPES:
        rows = [(n, v) for (lab, n), v in jobs.items() if lab == label]
        if not rows:
            continue
        warm = best[(label, rows[0][0])] / rows[0][0]
        for n, (_s, _f, est, per) in rows:
            meas = best[(label, n)] / n
            share = (meas - warm) / (per / hw.dram_bps)
            print(f"{label:32s} {n:4d} {per * n / 1e6:10.1f} {est.weight_reach / 1e6:9.1f} {meas * 1e6:12.1f} "
                  f"{est.totals['latency_s'] / n * 1e6:11.1f} {est.totals['latency_s'] / n / meas:7.2f}x {share:15.2f}")


if __name__ == "__main__":
    main()
