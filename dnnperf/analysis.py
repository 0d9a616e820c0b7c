"""Score workloads against a hardware profile: per-layer time, loss breakdown and limiting cause.

Per layer (a node, or a fused group with ``fusion='typical'``):

    t_ideal      ops at the device's quoted (headline) peak
    + specialization  the unit that really runs it (vector vs matrix, precision) and tile padding
    + parallelism     lanes left idle when the layer has fewer outputs than the device has lanes,
                      or too little work per output to keep a lane busy (profile ops_per_item)
    + thermal         sustained clock below boost
    = t_compute
    + memory          max(0, t_memory - t_compute)  (overlapped; ops with no fast kernel: no overlap,
                      the hidden part is reported as overlap)
    + unoptimized     the kernel reaching only a fraction of its roof: calibrated per-family/op
                      efficiency, or unoptimized_efficiency for ops with no fast kernel
    + heterogeneity   extra time when the op falls back off the accelerator (incl. transfers)
    + launch_overhead per-kernel launch cost
    = layer time

Memory traffic: each tensor crosses DRAM once per layer (perfect reuse inside a layer, none between
layers, so fusion is what removes traffic). Profiles with ``activations_onchip`` (TPU v1's unified
buffer) count only weight bytes against DRAM. Profiles with an on-chip bandwidth (calibrated CPUs)
read a layer's activations at that rate when they fit on chip (they were just written), and its
weights too when all of the model's weights fit in an eighth of it; otherwise weights stream from
DRAM once per inference. Model time = sum of layers + host->device input
transfer, unless the input is prefetched (overlapped).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from dnnperf import rules
from dnnperf.ir import DTYPE_BITS
from dnnperf.hardware import HardwareProfile
from dnnperf.workload import DTYPE_OF_PRECISION, FREE_FAMILIES, PRECISION_OF_DTYPE, Workload

CAUSES = ("compute", "memory", "parallelism", "input_io", "overlap", "specialization", "unoptimized",
          "launch_overhead", "heterogeneity", "thermal")
LOSS_KEYS = ("memory", "parallelism", "specialization", "unoptimized", "thermal", "heterogeneity",
             "launch_overhead", "input_io", "overlap")


@dataclass
class Layer:
    """A costed unit of work before scoring: one node, or a fused group of nodes."""

    name: str
    op_type: str
    nodes: tuple[str, ...]
    workload: Workload
    output_shape: tuple[int, ...] | None
    fusable_into: str | None = None  # producer layer name a typical runtime would fuse this into
    saved_bytes_if_fused: int = 0


@dataclass
class LayerCost:
    layer: Layer
    unit: str
    precision: str
    tile_efficiency: float
    occupancy: float
    t_ideal: float
    t_compute: float
    t_memory: float
    t_launch: float
    time_s: float
    losses: dict[str, float]
    cause: str
    fixes: list = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.layer.name

    @property
    def lost_s(self) -> float:
        return self.time_s - self.t_ideal


@dataclass
class Settings:
    batch: int | None = None
    precision: str | None = None  # None: the model's own dtypes
    fusion: str = "none"  # none | typical
    overlap_input: bool = False

    def as_dict(self) -> dict:
        return {"batch": self.batch, "precision": self.precision or "model", "fusion": self.fusion,
                "overlap_input": self.overlap_input}


@dataclass
class Score:
    hw: HardwareProfile
    settings: Settings
    layers: list[LayerCost]
    input_bytes: int
    input_transfer_s: float
    totals: dict
    losses: dict[str, float]


def precision_of(w: Workload) -> str:
    return PRECISION_OF_DTYPE.get(w.dtype, "fp32")


def with_precision(w: Workload, precision: str) -> Workload:
    """What-if: run this workload in ``precision``; float/int8 tensors scale their bytes."""
    if w.family in FREE_FAMILIES or w.dtype in ("int64", "int32", "bool", "string"):
        return w
    new_dtype = DTYPE_OF_PRECISION[precision]
    old_bits = DTYPE_BITS.get(w.dtype, 32)
    new_bits = DTYPE_BITS.get(new_dtype, 32)

    def sc(b: int) -> int:
        return (b * new_bits) // old_bits

    return replace(w, dtype=new_dtype, act_bytes_read=sc(w.act_bytes_read), weight_bytes=sc(w.weight_bytes),
                   bytes_written=sc(w.bytes_written))


def score_layer(layer: Layer, hw: HardwareProfile, precision: str | None = None,
                weights_resident: bool = False) -> LayerCost:
    """Time and loss breakdown of one layer on ``hw`` (see the module docstring)."""
    w = layer.workload
    prec = precision or precision_of(w)
    if precision == "tf32":
        prec = "tf32" if w.is_matrix else "fp32"
    losses = {k: 0.0 for k in LOSS_KEYS}
    if w.family in FREE_FAMILIES:
        return LayerCost(layer, "-", prec, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, losses, "compute")
    ops = w.ops
    unit, run_prec, rate, tile_eff = rules.pick_unit(hw, prec, w.is_matrix, w.gemm)
    ideal_rate = max(hw.headline_rate, rate)
    t_ideal = ops / ideal_rate
    t_unit = ops / rate
    t_tile = t_unit / tile_eff
    occ = rules.occupancy(w.parallel_work, hw.lanes)
    t_par = t_tile / (occ * rules.work_per_item_fit(ops, w.parallel_work, hw.ops_per_item))
    unopt = w.family == "control" or layer.op_type in hw.unoptimized_ops
    t_compute = t_par / hw.sustained_clock_fraction
    losses["specialization"] = t_tile - t_ideal
    losses["parallelism"] = t_par - t_tile
    losses["thermal"] = t_compute - t_par
    t_mem = rules.memory_time(w.act_bytes_read + w.bytes_written, w.weight_bytes, hw, weights_resident)
    losses["memory"] = max(0.0, t_mem - t_compute)
    if unopt:
        # no fast kernel: traffic and math run back to back, at a fraction of the roof
        losses["overlap"] = min(t_compute, t_mem)
        t_roof = t_compute + t_mem
        eff = hw.unoptimized_efficiency
    else:
        # roofline: the shorter of math and traffic hides behind the longer, as far as the device
        # overlaps them (memory_overlap; 1 on GPUs/TPUs, measured on calibrated CPUs)
        exposed = (1.0 - hw.memory_overlap) * min(t_compute, t_mem)
        losses["overlap"] = exposed
        t_roof = max(t_compute, t_mem) + exposed
        eff = family_efficiency(layer, hw)
    t_exec = t_roof / eff
    losses["unoptimized"] = t_exec - t_roof
    unit_name = unit.name
    if hw.accelerator_families is not None and hw.fallback is not None and w.family not in hw.accelerator_families:
        # the accelerator cannot run this family: it runs on the fallback unit and its activations
        # cross the link both ways; all of its excess over the ideal time is heterogeneity
        fb = hw.fallback
        fb_rate = (fb.peak_tops.get(prec) or fb.peak_tops.get("fp32") or max(fb.peak_tops.values())) * 1e12
        t_exec = max(ops / fb_rate, w.bytes_total / (fb.dram_gbs * 1e9))
        t_exec += rules.transfer_time(w.act_bytes_read + w.bytes_written, fb.transfer_gbs)
        losses = {k: 0.0 for k in LOSS_KEYS}
        losses["heterogeneity"] = max(0.0, t_exec - t_ideal)
        t_exec = t_ideal + losses["heterogeneity"]
        unit_name, tile_eff, occ, t_compute, t_mem = fb.name, 1.0, 1.0, ops / fb_rate, w.bytes_total / (fb.dram_gbs * 1e9)
    t_launch = rules.launch_time(w.launches, hw.launch_overhead_us)
    losses["launch_overhead"] = t_launch
    time_s = t_exec + t_launch
    cause = classify(losses, t_ideal, w.is_matrix)
    return LayerCost(layer, unit_name, run_prec, tile_eff, occ, t_ideal, t_compute, t_mem, t_launch, time_s,
                     losses, cause)


def family_efficiency(layer: Layer, hw: HardwareProfile) -> float:
    """Calibrated fraction of the roof: the family's (thin GEMMs lower for matrix work); an op-type
    figure (e.g. Pow) replaces it for a single op. A fused group runs at its anchor's efficiency:
    its epilogue ops ride along in registers."""
    w = layer.workload
    eff = hw.efficiency.get(w.family, 1.0)
    if hw.matrix_m_efficiency and w.is_matrix and w.gemm is not None:
        g = w.gemm
        eff = min(eff, rules.interp_log(min(g.m, g.n, g.k), hw.matrix_m_efficiency))
    if len(layer.nodes) == 1 and layer.op_type in hw.op_efficiency:
        return hw.op_efficiency[layer.op_type]
    return eff


def classify(losses: dict[str, float], t_ideal: float, is_matrix: bool) -> str:
    """The limiting cause: the largest loss, or 'compute' when time at peak dominates.

    Launch overhead is the cause only for non-matrix layers: a starved conv or matmul is first a
    parallelism problem (bigger batch or wider layers amortise the launch as well), while a tiny
    elementwise kernel is the textbook launch-bound case (fusion removes it).
    """
    cands = {k: v for k, v in losses.items() if k not in ("input_io",)}
    if is_matrix:
        cands.pop("launch_overhead", None)
    best = max(cands, key=lambda k: (cands[k], k))
    if cands[best] <= t_ideal:
        return "compute"
    return best


def score(layers: list[Layer], hw: HardwareProfile, settings: Settings, input_bytes: int) -> Score:
    weights = sum(l.workload.weight_bytes for l in layers)
    resident = bool(hw.onchip_mb) and weights <= hw.onchip_mb * 1e6 / 8
    costs = [score_layer(l, hw, settings.precision, resident) for l in layers]
    compute_total = sum(c.time_s for c in costs)
    t_in = rules.transfer_time(input_bytes, hw.host_link_gbs)
    losses = {k: sum(c.losses[k] for c in costs) for k in LOSS_KEYS}
    hidden = min(t_in, compute_total)  # what prefetching the next input hides behind compute
    losses["input_io"] = t_in - hidden
    if settings.overlap_input:
        in_added = t_in - hidden
    else:
        in_added = t_in
        losses["overlap"] += hidden
    latency = compute_total + in_added
    ops = sum(c.layer.workload.ops for c in costs)
    macs = sum(c.layer.workload.macs for c in costs)
    nbytes = sum(c.layer.workload.bytes_total for c in costs)
    t_ideal = sum(c.t_ideal for c in costs)
    achieved = ops / latency / 1e12 if latency > 0 else 0.0
    totals = {
        "macs": macs,
        "ops": ops,
        "other_ops": ops - 2 * macs,
        "bytes": nbytes,
        "weight_bytes": sum(c.layer.workload.weight_bytes for c in costs),
        "launches": sum(c.layer.workload.launches for c in costs),
        "latency_s": latency,
        "ideal_s": t_ideal,
        "input_transfer_s": t_in,
        "achieved_tops": achieved,
        "peak_tops": hw.headline_tops,
        "peak_precision": hw.headline_precision,
        "fraction_of_peak": achieved / hw.headline_tops if hw.headline_tops else 0.0,
        "throughput_per_s": (settings.batch or 1) / latency if latency > 0 else 0.0,
        "mean_occupancy": _weighted_occupancy(costs),
    }
    return Score(hw, settings, costs, input_bytes, t_in, totals, losses)


def _weighted_occupancy(costs: list[LayerCost]) -> float:
    tot = sum(c.time_s for c in costs if c.layer.workload.family not in FREE_FAMILIES)
    if tot <= 0:
        return 1.0
    return sum(c.occupancy * c.time_s for c in costs if c.layer.workload.family not in FREE_FAMILIES) / tot


def top_cause(sc: Score) -> str:
    """The model-level cause: the largest loss (or compute when ideal time dominates)."""
    best = max(sc.losses, key=lambda k: (sc.losses[k], k))
    if sc.losses[best] <= sc.totals["ideal_s"]:
        return "compute"
    return best
