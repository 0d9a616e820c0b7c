"""ONNX Runtime's blocked-layout ops (com.microsoft.nchwc), as its CPU-optimised graph saved to disk holds them."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from dnnperf.api import analyze, inspect_model
from dnnperf.hardware import load_profile
from dnnperf.scoring import Settings
from helpers import model, save, vi


def _chain():
    """x [1, 16, 32, 32] -> Conv 3 x 3 (32) + Relu -> MaxPool 2 x 2 -> Conv 1 x 1 (32) + the pool (a residual) ->
    GlobalAveragePool -> Flatten -> Gemm (10): 16 and 32 channels, whole blocks for 8 or 16-wide blocks."""
    rng = np.random.default_rng(0)
    init = numpy_helper.from_array
    inits = [init(rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1, "w1"),
             init(np.zeros(32, np.float32), "b1"),
             init(rng.standard_normal((32, 32, 1, 1)).astype(np.float32) * 0.1, "w2"),
             init(rng.standard_normal((10, 32)).astype(np.float32), "wf")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="c1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="r1"),
             helper.make_node("MaxPool", ["r1"], ["p"], name="p", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "w2"], ["c2"], name="c2"),
             helper.make_node("Add", ["c2", "p"], ["s"], name="s"),
             helper.make_node("GlobalAveragePool", ["s"], ["g"], name="g"),
             helper.make_node("Flatten", ["g"], ["f"], name="f"),
             helper.make_node("Gemm", ["f", "wf"], ["y"], name="fc", transB=1)]
    return model(nodes, [vi("x", [1, 16, 32, 32])], [vi("y", None)], inits)


def test_onnx_runtimes_blocked_graph_costs_what_the_model_costs(tmp_path):
    """A model ONNX Runtime optimised for its CPU provider and saved holds com.microsoft.nchwc Conv (its activation
    and the residual add fused), MaxPool, GlobalAveragePool and ReorderOutput nodes: dnnperf had no cost for any of
    them (every node unscored, 0 s). Each is now the standard op it replaces, its conversions left to dnnperf's own
    layout pass: by hand 32 x 32 x 32 x 16 x 9 + 16 x 16 x 32 x 32 + 10 x 32 = 4,981,056 MACs, as the model before
    optimisation has, and the same estimate as that model with --fusion typical on a CPU profile."""
    import onnx

    ort = pytest.importorskip("onnxruntime")
    m = _chain()
    src = save(m, tmp_path, "m.onnx")
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    so.log_severity_level = 3
    ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    opt = onnx.load(str(tmp_path / "opt.onnx"))
    domains = {(n.domain, n.op_type) for n in opt.graph.node}
    if not any(d == "com.microsoft.nchwc" for d, _ in domains):
        pytest.skip("this CPU's ONNX Runtime writes no blocked layout (no AVX2 / AVX-512 NCHWc kernels)")
    assert ("com.microsoft.nchwc", "Conv") in domains and ("com.microsoft.nchwc", "ReorderOutput") in domains
    insp = inspect_model(str(tmp_path / "opt.onnx"))
    assert not insp.unsupported
    macs = sum(r.workload.macs for r in insp.rows if r.workload is not None)
    assert macs == 32 * 32 * 32 * 16 * 9 + 16 * 16 * 32 * 32 + 10 * 32 == 4_981_056
    hw = load_profile("cpu-avx2")
    t_opt = analyze(insp, hw, Settings(fusion="typical")).score.totals["latency_s"]
    t_src = analyze(inspect_model(src), hw, Settings(fusion="typical")).score.totals["latency_s"]
    assert t_opt == pytest.approx(t_src, rel=0.02)


def test_a_blocked_depthwise_layer_reads_its_input_padded_to_whole_blocks(tmp_path):
    """A 24-channel stem, a max pool ONNX Runtime runs unblocked, a 24-channel depthwise and a pointwise convolution
    (ShuffleNet V2's opening): with 16-channel blocks (AVX-512) it reorders the blocked layers' weights to 32
    channels (the depthwise one to 32 groups) and converts the pool's 24-channel output back into blocks, while the
    tensors' recorded dims keep 24 channels. Read as they are, the depthwise layer contradicted its input (24 channels
    against 32) and it and the rest went unscored; it reads the padded input now. With 8-channel blocks (AVX2)
    nothing is padded. Either way the saved graph is scored whole and costs what the model does with --fusion
    typical, within the padding's work."""
    import onnx

    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(1)
    init = numpy_helper.from_array
    inits = [init(rng.standard_normal((24, 3, 3, 3)).astype(np.float32) * 0.1, "w1"),
             init(rng.standard_normal((24, 1, 3, 3)).astype(np.float32) * 0.1, "w2"),
             init(rng.standard_normal((24, 24, 1, 1)).astype(np.float32) * 0.1, "w3")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="stem", pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"], name="r1"),
             helper.make_node("MaxPool", ["r1"], ["p"], name="p", kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["p", "w2"], ["c2"], name="dw", pads=[1, 1, 1, 1], strides=[2, 2], group=24),
             helper.make_node("Conv", ["c2", "w3"], ["c3"], name="pw"),
             helper.make_node("Relu", ["c3"], ["y"], name="r3")]
    src = save(model(nodes, [vi("x", [1, 3, 112, 112])], [vi("y", None)], inits), tmp_path, "m.onnx")
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    so.log_severity_level = 3
    ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    if not any(n.domain == "com.microsoft.nchwc" for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node):
        pytest.skip("this CPU's ONNX Runtime writes no blocked layout (no AVX2 / AVX-512 NCHWc kernels)")
    insp = inspect_model(str(tmp_path / "opt.onnx"))
    assert not insp.unsupported
    hw = load_profile("cpu-avx2")
    t_opt = analyze(insp, hw, Settings(fusion="typical")).score.totals["latency_s"]
    t_src = analyze(inspect_model(src), hw, Settings(fusion="typical")).score.totals["latency_s"]
    assert t_src * 0.98 <= t_opt <= t_src * 1.4
