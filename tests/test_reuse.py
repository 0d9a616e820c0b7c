"""Reads priced by how far back they were written (dnnperf.reuse, rules.far_read_time), and a standing
BatchNormalization streaming at the bandwidth on a calibrated CPU."""

from __future__ import annotations

import os

import pytest
import yaml
from onnx import helper

from dnnperf.api import analyze, build_layers, inspect_model
from dnnperf.hardware import load_profile, profile_from_dict
from dnnperf.reuse import reuse_reads
from dnnperf.rules import bandwidth_for, far_read_time, memory_time
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
