"""Models quantized in QDQ form: their matrix layers cost as the int8 (fp8, int4) kernels that
runtimes run, by hand."""

from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from dnnperf.api import analyze, inspect_model
from dnnperf.hardware import load_profile
from dnnperf.scoring import Settings
from helpers import ROOT, model, modelled_ort, save, vi

C, HW, K = 64, 28, 3


def qdq_conv_model(weight_dtype=np.int8, act_dtype=np.int8, relu_q=True, extra_consumer=False, relu=True):
    """x -> Q -> DQ -> Conv(DQ(int8 weights), bias) -> Relu [-> Q -> DQ -> Add]; ``relu=False``: no Relu
    (ONNX Runtime's quantizer folds it into the Conv's QuantizeLinear)."""
    s = numpy_helper.from_array(np.array(0.05, np.float32), "s")
    za = numpy_helper.from_array(np.array(0, act_dtype), "za")
    zw = numpy_helper.from_array(np.array(0, weight_dtype), "zw")
    w = helper.make_tensor("w", T.INT4 if weight_dtype is None else numpy_helper.from_array(
        np.zeros(1, weight_dtype)).data_type, [C, C, K, K], np.zeros(C * C * K * K, np.int64).tolist())
    b = numpy_helper.from_array(np.zeros(C, np.float32), "b")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "za"], ["xq"], name="q_in"),
             helper.make_node("DequantizeLinear", ["xq", "s", "za"], ["xd"], name="dq_in"),
             helper.make_node("DequantizeLinear", ["w", "s", "zw"], ["wd"], name="dq_w"),
             helper.make_node("Conv", ["xd", "wd", "b"], ["c" if relu else "r"], name="conv", pads=[1, 1, 1, 1])]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"], name="relu"))
    out = "r"
    if relu_q:
        nodes += [helper.make_node("QuantizeLinear", ["r", "s", "za"], ["rq"], name="q_out"),
                  helper.make_node("DequantizeLinear", ["rq", "s", "za"], ["rd"], name="dq_out")]
        out = "rd"
    if extra_consumer:  # the input's DequantizeLinear also feeds a float Add: it stays a kernel
        nodes.append(helper.make_node("Add", ["xd", out], ["y"], name="add"))
        out = "y"
    return model(nodes, [vi("x", [1, C, HW, HW])], [vi(out, None)], [s, za, zw, w, b], opset=21)


def rows_of(tmp_path, m, name="q.onnx"):
    insp = inspect_model(save(m, tmp_path, name))
    return insp, {r.node.name: r for r in insp.rows}


def test_a_qdq_convolution_is_costed_in_int8_by_hand(tmp_path):
    insp, rows = rows_of(tmp_path, qdq_conv_model())
    w = rows["conv"].workload
    assert w.dtype == "int8" and w.macs == C * C * K * K * HW * HW
    # reads the int8 activations (1 byte each) and int8 weights, the float bias as it is; writes fp32
    assert w.act_bytes_read == C * HW * HW
    assert w.weight_bytes == C * C * K * K + 4 * C
    assert w.bytes_written == 4 * C * HW * HW
    # the DequantizeLinear it reads through launches nothing; the weights' is folded at load time
    assert rows["dq_in"].workload.family == "view" and rows["dq_in"].workload.launches == 0
    assert rows["dq_w"].workload.family == "shape"
    # the QuantizeLinear kernels stay (its input's, and the one after the Relu)
    assert rows["q_in"].workload.family == "cast" and rows["q_out"].workload.family == "cast"
    assert any(x.startswith("QDQ form: 1 matrix layer(s) costed in int8") for x in insp.warnings)
    rep = analyze(insp, load_profile("t4"), Settings())
    conv = next(c for c in rep.score.layers if c.layer.name == "conv")
    assert conv.precision == "int8" and conv.unit == "tensor_cores"
    assert not any("fp32 -> fp16" in f["text"] for f in conv.fixes)


def test_typical_fusion_takes_the_requantization_into_the_layer(tmp_path):
    insp, _ = rows_of(tmp_path, qdq_conv_model())
    rep = analyze(insp, load_profile("t4"), Settings(fusion="typical"))
    names = [c.layer.name for c in rep.score.layers]
    assert "conv+relu+q_out" in names
    fused = next(c for c in rep.score.layers if c.layer.name == "conv+relu+q_out").layer.workload
    # one kernel: int8 in, int8 out (the Relu and the Q in its epilogue)
    assert fused.act_bytes_read == C * HW * HW and fused.bytes_written == C * HW * HW


def test_a_what_if_precision_applies_on_top(tmp_path):
    insp, _ = rows_of(tmp_path, qdq_conv_model())
    rep = analyze(insp, load_profile("t4"), Settings(precision="fp16"))
    conv = next(c for c in rep.score.layers if c.layer.name == "conv")
    assert conv.precision == "fp16"
    assert conv.layer.workload.act_bytes_read == 2 * C * HW * HW  # 8 -> 16 bits


def test_mixed_widths_run_at_the_wider_and_read_each_at_its_own(tmp_path):
    m = qdq_conv_model(weight_dtype=None)  # int4 weights, int8 activations
    _, rows = rows_of(tmp_path, m)
    w = rows["conv"].workload
    assert w.dtype == "int8" and w.weight_bytes == C * C * K * K // 2 + 4 * C


def test_a_dequantize_with_a_float_consumer_stays_a_kernel(tmp_path):
    _, rows = rows_of(tmp_path, qdq_conv_model(extra_consumer=True))
    assert rows["conv"].workload.dtype == "int8"
    assert rows["dq_in"].workload.family == "cast" and rows["dq_in"].workload.launches == 1


def test_a_dequantize_kernel_takes_its_calibrated_pace(tmp_path):
    """A calibrated CPU profile times DequantizeLinear on its own (``op_efficiency``): ONNX Runtime widens
    8-bit tensors at 0.08-0.11 ns an element on a 2-core EPYC VM, about a third of the pace of a stream of
    its bytes. By hand: the input's [1, 64, 28, 28] int8 tensor (50,176 bytes) read and its float
    (200,704 bytes) written at the cache's 100 GB/s, over 0.25, plus the profile's 2 us launch:
    250,880 / 100e9 / 0.25 + 2e-6 = 12.04 us; without the figure it streams at the elementwise pace."""
    import yaml

    from dnnperf.hardware import profile_from_dict

    insp, rows = rows_of(tmp_path, qdq_conv_model(extra_consumer=True))
    w = rows["dq_in"].workload
    assert (w.act_bytes_read, w.bytes_written) == (50_176, 200_704)
    d = yaml.safe_load(open(os.path.join(ROOT, "profiles", "cpu-avx2.yaml"), encoding="utf-8"))
    d["memory"] = {"dram_gbs": 20, "onchip_mb": 16, "bandwidth_curve": {0.5: 100, 1: 100, 16: 100, 64: 20}}

    def dq_time(op_eff):
        rep = analyze(insp, profile_from_dict({**d, "op_efficiency": op_eff}, "x"), Settings(), with_fixes=False)
        # a profile calibrated before the op was timed says its layers took a general figure: the three that
        # run (the input's, the output's, and the weights': with a Relu before its QuantizeLinear, ONNX Runtime's
        # CPU provider runs the convolution in float, dequantizing its weights at every inference)
        said = any("no calibrated figure for ONNX Runtime's DequantizeLinear (3 layers)" in n for n in rep.notes)
        assert said == (not op_eff)
        return next(c for c in rep.score.layers if c.layer.name == "dq_in").time_s

    paced = dq_time({"DequantizeLinear": 0.25})
    assert paced == pytest.approx((50_176 + 200_704 + w.weight_bytes) / 100e9 / 0.25 + 2e-6, rel=1e-3)
    assert dq_time({}) < 0.5 * paced


def test_a_quantized_attention_product_reads_both_operands_quantized(tmp_path):
    s = numpy_helper.from_array(np.array(0.1, np.float32), "s")
    z = numpy_helper.from_array(np.array(0, np.int8), "z")
    nodes = [helper.make_node("QuantizeLinear", ["a", "s", "z"], ["aq"]),
             helper.make_node("DequantizeLinear", ["aq", "s", "z"], ["ad"]),
             helper.make_node("QuantizeLinear", ["b", "s", "z"], ["bq"]),
             helper.make_node("DequantizeLinear", ["bq", "s", "z"], ["bd"]),
             helper.make_node("MatMul", ["ad", "bd"], ["y"], name="scores")]
    m = model(nodes, [vi("a", [1, 4, 128, 64]), vi("b", [1, 4, 64, 128])], [vi("y", None)], [s, z], opset=21)
    _, rows = rows_of(tmp_path, m)
    w = rows["scores"].workload
    assert w.dtype == "int8" and w.weight_bytes == 0 and w.act_bytes_read == 2 * 4 * 128 * 64
    assert w.macs == 4 * 128 * 128 * 64


@pytest.mark.parametrize("only", ["weights", "activations"])
def test_half_quantized_layers_keep_their_float_type(tmp_path, only):
    """Weight-only (or activation-only) dequantization is not a QDQ layer: nothing runs in int8."""
    m = qdq_conv_model(relu_q=False)
    if only == "weights":  # the data input no longer comes through a DequantizeLinear
        m.graph.node[3].input[0] = "x"
    else:
        w = helper.make_tensor("wf", T.FLOAT, [C, C, K, K], np.zeros(C * C * K * K, np.float32).tolist())
        m.graph.initializer.append(w)
        m.graph.node[3].input[1] = "wf"
    _, rows = rows_of(tmp_path, m)
    assert rows["conv"].workload.dtype == "float32"


def test_a_layer_requantized_directly_writes_int8_and_its_quantize_launches_nothing(tmp_path):
    """Conv -> Q (no activation between): the kernel requantizes its own output."""
    m = qdq_conv_model()
    m.graph.node.remove(m.graph.node[4])  # the Relu
    m.graph.node[4].input[0] = "c"  # q_out reads the convolution
    _, rows = rows_of(tmp_path, m)
    assert rows["conv"].workload.bytes_written == C * HW * HW
    assert rows["q_out"].workload.family == "view" and rows["q_out"].workload.launches == 0


def test_pooling_and_concatenation_between_qdq_pairs_keep_their_float_cost(tmp_path):
    """DQ -> MaxPool -> Q and (DQ, DQ) -> Concat -> Q, as ONNX Runtime's quantizer writes them: only
    products run quantized (ONNX Runtime 1.32 on CPU ran such a MaxPool 10-19x slower than the float
    one, its DequantizeLinear as a kernel): float bytes, and every Q/DQ a kernel."""
    s = numpy_helper.from_array(np.array(0.1, np.float32), "s")
    z = numpy_helper.from_array(np.array(0, np.uint8), "z")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q0"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq0"),
             helper.make_node("MaxPool", ["xd"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("QuantizeLinear", ["p", "s", "z"], ["pq"], name="q1"),
             helper.make_node("DequantizeLinear", ["pq", "s", "z"], ["pd"], name="dq1"),
             helper.make_node("DequantizeLinear", ["pq", "s", "z"], ["pd2"], name="dq2"),
             helper.make_node("Concat", ["pd", "pd2"], ["c"], name="cat", axis=1),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"], name="q2"),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["y"], name="dq_out")]
    m = model(nodes, [vi("x", [1, 16, 32, 32])], [vi("y", None)], [s, z], opset=21)
    insp, rows = rows_of(tmp_path, m)
    pool, cat = rows["pool"].workload, rows["cat"].workload
    assert pool.dtype == "float32" and pool.act_bytes_read == 4 * 16 * 32 * 32 and pool.bytes_written == 4 * 16 * 16 * 16
    assert cat.act_bytes_read == 4 * 2 * 16 * 16 * 16
    for n in ("q0", "dq0", "q1", "dq1", "dq2", "q2", "dq_out"):
        assert rows[n].workload.launches == 1, n
    assert not any(w.startswith("QDQ form") for w in insp.warnings)


def test_typical_fusion_of_a_requantized_layer_keeps_its_bytes(tmp_path):
    """Conv -> Q as ONNX Runtime's quantizer writes it (the Relu folded into the range): the Q launches
    nothing, so fusion has nothing to take into the layer; taking the free Q in anyway subtracted the
    float intermediate twice and a fused layer moved -9,634,950 bytes."""
    m = qdq_conv_model()
    m.graph.node.remove(m.graph.node[4])  # the Relu
    m.graph.node[4].input[0] = "c"
    insp = inspect_model(save(m, tmp_path, "cq.onnx"))
    for fusion in ("none", "typical"):
        rep = analyze(insp, load_profile("t4"), Settings(fusion=fusion))
        conv = next(c for c in rep.score.layers if c.layer.name.startswith("conv"))
        w = conv.layer.workload
        assert (conv.layer.name, w.act_bytes_read, w.bytes_written) == ("conv", C * HW * HW, C * HW * HW), fusion
        assert all(c.layer.workload.bytes_total >= 0 for c in rep.score.layers)


def test_a_cpu_estimate_of_qdq_layers_says_what_its_int8_rate_is(tmp_path):
    # the convolution requantized directly (ONNX Runtime's CPU provider takes no other into QLinearConv)
    insp, _ = rows_of(tmp_path, qdq_conv_model(relu=False))
    for fusion in ("none", "typical"):  # a fused layer (Conv+Q) is one QDQ layer too
        cpu = analyze(insp, load_profile("cpu-avx2"), Settings(fusion=fusion))
        assert any("1 QDQ layer(s) costed in int8" in n and "VNNI" in n for n in cpu.notes), fusion
    gpu = analyze(insp, load_profile("t4"), Settings())
    assert not any("VNNI" in n for n in gpu.notes)
    fp32 = analyze(insp, load_profile("cpu-avx2"), Settings(precision="fp32"))
    assert not any("VNNI" in n for n in fp32.notes)  # -p fp32: nothing runs in int8


def test_onnx_runtimes_own_qdq_export_of_squeezenet():
    """tests/data/squeezenet1_1_qdq_ort.onnx: SqueezeNet 1.1 quantized by onnxruntime.quantization's
    quantize_static (QDQ format, int8 activations and weights; stand-in weights, then `dnnperf strip`).
    Its 26 convolutions (the same 349,151,936 MACs as the float model) run in int8; nothing else does;
    the DequantizeLinear nodes feeding them launch nothing."""
    import os

    insp = inspect_model(os.path.join(os.path.dirname(__file__), "data", "squeezenet1_1_qdq_ort.onnx"))
    convs = [r for r in insp.rows if r.node.op_type == "Conv"]
    assert len(convs) == 26 and all(r.workload.dtype == "int8" for r in convs)
    assert sum(r.workload.macs for r in insp.rows if r.workload) == 349_151_936
    assert {r.workload.dtype for r in insp.rows if r.workload and r.node.op_type in ("MaxPool", "Concat")} == {"float32"}
    fed = {i for r in convs for i in r.node.inputs}
    dqs = [r for r in insp.rows if r.node.op_type == "DequantizeLinear" and r.node.outputs[0] in fed]
    assert dqs and all(r.workload.launches == 0 for r in dqs)
    for fusion in ("none", "typical"):
        rep = analyze(insp, load_profile("t4"), Settings(fusion=fusion))
        assert all(c.layer.workload.bytes_total >= 0 for c in rep.score.layers)
        assert all(c.precision == "int8" for c in rep.score.layers if c.layer.op_type.startswith("Conv"))


def test_a_weight_only_quantized_matmul_reads_its_quantized_weights(tmp_path):
    """W4A16 in QDQ form (opset 21 block quantization): an fp16 MatMul whose 4096 x 4096 weight is an
    int4 initializer dequantized in blocks of 32 along K computes in fp16 but reads 4 bits per weight
    plus the fp16 scales (4096 / 32 x 4096 x 2 B), and dequantizes each weight element (2 ops), as
    ONNX Runtime's MatMulNBits runs it; a convolution keeps its float weights (above)."""
    k = n = 4096
    w = helper.make_tensor("w", T.INT4, [k, n], np.zeros(k * n, np.int64).tolist())
    sc = numpy_helper.from_array(np.ones((k // 32, n), np.float16), "sc")
    nodes = [helper.make_node("DequantizeLinear", ["w", "sc"], ["wd"], axis=0, block_size=32),
             helper.make_node("MatMul", ["x", "wd"], ["y"], name="mm")]
    m = model(nodes, [vi("x", [1, 1, k], T.FLOAT16)], [vi("y", None)], [w, sc], opset=21)
    insp, rows = rows_of(tmp_path, m)
    mm = rows["mm"].workload
    assert mm.dtype == "float16" and mm.macs == k * n
    assert mm.weight_bytes == k * n // 2 + (k // 32) * n * 2 and mm.act_bytes_read == k * 2
    assert mm.other_ops == 2 * k * n
    assert any("weight-only" in x for x in insp.warnings)
    # decode-sized (one token): memory-bound on an A100, so about a quarter of the fp16 weights' time
    f16 = model([helper.make_node("MatMul", ["x", "wf"], ["y"], name="mm")], [vi("x", [1, 1, k], T.FLOAT16)],
                [vi("y", None)], [numpy_helper.from_array(np.zeros((k, n), np.float16), "wf")], opset=21)
    a100 = load_profile("a100")
    t4 = analyze(insp, a100, Settings(runtime="graph"), with_fixes=False).score.layers[0].t_device
    t16 = analyze(inspect_model(save(f16, tmp_path, "f16.onnx")), a100, Settings(runtime="graph"),
                  with_fixes=False).score.layers[0].t_device
    assert t4 < 0.4 * t16


def test_onnx_runtime_contrib_quantize_nodes_read_like_the_standard_ones(tmp_path):
    """ONNX Runtime's quantizer writes com.microsoft QuantizeLinear / DequantizeLinear for 16- and 4-bit
    QDQ models (they left the model a partial estimate): the same layers cost the same."""
    std = qdq_conv_model()
    ms = qdq_conv_model()
    for n in ms.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            n.domain = "com.microsoft"
    ms.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    a, ra = rows_of(tmp_path, std, "std.onnx")
    b, rb = rows_of(tmp_path, ms, "ms.onnx")
    assert not b.unsupported
    assert rb["conv"].workload == ra["conv"].workload and rb["conv"].workload.dtype == "int8"
    assert [r.workload for r in b.rows] == [r.workload for r in a.rows]


def test_fp4_weights_read_like_int4_ones(tmp_path):
    """FLOAT4E2M1 (ONNX opset 23; NVFP4 / MXFP4 checkpoints) weights in blocks of 32: 4 bits per weight plus
    the fp16 scales, as int4 ones, where the weight's dtype used to be unknown to the precision table."""
    from dataclasses import replace

    from dnnperf.workload import PRECISION_OF_DTYPE

    k = n = 1024
    sc = numpy_helper.from_array(np.ones((k // 32, n), np.float16), "sc")
    nodes = [helper.make_node("DequantizeLinear", ["w", "sc"], ["wd"], axis=0, block_size=32, output_dtype=T.FLOAT16),
             helper.make_node("MatMul", ["x", "wd"], ["y"], name="mm")]
    got = {}
    for dt in (T.FLOAT4E2M1, T.INT4):
        w = helper.make_tensor("w", dt, [k, n], b"\0" * (k * n // 2), raw=True)
        m = model(nodes, [vi("x", [1, 1, k], T.FLOAT16)], [vi("y", None)], [w, sc], opset=23)
        m.ir_version = 11
        _, rows = rows_of(tmp_path, m, f"w{dt}.onnx")
        got[dt] = rows["mm"].workload
    assert got[T.FLOAT4E2M1].weight_bytes == k * n // 2 + (k // 32) * n * 2
    assert replace(got[T.FLOAT4E2M1], note="") == replace(got[T.INT4], note="")
    assert "float4e2m1 weights" in got[T.FLOAT4E2M1].note
    assert PRECISION_OF_DTYPE["float4e2m1"] == "fp4"


def test_a_tensorrt_engine_runs_the_add_between_qdq_pairs_in_int8(tmp_path):
    """A residual Add between Q/DQ pairs, x1q -> DQ -> Add <- DQ <- x2q, -> Q: ONNX Runtime (eager)
    keeps a float Add and its three Q/DQ kernels; a TensorRT engine fuses them into an int8 Add (its
    explicit quantization), by hand: two int8 inputs of 64 x 28 x 28 = 50,176 B each read, the int8
    output written, and no Q/DQ kernel."""
    s = numpy_helper.from_array(np.array(0.05, np.float32), "s")
    za = numpy_helper.from_array(np.array(0, np.int8), "za")
    nodes = [helper.make_node("DequantizeLinear", ["a", "s", "za"], ["ad"], name="dq_a"),
             helper.make_node("DequantizeLinear", ["b", "s", "za"], ["bd"], name="dq_b"),
             helper.make_node("Add", ["ad", "bd"], ["y"], name="add"),
             helper.make_node("QuantizeLinear", ["y", "s", "za"], ["yq"], name="q_y")]
    m = model(nodes, [vi("a", [1, C, HW, HW], T.INT8), vi("b", [1, C, HW, HW], T.INT8)], [vi("yq", None)], [s, za],
              opset=21)
    insp = inspect_model(save(m, tmp_path, "add.onnx"))
    t4 = load_profile("t4")
    layers = lambda **kw: {c.name: c for c in analyze(insp, t4, Settings(**kw), with_fixes=False).score.layers}
    eager = layers()
    assert eager["add"].layer.workload.dtype == "float32" and eager["q_y"].layer.workload.launches == 1
    engine = layers(runtime="tensorrt")
    w = engine["add"].layer.workload
    assert w.dtype == "int8" and w.act_bytes_read == 2 * C * HW * HW and w.bytes_written == C * HW * HW
    assert all(engine[n].time_s == 0 for n in ("dq_a", "dq_b", "q_y") if n in engine)
    assert sum(c.time_s for c in engine.values()) < sum(c.time_s for c in eager.values())


def _ort_runs(tmp_path, m) -> list[str]:
    """The op types of ONNX Runtime's CPU-optimised graph of ``m`` (what its QDQ fusions made of it)."""
    import onnx

    ort = modelled_ort()
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "ort.onnx")
    so.log_severity_level = 3
    ort.InferenceSession(save(m, tmp_path), so, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(str(tmp_path / "ort.onnx")).graph.node]


def _biased_qdq_conv(bias_scale: float, xs: float = 0.02, ws: float = 0.01):
    """x -> Q -> DQ -> Conv(DQ(int8 weights [8, 4, 3, 3], scale ``ws``), DQ(int32 bias, ``bias_scale``)) -> Q -> DQ,
    the input's scale ``xs``: ONNX Runtime's QLinearConv takes the bias at 0.02 x 0.01 = 0.0002 by default."""
    init = numpy_helper.from_array
    inits = [init(np.array(xs, np.float32), "xs"), init(np.array(128, np.uint8), "xz"),
             init(np.ones((8, 4, 3, 3), np.int8), "wq"), init(np.array(ws, np.float32), "ws"),
             init(np.array(0, np.int8), "wz"), init(np.ones(8, np.int32), "bq"),
             init(np.array(bias_scale, np.float32), "bs"), init(np.array(0, np.int32), "bz"),
             init(np.array(0.05, np.float32), "ys"), init(np.array(128, np.uint8), "yz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="q_in"),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dq_in"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], name="dq_w"),
             helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"], name="dq_b"),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"], name="q_out"),
             helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["y"], name="dq_out")]
    return model(nodes, [vi("x", [1, 4, 16, 16])], [vi("y", None)], inits, opset=17)


@pytest.mark.parametrize("bias_scale, fused, xs, ws", [
    (0.0002, True, 0.02, 0.01), (0.0003, False, 0.02, 0.01), (0.0002 * 1.008, True, 0.02, 0.01),
    (0.0002 * 1.02, False, 0.02, 0.01),
    # small scales: the tolerance's absolute 1e-6 lets a bias scale of 1.9 times a 1e-6 product fuse
    (1.9e-6, True, 0.001, 0.001), (0.2e-6, True, 0.001, 0.001), (2.1e-6, False, 0.001, 0.001),
    (1.08e-5, True, 0.01, 0.001), (1.15e-5, False, 0.01, 0.001)])
def test_a_qdq_convolution_whose_bias_scale_is_not_the_product_runs_in_float(tmp_path, bias_scale, fused, xs, ws):
    """ONNX Runtime fuses a QDQ convolution with an int32 bias into QLinearConv only when the bias's scale
    is the input's times the weight's (0.02 x 0.01) within 1% of it plus 1e-6 (the absolute term decides at
    small scales: EfficientNet-B0's convolutions sharing a bias); otherwise it runs the Conv in float between its
    DequantizeLinear and QuantizeLinear kernels, dequantizing the weights at every inference (it does not
    fold DequantizeLinear). ONNX Runtime 1.32's quantizer writes such biases where convolutions share one
    (a randomly initialised export's zero biases): 39 of MobileNetV2's 52 convolutions ran in float and the
    QDQ model took 4.6 ms against 1.8 ms in fp32, estimated at 0.69 ms before. By hand for the unfused one:
    the weights' DequantizeLinear is a kernel of 288 elements x 2 ops, reading 288 int8 bytes (+ its
    scale and zero point) and writing 288 x 4."""
    m = _biased_qdq_conv(bias_scale, xs, ws)
    ran = _ort_runs(tmp_path, m)
    assert ("QLinearConv" in ran) == fused and ("Conv" in ran) == (not fused)
    insp, rows = rows_of(tmp_path, m, "mine.onnx")
    assert rows["conv"].workload.dtype == ("int8" if fused else "float32")
    dq_w = rows["dq_w"].workload
    if fused:
        assert dq_w.family == "shape"  # read by the quantized kernel
    else:
        assert (dq_w.family, dq_w.other_ops, dq_w.bytes_written) == ("cast", 576, 288 * 4)
        assert dq_w.weight_bytes == 288 + 4 + 1
    assert any("1 matrix layer(s) costed in float: each has an int32 bias" in w for w in insp.warnings) == (not fused)
    if not fused:
        # its weights computed at run time, ONNX Runtime's blocked layout (which reorders weights once, at load)
        # does not take it: the plain kernel, no layout conversions around it (ORT's graph: a plain Conv node)
        from dnnperf import rules
        from dnnperf.vocab import PLAIN_CONV

        import yaml

        from dnnperf.hardware import profile_from_dict

        assert rows["conv"].workload.kernel == PLAIN_CONV and not rules.blocked_conv(rows["conv"].workload, 8, 8)
        d = yaml.safe_load(open(os.path.join(ROOT, "profiles", "cpu-avx2.yaml"), encoding="utf-8"))
        d["cpu_layout"] = {"block": 8, "grouped_min_width": 8}
        rep = analyze(insp, profile_from_dict(d, "blocked"), Settings())
        assert not any(c.layer.op_type == "LayoutReorder" for c in rep.score.layers)


def _scale_as_input(m, names, bias=True):
    """``m`` with the scale initializers ``names`` made graph inputs (known at run time only), its bias removed
    when not ``bias``."""
    g = m.graph
    for name in names:
        g.initializer.remove(next(i for i in g.initializer if i.name == name))
        g.input.append(vi(name, []))
    if not bias:
        conv = next(n for n in g.node if n.name == "conv")
        del conv.input[2]
        g.node.remove(next(n for n in g.node if n.name == "dq_b"))
    return m


@pytest.mark.parametrize("names, bias, fused", [
    (["bs"], True, False), (["xs"], True, False), (["ws"], True, False), (["ys"], True, True),
    (["xs"], False, True), (["ws"], False, True)])
def test_a_qdq_convolution_whose_scales_are_computed_at_run_time(tmp_path, names, bias, fused):
    """ONNX Runtime checks an int32 bias's scale against the input's times the weight's only when all three are
    constants: one of them a graph input and the convolution runs in float (dnnperf took it to fit, silently,
    and costed it in int8); the output's scale, or any scale of a convolution without a bias, may be computed
    at run time and it still fuses (its optimised graph asserted in each case)."""
    m = _scale_as_input(_biased_qdq_conv(0.0002), names, bias)
    ran = _ort_runs(tmp_path, m)
    assert ("QLinearConv" in ran) == fused and ("Conv" in ran) == (not fused)
    insp, rows = rows_of(tmp_path, m, "mine.onnx")
    assert ("QDQ: runs in int8" in rows["conv"].workload.note) == fused
    said = [w for w in insp.warnings if "a scale of their input, weights or bias is computed at run time" in w]
    assert len(said) == (0 if fused else 1) and (fused or said[0].startswith("QDQ form: 1 matrix layer(s)"))


def test_a_bias_check_the_loader_cannot_make_is_said(tmp_path):
    """A 1 x 1 QDQ convolution with 4,100 output channels and per-channel weight and bias scales (4,100 values
    each, above the 4,096 the loader keeps): ONNX Runtime fuses it (the bias's scales are the products), dnnperf
    cannot check them and runs it quantized on that assumption, saying so in one note."""
    co = 4100
    init = numpy_helper.from_array
    ws = np.full(co, 0.01, np.float32)
    inits = [init(np.array(0.02, np.float32), "xs"), init(np.array(128, np.uint8), "xz"),
             init(np.ones((co, 4, 1, 1), np.int8), "wq"), init(ws, "ws"), init(np.zeros(co, np.int8), "wz"),
             init(np.ones(co, np.int32), "bq"), init(ws * np.float32(0.02), "bs"), init(np.zeros(co, np.int32), "bz"),
             init(np.array(0.05, np.float32), "ys"), init(np.array(128, np.uint8), "yz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="q_in"),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dq_in"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], name="dq_w", axis=0),
             helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"], name="dq_b", axis=0),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], name="conv"),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"], name="q_out"),
             helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["y"], name="dq_out")]
    m = model(nodes, [vi("x", [1, 4, 2, 2])], [vi("y", None)], inits, opset=17)
    assert "QLinearConv" in _ort_runs(tmp_path, m)
    insp, rows = rows_of(tmp_path, m, "mine.onnx")
    assert "QDQ: runs in int8" in rows["conv"].workload.note
    said = [w for w in insp.warnings if "assumed to run quantized" in w]
    assert len(said) == 1 and said[0].startswith("QDQ form: 1 matrix layer(s) with an int32 bias") \
        and "up to 4,096 a tensor" in said[0]


@pytest.mark.parametrize("tied", [False, True])
def test_a_weight_dequantized_from_a_shared_table_is_not_fused(tmp_path, tied):
    """A uint8 table [64, 32] transposed for a product and, when ``tied``, also gathered as an embedding
    (GPT-2's shared token table as onnxruntime.quantization.quantize_dynamic leaves it): ONNX Runtime fuses
    the DequantizeLinear and the MatMul into MatMulNBits only when the table is the product's alone;
    tied, it runs the DequantizeLinear (2 x 2,048 ops, writing 2,048 floats) and a float MatMul at every
    inference."""
    init = numpy_helper.from_array
    nodes = [helper.make_node("Transpose", ["table"], ["wq"], name="t", perm=[1, 0]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], name="dq_w"),
             helper.make_node("MatMul", ["x", "wd"], ["y"], name="mm")]
    outs = [vi("y", None)]
    inits = [init(np.ones((64, 32), np.uint8), "table"), init(np.array(0.01, np.float32), "ws"),
             init(np.array(0, np.uint8), "wz")]
    inputs = [vi("x", [4, 32])]
    if tied:
        nodes += [helper.make_node("Gather", ["table", "ids"], ["e"], name="gather"),
                  helper.make_node("DequantizeLinear", ["e", "ws", "wz"], ["ed"], name="dq_e")]
        outs.append(vi("ed", None))
        inputs.append(vi("ids", [4], T.INT64))
    m = model(nodes, inputs, outs, inits, opset=20)
    assert ("MatMulNBits" in _ort_runs(tmp_path, m)) == (not tied)
    _, rows = rows_of(tmp_path, m, "mine.onnx")
    mm, dq = rows["mm"].workload, rows["dq_w"].workload
    if tied:
        assert "weight-only" not in mm.note and mm.weight_bytes == 64 * 32 * 4
        assert (dq.family, dq.other_ops, dq.bytes_written) == ("cast", 2 * 2048, 4 * 2048)
    else:
        assert "weight-only" in mm.note and dq.family == "shape"


def _qdq_group(op, attrs=None, n_in=1, same=True, dtype=np.uint8, extra=()):
    """n_in inputs each x -> Q -> DQ, then ``op`` (``extra``: its other inputs, as (name, array) constants),
    then Q -> DQ at the input's scale and zero point (``same``) or another's."""
    init = numpy_helper.from_array
    inits = [init(np.array(0.05, np.float32), "s"), init(np.array(3, dtype), "z"),
             init(np.array(0.05 if same else 0.07, np.float32), "s2"), init(np.array(3 if same else 5, dtype), "z2")]
    inits += [init(v, k) for k, v in extra]
    nodes, ins = [], []
    for i in range(n_in):
        nodes += [helper.make_node("QuantizeLinear", [f"x{i}", "s", "z"], [f"q{i}"], name=f"q{i}"),
                  helper.make_node("DequantizeLinear", [f"q{i}", "s", "z"], [f"d{i}"], name=f"dq{i}")]
        ins.append(f"d{i}")
    nodes += [helper.make_node(op, ins + [k for k, _ in extra], ["o"], name="op", **(attrs or {})),
              helper.make_node("QuantizeLinear", ["o", "s2", "z2"], ["oq"], name="q_out"),
              helper.make_node("DequantizeLinear", ["oq", "s2", "z2"], ["y"], name="dq_out")]
    return model(nodes, [vi(f"x{i}", [1, 8, 16, 16]) for i in range(n_in)], [vi("y", None)], inits, opset=17)


_I64 = lambda *v: np.array(v, np.int64)  # noqa: E731
# (op, attributes, inputs dequantized, other inputs, what ONNX Runtime 1.32's CPU provider runs it as: its
# QLinear kernel whatever the scales, or the op itself on 8 bits when the pair shares one scale)
_ORT_GROUPS = [
    ("Add", {}, 2, (), "QLinearAdd"), ("Mul", {}, 2, (), "QLinearMul"), ("Concat", {"axis": 1}, 2, (), "QLinearConcat"),
    ("GlobalAveragePool", {}, 1, (), "QLinearGlobalAveragePool"),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, 1, (), "QLinearAveragePool"),
    ("Sigmoid", {}, 1, (), "QLinearSigmoid"), ("LeakyRelu", {}, 1, (), "QLinearLeakyRelu"),
    ("Softmax", {}, 1, (), "QLinearSoftmax"),
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}, 1, (), "8-bit"), ("Transpose", {"perm": [0, 2, 3, 1]}, 1, (), "8-bit"),
    ("Reshape", {}, 1, (("shp", _I64(1, 8, 256)),), "8-bit"), ("Slice", {}, 1, (("st", _I64(0)), ("en", _I64(4)), ("ax", _I64(1))), "8-bit"),
    ("Sub", {}, 2, (), "float"), ("Relu", {}, 1, (), "float"), ("GlobalMaxPool", {}, 1, (), "float"),
    ("Pad", {}, 1, (("pd", _I64(0, 0, 1, 1, 0, 0, 1, 1)),), "float")]


@pytest.mark.parametrize("op, attrs, n_in, extra, runs_as", _ORT_GROUPS, ids=[g[0] for g in _ORT_GROUPS])
@pytest.mark.parametrize("same", [True, False], ids=["one-scale", "two-scales"])
def test_a_cpu_estimate_runs_the_qdq_groups_onnx_runtime_fuses(tmp_path, op, attrs, n_in, extra, runs_as, same):
    """ONNX Runtime's CPU provider rewrites DequantizeLinear -> op -> QuantizeLinear into its QLinear kernels
    (QLinearAdd, QLinearConcat, QLinearGlobalAveragePool...) whatever the scales, and runs max pooling and
    data movement on the 8-bit tensor when the pair has one scale and zero point, dropping it; the rest keep
    float and their Q/DQ kernels. A CPU estimate runs each group as its optimised graph does (checked against
    it here): the group's op costed as that kernel, its Q/DQ nodes launching nothing; other hardware (a GPU's
    eager runtime) keeps the float op between its Q/DQ kernels."""
    from collections import Counter

    from dnnperf.api import _score

    m = _qdq_group(op, attrs, n_in, same, extra=extra)
    ran = Counter(_ort_runs(tmp_path, m))
    fused = runs_as.startswith("QLinear") or (runs_as == "8-bit" and same)
    if runs_as.startswith("QLinear"):
        assert ran[runs_as] == 1 and ran[op] == 0
    # the inputs' QuantizeLinear and the output's DequantizeLinear stay; the group's own Q/DQ go when fused
    assert ran["QuantizeLinear"] == n_in + (0 if fused else 1)
    insp = inspect_model(save(m, tmp_path, "mine.onnx"))
    cpu = load_profile("cpu-avx2")
    layers = {c.layer.name: c for c in _score(insp, cpu, Settings()).layers}
    launched = lambda name: layers[name].layer.workload.launches > 0  # noqa: E731
    assert launched("q_out") == (not fused) and all(launched(f"dq{i}") == (not fused) for i in range(n_in))
    w = layers["op"].layer.workload
    assert ("ONNX Runtime's" in w.note) == fused
    if fused:
        assert w.dtype == "uint8" or w.family in ("view", "shape")
    # an 8-bit MaxPool on a tensor no QLinearConv made runs ONNX Runtime's NCHW pool, an element at a time
    assert (w.kernel == "MaxPool.int8") == (op == "MaxPool" and fused)
    gpu = {c.layer.name: c for c in _score(insp, load_profile("v100"), Settings()).layers}
    assert gpu["q_out"].layer.workload.launches == 1 and gpu["op"].layer.workload.dtype == "float32"


@pytest.mark.parametrize("op, n_in, figure", [("Add", 2, "QLinearAdd"), ("Mul", 2, "QLinearMul"),
                                              ("Sigmoid", 1, "QLinearSigmoid"), ("LeakyRelu", 1, "QLinearSigmoid")])
def test_a_qdq_add_on_a_calibrated_cpu_takes_the_qlinear_add_figure(tmp_path, op, n_in, figure):
    """ONNX Runtime's QLinearAdd runs at about a float Add's pace per element (0.05-0.12 ns on a 2-core EPYC
    VM) although it moves a quarter of the bytes, and so do QLinearMul and QLinearSigmoid (a table lookup, as
    QLinearLeakyRelu): calibrate times them (op_efficiency) and a QDQ group's op, which the CPU provider runs
    as that kernel, takes its figure, as a QOperator model's does. By hand (cache at 100 GB/s, the figure
    0.25, on one thread where the figure's 393,216 elements ran on 14 of the profile's 64: a loop of 2,048
    elements is not split): (inputs + 1) x 2,048 bytes / 100e9 / 0.25 x 14, plus the 2 us launch. A float op
    keeps the family's."""
    import yaml

    from dnnperf.hardware import profile_from_dict

    d = yaml.safe_load(open(os.path.join(ROOT, "profiles", "cpu-avx2.yaml"), encoding="utf-8"))
    d["memory"] = {"dram_gbs": 20, "onchip_mb": 16, "bandwidth_curve": {0.5: 100, 1: 100, 16: 100, 64: 20}}
    d["op_efficiency"] = {figure: 0.25}
    hw = profile_from_dict(d, "x")
    insp = inspect_model(save(_qdq_group(op, n_in=n_in, same=False), tmp_path))
    rep = analyze(insp, hw, Settings(), with_fixes=False)
    layer = next(c for c in rep.score.layers if c.layer.name == "op")
    assert layer.layer.workload.kernel == f"QLinear{op}"
    assert d["parallelism"]["compute_units"] == 64
    assert layer.time_s == pytest.approx((n_in + 1) * 2048 / 100e9 / 0.25 * 14 + 2e-6, rel=5e-3)
    # (the output's DequantizeLinear has no figure here; the add has its own)
    assert not any("no calibrated figure" in n and "QLinear" in n for n in rep.notes)
    ins = ["a", "b"][:n_in]
    plain = model([helper.make_node(op, ins, ["y"], name="op")], [vi(i, [1, 8, 16, 16]) for i in ins], [vi("y", None)],
                  opset=17)
    rep = analyze(inspect_model(save(plain, tmp_path, "plain.onnx")), hw, Settings(), with_fixes=False)
    assert rep.score.layers[0].layer.workload.kernel == "" and rep.score.layers[0].time_s < 3e-6


def test_a_qlinear_add_on_a_cpu_costs_what_its_qoperator_twin_costs(tmp_path):
    """The Add of a DQ -> Add -> Q group costs on a CPU what ONNX Runtime's QLinearAdd costs in a QOperator
    model, by hand: [1, 8, 16, 16] = 2,048 elements, each input dequantized (2 ops), added (1), requantized
    (3): 2,048 x 8 = 16,384 ops; two uint8 inputs read (4,096 bytes) and one written (2,048)."""
    from dnnperf.api import _score

    insp = inspect_model(save(_qdq_group("Add", n_in=2, same=False), tmp_path))
    w = next(c for c in _score(insp, load_profile("cpu-avx2"), Settings()).layers if c.layer.name == "op").layer.workload
    assert (w.other_ops, w.act_bytes_read, w.bytes_written, w.macs) == (16_384, 4_096, 2_048, 0)
    # the report says so: one op more, its two DequantizeLinear and one QuantizeLinear folded
    notes = analyze(insp, load_profile("cpu-avx2"), Settings()).notes
    assert any(n.startswith("QDQ on ONNX Runtime's CPU provider: 1 more op(s)") and "and 3 more Q/DQ" in n for n in notes)
    assert not any("ONNX Runtime's CPU provider" in n for n in analyze(insp, load_profile("t4"), Settings()).notes)


@pytest.mark.parametrize("after_conv, pools", [(True, 1), (False, 1), (True, 2)])
def test_an_8bit_max_pool_runs_channels_last_only_after_a_quantized_convolution(tmp_path, after_conv, pools):
    """ONNX Runtime runs a QDQ model's 8-bit MaxPool (its Q/DQ pair dropped) as NhwcMaxPool in the layout of
    the QLinearConv before it (0.2 ns an output on a 2-core EPYC VM), and in NCHW, an element at a time,
    where no QLinearConv made its input (8 ns: SqueezeNet's pools after a QLinearConcat): checked against its
    optimised graph. With a calibrated 8 ns an output, the NCHW pool of [1, 16, 28, 28] (3 x 3 / 2: 16 x 13 x
    13 = 2,704 outputs) takes 2,704 x 8 ns = 21.6 us; the channels-last one its roofline."""
    import yaml

    from dnnperf.api import _score
    from dnnperf.hardware import profile_from_dict

    init = numpy_helper.from_array
    s, z = init(np.array(0.05, np.float32), "s"), init(np.array(3, np.uint8), "z")
    zw = init(np.array(0, np.int8), "zw")
    w = init(np.ones((16, 16, 1, 1), np.int8), "w")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q_in"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq_in")]
    src = "xd"
    if after_conv:  # requantized directly (a Relu between would leave the convolution in float)
        nodes += [helper.make_node("DequantizeLinear", ["w", "s", "zw"], ["wd"], name="dq_w"),
                  helper.make_node("Conv", ["xd", "wd"], ["r"], name="conv"),
                  helper.make_node("QuantizeLinear", ["r", "s", "z"], ["rq"], name="q_c"),
                  helper.make_node("DequantizeLinear", ["rq", "s", "z"], ["rd"], name="dq_c")]
        src = "rd"
    if pools == 2:  # a first pool after the convolution: the second reads its channels-last output
        nodes += [helper.make_node("MaxPool", [src], ["p0"], name="pool0", kernel_shape=[2, 2], strides=[1, 1],
                                   pads=[0, 0, 1, 1]),
                  helper.make_node("QuantizeLinear", ["p0", "s", "z"], ["p0q"], name="q_p0"),
                  helper.make_node("DequantizeLinear", ["p0q", "s", "z"], ["p0d"], name="dq_p0")]
        src = "p0d"
    nodes += [helper.make_node("MaxPool", [src], ["p"], name="pool", kernel_shape=[3, 3], strides=[2, 2]),
              helper.make_node("QuantizeLinear", ["p", "s", "z"], ["pq"], name="q_p"),
              helper.make_node("DequantizeLinear", ["pq", "s", "z"], ["y"], name="dq_p")]
    m = model(nodes, [vi("x", [1, 16, 28, 28])], [vi("y", None)], [s, z, zw, w], opset=17)
    ran = _ort_runs(tmp_path, m)
    assert ran.count("NhwcMaxPool") == (pools if after_conv else 0) and ("MaxPool" in ran) == (not after_conv)
    d = yaml.safe_load(open(os.path.join(ROOT, "profiles", "cpu-avx2.yaml"), encoding="utf-8"))
    d["loop_ns"] = {"MaxPool.int8": 8.0}
    hw = profile_from_dict(d, "x")
    pool = next(c for c in _score(inspect_model(save(m, tmp_path, "mine.onnx")), hw, Settings()).layers
                if c.layer.name == "pool")
    assert (pool.layer.workload.kernel == "MaxPool.int8") == (not after_conv)
    if not after_conv:
        assert pool.time_s >= 2_704 * 8e-9
        assert pool.time_s == pytest.approx(2_704 * 8e-9 + hw.launch_overhead_us * 1e-6, rel=0.05)


@pytest.mark.parametrize("relu", [False, True])
def test_a_convolution_no_quantize_takes_runs_in_float_on_a_cpu(tmp_path, relu):
    """ONNX Runtime's CPU provider fuses DequantizeLinear -> Conv -> QuantizeLinear into QLinearConv, which
    writes 8 bits; with anything between the Conv and its QuantizeLinear (a Relu: a model quantized for
    TensorRT, whose Q/DQ pairs sit on inputs only) the Conv runs in float, its weights dequantized at every
    inference (checked against its optimised graph: FusedConv). A CPU estimate does the same and says so; a
    GPU's keeps the int8 layer."""
    from dnnperf.api import _score

    m = qdq_conv_model(relu=relu)
    ran = _ort_runs(tmp_path, m)
    assert ("QLinearConv" in ran) == (not relu)
    insp = inspect_model(save(m, tmp_path, "mine.onnx"))
    cpu = {c.layer.name: c.layer.workload for c in _score(insp, load_profile("cpu-avx2"), Settings()).layers}
    assert cpu["conv"].dtype == ("float32" if relu else "int8")
    assert (cpu["dq_w"].launches == 1) == relu and (cpu["dq_in"].launches == 1) == relu
    said = any("1 matrix layer(s) followed by a Relu or Clip that no QuantizeLinear after it absorbs run in float"
               in n for n in analyze(insp, load_profile("cpu-avx2"), Settings()).notes)
    assert said == relu
    gpu = {c.layer.name: c.layer.workload for c in _score(insp, load_profile("t4"), Settings()).layers}
    assert gpu["conv"].dtype == "int8"


@pytest.mark.parametrize("readers", [1, 2])
def test_int8_activations_fuse_only_where_onnx_runtime_turns_them_unsigned(tmp_path, readers):
    """ONNX Runtime's x86 CPU provider turns an int8 QuantizeLinear -> DequantizeLinear pair into uint8 where
    the pair is read once; a DequantizeLinear read by two nodes keeps int8 (the provider gives each reader a
    copy, and a QuantizeLinear feeding two stays as it is), and its QLinear kernels read and write one type:
    with the sigmoid's output pair turned uint8, the sigmoid reading the shared int8 input stays in float
    between its Q/DQ kernels (its quantizer's default, int8 activations, hits this at every branch). Checked
    against its optimised graph; a CPU estimate does the same."""
    from collections import Counter

    from dnnperf.api import _score

    init = numpy_helper.from_array
    inits = [init(np.array(0.05, np.float32), "s"), init(np.array(3, np.int8), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q0"], name="q0"),
             helper.make_node("DequantizeLinear", ["q0", "s", "z"], ["d0"], name="dq0"),
             helper.make_node("Sigmoid", ["d0"], ["t"], name="op"),
             helper.make_node("QuantizeLinear", ["t", "s", "z"], ["tq"], name="q_out"),
             helper.make_node("DequantizeLinear", ["tq", "s", "z"], ["y"], name="dq_out")]
    outs = [vi("y", None)]
    if readers == 2:  # a second reader of the input's DequantizeLinear
        nodes.append(helper.make_node("Relu", ["d0"], ["r"], name="relu"))
        outs.append(vi("r", None))
    m = model(nodes, [vi("x", [1, 8, 16, 16])], outs, inits, opset=17)
    ran = Counter(_ort_runs(tmp_path, m))
    assert ran["QLinearSigmoid"] == (1 if readers == 1 else 0)
    layers = {c.layer.name: c.layer.workload for c in
              _score(inspect_model(save(m, tmp_path, "mine.onnx")), load_profile("cpu-avx2"), Settings()).layers}
    assert (layers["op"].kernel == "QLinearSigmoid") == (readers == 1)
    assert (layers["q_out"].launches == 0) == (readers == 1)


@pytest.mark.parametrize("act, zero, scale, fused", [("Relu", 0, 0.05, True), ("Relu", 3, 0.05, False),
                                                    ("Clip", 0, 6 / 255, True), ("Clip", 0, 0.05, False)])
def test_an_activation_the_quantize_after_it_clips_anyway_is_folded_on_a_cpu(tmp_path, act, zero, scale, fused):
    """ONNX Runtime's CPU provider removes a Relu before a QuantizeLinear whose zero point is its type's minimum,
    and a Clip whose bounds hold the QuantizeLinear's whole range (uint8, scale 6/255, zero point 0: 0..6 inside
    Clip(0, 6); scale 0.05: 0..12.75 is not): the Conv before it is then requantized directly and runs as
    QLinearConv (checked against its optimised graph); otherwise it stays a float FusedConv."""
    from dnnperf.api import _score

    init = numpy_helper.from_array
    inits = [init(np.array(0.05, np.float32), "s"), init(np.array(3, np.uint8), "z"), init(np.array(0, np.int8), "zw"),
             init(np.ones((16, 16, 1, 1), np.int8), "w"), init(np.array(scale, np.float32), "so"),
             init(np.array(zero, np.uint8), "zo"), init(np.array(0.0, np.float32), "lo"),
             init(np.array(6.0, np.float32), "hi")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q_in"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq_in"),
             helper.make_node("DequantizeLinear", ["w", "s", "zw"], ["wd"], name="dq_w"),
             helper.make_node("Conv", ["xd", "wd"], ["c"], name="conv"),
             helper.make_node(act, ["c"] + (["lo", "hi"] if act == "Clip" else []), ["r"], name="act"),
             helper.make_node("QuantizeLinear", ["r", "so", "zo"], ["rq"], name="q_out"),
             helper.make_node("DequantizeLinear", ["rq", "so", "zo"], ["y"], name="dq_out")]
    m = model(nodes, [vi("x", [1, 16, 8, 8])], [vi("y", None)], inits, opset=17)
    ran = _ort_runs(tmp_path, m)
    assert ("QLinearConv" in ran) == fused and (act not in ran)  # kept ones fuse into its float FusedConv
    layers = {c.layer.name: c.layer.workload for c in
              _score(inspect_model(save(m, tmp_path, "mine.onnx")), load_profile("cpu-avx2"), Settings()).layers}
    assert (layers["conv"].dtype == "int8") == fused
    assert (layers["act"].launches == 0) == fused and (layers["q_out"].launches == 0) == fused


def test_a_tensorrt_engine_folds_the_weights_of_a_layer_onnx_runtime_leaves_in_float(tmp_path):
    """A convolution whose bias scale ONNX Runtime refuses (0.0003 where the product is 0.0002) runs in float with
    its weights and bias dequantized at every inference outside an engine; a TensorRT engine takes it quantized
    and folds its weights when it is built: no DequantizeLinear kernel is left for them, and no plain kernel."""
    from dnnperf.api import _score
    from dnnperf.vocab import PLAIN_CONV

    insp = inspect_model(save(_biased_qdq_conv(0.0003), tmp_path))
    eager = {c.layer.name: c.layer.workload for c in _score(insp, load_profile("t4"), Settings()).layers}
    assert eager["conv"].dtype == "float32" and eager["dq_w"].launches == 1 and eager["dq_b"].launches == 1
    engine = {c.layer.name: c.layer.workload for c in
              _score(insp, load_profile("t4"), Settings(runtime="tensorrt", fusion="typical")).layers}
    assert engine["conv"].dtype == "int8" and engine["conv"].kernel != PLAIN_CONV
    assert engine["dq_w"].launches == 0 and engine["dq_b"].launches == 0


_QTYPES = {"uint8": T.UINT8, "int8": T.INT8, "uint16": T.UINT16, "int4": T.INT4, "uint4": T.UINT4,
           "float8": T.FLOAT8E4M3FN}


def _qtensor(name, dtype, shape):
    """A tensor of small values (0-6) of one of ``_QTYPES``."""
    n = int(np.prod(shape)) if shape else 1
    vals = np.arange(n) % 7
    return helper.make_tensor(name, _QTYPES[dtype], list(shape), vals.astype(np.float32 if dtype == "float8"
                                                                                  else np.int64).tolist())


def _qdq_product(op, act="uint8", wt="int8", wzp=True, axis=None, block=0, trans_b=0, after=None, q_out=True):
    """One matrix layer of a QDQ model: x -> [Q -> DQ (``act``; None: x read in float)] -> ``op`` <- DQ(weights of
    ``wt``; scale per tensor, per ``axis``, or in blocks of ``block`` along it; a zero point when ``wzp``)
    [-> ``after``] [-> Q -> DQ]; a Relu after it meets a QuantizeLinear whose zero point (3) it does not
    reach. Products: 64 -> 32 on 8 rows; convolutions: 16 -> 8 channels, 3 x 3, on 8 x 8."""
    init = numpy_helper.from_array
    conv = op in ("Conv", "ConvTranspose")
    cin, cout = (16, 8) if conv else (64, 32)
    wshape = {"Conv": [cout, cin, 3, 3], "ConvTranspose": [cin, cout, 3, 3]}.get(
        op, [cout, cin] if trans_b else [cin, cout])
    inits = [_qtensor("w", wt, wshape), init(np.array(0.01, np.float32), "sx"), init(np.array(0.05, np.float32), "sy")]
    attrs = {}
    if block:
        attrs = {"axis": axis, "block_size": block}
        sshape = [d // block if i == axis else d for i, d in enumerate(wshape)]
    elif axis is not None:
        attrs, sshape = {"axis": axis}, [wshape[axis]]
    else:
        sshape = []
    inits.append(init(np.full(sshape, 0.02, np.float32), "sw"))
    if wzp:
        inits.append(helper.make_tensor("zw", _QTYPES[wt], sshape, [0] * int(np.prod(sshape))))
    nodes, x = [], "x"
    if act is not None:
        inits += [helper.make_tensor(z, _QTYPES[act], [], [3]) for z in ("zx", "zy")]
        nodes += [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"], name="q_in"),
                  helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"], name="dq_in")]
        x = "xd"
    nodes.append(helper.make_node("DequantizeLinear", ["w", "sw"] + (["zw"] if wzp else []), ["wd"], name="dq_w",
                                  **attrs))
    nodes.append(helper.make_node(op, [x, "wd"], ["y"], name="op", **({"transB": trans_b} if op == "Gemm" else {})))
    out = "y"
    if after:
        nodes.append(helper.make_node(after, ["y"], ["a"], name="act"))
        out = "a"
    if q_out:
        zy = "zy" if act is not None else "zx"
        if act is None:
            inits.append(_qtensor("zx", "uint8", []))
        nodes += [helper.make_node("QuantizeLinear", [out, "sy", zy], ["oq"], name="q_out"),
                  helper.make_node("DequantizeLinear", ["oq", "sy", zy], ["o"], name="dq_out")]
        out = "o"
    shape = [1, cin, 8, 8] if conv else [8, cin]
    return model(nodes, [vi("x", shape)], [vi(out, None)], inits, opset=21)


# (id, _qdq_product arguments, the kernel ONNX Runtime 1.32's CPU provider runs the layer as (None: its float op),
# how a CPU estimate runs it, the reason its note gives)
_ORT_PRODUCTS = [
    ("conv-u8-s8", dict(op="Conv"), "QLinearConv", "int8", None),
    ("conv-u8-s4", dict(op="Conv", wt="int4"), None, "float", "other than 8-bit integers"),
    ("conv-f8", dict(op="Conv", act="float8", wt="float8", wzp=False), None, "float", "other than 8-bit integers"),
    ("conv-transpose", dict(op="ConvTranspose"), None, "float", "ConvTranspose layer(s)"),
    ("conv-no-quantize", dict(op="Conv", q_out=False), None, "float", "no QuantizeLinear on their output"),
    ("gemm-u8-s8", dict(op="Gemm", trans_b=1), "QGemm", "int8", None),
    ("gemm-no-weight-zero-point", dict(op="Gemm", trans_b=1, wzp=False), None, "float", "gives no zero point"),
    ("matmul-blocked", dict(op="MatMul", axis=0, block=32), None, "float", "block-quantized"),
    ("matmul-relu-q", dict(op="MatMul", after="Relu"), None, "float", "followed by a Relu or Clip"),
    ("gemm-relu-q", dict(op="Gemm", trans_b=1, after="Relu"), None, "float", "followed by a Relu or Clip"),
    ("matmul-relu-output", dict(op="MatMul", after="Relu", q_out=False), "MatMulIntegerToFloat", "int8", None),
    ("matmul-sigmoid-q", dict(op="MatMul", after="Sigmoid"), "MatMulIntegerToFloat", "int8", None),
    ("nbits-int4-b32", dict(op="MatMul", act=None, wt="int4", axis=0, block=32, q_out=False), "MatMulNBits",
     "weight-only", None),
    ("nbits-requantized", dict(op="MatMul", act=None, wt="int4", axis=0, block=32), None, "float", "MatMulNBits"),
    ("nbits-sigmoid-q", dict(op="MatMul", act=None, after="Sigmoid"), "MatMulNBits", "weight-only", None),
    ("nbits-16bit-input", dict(op="MatMul", act="uint16"), "MatMulNBits", "weight-only", None),
    ("nbits-block-8", dict(op="MatMul", act=None, wt="int4", axis=0, block=8, q_out=False), None, "float",
     "MatMulNBits"),
    ("nbits-per-row", dict(op="MatMul", act=None, axis=0, q_out=False), None, "float", "MatMulNBits"),
    ("nbits-gemm", dict(op="Gemm", act=None, q_out=False), "MatMulNBits", "weight-only", None),
    ("nbits-gemm-transposed", dict(op="Gemm", act=None, trans_b=1, q_out=False), None, "float", "MatMulNBits"),
    ("nbits-float8", dict(op="MatMul", act=None, wt="float8", wzp=False, q_out=False), None, "float", "MatMulNBits"),
]


@pytest.mark.parametrize("kwargs, kernel, runs, why", [c[1:] for c in _ORT_PRODUCTS], ids=[c[0] for c in _ORT_PRODUCTS])
def test_a_cpu_estimate_runs_a_qdq_product_as_onnx_runtime_does(tmp_path, kwargs, kernel, runs, why):
    """ONNX Runtime's CPU provider runs a matrix layer between Q/DQ nodes as its quantized kernel only for 8-bit
    integer operands with one scale per tensor or channel (4-bit and float8 ones, block-quantized weights and
    ConvTranspose stay in float), a Gemm only with its weight's zero point given, a MatMul or Gemm followed by a
    Relu the QuantizeLinear after it does not absorb in float; and fuses a float-input product with quantized
    weights into MatMulNBits only for 8- or 4-bit integer weights per tensor, per column or in power-of-two
    blocks of 16 or more along K, in a MatMul or an untransposed Gemm (an input dequantized from 16 bits counts
    as float). Each case's optimised graph is asserted; a CPU estimate runs the layer as it does, the layers it
    leaves in float reading weights dequantized at every inference, and says why."""
    from collections import Counter

    from dnnperf.api import _score

    m = _qdq_product(**kwargs)
    ran = Counter(_ort_runs(tmp_path, m))
    if kernel is None:
        assert ran[kwargs["op"]] + ran["FusedGemm"] == 1 and ran["DequantizeLinear"] >= 1  # the weights' stays
    else:
        assert ran[kernel] == 1 and ran[kwargs["op"]] == 0
    insp = inspect_model(save(m, tmp_path, "mine.onnx"))
    cpu = load_profile("cpu-avx2")
    layers = {c.layer.name: c.layer.workload for c in _score(insp, cpu, Settings()).layers}
    w = layers["op"]
    assert (w.dtype in ("int8", "uint8")) == (runs == "int8")
    assert ("weight-only" in w.note) == (runs == "weight-only")
    assert (layers["dq_w"].launches == 1) == (runs == "float")  # ONNX Runtime dequantizes the weights each run
    if runs == "float":
        # the float kernel reads the dequantized weights: 8 x 16 x 3 x 3 or 64 x 32 float32 values
        assert w.dtype == "float32" and w.weight_bytes == (8 * 16 * 9 if "Conv" in kwargs["op"] else 64 * 32) * 4
    notes = [n for n in analyze(insp, cpu, Settings()).notes if n.startswith("QDQ on ONNX Runtime's CPU provider: 1 ")]
    assert [why in n for n in notes].count(True) == (1 if why else 0)


def _depthwise8(channels_last: bool, dtype: str, c: int = 96):
    """A ``c``-channel 3 x 3 depthwise convolution at 56 x 56: ONNX Runtime's channels-last 8-bit QLinearConv (uint8
    data, int8 weights), its NCHW QLinearConv, or a float Conv (``dtype`` "float32")."""
    init = numpy_helper.from_array
    side = 56
    if dtype == "float32":
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=c, pads=[1, 1, 1, 1])]
        return model(nodes, [vi("x", [1, c, side, side])], [vi("y", None)],
                     [init(np.ones((c, 1, 3, 3), np.float32), "w")])
    inits = [init(np.array(0.02, np.float32), "s"), init(np.array(128, np.uint8), "z"),
             init(np.ones((c, 1, 3, 3), np.int8), "w"), init(np.array(0.01, np.float32), "ws"),
             init(np.array(0, np.int8), "wz")]
    attrs = {"domain": "com.microsoft", "channels_last": 1} if channels_last else {}
    nodes = [helper.make_node("QLinearConv", ["x", "s", "z", "w", "ws", "wz", "s", "z"], ["y"], name="dw", group=c,
                              pads=[1, 1, 1, 1], **attrs)]
    shape = [1, side, side, c] if channels_last else [1, c, side, side]
    return model(nodes, [vi("x", shape, T.UINT8)], [vi("y", None, T.UINT8)], inits,
                 extra_opsets=(("com.microsoft", 1),) if channels_last else ())


def test_an_8bit_depthwise_convolution_runs_at_its_calibrated_share_of_the_float_pace(tmp_path):
    """ONNX Runtime's 8-bit depthwise kernel (its channels-last QLinearConv, which a QDQ model's depthwise layers
    run) takes ``int8_depthwise_share`` of the pace the float depthwise figures give the layer: at 0.5 its time
    less the dispatch doubles; the float twin's and a profile without the figure's do not move. The
    channels-last form (N x H x W x C in and out, weights OIHW) is the NCHW one's work: 96 x 56 x 56 x 9 MACs."""
    import yaml

    from dnnperf.api import _score
    from dnnperf.hardware import profile_from_dict

    d = yaml.safe_load(open(os.path.join(ROOT, "profiles", "cpu-avx2.yaml"), encoding="utf-8"))
    d["int8_operands"] = {"u8s8": 1.0, "u8u8": 0.5, "s8s8": 0.1, "s8u8": 0.1}

    def time_of(m, name, share):
        hw = profile_from_dict({**d, "int8_depthwise_share": share} if share else d, "x")
        c = next(c for c in _score(inspect_model(save(m, tmp_path, name)), hw, Settings()).layers)
        assert c.layer.workload.macs == 96 * 56 * 56 * 9
        return c.time_s - c.t_launch

    for last in (True, False):
        m = _depthwise8(last, "uint8")
        full, half = time_of(m, f"dw{last}.onnx", None), time_of(m, f"dw{last}.onnx", 0.5)
        assert half == pytest.approx(2 * full, rel=1e-6)
    flt = _depthwise8(False, "float32")
    assert time_of(flt, "f.onnx", 0.5) == time_of(flt, "f.onnx", None)
    with pytest.raises(Exception, match="int8_depthwise_share"):
        profile_from_dict({**yaml.safe_load(open(os.path.join(ROOT, "profiles", "t4.yaml"), encoding="utf-8")),
                           "int8_depthwise_share": 0.5}, "t4x")


def _cpu_dict(**extra) -> dict:
    import yaml

    d = yaml.safe_load(open(os.path.join(ROOT, "profiles", "cpu-avx2.yaml"), encoding="utf-8"))
    d["int8_operands"] = {"u8s8": 1.0, "u8u8": 0.5, "s8s8": 0.1, "s8u8": 0.1}
    return {**d, **extra}


def _kernel_time(tmp_path, m, name, d) -> float:
    """The one layer of ``m``'s time less its dispatch under profile dict ``d``."""
    from dnnperf.api import _score
    from dnnperf.hardware import profile_from_dict

    c = next(c for c in _score(inspect_model(save(m, tmp_path, name)), profile_from_dict(d, "x"), Settings()).layers)
    return c.time_s - c.t_launch


@pytest.mark.parametrize("multiple", [16, 8])
def test_an_8bit_depthwise_convolution_in_no_whole_group_of_channels_runs_the_generic_kernel(tmp_path, multiple):
    """MLAS (ONNX Runtime's CPU kernels) has its fast 8-bit depthwise kernel only for channel counts in whole groups
    of 16 on x86 (of 8 on ARM64) and runs any other count with a generic one (88 channels at 56 x 56 took 88 us
    where 80 took 29 on a 2-core EPYC VM). With the fast kernel at 0.5 of the float pace and the generic one at
    0.125 (``int8_depthwise_generic``), 88 channels take 4x the time per channel of 96 when the multiple is 16 and
    the same when it is 8; a profile without the figure keeps every count at the fast share."""
    gen = {"int8_depthwise_share": 0.5, "int8_depthwise_generic": {"channel_multiple": multiple, "share": 0.125}}
    per = {}
    for c in (96, 88):
        for with_gen in (True, False):
            d = _cpu_dict(**(gen if with_gen else {"int8_depthwise_share": 0.5}))
            per[c, with_gen] = _kernel_time(tmp_path, _depthwise8(True, "uint8", c), f"dw{c}.onnx", d) / c
    assert per[96, True] == pytest.approx(per[96, False], rel=1e-9)
    assert per[88, False] == pytest.approx(per[96, False], rel=1e-6)
    assert per[88, True] == pytest.approx(per[96, True] * (4 if multiple == 16 else 1), rel=1e-6)


def test_a_profile_without_the_generic_depthwise_figure_says_so(tmp_path):
    """A CPU profile calibrated before calibrate timed the generic 8-bit depthwise kernel prices every channel
    count at the fast kernel's share: the report names the missing figure (the 8-bit depthwise layer's), and a
    profile with it says nothing of it."""
    from dnnperf.hardware import profile_from_dict

    memory = {"dram_gbs": 20, "onchip_mb": 1, "bandwidth_curve": {0.5: 100, 1: 100, 4: 20}}
    said = "8-bit depthwise convolution's generic kernel"
    insp = inspect_model(save(_depthwise8(True, "uint8", 88), tmp_path, "dw88.onnx"))
    old = profile_from_dict(_cpu_dict(memory=memory, int8_depthwise_share=0.5), "old")
    assert any(said in n and "(1 layer)" in n for n in analyze(insp, old, Settings(), with_fixes=False).notes)
    new = profile_from_dict(_cpu_dict(memory=memory, int8_depthwise_share=0.5,
                                      int8_depthwise_generic={"channel_multiple": 16, "share": 0.2}), "new")
    assert not any(said in n for n in analyze(insp, new, Settings(), with_fixes=False).notes)


@pytest.mark.parametrize("bad, says", [
    ({"share": 0.2}, "give both"), ({"channel_multiple": 16}, "give both"),
    ({"channel_multiple": 12.5, "share": 0.2}, "whole number"), ({"channel_multiple": 16, "share": 1.5}, "share"),
    ({"channel_multiple": 16, "share": 0.2, "speed": 1}, "unknown key 'speed'")])
def test_a_malformed_generic_depthwise_figure_is_refused(bad, says):
    from dnnperf.errors import DnnperfError
    from dnnperf.hardware import profile_from_dict

    with pytest.raises(DnnperfError, match=says):
        profile_from_dict(_cpu_dict(int8_depthwise_generic=bad), "x")
    import yaml

    t4 = yaml.safe_load(open(os.path.join(ROOT, "profiles", "t4.yaml"), encoding="utf-8"))
    with pytest.raises(DnnperfError, match="only for CPU runtimes"):
        profile_from_dict({**t4, "int8_depthwise_generic": {"channel_multiple": 16, "share": 0.2}}, "t4x")


def _pointwise8(cin: int, cout: int, side: int = 28):
    """ONNX Runtime's channels-last 8-bit 1 x 1 QLinearConv, ``cin`` -> ``cout`` at ``side`` x ``side``."""
    init = numpy_helper.from_array
    inits = [init(np.array(0.02, np.float32), "s"), init(np.array(128, np.uint8), "z"),
             init(np.ones((cout, cin, 1, 1), np.int8), "w"), init(np.array(0.01, np.float32), "ws"),
             init(np.array(0, np.int8), "wz")]
    nodes = [helper.make_node("QLinearConv", ["x", "s", "z", "w", "ws", "wz", "s", "z"], ["y"], name="pw",
                              domain="com.microsoft", channels_last=1)]
    return model(nodes, [vi("x", [1, side, side, cin], T.UINT8)], [vi("y", None, T.UINT8)], inits,
                 extra_opsets=(("com.microsoft", 1),))


@pytest.mark.parametrize("build", ["depthwise", "pointwise"])
def test_an_8bit_convolution_is_not_priced_by_the_float_blocked_layout(tmp_path, build):
    """ONNX Runtime runs an 8-bit convolution as its channels-last QLinearConv, outside the float blocked layout
    (NCHWc): 58 channels are neither padded to whole blocks nor sent to the plain kernel's curve. Timed alone on a
    2-core EPYC VM: 58 -> 58 1 x 1 at 28 x 28 took what 56 -> 56 took (4.6 us); 58 depthwise channels at 56 x 56,
    stride 2, 21 us where the plain depthwise curve said 83. With a layout of 8-channel blocks and a plain-kernel
    curve ten times slower than the blocked one, 58 channels cost what 56 cost per MAC; a float convolution of 58
    channels still takes the plain kernel (the control)."""
    d = _cpu_dict(int8_depthwise_share=1.0, cpu_layout={"block": 8, "grouped_min_width": 8},
                  shape_efficiency={"depthwise_conv.k3s1": {3136: 0.5}, "depthwise_conv.unblocked_k3": {3136: 0.05},
                                    "conv.k1": {784: 0.5}, "conv.unblocked_k1": {784: 0.05}})

    def per_mac(c, dtype="uint8"):
        if build == "depthwise":
            m, macs = _depthwise8(True, dtype, c), c * 56 * 56 * 9
        else:
            m, macs = _pointwise8(c, c), c * c * 28 * 28
        return _kernel_time(tmp_path, m, f"{build}{c}{dtype}.onnx", d) / macs

    assert per_mac(58) == pytest.approx(per_mac(56), rel=0.05)
    if build == "depthwise":
        assert per_mac(58, "float32") > 3 * per_mac(56, "float32")


def _qdq_shuffle(batch):
    """ShuffleNet V2's channel shuffle as its export computes the shape: two inputs x -> Q -> DQ, Concat -> Q ->
    DQ, read by a Shape (-> Gather -> Concat: the target shape) and by the Reshape to [N, 2, 8, 8, 8], Q -> DQ,
    Transpose (0, 2, 1, 3, 4), Q -> DQ; ``batch`` 0: a symbolic batch."""
    init = numpy_helper.from_array
    inits = [init(np.array(0.05, np.float32), "s"), init(np.array(3, np.uint8), "z"),
             init(np.array([0], np.int64), "i0"), init(np.array([2], np.int64), "i2"), init(np.array([8], np.int64), "c8")]
    nodes = []
    for i in range(2):
        nodes += [helper.make_node("QuantizeLinear", [f"x{i}", "s", "z"], [f"q{i}"], name=f"q{i}"),
                  helper.make_node("DequantizeLinear", [f"q{i}", "s", "z"], [f"d{i}"], name=f"dq{i}")]
    nodes += [helper.make_node("Concat", ["d0", "d1"], ["c"], name="cat", axis=1),
              helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"], name="q_cat"),
              helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["cd"], name="dq_cat"),
              helper.make_node("Shape", ["cd"], ["sh"], name="shape"),
              helper.make_node("Gather", ["sh", "i0"], ["n"], name="g_n", axis=0),
              helper.make_node("Gather", ["sh", "i2"], ["h"], name="g_h", axis=0),
              helper.make_node("Concat", ["n", "i2", "c8", "h", "h"], ["tgt"], name="tgt", axis=0),
              helper.make_node("Reshape", ["cd", "tgt"], ["r"], name="reshape"),
              helper.make_node("QuantizeLinear", ["r", "s", "z"], ["rq"], name="q_r"),
              helper.make_node("DequantizeLinear", ["rq", "s", "z"], ["rd"], name="dq_r"),
              helper.make_node("Transpose", ["rd"], ["t"], name="transpose", perm=[0, 2, 1, 3, 4]),
              helper.make_node("QuantizeLinear", ["t", "s", "z"], ["tq"], name="q_t"),
              helper.make_node("DequantizeLinear", ["tq", "s", "z"], ["y"], name="dq_t")]
    n = batch or "N"
    return model(nodes, [vi("x0", [n, 8, 8, 8]), vi("x1", [n, 8, 8, 8])], [vi("y", None)], inits, opset=17)


@pytest.mark.parametrize("batch", [1, 0])
def test_a_dequantizelinear_read_only_by_folded_shape_arithmetic_is_dropped(tmp_path, batch):
    """ONNX Runtime folds the Shape of a tensor of static shape (and the arithmetic on it) before its QDQ fusions
    count who reads a DequantizeLinear: ShuffleNet V2's concatenation -> Q -> DQ, read by four Shape nodes and
    the shuffle's Reshape, became QLinearConcat -> Reshape -> Transpose on the 8-bit tensor, no DequantizeLinear
    between (dnnperf kept 32 such kernels in the model). With a symbolic batch nothing folds and the
    DequantizeLinear stays a kernel for the Shape (its optimised graph asserted in both cases)."""
    from dnnperf.inspection import recomputed
    from dnnperf.ir import ShapeOverrides
    from dnnperf.qdq_runs import ort_cpu_quantized

    m = _qdq_shuffle(batch)
    ran = _ort_runs(tmp_path, m)
    assert ran.count("DequantizeLinear") == (1 if batch else 2) and "QLinearConcat" in ran
    view = ort_cpu_quantized(recomputed(inspect_model(save(m, tmp_path, "mine.onnx"), ShapeOverrides(batch=1))))
    rows = {r.node.name: r.workload for r in view.rows}
    assert rows["dq_cat"].launches == (0 if batch else 1)
    assert rows["transpose"].dtype == "uint8" and rows["transpose"].launches == 1


def test_onnx_runtimes_optimised_qdq_graph_is_scored_whole(tmp_path):
    """ONNX Runtime's CPU-optimised graph of a QDQ convolution (what a user saves with
    ``optimized_model_filepath``) holds a com.microsoft QLinearConv with ``channels_last`` between two
    Transposes: N x H x W x C data, OIHW weights. Read as NCHW, its 8 input 'channels' (the width) contradicted
    its weights and every node after it went unscored; now it is the same convolution (8 x 8 input, no
    padding): 6 x 6 outputs x 8 filters x 16 channels x 3 x 3 = 41,472 MACs, in uint8."""
    import onnx

    m = _qdq_product(op="Conv")
    assert _ort_runs(tmp_path, m).count("QLinearConv") == 1
    opt = onnx.load(str(tmp_path / "ort.onnx"))
    conv = next(n for n in opt.graph.node if n.op_type == "QLinearConv")
    assert conv.domain == "com.microsoft" and any(a.name == "channels_last" and a.i == 1 for a in conv.attribute)
    insp = inspect_model(str(tmp_path / "ort.onnx"))
    assert not insp.unsupported
    w = next(r.workload for r in insp.rows if r.node.op_type == "QLinearConv")
    assert (w.macs, w.dtype, w.family) == (41_472, "uint8", "conv")
    assert insp.graph.tensors[conv.output[0]].shape == (1, 6, 6, 8)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearSigmoid"])
def test_a_small_qlinear_loop_runs_on_one_thread(tmp_path, op):
    """ONNX Runtime's thread-pool cost model splits a QLinear element loop only past 210,000 cycles at 1 + 2 x 11/64
    cycles an element (156,279 elements: one thread at 156,000, two at 157,000 on a 2-core VM). On a profile of 2
    threads, whose figure was timed on all of them, a 150,000-element loop takes twice the time per element of a
    160,000-element one; a 1-thread profile's does not move; on 64 threads a longer loop is cut into blocks of
    at least 40,000 cycles, and only as many threads as blocks work (the figure's own loop on 14 of them)."""
    import yaml

    from dnnperf.api import _score
    from dnnperf.hardware import profile_from_dict

    init = numpy_helper.from_array
    d = yaml.safe_load(open(os.path.join(ROOT, "profiles", "cpu-avx2.yaml"), encoding="utf-8"))
    d["parallelism"] = {**d["parallelism"], "compute_units": 2}
    d["op_efficiency"] = {op: 0.3}

    def per_element(n, units=2):
        ins = ["x", "s", "z", "x", "s", "z", "s", "z"] if op == "QLinearAdd" else ["x", "s", "z", "s", "z"]
        m = model([helper.make_node(op, ins, ["y"], name="q", domain="com.microsoft")], [vi("x", [1, n], T.UINT8)],
                  [vi("y", None, T.UINT8)], [init(np.array(0.05, np.float32), "s"), init(np.array(128, np.uint8), "z")],
                  extra_opsets=(("com.microsoft", 1),))
        hw = profile_from_dict({**d, "parallelism": {**d["parallelism"], "compute_units": units}}, "x")
        c = next(c for c in _score(inspect_model(save(m, tmp_path, f"q{n}.onnx")), hw, Settings()).layers)
        return (c.time_s - c.t_launch) / n

    assert per_element(150_000) == pytest.approx(2 * per_element(160_000), rel=0.02)
    assert per_element(156_000) == pytest.approx(2 * per_element(157_000), rel=0.02)
    assert per_element(150_000, units=1) == pytest.approx(per_element(160_000, units=1), rel=0.02)
    # past the split point, blocks of at least 40,000 cycles (29,767 elements): the figure's 393,216 elements ran on
    # 14 of 64 threads, 1,572,864 run on 53
    assert per_element(393_216, units=64) == pytest.approx(per_element(1_572_864, units=64) * 53 / 14, rel=0.02)


@pytest.mark.parametrize("scan", [False, True], ids=["parsed", "skeleton-scan"])
@pytest.mark.parametrize("bias_factor, fused", [(1.0, True), (1.3, False)])
def test_per_channel_scales_are_read_for_the_bias_rule(tmp_path, monkeypatch, scan, bias_factor, fused):
    """A per-channel QDQ convolution (8 weight scales, 8 bias scales: ONNX Runtime's quantizer with
    per_channel=True) fuses only where each bias scale is its input scale times its weight scale (within 1% + 1e-6).
    Per-channel scales are arrays, not the tiny constants the loader keeps, so they were dropped with the weights and
    every such bias was taken to fit. Kept now, read from the parsed file and from a large file's byte-level scan
    alike: with the bias scales 1.3x off (0.0013 x 0.02 = 2.6e-5 against 2e-5: 6e-6 over) the layer runs in float,
    as ONNX Runtime's graph has it."""
    from dnnperf.load import read

    init = numpy_helper.from_array
    ws = np.full(8, 0.02, np.float32)
    inits = [init(np.array(0.001, np.float32), "xs"), init(np.array(128, np.uint8), "xz"),
             init(np.ones((8, 4, 3, 3), np.int8), "wq"), init(ws, "ws"), init(np.zeros(8, np.int8), "wz"),
             init(np.ones(8, np.int32), "bq"), init((0.001 * ws * bias_factor).astype(np.float32), "bs"),
             init(np.zeros(8, np.int32), "bz"), init(np.array(0.05, np.float32), "ys"),
             init(np.array(128, np.uint8), "yz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="q_in"),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dq_in"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], name="dq_w", axis=0),
             helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"], name="dq_b", axis=0),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"], name="q_out"),
             helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["y"], name="dq_out")]
    m = model(nodes, [vi("x", [1, 4, 16, 16])], [vi("y", None)], inits, opset=17)
    assert ("QLinearConv" in _ort_runs(tmp_path, m)) == fused
    if scan:
        monkeypatch.setattr(read, "_SCAN_ABOVE_BYTES", 0)  # the path files over 4 MB take
    insp = inspect_model(save(m, tmp_path, "mine.onnx"))
    assert insp.graph.values["bs"].shape == (8,)
    cpu = {c.layer.name: c.layer.workload for c in analyze(insp, load_profile("cpu-avx2"), Settings()).score.layers}
    assert cpu["conv"].dtype == ("int8" if fused else "float32")


@pytest.mark.parametrize("op, kernel", [("Conv", None), ("MatMul", None), ("Gemm", "QGemm")])
def test_int8_data_left_signed_runs_only_gemm_quantized_on_a_cpu(tmp_path, op, kernel):
    """int8 activations whose Q -> DQ pairs are read by two nodes stay int8 on ONNX Runtime's CPU provider (its
    uint8 rewrite takes pairs read once): its QLinearConv and QLinearMatMul refuse int8 data, its QGemm takes it.
    Both sides read twice here (a Relu on each DequantizeLinear besides the product), so in and out agree and only
    the data type decides; ONNX Runtime's graph asserted, a CPU estimate alike."""
    from dnnperf.api import _score

    m = _qdq_product(op=op, act="int8", **({"trans_b": 1} if op == "Gemm" else {}))
    for src, name in (("xd", "side"), ("o", "side2")):
        m.graph.node.append(helper.make_node("Relu", [src], [name], name=name))
        m.graph.output.append(vi(name, None))
    ran = _ort_runs(tmp_path, m)
    assert (kernel in ran) if kernel else (op in ran)
    insp = inspect_model(save(m, tmp_path, "mine.onnx"))
    layers = _score(insp, load_profile("cpu-avx2"), Settings()).layers
    w = next(c.layer.workload for c in layers if c.layer.name == "op")
    assert (w.dtype == "int8") == bool(kernel)
