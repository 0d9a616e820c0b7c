"""ONNX Runtime's own CPU kernels for transformer patterns (dnnperf.fusion.runtime_kernel_groups):
BiasGelu (a bias Add and an erf GELU) and SkipLayerNormalization (bias and residual Adds and a
LayerNormalization), separate from the MatMul before them on a CPU profile; GPU profiles keep
fusing them as the MatMul's epilogue."""

import numpy as np
from onnx import helper, numpy_helper

from dnnperf.api import analyze, inspect_model
from dnnperf.hardware import load_profile
from dnnperf.scoring import Settings
from helpers import model, save, vi, weight


def _const(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.float32), name)


def _block():
    # h -> MatMul(w1) + b1 -> erf GELU -> MatMul(w2) + b2 -> + h (residual) -> LayerNorm -> y
    n = helper.make_node
    nodes = [n("MatMul", ["h", "w1"], ["m1"], name="mm1"), n("Add", ["m1", "b1"], ["s"], name="bias1"),
             n("Div", ["s", "sqrt2"], ["d"], name="div"), n("Erf", ["d"], ["e"], name="erf"),
             n("Add", ["e", "one"], ["e1"], name="plus1"), n("Mul", ["s", "e1"], ["g"], name="mul"),
             n("Mul", ["g", "half"], ["a"], name="half_mul"),
             n("MatMul", ["a", "w2"], ["m2"], name="mm2"), n("Add", ["m2", "b2"], ["o"], name="bias2"),
             n("Add", ["o", "h"], ["r"], name="residual"),
             n("LayerNormalization", ["r", "gamma", "beta"], ["y"], name="ln", axis=-1)]
    inits = [weight("w1", [64, 256]), weight("b1", [256]), weight("w2", [256, 64]), weight("b2", [64]),
             weight("gamma", [64]), weight("beta", [64]), _const("sqrt2", 1.4142135), _const("one", 1.0),
             _const("half", 0.5)]
    return model(nodes, [vi("h", [1, 16, 64])], [vi("y", None)], inits)


def _layers(tmp_path, hw):
    rep = analyze(inspect_model(save(_block(), tmp_path)), load_profile(hw), Settings(fusion="typical"),
                  with_fixes=False)
    return [c.layer for c in rep.score.layers]


def test_cpu_runs_the_runtime_kernels_apart_from_the_matmuls(tmp_path):
    layers = _layers(tmp_path, "cpu-avx2")
    assert [(l.op_type, l.nodes) for l in layers] == [
        ("MatMul", ("mm1",)),
        ("BiasGelu", ("bias1", "div", "erf", "plus1", "mul", "half_mul")),
        ("MatMul", ("mm2",)),
        ("SkipLayerNormalization", ("bias2", "residual", "ln")),
    ]
    gelu = next(l for l in layers if l.op_type == "BiasGelu").workload
    # reads m1 (16 x 256 floats) and the bias, writes its output once: the intermediate tensors
    # (s, d, e, e1, g) stay in registers, s read twice but from registers
    assert gelu.act_bytes_read == 16 * 256 * 4
    assert gelu.weight_bytes == 256 * 4 + 3 * 4  # the bias and three scalar constants
    assert gelu.bytes_written == 16 * 256 * 4
    skip = next(l for l in layers if l.op_type == "SkipLayerNormalization").workload
    assert skip.act_bytes_read == 2 * 16 * 64 * 4  # m2 and the residual h
    assert skip.bytes_written == 16 * 64 * 4  # only y: the residual sum r has no other reader


def test_gpu_profiles_keep_the_matmul_epilogues(tmp_path):
    layers = _layers(tmp_path, "t4")
    assert not any(l.op_type in ("BiasGelu", "SkipLayerNormalization") for l in layers)
    assert layers[0].nodes[:2] == ("mm1", "bias1")


def test_validate_maps_the_runtime_kernels_in_graph_order(tmp_path):
    from dnnperf.measure.validate import map_kernels

    insp = inspect_model(save(_block(), tmp_path))
    layers = _layers(tmp_path, "cpu-avx2")
    kernels = {"mm1": ("MatMul", 5.0), "BiasGelu": ("BiasGelu", 7.0), "mm2": ("MatMul", 4.0),
               "SkipLayerNormalization": ("SkipLayerNormalization", 3.0)}
    measured, unmatched = map_kernels(kernels, insp.graph, layers)
    assert unmatched == {}
    assert measured["bias1+div+erf+plus1+mul+half_mul"] == 7.0
    assert measured["bias2+residual+ln"] == 3.0
