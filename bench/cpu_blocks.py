"""Where a CPU estimate goes wrong inside a network: building blocks timed by difference.

    pip install ".[measure]" && python bench/cpu_blocks.py [--hw PROFILE.yaml] [--blocks 12]

``validate`` splits a network's time over its layers with ONNX Runtime's profiler, which adds a few
microseconds to every kernel it records: fine for large layers, misleading for the small ones
(squeeze-excite branches, layout reorders, pooling at 7 x 7) whose share of a network is exactly
what is in doubt. Here nothing is profiled. Each case is a chain of ``--blocks`` identical blocks
(a 3 x 3 convolution + Relu, C channels at S x S), timed with and without something inserted after
every convolution; the difference over the number of blocks is what the insertion really costs in
a network, next to what dnnperf estimates for the same two models (``--fusion typical``):

    plain      the convolution chain alone (stays in the runtime's blocked layout)
    se         a squeeze-excite branch: GlobalAveragePool, 1 x 1 conv C -> C/4 + Relu,
               1 x 1 conv C/4 -> C + Sigmoid, Mul by the input
    gap_mul    GlobalAveragePool and the channel-wise Mul only
    erf        an Erf (no runtime fuses it into the convolution: leaves the blocked layout and back)

Without ``--hw`` a fresh ``dnnperf calibrate`` is taken first (about a minute). The baseline of every
ratio is the measurement of the same run, on the same machine, minutes apart. Nothing is asserted:
the table is for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SHAPES = ((64, 28), (128, 14), (256, 7))  # channels, side: ResNet-like stages at 1/8, 1/16, 1/32
INSERTS = ("se", "gap_mul", "erf")


def build(blocks: int, ch: int, side: int, insert: str | None):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def w(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.05).astype(np.float32), name)

    nodes, inits, x = [], [], "x"
    for i in range(blocks):
        inits.append(w(f"cw{i}", [ch, ch, 3, 3]))
        nodes += [helper.make_node("Conv", [x, f"cw{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"a{i}"])]
        x = f"a{i}"
        if insert in ("se", "gap_mul"):
            nodes.append(helper.make_node("GlobalAveragePool", [x], [f"g{i}"]))
            scale = f"g{i}"
            if insert == "se":
                inits += [w(f"s1w{i}", [ch // 4, ch, 1, 1]), w(f"s1b{i}", [ch // 4]),
                          w(f"s2w{i}", [ch, ch // 4, 1, 1]), w(f"s2b{i}", [ch])]
                nodes += [helper.make_node("Conv", [f"g{i}", f"s1w{i}", f"s1b{i}"], [f"q{i}"]),
                          helper.make_node("Relu", [f"q{i}"], [f"qr{i}"]),
                          helper.make_node("Conv", [f"qr{i}", f"s2w{i}", f"s2b{i}"], [f"e{i}"]),
                          helper.make_node("Sigmoid", [f"e{i}"], [f"es{i}"])]
                scale = f"es{i}"
            nodes.append(helper.make_node("Mul", [x, scale], [f"m{i}"]))
            x = f"m{i}"
        elif insert == "erf":
            nodes.append(helper.make_node("Erf", [x], [f"m{i}"]))
            x = f"m{i}"
    graph = helper.make_graph(nodes, "blocks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, ch, side, side])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def calibrated_path(path: str | None, threads: int | None = None) -> str:
    """``path``, or that of a fresh ``dnnperf calibrate`` of this machine (``threads``: its intra-op threads)
    written to a temporary folder when None."""
    if path is None:
        import yaml

        from dnnperf.measure import calibrate

        path = os.path.join(tempfile.mkdtemp(), "local.yaml")
        with open(path, "w", encoding="utf-8") as fh:
            yaml.safe_dump(calibrate(strict=False, threads=threads), fh, sort_keys=False)
    return path


def profile_or_calibrate(path: str | None):
    """The profile at ``path``, or a fresh ``dnnperf calibrate`` of this machine when None."""
    from dnnperf.hardware import load_profile

    return load_profile(calibrated_path(path))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hw", help="a calibrated profile (default: calibrate now)")
    ap.add_argument("--blocks", type=int, default=12)
    a = ap.parse_args()
    import numpy as np

    from dnnperf.api import analyze
    from dnnperf.measure.calibrate import inspect_micro
    from dnnperf.measure.ort import session, settled_times
    from dnnperf.scoring import Settings

    hw = profile_or_calibrate(a.hw)
    models = {(ch, side, ins): build(a.blocks, ch, side, ins) for ch, side in SHAPES for ins in (None,) + INSERTS}
    jobs = {}
    for key, m in models.items():
        feeds = {"x": np.random.default_rng(1).standard_normal((1, key[0], key[1], key[1])).astype(np.float32)}
        jobs[key] = (lambda b=m.SerializeToString(): session(b, None), feeds)
    st = settled_times(jobs, rounds_min=3, rounds_max=8, runs=30, budget_s=1.0, strict=False)
    measured = st["times"]
    predicted = {}
    for key, m in models.items():
        predicted[key] = analyze(inspect_micro(m), hw, Settings(fusion="typical"), with_fixes=False).score.totals["latency_s"]
    n = a.blocks
    print(f"profile: {hw.title}; {n} blocks per chain; rounds {st['rounds']}, settled {st['settled']}")
    print(f"{'block':<16} {'measured us/block':>18} {'predicted':>10} {'pred/meas':>10}")
    for ch, side in SHAPES:
        base_m, base_p = measured[(ch, side, None)], predicted[(ch, side, None)]
        print(f"{f'conv {ch}@{side}':<16} {base_m / n * 1e6:18.1f} {base_p / n * 1e6:10.1f} {base_p / base_m:9.2f}x")
        for ins in INSERTS:
            dm = (measured[(ch, side, ins)] - base_m) / n
            dp = (predicted[(ch, side, ins)] - base_p) / n
            ratio = f"{dp / dm:9.2f}x" if dm > 0 else "        -"
            print(f"{f'  + {ins}':<16} {dm * 1e6:18.1f} {dp * 1e6:10.1f} {ratio}")


if __name__ == "__main__":
    main()
