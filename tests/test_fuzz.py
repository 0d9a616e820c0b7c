"""Property tests (hypothesis). Default example counts are small for CI; for a longer session:

    DNNPERF_FUZZ_EXAMPLES=2000 python -m pytest tests/test_fuzz.py
"""

import math
import os
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper
from typer.testing import CliRunner

from dnnperf.scoring import Settings
from dnnperf.api import analyze, inspect_model
from dnnperf.cli import app
from dnnperf.ir import ShapeOverrides
from dnnperf.hardware import load_profile
from helpers import SAMPLES, model, save, vi, weight

N = int(os.environ.get("DNNPERF_FUZZ_EXAMPLES", "25"))
FUZZ = settings(max_examples=N, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

OPS = ["conv", "dwconv", "relu", "add", "bn", "pool", "transpose", "concat", "softmax", "sigmoid", "mul"]


def build(ops, cin, hw):
    """A random but valid CNN-like chain with a symbolic batch dim."""
    nodes, inits = [], []
    c, h = cin, hw
    x = "x"
    for i, op in enumerate(ops):
        y = f"t{i}"
        if op == "conv":
            cout = 8 * ((i % 3) + 1)
            nodes.append(helper.make_node("Conv", [x, f"w{i}"], [y], pads=[1, 1, 1, 1]))
            inits.append(weight(f"w{i}", [cout, c, 3, 3]))
            c = cout
        elif op == "dwconv":
            nodes.append(helper.make_node("Conv", [x, f"w{i}"], [y], pads=[1, 1, 1, 1], group=c))
            inits.append(weight(f"w{i}", [c, 1, 3, 3]))
        elif op == "relu":
            nodes.append(helper.make_node("Relu", [x], [y]))
        elif op == "sigmoid":
            nodes.append(helper.make_node("Sigmoid", [x], [y]))
        elif op in ("add", "mul"):
            nodes.append(helper.make_node(op.capitalize(), [x, x], [y]))
        elif op == "bn":
            for k in ("s", "b", "m", "v"):
                inits.append(weight(f"{k}{i}", [c]))
            nodes.append(helper.make_node("BatchNormalization", [x, f"s{i}", f"b{i}", f"m{i}", f"v{i}"], [y]))
        elif op == "pool":
            if h < 2:
                nodes.append(helper.make_node("Relu", [x], [y]))
            else:
                nodes.append(helper.make_node("MaxPool", [x], [y], kernel_shape=[2, 2], strides=[2, 2]))
                h //= 2
        elif op == "transpose":
            nodes.append(helper.make_node("Transpose", [x], [y], perm=[0, 1, 3, 2]))
        elif op == "concat":
            nodes.append(helper.make_node("Concat", [x, x], [y], axis=1))
            c *= 2
        elif op == "softmax":
            nodes.append(helper.make_node("Softmax", [x], [y], axis=1))
        x = y
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    return model(nodes, [vi("x", ["N", cin, hw, hw])], [vi("y", None)], inits)


graphs = st.tuples(st.lists(st.sampled_from(OPS), min_size=1, max_size=12), st.integers(1, 16), st.integers(1, 32))


@FUZZ
@given(g=graphs, batch=st.integers(1, 8), hw_name=st.sampled_from(["v100", "t4", "tpu-v2", "kirin970-npu", "cpu-avx2"]))
def test_random_graphs_properties(tmp_path, g, batch, hw_name):
    ops, cin, size = g
    p = save(build(ops, cin, size), tmp_path, "fz.onnx")
    insp1 = inspect_model(p, ShapeOverrides(batch=1))
    insp = inspect_model(p, ShapeOverrides(batch=batch))
    assert not insp.unsupported
    # MACs scale linearly with batch
    assert insp.totals()["macs"] == batch * insp1.totals()["macs"]
    hw = load_profile(hw_name)
    rep = analyze(insp, hw, Settings())
    t = rep.score.totals
    # totals equal the sum of layers
    assert t["macs"] == sum(c.layer.workload.macs for c in rep.score.layers)
    assert t["latency_s"] == pytest.approx(sum(c.time_s for c in rep.score.layers) + rep.score.input_transfer_s
                                           + t["call_s"], rel=1e-9)
    # finite, and positive unless nothing runs (a lone Transpose of a 1 x 1 x 1 x 1 tensor moves no byte:
    # a view; on a board that reads its input in place there is nothing to time)
    assert math.isfinite(t["latency_s"]) and t["latency_s"] >= 0
    runs = any(c.layer.workload.launches for c in rep.score.layers) or rep.score.input_transfer_s > 0
    assert (t["latency_s"] > 0) == runs
    assert all(math.isfinite(c.time_s) and c.time_s >= 0 for c in rep.score.layers)
    # more bandwidth or more peak never makes it slower
    fast_mem = analyze(insp, hw.with_overrides(dram_gbs=hw.dram_gbs * 3), Settings(), with_fixes=False)
    assert fast_mem.score.totals["latency_s"] <= t["latency_s"] * (1 + 1e-12)
    units = tuple(replace(u, peak_tops={k: v * 3 for k, v in u.peak_tops.items()}) for u in hw.units)
    fast_peak = analyze(insp, hw.with_overrides(units=units, headline_tops=hw.headline_tops * 3), Settings(),
                        with_fixes=False)
    assert fast_peak.score.totals["latency_s"] <= t["latency_s"] * (1 + 1e-12)


_SAMPLE = open(os.path.join(SAMPLES, "squeezenet1_1.onnx"), "rb").read()
runner = CliRunner()


_CONV_HW = {n: load_profile(n) for n in ("v100", "t4", "k80", "p100")}


@FUZZ
@given(r=st.sampled_from([3, 5]), c=st.integers(1, 1024), k=st.integers(1, 1024), h=st.integers(1, 128),
       w=st.integers(1, 128), images=st.integers(1, 64), hw_name=st.sampled_from(sorted(_CONV_HW)),
       runtime=st.sampled_from(["eager", "graph", "tensorrt"]))
def test_the_convolution_algorithm_pick_keeps_the_model_monotone(r, c, k, h, w, images, hw_name, runtime):
    """An fp32 3 x 3 / 5 x 5 stride-1 convolution takes the fastest of the library's algorithms
    (implicit GEMM, fused and non-fused Winograd, FFT): more bandwidth or more peak never makes it slower,
    and twice the images never faster."""
    from dnnperf.published import Kernel, predict

    hw = _CONV_HW[hw_name]

    def time(dims, profile):
        return predict(Kernel("s", "g", "fp32", "conv", dims, 1.0, False, runtime=runtime), profile)[1].time_s

    dims = (images, c, h, w, k, r, r, r // 2, r // 2, 1, 1)
    t = time(dims, hw)
    assert math.isfinite(t) and t > 0
    assert time(dims, hw.with_overrides(dram_gbs=hw.dram_gbs * 3)) <= t * (1 + 1e-9)
    units = tuple(replace(u, peak_tops={p: v * 3 for p, v in u.peak_tops.items()}) for u in hw.units)
    assert time(dims, hw.with_overrides(units=units, headline_tops=hw.headline_tops * 3)) <= t * (1 + 1e-9)
    assert time((2 * images,) + dims[1:], hw) >= t * (1 - 1e-9)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(_SAMPLE) - 1), st.integers(0, 255)), min_size=1, max_size=20))
def test_mutated_model_bytes_exit_cleanly(tmp_path, edits):
    data = bytearray(_SAMPLE)
    for pos, val in edits:
        data[pos] = val
    p = tmp_path / "mut.onnx"
    p.write_bytes(bytes(data))
    r = runner.invoke(app, ["analyze", str(p), "--hw", "t4", "-f", "json"])
    assert r.exit_code in (0, 2), (r.exit_code, r.stderr)
    assert "Traceback" not in r.stderr
