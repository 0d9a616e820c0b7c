"""ONNX Runtime's own CPU kernels for activation and transformer patterns
(dnnperf.kernel_groups.runtime_kernel_groups): QuickGelu (x * Sigmoid(x)), Gelu (an erf GELU), BiasGelu (a bias
Add the product before it does not take, and the GELU) and
SkipLayerNormalization (a residual Add and a LayerNormalization on 3-D tensors), separate from the
MatMul before them on a CPU profile, which takes its own bias Add (a Gemm); GPU profiles keep fusing
them as the MatMul's epilogue. Profiled on ORT 1.32, x86: MatMul [*, 3136, 384] + bias + erf GELU ran as
'<matmul>/MatMulAddFusion' (Gemm) and 'Gelu'; MatMul + bias + residual Add + LayerNormalization as a
Gemm and a SkipLayerNormalization on [1, 128, 768], as a Gemm, an Add and a LayerNormalization on
[1, 56, 56, 96]."""

import os

import numpy as np
import pytest
from onnx import helper, numpy_helper

from dnnperf.api import analyze, inspect_model
from dnnperf.hardware import load_profile
from dnnperf.scoring import Settings
from helpers import model, save, vi, weight


def _const(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.float32), name)


def _block(shape=(1, 16, 64)):
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
    return model(nodes, [vi("h", list(shape))], [vi("y", None)], inits)


def _layers(tmp_path, hw):
    rep = analyze(inspect_model(save(_block(), tmp_path)), load_profile(hw), Settings(fusion="typical"),
                  with_fixes=False)
    return [c.layer for c in rep.score.layers]


def test_cpu_runs_the_runtime_kernels_apart_from_the_matmuls(tmp_path):
    layers = _layers(tmp_path, "cpu-avx2")
    assert [(l.op_type, l.nodes) for l in layers] == [
        ("MatMul+Add", ("mm1", "bias1")),
        ("Gelu", ("div", "erf", "plus1", "mul", "half_mul")),
        ("MatMul+Add", ("mm2", "bias2")),
        ("SkipLayerNormalization", ("residual", "ln")),
    ]
    gelu = next(l for l in layers if l.op_type == "Gelu").workload
    # reads the biased product (16 x 256 floats) and writes its output once: the intermediate tensors
    # (d, e, e1, g) stay in registers
    assert gelu.act_bytes_read == 16 * 256 * 4
    assert gelu.weight_bytes == 3 * 4  # three scalar constants
    assert gelu.bytes_written == 16 * 256 * 4
    skip = next(l for l in layers if l.op_type == "SkipLayerNormalization").workload
    assert skip.act_bytes_read == 2 * 16 * 64 * 4  # o and the residual h
    assert skip.bytes_written == 16 * 64 * 4  # only y: the residual sum r has no other reader


def test_four_d_tensors_keep_their_residual_add_and_layernorm(tmp_path):
    """ONNX Runtime fuses a residual Add and a LayerNormalization on 3-D tensors only; on [1, 4, 4, 64]
    the Add is a kernel of its own (a product takes no computed operand) and so is the LayerNorm."""
    layers = [c.layer for c in analyze(inspect_model(save(_block((1, 4, 4, 64)), tmp_path)), load_profile("cpu-avx2"),
                                       Settings(fusion="typical"), with_fixes=False).score.layers]
    assert [(l.op_type, l.nodes) for l in layers] == [
        ("MatMul+Add", ("mm1", "bias1")),
        ("Gelu", ("div", "erf", "plus1", "mul", "half_mul")),
        ("MatMul+Add", ("mm2", "bias2")),
        ("Add", ("residual",)),
        ("LayerNormalization", ("ln",)),
    ]


def test_symbolic_dims_keep_the_bias_out_of_the_product(tmp_path):
    """ONNX Runtime turns MatMul + bias into a Gemm on a 3-D or 4-D input only when it knows the input's
    dims: with a symbolic batch dim in the file the bias joins the GELU (BiasGelu) and the residual
    LayerNorm (SkipLayerNormalization, 3-D), or stays an Add of its own (4-D). Profiled, ORT 1.32:
    ['b', 128, 768]: MatMul, SkipLayerNormalization; ['b', 56, 56, 96]: MatMul, Add (bias), Add
    (residual), LayerNormalization; ['b', 16, 64] with a GELU: MatMul, BiasGelu; ['b', 64]: Gemm, Gelu."""
    from dnnperf.ir import ShapeOverrides

    cases = ((["b", 16, 64], [("MatMul", ("mm1",)), ("BiasGelu", ("bias1", "div", "erf", "plus1", "mul", "half_mul")),
                              ("MatMul", ("mm2",)), ("SkipLayerNormalization", ("bias2", "residual", "ln"))]),
             (["b", 4, 4, 64], [("MatMul", ("mm1",)), ("BiasGelu", ("bias1", "div", "erf", "plus1", "mul", "half_mul")),
                                ("MatMul", ("mm2",)), ("Add", ("bias2",)), ("Add", ("residual",)),
                                ("LayerNormalization", ("ln",))]),
             (["b", 64], [("MatMul+Add", ("mm1", "bias1")), ("Gelu", ("div", "erf", "plus1", "mul", "half_mul")),
                          ("MatMul+Add", ("mm2", "bias2")), ("Add", ("residual",)), ("LayerNormalization", ("ln",))]))
    for i, (shape, want) in enumerate(cases):
        path = save(_block(shape), tmp_path, f"sym{i}.onnx")
        insp = inspect_model(path, ShapeOverrides(batch=1))
        assert insp.graph.symbolic_inputs
        layers = [c.layer for c in analyze(insp, load_profile("cpu-avx2"), Settings(fusion="typical"),
                                           with_fixes=False).score.layers]
        assert [(l.op_type, l.nodes) for l in layers] == want, shape


def test_a_bias_no_product_takes_goes_into_a_biasgelu(tmp_path):
    """A bias Add on a graph input (or after a product with 3-D weights, which the runtime does not
    turn into a Gemm) joins the GELU after it: BiasGelu."""
    n = helper.make_node
    gelu = [n("Div", ["s", "sqrt2"], ["d"], name="div"), n("Erf", ["d"], ["e"], name="erf"),
            n("Add", ["e", "one"], ["e1"], name="plus1"), n("Mul", ["s", "e1"], ["g"], name="mul"),
            n("Mul", ["g", "half"], ["y"], name="half_mul")]
    consts = [_const("sqrt2", 1.4142135), _const("one", 1.0), _const("half", 0.5), weight("b1", [64])]
    for i, (head, ins, inits) in enumerate((
            ([n("Add", ["h", "b1"], ["s"], name="bias1")], [vi("h", [1, 16, 64])], []),
            ([n("MatMul", ["h", "w3"], ["m"], name="mm"), n("Add", ["m", "b1"], ["s"], name="bias1")],
             [vi("h", [2, 16, 64])], [weight("w3", [2, 64, 64])]))):
        m = model(head + gelu, ins, [vi("y", None)], consts + inits)
        layers = [c.layer for c in analyze(inspect_model(save(m, tmp_path, f"b{i}.onnx")), load_profile("cpu-avx2"),
                                           Settings(fusion="typical"), with_fixes=False).score.layers]
        assert ("BiasGelu", ("bias1", "div", "erf", "plus1", "mul", "half_mul")) in [(l.op_type, l.nodes) for l in layers]


def test_gpu_profiles_keep_the_matmul_epilogues(tmp_path):
    layers = _layers(tmp_path, "t4")
    assert not any(l.op_type in ("BiasGelu", "SkipLayerNormalization") for l in layers)
    assert layers[0].nodes[:2] == ("mm1", "bias1")


def test_validate_maps_the_runtime_kernels_in_graph_order(tmp_path):
    from dnnperf.measure.validate import map_kernels

    insp = inspect_model(save(_block(), tmp_path))
    layers = _layers(tmp_path, "cpu-avx2")
    kernels = {"mm1/MatMulAddFusion": ("Gemm", 5.0), "Gelu": ("Gelu", 7.0), "mm2/MatMulAddFusion": ("Gemm", 4.0),
               "SkipLayerNormalization": ("SkipLayerNormalization", 3.0)}
    measured, unmatched = map_kernels(kernels, insp.graph, layers)
    assert unmatched == {}
    assert measured == {"mm1+bias1": 5.0, "div+erf+plus1+mul+half_mul": 7.0, "mm2+bias2": 4.0, "residual+ln": 3.0}


def test_a_runtime_gelu_keeps_its_in_cache_pace_out_of_cache(tmp_path):
    """ORT's Gelu evaluates an erf polynomial per element (the op count takes it as one
    instruction): on a calibrated CPU its efficiency, read in cache, sets its pace at any size, so a
    working set beyond the cache costs its roofline at the bandwidth of one that just fits, over the
    efficiency, not its DRAM streaming time. By hand: 1 MB of cache at 100 GB/s, 20 GB/s from 4 MB,
    efficiency 0.25; the GELU over [1, 1024, 256] fp32 reads and writes 2 x 1 MiB = 2,097,152 bytes:
    2,097,152 / 100e9 / 0.25 = 83.9 us, plus one 2 us dispatch."""
    import yaml

    from dnnperf.hardware import profile_from_dict
    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["memory"] = {"dram_gbs": 20, "onchip_mb": 1, "bandwidth_curve": {0.5: 100, 1: 100, 4: 20}}
    d["op_efficiency"] = {"Gelu": 0.25}
    hw = profile_from_dict(d, "x")
    m = _block()
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 1024
    rep = analyze(inspect_model(save(m, tmp_path)), hw, Settings(fusion="typical"), with_fixes=False)
    gelu = next(c for c in rep.score.layers if c.layer.op_type == "Gelu")
    assert gelu.layer.workload.act_bytes_read + gelu.layer.workload.bytes_written == 2_097_152
    assert gelu.time_s == pytest.approx(2_097_152 / 100e9 / 0.25 + 2e-6, rel=1e-6)
    # streaming at the 2 MB working set's curve bandwidth alone would have been far less
    assert gelu.t_memory < 0.5 * gelu.time_s


def test_a_softmax_past_the_cache_waits_for_dram_on_top_of_its_in_cache_pace(tmp_path):
    """A softmax's efficiency is read in cache, where its exponentials set the pace: past the cache
    it keeps that pace and its DRAM streaming adds to it. By hand: 1 MB of cache at 100 GB/s, 20 GB/s
    from 4 MB, softmax efficiency 0.25; [1, 4, 512, 512] fp32 reads and writes 2 x 4 MiB = 8,388,608
    bytes: 8,388,608 / 20e9 (DRAM) + 8,388,608 / 100e9 / 0.25 (the in-cache pace) = 419.4 + 335.5 us
    = 755.0 us. It was the DRAM time over the in-cache efficiency, 1,677.7 us (ORT's [8, 1024, 1024]
    softmax on a 2-core EPYC: 2x its measured time). In cache ([1, 4, 128, 128]), as before."""
    import yaml

    from dnnperf.hardware import profile_from_dict
    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["memory"] = {"dram_gbs": 20, "onchip_mb": 1, "bandwidth_curve": {0.5: 100, 1: 100, 4: 20}}
    d["efficiency"] = {**d.get("efficiency", {}), "softmax": 0.25}
    hw = profile_from_dict(d, "x")

    def softmax(side):
        m = model([helper.make_node("Softmax", ["x"], ["y"], axis=-1, name="sm")], [vi("x", [1, 4, side, side])],
                  [vi("y", None)])
        rep = analyze(inspect_model(save(m, tmp_path, f"sm{side}.onnx")), hw, Settings(), with_fixes=False)
        return rep.score.layers[0]

    big = softmax(512)
    assert big.layer.workload.act_bytes_read + big.layer.workload.bytes_written == 8_388_608
    assert big.time_s - big.t_launch == pytest.approx(8_388_608 / 20e9 + 8_388_608 / 100e9 / 0.25, rel=1e-6)
    small = softmax(128)  # 524,288 bytes at the curve's 100 GB/s, over the efficiency
    assert small.time_s - small.t_launch == pytest.approx(524_288 / 100e9 / 0.25, rel=1e-6)


def _silu_model(shape=(1, 64, 56, 56)):
    # x -> Conv 1 x 1 -> c; c * Sigmoid(c) (SiLU) -> y
    n = helper.make_node
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv"), n("Sigmoid", ["c"], ["s"], name="sig"),
             n("Mul", ["c", "s"], ["y"], name="mul")]
    return model(nodes, [vi("x", list(shape))], [vi("y", None)], [weight("w", [shape[1], shape[1], 1, 1])])


def test_silu_is_the_runtimes_quickgelu_kernel_on_a_cpu(tmp_path):
    """x * Sigmoid(x) after a convolution: ONNX Runtime's CPU provider runs it as one QuickGelu kernel
    (profiled, ORT 1.32: '<Sigmoid>/QuickGeluFusion/'); the convolution cannot take the Sigmoid (its
    output has two readers). The kernel reads c once and writes y: 2 x 64 x 56 x 56 x 4 bytes; ORT's
    kernel name maps back to it. A GPU profile keeps the pair a fused Sigmoid+Mul layer, as before."""
    from dnnperf.measure.validate import map_kernels

    path = save(_silu_model(), tmp_path)
    insp = inspect_model(path)
    rep = analyze(insp, load_profile("cpu-avx2"), Settings(fusion="typical"), with_fixes=False)
    layers = [c.layer for c in rep.score.layers]
    assert [(l.op_type, l.nodes) for l in layers] == [("Conv", ("conv",)), ("QuickGelu", ("sig", "mul"))]
    w = layers[1].workload
    assert (w.act_bytes_read, w.bytes_written) == (64 * 56 * 56 * 4, 64 * 56 * 56 * 4)
    measured, unmatched = map_kernels({"conv": ("Conv", 30.0), "sig/QuickGeluFusion/": ("QuickGelu", 12.0)},
                                      insp.graph, layers)
    assert unmatched == {} and measured == {"conv": 30.0, "sig+mul": 12.0}
    gpu = analyze(insp, load_profile("v100"), Settings(fusion="typical"), with_fixes=False)
    assert [c.layer.op_type for c in gpu.score.layers] == ["Conv", "Sigmoid+Mul"]


def test_a_quickgelu_keeps_its_calibrated_pace_at_any_size(tmp_path):
    """A SiLU's sigmoid holds it at one pace per element: with op_efficiency QuickGelu 0.25 and 1 MB of
    cache at 100 GB/s (50 GB/s at 0.25 MB, 20 GB/s from 4 MB), one over [1, 64, 64, 64] fp32 (1 MiB
    in, 1 MiB out) takes 2,097,152 / 100e9 / 0.25 = 83.9 us plus one 2 us dispatch; one over
    [1, 16, 64, 64] (a quarter of it, in cache, where the curve reads about 70 GB/s) 21.0 us plus 2:
    the same pace per byte."""
    import yaml

    from dnnperf.hardware import profile_from_dict
    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["memory"] = {"dram_gbs": 20, "onchip_mb": 1, "bandwidth_curve": {0.25: 50, 1: 100, 4: 20}}
    d["op_efficiency"] = {"QuickGelu": 0.25}
    hw = profile_from_dict(d, "x")
    for ch, nbytes in ((64, 2_097_152), (16, 524_288)):
        rep = analyze(inspect_model(save(_silu_model((1, ch, 64, 64)), tmp_path, f"silu{ch}.onnx")), hw,
                      Settings(fusion="typical"), with_fixes=False)
        silu = next(c for c in rep.score.layers if c.layer.op_type == "QuickGelu")
        assert silu.layer.workload.act_bytes_read + silu.layer.workload.bytes_written == nbytes
        assert silu.time_s == pytest.approx(nbytes / 100e9 / 0.25 + 2e-6, rel=1e-6)


def test_a_calibration_without_a_runtime_kernels_figure_says_so(tmp_path):
    """A calibrated profile (bandwidth curve) made before QuickGelu was timed prices the SiLU at the
    elementwise family's figure: the report says so, naming the kernel and its layer count; with the
    figure, or on a profile without a curve (a spec sheet), no such note."""
    import yaml

    from dnnperf.hardware import profile_from_dict
    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    insp = inspect_model(save(_silu_model(), tmp_path))
    spec = analyze(insp, profile_from_dict(d, "spec"), Settings(fusion="typical"), with_fixes=False)
    d["memory"] = {"dram_gbs": 20, "onchip_mb": 1, "bandwidth_curve": {0.25: 50, 1: 100, 4: 20}}
    old = analyze(insp, profile_from_dict(d, "old"), Settings(fusion="typical"), with_fixes=False)
    d["op_efficiency"] = {"QuickGelu": 0.25}
    d["call_us"] = {"fixed": 3.0}  # (a calibration of this version times the runtime's call too)
    new = analyze(insp, profile_from_dict(d, "new"), Settings(fusion="typical"), with_fixes=False)
    said = [n for n in old.notes if "no calibrated figure" in n]
    assert len(said) == 1 and "QuickGelu (1 layer)" in said[0] and "calibrate" in said[0]
    assert not any("no calibrated figure" in n for n in spec.notes + new.notes)


def test_a_calibration_without_the_activation_pass_or_image_kernel_figures_says_so(tmp_path):
    """A blocked-layout calibration made before epilogue_ns and conv.rgb existed: a 3 -> 16 stem with a
    fused HardSwish, then a 16 -> 16 1 x 1 convolution with another, is costed with the general figures,
    and the report names both (the HardSwish pass: 2 layers; the convolution with fewer input channels
    than one block: 1); with both figures, or on a spec-sheet profile (no bandwidth curve), no such
    note."""
    import yaml

    from dnnperf.hardware import profile_from_dict
    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    n = helper.make_node
    m = model([n("Conv", ["x", "w1"], ["c1"], name="stem", pads=[1, 1, 1, 1], strides=[2, 2]),
               n("HardSwish", ["c1"], ["a1"], name="hs1"), n("Conv", ["a1", "w2"], ["c2"], name="pw"),
               n("HardSwish", ["c2"], ["y"], name="hs2")],
              [vi("x", [1, 3, 64, 64])], [vi("y", None)], [weight("w1", [16, 3, 3, 3]), weight("w2", [16, 16, 1, 1])])
    insp = inspect_model(save(m, tmp_path))
    layout = {"block": 16, "grouped_min_width": 16, "channel_alignment": 4, "pool_alignment": 16}
    spec = analyze(insp, profile_from_dict({**d, "cpu_layout": layout}, "spec"), Settings(fusion="typical"),
                   with_fixes=False)
    d["memory"] = {"dram_gbs": 20, "onchip_mb": 1, "onchip_gbs": 50, "bandwidth_curve": {0.25: 50, 1: 100, 4: 20}}
    old = analyze(insp, profile_from_dict({**d, "cpu_layout": layout}, "old"), Settings(fusion="typical"),
                  with_fixes=False)
    new = analyze(insp, profile_from_dict({**d, "cpu_layout": layout, "epilogue_ns": {"HardSwish": 0.3},
                                           "call_us": {"fixed": 3},
                                           "shape_efficiency": {"conv.rgb": {432: 0.4}, "layout.reorder": {49: 0.3}}},
                                          "new"), Settings(fusion="typical"), with_fixes=False)
    said = [x for x in old.notes if "no calibrated figure" in x]
    assert len(said) == 1
    assert "HardSwish pass after a convolution (2 layers)" in said[0]
    assert "convolution with fewer input channels than one block (the image-reading kind) (1 layer)" in said[0]
    # and the conversion out of the blocked layout before the output, costed at the one-node figure
    assert "layout conversion (timed only at a one-node model's edges) (1 layer)" in said[0]
    assert not any("no calibrated figure" in x for x in spec.notes + new.notes)
    # a 1 x 1 convolution on 4 channels (under a block of 16 or of 8) without conv.rgb_k1: named under a
    # 16-wide block; under an 8-wide one calibrate never times that point (its 8 channels fill a block),
    # so there is nothing to name
    m1 = model([n("Conv", ["x", "w"], ["y"], name="narrow")], [vi("x", [1, 4, 32, 32])], [vi("y", None)],
               [weight("w", [24, 4, 1, 1])])
    one = inspect_model(save(m1, tmp_path, "narrow.onnx"))
    curves = {"conv.rgb": {432: 0.4}, "layout.reorder": {49: 0.3}}
    for block, named in ((16, True), (8, False)):
        lay = {**layout, "block": block, "grouped_min_width": block, "pool_alignment": block}
        rep = analyze(one, profile_from_dict({**d, "cpu_layout": lay, "shape_efficiency": curves}, "k"),
                      Settings(fusion="typical"), with_fixes=False)
        assert any("1 x 1 convolution with fewer input channels than one block (1 layer)" in x
                   for x in rep.notes) is named, block


def test_a_layernorm_over_short_rows_takes_the_row_curve(tmp_path):
    """LayerNorm costs per row as well as per element: with shape_efficiency 'norm.row' {96: 0.1,
    768: 0.4} a LayerNorm over [1, 3136, 96] (row 96) runs at 0.1 of its roof, one over [1, 392, 768]
    at 0.4, one over rows of 192 (a third of the way in log) at 0.2; the row is the product of the axes from
    ``axis`` on (axis=-2 over [1, 56, 56, 96]: 56 x 96 = 5,376, past the curve's end: 0.4)."""
    import yaml

    from dnnperf.hardware import profile_from_dict
    from dnnperf.efficiency import family_efficiency
    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["efficiency"] = {"norm": 0.9}
    d["shape_efficiency"] = {"norm.row": {96: 0.1, 768: 0.4}}
    hw = profile_from_dict(d, "x")
    for shape, axis, row, eff in (([1, 3136, 96], -1, 96, 0.1), ([1, 392, 768], -1, 768, 0.4),
                                  ([1, 1568, 192], -1, 192, 0.2), ([1, 56, 56, 96], -2, 5376, 0.4)):
        c = shape[-1] if axis == -1 else shape[-2] * shape[-1]
        gshape = [shape[-1]] if axis == -1 else shape[-2:]
        m = model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], name="ln", axis=axis)],
                  [vi("x", shape)], [vi("y", None)], [weight("g", gshape), weight("b", gshape)])
        layer = next(c_.layer for c_ in analyze(inspect_model(save(m, tmp_path, f"ln{row}.onnx")), hw,
                                                Settings(fusion="none"), with_fixes=False).score.layers)
        assert layer.workload.row == row == c
        assert family_efficiency(layer, hw) == pytest.approx(eff, rel=1e-6)


def test_a_blocked_convolution_takes_the_lower_of_its_pixel_curve_and_the_thin_product_figure(tmp_path):
    """Plain blocked convolutions by output pixels: with shape_efficiency 'conv.k3' {49: 0.8, 3136: 1.0}
    and 'conv.k1' {49: 0.5, 3136: 0.5}, a 512-channel 3 x 3 convolution at 7 x 7 (49 pixels) runs at
    0.8, at 14 x 14 (196: halfway in log between 49 and 3136 is 392, so a third of the way) at
    0.8 + 0.2 / 3; a 1 x 1 one at 7 x 7 at 0.5; and an 8-output-channel 3 x 3 one at 7 x 7 keeps the
    thin-product figure of matrix_m_efficiency {8: 0.3} (lower than the curve's 0.8)."""
    import yaml

    from dnnperf.hardware import profile_from_dict
    from dnnperf.efficiency import family_efficiency
    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["efficiency"] = {"conv": 1.0}
    d["matrix_m_efficiency"] = {8: 0.3, 16: 1.0}
    d["shape_efficiency"] = {"conv.k3": {49: 0.8, 3136: 1.0}, "conv.k1": {49: 0.5, 3136: 0.5}}
    d["cpu_layout"] = {"block": 16, "grouped_min_width": 16, "channel_alignment": 16, "pool_alignment": 16}
    hw = profile_from_dict(d, "x")
    for cin, cout, side, k, eff in ((512, 512, 7, 3, 0.8), (512, 512, 14, 3, 0.8 + 0.2 / 3),
                                    (512, 512, 7, 1, 0.5), (512, 16, 7, 3, 0.8), (512, 8, 7, 3, 0.3)):
        m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", pads=[k // 2] * 4)],
                  [vi("x", [1, cin, side, side])], [vi("y", None)], [weight("w", [cout, cin, k, k])])
        layer = next(c.layer for c in analyze(inspect_model(save(m, tmp_path, f"c{cout}_{side}_{k}.onnx")), hw,
                                              Settings(fusion="none"), with_fixes=False).score.layers
                     if c.layer.op_type == "Conv")
        assert family_efficiency(layer, hw) == pytest.approx(eff, rel=1e-6), (cin, cout, side, k)


def test_a_first_layer_reading_the_image_takes_the_image_kernels_curve_by_work_per_pixel(tmp_path):
    """conv.rgb {432: 0.3, 1728: 0.6} (MACs per output pixel: input channels x kernel area x output
    channels), blocks of 16 channels: a 3 -> 16 3 x 3 stride-2 convolution (432 per pixel) reads 0.3; a
    3 -> 32 one (864, halfway in log) 0.45, not the thin-product figure of its 27-deep reduction
    (matrix_nk_efficiency {16: 0.2, 64: 1.0}: 0.501955); a 3 -> 64 7 x 7 one (9,408, past the last
    point) 0.6; a 16-channel input (one whole block: the plain blocked kernel) and the same profile
    without cpu_layout (not calibrated against that runtime) ignore the curve."""
    import yaml

    from dnnperf.efficiency import family_efficiency
    from dnnperf.hardware import profile_from_dict
    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["efficiency"] = {"conv": 1.0}
    d.pop("matrix_m_efficiency", None)
    d["matrix_nk_efficiency"] = {16: 0.2, 64: 1.0}
    d["shape_efficiency"] = {"conv.rgb": {432: 0.3, 1728: 0.6}}
    layout = {"block": 16, "grouped_min_width": 16, "channel_alignment": 4, "pool_alignment": 16}
    blocked, plain = profile_from_dict({**d, "cpu_layout": layout}, "x"), profile_from_dict(d, "y")

    def layer(cin, cout, k):
        m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", pads=[k // 2] * 4, strides=[2, 2])],
                  [vi("x", [1, cin, 224, 224])], [vi("y", None)], [weight("w", [cout, cin, k, k])])
        return next(c.layer for c in analyze(inspect_model(save(m, tmp_path, f"c{cin}_{cout}_{k}.onnx")), blocked,
                                             Settings(fusion="none"), with_fixes=False).score.layers
                    if c.layer.op_type == "Conv")

    assert family_efficiency(layer(3, 16, 3), blocked) == pytest.approx(0.3)
    assert family_efficiency(layer(3, 32, 3), blocked) == pytest.approx(0.45)
    assert family_efficiency(layer(3, 64, 7), blocked) == pytest.approx(0.6)
    # 16 input channels x 9 = 144-deep reduction, 32 wide: the thin-product curve at 32 (0.2 + 0.8 / 2)
    assert family_efficiency(layer(16, 32, 3), blocked) == pytest.approx(0.6)
    # without cpu_layout: the thin-product curve at the 27-deep reduction, 0.2 + 0.8 x ln(27/16) / ln 4
    assert family_efficiency(layer(3, 32, 3), plain) == pytest.approx(0.501955, abs=1e-6)
    # a 1 x 1 kernel on 8 channels (192 MACs per pixel): the stems' curve at its first point, 0.3;
    # with a 'conv.rgb_k1' curve {128: 0.12} that one, flat past its point, and 3 x 3 ones keep conv.rgb
    assert family_efficiency(layer(8, 24, 1), blocked) == pytest.approx(0.3)
    blocked = profile_from_dict({**d, "cpu_layout": layout,
                                 "shape_efficiency": {**d["shape_efficiency"], "conv.rgb_k1": {128: 0.12}}}, "z")
    assert family_efficiency(layer(8, 24, 1), blocked) == pytest.approx(0.12)
    assert family_efficiency(layer(3, 32, 3), blocked) == pytest.approx(0.45)


def test_the_pixel_curve_holds_its_chains_width_and_only_narrower_layers_take_the_thin_product_curve(tmp_path):
    """The pixel curves are measured on convolution chains 64 or more channels wide, so a 64 -> 64
    3 x 3 convolution at 56 x 56 takes conv.k3's 0.9, not the thin-product figure matrix_nk_efficiency
    gives 64 channels (0.8: counting the width twice); a 64 -> 32 one goes below the curve by as much
    as the thin-product curve drops from 64 to 32 channels: 0.9 x 0.6 / 0.8 = 0.675; a 256 -> 256 one
    keeps 0.9; a plain 3136 x 64 x 64 MatMul (no pixel curve) keeps the thin-product 0.8."""
    import yaml

    from dnnperf.hardware import profile_from_dict
    from dnnperf.measure.micro import CONV1_PIXELS, CONV_PIXELS
    from dnnperf.efficiency import PIXEL_CHAIN_MIN_CHANNELS, family_efficiency
    from helpers import SAMPLES

    # the constant names the narrowest chain calibrate measures the pixel curves with
    assert PIXEL_CHAIN_MIN_CHANNELS == min([ch for ch, _ in CONV_PIXELS] + [ch // 4 for ch, _ in CONV1_PIXELS]) == 64
    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["efficiency"] = {"conv": 1.0, "matmul": 1.0}
    d.pop("matrix_m_efficiency", None)
    d["matrix_nk_efficiency"] = {16: 0.4, 32: 0.6, 64: 0.8, 128: 1.0}
    d["shape_efficiency"] = {"conv.k3": {49: 0.9, 3136: 0.9}}
    d["cpu_layout"] = {"block": 16, "grouped_min_width": 16, "channel_alignment": 16, "pool_alignment": 16}
    hw = profile_from_dict(d, "x")
    for cin, cout, eff in ((64, 64, 0.9), (64, 32, 0.9 * 0.6 / 0.8), (256, 256, 0.9)):
        m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", pads=[1] * 4)],
                  [vi("x", [1, cin, 56, 56])], [vi("y", None)], [weight("w", [cout, cin, 3, 3])])
        layer = next(c.layer for c in analyze(inspect_model(save(m, tmp_path, f"w{cin}_{cout}.onnx")), hw,
                                              Settings(fusion="none"), with_fixes=False).score.layers
                     if c.layer.op_type == "Conv")
        assert family_efficiency(layer, hw) == pytest.approx(eff, rel=1e-6), (cin, cout)
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [3136, 64])], [vi("y", None)],
              [weight("w", [64, 64])])
    layer = next(c.layer for c in analyze(inspect_model(save(m, tmp_path, "mm.onnx")), hw,
                                          Settings(fusion="none"), with_fixes=False).score.layers)
    assert family_efficiency(layer, hw) == pytest.approx(0.8, rel=1e-6)


def test_a_blocked_pointwise_convolution_pays_its_block_padding_and_only_its_output_side_thinness(tmp_path):
    """16-channel blocks, 'conv.k1' {49: 0.9, 3136: 0.9}, thin-product curve {16: 0.4, 32: 0.6,
    64: 0.8, 128: 1.0}. By hand, at 56 x 56:
    16 -> 96: no padding, six output blocks: 0.9 (the old rule took the thin-product figure of
    min(96, 16) = 16 channels: 0.9 x 0.4 / 0.8 = 0.45);
    24 -> 96: input padded to 32, 24/32 of the multiplies useful: 0.9 x 0.75 = 0.675;
    96 -> 24: output padded to 32 (0.75), and two output blocks take the curve at 32 against 64:
    0.9 x 0.75 x 0.6 / 0.8 = 0.50625;
    96 -> 16: one output block: 0.9 x 0.4 / 0.8 = 0.45;
    64 -> 64: 0.9; a 3 x 3 64 -> 32 convolution keeps the rule of the test above: 0.9 x 0.6 / 0.8."""
    import yaml

    from dnnperf.hardware import profile_from_dict
    from dnnperf.efficiency import family_efficiency
    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["efficiency"] = {"conv": 1.0, "matmul": 1.0}
    d.pop("matrix_m_efficiency", None)
    d["matrix_nk_efficiency"] = {16: 0.4, 32: 0.6, 64: 0.8, 128: 1.0}
    d["shape_efficiency"] = {"conv.k1": {49: 0.9, 3136: 0.9}, "conv.k3": {49: 0.9, 3136: 0.9}}
    d["cpu_layout"] = {"block": 16, "grouped_min_width": 16, "channel_alignment": 4, "pool_alignment": 16}
    hw = profile_from_dict(d, "x")
    for cin, cout, k, eff in ((16, 96, 1, 0.9), (24, 96, 1, 0.9 * 24 / 32), (96, 24, 1, 0.9 * 24 / 32 * 0.6 / 0.8),
                              (96, 16, 1, 0.9 * 0.4 / 0.8), (64, 64, 1, 0.9), (64, 32, 3, 0.9 * 0.6 / 0.8)):
        m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", pads=[k // 2] * 4)],
                  [vi("x", [1, cin, 56, 56])], [vi("y", None)], [weight("w", [cout, cin, k, k])])
        layer = next(c.layer for c in analyze(inspect_model(save(m, tmp_path, f"p{cin}_{cout}_{k}.onnx")), hw,
                                              Settings(fusion="none"), with_fixes=False).score.layers
                     if c.layer.op_type == "Conv")
        assert family_efficiency(layer, hw) == pytest.approx(eff, rel=1e-6), (cin, cout, k)


def test_a_strided_pointwise_convolution_takes_its_own_curve_when_calibrated(tmp_path):
    """'conv.k1' {49: 0.9, 3136: 0.9} and 'conv.k1s2' {49: 0.6, 784: 0.8}: a 1024 -> 2048 1 x 1
    convolution at stride 2 from 14 x 14 to 7 x 7 (49 output pixels) runs at 0.6, one from 56 x 56 to
    28 x 28 (784) at 0.8, the same convolution at stride 1 on 7 x 7 at 0.9; a 3 x 3 stride-2 one keeps
    conv.k3 {49: 0.7, 3136: 0.7}; a profile without 'conv.k1s2' gives the strided one conv.k1's 0.9."""
    import yaml

    from dnnperf.hardware import profile_from_dict
    from dnnperf.efficiency import family_efficiency
    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["efficiency"] = {"conv": 1.0}
    d.pop("matrix_m_efficiency", None)
    d.pop("matrix_nk_efficiency", None)
    d["shape_efficiency"] = {"conv.k3": {49: 0.7, 3136: 0.7}, "conv.k1": {49: 0.9, 3136: 0.9},
                             "conv.k1s2": {49: 0.6, 784: 0.8}}
    d["cpu_layout"] = {"block": 16, "grouped_min_width": 16, "channel_alignment": 16, "pool_alignment": 16}
    hw = profile_from_dict(d, "x")
    d2 = dict(d, shape_efficiency={k: v for k, v in d["shape_efficiency"].items() if k != "conv.k1s2"})
    hw_plain = profile_from_dict(d2, "y")
    cases = ((hw, 14, 1, 2, 0.6), (hw, 56, 1, 2, 0.8), (hw, 7, 1, 1, 0.9), (hw, 14, 3, 2, 0.7), (hw_plain, 14, 1, 2, 0.9))
    for i, (prof, side, k, stride, eff) in enumerate(cases):
        m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", pads=[k // 2] * 4, strides=[stride, stride])],
                  [vi("x", [1, 1024, side, side])], [vi("y", None)], [weight("w", [2048, 1024, k, k])])
        layer = next(c.layer for c in analyze(inspect_model(save(m, tmp_path, f"s{i}.onnx")), prof,
                                              Settings(fusion="none"), with_fixes=False).score.layers
                     if c.layer.op_type == "Conv")
        assert family_efficiency(layer, prof) == pytest.approx(eff, rel=1e-6), (side, k, stride)


def _cpu_profile_dict() -> dict:
    """The shipped cpu-avx2 profile as a dict, for a test to change a figure of."""
    import yaml

    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _product(m: int, n: int, k: int):
    """A one-node MatMul layer [m, k] x weights [k, n], float32."""
    from dnnperf.scoring import Layer
    from dnnperf.workload import Gemm, Workload

    w = Workload("matmul", "float32", m * n * k, 0, 4 * (m * k), 4 * k * n, 4 * m * n, m * n, Gemm(m, n, k, 1))
    return Layer("mm", "MatMul", ("mm",), w, (m, n))


def test_rows_and_channels_take_their_own_curves():
    """matrix_m_efficiency {1: 0.5, 16: 1.0} (rows) and matrix_nk_efficiency {8: 0.2, 32: 0.8} (the smaller
    of N and K): a 3136 x 16 x 16 product (16 channels at 56 x 56) reads the channel curve at 16,
    halfway in log between 8 and 32: 0.5 (the row curve says 1.0 at 3136); a 4 x 768 x 768 one reads
    the row curve at 4, halfway between 1 and 16: 0.75. Without matrix_nk_efficiency a profile keeps
    the one curve at min(M, N, K): 16 -> 1.0."""
    from dnnperf.hardware import profile_from_dict
    from dnnperf.efficiency import family_efficiency

    d = _cpu_profile_dict()
    d["efficiency"] = {"matmul": 1.0}
    d["matrix_m_efficiency"] = {1: 0.5, 16: 1.0}
    split = profile_from_dict({**d, "matrix_nk_efficiency": {8: 0.2, 32: 0.8}}, "x")
    merged = profile_from_dict(d, "y")
    layer = _product

    assert family_efficiency(layer(3136, 16, 16), split) == pytest.approx(0.5)
    assert family_efficiency(layer(4, 768, 768), split) == pytest.approx(0.75)
    assert family_efficiency(layer(3136, 16, 16), merged) == pytest.approx(1.0)


def test_a_wide_product_runs_at_the_matrix_family_figure_not_the_thin_curves_last_point():
    """matrix_nk_efficiency measured up to 64 channels ({16: 0.4, 64: 0.8}) and the matmul family at
    0.98 (calibrated on 197 x 768 x 3072 and 128 x 768 x 768 products): the calibrated shape itself,
    197 x 3072 x 768, runs at 0.98 (the curve held flat past 64 had given it 0.8); a 256-wide product
    sits between, in log: 0.8 + 0.18 x ln(256/64) / ln(768/64) = 0.8 + 0.18 x 0.557886 = 0.900420;
    below the last point the curve is as before (32 channels: 0.4 + 0.4 x ln 2 / ln 4 = 0.6); rows
    still lower a wide product (4 rows: the row curve's 0.75)."""
    from dnnperf.hardware import profile_from_dict
    from dnnperf.efficiency import family_efficiency

    d = _cpu_profile_dict()
    d["efficiency"] = {"matmul": 0.98}
    d["matrix_m_efficiency"] = {1: 0.5, 16: 1.0}
    d["matrix_nk_efficiency"] = {16: 0.4, 64: 0.8}
    prof = profile_from_dict(d, "x")
    layer = _product

    assert family_efficiency(layer(197, 3072, 768), prof) == pytest.approx(0.98)
    assert family_efficiency(layer(197, 4096, 1024), prof) == pytest.approx(0.98)
    assert family_efficiency(layer(3136, 256, 256), prof) == pytest.approx(0.900420, abs=1e-6)
    assert family_efficiency(layer(3136, 32, 32), prof) == pytest.approx(0.6)
    assert family_efficiency(layer(4, 3072, 768), prof) == pytest.approx(0.75)


def test_a_fused_activation_other_than_relu_costs_a_pass_over_the_output_in_cache(tmp_path):
    """A calibrated CPU (cpu_layout) at onchip_gbs 100 GB/s, op_efficiency Sigmoid 0.4: a 64 -> 64
    1 x 1 convolution at 56 x 56 writes 64 x 56 x 56 = 200,704 floats; a fused Clip (ReLU6), HardSwish
    or LeakyRelu reads and writes them once more in cache: 2 x 200,704 x 4 B / 100 GB/s = 16.05632 us;
    a fused Sigmoid takes that at its own pace, / 0.4 = 40.1408 us; Relu (applied inside the
    kernel's loop) adds nothing. The same profile without cpu_layout (not calibrated against that
    runtime's blocked kernels) charges no such pass."""
    import yaml

    from dnnperf.hardware import profile_from_dict
    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["memory"] = dict(d["memory"], onchip_gbs=100.0)
    d["op_efficiency"] = {"Sigmoid": 0.4}
    # 8 threads split the blocked kernel's 56 rows evenly (the profile's 64 would leave 8 idle:
    # efficiency.thread_split), so the activation's pass is all that tells the two apart
    d["parallelism"] = dict(d["parallelism"], compute_units=8)
    plain = profile_from_dict(d, "plain")
    blocked = profile_from_dict({**d, "cpu_layout": {"block": 16, "grouped_min_width": 16, "channel_alignment": 4,
                                                     "pool_alignment": 16}}, "blocked")
    one_pass = 2 * 64 * 56 * 56 * 4 / 100e9
    for act, extra in (("Relu", 0.0), ("Clip", one_pass), ("HardSwish", one_pass), ("LeakyRelu", one_pass),
                       ("Sigmoid", one_pass / 0.4)):
        assert _activation_extra(tmp_path, act, plain, blocked) == pytest.approx(extra, rel=1e-9, abs=1e-15), act


def _activation_extra(tmp_path, act: str, base, other) -> float:
    """What a 64 -> 64 1 x 1 convolution at 56 x 56 fused with ``act`` costs more on ``other`` than on
    ``base`` (one fused layer, --fusion typical)."""
    n = helper.make_node
    ins = ["c", "lo", "hi"] if act == "Clip" else ["c"]
    inits = [weight("w", [64, 64, 1, 1])] + ([_const("lo", 0.0), _const("hi", 6.0)] if act == "Clip" else [])
    m = model([n("Conv", ["x", "w"], ["c"], name="conv"), n(act, ins, ["y"], name="act")],
              [vi("x", [1, 64, 56, 56])], [vi("y", None)], inits)
    path = save(m, tmp_path, f"{act}.onnx")
    times = []
    for hw in (base, other):
        rep = analyze(inspect_model(path), hw, Settings(fusion="typical"), with_fixes=False)
        (conv,) = [c for c in rep.score.layers if "conv" in c.layer.nodes]
        assert conv.layer.nodes == ("conv", "act")
        times.append(conv.time_s)
    return times[1] - times[0]


def test_a_calibrated_epilogue_costs_its_measured_time_per_output_element(tmp_path):
    """epilogue_ns {HardSwish: 0.4, Clip: 0.25} on the blocked profile of the test above: the 64 -> 64
    1 x 1 convolution at 56 x 56 with a fused HardSwish pays 200,704 x 0.4 ns = 80.2816 us, with a
    Clip 200,704 x 0.25 ns = 50.176 us (the measured pace replaces the pass in cache); LeakyRelu, not in
    the map, keeps the pass (2 x 200,704 x 4 B / 100 GB/s = 16.05632 us); Relu still adds nothing. A
    name outside the epilogue activations, a negative figure, or the field on a GPU profile is refused."""
    import yaml

    from dnnperf.errors import DnnperfError
    from dnnperf.hardware import profile_from_dict
    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["memory"] = dict(d["memory"], onchip_gbs=100.0)
    d["parallelism"] = dict(d["parallelism"], compute_units=8)  # an even split of the 56 rows (as above)
    layout = {"block": 16, "grouped_min_width": 16, "channel_alignment": 4, "pool_alignment": 16}
    plain = profile_from_dict(d, "plain")
    timed = profile_from_dict({**d, "cpu_layout": layout, "epilogue_ns": {"HardSwish": 0.4, "Clip": 0.25}}, "timed")
    for act, extra in (("Relu", 0.0), ("HardSwish", 80.2816e-6), ("Clip", 50.176e-6), ("LeakyRelu", 16.05632e-6)):
        assert _activation_extra(tmp_path, act, plain, timed) == pytest.approx(extra, rel=1e-9, abs=1e-15), act
    for bad, msg in (({"Gelu": 1.0}, "epilogue_ns.Gelu: use one of Clip, HardSigmoid"),
                     ({"Clip": -1.0}, "epilogue_ns.Clip")):
        with pytest.raises(DnnperfError, match=msg):
            profile_from_dict({**d, "epilogue_ns": bad}, "x")
    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "t4.yaml"), encoding="utf-8") as fh:
        t4 = yaml.safe_load(fh)
    with pytest.raises(DnnperfError, match="epilogue_ns: only for CPU runtimes"):
        profile_from_dict({**t4, "epilogue_ns": {"Clip": 0.3}}, "x")


def test_calibrate_derives_each_epilogue_from_its_chain_less_the_plain_one():
    """epilogue_ns: each activation's convolution chain less the chain without activations, over the
    elements the activations pass through: 8 activated outputs of 32 x 56 x 56 = 802,816 elements; a
    chain 300 us slower than the plain one's 500 us is 300e-6 / 802,816 = 0.373685 ns per element
    (to 4 significant figures, 0.3737); one no slower (or faster, noise) costs 0."""
    from dnnperf.measure.calibrate import epilogue_ns
    from dnnperf.measure.micro import epilogue_elements, micro_models
    from dnnperf.vocab import EPILOGUE_ACTIVATIONS as EPILOGUES

    assert epilogue_elements() == 8 * 32 * 56 * 56 == 802_816
    names = {mb.name for mb in micro_models(True) if mb.role == "epilogue"}
    assert names == {"epilogue_none", *(f"epilogue_{a}" for a in EPILOGUES)}
    t = {"epilogue_none": 500e-6, **{f"epilogue_{a}": 800e-6 for a in EPILOGUES}}
    t["epilogue_Clip"] = 480e-6
    got = epilogue_ns(t)
    assert got["HardSwish"] == 0.3737 and got["Sigmoid"] == 0.3737
    assert got["Clip"] == 0.0


def test_a_concat_of_small_inputs_copies_them_at_the_one_thread_pace(tmp_path):
    """ONNX Runtime copies a Concat input on its thread pool only when the copy costs at least
    210,000 cycles at 1 + 2 x 11/64 x bytes cycles per element: 88,421 float32 elements, 124,444
    float16 ones (timed: 307 KB inputs, 76,800 floats, at one thread's pace; 357 KB, 89,375, at two).
    With 'movement.serial' {401: 0.5, 1605: 0.25} (KB read and written) and movement 0.8, by hand:
    16 inputs of 16 x 28 x 28 (12,544 elements each, all small; 2 x 16 x 50,176 B = 1,605 KB): 0.25;
    two of 256 x 28 x 28 (200,704 each, both large): the family's 0.8; one large and one of 32 x 28 x 28
    (25,088: 1/9 of the elements small, 1,806 KB, beyond the curve's last point): time-weighted
    1 / ((1/9) / 0.25 + (8/9) / 0.8) = 0.642857...; without the curve a Concat keeps 0.8."""
    import yaml

    from dnnperf.hardware import profile_from_dict
    from dnnperf.efficiency import family_efficiency, serial_pieces_share
    from dnnperf.workload import Workload
    from helpers import SAMPLES

    assert serial_pieces_share(Workload("movement", "float32", pieces=(88_421, 88_422))) == 88_421 / (88_421 + 88_422)
    assert serial_pieces_share(Workload("movement", "float32", pieces=(76_800, 89_375))) == 76_800 / (76_800 + 89_375)
    assert serial_pieces_share(Workload("movement", "float16", pieces=(124_444, 124_445))) == 124_444 / (124_444 + 124_445)
    assert serial_pieces_share(Workload("movement", "float32")) == 0.0
    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["efficiency"] = {"movement": 0.8}
    d["shape_efficiency"] = {"movement.serial": {401: 0.5, 1605: 0.25}}
    hw = profile_from_dict(d, "x")
    plain = profile_from_dict({**d, "shape_efficiency": {}}, "y")
    for i, (chans, eff) in enumerate((([16] * 16, 0.25), ([256, 256], 0.8), ([256, 32], 1 / ((1 / 9) / 0.25 + (8 / 9) / 0.8)))):
        names = [f"x{j}" for j in range(len(chans))]
        m = model([helper.make_node("Concat", names, ["y"], name="cat", axis=1)],
                  [vi(n, [1, c, 28, 28]) for n, c in zip(names, chans)], [vi("y", None)])
        path = save(m, tmp_path, f"cat{i}.onnx")
        (layer,) = [c.layer for c in analyze(inspect_model(path), hw, Settings(), with_fixes=False).score.layers]
        assert layer.workload.pieces == tuple(c * 28 * 28 for c in chans)
        assert family_efficiency(layer, hw) == pytest.approx(eff, rel=1e-9), chans
        assert family_efficiency(layer, plain) == pytest.approx(0.8, rel=1e-9)


def _no_fusion(tmp_path, hw, m=None, **settings):
    rep = analyze(inspect_model(save(m or _block(), tmp_path)), load_profile(hw),
                  Settings(fusion="none", **settings), with_fixes=False)
    return rep.score


def test_gpu_frameworks_run_an_erf_gelu_and_a_linear_as_one_kernel_each(tmp_path):
    """Without fusion a GPU profile still runs what the framework ran as one op as one kernel: the
    five nodes of an exported erf GELU (torch's nn.GELU, ONNX Runtime's GeluFusion) and a MatMul with
    its bias Add on a 3-D input (torch's linear folds the bias into addmm). The residual Add and the
    LayerNormalization stay apart; a CPU profile keeps one layer per node (ONNX Runtime's CPU
    provider without fusion)."""
    layers = [(c.layer.op_type, c.layer.nodes) for c in _no_fusion(tmp_path, "v100").layers]
    assert layers == [
        ("MatMul", ("mm1", "bias1")),
        ("Gelu", ("div", "erf", "plus1", "mul", "half_mul")),
        ("MatMul", ("mm2", "bias2")),
        ("Add", ("residual",)),
        ("LayerNormalization", ("ln",)),
    ]
    assert len(_no_fusion(tmp_path, "cpu-avx2").layers) == 11
    # eagerly, one host launch each: 5 x the profile's launch_overhead_us (5 us) at least
    sc = _no_fusion(tmp_path, "v100", runtime="eager")
    assert sc.totals["launches"] == 5
    # the GELU kernel reads the biased product once (16 x 256 floats) and writes its result once
    gelu = next(c.layer.workload for c in sc.layers if c.layer.op_type == "Gelu")
    assert (gelu.act_bytes_read, gelu.bytes_written) == (16 * 256 * 4, 16 * 256 * 4)


def test_a_4d_linear_and_a_product_of_two_activations_keep_their_add(tmp_path):
    """torch's linear adds the bias in a kernel of its own for inputs of 4 dims or more (matmul, then
    add_), and an Add after a product of two computed tensors (attention scores plus a mask) is not a
    bias: both stay two layers."""
    n = helper.make_node
    four = model([n("MatMul", ["x", "w"], ["m"], name="mm"), n("Add", ["m", "b"], ["y"], name="bias")],
                 [vi("x", [1, 8, 8, 64])], [vi("y", None)], [weight("w", [64, 32]), weight("b", [32])])
    assert [c.layer.nodes for c in _no_fusion(tmp_path, "v100", four).layers] == [("mm",), ("bias",)]
    scores = model([n("MatMul", ["q", "k"], ["s"], name="qk"), n("Add", ["s", "mask"], ["y"], name="mask_add")],
                   [vi("q", [1, 4, 16, 8]), vi("k", [1, 4, 8, 16])], [vi("y", None)], [weight("mask", [16])])
    assert [c.layer.nodes for c in _no_fusion(tmp_path, "v100", scores).layers] == [("qk",), ("mask_add",)]


def test_a_silu_is_one_kernel_on_a_gpu_and_a_gate_is_not(tmp_path):
    """x * Sigmoid(x) is torch's nn.SiLU, one kernel; a squeeze-excite gate (Sigmoid of another
    tensor times x) stays a Sigmoid and a Mul."""
    n = helper.make_node
    silu = model([n("Sigmoid", ["x"], ["s"], name="sig"), n("Mul", ["x", "s"], ["y"], name="mul")],
                 [vi("x", [1, 16, 8, 8])], [vi("y", None)])
    sc = _no_fusion(tmp_path, "h200", silu, runtime="eager")
    assert [(c.layer.op_type, c.layer.nodes) for c in sc.layers] == [("Silu", ("sig", "mul"))]
    # one pass: x read once (16 x 8 x 8 floats), the product written once
    w = sc.layers[0].layer.workload
    assert (w.act_bytes_read, w.bytes_written, sc.totals["launches"]) == (4096, 4096, 1)
    gate = model([n("Sigmoid", ["g"], ["s"], name="sig"), n("Mul", ["x", "s"], ["y"], name="mul")],
                 [vi("x", [1, 16, 8, 8]), vi("g", [1, 16, 1, 1])], [vi("y", None)])
    assert [c.layer.nodes for c in _no_fusion(tmp_path, "h200", gate).layers] == [("sig",), ("mul",)]


def _attention():
    """Q [1, 4, 64, 16] x K^T [1, 4, 16, 64] -> x 0.25 -> Softmax -> x V [1, 4, 64, 16]."""
    n = helper.make_node
    nodes = [n("MatMul", ["q", "kt"], ["s"], name="qk"), n("Mul", ["s", "scale"], ["ss"], name="scale"),
             n("Softmax", ["ss"], ["p"], name="sm", axis=-1), n("MatMul", ["p", "v"], ["y"], name="pv")]
    return model(nodes, [vi("q", [1, 4, 64, 16]), vi("kt", [1, 4, 16, 64]), vi("v", [1, 4, 64, 16])],
                 [vi("y", None)], [_const("scale", 0.25)])


def test_a_fusing_gpu_runtime_runs_attention_as_one_kernel(tmp_path):
    """TensorRT-style fusion (chains) runs scores, scale, softmax and the product with V as one
    FlashAttention-style kernel: the 4 x 64 x 64 score matrix never reaches memory. It reads Q, K and
    V (3 x 4 x 64 x 16 floats = 49,152 bytes), writes the output (16,384 bytes), does both products
    (2 x 4 x 64 x 64 x 16 = 524,288 MACs) over one 64 x 64 score tile per head with 16 + 16 of K."""
    from dnnperf.workload import Gemm

    rep = analyze(inspect_model(save(_attention(), tmp_path)), load_profile("h200"),
                  Settings(fusion="typical", precision="fp32"), with_fixes=False)
    assert [c.layer.nodes for c in rep.score.layers] == [("qk", "scale", "sm", "pv")]
    w = rep.score.layers[0].layer.workload
    assert (w.macs, w.act_bytes_read, w.bytes_written) == (524_288, 49_152, 16_384)
    assert w.gemm == Gemm(64, 64, 32, 4)
    # ONNX Runtime's CPU provider runs the softmax and the second product apart
    cpu = analyze(inspect_model(save(_attention(), tmp_path, "c.onnx")), load_profile("cpu-avx2"),
                  Settings(fusion="typical"), with_fixes=False)
    assert [c.layer.nodes for c in cpu.score.layers] == [("qk", "scale"), ("sm",), ("pv",)]


def test_the_product_overlap_applies_to_matrix_products_only():
    """product_overlap 0.5 on a profile whose memory_overlap is 1: a 1 x 4096 x 4096 product (memory
    the longer side) adds half its math time, as under memory_overlap 0.5 for every layer; a
    pointwise Add of 1 M floats (8 MB read, 4 MB written: its math the shorter side) keeps full overlap: its
    time equals the profile's without product_overlap."""
    from dnnperf.hardware import profile_from_dict
    from dnnperf.scoring import Layer, score_layer
    from dnnperf.workload import Workload

    d = _cpu_profile_dict()
    d["efficiency"] = {"matmul": 1.0, "elementwise": 1.0}
    d["memory_overlap"] = 1.0
    full = profile_from_dict(d, "full")
    prod = profile_from_dict({**d, "product_overlap": 0.5}, "product")
    half = profile_from_dict({**d, "memory_overlap": 0.5}, "half")
    add = Layer("add", "Add", ("add",), Workload("elementwise", "float32", 0, 1 << 20, 8 << 20, 0, 4 << 20, 1 << 20),
                (1 << 20,))

    def parts(layer, hw):
        c = score_layer(layer, hw)
        return c.time_s - c.t_launch, c.t_compute, c.t_memory

    gemv = _product(1, 4096, 4096)
    t_full, comp, mem = parts(gemv, full)
    assert mem > comp > 0
    assert parts(gemv, prod)[0] == pytest.approx(t_full + 0.5 * comp, rel=1e-9)
    assert parts(gemv, prod)[0] == pytest.approx(parts(gemv, half)[0], rel=1e-12)
    assert parts(add, prod)[0] == pytest.approx(parts(add, full)[0], rel=1e-12)
    assert parts(add, half)[0] > parts(add, full)[0]


def _tanh_gelu_model(shape=(1, 64, 1024), cube="Pow", output=False):
    # Phi's / GPT-2's gelu_new as the legacy exporter writes it: 0.5 x (1 + tanh(c (x + 0.044715 x^3))); "product":
    # Megatron's / BLOOM's 0.5 x (1 + tanh(c x (1 + 0.044715 x x))); ``output``: the GELU is the graph's output
    n = helper.make_node
    if cube == "product":
        inner = [n("Mul", ["x", "k"], ["q"], name="coef"), n("Mul", ["q", "x"], ["p"], name="sq"),
                 n("Add", ["p", "one"], ["a"], name="inner"), n("Mul", ["x", "c"], ["cx"], name="cx"),
                 n("Mul", ["cx", "a"], ["b"], name="scale")]
    else:
        cubed = [n("Pow", ["x", "three"], ["p"], name="pow")] if cube == "Pow" else \
            [n("Mul", ["x", "x"], ["sq"], name="sq"), n("Mul", ["x", "sq"], ["p"], name="cube")]
        inner = cubed + [n("Mul", ["p", "k"], ["q"], name="coef"), n("Add", ["x", "q"], ["a"], name="inner"),
                         n("Mul", ["a", "c"], ["b"], name="scale")]
    nodes = [n("Mul", ["x", "half"], ["h"], name="half_mul")] + inner + [
        n("Tanh", ["b"], ["t"], name="tanh"), n("Add", ["t", "one"], ["u"], name="plus1"),
        n("Mul", ["h", "u"], ["g"], name="out")] + ([] if output else [n("MatMul", ["g", "w"], ["y"], name="mm")])
    inits = [_const("half", 0.5), _const("k", 0.044715), _const("c", 0.7978845608), _const("one", 1.0),
             weight("w", [shape[-1], 16])] + ([_const("three", 3.0)] if cube == "Pow" else [])
    return model(nodes, [vi("x", list(shape))], [vi("g" if output else "y", None)], inits)


def test_a_tanh_gelu_is_the_runtimes_fastgelu_kernel_on_a_cpu(tmp_path):
    """ONNX Runtime fuses the exported tanh GELU into one FastGelu kernel (its profile of an exported Phi
    names them 'GPT2Gelu', 'GPT2Gelu_token_80'; the Pow it replaces was predicted at 352 us a layer and
    measured at nothing), its cube a Pow or its argument in the product form c x (1 + 0.044715 x x). With
    --fusion typical on a CPU profile the eight (nine) nodes are one layer that reads x once and writes the
    GELU once: 64 x 1024 floats = 262,144 bytes each way. The cube spelt x * (x * x), and a GELU that is the
    graph's output, the runtime runs node by node (its optimised graphs: ``test_..._fuses_only``)."""
    for cube, count in (("Pow", 8), ("product", 9)):
        insp = inspect_model(save(_tanh_gelu_model(cube=cube), tmp_path, f"t{cube}.onnx"))
        layers = [c.layer for c in analyze(insp, load_profile("cpu-avx2"), Settings(fusion="typical"),
                                           with_fixes=False).score.layers]
        [fast] = [l for l in layers if l.op_type == "FastGelu"]
        assert len(fast.nodes) == count and "mm" not in fast.nodes
        assert fast.workload.act_bytes_read == 64 * 1024 * 4
        assert fast.workload.bytes_written == 64 * 1024 * 4
    for name, m in (("mul", _tanh_gelu_model(cube="Mul")), ("out", _tanh_gelu_model(output=True))):
        rep = analyze(inspect_model(save(m, tmp_path, f"{name}.onnx")), load_profile("cpu-avx2"),
                      Settings(fusion="typical"), with_fixes=False)
        ops = [c.layer.op_type for c in rep.score.layers]
        assert "FastGelu" not in ops and "Tanh" in ops


def test_the_runtime_fuses_the_pow_and_product_tanh_gelus_only(tmp_path):
    """ONNX Runtime 1.32's optimised graphs of the models above (its FastGeluFusion: two formulas, a Pow
    cube or the product form; the GELU's last Mul not a graph output)."""
    from helpers import ort_op_types

    assert ort_op_types(_tanh_gelu_model(cube="Pow"), tmp_path) == ["FastGelu", "MatMul"]
    assert ort_op_types(_tanh_gelu_model(cube="product"), tmp_path) == ["FastGelu", "MatMul"]
    assert "FastGelu" not in ort_op_types(_tanh_gelu_model(cube="Mul"), tmp_path)
    assert "FastGelu" not in ort_op_types(_tanh_gelu_model(output=True), tmp_path)


def test_fastgelu_is_priced_as_the_calibrated_gelu_until_calibrated_itself(tmp_path):
    from dataclasses import replace

    from dnnperf.efficiency import _op_or

    insp = inspect_model(save(_tanh_gelu_model(), tmp_path))
    hw = load_profile("cpu-avx2")
    [fast] = [c.layer for c in analyze(insp, hw, Settings(fusion="typical"), with_fixes=False).score.layers
              if c.layer.op_type == "FastGelu"]
    assert _op_or(fast, replace(hw, op_efficiency={"Gelu": 0.31}), 0.9) == 0.31
    assert _op_or(fast, replace(hw, op_efficiency={"Gelu": 0.31, "FastGelu": 0.27}), 0.9) == 0.27
    assert _op_or(fast, replace(hw, op_efficiency={}), 0.9) == 0.9


def test_validate_maps_ort_gpt2gelu_kernels_to_the_fastgelu_layers(tmp_path):
    from dnnperf.measure.validate import map_kernels

    m = _tanh_gelu_model()
    insp = inspect_model(save(m, tmp_path))
    layers = [c.layer for c in analyze(insp, load_profile("cpu-avx2"), Settings(fusion="typical"),
                                       with_fixes=False).score.layers]
    measured, unmatched = map_kernels({"GPT2Gelu": ("FastGelu", 21.0), "mm": ("MatMul", 4.0)}, insp.graph, layers)
    assert unmatched == {}
    [fast] = [l.name for l in layers if l.op_type == "FastGelu"]
    assert measured == {fast: 21.0, "mm": 4.0}


def test_a_fastgelu_priced_with_the_gelu_figure_says_so(tmp_path):
    """A calibration made before `op_FastGelu` was timed prices the tanh GELU with its Gelu figure: the
    report names that assumption (it said nothing); with its own figure, no such note."""
    import yaml

    from dnnperf.hardware import profile_from_dict
    from helpers import SAMPLES

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    insp = inspect_model(save(_tanh_gelu_model(), tmp_path))
    d["memory"] = {"dram_gbs": 20, "onchip_mb": 1, "bandwidth_curve": {0.25: 50, 1: 100, 4: 20}}
    d["op_efficiency"] = {"Gelu": 0.3}
    old = analyze(insp, profile_from_dict(d, "old"), Settings(fusion="typical"), with_fixes=False)
    said = [n for n in old.notes if "no calibrated figure" in n]
    assert len(said) == 1 and "FastGelu, priced with its Gelu figure (1 layer)" in said[0], old.notes
    d["op_efficiency"] = {"Gelu": 0.3, "FastGelu": 0.28}
    d["call_us"] = {"fixed": 3.0}
    new = analyze(insp, profile_from_dict(d, "new"), Settings(fusion="typical"), with_fixes=False)
    assert not any("no calibrated figure" in n for n in new.notes)


def test_a_pre_norm_residual_keeps_its_add_and_layernorm(tmp_path):
    """ONNX Runtime 1.32 fuses Add + LayerNormalization into a SkipLayerNormalization only when the
    LayerNorm is the sum's one reader (probed: [1, 197, 768] Add -> LN fused; the same sum also read by
    a second Add, or a graph output, stays Add + LayerNormalization). A pre-norm block (ViT, GPT-2)
    reads the sum again in its next residual."""
    n = helper.make_node
    nodes = [n("Relu", ["x"], ["xr"], name="rx"), n("Relu", ["h"], ["hr"], name="rh"),
             n("Add", ["xr", "hr"], ["r"], name="residual"),
             n("LayerNormalization", ["r", "gamma", "beta"], ["ln"], name="ln", axis=-1),
             n("Add", ["r", "ln"], ["y"], name="next_residual")]
    m = model(nodes, [vi("x", [1, 16, 64]), vi("h", [1, 16, 64])], [vi("y", None)],
              [weight("gamma", [64]), weight("beta", [64])])
    layers = [c.layer for c in analyze(inspect_model(save(m, tmp_path)), load_profile("cpu-avx2"),
                                       Settings(fusion="typical"), with_fixes=False).score.layers]
    ops = [(l.op_type, l.nodes) for l in layers]
    assert ("Add", ("residual",)) in ops and ("LayerNormalization", ("ln",)) in ops
    assert not any(l.op_type == "SkipLayerNormalization" for l in layers)


def _spelled_norm(kind: str, shape=(1, 128, 256)):
    """x -> [centre: x - ReduceMean(x)] -> Pow 2 -> ReduceMean(last axis) -> + eps -> Sqrt -> x / that ->
    * g [-> + b]: RMSNorm ('rms'), a layer norm spelled out ('ln'), the same without its shift
    ('ln_no_shift'), RMSNorm with x * Reciprocal(...) ('recip') or over axis 1 ('axis1')."""
    n = helper.make_node
    x, nodes = "x", []
    if kind.startswith("ln"):
        nodes += [n("ReduceMean", ["x"], ["mu"], name="centre", axes=[-1]), n("Sub", ["x", "mu"], ["d"], name="sub")]
        x = "d"
    axes = [1] if kind == "axis1" else [-1]
    nodes += [n("Pow", [x, "two"], ["p"], name="pow"), n("ReduceMean", ["p"], ["v"], name="mean", axes=axes),
              n("Add", ["v", "eps"], ["ve"], name="eps_add"), n("Sqrt", ["ve"], ["s"], name="sqrt")]
    if kind == "recip":
        nodes += [n("Reciprocal", ["s"], ["r"], name="recip"), n("Mul", [x, "r"], ["q"], name="div")]
    else:
        nodes += [n("Div", [x, "s"], ["q"], name="div")]
    g = weight("g", [shape[1], 1] if kind == "axis1" else [shape[-1]])
    nodes += [n("Mul", ["q", "g"], ["y" if kind != "ln" else "z"], name="scale")]
    inits = [_const("two", 2.0), _const("eps", 1e-5), g]
    if kind == "ln":
        nodes += [n("Add", ["z", "b"], ["y"], name="shift")]
        inits.append(weight("b", [shape[-1]]))
    return model(nodes, [vi("x", list(shape))], [vi("y", None)], inits)


def test_a_layer_norm_spelled_as_nodes_is_the_runtimes_norm_kernel_on_a_cpu(tmp_path):
    """ONNX Runtime's SimplifiedLayerNormFusion and LayerNormFusion (probed in ORT 1.32's optimised graphs,
    CPU): Pow 2 -> ReduceMean over the last axis -> + eps -> Sqrt -> x / that -> * scale is one
    SimplifiedLayerNormalization kernel (RMSNorm), named '<scale Mul>/SimplifiedLayerNormFusion/' in
    its profile; with x = x0 - mean(x0) and a shift added after the scale, the whole is one
    LayerNormalization kernel; without the shift only the Pow onwards fuses; x * Reciprocal(...) or a
    mean over axis 1 stays as it is. The kernel is priced as the norm op: family norm, rows of 256;
    by hand it reads x once and writes y once, 128 x 256 x 4 = 131,072 bytes each (the Pow's and the
    division's reads of x are one). A GPU profile keeps its elementwise chains."""
    from dnnperf.measure.validate import map_kernels

    def layers(kind, hw="cpu-avx2"):
        insp = inspect_model(save(_spelled_norm(kind), tmp_path, f"{kind}.onnx"))
        rep = analyze(insp, load_profile(hw), Settings(fusion="typical"), with_fixes=False)
        return insp, [c.layer for c in rep.score.layers]

    insp, rms = layers("rms")
    assert [(l.op_type, l.nodes) for l in rms] == [
        ("SimplifiedLayerNormalization", ("pow", "mean", "eps_add", "sqrt", "div", "scale"))]
    w = rms[0].workload
    assert (w.family, w.row, w.act_bytes_read, w.bytes_written) == ("norm", 256, 131_072, 131_072)
    measured, unmatched = map_kernels({"scale/SimplifiedLayerNormFusion/": ("SimplifiedLayerNormalization", 9.0)},
                                      insp.graph, rms)
    assert unmatched == {} and measured == {rms[0].name: 9.0}
    _, ln = layers("ln")
    assert [(l.op_type, l.nodes) for l in ln] == [
        ("LayerNormalization", ("centre", "sub", "pow", "mean", "eps_add", "sqrt", "div", "scale", "shift"))]
    assert (ln[0].workload.family, ln[0].workload.row) == ("norm", 256)
    _, part = layers("ln_no_shift")
    assert [l.op_type for l in part] == ["ReduceMean", "Sub", "SimplifiedLayerNormalization"]
    for kind in ("recip", "axis1"):
        _, plain = layers(kind)
        assert "SimplifiedLayerNormalization" not in [l.op_type for l in plain] and len(plain) >= 6, kind
    _, gpu = layers("rms", "v100")
    assert all("Normalization" not in l.op_type for l in gpu)


def test_a_skeletons_tanh_gelu_constants_are_given_gelu_news_values_for_a_run(tmp_path):
    """A weightless skeleton loses its GELU's scalars (GPT-2's sample: the exponent, 0.044715, sqrt(2/pi),
    1 and 0.5 all stripped). Filled with small random stand-ins, ONNX Runtime saw another function and ran
    it node by node, a generic Pow taking 620 us per layer where its FastGelu kernel takes 80-90; GPT-2
    measured 92.5 ms against 83.6 with the pattern's own values. Each constant gets the value of its
    role in 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), whichever way the cube is spelt (or the product
    form's c x (1 + 0.044715 x x)); a validate
    run of the skeleton then profiles one FastGelu kernel (no Pow, no Tanh) and says what it assumed."""
    import onnx

    pytest.importorskip("onnxruntime")
    from dnnperf.ir import ShapeOverrides
    from dnnperf.load import load_graph
    from dnnperf.load.weights import skeleton_of
    from dnnperf.measure.ort import profiled_kernels, runnable_bytes
    from dnnperf.measure.validate import validate
    from dnnperf.tanh_gelu import tanh_gelu_constants

    want = {"half": 0.5, "three": 3.0, "k": 0.044715, "c": 0.7978845608028654, "one": 1.0}
    for cube in ("Pow", "Mul", "product"):
        g = load_graph(save(_tanh_gelu_model(cube=cube), tmp_path, f"g{cube}.onnx"))
        assert tanh_gelu_constants(g) == ({k: v for k, v in want.items() if k != "three"} if cube != "Pow" else want)
    full = _tanh_gelu_model(shape=(1, 128, 768))
    data, _ = skeleton_of(save(full, tmp_path, "full.onnx"))
    # a skeleton whose every initializer went to external data (onnx's size_threshold=0), the scalars
    # too: `strip` keeps values this small (in raw_data or float_data alike), another tool may not
    sk = onnx.load_from_string(data)
    for init in sk.graph.initializer:
        if init.name in want:
            for f in ("raw_data", "float_data"):
                init.ClearField(f)
            init.data_location = onnx.TensorProto.EXTERNAL
            e = init.external_data.add()
            e.key, e.value = "location", "absent.bin"
    path = os.path.join(str(tmp_path), "skeleton.onnx")
    with open(path, "wb") as fh:
        fh.write(sk.SerializeToString())
    stripped = {i.name for i in onnx.load(path, load_external_data=False).graph.initializer if i.data_location == 1}
    assert set(want) <= stripped  # the skeleton has none of them
    filled: list = []
    run = runnable_bytes(path, tanh_gelu_constants(load_graph(path)), filled)
    assert sorted(filled) == sorted(want)
    x = {"x": np.random.default_rng(0).standard_normal((1, 128, 768)).astype(np.float32)}
    ops = {op for op, _ in profiled_kernels(run, x, None, 5, 1, 0.0).values()}
    assert "FastGelu" in ops and not ops & {"Pow", "Tanh"}, ops
    d = validate(path, load_profile("cpu-avx2"), ShapeOverrides(), runs=3, strict=False, drift=False)
    assert sum("tanh GELUs had no value in the file" in n for n in d["notes"]) == 1
