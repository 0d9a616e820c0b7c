"""Reads priced by how far back they were written (dnnperf.reuse, rules.far_read_time), a standing
BatchNormalization streaming at the bandwidth on a calibrated CPU, and convolution weights read back
from beyond the cache (rules.beyond_cache, rules.exposed_weight_time), weights read back from as far as the
network reaches (reuse.arena_bytes, Score.weight_reach)."""

from __future__ import annotations

import os

import pytest
import yaml
from onnx import helper

from dnnperf.api import analyze, build_layers, inspect_model
from dnnperf.hardware import load_profile, profile_from_dict
from dnnperf.reuse import arena_bytes, reuse_reads
from dnnperf.rules import bandwidth_for, beyond_cache, exposed_weight_time, far_read_time, memory_time
from dnnperf.scoring import Settings
from helpers import SAMPLES, model, save, vi, weight


def _calibrated_like(**memory) -> object:
    """cpu-avx2 with a bandwidth curve, as a calibration writes one: 100 GB/s up to 1 MB, 20 GB/s at
    4 MB, 20 GB/s DRAM beyond (cache 1 MB)."""
    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["memory"] = {"dram_gbs": 20, "onchip_mb": 1, "bandwidth_curve": {0.5: 100, 1: 100, 4: 20}, **memory}
    d["efficiency"] = {"norm": 0.2}
    return profile_from_dict(d, "x")


def _skip_chain(tmp_path, n: int = 1000, between: int = 3):
    """x -> Relu a -> ``between`` Relus -> Add(a, last): the Add reads ``a`` from far back."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ra")]
    prev = "a"
    for i in range(between):
        nodes.append(helper.make_node("Relu", [prev], [f"t{i}"], name=f"r{i}"))
        prev = f"t{i}"
    nodes.append(helper.make_node("Add", ["a", prev], ["y"], name="add"))
    return save(model(nodes, [vi("x", [1, n])], [vi("y", None)]), tmp_path, f"skip{n}_{between}.onnx")


def test_reuse_distances_by_hand(tmp_path):
    # [1, 1000] fp32 = 4,000 bytes per tensor. Writes in order: a 4,000, t0 8,000, t1 12,000, t2 16,000.
    # The Add starts at 16,000: it reads a from 16,000 - 4,000 = 12,000 bytes back and t2 from 0;
    # each Relu reads its predecessor from 0; the model input x was never written by a node
    insp = inspect_model(_skip_chain(tmp_path))
    reads = reuse_reads(insp, build_layers(insp))
    assert sorted(reads["add"]) == [(4000, 0), (4000, 12000)]
    assert reads["r0"] == ((4000, 0),) and "ra" not in reads


def test_a_far_read_streams_at_the_bandwidth_of_its_distance():
    hw = _calibrated_like()
    # a 1 MB read written 3 MB ago: 4 MB of reach (20 GB/s) where the layer's 2 MB working set gets
    # the curve's figure at 2 MB (100 -> 20 GB/s from 1 to 4 MB, linear in log: halfway, 60 GB/s)
    ws, nb = 2_000_000, 1_000_000
    assert bandwidth_for(ws, hw) == pytest.approx(60e9)
    assert far_read_time(((nb, 3_000_000),), ws, hw) == pytest.approx(nb / 20e9 - nb / 60e9)
    # a read from right before, or one whose reach stays within the working set: nothing added
    assert far_read_time(((nb, 0),), ws, hw) == 0.0
    assert far_read_time(((nb, 500_000),), ws, hw) == 0.0


def test_only_profiles_with_a_bandwidth_curve_price_far_reads(tmp_path):
    """The Add of a 400 KB skip connection over 20 layers (8 MB written since) on the calibrated-like
    profile costs more than the same Add with the distances dropped; a shipped profile (no curve) is
    untouched by them."""
    p = _skip_chain(tmp_path, n=100_000, between=20)
    insp = inspect_model(p)
    hw = _calibrated_like()
    add = next(c for c in analyze(insp, hw, Settings(), with_fixes=False).score.layers if c.name == "add")
    ws = add.layer.workload.act_bytes_read + add.layer.workload.bytes_written
    # a: 400,000 bytes read from 20 x 400,000 = 8 MB back: past the curve, DRAM (20 GB/s), where the
    # Add's own 1.2 MB working set reads at the curve's figure for it
    extra = 400_000 / 20e9 - 400_000 / bandwidth_for(ws, hw)
    assert sorted(add.layer.reads) == [(400_000, 0), (400_000, 8_000_000)]
    assert far_read_time(add.layer.reads, ws, hw) == pytest.approx(extra)
    # ... and the Add's memory time carries it on top of its own working set's traffic
    assert add.t_memory == pytest.approx(memory_time(ws, 0, hw) + extra, rel=1e-9)
    plain = load_profile("cpu-avx2")
    assert all(not c.layer.reads for c in analyze(insp, plain, Settings(), with_fixes=False).score.layers)


def test_a_standing_batchnorm_streams_at_the_bandwidth(tmp_path):
    """A BatchNormalization over [1, 256, 56, 56] fp32 reads and writes 3,211,264 bytes each: a 6.4 MB
    working set, past the 4 MB end of the curve: DRAM, 20 GB/s. Its 'norm' figure (0.2, a row norm's,
    read in cache) slows only its math, not its streaming: 6,422,528 + 4,096 weight bytes at 20 GB/s
    = 321.3 us, plus cpu-avx2's 2 us launch; at 0.2 over the whole time it would be five times that."""
    m = model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn")],
              [vi("x", [1, 256, 56, 56])], [vi("y", None)],
              [weight("s", [256]), weight("b", [256]), weight("m", [256]), weight("v", [256])])
    c = analyze(inspect_model(save(m, tmp_path, "bn.onnx")), _calibrated_like(), Settings(),
                with_fixes=False).score.layers[0]
    assert c.time_s == pytest.approx((6_422_528 + 4_096) / 20e9 + 2e-6, rel=1e-6)


# -- convolution weights read back from beyond the cache (rules.beyond_cache, rules.exposed_weight_time) --

def test_beyond_cache_by_hand():
    # the calibrated-like profile's cache (onchip_mb) is 1 MB: nothing misses up to half of it, all
    # from twice it; between, linear in log2 of the size: 0.5 at 1 MB, 0.25 at 0.707 MB, 0.75 at 1.414
    hw = _calibrated_like()
    assert beyond_cache(0.4e6, hw) == 0.0 and beyond_cache(0.5e6, hw) == 0.0
    assert beyond_cache(1e6, hw) == pytest.approx(0.5)
    assert beyond_cache(2 ** -0.5 * 1e6, hw) == pytest.approx(0.25)
    assert beyond_cache(2 ** 0.5 * 1e6, hw) == pytest.approx(0.75)
    assert beyond_cache(2e6, hw) == 1.0 and beyond_cache(1e9, hw) == 1.0
    # a profile without a curve has no cache figures: everything from DRAM
    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        plain = profile_from_dict(yaml.safe_load(fh), "x")
    assert beyond_cache(1e3, plain) == 1.0


def test_exposed_weight_time_by_hand():
    hw = _calibrated_like(dram_gbs=10).with_overrides(memory_overlap=0.8, conv_weight_exposure=0.5)
    w = 1_000_000  # 100 us at 10 GB/s
    # reached from beyond the 1 MB cache (100 MB): half of it exposed, of which the plain overlap
    # already exposes 0.2
    assert exposed_weight_time(w, 100_000_000, 1.0, hw) == pytest.approx((0.5 - 0.2) * 100e-6)
    # at 1.414 MB, three quarters of the way past the cache's edge: 0.5 x 0.75 = 0.375 exposed
    assert exposed_weight_time(w, int(2 ** 0.5 * 1e6), 1.0, hw) == pytest.approx((0.375 - 0.2) * 100e-6)
    # at the cache's own size, half way: 0.5 x 0.5 = 0.25 exposed, 0.05 beyond the plain overlap's 0.2
    assert exposed_weight_time(w, 1_000_000, 1.0, hw) == pytest.approx(0.05 * 100e-6)
    # weights that stay in the cache (0.4 MB reached), or no exposure calibrated: nothing
    assert exposed_weight_time(w, 400_000, 1.0, hw) == 0.0
    assert exposed_weight_time(w, 100_000_000, 1.0, hw.with_overrides(conv_weight_exposure=0.0)) == 0.0
    # never more than the shorter side an overlap could have hidden (30 us of math here)
    assert exposed_weight_time(w, 100_000_000, 30e-6, hw) == pytest.approx(0.3 * 30e-6)


def test_a_convolution_waits_for_weights_only_when_they_come_from_beyond_the_cache(tmp_path):
    # one 3x3 convolution, 256 -> 256 channels on 14 x 14: 2.36 MB of weights, on a profile whose cache
    # is 4 MB. Alone (weights + input + output: 2.76 MB, 0.69 of the cache: log2(1.38) / 2 = 0.23 of
    # the way past its edge, 0.5 x 0.23 exposed, under the 0.2 the plain overlap exposes) the estimate
    # is the plain one. Reached from 200 MB away, (0.5 - (1 - 0.8)) of the weight time (2,359,296 B
    # at 10 GB/s), up to the shorter of math and memory, comes on top
    from dnnperf.scoring import score_layer

    hw = _calibrated_like(dram_gbs=10, onchip_mb=4).with_overrides(memory_overlap=0.8, conv_weight_exposure=0.5)
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    insp = inspect_model(save(model([conv], [vi("x", [1, 256, 14, 14])], [vi("y", None)],
                                    [weight("w", [256, 256, 3, 3])]), tmp_path, "c.onnx"))
    layer = build_layers(insp)[0]
    assert layer.workload.weight_bytes == 2_359_296
    alone = score_layer(layer, hw)
    far = score_layer(layer, hw, weight_reach=200_000_000)
    assert alone.time_s == pytest.approx(score_layer(layer, hw.with_overrides(conv_weight_exposure=0.0)).time_s)
    # (its math is the shorter side here: the weights' 236 us exceed it, so the math bounds what waits)
    exposed = 0.3 * min(2_359_296 / 10e9, alone.t_compute, alone.t_memory)
    assert alone.t_compute < 2_359_296 / 10e9 < alone.t_memory
    # (the far layer also reads its weights at DRAM's figure, past the curve, as the lone one does)
    assert far.t_memory == pytest.approx(alone.t_memory)
    assert far.time_s - alone.time_s == pytest.approx(exposed)
    assert far.losses["overlap"] - alone.losses["overlap"] == pytest.approx(exposed)
    # run as a network again and again, the convolution reads its weights back from as far as the
    # network reaches (its weights and its input and output, 200,704 bytes each: 2,760,704 bytes, on
    # the curve), not from DRAM: faster than the layer scored with no reach, and nothing exposed
    rep = analyze(insp, hw, Settings(), with_fixes=False)
    assert rep.score.weight_reach == 2_359_296 + 2 * 200_704
    net = score_layer(layer, hw, weight_reach=2_760_704)
    assert rep.score.layers[0].time_s == pytest.approx(net.time_s)
    assert net.t_memory < alone.t_memory and net.time_s < alone.time_s
    assert net.time_s == pytest.approx(score_layer(layer, hw.with_overrides(conv_weight_exposure=0.0),
                                                   weight_reach=2_760_704).time_s)


def test_a_grouped_convolution_waits_for_its_far_weights_as_a_plain_one_does(tmp_path):
    """A grouped 3 x 3 convolution (256 channels in 16 groups of 16, 14 x 14: 147,456 bytes of filters)
    reached from 200 MB away waits for (0.5 - (1 - 0.8)) of its weights' DRAM time (at 10 GB/s), up to
    the shorter of its math and memory, on top of the plain overlap; a depthwise one pays nothing more
    (its filters are 9 KB)."""
    from dnnperf.scoring import score_layer

    hw = _calibrated_like(dram_gbs=10, onchip_mb=4).with_overrides(memory_overlap=0.8, conv_weight_exposure=0.5)
    for groups, wshape, family in ((16, [256, 16, 3, 3], "grouped_conv"), (256, [256, 1, 3, 3], "depthwise_conv")):
        conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=groups)
        insp = inspect_model(save(model([conv], [vi("x", [1, 256, 14, 14])], [vi("y", None)], [weight("w", wshape)]),
                                  tmp_path, f"g{groups}.onnx"))
        layer = build_layers(insp)[0]
        assert layer.workload.family == family
        far = score_layer(layer, hw, weight_reach=200_000_000)
        hidden = score_layer(layer, hw.with_overrides(conv_weight_exposure=0.0), weight_reach=200_000_000)
        wb = layer.workload.weight_bytes
        if family == "grouped_conv":
            assert wb == 147_456
            short = min(far.t_compute, far.t_memory)
            assert far.time_s - hidden.time_s == pytest.approx(0.3 * min(wb / 10e9, short), rel=1e-6)
            assert far.time_s > hidden.time_s
        else:
            assert far.time_s == pytest.approx(hidden.time_s)


# -- weights read back from as far as the network reaches (reuse.arena_bytes, rules.memory_time) ----

def test_weights_come_back_from_where_the_network_reach_puts_them():
    hw = _calibrated_like()
    w = 1_000_000
    # reached within the 1 MB cache: the curve's 100 GB/s (10 us); past its 4 MB end, or with no reach
    # known, DRAM's 20 GB/s (50 us)
    assert memory_time(0, w, hw, weight_reach=1_000_000) == pytest.approx(w / 100e9)
    assert memory_time(0, w, hw, weight_reach=8_000_000) == pytest.approx(w / 20e9)
    assert memory_time(0, w, hw) == pytest.approx(w / 20e9)
    # between: the cache holds what the activation buffers leave of it. 2 MB of weights alone: half
    # of them held (1 MB of room), at 100 GB/s, the other half at 20: 1 / (0.5 / 100 + 0.5 / 20) GB/s
    assert memory_time(0, w, hw, weight_reach=2_000_000) == pytest.approx(w / (1 / (0.5 / 100e9 + 0.5 / 20e9)))
    # 1.5 MB of weights and a 0.5 MB arena: 0.5 MB of room, a third of them held
    assert memory_time(0, w, hw, weight_reach=2_000_000, arena=500_000) == \
        pytest.approx(w / (1 / (1 / 3 / 100e9 + 2 / 3 / 20e9)))
    # buffers that fill the cache on their own leave no room: DRAM's
    assert memory_time(0, w, hw, weight_reach=2_000_000, arena=1_200_000) == pytest.approx(w / 20e9)
    # a profile without a curve (a spec sheet) reads them from DRAM whatever the reach
    plain = load_profile("cpu-avx2")
    assert memory_time(0, w, plain, weight_reach=1_000_000) == pytest.approx(w / plain.dram_bps)


def test_arena_bytes_by_hand(tmp_path):
    # the skip chain, one layer per node, [1, 1000] fp32 = 4,000 bytes a tensor: x until ra; a until the
    # Add; t0 until r1, t1 until r2. While r1 runs: a, t0 and t1 are live (12,000 bytes); so are a,
    # t1, t2 while r2 runs and a, t2, y at the Add
    insp = inspect_model(_skip_chain(tmp_path))
    assert arena_bytes(insp, build_layers(insp)) == 12_000
    # a fused layer holds its input and its output at once and never stores what it keeps inside:
    # x [1, 8, 10, 10] (3,200 bytes) -> Conv to 32 channels (c, 12,800) -> Relu (r, 12,800). Node by
    # node: c and r at once (25,600); fused: x and r (16,000)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["r"], name="relu")]
    p = save(model(nodes, [vi("x", [1, 8, 10, 10])], [vi("r", None)], [weight("w", [32, 8, 1, 1])]), tmp_path, "cr.onnx")
    insp = inspect_model(p)
    assert arena_bytes(insp, build_layers(insp)) == 25_600
    fused = build_layers(insp, "typical")
    assert [la.op_type for la in fused] == ["Conv+Relu"]
    assert arena_bytes(insp, fused) == 16_000


def test_a_small_network_reads_its_classifier_from_the_cache(tmp_path):
    """A matrix-vector classifier in a network run again and again: its input (4 x 1,024 bytes) and
    output (4 x n) are its activation buffers (the arena), and each weight comes back weights + arena
    bytes later. 1,024 -> 192 (786,432 bytes of weights): it all fits the 1 MB cache, the curve's 100
    GB/s there. 1,024 -> 512 (2,097,152 bytes, arena 6,144): past the cache, which holds
    (1,000,000 - 6,144) / 2,097,152 of the weights (at the full cache's 100 GB/s), the rest at DRAM's
    20. 4,096 -> 1,024 (16 MB) reaches past the curve: DRAM."""
    hw = _calibrated_like()
    for k, n in ((1024, 192), (1024, 512), (4096, 1024)):
        p = save(model([helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], [vi("x", [1, k])],
                       [vi("y", None)], [weight("w", [k, n])]), tmp_path, f"fc{k}_{n}.onnx")
        sc = analyze(inspect_model(p), hw, Settings(), with_fixes=False).score
        wb, act = 4 * k * n, 4 * k + 4 * n
        assert sc.weight_reach == wb + act and sc.arena == act
        if n == 192:
            bps = 100e9
        elif n == 512:
            held = (1_000_000 - 6_144) / 2_097_152
            bps = 1 / (held / 100e9 + (1 - held) / 20e9)
        else:
            bps = 20e9
        assert sc.layers[0].t_memory == pytest.approx(act / bandwidth_for(act, hw) + wb / bps, rel=1e-9)
    assert sc.weight_reach > 4e6  # the large one: from DRAM
    # an int8 what-if: the weights and the activation buffers both at one byte an element (the buffers
    # were counted at the model's four while its weights were at one)
    sc = analyze(inspect_model(p), hw, Settings(precision="int8"), with_fixes=False).score
    assert sc.arena == 4096 + 1024 and sc.weight_reach == 4096 * 1024 + 4096 + 1024
    # a shipped profile (no curve) knows no reach
    assert analyze(inspect_model(p), load_profile("cpu-avx2"), Settings(), with_fixes=False).score.weight_reach == 0


def _eight_products(tmp_path, shared: bool, tag: str) -> str:
    """Eight MatMuls from x [1, 1024] into outputs of their own (all graph outputs), reading one
    1,024 x 256 weight (``shared``) or eight distinct ones; the saved model's path."""
    nodes = [helper.make_node("MatMul", ["x", "w" if shared else f"w{i}"], [f"y{i}"], name=f"fc{i}") for i in range(8)]
    ws = [weight("w", [1024, 256])] if shared else [weight(f"w{i}", [1024, 256]) for i in range(8)]
    return save(model(nodes, [vi("x", [1, 1024])], [vi(f"y{i}", None) for i in range(8)], ws), tmp_path,
                f"{tag}{shared}.onnx")


def test_layers_sharing_one_initializer_count_its_bytes_once_in_the_reach(tmp_path):
    """Eight MatMuls reading one 1,024 x 256 weight (1,048,576 bytes), each from the model input x [1, 1024]
    (4,096 bytes) into an output of its own (1,024 bytes, all graph outputs: live to the end), as
    calibrate's repeated micro-benchmarks are built: the network touches 1,048,576 bytes of weights once,
    not 8 times, so the reach is 1,048,576 + 4,096 + 8 x 1,024 = 1,060,864 bytes (the curve's figure
    there), where the per-layer sum had put it at 8,401,920 (DRAM's). Eight distinct weights: 8 times."""
    from dnnperf.reuse import repeated_weight_bytes

    hw = _calibrated_like()
    for shared in (True, False):
        insp = inspect_model(_eight_products(tmp_path, shared, "cpu"))
        layers = build_layers(insp)
        sc = analyze(insp, hw, Settings(), with_fixes=False).score
        assert repeated_weight_bytes(insp, layers) == (7 * 1_048_576 if shared else 0)
        assert sc.weight_reach == (1 if shared else 8) * 1_048_576 + 4_096 + 8 * 1_024
        assert sc.footprint == (1 if shared else 8) * 1_048_576 + 8 * 1_024
    # shared: 1.06 MB reach, inside the curve; distinct: 8.4 MB, past its 4 MB end (DRAM)
    assert bandwidth_for(1_060_864, hw) > 90e9 and bandwidth_for(8_401_920, hw) == 20e9


def test_a_gpu_counts_a_shared_weight_once_in_its_residency_and_footprint(tmp_path):
    """The same eight MatMuls on one 1,048,576-byte weight, on a T4 (4 MB of L2, three quarters of it
    usable: 3,145,728 bytes): shared, the network's weights are 1 MB and stay in the L2 between
    inferences, its footprint 1,048,576 + 8 x 1,024 bytes; eight distinct weights (8 MB) do not fit, and
    their footprint is 8 x 1,048,576 + 8 x 1,024."""
    hw = load_profile("t4")
    for shared in (True, False):
        sc = analyze(inspect_model(_eight_products(tmp_path, shared, "gpu")), hw, Settings(), with_fixes=False).score
        assert sc.footprint == (1 if shared else 8) * 1_048_576 + 8 * 1_024
        assert sc.weights_resident is shared


def test_a_profile_calibrated_before_the_exposure_was_settled_says_its_convolutions_may_pay_it_twice(tmp_path):
    """A calibration before calibrate.settle_exposure read its convolution shape figures with the
    exposure inside them (its `measured` record has no exposure_rounds): a convolution reached from
    beyond the cache (here 2.76 MB against a 1 MB cache) gets a note; one calibrated since, or a
    network whose weights stay in the cache, does not."""
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    insp = inspect_model(save(model([conv], [vi("x", [1, 256, 14, 14])], [vi("y", None)],
                                    [weight("w", [256, 256, 3, 3])]), tmp_path, "c.onnx"))
    old = _calibrated_like().with_overrides(conv_weight_exposure=0.5, measured={"cpu": "x", "threads": 2})
    notes = analyze(insp, old, Settings(), with_fixes=False).notes
    assert any("may pay it twice" in n and "1 convolution layer " in n for n in notes)
    settled = old.with_overrides(measured={"cpu": "x", "threads": 2, "exposure_rounds": 2})
    assert not any("pay it twice" in n for n in analyze(insp, settled, Settings(), with_fixes=False).notes)
    roomy = _calibrated_like(onchip_mb=16).with_overrides(conv_weight_exposure=0.5, measured={"cpu": "x"})
    assert not any("pay it twice" in n for n in analyze(insp, roomy, Settings(), with_fixes=False).notes)


def test_identical_layers_read_from_different_distances_are_scored_apart(tmp_path):
    """Two Adds of [1, 100000] fp32 (400 KB a tensor), the same workload: the first reads `a` written one
    400 KB tensor before (reach 800 KB, inside its own 1.2 MB working set), the second reads `s` written
    three tensors before (reach 1.6 MB): only the second pays a far read. Scoring copies the cost of
    layers identical in everything it reads, and the distances are part of that."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ra"), helper.make_node("Relu", ["a"], ["t0"], name="r0"),
             helper.make_node("Add", ["a", "t0"], ["s"], name="add1")]
    prev = "s"
    for i in range(1, 4):
        nodes.append(helper.make_node("Relu", [prev], [f"t{i}"], name=f"r{i}"))
        prev = f"t{i}"
    nodes.append(helper.make_node("Add", ["s", prev], ["y"], name="add2"))
    insp = inspect_model(save(model(nodes, [vi("x", [1, 100_000])], [vi("y", None)]), tmp_path, "two.onnx"))
    hw = _calibrated_like()
    by = {c.name: c for c in analyze(insp, hw, Settings(), with_fixes=False).score.layers}
    one, two = by["add1"], by["add2"]
    assert one.layer.workload == two.layer.workload
    assert sorted(one.layer.reads) == [(400_000, 0), (400_000, 400_000)]
    assert sorted(two.layer.reads) == [(400_000, 0), (400_000, 1_200_000)]
    ws = 1_200_000
    assert far_read_time(one.layer.reads, ws, hw) == 0.0
    extra = 400_000 / bandwidth_for(1_600_000, hw) - 400_000 / bandwidth_for(ws, hw)
    assert two.t_memory - one.t_memory == pytest.approx(extra)


def test_cold_start_time_by_hand():
    """What a first convolution touches first in an inference comes from DRAM instead of the cache, in
    proportion to how far the network's reach lies past the cache. Profile: 100 GB/s up to 1 MB, DRAM
    20 GB/s, cache 1 MB. 0.5 MB in a 0.4 MB working set (100 GB/s): 0.5e6 x (1/20e9 - 1/100e9) = 20 us
    at a reach of 4 MB (all beyond the cache); 15 us at 1.414 MB (log2(2 x 1.414) / 2 = 0.75 beyond);
    nothing at 0.4 MB (under half the cache), nor for a working set already at DRAM's pace."""
    from dnnperf.rules import cold_start_time

    hw = _calibrated_like()
    assert cold_start_time(500_000, 400_000, 4_000_000, hw) == pytest.approx(20e-6)
    assert cold_start_time(500_000, 400_000, 1_414_214, hw) == pytest.approx(15e-6, rel=1e-4)
    assert cold_start_time(500_000, 400_000, 400_000, hw) == 0.0
    assert cold_start_time(500_000, 5_000_000, 4_000_000, hw) == 0.0
    assert cold_start_time(500_000, 400_000, 0, hw) == 0.0  # no reach known
    assert cold_start_time(500_000, 400_000, 4_000_000, load_profile("cpu-avx2")) == 0.0  # no curve


def _stem_net(tmp_path, wide: int, tag: str) -> str:
    """x [1, 3, 32, 32] -> a 3 -> 16 3 x 3 stem (a) and a second one on x (b) -> a 1 x 1 convolution
    of a's output to ``wide`` channels (its filters set how far the network reaches)."""
    nodes = [helper.make_node("Conv", ["x", "wa"], ["a"], name="stem", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "wb"], ["b"], name="twin", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "wc"], ["c"], name="body")]
    inits = [weight("wa", [16, 3, 3, 3]), weight("wb", [16, 3, 3, 3]), weight("wc", [wide, 16, 1, 1])]
    return save(model(nodes, [vi("x", [1, 3, 32, 32])], [vi("b", None), vi("c", None)], inits), tmp_path, f"stem_{tag}.onnx")


def test_cold_start_bytes_by_hand(tmp_path):
    """The image [1, 3, 32, 32] fp32 (12,288 bytes) goes to its first reader, each image convolution
    writes its own 16 x 32 x 32 output (65,536 bytes): stem 77,824, twin 65,536; the body reads no
    model input."""
    from dnnperf.reuse import cold_start_bytes

    insp = inspect_model(_stem_net(tmp_path, 16, "bytes"))
    cold = cold_start_bytes(insp, build_layers(insp), lambda la: la.workload.family == "conv")
    assert cold == {"stem": 12_288 + 65_536, "twin": 65_536}


def test_a_first_convolution_waits_for_its_cold_image_only_when_the_network_reaches_past_the_cache(tmp_path,
                                                                                                   monkeypatch):
    """The same stem in a network that stays within half the cache (a 16-filter body) and in one whose
    4,096 x 16 body filters (256 KB) and 16.8 MB output reach past it (cache 1 MB): the second stem
    takes ``cold_start_time`` of its 77,824 cold bytes longer than it does without the rule, booked as
    memory, and so does the twin for its 65,536; the first stem and the body do not move. A profile
    without a bandwidth curve prices nothing."""
    import dnnperf.rules as rules_mod
    from dnnperf.rules import cold_start_time

    d = yaml.safe_load(open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml"), encoding="utf-8"))
    d["memory"] = {"dram_gbs": 20, "onchip_mb": 1, "bandwidth_curve": {0.5: 100, 1: 100, 4: 20}}
    d["cpu_layout"] = {"block": 16, "grouped_min_width": 16, "channel_alignment": 4, "pool_alignment": 16}
    hw = profile_from_dict(d, "x")

    def costs(wide, profile):
        rep = analyze(inspect_model(_stem_net(tmp_path, wide, str(wide))), profile, Settings(), with_fixes=False)
        return {c.name: c for c in rep.score.layers}, rep.score.weight_reach

    with_rule = {wide: costs(wide, hw) for wide in (16, 4096)}
    monkeypatch.setattr(rules_mod, "cold_start_time", lambda *a: 0.0)
    without = {wide: costs(wide, hw) for wide in (16, 4096)}
    monkeypatch.undo()
    (small, reach_small), (big, reach_big) = with_rule[16], with_rule[4096]
    assert reach_small < 500_000 < 2_000_000 < reach_big
    for name in ("stem", "body", "twin"):
        assert small[name].time_s == without[16][0][name].time_s
    for name, cold in (("stem", 77_824), ("twin", 65_536)):
        w = big[name].layer.workload
        extra = cold_start_time(cold, w.act_bytes_read + w.bytes_written, reach_big, hw)
        assert extra > 0
        assert big[name].time_s - without[4096][0][name].time_s == pytest.approx(extra, rel=1e-9)
        assert big[name].losses["memory"] - without[4096][0][name].losses["memory"] == pytest.approx(extra, rel=1e-9)
    assert big["body"].time_s == without[4096][0]["body"].time_s
    plain = load_profile("cpu-avx2")
    a = costs(16, plain)[0]["stem"].time_s
    monkeypatch.setattr(rules_mod, "cold_start_time", lambda *a: 1.0)  # never asked without a curve
    assert costs(4096, plain)[0]["stem"].time_s == pytest.approx(a) and costs(16, plain)[0]["stem"].time_s == a
