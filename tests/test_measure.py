"""calibrate / validate (ONNX Runtime on tiny graphs): structure and bounds, never wall-clock."""

import builtins
import os

import numpy as np
import pytest
import yaml

pytest.importorskip("onnxruntime")

from dnnperf.scoring import Settings  # noqa: E402
from dnnperf.api import analyze, inspect_model  # noqa: E402
from dnnperf.ir import ShapeOverrides  # noqa: E402
from dnnperf.load import load_graph  # noqa: E402
from dnnperf.hardware import load_profile, profile_from_dict  # noqa: E402
from dnnperf.measure import calibrate, map_kernels, micro_models, runnable_bytes, validate  # noqa: E402
from dnnperf.errors import DnnperfError  # noqa: E402
from dnnperf.measure.micro import _matmul  # noqa: E402
from dnnperf.measure.ort import session  # noqa: E402
from helpers import ORT_MODELLED, SAMPLES, conv_model, modelled_ort, ort_version, save  # noqa: E402


@pytest.fixture(scope="module")
def local_profile(tmp_path_factory):
    prof = calibrate(quick=True, strict=False)  # shared CI machines may be noisy: never exit on it here
    p = tmp_path_factory.mktemp("cal") / "local.yaml"
    p.write_text(yaml.safe_dump(prof, sort_keys=False))
    return prof, str(p)


def test_calibration_writes_a_valid_profile(local_profile):
    prof, path = local_profile
    hw = profile_from_dict(prof, "calibrated")
    assert hw.kind == "cpu" and hw.headline_tops > 0 and hw.dram_gbs > 0
    assert hw.onchip_gbs >= hw.dram_gbs  # cache is never slower than DRAM in the profile
    assert hw.launch_overhead_us > 0
    # shape arithmetic on symbolic dims costs at least a dispatch per op (floored there)
    assert hw.host_op_us is not None and hw.host_op_us >= hw.launch_overhead_us
    # the runtime's call: a fixed cost and one per further graph input and output
    assert set(hw.call_us) == {"fixed", "per_input", "per_output"} and hw.call_us["fixed"] > 0
    # stride-2 grouped curves sit next to the stride-1 ones
    assert any(k.startswith("grouped_conv.w") and k.endswith("s2") for k in hw.shape_efficiency)
    # the plain depthwise kernel's curves, stride 1 and 2, each up to 56 x 56 output pixels (read against its math)
    for key in ("depthwise_conv.unblocked_k3", "depthwise_conv.unblocked_k3s2"):
        assert [x for x, _ in hw.shape_efficiency[key]] == [49, 784, 3136], key
    for fam, e in hw.efficiency.items():
        assert 0 < e <= 1, fam
    for op, e in hw.op_efficiency.items():
        assert 0 < e <= 1, op
    # the ops ORT runs element by element with the C library's functions each get a figure of their own
    assert {"Softplus", "Elu", "Selu", "Celu", "Sin", "Cos", "Atan", "Sign", "Log"} <= set(hw.op_efficiency)
    assert "Einsum" in hw.op_efficiency  # its own transposes and product, not a MatMul's pace
    assert "ReduceL2" in hw.op_efficiency  # F.normalize's norms: squares and sums at its own pace
    assert "Pow.square" in hw.op_efficiency  # a Pow by 2 or 3: multiplies, not the C library's powf
    assert "DequantizeLinear" in hw.op_efficiency  # a QDQ model's float layers widen 8-bit tensors at their own pace
    # its uint8 adds, multiplies and sigmoids run at about a float op's pace per element
    assert {"QLinearAdd", "QLinearMul", "QLinearSigmoid"} <= set(hw.op_efficiency)
    # Resize's loop over its outputs, per mode, in ns an output element
    assert set(hw.loop_ns) == {"Resize.nearest", "Resize.linear", "Resize.cubic", "Softmax.axis", "ScatterElements",
                               "QLinearConcat", "QLinearAveragePool", "MaxPool.int8", "Transpose.elements", "Slice.strided",
                               "Gather.blocks", "CumSum.last", "DepthToSpace", "SpaceToDepth", "ArgMax",
                               "Expand.fill", "PRelu", "TreeEnsemble.level", "SVM.term", "LRN", "ReduceLogSumExp",
                               "Broadcast.span", "MatMulNBits.fp32", "MatMulNBits.int8",
                               "Clip.half", "Max.half", "Min.half", "Round.half", "Shrink.half", "Transpose.blocks",
                               "Transpose.planes"}
    assert min(hw.loop_ns.values()) > 0
    # the ops slower per byte than an Add, the elementwise family's micro-benchmark, have figures of their own
    assert {"Sigmoid", "Max", "Min", "Floor", "LeakyRelu", "HardSwish", "Reciprocal", "Softsign"} <= set(hw.op_efficiency)
    # every pairing of 8-bit data and weight types, each a share of the int8 peak, but those this ONNX
    # Runtime has no kernel for, which the record names (1.23, the last release for Python 3.10: int8 data
    # times uint8 weights; 1.32: none)
    missing = prof["measured"].get("int8_without_kernel", [])
    assert set(hw.int8_operands) | set(missing) == {"u8s8", "u8u8", "s8s8", "s8u8"}
    assert not set(hw.int8_operands) & set(missing) and len(missing) < 4
    for pairing in missing:  # refused indeed
        with pytest.raises(DnnperfError, match="NOT_IMPLEMENTED"):
            session(_matmul("x", 8, 8, 8, "peak_int8", pairing, pairing=pairing).model.SerializeToString(), 1)
    # the runtime's channels-last 8-bit depthwise kernel against the float depthwise pace (capped: [0.05, 1])
    assert "int8_depthwise_share" in prof and 0.05 <= hw.int8_depthwise_share <= 1
    # and the generic kernel that runs channel counts the fast one does not take (x86: not in groups of 16),
    # never faster than the fast one
    import platform

    multiple, generic = hw.int8_depthwise_generic
    assert 0.05 <= generic <= hw.int8_depthwise_share
    import onnxruntime

    # (MLAS's channel block on x86 in the release the CPU model describes; with 1.28 it measured 8)
    if platform.machine().lower() in ("x86_64", "amd64") and ort_version(onnxruntime) >= ORT_MODELLED:
        assert multiple == 16
    assert all(0 < v <= 1 for v in hw.int8_operands.values())
    m = prof["measured"]
    assert m["threads"] >= 1 and m["onnxruntime"] and m["cpu"] and m["date"]
    assert load_profile(path).name == "local"



def _layers(path, hw_path):
    g = load_graph(path)
    insp = inspect_model(path)
    rep = analyze(insp, load_profile(hw_path), Settings(fusion="typical"), with_fixes=False)
    return g, [c.layer for c in rep.score.layers]


def test_kernel_mapping_handles_fusion_and_renames(tmp_path, local_profile):
    path = save(conv_model(8, 16, 12, 12, 3, pads=[1, 1, 1, 1], relu=True), tmp_path)
    g, layers = _layers(path, local_profile[1])
    # where calibration found ORT's blocked layout, the conv's output is converted back to NCHW
    blocked = load_profile(local_profile[1]).cpu_layout is not None
    assert [l.name for l in layers] == ["conv+relu"] + (["reorder out of y"] if blocked else [])
    kernels = {
        "conv": ("Conv", 10.0),                 # original node name
        "y_nchwc": ("Conv", 5.0),               # named after the fused chain's output tensor
        "conv/MatMulScaleFusion/": ("MatMul", 2.0),
        "ReorderOutput": ("ReorderOutput", 1.0),
    }
    measured, unmatched = map_kernels(kernels, g, layers)
    assert measured == {"conv+relu": 17.0}
    assert unmatched == {"ReorderOutput": 1.0}
    # with the kernels' shapes, the runtime's conversion out of the blocked layout (whose output is the
    # plain [1, 16, 12, 12] tensor) is the LayoutReorder layer; one of another shape stays unmatched
    shapes = {"ReorderOutput": (((1, 16, 12, 12),), ((1, 16, 12, 12),))}
    measured, unmatched = map_kernels(kernels, g, layers, shapes)
    if blocked:
        assert measured == {"conv+relu": 17.0, "reorder out of y": 1.0} and unmatched == {}
    shapes = {"ReorderOutput": (((1, 16, 6, 6),), ((1, 16, 6, 6),))}
    assert map_kernels(kernels, g, layers, shapes)[1] == {"ReorderOutput": 1.0}
    # a batch normalisation the runtime runs in its blocked layout is named after its output tensor
    from onnx import helper

    from helpers import model, vi, weight

    bn = model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn")],
               [vi("x", [1, 16, 8, 8])], [vi("y", None)], [weight(n, [16]) for n in "sbmv"])
    g, layers = _layers(save(bn, tmp_path, "bn.onnx"), local_profile[1])
    measured, unmatched = map_kernels({"y_bn_nchwc": ("BatchNormalization", 3.0)}, g, layers)
    assert measured == {"bn": 3.0} and unmatched == {}
    # ONNX Runtime's FusedGemm (a Gemm and its activation) is named "fused <the Gemm node>"
    gemm = model([helper.make_node("Gemm", ["x", "w"], ["h"], name="fc", transB=1),
                  helper.make_node("Relu", ["h"], ["y"], name="act")],
                 [vi("x", [1, 64])], [vi("y", None)], [weight("w", [32, 64])])
    path = save(gemm, tmp_path, "gemm.onnx")
    g, layers = _layers(path, local_profile[1])
    measured, unmatched = map_kernels({"fused fc": ("FusedGemm", 4.0)}, g, layers)
    assert measured == {"fc+act": 4.0} and unmatched == {}
    d = validate(path, load_profile(local_profile[1]), ShapeOverrides(), runs=3, strict=False)
    assert d["kernels_unmatched"] == {} and d["layers"][0]["layer"] == "fc+act" and d["layers"][0]["measured_s"] > 0


def test_validate_names_a_profile_that_does_not_describe_this_machine(tmp_path, local_profile):
    """validate times the model on this machine's CPU. A GPU profile was compared with that run (a
    T4 estimate against a CPU measurement: -94% on squeezenet) and is refused before anything runs;
    a CPU profile that was not calibrated here (a shipped spec-sheet one) is compared with a note
    saying so, and a profile calibrated here carries no such note."""
    from typer.testing import CliRunner

    from dnnperf.cli import app
    from dnnperf.measure.ort import cpu_name

    path = save(conv_model(8, 16, 12, 12, 3, pads=[1, 1, 1, 1]), tmp_path)
    r = CliRunner().invoke(app, ["validate", path, "--hw", "t4", "--runs", "3"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "t4 is a gpu profile" in r.stderr
    assert "--published" in r.stderr
    shipped = validate(path, load_profile("cpu-avx2"), ShapeOverrides(), runs=3, strict=False, drift=False)
    assert any("cpu-avx2 was not calibrated on any machine" in n and repr(cpu_name()) in n for n in shipped["notes"])
    here = validate(path, load_profile(local_profile[1]), ShapeOverrides(), runs=3, strict=False, drift=False)
    # (a calibration whose threads held more than one cache says so in a note of its own: not this one)
    assert not any("not on this one" in n for n in here["notes"])


def test_validate_runs_one_step_of_a_decoder_with_phase(tmp_path, local_profile):
    """The loader's answer to a decoder's open lengths names --phase; validate takes it (it used to
    refuse the option it was told to use): --phase decode --context 16 runs one decode step over 16
    cached tokens, the estimate and the run at the same lengths; --phase both (a whole request) is
    one clear line, exit 2, before anything runs."""
    import json

    from typer.testing import CliRunner

    from dnnperf.cli import app

    model_path = os.path.join(SAMPLES, "tiny_llama_genai.onnx")
    runner = CliRunner()
    r = runner.invoke(app, ["validate", model_path, "--hw", local_profile[1], "--runs", "3"])
    assert r.exit_code == 2 and "--phase decode --context N" in r.stderr
    out = tmp_path / "v.json"
    r = runner.invoke(app, ["validate", model_path, "--hw", local_profile[1], "--runs", "3", "--phase", "decode",
                            "--context", "16", "--accept-noisy", "--retry-unsteady", "0", "-q", "-f", "json", "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["measured_s"] > 0 and d["predicted_s"] > 0 and d["kernels_matched"] >= 1
    r = runner.invoke(app, ["validate", model_path, "--hw", local_profile[1], "--phase", "both"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "--phase prefill or --phase decode" in r.stderr


def test_validate_tiny_model(tmp_path, local_profile):
    path = save(conv_model(8, 16, 12, 12, 3, pads=[1, 1, 1, 1], relu=True), tmp_path)
    d = validate(path, load_profile(local_profile[1]), ShapeOverrides(), runs=3, strict=False)
    assert d["measured_s"] > 0 and d["predicted_s"] > 0
    assert d["kernels_matched"] >= 1
    assert any(r["layer"] == "conv+relu" and r["measured_s"] > 0 for r in d["layers"])
    assert d["error"] == pytest.approx((d["predicted_s"] - d["measured_s"]) / d["measured_s"], rel=1e-2, abs=1e-3)
    # every profiled kernel is either in a layer's measured time or listed as unmatched, each taken less
    # the profiler's own time per kernel, which the document states
    assert d["profiler_inflation_us"] >= 0
    # the summary by kind of layer adds up to the layers it sums
    assert sum(r["measured_s"] for r in d["by_op"]) == pytest.approx(sum(r["measured_s"] for r in d["layers"]), rel=1e-3)
    assert sum(r["layers"] for r in d["by_op"]) == len(d["layers"])
    assert d["profiled_kernels_s"] == pytest.approx(
        sum(r["measured_s"] for r in d["layers"]) + sum(d["kernels_unmatched"].values()), rel=1e-3)


def test_string_inputs_are_fed_strings(tmp_path):
    """A category encoder's string input was fed random floats, which ONNX Runtime refused ("Unexpected
    input data type"): validate could not run skl2onnx's ordinal or one-hot encoders at all. It gets
    short words, in the declared shape, and the model runs."""
    import onnxruntime as ort
    from onnx import TensorProto as T
    from onnx import helper

    from dnnperf.measure.ort import feeds_for
    from helpers import model, vi

    enc = helper.make_node("LabelEncoder", ["s"], ["y"], domain="ai.onnx.ml", keys_strings=["a", "b"],
                           values_int64s=[1, 2], default_int64=0)
    m = model([enc], [vi("s", [4, 3], T.STRING)], [vi("y", [4, 3], T.INT64)], extra_opsets=(("ai.onnx.ml", 2),))
    path = save(m, tmp_path)
    feeds = feeds_for(load_graph(path, ShapeOverrides()))
    assert feeds["s"].shape == (4, 3) and all(isinstance(v, str) and v for v in feeds["s"].ravel())
    (y,) = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert y.shape == (4, 3) and set(y.ravel()) <= {0, 1, 2}


def test_validate_runs_the_values_it_estimated_and_states_its_assumptions(tmp_path, local_profile):
    from dnnperf.measure.ort import feeds_for
    from helpers import counted_loop_model

    path = save(counted_loop_model(), tmp_path)
    # --value n=50: the estimate costs 50 iterations and the run is fed n = 50 (it used to get a random n)
    assert int(feeds_for(load_graph(path, ShapeOverrides(values=(("n", (50.0,)),))))["n"]) == 50
    d = validate(path, load_profile(local_profile[1]), ShapeOverrides(), runs=3, strict=False, drift=False)
    # without it the estimate is one iteration, and validate says so (its notes used to hold only its own)
    assert any("unknown trip count" in n and "--value n=N" in n for n in d["notes"])


def test_validate_estimates_for_the_machine_speed_now(tmp_path, local_profile):
    from dnnperf.measure.validate import anchors_of

    hw = load_profile(local_profile[1])
    # the quick calibration's anchors: its 512^3 GEMM, its two 8 Mi-element fp32 vectors added, and the
    # cache sweep's 3 MB point (eight adds over three 1 MB arrays: 3,072 KiB / 12 floats each)
    anchors = anchors_of(hw, None)
    assert [(mb.name, mb.role) for mb, _ in anchors] == [("gemm_fp32", "peak"), ("bandwidth_add", "dram"),
                                                          ("cache_3072k", "onchip")]
    assert anchors[0][0].ops == 2 * 512 ** 3 and anchors[1][0].nbytes == 3 * 4 * 8 * 1024 * 1024
    assert anchors[2][0].nbytes == 8 * 3 * 4 * (3072 * 1024 // 12)
    # the very micro-benchmarks the calibration timed (same model bytes), not look-alikes
    table = {mb.name: mb for mb in micro_models(True)}
    assert all(mb.model.SerializeToString() == table[mb.name].model.SerializeToString() for mb, _ in anchors)
    assert all(then == local_profile[0]["measured"]["micro_benchmarks_s"][mb.name] for mb, then in anchors)
    # another thread count, or a profile that was not calibrated here: nothing to compare against
    assert anchors_of(hw, hw.measured["threads"] + 1) == [] and anchors_of(load_profile("v100"), None) == []
    # a calibration without the sweep point (older ones): the two anchors it has
    older = dict(local_profile[0], measured={**local_profile[0]["measured"], "micro_benchmarks_s": {
        k: v for k, v in local_profile[0]["measured"]["micro_benchmarks_s"].items() if k != "cache_3072k"}})
    older_path = tmp_path / "older.yaml"
    older_path.write_text(yaml.safe_dump(older))
    assert [mb.role for mb, _ in anchors_of(load_profile(str(older_path)), None)] == ["peak", "dram"]
    path = save(conv_model(8, 16, 12, 12, 3, pads=[1, 1, 1, 1], relu=True), tmp_path)
    d = validate(path, hw, ShapeOverrides(), runs=3, strict=False)
    speed = d["speed_vs_calibration"]
    assert set(speed) == {"compute", "memory", "cache"} and all(v > 0 for v in speed.values())
    assert d["predicted_as_calibrated_s"] > 0
    off = validate(path, hw, ShapeOverrides(), runs=3, strict=False, drift=False)
    assert off["speed_vs_calibration"] is None and off["predicted_as_calibrated_s"] is None
    assert off["predicted_s"] == d["predicted_as_calibrated_s"]


def test_the_cold_gemm_overlap_is_the_one_that_reproduces_its_time(local_profile):
    from dnnperf.hardware import profile_from_dict
    from dnnperf.measure.calibrate import cold_overlap, predict_micro

    prof = dict(local_profile[0])
    cold = next(mb for mb in micro_models(True) if mb.role == "cold")
    t0, t1 = (predict_micro(cold.model, profile_from_dict({**prof, "product_overlap": ov}, "x")) for ov in (0.0, 1.0))
    # the shorter of math and weight streaming is hidden or not: T0 - T1 is that side, > 0
    assert t0 > t1
    assert cold_overlap(cold, prof, t0) == pytest.approx(0.0, abs=1e-9)
    assert cold_overlap(cold, prof, t1) == pytest.approx(1.0)
    assert cold_overlap(cold, prof, 0.25 * t0 + 0.75 * t1) == pytest.approx(0.75)
    # slower than no overlap at all, or faster than full overlap: clamped, never outside [0, 1]
    assert cold_overlap(cold, prof, 2 * t0) == 0.0 and cold_overlap(cold, prof, 0.5 * t1) == 1.0
    # and the profile estimates the GEMM at its measured time with that overlap
    mid = 0.5 * (t0 + t1)
    hw = profile_from_dict({**prof, "product_overlap": cold_overlap(cold, prof, mid)}, "x")
    assert predict_micro(cold.model, hw) == pytest.approx(mid, rel=1e-6)
    # the calibration writes it for matrix products only: every other layer keeps full overlap
    assert 0 <= prof["product_overlap"] <= 1 and "memory_overlap" not in prof


def test_the_cold_convolution_chain_reads_as_many_weights_as_the_dram_measurement():
    from dnnperf.measure.micro import micro_models

    for quick in (True, False):
        table = micro_models(quick)
        dram = next(mb for mb in table if mb.role == "dram")
        chain = next(mb for mb in table if mb.role == "cold_conv")
        inits = list(chain.model.graph.initializer)
        weights = sum(4 * int(np.prod(i.dims)) for i in inits)
        # 2048 <-> 512 1 x 1 filters of 4,194,304 bytes: 24 of them (quick: 100.7 MB against the 100.7 MB
        # the 8M-element Add moves), 48 (201.3 MB against 201.3 MB); distinct, an even count
        assert weights >= dram.nbytes and len(inits) == (24 if quick else 48) and len(inits) % 2 == 0
        assert chain.nbytes == weights
        assert len({i.raw_data[:64] for i in inits}) == len(inits)
        assert chain.ops == pytest.approx(2 * len(inits) * 2048 * 512 * 49)


def test_the_weight_exposure_is_the_one_that_reproduces_the_cold_chain(local_profile):
    from dnnperf.measure.calibrate import predict_micro, weight_exposure

    # the inversion under test, at a fixed overlap: a noisy calibration may measure an overlap of 0,
    # where every exposure gives the same time and nothing is left to invert
    prof = {**local_profile[0], "memory_overlap": 0.5}
    chain = next(mb for mb in micro_models(True) if mb.role == "cold_conv")
    floor = 1 - prof["memory_overlap"]
    t0, t1 = (predict_micro(chain.model, profile_from_dict({**prof, "conv_weight_exposure": e}, "x"))
              for e in (floor, 1.0))
    assert t1 > t0  # the weights' DRAM time beyond what the plain overlap exposes
    assert weight_exposure(chain, prof, t0) == pytest.approx(floor)
    assert weight_exposure(chain, prof, t1) == pytest.approx(1.0)
    mid = 0.25 * t0 + 0.75 * t1
    assert weight_exposure(chain, prof, mid) == pytest.approx(floor + 0.75 * (1 - floor))
    # faster than the plain estimate or slower than every weight read exposed: clamped
    assert weight_exposure(chain, prof, 0.5 * t0) == pytest.approx(floor) and weight_exposure(chain, prof, 2 * t1) == 1.0
    hw = profile_from_dict({**prof, "conv_weight_exposure": weight_exposure(chain, prof, mid)}, "x")
    assert predict_micro(chain.model, hw) == pytest.approx(mid, rel=1e-6)
    # the calibration wrote the figure and the working set its DRAM figure was measured at
    assert 0 <= prof["conv_weight_exposure"] <= 1
    assert prof["memory"]["dram_measured_mb"] == pytest.approx(3 * 4 * 8 * 1024 * 1024 / 1e6, rel=1e-3)


def test_a_profile_at_the_machine_speed_now_by_hand(local_profile):
    from dnnperf.measure.validate import at_current_speed

    hw = load_profile(local_profile[1])
    fast = at_current_speed(hw, 1.25, 0.8)
    assert fast.units[0].peak_tops["fp32"] == pytest.approx(hw.units[0].peak_tops["fp32"] * 1.25)
    assert fast.headline_tops == pytest.approx(hw.headline_tops * 1.25)
    assert fast.dram_gbs == pytest.approx(hw.dram_gbs * 0.8)
    assert [g for _, g in fast.bandwidth_curve] == pytest.approx([g * 0.8 for _, g in hw.bandwidth_curve])
    assert fast.launch_overhead_us == pytest.approx(hw.launch_overhead_us / 1.25)
    assert hw.kernel_fixed_us
    assert fast.kernel_fixed_us == pytest.approx({k: v / 1.25 for k, v in hw.kernel_fixed_us.items()})
    assert fast.efficiency == hw.efficiency and fast.memory_overlap == hw.memory_overlap  # shares, not speeds


def test_skeleton_weights_are_materialised_without_opening_paths(tmp_path, monkeypatch):
    import onnx

    m = conv_model(4, 8, 6, 6, 3)
    init = m.graph.initializer[0]
    init.ClearField("raw_data")
    init.data_location = onnx.TensorProto.EXTERNAL
    e = init.external_data.add()
    e.key, e.value = "location", "../../etc/passwd"
    p = save(m, tmp_path)
    opened = []
    real = builtins.open

    def spy(f, *a, **k):
        opened.append(str(f))
        return real(f, *a, **k)

    monkeypatch.setattr(builtins, "open", spy)
    data = runnable_bytes(p)
    monkeypatch.undo()
    m2 = onnx.ModelProto()
    m2.ParseFromString(data)
    assert len(m2.graph.initializer[0].raw_data) == 8 * 4 * 9 * 4
    assert not any("passwd" in o for o in opened)


def test_a_skeleton_weight_no_node_reads_is_materialised_too(tmp_path):
    """An external initializer no node reads (an exporter's leftover; ONNX Runtime drops it with a warning)
    stopped validate with an IndexError while its stand-in values were made; it gets small values like a bias."""
    import onnx

    m = conv_model(4, 8, 6, 6, 3)
    spare = onnx.numpy_helper.from_array(np.zeros(8, np.float32), "spare")
    spare.ClearField("raw_data")
    spare.data_location = onnx.TensorProto.EXTERNAL
    e = spare.external_data.add()
    e.key, e.value = "location", "absent.bin"
    m.graph.initializer.append(spare)
    m2 = onnx.ModelProto()
    m2.ParseFromString(runnable_bytes(save(m, tmp_path)))
    assert len(next(t for t in m2.graph.initializer if t.name == "spare").raw_data) == 8 * 4


def test_ort_optimised_models_keep_their_macs(tmp_path):
    """ORT's own fused graph (com.microsoft FusedConv etc.) costs the same MACs as the original."""
    import onnxruntime as ort
    import numpy as np
    import onnx
    from onnx import helper as oh

    from helpers import model, vi

    rng = np.random.default_rng(0)
    w = onnx.numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32), "w")
    b = onnx.numpy_helper.from_array(rng.standard_normal((16,)).astype(np.float32), "b")
    m = model([oh.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), oh.make_node("Relu", ["c"], ["y"])],
              [vi("x", [1, 8, 20, 20])], [vi("y", None)], [w, b])
    src = save(m, tmp_path, "src.onnx")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    opt = inspect_model(str(tmp_path / "opt.onnx"))
    assert not opt.unsupported
    assert any(r.node.op_type == "FusedConv" for r in opt.rows)
    assert opt.totals()["macs"] == inspect_model(src).totals()["macs"] == 16 * 400 * 8 * 9


def test_protocol_settles_or_says_the_machine_is_too_noisy(monkeypatch):
    """The rounds logic on scripted timings (no clock involved)."""
    from dnnperf.errors import TooNoisy
    from dnnperf.measure import ort as ort_mod

    script = {"a": iter([1.0, 1.01, 1.0, 1.0]), "b": iter([2.0, 2.0, 2.0, 2.0])}
    monkeypatch.setattr(ort_mod, "median_run", lambda sess, feeds, **kw: next(script[sess]))
    r = ort_mod.settled_times({"a": ("a", None), "b": ("b", None)}, rounds_min=3, rounds_max=6, runs=1, budget_s=0)
    assert r["settled"] and r["rounds"] == 3 and r["times"] == {"a": 1.0, "b": 2.0}
    assert r["spread"]["a"] == pytest.approx(0.01)
    # a job that keeps getting faster by half never settles
    halving = {"a": iter([1.0 / 2 ** i for i in range(10)])}
    monkeypatch.setattr(ort_mod, "median_run", lambda sess, feeds, **kw: next(halving[sess]))
    with pytest.raises(TooNoisy, match="did not settle in 4 rounds") as exc:
        ort_mod.settled_times({"a": ("a", None)}, rounds_min=2, rounds_max=4, runs=1, budget_s=0)
    assert exc.value.exit_code == 4  # neither a bug (3) nor bad input (2)
    halving = {"a": iter([1.0 / 2 ** i for i in range(10)])}
    r = ort_mod.settled_times({"a": ("a", None)}, rounds_min=2, rounds_max=4, runs=1, budget_s=0, strict=False)
    assert not r["settled"] and r["times"]["a"] == (1.0 / 2 + 1.0 / 4) / 2  # the median of 1, 1/2, 1/4, 1/8
    # a job outside settle_on is timed in every round but not waited for
    script = {"a": iter([1.0] * 4), "b": iter([1.0 / 2 ** i for i in range(10)])}
    monkeypatch.setattr(ort_mod, "median_run", lambda sess, feeds, **kw: next(script[sess]))
    r = ort_mod.settled_times({"a": ("a", None), "b": ("b", None)}, rounds_min=3, rounds_max=6, runs=1, budget_s=0,
                              settle_on=("a",))
    assert r["settled"] and r["rounds"] == 3 and r["times"]["b"] == 0.5  # the median of 1, 1/2, 1/4
    # one lucky round does not set the figure: the median of the rounds does
    lucky = {"a": iter([1.0, 1.0, 0.5, 1.0, 1.0])}
    monkeypatch.setattr(ort_mod, "median_run", lambda sess, feeds, **kw: next(lucky[sess]))
    r = ort_mod.settled_times({"a": ("a", None)}, rounds_min=3, rounds_max=5, runs=1, budget_s=0)
    assert r["times"]["a"] == 1.0 and r["spread"]["a"] == pytest.approx(1.0)
    # a job given a number of rounds (the cold convolution chain) is timed in those first rounds only
    script = {"a": iter([1.0, 1.01, 1.0, 1.0]), "c": iter([3.0, 5.0])}
    timed = []
    monkeypatch.setattr(ort_mod, "median_run", lambda sess, feeds, **kw: timed.append(sess) or next(script[sess]))
    r = ort_mod.settled_times({"a": ("a", None), "c": ("c", None)}, rounds_min=4, rounds_max=6, runs=1, budget_s=0,
                              settle_on=("a",), timing={"c": (1, 0.0, 2)})
    assert r["settled"] and r["rounds"] == 4 and timed.count("c") == 2 and r["times"]["c"] == 4.0


def test_the_protocol_goes_on_while_its_check_says_the_figures_do_not_repeat(monkeypatch):
    """Settled medians are not enough when the figures they give do not repeat: the rounds go on while
    the check answers what differs, stop when it answers None, and exit 4 naming the check's answer
    when it never does (or record it as ``unsettled`` with --accept-noisy)."""
    from dnnperf.errors import TooNoisy
    from dnnperf.measure import ort as ort_mod

    monkeypatch.setattr(ort_mod, "median_run", lambda sess, feeds, **kw: 1.0)
    answers = iter(["'x' differs by 9%", None])
    asked = []
    r = ort_mod.settled_times({"a": ("a", None)}, rounds_min=3, rounds_max=6, runs=1, budget_s=0,
                              check=lambda h: asked.append(len(h["a"])) or next(answers))
    assert r["settled"] and r["rounds"] == 4 and asked == [3, 4] and r["history"] == {"a": [1.0] * 4}
    with pytest.raises(TooNoisy, match="did not repeat in 5 rounds \\('x' differs by 9%\\)") as exc:
        ort_mod.settled_times({"a": ("a", None)}, rounds_min=2, rounds_max=5, runs=1, budget_s=0,
                              check=lambda h: "'x' differs by 9%")
    assert exc.value.exit_code == 4
    r = ort_mod.settled_times({"a": ("a", None)}, rounds_min=2, rounds_max=5, runs=1, budget_s=0, strict=False,
                              check=lambda h: "'x' differs by 9%")
    assert not r["settled"] and r["unsettled"] == "'x' differs by 9%" and r["rounds"] == 5


def test_a_runs_figures_are_compared_between_the_halves_of_its_rounds():
    """By hand: the first half takes the middle round of an odd count (1, 2, 3 | 4, 5: medians 2 and
    4.5), a job timed once gives its time to both; two profiles' figures compare as max / min - 1
    (1 vs 1.05: 5%; 2 vs 1: 100%; 0 vs 0: 0; 0 vs 0.1: inf), the measured record and the title left out."""
    from dnnperf.measure.repeat import figure_gaps, half_times

    assert half_times({"a": [1.0, 2.0, 3.0, 4.0, 5.0], "b": [7.0], "c": [4.0, 2.0]}) == \
        ({"a": 2.0, "b": 7.0, "c": 4.0}, {"a": 4.5, "b": 7.0, "c": 2.0})
    a = {"title": "x", "e": 1.0, "n": {"c": 2.0, "z": 0.0, "w": 0.0}, "units": [{"peak": 3.0}], "measured": {"s": 1.0}}
    b = {"title": "y", "e": 1.05, "n": {"c": 1.0, "z": 0.0, "w": 0.1}, "units": [{"peak": 3.0}], "measured": {"s": 9.0}}
    gaps = figure_gaps(a, b)
    assert set(gaps) == {"e", "n.c", "n.z", "n.w", "units[0].peak"}
    assert gaps["e"] == pytest.approx(0.05) and gaps["n.c"] == pytest.approx(1.0)
    assert gaps["n.z"] == 0.0 == gaps["units[0].peak"] and gaps["n.w"] == float("inf")


def test_calibrate_checks_that_its_figures_repeat_between_the_halves_of_its_rounds(monkeypatch):
    """calibrate hands the protocol a check that derives the profile from each half of the rounds:
    every micro-benchmark the same in every round: nothing differs; the fixed-time chain of the
    convolutions twice as slow in the later rounds (a job that rides along, never waited for): the
    convolutions' fixed kernel time is named."""
    import importlib

    cal = importlib.import_module("dnnperf.measure.calibrate")

    class Stop(Exception):
        pass

    seen = {}

    def fake(jobs, **kw):
        seen["jobs"], seen["check"] = list(jobs), kw["check"]
        raise Stop

    monkeypatch.setattr(cal, "settled_times", fake)
    with pytest.raises(Stop):
        cal.calibrate(quick=True)
    times = {n: 1e-3 for n in seen["jobs"]}
    times.update({"dispatch_1": 2e-5, "dispatch_200": 2e-4})
    steady = {n: [t] * 4 for n, t in times.items()}
    assert seen["check"](steady) is None
    drifting = {**steady, "fixed_conv": [1e-3, 1e-3, 2e-3, 2e-3]}
    why = seen["check"](drifting)
    assert why.startswith("'kernel_fixed_us.conv' differs by ") and why.endswith(
        "between the first and the second half of the rounds")


def test_validate_times_its_anchors_as_calibrate_timed_them(tmp_path, monkeypatch):
    """The drift correction compares an anchor's time now with its time at calibration: both must come
    from the same number of runs and budget per round (a memory stream speeds up over its first
    runs, so fewer runs read it slower). Checked on the arguments each side hands the protocol."""
    import importlib

    from dnnperf.measure import ort as ort_mod
    from dnnperf.measure.micro import anchor_models

    cal = importlib.import_module("dnnperf.measure.calibrate")
    val = importlib.import_module("dnnperf.measure.validate")
    seen = {}

    class Stop(Exception):
        pass

    def fake(jobs, **kw):
        seen.setdefault("calls", []).append((set(jobs), kw))
        raise Stop

    for quick in (True, False):
        seen.clear()
        monkeypatch.setattr(cal, "settled_times", fake)
        monkeypatch.setattr(val, "settled_times", fake)
        with pytest.raises(Stop):
            cal.calibrate(quick=quick)
        path = save(conv_model(8, 8, 8, 8, 3), tmp_path, "m.onnx")
        anchors = anchor_models(quick)
        with pytest.raises(Stop):
            val.measure(path, load_graph(path), None, runs=20, anchors=anchors, quick_anchors=quick)
        (_, cal_kw), (jobs, val_kw) = seen["calls"]
        assert (cal_kw["runs"], cal_kw["budget_s"]) == ((10, 0.25) if quick else (30, 1.0))
        for mb in anchors:
            assert f"anchor:{mb.name}" in jobs
            assert val_kw["timing"][f"anchor:{mb.name}"] == (cal_kw["runs"], cal_kw["budget_s"])
        assert "model" not in val_kw["timing"] and val_kw["runs"] == 6  # the model keeps its own runs
    # and the protocol hands each job its own runs and budget
    got = []
    monkeypatch.setattr(ort_mod, "median_run", lambda sess, feeds, **kw: got.append((sess, kw["runs"], kw["budget_s"])) or 1.0)
    ort_mod.settled_times({"a": ("a", None), "b": ("b", None)}, rounds_min=1, rounds_max=1, runs=6, budget_s=3.0,
                          strict=False, timing={"b": (30, 1.0)})
    assert sorted(got) == [("a", 6, 3.0), ("b", 30, 1.0)]


def test_the_host_shape_micro_benchmark_counts_its_ops_by_hand():
    """calibrate divides the symbolic-minus-static time of an exported channel shuffle by the shape
    ops dnnperf counts in it: per round a Shape, four Gathers, a Div, four Unsqueezes and two Concats
    (12), 16 rounds; over a static dim the runtime folds them all."""
    from dnnperf.measure.calibrate import host_shape_ops
    from dnnperf.measure.micro import HOST_SHAPE_ROUNDS, _host_shape_chain

    assert HOST_SHAPE_ROUNDS == 16
    assert host_shape_ops(_host_shape_chain(True)) == 16 * 12
    assert host_shape_ops(_host_shape_chain(False)) == 0
    # each round runs where such arithmetic runs in a network: after a 1 x 1 convolution of a
    # 64-channel 28 x 28 map (which the static version keeps too)
    for dynamic in (True, False):
        g = _host_shape_chain(dynamic).model.graph
        convs = [n for n in g.node if n.op_type == "Conv"]
        assert len(convs) == 16 and [d.dim_value for d in g.input[0].type.tensor_type.shape.dim][1:] == [64, 28, 28]


def test_the_fixed_kernel_cost_by_hand():
    """calibrate's fixed time per kernel: 24 tiny kernels in 100 us, a one-op run 4 us, 2 us of
    arithmetic, 0.25 us dispatch: ((100 - 4 - 2) - 23 x 0.25) / 24 = 3.677 us; never negative."""
    from dnnperf.measure.calibrate import fixed_us

    assert fixed_us(100e-6, 4e-6, 2e-6, 0.25, 24) == pytest.approx((94 - 23 * 0.25) / 24)
    assert fixed_us(5e-6, 4e-6, 2e-6, 0.25, 24) == 0.0
    # under the chain's timing resolution (0.1 us per kernel): 0, not noise
    assert fixed_us(4e-6 + 2e-6 + (23 * 0.25 + 24 * 0.09) * 1e-6, 4e-6, 2e-6, 0.25, 24) == 0.0
    assert fixed_us(4e-6 + 2e-6 + (23 * 0.25 + 24 * 0.2) * 1e-6, 4e-6, 2e-6, 0.25, 24) == pytest.approx(0.2)


def test_every_fixed_cost_chain_is_what_it_claims():
    """Each chain is FIXED_CHAIN kernels of its family in dnnperf's own costing (a chain read as
    another family would set the wrong figure; the recurrent one is one LSTM of FIXED_CHAIN steps,
    a step being one of its kernels; the control one a Scan of FIXED_CHAIN runs of one Add), and the time taken off a chain before an efficiency is read is
    that many fixed costs."""
    from dnnperf.measure.calibrate import inspect_micro, micro_costs
    from dnnperf.measure.micro import FIXED_CHAIN, FIXED_FAMILIES, _fixed_chain

    assert FIXED_CHAIN == 24
    base = _cpu_avx2()
    for fam in FIXED_FAMILIES:
        mb = _fixed_chain(fam)
        rows = [r for r in inspect_micro(mb.model).rows if r.workload is not None and r.workload.launches]
        # FIXED_CHAIN kernels of the family: as many nodes, or one recurrent op of as many steps
        assert {r.workload.family for r in rows} == {fam} and sum(r.workload.launches for r in rows) == FIXED_CHAIN, fam
        if fam == "control":  # one Scan running its body of one Add FIXED_CHAIN times
            assert len(rows) == 1 and rows[0].workload.iterations == FIXED_CHAIN
            assert [(op, pw.family, n) for op, pw, n in rows[0].workload.parts] == [("Add", "elementwise", FIXED_CHAIN)]
            # each iteration pays the loop's fixed time and its Add the elementwise one
            hw3 = profile_from_dict({**base, "kernel_fixed_us": {"control": 2.0, "elementwise": 0.5}}, "x")
            assert micro_costs(mb.model, hw3)[1] == pytest.approx(FIXED_CHAIN * 2.5e-6)
            continue
        assert len(rows) == (1 if fam == "rnn" else FIXED_CHAIN), fam
        hw2 = profile_from_dict({**base, "kernel_fixed_us": {fam: 2.0}}, "x")
        assert micro_costs(mb.model, hw2)[1] == pytest.approx(FIXED_CHAIN * 2.0e-6), fam


def _cpu_avx2() -> dict:
    import os

    with open(os.path.join(os.path.dirname(__file__), "..", "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def test_the_fixed_time_chains_ride_along_in_the_protocol(monkeypatch):
    """calibrate waits for every micro-benchmark to settle except the fixed-time chains, the
    convolution chains of the conv.k1 / conv.k3 curves (4 points each), the strided 1 x 1 convolutions
    of the conv.k1s2 curve (3 points), the pool chain, the activation epilogue chains (one plain, one
    per activation), the two bias adds of the broadcast spans' figure and the two runtime-call models
    (32 inputs, 32 outputs: their figures are differences of a few microseconds), which are timed in the same
    rounds (their figure is the median of those rounds),
    and the cold convolution chain (10-20 ms a run: timed a few
    times a round in the first rounds only, by its own runs, budget and rounds)."""
    import importlib

    from dnnperf.measure.micro import CONV1_PIXELS, CONV_PIXELS, FIXED_FAMILIES, STRIDED_K1
    from dnnperf.vocab import EPILOGUE_ACTIVATIONS as EPILOGUES

    cal = importlib.import_module("dnnperf.measure.calibrate")  # the module (the package exports the function)

    seen = {}

    class Stop(Exception):
        pass

    def fake(jobs, **kw):
        seen["jobs"], seen["settle_on"], seen["timing"] = set(jobs), set(kw["settle_on"]), kw["timing"]
        raise Stop

    monkeypatch.setattr(cal, "settled_times", fake)
    with pytest.raises(Stop):
        cal.calibrate(quick=True)
    fixed = {f"fixed_{f}" for f in FIXED_FAMILIES} | {f"conv_k3_{side}" for _, side in CONV_PIXELS} \
        | {f"conv_k1_{side}" for _, side in CONV1_PIXELS} | {f"conv_k1s2_{side // 2}" for _, side in STRIDED_K1} \
        | {"pool", "conv_cold", "epilogue_none"} | {f"epilogue_{a}" for a in EPILOGUES} | {"span_16", "span_768"} \
        | {"call_inputs", "call_outputs"}
    assert len(fixed) == len(FIXED_FAMILIES) + 18 + len(EPILOGUES)
    assert fixed <= seen["jobs"] and not fixed & seen["settle_on"]
    assert seen["settle_on"] == seen["jobs"] - fixed
    assert seen["timing"] == {"conv_cold": cal.COLD_CONV_TIMING[True]}


def test_a_pairing_the_runtime_has_no_kernel_for_is_left_out_and_named(local_profile, tmp_path, monkeypatch):
    """ONNX Runtime 1.23 (the last release for Python 3.10) has no MatMulInteger of int8 data and uint8
    weights, and calibrate stopped there with exit 2. Such a pairing is left out of the table (the other
    three timed), and calibrate names it on stderr and in the profile."""
    import copy
    import importlib

    import onnx
    from typer.testing import CliRunner

    import dnnperf.measure as measure
    from dnnperf.cli import app

    cal = importlib.import_module("dnnperf.measure.calibrate")  # (the package's ``calibrate`` is the function)

    def refuses_s8u8(model_bytes, threads, profile_prefix=None):  # int8 data x uint8 weights
        g = onnx.load_from_string(model_bytes).graph
        if g.node[0].op_type == "MatMulInteger" and g.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT8 \
                and g.initializer[0].data_type == onnx.TensorProto.UINT8:
            raise DnnperfError("ONNX Runtime could not load the model: [ONNXRuntimeError] : 9 : NOT_IMPLEMENTED")
        return object()

    monkeypatch.setattr(cal, "session", refuses_s8u8)
    table = micro_models(True)
    kept, missing = cal._with_kernels(table, 1)
    assert missing == ["s8u8"]
    assert [mb.key for mb in kept if mb.role == "peak_int8"] == ["u8s8", "u8u8", "s8s8"]
    assert len(kept) == len(table) - 1

    prof = copy.deepcopy(local_profile[0])
    prof["measured"]["int8_without_kernel"] = ["s8u8"]
    monkeypatch.setattr(measure, "calibrate", lambda *a, **k: prof)
    out = tmp_path / "local.yaml"
    r = CliRunner().invoke(app, ["calibrate", "--quick", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "has no integer product of the 8-bit pairing(s) s8u8 (data x weights): not timed" in r.output
    assert yaml.safe_load(out.read_text())["measured"]["int8_without_kernel"] == ["s8u8"]


def test_a_machine_that_never_settles_exits_3_unless_noise_is_accepted(tmp_path, monkeypatch):
    """Timings that drift every round: calibrate and validate exit 3 with one line; with
    --accept-noisy they keep the medians so far, record settled: false and say so on stderr."""
    import itertools
    import json

    from typer.testing import CliRunner

    from dnnperf.cli import app
    from dnnperf.measure import ort as ort_mod

    calls = itertools.count()  # every timing 15% slower than the one before: no median ever settles
    monkeypatch.setattr(ort_mod, "median_run", lambda sess, feeds, **kw: 1e-4 * 1.15 ** (next(calls) % 40))
    runner = CliRunner()
    out = tmp_path / "noisy.yaml"
    r = runner.invoke(app, ["calibrate", "--quick", "-o", str(out)])
    assert r.exit_code == 4 and "did not settle" in r.output and not out.exists()
    r = runner.invoke(app, ["calibrate", "--quick", "--accept-noisy", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert yaml.safe_load(out.read_text())["measured"]["settled"] is False
    assert "did not settle" in r.output and "settled: false" in r.output
    model = save(conv_model(8, 8, 8, 8, 3, pads=[1, 1, 1, 1]), tmp_path, "c.onnx")
    r = runner.invoke(app, ["validate", model, "--hw", str(out), "-f", "json", "--runs", "3"])
    assert r.exit_code == 4 and "did not settle" in r.output
    r = runner.invoke(app, ["validate", model, "--hw", str(out), "-f", "json", "--runs", "3", "--accept-noisy",
                            "--retry-unsteady", "0"])  # its faked timings move every anchor
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["settled"] is False and "did not settle" in r.stderr


def test_the_cache_knee_sits_in_the_middle_of_the_cliff():
    """Three calibrations of one VM (GB/s by working set): the 3 MB point streamed at 0.92, 0.90 and
    0.743 of the best speed, the 6 MB one at 0.33-0.37. The knee is the 3 MB point in all three
    (at a three-quarter threshold the third one halved the cache); no point above 1.5x DRAM: None."""
    from dnnperf.measure.calibrate import cache_knee

    runs = [(119.6, 170.6, 157.0, 56.8, 53.4), (111.4, 165.9, 148.9, 61.0, 55.2), (111.7, 156.7, 116.5, 58.4, 54.8)]
    for gbs in runs:
        sweep = list(zip((786_432, 1_572_864, 3_145_728, 6_291_456, 12_582_912), gbs))
        assert cache_knee(sweep, 30.0) == pytest.approx(3.145728)
    assert cache_knee([(1_000_000, 40.0), (2_000_000, 39.0)], 30.0) is None


def test_a_sweep_without_a_cliff_says_its_cache_figure_is_uncertain():
    """Two sweeps of an Intel VM whose 48 MB L3 is shared (GB/s at 0.79 to 50 MB, DRAM 24 GB/s): the
    threshold is 0.6 of the best; in the first the 3.1 MB point (61.89) sits just under 0.6 x 105 = 63,
    in the second the 6.3 MB one (54.84) just over 0.6 x 90.89 = 54.53. Moved 15% either way (0.69 and
    0.51 of the best) the knee reads 1.6 or 3.1 MB, and 3.1 or 12.6 MB: the calibration records that
    range and says so. The AMD VM's sweeps (the test above: cache points at 0.74-0.95 of the best, DRAM
    ones at 0.33-0.37) have one knee whichever way: no range."""
    from dnnperf.cli.measure import _knee_note
    from dnnperf.measure.calibrate import cache_knee, knee_range

    sizes = (786_432, 1_572_864, 3_145_728, 6_291_456, 12_582_912, 25_165_824, 50_331_648)
    first = list(zip(sizes, (65.75, 105.0, 61.89, 52.88, 49.14, 39.6, 28.98)))
    second = list(zip(sizes, (65.83, 90.89, 67.38, 54.84, 47.22, 39.19, 28.14)))
    assert cache_knee(first, 24.23) == pytest.approx(1.572864)
    assert knee_range(first, 24.23) == pytest.approx((1.572864, 3.145728))
    assert cache_knee(second, 24.61) == pytest.approx(6.291456)
    assert knee_range(second, 24.61) == pytest.approx((3.145728, 12.582912))
    amd = list(zip(sizes[:5], (119.6, 170.6, 157.0, 56.8, 53.4)))
    assert knee_range(amd, 30.0) is None
    note = _knee_note(6.291, 3.146, 12.58)
    assert "6.291 MB" in note and "3.146-12.58 MB" in note and "memory.onchip_mb" in note


def test_a_calibration_whose_threads_held_more_than_the_reported_cache_says_so(tmp_path, local_profile):
    """Two calibrations of the 2-core EPYC VM, whose OS reports one 32.77 MB L3 for both vCPUs (GB/s
    by working set, 0.79 to 50 MB). In its usual state the knee is 12.6 MB, under that; in its other
    state (DRAM read at 87 GB/s) the 50 MB point still streamed at 131 of the best 191 GB/s (0.69, over
    the 0.6 threshold and 1.5x DRAM): a 50.3 MB knee, 1.54x what the OS reports, which two threads can
    only hold in two caches. That calibration is marked, and so is every validate against it; one
    thread, or no cache reported, marks nothing."""
    from dnnperf.measure.calibrate import caches_apart, caches_apart_note, cache_knee

    sizes = (786_432, 1_572_864, 3_145_728, 6_291_456, 12_582_912, 25_165_824, 50_331_648)
    usual = list(zip(sizes, (121.4, 205.0, 205.2, 198.3, 177.5, 123.0, 76.9)))
    other = list(zip(sizes, (131.1, 170.2, 186.1, 191.4, 185.8, 166.4, 131.1)))
    assert cache_knee(usual, 48.22) == pytest.approx(12.582912)
    assert cache_knee(other, 87.32) == pytest.approx(50.331648)
    assert not caches_apart(12.58, 32.77, 2)
    assert caches_apart(50.33, 32.77, 2)
    assert not caches_apart(50.33, 32.77, 1) and not caches_apart(50.33, None, 2)
    assert not caches_apart(40.0, 32.77, 2)  # 1.22x: within the factor (the sweep doubles its sizes)
    note = caches_apart_note("local", 50.33, 32.77)
    assert "50.33 MB" in note and "32.77 MB" in note and "--threads 1" in note and "\n" not in note
    prof = yaml.safe_load(open(local_profile[1]))
    prof["memory"]["onchip_mb"] = 50.33
    prof["measured"].update(cache_reported_mb=32.77, caches_apart=True)
    marked = tmp_path / "apart.yaml"
    marked.write_text(yaml.safe_dump(prof, sort_keys=False))
    path = save(conv_model(8, 16, 12, 12, 3, pads=[1, 1, 1, 1]), tmp_path)
    d = validate(path, load_profile(str(marked)), ShapeOverrides(), runs=3, strict=False, drift=False)
    assert sum("did not share one cache" in n for n in d["notes"]) == 1
    del prof["measured"]["caches_apart"]  # the fixture's own calibration may be either way: the same profile unmarked
    unmarked = tmp_path / "shared.yaml"
    unmarked.write_text(yaml.safe_dump(prof, sort_keys=False))
    plain = validate(path, load_profile(str(unmarked)), ShapeOverrides(), runs=3, strict=False, drift=False)
    assert not any("did not share one cache" in n for n in plain["notes"])



def test_the_grouped_curves_reach_the_last_stage_resolution():
    """Grouped convolutions are timed down to 7 x 7 (49 output pixels: RegNet's and ResNeXt's last
    stage) for widths 8 and 16 and for stride 2 at width 8, so those layers are not costed at the
    flat extension of the 14 x 14 point (a width-8 chain ran at 0.78-0.83 of that estimate)."""
    from dnnperf.measure.micro import micro_models

    keys = {mb.key for mb in micro_models(quick=True)}
    assert {"grouped_conv.w8:49", "grouped_conv.w16:49", "grouped_conv.w8s2:49"} <= keys


def test_every_resnext_stage_is_a_grouped_point_of_its_own():
    """Each stage of torchvision's ResNeXt-50 32x4d (widths 4, 8, 16, 32 at 56, 28, 14, 7 pixels a side)
    and ResNeXt-101 32x8d (8, 16, 32, 64 at the same sides), read off the architecture (32 groups; the
    bottleneck's width doubles as the side halves), is timed by calibrate at that width and side: a
    width's curve held flat past its measured sides had ResNeXt-50's last stage (width 32 on 7 x 7)
    at the 28 x 28 pace, 1.5-1.7x faster than it ran. The ResNeXt-50 point is a chain of its own layer:
    1,024 channels in 32 groups on 7 x 7."""
    from dnnperf.measure.micro import micro_models

    table = {mb.key: mb for mb in micro_models(quick=True)}
    stages = [(4, 56), (8, 28), (16, 14), (32, 7), (8, 56), (16, 28), (32, 14), (64, 7)]
    missing = [f"grouped_conv.w{w}:{side * side}" for w, side in stages if f"grouped_conv.w{w}:{side * side}" not in table]
    assert not missing
    g = table["grouped_conv.w32:49"].model.graph
    convs = [n for n in g.node if n.op_type == "Conv"]
    assert all(next(a.i for a in n.attribute if a.name == "group") == 32 for n in convs)
    assert [d.dim_value for d in g.input[0].type.tensor_type.shape.dim] == [1, 1024, 7, 7]


def test_the_stride_1_grouped_curves_are_timed_as_chains_of_a_stage_s_channels():
    """A stride-1 grouped point is a chain of four 3 x 3 convolutions, each reading the one before, at
    the channels a ResNeXt stage has at that side (7 x 7: 1024, so width 16 is 64 groups), not copies
    of one 128-channel convolution on the same input; the stride-2 points stay single convolutions."""
    from dnnperf.measure.micro import micro_models

    table = {mb.key: mb for mb in micro_models(quick=True)}
    for key, ch, groups in (("grouped_conv.w16:49", 1024, 64), ("grouped_conv.w8:3136", 128, 16),
                            ("grouped_conv.w32:784", 256, 8)):
        g = table[key].model.graph
        convs = [n for n in g.node if n.op_type == "Conv"]
        assert len(convs) == 4, key
        assert all(next(a.i for a in n.attribute if a.name == "group") == groups for n in convs), key
        assert [n.input[0] for n in convs[1:]] == [n.output[0] for n in convs[:-1]], key  # a chain
        assert g.input[0].type.tensor_type.shape.dim[1].dim_value == ch, key
    s2 = table["grouped_conv.w8s2:49"].model.graph
    assert {n.op_type for n in s2.node} == {"Conv"} and len({n.input[0] for n in s2.node}) == 1


def test_validate_says_when_the_profiled_kernels_do_not_add_up_to_the_latency():
    """The per-layer measured times come from a profiled run: 13 ms of kernels for a 10 ms model (1.3x:
    the profiler's cost on tiny kernels) and 9 ms for 10 ms (0.9x: time between large kernels) each get
    a note saying by how much; 10.5 and 9.6 ms for 10 (1.05x, 0.96x) get none, nor does a zero latency."""
    from dnnperf.measure.validate import profile_note

    high = profile_note(13e-3, 10e-3)
    assert high is not None and "1.30x" in high and "ranks and shares" in high
    low = profile_note(9e-3, 10e-3)
    assert low is not None and "only 0.90x" in low and "between kernels" in low
    assert profile_note(10.5e-3, 10e-3) is None and profile_note(9.6e-3, 10e-3) is None
    assert profile_note(1e-3, 0.0) is None


def test_conversions_are_read_inside_the_probe_chain_not_at_its_edges(local_profile):
    """The reorder probes' figure comes from the conversions inside the chain (the kernels neither
    first nor last), against a copy of the tensor at the profile's bandwidth for that many bytes:
    64 x 56 x 56 floats (802,816 bytes, 1,605,632 moved) with in/out conversions of 20 and 30 us inside
    and 100 us at each edge -> (1,605,632 / bw) / 25 us. The one-node convolution's edge figure is
    kept as a record; the calibration writes the curve by pixels and the largest map's scalar."""
    from dnnperf import rules
    from dnnperf.measure.micro import REORDER_PROBES
    from dnnperf.measure.reorder import internal_efficiency

    prof = local_profile[0]
    hw = profile_from_dict(prof, "x")
    probe = next(mb for mb in micro_models(True) if mb.role == "reorder" and mb.key == "3136")
    kernels = {"ReorderInput": ("ReorderInput", 100.0), "c": ("Conv", 50.0), "ro": ("ReorderOutput", 20.0),
               "mul": ("Mul", 10.0), "ri": ("ReorderInput", 30.0), "y": ("Conv", 50.0),
               "ReorderOutput": ("ReorderOutput", 100.0)}
    want = 1_605_632 / rules.bandwidth_for(1_605_632, hw) / 25e-6
    assert internal_efficiency(probe, kernels, hw) == pytest.approx(min(1.0, want), rel=1e-9)
    assert internal_efficiency(probe, {"c": ("Conv", 50.0), "mul": ("Mul", 10.0), "y": ("Conv", 50.0)}, hw) is None
    assert sorted(int(mb.key) for mb in micro_models(True) if mb.role == "reorder") == sorted(s * s for _, s in REORDER_PROBES)
    curve = prof["shape_efficiency"].get("layout.reorder")
    if curve:  # this machine's runtime used the blocked layout
        assert set(curve) == {s * s for _, s in REORDER_PROBES}
        assert prof["op_efficiency"]["LayoutReorder"] == curve[max(curve)]
        assert 0 < prof["measured"]["layout_reorder_edge_efficiency"] <= 1


def test_the_peak_is_the_fastest_dense_kernel_not_only_the_gemm(local_profile):
    """A micro-benchmark's raw ratio is its roof over its kernel time, uncapped: the convolution family
    entry (eight 64 -> 64 3 x 3 convolutions at 56 x 56: 8 x 231,211,008 ops) timed at 0.8 of its
    roof at the profile's peak reads 1.25 (roof = ops / peak + the launch cost, kernel = time less one
    run's fixed cost plus one dispatch). The calibration raises its peak to such a convolution's rate
    when the GEMMs' is lower, so no dense family sits at the 1.0 cap."""
    from dnnperf.measure.calibrate import _raw_ratio

    prof = local_profile[0]
    hw = profile_from_dict(prof, "x")
    conv = next(mb for mb in micro_models(True) if mb.role == "family" and mb.key == "conv")
    ops = sum(2 * 64 * 64 * 9 * 56 * 56 for n in conv.model.graph.node if n.op_type == "Conv")
    roof = ops / (hw.headline_tops * 1e12) + hw.launch_overhead_us * 1e-6
    times = {conv.name: 0.8 * roof + 1e-4, "dispatch_1": 1e-4}
    no_layout = {}  # no conversions in its profile: nothing taken off
    # the profile as calibrate has it at that point: peaks, memory and dispatch, no efficiencies yet
    bare = {k: prof[k] for k in ("schema", "name", "title", "kind", "headline", "units", "memory", "parallelism",
                                 "launch_overhead_us", "host_op_us", "host_link_gbs", "sources")}
    ratio = _raw_ratio(conv, profile_from_dict(bare, "y"), times, 0.0, lambda mb: no_layout)
    assert ratio == pytest.approx(1.25, rel=0.02)
    m = prof["measured"]
    assert m["gemm_peak_tops"] <= hw.headline_tops * (1 + 1e-3)
    assert prof["efficiency"]["conv"] <= 1.0 and prof["efficiency"]["matmul"] <= 1.0


def test_calibrate_times_a_transposed_convolution_as_an_op_of_its_own(tmp_path):
    """ONNX Runtime runs a ConvTranspose as a product whose columns it scatters back, at a pace of its
    own (a 2x upsampling layer ran at ~0.4x of its estimate on this VM): calibrate times one, 64 -> 32
    channels, 4 x 4 at stride 2 from 28 x 28, and the estimate of a ConvTranspose takes that figure.
    By hand on cpu-avx2 (4.61 TOP/s fp32): 28 x 28 x 64 x 32 x 16 = 25,690,112 MACs, 11.15 us of math
    at the peak; at an op efficiency of 0.5 its compute takes twice that."""
    from dnnperf.measure.micro import micro_models

    mb = next(m for m in micro_models(True) if m.name == "op_ConvTranspose")
    assert (mb.role, mb.key) == ("op", "ConvTranspose")
    node = mb.model.graph.node[0]
    assert node.op_type == "ConvTranspose"
    from onnx import helper as h

    from helpers import model as mk
    from helpers import vi, weight

    m = mk([h.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1], name="up")],
           [vi("x", [1, 64, 28, 28])], [vi("y", [1, 32, 56, 56])], [weight("w", [64, 32, 4, 4])])
    insp = inspect_model(save(m, tmp_path))
    assert insp.totals()["macs"] == 25_690_112
    base = _cpu_avx2()
    full = analyze(insp, profile_from_dict(base, "x"), Settings()).score.layers[0]
    half = analyze(insp, profile_from_dict({**base, "op_efficiency": {"ConvTranspose": 0.5}}, "x"), Settings()).score.layers[0]
    assert full.t_ideal == pytest.approx(2 * 25_690_112 / 4.61e12, rel=1e-6)
    # the efficiency step charges the math again as 'unoptimized' loss: compute / 0.5 - compute / 1
    assert half.losses["unoptimized"] - full.losses["unoptimized"] == pytest.approx(full.t_compute, rel=1e-3)


def test_a_resize_takes_its_calibrated_time_per_output_element(tmp_path):
    """ONNX Runtime runs Resize as one loop over its outputs: 0.58 (nearest) and 0.82 ns (linear) per
    output element on a 2-core EPYC VM whatever the shape, 11-23x the roofline (deeplabv3's final 16x
    bilinear upsampling: 48 us estimated, 984 measured). calibrate times a 2x upsampling of 64 x 56 x 56
    per mode (802,816 outputs; its run less the one-op run plus one dispatch, over the outputs), and a
    Resize takes max(roofline, outputs x that). By hand: 21 x 256 x 256 = 1,376,256 outputs x 0.82 ns =
    1.1285 ms; nearest 0.58 ns = 0.7982 ms; cpu-avx2 without the figure keeps its roofline (8 ops an
    output for bilinear, 11.0 M ops at 4.61 TOP/s)."""
    from onnx import helper as h

    from dnnperf.measure.calibrate import loop_ns
    from dnnperf.measure.micro import loop_elements
    from helpers import model as mk
    from helpers import numpy_scalar, vi

    mbs = [m for m in micro_models(True) if m.role == "loop" and m.key.startswith("Resize")]
    assert sorted(m.key for m in mbs) == ["Resize.cubic", "Resize.linear", "Resize.nearest"]
    assert loop_elements() == 64 * 112 * 112
    times = {"dispatch_1": 4e-6, "loop_Resize.linear": 659e-6, "loop_Resize.nearest": 470e-6, "loop_Resize.cubic": 0.0}
    got = loop_ns(mbs, times, 0.25)
    assert got["Resize.linear"] == pytest.approx((659 - 4 + 0.25) / 802_816 * 1e3, rel=1e-3)
    assert got["Resize.nearest"] == pytest.approx((470 - 4 + 0.25) / 802_816 * 1e3, rel=1e-3)
    assert "Resize.cubic" not in got  # nothing measured: no figure

    def up(mode):
        m = mk([h.make_node("Resize", ["x", "", "sc"], ["y"], mode=mode, name="up")], [vi("x", [1, 21, 16, 16])],
               [vi("y", None)], [numpy_scalar("sc", [1.0, 1.0, 16.0, 16.0])])
        return inspect_model(save(m, tmp_path, f"{mode}.onnx"))

    base = _cpu_avx2()
    hw = profile_from_dict({**base, "loop_ns": {"Resize.linear": 0.82, "Resize.nearest": 0.58}}, "x")
    lin = analyze(up("linear"), hw, Settings()).score.layers[0]
    near = analyze(up("nearest"), hw, Settings()).score.layers[0]
    plain = analyze(up("linear"), profile_from_dict(base, "x"), Settings()).score.layers[0]
    launch = lin.t_launch
    assert lin.time_s - launch == pytest.approx(1_376_256 * 0.82e-9, rel=1e-3)
    assert near.time_s - near.t_launch == pytest.approx(1_376_256 * 0.58e-9, rel=1e-3)
    assert plain.t_compute == pytest.approx(8 * 1_376_256 / 4.61e12, rel=1e-3)
    assert plain.time_s < 0.2 * lin.time_s


def test_which_transposes_onnx_runtime_copies_element_by_element():
    """ONNX Runtime's CPU Transpose (transpose.cc): axes larger than 1 kept in order is a plain copy;
    one axis moved (the literal permutation, size-1 axes included) takes a 2-D transpose or strided
    block copies; otherwise the trailing axes left in place are copied as blocks, and when they hold
    one element (the last axis moves) every element is copied in a loop that steps a multi-index.
    Axes that stay next to each other in order move as one first. Cases worked by hand against those
    rules; each of the elementwise kind below, and the merged ones, timed in ONNX Runtime 1.32 (2.2-2.5
    ns an element for the loop, 0.2 for the merged ones)."""
    from dnnperf.ops.transpose import element_loop, merged_axes, single_axis_move

    assert element_loop([16, 32, 49, 12], [2, 0, 3, 1])  # no single axis moved, last axis moved
    assert element_loop([1, 64, 8, 7, 8, 7], [0, 2, 4, 3, 5, 1])  # MaxViT's window partition
    assert element_loop([1, 8, 8, 7, 7, 64], [0, 5, 1, 3, 2, 4])  # ... and its inverse
    assert element_loop([1, 1, 8, 8], [1, 0, 3, 2])  # two swaps, though only one moves a dim above 1
    assert element_loop([8, 16, 32, 4, 1], [3, 1, 0, 2, 4])  # the axis left in place holds one element
    assert single_axis_move([0, 2, 3, 1]) and not element_loop([1, 64, 56, 56], [0, 2, 3, 1])  # NCHW -> NHWC
    assert single_axis_move([0, 3, 1, 2]) and not element_loop([1, 56, 56, 64], [0, 3, 1, 2])
    assert not element_loop([64, 3, 49, 32], [0, 1, 3, 2])  # K^T: one axis moved
    assert not element_loop([1, 1, 8, 8], [0, 1, 3, 2])
    assert not element_loop([64, 49, 3, 3, 32], [2, 0, 3, 1, 4])  # Swin's q/k/v split: blocks of 32
    assert not element_loop([1, 8, 7, 8, 7, 96], [0, 1, 3, 2, 4, 5])  # Swin's window partition
    assert not element_loop([1, 197, 1, 3, 768], [3, 1, 2, 0, 4])  # blocks of 768
    assert not element_loop([1, 1, 12, 64], [1, 0, 2, 3]) and not element_loop([4, 1, 1, 5], [0, 2, 1, 3])
    assert not single_axis_move([2, 0, 3, 1]) and not single_axis_move([1, 0, 3, 2])
    # merged: a detector head's permute is one axis moved over [1, 819, 10000]; (2, 3, 0, 1) swaps two blocks
    assert merged_axes([1, 9, 91, 100, 100], [0, 3, 4, 1, 2]) == ([1, 819, 10000], [0, 2, 1])
    assert not element_loop([1, 9, 91, 100, 100], [0, 3, 4, 1, 2])
    assert not element_loop([9, 91, 100, 100], [2, 3, 0, 1])
    assert merged_axes([8, 8, 16, 32, 24], [2, 3, 0, 4, 1]) == ([8, 8, 512, 24], [2, 0, 3, 1])
    assert element_loop([8, 8, 16, 32, 24], [2, 3, 0, 4, 1])  # one pair merged, the rest still loops
    assert element_loop([256, 1, 1, 256], [3, 1, 2, 0])


def test_a_transpose_copied_element_by_element_takes_its_calibrated_time_per_element(tmp_path):
    """Such a Transpose ran at 2.3-2.8 ns an element on a 2-core EPYC VM (3 GB/s read and written; every
    other kind 0.05-0.2 ns): MaxViT-T's 44 of them, 3.6 M elements, measured 10.1 ms of Transpose
    kernels where the movement roofline gave 1.5. calibrate times one (loop_ns 'Transpose.elements',
    16 x 32 x 49 x 12 = 301,056 elements); with it a [16, 32, 49, 12] (2, 0, 3, 1) transpose takes
    301,056 x 2.5 ns = 752.6 us, while NCHW -> NHWC of as many elements keeps the movement roofline."""
    from onnx import helper as h

    from dnnperf.measure.micro import loop_elements
    from helpers import model as mk
    from helpers import vi

    mb = next(m for m in micro_models(True) if m.key == "Transpose.elements")
    assert mb.role == "loop" and loop_elements("Transpose.elements") == 301_056

    def tr(shape, perm, name):
        m = mk([h.make_node("Transpose", ["x"], ["y"], perm=perm, name="t")], [vi("x", shape)], [vi("y", None)])
        return inspect_model(save(m, tmp_path, name))

    loop = tr([16, 32, 49, 12], [2, 0, 3, 1], "loop.onnx")
    plain = tr([1, 49, 96, 64], [0, 2, 3, 1], "plain.onnx")  # one axis moved, as many elements
    assert loop.rows[0].workload.kernel == "Transpose.elements" and plain.rows[0].workload.kernel == ""
    hw = profile_from_dict({**_cpu_avx2(), "loop_ns": {"Transpose.elements": 2.5}}, "x")
    got = analyze(loop, hw, Settings()).score.layers[0]
    assert got.time_s - got.t_launch == pytest.approx(301_056 * 2.5e-9, rel=1e-3)
    other = analyze(plain, hw, Settings()).score.layers[0]
    assert other.time_s < 0.1 * got.time_s
    # without the figure both take the movement roofline alike
    base = profile_from_dict(_cpu_avx2(), "x")
    assert analyze(loop, base, Settings()).score.layers[0].time_s == pytest.approx(
        analyze(plain, base, Settings()).score.layers[0].time_s, rel=1e-6)


def test_a_transpose_copying_runs_of_elements_pays_a_fixed_time_per_run(tmp_path):
    """ONNX Runtime's CPU Transpose copies the trailing axes a permutation leaves in place as runs, one copy
    call a run, at a fixed 4.1-5.0 ns a run on a 2-core EPYC VM on top of the bytes (786,432 float32
    elements moved by (0, 2, 1, 3): runs of 4 0.89 ms, of 64 0.11, of 768 0.06). Runs counted by hand:
    attention's [1, 12, 128, 64] head split 12 x 128 = 1,536; ShuffleNetV2's channel shuffle
    [1, 2, 58, 28, 28] (0, 2, 1, 3, 4): 2 x 58 = 116 runs of 784; Swin's window partition
    [1, 8, 7, 8, 7, 96] (0, 1, 3, 2, 4, 5): 8 x 7 x 8 = 448 runs of 7 x 96. No runs: NCHW -> NHWC (the
    last axis moves), an element loop, a permutation of size-1 axes, and one axis moved over runs of at
    most 8 bytes (a typed loop: fp16 runs of 4). With the figure (calibrate times runs of 4 float32
    elements) the head split takes its bytes at the movement pace, 786,432 B at 50 GB/s = 15.73 us, plus
    1,536 x 4.6 ns = 7.07 us; not the 2-D transpose's figure (op_efficiency 'Transpose', timed on NCHW ->
    NHWC), which a profile without the run figure still applies."""
    from onnx import helper as h

    from dnnperf.measure.micro import loop_elements
    from dnnperf.ops.transpose import copied_blocks
    from helpers import model as mk
    from helpers import vi

    assert copied_blocks([1, 12, 128, 64], [0, 2, 1, 3]) == 1536
    assert copied_blocks([1, 2, 58, 28, 28], [0, 2, 1, 3, 4]) == 116
    assert copied_blocks([1, 8, 7, 8, 7, 96], [0, 1, 3, 2, 4, 5]) == 448
    assert copied_blocks([64, 49, 3, 3, 32], [2, 0, 3, 1, 4]) == 64 * 49 * 3 * 3  # Swin's q/k/v split
    assert copied_blocks([1, 64, 56, 56], [0, 2, 3, 1]) == 0 and copied_blocks([16, 32, 49, 12], [2, 0, 3, 1]) == 0
    assert copied_blocks([1, 1, 12, 64], [1, 0, 2, 3]) == 0
    assert copied_blocks([1, 12, 16384, 4], [0, 2, 1, 3], item=2) == 0  # 8-byte runs, one axis moved
    assert copied_blocks([1, 12, 16384, 4], [0, 2, 1, 3], item=4) == 12 * 16384
    assert copied_blocks([1, 16, 16, 16, 48, 4], [0, 2, 4, 1, 3, 5], item=2) == 16 ** 3 * 48  # more than one moved
    mb = next(m for m in micro_models(True) if m.key == "Transpose.blocks")
    assert mb.role == "loop" and loop_elements("Transpose.blocks") == 196_608

    def tr(shape, perm, name, dtype=1):
        m = mk([h.make_node("Transpose", ["x"], ["y"], perm=perm, name="t")], [vi("x", shape, dtype)],
               [vi("y", None, dtype)])
        return inspect_model(save(m, tmp_path, name))

    heads = tr([1, 12, 128, 64], [0, 2, 1, 3], "heads.onnx")
    assert heads.rows[0].workload.kernel == "Transpose.blocks" and heads.rows[0].workload.loop_items == 1536
    assert tr([1, 12, 16384, 4], [0, 2, 1, 3], "h16.onnx", 10).rows[0].workload.kernel == ""
    base = {**_cpu_avx2(), "memory": {"dram_gbs": 50, "onchip_mb": 64, "bandwidth_curve": {0.001: 50, 1000: 50}},
            "efficiency": {"movement": 1.0}, "op_efficiency": {"Transpose": 0.35}}
    with_runs = profile_from_dict({**base, "loop_ns": {"Transpose.blocks": 4.6}}, "x")
    got = analyze(heads, with_runs, Settings()).score.layers[0]
    assert got.time_s - got.t_launch == pytest.approx(786_432 / 50e9 + 1536 * 4.6e-9, rel=1e-3)
    old = analyze(heads, profile_from_dict(base, "x"), Settings()).score.layers[0]
    assert old.time_s - old.t_launch == pytest.approx(786_432 / 50e9 / 0.35, rel=1e-3)
    # a profile without the run figure names it as missing
    notes = " ".join(analyze(heads, profile_from_dict(base, "x"), Settings()).notes)
    assert "Transpose copying runs of elements (its fixed time per run)" in notes


def test_a_transpose_of_many_small_planes_pays_a_fixed_time_per_plane(tmp_path):
    """ONNX Runtime's CPU Transpose runs a permutation whose last axis moves with one other as one tiled 2-D
    transpose per plane (the leading axes left in place), each call split over its thread pool at a fixed cost:
    [1, 64, 3136] 43 us, [64, 64, 49] 99 us, [256, 64, 12] 244 us, [3136, 8, 12] 2,113 us on a 2-core EPYC VM
    (0.65-0.9 us a plane beyond the first), where the 2-D figure alone gave 48, 48, 48 and 69 us. Planes counted
    by hand: [3136, 8, 12] (0, 2, 1) 3,136; [64, 49, 3, 32] (0, 2, 3, 1) (Swin's key, merged [64, 49, 96]
    (0, 2, 1)) 64; NCHW -> NHWC of [4, 64, 56, 56] 4 (one each); [1, 64, 56, 56] 1 (no figure needed); runs
    kept (0, 2, 1, 3) and element loops none. With the figure (calibrate times those 3,136 planes) a layer of
    3,136 planes adds 3,135 x 0.7 us = 2,194.5 us to the 2-D figure's time."""
    from onnx import helper as h

    from dnnperf.measure.micro import loop_elements
    from dnnperf.ops.transpose import transposed_planes
    from helpers import model as mk
    from helpers import vi

    assert transposed_planes([3136, 8, 12], [0, 2, 1]) == 3136
    assert transposed_planes([64, 49, 3, 32], [0, 2, 3, 1]) == 64
    assert transposed_planes([4, 64, 56, 56], [0, 2, 3, 1]) == 4
    assert transposed_planes([1, 64, 56, 56], [0, 2, 3, 1]) == 1
    assert transposed_planes([1, 12, 128, 64], [0, 2, 1, 3]) == 0  # runs kept
    assert transposed_planes([16, 32, 49, 12], [2, 0, 3, 1]) == 0  # an element loop
    mb = next(m for m in micro_models(True) if m.key == "Transpose.planes")
    assert mb.role == "loop" and loop_elements("Transpose.planes") == 3136

    m = mk([h.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1], name="t")], [vi("x", [3136, 8, 12])],
           [vi("y", None)])
    insp = inspect_model(save(m, tmp_path, "planes.onnx"))
    assert insp.rows[0].workload.kernel == "Transpose.planes" and insp.rows[0].workload.loop_items == 3136
    base = {**_cpu_avx2(), "op_efficiency": {"Transpose": 0.35}}
    without = analyze(insp, profile_from_dict(base, "x"), Settings()).score.layers[0]
    with_planes = analyze(insp, profile_from_dict({**base, "loop_ns": {"Transpose.planes": 700.0}}, "x"),
                          Settings()).score.layers[0]
    assert with_planes.time_s - without.time_s == pytest.approx(3135 * 0.7e-6, rel=1e-6)


def test_a_2d_transpose_keeps_its_pace_per_element_past_the_cache(tmp_path):
    """ONNX Runtime's tiled 2-D transpose ([C, 3136] -> [3136, C]) ran at 0.2-0.5 ns an element on a 2-core
    EPYC VM from 0.8 to 25 MB read and written, no faster past the cache. On a profile whose bandwidth is
    100 GB/s up to 20 MB (cache 10 MB) and whose 2-D transpose figure is 0.4: [1, 256, 3136] moves
    6,422,528 B in cache, 6,422,528 / 100e9 / 0.4 = 160.6 us; [1, 512, 3136] moves 12,845,056 B, past the
    cache, at the same pace: 321.1 us (streaming at the curve's full speed, as an elementwise kernel does,
    gave it 128.5 us, less than the smaller one per element)."""
    from onnx import helper as h

    from helpers import model as mk
    from helpers import vi

    def tr(c, name):
        m = mk([h.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1], name="t")], [vi("x", [1, c, 3136])],
               [vi("y", None)])
        return inspect_model(save(m, tmp_path, name))

    hw = profile_from_dict({**_cpu_avx2(), "efficiency": {"movement": 1.0}, "op_efficiency": {"Transpose": 0.4},
                            "memory": {"dram_gbs": 50, "onchip_mb": 10,
                                       "bandwidth_curve": {0.001: 100, 20: 100, 1000: 50}}}, "x")
    small, large = (analyze(tr(c, f"t{c}.onnx"), hw, Settings()).score.layers[0] for c in (256, 512))
    assert small.time_s - small.t_launch == pytest.approx(6_422_528 / 100e9 / 0.4, rel=1e-3)
    assert large.time_s - large.t_launch == pytest.approx(12_845_056 / 100e9 / 0.4, rel=1e-3)


def test_the_element_loops_of_slice_gather_cumsum_and_pixel_shuffles(tmp_path):
    """ONNX Runtime walks these one step at a time (2-core EPYC VM, ns a step): a Slice stepping through
    the last axis 0.8 an output (one stepping an outer axis copies whole rows: 0.15), a Gather 2.6-3.4 a
    picked block of up to 16 elements (rows of 56: 0.08 an element), a CumSum along the last axis 1.6-3
    an element (along an outer one 0.11), DepthToSpace 0.6-2.6 and SpaceToDepth 0.25-0.33, ArgMax and
    ArgMin 0.24-0.48 an input element along any axis (a reduction: 0.05), an Expand broadcasting a last axis
    of one element 23-25 an input element, each filling a run (a broadcast of rows: 0.05-0.07 an output
    element). Each is named for its calibrated
    loop and, with a figure, takes its steps x that: 64 x 56 x 28 = 100,352 outputs x 0.8 ns = 80.3 us for
    every other column of a 64 x 56 x 56 map; 500 boxes of 4 coordinates x 2.6 ns = 1.3 us."""
    from onnx import helper as h

    from dnnperf.measure.calibrate import inspect_micro
    from dnnperf.measure.micro import loop_elements
    from helpers import ints
    from helpers import model as mk
    from helpers import vi

    def one(node, inits, name, shape=(1, 64, 56, 56)):
        m = mk([node], [vi("x", list(shape))], [vi("y", None)], inits)
        return inspect_model(save(m, tmp_path, name))

    def sl(axes, steps, starts, ends, name):
        node = h.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"], name="op")
        return one(node, [ints("s", starts), ints("e", ends), ints("a", axes), ints("t", steps)], name)

    kernel = lambda insp: insp.rows[0].workload.kernel  # noqa: E731
    assert kernel(sl([3], [2], [0], [56], "s1.onnx")) == "Slice.strided"
    assert kernel(sl([2, -1], [2, 2], [0, 0], [56, 56], "s2.onnx")) == "Slice.strided"
    assert kernel(sl([3], [-1], [-1], [-(2 ** 62)], "s3.onnx")) == "Slice.strided"  # a flip
    assert kernel(sl([2], [2], [0], [56], "s4.onnx")) == ""  # rows kept whole
    assert kernel(sl([3], [1], [1], [55], "s5.onnx")) == ""  # a crop
    run_time = mk([h.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"], name="op")],
                  [vi("x", [1, 64, 56, 56]), vi("t", [1], 7)], [vi("y", [1, 64, 56, 28])],
                  [ints("s", [0]), ints("e", [56]), ints("a", [3])])
    assert kernel(inspect_model(save(run_time, tmp_path, "s7.onnx"))) == ""  # steps known only at run time
    gather = lambda axis, name: one(h.make_node("Gather", ["x", "i"], ["y"], axis=axis, name="op"),  # noqa: E731
                                    [ints("i", list(range(0, 56, 2)))], name)
    assert kernel(gather(3, "g1.onnx")) == kernel(gather(-1, "g2.onnx")) == "Gather.blocks"
    assert kernel(gather(2, "g3.onnx")) == ""  # rows of 56: the bytes, not the loop
    boxes = one(h.make_node("Gather", ["x", "i"], ["y"], axis=0, name="op"), [ints("i", list(range(0, 1000, 2)))],
                "g4.onnx", shape=(1000, 4))  # 500 boxes of 4 coordinates: 500 steps
    assert kernel(boxes) == "Gather.blocks" and boxes.rows[0].workload.loop_items == 500
    hw_g = profile_from_dict({**_cpu_avx2(), "loop_ns": {"Gather.blocks": 2.6}}, "x")
    picked = analyze(boxes, hw_g, Settings()).score.layers[0]
    assert picked.time_s - picked.t_launch == pytest.approx(500 * 2.6e-9, rel=1e-3)
    cum = lambda axis, name: one(h.make_node("CumSum", ["x", "a"], ["y"], name="op"),  # noqa: E731
                                 [ints("a", axis)], name)
    assert kernel(cum(3, "c1.onnx")) == kernel(cum(-1, "c2.onnx")) == "CumSum.last"
    assert kernel(cum(1, "c3.onnx")) == ""
    d2s = one(h.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, name="op"), [], "d.onnx")
    s2d = one(h.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, name="op"), [], "u.onnx")
    assert kernel(d2s) == "DepthToSpace" and kernel(s2d) == "SpaceToDepth"
    for op in ("ArgMax", "ArgMin"):  # one loop over the inputs, along any axis
        assert kernel(one(h.make_node(op, ["x"], ["y"], axis=1, name="op"), [], f"{op}.onnx")) == "ArgMax"
    # F.normalize's norms broadcast back over 32 channels: one run filled per norm (192 x 3 x 49 = 28,224)
    norms = one(h.make_node("Expand", ["x", "s"], ["y"], name="op"), [ints("s", [192, 3, 49, 32])], "x1.onnx",
                shape=(192, 3, 49, 1))
    assert kernel(norms) == "Expand.fill" and norms.rows[0].workload.loop_items == 28_224
    rows = one(h.make_node("Expand", ["x", "s"], ["y"], name="op"), [ints("s", [1, 64, 56, 56])], "x2.onnx",
               shape=(1, 1, 56, 56))  # whole rows broadcast: the bytes, not a loop
    assert kernel(rows) == ""
    # one element per RoI over 256 x 7 x 7: 150 runs filled (a Faster R-CNN's RoI pool), then the bytes
    rois = one(h.make_node("Expand", ["x", "s"], ["y"], name="op"), [ints("s", [150, 256, 7, 7])], "x3.onnx",
               shape=(150, 1, 1, 1))
    assert kernel(rois) == "Expand.fill" and rois.rows[0].workload.loop_items == 150
    # the calibration's micro-benchmarks are these very cases, their work the outputs
    for key, n in (("Slice.strided", 100_352), ("Gather.blocks", 100_352), ("CumSum.last", 200_704),
                   ("DepthToSpace", 200_704), ("SpaceToDepth", 200_704), ("ArgMax", 200_704),
                   ("Expand.fill", 9_408)):
        mb = next(m for m in micro_models(True) if m.key == key)
        assert mb.role == "loop" and loop_elements(key) == n
        assert [r.workload.kernel for r in inspect_micro(mb.model).rows] == [key]
    hw = profile_from_dict({**_cpu_avx2(), "loop_ns": {"Slice.strided": 0.8}}, "x")
    got = analyze(sl([3], [2], [0], [56], "s6.onnx"), hw, Settings()).score.layers[0]
    assert got.time_s - got.t_launch == pytest.approx(100_352 * 0.8e-9, rel=1e-3)


def test_loop_ns_names_a_known_kernel_on_a_cpu():
    from dnnperf.errors import DnnperfError

    base = _cpu_avx2()
    with pytest.raises(DnnperfError, match=r"loop_ns.Resize.bicubic: use one of Resize.nearest, Resize.linear"):
        profile_from_dict({**base, "loop_ns": {"Resize.bicubic": 1.0}}, "x")
    with pytest.raises(DnnperfError, match=r"loop_ns: only for CPU runtimes"):
        profile_from_dict({**base, "kind": "gpu", "loop_ns": {"Resize.linear": 1.0}}, "x")


def test_a_calibrated_profile_without_the_resize_loop_says_so(tmp_path):
    """A profile calibrated before loop_ns was timed costs a Resize at its roofline: the report says so."""
    from onnx import helper as h

    from helpers import model as mk
    from helpers import numpy_scalar, vi

    m = mk([h.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest")], [vi("x", [1, 8, 16, 16])], [vi("y", None)],
           [numpy_scalar("sc", [1.0, 1.0, 2.0, 2.0])])
    insp = inspect_model(save(m, tmp_path))
    base = _cpu_avx2()
    curve = {**base, "memory": {**base["memory"], "bandwidth_curve": {1: 50, 10: 40}}}
    notes = analyze(insp, profile_from_dict(curve, "x"), Settings()).notes
    assert any("Resize.nearest (a loop over its outputs) (1 layer)" in n for n in notes), notes
    timed = analyze(insp, profile_from_dict({**curve, "loop_ns": {"Resize.nearest": 0.6}}, "x"), Settings()).notes
    assert not any("Resize" in n for n in timed), timed


def test_a_softmax_across_a_middle_axis_takes_its_calibrated_time_per_element(tmp_path):
    """YOLOv8's box head takes a softmax over 16 bins on axis 1 of [1, 16, 4, 2100]: ONNX Runtime ran it in
    1.03-1.07 ms (7.7-8.0 ns an element) where the same softmax over the last axis of [1, 4, 2100, 16]
    took 0.11 ms, and dnnperf said 37 us. calibrate times exactly that shape ('Softmax.axis', 134,400
    elements); such a softmax takes elements x that. By hand at 8 ns: 134,400 x 8 ns = 1.0752 ms; the
    same softmax over the last axis keeps its roofline; before opset 13 the input is coerced to 2-D at
    the axis (contiguous rows): no loop either."""
    from onnx import helper as h

    from dnnperf.measure.calibrate import loop_ns
    from dnnperf.measure.micro import loop_elements
    from helpers import model as mk
    from helpers import vi

    mb = next(m for m in micro_models(True) if m.key == "Softmax.axis")
    assert loop_elements("Softmax.axis") == 16 * 4 * 2100 and mb.model.graph.node[0].attribute[0].i == 1
    got = loop_ns([mb], {"dispatch_1": 4e-6, "loop_Softmax.axis": 1079.6e-6}, 0.4)
    assert got["Softmax.axis"] == pytest.approx((1079.6 - 4 + 0.4) / 134_400 * 1e3, rel=1e-3)
    base = _cpu_avx2()
    hw = profile_from_dict({**base, "loop_ns": {"Softmax.axis": 8.0}}, "x")

    def sm(shape, axis, opset=17):
        m = mk([h.make_node("Softmax", ["x"], ["y"], axis=axis)], [vi("x", shape)], [vi("y", None)], opset=opset)
        return analyze(inspect_model(save(m, tmp_path, f"s{axis}{opset}.onnx")), hw, Settings()).score.layers[0]

    c = sm([1, 16, 4, 2100], 1)
    assert c.layer.workload.kernel == "Softmax.axis"
    assert c.time_s - c.t_launch == pytest.approx(134_400 * 8e-9, rel=1e-3)
    last = sm([1, 4, 2100, 16], -1)
    assert last.layer.workload.kernel == "" and last.time_s < 0.2 * c.time_s
    assert sm([1, 16, 4, 2100], 1, opset=11).layer.workload.kernel == ""


def test_a_scatter_takes_its_calibrated_time_per_update(tmp_path):
    """ONNX Runtime's ScatterElements applies one update at a time: a GNN's scatter_add of 5,000 x 64 updates
    into a 1,000 x 64 table took 2.3-2.5 ms (7-8 ns an update) against 41 us estimated. Its work is its
    updates (parallel_work), calibrate times that shape ('ScatterElements', 320,000 updates), and the
    layer takes updates x that: by hand at 7.5 ns, 320,000 x 7.5 ns = 2.4 ms."""
    from onnx import helper as h

    from dnnperf.measure.calibrate import loop_ns
    from dnnperf.measure.micro import loop_elements
    from helpers import model as mk
    from helpers import vi

    mb = next(m for m in micro_models(True) if m.key == "ScatterElements")
    assert loop_elements("ScatterElements") == 320_000
    got = loop_ns([mb], {"dispatch_1": 4e-6, "loop_ScatterElements": 2404e-6}, 0.4)
    assert got["ScatterElements"] == pytest.approx((2404 - 4 + 0.4) / 320_000 * 1e3, rel=1e-3)
    m = mk([h.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction="add")],
           [vi("x", [1000, 64]), vi("i", [5000, 64], 7), vi("u", [5000, 64])], [vi("y", None)], opset=18)
    insp = inspect_model(save(m, tmp_path))
    w = insp.rows[0].workload
    assert (w.kernel, w.parallel_work) == ("ScatterElements", 320_000)
    base = _cpu_avx2()
    c = analyze(insp, profile_from_dict({**base, "loop_ns": {"ScatterElements": 7.5}}, "x"), Settings()).score.layers[0]
    assert c.time_s - c.t_launch == pytest.approx(320_000 * 7.5e-9, rel=1e-3)
    plain = analyze(insp, profile_from_dict(base, "x"), Settings()).score.layers[0]
    assert plain.time_s < 0.1 * c.time_s


def test_ort_uint8_concat_and_average_pool_take_their_calibrated_time_per_output(tmp_path):
    """ONNX Runtime's QLinearConcat and QLinearAveragePool (QOperator models) are loops over their
    outputs: 0.26-0.54 and 8.2-10 ns an output on a 2-core EPYC VM (DenseNet-121's: 387 us against 27.5
    estimated, 583 against 12.8). calibrate times 8 pieces of 32 x 28 x 28 (200,704 outputs) and a 2 x 2
    pool of 128 x 56 x 56 (100,352 outputs); a layer takes its outputs x that. By hand at 0.4 and 9 ns:
    a concat of two 64 x 14 x 14 pieces, 25,088 outputs, 10.04 us; a 2 x 2 pool of 64 x 28 x 28, 12,544
    outputs, 112.9 us."""
    import numpy as np
    from onnx import helper as h
    from onnx import numpy_helper

    from dnnperf.measure.calibrate import loop_ns
    from dnnperf.measure.micro import loop_elements
    from helpers import model as mk
    from helpers import vi

    assert (loop_elements("QLinearConcat"), loop_elements("QLinearAveragePool")) == (200_704, 100_352)
    table = [m for m in micro_models(True) if m.key in ("QLinearConcat", "QLinearAveragePool")]
    assert sorted(m.name for m in table) == ["loop_QLinearAveragePool", "loop_QLinearConcat"]
    got = loop_ns(table, {"dispatch_1": 4e-6, "loop_QLinearConcat": 84e-6, "loop_QLinearAveragePool": 830e-6}, 0.4)
    assert got["QLinearConcat"] == pytest.approx((84 - 4 + 0.4) / 200_704 * 1e3, rel=1e-3)
    sc = [numpy_helper.from_array(np.array(0.1, np.float32), "s"), numpy_helper.from_array(np.array(128, np.uint8), "z")]
    ms = "com.microsoft"
    m = mk([h.make_node("QLinearConcat", ["s", "z", "a", "s", "z", "b", "s", "z"], ["c"], domain=ms, axis=1),
            h.make_node("QLinearAveragePool", ["p", "s", "z", "s", "z"], ["q"], domain=ms, kernel_shape=[2, 2],
                        strides=[2, 2])],
           [vi("a", [1, 64, 14, 14], 2), vi("b", [1, 64, 14, 14], 2), vi("p", [1, 64, 28, 28], 2)],
           [vi("c", None), vi("q", None)], sc, extra_opsets=[(ms, 1)])
    insp = inspect_model(save(m, tmp_path))
    base = _cpu_avx2()
    rep = analyze(insp, profile_from_dict({**base, "loop_ns": {"QLinearConcat": 0.4, "QLinearAveragePool": 9.0}}, "x"),
                  Settings())
    t = {c.layer.op_type: c.time_s - c.t_launch for c in rep.score.layers}
    assert t["QLinearConcat"] == pytest.approx(25_088 * 0.4e-9, rel=1e-3)
    assert t["QLinearAveragePool"] == pytest.approx(12_544 * 9e-9, rel=1e-3)


def test_an_anchor_that_moved_far_marks_the_comparison_unreliable():
    """Speeds are calibrated time / time now per anchor. Within 25% either way the correction stands
    alone; past it (this VM's slow state: GEMM x1.00, memory x1.80) the note says the comparison is void."""
    from dnnperf.measure.validate import unsteady

    assert unsteady({"peak": 0.97, "dram": 1.05}) is None
    assert unsteady({"peak": 1.0, "dram": 1.24}) is None
    note = unsteady({"peak": 1.0, "dram": 1.80})
    assert note.startswith("UNRELIABLE") and "memory x1.80" in note and "compute" not in note
    assert "compute x0.70" in unsteady({"peak": 0.70, "dram": 1.0})
    # the state the two anchors miss: GEMM and DRAM as calibrated, the cached stream 1.4x slower
    assert unsteady({"peak": 1.0, "dram": 1.04, "onchip": 1.1}) is None
    note = unsteady({"peak": 1.0, "dram": 1.04, "onchip": 0.70})
    assert note.startswith("UNRELIABLE") and "cache x0.70" in note and "memory" not in note


def test_broadcast_spans_follow_the_runtime_broadcaster():
    """ONNX Runtime's broadcasting binary kernel calls its vector loop once per span: the innermost run of
    output axes over which neither input switches between broadcast and not (axes of extent 1 skipped);
    an input broadcast over the span is one value a call, the other a vector read every call. By hand: a
    96-wide bias on [4096, 96] is 4,096 spans reading both as vectors; [1, 64, 56, 56] x [1, 64, 1, 1] is
    64 spans of 56 x 56, the scale one value each; [64, 3, 64, 64] + [1, 3, 64, 64] 64 spans of 12,288;
    [3136, 64] x [3136, 1] 3,136 spans of 64; same shapes and a scalar are one span; [5, 1] + [1, 4] is 5
    spans of 4 (the first input one value each); [2, 1, 8] + [8] (an axis of extent 1 in between) 2 spans
    of 8."""
    from dnnperf.ops.elementwise import broadcast_spans

    assert broadcast_spans([(4096, 96), (96,)], (4096, 96)) == (4096, [True, True])
    assert broadcast_spans([(1, 64, 56, 56), (1, 64, 1, 1)], (1, 64, 56, 56)) == (64, [True, False])
    assert broadcast_spans([(64, 3, 64, 64), (1, 3, 64, 64)], (64, 3, 64, 64)) == (64, [True, True])
    assert broadcast_spans([(3136, 64), (3136, 1)], (3136, 64)) == (3136, [True, False])
    assert broadcast_spans([(5, 4), (5, 4)], (5, 4))[0] == 1
    assert broadcast_spans([(5, 4), ()], (5, 4)) == (1, [True, False])
    assert broadcast_spans([(5, 1), (1, 4)], (5, 4)) == (5, [False, True])
    assert broadcast_spans([(2, 1, 8), (8,)], (2, 1, 8)) == (2, [True, True])


def test_a_broadcasting_add_pays_its_spans_on_a_calibrated_cpu(tmp_path):
    """A bias of 96 added to [4096, 96] (393,216 elements) runs 4,096 spans: at loop_ns 'Broadcast.span'
    2.85 ns, 4,096 x 2.85 ns = 11.674 us on top of the same layer's time without the figure (ONNX Runtime
    on a 2-core EPYC VM: 38 us against 29 for the same elements in 768-wide spans), and it reads the bias
    again in every span after the first: (393,216 - 96) x 4 = 1,572,480 bytes, at the pace of the
    layer's own 1,572,864 + 384 + 1,572,864 = 3,146,112 bytes (in cache). An Add of two [4096, 96]
    tensors has one span and pays nothing; a profile without the figure says so on a model that has
    such an Add. calibrate's figure by hand: two bias adds of 393,216 elements, 16-wide spans 94 us and
    768-wide 26 us: 68 us over 24,576 - 512 = 24,064 spans = 2.8258 ns."""
    from onnx import helper as h

    from dnnperf.measure.calibrate import broadcast_span_ns
    from dnnperf.measure.micro import SPAN_ELEMENTS, SPAN_WIDTHS
    from helpers import model as mk
    from helpers import numpy_scalar, vi

    def add(second, name):
        ins = [vi("x", [4096, 96])] + ([vi("b", [4096, 96])] if second else [])
        inits = [] if second else [numpy_scalar("b", np.ones(96))]
        m = mk([h.make_node("Add", ["x", "b"], ["y"])], ins, [vi("y", None)], inits)
        return inspect_model(save(m, tmp_path, name))

    base = _cpu_avx2()
    curve = {**base, "memory": {**base["memory"], "bandwidth_curve": {1: 50, 10: 40}}}
    without, timed = profile_from_dict(curve, "x"), profile_from_dict({**curve, "loop_ns": {"Broadcast.span": 2.85}}, "x")
    bias = add(False, "bias.onnx")
    w = bias.rows[0].workload
    assert (w.kernel, w.loop_items, w.rereads) == ("Broadcast.span", 4096, 1_572_480)
    assert w.act_bytes_read + w.weight_bytes + w.bytes_written == 3_146_112
    l0 = analyze(bias, without, Settings()).score.layers[0]
    t1 = analyze(bias, timed, Settings()).score.layers[0].time_s
    paced = l0.time_s - l0.t_launch
    assert t1 - l0.time_s == pytest.approx(4096 * 2.85e-9 + paced * 1_572_480 / 3_146_112, rel=1e-6)
    assert any("broadcasting binary op (its spans' fixed time) (1 layer)" in n for n in analyze(bias, without, Settings()).notes)
    same = add(True, "same.onnx")
    assert (same.rows[0].workload.kernel, same.rows[0].workload.rereads) == ("", 0)
    assert analyze(same, timed, Settings()).score.layers[0].time_s == analyze(same, without, Settings()).score.layers[0].time_s
    assert (SPAN_ELEMENTS, SPAN_WIDTHS) == (393_216, (16, 768))
    assert broadcast_span_ns({"span_16": 94e-6, "span_768": 26e-6}) == pytest.approx(68e-6 / 24_064 * 1e9, rel=1e-3)
    assert broadcast_span_ns({"span_16": 94e-6}) is None
    assert broadcast_span_ns({"span_16": 25e-6, "span_768": 26e-6}) is None  # no cost measured: no figure


def test_a_broadcast_too_small_to_split_makes_its_spans_on_one_thread(tmp_path):
    """ONNX Runtime splits a broadcasting op's spans over its threads only when Eigen's cost model puts
    the loop at 210,000 cycles or more: (1 + 2 x 11/64 x 4) = 2.375 cycles a float32 element, so up to
    210,000 / 2.375 = 88,421 elements it runs on the calling thread, every span on it. The span figure
    is timed split over the profile's threads (393,216 elements): a [512, 20] minus a [20] row (10,240
    elements) pays 512 spans x 2.85 ns x the profile's threads; a [8192, 20] one (163,840 elements,
    split) 8,192 x 2.85 ns whatever the threads. (2-core EPYC VM, chains of 16: [512, 20] 6.7 us an op
    and [4096, 20] 48 us, where the split figure said 4.4 and 33.)"""
    from onnx import helper as h

    from dnnperf.efficiency import one_thread
    from helpers import model as mk
    from helpers import numpy_scalar, vi

    assert one_thread(88_421, "float32") and not one_thread(88_422, "float32")
    assert one_thread(124_444, "float16") and not one_thread(124_445, "float16")  # 1.6875 cycles an element

    def sub(rows):
        m = mk([h.make_node("Sub", ["x", "r"], ["y"])], [vi("x", [rows, 20])], [vi("y", None)],
               [numpy_scalar("r", np.ones(20))])
        return inspect_model(save(m, tmp_path, f"sub{rows}.onnx"))

    base = _cpu_avx2()
    curve = {**base, "memory": {**base["memory"], "bandwidth_curve": {1: 50, 10: 40}}}
    for threads in (2, 64):
        par = {**curve["parallelism"], "compute_units": threads}
        without = profile_from_dict({**curve, "parallelism": par}, "x")
        timed = profile_from_dict({**curve, "parallelism": par, "loop_ns": {"Broadcast.span": 2.85}}, "x")
        for rows, per_span in ((512, 2.85e-9 * threads), (8192, 2.85e-9)):
            insp = sub(rows)
            w = insp.rows[0].workload
            assert (w.kernel, w.loop_items) == ("Broadcast.span", rows)
            l0 = analyze(insp, without, Settings()).score.layers[0]
            t1 = analyze(insp, timed, Settings()).score.layers[0].time_s
            paced = l0.time_s - l0.t_launch
            moved = w.act_bytes_read + w.weight_bytes + w.bytes_written
            assert t1 - l0.time_s == pytest.approx(rows * per_span + paced * w.rereads / moved, rel=1e-6)


def test_matmul_nbits_takes_its_calibrated_time_per_weight(tmp_path):
    """ONNX Runtime's CPU MatMulNBits unpacks and scales every 4-bit weight on each call: in float32
    below accuracy_level 4, with byte products at 4 (a 2-core EPYC VM, one row: K = N = 2048 in 200 us
    and 66 us where the float32 peak's estimate said 85; the 1024 / 4096 squares 2.2x slow alike in
    float32). Its layer takes at least K x N x the calibrated ns a weight (``loop_ns``
    'MatMulNBits.fp32' / '.int8'); a bias Add fused to it keeps the figure; a profile without the
    figure says so. By hand: 2048 x 2048 x 0.05 ns = 209.7 us; x 0.016 ns = 67.1 us; calibrate times
    one row through 4 products of 4096 x 4096 (67,108,864 weights, 42 MB packed: past the cache)."""
    from onnx import helper as h
    from onnx import numpy_helper

    from dnnperf.measure.micro import loop_elements
    from helpers import model as mk
    from helpers import vi

    assert loop_elements("MatMulNBits.fp32") == loop_elements("MatMulNBits.int8") == 4 * 4096 * 4096

    def nbits(level, bias, bits=4):
        attrs = dict(K=2048, N=2048, bits=bits, block_size=32)
        if level is not None:
            attrs["accuracy_level"] = level
        nodes = [h.make_node("MatMulNBits", ["x", "qw", "sc"], ["m"], domain="com.microsoft", **attrs)]
        nodes += [h.make_node("Add", ["m", "b"], ["y"])] if bias else [h.make_node("Relu", ["m"], ["y"])]
        inits = [numpy_helper.from_array(np.zeros((2048, 64, 16), np.uint8), "qw"),
                 numpy_helper.from_array(np.ones(2048 * 64, np.float32), "sc"),
                 numpy_helper.from_array(np.ones(2048, np.float32), "b")]
        m = mk(nodes, [vi("x", [1, 2048])], [vi("y", None)], inits, opset=17)
        m.opset_import.append(h.make_opsetid("com.microsoft", 1))
        return inspect_model(save(m, tmp_path, f"nb{level}{bias}{bits}.onnx"))

    base = _cpu_avx2()
    curve = {**base, "memory": {**base["memory"], "bandwidth_curve": {1: 50, 10: 40}}}
    timed = profile_from_dict({**curve, "loop_ns": {"MatMulNBits.fp32": 0.05, "MatMulNBits.int8": 0.016}}, "x")
    for level, key, ns in ((None, "MatMulNBits.fp32", 0.05), (0, "MatMulNBits.fp32", 0.05), (4, "MatMulNBits.int8", 0.016)):
        insp = nbits(level, False)
        w = insp.rows[0].workload
        assert (w.kernel, w.loop_items) == (key, 2048 * 2048)
        got = analyze(insp, timed, Settings()).score.layers[0]
        assert got.time_s - got.t_launch == pytest.approx(2048 * 2048 * ns * 1e-9, rel=1e-6)
    fused = analyze(nbits(None, True), timed, Settings(fusion="typical")).score.layers[0]
    assert "+" in fused.layer.op_type and fused.time_s - fused.t_launch == pytest.approx(209.7152e-6, rel=1e-6)
    assert nbits(4, False, bits=8).rows[0].workload.kernel == ""  # 8-bit weights: not the calibrated kernel
    bare = analyze(nbits(4, False), profile_from_dict(curve, "x"), Settings())
    assert any("MatMulNBits.int8 (its time per weight) (1 layer)" in n for n in bare.notes), bare.notes


def test_prelu_takes_its_calibrated_time_per_element(tmp_path):
    """ONNX Runtime's PRelu loops over its outputs at ~2 ns an element whatever its slope's shape (2-core
    EPYC VM, 393,216 elements: slope per channel 397 us, per element 787, scalar 787; dnnperf said 24-155
    at the elementwise roofline). calibrate times a per-channel slope on [1, 64, 56, 56] (200,704
    outputs); at 2.0 ns a [1, 64, 56, 56] PRelu takes 200,704 x 2 ns = 401.4 us beyond its launch."""
    from onnx import helper as h

    from dnnperf.measure.micro import loop_elements
    from helpers import model as mk
    from helpers import numpy_scalar, vi

    mb = next(m for m in micro_models(True) if m.key == "PRelu")
    assert mb.role == "loop" and loop_elements("PRelu") == 200_704
    m = mk([h.make_node("PRelu", ["x", "s"], ["y"])], [vi("x", [1, 64, 56, 56])], [vi("y", None)],
           [numpy_scalar("s", np.full((64, 1, 1), 0.25))])
    insp = inspect_model(save(m, tmp_path))
    assert insp.rows[0].workload.kernel == "PRelu"
    got = analyze(insp, profile_from_dict({**_cpu_avx2(), "loop_ns": {"PRelu": 2.0}}, "x"), Settings()).score.layers[0]
    assert got.time_s - got.t_launch == pytest.approx(200_704 * 2.0e-9, rel=1e-3)


def test_the_shape_curves_and_the_weight_exposure_settle_together():
    """calibrate.settle_exposure by hand, with toy readings: a chain's figure read with exposure e
    known is 0.6 + 0.4 e (the more of its time the exposure explains, the less its efficiency must),
    and the cold chain gives e = 0.3 + 0.5 x that figure. Fixed point: e = 0.3 + 0.5 (0.6 + 0.4 e), so
    e = 0.75 and the figure 0.9. From e = 0.5: 0.7, 0.74, 0.748, 0.7496 (moves 0.2, 0.04, 0.008,
    0.0016: the fourth round is under 0.005 and the last)."""
    from types import SimpleNamespace

    from dnnperf.measure.calibrate import settle_exposure

    mb = SimpleNamespace(key="conv.k3:49")
    prof = {"conv_weight_exposure": 0.5, "shape_efficiency": {"conv.k3": {49: 0.5, 196: 0.9}}}
    seen = []

    def exposure_of(p):
        seen.append(p["shape_efficiency"]["conv.k3"][49])
        return 0.3 + 0.5 * p["shape_efficiency"]["conv.k3"][49]

    assert settle_exposure(prof, [mb], lambda e: e, lambda m, e: 0.6 + 0.4 * e, exposure_of) == 4
    assert seen == pytest.approx([0.8, 0.88, 0.896, 0.8992])
    assert prof["conv_weight_exposure"] == pytest.approx(0.7496)
    assert prof["shape_efficiency"]["conv.k3"] == {49: pytest.approx(0.8992), 196: 0.9}  # the other point untouched
    # an exposure that does not move stops after one round; a reading over 1 is capped as the first is
    prof = {"conv_weight_exposure": 0.5, "shape_efficiency": {"conv.k3": {49: 0.5}}}
    seen.clear()
    assert settle_exposure(prof, [mb], lambda e: e, lambda m, e: 1.3, lambda p: seen.append(1) or 0.5) == 1
    assert len(seen) == 1 and prof["shape_efficiency"]["conv.k3"][49] == 1.0


def test_the_runtimes_conversions_map_to_reorder_layers_by_direction_and_plain_shape():
    """ORT names its layout conversions "ReorderInput[_token_n]" / "ReorderOutput[_token_n]", after no
    node. They go to dnnperf's LayoutReorder layers ("reorder into X" / "reorder out of X", their
    output shape the plain NCHW tensor's): a conversion in by its input's shape, one out by its
    output's (the blocked side pads 104 channels to 112), the n-th kernel of a direction and shape in
    run order to the n-th such layer; a conversion folded into a Transpose (a layer with nodes) takes
    none, and a kernel whose shape no layer has stays unmatched."""
    from types import SimpleNamespace

    from dnnperf.scoring import Layer
    from dnnperf.workload import Workload

    w = Workload("movement")
    layers = [Layer("reorder out of a", "LayoutReorder", (), w, (1, 104, 28, 28)),
              Layer("reorder into b", "LayoutReorder", (), w, (1, 104, 28, 28)),
              Layer("reorder out of c", "LayoutReorder", (), w, (1, 104, 28, 28)),
              Layer("reorder out of t", "LayoutReorder", ("t",), w, (1, 28, 28, 104))]
    g = SimpleNamespace(nodes=[])
    kernels = {"ReorderOutput": ("ReorderOutput", 4.0), "ReorderInput": ("ReorderInput", 3.0),
               "ReorderOutput_token_2": ("ReorderOutput", 5.0), "ReorderInput_token_3": ("ReorderInput", 7.0),
               "ReorderOutput_token_4": ("ReorderOutput", 6.0)}
    plain, blocked = (1, 104, 28, 28), (1, 112, 28, 28)
    shapes = {"ReorderOutput": ((blocked,), (plain,)), "ReorderInput": ((plain,), (blocked,)),
              "ReorderOutput_token_2": ((blocked,), (plain,)), "ReorderInput_token_3": (((1, 104, 14, 14),), (blocked,)),
              "ReorderOutput_token_4": ((blocked,), (plain,))}
    measured, unmatched = map_kernels(kernels, g, layers, shapes)
    assert measured == {"reorder out of a": 4.0, "reorder into b": 3.0, "reorder out of c": 5.0}
    assert unmatched == {"ReorderInput_token_3": 7.0, "ReorderOutput_token_4": 6.0}


def test_profiled_kernels_are_taken_less_the_profilers_own_time(monkeypatch):
    """Each kernel's robust median (the faster half of its runs) less the profiler's time per kernel,
    never below a tenth of what was reported: reported 5, 6, 5, 9 us with 2.8 us of the profiler's ->
    median of (5, 5) = 5 -> 2.2; a kernel reported at 2 us -> 0.2 (a tenth), not -0.8; only the last
    ``runs`` of each kernel count (the warm-up's 50 us is dropped); the shapes come along."""
    from dnnperf.measure import ort as ort_mod

    a, b = ((1, 8, 7, 7),), ((1, 16, 7, 7),)
    events = [("conv", "Conv", 50.0, (a, b)), ("add", "Add", 50.0, (b, b))]  # warm-up
    for us in (5.0, 6.0, 5.0, 9.0):
        events += [("conv", "Conv", us, (a, b)), ("add", "Add", 2.0, (b, b))]
    monkeypatch.setattr(ort_mod, "_events", lambda *args: events)
    shapes, floored = {}, set()
    got = ort_mod.profiled_kernels(b"", {}, None, runs=4, warmup=1, inflation_us=2.8, shapes=shapes, floored=floored)
    assert list(got) == ["conv", "add"]
    assert got["conv"] == ("Conv", pytest.approx(2.2)) and got["add"] == ("Add", pytest.approx(0.2))
    assert shapes == {"conv": (a, b), "add": (b, b)}
    assert floored == {"add"}  # held at its tenth: validate says its figure is an assumption
    from dnnperf.measure.validate import floored_note

    note = floored_note(12, 2.8)
    assert note.startswith("12 kernels ran faster") and "2.8 us" in note and "an assumption" in note
    assert ort_mod.profiled_kernels(b"", {}, None, runs=4, warmup=1)["conv"] == ("Conv", 5.0)


def test_the_profilers_inflation_from_a_chain_of_tiny_kernels():
    """Per run of a 10-kernel chain, the mean of its kernels less the slowest tenth (one kernel):
    runs [3 x 9, 40] -> 3; [4 x 9, 4] -> 4; [3 x 10] -> 3; the faster half of the runs' means (3, 3)
    -> 3, less the kernels' unprofiled 0.25 us -> 2.75; never below zero; no complete run -> 0."""
    from dnnperf.measure.ort import inflation_from

    runs = [3.0] * 9 + [40.0] + [4.0] * 10 + [3.0] * 10
    assert inflation_from(runs, 0.25, chain=10) == pytest.approx(2.75)
    assert inflation_from(runs, 5.0, chain=10) == 0.0
    assert inflation_from([3.0] * 9, 0.25, chain=10) == 0.0


def test_the_conversions_figure_is_the_robust_median_of_rounds_spread_over_the_calibration(local_profile):
    """Each round's inner conversions give an efficiency (``internal_efficiency``); a probe's figure
    keeps the faster half of its rounds: two rounds at 20 + 30 us and one at 100 + 100 (a slow moment)
    -> the 20 + 30 figure; the spread is the fastest round's figure over the slowest's less 1."""
    from dnnperf import rules
    from dnnperf.measure.reorder import reorder_figures

    hw = profile_from_dict(local_profile[0], "x")
    probe = next(mb for mb in micro_models(True) if mb.role == "reorder" and mb.key == "3136")

    def profile(a, b):
        return {"ReorderInput": ("ReorderInput", 100.0), "c": ("Conv", 50.0), "ro": ("ReorderOutput", a),
                "mul": ("Mul", 10.0), "ri": ("ReorderInput", b), "y": ("Conv", 50.0),
                "ReorderOutput": ("ReorderOutput", 100.0)}

    ideal = 1_605_632 / rules.bandwidth_for(1_605_632, hw)
    fast, slow = min(1.0, ideal / 25e-6), min(1.0, ideal / 100e-6)
    inner, spread = reorder_figures([(probe, profile(20.0, 30.0)), (probe, profile(100.0, 100.0)),
                                     (probe, profile(20.0, 30.0))], hw)
    assert inner == {3136: pytest.approx(fast, rel=1e-3)}
    assert spread == pytest.approx(fast / slow - 1, rel=1e-9)
    measured = local_profile[0]["measured"]
    assert measured["profiler_inflation_us"] >= 0
    if "layout.reorder" in local_profile[0]["shape_efficiency"]:
        assert measured["layout_reorder_spread"] >= 0


def test_validate_sums_predicted_and_measured_by_kind_of_layer():
    """validate's by-op summary, by hand: two Conv layers (10 + 30 us predicted, 20 + 20 measured) -> 2
    layers, 40 / 40 us, 1.00x; one LayoutReorder (6 predicted, 2 measured) -> 3.00x; a Flatten nothing
    was measured for -> no ratio; the kinds that took longest first. The table and Markdown reports
    carry it as a table of its own."""
    from dnnperf.documents import Document
    from dnnperf.measure.validate import op_summary
    from dnnperf.render import render

    rows = [{"layer": "a", "op_type": "Conv", "predicted_s": 10e-6, "measured_s": 20e-6},
            {"layer": "r", "op_type": "LayoutReorder", "predicted_s": 6e-6, "measured_s": 2e-6},
            {"layer": "b", "op_type": "Conv", "predicted_s": 30e-6, "measured_s": 20e-6},
            {"layer": "f", "op_type": "Flatten", "predicted_s": 0.0, "measured_s": 0.0}]
    got = op_summary(rows)
    assert [r["op_type"] for r in got] == ["Conv", "LayoutReorder", "Flatten"]
    assert got[0] == {"op_type": "Conv", "layers": 2, "predicted_s": pytest.approx(40e-6),
                      "measured_s": pytest.approx(40e-6), "ratio": pytest.approx(1.0)}
    assert got[1]["ratio"] == pytest.approx(3.0) and got[2]["ratio"] is None
    doc = {"model": "m.onnx", "hardware": "local", "threads": 2, "predicted_s": 46e-6, "measured_s": 42e-6,
           "error": 0.095, "top5_inside_predicted_top10": True, "kernels_unmatched": {},
           "layers": [{**r, "error": None} for r in rows], "top_layers": [], "by_op": got}
    for fmt in ("table", "md"):
        text = render(Document("validate", doc), fmt)
        assert "By kind of layer" in text and "LayoutReorder" in text and "3.00x" in text


def test_the_predicted_top_k_counts_near_ties_in():
    """A layer is in the predicted top-k when its predicted time reaches the k-th largest within 1%:
    layers of one shape predict (near) one time, and which of them a measurement ranks first is noise.
    By hand: 3 predicted layers at 10, 9.95 (a tie with 10 within 1%) and 9 ms; the top-1 holds the
    first two; the top-2 the same two (9 is 10% short of 9.95); the top-3 all three; an empty table none."""
    from dnnperf.measure.validate import predicted_top

    pred = {"a": 10.0, "b": 9.95, "c": 9.0}
    assert sorted(predicted_top(pred, 1)) == ["a", "b"]
    assert sorted(predicted_top(pred, 2)) == ["a", "b"]
    assert sorted(predicted_top(pred, 3)) == ["a", "b", "c"]
    assert sorted(predicted_top(pred, 10)) == ["a", "b", "c"]
    assert predicted_top({}, 5) == []


def test_validate_measures_again_while_the_machine_is_out_of_its_calibrated_state(tmp_path, local_profile,
                                                                                   monkeypatch):
    """With steady_retries N, a measurement whose anchors moved past 25% since calibration (here the
    memory anchor at half its calibrated time: x2 faster, as the 2-core VM's slow state reads) is taken
    again after a wait, up to N times; the JSON counts the repeats and the last measurement is the one
    reported. Without retries, or when the machine stays out of its state, the UNRELIABLE note stays.
    Measurements faked: only the protocol is checked."""
    import importlib

    val = importlib.import_module("dnnperf.measure.validate")
    hw = load_profile(local_profile[1])
    anchors = val.anchors_of(hw, None)
    path = save(conv_model(8, 8, 8, 8, 3), tmp_path, "m.onnx")

    def run(states, retries):
        calls, waits = [], []

        def fake_measure(*a, **kw):
            memory = states[min(len(calls), len(states) - 1)]
            calls.append(memory)
            times = {"model": 1e-3 * (2 if memory != 1 else 1)}
            for mb, t in anchors:
                times[f"anchor:{mb.name}"] = t / (memory if mb.role == "dram" else 1.0)
            return times["model"], {}, {"times": times, "rounds": 3, "settled": True, "spread": {"model": 0.01},
                                        "profiler_inflation_us": 0.0}

        monkeypatch.setattr(val, "measure", fake_measure)
        monkeypatch.setattr(val.time, "sleep", waits.append)
        d = val.validate(path, hw, ShapeOverrides(), runs=3, strict=False, steady_retries=retries, wait_s=20.0)
        return d, calls, waits

    # slow state once, then back: measured twice, one 20 s wait, the second measurement reported
    d, calls, waits = run([2.0, 1.0], 3)
    assert calls == [2.0, 1.0] and waits == [20.0] and d["remeasured"] == 1
    assert d["measured_s"] == pytest.approx(1e-3) and d["speed_vs_calibration"]["memory"] == pytest.approx(1.0)
    assert not any(n.startswith("UNRELIABLE") for n in d["notes"])
    # no retries asked: one measurement, flagged
    d, calls, waits = run([2.0, 1.0], 0)
    assert calls == [2.0] and waits == [] and d["remeasured"] == 0
    assert any(n.startswith("UNRELIABLE") for n in d["notes"])
    # still out of its state after every retry: 1 + 2 measurements, two waits, still flagged
    d, calls, waits = run([2.0], 2)
    assert calls == [2.0, 2.0, 2.0] and waits == [20.0, 20.0] and d["remeasured"] == 2
    assert any(n.startswith("UNRELIABLE") for n in d["notes"])
    # the command retries twice unless told otherwise: a user who runs `dnnperf validate` in a moment the
    # machine left its calibrated state gets a measurement taken again, not a miss
    import json

    from typer.testing import CliRunner

    from dnnperf.cli import app

    calls = []
    monkeypatch.setattr(val, "measure", lambda *a, **kw: (calls.append(1), run_measure(*a, **kw))[1])
    run_measure = _state_measure(anchors, [2.0])
    r = CliRunner().invoke(app, ["validate", path, "--hw", local_profile[1], "--runs", "3", "-q", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert len(calls) == 3 and json.loads(r.stdout)["remeasured"] == 2
    calls.clear()
    r = CliRunner().invoke(app, ["validate", path, "--hw", local_profile[1], "--runs", "3", "-q", "-f", "json",
                                 "--retry-unsteady", "0"])
    assert r.exit_code == 0 and len(calls) == 1


def _state_measure(anchors, states):
    """A fake ``validate.measure`` whose memory anchor reads each of ``states`` in turn (x that much
    faster than calibrated; the last one repeats): the model then measures that many ms. A state
    "noisy" raises TooNoisy (a strict run that did not settle), "unsettled" returns 1 ms unsettled."""
    from dnnperf.errors import TooNoisy

    seen = []

    def fake(*a, **kw):
        state = states[min(len(seen), len(states) - 1)]
        seen.append(state)
        if state == "noisy":
            raise TooNoisy("measurements did not settle in 10 rounds")
        memory = 1.0 if state == "unsettled" else state
        times = {"model": 1e-3 * memory}
        for mb, t in anchors:
            times[f"anchor:{mb.name}"] = t / (memory if mb.role == "dram" else 1.0)
        return times["model"], {}, {"times": times, "rounds": 3, "settled": state != "unsettled",
                                    "spread": {"model": 0.01}, "profiler_inflation_us": 0.0}
    return fake


def test_validate_retries_a_smaller_move_than_it_marks_and_keeps_the_steadiest_measurement(tmp_path, local_profile,
                                                                                           monkeypatch):
    """A memory anchor 15% off its calibrated time (rows of this VM that moved 15-18% missed by 13-33%)
    is measured again, though only a 25% move is marked UNRELIABLE; so are timings that did not settle,
    and a strict run that raised "too noisy" once. When no retry gets back within 10%, the measurement
    whose anchors sit nearest the calibration's is compared (here the 1.15 one of 2.0, 1.15, 1.5), not
    the last. Measurements faked: only the protocol is checked."""
    import importlib

    val = importlib.import_module("dnnperf.measure.validate")
    hw = load_profile(local_profile[1])
    anchors = val.anchors_of(hw, None)
    path = save(conv_model(8, 8, 8, 8, 3), tmp_path, "m.onnx")
    waits = []
    monkeypatch.setattr(val.time, "sleep", waits.append)

    def run(states, retries, strict=False):
        fake = _state_measure(anchors, states)
        monkeypatch.setattr(val, "measure", fake)
        return val.validate(path, hw, ShapeOverrides(), runs=3, strict=strict, steady_retries=retries)

    d = run([1.15, 1.0], 2)
    assert d["remeasured"] == 1 and d["measured_s"] == pytest.approx(1e-3)
    d = run([1.05], 2)  # within 10%: measured once
    assert d["remeasured"] == 0 and d["measured_s"] == pytest.approx(1.05e-3)
    d = run([2.0, 1.15, 1.5], 2)
    assert d["remeasured"] == 2 and d["measured_s"] == pytest.approx(1.15e-3)
    assert d["speed_vs_calibration"]["memory"] == pytest.approx(1.15, rel=1e-3)
    assert not any(n.startswith("UNRELIABLE") for n in d["notes"])
    d = run(["unsettled", 1.0], 2)
    assert d["remeasured"] == 1 and d["settled"] is True
    d = run(["noisy", 1.0], 2, strict=True)
    assert d["remeasured"] == 1 and d["settled"] is True
    with pytest.raises(Exception, match="did not settle"):
        run(["noisy"], 2, strict=True)


def test_the_image_kernel_points_leave_out_the_first_touches_the_network_stem_is_charged(tmp_path):
    """calibrate reads the image kernel's pace from copies of a stem that each write a buffer of their
    own on every run (3 -> 64 7 x 7 on 224 x 224: 8 x 3,211,264 bytes), cold past the cache as a network's
    first layer is; the time dnnperf's first-touch rule gives them (the image, 602,112 bytes, to the first
    copy, each output to its copy: 26,292,224 bytes from DRAM instead of the curve's figure for one copy's
    3,813,376-byte working set, the reach far past a 1 MB cache) is taken off before the pace is read, so
    a network's stem is not charged it twice. Profile: 100 GB/s up to 1 MB, 20 GB/s from 4 MB and DRAM."""
    from dnnperf.measure.calibrate import micro_costs
    from dnnperf.measure.micro import micro_models
    from dnnperf.rules import bandwidth_for

    def micro_cold_s(m, hw):  # the first-touch seconds micro_costs takes off an image-kernel point
        return micro_costs(m, hw, image=True)[2]

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["memory"] = {"dram_gbs": 20, "onchip_mb": 1, "bandwidth_curve": {0.5: 100, 1: 100, 4: 20}}
    hw = profile_from_dict(d, "x")
    stem = next(mb for mb in micro_models(quick=True) if mb.key == "conv.rgb:9408")
    near = bandwidth_for(3_813_376, hw)
    assert near > 20e9
    assert micro_cold_s(stem.model, hw) == pytest.approx((602_112 + 8 * 3_211_264) * (1 / 20e9 - 1 / near), rel=1e-9)
    assert micro_cold_s(stem.model, load_profile("cpu-avx2")) == 0.0  # no bandwidth curve: no rule


def test_a_model_onnx_runtime_refuses_to_run_is_one_line_on_stderr(tmp_path):
    """validate on a Conv whose bias has 3 values for 8 output channels: ONNX Runtime refuses to run it,
    and stderr holds dnnperf's one line only (its own log line, written by its C++ logger straight to the
    process's stderr, came first before: the runtime's logger is set to fatal messages only)."""
    modelled_ort()  # (1.23 and 1.28 run such a Conv)
    import subprocess
    import sys

    from onnx import helper

    from helpers import model, vi, weight

    m = model([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c")], [vi("x", [1, 4, 16, 16])],
              [vi("y", None)], [weight("w", [8, 4, 3, 3]), weight("b", [3])])
    p = save(m, tmp_path)
    r = subprocess.run([sys.executable, "-m", "dnnperf", "validate", p, "--hw", "cpu-avx512", "--runs", "2",
                        "--no-drift", "--accept-noisy"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("dnnperf: error: ONNX Runtime could not run the model") and r.stderr.count("\n") == 1, r.stderr
    assert r.stdout == ""


def test_kernels_a_function_op_was_expanded_into_are_its_layers(tmp_path):
    """ONNX Runtime's CPU provider has no HardSwish kernel: it runs the op's function body, a HardSigmoid and a Mul it
    names '<Op>_<n>' in creation order (its profiler, checked: HardSigmoid_4, Mul_5, HardSigmoid_6, Mul_7 for two
    HardSwish). validate gave those layers 0 us and left the kernels unmatched; each layer now takes the next such
    pair, in graph order (2 + 1 and 4 + 3 us here), and a lone Mul of another name stays unmatched."""
    from onnx import helper

    from dnnperf.measure.validate import map_kernels

    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r0"), helper.make_node("HardSwish", ["a"], ["b"], name="hs1"),
             helper.make_node("HardSwish", ["b"], ["c"], name="hs2"), helper.make_node("Neg", ["c"], ["y"], name="n")]
    m = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [1, 64, 56, 56])],
                                            [helper.make_tensor_value_info("y", 1, None)]),
                          opset_imports=[helper.make_opsetid("", 17)])
    insp = inspect_model(save(m, tmp_path))
    layers = [c.layer for c in analyze(insp, load_profile("cpu-avx2"), Settings()).score.layers]
    kernels = {"r0": ("Relu", 5.0), "HardSigmoid_4": ("HardSigmoid", 2.0), "Mul_5": ("Mul", 1.0),
               "HardSigmoid_6": ("HardSigmoid", 4.0), "Mul_7": ("Mul", 3.0), "n": ("Neg", 1.0), "Mul_99": ("Mul", 9.0)}
    measured, unmatched = map_kernels(kernels, insp.graph, layers)
    assert measured["hs1"] == 3.0 and measured["hs2"] == 7.0 and measured["r0"] == 5.0
    assert unmatched == {"Mul_99": 9.0}


def test_a_cpu_runtimes_call_cost_is_read_off_the_call_micro_benchmarks_and_added_once_per_inference(tmp_path):
    """One call of ONNX Runtime from Python (ORT 1.32, a 2-core EPYC VM): a one-op model took 3.3 us, one with 8
    inputs 0.6 us more per further input, one with 8 outputs 0.33 more per further output besides its ops'
    dispatch (0.19). calibrate reads the figures off the call micro-benchmarks (by hand here: 3.4 us for the
    one-op model with a 0.2 us dispatch, 31 further inputs at 0.6, 31 further outputs at 0.4 + 0.2); the
    estimate adds fixed + per input and output beyond the first once per inference, a launch overhead of no
    layer (totals' call_s): 3 inputs and 2 outputs at {3, 0.6, 0.4} = 3 + 1.2 + 0.4 = 4.6 us."""
    from onnx import helper as h

    from dnnperf.measure.calibrate import call_us
    from dnnperf.measure.micro import CALL_TENSORS
    from dnnperf.measure.validate import at_current_speed
    from helpers import model as mk
    from helpers import vi

    assert CALL_TENSORS == 32
    times = {"dispatch_1": 3.4e-6, "call_inputs": (3.4 + 31 * 0.6) * 1e-6, "call_outputs": (3.4 + 31 * 0.6) * 1e-6}
    got = call_us(times, 0.2)
    assert got == pytest.approx({"fixed": 3.2, "per_input": 0.6, "per_output": 0.4}, rel=1e-3)
    nodes = [h.make_node("Sum", ["a", "b", "c"], ["s"], name="sum"), h.make_node("Neg", ["s"], ["y"], name="neg")]
    m = mk(nodes, [vi(n, [1, 16]) for n in "abc"], [vi("s", None), vi("y", None)])
    insp = inspect_model(save(m, tmp_path))
    with_call = profile_from_dict({**_cpu_avx2(), "call_us": {"fixed": 3, "per_input": 0.6, "per_output": 0.4}}, "c")
    sc = analyze(insp, with_call, Settings(), with_fixes=False).score
    assert sc.totals["call_s"] == pytest.approx(4.6e-6)
    assert sc.totals["latency_s"] == pytest.approx(sum(c.time_s for c in sc.layers) + 4.6e-6)
    plain = analyze(insp, profile_from_dict(_cpu_avx2(), "p"), Settings(), with_fixes=False).score
    assert plain.totals["call_s"] == 0 and sc.losses["launch_overhead"] == pytest.approx(
        plain.losses["launch_overhead"] + 4.6e-6)
    # a machine twice as fast as when calibrated calls twice as fast
    assert at_current_speed(with_call, 2.0, 1.0).call_us == {"fixed": 1.5, "per_input": 0.3, "per_output": 0.2}


@pytest.mark.parametrize("bad, why", [({"fixed": -1}, "fixed"), ({"each": 1}, "use one of"), ("3", "call_us")])
def test_a_malformed_call_cost_is_refused(bad, why):
    from dnnperf.errors import DnnperfError

    with pytest.raises(DnnperfError, match=why):
        profile_from_dict({**_cpu_avx2(), "call_us": bad}, "x")


def test_a_calibrated_profile_without_the_call_cost_says_so(tmp_path):
    """A profile calibrated before the call was timed adds none of it: the report says so; one with the
    figure, or a spec-sheet profile (no calibration), says nothing of it."""
    from helpers import chain_1x1

    insp = inspect_model(save(chain_1x1(8, 4, 4, 2), tmp_path))
    base = _cpu_avx2()
    curve = {**base, "memory": {**base["memory"], "bandwidth_curve": {1: 50, 10: 40}}}
    said = "call from Python (left out of the estimate)"
    assert any(said in n for n in analyze(insp, profile_from_dict(curve, "x"), Settings()).notes)
    timed = {**curve, "call_us": {"fixed": 3.0, "per_input": 0.7, "per_output": 0.4}}
    assert not any("call from Python" in n for n in analyze(insp, profile_from_dict(timed, "x"), Settings()).notes)
    assert not any("call from Python" in n for n in analyze(insp, profile_from_dict(base, "x"), Settings()).notes)


def test_kernels_a_16bit_softmax_was_inlined_into_are_its_layer(tmp_path):
    """A fp16 Softmax on ONNX Runtime's CPU provider is its function body (ReduceMax, Sub, Exp, ReduceSum, Div),
    a body that depends on the node's axis, so onnx's schema gives none to match: its profiler's ReduceMax_139,
    Sub_140, Exp_141, ReduceSum_142 and Div_143 (a decoder's, checked) were left unmatched and the layer read 0 us.
    They are the layer's now (1 + 2 + 3 + 4 + 5 = 15 us here)."""
    from onnx import TensorProto, helper

    from dnnperf.measure.validate import map_kernels

    nodes = [helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=-1)]
    m = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16,
                                                                                        [1, 4, 1, 129])],
                                            [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)]),
                          opset_imports=[helper.make_opsetid("", 17)])
    insp = inspect_model(save(m, tmp_path))
    layers = [c.layer for c in analyze(insp, load_profile("cpu-avx2"), Settings()).score.layers]
    kernels = {f"{op}_{139 + i}": (op, float(i + 1)) for i, op in enumerate(("ReduceMax", "Sub", "Exp", "ReduceSum",
                                                                              "Div"))}
    measured, unmatched = map_kernels(kernels, insp.graph, layers)
    assert measured["sm"] == 15.0 and not unmatched
