"""Attention probabilities that underflow to subnormal floats (dnnperf.load.masks): counted from the
mask, charged on calibrated CPUs, said in a note. Expected numbers by hand."""

import math

import numpy as np
import pytest
from onnx import helper, numpy_helper

from dnnperf.api import analyze, inspect_model
from dnnperf.hardware import load_profile, profile_from_dict
from dnnperf.scoring import Settings
from helpers import model, save, vi


def _attention(fill: float):
    """Scores [1, 2, 4, 4] + a mask built from Constant nodes (as torch exports them: the loader never
    reads initializer payloads): positions labelled [0, 0, 1, 1], pairs with different labels get
    ``fill`` (8 of the 16 pairs of each of the 2 heads), the rest 0; Softmax; MatMul with V [1, 2, 4, 8]."""
    n = helper.make_node

    def const(name, arr):
        return n("Constant", [], [name], name=f"c_{name}", value=numpy_helper.from_array(arr, name))

    nodes = [
        const("labels", np.array([0.0, 0.0, 1.0, 1.0], np.float32)), const("ax0", np.array([0], np.int64)),
        const("ax1", np.array([1], np.int64)), const("zero", np.array(0.0, np.float32)),
        const("fill", np.array(fill, np.float32)),
        n("Unsqueeze", ["labels", "ax0"], ["row"], name="u0"), n("Unsqueeze", ["labels", "ax1"], ["col"], name="u1"),
        n("Sub", ["row", "col"], ["diff"], name="sub"), n("Equal", ["diff", "zero"], ["same"], name="eq"),
        n("Where", ["same", "zero", "fill"], ["mask"], name="where"),
        n("Add", ["scores", "mask"], ["masked"], name="add"),
        n("Softmax", ["masked"], ["p"], name="softmax", axis=-1),
        n("MatMul", ["p", "v"], ["y"], name="attn_v"),
    ]
    return model(nodes, [vi("scores", [1, 2, 4, 4]), vi("v", [1, 2, 4, 8])], [vi("y", None)])


def test_the_mask_says_how_many_probabilities_are_subnormal(tmp_path):
    """exp(x) is a subnormal float32 for x in [ln 2^-149, ln 2^-126] = [-103.28, -87.34]: a fill of
    -100 or -90 makes 2 x 8 = 16 of them, -1e4 (exact zeros) and -80 (normal) none."""
    from dnnperf.load.masks import SUBNORMAL_EXP

    assert SUBNORMAL_EXP == pytest.approx((-103.2789, -87.3365), abs=1e-4)
    assert math.exp(SUBNORMAL_EXP[1]) == pytest.approx(np.finfo(np.float32).tiny, rel=1e-6)
    for fill, count in ((-100.0, 16), (-90.0, 16), (-1e4, 0), (-80.0, 0)):
        insp = inspect_model(save(_attention(fill), tmp_path, f"m{int(-fill)}.onnx"))
        assert insp.graph.subnormal == ({"p": count} if count else {})
        marked = {r.node.name: r.workload.subnormals for r in insp.rows if r.workload.subnormals}
        assert marked == ({"softmax": count, "attn_v": count} if count else {})


def test_a_calibrated_cpu_pays_per_subnormal_value_and_says_so(tmp_path):
    """subnormal_ns {softmax: 10, matmul: 40}: the Softmax pays 16 x 10 ns = 160 ns, the MatMul (8
    columns of the 32 the figure is per) 16 x 40 ns x 8 / 32 = 160 ns, against the same profile without
    the figure; a note gives the total and the fix; a GPU pays nothing and says nothing."""
    import os

    import yaml

    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    plain = profile_from_dict(d, "plain")
    paying = profile_from_dict({**d, "subnormal_ns": {"softmax": 10, "matmul": 40}}, "paying")
    insp = inspect_model(save(_attention(-100.0), tmp_path))
    times = []
    for hw in (plain, paying):
        rep = analyze(insp, hw, Settings(), with_fixes=False)
        times.append({c.name: c.time_s for c in rep.score.layers})
        note = next(n for n in rep.notes if "subnormal" in n)
        assert "16 attention probabilities" in note and "session.set_denormal_as_zero" in note
        assert ("NOT in this estimate" in note) == (hw is plain)
    assert times[1]["softmax"] - times[0]["softmax"] == pytest.approx(160e-9, rel=1e-9)
    assert times[1]["attn_v"] - times[0]["attn_v"] == pytest.approx(160e-9, rel=1e-9)
    assert "320 ns" in next(n for n in analyze(insp, paying, Settings(), with_fixes=False).notes if "subnormal" in n)
    assert not any("subnormal" in n for n in analyze(insp, load_profile("v100"), Settings(), with_fixes=False).notes)


def test_subnormal_ns_is_checked_and_derived_from_the_micro_benchmarks():
    """calibrate: the masked Softmax less the clear one over the subnormal values it writes; the MatMul
    what the masked pair adds beyond that. 32 heads x 1,200 odd positions of a 49 x 49 map = 38,400."""
    from dnnperf.errors import DnnperfError
    from dnnperf.measure.calibrate import subnormal_ns
    from dnnperf.measure.micro import subnormal_count

    assert subnormal_count() == 32 * 1200 == 38_400
    t = {"subnormal_softmax_masked": 400e-6, "subnormal_softmax_clear": 208e-6,
         "subnormal_matmul_masked": 1400e-6, "subnormal_matmul_clear": 440e-6}
    assert subnormal_ns(t) == {"softmax": 5.0, "matmul": 20.0}  # 192 us / 38,400; (960 - 192) us / 38,400
    t["subnormal_softmax_masked"] = 200e-6  # a CPU that flushes them: nothing, never negative
    assert subnormal_ns(t)["softmax"] == 0.0
    d = {"schema": "dnnperf-hw/1", "name": "x", "title": "x", "kind": "cpu", "headline": {"precision": "fp32", "tops": 1},
         "units": [{"name": "c", "serves": ["matrix", "vector"], "peak_tops": {"fp32": 1}}], "memory": {"dram_gbs": 10},
         "parallelism": {"compute_units": 1, "lanes": 8}, "launch_overhead_us": 1, "subnormal_ns": {"gemm": 1}}
    with pytest.raises(DnnperfError, match="subnormal_ns.gemm: use 'softmax' or 'matmul'"):
        profile_from_dict(d, "x")
