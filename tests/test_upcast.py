"""16-bit models on a CPU without 16-bit arithmetic (dnnperf/upcast.py): computed in fp32, with the
runtime's casts where fp32 results meet 16-bit data movement."""

import os

import onnx
import pytest
from onnx import TensorProto, helper

from dnnperf.api import analyze, inspect_model
from dnnperf.hardware import load_profile
from dnnperf.scoring import Settings
from helpers import ints, model, save, vi, weight

F16 = TensorProto.FLOAT16


def _model():
    # fp16 x -> Reshape -> MatMul (fp16 1024x1024 weight) -> Add (fp16 bias) -> Transpose -> y
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
             helper.make_node("MatMul", ["r", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["a"], name="add"),
             helper.make_node("Transpose", ["a"], ["y"], name="tr", perm=[1, 0])]
    return model(nodes, [vi("x", [1, 1024], F16)], [vi("y", None, F16)],
                 [ints("s", [1, 1024]), weight("w", [1024, 1024], F16), weight("b", [1024], F16)])


def _layers(tmp_path, hw):
    rep = analyze(inspect_model(save(_model(), tmp_path)), load_profile(hw), Settings(fusion="none"), with_fixes=False)
    return rep, [c.layer for c in rep.score.layers]


def test_fp16_compute_runs_in_fp32_between_two_casts(tmp_path):
    rep, layers = _layers(tmp_path, "cpu-avx2")
    by = {l.name: l for l in layers}
    names = [l.name for l in layers]
    # the reshape's fp16 output is cast up before the MatMul; the Add's fp32 result is cast back
    # before the Transpose (a data-movement op with a 16-bit kernel); none between MatMul and Add
    assert names.index("cast to fp32 r") < names.index("mm") < names.index("add") \
        < names.index("cast to fp16 a") < names.index("tr")
    assert sum(l.op_type == "Cast" for l in layers) == 2
    up, down = by["cast to fp32 r"].workload, by["cast to fp16 a"].workload
    assert (up.act_bytes_read, up.bytes_written) == (1024 * 2, 1024 * 4)
    assert (down.act_bytes_read, down.bytes_written) == (1024 * 4, 1024 * 2)
    mm = by["mm"].workload
    assert mm.dtype == "float32"
    assert mm.weight_bytes == 1024 * 1024 * 4  # the weight's cast is folded at load: an fp32 weight
    assert (mm.act_bytes_read, mm.bytes_written) == (1024 * 4, 1024 * 4)
    assert by["tr"].workload.dtype == "float16"
    assert any("costed in fp32" in n for n in rep.notes)


def test_a_device_with_fp16_units_runs_the_model_as_it_is(tmp_path):
    _, layers = _layers(tmp_path, "t4")
    assert not any(l.op_type == "Cast" for l in layers)
    # (the MatMul and its bias Add are one Linear kernel on a GPU: dnnperf.kernel_groups.framework_op_groups)
    # its weights: the fp16 matrix and the fp16 bias vector
    assert next(l for l in layers if "mm" in l.nodes).workload.weight_bytes == 1024 * 1024 * 2 + 1024 * 2


def _one_op(tmp_path, op, shape, opset=17, dtype=F16, inits=(), **attrs):
    ins = ["x"] + [i.name for i in inits]
    m = model([helper.make_node(op, ins, ["y"], name="op", **attrs)], [vi("x", shape, dtype)], [vi("y", None, dtype)],
              list(inits))
    m.opset_import[0].version = opset
    rep = analyze(inspect_model(save(m, tmp_path)), load_profile("cpu-avx2"), Settings(fusion="none"), with_fixes=False)
    return [c.layer for c in rep.score.layers], rep


def _kernels(layers) -> list[str]:
    return [op for la in layers for op in ([p[0] for p in la.workload.parts] or [la.op_type])]


def test_a_16bit_softmax_runs_as_its_function_body(tmp_path):
    # ONNX Runtime 1.32's optimised graph of this model (CPU provider): Cast, ReduceMax, Sub, Exp, ReduceSum,
    # Div, Cast; the fp32 model runs its one Softmax kernel
    layers, _ = _one_op(tmp_path, "Softmax", [1, 12, 128, 128], axis=-1)
    assert _kernels(layers) == ["Cast", "ReduceMax", "Sub", "Exp", "ReduceSum", "Div", "Cast"]
    w = next(la for la in layers if la.op_type == "Softmax").workload
    n, rows = 12 * 128 * 128, 12 * 128  # fp32 elements, and one max / sum per row of 128
    # read: ReduceMax x, Sub x and the max, Exp, ReduceSum, Div the exponentials and the sum
    assert w.act_bytes_read == 4 * (5 * n + 2 * rows)
    assert w.bytes_written == 4 * (3 * n + 2 * rows)
    assert w.launches == 5 and w.dtype == "float32"
    fp32, _ = _one_op(tmp_path, "Softmax", [1, 12, 128, 128], dtype=TensorProto.FLOAT, axis=-1)
    assert _kernels(fp32) == ["Softmax"]


def test_a_16bit_softmax_along_an_inner_axis_reduces_that_axis(tmp_path):
    layers, _ = _one_op(tmp_path, "Softmax", [2, 8, 4, 16], axis=1)
    w = next(la for la in layers if la.op_type == "Softmax").workload
    n, rows = 2 * 8 * 4 * 16, 2 * 4 * 16  # one max and one sum per (batch, row, column)
    assert w.act_bytes_read == 4 * (5 * n + 2 * rows)


def test_a_16bit_op_runs_as_its_function_body_only_at_the_opsets_the_runtime_lacks_a_kernel_for(tmp_path):
    # LeakyRelu-16 at opsets 16-18 is Mul, Less, Where in ONNX Runtime 1.32's graph; at 15 and 19 one LeakyRelu
    for opset, body in ((15, ["LeakyRelu"]), (17, ["Mul", "Less", "Where"]), (19, ["LeakyRelu"])):
        layers, _ = _one_op(tmp_path, "LeakyRelu", [1, 4, 8, 16], opset=opset)
        assert _kernels(layers) == ["Cast", *body, "Cast"], opset
    # Gelu (opset 20): the erf form is six kernels, the tanh form nine
    layers, _ = _one_op(tmp_path, "Gelu", [1, 4, 8, 16], opset=20)
    assert _kernels(layers)[1:-1] == ["Mul", "Sqrt", "Div", "Erf", "Sum", "Mul"]
    layers, _ = _one_op(tmp_path, "Gelu", [1, 4, 8, 16], opset=20, approximate="tanh")
    assert len(_kernels(layers)[1:-1]) == 9
    layers, _ = _one_op(tmp_path, "HardSwish", [1, 4, 8, 16], opset=17)
    assert _kernels(layers) == ["Cast", "HardSigmoid", "Mul", "Cast"]


def test_16bit_data_movement_without_a_16bit_kernel_is_cast(tmp_path):
    # Tile has no 16-bit kernel in ONNX Runtime's CPU provider (its graph: Cast, Tile, Cast); Transpose has one
    layers, _ = _one_op(tmp_path, "Tile", [1, 4, 8, 16], inits=[ints("r", [1, 1, 2, 1])])
    assert _kernels(layers) == ["Cast", "Tile", "Cast"]
    tile = next(la for la in layers if la.op_type == "Tile").workload
    assert (tile.act_bytes_read, tile.bytes_written) == (4 * 512, 4 * 1024)
    layers, _ = _one_op(tmp_path, "Transpose", [1, 4, 8, 16], perm=[0, 1, 3, 2])
    assert _kernels(layers) == ["Transpose"]


def test_the_fix_for_a_softmax_run_as_its_function_body_is_the_one_fp32_kernel(tmp_path):
    m = model([helper.make_node("Softmax", ["x"], ["y"], name="op", axis=-1)], [vi("x", [1, 12, 128, 128], F16)],
              [vi("y", None, F16)])
    rep = analyze(inspect_model(save(m, tmp_path)), load_profile("cpu-avx2"), Settings(fusion="none"))
    c = next(c for c in rep.score.layers if c.layer.op_type == "Softmax")
    fix = next(f for f in c.fixes if "function body" in f["text"])
    m32 = model([helper.make_node("Softmax", ["x"], ["y"], name="op", axis=-1)],
                [vi("x", [1, 12, 128, 128], TensorProto.FLOAT)], [vi("y", None, TensorProto.FLOAT)])
    one = analyze(inspect_model(save(m32, tmp_path, "fp32.onnx")), load_profile("cpu-avx2"), Settings(fusion="none"),
                  with_fixes=False).score.layers[0].time_s
    assert "5 fp32 kernels" in fix["text"]
    assert abs(fix["saving_s"] - (c.time_s - one)) <= 0.02 * c.time_s  # the fp32 model's own Softmax, within 2%


def test_16bit_element_ops_with_kernels_of_their_own_are_not_cast(tmp_path):
    # x -> Add -> Clip -> y in fp16: ONNX Runtime 1.32's graph is Cast, Add, Cast, Clip (its fp16 Clip kernel
    # takes the 16-bit tensor, and the graph output is that kernel's): one cast each way around the Add only
    nodes = [helper.make_node("Add", ["x", "x"], ["a"], name="add"),
             helper.make_node("Clip", ["a"], ["y"], name="clip")]
    m = model(nodes, [vi("x", [1, 196608], F16)], [vi("y", None, F16)])
    path = save(m, tmp_path)
    layers = [c.layer for c in analyze(inspect_model(path), load_profile("cpu-avx2"), Settings(fusion="none"),
                                       with_fixes=False).score.layers]
    assert [la.op_type for la in layers] == ["Cast", "Add", "Cast", "Clip"]
    clip = layers[-1].workload
    assert clip.dtype == "float16" and clip.kernel == "Clip.half"
    assert (clip.act_bytes_read, clip.bytes_written) == (2 * 196608, 2 * 196608)
    ort = pytest.importorskip("onnxruntime")
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    assert [n.op_type for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node] == ["Cast", "Add", "Cast", "Clip"]


def test_a_16bit_clip_takes_its_calibrated_time_per_element(tmp_path):
    # its element-by-element conversion: 196,608 elements at 2 ns each = 393.2 us (the fp32 kernel streams them)
    import yaml

    from dnnperf.hardware import profile_from_dict

    with open(os.path.join(os.path.dirname(__file__), "..", "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        base = yaml.safe_load(fh)
    hw = profile_from_dict({**base, "loop_ns": {"Clip.half": 2.0}}, "x")
    layers, _ = _one_op(tmp_path, "Clip", [1, 196608])
    assert [la.op_type for la in layers] == ["Clip"]
    c = analyze(inspect_model(save(model([helper.make_node("Clip", ["x"], ["y"], name="op")],
                                         [vi("x", [1, 196608], F16)], [vi("y", None, F16)]), tmp_path, "c.onnx")),
                hw, Settings(fusion="none"), with_fixes=False).score.layers[0]
    assert c.time_s - c.t_launch == pytest.approx(196608 * 2e-9, rel=1e-3)


def _blocked_cpu():
    import yaml

    from dnnperf.hardware import profile_from_dict

    with open(os.path.join(os.path.dirname(__file__), "..", "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        base = yaml.safe_load(fh)
    layout = {"block": 16, "grouped_min_width": 16, "channel_alignment": 4, "pool_alignment": 16}
    return profile_from_dict({**base, "cpu_layout": layout}, "blocked")


def _ort_ops(tmp_path, path):
    ort = pytest.importorskip("onnxruntime")
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return [(n.domain.rsplit(".", 1)[-1] + ":" if n.domain else "") + n.op_type
            for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node]


def _two_convs(bias_names):
    # fp16 x -> Conv (+ bias) -> Relu -> Conv (+ bias) -> Relu -> y, 32 channels at 28 x 28
    b1, b2 = bias_names
    nodes = [helper.make_node("Conv", ["x", "w1", b1], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", b2], ["c2"], name="conv2"),
             helper.make_node("Relu", ["c2"], ["y"], name="relu2")]
    inits = [weight("w1", [32, 32, 3, 3], F16), weight("w2", [32, 32, 1, 1], F16)]
    inits += [weight(b, [32], F16) for b in dict.fromkeys(bias_names)]
    return model(nodes, [vi("x", [1, 32, 28, 28], F16)], [vi("y", None, F16)], inits)


def test_16bit_convolutions_sharing_a_bias_run_outside_the_blocked_layout(tmp_path):
    # ONNX Runtime casts a 16-bit weight read by one node once at load time, but one two nodes share stays a
    # Cast node run at every inference, and a convolution reading it is not blocked (its optimised graph:
    # no NCHWc node with the shared bias, NCHWc convolutions with a bias each)
    from dnnperf.vocab import PLAIN_CONV

    for names, plain in ((("b", "b"), True), (("b1", "b2"), False)):
        path = save(_two_convs(names), tmp_path, f"{names[1]}.onnx")
        sc = analyze(inspect_model(path), _blocked_cpu(), Settings(), with_fixes=False).score
        layers = [c.layer for c in sc.layers]
        convs = [la for la in layers if la.workload.conv]
        assert len(convs) == 2 and all((la.workload.kernel == PLAIN_CONV) == plain for la in convs), names
        assert any(la.op_type == "LayoutReorder" for la in layers) != plain
        # the shared bias: one Cast kernel of its 32 values, before the first convolution
        assert ("cast to fp32 b" in [la.name for la in layers]) == plain
        ops = _ort_ops(tmp_path, path)
        assert any(op.startswith("nchwc:") for op in ops) != plain, ops
        assert ops.count("Cast") == sum(la.op_type == "Cast" for la in layers), ops


def test_a_16bit_data_movement_op_between_fp32_layers_runs_in_fp32(tmp_path):
    # two fp16 convolution branches joined by a Concat before a third: the Concat has a 16-bit kernel but ONNX
    # Runtime runs it in fp32 (no cast either side: Cast of x, the convolutions, Concat, Conv, Cast of y)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"),
             helper.make_node("Relu", ["a"], ["ra"], name="r1"),
             helper.make_node("Conv", ["x", "w2"], ["b"], name="c2"),
             helper.make_node("Relu", ["b"], ["rb"], name="r2"),
             helper.make_node("Concat", ["ra", "rb"], ["cat"], name="cat", axis=1),
             helper.make_node("Conv", ["cat", "w3"], ["y"], name="c3")]
    inits = [weight("w1", [16, 16, 1, 1], F16), weight("w2", [16, 16, 1, 1], F16), weight("w3", [16, 32, 1, 1], F16)]
    path = save(model(nodes, [vi("x", [1, 16, 8, 8], F16)], [vi("y", None, F16)], inits), tmp_path)
    layers = [c.layer for c in analyze(inspect_model(path), load_profile("cpu-avx2"), Settings(),
                                       with_fixes=False).score.layers]
    assert [la.name for la in layers if la.op_type == "Cast"] == ["cast to fp32 x", "cast to fp16 y"]
    cat = next(la for la in layers if la.op_type == "Concat").workload
    assert cat.dtype == "float32" and cat.bytes_written == 4 * 32 * 8 * 8
    assert _ort_ops(tmp_path, path).count("Cast") == 2


def test_shape_arithmetic_on_a_16bit_tensor_casts_nothing(tmp_path):
    # a Shape of a 16-bit tensor, recomputed every inference (a symbolic batch dim), reads its dims only: with
    # the Concat and Reshape around it (16-bit kernels) nothing is cast, in dnnperf as in ONNX Runtime's graph
    nodes = [helper.make_node("Concat", ["x", "x"], ["c"], name="cat", axis=1),
             helper.make_node("Shape", ["c"], ["s"], name="shape"),
             helper.make_node("Reshape", ["c", "s"], ["y"], name="reshape")]
    path = save(model(nodes, [vi("x", ["N", 8, 4], F16)], [vi("y", None, F16)]), tmp_path)
    layers = [c.layer for c in analyze(inspect_model(path), load_profile("cpu-avx2"), Settings(),
                                       with_fixes=False).score.layers]
    assert next(la for la in layers if la.op_type == "Shape").workload.family == "shape_runtime"
    assert not any(la.op_type == "Cast" for la in layers)
    assert "Cast" not in _ort_ops(tmp_path, path)


def test_a_weight_a_contrib_kernel_reads_in_16_bits_is_not_cast(tmp_path):
    # the genai decoder's two GroupQueryAttention nodes share its fp16 rotary caches; ONNX Runtime's kernel reads
    # them in fp16 (its optimised graph casts neither), so no per-inference Cast of them is costed
    from dnnperf.ir import ShapeOverrides
    from dnnperf.llm.phases import find_decoder
    from helpers import SAMPLES

    path = os.path.join(SAMPLES, "tiny_llama_genai.onnx")
    insp = inspect_model(path, find_decoder(path).overrides(ShapeOverrides(batch=1), 1, 128))
    names = [c.layer.name for c in analyze(insp, load_profile("cpu-avx2"), Settings(fusion="typical"),
                                           with_fixes=False).score.layers]
    assert not any("rotary" in n for n in names if n.startswith("cast to"))
    ort = pytest.importorskip("onnxruntime")
    from dnnperf.measure.ort import runnable_bytes

    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(runnable_bytes(path, {}, []), so, providers=["CPUExecutionProvider"])
    casts = [n.input[0] for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node if n.op_type == "Cast"]
    assert casts and not any("rotary" in c for c in casts)


def _relu6_chain(n_clips):
    # fp16 x -> [Conv (a bias of its own) -> Clip between Constants 0 and 6 of its own] x n_clips -> Conv -> y,
    # 32 channels at 28 x 28: a MobileNetV2's ReLU6 blocks
    nodes, inits, t = [], [], "x"
    for i in range(n_clips):
        nodes += [helper.make_node("Conv", [t, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1])]
        nodes += [helper.make_node("Constant", [], [f"{k}{i}"], name=f"{k}{i}",
                                   value=helper.make_tensor("v", F16, [], [v])) for k, v in (("lo", 0.0), ("hi", 6.0))]
        nodes.append(helper.make_node("Clip", [f"c{i}", f"lo{i}", f"hi{i}"], [f"r{i}"], name=f"clip{i}"))
        inits += [weight(f"w{i}", [32, 32, 3, 3], F16), weight(f"b{i}", [32], F16)]
        t = f"r{i}"
    nodes.append(helper.make_node("Conv", [t, "wo", "bo"], ["y"], name="out"))
    inits += [weight("wo", [32, 32, 1, 1], F16), weight("bo", [32], F16)]
    return model(nodes, [vi("x", [1, 32, 28, 28], F16)], [vi("y", None, F16)], inits)


@pytest.mark.parametrize("n_clips", [1, 2])
def test_16bit_clips_whose_bounds_the_runtime_shares_fuse_into_nothing(tmp_path, n_clips):
    # ONNX Runtime first makes every one-value constant one initializer per (type, value, rank), so two Clips'
    # own 0 and 6 become two shared fp16 scalars, cast every inference; a Clip reading a Cast is not fused into
    # the convolution before it, and a standalone Clip leaves the blocked layout: its optimised graph holds
    # both Clips between conversions out and back, and Casts of x, y and the two bounds. A lone Clip's bounds
    # are its own, folded to fp32 at load time: fused. dnnperf fused both Clips (2 Casts, 2 conversions).
    path = save(_relu6_chain(n_clips), tmp_path, f"c{n_clips}.onnx")
    layers = [c.layer for c in analyze(inspect_model(path), _blocked_cpu(), Settings(fusion="typical"),
                                       with_fixes=False).score.layers]
    clips = [la for la in layers if la.op_type == "Clip"]
    casts = [la.name for la in layers if la.op_type == "Cast"]
    reorders = sum(la.op_type == "LayoutReorder" for la in layers)
    if n_clips == 2:
        assert len(clips) == 2 and all(la.workload.dtype == "float32" for la in clips)  # between fp32 layers
        assert sorted(casts) == ["cast to fp16 y", "cast to fp32 hi0", "cast to fp32 lo0", "cast to fp32 x"]
        assert reorders == 2 + 2 * n_clips  # in and out of the network, out and back in around each Clip
    else:
        assert not clips and sorted(casts) == ["cast to fp16 y", "cast to fp32 x"] and reorders == 2
    ops = _ort_ops(tmp_path, path)
    if any(op.startswith("nchwc:") for op in ops):  # (a CPU whose runtime writes the blocked layout)
        assert ops.count("Clip") == len(clips) and ops.count("Cast") == len(casts), ops
        assert ops.count("nchwc:ReorderInput") + ops.count("nchwc:ReorderOutput") == reorders, ops


def test_validate_maps_a_16bit_models_renamed_blocked_convolutions_and_shared_scalar_casts(tmp_path):
    # ONNX Runtime names a fp16 model's blocked convolution after its output as its cast renamed it
    # ('InsertedPrecisionFreeCast_<output>_nchwc': a fp16 MobileNetV2's 52, left unmatched and read 0 us) and the
    # Cast of a shared scalar after any of the constants it merged (hi1's here, where dnnperf's layer casts hi0)
    from dnnperf.measure.validate import map_kernels

    insp = inspect_model(save(_relu6_chain(2), tmp_path))
    layers = [c.layer for c in analyze(insp, _blocked_cpu(), Settings(fusion="typical"), with_fixes=False).score.layers]
    kernels = {"InsertedPrecisionFreeCast_c0_nchwc": ("Conv", 5.0), "InsertedPrecisionFreeCast_hi1": ("Cast", 1.0),
               "InsertedPrecisionFreeCast_lo0": ("Cast", 2.0)}
    measured, unmatched = map_kernels(kernels, insp.graph, layers)
    assert not unmatched
    assert measured == {"conv0": 5.0, "cast to fp32 hi0": 1.0, "cast to fp32 lo0": 2.0}
