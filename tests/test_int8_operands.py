"""8-bit integer products on a CPU by the element types of their data and weights (vocab.INT8_OPERANDS,
the profile's ``int8_operands``). ONNX Runtime on x86 has one fast pairing, uint8 data x int8 weights;
on a 2-core AVX-512 VNNI VM, 1024^3 MatMulInteger ran u8s8 at 0.80-0.87 TOP/s, u8u8 at 0.31-0.33 and
s8s8 at 0.065-0.07 (fp32 MatMul 0.15-0.20), and ResNet-18 took 5.2-6.0 ms as QLinearConv u8s8, 76-117
ms as QLinearConv s8s8, 17.5 in float. Expected figures below follow from the profile by hand."""

from __future__ import annotations

import os

import numpy as np
import pytest
import yaml
from onnx import TensorProto as T
from onnx import helper

from dnnperf.api import analyze, inspect_model
from dnnperf.efficiency import family_efficiency
from dnnperf.errors import DnnperfError
from dnnperf.hardware import profile_from_dict
from dnnperf.scoring import Settings
from helpers import ROOT, model, numpy_scalar, save, vi, weight

SHARES = {"u8s8": 1.0, "u8u8": 0.4, "s8s8": 0.1, "s8u8": 0.1}


def _avx2(**extra) -> dict:
    with open(os.path.join(ROOT, "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d.update(name="int8cpu", **extra)
    return d


def _qlinear_conv(tmp_path, data, wgt, name):
    """QOperator form: a 64 -> 64 3 x 3 QLinearConv at 28 x 28, data of type ``data``, weights ``wgt``."""
    np_of = {T.UINT8: np.uint8, T.INT8: np.int8}
    inits = [numpy_scalar("s", 0.1), numpy_scalar("zx", 0, np_of[data]), numpy_scalar("zw", 0, np_of[wgt]),
             weight("w", [64, 64, 3, 3], wgt)]
    nodes = [helper.make_node("QLinearConv", ["x", "s", "zx", "w", "s", "zw", "s", "zx"], ["y"], pads=[1, 1, 1, 1])]
    m = model(nodes, [vi("x", [1, 64, 28, 28], data)], [vi("y", None)], inits)
    return inspect_model(save(m, tmp_path, name))


def _layer(insp, hw, op):
    rep = analyze(insp, hw, Settings(fusion="none"), with_fixes=False)
    return next(c.layer for c in rep.score.layers if c.layer.op_type == op)


def test_integer_ops_record_their_operand_pairing(tmp_path):
    assert _qlinear_conv(tmp_path, T.INT8, T.INT8, "a.onnx").rows[0].workload.operands == "s8s8"
    assert _qlinear_conv(tmp_path, T.UINT8, T.INT8, "b.onnx").rows[0].workload.operands == "u8s8"
    ms = "com.microsoft"
    nodes = [helper.make_node("MatMulInteger", ["a", "b"], ["y"]),
             # ONNX Runtime quantizes the float data of a DynamicQuantizeMatMul to uint8
             helper.make_node("DynamicQuantizeMatMul", ["f", "c", "s"], ["z"], domain=ms)]
    m = model(nodes, [vi("a", [4, 16], T.UINT8), vi("f", [4, 16])], [vi("y", None), vi("z", None)],
              [weight("b", [16, 8], T.UINT8), weight("c", [16, 8], T.INT8), numpy_scalar("s", 0.1)],
              extra_opsets=[(ms, 1)])
    rows = {r.node.op_type: r.workload.operands for r in inspect_model(save(m, tmp_path, "c.onnx")).rows}
    assert rows == {"MatMulInteger": "u8u8", "DynamicQuantizeMatMul": "u8s8"}


def test_a_pairing_runs_at_its_share_of_the_int8_peak(tmp_path):
    hw = profile_from_dict(_avx2(int8_operands=SHARES), "x")
    plain = profile_from_dict(_avx2(), "x")
    fast = _layer(_qlinear_conv(tmp_path, T.UINT8, T.INT8, "a.onnx"), hw, "QLinearConv")
    slow = _layer(_qlinear_conv(tmp_path, T.INT8, T.INT8, "b.onnx"), hw, "QLinearConv")
    assert family_efficiency(slow, hw) == pytest.approx(0.1 * family_efficiency(fast, hw), rel=1e-9)
    # a profile without the map (every shipped one) runs every pairing at the peak, as before
    assert family_efficiency(slow, plain) == pytest.approx(family_efficiency(fast, plain), rel=1e-9)


def _qdq_conv(tmp_path, data, name):
    """QDQ form: float data quantized to ``data``, int8 weights, a 64 -> 64 3 x 3 Conv, requantized."""
    np_of = {T.UINT8: np.uint8, T.INT8: np.int8}
    inits = [numpy_scalar("s", 0.1), numpy_scalar("zx", 0, np_of[data]), numpy_scalar("zw", 0, np.int8),
             weight("wq", [64, 64, 3, 3], T.INT8)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "s", "zw"], ["w"]),
             helper.make_node("Conv", ["xd", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "s", "zx"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "s", "zx"], ["cd"]),
             helper.make_node("Flatten", ["cd"], ["y"])]
    m = model(nodes, [vi("x", [1, 64, 28, 28])], [vi("y", None)], inits)
    return inspect_model(save(m, tmp_path, name))


def test_a_qdq_layer_never_runs_below_the_float_rate(tmp_path):
    """A Conv in QDQ form keeps its float kernel as the runtime's way out: int8 x int8 at a share of
    0.1 of cpu-avx2's int8 peak (9.2 TOP/s: 0.92) would be slower than its fp32 peak (4.61), so it
    runs at 4.61 / 9.2 of the int8 peak; uint8 data keeps its share of 1."""
    hw = profile_from_dict(_avx2(int8_operands=SHARES), "x")
    plain = profile_from_dict(_avx2(), "x")
    s8 = _layer(_qdq_conv(tmp_path, T.INT8, "a.onnx"), hw, "Conv")
    u8 = _layer(_qdq_conv(tmp_path, T.UINT8, "b.onnx"), hw, "Conv")
    assert (s8.workload.operands, u8.workload.operands) == ("s8s8", "u8s8")
    assert family_efficiency(s8, hw) == pytest.approx(4.61 / 9.2 * family_efficiency(s8, plain), rel=1e-9)
    assert family_efficiency(u8, hw) == pytest.approx(family_efficiency(u8, plain), rel=1e-9)


def test_a_quantized_convolution_takes_no_blocked_layout_conversions(tmp_path):
    """On a CPU whose runtime converts float convolutions to its blocked layout, a QDQ convolution
    (run as a channels-last QLinearConv) gets no conversion before the Flatten after it; the same
    convolution in float gets one in and one out."""
    hw = profile_from_dict(_avx2(cpu_layout={"block": 16, "grouped_min_width": 16}), "x")
    rep = analyze(_qdq_conv(tmp_path, T.UINT8, "q.onnx"), hw, Settings(fusion="none"), with_fixes=False)
    assert not [c for c in rep.score.layers if c.layer.op_type == "LayoutReorder"]
    m = model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Flatten", ["c"], ["y"])],
              [vi("x", [1, 64, 28, 28])], [vi("y", None)], [weight("w", [64, 64, 3, 3])])
    rep = analyze(inspect_model(save(m, tmp_path, "f.onnx")), hw, Settings(fusion="none"), with_fixes=False)
    assert len([c for c in rep.score.layers if c.layer.op_type == "LayoutReorder"]) == 2


@pytest.mark.parametrize("bad, says", [
    ({"x8y8": 0.5}, "use one of u8s8"),
    ({"s8s8": 1.5}, "must be <= 1.0"),
    ({"s8s8": 0}, "must be > 0"),
])
def test_a_malformed_pairing_table_is_refused(bad, says):
    with pytest.raises(DnnperfError, match=says):
        profile_from_dict(_avx2(int8_operands=bad), "x")


def test_a_gpu_profile_takes_no_pairing_table():
    with open(os.path.join(ROOT, "profiles", "t4.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["int8_operands"] = {"s8s8": 0.5}
    with pytest.raises(DnnperfError, match="only for CPU runtimes"):
        profile_from_dict(d, "x")


def test_calibrate_times_every_pairing_with_its_own_types():
    pytest.importorskip("onnxruntime")
    from dnnperf.measure.micro import micro_models
    from dnnperf.vocab import INT8_OPERANDS

    code = {2: "u8", 3: "s8"}
    timed = {mb.key: mb for mb in micro_models(True) if mb.role == "peak_int8"}
    assert sorted(timed) == sorted(INT8_OPERANDS)
    for key, mb in timed.items():
        g = mb.model.graph
        assert g.node[0].op_type == "MatMulInteger"
        assert code[g.input[0].type.tensor_type.elem_type] + code[g.initializer[0].data_type] == key
        assert mb.feeds["a"].dtype == (np.uint8 if key[:2] == "u8" else np.int8)


@pytest.mark.parametrize("group, cin", [(64, 64), (4, 64), (1, 3)])
def test_depthwise_grouped_and_image_convolutions_keep_their_float_pace(tmp_path, group, cin):
    """The byte dot products sum four products of one output; a depthwise or grouped convolution's
    int8 kernel (each group its own product) or an image's three channels gain nothing over the float
    pace: on cpu-avx2 their share of the int8 peak is the fp32 peak over it, 4.61 / 9.2, even u8s8."""
    hw = profile_from_dict(_avx2(int8_operands=SHARES), "x")
    plain = profile_from_dict(_avx2(), "x")
    inits = [numpy_scalar("s", 0.1), numpy_scalar("zx", 0, np.uint8), numpy_scalar("zw", 0, np.int8),
             weight("w", [64, cin // group, 3, 3], T.INT8)]
    nodes = [helper.make_node("QLinearConv", ["x", "s", "zx", "w", "s", "zw", "s", "zx"], ["y"], pads=[1, 1, 1, 1],
                              group=group)]
    m = model(nodes, [vi("x", [1, cin, 28, 28], T.UINT8)], [vi("y", None)], inits)
    layer = _layer(inspect_model(save(m, tmp_path)), hw, "QLinearConv")
    assert layer.workload.operands == "u8s8"
    assert family_efficiency(layer, hw) == pytest.approx(4.61 / 9.2 * family_efficiency(layer, plain), rel=1e-9)


def test_an_int8_what_if_of_a_float_depthwise_layer_keeps_its_float_pace(tmp_path):
    """``-p int8`` on a float model: the what-if has no pairing of its own and runs at the fastest
    pairing's share, but a depthwise layer still gains nothing over its float pace (4.61 / 9.2 of the
    int8 peak on cpu-avx2)."""
    hw = profile_from_dict(_avx2(int8_operands=SHARES), "x")
    plain = profile_from_dict(_avx2(), "x")
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=64)],
              [vi("x", [1, 64, 28, 28])], [vi("y", None)], [weight("w", [64, 1, 3, 3])])
    insp = inspect_model(save(m, tmp_path))

    def conv(profile):
        rep = analyze(insp, profile, Settings(fusion="none", precision="int8"), with_fixes=False)
        return next(c.layer for c in rep.score.layers if c.layer.op_type == "Conv")

    layer = conv(hw)
    assert layer.workload.dtype == "int8" and layer.workload.operands == ""
    assert family_efficiency(layer, hw) == pytest.approx(4.61 / 9.2 * family_efficiency(conv(plain), plain), rel=1e-9)
