"""16-bit models on a CPU without 16-bit arithmetic (dnnperf/upcast.py): computed in fp32, with the
runtime's casts where fp32 results meet 16-bit data movement."""

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
