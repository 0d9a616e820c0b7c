"""The library-aware GPU model: tile and wave quantization, split-K, power-limited clocks, L2
residency, multi-die boards, and the published kernel times it is validated against.

Expected figures are hand calculations from the documented constants in
dnnperf/data/gpu_generations.yaml, or the published DeepBench measurements themselves."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from dnnperf import gpu
from dnnperf.api import analyze, inspect_model
from dnnperf.hardware import load_profile
from dnnperf.published import load_published, predict, records, sheets_for, validate_published
from dnnperf.scoring import Settings
from helpers import SAMPLES, model, save, vi
from onnx import TensorProto, helper
from typer.testing import CliRunner

from dnnperf.cli import app


def run_cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEEPBENCH = os.path.join(ROOT, "bench", "data", "deepbench-v100-t4.json")
H200_KERNELS = os.path.join(ROOT, "bench", "data", "h200-kernels.json")


# -- tiles and waves, by hand -----------------------------------------------------------------

def _lib(**over):
    return gpu.library("volta", over)


def test_tile_quantization_and_waves_by_hand():
    # one 128x128 tile only, 80 SMs: a 256 x 256 x 4096 product is 4 tiles = 4 CTAs on 4 SMs, one wave
    lib = _lib(tiles=[[128, 128]], split_k_min=10**9)
    p = gpu.plan_gemm(256, 256, 4096, 1, 80, lib, "cuda_cores", 80e12, 1.5e9, "fp32")
    assert p.tile == (128, 128) and p.ctas == 4 and p.waves == 1 and p.split_k == 1
    # math of one tile on one SM: 2*128*128*4096 ops at (80e12/80) ops/s x tile feed (128/48 -> 1.0)
    assert p.tile_eff == 1.0
    assert p.seconds == pytest.approx(2 * 128 * 128 * 4096 / 1e12)
    # 257 rows need 3 row tiles: partial tiles do full work (tile quantization), still one wave
    q = gpu.plan_gemm(257, 256, 4096, 1, 80, lib, "cuda_cores", 80e12, 1.5e9, "fp32")
    assert q.ctas == 6 and q.seconds == pytest.approx(p.seconds)
    # 81 tiles on 80 SMs: with 16384/(128*128) = 1 resident CTA per SM the 81st runs in a second wave
    r = gpu.plan_gemm(128 * 81, 128, 4096, 1, 80, lib, "cuda_cores", 80e12, 1.5e9, "fp32")
    assert r.ctas == 81 and r.waves == 2 and r.seconds == pytest.approx(2 * p.seconds)
    # 128 x 64 tiles: 16384/(128*64) = 2 CTAs share an SM. 3 tiles on 1 SM are a round of 2 (sharing
    # the SM's rate: 2 tiles' math) and a last round of 1 (1 tile's math): 3 tiles' math, not 4.
    # At 3 GHz the K loop's latency (4096/8 steps x 300 cycles = 51 us) stays below one tile's math (67 us)
    lib64 = _lib(tiles=[[128, 64]], split_k_min=10**9)
    h = gpu.plan_gemm(384, 64, 4096, 1, 1, lib64, "cuda_cores", 1e12, 3e9, "fp32")
    assert h.ctas == 3 and h.waves == 2 and not h.latency_bound
    assert h.seconds == pytest.approx(3 * 2 * 128 * 64 * 4096 / 1e12)


def test_a_kernel_family_with_large_tiles_only_by_hand():
    """``gemm_tiles``: products wider than gemv_max on both sides choose from the listed tiles alone;
    skinny ones keep every tile."""
    lib = _lib(gemm_tiles={"cuda_cores:int8": [[128, 128]]}, split_k_min=10**9)
    # 35 x 700: 1 x 6 tiles of 128 x 128 = 6 CTAs on 40 SMs, one wave of one tile's whole K loop
    p = gpu.plan_gemm(35, 700, 2048, 1, 40, lib, "cuda_cores", 40e12, 1.5e9, "int8")
    assert p.tile == (128, 128) and p.ctas == 6 and p.waves == 1
    assert p.seconds == pytest.approx(2 * 128 * 128 * 2048 / 1e12)
    # the same product in fp32 (no entry) may take a smaller tile and finishes sooner
    assert gpu.plan_gemm(35, 700, 2048, 1, 40, lib, "cuda_cores", 40e12, 1.5e9, "fp32").seconds < p.seconds
    # 4 columns (<= gemv_max 8): the narrow tiles stay available
    assert gpu.plan_gemm(3072, 4, 1024, 1, 40, lib, "cuda_cores", 40e12, 1.5e9, "int8").tile[1] < 128


def test_t4_int8_products_of_35_rows_take_one_tile_wave():
    """DeepBench's T4 int8 GEMMs of 35 rows (cuBLAS 10, DP4A): 101 / 102 us at N = 700 / 1,500 and
    K = 2048; the same time at both widths is one wave of 128 x 128 tiles (6 and 12 CTAs on 40 SMs)."""
    from dnnperf.published import Kernel, predict

    t4 = load_profile("t4")
    for n, measured in ((700, 101e-6), (1500, 102e-6)):
        t, c = predict(Kernel("s", "g", "int8", "gemm", (35, n, 2048), measured, False), t4)
        assert c.plan.tile == (128, 128) and c.plan.waves == 1
        assert 1 / 1.25 < t / measured < 1.25


def test_strided_1x1_tensor_core_convolution_reads_only_sampled_pixels_where_the_library_does():
    """DeepBench T4 fp16: 16 x 256 x 56 x 56 -> 128 filters of 1 x 1 at stride 2 takes 53 us. Its input
    alone is 25.7 MB: read whole, that needs 485 GB/s of the card's 320, so cuDNN 7.6 reads only the
    sampled quarter. cuDNN 9 on Hopper (strided_pointwise_sampled false) keeps the whole read."""
    from dnnperf.published import Kernel

    t4 = load_profile("t4")
    dims = (16, 256, 56, 56, 128, 1, 1, 0, 0, 2, 2)
    assert 16 * 256 * 56 * 56 * 2 / 53e-6 > 320e9
    t, c = predict(Kernel("s", "g", "fp16", "conv", dims, 53e-6, False), t4)
    assert c.unit == "tensor_cores" and 1 / 1.25 < t / 53e-6 < 1.25
    whole = replace(t4, gpu={**t4.gpu, "strided_pointwise_sampled": False}, name="t4-whole-read")
    t_whole, _ = predict(Kernel("s", "g", "fp16", "conv", dims, 53e-6, False), whole)
    # the three quarters of 25.7 MB not read, at the T4's streaming bandwidth (under 320 GB/s)
    assert t_whole - t > 0.75 * 16 * 256 * 56 * 56 * 2 / 320e9
    assert gpu.library("turing").strided_pointwise_sampled and gpu.library("volta").strided_pointwise_sampled
    assert not gpu.library("hopper").strided_pointwise_sampled
    # a stride-1 1 x 1 convolution and a CUDA-core (fp32) strided one read their whole input
    t1, _ = predict(Kernel("s", "g", "fp16", "conv", dims[:9] + (1, 1), 1e-6, False), t4)
    t1w, _ = predict(Kernel("s", "g", "fp16", "conv", dims[:9] + (1, 1), 1e-6, False), whole)
    assert t1 == t1w
    f, _ = predict(Kernel("s", "g", "fp32", "conv", dims, 1e-6, False), t4)
    fw, _ = predict(Kernel("s", "g", "fp32", "conv", dims, 1e-6, False), whole)
    assert f == fw


def test_split_k_fills_idle_sms_and_pays_for_partial_sums():
    lib = _lib(tiles=[[64, 64]], split_k_min=1024)
    # 64 x 64 output = one tile on 80 SMs; K = 65536: split into min(80 // 1, 65536 // 1024) = 64 slices
    p = gpu.plan_gemm(64, 64, 65536, 1, 80, lib, "cuda_cores", 80e12, 1.5e9, "fp32")
    assert p.split_k == 64 and p.ctas == 64
    # 63 extra partial 64x64 fp32 outputs, each written and read back
    assert p.partial_bytes == 63 * 64 * 64 * 4 * 2
    no = gpu.plan_gemm(64, 64, 65536, 1, 80, lib, "cuda_cores", 80e12, 1.5e9, "fp32", split_k=False)
    assert no.split_k == 1 and p.seconds < no.seconds / 30


def test_k_loop_latency_bounds_short_products_gemm_and_conv_steps_apart():
    # one 128x128 tile on 80 SMs, K = 1024 in fp16 (a Hopper GEMM step covers 32 K, gemm_k_step):
    # 32 steps of k_step_cycles (200) at 1 GHz
    lib = gpu.library("hopper", {"tiles": [[128, 128]], "split_k_min": 10**9})
    p = gpu.plan_gemm(128, 128, 1024, 1, 80, lib, "tensor_cores", 800e12, 1e9, "fp16")
    # math: 2*128*128*1024 ops at 10 TOP/s per SM (tile feed 128/96 -> 1) = 3.4 us < 32 x 200 ns = 6.4 us
    assert p.latency_bound and p.seconds == pytest.approx(32 * 200e-9)
    # the same product as a convolution's implicit GEMM steps the MMA instruction's 16 K and waits
    # conv_k_step_cycles (300) per step: 64 x 300 ns
    c = gpu.plan_gemm(128, 128, 1024, 1, 80, lib, "tensor_cores", 800e12, 1e9, "fp16", gemv=False,
                      step_cycles=lib.conv_k_step_cycles)
    assert c.seconds == pytest.approx(64 * 300e-9)
    # generations before Ampere pipeline their K loop in two stages: GEMM steps wait 300 cycles too
    assert gpu.library("volta").k_step_cycles == gpu.library("volta").conv_k_step_cycles == 300
    # int8 on the CUDA cores (DP4A: 4 bytes of K per lane per instruction) steps 32 K at a time, on
    # tensor cores 16: K = 1024 is 32 steps there against 64 (Turing, 300 cycles a step at 1 GHz)
    tu = gpu.library("turing", {"tiles": [[128, 128]], "split_k_min": 10**9})
    # (math: 2*128*128*1024 ops at 25 TOP/s per SM = 1.3 us, below either loop)
    simt = gpu.plan_gemm(128, 128, 1024, 1, 40, tu, "cuda_cores", 1e15, 1e9, "int8", gemv=False)
    tc = gpu.plan_gemm(128, 128, 1024, 1, 40, tu, "tensor_cores", 1e15, 1e9, "int8", gemv=False)
    assert simt.latency_bound and simt.seconds == pytest.approx(32 * 300e-9)
    assert tc.latency_bound and tc.seconds == pytest.approx(64 * 300e-9)


def test_power_limited_clock_by_hand():
    lib = gpu.library("turing")
    # T4: 70 W over 40 SMs = 1.75 W per SM; flat-out fp32 CUDA-core work needs 3.35 W per SM
    assert gpu.sustained_clock_fraction(lib, 70, 40, "cuda_cores", "fp32") == pytest.approx(1.75 / 3.35)
    # a V100 (300 W, 80 SMs = 3.75 W per SM) holds its clock
    assert gpu.sustained_clock_fraction(gpu.library("volta"), 300, 80, "cuda_cores", "fp32") == 1.0


def test_winograd_and_fft_tiling_by_hand():
    # F(4x4, 3x3): 6 x 6 = 36 transform points per 4 x 4 output tile, 9 x 16 / 36 = 4x fewer multiplies;
    # a 56 x 56 map is 14 x 14 tiles, fully covered
    assert gpu.winograd_tiling(4, 3, 56, 56) == (36, 196, pytest.approx(4.0))
    # 7 x 7: 2 x 2 tiles of 4 x 4 cover 64 outputs for 49 useful
    assert gpu.winograd_tiling(4, 3, 7, 7) == (36, 4, pytest.approx(4.0 * 49 / 64))
    # 5 x 5 filters on the same 6 x 6 transform tile: F(2x2, 5x5), 25 x 4 / 36 fewer multiplies
    assert gpu.winograd_tiling(2, 5, 28, 28) == (36, 196, pytest.approx(100 / 36))
    # the fused kernel's F(2x2, 3x3): 16 points, 36 / 16 = 2.25x; 7 x 7 takes 4 x 4 tiles of 2 x 2 (64 for 49)
    assert gpu.winograd_tiling(2, 3, 7, 7) == (16, 16, pytest.approx(2.25 * 49 / 64))
    # transformed tensors, fp32: 36 points x 16 tiles x 16 images x 512 channels, both sides; the filters'
    # 36 x 512 x 512 (none when an engine transformed them at build time)
    sizes = gpu.winograd_transforms(36, 16, 16, 512, 256, 4)
    assert sizes == (36 * 16 * 16 * 512 * 4, 36 * 16 * 16 * 256 * 4, 36 * 512 * 256 * 4)
    assert gpu.winograd_transforms(36, 16, 16, 512, 256, 4, filters=False) == sizes[:2]
    # FFT of a 28 x 28 map padded for a 5 x 5 filter: 32 x 32 real points, 32 x 17 complex ones; 25 x 784
    # multiplies per channel pair direct against 4 x 544 (a complex product is four real ones)
    points, gain = gpu.fft_points(28, 28, 5)
    assert points == 32 * 17 and gain == pytest.approx(25 * 784 / (4 * 544))
    # complex fp32 spectra: 8 bytes a value
    assert gpu.fft_transforms(544, 16, 192, 32, 4) == (544 * 16 * 192 * 8, 544 * 16 * 32 * 8, 544 * 192 * 32 * 8)


def test_a_generation_turns_a_default_algorithm_off_by_naming_its_precision():
    # maps merge key by key over the default entry: Kepler's Winograd is off only because fp32 is named
    assert not gpu.library("kepler").winograd.get("fp32") and gpu.library("kepler").fft.get("fp32")
    assert gpu.library("maxwell").winograd.get("fp32") and not gpu.library("hopper").fft.get("fp32")
    # an empty map says "none": a profile turning every Winograd precision off
    assert gpu.library("volta", {"winograd": {}}).winograd == {}
    assert gpu.library("volta", {"winograd": {"fp16": True}}).winograd == {"fp32": True, "fp16": True}


def test_a_report_says_which_convolutions_take_a_faster_algorithm(tmp_path):
    """The estimate takes the library's fastest algorithm (benchmark-mode search): the report says so, and
    for how many convolutions, where it is not implicit GEMM; a layer's JSON row names its algorithm."""
    from dnnperf.documents import report_dict
    from helpers import conv_model

    insp = inspect_model(save(conv_model(512, 512, 14, 14, 3, pads=[1, 1, 1, 1], batch=16), tmp_path, "c.onnx"))
    rep = analyze(insp, load_profile("v100"), Settings())
    assert [c.algorithm for c in rep.score.layers if c.layer.op_type == "Conv"] == ["winograd"]
    assert any(n.startswith("1 convolution(s) costed with a faster algorithm than implicit GEMM (1 winograd)")
               and "heuristic pick may be slower" in n for n in rep.notes)
    assert [r["algorithm"] for r in report_dict(rep)["layers"] if r["op_type"] == "Conv"] == ["winograd"]
    # Hopper's fp32: implicit GEMM, nothing to say
    rep = analyze(insp, load_profile("h200"), Settings(precision="fp32"))
    assert not any("faster algorithm than implicit GEMM" in n for n in rep.notes)


def _deepbench_conv(dims, seconds):
    from dnnperf.published import Kernel

    return Kernel("s", "g", "fp32", "conv", dims, seconds, False)


def test_5x5_stride_1_fp32_convolution_takes_a_transform_algorithm_on_volta():
    """cuDNN runs 5 x 5 filters at stride 1 with fewer multiplies than the MAC count. DeepBench V100
    fp32: 16 x 192 x 28 x 28, 32 filters of 5 x 5: 192 us, 20 TFLOP/s of MAC-count work on a 15.7
    TFLOP/s GPU. With 32 filters the non-fused Winograd's F(2x2, 5x5) saves 2.8x but moves its transformed
    input (36 points per 2 x 2 tile, 192 channels) twice; the FFT of the 32 x 32 padded map saves 9x
    for spectra of 544 points: the library's pick. Strided 5 x 5 ones stay implicit GEMM."""
    from dnnperf.published import predict

    v100 = load_profile("v100")
    t, c = predict(_deepbench_conv((16, 192, 28, 28, 32, 5, 5, 2, 2, 1, 1), 192e-6), v100)
    assert c.algorithm == "fft" and 1 / 1.5 < t / 192e-6 < 1.5
    # the input's, the products' and the filters' transforms: three kernels besides the complex products
    assert c.kernels == 4
    strided = _deepbench_conv((16, 64, 80, 350, 128, 5, 5, 1, 1, 2, 2), 3330e-6)
    assert predict(strided, v100)[1].algorithm == "implicit_gemm"


def test_the_library_picks_its_3x3_algorithm_by_the_channels():
    """Non-fused Winograd's transform traffic grows with C + K and its batched GEMMs with C x K, so it
    pays off with many channels; with few, the fused F(2x2, 3x3) kernel (no traffic of its own) is
    faster. DeepBench V100 fp32 (published times): 16 x 512 x 14 x 14 with 512 filters in 506 us, 29
    TFLOP/s of MAC-count work (2 x 16 x 196 x 512 x 512 x 9 / 506 us), more than 80% of what even the fused
    kernel's 2.25x saving gives at the 15.7 peak; 16 x 64 x 56 x 56 with 64 filters in 179 us (21 TFLOP/s)."""
    from dnnperf.published import predict

    v100 = load_profile("v100")
    wide = _deepbench_conv((16, 512, 14, 14, 512, 3, 3, 1, 1, 1, 1), 506e-6)
    t, c = predict(wide, v100)
    assert c.algorithm == "winograd" and c.kernels == 4 and 1 / 1.35 < t / 506e-6 < 1.35
    narrow = _deepbench_conv((16, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1), 179e-6)
    t, c = predict(narrow, v100)
    assert c.algorithm == "winograd_fused" and c.kernels == 1 and 1 / 1.25 < t / 179e-6 < 1.25
    # a TensorRT engine transforms the filters when it is built: one transform kernel fewer
    engine = replace(wide, runtime="tensorrt")
    assert predict(engine, v100)[1].kernels == 3
    # no Winograd or FFT kernels in a precision the generation lacks them for (Hopper's fp32): implicit GEMM
    assert predict(wide, load_profile("h200"))[1].algorithm == "implicit_gemm"


def test_profile_from_a_spec_sheet_gets_generation_defaults(tmp_path):
    t4 = load_profile("t4")
    # no gpu section at all: the generation comes from the title
    bare = replace(t4, gpu={}, name="t4-bare")
    assert gpu.library_of(bare).generation == "turing"
    assert gpu.library_of(replace(t4, gpu={}, title="Some Ada board", name="x")).generation == "ada"


@pytest.mark.parametrize("title, generation", [
    ("NVIDIA RTX A6000", "ampere"), ("NVIDIA A800 80GB", "ampere"), ("NVIDIA RTX 6000 Ada Generation", "ada"),
    ("Quadro RTX 8000", "turing"), ("GeForce GTX 1650", "turing"), ("TITAN Xp", "pascal"), ("Quadro GV100", "volta"),
    ("NVIDIA H800", "hopper"), ("Tesla K40", "kepler"), ("Some accelerator", None),
    ("NVIDIA H20", "hopper"), ("NVIDIA L20", "ada"), ("NVIDIA RTX PRO 6000 Blackwell", "blackwell"),
    ("Jetson Nano", "maxwell"), ("Jetson TX2", "pascal"), ("NVIDIA T1000", "turing"),
    ("GeForce GTX TITAN X", "maxwell"), ("NVIDIA TITAN X (Pascal)", "pascal"),
    # the architecture named outright, and Turing's Quadro RTX line, before the generic "rtx 40" / "rtx 50"
    ("NVIDIA RTX 5000 Ada Generation", "ada"), ("NVIDIA RTX 4000 SFF Ada", "ada"), ("NVIDIA Quadro RTX 4000", "turing"),
    ("Quadro RTX 5000", "turing"), ("NVIDIA GeForce RTX 5090", "blackwell"), ("NVIDIA GeForce RTX 4090", "ada"),
    # a hint names a word's start, never letters inside it: CDNA2 is no A2, so an AMD board gets the
    # defaults (it was given Ampere's cuBLAS knowledge, "named by its title")
    ("AMD Instinct MI210 (CDNA2)", None), ("NVIDIA A2 16GB", "ampere"), ("NVIDIA A10G", "ampere")])
def test_the_generation_a_spec_sheet_title_names(title, generation):
    """A spec-sheet profile without gpu.generation gets the library knowledge of the generation its
    title names (product names by architecture, per NVIDIA's product pages); none: the defaults."""
    assert gpu.infer_generation(title, "x") == generation


# -- L2 residency and multi-die boards --------------------------------------------------------

def _add_model(tmp_path, n):
    m = model([helper.make_node("Add", ["x", "y"], ["z"])], [vi("x", [n]), vi("y", [n])], [vi("z", [n])])
    return inspect_model(save(m, tmp_path))


def test_activations_that_fit_l2_are_read_from_l2(tmp_path):
    insp = _add_model(tmp_path, 1_000_000)  # 8 MB read + 4 MB written, fp32
    t4 = load_profile("t4")
    lib = gpu.library_of(t4)
    small = analyze(insp, t4, Settings()).score.layers[0]
    big = analyze(insp, replace(t4, onchip_mb=48.0, name="t4-48mb"), Settings()).score.layers[0]
    # 12 MB > 0.75 x 4 MB: from DRAM at 320 GB/s x bandwidth_efficiency
    assert small.t_memory == pytest.approx(12e6 / (320e9 * lib.bandwidth_efficiency))
    # 12 MB <= 0.75 x 48 MB: from L2 at l2_bandwidth_factor x DRAM bandwidth (no onchip_gbs in the profile)
    assert big.t_memory == pytest.approx(12e6 / (320e9 * lib.l2_bandwidth_factor))


def test_hopper_l2_bandwidth_follows_its_sms_and_clock_not_its_dram(tmp_path):
    """The H200 has the H100's L2 (5,120 B/clk over GH100's 144 SMs, 0.7 of it reached) with faster
    DRAM: both read L2-resident activations at 35.6 B x 132 SMs x 1.83 GHz x 0.7 = 6.02 TB/s, where a
    factor of their DRAM bandwidth gave 8.4 and 12 TB/s."""
    insp = _add_model(tmp_path, 1_000_000)  # 12 MB of activations: inside either L2
    by_hand = 35.6 * 132 * 1.83e9 * 0.7
    for name in ("h100", "h200"):
        hw = load_profile(name)
        assert gpu.l2_bandwidth(hw, gpu.library_of(hw)) == pytest.approx(by_hand)
        layer = analyze(insp, hw, Settings(runtime="graph")).score.layers[0]
        assert layer.t_memory == pytest.approx(12e6 / by_hand)
    # a profile's own memory.onchip_gbs still wins
    h200 = load_profile("h200")
    assert gpu.l2_bandwidth(replace(h200, onchip_gbs=9000.0), gpu.library_of(h200)) == pytest.approx(9e12)


def test_a_two_die_board_runs_batch_1_on_one_die():
    insp = inspect_model(os.path.join(SAMPLES, "mobilenet_v2.onnx"))
    die, board = load_profile("k80"), load_profile("k80-board")
    one = analyze(insp, die, Settings(batch=1)).score.totals["latency_s"]
    assert analyze(insp, board, Settings(batch=1)).score.totals["latency_s"] == pytest.approx(one)
    shared, used = gpu.board_share(board, 8)
    assert used == 2 and shared.dram_gbs == board.dram_gbs
    shared, used = gpu.board_share(board, 1)
    assert used == 1 and shared.dram_gbs == pytest.approx(board.dram_gbs / 2)
    assert shared.compute_units == board.compute_units // 2


def test_eager_pays_host_launches_graph_replay_does_not():
    insp = inspect_model(os.path.join(SAMPLES, "resnet50.onnx"))
    v100 = load_profile("v100")
    eager = analyze(insp, v100, Settings(precision="fp16")).score.totals
    graph = analyze(insp, v100, Settings(precision="fp16", runtime="graph")).score.totals
    # eager: every kernel costs at least the 5 us host launch
    assert eager["latency_s"] >= eager["launches"] * 5e-6
    assert graph["latency_s"] < eager["latency_s"]


# -- published kernel times -------------------------------------------------------------------

@pytest.fixture(scope="module")
def deepbench():
    return load_published(DEEPBENCH)


def test_published_data_is_the_deepbench_set(deepbench):
    # 870 distinct kernels over five sheets, as the issue counts them
    assert len(deepbench) == 870
    assert len({k.sheet for k in deepbench}) == 5
    assert {k.precision for k in deepbench} == {"fp32", "fp16", "int8"}
    # a quarter (by hash) is held out, give or take sampling
    share = sum(k.held_out for k in deepbench) / len(deepbench)
    assert 0.2 < share < 0.3


@pytest.mark.parametrize("name,data", [("v100", DEEPBENCH), ("t4", DEEPBENCH), ("h200", H200_KERNELS),
                                       ("p100", os.path.join(ROOT, "bench", "data", "deepbench-pascal-readme.json"))])
def test_profile_validation_record_is_current(name, data):
    """The record a profile shows (hw show, hw list, reports) is what the model gives today."""
    hw = load_profile(name)
    assert hw.validation, f"{name} should carry its validation record"
    label = os.path.relpath(data, ROOT).replace(os.sep, "/")
    fresh = records(sheets_for(load_published(data), hw), hw, label)
    assert [dict(r) for r in hw.validation if "kernels" in r] == fresh, (
        f"profiles/{name}.yaml's validation block is stale: regenerate with "
        f"python bench/published.py --records --data {label} --hw {name}")


# -- Hopper library knowledge (measured on an H200: bench/data/h200-kernels.json) ---------------

def test_gemm_row_strides_must_fill_16_bytes_on_hopper():
    lib = gpu.library("hopper")
    # fp16: 16 bytes = 8 elements; N = 7435 (odd) misses it, N = 7000 and K = 1024 fill it
    assert gpu.gemm_misaligned(lib, 7435, 1024, "fp16") and not gpu.gemm_misaligned(lib, 7000, 1024, "fp16")
    # K = 1530 halves = 3060 bytes, not a multiple of 16
    assert gpu.gemm_misaligned(lib, 3000, 1530, "fp16")
    # tf32 reads fp32 data: 16 bytes = 4 elements, so N = 9124 is aligned for tf32 but not for fp16 (9124 % 8 = 4)
    assert not gpu.gemm_misaligned(lib, 9124, 1760, "tf32") and gpu.gemm_misaligned(lib, 9124, 1760, "fp16")
    # generations with no such rule (cuBLAS 10 era, checked on DeepBench's V100 sheets) never flag it
    assert not gpu.gemm_misaligned(gpu.library("volta"), 7435, 1024, "fp16")


def _gemm_time(hw, m, k, n, precision):
    from dnnperf.published import Kernel, predict

    return predict(Kernel("s", "g", precision, "gemm", (m, n, k), 1.0, False, "graph"), hw)[0]


def test_misaligned_tensor_core_gemm_costs_the_measured_factor():
    h200 = load_profile("h200")
    # same plan (N differs by 2 columns), one of them misaligned with 4-byte strides: the time scales by
    # 1/0.33 and the column ratio, 7434/7432 (hopper: gemm_misaligned_efficiency 0.33; measured fp16
    # products with 4-8-byte strides, K = 1530 or N = 1500, at 145-240 TFLOP/s against ~550-690 for
    # aligned ones of the same size, a factor of about 3)
    slow = _gemm_time(h200, 3072, 1024, 7434, "fp16")
    fast = _gemm_time(h200, 3072, 1024, 7432, "fp16")
    assert slow / fast == pytest.approx(1 / 0.33, rel=0.05)
    # fp32 runs on the CUDA cores: no tensor-core alignment rule
    assert _gemm_time(h200, 3072, 1024, 7435, "fp32") / _gemm_time(h200, 3072, 1024, 7432, "fp32") \
        == pytest.approx(1.0, rel=0.02)


def test_odd_fp16_widths_load_two_bytes_at_a_time_on_hopper():
    lib = gpu.library("hopper")
    # strides in bytes: fp16 N = 7133 -> 14266 (2 | 14266, 4 does not); K = 1530 -> 3060 (4);
    # N = 1500 -> 3000 (8); tf32 N = 7133 -> 28532 (4); aligned widths -> the 16 of the rule
    assert gpu.gemm_stride_alignment(lib, 7133, 4096, "fp16") == 2
    assert gpu.gemm_stride_alignment(lib, 6000, 1530, "fp16") == 4
    assert gpu.gemm_stride_alignment(lib, 1500, 2048, "fp16") == 8
    assert gpu.gemm_stride_alignment(lib, 7133, 4096, "tf32") == 4
    assert gpu.gemm_stride_alignment(lib, 7136, 4096, "fp16") == 16
    # sub-byte values: an odd int4 width is half a byte (4 bits), not rounded up to one byte
    assert gpu.gemm_stride_alignment(lib, 7133, 4096, "int4") == 0.5
    assert gpu.gemm_stride_alignment(lib, 7134, 4096, "int4") == 1
    # the factor: 0.33 from 4-byte strides up (gemm_word_bytes 4), half of it for 2-byte ones
    assert gpu.gemm_misaligned_factor(lib, 7136, 4096, "fp16") == 1.0
    assert gpu.gemm_misaligned_factor(lib, 1500, 2048, "fp16") == pytest.approx(0.33)
    assert gpu.gemm_misaligned_factor(lib, 6000, 1530, "fp16") == pytest.approx(0.33)
    assert gpu.gemm_misaligned_factor(lib, 7133, 4096, "fp16") == pytest.approx(0.33 * 2 / 4)
    assert gpu.gemm_misaligned_factor(lib, 7133, 4096, "int4") == pytest.approx(0.33 * 0.5 / 4)
    # a K loop bound by its latency waits on memory, not on load instructions: the plain factor
    assert gpu.gemm_misaligned_factor(lib, 7133, 4096, "fp16", latency_bound=True) == pytest.approx(0.33)
    h200 = load_profile("h200")
    # one plan, two strides: N = 7133 (2 bytes) against N = 7134 (4 bytes): twice the time, less the
    # one column's difference (measured 4096 x 7133 x 4096 fp16: 1780 us, 134 TFLOP/s, where
    # 4-8-byte-strided products of that size ran at 145-240)
    t2 = _gemm_time(h200, 4096, 4096, 7133, "fp16")
    t4 = _gemm_time(h200, 4096, 4096, 7134, "fp16")
    assert t2 / t4 == pytest.approx(2 * 7133 / 7134, rel=0.02)


def test_tiled_kernels_hide_only_part_of_the_shorter_side():
    """Near the ridge point a GEMM/convolution kernel takes longer than the larger of its math and
    its traffic: matrix_overlap 0.8 hides 80% of the shorter side (DeepBench T4 fp16, 16 x 512 x 14 x
    14 -> 192 1x1 convolution: ~17 us of math and ~19 us of traffic took 37 us, not 19)."""
    from dnnperf.published import Kernel, predict

    t4 = load_profile("t4")
    k = Kernel("s", "g", "fp16", "conv", (16, 512, 14, 14, 192, 1, 1, 0, 0, 1, 1), 37e-6, False)
    t, c = predict(k, t4)
    assert gpu.library_of(t4).matrix_overlap == 0.8
    short, long_ = sorted((c.t_compute, c.t_memory))
    assert short > 0.8 * long_  # the premise: a kernel at the ridge point
    assert c.losses["overlap"] == pytest.approx(0.2 * short, rel=1e-9)
    # the convolution and its 3 reorders (T4 fp16) each take their 2 us start first
    lib = gpu.library_of(t4)
    n = 1 + lib.reorder_kernels["fp16"]
    start = n * lib.graph_stream_kernel_us * 1e-6
    assert n == 4 and start == pytest.approx(8e-6)
    assert t == pytest.approx(long_ + 0.2 * short + start, rel=1e-9)
    # a profile may state its own figure in its gpu section; 1 is the ideal roofline
    ideal = replace(t4, gpu={**t4.gpu, "matrix_overlap": 1.0})
    t1, c1 = predict(k, ideal)
    # ... bounded below by the convolution and its reorders at the minimum kernel time each (T4 fp16:
    # 3 reorders x 5 us + 5 us = 20 us, below this kernel's 19 us of traffic plus the four starts)
    floor = n * lib.min_kernel_us * 1e-6
    assert c1.losses["overlap"] == 0 and t1 == pytest.approx(max(long_ + start, floor), rel=1e-9)
    # no software-pipelining advice for what the library's own kernel leaves unhidden
    from dnnperf.fixes import _software_pipelining

    assert _software_pipelining(c, None) is None


def test_hopper_reorders_transpose_the_convolution_input_by_hand():
    """An fp16 tensor-core convolution on the H200 launches one reorder (hopper reorder_kernels
    fp16: 1) that transposes its input through DRAM (reorder_traffic): 64 x 64 x 56 x 56 halves =
    25,690,112 bytes, read and written, at 4,800 GB/s x 0.75 = 14.27 us on top of the kernel;
    without the traffic the reorder is one minimum kernel time, hidden under this long convolution."""
    from dnnperf.published import Kernel, predict

    h200 = load_profile("h200")
    k = Kernel("s", "g", "fp16", "conv", (64, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1), 1.0, False, "graph")
    t, c = predict(k, h200)
    t0, c0 = predict(k, replace(h200, gpu={**h200.gpu, "reorder_traffic": False}))
    assert c0.t_device > 2.4e-6 * 2  # the premise: longer than the floor of its two kernels
    assert t - t0 == pytest.approx(2 * 64 * 64 * 56 * 56 * 2 / (4800e9 * 0.75), rel=1e-9)
    # fp32 runs on the CUDA cores: no reorder; V100 fp16 (cuDNN 7): reorders cost the floor only
    t32, _ = predict(replace(k, precision="fp32"), h200)
    t32n, _ = predict(replace(k, precision="fp32"), replace(h200, gpu={**h200.gpu, "reorder_traffic": False}))
    assert t32 == t32n
    assert not gpu.library("volta").reorder_traffic and gpu.library("volta").reorder_kernels == {"fp16": 2}


def test_hopper_sends_only_single_column_products_to_matrix_vector_kernels():
    """cuBLAS 12 (gpu_generations hopper gemv_max 1): 7680 x 1 x 2560 is a GEMV streamed at memory
    speed, 7680 x 2 x 2560 a tiled GEMM; Volta and Turing (cuBLAS 10) keep GEMV kernels up to 8."""
    lib = gpu.library("hopper")
    one = gpu.plan_gemm(7680, 1, 2560, 1, 132, lib, "tensor_cores", 800e12, 1.8e9, "fp16")
    two = gpu.plan_gemm(7680, 2, 2560, 1, 132, lib, "tensor_cores", 800e12, 1.8e9, "fp16")
    assert one.tile == (1, 7680) and one.ctas == 132  # every SM streams a slice
    assert two.tile in lib.tiles and two.tile != (2, 7680)
    assert gpu.library("volta").gemv_max == gpu.library("turing").gemv_max == 8


def test_a_pointwise_convolution_streams_its_input_like_a_gemm_operand():
    """A 1 x 1 stride-1 convolution gathers no patches: its K loop steps like a GEMM's (Hopper: 32 fp16
    K per step, k_step_cycles 200), not the convolution's (16 K, 300 cycles). The same product as a 1 x 1
    stride-2 convolution of a 14 x 14 map (49 x 512 x 2048 either way) gathers strided pixels and keeps
    the convolution's step."""
    from dnnperf.published import Kernel, predict

    h200 = load_profile("h200")
    s1 = Kernel("s", "g", "fp16", "conv", (1, 2048, 7, 7, 512, 1, 1, 0, 0, 1, 1), 1.0, False, "graph")
    s2 = Kernel("s", "g", "fp16", "conv", (1, 2048, 14, 14, 512, 1, 1, 0, 0, 2, 2), 1.0, False, "graph")
    p1, p2 = predict(s1, h200)[1].plan, predict(s2, h200)[1].plan
    hz = gpu.clock_hz(h200, gpu.library_of(h200))
    from math import ceil

    for plan, step, cycles in ((p1, 32, 200), (p2, 16, 300)):  # K = 2048 over the split, in steps
        assert plan.latency_bound
        assert plan.seconds == pytest.approx(plan.waves * ceil(ceil(2048 / plan.split_k) / step) * cycles / hz)


def test_depthwise_conv_runs_at_the_direct_kernel_rate_on_hopper():
    from dnnperf.published import Kernel, predict

    h200 = load_profile("h200")
    # 64 x 576 x 14 x 14, 3x3 depthwise, fp32: 64*576*196*9 = 65,028,096 MACs at 4.15 MACs per SM per
    # cycle (depthwise_sm_macs fp32) x 132 SMs x 1.83 GHz = 1.0025 TMAC/s: 64.9 us (3% of the CUDA cores'
    # 66.9 TFLOP/s); its 57.8 MB of traffic take ~13 us, so the kernel rate bounds it; in a CUDA graph
    # its start (1.2 us, graph_stream_kernel_us) comes first: 66.1 us (measured on the H200: 67.9 us)
    rate = 132 * 1.83e9
    k = Kernel("s", "g", "fp32", "conv", (64, 576, 14, 14, 576, 3, 3, 1, 1, 1, 1, 576), 1.0, False, "graph")
    t, cost = predict(k, h200)
    assert t == pytest.approx(65_028_096 / (4.15 * rate) + 1.2e-6, rel=0.01)
    assert cost.algorithm == "direct"
    # a strided fp16 depthwise runs at the fp32 kernels' pace ("fp16:strided" 4.15 a cycle): 64 x 96 x
    # 112 x 112 stride 2 -> 56 x 56, 64*96*3136*9 = 173,408,256 MACs in 173.0 us (measured 196 us; fp32:
    # 200 us); stride 1 keeps cuDNN's 13.8 a cycle (19.5 us + the start)
    s2 = Kernel("s", "g", "fp16", "conv", (64, 96, 112, 112, 96, 3, 3, 1, 1, 2, 2, 96), 1.0, False, "graph")
    assert predict(s2, h200)[0] == pytest.approx(173_408_256 / (4.15 * rate), rel=0.01)
    s1 = Kernel("s", "g", "fp16", "conv", (64, 576, 14, 14, 576, 3, 3, 1, 1, 1, 1, 576), 1.0, False, "graph")
    assert predict(s1, h200)[0] == pytest.approx(65_028_096 / (13.8 * rate) + 1.2e-6, rel=0.05)


DEPTHWISE = os.path.join(ROOT, "bench", "data", "depthwise-published.json")


def _depthwise(tmp_path, n, c, h, r, stride, hw, runtime="eager"):
    x = vi("x", [n, c, h, h])
    wt = helper.make_tensor("w", TensorProto.FLOAT, [c, 1, r, r], [0.0] * (c * r * r))
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[r, r], strides=[stride, stride],
                            pads=[r // 2] * 4, group=c)
    m = model([node], [x], [vi("y", None)], [wt])
    layer = analyze(inspect_model(save(m, tmp_path)), hw, Settings(precision="fp32", runtime=runtime)).score.layers[0]
    assert layer.algorithm == "direct"
    return layer


def test_a_framework_depthwise_kernel_runs_at_a_per_sm_rate(tmp_path):
    """A framework's depthwise kernel is bound by its SMs' issue slots (index arithmetic, a load per
    multiply), not by FP32 lanes: the H200's 4.15 MACs per SM per cycle carry over to a V100, whose SMs
    have half the lanes. 64 x 576 x 14 x 14, 3 x 3, fp32: 65,028,096 MACs / (4.15 x 80 SMs x 1.533 GHz, the
    clock its 15.7 TFLOP/s imply) = 127.8 us (0.065 of the 15.7 TFLOP/s; as a share of the peak, the H200's 0.03
    would give 276 us).
    Under TensorRT, which brings its own kernels, only rate and memory bound it (57.8 MB: ~85 us). On an
    RTX 4090 (Ada: 128 SMs, 2.52 GHz) 48.6 us: the per-SM rate counts every issue slot, so the INT32 share of
    Ada's FP32 lanes (shared_fp32_issue 0.8, which would give 60.7 us) does not apply on top."""
    v100 = load_profile("v100")
    eager = _depthwise(tmp_path, 64, 576, 14, 3, 1, v100)
    assert eager.t_compute == pytest.approx(65_028_096 / (4.15 * 80 * 15.7e12 / (2 * 80 * 64)), rel=0.003)
    ada = _depthwise(tmp_path, 64, 576, 14, 3, 1, load_profile("rtx4090"))
    assert ada.t_compute == pytest.approx(65_028_096 / (4.15 * 128 * 82.6e12 / (2 * 128 * 128)), rel=0.003)
    trt = _depthwise(tmp_path, 64, 576, 14, 3, 1, v100, runtime="tensorrt")
    assert trt.t_compute < 0.2 * eager.t_compute


def test_a_slow_depthwise_kernel_gets_its_own_fix_not_the_roofline_text(tmp_path):
    """The V100 depthwise layer above takes 128.0 us on the framework's kernel (0.51 TMAC/s) where its 57.8 MB
    take ~73-86 us: the fix names the kernel and what TensorRT or fp16 does (stride 1 in fp16: cuDNN's 13.8 a
    cycle, 38.5 us of math on 28.9 MB), and never says that memory sets its time (it does not). Under
    TensorRT the kernel is not the framework's, and that fix is gone."""
    v100 = load_profile("v100")
    layer = _depthwise(tmp_path, 64, 576, 14, 3, 1, v100)
    assert layer.cause == "unoptimized" and layer.t_compute > layer.t_memory
    ids = [f["id"] for f in layer.fixes]
    assert "raise_intensity" not in ids
    (fix,) = [f for f in layer.fixes if f["id"] == "replace_slow_op"]
    assert "depthwise kernel multiplies at 0.51 TMAC/s" in fix["text"] and "128 us" in fix["text"]
    assert "--runtime tensorrt" in fix["text"] and "-p fp16" in fix["text"]
    assert fix["saving_s"] == pytest.approx(layer.losses["unoptimized"], rel=1e-3)
    trt = _depthwise(tmp_path, 64, 576, 14, 3, 1, v100, runtime="tensorrt")
    assert not any("depthwise kernel" in f["text"] for f in trt.fixes)


@pytest.mark.parametrize("row", json.load(open(DEPTHWISE, encoding="utf-8"))["rows"], ids=lambda r: r["device"])
def test_depthwise_convolutions_at_their_published_times(tmp_path, row):
    """bench/data/depthwise-published.json (never used to set a figure): a TITAN Xp (30 SMs, written from
    its spec sheet) ran PyTorch's fp32 depthwise 3 x 3 over 2 x 32 x 512 x 512 in 1.02 ms; 151 MMACs at
    4.15 a cycle x 30 SMs x 1.582 GHz (the boost clock its 12.15 TFLOP/s imply) = 766 us, 0.76x: within
    1.35x (the TITAN Xp's kernel reached 3.1 a cycle; at Pascal's table clock of 1.48 GHz the estimate was
    0.81x). Priced at memory speed (134 MB at 0.75 x 547.7 GB/s), as before, it came out 0.33x."""
    c = row["conv"]
    assert c["group"] == c["C"] == c["K"] and c["H"] == c["W"] and c["pad"] == c["R"] // 2
    hw = load_profile(os.path.join(ROOT, row["profile"]))
    layer = _depthwise(tmp_path, c["N"], c["C"], c["H"], c["R"], c["stride"], hw)
    measured = row["ms"] * 1e-3
    assert measured / 1.35 <= layer.time_s <= 1.35 * measured, layer.time_s
    assert layer.time_s > 2 * c["N"] * c["C"] * c["H"] * c["W"] * 4 / (hw.dram_gbs * 1e9)  # not at memory speed


def test_published_sheets_may_be_grouped_and_timed_in_a_graph(tmp_path):
    from dnnperf.errors import DnnperfError

    doc = {"sheets": {"G | fp16": {"gpu": "G", "precision": "fp16", "runtime": "graph", "conv": [
        {"N": 1, "C": 32, "H": 8, "W": 8, "K": 32, "R": 3, "S": 3, "pad_h": 1, "pad_w": 1, "stride_h": 1,
         "stride_w": 1, "group": 32, "fwd_ms": 0.01}]}}}
    p = tmp_path / "k.json"
    p.write_text(json.dumps(doc))
    (k,) = load_published(str(p))
    assert k.dims[-1] == 32 and k.runtime == "graph" and k.label.endswith("group 32")
    doc["sheets"]["G | fp16"]["conv"][0]["group"] = 5  # does not divide 32 channels
    p.write_text(json.dumps(doc))
    with pytest.raises(DnnperfError, match="group that does not divide"):
        load_published(str(p))
    doc["sheets"]["G | fp16"]["runtime"] = "jit"
    doc["sheets"]["G | fp16"]["conv"][0]["group"] = 1
    p.write_text(json.dumps(doc))
    with pytest.raises(DnnperfError, match="runtime 'jit'"):
        load_published(str(p))


@pytest.mark.parametrize("name", ["v100", "t4"])
def test_estimates_hold_on_published_kernels(deepbench, name):
    """Floors well inside what the model reaches, so a change that breaks GPU fidelity fails here:
    every sheet's median error under 1.25x, rank correlation above 0.95, and at least 90% of the
    kernels within 2x. The held-out quarter (never tuned on) must hold the same floors."""
    hw = load_profile(name)
    res = validate_published(sheets_for(deepbench, hw), hw)
    for sheet in {r["sheet"] for r in res["rows"]}:
        from dnnperf.published import stats

        st = stats([r for r in res["rows"] if r["sheet"] == sheet])
        assert st["median_error"] < 1.25 and st["rho"] > 0.95 and st["within_2"] > 0.9, (sheet, st)
    held = res["held_out"]
    assert held["median_error"] < 1.25 and held["rho"] > 0.95 and held["within_2"] > 0.9


def test_unvalidated_profiles_say_so():
    assert load_profile("h100").validation_summary() == "not validated"
    assert "published whole-network timings" in load_profile("a100").validation_summary()
    assert "over 173 published kernels" in load_profile("v100").validation_summary()


def test_validation_record_is_validated(tmp_path):
    import yaml

    with open(os.path.join(ROOT, "profiles", "v100.yaml")) as fh:
        d = yaml.safe_load(fh)
    d["validation"] = [{"data": "x", "sheet": "y", "precision": "fp32"}]
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(d))
    from dnnperf.errors import DnnperfError

    with pytest.raises(DnnperfError, match="validation\\[0\\]: missing kernels"):
        load_profile(str(p))


def test_cli_validate_published(tmp_path):
    r = run_cli("validate", "--published", DEEPBENCH, "--hw", "t4", "-f", "json", "--worst", "2")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["hardware"] == "t4" and [x["set"] for x in d["rows"]][-2:] == ["all", "held-out quarter"]
    assert d["rows"][-2]["kernels"] == 524 and len(d["worst"]) == 2
    # the worst kernel's error is at least the median's
    w = d["worst"][0]["ratio"]
    assert max(w, 1 / w) >= d["rows"][-2]["median_error"]
    r = run_cli("validate", "--published", str(tmp_path / "missing.json"), "--hw", "t4")
    assert r.exit_code == 2 and "Traceback" not in r.output
    # a GPU no sheet was measured on is refused, never compared with another GPU's times
    r = run_cli("validate", "--published", DEEPBENCH, "--hw", "a100")
    assert r.exit_code == 2 and "no sheet" in r.output and "V100" in r.output
    assert sheets_for(load_published(DEEPBENCH), load_profile("a100")) == []
    bad = tmp_path / "bad.json"
    bad.write_text("{\"sheets\": 3}")
    r = run_cli("validate", "--published", str(bad), "--hw", "t4")
    assert r.exit_code == 2 and "sheets" in r.output


def test_hw_show_and_list_print_the_validation():
    r = run_cli("hw", "show", "v100")
    assert r.exit_code == 0 and "# validation: fp32: median error" in r.stdout
    r = run_cli("hw", "list", "-f", "json")
    rows = {x["name"]: x for x in json.loads(r.stdout)["rows"]}
    assert rows["t4"]["validation"].startswith("fp32 ") and rows["h100"]["validation"] == "not validated"
    # kernels and whole networks apart; of several tables' records for one precision, the one over more rows
    nets: dict = {}
    for v in load_profile("t4").validation:
        if "networks" in v and v["networks"] >= nets.get(v["precision"], {}).get("networks", 0):
            nets[v["precision"]] = v
    assert {k: v["networks"] for k, v in nets.items()} == {"fp16": 40, "int8": 40, "fp32": 7}
    kernels, networks = rows["t4"]["validation"].split("; ")
    assert kernels.endswith("(524 kernels)") and networks.endswith("(87 networks)")
    assert sorted(networks.removesuffix(" (87 networks)").split(", ")) == sorted(
        f"{k} {v['median_error']:.2f}x" for k, v in nets.items())


NETWORK_TABLES = {"7.1": ("trt_bert", "trt-bert-published.json"), "8.4": ("trt_bert", "trt-bert-8.4-published.json"),
                  "dle": ("networks", "networks-published.json"), "timm": ("networks", "timm-rtx-published.json")}


@pytest.mark.parametrize("name,table", [("t4", "7.1"), ("t4", "8.4"), ("a100-40gb", "7.1"), ("a100-40gb", "8.4"),
                                        ("v100", "7.1"), ("v100", "dle"), ("t4", "dle"), ("a100", "dle"),
                                        ("rtx4090", "timm")])
def test_profile_network_validation_record_is_current(name, table):
    """A profile's whole-network records (BERT under TensorRT, DeepLearningExamples' CNN throughputs) are
    what the model gives today, and hw show says what they count."""
    import importlib.util

    script, data = NETWORK_TABLES[table]
    spec = importlib.util.spec_from_file_location(script, os.path.join(ROOT, "bench", f"{script}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path = os.path.join(ROOT, "bench", "data", data)
    fresh = mod.records(path, name)
    label = os.path.relpath(path, ROOT).replace(os.sep, "/")
    held = [dict(v) for v in load_profile(name).validation if v["data"] == label]
    assert held == fresh, (f"profiles/{name}.yaml's network validation records are stale: regenerate with "
                           f"python bench/{script}.py --data {label} --records {name}")
    assert f"published whole-network timings ({fresh[0]['sheet']})" in load_profile(name).validation_summary()


def test_a_validation_record_counts_kernels_or_networks(tmp_path):
    import yaml

    from dnnperf.errors import DnnperfError

    with open(os.path.join(ROOT, "profiles", "v100.yaml")) as fh:
        d = yaml.safe_load(fh)
    rec = {"data": "x", "sheet": "a table", "precision": "fp16", "median_error": 1.2, "within_1_25": 0.5,
           "within_2": 1.0, "rho": 0.9}
    p = tmp_path / "p.yaml"
    d["validation"] = [{**rec, "networks": 12}]
    p.write_text(yaml.safe_dump(d))
    assert load_profile(str(p)).validation_summary() == ("fp16: median error 1.20x over 12 published whole-network "
                                                         "timings (a table), 50% within 1.25x")
    d["validation"] = [{**rec, "networks": 12, "kernels": 3}]
    p.write_text(yaml.safe_dump(d))
    with pytest.raises(DnnperfError, match="give kernels or networks, not both"):
        load_profile(str(p))


def test_whole_networks_hold_on_published_throughputs():
    """Every row of bench/data/networks-published.json (NVIDIA DeepLearningExamples throughputs of
    ResNet-50, EfficientNet-B0 and ResNeXt101-32x4d on V100, T4 and A100; the eager runtime those
    frameworks are): the estimate per image is within 1.5x of the published one, and the rows keep
    their order by time. The ResNeXt rows (grouped 3 x 3 convolutions) were added after the model was
    fixed: a new architecture's check, not a fit; the SE-ResNeXt rows (a squeeze-excite branch in each of
    its 33 blocks) later still."""
    from dnnperf.ir import ShapeOverrides
    from dnnperf.published import spearman

    with open(os.path.join(ROOT, "bench", "data", "networks-published.json"), encoding="utf-8") as fh:
        rows = json.load(fh)["rows"]
    assert len(rows) >= 39 and sum(r["model"] == "resnext101_32x4d" for r in rows) == 8
    assert sum(r["model"] == "se_resnext101_32x4d" for r in rows) == 8
    pred, meas = [], []
    for r in rows:
        path = (os.path.join(ROOT, "bench", r["path"]) if "path" in r
                else os.path.join(ROOT, "sample_models", r["model"] + ".onnx"))
        insp = inspect_model(path, ShapeOverrides(batch=r["batch"]))
        rep = analyze(insp, load_profile(r["hw"]), Settings(batch=r["batch"], precision=r["precision"],
                                                             runtime="eager"), with_fixes=False)
        p, m = rep.score.totals["latency_s"] / r["batch"], 1.0 / r["images_per_s"]
        assert 1 / 1.5 <= p / m <= 1.5, (r, p, m)
        pred.append(p)
        meas.append(m)
    assert spearman(pred, meas) >= 0.9


def test_whole_networks_hold_on_timm_published_throughputs():
    """bench/data/timm-rtx-published.json, held out (added after the model was fixed, nothing set from it):
    timm's eager AMP throughputs at batch 1024 of 42 architectures on an RTX 4090 (shipped profile), an RTX
    3090 and an RTX 5090 (Blackwell; both through profiles written from their spec sheets), and at batch 2048
    on an RTX PRO 6000 Blackwell Max-Q (spec sheet). The issue's goals for GPUs and tables the model was not
    fitted on: on each of the first three boards the median error is within 1.2x, at least 90% of all rows
    are within 1.5x, and the rows keep their order by time (rank rho >= 0.9 over the four boards). Known
    misses: ViT-B/16, whose attention timm runs as one fused kernel (1.5-1.6x slow); the 300 W Max-Q, whose
    median error is 1.24x (predicted 0.60-0.97x of its times on all but its ViT and ConvNeXt rows: the board
    runs below the clock the power model gives it), so it is held to the all-rows goals only."""
    import importlib.util

    from dnnperf.published import spearman, stats

    spec = importlib.util.spec_from_file_location("networks", os.path.join(ROOT, "bench", "networks.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(os.path.join(ROOT, "bench", "data", "timm-rtx-published.json"), encoding="utf-8") as fh:
        rows = json.load(fh)["rows"]
    assert len(rows) == 168 and all(r["held_out"] for r in rows)
    res = mod.estimate(rows)
    for board in ("rtx4090", "data/spec-profiles/rtx3090.yaml", "data/spec-profiles/rtx5090.yaml"):
        st = stats([{"predicted_s": p, "measured_s": m} for r, p, m in res if r["hw"] == board])
        assert st["median_error"] <= 1.2, (board, st)
    within = [max(p / m, m / p) <= 1.5 for _, p, m in res]
    assert sum(within) >= 0.9 * len(within)
    assert spearman([p for _, p, _ in res], [m for _, _, m in res]) >= 0.9


def test_a_misaligned_vocabulary_gets_the_padding_fix_and_graph_runs_no_host_launch_text():
    # GPT-2's output projection: 768 x 50,257 in fp16. 50,257 is odd, so its rows miss the 16-byte
    # (8-value) vector; the fix pads it to ceil(50257 / 8) * 8 = 50,264
    res = run_cli("analyze", os.path.join(SAMPLES, "gpt2.onnx"), "--hw", "h200", "-p", "fp16", "--dim",
                  "sequence_length=128", "--runtime", "graph", "-f", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    head = next(x for x in doc["layers"] if x["name"] == "node_linear")
    fix = head["fixes"][0]
    assert fix["id"] == "fit_the_tile" and "50257 -> 50264" in fix["text"]
    # misaligned (an odd width: 2-byte strides, half the plain 0.33; its 768-long K loop, 24 steps of 32
    # at 200 cycles = 2.6 us, does not bound it): 2*128*50257*768 = 9.88 GFLOP at 0.33 x 0.5 x 0.8 x 989.4
    # TFLOP/s = 75.7 us of math, plus the unhidden 0.2 of its 77 MB of weights at 0.75 x 4.8 TB/s (21.4 us)
    # and the kernel's 1.2 us start: 81.2 us. Padded, the product streams those weights in 21 us plus the
    # part of its 12.5 us of math that is not hidden (0.2): ~24 us, so the fix saves ~2/3 of the layer
    assert head["latency_s"] == pytest.approx(75.66e-6 + 0.2 * 21.4e-6 + 1.2e-6, rel=0.05)
    assert 0.55 * head["latency_s"] < fix["saving_s"] < 0.75 * head["latency_s"]
    assert head["latency_s"] - fix["saving_s"] == pytest.approx(24e-6, rel=0.25)
    # a captured graph has no host launch cost: the model-level fix speaks of kernels, not launches x us
    launch = [f for f in doc["model_fixes"] if f["id"] == "fewer_launches"]
    assert launch and "launches x" not in launch[0]["text"] and "minimum device time" in launch[0]["text"]


def test_recurrent_layers_hold_on_deepbench_s_published_rnn_times():
    """DeepBench's four published RNN inference rows (LSTM and GRU layers on a Titan Xp and a GTX 1080
    Ti, cuDNN's RNN call) against the spec-sheet Pascal profiles: every row within 1.5x. The two GRUs
    stream their recurrent weights (95 and 79 MB fp32) at every step and are memory-bound; the LSTM of
    256 units is bound by its 301 kernels (150 steps x 2 + 1) at the 5 us minimum each: 1.5 ms of its
    published 1.63."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rnn_published", os.path.join(ROOT, "bench", "rnn_published.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.rows()
    assert len(res) == 4
    for r, pred in res:
        assert 1 / 1.5 <= pred / (r["ms"] * 1e-3) <= 1.5, (r, pred)
    lstm = next(p for r, p in res if r["hidden"] == 256)
    assert lstm == pytest.approx(301 * 5e-6, rel=0.05)


# -- Pascal: a transfer check on spec-sheet profiles (never tuned on) --------------------------

PASCAL = os.path.join(ROOT, "bench", "data", "deepbench-pascal-readme.json")
SPEC = os.path.join(ROOT, "bench", "data", "spec-profiles")


def test_a_sheet_belongs_to_the_gpu_it_names_in_whole_words():
    kernels = load_published(PASCAL)
    gpus = lambda name: {k.gpu for k in sheets_for(kernels, load_profile(os.path.join(SPEC, f"{name}.yaml")))}
    # "titanxp" is a substring of "NVIDIA TITAN X Pascal" with its spaces taken out, not a run of its words
    assert gpus("titanxp") == {"NVIDIA TITAN Xp"}
    assert gpus("titanx-pascal") == {"NVIDIA TITAN X Pascal"}
    assert gpus("gtx1080ti") == {"NVIDIA GeForce GTX 1080 Ti"}
    # the P100 profile's title says SXM2, which names a form factor, not a GPU
    assert gpus("p100") == {"NVIDIA Tesla P100"}
    assert {k.gpu for k in sheets_for(load_published(DEEPBENCH), load_profile("v100"))} == {"NVIDIA V100"}


def test_dp4a_int8_gemm_on_a_spec_sheet_pascal_profile():
    """DeepBench's README: 35 x 700 x 2048 int8 in 50 us on a GTX 1080 Ti. cuBLAS's DP4A kernels
    come in 128 x 128 tiles and larger and do not split K (both read off the T4): the 35 rows fill
    one tile row, 700 columns six tiles, so six CTAs each run a whole 128 x 128 x 2048 K loop on one
    SM: 33.5 M MACs at 45.4 / 2 / 28 = 0.81 TMAC/s per SM, 41 us of math before any efficiency."""
    hw = load_profile(os.path.join(SPEC, "gtx1080ti.yaml"))
    k = next(k for k in load_published(PASCAL) if k.dims == (35, 700, 2048))
    t, cost = predict(k, hw)
    assert cost.plan.split_k == 1 and cost.plan.ctas == 6
    assert 128 * 128 * 2048 / (45.4e12 / 2 / 28) == pytest.approx(41.4e-6, rel=0.01)
    assert 41.4e-6 <= t <= 1.25 * 50e-6 and t >= 50e-6 / 1.25


def test_dp4a_int8_convolutions_are_marked_optimistic():
    """No int8 tensor cores (Pascal GP10x, Volta): an int8 convolution runs cuDNN's DP4A kernels on the CUDA
    cores. The only published times of such kernels, DeepBench's README rows on Pascal GPUs (a transfer
    check, never tuned on), are all slower than their estimate, by 1.4x to 15x: the report says so in a
    note, quoting that range, which must stay true of the data. A GPU whose library runs int8 convolutions
    on tensor cores (T4) gets no note, even for its stem's CUDA-core fallback; nor does a float precision."""
    convs = [(k, os.path.join(SPEC, f"{name}.yaml")) for name in ("gtx1080ti", "titanxp", "titanx-pascal", "p100")
             for k in sheets_for(load_published(PASCAL), load_profile(os.path.join(SPEC, f"{name}.yaml")))
             if k.kind == "conv" and k.precision == "int8"]
    slower = [k.measured_s / predict(k, load_profile(path))[0] for k, path in convs]
    assert len(slower) == 4 and (round(min(slower), 1), round(max(slower))) == (1.4, 15)
    insp = inspect_model(os.path.join(SAMPLES, "squeezenet1_1.onnx"))
    notes = {}
    for hw, p in (("v100", "int8"), (os.path.join(SPEC, "titanxp.yaml"), "int8"), ("t4", "int8"), ("v100", "fp16"),
                  ("a100", "int8")):
        rep = analyze(insp, load_profile(hw), Settings(precision=p), with_fixes=False, what_if=False)
        notes[(os.path.basename(hw), p)] = [n for n in rep.notes if "DP4A" in n]
    assert len(notes[("v100", "int8")]) == 1 and "1.4-15x" in notes[("v100", "int8")][0]
    assert notes[("v100", "int8")][0].startswith("26 int8 convolution(s)")  # SqueezeNet 1.1: 26 convolutions
    assert len(notes[("titanxp.yaml", "int8")]) == 1
    assert notes[("t4", "int8")] == notes[("v100", "fp16")] == notes[("a100", "int8")] == []


def test_published_errors_by_class_of_kernel(capsys):
    """``bench/published.py --groups`` breaks the errors down by the class of kernel the model runs
    (``published.group_of``): a grouped and a depthwise 3 x 3 convolution of the H200 sheets, a thin int8
    product on a GTX 1080 Ti (35 rows, no split-K: DP4A kernels do not split K), an Add; then one line per
    (profile, precision, class) with its fitted and held-out kernels counted apart."""
    import importlib.util

    from dnnperf.published import group_of

    h200 = load_profile("h200")
    by_label = {(k.precision, k.label): k for k in load_published(H200_KERNELS)}
    cases = {("fp16", "conv N=8 C=256 H=28 W=28 K=256 3x3 pad 1,1 stride 1,1 group 32"):
             "conv 3x3 stride 1 grouped implicit_gemm",
             ("fp32", "conv N=8 C=144 H=56 W=56 K=144 3x3 pad 1,1 stride 1,1 group 144"):
             "conv 3x3 stride 1 depthwise direct",
             ("fp32", "Add of 4096 elements"): "Add"}
    for key, want in cases.items():
        assert group_of(by_label[key], predict(by_label[key], h200)[1]) == want
    k = next(k for k in load_published(PASCAL) if k.dims == (35, 700, 2048))
    got = group_of(k, predict(k, load_profile(os.path.join(SPEC, "gtx1080ti.yaml")))[1])
    assert got.startswith("gemm thin") and "split-K" not in got
    spec = importlib.util.spec_from_file_location("published_bench", os.path.join(ROOT, "bench", "published.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = [dict(r, hw="h200") for r in validate_published(load_published(H200_KERNELS), h200)["rows"]]
    mod.print_groups(rows)
    lines = capsys.readouterr().out.splitlines()
    adds = [ln for ln in lines if ln.split()[:3] == ["h200", "fp32", "Add"]]
    # 9 fp32 Add kernels, none of them in the held-out quarter
    assert len(adds) == 1 and adds[0].split()[3] == "9" and adds[0].split()[-2] == "0"
    # `dnnperf validate --published` carries the same classes: the TITAN Xp's int8 stem (140 us published) is a
    # class of one, its ratio the kernel's own; its two products (512 x 6000 x 2816, 3072 x 3000 x 1024) one class
    r = run_cli("validate", "--published", PASCAL, "--hw", os.path.join(SPEC, "titanxp.yaml"), "-f", "json", "-q")
    doc = json.loads(r.output)
    classes = {(c["precision"], c["class"]): c for c in doc["classes"]}
    stem = next(k for k in load_published(PASCAL) if k.gpu == "NVIDIA TITAN Xp" and k.dims[:2] == (1, 3))
    assert stem.measured_s == pytest.approx(140e-6)
    c = classes[("int8", "conv 7x7 stride 2 implicit_gemm")]
    assert c["kernels"] == 1 and c["median_ratio"] == pytest.approx(predict(stem, load_profile(
        os.path.join(SPEC, "titanxp.yaml")))[0] / 140e-6, abs=1e-4) and c["held_out_kernels"] == 0
    assert classes[("int8", "gemm wide")]["kernels"] == 2 and all("held_out" in w for w in doc["worst"])
    human = run_cli("validate", "--published", PASCAL, "--hw", os.path.join(SPEC, "titanxp.yaml"), "-q").output
    assert "By class of kernel" in human and "conv 7x7 stride 2 implicit_gemm" in human


def test_streaming_kernels_on_hopper_against_the_h200_add_times(tmp_path):
    """bench/data/h200-kernels.json times Add kernels in a CUDA graph replay. A streaming kernel
    starts in graph_stream_kernel_us (1.2) and then moves its bytes at stream_efficiency (0.9) of the
    quoted 4.8 TB/s (from L2 when they fit): 268,435,456 fp32 elements read twice and written once
    are 3.22 GB, 745 us at 4.32 TB/s (published: 738 us); 4,096 elements take the start alone
    (published: 1.19 us)."""
    hw = load_profile("h200")
    adds = {(k.precision, k.dims[0]): k for k in load_published(H200_KERNELS) if k.kind == "elementwise"}
    assert len(adds) == 18 and {k.op for k in adds.values()} == {"Add"}
    big, tiny = adds[("fp32", 268435456)], adds[("fp32", 4096)]
    t_big, cost = predict(big, hw)
    assert 3 * 4 * 268435456 / (4.8e12 * 0.9) + 1.2e-6 == pytest.approx(t_big, rel=1e-3)
    assert big.measured_s / 1.25 <= t_big <= 1.25 * big.measured_s and cost.cause == "memory"
    t_tiny, _ = predict(tiny, hw)
    assert t_tiny == pytest.approx(1.2e-6, rel=0.01) and tiny.measured_s / 1.25 <= t_tiny <= 1.25 * tiny.measured_s
    # a matrix kernel keeps the tiled kernels' floor and bandwidth
    assert min(predict(k, hw)[0] for k in load_published(H200_KERNELS) if k.kind != "elementwise") >= 2.4e-6
    # an op the format does not know is refused in one line
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"sheets": {"x": {"gpu": "NVIDIA H200", "precision": "fp16",
                                                "elementwise": [{"op": "Softmax", "elements": 8, "ms": 0.001}]}}}))
    r = run_cli("validate", "--published", str(bad), "--hw", "h200")
    assert r.exit_code == 2 and "elementwise" in r.output and "Traceback" not in r.output


COPY_RATES = os.path.join(ROOT, "bench", "data", "copy-bandwidth-published.json")


def test_a_v100_streams_at_its_published_copy_bandwidth(tmp_path):
    """A device-to-device cudaMemcpy on a V100 16 GB moves 790 of its 900 GB/s (published: paranumal.com,
    "Rough-n-Ready Roofline: NVIDIA V100 edition", 2018). A Relu over 2^26 fp32 elements is such a copy:
    268,435,456 B read and as many written, 679.6 us at 790 GB/s, where the 0.75 of the quoted figure a
    tiled kernel reaches would give 795.4 us. A T4 keeps that 0.75 (published copy: 240 of 320 GB/s)."""
    n = 1 << 26
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [n])], [vi("y", [n])])
    insp = inspect_model(save(m, tmp_path))
    relu = analyze(insp, load_profile("v100"), Settings()).score.layers[0]
    assert relu.t_memory == pytest.approx(2 * 4 * n / 790e9, rel=0.01) and relu.cause == "memory"
    t4 = analyze(insp, load_profile("t4"), Settings()).score.layers[0]
    assert t4.t_memory == pytest.approx(2 * 4 * n / (320e9 * 0.75), rel=1e-6)


@pytest.mark.parametrize("row", [r for r in json.load(open(COPY_RATES, encoding="utf-8"))["rows"] if r["profile"]],
                         ids=lambda r: r["device"])
def test_shipped_profiles_stream_at_the_published_copy_rates(tmp_path, row):
    """bench/data/copy-bandwidth-published.json: device-to-device copy rates measured on V100, T4, A10, A100
    and RTX 4090 boards (cudaMemcpy; torch copy_, counted as 2 x bytes / time). A copy of 2^26 fp32 elements
    through the matching shipped profile (a Relu: every byte read once and written once, from DRAM) moves
    within 10% of the published rate. An A100 streaming at the 0.88 the V100 and the H200 reach would be
    20% off (1,794 against 1,490 GB/s); an RTX 4090 at the default 0.75, 17% (756 against 912)."""
    n = 1 << 26
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [n])], [vi("y", [n])])
    hw = load_profile(row["profile"])
    assert hw.dram_gbs == row["quoted_gbs"]
    relu = analyze(inspect_model(save(m, tmp_path)), hw, Settings()).score.layers[0]
    rate = 2 * 4 * n / relu.t_memory / 1e9
    assert row["measured_gbs"] / 1.1 <= rate <= row["measured_gbs"] * 1.1, (row["device"], rate)


MATMUL_RATES = os.path.join(ROOT, "bench", "data", "fp32-matmul-published.json")


@pytest.mark.parametrize("row", json.load(open(MATMUL_RATES, encoding="utf-8"))["rows"], ids=lambda r: r["device"])
def test_fp32_matmul_rates_on_shared_and_dedicated_fp32_lanes(tmp_path, row):
    """bench/data/fp32-matmul-published.json: torch fp32 matmuls of 6888 x 6888 x 6888 (654 GFLOP). A GA10x
    or Ada SM quotes two FP32 datapaths, one of which also runs the product's INT32 work; GV100, TU104 and
    GA100 have dedicated lanes. Through each row's profile (shipped, or written from the spec sheet alone)
    the product's estimate is within 1.25x of the published time: RTX 3090 27 TFLOP/s, 4070 Super 23, A10
    14 (150 W), where 0.9 of their quoted rates, as the model had it, gave 1.17x, 1.36x and 1.52x too fast.
    Only the RTX 4090 row (58 of 82.6) set the figure."""
    n = 6888
    m = model([helper.make_node("MatMul", ["a", "b"], ["y"])], [vi("a", [n, n]), vi("b", [n, n])], [vi("y", [n, n])])
    spec = row["profile"]
    hw = load_profile(os.path.join(ROOT, spec) if spec.endswith(".yaml") else spec)
    assert max(u.peak_tops.get("fp32", 0) for u in hw.units) == pytest.approx(row["quoted_tflops"], rel=0.01)
    layer = analyze(inspect_model(save(m, tmp_path)), hw, Settings(precision="fp32")).score.layers[0]
    assert layer.unit == "cuda_cores" and layer.precision == "fp32"
    measured = 2 * n ** 3 / (row["measured_tflops"] * 1e12)
    assert measured / 1.25 <= layer.time_s <= 1.25 * measured, (row["device"], 2 * n ** 3 / layer.time_s / 1e12)


def test_published_row_wise_kernels_by_hand(tmp_path):
    """A sheet may time Softmax and LayerNormalization kernels by their `shape` (normalised along the
    last axis), and elementwise ones by a shape too. On the H200 in a graph each starts in 1.2 us and
    streams at 0.9 x 4.8 TB/s: attention scores 64 x 12 x 512 x 512 fp16 read and written once are
    805,306,368 B, 186.4 us; a LayerNormalization of 8192 x 4096 fp16 with its 4096-value scale and
    bias 134,234,112 B, 31.1 us; a 4096 x 4096 Add as many bytes as the same Add given 16,777,216
    elements."""
    from dnnperf.errors import DnnperfError

    rows = [{"op": "Softmax", "shape": [64, 12, 512, 512], "ms": 0.2},
            {"op": "LayerNormalization", "shape": [8192, 4096], "ms": 0.03},
            {"op": "Add", "shape": [4096, 4096], "ms": 0.025}, {"op": "Add", "elements": 16777216, "ms": 0.025}]
    p = tmp_path / "rows.json"
    p.write_text(json.dumps({"sheets": {"H | fp16": {"gpu": "NVIDIA H200", "precision": "fp16", "runtime": "graph",
                                                     "elementwise": rows}}}))
    ks = {k.label: k for k in load_published(str(p))}
    assert set(ks) == {"Softmax of shape 64x12x512x512", "LayerNormalization of shape 8192x4096",
                       "Add of shape 4096x4096", "Add of 16777216 elements"}
    hw = load_profile("h200")
    bps = 4.8e12 * 0.9
    assert predict(ks["Softmax of shape 64x12x512x512"], hw)[0] == pytest.approx(1.2e-6 + 805_306_368 / bps, rel=1e-6)
    assert predict(ks["LayerNormalization of shape 8192x4096"], hw)[0] == pytest.approx(
        1.2e-6 + (2 * 8192 * 4096 * 2 + 2 * 4096 * 2) / bps, rel=1e-6)
    assert predict(ks["Add of shape 4096x4096"], hw)[0] == predict(ks["Add of 16777216 elements"], hw)[0]
    for bad in ({"op": "Softmax", "elements": 8, "ms": 0.001},  # a row-wise kernel needs its rows' length
                {"op": "Add", "elements": 8, "shape": [8], "ms": 0.001},  # one or the other
                {"op": "Softmax", "shape": [8, 0], "ms": 0.001}, {"op": "Softmax", "shape": [8, 2.5], "ms": 0.001},
                {"op": "Softmax", "shape": [], "ms": 0.001}, {"op": "Gelu", "shape": [8], "ms": 0.001}):
        p.write_text(json.dumps({"sheets": {"x": {"gpu": "NVIDIA H200", "precision": "fp16", "elementwise": [bad]}}}))
        with pytest.raises(DnnperfError, match="row-wise"):
            load_published(str(p))


def test_tensor_core_convolutions_need_16_byte_channel_vectors_without_a_profile_alignment():
    """The H200 profile gives its tensor cores no `alignment`: the library's rule applies (channels
    padded up to 16-byte vectors of 8 halves or 4 tf32 values). A 3-channel stem has not one whole
    vector: in fp16 it runs the generic CUDA-core kernels, in tf32 the plain fp32 ones (the H200
    times N = 16 3 x 3 224 x 224 at 164 us in tf32 and 165 in fp32); 64 channels stay on the tensor
    cores, and 12 are padded to 16 there (12 / 16 of the rate)."""
    from dnnperf.published import Kernel

    hw = load_profile("h200")
    assert not any(u.alignment for u in hw.units)
    stem = lambda p, c=3: predict(Kernel("s", "g", p, "conv", (16, c, 224, 224, 64, 3, 3, 1, 1, 1, 1), 1e-4, False), hw)
    assert stem("fp16")[1].unit == "cuda_cores" and stem("tf32")[1].unit == "cuda_cores"
    assert stem("tf32")[0] == pytest.approx(stem("fp32")[0])
    assert stem("fp16", c=64)[1].unit == "tensor_cores" and stem("tf32", c=64)[1].unit == "tensor_cores"
    assert stem("fp16", c=12)[1].unit == "tensor_cores"
    # grouped kernels pack several groups into a vector: 4-channel groups stay on the tensor cores
    grouped = Kernel("s", "g", "fp16", "conv", (8, 128, 56, 56, 128, 3, 3, 1, 1, 1, 1, 32), 1e-4, False)
    assert predict(grouped, hw)[1].unit == "tensor_cores"


@pytest.mark.parametrize("entry", [
    '"gemm": 5',  # not a list
    '"bmm": [{"B": 8, "M": 64, "N": 64, "K": 64, "ms": 0.01}]',  # a kind of kernel not read: never dropped quietly
    '"elementwise": {"op": "Add"}',
    '"gemm": [{"M": 0, "N": 1, "K": 1, "ms": 1}]',  # no work
    '"gemm": [{"M": 1e400, "N": 1, "K": 1, "ms": 1}]',  # infinite
    '"gemm": [{"M": 4, "N": 1, "K": 1, "ms": 1e400}]',
    '"conv": [{"N": 1, "C": 1, "H": 5, "W": 5, "K": 1, "R": 3, "S": 3, "pad_h": 0, "pad_w": 0, "stride_h": 0, '
    '"stride_w": 1, "fwd_ms": 1}]',  # stride 0
    '"conv": [{"N": 1, "C": 1, "H": 1, "W": 1, "K": 1, "R": 3, "S": 3, "pad_h": 0, "pad_w": 0, "stride_h": 1, '
    '"stride_w": 1, "fwd_ms": 1}]',  # a filter larger than the padded input: no output
    # a key a kernel may not carry is never dropped: a batch under another name (8x the work), a dilation
    '"gemm": [{"B": 8, "M": 64, "N": 64, "K": 64, "ms": 0.01}]',
    '"conv": [{"N": 1, "C": 8, "H": 9, "W": 9, "K": 8, "R": 3, "S": 3, "pad_h": 0, "pad_w": 0, "stride_h": 1, '
    '"stride_w": 1, "dilation_h": 2, "fwd_ms": 1}]',
    '"elementwise": [5]',
    '"gemm": [{"batch": 0, "M": 64, "N": 64, "K": 64, "ms": 0.01}]',
])
def test_a_malformed_published_sheet_is_refused_in_one_line(tmp_path, entry):
    bad = tmp_path / "bad.json"
    bad.write_text('{"sheets": {"x": {"gpu": "NVIDIA H200", "precision": "fp16", %s}}}' % entry)
    r = run_cli("validate", "--published", str(bad), "--hw", "h200")
    assert r.exit_code == 2, r.output
    assert "'x'" in r.output and "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1


def test_hopper_fp32_convolutions_do_not_split_k():
    """bench/data/h200-kernels.json: at batch 1 cuDNN 9's fp32 3 x 3 convolutions with 512 channels
    take 107.3 us at 7 x 7 and 107.4 us at 14 x 14 (one K loop of 4,608 whatever the output), with 128
    channels 29.0-29.1 us at 14 x 14 / 27 x 27 / 28 x 28. No split-K: the estimate does not depend on
    the output size while one wave holds it; fp16 of the same shape still splits K."""
    from dnnperf.published import Kernel

    hw = load_profile("h200")
    def conv(p, c, side, k):
        return predict(Kernel("s", "g", p, "conv", (1, c, side, side, k, 3, 3, 1, 1, 1, 1), 1e-4, False), hw)

    small, big = conv("fp32", 512, 7, 512), conv("fp32", 512, 14, 512)
    assert small[1].plan.split_k == 1 and big[1].plan.split_k == 1
    assert small[0] == pytest.approx(big[0], rel=0.05)
    assert conv("fp32", 128, 14, 256)[0] == pytest.approx(conv("fp32", 128, 28, 128)[0], rel=0.05)
    assert conv("fp16", 512, 7, 512)[1].plan.split_k > 1


def _biased_conv(tmp_path, group=1, relu=False):
    """x [8, 64, 56, 56] fp32 -> 3 x 3 Conv (64 filters, pads 1) with a bias -> y [8, 64, 56, 56]."""
    from helpers import weight

    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if relu else "y"], name="conv", pads=[1, 1, 1, 1],
                              group=group)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"], name="relu"))
    m = model(nodes, [vi("x", [8, 64, 56, 56])], [vi("y", None)],
              [weight("w", [64, 64 // group, 3, 3]), weight("b", [64])])
    return inspect_model(save(m, tmp_path))


def test_frameworks_add_a_convolutions_bias_in_a_second_kernel_by_hand(tmp_path):
    """PyTorch's cuDNN path (output.add_(bias) after cudnn_convolution) and ONNX Runtime's CUDA Conv
    (cudnnAddTensor) add the bias in a kernel of its own (conv_bias_kernel). On the H200 in a CUDA
    graph it starts (graph_stream_kernel_us 1.2 us) then reads and writes the output: 8 x 64 x 56 x 56
    x 4 bytes = 6,422,528, twice = 12.8 MB, which fits the usable L2 (60 MB x 0.75), so it moves at
    the L2 bandwidth (35.6 B x 132 SMs x 1.83 GHz x 0.7 = 6,019.6 GB/s): 1.2 us + 2.1339 us. Eagerly the kernel takes
    at least min_kernel_us (5 us), and its dispatch is part of the convolution's host cost."""
    h200 = load_profile("h200")
    off = replace(h200, gpu={**h200.gpu, "conv_bias_kernel": False})
    insp = _biased_conv(tmp_path)
    s = Settings(batch=8, precision="fp32", runtime="graph")
    with_bias = analyze(insp, h200, s).score.totals["latency_s"]
    without = analyze(insp, off, s).score.totals["latency_s"]
    assert with_bias - without == pytest.approx(1.2e-6 + 2 * 6_422_528 / (35.6 * 132 * 1.83e9 * 0.7), rel=1e-9)
    # the kernels the layer runs: the convolution and the bias; in fp16 also Hopper's one layout reorder
    assert [analyze(insp, hw, s).score.layers[0].kernels for hw in (h200, off)] == [2, 1]
    assert analyze(insp, h200, replace(s, precision="fp16")).score.layers[0].kernels == 3
    # the report's totals: one launch, two device kernels; the JSON says both
    from dnnperf.documents import report_dict

    doc = report_dict(analyze(insp, h200, s))
    assert (doc["totals"]["launches"], doc["totals"]["kernels"]) == (1, 2)
    e = replace(s, runtime="eager")
    rep_on, rep_off = analyze(insp, h200, e).score, analyze(insp, off, e).score
    assert rep_on.layers[0].t_device - rep_off.layers[0].t_device == pytest.approx(5e-6, rel=1e-9)
    assert rep_on.layers[0].t_launch == rep_off.layers[0].t_launch  # no second host dispatch
    # TensorRT folds it into the convolution's epilogue; so does a layer fused with its ReLU
    t = replace(s, runtime="tensorrt")
    assert analyze(insp, h200, t).score.totals["latency_s"] == analyze(insp, off, t).score.totals["latency_s"]
    fused = _biased_conv(tmp_path, relu=True)
    ft = replace(s, fusion="typical")
    assert analyze(fused, h200, ft).score.totals["latency_s"] == analyze(fused, off, ft).score.totals["latency_s"]
    # a depthwise convolution runs the framework's own kernel, which takes its bias along
    dw = _biased_conv(tmp_path, group=64)
    assert analyze(dw, h200, s).score.totals["latency_s"] == analyze(dw, off, s).score.totals["latency_s"]


def test_conv_bias_kernel_counts_only_a_conv_bias(tmp_path):
    """The flag is set by a plain Conv with a bias input; ORT's FusedConv takes its bias in the
    kernel, and a Conv without a bias has none."""
    from helpers import weight

    def first_conv(nodes, inits):
        m = model(nodes, [vi("x", [1, 8, 8, 8])], [vi("y", None)], inits, extra_opsets=[("com.microsoft", 1)])
        return next(r.workload for r in inspect_model(save(m, tmp_path)).rows if r.node.name == "c")

    w, b = weight("w", [8, 8, 1, 1]), weight("b", [8])
    assert first_conv([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c")], [w, b]).bias
    assert not first_conv([helper.make_node("Conv", ["x", "w"], ["y"], name="c")], [w]).bias
    assert not first_conv([helper.make_node("FusedConv", ["x", "w", "b"], ["y"], name="c", domain="com.microsoft",
                                            activation="Relu")], [w, b]).bias


def test_a_published_gemm_may_be_batched(tmp_path):
    """A GEMM row's `batch`: that many M x K by K x N products in one kernel, both operands computed
    (attention's batched products): 8 x 128 x 128 x 64 = 8,388,608 MACs; in fp16 it reads 8 x (128 x
    64 + 64 x 128) x 2 = 262,144 bytes of activations, no weights, and writes 8 x 128 x 128 x 2 = 262,144."""
    from dnnperf.ops import cost_node
    from dnnperf.published import kernel_graph

    f = tmp_path / "b.json"
    f.write_text('{"sheets": {"x": {"gpu": "NVIDIA H200", "precision": "fp16", "gemm": ['
                 '{"M": 128, "N": 128, "K": 64, "batch": 8, "ms": 0.01}, {"M": 128, "N": 128, "K": 64, "ms": 0.005}]}}}')
    ks = {k.dims: k for k in load_published(str(f))}
    batched, single = ks[(128, 128, 64, 8)], ks[(128, 128, 64)]
    assert batched.label == "gemm M=128 N=128 K=64 batch 8"
    g, node = kernel_graph(batched, "float16")
    w = cost_node(g, node)
    assert (w.macs, w.act_bytes_read, w.weight_bytes, w.bytes_written) == (8_388_608, 262_144, 0, 262_144)
    assert w.gemm.count == 8 and (w.gemm.m, w.gemm.n, w.gemm.k) == (128, 128, 64)
    # eight products take longer than one (more tiles over the same SMs), and never less
    hw = load_profile("h200")
    assert predict(batched, hw)[0] >= predict(single, hw)[0]


def test_a_transposed_convolutions_bias_is_a_second_kernel_too(tmp_path):
    """PyTorch's cuDNN transposed convolution and ONNX Runtime's ConvTranspose add the bias after the
    library's kernel as well: x [8, 64, 28, 28] -> 2 x 2 stride-2 ConvTranspose to 32 channels -> y
    [8, 32, 56, 56] fp32 = 3,211,264 bytes, read and written from the H200's L2 (6,019.6 GB/s) after a
    1.2 us start in a CUDA graph: 1.2 us + 1.0669 us."""
    from helpers import weight

    m = model([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="ct", strides=[2, 2])],
              [vi("x", [8, 64, 28, 28])], [vi("y", None)], [weight("w", [64, 32, 2, 2]), weight("b", [32])])
    insp = inspect_model(save(m, tmp_path))
    h200 = load_profile("h200")
    off = replace(h200, gpu={**h200.gpu, "conv_bias_kernel": False})
    s = Settings(batch=8, precision="fp32", runtime="graph")
    t_on, t_off = (analyze(insp, hw, s).score.totals["latency_s"] for hw in (h200, off))
    assert t_on - t_off == pytest.approx(1.2e-6 + 2 * 3_211_264 / (35.6 * 132 * 1.83e9 * 0.7), rel=1e-9)


def test_hopper_fp32_grouped_convolutions_reach_063_of_the_dense_kernels_rate(tmp_path):
    """cuDNN 9's fp32 grouped kernels (H200, batch 64: 1.35-1.75x the dense estimate) get
    grouped_efficiency 0.63 on top of the dense implicit GEMM's figures: a compute-bound grouped
    convolution's compute time is the dense one's / 0.63 (the H200's 700 W over 132 SMs holds its clock
    either way). fp16 grouped, fp32 dense and fp32 depthwise convolutions are untouched."""
    h200 = load_profile("h200")
    dense_lib = replace(h200, gpu={**h200.gpu, "grouped_efficiency": {"fp32": 1.0}})
    s = Settings(batch=8, precision="fp32", runtime="graph")
    grouped = _biased_conv(tmp_path, group=8)  # 8 groups of 8 channels: family grouped_conv
    a = analyze(grouped, h200, s).score.layers[0]
    b = analyze(grouped, dense_lib, s).score.layers[0]
    assert a.t_compute == pytest.approx(b.t_compute / 0.63, rel=1e-9)
    assert a.time_s > b.time_s
    fp16 = replace(s, precision="fp16")
    assert analyze(grouped, h200, fp16).score.layers[0].time_s == analyze(grouped, dense_lib, fp16).score.layers[0].time_s
    for group in (1, 64):  # dense, depthwise
        insp = _biased_conv(tmp_path, group=group)
        assert analyze(insp, h200, s).score.layers[0].time_s == analyze(insp, dense_lib, s).score.layers[0].time_s


def _stem(tmp_path):
    """x [16, 3, 224, 224] -> 7 x 7 stride-2 Conv to 64 channels (pads 3), no bias: an image stem."""
    from helpers import weight

    m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="stem", pads=[3, 3, 3, 3], strides=[2, 2])],
              [vi("x", [16, 3, 224, 224])], [vi("y", None)], [weight("w", [64, 3, 7, 7])])
    return inspect_model(save(m, tmp_path))


def test_hopper_runs_a_stem_on_its_fp32_kernels_in_every_float_precision(tmp_path):
    """cuDNN 9 times a 3-channel stem alike in fp16 and fp32 (H200: 20 shapes, fp16/fp32 0.5-1.25x), at
    0.56 of the fp32 implicit GEMM's figure (stem_efficiency): in fp16, bf16 and tf32 the stem runs on
    the CUDA cores in fp32 with the fp32 layer's compute time, which is the stem_efficiency-1 figure
    / 0.56. cuDNN 7 (Volta) keeps the padded fp16 path on its fp16 CUDA-core rate."""
    insp = _stem(tmp_path)
    h200 = load_profile("h200")
    plain = replace(h200, gpu={**h200.gpu, "stem_efficiency": 1.0})
    s32 = Settings(batch=16, precision="fp32", runtime="graph")
    fp32 = analyze(insp, h200, s32).score.layers[0]
    assert fp32.unit == "cuda_cores" and fp32.precision == "fp32"
    assert fp32.t_compute == pytest.approx(analyze(insp, plain, s32).score.layers[0].t_compute / 0.56, rel=1e-9)
    for p in ("fp16", "bf16", "tf32"):
        layer = analyze(insp, h200, replace(s32, precision=p)).score.layers[0]
        assert (layer.unit, layer.precision) == ("cuda_cores", "fp32")
        assert layer.t_compute == pytest.approx(fp32.t_compute, rel=1e-9)
    v100 = analyze(insp, load_profile("v100"), replace(s32, precision="fp16")).score.layers[0]
    assert (v100.unit, v100.precision) == ("cuda_cores", "fp16")


def test_a_report_says_when_a_stem_runs_in_another_precision(tmp_path):
    """The fp16 stem above runs in fp32 on Hopper: the report says so, naming the layer; an fp32 run
    (nothing changes) and Volta's padded fp16 path (no stem kernels) say nothing."""
    insp = _stem(tmp_path)
    h200, v100 = load_profile("h200"), load_profile("v100")
    fp16 = Settings(batch=16, precision="fp16")
    [note] = [n for n in analyze(insp, h200, fp16).notes if "stem kernels" in n]
    assert "(stem)" in note and "not in fp16" in note and "fp32 stem kernels on the CUDA cores" in note
    assert not [n for n in analyze(insp, h200, replace(fp16, precision="fp32")).notes if "stem" in n]
    assert not [n for n in analyze(insp, v100, fp16).notes if "stem" in n]


def test_a_profile_without_fp32_cuda_cores_keeps_its_stem_on_the_units_it_has(tmp_path):
    """A user profile that names a Hopper GPU but lists no fp32 CUDA-core unit cannot run the stem on
    cuDNN's fp32 stem kernels: the layer stays on the units the profile has, in its own precision,
    without the stem kernels' efficiency factor (its time equals the factor-1 time) and without a note."""
    insp = _stem(tmp_path)
    h200 = load_profile("h200")
    units = tuple(replace(u, peak_tops={k: v for k, v in u.peak_tops.items() if k != "fp32"})
                  if gpu.unit_class(u.name) == "cuda_cores" else u for u in h200.units)
    no_fp32 = replace(h200, units=units)
    assert not any(gpu.unit_class(u.name) == "cuda_cores" and "fp32" in u.peak_tops for u in no_fp32.units)
    plain = replace(no_fp32, gpu={**no_fp32.gpu, "stem_efficiency": 1.0})
    fp16 = Settings(batch=16, precision="fp16", runtime="graph")
    layer = analyze(insp, no_fp32, fp16).score.layers[0]
    assert layer.precision == "fp16"
    assert layer.t_compute == analyze(insp, plain, fp16).score.layers[0].t_compute
    assert not [n for n in analyze(insp, no_fp32, fp16).notes if "stem" in n]


@pytest.mark.parametrize("name,start_us,floor_us", [("h200", 1.2, 2.4), ("v100", 2.0, 2.0)])
def test_every_kernel_takes_its_start_before_its_work(name, start_us, floor_us):
    """A kernel's start (graph_stream_kernel_us: H200 1.2 us, measured on its Add kernels; the default
    2 us) comes before its work, back to back from a stream and in a captured graph alike: a long GEMM
    takes exactly that much longer than with no start (the floors, 5 us eager and 2-2.4 us in a graph,
    are far below its time); on the H200 a tiny one takes the graph floor (graph_kernel_us, 2.4 us),
    its start and work being shorter. (The default entry's start equals its graph floor: there every
    kernel takes more than the floor.)"""
    from dnnperf.published import Kernel, predict

    hw = load_profile(name)
    no_start = replace(hw, gpu={**hw.gpu, "graph_stream_kernel_us": 0.0})
    big = Kernel("s", "g", "fp16", "gemm", (4096, 4096, 4096), 1.0, False, "eager")
    work = predict(big, no_start)[0]
    assert work > 100e-6
    for runtime in ("eager", "graph"):
        t = predict(replace(big, runtime=runtime), hw)[0]
        assert t == pytest.approx(work + start_us * 1e-6, rel=1e-12)
    tiny = predict(Kernel("s", "g", "fp16", "gemm", (16, 16, 16), 1.0, False, "graph"), hw)[0]
    if start_us < floor_us:
        assert tiny == pytest.approx(floor_us * 1e-6, rel=1e-12)
    else:
        assert start_us * 1e-6 < tiny < 2 * start_us * 1e-6


def test_a_hopper_gemm_step_covers_two_mma_instructions_of_k():
    """One 64 x 64 x 4096 product on the H200's tensor cores is one CTA waiting on its K loop: each step
    of a GEMM covers 32 fp16 (16 tf32) elements of K at 200 cycles of the 1.83 GHz clock (gemm_k_step,
    k_step_cycles): 4096 / 32 x 200 / 1.83e9 = 13.99 us in fp16, 4096 / 16 x 200 / 1.83e9 = 27.98 us in
    tf32. A convolution that gathers its patches keeps the MMA instruction's 16 at 300 cycles: 41.97 us."""
    h200 = load_profile("h200")
    lib = gpu.library_of(h200)
    hz = gpu.clock_hz(h200, lib)
    assert hz == 1.83e9
    fp16 = gpu.plan_gemm(64, 64, 4096, 1, 132, lib, "tensor_cores", 989.4e12, hz, "fp16", split_k=False)
    assert fp16.latency_bound and fp16.seconds == pytest.approx(4096 / 32 * 200 / 1.83e9, rel=1e-12)
    tf32 = gpu.plan_gemm(64, 64, 4096, 1, 132, lib, "tensor_cores", 494.7e12, hz, "tf32", split_k=False)
    assert tf32.latency_bound and tf32.seconds == pytest.approx(4096 / 16 * 200 / 1.83e9, rel=1e-12)
    conv = gpu.plan_gemm(64, 64, 4096, 1, 132, lib, "tensor_cores", 989.4e12, hz, "fp16", split_k=False,
                         gemv=False, step_cycles=300)
    assert conv.latency_bound and conv.seconds == pytest.approx(4096 / 16 * 300 / 1.83e9, rel=1e-12)


def _two_products(tmp_path):
    """Two 4096 x 4096 x 4096 products side by side: one on fp32 data, one on fp16 data."""
    from onnx import TensorProto as T

    from helpers import weight

    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="fp32_mm"),
             helper.make_node("MatMul", ["h", "wh"], ["yh"], name="fp16_mm")]
    m = model(nodes, [vi("x", [4096, 4096]), vi("h", [4096, 4096], T.FLOAT16)],
              [vi("y", [4096, 4096]), vi("yh", [4096, 4096], T.FLOAT16)],
              [weight("w", [4096, 4096]), weight("wh", [4096, 4096], T.FLOAT16)])
    return save(m, tmp_path, "two.onnx")


def test_fp32_matrix_layers_run_in_tf32_where_the_runtimes_do_so_by_default(tmp_path):
    """ONNX Runtime's CUDA provider (use_tf32 on by default), TensorRT (TF32 builder flag on by
    default) and PyTorch's cuDNN convolutions run fp32 products in TF32 on Ampere and later. A
    4096^3 product is 2 x 4096^3 = 137.4 G ops: at the A100's 19.5 TOP/s of strict fp32 it cannot
    take less than 7.05 ms, at its 156 TOP/s of tf32 no less than 0.88 ms. With the model's own
    precision the fp32 product is costed in tf32 (the fp16 one stays fp16) and a note says so;
    -p fp32 keeps strict fp32; the V100 has no tf32 mode and is unchanged."""
    path = _two_products(tmp_path)
    d = json.loads(CliRunner().invoke(app, ["analyze", path, "--hw", "a100", "-f", "json", "-q"]).stdout)
    by = {l["name"]: l for l in d["layers"]}
    assert by["fp32_mm"]["precision"] == "tf32" and by["fp16_mm"]["precision"] == "fp16"
    assert 0.88e-3 <= by["fp32_mm"]["latency_s"] < 2e-3
    assert any("costed in tf32" in n and "-p fp32" in n for n in d["warnings"])
    strict = json.loads(CliRunner().invoke(app, ["analyze", path, "--hw", "a100", "-p", "fp32", "-f", "json",
                                                 "-q"]).stdout)
    s_by = {l["name"]: l for l in strict["layers"]}
    assert s_by["fp32_mm"]["precision"] == "fp32" and s_by["fp32_mm"]["latency_s"] >= 7.05e-3
    assert not any("costed in tf32" in n for n in strict["warnings"])
    # the model's fp32 work is already on the tensor cores: the whole-model advice starts from tf32
    assert not any(f["text"].startswith("whole model fp32") for f in d["model_fixes"])
    v = json.loads(CliRunner().invoke(app, ["analyze", path, "--hw", "v100", "-f", "json", "-q"]).stdout)
    v32 = json.loads(CliRunner().invoke(app, ["analyze", path, "--hw", "v100", "-p", "fp32", "-f", "json", "-q"]).stdout)
    assert {l["name"]: l["precision"] for l in v["layers"]}["fp32_mm"] == "fp32"
    assert not any("tf32" in n for n in v["warnings"])
    v_by = {l["name"]: l["latency_s"] for l in v["layers"]}
    assert v_by["fp32_mm"] == {l["name"]: l["latency_s"] for l in v32["layers"]}["fp32_mm"]
    # one line for every such GPU a comparison holds, not one per profile
    c = json.loads(CliRunner().invoke(app, ["compare", path, "--hw", "a100,h100,l4,v100", "-f", "json", "-q"]).stdout)
    assert sum("costed in tf32" in n for n in c["warnings"]) == 1


def _b200(**extra):
    """An NVIDIA B200 from its spec sheet alone (dense figures: half the datasheet's sparse ones)."""
    from dnnperf.hardware import profile_from_dict

    return profile_from_dict({
        "schema": "dnnperf-hw/1", "name": "b200", "title": "NVIDIA B200 SXM 180 GB (Blackwell)", "kind": "gpu",
        "headline": {"precision": "fp16", "tops": 2250},
        "units": [{"name": "tensor_cores", "serves": ["matrix"],
                   "peak_tops": {"tf32": 1100, "fp16": 2250, "bf16": 2250, "fp8": 4500, "int8": 4500, "fp4": 9000}},
                  {"name": "cuda_cores", "serves": ["matrix", "vector"], "peak_tops": {"fp32": 75, "fp64": 37}}],
        "memory": {"dram_gbs": 8000, "dram_gb": 180, "onchip_mb": 126},
        "parallelism": {"compute_units": 148}, "gpu": {"tdp_w": 1000}, **extra}, "b200")


def test_a_blackwell_spec_sheet_profile_runs_fp4():
    """fp4 (NVFP4 / MXFP4) is Blackwell's headline precision: a profile listing it loads (it was refused
    as an unknown precision), -p fp4 runs on the tensor cores at twice the fp8 rate, the precision ladder
    reaches it from 8 bits, and a GPU without it says which 4-bit precision it has."""
    from dnnperf.errors import DnnperfError
    from dnnperf.precision import cheaper_rungs, resolve

    b200 = _b200()
    assert gpu.library_of(b200).generation == "blackwell"
    assert cheaper_rungs(b200, "int8") == ["fp4"] and cheaper_rungs(b200, "fp8") == ["int8", "fp4"]
    times = {}
    for p in ("fp8", "fp4"):
        k = _kernel_time(b200, p)
        times[p] = k
    # a 8192^3 product: 2 x 8192^3 ops at 9,000 TOP/s is 122 us at the very least; compute-bound, so the
    # fp4 kernel takes about half the fp8 one (same tiles, twice the rate)
    assert times["fp4"] >= 2 * 8192 ** 3 / 9000e12
    assert 0.45 < times["fp4"] / times["fp8"] < 0.6
    with pytest.raises(DnnperfError, match="no fp4 units — use -p int4"):
        resolve(load_profile("a100"), "fp4")


def _kernel_time(hw, precision):
    from dnnperf.published import Kernel

    t, c = predict(Kernel("s", "g", precision, "gemm", (8192, 8192, 8192), 1.0, False), hw)
    assert c.unit == "tensor_cores" and c.precision == precision
    return t


# -- TensorRT engines: their own matrix kernels and the precisions they allow -------------------


def _product(tmp_path, name="p.onnx"):
    """A weight product, 512 x 768 times 768 x 3072 (a BERT-Base FFN up-projection at 512 tokens)."""
    from helpers import weight

    m = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], [vi("x", [512, 768])], [vi("y", None)],
              [weight("w", [768, 3072])])
    return inspect_model(save(m, tmp_path, name))


def test_tensorrt_runs_turing_int8_products_on_the_tensor_cores(tmp_path):
    """cuBLAS 10's int8 GEMM API runs DP4A on a T4's CUDA cores (DeepBench's T4 int8 GEMMs: ~24 of 130
    TOP/s), while its convolutions take the int8 tensor cores; a TensorRT engine runs its matrix
    products with its own kernels, in the precisions its convolutions take the tensor cores in."""
    insp = _product(tmp_path)
    t4 = load_profile("t4")
    fc = lambda rt: next(c for c in analyze(insp, t4, Settings(precision="int8", runtime=rt), with_fixes=False)
                         .score.layers if c.name == "fc")
    eager, engine = fc("eager"), fc("tensorrt")
    assert (eager.unit, eager.precision) == ("cuda_cores", "int8")
    assert (engine.unit, engine.precision) == ("tensor_cores", "int8")
    assert engine.time_s < eager.time_s / 2


def test_an_int8_tensorrt_engine_runs_a_layer_in_fp16_where_that_is_faster(tmp_path):
    """A V100 has no int8 tensor cores: an int8 product runs DP4A on the CUDA cores (62.8 TOP/s) where
    fp16 takes the tensor cores (125). An engine built for int8 also allows fp16 and times both: the
    product runs in fp16, as the same engine asked for fp16 costs it (within the int8 network's smaller
    footprint's effect on what stays in the L2), and a note says how many layers
    did; eager -p int8 keeps the int8 kernel, and a model's own (QDQ) precision is never widened."""
    insp = _product(tmp_path)
    v100 = load_profile("v100")
    rep = analyze(insp, v100, Settings(precision="int8", runtime="tensorrt"), with_fixes=False)
    fc = next(c for c in rep.score.layers if c.name == "fc")
    fp16 = next(c for c in analyze(insp, v100, Settings(precision="fp16", runtime="tensorrt"), with_fixes=False)
                .score.layers if c.name == "fc")
    assert (fc.unit, fc.precision) == ("tensor_cores", "fp16")
    assert fc.time_s == pytest.approx(fp16.time_s, rel=0.05)  # (the int8 network's smaller footprint aside)
    assert any("1 of 1 matrix layers run in fp16, not int8" in n for n in rep.notes)
    eager = next(c for c in analyze(insp, v100, Settings(precision="int8"), with_fixes=False).score.layers
                 if c.name == "fc")
    assert (eager.unit, eager.precision) == ("cuda_cores", "int8")
    # a QDQ product (the model states int8) stays int8 under the engine
    from dnnperf.scoring import score_layer

    layer = next(l for l in __import__("dnnperf.api", fromlist=["build_layers"]).build_layers(insp, "typical", "int8")
                 if l.name == "fc")
    assert score_layer(layer, v100, None, runtime="tensorrt").precision == "int8"


def test_the_api_fuses_under_tensorrt_as_the_cli_does(tmp_path):
    """`--runtime tensorrt` implies `--fusion typical` on the command line; settings built in code
    (the benchmarks, a notebook) get the same engine, not an unfused one."""
    insp = inspect_model(os.path.join(SAMPLES, "squeezenet1_1.onnx"))
    rep = analyze(insp, load_profile("t4"), Settings(runtime="tensorrt"), with_fixes=False)
    assert rep.score.settings.fusion == "typical"
    cli = json.loads(run_cli("analyze", os.path.join(SAMPLES, "squeezenet1_1.onnx"), "--hw", "t4", "--runtime",
                             "tensorrt", "-f", "json").stdout)
    assert cli["totals"]["latency_s"] == pytest.approx(rep.score.totals["latency_s"], rel=1e-5)  # JSON: 6 digits


def test_bert_under_tensorrt_holds_on_nvidia_s_published_latencies():
    """NVIDIA's TensorRT BERT demo (TensorRT 7.1): BERT-Base latency on an A100 40GB, a T4 and a V100 at
    sequence lengths 128 and 384, batch 1-128, fp16 and int8 (120 rows). Every row within 2x and the
    rows in their order (rank rho >= 0.98). Before the engine's int8 rules the T4's int8 rows were 1.85x
    slow (int8 products on DP4A) and int8 came out slower than fp16 there: rho 0.956."""
    import importlib.util

    from dnnperf.published import spearman

    spec = importlib.util.spec_from_file_location("trt_bert", os.path.join(ROOT, "bench", "trt_bert.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.estimate(mod.load_rows())
    assert len(res) == 120
    for r, p in res:
        assert 1 / 2 <= p / (r["latency_ms"] * 1e-3) <= 2, (r, p)
    assert spearman([p for _, p in res], [r["latency_ms"] for r, _ in res]) >= 0.98


def test_bert_base_and_large_under_tensorrt_8_4_transfer_to_a_spec_sheet_gpu():
    """The later TensorRT demo table (TensorRT 8.4, 240 rows, none tuned on): BERT-Base and BERT-Large at
    sequence lengths 128 and 384, batch 1-128, fp16 and int8, on an A100 40GB, a T4 and an A30, the A30
    with a profile written from its datasheet alone (bench/data/spec-profiles/a30.yaml). Every row within
    2x of the published average latency, the rows in their order (rank rho >= 0.98), and the A30's 80 rows
    at a median error of at most 1.3x (the issue's transfer goal for networks: within 1.5x, order right)."""
    import importlib.util

    from dnnperf.published import spearman, stats

    spec = importlib.util.spec_from_file_location("trt_bert", os.path.join(ROOT, "bench", "trt_bert.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.estimate(mod.load_rows(os.path.join(ROOT, "bench", "data", "trt-bert-8.4-published.json")))
    assert len(res) == 240 and {r["model"] for r, _ in res} == {"bert_base", "bert_large"}
    for r, p in res:
        assert 1 / 2 <= p / (r["latency_ms"] * 1e-3) <= 2, (r, p)
    assert spearman([p for _, p in res], [r["latency_ms"] for r, _ in res]) >= 0.98
    a30 = [{"predicted_s": p, "measured_s": r["latency_ms"] * 1e-3} for r, p in res if r["hw"] == "a30"]
    assert len(a30) == 80 and stats(a30)["median_error"] <= 1.3


def test_jetson_boards_from_their_datasheets_against_torch2trt_latencies():
    """torch2trt's published batch-1 fp16 TensorRT latencies of torchvision classifiers on a Jetson Nano
    and a Jetson AGX Xavier (47 rows), each board with a profile written from its datasheet alone. The
    Xavier's rows set soc_launch_us (18 us a kernel launch on a system-on-chip GPU); the Nano's were not
    used: every Nano row within 2x and in order (rank rho >= 0.95), median error <= 1.3x. The Xavier's
    light models (0.16-0.61x without the launch) and every other row but the DenseNets, its VGGs (15-20
    kernels of 0.25-0.6 ms each, where the launch hardly counts) included, within 1.25x; the DenseNets
    stay the known miss (0.43-0.64x)."""
    import importlib.util

    from dnnperf.published import spearman, stats

    spec = importlib.util.spec_from_file_location("torch2trt_jetson", os.path.join(ROOT, "bench", "torch2trt_jetson.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.estimate(mod.load_rows())
    assert len(res) == 47
    nano = [(r, p) for r, p in res if r["hw"] == "jetson-nano"]
    assert len(nano) == 18
    for r, p in nano:
        assert 1 / 2 <= p / (r["tensorrt_ms"] * 1e-3) <= 2, (r, p)
    assert spearman([p for _, p in nano], [r["tensorrt_ms"] for r, _ in nano]) >= 0.95
    assert stats([{"predicted_s": p, "measured_s": r["tensorrt_ms"] * 1e-3} for r, p in nano])["median_error"] <= 1.3
    xavier = {r["model"]: p / (r["tensorrt_ms"] * 1e-3) for r, p in res if r["hw"] == "jetson-agx-xavier"}
    rest = {m: x for m, x in xavier.items() if not m.startswith("densenet")}
    assert len(rest) == 25 and all(1 / 1.25 <= x <= 1.25 for x in rest.values()), rest
    assert all(x < 0.7 for m, x in xavier.items() if m.startswith("densenet"))


def test_a_gpu_on_a_system_on_chip_waits_for_each_launch_outside_a_cuda_graph(tmp_path):
    """A profile whose title names a Jetson (or says gpu.integrated: true) adds soc_launch_us (18 us)
    to every kernel's start in the eager and TensorRT runtimes; in a CUDA graph nothing. One 4096^3
    fp16 product (one kernel, far above every floor) on the Xavier's datasheet profile: exactly 18 us
    more than the same profile with gpu.integrated: false, in eager and TensorRT alike; the same time in
    a graph. A discrete card's title names no SoC."""
    import yaml

    from dnnperf.published import Kernel, predict

    path = os.path.join(ROOT, "bench", "data", "spec-profiles", "jetson-agx-xavier.yaml")
    xavier = load_profile(path)
    assert gpu.library_of(xavier).integrated and gpu.library_of(xavier).soc_launch_us == 18.0
    with open(path, encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["gpu"]["integrated"] = False
    (tmp_path / "x.yaml").write_text(yaml.safe_dump(d))
    discrete = load_profile(str(tmp_path / "x.yaml"))
    assert not gpu.library_of(discrete).integrated
    big = Kernel("s", "g", "fp16", "gemm", (4096, 4096, 4096), 1.0, False, "eager")
    for runtime, extra in (("eager", 18e-6), ("tensorrt", 18e-6), ("graph", 0.0)):
        k = replace(big, runtime=runtime)
        assert predict(k, xavier)[0] == pytest.approx(predict(k, discrete)[0] + extra, rel=1e-12)
    assert gpu.soc_gpu("NVIDIA Jetson Orin Nano 8 GB (Ampere iGPU, 7-15 W)", "jetson-orin-nano")
    assert not any(gpu.soc_gpu(load_profile(n).title, n) for n in ("v100", "t4", "a100", "h200", "l4", "rtx4090"))
    assert "system-on-chip: 18 us a kernel launch" in gpu.library_summary(xavier)
    assert "system-on-chip" not in gpu.library_summary(load_profile("t4"))


def test_a_tensorrt_engine_fuses_attention_only_where_it_has_the_kernel():
    """TensorRT's fused multi-head attention kernels are built for Turing and later (sm75+): on a V100
    an engine runs the scores, the softmax and the product with V as kernels of their own, the scores
    through DRAM; on a T4 one kernel keeps them on chip. Eager and graph runtimes with --fusion typical
    keep the fused kernel (PyTorch's memory-efficient attention runs on Volta)."""
    from dnnperf.ir import ShapeOverrides

    insp = inspect_model(os.path.join(SAMPLES, "bert_base.onnx"), ShapeOverrides(dims=(("sequence_length", 128),)))
    ops = lambda hw, rt: [c.layer.op_type for c in analyze(insp, load_profile(hw), Settings(precision="fp16",
                          runtime=rt, fusion="typical"), with_fixes=False).score.layers]
    fused = lambda names: sum("Softmax+MatMul" in o for o in names)
    assert fused(ops("t4", "tensorrt")) == 12  # one per encoder layer
    v100 = ops("v100", "tensorrt")
    assert fused(v100) == 0 and sum("Softmax" in o for o in v100) == 12
    assert fused(ops("v100", "graph")) == 12


def test_a_padded_product_faster_than_the_headline_has_no_negative_loss(tmp_path):
    """An int8 product of 30 columns misses a T4 tensor-core alignment the generic unit pick honours,
    but a TensorRT engine's GEMM pads it onto the int8 tensor cores, at twice the fp16 headline rate:
    its ideal time is that unit's, so no loss comes out negative and the losses still add up."""
    from helpers import weight

    m = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], [vi("x", [100, 384])], [vi("y", None)],
              [weight("w", [384, 30])])
    insp = inspect_model(save(m, tmp_path, "fc30.onnx"))
    c = next(c for c in analyze(insp, load_profile("t4"), Settings(precision="int8", runtime="tensorrt"),
                                with_fixes=False).score.layers if c.name == "fc")
    assert c.unit == "tensor_cores" and c.precision == "int8"
    assert min(c.losses.values()) >= 0
    assert c.t_ideal + sum(c.losses.values()) == pytest.approx(c.time_s, rel=1e-9)


def test_an_aligned_convolution_of_one_pixel_stays_on_the_tensor_cores(tmp_path):
    """A squeeze-excitation block's 1 x 1 convolution (960 -> 240 channels on one pixel, fp16) was
    picked by tile fit onto the CUDA cores' fallback kernels: 31.6 us on an H100 against 10.7 us for the
    same convolution on 7 x 7 pixels, 49 times the work (it topped MobileNetV3, EfficientNet and RegNet
    reports). Channels that fill the tensor cores' vector keep it there however few its pixels: never
    slower than the larger map, on each GPU generation's profile."""
    import numpy as np
    import onnx
    from onnx import TensorProto

    def conv(side):
        g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 960, side, side])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)],
                              [onnx.numpy_helper.from_array(np.zeros((240, 960, 1, 1), np.float16), "w")])
        return save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path, f"c{side}.onnx")

    one, seven = inspect_model(conv(1)), inspect_model(conv(7))
    for name in ("v100", "t4", "a100", "h100"):
        for runtime in ("eager", "graph"):
            a = analyze(one, load_profile(name), Settings(runtime=runtime), with_fixes=False).score.layers
            b = analyze(seven, load_profile(name), Settings(runtime=runtime), with_fixes=False).score.layers
            assert a[0].unit == "tensor_cores", (name, runtime, a[0].unit)
            assert sum(c.time_s for c in a) <= sum(c.time_s for c in b) * 1.0001, (name, runtime)
