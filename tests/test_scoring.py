"""The scoring model against hand calculation and the article's claims."""

import os

import pytest

from dnnperf import rules
from dnnperf.scoring import Settings
from dnnperf.api import analyze, build_layers, inspect_model
from dnnperf.ir import ShapeOverrides
from dnnperf.hardware import load_profile
from dnnperf.workload import Gemm
from helpers import SAMPLES, chain_1x1, conv_model, model, sample_overrides, save, vi, weight
from onnx import TensorProto as T
from onnx import helper


def run(tmp_path, m, hw="v100", name="m.onnx", **settings):
    insp = inspect_model(save(m, tmp_path, name))
    return analyze(insp, load_profile(hw), Settings(**settings))


def conv_layer(rep):
    return next(c for c in rep.score.layers if c.layer.op_type.startswith("Conv"))


# -- rules, by hand ---------------------------------------------------------------------------

def test_rules_by_hand():
    assert rules.occupancy(245, 163_840) == pytest.approx(245 / 163_840)
    assert rules.occupancy(200_000, 163_840) == 1.0
    assert rules.dim_fit(100, 256) == pytest.approx(100 / 256)  # 39%
    assert rules.tile_efficiency(Gemm(2500, 100, 900), (16, 16, 16)) == pytest.approx(
        (2500 / 2512) * (100 / 112) * (900 / 912))
    assert rules.tile_efficiency(Gemm(49, 100, 256), (1, 256, 256)) == pytest.approx(100 / 256)
    assert rules.aligned(Gemm(10, 100, 64), 8) is False and rules.aligned(Gemm(10, 104, 64), 8) is True
    assert rules.transfer_time(16_000_000, 16) == pytest.approx(1e-3)
    assert rules.launch_time(3, 5) == pytest.approx(15e-6)
    assert rules.lanes_needed_batch(25_088, 1, 163_840) == 7


def test_elementwise_layer_time_by_hand(tmp_path):
    # Relu on 1x100x100x100 fp32 moves 8 MB, more than 75% of the V100's 6 MB L2, so from DRAM at
    # the 88% of 900 GB/s streaming kernels reach on Volta (a V100's published copy rate, 790 GB/s;
    # gpu_generations.yaml) = 10.10 us, after the kernel's 2 us start (graph_stream_kernel_us): 12.10 us;
    # the eager runtime's host spends 5 us enqueueing it before the device can start: 17.10 us
    big = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1, 100, 100, 100])], [vi("y", None)])
    c = run(tmp_path, big, name="big.onnx").score.layers[0]
    assert c.t_memory == pytest.approx(8_000_000 / (900e9 * 0.88))
    assert c.t_device == pytest.approx(2e-6 + 8_000_000 / (900e9 * 0.88))
    assert c.time_s == pytest.approx(5e-6 + 2e-6 + 8_000_000 / (900e9 * 0.88))
    assert c.cause == "memory" and c.unit == "cuda_cores"
    # 1x100x50x50 moves 2 MB: it fits the L2 (its producer just wrote it), read at 2.5 x 900 GB/s =
    # 0.89 us; a kernel takes at least 5 us on the device (min_kernel_us), more than 2 + 0.89: 5 us
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1, 100, 50, 50])], [vi("y", None)])
    rep = run(tmp_path, m)
    c = rep.score.layers[0]
    assert c.t_memory == pytest.approx(2_000_000 / (900e9 * 2.5))
    assert c.t_device == pytest.approx(5e-6)
    assert c.time_s == pytest.approx(5e-6 + 5e-6)  # enqueued by the host, then run
    assert c.cause in ("launch_overhead", "memory")
    # a captured graph removes the host launch: the graph starts the streaming kernel in 2 us
    # (graph_stream_kernel_us), which then reads its 2 MB from L2 in 0.89 us: 2.89 us
    g = run(tmp_path, m, runtime="graph").score.layers[0]
    assert g.time_s == pytest.approx(2e-6 + 2_000_000 / (900e9 * 2.5))


def test_report_gives_each_layers_device_time_apart_from_the_hosts(tmp_path):
    """The JSON layer's `device_s` is what a profiler's kernel row shows: the big Relu above on the V100
    takes its 2 us start + 8 MB at 88% of 900 GB/s = 12.10 us on the device, and 5 us more of host
    enqueueing in its eager `latency_s`; in a captured graph the two are the same."""
    from dnnperf.documents import report_dict

    big = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1, 100, 100, 100])], [vi("y", None)])
    eager = report_dict(run(tmp_path, big, name="big.onnx"))["layers"][0]
    assert eager["device_s"] == pytest.approx(2e-6 + 8_000_000 / 792e9, rel=1e-5)
    assert eager["latency_s"] == pytest.approx(5e-6 + 2e-6 + 8_000_000 / 792e9, rel=1e-5)
    graph = report_dict(run(tmp_path, big, name="big.onnx", runtime="graph"))["layers"][0]
    assert graph["device_s"] == graph["latency_s"] == pytest.approx(2e-6 + 8_000_000 / 792e9, rel=1e-5)


def test_losses_sum_to_latency(tmp_path):
    rep = analyze(inspect_model(os.path.join(SAMPLES, "mobilenet_v2.onnx")), load_profile("v100"), Settings())
    for c in rep.score.layers:
        assert c.t_ideal + sum(c.losses.values()) == pytest.approx(c.time_s, rel=1e-9, abs=1e-15)
    t = rep.score.totals
    assert t["ideal_s"] + sum(rep.score.losses.values()) == pytest.approx(t["latency_s"], rel=1e-9)


# -- the article's claims ----------------------------------------------------------------------

def test_2450_mac_conv_is_parallelism_bound_on_v100(tmp_path):
    # 245 outputs x 10 MACs: one 128 x 8 tile on one of 80 SMs, a 2-step K loop: the GPU idles
    c = conv_layer(run(tmp_path, conv_model(10, 5, 7, 7, 1)))
    assert c.cause == "parallelism"
    assert c.occupancy < 0.01


def test_225M_conv_on_v100_needs_aligned_channels_for_tensor_cores(tmp_path):
    c = conv_layer(run(tmp_path, conv_model(100, 100, 50, 50, 3, pads=[1, 1, 1, 1], dtype=T.FLOAT16)))
    # 100 channels are not a multiple of 8: cuDNN's tensor-core kernels need NHWC vectors of 8 halves,
    # so the layer runs on a generic CUDA-core kernel; at 104 channels the tensor cores take it
    assert c.unit == "cuda_cores"
    c2 = conv_layer(run(tmp_path, conv_model(104, 104, 50, 50, 3, pads=[1, 1, 1, 1], dtype=T.FLOAT16)))
    assert c2.unit == "tensor_cores"
    assert c2.t_device < c.t_device / 2
    # at batch 1 the 2,500 x 104 output is 20 tiles of 128 x 128 for 80 SMs, each walking 936 deep:
    # the loss is parallelism (few tiles, a long K loop), not compute
    assert c2.cause == "parallelism"


def test_225M_conv_on_a100_fp16_runs_on_tensor_cores(tmp_path):
    c = conv_layer(run(tmp_path, conv_model(100, 100, 50, 50, 3, pads=[1, 1, 1, 1], dtype=T.FLOAT16), hw="a100"))
    # Ampere's libraries pad channels for the tensor cores: 450 MOPs at 312 TOP/s = 1.44 us ideal
    assert c.unit == "tensor_cores"
    assert c.t_ideal == pytest.approx(450e6 / 312e12)
    assert c.t_ideal < c.time_s < 20 * c.t_ideal


def test_fp32_on_v100_never_reaches_tensor_core_peak(tmp_path):
    # a pointwise convolution does every multiply of its MAC count (a 3 x 3 one at stride 1 may run a
    # Winograd or FFT algorithm and pass 15.7 TFLOP/s of MAC-count work: test_gpu)
    rep = run(tmp_path, conv_model(256, 256, 56, 56, 1))
    c = conv_layer(rep)
    assert c.unit == "cuda_cores" and c.precision == "fp32"
    assert c.cause == "specialization"
    assert rep.score.totals["achieved_tops"] <= 15.7
    fixes = [f["id"] for f in c.fixes]
    assert "use_specialized_units" in fixes


def test_equal_macs_differ_widely(tmp_path):
    # one dense 3x3 conv vs nine 1x1 convs: both 56*56*64*64*9 = 115,605,504 MACs; the dense one runs
    # as one Winograd kernel, the thin ones as nine launches, each at least 5 us
    dense = run(tmp_path, conv_model(64, 64, 56, 56, 3, pads=[1, 1, 1, 1]), name="a.onnx")
    thin = run(tmp_path, chain_1x1(64, 56, 56, 9), name="b.onnx")
    assert dense.score.totals["macs"] == thin.score.totals["macs"] == 115_605_504
    device = [sum(c.t_device for c in r.score.layers) for r in (dense, thin)]
    assert device[1] >= 9 * 5e-6 * (1 - 1e-9) and device[1] > 2.5 * device[0]
    # eager: the host enqueues each 1x1 in 5 us, no longer than the one before runs (every kernel takes
    # at least 5 us), so after the first launch the device never waits
    assert sum(c.time_s for c in thin.score.layers) == pytest.approx(5e-6 + device[1])


def test_host_runs_ahead_of_the_device(tmp_path):
    # kernels enqueued on a stream: kernel i starts at the later of the previous one's end and the
    # host having enqueued it. Device 10, 1, 1, 1, 1 us, host 5 us each: enqueued at 5, 10, 15, 20,
    # 25; run 5-15, 15-16, 16-17, 20-21, 25-26 -> increments 15, 1, 1, 4, 5 (26 us, not 5 x max = 30)
    steps = rules.stream_timeline([10e-6, 1e-6, 1e-6, 1e-6, 1e-6], [5e-6] * 5)
    assert steps == pytest.approx([15e-6, 1e-6, 1e-6, 4e-6, 5e-6])
    assert rules.stream_timeline([3e-6, 3e-6], [0.0, 0.0]) == [3e-6, 3e-6]  # no host cost: the device alone
    # on the H200 an eager framework spends 20 us per kernel: a 256-channel 3x3 stride-4 convolution
    # at batch 32 (29.6 GFLOP: far longer than 20 us on the device), a global average pool (25.7 MB
    # read at 0.75 x 4.8 TB/s, ~7 us) and three ReLUs on its 32 KB output (the 5 us device floor):
    # their launches hide behind the convolution, so the network takes the first launch plus the
    # device's work (~D + 42 us), not each layer's max(device, host) (D + 4 x 20 us)
    relus = [helper.make_node("Relu", ["p" if i == 0 else f"r{i}"], ["z" if i == 2 else f"r{i + 1}"]) for i in range(3)]
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[4, 4])
    pool = helper.make_node("GlobalAveragePool", ["y"], ["p"])
    m = model([conv, pool] + relus, [vi("x", [32, 256, 112, 112])], [vi("z", None)], [weight("w", [256, 256, 3, 3])])
    rep = run(tmp_path, m, hw="h200", name="q.onnx")
    cs = [c for c in rep.score.layers if c.time_s > 0]
    assert [c.layer.op_type for c in cs] == ["Conv", "GlobalAveragePool", "Relu", "Relu", "Relu"]
    assert all(c.t_launch == pytest.approx(20e-6) for c in cs)
    assert cs[0].t_device > 4 * 20e-6 and all(c.t_device < 20e-6 for c in cs[1:])
    total = sum(c.time_s for c in cs)  # the layers' part of the latency (the input's copy comes on top)
    assert total == pytest.approx(20e-6 + sum(c.t_device for c in cs))
    assert total < sum(max(c.t_device, c.t_launch) for c in cs) - 30e-6
    for c in cs[1:]:  # their launches cost the device nothing
        assert c.time_s == pytest.approx(c.t_device) and c.losses["launch_overhead"] <= c.t_device


def test_shufflenet_layers_have_higher_intensity_than_mobilenet():
    def conv_intensity(name):
        insp = inspect_model(os.path.join(SAMPLES, f"{name}.onnx"))
        ws = [r.workload for r in insp.costed() if r.workload.is_matrix]
        return sum(w.ops for w in ws) / sum(w.bytes_total for w in ws), sum(w.macs for w in ws)

    shuffle, shuffle_macs = conv_intensity("shufflenet_v2_x1_0")
    mobile, mobile_macs = conv_intensity("mobilenet_v2")
    assert shuffle > mobile
    assert 0.4 < shuffle_macs / mobile_macs < 0.6  # the same ballpark of MACs (0.145 vs 0.301 G)


def test_100_channels_fit_a_256_systolic_array_poorly(tmp_path):
    m = conv_model(256, 100, 14, 14, 1, dtype=T.INT8)
    c = conv_layer(run(tmp_path, m, hw="tpu-v1"))
    assert c.tile_efficiency == pytest.approx(100 / 256)
    assert c.cause == "specialization" or c.losses["specialization"] > 0
    m2 = conv_model(256, 256, 14, 14, 1, dtype=T.INT8)
    c2 = conv_layer(run(tmp_path, m2, hw="tpu-v1", name="b.onnx"))
    assert c2.tile_efficiency == pytest.approx(1.0)


def test_systolic_occupancy_counts_weight_blocks_and_rows():
    """A weight-stationary 128 x 128 array costs max(M, 128) cycles a K x N weight block; 8 arrays
    take the blocks in rounds, or split the rows when there are fewer blocks than arrays."""
    tile = (1, 128, 128)
    # 6 outputs reduced over 6,728 inputs at M = 1: 53 blocks, 7 rounds of 128 cycles
    assert rules.systolic_occupancy(Gemm(1, 6, 6728), tile, 8) == pytest.approx(53 / (8 * 7 * 128))
    # a 56 x 56 map, 64 filters of 3 x 3 x 64: 5 blocks share 3,136 rows over 8 arrays (1,960 cycles)
    assert rules.systolic_occupancy(Gemm(3136, 64, 576), tile, 8) == pytest.approx(1.0)
    # 7 x 7 map, 512 filters of 3 x 3 x 512: 144 blocks, 18 rounds of 128 cycles for 49 rows
    assert rules.systolic_occupancy(Gemm(49, 512, 4608), tile, 8) == pytest.approx(144 * 49 / (8 * 18 * 128))
    # one block, 64 rows on one 256 x 256 array: the block's load (256 cycles) is not hidden
    assert rules.systolic_occupancy(Gemm(64, 200, 200), (1, 256, 256), 1) == pytest.approx(64 / 256)
    # grouped: 32 groups of 1 x 9 are 32 blocks; 12,544 rows each, 4 rounds
    assert rules.systolic_occupancy(Gemm(12544, 1, 9, 32), tile, 8) == pytest.approx(1.0)


def test_a_thin_product_on_a_tpu_is_not_starved_twice(tmp_path):
    """A [1, 6,728] x [6,728, 6] Gemm (a spatial transformer's localisation head) on a TPU v4 was 413 us:
    6 outputs over 131,072 MAC lanes (4.6e-5), on top of the tile fit that already counts the 6 of 128
    columns. Its 53 weight blocks take 7 rounds of 128 cycles on 8 MXUs: fp32 (3 bf16 passes, 92 TOP/s)
    80,736 ops / 92e12 / (tile fit x occupancy) + the 1 us launch, and the batch fix finds 128 rows."""
    m = model([helper.make_node("Gemm", ["x", "w"], ["y"])], [vi("x", [1, 6728])], [vi("y", None)],
              [weight("w", [6728, 6])])
    rep = run(tmp_path, m, hw="tpu-v4")
    c = rep.score.layers[0]
    fit = (6 / 128) * (6728 / (53 * 128))
    occ = 53 / (8 * 7 * 128)
    assert c.tile_efficiency == pytest.approx(fit)
    assert c.occupancy == pytest.approx(occ)
    assert c.t_compute == pytest.approx(2 * 6728 * 6 / 92e12 / (fit * occ), rel=1e-6)
    assert c.time_s == pytest.approx(c.t_compute + 1e-6, rel=1e-3)
    text = next(f["text"] for f in c.fixes if f["id"] == "bigger_batch")
    assert text.startswith("batch 1 -> 128 raises occupancy from 0.7% to 94.6% (weight blocks over 8 systolic arrays"), text


def test_a_vector_tile_padding_is_charged_once(tmp_path):
    """A Raspberry Pi 4 (4 cores x 4-wide fp32 NEON = 32 lanes, tile [1, 4, 1], 0.048 TOP/s, held at 0.8 of
    its clock): an [8, 1,024] x [1,024, 1] product pads its one column to the 4-wide vector, so its 8
    outputs fill 8 x 4 = 32 lanes doing a quarter of their work: 16,384 ops / (0.048e12 x 1/4) / 0.8 =
    1.71 us. It was 6.83 us, the padding charged again as 24 idle lanes (occupancy 8 / 32), and the
    [8, 1,024] x [1,024, 2] product, twice the work on the same lanes, took half the time (3.41 us)."""
    for n in (1, 2):
        m = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [8, 1024])], [vi("y", None)],
                  [weight("w", [1024, n])])
        c = run(tmp_path, m, hw="raspberry-pi-4", name=f"n{n}.onnx").score.layers[0]
        assert c.tile_efficiency == pytest.approx(n / 4)
        assert c.occupancy == pytest.approx(1.0)
        assert c.t_compute == pytest.approx(2 * 8 * 1024 * n / (0.048e12 * n / 4) / 0.8, rel=1e-6)
    # a batch of 2 rows pads to 2 x 4 = 8 of the 32 lanes, 4 a sample: a batch of 8 fills them (the fix
    # counted 1 output a sample: "batch 2 -> 16 ... from 6.2% to 50.0%; all 32 lanes busy from batch 32")
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [2, 1024])], [vi("y", None)],
              [weight("w", [1024, 1])])
    c = run(tmp_path, m, hw="raspberry-pi-4", name="rows2.onnx").score.layers[0]
    assert c.occupancy == pytest.approx(8 / 32)
    text = next(f["text"] for f in c.fixes if f["id"] == "bigger_batch")
    assert text == "batch 2 -> 8 raises lane occupancy from 25.0% to 100.0%", text
    # the lanes a padded product fills: 8 x 1 on a 4-wide vector 8 x 4 = 32; 8 x 6 pads to 8 x 8 = 64; work
    # that is not a product counts its own outputs
    assert rules.padded_work(8, Gemm(8, 1, 1024), (1, 4, 1)) == pytest.approx(32)
    assert rules.padded_work(8 * 6, Gemm(8, 6, 1024), (1, 4, 1)) == pytest.approx(64)
    assert rules.padded_work(48, None, None) == 48


def test_work_without_arithmetic_keeps_its_datas_precision(tmp_path):
    """An fp16 cache's Concat on a CPU whose vector unit runs no fp16 (cpu-avx2: fp32 and int8) moves
    fp16 bytes and does no math: it is reported fp16 (it was 'fp32', the precision math would be
    upcast to); an fp16 Add, which computes, runs in fp32 between casts and says fp32."""
    m = model([helper.make_node("Concat", ["a", "b"], ["c"], axis=2), helper.make_node("Add", ["c", "c"], ["y"])],
              [vi("a", [1, 8, 64, 64], T.FLOAT16), vi("b", [1, 8, 1, 64], T.FLOAT16)], [vi("y", None, T.FLOAT16)])
    rep = run(tmp_path, m, hw="cpu-avx2")
    by = {c.layer.op_type: c for c in rep.score.layers}  # (and the casts ONNX Runtime puts around the Add)
    cat, add = by["Concat"], by["Add"]
    assert (cat.layer.op_type, cat.precision) == ("Concat", "fp16")
    assert cat.layer.workload.bytes_written == 8 * 65 * 64 * 2
    assert (add.layer.op_type, add.precision) == ("Add", "fp32")


def test_a_precision_no_unit_runs_is_upcast_to_the_fastest_fp32_unit(tmp_path):
    """An fp16 model on a TPU v4 (MXUs: bf16, int8, fp32 in 3 bf16 passes): XLA computes fp16 in fp32
    on the MXUs (92 TOP/s), not on the vector unit (8): a 4,096 x 4,096 x 4,096 fp16 product took
    2 x 4,096^3 / 8e12 = 17.2 ms, now / 92e12 = 1.49 ms (full tiles, 32 x 32 blocks of 4,096 rows on 8
    MXUs: no idle array). The advice is the device's own 16-bit float first: fp16 -> bf16 (275 TOP/s)."""
    from dnnperf.fixes import precision_advice

    m = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [4096, 4096], T.FLOAT16)], [vi("y", None, T.FLOAT16)],
              [weight("w", [4096, 4096], T.FLOAT16)])
    rep = run(tmp_path, m, hw="tpu-v4")
    c = rep.score.layers[0]
    assert (c.unit, c.precision) == ("mxu", "fp32")
    assert c.t_compute == pytest.approx(2 * 4096 ** 3 / 92e12, rel=1e-6)
    text, _ = precision_advice(rep)
    assert text.startswith("whole model fp16 -> bf16:"), text


def test_arrays_only_on_a_weight_stationary_matrix_unit(tmp_path):
    from dnnperf.errors import DnnperfError

    src = open(os.path.join(os.path.dirname(__file__), "..", "profiles", "tpu-v4.yaml")).read()
    assert "    arrays: 8" in src
    bad = tmp_path / "bad.yaml"
    bad.write_text(src.replace("peak_tops: {fp32: 8, bf16: 8}", "peak_tops: {fp32: 8, bf16: 8}\n    arrays: 2"))
    with pytest.raises(DnnperfError, match=r"units\[1\]\.arrays: only a unit serving 'matrix'"):
        load_profile(str(bad))
    bad.write_text(src.replace("    arrays: 8", "    arrays: 0"))
    with pytest.raises(DnnperfError, match=r"units\[0\]\.arrays: must be > 0"):
        load_profile(str(bad))


def test_batch_64_removes_starvation_on_a_big_gpu():
    p = os.path.join(SAMPLES, "resnet50.onnx")
    hw = load_profile("v100")
    b1 = analyze(inspect_model(p, ShapeOverrides(batch=1)), hw, Settings())
    b64 = analyze(inspect_model(p, ShapeOverrides(batch=64)), hw, Settings())
    assert b1.score.totals["mean_occupancy"] < 0.7
    assert b64.score.totals["mean_occupancy"] > 0.9  # tile and wave quantization leave a few SMs idle
    assert b1.score.losses["parallelism"] > 0.2 * b1.score.totals["latency_s"]
    assert b64.score.losses["parallelism"] < 0.1 * b64.score.totals["latency_s"]
    # fp32 stays on the CUDA cores: batching lifts throughput until the fp32 roof, not beyond
    assert b64.score.totals["throughput_per_s"] > 1.5 * b1.score.totals["throughput_per_s"]
    assert b64.score.totals["achieved_tops"] < 15.7


# -- other rules ------------------------------------------------------------------------------

def test_typical_fusion_merges_conv_relu(tmp_path):
    m = conv_model(16, 16, 32, 32, 3, pads=[1, 1, 1, 1], relu=True)
    insp = inspect_model(save(m, tmp_path))
    none = build_layers(insp, "none")
    fused = build_layers(insp, "typical")
    assert len(none) == 2 and len(fused) == 1
    assert fused[0].op_type == "Conv+Relu"
    inter = 16 * 32 * 32 * 4
    assert fused[0].workload.bytes_total == sum(l.workload.bytes_total for l in none) - 2 * inter
    assert fused[0].workload.launches == 1
    rep = analyze(insp, load_profile("v100"), Settings())
    assert rep.alt_latency_s["typical"] < rep.alt_latency_s["none"]
    relu = next(c for c in rep.score.layers if c.layer.op_type == "Relu")
    assert relu.fixes and any(f["id"] == "layer_fusion" for f in relu.fixes)


def test_layers_are_built_once_per_inspection_and_arguments(tmp_path, monkeypatch):
    """A report builds its layers again for each precision what-if and `--hw all` for each profile, with the
    same arguments: the second call reuses the first's layers (one build), other arguments build anew, and
    each call gets a list of its own (changing one leaves the next call's as it was)."""
    import dnnperf.layers as layers_mod

    insp = inspect_model(save(conv_model(16, 16, 32, 32, 3, pads=[1, 1, 1, 1], relu=True), tmp_path))
    calls = []
    real = layers_mod._built
    monkeypatch.setattr(layers_mod, "_built", lambda *a: calls.append(a[1:3]) or real(*a))
    first = build_layers(insp, "typical")
    first.clear()
    again = build_layers(insp, "typical")
    assert [la.op_type for la in again] == ["Conv+Relu"] and calls == [("typical", None)]
    assert [la.op_type for la in build_layers(insp, "typical", "fp16")] == ["Conv+Relu"]
    assert [la.op_type for la in build_layers(insp, "none")] == ["Conv", "Relu"]
    assert calls == [("typical", None), ("typical", "fp16"), ("none", None)]
    analyze(insp, load_profile("v100"), Settings())  # its what-ifs: the typical and fp16 builds above, reused
    analyze(insp, load_profile("t4"), Settings())
    assert len(calls) == len(set(calls)) and ("none", None) in calls


def test_fusion_and_precision_whatif_compose(tmp_path):
    # Conv+Relu fused in an fp16 what-if: every byte figure is the fp16 one, the fp16 intermediate
    # (16 x 32 x 32 x 2 bytes) is neither written nor read back
    insp = inspect_model(save(conv_model(16, 16, 32, 32, 3, pads=[1, 1, 1, 1], relu=True), tmp_path))
    parts = build_layers(insp, "none", "fp16")
    fused = build_layers(insp, "typical", "fp16")
    assert len(fused) == 1 and fused[0].workload.dtype == "float16"
    assert fused[0].workload.bytes_total == sum(l.workload.bytes_total for l in parts) - 2 * 16 * 32 * 32 * 2
    assert parts[1].saved_bytes_if_fused == 2 * 16 * 32 * 32 * 2
    hw = load_profile("tpu-v1")
    rep = analyze(insp, hw, Settings(precision="int8"))
    assert rep.alt_latency_s["typical"] <= rep.alt_latency_s["none"]  # fusion never makes it slower


def test_precision_whatif_halves_bytes(tmp_path):
    insp = inspect_model(save(conv_model(16, 16, 32, 32, 3, pads=[1, 1, 1, 1]), tmp_path))
    a = build_layers(insp, "none")[0].workload
    b = build_layers(insp, "none", "fp16")[0].workload
    assert b.bytes_total * 2 == a.bytes_total and b.dtype == "float16"


def test_heterogeneity_fallback_on_tpu_v1(tmp_path):
    # 256 KB of activations cross PCIe twice (to the host CPU and back): more than the 10 us launch
    m = model([helper.make_node("Softmax", ["x"], ["y"])], [vi("x", [256, 1000], T.INT8)], [vi("y", None, T.INT8)])
    c = run(tmp_path, m, hw="tpu-v1").score.layers[0]
    assert c.losses["heterogeneity"] > 0
    assert c.cause == "heterogeneity"


def test_thermal_derating(tmp_path):
    # compute-bound conv on a Raspberry Pi 4 sustaining 80% of its clock
    c = conv_layer(run(tmp_path, conv_model(64, 64, 28, 28, 3, pads=[1, 1, 1, 1]), hw="raspberry-pi-4"))
    t_before = c.t_compute * 0.8
    assert c.losses["thermal"] == pytest.approx(t_before * (1 / 0.8 - 1))


def test_input_io_and_prefetch(tmp_path):
    # a large fp32 input over PCIe 3 and a trivial network: the transfer dominates
    m = model([helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0)], [vi("x", [1, 3, 1024, 1024])],
              [vi("y", None)])
    insp = inspect_model(save(m, tmp_path))
    hw = load_profile("v100")
    plain = analyze(insp, hw, Settings())
    assert plain.score.input_transfer_s == pytest.approx(3 * 1024 * 1024 * 4 / 15.75e9)
    assert plain.top_cause == "input_io"
    assert any(f["id"] == "compress_inputs" for f in plain.model_fixes)
    pre = analyze(insp, hw, Settings(overlap_input=True))
    assert pre.score.totals["latency_s"] < plain.score.totals["latency_s"]


def test_more_bandwidth_or_peak_never_slower():
    insp = inspect_model(os.path.join(SAMPLES, "squeezenet1_1.onnx"))
    hw = load_profile("t4")
    base = analyze(insp, hw, Settings(), with_fixes=False).score.totals["latency_s"]
    faster_mem = hw.with_overrides(dram_gbs=hw.dram_gbs * 2)
    assert analyze(insp, faster_mem, Settings(), with_fixes=False).score.totals["latency_s"] <= base
    from dataclasses import replace

    units = tuple(replace(u, peak_tops={k: v * 2 for k, v in u.peak_tops.items()}) for u in hw.units)
    assert analyze(insp, hw.with_overrides(units=units), Settings(), with_fixes=False).score.totals["latency_s"] <= base


def test_gpu_batch_and_width_fixes_agree_with_the_model_rescored(tmp_path):
    """On a GPU a convolution's occupancy is its tile plan's (tiles in waves over the SMs), not its
    outputs over the lanes: the bigger-batch and wider-layer fixes quote the occupancy that the same
    convolution, exported at that batch or width, is scored with (they once quoted lanes: 'batch 1 ->
    1 raises lane occupancy from 21% to 100%' on an L4 profile)."""
    import re

    from dnnperf.fixes import Ctx, _bigger_batch, _shallower_wider

    rep = run(tmp_path, conv_model(512, 512, 7, 7, 3, pads=[1, 1, 1, 1]), "a100")
    c = conv_layer(rep)
    assert c.plan is not None and c.occupancy < 0.5
    text, _ = _bigger_batch(c, Ctx(rep))
    got = re.match(r"batch 1 -> (\d+) raises occupancy from ([\d.]+)% to ([\d.]+)% .* ([\d.]+) us per sample$", text)
    assert got, text
    b = int(got.group(1))
    assert b > 1 and float(got.group(2)) == pytest.approx(100 * c.occupancy, abs=0.05)
    big = conv_layer(run(tmp_path, conv_model(512, 512, 7, 7, 3, pads=[1, 1, 1, 1], batch=b), "a100", name="b.onnx"))
    assert float(got.group(3)) == pytest.approx(100 * big.occupancy, abs=0.05)
    assert float(got.group(3)) > float(got.group(2))
    # per sample: the batch's device time (the single layer's host wait, the same, aside) over the batch
    assert float(got.group(4)) * 1e-6 == pytest.approx((big.t_device + c.time_s - c.t_device) / b, rel=0.01)
    # from batch 2 the time per sample divides by the new batch (2 x the multiple), not by the multiple
    rep2 = run(tmp_path, conv_model(512, 512, 7, 7, 3, pads=[1, 1, 1, 1], batch=2), "a100", name="b2.onnx", batch=2)
    text2, _ = _bigger_batch(conv_layer(rep2), Ctx(rep2))
    got2 = re.match(r"batch 2 -> (\d+) raises .*: [\d.]+ us -> ([\d.]+) us, ([\d.]+) us per sample$", text2)
    assert got2, text2
    assert float(got2.group(3)) == pytest.approx(float(got2.group(2)) / int(got2.group(1)), rel=0.01)
    text, _ = _shallower_wider(c, Ctx(rep))
    got = re.match(r"output channels 512 -> 1024 raises occupancy from ([\d.]+)% to ([\d.]+)% ", text)
    assert got, text
    wide = conv_layer(run(tmp_path, conv_model(512, 1024, 7, 7, 3, pads=[1, 1, 1, 1]), "a100", name="w.onnx"))
    assert float(got.group(2)) == pytest.approx(100 * wide.occupancy, abs=0.05)
    # a product of two activations (attention scores): where a batch goes is not known, no figures
    att = model([helper.make_node("MatMul", ["q", "k"], ["s"], name="scores")],
                [vi("q", [1, 4, 64, 64]), vi("k", [1, 4, 64, 64])], [vi("s", None)])
    rep = run(tmp_path, att, "a100", name="att.onnx")
    c = next(c for c in rep.score.layers if c.layer.op_type == "MatMul")
    assert c.plan is not None and c.occupancy < 0.5
    text, saving = _bigger_batch(c, Ctx(rep))
    assert "dnnperf sweep --batch" in text and "%" in text and " -> " not in text and saving is None


def test_more_bandwidth_fix_is_the_layer_on_a_profile_with_twice_the_bandwidth(tmp_path):
    """The what-if is the layer scored on the profile with doubled bandwidth, launch and all: a GPU
    layer that its launch and the kernels' minimum time set gets no such fix (it once read 'with 2x
    the 900 GB/s this layer would take 5.01 us instead of 10 us' for a 16 KB Relu), a memory-bound
    one the time the doubled profile gives."""
    from dnnperf.fixes import Ctx, _more_bandwidth

    def relu(c, h):
        return model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [1, c, h, h])], [vi("y", None)])

    for hw in ("v100", "cpu-avx2"):
        prof = load_profile(hw)
        fast = prof.with_overrides(dram_gbs=2 * prof.dram_gbs,
                                   bandwidth_curve=tuple((mb, 2 * g) for mb, g in prof.bandwidth_curve))
        for channels, side in ((64, 8), (64, 56), (256, 112)):  # 16 KB to 12.8 MB read and as much written
            insp = inspect_model(save(relu(channels, side), tmp_path, f"r{side}.onnx"))
            rep = analyze(insp, prof, Settings())
            c = next(c for c in rep.score.layers if c.layer.op_type == "Relu")
            t2 = next(c for c in analyze(insp, fast, Settings(), with_fixes=False).score.layers
                      if c.layer.op_type == "Relu").time_s
            fix = _more_bandwidth(c, Ctx(rep))
            if fix is None:
                assert t2 >= 0.99 * c.time_s, (hw, side)
            else:
                assert c.time_s - fix[1] == pytest.approx(t2, rel=1e-6), (hw, side, fix[0])
            if side == 112:
                assert fix is not None and t2 < 0.75 * c.time_s  # memory-bound: most of the time halves


def test_fewer_launches_fix_counts_the_work_a_gpu_launch_hides(tmp_path):
    """A GPU layer shorter than its launch: the text says how much of its time the launch costs and
    how much is work (it once said '5 us against 0 of work' for a 3.2 MB MaxPool on a V100)."""
    from dnnperf.fixes import Ctx, _fewer_launches

    m = model([helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
              [vi("x", [1, 64, 112, 112])], [vi("y", None)])
    rep = run(tmp_path, m, "v100")
    c = next(c for c in rep.score.layers if c.layer.op_type == "MaxPool")
    text, saving = _fewer_launches(c, Ctx(rep))
    # 3.2 MB read + 0.8 MB written at the V100's bandwidth is microseconds of work, not nothing
    assert "against 0 of work" not in text and saving == pytest.approx(c.losses["launch_overhead"])
    assert 0 < saving < c.time_s
    # an fp16 convolution on the V100 launches once and runs cuDNN 7's two layout reorders too: the
    # time booked here is the host's and those kernels' starts and floors, not the host's alone
    rep = run(tmp_path, conv_model(64, 64, 56, 56, 3, pads=[1, 1, 1, 1], dtype=T.FLOAT16), "v100", name="c.onnx")
    c = conv_layer(rep)
    text, _ = _fewer_launches(c, Ctx(rep))
    assert c.layer.workload.launches == 1 and c.kernels == 3
    assert text.startswith("1 launch x 5 us of host time, and 3 device kernels that each take a start"), text


def test_a_reduction_that_misses_the_alignment_is_named_not_the_aligned_outputs(tmp_path):
    """An RGB stem (3 input channels x 3 x 3 = a reduction of 27) misses T4's int8 tensor-core rule
    of multiples of 16 on K while its 64 outputs meet it: the fix said 'output channels 64 -> 64 (a
    multiple of 16) lets tensor_cores take this layer: +0'; it names the input channels instead."""
    from dnnperf.fixes import Ctx, _fit_the_tile

    rep = run(tmp_path, conv_model(3, 64, 56, 56, 3, pads=[1, 1, 1, 1]), "t4", precision="int8")
    c = conv_layer(rep)
    assert c.unit != "tensor_cores"
    text, _ = _fit_the_tile(c, Ctx(rep))
    assert "64 -> 64" not in text
    assert text.startswith("the reduction depth 27 (3 input channels x 3 x 3) is not a multiple of 16")
    assert "3 -> 16" in text and "5.3x the MACs" in text


def test_padding_a_stems_channels_prices_what_the_padded_model_takes(tmp_path):
    """A100 and V100, fp16, batch 8: an RGB stem (3 channels, 7 x 7 stride 2) misses the tensor cores'
    channel rule (A100: the library's 8-value vectors; V100: its profile's alignment of 8) and runs on the
    CUDA cores (cause: unoptimized). The fix pads the channels to 8 and gives the time of the padded
    layer, which must be what dnnperf estimates for the same network exported with 8 input channels (in a
    captured graph: in eager a what-if keeps the layer's host wait, while the padded V100 layer also
    launches cuDNN 7's two layout reorders)."""
    from dnnperf.fixes import Ctx, _fit_the_tile
    from dnnperf.workload import Workload

    stem = lambda cin, name: conv_model(cin, 64, 224, 224, 7, pads=[3, 3, 3, 3], strides=[2, 2], dtype=T.FLOAT16,
                                        batch=8, name=name)
    for hw, words in (("a100", "zero-padded to 8 channels"), ("v100", "input channels padded 3 -> 8"),
                      ("h200", "runs its fp32 stem kernels: zero-padded to 8 channels")):
        rep = run(tmp_path, stem(3, "stem"), hw, name="s3.onnx", runtime="graph")
        c = conv_layer(rep)
        assert c.unit == "cuda_cores" and c.cause == "unoptimized"
        assert c.precision == ("fp32" if hw == "h200" else "fp16")  # Hopper: cuDNN 9's fp32 stem kernels
        text, saving = _fit_the_tile(c, Ctx(rep))
        padded = conv_layer(run(tmp_path, stem(8, "stem"), hw, name="s8.onnx", runtime="graph"))
        assert padded.unit == "tensor_cores"
        assert words in text and "2.7x the MACs" in text
        assert saving == pytest.approx(c.time_s - padded.time_s, rel=1e-9) and saving > 0
    # the what-if itself, by hand: 3 -> 8 channels scales MACs, K, weights and input bytes by 8/3
    w = Workload("conv", "float16", macs=300, other_ops=10, act_bytes_read=600, weight_bytes=30, bytes_written=50,
                 gemm=Gemm(100, 64, 27), conv=(3, 3, 3, 1, 1, False))
    w8 = w.with_in_channels(8)
    assert (w8.macs, w8.gemm.k, w8.weight_bytes, w8.act_bytes_read) == (800, 72, 80, 1600)
    assert (w8.bytes_written, w8.other_ops, w8.conv) == (50, 10, (8, 3, 3, 1, 1, False))


def test_a_gpu_profile_s_own_unit_names_reach_the_stem_fix(tmp_path):
    """A profile written for another vendor's GPU (AMD's MI100 spec sheet: matrix cores and stream
    processors) gets the stem's padding fix in its own units' words, not in NVIDIA's: the 3-channel
    fp16 stem runs on the stream processors and, padded to 8 channels, on the matrix cores."""
    import yaml
    from dnnperf.fixes import Ctx, _fit_the_tile

    prof = {"schema": "dnnperf-hw/1", "name": "mi100", "title": "AMD Instinct MI100", "kind": "gpu",
            "headline": {"precision": "fp16", "tops": 184.6},
            "units": [{"name": "matrix_cores", "serves": ["matrix"], "peak_tops": {"fp16": 184.6, "fp32": 46.1}},
                      {"name": "stream_processors", "serves": ["matrix", "vector"],
                       "peak_tops": {"fp32": 23.1, "fp16": 46.1}}],
            "memory": {"dram_gbs": 1228.8, "dram_gb": 32, "onchip_mb": 8},
            "parallelism": {"compute_units": 120}, "gpu": {"tdp_w": 300}}
    p = tmp_path / "mi100.yaml"
    p.write_text(yaml.safe_dump(prof))
    stem = conv_model(3, 64, 224, 224, 7, pads=[3, 3, 3, 3], strides=[2, 2], dtype=T.FLOAT16, batch=8)
    rep = run(tmp_path, stem, str(p), runtime="graph")
    c = conv_layer(rep)
    assert c.unit == "stream_processors" and c.cause == "unoptimized"
    text, _ = _fit_the_tile(c, Ctx(rep))
    assert "generic kernels on the stream processors" in text and "the matrix cores take it" in text
    assert "CUDA" not in text and "tensor" not in text


def test_a_bigger_batch_that_leaves_the_sms_as_idle_says_so(tmp_path):
    """A T4 int8 1 x 1 convolution of 32 -> 16 channels on 112 x 112 keeps its SMs ~21% busy at any
    batch (each tile waits out a short K loop: more tiles add waves, not occupancy), yet a bigger batch
    still spreads the waits: the fix read 'batch 4 -> 128 raises occupancy from 21.1% to 21.5%'. It
    now says the occupancy stays and gives the time per sample of the batch with the shortest one,
    checked against the same export at that batch."""
    import re

    from dnnperf.fixes import Ctx, _bigger_batch

    rep = run(tmp_path, conv_model(32, 16, 112, 112, 1, batch=4), "t4", name="b4.onnx", batch=4, precision="int8")
    c = conv_layer(rep)
    text, _ = _bigger_batch(c, Ctx(rep))
    got = re.match(r"batch 4 -> (\d+) leaves occupancy near (\S+)% .*: \S+ us -> (\S+) us, (\S+) us per sample$", text)
    assert got, text
    b, per = int(got.group(1)), float(got.group(4)) * 1e-6
    assert float(got.group(2)) == pytest.approx(100 * c.occupancy, abs=0.05)
    big = conv_layer(run(tmp_path, conv_model(32, 16, 112, 112, 1, batch=b), "t4", name="bb.onnx", batch=b,
                         precision="int8"))
    assert abs(big.occupancy - c.occupancy) < 0.01 and per < c.time_s / 4
    assert per == pytest.approx(float(got.group(3)) * 1e-6 / b, rel=0.01)
    for other_b in (8, 32):  # the smaller batches of the list take longer per sample
        other = conv_layer(run(tmp_path, conv_model(32, 16, 112, 112, 1, batch=other_b), "t4", name="o.onnx",
                               batch=other_b, precision="int8"))
        assert other.time_s / other_b > per


def test_the_cooling_fix_states_the_clock_the_estimate_used(tmp_path):
    """A 70 W T4 throttles a large convolution through its generation's power model while its profile
    gives no `sustained_clock_fraction`: the fix read 'sustained clock at 100% of boost costs this
    layer 437 us'. It now states the layer's own clock, and that clock, given to a copy of the profile
    as its sustained fraction, yields the same layer time."""
    from dataclasses import replace as dc_replace

    from dnnperf.fixes import Ctx, _cooling

    m = conv_model(256, 256, 56, 56, 3, pads=[1, 1, 1, 1], batch=32)
    rep = run(tmp_path, m, "t4", batch=32)
    c = conv_layer(rep)
    assert c.losses["thermal"] > 0 and c.clock < 0.95
    text, saving = _cooling(c, Ctx(rep))
    assert f"hold {c.clock:.0%} of the boost clock" in text and "100%" not in text
    assert saving == c.losses["thermal"]
    hw = load_profile("t4")
    fixed = dc_replace(hw, sustained_clock_fraction=c.clock, sustained_clock_given=True)
    again = conv_layer(analyze(inspect_model(save(m, tmp_path, "m.onnx")), fixed, Settings(batch=32)))
    assert again.time_s == pytest.approx(c.time_s, rel=1e-9)



def test_the_clock_fix_of_a_given_sustained_clock_names_what_sets_it(tmp_path):
    """cpu-avx512 states a sustained clock of 0.74 (AVX-512 lowers a Xeon's all-core clock): the fix read
    'sustained clock at 74% of boost' (its peak is quoted at the base clock) and, filed under cooling,
    implied a fan would help. The layer's time at that clock against a copy of the profile at 1.0 is the
    loss it names."""
    from dataclasses import replace as dc_replace

    from dnnperf.fixes import Ctx, _cooling

    m = conv_model(256, 256, 56, 56, 3, pads=[1, 1, 1, 1])
    rep = run(tmp_path, m, "cpu-avx512")
    c = conv_layer(rep)
    assert c.clock == pytest.approx(0.74)
    text, saving = _cooling(c, Ctx(rep))
    assert "sustained clock, 74% of the clock its quoted peak assumes" in text and "boost" not in text
    assert "not where a power or wide-vector limit does" in text
    full = dc_replace(load_profile("cpu-avx512"), sustained_clock_fraction=1.0)
    again = conv_layer(analyze(inspect_model(save(m, tmp_path, "m.onnx")), full, Settings()))
    assert saving == pytest.approx(c.time_s - again.time_s, rel=1e-6)

def test_tensorrt_pads_a_stems_channels_for_the_tensor_cores(tmp_path):
    """TensorRT reformats an RGB stem's input to whole channel vectors when that is faster: under the
    tensorrt runtime an A100 fp16 stem (3 channels, 7 x 7 stride 2, batch 8) takes the time of the same
    stem exported with 8 channels, keeps its own MACs and ideal time (the padding's MACs are a
    specialization loss, the losses still sum to the time), and a note says so. Eager and graph
    runtimes keep the library's CUDA-core kernels."""
    stem = lambda cin, name: conv_model(cin, 64, 224, 224, 7, pads=[3, 3, 3, 3], strides=[2, 2], dtype=T.FLOAT16,
                                        batch=8, name=name)
    rep = run(tmp_path, stem(3, "stem"), "a100", name="s3.onnx", runtime="tensorrt")
    c = conv_layer(rep)
    eight = conv_layer(run(tmp_path, stem(8, "stem"), "a100", name="s8.onnx", runtime="tensorrt"))
    assert c.unit == "tensor_cores" and c.padded_from == 3
    assert c.time_s == pytest.approx(eight.time_s, rel=1e-12)
    assert c.layer.workload.macs == 8 * 64 * 112 * 112 * 3 * 49
    assert c.t_ideal == pytest.approx(eight.t_ideal * 3 / 8, rel=1e-9)
    assert c.t_ideal + sum(c.losses.values()) == pytest.approx(c.time_s, rel=1e-9)
    assert c.losses["specialization"] >= eight.t_ideal - c.t_ideal
    assert any("run padded with zeros on the tensor cores, as TensorRT" in n for n in rep.notes)
    for runtime in ("eager", "graph"):
        other = conv_layer(run(tmp_path, stem(3, "stem"), "a100", name="s3.onnx", runtime=runtime))
        assert other.unit == "cuda_cores" and not other.padded_from


def test_a_misaligned_attention_product_is_told_to_pad_its_sequence_not_its_vocabulary(tmp_path):
    """ViT's attention scores times values: [12, 197, 197] x [12, 197, 64] fp16 products of two
    activations whose 197-token rows miss the 16-byte vector. The fix pads the sequence (the fix said
    'pad the vocabulary or hidden size', which has no meaning for a product of activations)."""
    from dnnperf.fixes import Ctx, _fit_the_tile

    m = model([helper.make_node("MatMul", ["q", "k"], ["s"], name="scores")],
              [vi("q", [1, 12, 197, 64], T.FLOAT16), vi("k", [1, 12, 64, 197], T.FLOAT16)], [vi("s", None, T.FLOAT16)])
    rep = run(tmp_path, m, "h100", name="att.onnx")
    c = next(c for c in rep.score.layers if c.layer.op_type == "MatMul")
    text, _ = _fit_the_tile(c, Ctx(rep))
    assert "197 -> 200 (pad the sequence length)" in text, text


def test_a_depthwise_layer_is_not_told_to_widen_its_groups(tmp_path):
    """A depthwise convolution's product has one output channel per group: the tile fix said 'output
    channels 1 fill 12% of the 8-wide tile; 1 -> 8 costs +700% MACs' on an AVX2 CPU (a channel multiplier
    of 8, slower). It now names the per-group product and the dense alternative, with no figure, on the
    CPU and on a TPU's 128 x 128 array."""
    from dnnperf.fixes import Ctx, _fit_the_tile

    dw = conv_model(64, 64, 56, 56, 3, pads=[1, 1, 1, 1], group=64)
    for hw in ("cpu-avx2", "tpu-v4"):
        rep = run(tmp_path, dw, hw, name=f"dw{hw}.onnx")
        c = conv_layer(rep)
        assert c.layer.workload.family == "depthwise_conv" and c.tile_efficiency < 0.95
        text, saving = _fit_the_tile(c, Ctx(rep))
        assert text.startswith("a depthwise convolution's product is per group (1 output channel per group)"), text
        assert "1 -> " not in text and saving is None


def test_the_precision_fix_starts_from_the_layers_own_precision(tmp_path):
    """An fp32 convolution on the fp16-only Kirin 970 NPU is costed on its vector unit in fp16 (a
    warning says so); the precision fix walked the ladder down from that run precision, found nothing
    below fp16 and offered nothing (mobilenet_v2's 1 x 1 layers showed only `dnnperf lut`). It starts
    from the layer's own fp32 now, and the time it quotes is that of the same layer exported in fp16."""
    from dnnperf.fixes import Ctx, _use_specialized_units

    rep = run(tmp_path, conv_model(320, 1280, 7, 7, 1), "kirin970-npu", name="k32.onnx")
    c = conv_layer(rep)
    assert c.unit == "npu_vector" and c.precision == "fp16"
    text, saving = _use_specialized_units(c, Ctx(rep))
    assert text.startswith("fp32 -> fp16 moves this Conv onto npu: "), text
    half = conv_layer(run(tmp_path, conv_model(320, 1280, 7, 7, 1, dtype=T.FLOAT16), "kirin970-npu", name="k16.onnx"))
    assert half.unit == "npu" and saving == pytest.approx(c.time_s - half.time_s, rel=1e-9)


def test_a_width_that_costs_no_time_says_so(tmp_path):
    """On a TPU v2 (128 x 128 MXU) a 64-channel convolution fills half the array's width: twice the
    channels take the same time. The fix read '64 -> 128 costs +100% MACs: +0 (56 us -> 56 us)'; it says
    'the same 56 us', and the 128-channel export is estimated within 0.5% of the 64-channel one."""
    from dnnperf.fixes import Ctx, _fit_the_tile
    from dnnperf.fmt import t as fmt_time

    rep = run(tmp_path, conv_model(64, 64, 56, 56, 3, pads=[1, 1, 1, 1]), "tpu-v2", name="c64.onnx")
    c = conv_layer(rep)
    text, _ = _fit_the_tile(c, Ctx(rep))
    assert text.endswith(f"64 -> 128 costs +100% MACs: the same {fmt_time(c.time_s)}"), text
    wide = conv_layer(run(tmp_path, conv_model(64, 128, 56, 56, 3, pads=[1, 1, 1, 1]), "tpu-v2", name="c128.onnx"))
    assert wide.time_s == pytest.approx(c.time_s, rel=0.005)


def test_fit_the_tile_fix_names_channel_counts(tmp_path):
    c = conv_layer(run(tmp_path, conv_model(128, 100, 28, 28, 3, pads=[1, 1, 1, 1], dtype=T.FLOAT16)))
    texts = " ".join(f["text"] for f in c.fixes)
    assert "100 -> 104" in texts


def test_every_sample_model_on_every_profile_is_finite_and_positive():
    from dnnperf.hardware import shipped_names

    for f in sorted(os.listdir(SAMPLES)):
        if not f.endswith(".onnx"):
            continue
        ov = sample_overrides(f[:-5], seq=32)
        insp = inspect_model(os.path.join(SAMPLES, f), ov)
        for name in shipped_names():
            t = analyze(insp, load_profile(name), Settings(), with_fixes=False).score.totals
            assert 0 < t["latency_s"] < 100, (f, name)
            assert 0 < t["fraction_of_peak"] <= 1.0, (f, name)


def test_the_fraction_of_peak_never_passes_one_at_any_precision_a_device_runs():
    """The fraction is taken against the quoted peak, or against a precision's peak above it when the
    layers run in that precision: SqueezeNet at -p int8 on a Raspberry Pi 4 (quoted 0.048 TOP/s fp32,
    0.096 int8) reached "143.7%" of the peak."""
    from dnnperf import precision as prec
    from dnnperf.hardware import shipped_names

    insp = inspect_model(os.path.join(SAMPLES, "squeezenet1_1.onnx"))
    for name in shipped_names():
        hw = load_profile(name)
        for p in prec.supported(hw):
            t = analyze(insp, hw, Settings(precision=p), with_fixes=False).score.totals
            assert 0 < t["fraction_of_peak"] <= 1.0, (name, p, t["fraction_of_peak"])
            assert t["peak_tops"] >= hw.headline_tops
    pi = analyze(insp, load_profile("raspberry-pi-4"), Settings(precision="int8"), with_fixes=False).score.totals
    assert (pi["peak_tops"], pi["peak_precision"]) == (0.096, "int8")
    assert pi["fraction_of_peak"] == pytest.approx(pi["achieved_tops"] / 0.096)


def test_work_per_item_requirement(tmp_path):
    # the 1x1 conv has 20 ops per output (10 MACs); a device needing 80 ops per work item keeps a
    # quarter of its speed on it, on top of the lanes it cannot fill
    assert rules.work_per_item_fit(4900, 245, 80) == pytest.approx(0.25)
    assert rules.work_per_item_fit(4900, 245, 1) == 1.0
    # (GPU profiles replace lanes with tiles and waves for matrix work: the rule is for the generic
    # model, here the V100's figures scored as an NPU)
    hw = load_profile("v100").with_overrides(kind="npu")
    m = conv_model(10, 5, 7, 7, 1)
    insp = inspect_model(save(m, tmp_path, "w.onnx"))
    base = conv_layer(analyze(insp, hw, Settings()))
    slow = conv_layer(analyze(insp, hw.with_overrides(ops_per_item=80), Settings()))
    assert slow.time_s - slow.t_launch == pytest.approx(4 * (base.time_s - base.t_launch), rel=0.05)


def test_a_cpu_kernel_pays_its_family_fixed_cost_by_hand(tmp_path):
    """kernel_fixed_us adds its figure per kernel of that family, on top of the dispatch: a conv
    layer costs exactly 2.5 us more with {conv: 2.5}; an elementwise layer nothing more."""
    import yaml

    from dnnperf.hardware import profile_from_dict

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    plain = profile_from_dict(d, "x")
    fixed = profile_from_dict({**d, "kernel_fixed_us": {"conv": 2.5}}, "x")
    insp = inspect_model(save(conv_model(16, 16, 7, 7, 1, relu=True), tmp_path, "c.onnx"))
    a = {c.layer.name: c for c in analyze(insp, plain, Settings(fusion="none"), with_fixes=False).score.layers}
    b = {c.layer.name: c for c in analyze(insp, fixed, Settings(fusion="none"), with_fixes=False).score.layers}
    assert a.keys() == b.keys()
    for name, c in a.items():
        extra = 2.5e-6 * c.layer.workload.launches if c.layer.workload.family == "conv" else 0.0
        assert b[name].time_s == pytest.approx(c.time_s + extra, rel=1e-9, abs=1e-15), name
    assert any(c.layer.workload.family == "conv" for c in a.values())
    # the advice's arithmetic uses the same per-kernel cost: 2 us dispatch + 2.5 us fixed
    assert fixed.kernel_us("conv") == 4.5 and fixed.kernel_us("elementwise") == 2.0
    from dnnperf.fixes import Ctx, _fewer_launches
    from dnnperf.fmt import t as fmt_time

    rep = analyze(insp, fixed, Settings(fusion="none"))
    conv = next(c for c in rep.score.layers if c.layer.workload.family == "conv")
    text, saving = _fewer_launches(conv, Ctx(rep))
    assert text.startswith("1 launch x 4.5 us: 4.5 us of this layer's"), text
    assert text.endswith(f"against {fmt_time(conv.time_s - 4.5e-6)} of work"), text
    assert saving == pytest.approx(4.5e-6)
    # a GPU has no such field (its kernels' minimum time is the library's)
    from dnnperf.errors import DnnperfError

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "t4.yaml"), encoding="utf-8") as fh:
        t4 = yaml.safe_load(fh)
    with pytest.raises(DnnperfError, match="kernel_fixed_us"):
        profile_from_dict({**t4, "kernel_fixed_us": {"conv": 1.0}}, "x")


def test_precision_what_if_keeps_every_workload_field():
    """with_precision builds the Workload positionally: its fields must be these, in this order, and
    only dtype and the byte counts change (fp32 -> fp16 halves them)."""
    from dataclasses import fields

    from dnnperf.scoring import with_precision
    from dnnperf.workload import Workload

    assert [f.name for f in fields(Workload)] == ["family", "dtype", "macs", "other_ops", "act_bytes_read",
                                                  "weight_bytes", "bytes_written", "parallel_work", "gemm",
                                                  "launches", "note", "conv", "row", "pieces", "subnormals", "bias",
                                                  "step_reads", "kernel", "taps", "operands", "loop_items",
                                                  "rereads", "parts", "iterations", "host_waits",
                                                  "weights_unread"]
    part = Workload("matmul", "float32", 5)
    w = Workload("conv", "float32", 10, 3, 400, 800, 200, 50, Gemm(2, 3, 4, 1), 2, "n", (1, 3, 3, 1, 1, False), 7,
                 (5, 6), 9, True, 64, "Resize.linear", 0.5, "", 11, 96, (("MatMul", part, 3),), 4, 6, 1000)
    h = with_precision(w, "fp16")
    # a loop's body parts stay as they are (scoring applies the precision to each when it scores them)
    assert h.parts == (("MatMul", part, 3),) and h.iterations == 4 and h.host_waits == 6
    assert (h.dtype, h.act_bytes_read, h.weight_bytes, h.bytes_written) == ("float16", 200, 400, 100)
    assert h.step_reads == 32  # the recurrent weights read again each step are weights too
    assert h.rereads == 48  # a broadcast operand read again is bytes too
    assert h.weights_unread == 500  # a table's unread rows are held at the what-if's precision
    assert (h.family, h.macs, h.other_ops, h.parallel_work, h.gemm, h.launches, h.note, h.conv, h.row, h.pieces,
            h.subnormals, h.bias, h.kernel, h.taps, h.loop_items) == (
        w.family, w.macs, w.other_ops, w.parallel_work, w.gemm, w.launches, w.note, w.conv, w.row, w.pieces,
        w.subnormals, w.bias, w.kernel, w.taps, 11)
    # an integer product keeps its operand pairing in int8, and drops it in a float precision
    q = Workload("conv", "uint8", 10, 3, 400, 800, 200, 50, Gemm(2, 3, 4, 1), operands="u8s8")
    assert with_precision(q, "int8").operands == "u8s8" and with_precision(q, "fp16").operands == ""
    # a Loop carrying a sequence (0 bits per element: the handle's elements are counted where they are
    # made) stays as it is; it divided by zero under -p (a mutated ONNX SequenceMap test model)
    loop = Workload("control", "sequence", 0, 0, 32, 0, 4, 1)
    assert with_precision(loop, "bf16") is loop


def test_a_what_if_rescores_a_layer_in_its_network():
    # a variant identical to the layer must cost what the layer cost in the report: the same footprint
    # and weight residency (a CPU's DRAM-read weights), the same wait for the host on a GPU's stream
    import yaml

    from dnnperf.hardware import profile_from_dict
    from dnnperf.scoring import rescore

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["memory"] = {"dram_gbs": 20, "onchip_mb": 16, "bandwidth_curve": {0.5: 100, 1: 100, 4: 30},
                   "dram_measured_mb": 64}
    d.update(memory_overlap=0.8, conv_weight_exposure=0.6)
    cpu = profile_from_dict(d, "x")
    insp = inspect_model(os.path.join(SAMPLES, "resnet50.onnx"), ShapeOverrides(batch=8))
    for hw, settings in ((cpu, Settings(batch=8)), (load_profile("h200"), Settings(batch=8, precision="fp16"))):
        sc = analyze(insp, hw, settings, with_fixes=False).score
        matrix = [c for c in sc.layers if c.layer.workload.is_matrix]
        assert matrix
        for c in matrix:
            assert rescore(c, c.layer, sc, settings.precision).time_s == pytest.approx(c.time_s, rel=1e-12)
    # on that CPU (a 16 MB cache) the convolutions of this 127 MB network wait for part of their
    # weights: rescored alone (their own few MB, inside the cache) they would cost less
    from dnnperf.scoring import score_layer

    sc = analyze(insp, cpu, Settings(batch=8), with_fixes=False).score
    convs = [c for c in sc.layers if c.layer.workload.family == "conv" and c.layer.workload.weight_bytes > 1e6]
    assert any(score_layer(c.layer, cpu).time_s < c.time_s * 0.999 for c in convs)


def test_the_launch_fix_on_an_eager_gpu_says_how_much_of_the_host_time_shows():
    # resnet50 at batch 32 on the H200: 53 Conv + 49 Relu + 16 Add + MaxPool + GlobalAveragePool + Gemm
    # = 121 kernels x 20 us = 2.42 ms of host time, part of it hidden behind the convolutions
    rep = analyze(inspect_model(os.path.join(SAMPLES, "resnet50.onnx"), ShapeOverrides(batch=32)),
                  load_profile("h200"), Settings(batch=32, precision="fp16"))
    fix = next(f for f in rep.model_fixes if f["id"] == "fewer_launches")
    assert "121 kernel launches x 20 us of host time (2.42 ms" in fix["text"]
    assert 0 < fix["saving_s"] < 2.42e-3


def test_a_layer_of_many_kernels_enters_the_stream_kernel_by_kernel(tmp_path):
    """An LSTM runs two kernels per step in cuDNN's standard algorithm (the recurrent product, then the
    gates) after one product for all steps' inputs: 50 steps are 101 launches at the T4's 5 us of host
    time each (505 us) and 101 small kernels on the device. On the stream the first step starts once
    the host has queued it, not once it has queued all of them: the layer takes about the longer of
    the two (505 us plus one launch), where it was charged both. Losses still add up to its time."""
    m = model([helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=64, name="lstm")],
              [vi("x", [50, 1, 32])], [vi("y", None)], [weight("w", [1, 256, 32]), weight("r", [1, 256, 64])])
    hw = load_profile("t4")
    rep = analyze(inspect_model(save(m, tmp_path)), hw, Settings())
    c = next(c for c in rep.score.layers if c.name == "lstm")
    host = 101 * hw.launch_overhead_us * 1e-6
    assert c.kernels == 101 and c.t_launch == pytest.approx(host)
    longer = max(host, c.t_device)
    assert longer <= c.time_s <= longer + 2 * hw.launch_overhead_us * 1e-6
    assert sum(c.losses.values()) + c.t_ideal == pytest.approx(c.time_s, rel=1e-6)


def test_a_recurrent_layer_s_steps_run_one_after_another_on_a_gpu(tmp_path):
    """An LSTM's step t needs step t-1's state: on a GPU the library runs one step's product (batch 8
    x 4*256 gates x 128 + 256) per kernel, 64 times. So 64 steps take 64 times one step's math and
    K-loop wait (the whole is not one product of 64 concurrent steps, which would wait out its K loop
    once and fill the SMs 64 times better), and a layer that spends most of its time starting its 64
    kernels at batch 1 is launch-bound, not 'memory'-bound."""
    def lstm(steps, batch):
        return model([helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=256, name="lstm")],
                     [vi("x", [steps, batch, 128])], [vi("y", None)],
                     [weight("w", [1, 1024, 128]), weight("r", [1, 1024, 256])])

    def cost(steps, batch, hw="a100"):
        rep = run(tmp_path, lstm(steps, batch), hw, name=f"l{steps}_{batch}.onnx")
        return next(c for c in rep.score.layers if c.name == "lstm")

    one, many = cost(1, 8), cost(64, 8)
    assert many.t_compute == pytest.approx(64 * one.t_compute, rel=0.01)
    assert many.occupancy == pytest.approx(one.occupancy, rel=0.01)
    # batch 1 on a T4 (eager): 64 launches x 5 us of host time, against well under 5 us of work a step
    c = cost(64, 1, "t4")
    assert c.losses["launch_overhead"] > 0.5 * c.time_s and c.cause == "launch_overhead"
    # the batch runs along every step's rows: a bigger batch is a what-if with figures, and at 32x the
    # batch the same 64 steps cost less per sample
    from dnnperf.fixes import Ctx, _bigger_batch

    rep = run(tmp_path, lstm(64, 8), "a100", name="l64_8.onnx")
    c = next(c for c in rep.score.layers if c.name == "lstm")
    text, _ = _bigger_batch(c, Ctx(rep))
    assert text.startswith("batch 8 -> ") and "per sample" in text and "not known" not in text


def test_a_cpu_runtime_dispatches_a_recurrent_layer_once(tmp_path):
    """ONNX Runtime runs an LSTM as one op: one dispatch (cpu-avx512: 2 us) and, on a calibrated
    profile, each step's fixed time (kernel_fixed_us "rnn", measured inside one LSTM of many steps):
    50 steps at 3 us are 2 + 150 us, not 50 x (2 + 3) = 250 us."""
    import yaml

    m = model([helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=64, name="lstm")],
              [vi("x", [50, 1, 32])], [vi("y", None)], [weight("w", [1, 256, 32]), weight("r", [1, 256, 64])])
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "profiles", "cpu-avx512.yaml")) as fh:
        d = yaml.safe_load(fh)
    d["name"], d["kernel_fixed_us"] = "cal", {"rnn": 3}
    p = tmp_path / "cal.yaml"
    p.write_text(yaml.safe_dump(d))
    c = next(c for c in run(tmp_path, m, str(p)).score.layers if c.name == "lstm")
    assert c.t_launch == pytest.approx(2e-6 + 50 * 3e-6)


def test_a_recurrent_layer_reads_its_recurrent_weights_every_step(tmp_path):
    """Each step of a GRU multiplies the recurrent weights R (3 x 320 x 320 fp32 = 1,228,800 B) by a
    batch of 2 rows: a thin product that streams all of R again. 100 steps read R 100 times, where
    the roofline counted it once. On cpu-avx2 (204.8 GB/s, no cache figure) the traffic is X (100 x 2 x
    80 x 4 = 64,000 B) + W (3 x 320 x 80 x 4 = 307,200) + R + Y (100 x 2 x 320 x 4 = 256,000) once, and R
    99 more times."""
    m = model([helper.make_node("GRU", ["x", "w", "r"], ["y"], hidden_size=320, name="gru")],
              [vi("x", [100, 2, 80])], [vi("y", None)], [weight("w", [1, 960, 80]), weight("r", [1, 960, 320])])
    insp = inspect_model(save(m, tmp_path))
    w = next(r.workload for r in insp.rows if r.node.name == "gru")
    assert w.step_reads == 1_228_800 and w.launches == 100
    c = next(c for c in analyze(insp, load_profile("cpu-avx2"), Settings()).score.layers if c.name == "gru")
    assert c.t_memory == pytest.approx((64_000 + 307_200 + 1_228_800 + 256_000 + 99 * 1_228_800) / 204.8e9, rel=1e-6)


def test_a_padded_int8_convolution_books_no_negative_loss(tmp_path):
    """An MBConv expansion, a 1 x 1 convolution of 24 -> 144 channels on 56 x 56 (EfficientNet-B0),
    misses a T4's 16-channel int8 vector; TensorRT pads it to 32 and runs it on the int8 tensor cores,
    twice the fp16 headline rate. Its ideal is its own 24 channels' MACs at that unit (never above its
    unpadded ideal), the 8 zero channels' MACs are the specialization loss, and no loss is negative
    (one was, at -111 ns)."""
    m = conv_model(24, 144, 56, 56, 1, name="se")
    c = conv_layer(run(tmp_path, m, "t4", precision="int8", runtime="tensorrt"))
    assert c.padded_from == 24 and c.unit == "tensor_cores"
    assert min(c.losses.values()) >= 0
    assert c.t_ideal + sum(c.losses.values()) == pytest.approx(c.time_s, rel=1e-9)


def test_a_starved_layer_is_a_parallelism_problem_only_where_idle_lanes_lead_its_other_losses():
    """classify: a conv or matmul that starves is first a parallelism problem (a bigger batch amortises
    its launch too), so its launch is not its cause where idle lanes lead its other losses. Where another
    loss leads them, the launch competes like any loss: squeezenet's 1 x 1 expand convolution on a V100
    lost 9.0 us to its launch against 0.36 us to the tensor cores' shape and 0.29 us to idle lanes, and
    was labelled 'specialization'; a T4 convolution losing 9.1 us to its launch and 0.29 us to the
    clock, 'thermal'."""
    from dnnperf.scoring import classify

    losses = {"parallelism": 0.29e-6, "specialization": 0.36e-6, "launch_overhead": 9.0e-6, "input_io": 0.0}
    assert classify(losses, 0.1e-6, starves=True) == "launch_overhead"
    assert classify({**losses, "parallelism": 5e-6}, 0.1e-6, starves=True) == "parallelism"  # idle lanes lead
    assert classify({**losses, "parallelism": 5e-6}, 0.1e-6, starves=False) == "launch_overhead"
    assert classify({"thermal": 0.29e-6, "parallelism": 0.15e-6, "launch_overhead": 9.1e-6}, 0.03e-6, True) \
        == "launch_overhead"
    assert classify({"parallelism": 0.01e-6, "launch_overhead": 0.02e-6}, 1e-6, True) == "compute"  # the math leads
    rep = analyze(inspect_model(os.path.join(SAMPLES, "squeezenet1_1.onnx")), load_profile("v100"), Settings())
    conv = next(c for c in rep.score.layers if c.name == "/features/features.4/expand1x1/Conv")
    assert conv.losses["launch_overhead"] > 10 * max(v for k, v in conv.losses.items() if k != "launch_overhead")
    assert conv.cause == "launch_overhead"


def test_a_dilated_convolution_skips_its_taps_in_the_padding_on_a_blocked_cpu(tmp_path):
    """ONNX Runtime's blocked CPU kernel skips the kernel taps that fall in the padding: DeepLabV3's atrous
    branches over a 16 x 16 map (dilations 12, 24, 36) took 2.0, 0.85 and 0.83 ms for the same MACs.
    By hand, per axis over the 16 output positions: at dilation 12 (pads 12) the centre tap is always
    inside and each outer tap at 4 positions: 24 of 48 taps; a dilation-1 kernel centred there: 46 of 48.
    Share (24 / 46)^2 = 0.27221; dilation 2 (pads 2): 44 and 46 of 48, (44 / 46)^2 = 0.91493. The share
    lowers the work on a calibrated CPU with a blocked layout only (cuDNN's implicit GEMM multiplies the
    padding too): t_ideal = (2 x MACs x share) / peak there, 2 x MACs / peak on a T4."""
    import yaml

    base = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), "..", "profiles", "cpu-avx2.yaml")))
    blocked = {**base, "cpu_layout": {"block": 16, "grouped_min_width": 16, "channel_alignment": 16, "pool_alignment": 16}}
    from dnnperf.hardware import profile_from_dict

    hw = profile_from_dict(blocked, "blocked")
    for dil, share in ((12, (24 / 46) ** 2), (2, (44 / 46) ** 2), (1, 1.0)):
        m = conv_model(32, 32, 16, 16, 3, pads=[dil] * 4, dilations=[dil, dil]) if dil > 1 else \
            conv_model(32, 32, 16, 16, 3, pads=[1] * 4)
        insp = inspect_model(save(m, tmp_path, f"d{dil}.onnx"))
        w = insp.rows[0].workload
        assert w.taps == pytest.approx(share, rel=1e-9)
        c = conv_layer(analyze(insp, hw, Settings()))
        assert c.t_ideal == pytest.approx((2 * w.macs * share + w.other_ops) / hw.headline_rate, rel=1e-9)
        if dil > 1:  # no Winograd for a dilated kernel: the T4's ideal is every MAC at its headline
            t4 = load_profile("t4")
            assert conv_layer(analyze(insp, t4, Settings())).t_ideal == pytest.approx(w.ops / t4.headline_rate, rel=1e-9)


def test_the_precision_fix_pads_a_width_the_tensor_cores_refuse(tmp_path):
    """RetinaNet's classification head ends in 819 output channels (9 anchors x 91 classes). In fp32 on
    a T4 it runs on the CUDA cores; fp16 alone does not move it (819 is not a multiple of the T4 tensor
    cores' rule of 8), so the precision fix offered nothing and the layer's advice was `dnnperf lut`.
    It now offers fp16 with the width padded to 824, and the time it quotes is that of the 824-channel
    layer exported in fp16."""
    from dnnperf.fixes import Ctx, _use_specialized_units

    rep = run(tmp_path, conv_model(256, 819, 25, 25, 3, pads=[1, 1, 1, 1]), "t4", name="c819.onnx")
    c = conv_layer(rep)
    assert c.unit == "cuda_cores" and c.precision == "fp32"
    half = conv_layer(run(tmp_path, conv_model(256, 819, 25, 25, 3, pads=[1, 1, 1, 1], dtype=T.FLOAT16), "t4",
                          name="h819.onnx"))
    assert half.unit == "cuda_cores"  # the precision alone is not enough
    text, saving = _use_specialized_units(c, Ctx(rep))
    assert text.startswith("fp32 -> fp16 with output channels 819 -> 824 (a multiple of 8) moves this Conv onto "
                           "tensor_cores: "), text
    padded = conv_layer(run(tmp_path, conv_model(256, 824, 25, 25, 3, pads=[1, 1, 1, 1], dtype=T.FLOAT16), "t4",
                            name="h824.onnx"))
    assert padded.unit == "tensor_cores" and saving == pytest.approx(c.time_s - padded.time_s, rel=1e-9)


def test_a_separate_bias_pass_is_memory_traffic_not_launch_overhead(tmp_path):
    """LR-ASPP's first expansion (16 -> 64 channels, 1 x 1, at 260 x 260) on a T4: an eager framework
    adds the convolution's bias in a kernel of its own, one more read and write of the 17.3 MB output.
    That pass was booked as launch overhead (148 of 245 us, fix: capture a CUDA graph, which does not
    remove it). It is memory traffic now, and the layer's fix is to fuse the bias; the layer's time is
    unchanged: the same convolution without a bias plus the pass's traffic and one kernel start."""
    from dnnperf.fixes import Ctx, _layer_fusion
    from dnnperf.gpu import library_of

    def conv(bias):
        ins = ["x", "w", "b"] if bias else ["x", "w"]
        inits = [weight("w", [64, 16, 1, 1]), weight("b", [64])] if bias else [weight("w", [64, 16, 1, 1])]
        return model([helper.make_node("Conv", ins, ["y"], name="conv")], [vi("x", [1, 16, 260, 260])],
                     [vi("y", None)], inits)

    rep = run(tmp_path, conv(True), "t4", name="b.onnx")
    c = conv_layer(rep)
    plain = conv_layer(run(tmp_path, conv(False), "t4", name="nb.onnx"))
    hw = load_profile("t4")
    out = 64 * 260 * 260 * 4
    traffic_s = 2 * out / (hw.dram_bps * library_of(hw).stream_efficiency)  # 34.6 MB at the streaming rate
    assert c.t_bias == pytest.approx(traffic_s, rel=1e-9)
    # (the bias's 4.3 M additions also sit in the convolution's own math: a couple of us either way)
    assert c.losses["memory"] - plain.losses["memory"] == pytest.approx(traffic_s, abs=5e-6)
    assert c.losses["launch_overhead"] - plain.losses["launch_overhead"] < 10e-6  # one kernel's start, at most
    assert c.cause == "memory"
    text, saving = _layer_fusion(c, Ctx(rep))
    assert text.startswith("the framework adds this convolution's bias in a kernel of its own, one more read and "
                           "write of its 17.3 MB output"), text
    assert saving == pytest.approx(traffic_s, rel=1e-9)


def test_a_bigger_batch_for_a_launch_bound_layer_shares_its_launches(tmp_path):
    """A 16-element Relu on a V100 (eager): 5 us of host launch, then the device's 5 us minimum
    kernel time (min_kernel_us), against nanoseconds of work: launch-bound. Lane occupancy is
    beside the point there (it read 'raises lane occupancy from 0.0% to 0.0%'): at batch 8 the
    same 10 us serve 8 samples, at most 10 / 8 = 1.25 us each."""
    from dnnperf.fixes import Ctx, _bigger_batch

    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [1, 16])], [vi("y", None)])
    rep = run(tmp_path, m)
    c = rep.score.layers[0]
    assert c.time_s == pytest.approx(10e-6) and c.cause == "launch_overhead"
    text, _ = _bigger_batch(c, Ctx(rep))
    assert text.startswith("batch 1 -> 8: 8x the samples share") and text.endswith(" us per sample instead of 10 us")
    # the layer's nanoseconds of work (and their starvation) are taken to grow with the batch: a bound
    assert 1.25 <= float(text.split("at most ")[1].split(" us")[0]) <= 1.27
    assert "lane occupancy" not in text


def test_a_calibrated_cpu_times_an_lrn_by_its_elements(tmp_path):
    """ONNX Runtime's LRN raises each element to -beta on one thread: 12.1 and 12.6 ns an element in
    AlexNet's and GoogLeNet's (2-core EPYC VM), 5.8 and 10.1 ms against 0.1 and 0.2 estimated from
    the op count. A profile with loop_ns 'LRN' prices the elements: 16 x 10 x 10 = 1,600 elements
    x 12 ns = 19.2 us, after the profile's 2 us dispatch: 21.2 us."""
    import yaml

    m = model([helper.make_node("LRN", ["x"], ["y"], size=5, name="lrn")], [vi("x", [1, 16, 10, 10])], [vi("y", None)])
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "profiles", "cpu-avx2.yaml")) as fh:
        d = yaml.safe_load(fh)
    d["name"], d["loop_ns"], d["launch_overhead_us"] = "cal", {"LRN": 12}, 2
    p = tmp_path / "cal.yaml"
    p.write_text(yaml.safe_dump(d))
    c = run(tmp_path, m, str(p)).score.layers[0]
    assert c.time_s == pytest.approx(2e-6 + 1600 * 12e-9, rel=1e-6)
    assert run(tmp_path, m, "cpu-avx2").score.layers[0].time_s < 0.25 * c.time_s  # the op count alone



def test_reductions_without_a_vector_path_are_priced_by_their_loops(tmp_path):
    """ONNX Runtime's ReduceLogSumExp takes an exponential per element (2.0-2.4 ns on a 2-core EPYC VM:
    212 us for [512, 200] where the reduce family's figure gave 5 us): loop_ns 'ReduceLogSumExp' of
    3 ns prices 102,400 elements at 307.2 us after the 2 us dispatch. ReduceSumSquare runs ReduceL2's
    loop (0.19-0.42 against 0.17-0.42 ns an element): the same figure, the same time as a ReduceL2
    of its shape (37 us measured against 5.6 us estimated before)."""
    import yaml

    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "profiles", "cpu-avx2.yaml")) as fh:
        d = yaml.safe_load(fh)
    d["name"], d["loop_ns"], d["launch_overhead_us"] = "cal", {"ReduceLogSumExp": 3}, 2
    d["op_efficiency"] = {"ReduceL2": 0.01}
    p = tmp_path / "cal.yaml"
    p.write_text(yaml.safe_dump(d))

    def one(op):
        m = model([helper.make_node(op, ["x"], ["y"], axes=[1], keepdims=0)], [vi("x", [512, 200])], [vi("y", None)],
                  opset=13)
        return run(tmp_path, m, str(p), name=f"{op}.onnx").score.layers[0]

    assert one("ReduceLogSumExp").time_s == pytest.approx(2e-6 + 102400 * 3e-9, rel=1e-6)
    assert one("ReduceSumSquare").time_s == pytest.approx(one("ReduceL2").time_s, rel=1e-9)
    assert one("ReduceSumSquare").time_s > 5 * one("ReduceMax").time_s  # the family's figure stays for the rest


# -- control flow: a body's nodes scored as the kernels they are ------------------------------------


def _rnn_cell(h_in: str, x: str, h_out: str) -> list:
    """One step of an Elman cell: h_out = tanh(h_in W + x U)."""
    return [helper.make_node("MatMul", [h_in, "W"], ["a"]), helper.make_node("MatMul", [x, "U"], ["b"]),
            helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Tanh", ["c"], [h_out])]


def test_a_scan_costs_its_body_nodes_as_kernels_once_per_step(tmp_path):
    """A recurrent cell written as a Scan (tf2onnx's and hand-written RNNs) runs its MatMuls, Add and
    Tanh as the kernels they are at every step: its time is the steps x the time of the same four
    nodes as a network of their own. Its body was once lumped into one layer at the pace of code with
    no fast kernel: a 100-step, 256-wide cell was estimated at 12.8 ms on a calibrated 2-core VM where
    ONNX Runtime took 0.58 ms (now 0.59 ms)."""
    steps, batch, hid = 50, 4, 256
    body = helper.make_graph(_rnn_cell("h_in", "x", "h_out"), "body", [vi("h_in", [batch, hid]), vi("x", [batch, hid])],
                             [vi("h_out", [batch, hid])])
    ws = [weight("W", [hid, hid]), weight("U", [hid, hid])]
    scan = model([helper.make_node("Scan", ["h0", "X"], ["hN"], body=body, num_scan_inputs=1)],
                 [vi("h0", [batch, hid]), vi("X", [steps, batch, hid])], [vi("hN", None)], ws)
    step = model(_rnn_cell("h0", "x", "h1"), [vi("h0", [batch, hid]), vi("x", [batch, hid])], [vi("h1", None)], ws)
    for hw in ("cpu-avx2", "v100"):
        looped = run(tmp_path, scan, hw, "scan.onnx").score
        once = run(tmp_path, step, hw, "step.onnx").score
        (c,) = looped.layers
        # a GPU's host queues the 200 kernels ahead of the device, where the one-step network's 4 wait
        # for it (scoring._queue_on_stream): its device time and its kernels are the steps' sum
        if hw == "cpu-avx2":
            assert c.time_s == pytest.approx(steps * sum(x.time_s for x in once.layers), rel=1e-9), hw
        assert c.t_device == pytest.approx(steps * sum(x.t_device for x in once.layers), rel=1e-9), hw
        assert c.kernels == steps * sum(x.kernels for x in once.layers), hw
        assert c.layer.workload.macs == steps * 2 * batch * hid * hid and c.layer.workload.iterations == steps
        # the weights are read once per step but held once: the network's weight bytes are the body's
        assert looped.totals["weight_bytes"] == steps * 2 * hid * hid * 4
        assert looped.weights_resident == once.weights_resident


def test_each_iteration_of_a_loop_pays_the_calibrated_fixed_time(tmp_path):
    """A Loop of 3 trips around a Scan of 4 steps runs 3 x (1 + 4) = 15 iterations and its Add 12
    times; a CPU profile's kernel_fixed_us 'control' (2 us) adds 15 x 2 us, nothing else."""
    import yaml

    from dnnperf.hardware import profile_from_dict

    inner = helper.make_graph([helper.make_node("Add", ["xi", "w"], ["yi"])], "inner", [vi("xi", [1, 64])],
                              [vi("yi", [1, 64])])
    outer = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                               helper.make_node("Scan", ["X"], ["s_out"], body=inner, num_scan_inputs=1)], "outer",
                              [vi("i", [], T.INT64), vi("c_in", [], T.BOOL)],
                              [vi("c_out", [], T.BOOL), vi("s_out", [4, 1, 64])])
    m = model([helper.make_node("Loop", ["n", "c"], ["y"], body=outer)], [vi("X", [4, 1, 64])], [vi("y", None)],
              [weight("w", [1, 64]), helper.make_tensor("n", T.INT64, [], [3]), helper.make_tensor("c", T.BOOL, [], [True])])
    insp = inspect_model(save(m, tmp_path))
    (row,) = [r for r in insp.rows if r.workload is not None and r.workload.parts]
    assert row.workload.iterations == 15
    assert [(op, n) for op, _, n in row.workload.parts] == [("Identity", 3), ("Add", 12)]
    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    plain = analyze(insp, profile_from_dict(d, "x"), Settings()).score
    looped = analyze(insp, profile_from_dict({**d, "kernel_fixed_us": {"control": 2.0}}, "x"), Settings()).score
    (a,), (b,) = ([c for c in s.layers if c.layer.op_type == "Loop"] for s in (plain, looped))
    assert b.time_s - a.time_s == pytest.approx(15 * 2e-6, rel=1e-9)
    assert b.losses["launch_overhead"] - a.losses["launch_overhead"] == pytest.approx(15 * 2e-6, rel=1e-9)


def test_the_host_waits_for_the_device_where_it_must_read_a_result_back():
    """rules.stream_timeline with a read: device 10, 10 us, host 5 us each, a 5 us read after the first
    kernel: the first ends at 15 us; the host waits for it (15), reads (20), queues the second (25),
    which ends at 35: increments 15 and 20 (without the read 15 and 10). A read before a kernel waits
    for everything queued so far: device 10, 0 us, host 5, 5 us, a 5 us read before the second: the
    host reaches 15 (end of the first) + 5 + 5 = 25: increments 15 and 10."""
    from dnnperf.rules import stream_timeline

    us = 1e-6
    got = stream_timeline([10 * us, 10 * us], [5 * us, 5 * us], [(0.0, 5 * us), (0.0, 0.0)])
    assert got == pytest.approx([15 * us, 20 * us])
    assert stream_timeline([10 * us, 10 * us], [5 * us, 5 * us]) == pytest.approx([15 * us, 10 * us])
    assert stream_timeline([10 * us, 0.0], [5 * us, 5 * us], [(0.0, 0.0), (5 * us, 0.0)]) == pytest.approx([15 * us, 10 * us])


def test_reads_back_to_the_host_are_counted_and_priced_on_an_eager_gpu(tmp_path):
    """The times a runtime must read a device result before it queues more (Workload.host_waits): a
    NonZero's output size (1), a Loop whose body computes its condition (1 per iteration: 5), a Loop
    that passes its condition through (0), an If whose condition is known only at run time (1). On a
    T4, eager: the Relu after a NonZero starts once the host has waited for the NonZero, read the count
    (one call at the 5 us launch figure) and queued the Relu: its time is the NonZero's end + 5 + its own
    5 us launch, less nothing queued ahead (by hand from the layers' device and host times); under
    --runtime graph nothing is priced and a note says so."""
    from dnnperf.hardware import load_profile

    big = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("NonZero", ["r"], ["nz"]),
                             helper.make_node("Cast", ["nz"], ["f"], to=T.FLOAT), helper.make_node("Relu", ["f"], ["y"])],
                            "g", [vi("x", [1, 64, 56, 56])], [vi("y", None)])
    insp = inspect_model(save(helper.make_model(big, opset_imports=[helper.make_opsetid("", 17)]), tmp_path, "nz.onnx"))
    assert [r.workload.host_waits for r in insp.rows] == [0, 1, 0, 0]

    def loop(cond_node):
        body = helper.make_graph([cond_node, helper.make_node("Add", ["s_in", "one"], ["s_out"])], "body",
                                 [vi("i", [], T.INT64), vi("c_in", [], T.BOOL), vi("s_in", [1, 8])],
                                 [vi("c_out", [], T.BOOL), vi("s_out", [1, 8])], [weight("one", [1, 8])])
        m = model([helper.make_node("Loop", ["n", "c", "s0"], ["s"], body=body)], [vi("s0", [1, 8])], [vi("s", None)],
                  [helper.make_tensor("n", T.INT64, [], [5]), helper.make_tensor("c", T.BOOL, [], [True])])
        return inspect_model(save(m, tmp_path, "loop.onnx")).rows[0].workload

    passed = loop(helper.make_node("Identity", ["c_in"], ["c_out"]))
    computed = loop(helper.make_node("Greater", ["i", "i"], ["c_out"]))
    assert (passed.iterations, passed.host_waits) == (5, 0) and (computed.iterations, computed.host_waits) == (5, 5)
    branch = [helper.make_graph([helper.make_node(op, ["x"], ["o"])], op, [], [vi("o", [1, 8])]) for op in ("Relu", "Neg")]
    iff = model([helper.make_node("If", ["flag"], ["y"], then_branch=branch[0], else_branch=branch[1])],
                [vi("flag", [], T.BOOL), vi("x", [1, 8])], [vi("y", None)])
    assert inspect_model(save(iff, tmp_path, "if.onnx")).rows[0].workload.host_waits == 1

    t4 = load_profile("t4")
    rep = analyze(insp, t4, Settings())
    relu, nz, cast, relu2 = rep.score.layers
    # each layer is one kernel here; by hand along the stream: the NonZero ends at e2, the host is at
    # max(h1 + h2, e2) + read + the Cast's launch, the Cast starts there, the Relu after it
    h = [c.t_launch for c in rep.score.layers]
    d = [c.t_device for c in rep.score.layers]
    assert all(x == pytest.approx(5e-6) for x in h)
    e1 = h[0] + d[0]
    e2 = max(e1, h[0] + h[1]) + d[1]
    host = max(h[0] + h[1], e2) + 5e-6 + h[2]
    e3 = max(e2, host) + d[2]
    e4 = max(e3, host + h[3]) + d[3]
    assert sum(c.time_s for c in rep.score.layers) == pytest.approx(e4, rel=1e-9)  # (the input's transfer aside)
    assert cast.time_s == pytest.approx(e3 - e2, rel=1e-9)
    assert any("1 time(s) the host reads a result back" in n and "priced on the stream" in n for n in rep.notes)
    # the same four ops on 16 values are launch-bound: the graph the fix proposes holds only what lies
    # between the reads
    small = helper.make_graph(list(big.node), "g", [vi("x", [1, 16])], [vi("y", None)])
    tiny = analyze(inspect_model(save(helper.make_model(small, opset_imports=[helper.make_opsetid("", 17)]), tmp_path,
                                      "nz16.onnx")), t4, Settings())
    fewer = [f["text"] for f in tiny.model_fixes if f["id"] == "fewer_launches"]
    assert fewer and "between the model's 1 read(s) back to the host" in fewer[0], fewer
    graph = analyze(insp, t4, Settings(runtime="graph"))
    assert any("not priced" in n and "1 time(s) the host reads" in n for n in graph.notes)
    assert not any("host reads" in n for n in analyze(insp, load_profile("cpu-avx2"), Settings()).notes)


def test_a_loops_fixes_name_its_iterations_and_what_removes_them(tmp_path):
    """A launch-bound Scan is told what its iterations cost and what removes them: a recurrent cell
    (matrix products in its body) the fused recurrent ops, a loop over independent rows (a distance to
    each row of a table, skl2onnx's k-nearest-neighbours) one broadcast op. Its occupancy is its
    kernels' mean, so no lane-count batch what-if is made from the loop's summed outputs (it said
    'batch 1 -> 1 raises lane occupancy')."""
    import yaml

    from dnnperf.fixes import attach_fixes
    from dnnperf.hardware import profile_from_dict

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        hw = profile_from_dict({**yaml.safe_load(fh), "kernel_fixed_us": {"control": 1.0}}, "x")
    cell = helper.make_graph(_rnn_cell("h_in", "x", "h_out") + [helper.make_node("Identity", ["h_out"], ["y"])],
                             "body", [vi("h_in", [1, 16]), vi("x", [1, 16])], [vi("h_out", [1, 16]), vi("y", [1, 16])])
    rnn = model([helper.make_node("Scan", ["h0", "X"], ["hN", "Y"], body=cell, num_scan_inputs=1)],
                [vi("h0", [1, 16]), vi("X", [40, 1, 16])], [vi("hN", None), vi("Y", None)],
                [weight("W", [16, 16]), weight("U", [16, 16])])
    dist = helper.make_graph([helper.make_node("Sub", ["q", "row"], ["d"]),
                              helper.make_node("ReduceSumSquare", ["d"], ["s"], axes=[1], keepdims=0)],
                             "body", [vi("row", [8])], [vi("s", [1])])
    knn = model([helper.make_node("Scan", ["T"], ["D"], body=dist, num_scan_inputs=1)], [vi("q", [1, 8])],
                [vi("D", None)], [weight("T", [40, 8])], opset=13)
    for m, how in ((rnn, "LSTM / GRU / RNN op"), (knn, "one broadcast op")):
        rep = analyze(inspect_model(save(m, tmp_path)), hw, Settings())
        attach_fixes(rep)
        (c,) = [c for c in rep.score.layers if c.layer.op_type == "Scan"]
        texts = {f["id"]: f["text"] for f in c.fixes}
        assert "40 iterations x 1 us" in texts["fewer_launches"] and how in texts["fewer_launches"], texts
        assert "batch 1 -> 1 " not in texts.get("bigger_batch", "")



def test_an_identity_writing_a_body_output_is_a_copy(tmp_path):
    """A runtime removes an Identity from the main graph, not from a loop body, whose outputs each run
    hands over in buffers of their own: skl2onnx's k-nearest-neighbours Scan passes its [N, 20] state
    through one at every iteration (its estimate at batch 1: -64% against ONNX Runtime before, -1%
    after). A Scan of 10 steps whose body passes an 8 KB state through and adds a row: 10 copies of
    8 KB read and written, 10 launches besides the Adds'."""
    body = helper.make_graph([helper.make_node("Identity", ["s_in"], ["s_out"]),
                              helper.make_node("Add", ["xi", "xi"], ["yi"])], "body",
                             [vi("s_in", [32, 64]), vi("xi", [64])], [vi("s_out", [32, 64]), vi("yi", [64])])
    m = model([helper.make_node("Scan", ["s", "X"], ["sN", "Y"], body=body, num_scan_inputs=1)],
              [vi("s", [32, 64]), vi("X", [10, 64])], [vi("sN", None), vi("Y", None)], opset=13)
    (row,) = [r for r in inspect_model(save(m, tmp_path)).rows if r.workload is not None]
    copy = {op: (pw, n) for op, pw, n in row.workload.parts}["Identity"]
    assert copy[1] == 10 and (copy[0].family, copy[0].act_bytes_read, copy[0].bytes_written, copy[0].launches) == \
        ("movement", 8192, 8192, 1)
    assert row.workload.launches == 20


def test_batch_of_a_sequence_a_scan_steps_through_is_its_second_dim(tmp_path):
    """A recurrent cell written as a Scan reads its sequence time-major, [steps, batch, features], as
    ONNX's LSTM does with layout 0: --batch sets dim 1 of it (it set dim 0, the steps: `sweep` said a
    100-step cell took 30 us at batch 1, one step, against 2.5 ms at its own shape). A rank-2 input a
    Scan steps through row by row keeps dim 0 (its rows are the batch)."""
    body = helper.make_graph(_rnn_cell("h_in", "x", "h_out"), "body", [vi("h_in", [1, 16]), vi("x", [1, 16])],
                             [vi("h_out", [1, 16])])
    m = model([helper.make_node("Scan", ["h0", "X"], ["hN"], body=body, num_scan_inputs=1)],
              [vi("h0", [1, 16]), vi("X", [40, 1, 16])], [vi("hN", None)],
              [weight("W", [16, 16]), weight("U", [16, 16])])
    g = inspect_model(save(m, tmp_path), ShapeOverrides(batch=8)).graph
    assert g.tensors["X"].shape == (40, 8, 16) and g.tensors["h0"].shape == (8, 16)
    rows = helper.make_graph([helper.make_node("Add", ["r", "r"], ["s"])], "body", [vi("r", [16])], [vi("s", [16])])
    m2 = model([helper.make_node("Scan", ["Q"], ["S"], body=rows, num_scan_inputs=1)], [vi("Q", [4, 16])],
               [vi("S", None)])
    assert inspect_model(save(m2, tmp_path, "rows.onnx"), ShapeOverrides(batch=8)).graph.tensors["Q"].shape == (8, 16)


def test_a_scatter_whose_indices_outweigh_its_data_is_told_to_move_only_the_data(tmp_path):
    """`x[:, :, 1:, 1:] += y` exports as a ScatterND with one row of 4 int64 per element written
    (MViTv2's top bottleneck); the memory-bound fix read '0.0 ops/byte against a ridge point'. By
    hand: data 2 x 512 x 512 x 4 B = 2,097,152 B read and as much written, updates 2 x 511 x 511 x 4
    = 2,088,968 B, indices 2 x 511 x 511 x 4 x 8 = 16,711,744 B: 73% of the 22,995,016 B it moves.
    A scatter of whole rows (indices [2, 1] into [4, 65536]) gets no such fix."""
    import numpy as np
    import onnx

    from dnnperf.fixes import Ctx, _raise_intensity
    from helpers import ints

    grid = np.stack(np.meshgrid(np.arange(1), np.arange(2), np.arange(1, 512), np.arange(1, 512), indexing="ij"), -1)
    assert grid.shape == (1, 2, 511, 511, 4)
    box = onnx.numpy_helper.from_array(grid.astype(np.int64), "idx")
    m = model([helper.make_node("ScatterND", ["x", "idx", "u"], ["y"], name="s")],
              [vi("x", [1, 2, 512, 512]), vi("u", [1, 2, 511, 511])], [vi("y", None)], [box])
    rep = analyze(inspect_model(save(m, tmp_path, "box.onnx")), load_profile("v100"), Settings())
    c = next(c for c in rep.score.layers if c.layer.op_type == "ScatterND")
    assert c.layer.workload.bytes_total == 22_995_016
    text, saving = _raise_intensity(c, Ctx(rep))
    assert "indices (16.7 MB of int64, a row of 4 per element) are 73% of the 23 MB" in text
    assert saving == pytest.approx(c.time_s * 16_711_744 / 22_995_016)
    assert c.fixes[0]["text"] == text
    rows = model([helper.make_node("ScatterND", ["x", "idx", "u"], ["y"], name="s")],
                 [vi("x", [4, 65536]), vi("u", [2, 65536])], [vi("y", None)], [ints("idx", [[0], [2]])])
    rep = analyze(inspect_model(save(rows, tmp_path, "rows.onnx")), load_profile("v100"), Settings())
    c = next(c for c in rep.score.layers if c.layer.op_type == "ScatterND")
    assert all("indices" not in f["text"] for f in c.fixes)


def test_an_epilogue_on_a_systolic_array_works_on_the_real_outputs_only(tmp_path):
    """A 3 x 3 depthwise convolution with a bias over 1 x 32 x 56 x 56, then Clip (ReLU6), on a TPU v4
    (fp32 at 92 TOP/s). Each group's product is 3,136 x 1 x 9 on the (1, 128, 128) weight-stationary
    tile: fit (1 / 128) x (9 / 128). The padding wastes multiply-accumulates only: 2 x 903,168 MACs /
    fit, plus the 100,352 bias adds on the real outputs = 3,288,434,688 ops, 35.74 us. The bias adds
    were charged as padded work too (37.7 us), and fused with the Clip (2 ops an element, 200,704) the
    layer came out 41.7 us, slower than the convolution and the Clip apart."""
    m = model([helper.make_node("Conv", ["x", "w", "b"], ["c"], group=32, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
               helper.make_node("Clip", ["c", "lo", "hi"], ["y"])],
              [vi("x", [1, 32, 56, 56])], [vi("y", None)],
              [weight("w", [32, 1, 3, 3]), weight("b", [32]), weight("lo", []), weight("hi", [])])
    fit = (1 / 128) * (9 / 128)
    apart = run(tmp_path, m, hw="tpu-v4").score.layers
    conv = apart[0]
    assert (conv.layer.workload.macs, conv.layer.workload.other_ops) == (903_168, 100_352)
    assert conv.tile_efficiency == pytest.approx(fit)
    assert conv.t_compute == pytest.approx((2 * 903_168 / fit + 100_352) / 92e12, rel=1e-6)
    fused = run(tmp_path, m, hw="tpu-v4", name="f.onnx", fusion="typical").score.layers
    assert len(fused) == 1 and fused[0].t_compute == pytest.approx((2 * 903_168 / fit + 301_056) / 92e12, rel=1e-6)
    assert fused[0].time_s <= sum(c.time_s for c in apart)


def test_an_element_op_the_runtime_loops_over_in_scalar_code_keeps_its_pace_per_element_at_any_size(tmp_path):
    """A calibrated CPU whose bandwidth curve gives small working sets less bandwidth (40 GB/s at 0.3 MB, 120 at
    3.1) and whose Softplus ran at 0.0117 of its roofline on calibrate's 393,216 elements: a Softplus costs its
    elements at that pace, so 43,264 elements take 43,264 / 393,216 of the timed tensor's time (ONNX Runtime's
    scalar loop: 5.6-6.4 ns an element at both sizes on a 2-core EPYC); by hand, the timed tensor streams
    8 x 393,216 bytes at 120 GB/s, 26.2 us, over 0.0117: 2,240 us. A Tanh (a vector kernel, 0.45) still pays the
    curve's slower small working sets: more per element at 43,264."""
    import yaml
    from onnx import helper as oh

    from dnnperf.hardware import profile_from_dict

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["memory"] = {**d["memory"], "bandwidth_curve": {0.3: 40.0, 3.146: 120.0}}
    hw = profile_from_dict({**d, "op_efficiency": {"Softplus": 0.0117, "Tanh": 0.45}}, "x")

    def per_element(op, shape):
        m = model([oh.make_node(op, ["x"], ["y"], name="op")], [vi("x", list(shape))], [vi("y", None)], opset=18)
        c = analyze(inspect_model(save(m, tmp_path, f"{op}{shape[1]}.onnx")), hw, Settings(),
                    with_fixes=False).score.layers[0]
        n = c.layer.workload.parallel_work
        return (c.time_s - c.t_launch) / n, n

    big, n = per_element("Softplus", (1, 128, 3072))
    assert n == 393_216 and big * n == pytest.approx(8 * n / 120e9 / 0.0117, rel=0.02)
    small, n = per_element("Softplus", (1, 256, 13, 13))
    assert n == 43_264 and small == pytest.approx(big, rel=0.01)
    assert per_element("Tanh", (1, 256, 13, 13))[0] > 1.3 * per_element("Tanh", (1, 128, 3072))[0]


def test_a_pow_by_two_or_three_is_priced_as_the_runtimes_multiplying_loop(tmp_path):
    """ONNX Runtime squares or cubes by multiplying (0.25-0.5 ns an element on a 2-core EPYC) and calls powf for any
    other exponent (2.4-2.9 ns): a Pow by a constant 2 or 3 names the kernel 'Pow.square' and takes that op figure,
    another exponent the Pow figure. With figures 0.3 and 0.03 and the same bytes, by hand the square takes a tenth
    of the other's time (both past the scalar-loop threshold's reach: 0.3 is a vector op's figure)."""
    import numpy as np
    import yaml
    from onnx import helper as oh, numpy_helper

    from dnnperf.hardware import profile_from_dict

    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    hw = profile_from_dict({**d, "op_efficiency": {"Pow": 0.03, "Pow.square": 0.3}}, "x")

    def layer(e):
        m = model([oh.make_node("Pow", ["x", "e"], ["y"], name="op")], [vi("x", [1, 64, 56, 56])], [vi("y", None)],
                  [numpy_helper.from_array(np.array(e, np.float32), "e")])
        return analyze(inspect_model(save(m, tmp_path, f"p{e}.onnx")), hw, Settings(), with_fixes=False).score.layers[0]

    sq, cube, other = layer(2.0), layer(3.0), layer(2.5)
    assert sq.layer.workload.kernel == cube.layer.workload.kernel == "Pow.square" and not other.layer.workload.kernel
    assert (sq.time_s - sq.t_launch) == pytest.approx(0.1 * (other.time_s - other.t_launch), rel=0.02)
