"""The layout conversions a CPU runtime adds around its channel-blocked convolutions (dnnperf/layout.py)."""

import math
import os

import pytest
import yaml
import numpy as np
from onnx import helper, numpy_helper

from dnnperf.api import analyze, inspect_model
from dnnperf.errors import DnnperfError
from dnnperf.hardware import load_profile
from dnnperf.scoring import Settings
from helpers import model, ort_op_types, save, vi, weight

PROFILES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "profiles")


def _profile(tmp_path, layout, name="blocked", **fields):
    """The path of cpu-avx2 with ``layout`` as its ``cpu_layout`` (None: none) and ``fields`` set, saved as
    ``name``."""
    with open(os.path.join(PROFILES, "cpu-avx2.yaml")) as fh:
        d = yaml.safe_load(fh)
    d["name"] = name
    if layout is not None:
        d["cpu_layout"] = layout
    d.update(fields)
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(d))
    return str(p)


def _layers(tmp_path, m, layout):
    path = save(m, tmp_path)
    rep = analyze(inspect_model(path), load_profile(_profile(tmp_path, layout)), Settings(fusion="typical"),
                  with_fixes=False)
    return [c.layer for c in rep.score.layers]


def _head(tmp_path, layout):
    # RGB conv -> ReLU -> global pool -> Flatten -> Gemm: the classifier head of a CNN
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fw"], ["y"], name="fc", transB=1)]
    m = model(nodes, [vi("x", [1, 3, 8, 8])], [vi("y", None)], [weight("w", [16, 3, 3, 3]), weight("fw", [10, 16])])
    return _layers(tmp_path, m, layout)


def test_a_classifier_head_converts_once_before_flatten(tmp_path):
    layers = _head(tmp_path, {"block": 8, "grouped_min_width": 8})
    # the 3-channel image is read as it is; ReLU fuses; the pooled [1, 16, 1, 1] goes back to NCHW
    assert [l.name for l in layers] == ["conv+relu", "gap", "reorder out of g", "flat", "fc"]
    r = layers[2]
    assert r.op_type == "LayoutReorder" and r.workload.family == "movement"
    assert r.workload.act_bytes_read == 16 * 4 and r.workload.bytes_written == 16 * 4  # read and write it once


def test_no_layout_rule_without_the_profile_field(tmp_path):
    assert [l.name for l in _head(tmp_path, None)] == ["conv+relu", "gap", "flat", "fc"]


def test_a_transpose_between_convolutions_costs_two_conversions(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"),
             helper.make_node("Transpose", ["a"], ["t"], name="tr", perm=[0, 1, 3, 2]),
             helper.make_node("Conv", ["t", "w2"], ["y"], name="c2")]
    m = model(nodes, [vi("x", [1, 16, 6, 6])], [vi("y", None)],
              [weight("w1", [16, 16, 1, 1]), weight("w2", [16, 16, 1, 1])])
    layers = _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})
    # 16 channels >= the block: the model input is converted too; the output goes back at the end
    assert [l.name for l in layers] == ["reorder into x", "c1", "reorder out of a", "tr", "reorder into t", "c2",
                                        "reorder out of y"]
    assert all(l.workload.act_bytes_read == 16 * 36 * 4 for l in layers if l.op_type == "LayoutReorder")


def test_a_channels_last_transpose_of_a_blocked_tensor_is_folded_into_its_conversion(tmp_path):
    """ConvNeXt's permute after its depthwise convolution: ONNX Runtime's conversion out of the blocked
    layout writes channels-last itself (ReorderOutput channels_last); the Transpose costs nothing
    more. Another reader of the convolution's output keeps the Transpose (the plain copy is needed)."""
    def net(second_reader):
        nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"),
                 helper.make_node("Transpose", ["a"], ["t"], name="tr", perm=[0, 2, 3, 1]),
                 helper.make_node("Relu", ["t"], ["y"], name="r")]
        outs = [vi("y", None)]
        if second_reader:
            nodes.append(helper.make_node("Sigmoid", ["a"], ["z"], name="s"))
            outs.append(vi("z", None))
        return model(nodes, [vi("x", [1, 16, 6, 6])], outs, [weight("w1", [16, 16, 1, 1])])
    layers = _layers(tmp_path, net(False), {"block": 8, "grouped_min_width": 8})
    assert [l.op_type for l in layers] == ["LayoutReorder", "Conv", "LayoutReorder", "Relu"]
    folded = layers[2]
    assert folded.nodes == ("tr",) and folded.output_shape == (1, 6, 6, 16)
    assert folded.workload.act_bytes_read == folded.workload.bytes_written == 16 * 36 * 4  # one pass
    kept = _layers(tmp_path, net(True), {"block": 8, "grouped_min_width": 8})
    assert {"reorder out of a", "tr"} <= {l.name for l in kept}


def test_an_activation_the_cpu_kernel_cannot_apply_is_a_kernel_with_two_conversions(tmp_path):
    """ONNX Runtime's blocked convolution applies Relu, HardSwish and a few more itself; an Erf (or
    Elu, Softplus, Exp...) between two convolutions runs alone on a plain NCHW copy (its optimised
    graph: ReorderOutput, Erf, ReorderInput)."""
    def chain(act):
        nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"),
                 helper.make_node(act, ["a"], ["t"], name="act"),
                 helper.make_node("Conv", ["t", "w2"], ["y"], name="c2")]
        return model(nodes, [vi("x", [1, 16, 6, 6])], [vi("y", None)],
                     [weight("w1", [16, 16, 1, 1]), weight("w2", [16, 16, 1, 1])])
    layout = {"block": 8, "grouped_min_width": 8}
    for act in ("Relu", "HardSwish"):
        assert [l.name for l in _layers(tmp_path, chain(act), layout)] == [
            "reorder into x", "c1+act", "c2", "reorder out of y"]
    erf = _layers(tmp_path, chain("Erf"), layout)
    assert [l.name for l in erf] == ["reorder into x", "c1", "reorder out of a", "act", "reorder into t", "c2",
                                     "reorder out of y"]
    assert erf[3].workload.act_bytes_read == 16 * 36 * 4  # the Erf reads the convolution's output itself


def test_a_convolution_narrower_than_the_block_reads_a_blocked_input_converted_back_out(tmp_path):
    """ONNX Runtime runs a plain convolution with fewer input channels than one block on its NCHW input
    as it is (nchwc_transformer: the image-reading case). When that input comes from a blocked
    convolution (MnasNet-0.5's 16 -> 8 projection feeding its 8 -> 24 expansion), the runtime converts
    it back out of the blocked layout first (a ReorderOutput in its optimised graph and profile); the
    8 channels are stored padded to the block, the conversion reads and writes the logical tensor."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"),
             helper.make_node("Conv", ["a", "w2"], ["b"], name="c2"),
             helper.make_node("Conv", ["a", "w3"], ["y"], name="c3")]
    m = model(nodes, [vi("x", [1, 16, 6, 6])], [vi("b", None), vi("y", None)],
              [weight("w1", [8, 16, 1, 1]), weight("w2", [16, 8, 1, 1]), weight("w3", [16, 8, 3, 3])])
    layers = _layers(tmp_path, m, {"block": 16, "grouped_min_width": 16, "channel_alignment": 4})
    # one conversion serves both narrow readers; the graph's outputs go back to NCHW at the end
    assert [l.name for l in layers] == ["reorder into x", "c1", "reorder out of a", "c2", "c3", "reorder out of b",
                                        "reorder out of y"]
    assert layers[2].workload.act_bytes_read == layers[2].workload.bytes_written == 8 * 36 * 4
    # the image itself (a graph input) is read as it is: no conversion
    rgb = model([helper.make_node("Conv", ["x", "w2"], ["y"], name="c")], [vi("x", [1, 8, 6, 6])], [vi("y", None)],
                [weight("w2", [16, 8, 1, 1])])
    assert [l.name for l in _layers(tmp_path, rgb, {"block": 16, "grouped_min_width": 16, "channel_alignment": 4})] \
        == ["c", "reorder out of y"]
    # a depthwise convolution always takes a blocked input, however few its channels
    dw = model([helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=8)], [vi("x", [1, 8, 6, 6])],
               [vi("y", None)], [weight("w", [8, 1, 3, 3])])
    assert [l.name for l in _layers(tmp_path, dw, {"block": 16, "grouped_min_width": 16, "channel_alignment": 4})] \
        == ["reorder into x", "dw", "reorder out of y"]


def test_grouped_convolutions_narrower_than_the_block_stay_plain(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="g", group=4)]
    m = model(nodes, [vi("x", [1, 16, 6, 6])], [vi("y", None)], [weight("w", [16, 4, 1, 1])])
    assert [l.name for l in _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})] == ["g"]
    wide = [l.name for l in _layers(tmp_path, m, {"block": 4, "grouped_min_width": 4})]
    assert wide == ["reorder into x", "g", "reorder out of y"]


def test_a_malformed_layout_field_is_one_clear_error(tmp_path):
    with pytest.raises(DnnperfError, match="cpu_layout"):
        load_profile(_profile(tmp_path, {"block": 8, "width": 3}))


def test_which_convolutions_run_blocked():
    from dnnperf.rules import blocked_conv
    from dnnperf.workload import Gemm, Workload

    def conv(cin, cout, groups=1, family="conv"):
        return Workload(family, gemm=Gemm(m=49, n=cout // groups, k=cin // groups * 9, count=groups),
                        conv=(cin // groups, 3, 3, 1, 1, False))

    assert blocked_conv(conv(64, 64), 16, 16)
    assert blocked_conv(conv(3, 64), 16, 16)  # an RGB image: fewer channels than a block, read as it is
    assert blocked_conv(conv(64, 58), 16, 16)  # output channels padded up to whole blocks (ONNX Runtime's graph)
    assert not blocked_conv(conv(58, 64), 16, 16)  # ... input channels are not
    assert not blocked_conv(conv(24, 64), 16, 16)  # input channels: more than a block, not whole blocks
    assert blocked_conv(conv(24, 64), 8, 8)  # ... but whole blocks of 8
    assert blocked_conv(conv(144, 144, 144, "depthwise_conv"), 16, 16)
    assert not blocked_conv(conv(72, 72, 72, "depthwise_conv"), 16, 16)
    assert not blocked_conv(conv(128, 128, 16, "grouped_conv"), 16, 16)  # 8 channels per group
    assert blocked_conv(conv(128, 128, 8, "grouped_conv"), 16, 16)  # 16 per group


def test_a_convolution_reading_unaligned_channels_is_a_plain_op_between_blocked_ones(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"),
             helper.make_node("Conv", ["a", "w2"], ["b"], name="odd"),
             helper.make_node("Conv", ["b", "w3"], ["y"], name="c3")]
    m = model(nodes, [vi("x", [1, 16, 6, 6])], [vi("y", None)],
              [weight("w1", [16, 16, 1, 1]), weight("w2", [12, 16, 1, 1]), weight("w3", [16, 12, 1, 1])])
    names = [l.name for l in _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})]
    # 'odd' reads 16 channels (whole blocks) and runs blocked, its 12 output channels padded up to a
    # block; c3's 12 input channels are more than a block and no whole block: it runs the plain kernel,
    # so 'odd's output goes back to NCHW before it, and nothing converts after
    assert names == ["reorder into x", "c1", "odd", "reorder out of b", "c3"]


def test_channel_alignment_below_the_block():
    """ONNX Runtime pads channel counts that are a multiple of 4 up to its 16-channel block: 116
    depthwise channels run blocked, 58 do not (measured by calibrate as channel_alignment)."""
    from dnnperf.rules import blocked_conv
    from dnnperf.workload import Gemm, Workload

    def dw(ch):
        return Workload("depthwise_conv", gemm=Gemm(m=196, n=1, k=9, count=ch), conv=(1, 3, 3, 1, 1, False))

    assert blocked_conv(dw(116), 16, 16, 4) and not blocked_conv(dw(116), 16, 16)
    assert not blocked_conv(dw(58), 16, 16, 4)


def test_layout_alignment_is_read_from_the_profile(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=12, pads=[1, 1, 1, 1])]
    m = model(nodes, [vi("x", [1, 12, 6, 6])], [vi("y", None)], [weight("w", [12, 1, 3, 3])])
    assert [l.name for l in _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})] == ["dw"]
    aligned = _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8, "channel_alignment": 4})
    assert [l.name for l in aligned] == ["reorder into x", "dw", "reorder out of y"]


def test_pooling_is_not_padded_to_the_block(tmp_path):
    """Measured on ONNX Runtime (x86, 16-channel blocks): a 24-channel convolution runs blocked (24
    is padded to 32), the MaxPool after it does not (24 is no multiple of 16) and gets conversions on
    both sides; 32 channels stay blocked throughout. A profile's pool_alignment says which."""
    def net(ch):
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                 helper.make_node("MaxPool", ["c"], ["p"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1]),
                 helper.make_node("Conv", ["p", "w2"], ["y"], name="conv2")]
        return model(nodes, [vi("x", [1, ch, 16, 16])], [vi("y", None)],
                     [weight("w", [ch, ch, 1, 1]), weight("w2", [ch, ch, 1, 1])])

    layout = {"block": 16, "grouped_min_width": 16, "channel_alignment": 4, "pool_alignment": 16}
    assert [l.name for l in _layers(tmp_path, net(24), layout)] == [
        "reorder into x", "conv", "reorder out of c", "pool", "reorder into p", "conv2", "reorder out of y"]
    assert [l.name for l in _layers(tmp_path, net(32), layout)] == ["reorder into x", "conv", "pool", "conv2",
                                                                   "reorder out of y"]
    from dnnperf.rules import blocked_pool

    assert blocked_pool(24, 16, 8) and not blocked_pool(24, 16) and blocked_pool(48, 16)


def test_a_plain_pool_takes_its_own_calibrated_efficiency(tmp_path):
    """pool.unblocked (calibrated on a 58-channel pool) applies to pools run plain, not blocked ones."""
    from dnnperf.efficiency import shape_efficiency

    def pool_layers(ch):
        nodes = [helper.make_node("MaxPool", ["x"], ["p"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1])]
        m = model(nodes, [vi("x", [1, ch, 56, 56])], [vi("p", None)])
        path = save(m, tmp_path, f"p{ch}.onnx")
        with open(os.path.join(PROFILES, "cpu-avx2.yaml")) as fh:
            d = yaml.safe_load(fh)
        d.update(name="plainpool", cpu_layout={"block": 16, "grouped_min_width": 16, "pool_alignment": 16},
                 shape_efficiency={"pool.unblocked": {784: 0.3}})
        p = tmp_path / "pp.yaml"
        p.write_text(yaml.safe_dump(d))
        hw = load_profile(str(p))
        rep = analyze(inspect_model(path), hw, Settings(fusion="none"), with_fixes=False)
        return [c.layer for c in rep.score.layers if c.layer.op_type == "MaxPool"][0], hw

    plain, hw = pool_layers(24)
    assert shape_efficiency(plain, hw) == 0.3
    blocked, hw = pool_layers(32)
    assert shape_efficiency(blocked, hw) is None


def test_a_calibrated_reorder_efficiency_prices_the_conversions(tmp_path):
    """calibrate measures ORT's conversions against a copy at the measured bandwidth
    (op_efficiency.LayoutReorder); a conversion layer takes that figure, other layers do not."""
    def run(op_eff):
        with open(os.path.join(PROFILES, "cpu-avx2.yaml")) as fh:
            d = yaml.safe_load(fh)
        d.update(name="reo", cpu_layout={"block": 8, "grouped_min_width": 8}, op_efficiency=op_eff)
        p = tmp_path / "reo.yaml"
        p.write_text(yaml.safe_dump(d))
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                 helper.make_node("Flatten", ["c"], ["y"], name="flat")]
        m = model(nodes, [vi("x", [1, 16, 64, 64])], [vi("y", None)], [weight("w", [16, 16, 3, 3])])
        rep = analyze(inspect_model(save(m, tmp_path)), load_profile(str(p)), Settings(fusion="typical"),
                      with_fixes=False)
        return {c.layer.name: c for c in rep.score.layers}

    plain, slow = run({}), run({"LayoutReorder": 0.25})
    r0, r1 = plain["reorder out of c"], slow["reorder out of c"]
    assert r1.losses["unoptimized"] == pytest.approx(3 * (r0.time_s - r0.losses["unoptimized"] - r0.losses["launch_overhead"]),
                                                     rel=0.02)
    assert slow["conv"].time_s == pytest.approx(plain["conv"].time_s)


def test_grouped_convolutions_take_the_curve_of_their_stride(tmp_path):
    """A stride-2 grouped convolution (the first block of a RegNet / ResNeXt stage) takes the
    calibrated stride-2 curve 'grouped_conv.w<width>s2' where the profile has one, else the stride-1
    curve; the width (input channels per group) is interpolated between measured widths as before."""
    from dnnperf.efficiency import shape_efficiency

    def layer(stride, curves):
        with open(os.path.join(PROFILES, "cpu-avx2.yaml")) as fh:
            d = yaml.safe_load(fh)
        d.update(name=f"g{stride}{len(curves)}", cpu_layout={"block": 8, "grouped_min_width": 8},
                 shape_efficiency=curves)
        p = tmp_path / f"g{stride}{len(curves)}.yaml"
        p.write_text(yaml.safe_dump(d))
        # 64 channels in 8 groups of 8, 3x3; output 28 x 28 = 784 pixels at either stride
        side = 28 * stride
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="g", pads=[1, 1, 1, 1], strides=[stride, stride],
                                  group=8)]
        m = model(nodes, [vi("x", [1, 64, side, side])], [vi("y", None)], [weight("w", [64, 8, 3, 3])])
        hw = load_profile(str(p))
        rep = analyze(inspect_model(save(m, tmp_path, f"g{stride}.onnx")), hw, Settings(fusion="none"),
                      with_fixes=False)
        return next(c.layer for c in rep.score.layers if c.layer.op_type == "Conv"), hw

    both = {"grouped_conv.w8": {784: 0.2}, "grouped_conv.w8s2": {784: 0.1}}
    assert shape_efficiency(*layer(1, both)) == 0.2
    assert shape_efficiency(*layer(2, both)) == 0.1
    assert shape_efficiency(*layer(2, {"grouped_conv.w8": {784: 0.2}})) == 0.2  # no stride-2 curve: stride 1's
    with pytest.raises(DnnperfError, match="grouped_conv.w<channels per group>\\[s<stride>\\]"):
        layer(2, {"grouped_conv.x8s2": {784: 0.1}})


def _avx2_with(tmp_path, name, layout=True, efficiency=None, **fields):
    """cpu-avx2 with ``fields`` replaced, its ``efficiency`` figures updated, and a 16-channel blocked
    layout (grouped widths from 16) or none, written under ``tmp_path`` and loaded."""
    with open(os.path.join(PROFILES, "cpu-avx2.yaml")) as fh:
        d = yaml.safe_load(fh)
    d.update(name=name, **fields)
    if efficiency:
        d["efficiency"] = {**d.get("efficiency", {}), **efficiency}
    if layout:
        d["cpu_layout"] = {"block": 16, "grouped_min_width": 16}
    else:
        d.pop("cpu_layout", None)
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(d))
    return load_profile(str(p))


def test_a_grouped_width_the_blocked_layout_refuses_reads_the_plain_curves(tmp_path):
    """ONNX Runtime takes a grouped convolution into its blocked layout only for a width (channels per
    group) that is a whole multiple of the measured grouped_min_width (16 on AVX-512); any other width
    runs the plain kernel, as the narrow widths and a plain convolution of odd channels do. So 24
    channels per group read between the plain curves (8 wide, and the 18-channel plain 3 x 3
    convolution behind 'conv.unblocked_k3'), not between the blocked 16 and 32; 48 (blocked) reads the
    blocked ones only. Figures by hand from the made-up curves below (one pixel count, 784)."""
    from dnnperf.efficiency import shape_efficiency

    curves = {"grouped_conv.w8": {784: 0.2}, "grouped_conv.w16": {784: 0.7}, "grouped_conv.w32": {784: 0.9},
              "conv.unblocked_k3": {3136: 0.4}}

    def eff(width, curves=curves, layout=True):
        hw = _avx2_with(tmp_path, f"gw{width}{layout}{len(curves)}", layout, shape_efficiency=curves)
        ch = 4 * width  # four groups, 3 x 3 at 28 x 28
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="g", pads=[1, 1, 1, 1], group=4)]
        m = model(nodes, [vi("x", [1, ch, 28, 28])], [vi("y", None)], [weight("w", [ch, width, 3, 3])])
        rep = analyze(inspect_model(save(m, tmp_path, f"gw{width}.onnx")), hw, Settings(fusion="none"),
                      with_fixes=False)
        return shape_efficiency(next(c.layer for c in rep.score.layers if c.layer.op_type == "Conv"), hw)

    assert eff(24) == pytest.approx(0.4)  # plain: past the 18-channel plain convolution, its figure
    # 12 wide, plain: log-interpolated between 8 (0.2) and 18 (0.4)
    assert eff(12) == pytest.approx(0.2 + (math.log(12) - math.log(8)) / (math.log(18) - math.log(8)) * 0.2)
    assert eff(48) == pytest.approx(0.9)  # blocked: the widest blocked curve
    assert eff(16) == pytest.approx(0.7) and eff(8) == pytest.approx(0.2)  # measured widths as measured
    # no layout known: every width, as before (24 between 16 and 32)
    assert eff(24, layout=False) == pytest.approx(0.7 + (math.log(24) - math.log(16)) / math.log(2) * 0.2)
    # no plain curve of the layer's kind at all: every width rather than nothing
    blocked_only = {k: v for k, v in curves.items() if k in ("grouped_conv.w16", "grouped_conv.w32")}
    assert eff(24, blocked_only) == pytest.approx(0.7 + (math.log(24) - math.log(16)) / math.log(2) * 0.2)


def test_a_standing_batchnorm_on_whole_blocks_runs_at_the_depthwise_kernels_pace(tmp_path):
    """ONNX Runtime's blocked layout runs a standing BatchNormalization over whole channel blocks as a
    1 x 1 depthwise convolution (DenseNet's pre-activations, after a channel-aligned Concat of two
    convolutions): it takes the depthwise family's figure, not the 'norm' one (a row normalisation's).
    24 channels on 16-channel blocks, a profile with no layout, or a BatchNormalization reading a plain
    tensor (the graph input: the runtime's optimised graph keeps its plain BatchNormalization, checked
    with ONNX Runtime 1.2x): the norm figure. The blocked one takes the Relu; a plain one is the runtime's own
    kernel and leaves the Relu a kernel of its own (its optimised graph of a graph input's BatchNormalization
    and Relu keeps both: ``test_a_batch_norm_folds_only_where_the_cpu_runtime_folds_it``)."""
    from dnnperf.efficiency import family_efficiency

    def eff(ch, layout=True, after_concat=True, fused=False):
        hw = _avx2_with(tmp_path, f"bn{ch}{layout}", layout, efficiency={"depthwise_conv": 0.5, "norm": 0.25})
        half = ch // 2
        nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1", pads=[1, 1, 1, 1]),
                 helper.make_node("Conv", ["x", "w2"], ["b"], name="c2", pads=[1, 1, 1, 1]),
                 helper.make_node("Concat", ["a", "b"], ["t0"], name="cat", axis=1)] if after_concat else []
        nodes += [helper.make_node("BatchNormalization", ["t0" if after_concat else "x", "s", "b_", "m", "v"], ["t"],
                                   name="bn"),
                  helper.make_node("Relu", ["t"], ["y"], name="r")]
        inits = [weight(n, [ch]) for n in ("s", "b_", "m", "v")]
        if after_concat:
            inits += [weight("w1", [half, 16, 3, 3]), weight("w2", [half, 16, 3, 3])]
        m = model(nodes, [vi("x", [1, 16 if after_concat else ch, 28, 28])], [vi("y", None)], inits)
        rep = analyze(inspect_model(save(m, tmp_path, f"bn{ch}.onnx")), hw, Settings(fusion="typical"),
                      with_fixes=False)
        layer = next(c.layer for c in rep.score.layers if c.layer.op_type.startswith("BatchNormalization"))
        assert layer.op_type == ("BatchNormalization+Relu" if fused else "BatchNormalization")
        ops = [c.layer.op_type for c in rep.score.layers]
        if after_concat and layout:  # nothing converts between the Concat and the BatchNormalization
            assert ops[ops.index(layer.op_type) - 1] == "Concat", ops
        return family_efficiency(layer, hw)

    assert eff(32, fused=True) == 0.5
    assert eff(24) == 0.25
    assert eff(32, layout=False, fused=True) == 0.25  # (no layout pass: fused as before, at the norm figure)
    assert eff(32, after_concat=False) == 0.25


def test_a_blocked_depthwise_convolution_costs_its_channels_padded_to_the_block(tmp_path):
    """The blocked layout pads 24 channels to 32 (16-channel blocks) and the depthwise kernel computes,
    stores and moves all 32: measured 23.5 us against 25.6 for 32 channels (3 x 3, 56 x 56). A 24-channel
    layer then costs what a 32-channel one does, in math and in traffic; without the layout it costs less."""
    def dw(ch):
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=ch, pads=[1, 1, 1, 1])]
        return model(nodes, [vi("x", [1, ch, 56, 56])], [vi("y", None)], [weight("w", [ch, 1, 3, 3])])

    def cost(ch, layout):
        path = save(dw(ch), tmp_path)
        rep = analyze(inspect_model(path), load_profile(_profile(tmp_path, layout)), Settings(fusion="typical"),
                      with_fixes=False)
        return next(c for c in rep.score.layers if c.layer.name == "dw")

    layout = {"block": 16, "grouped_min_width": 16, "channel_alignment": 4}
    c24, c32 = cost(24, layout), cost(32, layout)
    assert c24.t_compute == pytest.approx(c32.t_compute, rel=1e-9)
    assert c24.t_memory == pytest.approx(c32.t_memory, rel=1e-9)
    assert c24.time_s == pytest.approx(c32.time_s, rel=1e-9)
    assert c24.tile_efficiency == pytest.approx(c32.tile_efficiency * 24 / 32)
    plain24, plain32 = cost(24, None), cost(32, None)
    assert plain24.t_compute == pytest.approx(plain32.t_compute * 24 / 32)


def _convnext_like(tmp_path, residual_from_conv=False, end="conv"):
    """A ConvNeXt-style stage: a stem (conv, channels-last LayerNorm, back to NCHW), two blocks
    (depthwise conv, Transpose to channels-last, LayerNorm, MatMul, Transpose back, layer scale Mul,
    residual Add), then a stage transition (Transpose, LayerNorm, Transpose back, a strided conv) or a
    global pool (``end``). With ``residual_from_conv`` the residual stream starts at a conv's output."""
    c, s = 16, 8
    nodes, inits = [], [weight("ws", [c, 3, 4, 4]), weight("g", [c]), weight("b", [c]), weight("ls", [c, 1, 1])]
    nodes.append(helper.make_node("Conv", ["x", "ws"], ["stem"], name="stem", strides=[4, 4]))
    if residual_from_conv:
        x = "stem"
    else:
        nodes += [helper.make_node("Transpose", ["stem"], ["st"], name="stem_t", perm=[0, 2, 3, 1]),
                  helper.make_node("LayerNormalization", ["st", "g", "b"], ["sn"], name="stem_ln", axis=-1),
                  helper.make_node("Transpose", ["sn"], ["s0"], name="stem_back", perm=[0, 3, 1, 2])]
        x = "s0"
    for i in range(2):
        inits += [weight(f"dw{i}", [c, 1, 7, 7]), weight(f"m{i}", [c, c])]
        nodes += [helper.make_node("Conv", [x, f"dw{i}"], [f"d{i}"], name=f"dw{i}", group=c, pads=[3, 3, 3, 3]),
                  helper.make_node("Transpose", [f"d{i}"], [f"t{i}"], name=f"to_last{i}", perm=[0, 2, 3, 1]),
                  helper.make_node("LayerNormalization", [f"t{i}", "g", "b"], [f"n{i}"], name=f"ln{i}", axis=-1),
                  helper.make_node("MatMul", [f"n{i}", f"m{i}"], [f"p{i}"], name=f"mm{i}"),
                  helper.make_node("Transpose", [f"p{i}"], [f"q{i}"], name=f"back{i}", perm=[0, 3, 1, 2]),
                  helper.make_node("Mul", [f"q{i}", "ls"], [f"l{i}"], name=f"scale{i}"),
                  helper.make_node("Add", [f"l{i}", x], [f"r{i}"], name=f"res{i}")]
        x = f"r{i}"
    if end == "conv":
        inits.append(weight("wd", [2 * c, c, 2, 2]))
        nodes += [helper.make_node("Transpose", [x], ["et"], name="down_t", perm=[0, 2, 3, 1]),
                  helper.make_node("LayerNormalization", ["et", "g", "b"], ["en"], name="down_ln", axis=-1),
                  helper.make_node("Transpose", ["en"], ["eb"], name="down_back", perm=[0, 3, 1, 2]),
                  helper.make_node("Conv", ["eb", "wd"], ["y"], name="down", strides=[2, 2])]
    else:
        nodes.append(helper.make_node("GlobalAveragePool", [x], ["y"], name="gap"))
    m = model(nodes, [vi("x", [1, 3, 4 * s, 4 * s])], [vi("y", None)], inits)
    return {layer.name: layer for layer in _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})}


def test_the_runtime_removes_the_transposes_of_a_channels_last_residual_stream(tmp_path):
    """ONNX Runtime's transpose optimizer keeps a ConvNeXt residual stream channels-last: each block's
    Transpose back to NCHW, and the stage transition's pair around its LayerNorm, leave no kernel (its
    optimized convnext_tiny has none of stage 1's); the block's first Transpose is the conversion out
    of the blocked layout (it was before). Removed ones cost nothing; the convolutions still get their
    conversion in (now read channels-last)."""
    by = _convnext_like(tmp_path)
    for name in ("stem_back", "back0", "back1", "down_t", "down_back"):
        assert by[name].workload.family == "view" and by[name].workload.launches == 0, name
        assert by[name].workload.bytes_total == 0
    assert any(n.startswith("reorder into") and "r0" in n for n in by)  # block 2's depthwise conversion in
    assert any(n.startswith("reorder into") and n.endswith("eb") for n in by)  # the transition conv's
    first = next(layer for name, layer in by.items() if name.endswith("(channels last, absorbs stem_t)"))
    assert first.op_type == "LayoutReorder" and first.workload.bytes_total > 0  # costed as a conversion


def test_transposes_stay_where_the_stream_cannot_be_channels_last(tmp_path):
    """The same blocks with the residual stream starting at a convolution's output (ConvNeXt's later
    stages start at the downsampling conv): pushing a block's Transpose through its residual Add would
    need the conv's output transposed too, and ONNX Runtime keeps them (its optimized graph does, for
    stages 2-4). A stream ending in a global pool keeps them as well."""
    kept = _convnext_like(tmp_path, residual_from_conv=True)
    assert kept["back0"].workload.family == "movement" and kept["back1"].workload.family == "movement"
    pooled = _convnext_like(tmp_path, end="pool")
    assert pooled["back0"].workload.family == "movement" and pooled["stem_back"].workload.family == "movement"


def test_conversions_take_the_calibrated_curve_by_their_pixels(tmp_path):
    """With a 'layout.reorder' curve a conversion runs at the curve's figure at its tensor's pixels per
    channel (log-interpolated; ONNX Runtime's small maps convert further below a copy's pace), not at
    op_efficiency.LayoutReorder: {49: 0.25, 3136: 0.75} gives 0.75 at 64 x 64 (4,096 pixels: past the
    last point) and 0.25 + 0.5 ln(196/49)/ln(3136/49) = 0.4167 at 14 x 14."""
    from dnnperf.efficiency import family_efficiency

    with open(os.path.join(PROFILES, "cpu-avx2.yaml")) as fh:
        d = yaml.safe_load(fh)
    d.update(name="reo", cpu_layout={"block": 8, "grouped_min_width": 8}, op_efficiency={"LayoutReorder": 0.5},
             shape_efficiency={"layout.reorder": {49: 0.25, 3136: 0.75}})
    p = tmp_path / "reo.yaml"
    p.write_text(yaml.safe_dump(d))
    hw = load_profile(str(p))
    for side, want in ((64, 0.75), (14, 0.4167)):
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                 helper.make_node("Flatten", ["c"], ["y"], name="flat")]
        m = model(nodes, [vi("x", [1, 16, side, side])], [vi("y", None)], [weight("w", [16, 16, 3, 3])])
        rep = analyze(inspect_model(save(m, tmp_path)), hw, Settings(fusion="typical"), with_fixes=False)
        reo = next(c.layer for c in rep.score.layers if c.layer.name == "reorder out of c")
        assert family_efficiency(reo, hw) == pytest.approx(want, abs=1e-4)


def test_branch_sums_become_one_summing_convolution_each_with_no_conversion(tmp_path):
    """MobileOne's over-parameterised block: three parallel convolutions of one input summed as
    Add(Add(a, b), c), then ReLU. ONNX Runtime hands each sum to a convolution as its summed input:
    the first input made by a single-use convolution whose kernel sums nothing yet, so a sums b, then
    c sums that total and applies the ReLU. Every tensor stays blocked; the group of a, which reads b,
    runs after b. Before, the whole Add chain joined a's group at a's place, ahead of b and c, and
    each of their outputs was costed as converted into the blocked layout (149 conversions, 1.8 ms
    of MobileOne-S0's 12 ms on a 2-core CPU)."""
    nodes = [helper.make_node("Conv", ["x", "wa"], ["a"], name="ca", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "wb"], ["b"], name="cb", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["a", "b"], ["s1"], name="add1"),
             helper.make_node("Conv", ["x", "wc"], ["c"], name="cc", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["s1", "c"], ["s2"], name="add2"),
             helper.make_node("Relu", ["s2"], ["y"], name="relu")]
    m = model(nodes, [vi("x", [1, 16, 8, 8])], [vi("y", None)],
              [weight("wa", [16, 16, 3, 3]), weight("wb", [16, 16, 3, 3]), weight("wc", [16, 16, 3, 3])])
    layers = _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})
    assert [l.name for l in layers] == ["reorder into x", "cb", "ca+add1", "cc+add2+relu", "reorder out of y"]
    # each summing kernel reads its input, its summed tensor (16 x 8 x 8 fp32 = 4,096 bytes) and its weights
    assert layers[2].workload.act_bytes_read == 2 * 16 * 64 * 4


def test_a_gate_of_two_computed_tensors_is_a_kernel_of_its_own(tmp_path):
    """StarNet's star operation, ReLU6(f1(x)) * f2(x): ONNX Runtime folds the clip into f1's
    convolution but runs the product as a Mul kernel of its own (its optimised graph: 81 blocked
    convolutions and 15 plain Mul nodes), on the blocked tensors as they are."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="f1"),
             helper.make_node("Relu", ["a"], ["r"], name="act"),
             helper.make_node("Conv", ["x", "w2"], ["b"], name="f2"),
             helper.make_node("Mul", ["r", "b"], ["y"], name="star")]
    m = model(nodes, [vi("x", [1, 16, 8, 8])], [vi("y", None)], [weight("w1", [16, 16, 1, 1]), weight("w2", [16, 16, 1, 1])])
    layers = _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})
    assert [l.name for l in layers] == ["reorder into x", "f1+act", "f2", "star", "reorder out of y"]
    assert layers[3].workload.act_bytes_read == 2 * 16 * 64 * 4 and layers[3].workload.bytes_written == 16 * 64 * 4


def test_a_sum_after_the_activation_is_not_taken_by_the_convolution(tmp_path):
    """CSPDarkNet's residual: Conv -> LeakyReLU -> Add(shortcut). The runtime's convolution adds its
    summed input before the activation, never after, so the Add is a kernel of its own."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("LeakyRelu", ["c"], ["l"], name="act", alpha=0.1),
             helper.make_node("Add", ["x", "l"], ["y"], name="res")]
    m = model(nodes, [vi("x", [1, 16, 8, 8])], [vi("y", None)], [weight("w", [16, 16, 1, 1])])
    names = [l.name for l in _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})]
    assert "conv+act" in names and "res" in names and "conv+act+res" not in names


def _between_convs(tmp_path, middle, extra=(), shape=(1, 16, 8, 8), out_shape=None):
    """conv -> ``middle`` nodes (reading "a", writing "m") -> conv, on a blocked profile."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"), *middle,
             helper.make_node("Conv", ["m", "w2"], ["y"], name="c2")]
    m = model(nodes, [vi("x", list(shape))], [vi("y", None)],
              [weight("w1", [16, 16, 1, 1]), weight("w2", [16, 16, 1, 1]), *extra])
    return [l.name for l in _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})]


def test_an_upsample_the_runtime_runs_blocked_costs_no_conversion(tmp_path):
    """ONNX Runtime's optimised graph, checked variant by variant on a 16-channel map between two
    convolutions: a Resize by 2 with mode nearest, asymmetric, floor (HRNet's branch fusion) becomes its
    blocked Upsample; with the default nearest_mode it stays the plain Resize, converted out and in."""
    def run(**attrs):
        resize = helper.make_node("Resize", ["a", "", "sc"], ["m"], name="up", **attrs)
        return _between_convs(tmp_path, [resize], [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc")])
    assert run(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor") == \
        ["reorder into x", "c1", "up", "c2", "reorder out of y"]
    assert run(mode="linear", coordinate_transformation_mode="half_pixel") == \
        ["reorder into x", "c1", "up", "c2", "reorder out of y"]
    assert run(mode="nearest", coordinate_transformation_mode="asymmetric") == \
        ["reorder into x", "c1", "reorder out of a", "up", "reorder into m", "c2", "reorder out of y"]


def test_an_upsample_to_known_sizes_runs_blocked_like_one_by_scales(tmp_path):
    """The same Resize given sizes instead of scales (torchvision's FPN: each top-down map resized to the
    Shape of the lateral one, folded at static input dims), as ONNX Runtime 1.32's optimised graph runs it:
    blocked at a whole factor (8 x 8 -> 16 x 16), plain at 1.5 (8 x 8 -> 12 x 12)."""
    def run(side, from_shape=False):
        attrs = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        if from_shape:  # the sizes of the map a second convolution writes at the target size
            middle = [helper.make_node("Conv", ["x2", "w3"], ["big"], name="c3"),
                      helper.make_node("Shape", ["big"], ["sz"], name="shape"),
                      helper.make_node("Resize", ["a", "", "", "sz"], ["m"], name="up", **attrs)]
            nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"), *middle,
                     helper.make_node("Add", ["m", "big"], ["s"], name="add"),
                     helper.make_node("Conv", ["s", "w2"], ["y"], name="c2")]
            m = model(nodes, [vi("x", [1, 16, 8, 8]), vi("x2", [1, 16, side, side])], [vi("y", None)],
                      [weight("w1", [16, 16, 1, 1]), weight("w2", [16, 16, 1, 1]), weight("w3", [16, 16, 1, 1])])
            return [l.name for l in _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})]
        resize = helper.make_node("Resize", ["a", "", "", "sz"], ["m"], name="up", **attrs)
        return _between_convs(tmp_path, [resize], [numpy_helper.from_array(np.array([1, 16, side, side], np.int64), "sz")])
    assert run(16) == ["reorder into x", "c1", "up", "c2", "reorder out of y"]
    assert run(12) == ["reorder into x", "c1", "reorder out of a", "up", "reorder into m", "c2", "reorder out of y"]
    # sizes from a Shape folded at load time: the Shape runs no kernel and reads nothing, so the map it
    # measures stays blocked (the runtime converts out only for a Shape it runs, with symbolic dims)
    names = run(16, from_shape=True)
    assert not any(n.startswith("reorder out of") and n != "reorder out of y" for n in names), names
    assert names.count("reorder into x") == 1 and names.count("reorder into x2") == 1


def test_a_zero_pad_before_a_convolution_is_folded_into_it(tmp_path):
    """ONNX Runtime's Pad fusion (its optimised graph, 1.32): zeros added on the spatial axes and read by
    one Conv (TensorFlow's 'SAME' padding before a strided convolution) become the convolution's own
    padding: no Pad kernel, no conversion; before a MaxPool, or with a non-zero value, the Pad stays a
    plain kernel, converted out and in."""
    def run(consumer, value=0.0):
        pad = helper.make_node("Pad", ["a", "pads", "cv"], ["m"], name="pad")
        extra = [numpy_helper.from_array(np.array([0, 0, 0, 1, 0, 0, 1, 1], np.int64), "pads"),
                 numpy_helper.from_array(np.array(value, np.float32), "cv")]
        if consumer == "Conv":
            return _between_convs(tmp_path, [pad], extra), None
        nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"), pad,
                 helper.make_node("MaxPool", ["m"], ["y"], name="pool", kernel_shape=[3, 3], strides=[2, 2])]
        m = model(nodes, [vi("x", [1, 16, 8, 8])], [vi("y", None)], [weight("w1", [16, 16, 1, 1]), *extra])
        layers = _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})
        return [l.name for l in layers], layers
    names, _ = run("Conv")
    assert names == ["reorder into x", "c1", "pad", "c2", "reorder out of y"]
    names, _ = run("Conv", value=1.0)
    assert names == ["reorder into x", "c1", "reorder out of a", "pad", "reorder into m", "c2", "reorder out of y"]
    names, layers = run("MaxPool")
    assert "reorder out of a" in names and "reorder into m" in names
    path = save(model([helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"),
                       helper.make_node("Pad", ["a", "pads"], ["m"], name="pad"),
                       helper.make_node("Conv", ["m", "w2"], ["y"], name="c2", strides=[2, 2])],
                      [vi("x", [1, 16, 8, 8])], [vi("y", None)],
                      [weight("w1", [16, 16, 1, 1]), weight("w2", [16, 16, 3, 3]),
                       numpy_helper.from_array(np.array([0, 0, 0, 1, 0, 0, 1, 1], np.int64), "pads")]), tmp_path)
    rep = analyze(inspect_model(path), load_profile(_profile(tmp_path, {"block": 8, "grouped_min_width": 8})),
                  Settings(fusion="typical"), with_fixes=False)
    pad = next(c for c in rep.score.layers if c.layer.name == "pad")
    assert pad.layer.workload.launches == 0 and pad.time_s == 0  # no kernel: the convolution pads as it reads


def test_a_per_channel_add_to_a_blocked_map_stays_blocked_where_a_gate_does_not(tmp_path):
    """ONNX Runtime's optimised graph (1.32), a 16-channel map: adding a per-channel [1, C, 1, 1] tensor
    computed from the map (a global-context block: pool, convolution) runs blocked, no conversion; the
    same shapes multiplied (a squeeze-excite gate) run plain, both operands converted out."""
    def run(op):
        nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"),
                 helper.make_node("GlobalAveragePool", ["a"], ["g"], name="gap"),
                 helper.make_node("Conv", ["g", "w2"], ["c"], name="cg"),
                 helper.make_node(op, ["a", "c"], ["s"], name="op"),
                 helper.make_node("Conv", ["s", "w3"], ["y"], name="c3")]
        m = model(nodes, [vi("x", [1, 16, 8, 8])], [vi("y", None)],
                  [weight("w1", [16, 16, 1, 1]), weight("w2", [16, 16, 1, 1]), weight("w3", [16, 16, 1, 1])])
        return [l.name for l in _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})]
    added = run("Add")
    assert added == ["reorder into x", "c1", "gap", "cg", "op", "c3", "reorder out of y"], added
    gated = run("Mul")
    assert "reorder out of a" in gated and "reorder out of c" in gated and "reorder into s" in gated, gated


def test_the_runtime_silu_kernel_takes_no_epilogue(tmp_path):
    """ONNX Runtime's CPU provider runs x * Sigmoid(x) as its QuickGelu kernel, blocked, and a scale after
    it (NF-RegNet's x * beta, 0.9 here) as a kernel of its own, plain: its optimised graph has QuickGelu,
    a conversion out, the Mul, a conversion in. Fused into the SiLU the scale had cost neither the kernel
    nor the two conversions (NF-RegNet-B0: 189 kernels against the runtime's 204, 69 conversions against 98)."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"),
             helper.make_node("Sigmoid", ["a"], ["sg"], name="sig"),
             helper.make_node("Mul", ["a", "sg"], ["si"], name="silu"),
             helper.make_node("Mul", ["si", "beta"], ["m"], name="scale"),
             helper.make_node("Conv", ["m", "w2"], ["y"], name="c2")]
    m = model(nodes, [vi("x", [1, 16, 8, 8])], [vi("y", None)],
              [weight("w1", [16, 16, 1, 1]), weight("w2", [16, 16, 1, 1]),
               numpy_helper.from_array(np.array(0.9, np.float32), "beta")])
    layers = _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})
    names = [l.name for l in layers]
    assert "sig+silu" in names and "scale" in names, names
    assert names.index("reorder out of si") < names.index("scale") < names.index("reorder into m"), names


def test_an_erf_gelu_kernel_keeps_the_blocked_layout(tmp_path):
    """PoolFormer's MLP: conv -> GELU spelled as Div, Erf, Add, Mul, Mul -> conv. The runtime runs the
    five nodes as its Gelu kernel on the blocked tensor (no conversion); before, the Erf and Div in it
    cost a conversion out and one back in."""
    c = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("s2", 1.4142135), ("one", 1.0), ("half", 0.5))]
    gelu = [helper.make_node("Div", ["a", "s2"], ["d"], name="div"), helper.make_node("Erf", ["d"], ["e"], name="erf"),
            helper.make_node("Add", ["e", "one"], ["p"], name="add"), helper.make_node("Mul", ["a", "p"], ["q"], name="mul"),
            helper.make_node("Mul", ["q", "half"], ["m"], name="mul2")]
    names = _between_convs(tmp_path, gelu, c)
    assert not any(n.startswith("reorder") and ("out of a" in n or "into m" in n) for n in names)


def test_a_position_embedding_added_to_a_convolution_is_a_plain_kernel(tmp_path):
    """Visformer adds a [1, C, H, W] position embedding to its patch convolution: not a per-channel
    bias, so no convolution folds it, and a stored operand keeps the Add off the blocked layout (the
    runtime converts the convolution's output out, adds, and converts back in for the next one)."""
    add = helper.make_node("Add", ["a", "pos"], ["m"], name="pos_add")
    names = _between_convs(tmp_path, [add], [weight("pos", [1, 16, 8, 8])])
    assert names == ["reorder into x", "c1", "reorder out of a", "pos_add", "reorder into m", "c2", "reorder out of y"]
    # a per-channel bias still folds into the convolution
    names = _between_convs(tmp_path, [helper.make_node("Add", ["a", "b"], ["m"], name="bias")], [weight("b", [16, 1, 1])])
    assert "c1+bias" in names


def test_a_residual_sum_with_a_plain_operand_is_not_taken_by_the_convolution(tmp_path):
    """EfficientFormer / PoolFormer: the residual stream comes from plain ops (a Sub of a pooled map),
    so the Add after the MLP's last convolution has one plain operand; the runtime sums into a blocked
    convolution only blocked tensors: the convolution's output is converted out and the Add runs plain."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"),
             helper.make_node("Sub", ["x", "a"], ["s"], name="sub"),  # plain: a binary op with a plain operand
             helper.make_node("Conv", ["s", "w2"], ["b"], name="c2"),
             helper.make_node("Add", ["b", "s"], ["y"], name="res")]
    m = model(nodes, [vi("x", [1, 16, 8, 8])], [vi("y", None)], [weight("w1", [16, 16, 1, 1]), weight("w2", [16, 16, 1, 1])])
    names = [l.name for l in _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})]
    assert "c2+res" not in names and "res" in names and "reorder out of b" in names


def test_a_global_pooling_of_a_plain_tensor_stays_plain(tmp_path):
    """RegNetY's squeeze-excite: a grouped convolution the blocked layout does not take (4 channels per
    group), then GlobalAveragePool. ONNX Runtime pools the plain map as it is and converts only the
    pooled [1, C, 1, 1] into the blocked layout for the next convolution (its optimised graph); a
    windowed pooling is converted in like a convolution (PoolFormer's token mixer)."""
    nodes = [helper.make_node("Conv", ["x", "wg"], ["g"], name="grouped", group=4, pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["g"], ["p"], name="gap"),
             helper.make_node("Conv", ["p", "w2"], ["y"], name="c2")]
    m = model(nodes, [vi("x", [1, 16, 8, 8])], [vi("y", None)], [weight("wg", [16, 4, 3, 3]), weight("w2", [16, 16, 1, 1])])
    names = [l.name for l in _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})]
    assert names == ["grouped", "gap", "reorder into p", "c2", "reorder out of y"]


def test_a_chain_of_plain_residual_sums_is_found_in_one_pass(tmp_path):
    """MobileViTV2 / Visformer: each block's residual Add reads the previous block's sum. Once the first
    sum has a plain operand, its output is plain too and so is the next block's operand: every one of
    them runs plain after its convolution's conversion out (here five blocks), not only the first."""
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a0"], name="c0"),
             helper.make_node("Sub", ["x", "a0"], ["s0"], name="sub")]  # a plain stream to start from
    for i in range(5):
        nodes += [helper.make_node("Conv", [f"s{i}", f"w{i + 1}"], [f"b{i}"], name=f"c{i + 1}"),
                  helper.make_node("Add", [f"b{i}", f"s{i}"], [f"s{i + 1}"], name=f"res{i}")]
    m = model(nodes, [vi("x", [1, 16, 8, 8])], [vi("s5", None)], [weight(f"w{i}", [16, 16, 1, 1]) for i in range(6)])
    names = [l.name for l in _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})]
    assert [n for n in names if n.startswith("res")] == [f"res{i}" for i in range(5)]
    assert [n for n in names if n.startswith("reorder out of b")] == [f"reorder out of b{i}" for i in range(5)]


def test_a_scalar_gain_after_the_activation_runs_plain(tmp_path):
    """NF-ResNet scales each block's input, ReLU(x) * 0.98 (a Constant node): the runtime folds a
    constant scale into a convolution only ahead of its activation, and runs a binary op blocked only
    when every operand is a blocked tensor, so the Mul is a plain kernel between two conversions (its
    optimised graph: 15 conversions in NF-ResNet-26, as predicted now; 1 before). A Mul by 1 it
    removes keeps the layout."""
    from onnx import TensorProto

    def net(gain):
        nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"),
                 helper.make_node("Relu", ["a"], ["r"], name="relu"),
                 helper.make_node("Constant", [], ["g"], name="k", value=helper.make_tensor("v", TensorProto.FLOAT, [], [gain])),
                 helper.make_node("Mul", ["r", "g"], ["m"], name="gain"),
                 helper.make_node("Conv", ["m", "w2"], ["y"], name="c2")]
        m = model(nodes, [vi("x", [1, 16, 8, 8])], [vi("y", None)], [weight("w1", [16, 16, 1, 1]), weight("w2", [16, 16, 1, 1])])
        return [l.name for l in _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8}) if l.op_type != "Constant"]
    assert net(0.98) == ["reorder into x", "c1+relu", "reorder out of r", "gain", "reorder into m", "c2", "reorder out of y"]
    assert net(1.0) == ["reorder into x", "c1+relu", "gain", "c2", "reorder out of y"]


def test_a_3d_convolution_runs_the_plain_kernel(tmp_path):
    """ONNX Runtime's blocked (NCHWc) convolutions are 2-D only: a 3-D one (R3D-18's 3x3x3) runs the plain
    kernel, so it takes the calibrated plain-kernel figure of the nearest kernel size
    (conv.unblocked_k3), fused with its ReLU or not; a 2-D convolution the blocked layout takes does not."""
    from dnnperf.efficiency import shape_efficiency

    hw = load_profile(_profile(tmp_path, {"block": 16, "grouped_min_width": 16}, "plain3d",
                               shape_efficiency={"conv.unblocked_k1": {784: 0.5}, "conv.unblocked_k3": {784: 0.3}}))

    def conv_layer(x, w, name, fusion):
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1] * (2 * (len(x) - 2))),
                 helper.make_node("Relu", ["c"], ["y"], name="relu")]
        m = model(nodes, [vi("x", x)], [vi("y", None)], [weight("w", w)])
        rep = analyze(inspect_model(save(m, tmp_path, name)), hw, Settings(fusion=fusion), with_fixes=False)
        return next(c.layer for c in rep.score.layers if c.layer.op_type.startswith("Conv"))

    for fusion in ("none", "typical"):  # 16 x 7 x 7 = 784 output pixels
        assert shape_efficiency(conv_layer([1, 16, 16, 7, 7], [16, 16, 3, 3, 3], f"c3{fusion}.onnx", fusion), hw) == 0.3
    assert shape_efficiency(conv_layer([1, 16, 28, 28], [16, 16, 3, 3], "c2.onnx", "typical"), hw) is None


def test_a_plain_convolution_runs_as_fast_as_its_product_is_wide(tmp_path):
    """The plain kernel expands a convolution's input and runs one product min(output channels, input
    channels x 9) wide; its calibrated 3 x 3 curve (conv.unblocked_k3) was timed on 18 channels. A wider
    one runs as much faster as the thin-product curve rises from 18 to its width (up to the convolution
    family's figure, 1 here). By hand from the made-up curves (thin products 0.5 at 16,
    0.9 at 64, the family's 1.0 at 768; the plain curve 0.3 at 784 pixels), 3 x 3 at 28 x 28 (784 pixels),
    channel counts of 2 mod 4 that no block takes: 34 channels 0.3 x thin(34) / thin(18), 50 and 130
    alike. ResNet-50's 64-channel 3 x 3 layers
    run plain in a QDQ model whose weights are dequantized at run time: ONNX Runtime ran them at 0.65-0.7
    of the peak where the 18-channel curve alone gave 0.4."""
    from dnnperf.efficiency import shape_efficiency

    with open(os.path.join(PROFILES, "cpu-avx2.yaml")) as fh:
        d = yaml.safe_load(fh)
    d.update(name="plainw", cpu_layout={"block": 16, "grouped_min_width": 16},
             matrix_nk_efficiency={16: 0.5, 64: 0.9}, shape_efficiency={"conv.unblocked_k3": {784: 0.3}})
    p = tmp_path / "pw.yaml"
    p.write_text(yaml.safe_dump(d))
    hw = load_profile(str(p))

    def eff(ch):
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])]
        m = model(nodes, [vi("x", [1, ch, 28, 28])], [vi("y", None)], [weight("w", [ch, ch, 3, 3])])
        rep = analyze(inspect_model(save(m, tmp_path, f"pw{ch}.onnx")), hw, Settings(fusion="none"), with_fixes=False)
        return shape_efficiency(next(c.layer for c in rep.score.layers if c.layer.op_type == "Conv"), hw)

    def thin(width):
        if width <= 64:
            return 0.5 + 0.4 * max(0.0, math.log(width / 16)) / math.log(4)
        return 0.9 + 0.1 * math.log(width / 64) / math.log(768 / 64)

    assert eff(34) == pytest.approx(0.3 * thin(34) / thin(18))
    assert eff(50) == pytest.approx(0.3 * thin(50) / thin(18))
    assert eff(130) == pytest.approx(0.3 * thin(130) / thin(18))
    assert eff(18) == pytest.approx(0.3)  # the timed width: the curve as measured


def test_the_threads_split_a_blocked_convolution_by_rows_of_filter_sets():
    """ONNX Runtime's blocked convolution hands each thread an equal count of units (one output row of a
    set of up to four 16-channel filter blocks) in order; a unit costs what its set holds. By hand, two
    threads: 160 output channels at 14 x 14 are sets of 4, 4 and 2 blocks, 42 units: one thread takes
    14 x 4 + 7 x 4 = 84, the other 7 x 4 + 14 x 2 = 56, where an even split is 70 each: 70 / 84."""
    from dnnperf.rules import static_split_share

    assert static_split_share(((14, 4.0), (14, 4.0), (14, 2.0)), 1, 2) == pytest.approx(70 / 84)
    # 400 channels at 7 x 7: 25 blocks, six sets of 4 and one of 1, 49 units split 25 / 24: the first
    # thread 21 x 4 + 4 x 4 = 100, the second 3 x 4 + 14 x 4 + 7 x 1 = 75; even: 87.5 -> 0.875
    assert static_split_share(((7, 4.0),) * 6 + ((7, 1.0),), 1, 2) == pytest.approx(87.5 / 100)
    # equal units: 3 rows for 2 threads (2 and 1): 1.5 / 2; 64 rows: even; one thread: always 1
    assert static_split_share(((3, 1.0),), 1, 2) == pytest.approx(0.75)
    assert static_split_share(((64, 4.0),), 3, 2) == 1.0
    assert static_split_share(((3, 1.0),), 1, 1) == 1.0
    # the pattern repeated per image and group: 2 images of 7 rows of one set: 14 units, 7 each
    assert static_split_share(((7, 4.0),), 2, 2) == 1.0
    # more threads than units: each of 3 units to its own thread, the 4th idle: 3 / 4
    assert static_split_share(((3, 2.0),), 1, 4) == pytest.approx(0.75)


def test_a_convolution_whose_last_filter_set_is_short_keeps_a_thread_waiting(tmp_path):
    """A 256 -> 80 1 x 1 convolution at 14 x 14 on a blocked two-thread CPU: 5 blocks, sets of 4 and 1,
    28 units split 14 / 14: one thread 14 x 4 = 56, the other 14 x 1 = 14; even 35: occupancy 0.625,
    and its math takes 1 / 0.625 of the balanced time. 256 -> 64 (one set, 7 rows each) and 256 -> 128
    (two whole sets) split evenly. Without the blocked layout nothing changes."""
    def conv(cout, layout, units=2, thin=None, cin=256):
        nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
                 helper.make_node("Conv", ["r", "w"], ["y"], name="pw")]
        m = model(nodes, [vi("x", [1, cin, 14, 14])], [vi("y", None)], [weight("w", [cout, cin, 1, 1])])
        path = save(m, tmp_path, f"pw{cout}_{cin}.onnx")
        with open(os.path.join(PROFILES, "cpu-avx2.yaml")) as fh:
            d = yaml.safe_load(fh)
        d["parallelism"]["compute_units"] = units
        if thin:
            d["matrix_nk_efficiency"] = thin
        if layout:
            d["cpu_layout"] = layout
        p = tmp_path / "two.yaml"
        p.write_text(yaml.safe_dump(d))
        rep = analyze(inspect_model(path), load_profile(str(p)), Settings(fusion="typical"), with_fixes=False)
        return next(c for c in rep.score.layers if c.layer.name == "pw")

    layout = {"block": 16, "grouped_min_width": 16, "channel_alignment": 4}
    assert conv(80, layout).occupancy == pytest.approx(0.625)
    assert conv(64, layout).occupancy == 1.0 and conv(128, layout).occupancy == 1.0
    assert conv(80, layout).t_compute == pytest.approx(conv(80, layout, units=1).t_compute / 0.625, rel=1e-9)
    assert conv(80, None).occupancy == 1.0
    # a profile with a thin-product curve ({16: 0.5, 64: 1.0}) prices the one-block set's units at
    # twice their blocks (one block at half a full set's pace per block): costs 4 and 2, one thread
    # 14 x 4 = 56, the other 14 x 2 = 28, even 42: 0.75
    assert conv(80, layout, thin={16: 0.5, 64: 1.0}).occupancy == pytest.approx(0.75)
    # a convolution reading the image (3 channels, its own kernel) is not split: 96 filters are sets
    # of 4 and 2 blocks, yet 1.0
    assert conv(96, layout, cin=3).occupancy == 1.0
    # nor an 8-bit one (QLinearConv, or int8 data): the blocked kernels are float Conv's
    from dataclasses import replace

    from dnnperf.efficiency import thread_split

    c80 = conv(80, layout)
    hw = load_profile(str(tmp_path / "two.yaml"))
    assert thread_split(c80.layer, hw) == pytest.approx(0.625)
    assert thread_split(replace(c80.layer, op_type="QLinearConv"), hw) == 1.0
    assert thread_split(replace(c80.layer, workload=replace(c80.layer.workload, dtype="int8")), hw) == 1.0
    # its traffic too: the busy thread moves its larger share of the bytes at one thread's pace
    assert conv(80, layout).t_memory == pytest.approx(conv(80, layout, units=1).t_memory / 0.625, rel=1e-9)


def _pointwise_on_two_threads(tmp_path, cin: int, cout: int, side: int):
    """The report of a Relu -> 1 x 1 Conv (``cin`` -> ``cout`` at ``side`` x ``side``) on cpu-avx2 made a
    two-thread blocked CPU (16-channel blocks), and the Conv's LayerCost."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Conv", ["r", "w"], ["y"], name="pw")]
    path = save(model(nodes, [vi("x", [1, cin, side, side])], [vi("y", None)], [weight("w", [cout, cin, 1, 1])]),
                tmp_path, f"pw{cin}_{cout}_{side}.onnx")
    with open(os.path.join(PROFILES, "cpu-avx2.yaml")) as fh:
        d = yaml.safe_load(fh)
    d["parallelism"]["compute_units"] = 2
    d["cpu_layout"] = {"block": 16, "grouped_min_width": 16, "channel_alignment": 4}
    p = tmp_path / "two.yaml"
    p.write_text(yaml.safe_dump(d))
    rep = analyze(inspect_model(path), load_profile(str(p)), Settings(fusion="typical"))
    return rep, next(c for c in rep.score.layers if c.layer.name == "pw")


def test_an_uneven_thread_split_gets_the_whole_set_widths_as_its_fix(tmp_path):
    """256 -> 80 at 14 x 14 on a two-thread blocked CPU (split 0.625, above): the fix offers the output
    widths in whole 64-channel sets either side, each rescored (64: fewer MACs and an even split, so
    faster; 128: 60% more MACs, yet the busy thread's work is unchanged, 14 rows of 4 blocks: the same
    time), and no lane fix (its 15,680 outputs fill the 16 lanes; a bigger batch is not what it needs)."""
    from dnnperf.fixes import Ctx, _even_thread_split, fixes_for

    rep, c = _pointwise_on_two_threads(tmp_path, 256, 80, 14)
    fixes = fixes_for(c, Ctx(rep))
    ids = [f["id"] for f in fixes]
    assert "even_thread_split" in ids and "bigger_batch" not in ids and "shallower_wider" not in ids
    text = next(f["text"] for f in fixes if f["id"] == "even_thread_split")
    assert "62% busy" in text and "80 -> 64 output channels: -" in text and "80 -> 128 output channels" in text
    assert next(f["saving_s"] for f in fixes if f["id"] == "even_thread_split") > 0
    # 64 channels (one whole set) over 7 rows: 4 rows and 3, 7 / 8 busy; no width to change, the rows named
    rep, c = _pointwise_on_two_threads(tmp_path, 256, 64, 7)
    assert c.occupancy == pytest.approx(7 / 8)
    text, saving = _even_thread_split(c, Ctx(rep))
    assert "88% busy" in text and "7 rows do not divide among 2 threads" in text and saving is None


def test_a_layer_its_math_bounds_still_gets_the_fix_for_a_large_split_loss(tmp_path):
    """512 -> 144 1 x 1 at 28 x 28 on a two-thread blocked CPU: nine blocks, sets of 4, 4 and 1, split 0.75
    by blocks, so its time is still mostly math (cause 'compute') but a quarter of it is
    idle threads: the report attaches the split's fix (compute-bound layers used to get none). Fixes that
    would save it less than 1% are not listed for such a layer."""
    _, c = _pointwise_on_two_threads(tmp_path, 512, 144, 28)
    assert c.occupancy == pytest.approx(0.75) and c.cause == "compute"
    assert [f["id"] for f in c.fixes][:1] == ["even_thread_split"]
    assert all(f["saving_s"] is not None and f["saving_s"] >= 0.01 * c.time_s for f in c.fixes)


def _plain_dw(tmp_path, curves, **fields):
    """cpu-avx2 with 8-channel blocks, the depthwise ``curves``, one core (no work starvation on top), no dispatch
    or fixed kernel time."""
    return load_profile(_profile(tmp_path, {"block": 8, "grouped_min_width": 8}, "plaindw", shape_efficiency=curves,
                                 kernel_fixed_us={}, launch_overhead_us=0.0,
                                 parallelism={"compute_units": 1, "lanes": 1024}, **fields))


def _plain_dw_time(tmp_path, hw, side, stride, name):
    """(the time less dispatch, the report's notes) of a 58-channel 3 x 3 depthwise convolution at ``side``."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=58, pads=[1, 1, 1, 1],
                              strides=[stride, stride])]
    m = model(nodes, [vi("x", [1, 58, side, side])], [vi("y", None)], [weight("w", [58, 1, 3, 3])])
    rep = analyze(inspect_model(save(m, tmp_path, name)), hw, Settings(fusion="none"), with_fixes=False)
    c = next(c for c in rep.score.layers if c.layer.op_type == "Conv")
    return c.time_s - c.t_launch, rep.notes


@pytest.mark.parametrize("with_s2", [False, True])
def test_a_plain_depthwise_convolution_is_priced_by_the_taps_it_expands(tmp_path, with_s2):
    """ONNX Runtime runs a depthwise convolution its blocked layout does not take (58 channels: 2 mod 4) as
    MLAS's expand-then-GEMM, one channel at a time: its time follows the taps it expands per output, not the
    bytes it reads. So a stride-2 layer (56 -> 28, four times the input) and a stride-1 one (28 -> 28) with
    the same 58 x 784 x 9 taps cost the same at one curve's figure, and a stride-2 curve of its own, where
    calibrated ('depthwise_conv.unblocked_k3s2', half the figure here), doubles the strided one. By hand, on
    one core: 2 x 58 x 784 x 9 = 818,496 ops at 4.61 TOP/s, on 8-lane tiles of which a one-filter product
    fills 1, at 0.1 of the pace = 14.2 us; before, the roofline priced the stride-2 layer by its bytes as
    well (4 x 58 x (3,136 + 784) read and written)."""
    curves = {"depthwise_conv.unblocked_k3": {784: 0.1}, "depthwise_conv.k3s1": {784: 0.5}}
    if with_s2:
        curves["depthwise_conv.unblocked_k3s2"] = {784: 0.05}
    hw = _plain_dw(tmp_path, curves)
    s1, s2 = (_plain_dw_time(tmp_path, hw, 28, 1, "s1.onnx")[0], _plain_dw_time(tmp_path, hw, 56, 2, "s2.onnx")[0])
    assert s1 == pytest.approx(2 * 58 * 784 * 9 / 4.61e12 * 8 / 0.1, rel=1e-3)
    assert s2 == pytest.approx(s1 * (2 if with_s2 else 1), rel=1e-3)
    with pytest.raises(DnnperfError, match="conv.unblocked_k3s2"):
        _plain_dw(tmp_path, {**curves, "depthwise_conv.unblocked_k3s2": {784: 0.05},
                             "conv.unblocked_k3s2": {784: 0.05}})


def test_a_profile_calibrated_before_the_plain_depthwise_curves_were_read_against_the_math_keeps_them_and_says_so(
        tmp_path):
    """A calibration (its ``measured`` record) with no stride-2 plain depthwise curve read its
    'depthwise_conv.unblocked_k3' figures against the roofline: applied to the math alone they would price the
    layer below what was measured. Such a profile keeps pricing the layer on the roofline (the stride-2 layer,
    four times the input bytes, costs more than the stride-1 one of the same taps) and the report names the
    missing figure; one calibrated with the stride-2 curve prices the math and says nothing."""
    curve = {"depthwise_conv.unblocked_k3": {784: 0.1}, "depthwise_conv.k3s1": {784: 0.5}}
    memory = {"dram_gbs": 20, "onchip_mb": 1, "bandwidth_curve": {0.5: 100, 1: 100, 4: 20}}
    said = "depthwise convolution its blocked layout refuses (the plain kernel's curves by stride"
    old = _plain_dw(tmp_path, curve, memory=memory, measured={"cpu": "x", "threads": 2})
    (s1, _), (s2, notes) = (_plain_dw_time(tmp_path, old, 28, 1, "o1.onnx"),
                            _plain_dw_time(tmp_path, old, 56, 2, "o2.onnx"))
    assert s2 > 1.5 * s1 and any(said in n for n in notes)
    new = _plain_dw(tmp_path, {**curve, "depthwise_conv.unblocked_k3s2": {784: 0.1}}, memory=memory,
                    measured={"cpu": "x", "threads": 2})
    (s1, _), (s2, notes) = (_plain_dw_time(tmp_path, new, 28, 1, "n1.onnx"),
                            _plain_dw_time(tmp_path, new, 56, 2, "n2.onnx"))
    assert s2 == pytest.approx(s1, rel=1e-3) and not any(said in n for n in notes)


@pytest.mark.parametrize("groups", [1, 4])
def test_a_1d_qdq_convolution_with_run_time_weights_runs_the_plain_kernel(tmp_path, groups):
    """A 1-D QDQ convolution that ONNX Runtime leaves in float (its bias's scale is not the input's times the
    weight's) reads weights dequantized at run time: on a profile with a blocked layout dnnperf stopped with an
    internal error (its kernel name lost the kernel size the plain curve is chosen by). It takes the plain 3-wide
    curve; a depthwise one (4 groups of 1) is priced by its taps at that figure (by hand: its math over 0.1)."""
    from dnnperf.efficiency import shape_efficiency

    init = numpy_helper.from_array
    inits = [init(np.array(0.02, np.float32), "xs"), init(np.array(128, np.uint8), "xz"),
             init(np.ones((8, 4 // groups, 3), np.int8), "wq"), init(np.array(0.01, np.float32), "ws"),
             init(np.array(0, np.int8), "wz"), init(np.ones(8, np.int32), "bq"),
             init(np.array(0.0003, np.float32), "bs"), init(np.array(0, np.int32), "bz"),
             init(np.array(0.05, np.float32), "ys"), init(np.array(128, np.uint8), "yz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="q_in"),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dq_in"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], name="dq_w"),
             helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"], name="dq_b"),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], name="conv", pads=[1, 1], group=groups),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"], name="q_out"),
             helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["y"], name="dq_out")]
    m = model(nodes, [vi("x", [1, 4, 64])], [vi("y", None)], inits)
    hw = load_profile(_profile(tmp_path, {"block": 8, "grouped_min_width": 8}, "plain1d",
                               shape_efficiency={"conv.unblocked_k3": {64: 0.3},
                                                 "depthwise_conv.unblocked_k3": {64: 0.1}}))
    rep = analyze(inspect_model(save(m, tmp_path, "c1d.onnx")), hw, Settings(fusion="none"), with_fixes=False)
    c = next(c for c in rep.score.layers if c.layer.op_type == "Conv")
    assert c.layer.workload.dtype == "float32"
    if groups == 1:
        assert shape_efficiency(c.layer, hw) == 0.3
    else:
        assert c.layer.workload.family == "depthwise_conv"
        assert c.time_s - c.t_launch == pytest.approx(c.t_compute / 0.1, rel=1e-6)


@pytest.mark.parametrize("act", ["Clip", "LeakyRelu", "Relu"])
def test_a_standalone_clip_or_leaky_relu_leaves_the_blocked_layout_and_a_batch_norm_applies_neither(tmp_path, act):
    """Conv -> BatchNormalization -> act -> Conv, the first convolution's output also read by a Concat (so nothing
    folds into it). ONNX Runtime 1.32's optimised graph (asserted here where it can be built): its blocked layout
    turns the BatchNormalization into a per-channel convolution after the activation fusions have run, and takes
    a standalone Relu, Sigmoid, Tanh or HardSigmoid but not a Clip or a LeakyRelu. So with a Relu: one blocked
    BatchNormalization+Relu kernel and two conversions (in and out of the network); with a Clip or a LeakyRelu: the
    activation a plain kernel of its own between a conversion out and one back in, four in all. dnnperf fused both
    into the BatchNormalization and kept them blocked (two conversions)."""
    import collections

    import numpy as np
    from onnx import numpy_helper

    c = 64
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(a.astype(np.float32), k) for k, a in (
        ("w1", rng.standard_normal((c, c, 3, 3)) * 0.05), ("w2", rng.standard_normal((16, c, 3, 3)) * 0.05),
        ("s", np.ones(c)), ("bb", np.zeros(c)), ("mu", np.zeros(c)), ("var", np.ones(c)), ("lo", np.array(0.0)),
        ("hi", np.array(6.0)))]
    act_node = helper.make_node(act, ["n", "lo", "hi"] if act == "Clip" else ["n"], ["a"], name="act")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1] * 4),
             helper.make_node("BatchNormalization", ["c1", "s", "bb", "mu", "var"], ["n"], name="bn"), act_node,
             helper.make_node("Conv", ["a", "w2"], ["c2"], name="conv2", pads=[1] * 4),
             helper.make_node("Concat", ["c1", "c2"], ["y"], name="cat", axis=1)]
    m = model(nodes, [vi("x", [1, c, 28, 28])], [vi("y", None)], inits)
    fused = act == "Relu"
    theirs = collections.Counter(ort_op_types(m, tmp_path))
    if theirs["ReorderInput"]:  # (a CPU whose runtime writes the blocked layout)
        assert theirs["ReorderInput"] + theirs["ReorderOutput"] == (2 if fused else 4)
        assert theirs[act] == (0 if fused else 1)
    layers = _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})
    assert sum(l.op_type == "LayoutReorder" for l in layers) == (2 if fused else 4)
    assert ("bn+act" if fused else "act") in [l.name for l in layers]


@pytest.mark.parametrize("case,theirs,ours", [
    ("gemm_bn_relu", ["Gemm", "BatchNormalization", "Relu"], ["gemm", "bn", "act"]),
    ("gemm_relu_bn", ["FusedGemm", "BatchNormalization"], ["gemm+act", "bn"]),
    ("matmul_bn_relu", ["FusedGemm"], ["gemm+bn+act"]),
    ("input_bn_relu", ["BatchNormalization", "Relu"], ["bn", "act"]),
])
def test_a_batch_norm_folds_only_where_the_cpu_runtime_folds_it(tmp_path, case, theirs, ours):
    """ONNX Runtime 1.32's optimised graphs (asserted here): a BatchNormalization after a MatMul folds into its
    weights (the MatMul becomes a Gemm with the Relu fused), after a Gemm it does not, nor after an activation;
    one on a plain tensor (a graph input) is the runtime's own kernel and takes no activation (only the blocked
    layout's per-channel convolution does). dnnperf folded the BatchNormalization and its Relu in every case."""
    import numpy as np
    from onnx import numpy_helper

    c = 64
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(a.astype(np.float32), k) for k, a in (
        ("s", np.ones(c)), ("bb", np.zeros(c)), ("mu", np.zeros(c)), ("var", np.ones(c)),
        ("wg", rng.standard_normal((c, 128)) * 0.1), ("wm", rng.standard_normal((128, c)) * 0.1))]
    bn = lambda x, y: helper.make_node("BatchNormalization", [x, "s", "bb", "mu", "var"], [y], name="bn")  # noqa: E731
    act = lambda x, y: helper.make_node("Relu", [x], [y], name="act")  # noqa: E731
    shape = [8, 128]
    if case == "gemm_bn_relu":
        nodes = [helper.make_node("Gemm", ["x", "wg"], ["g"], name="gemm", transB=1), bn("g", "n"), act("n", "y")]
    elif case == "gemm_relu_bn":
        nodes = [helper.make_node("Gemm", ["x", "wg"], ["g"], name="gemm", transB=1), act("g", "r"), bn("r", "y")]
    elif case == "matmul_bn_relu":
        nodes = [helper.make_node("MatMul", ["x", "wm"], ["g"], name="gemm"), bn("g", "n"), act("n", "y")]
    else:
        nodes, shape = [bn("x", "n"), act("n", "y")], [1, c, 14, 14]
    m = model(nodes, [vi("x", shape)], [vi("y", None)], inits)
    assert [op for op in ort_op_types(m, tmp_path) if not op.startswith("Reorder")] == theirs
    layers = _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8})
    assert [la.name for la in layers if la.op_type != "LayoutReorder"] == ours


@pytest.mark.parametrize("case,act,fused", [
    ("gemm", "Elu", True), ("gemm", "Clip", False), ("matmul_add_2d", "Softplus", True),
    ("matmul_2d", "Relu", False), ("matmul_add_3d", "Relu", False), ("gemm", "Relu", True),
])
def test_a_matrix_product_takes_only_the_activations_onnx_runtimes_fused_gemm_applies(tmp_path, case, act, fused):
    """ONNX Runtime 1.32's optimised graphs (asserted here): its FusedGemm applies Relu, Sigmoid, Tanh, LeakyRelu,
    HardSigmoid, Elu, Selu, Softplus, Softsign and ThresholdedRelu to a 2-D Gemm (a Gemm node, or a 2-D MatMul
    its bias Add made one), not a Clip; a MatMul without a bias, or a 3-D one (its Gemm sits between two
    Reshapes), leaves the activation a kernel of its own. dnnperf had applied a convolution's activation set to
    every product: Elu and Softplus apart, Clip and the MatMuls' Relu fused."""
    import numpy as np
    from onnx import numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(a.astype(np.float32), k) for k, a in (
        ("w", rng.standard_normal((64, 128)) * 0.1), ("wm", rng.standard_normal((128, 64)) * 0.1),
        ("b", np.zeros(64)), ("lo", np.array(0.0)), ("hi", np.array(6.0)))]
    shape = [1, 8, 128] if case.endswith("3d") else [8, 128]
    if case == "gemm":
        nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], name="mm", transB=1)]
    else:
        nodes = [helper.make_node("MatMul", ["x", "wm"], ["m" if "add" in case else "g"], name="mm")]
        if "add" in case:
            nodes.append(helper.make_node("Add", ["m", "b"], ["g"], name="bias"))
    nodes.append(helper.make_node(act, ["g", "lo", "hi"] if act == "Clip" else ["g"], ["y"], name="act"))
    m = model(nodes, [vi("x", shape)], [vi("y", None)], inits)
    theirs = [op for op in ort_op_types(m, tmp_path) if op != "Reshape"]
    assert (theirs == ["FusedGemm"]) == fused and (act in theirs) != fused, theirs
    layers = [la for la in _layers(tmp_path, m, {"block": 8, "grouped_min_width": 8}) if la.op_type != "LayoutReorder"]
    assert ("act" in layers[0].nodes) == fused and len(layers) == (1 if fused else 2)
