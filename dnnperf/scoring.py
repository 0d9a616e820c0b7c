"""Score workloads against a hardware profile: per-layer time, loss breakdown and limiting cause.

A layer (one node, or a fused group with ``fusion='typical'``) starts at its ideal time, the ops at
the device's quoted (headline) peak, and passes through an ordered table of loss steps. Each step
is a small function that returns the layer's time after its rule; the increase is booked under the
step's cause, so the losses always add up to the layer time exactly:

    specialization   the unit that really runs it (vector vs matrix, precision) and tile padding
    parallelism      lanes left idle when the layer has fewer outputs than the device has lanes,
                     or too little work per output to keep a lane busy (profile ops_per_item)
    thermal          sustained clock below boost                            -> t_compute
    memory           max(0, t_memory - t_compute): traffic the math does not hide (roofline); on a
                     calibrated CPU also what a first convolution touches first in an inference
    overlap          the part of the shorter side a device does not hide (memory_overlap < 1, or a
                     calibrated CPU's product_overlap for matrix products; ops with no fast kernel
                     run memory and math back to back)
    unoptimized      the kernel reaching only a fraction of its roof (calibrated efficiencies,
                     or unoptimized_efficiency for ops with no fast kernel)
    launch_overhead  per-kernel launch cost

Ops the accelerator cannot run take ``FALLBACK_STEPS`` instead (heterogeneity, then launch).
Adding a rule is three edits: the function, its row in the step table, its cause in ``vocab``.

Memory traffic: each tensor crosses DRAM once per layer (perfect reuse inside a layer, none between
layers, so fusion is what removes traffic). Profiles with ``activations_onchip`` (TPU v1's unified
buffer) count only weight bytes against DRAM. Profiles with an on-chip bandwidth (calibrated CPUs)
read a layer's activations at that rate when they fit on chip (they were just written), and its
weights too when all of the model's weights fit in an eighth of it; otherwise weights stream from
DRAM once per inference. Model time = sum of layers + host->device input transfer, unless the
input is prefetched (overlapped).

Why one module this long: the step table and every step function must be read together (the
losses of one step are the input of the next); the GPU steps share the same state object. Which
calibrated figure a layer reads, and the CPU runtime's extra passes, live in ``dnnperf.efficiency``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from math import ceil
from typing import Callable

from dnnperf import rules
from dnnperf.efficiency import (broadcast_span_time, depthwise_block_fill, epilogue_pass,
                                family_efficiency, plain_depthwise, scalar_loop_time, serial_curve, subnormal_time,
                                thread_split, transpose_calls_time)
from dnnperf.hardware import HardwareProfile, Unit
from dnnperf.ir import DTYPE_BITS, INDEX_DTYPES
from dnnperf.vocab import (ADDED_LOOPS, CPU_VIEW_KERNELS, FREE_FAMILIES, HOST_SHAPE_FAMILIES, LOSS_KEYS, NBITS_KERNELS,
                           RUNTIME_KERNELS, TRANSPOSE_PLANES, TRANSPOSE_RESHAPE, Cause)
from dnnperf.workload import DTYPE_OF_PRECISION, PRECISION_OF_DTYPE, Workload

CAUSES = tuple(c.value for c in Cause)


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
    # (bytes, reuse distance in bytes) of the activations it reads from other layers, for profiles that
    # price reads by how far back they were written (calibrated CPUs: dnnperf.reuse)
    reads: tuple[tuple[int, int], ...] = ()
    blocked: bool = False  # runs in a CPU runtime's blocked layout (set by dnnperf.layout.add_reorders)
    # bytes it touches first in an inference, after the whole network ran since (calibrated CPUs: the
    # image and the output buffer of a first convolution, dnnperf.reuse.cold_start_bytes)
    cold_bytes: int = 0


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
    algorithm: str = ""  # how a GPU library runs it: gemm, implicit_gemm, winograd(_fused), fft, direct...
    plan: object = None  # the GPU tile plan (dnnperf.gpu.Plan) of a matrix layer
    t_device: float = 0.0  # device time (GPUs: the host's launch cost overlaps it)
    kernels: int = 0  # device kernels it runs (GPUs: its launches, library reorders and split-K reductions, a bias)
    clock: float = 1.0  # the share of the boost clock its math ran at (the thermal step)
    padded_from: int = 0  # a convolution TensorRT runs with its input channels padded: how many it has
    t_bias: float = 0.0  # traffic time of the separate bias kernel a framework runs after a convolution

    @property
    def name(self) -> str:
        return self.layer.name

    @property
    def lost_s(self) -> float:
        return self.time_s - self.t_ideal


RUNTIMES = ("eager", "graph", "tensorrt")


@dataclass(frozen=True)
class Settings:
    batch: int | None = None
    precision: str | None = None  # None: the model's own dtypes
    fusion: str = "none"  # none | typical
    overlap_input: bool = False
    runtime: str = "eager"  # eager | graph | tensorrt (GPUs: who pays per kernel; see README)

    def as_dict(self) -> dict:
        return {"batch": self.batch, "precision": self.precision or "model", "fusion": self.fusion,
                "overlap_input": self.overlap_input, "runtime": self.runtime}


@dataclass
class Score:
    hw: HardwareProfile
    settings: Settings
    layers: list[LayerCost]
    input_bytes: int
    input_transfer_s: float
    totals: dict
    losses: dict[str, float]
    footprint: int = 0  # bytes the network reads and writes per inference (weights + activations written)
    weights_resident: bool = False  # whether its weights stay on chip between inferences
    weight_reach: int = 0  # distinct bytes one inference touches (weights + activation buffers); 0: not priced
    arena: int = 0  # the activation buffers' share of weight_reach (dnnperf.reuse.arena_bytes)
    repeated: int = 0  # weight bytes the layers' sum counts twice (shared initializers), counted once
    io: tuple[int, int] = (0, 0)  # the graph's inputs and outputs (a CPU runtime's call cost: rules.call_time)


def precision_of(w: Workload) -> str:
    return PRECISION_OF_DTYPE.get(w.dtype, "fp32")


def tf32_by_default(hw: HardwareProfile) -> bool:
    """Whether the runtimes that run an ONNX file on ``hw`` compute its fp32 matrix layers in TF32
    unless told not to: a GPU whose matrix unit has a tf32 mode (Ampere on). ONNX Runtime's CUDA
    provider (``use_tf32``, on by default), TensorRT (its builder's TF32 flag, set by default) and
    PyTorch's cuDNN convolutions (``torch.backends.cudnn.allow_tf32``) all do; PyTorch's own fp32
    matrix products do not (``torch.backends.cuda.matmul.allow_tf32`` is off): ``-p fp32`` costs
    strict fp32."""
    if hw.kind != "gpu":
        return False
    for u in hw.units:
        if "tf32" in u.peak_tops and "matrix" in u.serves:
            return True
    return False


def effective_precision(w: Workload, hw: HardwareProfile, precision: str | None) -> str:
    """The precision ``w`` runs in on ``hw`` when ``precision`` (the -p what-if; None: the model's
    own dtypes) is asked for: tf32 is a matrix mode, so other layers stay fp32; with the model's
    own dtypes, fp32 matrix layers take tf32 where the runtimes do so by default (tf32_by_default)."""
    if precision is None:
        prec = precision_of(w)
        if prec == "fp32" and w.is_matrix and tf32_by_default(hw):
            return "tf32"
        return prec
    if precision == "tf32":
        return "tf32" if w.is_matrix else "fp32"
    return precision


def with_precision(w: Workload, precision: str) -> Workload:
    """What-if: run this workload in ``precision``; float/int8 tensors scale their bytes."""
    if w.family in FREE_FAMILIES or w.dtype in INDEX_DTYPES:
        return w
    new_dtype = DTYPE_OF_PRECISION[precision]
    old_bits = DTYPE_BITS.get(w.dtype, 32)
    if not old_bits:  # a sequence or map handle: its elements' bytes are counted where they are made
        return w
    new_bits = DTYPE_BITS.get(new_dtype, 32)

    # positional (dataclasses.replace is several times slower; a test pins the field order)
    return Workload(w.family, new_dtype, w.macs, w.other_ops, (w.act_bytes_read * new_bits) // old_bits,
                    (w.weight_bytes * new_bits) // old_bits, (w.bytes_written * new_bits) // old_bits,
                    w.parallel_work, w.gemm, w.launches, w.note, w.conv, w.row, w.pieces, w.subnormals, w.bias,
                    (w.step_reads * new_bits) // old_bits, w.kernel, w.taps,
                    w.operands if PRECISION_OF_DTYPE.get(new_dtype) == "int8" else "", w.loop_items,
                    (w.rereads * new_bits) // old_bits, w.parts, w.iterations, w.host_waits,
                    (w.weights_unread * new_bits) // old_bits)


# -- the loss steps ------------------------------------------------------------------------------


@dataclass
class LayerState:
    """One layer while it passes through the steps; ``t`` is its time so far."""

    layer: Layer
    w: Workload
    hw: HardwareProfile
    precision: str
    weights_resident: bool
    t: float = 0.0
    t_ideal: float = 0.0
    unit: Unit | None = None
    unit_name: str = "-"
    run_precision: str = ""
    rate: float = 0.0
    tile_eff: float = 1.0
    occupancy: float = 1.0
    split: float = 1.0  # share of its threads a blocked CPU convolution's static split keeps busy (thread_split)
    t_compute: float = 0.0
    t_memory: float = 0.0
    t_launch: float = 0.0
    unoptimized: bool = False
    lib: object = None  # GpuLibrary for GPU profiles
    algorithm: str = ""
    plan: object = None
    misaligned: bool = False
    stem: bool = False  # a convolution with fewer input channels than one tensor-core vector, on the stem kernels
    pad_fill: float = 1.0  # useful share of channels padded up to the tensor cores' vector (no profile `alignment`)
    block_fill: float = 1.0  # useful share of a blocked CPU depthwise layer's channels (efficiency.depthwise_block_fill)
    gain: float = 1.0  # the convolution algorithm's MAC reduction (Winograd)
    transforms: tuple = ()  # bytes of each tensor a non-fused Winograd's or an FFT's transforms write (_conv_algorithm)
    algorithms: tuple = ()  # the convolution algorithms the library could run it with (_conv_algorithm)
    force: str = ""  # the one this run takes
    runtime: str = "eager"
    t_device: float = 0.0
    kernels: int = 0
    footprint: int = 0  # bytes the whole network reads and writes per inference (weights + activations written)
    weight_reach: int = 0  # how far back a weight was last read (rules.memory_time); 0: from DRAM
    arena: int = 0  # the activation buffers within that reach (rules.weight_bandwidth)
    clock: float = 1.0  # the share of the boost clock the layer's math runs at
    t_bias: float = 0.0  # traffic time of a convolution's separate bias kernel (_gpu_bias_pass)
    t_before_bias: float = 0.0


def _unit_and_tile(s: LayerState) -> float:
    """The unit a runtime would use (fastest that serves the work and precision) and its tile padding."""
    unit, run_prec, rate, eff = rules.pick_unit(s.hw, s.precision, s.w.is_matrix, s.w.gemm)
    s.block_fill = depthwise_block_fill(s.w, s.hw)
    eff *= s.block_fill
    s.unit, s.unit_name, s.run_precision, s.rate, s.tile_eff = unit, unit.name, run_prec, rate, eff
    w = s.w
    if w.taps < 1.0 and s.hw.cpu_layout is not None and rules.blocked_conv(w, *s.hw.cpu_layout[:3]):
        # the blocked CPU kernel skips a dilated kernel's taps in the padding (ops.matrix._dilated_taps):
        # less work than the MAC count, a lower ideal (as Winograd's on a GPU)
        ops = 2 * w.macs * w.taps + w.other_ops
        s.t_ideal = min(s.t_ideal, ops / max(s.hw.headline_rate, rate))
        return ops / rate / eff
    # the tile's padding wastes multiply-accumulates; an epilogue (a bias, the activation fused into the
    # layer) works on the real outputs only, at the unit's rate
    return (2 * w.macs / eff + w.other_ops) / rate


def _parallelism(s: LayerState) -> float:
    """Idle lanes (work starvation) and too little work per lane; on a unit of systolic arrays, idle
    arrays and rows (``rules.systolic_occupancy``); on a calibrated CPU, threads a blocked
    convolution's static split leaves idle (``efficiency.thread_split``)."""
    arrays = rules.systolic_arrays(s.unit, s.w, s.run_precision)
    if arrays:
        s.occupancy = rules.systolic_occupancy(s.w.gemm, s.unit.tile[s.run_precision], arrays)
        return s.t / s.occupancy
    s.split = thread_split(s.layer, s.hw)
    s.occupancy = rules.occupancy(rules.padded_work(s.w.parallel_work, s.w.gemm, _tile_of(s)), s.hw.lanes) * s.split
    return s.t / (s.occupancy * rules.work_per_item_fit(s.w.ops, s.w.parallel_work, s.hw.ops_per_item))


def _tile_of(s: LayerState) -> tuple | None:
    """The tile a product runs on (None for work that is not a product)."""
    return s.unit.tile.get(s.run_precision) if s.unit is not None and s.w.is_matrix else None


def _thermal(s: LayerState) -> float:
    """Compute runs at the sustained clock, not the boost clock."""
    s.clock = s.hw.sustained_clock_fraction
    s.t_compute = s.t / s.clock
    return s.t_compute


def _memory(s: LayerState) -> float:
    """Roofline: traffic the math does not cover. On a profile with a bandwidth curve, an input
    written further back than the layer's own working set reaches is read at the curve's figure for
    its reuse distance (``Layer.reads``, ``dnnperf.reuse``). A kernel whose threads split its work
    unevenly (``_parallelism``'s split) moves its bytes at the busiest thread's pace."""
    # a blocked layer's padded channels (and their filters) are stored, read and written too
    s.t_memory = rules.memory_time(round((s.w.act_bytes_read + s.w.bytes_written) / s.block_fill),
                                   round(s.w.weight_bytes / s.block_fill), s.hw, s.weights_resident,
                                   s.weight_reach, s.arena)
    if s.w.step_reads:  # at the bandwidth of a working set that size (the cache's, where it fits)
        s.t_memory += _step_reads_time(s.w, rules.bandwidth_for(s.w.step_reads, s.hw))
    if s.layer.reads and rules.prices_far_reads(s.hw):
        s.t_memory += rules.far_read_time(s.layer.reads, s.w.act_bytes_read + s.w.bytes_written, s.hw)
    # the busiest thread of a statically split kernel also moves its larger share of the bytes alone
    # (a squeeze-excite convolution on one pixel is one unit of work: one thread reads all its filters)
    s.t_memory /= s.split
    s.unoptimized = s.w.family == "control" or s.layer.op_type in s.hw.unoptimized_ops
    return max(s.t, s.t_memory)


def _cold_start(s: LayerState) -> float:
    """What a network's first convolution touches first in an inference (``Layer.cold_bytes``: the
    image and its output buffer) comes from DRAM, and the kernel waits for it on top of its paced time
    (``rules.cold_start_time``; calibrated CPUs only)."""
    if not s.layer.cold_bytes or not rules.prices_far_reads(s.hw):
        return s.t
    return s.t + rules.cold_start_time(s.layer.cold_bytes, s.w.act_bytes_read + s.w.bytes_written, s.weight_reach,
                                       s.hw)


def _step_reads_time(w: Workload, bps: float) -> float:
    """A recurrent layer multiplies its recurrent weights once per step, each step waiting for the
    last: a thin product (M = batch) that streams the whole weight matrix again every step. Counted
    once in ``weight_bytes``; the other steps read it again at ``bps`` (the cache's where it fits)."""
    if not w.step_reads or w.launches <= 1 or bps <= 0:
        return 0.0
    return (w.launches - 1) * w.step_reads / bps


# convolutions whose weight reads from beyond the cache are partly exposed (rules.exposed_weight_time).
# Grouped ones stream their weights as plain ones do, with less math per weight to hide them behind:
# RegNetX-400MF's 16-wide 3 x 3 layers at 7 x 7 (230 KB of filters each) took 33-34 us in the network
# on the reference VM, estimated at 26.3 without the exposure (their weights' DRAM time: 4.9 us)
WEIGHT_EXPOSED = frozenset({"conv", "grouped_conv"})


def _overlap(s: LayerState, hidden: float | None = None) -> float:
    """The shorter of math and traffic hides behind the longer only as far as the device overlaps
    them (``hidden``, by default the profile's memory_overlap: 1 on GPUs/TPUs; a calibrated CPU measures
    it for matrix products, whose weights stream, as ``product_overlap``: the cold GEMM it is solved on
    says nothing of an activation read from the cache); ops with no fast kernel run them back to back.
    A convolution on a CPU whose weights do not stay in the cache between inferences (its network's
    weight reach, else its own bytes) also waits for part of them (``rules.exposed_weight_time``): a
    plain or grouped one (WEIGHT_EXPOSED); a depthwise one's filters are a few KB."""
    short = min(s.t_compute, s.t_memory)
    if s.unoptimized:
        return s.t + short
    conv_weights = hidden is None and s.w.family in WEIGHT_EXPOSED and not s.weights_resident
    if hidden is None:
        hidden = s.hw.product_overlap if s.hw.product_overlap is not None and s.w.family == "matmul" \
            else s.hw.memory_overlap
    t = s.t + (1.0 - hidden) * short
    if conv_weights:
        t += rules.exposed_weight_time(s.w.weight_bytes, s.weight_reach or s.footprint, short, s.hw)
    return t


def _efficiency(s: LayerState) -> float:
    """The calibrated pace of the kernel (``_paced``), and on a calibrated CPU the spans a broadcasting
    binary op loops over (``efficiency.broadcast_span_time``) and the runs or planes a Transpose copies one by
    one (``efficiency.transpose_calls_time``)."""
    t = _paced(s)
    return t + broadcast_span_time(s.layer, s.hw, t) + transpose_calls_time(s.layer, s.hw)


def _paced(s: LayerState) -> float:
    """The kernel reaches only a fraction of its roof. An elementwise kernel streaming a working set
    larger than the cache already runs at the measured bandwidth for that size (the profile's
    bandwidth curve was measured by such a kernel): only its math is slowed. So does a standing
    BatchNormalization (a per-channel scale and shift; the 'norm' figure it takes was measured on a
    row norm in cache: DenseNet's 56 x 56 pre-activations ran at 2.4-3.9x their estimate's speed).
    A runtime's own fused kernel (``RUNTIME_KERNELS``) keeps one pace per byte at any size; a softmax
    past the cache keeps its in-cache pace and waits for DRAM on top of it; a depthwise convolution a CPU's
    blocked layout refuses runs at its plain curve's figure of its math (``efficiency.plain_depthwise``). A
    kernel the runtime runs as one loop over its outputs (``loop_ns``: Resize) takes its calibrated time per
    output element."""
    w = s.w
    loop = s.hw.loop_ns.get(w.kernel) if w.kernel and w.kernel not in ADDED_LOOPS \
        and ("+" not in s.layer.op_type or w.kernel in NBITS_KERNELS) else None
    items = w.loop_items or w.parallel_work
    if loop and items and w.kernel in NBITS_KERNELS:
        # ONNX Runtime's 4-bit product: its calibrated time per weight holds the unpacking, the products of
        # a decoder's one row and the packed weights' stream from memory (timed past the cache), in place
        # of the float32 roofline and its exposed traffic (which put the byte-product path at 1.25-1.97x
        # its measured time); many rows (a prefill) are bound by the product's own math at the family's
        # pace instead
        math = s.t_compute * (2 * w.macs) / max(w.ops, 1)
        return max(items * loop * 1e-9, math / family_efficiency(s.layer, s.hw))
    if loop and items:
        # ONNX Runtime's Resize computes each output element's source and weights in a loop, 0.58
        # (nearest) and 0.82 ns (linear) per element on a 2-core EPYC VM from 0.17 to 1.4 M outputs:
        # 11-23x the roofline at the family's efficiency (deeplabv3's final 16x bilinear upsampling:
        # 48 us estimated, 984 measured)
        return max(s.t, items * loop * 1e-9)  # its outputs (a scatter: its updates; a Gather: its blocks)
    eff = s.hw.unoptimized_efficiency if s.unoptimized else family_efficiency(s.layer, s.hw)
    cache = (s.hw.onchip_mb or 0) * 1e6
    ws = w.act_bytes_read + w.bytes_written
    if w.family == "softmax" and ws > cache and not s.unoptimized and s.hw.bandwidth_curve and cache > 0:
        # a softmax past the cache keeps the pace it was calibrated at in cache (its exponentials, not
        # the bandwidth, set it: [12, 128, 128]), and its streaming from DRAM adds to that rather than
        # hiding under it. Dividing the DRAM time by the in-cache figure had ORT's [8, 1024, 1024] and
        # [8, 2048, 2048] softmaxes (67 and 268 MB read and written) at 1.99x and 2.15x their measured
        # 3.1 and 13.9 ms on a 2-core EPYC (19-22 GB/s, against 26 in cache); this sum: 1.04x and 0.93x.
        # Unseen: whisper-tiny's encoder, [6, 1500, 1500], 3.6x -> 1.3x
        return s.t_memory + max(s.t_compute, ws / rules.bandwidth_for(int(cache), s.hw)) / eff
    if s.layer.op_type in RUNTIME_KERNELS and not s.unoptimized and s.hw.bandwidth_curve and cache > 0:
        # a runtime's fused kernel (erf GELU, SiLU) evaluates a polynomial or a sigmoid per element
        # that the op count takes as one instruction: it runs at the pace it was calibrated at (its
        # roofline at the bandwidth of a working set that fills the cache, over its efficiency) whatever
        # its size, in cache or not; streaming from DRAM only bounds it from below. ORT 1.32's QuickGelu
        # (x86, AVX-512): 4.0-3.3 G elements/s from 0.1 to 0.75 M elements, where the bandwidth curve
        # differs 2x across those working sets
        return max(s.t, max(s.t_compute, ws / rules.bandwidth_for(int(cache), s.hw)) / eff)
    if not s.unoptimized and plain_depthwise(w, s.hw):
        # expanded one channel at a time: the taps it expands set its pace, not its bytes
        return s.t_compute / eff + epilogue_pass(s.layer, s.hw) + subnormal_time(s.w, s.hw)
    loop = None if s.unoptimized else scalar_loop_time(s.layer, s.hw, eff, s.t_compute)
    if loop is not None:  # math one element at a time: its pace per element at any size
        return max(s.t, loop)
    if _two_d_transpose(s) and not s.unoptimized and s.hw.bandwidth_curve and ws > cache > 0:
        return max(s.t, max(s.t_compute, ws / rules.bandwidth_for(int(cache), s.hw)) / eff)  # its in-cache pace
    streams = w.family in ("elementwise", "movement") or s.layer.op_type.split("+", 1)[0] == "BatchNormalization"
    if not s.unoptimized and s.hw.bandwidth_curve and streams \
            and s.t_memory > s.t_compute and ws > cache and not serial_curve(w, s.hw):
        return max(s.t, s.t_compute / eff)
    return s.t / eff + epilogue_pass(s.layer, s.hw) + subnormal_time(s.w, s.hw)


def _two_d_transpose(s: LayerState) -> bool:
    """A Transpose ONNX Runtime's CPU kernel runs as 2-D transposes of tiles (its last axis moves with one other:
    no loop kernel named), which a calibrated profile prices at its own figure (op_efficiency 'Transpose',
    timed on NCHW -> NHWC in cache). Past the cache it keeps the pace per element it has at the cache's edge
    (2-core EPYC VM, [C, 3136] -> [3136, C]: 0.2-0.5 ns an element from 0.8 to 25 MB read and written, in two
    rounds 2x apart); streaming it at the bandwidth curve's full speed there, as an elementwise kernel does,
    had [512, 3136] (12.8 MB) at a third of the estimate of [384, 3136]'s 9.6 MB per element, 0.13-0.32x its
    measured time."""
    return s.layer.op_type == "Transpose" and s.w.kernel in ("", TRANSPOSE_PLANES) and "Transpose" in s.hw.op_efficiency


def _launch(s: LayerState) -> float:
    """Host-side cost of submitting kernels (eager execution; fusion or graph capture removes it), and
    on calibrated CPUs each kernel's fixed time (the thread pool's fork and join, set-up). A CPU
    runtime runs a recurrent layer as one op: one dispatch, and each step's fixed time
    (``kernel_fixed_us`` "rnn" is calibrated that way, on one LSTM op of many steps)."""
    w = s.w
    if w.family == "rnn" and s.hw.kind == "cpu" and w.launches > 1:
        s.t_launch = rules.launch_time(1, s.hw.launch_overhead_us) \
            + rules.launch_time(w.launches, s.hw.kernel_fixed_us.get("rnn", 0.0))
    else:
        s.t_launch = rules.launch_time(w.launches, s.hw.kernel_us(w.family))
    return s.t + s.t_launch


def _fallback(s: LayerState) -> float:
    """The accelerator cannot run this family: the fallback unit runs it and its activations cross
    the link both ways; all of its excess over the ideal time is heterogeneity."""
    fb = s.hw.fallback
    w = s.w
    fb_rate = (fb.peak_tops.get(s.precision) or fb.peak_tops.get("fp32") or max(fb.peak_tops.values())) * 1e12
    s.unit_name, s.run_precision = fb.name, s.precision
    s.t_compute, s.t_memory = w.ops / fb_rate, w.bytes_total / (fb.dram_gbs * 1e9)
    t = max(s.t_compute, s.t_memory) + rules.transfer_time(w.act_bytes_read + w.bytes_written, fb.transfer_gbs)
    return max(s.t, t)


# -- GPU steps: how a kernel library runs the layer (dnnperf.gpu) ----------------------------------


_FLOAT_PRECISIONS = frozenset({"fp32", "tf32", "fp16", "bf16"})


def _is_conv(w: Workload) -> bool:
    return w.family in ("conv", "grouped_conv") and bool(w.conv)


def _stem_units(hw: HardwareProfile, lib) -> tuple:
    """The profile's CUDA-core units that run the library's stem precision (``stem_precision``)."""
    from dnnperf import gpu

    return tuple(u for u in hw.units if gpu.unit_class(u.name) == "cuda_cores" and lib.stem_precision in u.peak_tops)


def is_stem(w: Workload, hw: HardwareProfile, lib, precision: str) -> bool:
    """Whether the GPU library (``lib``, a ``dnnperf.gpu.GpuLibrary``) runs this layer on its stem kernels
    (``stem_precision``): an ungrouped float convolution with fewer input channels than one 16-byte fp16
    vector (an image's 1-4 channels), on a profile that has CUDA cores in that precision (a profile
    without them keeps the layer on the units it has, with no stem factor)."""
    return bool(lib.stem_precision) and w.family == "conv" and bool(w.conv) and precision in _FLOAT_PRECISIONS \
        and w.conv[0] < int(lib.misaligned_vector.get("fp16", 8)) and bool(_stem_units(hw, lib))


def tensor_core_convs(hw: HardwareProfile, lib, precision: str) -> bool:
    """Whether the GPU library (``lib``) runs ``precision`` convolutions on tensor cores and the profile has
    a tensor-core unit for that precision."""
    from dnnperf import gpu

    return precision in lib.tensor_core_precisions.get("conv", ()) and any(
        gpu.unit_class(u.name) == "tensor_cores" and precision in u.peak_tops for u in hw.units)


def padded_channels(w: Workload, hw: HardwareProfile, lib, precision: str) -> int:
    """The input channels an ungrouped convolution needs to fill the tensor cores' channel vector in
    ``precision`` (the unit's `alignment`, else the library's ``misaligned_vector``): its own count
    rounded up to whole vectors, or 0 when it already fills them or no tensor core runs the precision.
    Both TensorRT's padding (``_engine_padded``) and the padding fix use it."""
    from dnnperf import gpu

    if w.family != "conv" or not w.conv or precision not in lib.tensor_core_precisions.get("conv", ()):
        return 0
    tensor = [u for u in hw.units if gpu.unit_class(u.name) == "tensor_cores" and precision in u.peak_tops]
    vec = int(tensor[0].alignment.get(precision) or lib.misaligned_vector.get(precision, 0)) if tensor else 0
    cin = w.conv[0]
    return ceil(cin / vec) * vec if vec and cin % vec else 0


def _gpu_unit(s: LayerState) -> float:
    """The unit the library uses: tensor cores only for the precisions its GEMM / convolution
    kernels run there, and for convolutions only when the channels fit the unit's alignment (else
    the CUDA cores); the convolution algorithm it picks (Winograd does fewer multiplications than the
    MAC count, so it lowers the ideal time too)."""
    from dnnperf import gpu

    w, hw, lib = s.w, s.hw, s.lib
    conv = _is_conv(w)
    matrix = w.is_matrix and w.family != "depthwise_conv"
    allowed = lib.tensor_core_precisions.get("conv" if conv else "gemm", ())
    if s.runtime == "tensorrt" and not conv:
        # the engine runs its matrix products with its own kernels, in every precision its convolutions
        # take the tensor cores in (Turing's int8 IMMA, which cuBLAS 10's GEMM API left to DP4A)
        allowed = tuple(dict.fromkeys(allowed + lib.tensor_core_precisions.get("conv", ())))
    units = hw.units
    if w.is_matrix and s.precision not in allowed:
        units = tuple(u for u in units if gpu.unit_class(u.name) == "cuda_cores") or units
    # GEMM libraries pad any shape for the tensor cores; convolutions gather channel vectors that
    # must fill the unit's alignment (NHWC in multiples of 8 halves). A profile without a tensor-core
    # `alignment` gets the library's rule (cuDNN 7.6.3 on): an ungrouped convolution's channels are
    # padded up to whole 16-byte vectors (misaligned_vector), but fewer channels than one vector (the
    # 1-3 channel stems) do not take the tensor cores at all. Grouped kernels pack several groups into a
    # vector (H200: 4-channel groups of 32 at 0.6-1.25x on the tensor cores).
    vec = int(lib.misaligned_vector.get(s.precision, 0)) if w.family == "conv" else 0
    if conv and matrix and vec and w.conv[0] < vec:
        units = tuple(u for u in units if gpu.unit_class(u.name) != "tensor_cores" or u.alignment.get(s.precision))
    s.stem = is_stem(w, hw, lib, s.precision)
    if s.stem:  # the library's own kernels for narrow inputs, the same in every float precision
        units = _stem_units(hw, lib)
    elif conv and matrix and vec and s.precision in allowed and w.conv[0] >= vec and w.gemm is not None \
            and w.gemm.n >= vec:
        # channels that fill the tensor cores' vector on both sides keep a convolution on them however
        # few its output pixels (a squeeze-excitation block's one pixel): the tile pads the rows. Picked
        # by tile fit, one pixel went to the CUDA cores' fallback kernels, 3x slower than 49 pixels
        tc = tuple(u for u in units if gpu.unit_class(u.name) == "tensor_cores" and s.precision in u.peak_tops
                   and rules.aligned(w.gemm, u.alignment.get(s.precision)))
        units = tc or units
    unit, run_prec, rate, _ = rules.pick_from(units, lib.stem_precision if s.stem else s.precision, matrix, w.gemm,
                                              check_alignment=conv)
    s.unit, s.unit_name, s.run_precision, s.rate = unit, unit.name, run_prec, rate
    # a 16-bit or 8-bit convolution falls back to generic kernels that pad each pixel's channel vector;
    # a tf32 one to the plain fp32 kernels
    s.misaligned = matrix and conv and tensor_core_convs(hw, lib, s.precision) \
        and gpu.unit_class(unit.name) == "cuda_cores" and run_prec in lib.misaligned_vector
    if conv and vec and gpu.unit_class(unit.name) == "tensor_cores" and not unit.alignment.get(run_prec):
        s.pad_fill = w.conv[0] / (ceil(w.conv[0] / vec) * vec)  # the padding does full work
    s.algorithm = "elementwise" if not w.is_matrix else ("direct" if not matrix else "gemm")
    ops = w.ops
    if matrix and conv:
        s.algorithm = "implicit_gemm"
        cin, kh, kw, sh, sw, dilated = w.conv
        shape = s.layer.output_shape or ()
        if kh == kw and kh in (3, 5) and (sh, sw) == (1, 1) and not dilated and w.family == "conv" \
                and len(shape) == 4 and (lib.winograd.get(run_prec) or lib.fft.get(run_prec)) \
                and gpu.unit_class(unit.name) == "cuda_cores" and w.gemm is not None:
            _conv_algorithm(s, kh, shape)
            ops = 2 * w.macs / s.gain + w.other_ops
    # the ideal falls where the library does less work than the MAC count (Winograd) or runs a product
    # on a unit the generic pick refused for its alignment (an int8 product of 30 columns padded onto a
    # T4's tensor cores, faster than the fp16 headline)
    s.t_ideal = min(s.t_ideal, ops / max(hw.headline_rate, rate))
    return ops / rate


# how a GPU library runs a convolution's product (``_conv_algorithm``): each takes the convolution kernels'
# efficiency, and a framework adds a bias after any of them
_LIBRARY_CONV = frozenset({"implicit_gemm", "winograd_fused", "winograd", "fft"})


def _conv_algorithm(s: LayerState, r: int, shape: tuple) -> None:
    """The algorithms a library has for an r x r (3 or 5) stride-1 convolution on the CUDA cores, of
    those cuDNN has: ``score_layer`` times the layer with each and keeps the fastest (what
    benchmark-mode algorithm search picks; ties keep the plain one). This run takes ``s.force``
    (default the first, implicit GEMM) and lists the others in ``s.algorithms``.

    implicit_gemm    the product over gathered input patches: no saving.
    winograd_fused   F(2 x 2, 3 x 3) in one kernel (``winograd_fused_tile``), its transforms in
                     registers: 2.25x fewer multiplies (less where 2 x 2 tiles overhang the map), of
                     which the kernel keeps ``winograd_fused_efficiency``; spread over the SMs as the
                     implicit GEMM is.
    winograd         non-fused F(m x m, r x r) (``winograd_tile``): transform kernels around alpha
                     batched GEMMs of (images x tiles) x K x C, planned as GEMMs.
    fft              transforms of the whole padded map (at most ``fft_max`` points a side), one
                     complex product per frequency, input and output channel (batched complex GEMMs
                     of images x K x C, 4 real multiplies each), an inverse transform.

    The last two write each transformed tensor once for the next kernel to read
    (``gpu.winograd_transforms``, ``gpu.fft_transforms``), from the L2 when it fits there: that
    traffic grows with C + K while their products grow with C x K, so they pay off with many channels
    (FFT with wide filters: its saving grows with r^2). Sets ``s.algorithm``, ``s.gain`` (the multiply
    saving), ``s.plan`` and ``s.transforms`` (the tensors ``_gpu_transforms`` times)."""
    from dnnperf import gpu

    w, hw, lib, prec = s.w, s.hw, s.lib, s.run_precision
    images, k, out_h, out_w = shape
    c = w.conv[0]
    filters = s.runtime != "tensorrt"  # an engine transforms its filters when it is built
    m = lib.winograd_tile + 3 - r
    # each algorithm's saving first (cheap); only the one this run takes gets its plan and transforms
    gains = {"implicit_gemm": 1.0}
    tiling = gpu.winograd_tiling(m, r, out_h, out_w) if lib.winograd.get(prec) and m >= 1 else None
    points = gpu.fft_points(out_h, out_w, r) if lib.fft.get(prec) and max(out_h, out_w) + r - 1 <= lib.fft_max \
        else None
    if lib.winograd.get(prec) and r == 3 and lib.winograd_fused_tile:
        gains["winograd_fused"] = gpu.winograd_tiling(lib.winograd_fused_tile, 3, out_h, out_w)[2] \
            * lib.winograd_fused_efficiency
    if tiling:
        gains["winograd"] = tiling[2]
    if points:
        gains["fft"] = points[1]
    s.algorithms = tuple(a for a, gain in gains.items() if gain > 1.0 or a == "implicit_gemm")
    s.algorithm = s.force if s.force in s.algorithms else "implicit_gemm"
    s.gain, s.transforms = gains[s.algorithm], ()
    if s.algorithm in ("implicit_gemm", "winograd_fused"):  # the fused kernel spreads as the implicit GEMM
        s.plan = _matrix_plan(s, w.gemm)
        return
    if s.algorithm == "winograd":
        alpha, tiles, _gain = tiling
        product = (images * tiles, k, c, alpha)
        s.transforms = gpu.winograd_transforms(alpha, tiles, images, c, k, gpu.precision_bytes(prec), filters)
    else:
        product = (images, k, 4 * c, points[0])  # a complex product: four real ones
        s.transforms = gpu.fft_transforms(points[0], images, c, k, gpu.precision_bytes(prec), filters)
    s.plan = gpu.plan_gemm(*product, hw.compute_units, lib, gpu.unit_class(s.unit_name), s.rate,
                           gpu.clock_hz(hw, lib), prec, split_k=False, gemv=False)


def conv_algorithm_note(sc: Score) -> str | None:
    """The report's note on the convolutions costed with an algorithm other than implicit GEMM
    (``_conv_algorithm``): the estimate takes the fastest, as benchmark-mode search picks; a library's
    heuristic pick may be slower."""
    picked = [c.algorithm for c in sc.layers if c.algorithm in _LIBRARY_CONV - {"implicit_gemm"}]
    if not picked:
        return None
    counts = ", ".join(f"{picked.count(a)} {a}" for a in sorted(set(picked)))
    return (f"{len(picked)} convolution(s) costed with a faster algorithm than implicit GEMM ({counts}): the "
            "fastest of the library's, as benchmark-mode algorithm search picks (torch.backends.cudnn.benchmark, "
            "TensorRT's tactic timing); a library's heuristic pick may be slower")


def dp4a_conv_note(sc: Score) -> str | None:
    """The report's note on int8 convolutions a GPU runs on its CUDA cores' 4-way byte dot products
    (DP4A: Pascal GP10x and Volta have no int8 tensor cores). They are costed as every implicit-GEMM
    convolution is, at the DP4A rate, and no published time of such a kernel was used to set anything:
    the only ones (DeepBench's README, four cuDNN 7 int8 convolutions on Pascal GPUs,
    `bench/data/deepbench-pascal-readme.json`, a transfer check) took 1.4-15x their estimate. Four
    kernels do not make a constant, so the figure is marked optimistic instead of corrected
    (``tests/test_gpu.py`` keeps the quoted range true of the data)."""
    from dnnperf import gpu

    hw = sc.hw
    if hw.kind != "gpu" or tensor_core_convs(hw, gpu.library_of(hw), "int8"):
        return None  # int8 tensor cores: a CUDA-core int8 layer is the library's fitted fallback (a stem)
    names = [c.name for c in sc.layers if c.precision == "int8" and c.algorithm == "implicit_gemm"
             and gpu.unit_class(c.unit) == "cuda_cores"]
    if not names:
        return None
    engine = " (a TensorRT engine's own DP4A kernels were not checked either)" if sc.settings.runtime == "tensorrt" \
        else ""
    return (f"{len(names)} int8 convolution(s) run on the CUDA cores' DP4A dot products ({', '.join(names[:3])}"
            f"{', ...' if len(names) > 3 else ''}; {hw.name}'s library has no int8 tensor-core convolutions): costed "
            "like the other implicit-GEMM convolutions, which is likely optimistic — the only published times of "
            f"such kernels (DeepBench, cuDNN 7 on Pascal GPUs, 4 convolutions) took 1.4-15x their estimate{engine}; "
            "time them on the target")


def _transforms_time(s: LayerState, sizes: tuple) -> float:
    """Each transformed tensor written by one kernel and read by the next: from the L2 when it fits
    there (``_l2_room``), else through DRAM at the bandwidth non-streaming kernels reach."""
    return sum(2 * b / (_l2_bps(s) if b <= _l2_room(s) else _stream_bps(s, streaming=False)) for b in sizes)


def _matrix_plan(s: LayerState, g, steps: int = 1):
    """The library's tile plan (``gpu.plan_gemm``) of a matrix layer's product ``g`` as its algorithm
    runs it: GEMM kernels, or convolution kernels (their own tiles and K-loop step, split-K where the
    library splits convolutions)."""
    from dnnperf import gpu

    w, hw = s.w, s.hw
    gemm = s.algorithm == "gemm"
    return gpu.plan_gemm(g.m, g.n, g.k, g.count // steps, hw.compute_units, s.lib, gpu.unit_class(s.unit_name),
                         s.rate, gpu.clock_hz(hw, s.lib), s.run_precision,
                         split_k=(s.run_precision in s.lib.split_k_precisions if gemm else
                                  s.lib.conv_split_k and s.run_precision in s.lib.conv_split_k_precisions),
                         # attention over a cache reads it with matrix-vector kernels in any precision
                         # (decode's one query row: TensorRT-LLM's and FlashDecoding's kernels), fused or
                         # spelled as products of two computed tensors (scores, then context)
                         gemv=("any" if _reads_computed(w) else True) if gemm else False,
                         tiles=None if gemm else s.lib.conv_tiles.get(gpu.unit_class(s.unit_name)),
                         step_cycles=s.lib.conv_k_step_cycles if not gemm and not _pointwise(w) else None)


def _gpu_waves(s: LayerState) -> float:
    """Tiles in waves over the SMs (tile and wave quantization, split-K, the K loop's latency, the
    tile's L2 feed) for matrix work; lanes for the rest. A convolution run by Winograd or FFT keeps
    the plan its algorithm was picked with (``_conv_algorithm``): the fused Winograd kernel's is the
    implicit GEMM's with fewer multiplies, the others' that of their batched GEMMs (their work
    already reduced)."""
    w = s.w
    if (s.algorithm == "gemm" or s.algorithm in _LIBRARY_CONV) and w.gemm is not None:
        g = w.gemm
        # a recurrent layer's steps run one after the other (each needs the last one's state): the
        # library plans one step's product (the directions side by side) and runs it once per step
        steps = w.launches if w.family == "rnn" and w.launches > 1 and g.count % w.launches == 0 else 1
        if s.algorithm in ("gemm", "implicit_gemm"):
            s.plan = _matrix_plan(s, g, steps)
        t = steps * s.plan.seconds / (1.0 if s.transforms else s.gain) + 2 * w.other_ops / s.rate
        s.occupancy = min(1.0, s.t / t) if t > 0 else 1.0
        s.tile_eff = s.plan.tile_eff
        return max(s.t, t)
    return _parallelism(s)


def _reads_computed(w: Workload) -> bool:
    """Attention, or a product of two computed tensors (no weight operand: attention's scores and
    context spelled as MatMuls)."""
    return w.family == "attention" or (w.family == "matmul" and w.weight_bytes == 0)


def _pointwise(w: Workload) -> bool:
    """A 1 x 1 convolution at stride 1: its input is already the product's matrix (no patches to
    gather), so the library streams it like a GEMM operand."""
    return _is_conv(w) and tuple(w.conv[1:5]) == (1, 1, 1, 1) and not w.conv[5]


def _gpu_kernel_eff(s: LayerState, issue: bool = True) -> float:
    """The fraction of the unit's rate the library's kernels reach: large-kernel efficiency, the
    implicit-GEMM gather of convolutions, for misaligned channels a generic kernel that also pads each
    pixel's channel vector, and (``issue``) the FP32 slots a shared datapath gives to INT32 work
    (``_fp32_issue``; the power model leaves it out: that work draws power as FP32 work would)."""
    from dnnperf import gpu

    lib, w = s.lib, s.w
    if s.algorithm == "elementwise":
        return 1.0
    uc = gpu.unit_class(s.unit_name)
    eff = float(lib.library_efficiency.get(f"{uc}:{s.run_precision}",
                                           lib.library_efficiency.get(uc, lib.library_efficiency.get("cuda_cores", 0.9))))
    if s.algorithm in _LIBRARY_CONV:
        eff *= lib.conv_efficiency
    if s.algorithm == "gemm" and uc == "tensor_cores" and w.gemm is not None:
        eff *= gpu.gemm_misaligned_factor(lib, w.gemm.n, w.gemm.k, s.run_precision,  # narrower loads (fixes: _misaligned_gemm)
                                          latency_bound=s.plan is not None and s.plan.latency_bound)
    if w.family == "grouped_conv" and s.algorithm == "implicit_gemm":
        eff *= float(lib.grouped_efficiency.get(s.run_precision, 1.0))
    if s.algorithm == "direct" and w.family == "depthwise_conv":
        eff = _depthwise_eff(s, eff)
    if s.misaligned and w.conv:
        vec = int(lib.misaligned_vector[s.run_precision])
        cin = w.conv[0]
        eff *= lib.misaligned_efficiency * cin / (ceil(cin / vec) * vec)
    eff *= s.pad_fill
    if s.stem:
        eff *= lib.stem_efficiency
    if issue:
        eff *= _fp32_issue(s)
    if w.family == "control" or s.layer.op_type in s.hw.unoptimized_ops:
        eff = min(eff, s.hw.unoptimized_efficiency)
    return eff


def _depthwise_eff(s: LayerState, eff: float) -> float:
    """A framework's depthwise kernel (eager or in a CUDA graph) runs at the library's MACs per SM per
    cycle (``depthwise_sm_macs``), SMs x boost clock x that, as a fraction of the unit's rate; TensorRT
    brings its own kernels, and a precision the table lacks keeps ``eff``."""
    from dnnperf import gpu

    lib, w = s.lib, s.w
    strided = bool(w.conv) and (w.conv[3] > 1 or w.conv[4] > 1)
    key = f"{s.run_precision}:strided" if strided and f"{s.run_precision}:strided" in lib.depthwise_sm_macs \
        else s.run_precision
    if s.runtime == "tensorrt" or key not in lib.depthwise_sm_macs or not s.hw.compute_units or s.rate <= 0:
        return eff
    macs_per_s = float(lib.depthwise_sm_macs[key]) * s.hw.compute_units * gpu.clock_hz(s.hw, lib)
    return min(eff, 2 * macs_per_s / s.rate)


def _fp32_issue(s: LayerState) -> float:
    """The share of the CUDA cores' quoted fp32 rate a matrix kernel's FP32 instructions issue at
    (``shared_fp32_issue``: on GA10x and Ada SMs half the FP32 lanes take INT32 work too, and a product's
    address and loop arithmetic takes those slots); 1 elsewhere, for streaming kernels and for a depthwise
    kernel (``_depthwise_eff``: its per-SM rate counts every issue slot already)."""
    from dnnperf import gpu

    if s.algorithm in ("elementwise", "direct") or s.run_precision != "fp32" \
            or gpu.unit_class(s.unit_name) != "cuda_cores":
        return 1.0
    return s.lib.shared_fp32_issue


def _gpu_thermal(s: LayerState) -> float:
    """The clock a board holds under load: its profile's figure, or the generation's power model
    (board watts per SM against what the unit draws at the kernel's activity; the INT32 work that takes
    a shared datapath's slots, ``_fp32_issue``, draws power as the FP32 work would)."""
    from dnnperf import gpu

    hw = s.hw
    busy = _gpu_kernel_eff(s, issue=False) * (s.plan.tile_eff * s.plan.math_share if s.plan is not None else 1.0)
    f = hw.sustained_clock_fraction if hw.sustained_clock_given else gpu.sustained_clock_fraction(
        s.lib, hw.gpu.get("tdp_w"), hw.compute_units, gpu.unit_class(s.unit_name), s.run_precision, busy)
    s.clock = f
    s.t_compute = s.t / f
    return s.t_compute


def _gpu_efficiency(s: LayerState) -> float:
    """Divide by the kernel's efficiency (``_gpu_kernel_eff``)."""
    s.t_compute = s.t / _gpu_kernel_eff(s)
    return s.t_compute


def _reorders(s: LayerState) -> int:
    """Layout-reorder kernels around a tensor-core convolution (none under TensorRT, which keeps one layout)."""
    return int(s.lib.reorder_kernels.get(s.run_precision, 0)) if _is_conv(s.w) and "tensor" in s.unit_name \
        and s.runtime != "tensorrt" else 0


def _reorder_bytes(s: LayerState, n: int) -> list[int]:
    """Bytes each of ``n`` reorder kernels reads and writes: the convolution's input activation
    (NCHW -> NHWC), then its output (back)."""
    return [2 * (s.w.act_bytes_read if i % 2 == 0 else s.w.bytes_written) for i in range(n)]


def _extra_kernels(s: LayerState) -> int:
    """Kernels a library launches besides the main one: layout reorders around a tensor-core
    convolution, the reduction of a split-K GEMM, a Winograd or FFT convolution's transforms (one per
    transformed tensor); a recurrent layer's gate kernel at every step (``rnn_step_kernels``) and its
    one product for all steps' input projections."""
    rnn = (s.lib.rnn_step_kernels - 1) * s.w.launches + 1 if s.w.family == "rnn" and s.w.launches > 0 else 0
    return _reorders(s) + (1 if s.plan is not None and s.plan.split_k > 1 else 0) + rnn + len(s.transforms)


def _bias_kernel(s: LayerState) -> bool:
    """A framework adds a library convolution's bias in a kernel of its own (``conv_bias_kernel``):
    a lone Conv or ConvTranspose node with a bias input, run by the library (implicit GEMM, Winograd,
    the transposed convolution's GEMM; a depthwise kernel of the framework's own takes its bias
    along), outside a fusing engine (TensorRT folds it into the convolution's epilogue, as does a
    fused layer)."""
    return s.w.bias and s.lib.conv_bias_kernel and s.runtime != "tensorrt" and len(s.layer.nodes) == 1 \
        and (s.algorithm == "gemm" or s.algorithm in _LIBRARY_CONV)


def _gpu_transforms(s: LayerState) -> float:
    """The transform kernels of a non-fused Winograd or an FFT convolution (``_conv_algorithm``):
    their traffic, a memory loss of its own, after the batched GEMMs' time; their starts and floors
    are the launch step's (``_extra_kernels`` counts one kernel per transformed tensor)."""
    if not s.transforms:
        return s.t
    return s.t + _transforms_time(s, s.transforms)


def _gpu_bias_pass(s: LayerState) -> float:
    """The bias kernel's traffic (``_bias_kernel``), a memory loss of its own: a streaming pass that
    reads the convolution's output and writes it back (from L2 when both fit there, else through DRAM
    at the streaming bandwidth), which fusing the bias into the convolution's epilogue removes. Its
    start and floor are the launch step's, with the layer's other kernels."""
    if not _bias_kernel(s):
        return s.t
    traffic = 2 * s.w.bytes_written
    bw = _l2_bps(s) if traffic <= _l2_room(s) else _stream_bps(s, streaming=True)
    s.t_before_bias, s.t_bias = s.t, traffic / bw
    return s.t + s.t_bias


def _l2_bps(s: LayerState) -> float:
    """L2 bandwidth (``dnnperf.gpu.l2_bandwidth``)."""
    from dnnperf import gpu

    return gpu.l2_bandwidth(s.hw, s.lib)


def _l2_room(s: LayerState) -> float:
    """Bytes of the L2 that a layer's activations may use and still find there (l2_usable_fraction)."""
    return (s.hw.onchip_mb or 0.0) * 1e6 * s.lib.l2_usable_fraction


def _floor_us(s: LayerState, streaming: bool) -> float:
    """The shortest a kernel takes in the runtime: back to back from a stream, or in a captured graph
    (shorter still for a streaming kernel)."""
    if s.runtime == "eager":
        return s.lib.min_kernel_us
    return s.lib.graph_stream_kernel_us if streaming else s.lib.graph_kernel_us


def _kernels_seconds(s: LayerState, t: float, n: int, streaming: bool) -> float:
    """``n`` kernels doing ``t`` seconds of work: each kernel's start (``graph_stream_kernel_us``, what a
    streaming kernel in a graph shows plainly) comes before its work rather than hiding under it, and
    no kernel takes less than the runtime's floor. On a GPU of a system-on-chip each kernel launched
    from the host (eager, TensorRT's enqueue; not a CUDA graph's replay) adds ``soc_launch_us`` that
    the device waits for."""
    start = s.lib.graph_stream_kernel_us
    if s.lib.integrated and s.runtime != "graph":
        start += s.lib.soc_launch_us
    return max(t + n * start * 1e-6, n * _floor_us(s, streaming) * 1e-6)


# kernels that stream their tensors with wide, independent, unit-stride loads: pointwise math, casts,
# normalisations, softmax, pooling and reductions. Not data movement (a transpose or gather walks one
# side with a stride), not resizing, not matrix work.
_STREAMING = frozenset({"elementwise", "cast", "norm", "softmax", "pool", "reduce"})


def _streaming(s: LayerState) -> bool:
    return s.algorithm == "elementwise" and s.w.family in _STREAMING


def _stream_bps(s: LayerState, streaming: bool | None = None) -> float:
    """DRAM bytes/s a GPU kernel's traffic moves at: the quoted bandwidth x the library's efficiency
    (``stream_efficiency`` for a streaming kernel, ``bandwidth_efficiency`` for the rest). ``streaming``:
    whether the kernel streams (default: the layer's own kernel, ``_streaming``)."""
    streaming = _streaming(s) if streaming is None else streaming
    return s.hw.dram_bps * (s.lib.stream_efficiency if streaming else s.lib.bandwidth_efficiency)


def _gpu_memory(s: LayerState) -> float:
    """DRAM traffic at the bandwidth streaming kernels reach, plus split-K partial sums."""
    w = s.w
    s.unoptimized = w.family == "control" or s.layer.op_type in s.hw.unoptimized_ops
    act = w.act_bytes_read + w.bytes_written - _unsampled_bytes(s)
    on_chip = act if act <= _l2_room(s) else 0  # the producer's output is still in L2; this output stays for its consumer
    if s.weights_resident:
        on_chip += w.weight_bytes
    dram = act + w.weight_bytes - on_chip + (s.plan.partial_bytes if s.plan is not None else 0)
    s.t_memory = dram / _stream_bps(s) + on_chip / _l2_bps(s)
    if w.step_reads:  # from the L2 where the recurrent weights fit, else streamed again
        s.t_memory += _step_reads_time(w, _l2_bps(s) if w.step_reads <= _l2_room(s) else _stream_bps(s))
    return max(s.t, s.t_memory)


def _unsampled_bytes(s: LayerState) -> int:
    """Input bytes a strided 1 x 1 convolution on the tensor cores never reads, where the library's
    channels-last kernel loads only the pixels its windows land on (``strided_pointwise_sampled``):
    all but 1 / (sh x sw) of its input (sized from the product: output pixels x sh x sw x channels, at
    the output's element size, so a fused layer's other reads are left whole)."""
    from dnnperf import gpu

    w, g = s.w, s.w.gemm
    if not (s.lib.strided_pointwise_sampled and _is_conv(w) and w.family == "conv" and g is not None
            and tuple(w.conv[1:3]) == (1, 1) and (w.conv[3] > 1 or w.conv[4] > 1)
            and gpu.unit_class(s.unit_name) == "tensor_cores"):
        return 0
    stride = w.conv[3] * w.conv[4]
    elem = w.bytes_written / max(1, g.m * g.n * g.count)
    read = min(w.act_bytes_read, g.m * g.k * g.count * stride * elem)
    return int(read * (1 - 1 / stride))


def _gpu_overlap(s: LayerState) -> float:
    """``_overlap`` with the library's figure for tiled GEMM and convolution kernels (matrix_overlap:
    near the ridge point they hide less than the ideal roofline's max)."""
    return _overlap(s, None if s.plan is None else min(s.lib.matrix_overlap, s.hw.memory_overlap))


def _gpu_launch(s: LayerState) -> float:
    """Every kernel takes its start (``graph_stream_kernel_us``) before its work and at least the
    device's minimum kernel time; layout reorders that transpose activations (``reorder_traffic``) take
    their bytes' time at streaming bandwidth. An eager framework also pays its per-kernel host cost
    (launch_overhead_us), which runs ahead of the device: the layer takes the longer of the two. A
    captured graph or TensorRT launches the whole model once: no host cost per kernel, and a shorter
    device floor per kernel."""
    kernels = s.w.launches + _extra_kernels(s)
    n_re = _reorders(s)
    work = s.t_before_bias if s.t_bias else s.t  # the bias pass's traffic (_gpu_bias_pass) is its own kernel's
    if n_re and s.lib.reorder_traffic:  # each reorder is a transpose of an activation through DRAM
        bw = _stream_bps(s)  # a convolution's layout reorder: a transpose, not a streaming kernel
        t_re = sum(_kernels_seconds(s, b / bw, 1, False) for b in _reorder_bytes(s, n_re))
        s.t_device = _kernels_seconds(s, work, kernels - n_re, False) + t_re
    else:
        s.t_device = _kernels_seconds(s, work, kernels, _streaming(s))
    s.kernels = kernels
    if s.t_bias:  # after the convolution, on the same stream; its dispatch is part of the op's host cost
        s.t_device += _kernels_seconds(s, s.t_bias, 1, streaming=True)
        s.kernels += 1
    s.t_launch = rules.launch_time(kernels, s.hw.launch_overhead_us) if s.runtime == "eager" else 0.0
    return max(s.t_device, s.t_launch)


Step = tuple[str, Callable[[LayerState], float]]
STEPS: tuple[Step, ...] = (
    (Cause.specialization.value, _unit_and_tile),
    (Cause.parallelism.value, _parallelism),
    (Cause.thermal.value, _thermal),
    (Cause.memory.value, _memory),
    (Cause.overlap.value, _overlap),
    (Cause.unoptimized.value, _efficiency),
    (Cause.memory.value, _cold_start),
    (Cause.launch_overhead.value, _launch),
)
GPU_STEPS: tuple[Step, ...] = (
    (Cause.specialization.value, _gpu_unit),
    (Cause.parallelism.value, _gpu_waves),
    (Cause.thermal.value, _gpu_thermal),
    (Cause.unoptimized.value, _gpu_efficiency),
    (Cause.memory.value, _gpu_memory),
    (Cause.overlap.value, _gpu_overlap),
    (Cause.memory.value, _gpu_transforms),
    (Cause.memory.value, _gpu_bias_pass),
    (Cause.launch_overhead.value, _gpu_launch),
)
FALLBACK_STEPS: tuple[Step, ...] = (
    (Cause.heterogeneity.value, _fallback),
    (Cause.launch_overhead.value, _launch),
)


def _run_steps(layer: Layer, hw: HardwareProfile, prec: str, steps: tuple, state: dict,
               algorithm: str = "") -> tuple[LayerState, dict[str, float]]:
    """One pass of ``layer`` through the step table (``algorithm``: the convolution algorithm to run,
    ``_conv_algorithm``): its final state and the time each cause added."""
    w = layer.workload
    losses = {k: 0.0 for k in LOSS_KEYS}
    s = LayerState(layer, w, hw, prec, force=algorithm, **state)
    _, _, rate, _ = rules.pick_unit(hw, prec, w.is_matrix, w.gemm)
    s.t = s.t_ideal = w.ops / max(hw.headline_rate, rate)
    if steps is GPU_STEPS:
        from dnnperf.gpu import library_of  # noqa: F811

        s.lib = library_of(hw)
    for cause, step in steps:
        before, ideal = s.t, s.t_ideal
        t = step(s)
        if s.t_ideal != ideal and before == ideal:
            before = s.t_ideal  # the algorithm does less work than the MAC count (Winograd): a lower ideal
        losses[cause] += t - before
        s.t = t
    return s, losses


def score_layer(layer: Layer, hw: HardwareProfile, precision: str | None = None,
                weights_resident: bool = False, runtime: str = "eager", footprint: int = 0,
                weight_reach: int = 0, arena: int = 0) -> LayerCost:
    """Time and loss breakdown of one layer on ``hw`` (see the module docstring); ``footprint``: the
    bytes its network reads and writes per inference (0: the layer alone); ``weight_reach``: the
    distinct bytes between two reads of a weight (``rules.memory_time``; 0: weights from DRAM), ``arena``
    the activation buffers among them."""
    w = layer.workload
    prec = effective_precision(w, hw, precision)
    losses = {k: 0.0 for k in LOSS_KEYS}
    if w.family in FREE_FAMILIES:
        if w.launches and hw.kind == "cpu":  # a view the runtime dispatches (dnnperf.layers): its dispatch only
            t = rules.launch_time(w.launches, hw.launch_overhead_us)
            losses["launch_overhead"] = t
            return LayerCost(layer, "-", prec, 1.0, 1.0, 0.0, 0.0, 0.0, t, t, losses, "launch_overhead" if t else "compute")
        return LayerCost(layer, "-", prec, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, losses, "compute")
    if w.family in HOST_SHAPE_FAMILIES:
        return _host_shape(layer, hw, prec, losses)
    if w.parts:
        return _control(layer, hw, precision, prec, losses, weights_resident, runtime, footprint, weight_reach, arena)
    fallback = hw.accelerator_families is not None and hw.fallback is not None and w.family not in hw.accelerator_families
    steps = FALLBACK_STEPS if fallback else GPU_STEPS if hw.kind == "gpu" else STEPS
    state = dict(weights_resident=weights_resident, runtime=runtime, weight_reach=weight_reach, arena=arena,
                 footprint=footprint or w.weight_bytes + w.act_bytes_read + w.bytes_written)
    s, losses = _run_steps(layer, hw, prec, steps, state)
    for algorithm in s.algorithms[1:]:  # a convolution the library has several algorithms for: the fastest
        alt, alt_losses = _run_steps(layer, hw, prec, steps, state, algorithm)
        if alt.t < s.t:
            s, losses = alt, alt_losses
    # work with no arithmetic (a copy, a concatenation, a gather) runs in no precision but its data's: a
    # unit that lacks that precision upcasts math, not bytes (an fp16 cache's Concat was reported fp32)
    ran = prec if not w.ops and not w.is_matrix else (s.run_precision or prec)
    cost = LayerCost(layer, s.unit_name, ran, s.tile_eff, s.occupancy, s.t_ideal, s.t_compute,
                     s.t_memory, s.t_launch, s.t, losses, classify(losses, s.t_ideal, _starves(w)),
                     algorithm=s.algorithm,
                     plan=s.plan, t_device=s.t_device or (s.t - s.t_launch), kernels=s.kernels or w.launches,
                     clock=s.clock, t_bias=s.t_bias)
    if runtime == "tensorrt" and steps is GPU_STEPS:
        padded = _engine_padded(cost, s, precision, weights_resident, footprint)
        if padded is not None:
            cost = padded
        wider = _engine_wider(cost, hw, precision, weights_resident, footprint)
        if wider is not None:
            return wider
    return cost


# precisions a TensorRT engine is asked for alongside fp16 (trtexec --int8 --fp16, NVIDIA's published
# int8 builds): each layer runs the fastest kernel of the precisions the engine allows
ENGINE_ALSO_FP16 = frozenset({"int8", "fp8", "int4", "fp4"})


def _engine_wider(cost: LayerCost, hw: HardwareProfile, precision: str | None, weights_resident: bool,
                  footprint: int) -> LayerCost | None:
    """A TensorRT engine built for ``-p int8`` (or another 8- / 4-bit precision) also allows fp16 and
    times both for every layer: a matrix layer whose fp16 kernel is faster (a V100's int8 runs on DP4A
    CUDA cores while its fp16 takes the tensor cores) runs in fp16, its tensors at 16 bits. None when
    the requested precision's kernel is the faster or fp16 is not on the device. Only a requested
    precision: a QDQ model's layers are pinned to the precision its Q/DQ nodes state."""
    w = cost.layer.workload
    if precision not in ENGINE_ALSO_FP16 or not w.is_matrix or not any("fp16" in u.peak_tops for u in hw.units):
        return None
    c2 = score_layer(replace(cost.layer, workload=with_precision(w, "fp16")), hw, "fp16", weights_resident,
                     "tensorrt", footprint)
    return c2 if c2.time_s < cost.time_s else None


def _engine_padded(cost: LayerCost, s: LayerState, precision: str | None, weights_resident: bool,
                   footprint: int) -> LayerCost | None:
    """TensorRT reformats a convolution's input whose channels miss the tensor cores' vector (an
    image's 3 channels: HWC8 in fp16, CHW4/CHW32 in int8), zero-padding them, when that tactic is the
    faster one: the layer padded to whole vectors, if it then runs on the tensor cores in less time,
    with the padding's extra MACs booked as a specialization loss (the input's reformat copy, one
    small kernel, is not priced). None when the layer keeps its own kernel."""
    from dnnperf import gpu

    w = cost.layer.workload
    cin2 = padded_channels(w, s.hw, s.lib, s.precision) if gpu.unit_class(cost.unit) == "cuda_cores" else 0
    if not cin2:
        return None
    w2 = w.with_in_channels(cin2)
    c2 = score_layer(replace(cost.layer, workload=w2), s.hw, precision, weights_resident, "tensorrt", footprint)
    if gpu.unit_class(c2.unit) != "tensor_cores" or c2.time_s >= cost.time_s:
        return None
    # the layer's own MACs at the padded kernel's unit (faster than the headline for int8 on a T4),
    # never above its unpadded ideal: the zero channels' MACs are the rest
    ideal = min(cost.t_ideal, c2.t_ideal * w.ops / max(w2.ops, 1))
    losses = dict(c2.losses)
    losses["specialization"] += c2.t_ideal - ideal
    return replace(c2, layer=cost.layer, t_ideal=ideal, losses=losses,
                   cause=classify(losses, ideal, _starves(w)), padded_from=w.conv[0])


def _control(layer: Layer, hw: HardwareProfile, precision: str | None, prec: str, losses: dict, *context) -> LayerCost:
    """An If, Loop or Scan runs its body's nodes as the kernels they are, one after the other, as many
    times as it runs them (``Workload.parts``): the sum of each part scored on its own, in the
    network's context (``context``: weight residency, runtime, footprint, reach, arena). A CPU
    runtime's loop also pays a fixed cost per iteration (``kernel_fixed_us`` "control", calibrated on a
    Scan of one tiny Add: ONNX Runtime slices the inputs and runs the body's executor each time,
    0.31 us on a 2-core EPYC VM, under one and a half dispatches), a launch overhead. The layer's unit is the
    one its costliest part runs on; occupancy and tile fit are the parts' time-weighted means."""
    parts = layer.workload.parts
    if layer.workload.iterations > 1:  # from the second run on, a body reads the weights it read one run before
        weights_resident, runtime, footprint, _, _ = context
        body_weights = distinct_weights(layer.workload)
        body_arena = sum(pw.bytes_written for _, pw, _ in parts)
        context = (weights_resident or weights_fit(hw, body_weights), runtime, footprint, body_weights + body_arena,
                   body_arena)
    t = t_ideal = t_compute = t_memory = t_launch = t_device = 0.0
    kernels, occ, tile, by_unit = 0, 0.0, 0.0, {}
    for op, pw, n in parts:
        if precision:
            pw = with_precision(pw, precision)
        if hw.kind == "cpu":
            pw = cpu_dispatched(op, pw)
        c = score_layer(Layer(layer.name, op, layer.nodes, pw, None), hw, precision, *context)
        t += n * c.time_s
        t_ideal += n * c.t_ideal
        t_compute += n * c.t_compute
        t_memory += n * c.t_memory
        t_launch += n * c.t_launch
        t_device += n * c.t_device
        kernels += n * c.kernels
        occ += n * c.time_s * c.occupancy
        tile += n * c.time_s * c.tile_efficiency
        by_unit[c.unit] = by_unit.get(c.unit, 0.0) + n * c.time_s
        for k, v in c.losses.items():
            losses[k] += n * v
    if hw.kind == "cpu":
        per_iteration = rules.launch_time(layer.workload.iterations, hw.kernel_fixed_us.get("control", 0.0))
        t, t_launch, losses["launch_overhead"] = t + per_iteration, t_launch + per_iteration, \
            losses["launch_overhead"] + per_iteration
    unit = max(by_unit, key=lambda u: (by_unit[u], u)) if by_unit else "-"
    return LayerCost(layer, unit, prec, tile / t if t else 1.0, occ / t if t else 1.0, t_ideal, t_compute, t_memory,
                     t_launch, t, losses, classify(losses, t_ideal, False), t_device=t_device, kernels=kernels)


def _host_shape(layer: Layer, hw: HardwareProfile, prec: str, losses: dict) -> LayerCost:
    """Shape arithmetic the runtime redoes every inference: a CPU runtime executes it op by op on the
    cores that run the model (host_op_us per op, else the dispatch cost); an accelerator's host runs
    it ahead of the device, hidden behind device work."""
    t = 0.0
    if hw.kind == "cpu":
        t = max(1, len(layer.nodes)) * (hw.host_op_us if hw.host_op_us is not None else hw.launch_overhead_us) * 1e-6
    losses["launch_overhead"] = t
    return LayerCost(layer, "host", prec, 1.0, 1.0, 0.0, 0.0, 0.0, t, t, losses, "launch_overhead" if t else "compute",
                     t_device=0.0)


def _starves(w: Workload) -> bool:
    """Matrix work whose launches a bigger batch or a wider layer would amortise (``classify``): not a
    recurrent layer, whose one launch per time step stays whatever the batch."""
    return w.is_matrix and w.family != "rnn"


def classify(losses: dict[str, float], t_ideal: float, starves: bool) -> str:
    """The limiting cause: the largest loss, or 'compute' when time at peak dominates.

    Launch overhead is not the cause of a conv or matmul that ``starves`` (``_starves``) where idle
    lanes lead its other losses: such a layer is first a parallelism problem (bigger batch or wider
    layers amortise the launch as well), while a tiny elementwise kernel is the textbook launch-bound
    case (fusion removes it). Where another loss leads the rest (a T4's clock, a missed tensor-core
    shape), the launch competes as any loss does: a 1 x 10 convolution whose launch was 9.1 us of its 10
    was labelled 'thermal' for the 0.29 us its clock cost. A recurrent layer's launches are its time
    steps, one after the other, whatever the batch, so they can be its cause.
    """
    cands = {k: v for k, v in losses.items() if k != "input_io"}
    if starves:
        rest = {k: v for k, v in cands.items() if k != "launch_overhead"}
        if rest and max(rest, key=lambda k: (rest[k], k)) == "parallelism":
            cands = rest
    best = max(cands, key=lambda k: (cands[k], k))
    if cands[best] <= t_ideal:
        return "compute"
    return best


_SLOT_GETTERS: dict[type, object] = {}  # workload class -> attrgetter of all its slots


def _workload_key(layer: Layer) -> tuple | None:
    w = layer.workload
    get = _SLOT_GETTERS.get(w.__class__)
    if get is None:
        import operator

        get = _SLOT_GETTERS[w.__class__] = operator.attrgetter(*w.__slots__)
    try:
        key = (layer.op_type, len(layer.nodes), layer.output_shape, get(w), layer.reads, layer.blocked, layer.cold_bytes)
        hash(key)
    except TypeError:
        return None
    return key


def _score_all(layers: list[Layer], hw: HardwareProfile, precision, resident: bool, runtime: str,
               footprint: int = 0, reach: int = 0, arena: int = 0) -> list[LayerCost]:
    """Score every layer; layers identical in everything scoring reads (a decoder's 80 equal blocks)
    are scored once and the result copied."""
    memo: dict = {}
    out = []
    for l in layers:
        key = _workload_key(l)
        hit = memo.get(key) if key is not None else None
        if hit is None:
            c = score_layer(l, hw, precision, resident, runtime, footprint, reach, arena)
            if key is not None:
                memo[key] = c
        else:
            c = object.__new__(LayerCost)  # a shallow copy (copy.copy is several times slower)
            c.__dict__.update(hit.__dict__)
            c.layer, c.losses, c.fixes = l, dict(hit.losses), []
        out.append(c)
    return out


def cpu_dispatched(op_type: str, w: Workload, shape: tuple | None = None) -> Workload:
    """A view ONNX Runtime's CPU provider dispatches as any other node (``vocab.CPU_VIEW_KERNELS``: a
    Reshape, a Squeeze...): one launch, its dispatch only. A Transpose that moves only axes of size 1 is no
    view there: its kernel copies the tensor with one memcpy on the calling thread
    (``vocab.TRANSPOSE_RESHAPE``; ``shape``: its output's, the layer's elements; without it the dispatch
    alone)."""
    if w.family != "view" or op_type not in CPU_VIEW_KERNELS:
        return w
    if op_type == "Transpose" and shape:
        from dnnperf.ops.transpose import copied

        return copied(shape, w.dtype, TRANSPOSE_RESHAPE)
    return replace(w, launches=1)


def weights_fit(hw: HardwareProfile, nbytes: int) -> bool:
    """Whether ``nbytes`` of weights stay on chip between two reads: a GPU's L2 as far as its library
    leaves room; an eighth of a CPU's cache (the activations and other data share it)."""
    if not hw.onchip_mb:
        return False
    if hw.kind == "gpu":
        from dnnperf import gpu

        return nbytes <= hw.onchip_mb * 1e6 * gpu.library_of(hw).l2_usable_fraction
    return nbytes <= hw.onchip_mb * 1e6 / 8


def distinct_weights(w: Workload) -> int:
    """Weight bytes a layer holds: a control-flow layer's body parts once each, however often it runs
    them."""
    return sum(pw.weight_bytes for _, pw, _ in w.parts) if w.parts else w.weight_bytes


def held_weights(layers: list[Layer], repeated: int = 0) -> int:
    """Weight bytes a network holds, each once: a loop body's once, not once per run, and ``repeated``
    (weights several layers share, ``dnnperf.reuse.repeated_weight_bytes``) taken off."""
    return max(sum(distinct_weights(l.workload) for l in layers) - repeated, 0)


def score(layers: list[Layer], hw: HardwareProfile, settings: Settings, input_bytes: int, arena: int = 0,
          repeated: int = 0, io: tuple[int, int] = (0, 0)) -> Score:
    """Score every layer and total the network. ``arena``: the activation bytes live at once at the
    peak of one inference (``dnnperf.reuse.arena_bytes``; 0: not known), which with the weights is
    what a network run again and again touches between two reads of a weight (``rules.memory_time``).
    ``repeated``: weight bytes the layers' sum counts twice (layers sharing an initializer,
    ``dnnperf.reuse.repeated_weight_bytes``), counted once there. ``io``: the graph's inputs and outputs,
    whose binding a CPU runtime's call pays once per inference (``rules.call_time``: totals' ``call_s``, a
    launch overhead of no layer)."""
    from dnnperf import gpu

    board = hw
    if hw.kind == "gpu":
        hw, _ = gpu.board_share(hw, settings.batch)
    # each weight once (a loop body's once, not once per run)
    distinct = held_weights(layers, repeated)
    resident = weights_fit(hw, distinct)
    # what one inference reads and writes: every weight once, every activation it writes
    footprint = distinct + sum(l.workload.bytes_written for l in layers)
    reach = distinct + arena if arena else 0
    costs = _score_all(layers, hw, settings.precision, resident, settings.runtime, footprint, reach, arena)
    if hw.kind == "gpu":
        _queue_on_stream(costs, rules.launch_time(1, hw.launch_overhead_us) if settings.runtime == "eager" else 0.0)
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
    t_call = rules.call_time(hw.call_us, *io)
    losses["launch_overhead"] += t_call
    latency = compute_total + in_added + t_call
    ops = sum(c.layer.workload.ops for c in costs)
    macs = sum(c.layer.workload.macs for c in costs)
    nbytes = sum(c.layer.workload.bytes_total for c in costs)
    t_ideal = sum(c.t_ideal for c in costs)
    achieved = ops / latency / 1e12 if latency > 0 else 0.0
    basis_tops, basis_prec = _peak_basis(board, costs)
    totals = {
        "macs": macs,
        "ops": ops,
        "other_ops": ops - 2 * macs,
        "bytes": nbytes,
        "weight_bytes": sum(c.layer.workload.weight_bytes for c in costs),
        "launches": sum(c.layer.workload.launches for c in costs),
        "kernels": sum(c.kernels for c in costs),
        "latency_s": latency,
        "ideal_s": t_ideal,
        "input_transfer_s": t_in,
        "call_s": t_call,
        "achieved_tops": achieved,
        "peak_tops": basis_tops,
        "peak_precision": basis_prec,
        "fraction_of_peak": achieved / basis_tops if basis_tops else 0.0,
        "throughput_per_s": (settings.batch or 1) / latency if latency > 0 else 0.0,
        "mean_occupancy": _weighted_occupancy(costs),
    }
    return Score(board, settings, costs, input_bytes, t_in, totals, losses, footprint, resident, reach, arena, repeated,
                 io)


def _peak_basis(hw: HardwareProfile, costs: list[LayerCost]) -> tuple[float, str]:
    """(TOP/s, precision) the fraction of peak is taken against: the quoted headline, or the peak of
    a precision the layers run in when it is higher (int8 on a CPU quoted in fp32: the model would
    otherwise reach 144% of "the peak")."""
    best, prec = hw.headline_tops, hw.headline_precision
    for c in costs:
        u = hw.unit_named(c.unit)
        tops = float(u.peak_tops.get(c.precision, 0.0)) if u is not None and c.layer.workload.ops else 0.0
        if tops > best:
            best, prec = tops, c.precision
    return best, prec


def rescore(c: LayerCost, layer: Layer, sc: Score, precision: str | None, hw: HardwareProfile | None = None) -> LayerCost:
    """``layer``, a what-if variant of ``c``'s layer (another width, another precision, or ``hw``, a
    variant of the profile), scored as ``c`` was in ``sc``: in the same network (its footprint, its
    weights' residency) and, on a GPU, after the same wait for the host on the stream as ``c`` had
    (``_queue_on_stream``), so that the two times differ by what the variant changes and nothing
    else. Fixes and ``dnnperf shapes`` use it."""
    from dnnperf import gpu

    hw = gpu.board_share(hw or sc.hw, sc.settings.batch)[0]  # the dies the batch runs on (the profile elsewhere)
    c2 = score_layer(layer, hw, precision, sc.weights_resident, sc.settings.runtime, sc.footprint, sc.weight_reach,
                     sc.arena)
    if hw.kind == "gpu" and c.unit != "host" and c2.unit != "host":
        _retime(c2, c2.t_device + max(0.0, c.time_s - c.t_device))
    return c2


def _retime(c: LayerCost, t: float) -> bool:
    """Give ``c`` the time ``t`` it takes on the stream, the difference booked as launch overhead (the
    device's wait for the host); whether anything changed."""
    if t == c.time_s:
        return False
    c.losses["launch_overhead"] = max(0.0, c.losses["launch_overhead"] + t - c.time_s)
    c.time_s = t
    return True


def _queue_on_stream(costs: list[LayerCost], read_s: float = 0.0) -> None:
    """A GPU runs the layers' kernels from a stream the host fills ahead of it (``rules.stream_timeline``):
    each layer's time becomes what it adds to the device's timeline, and its launch-overhead loss the
    part of that spent waiting for the host (none when a backlog hides the launch). Scoring a layer
    alone charges it the longer of its device time and its host cost; a network hides short kernels'
    host cost behind the long kernels before them. Host-side layers (shape arithmetic) cost the host
    only. Runtimes without a host cost per kernel (graph, tensorrt) are unchanged by it.

    A layer of several kernels (a recurrent layer's one per step, a convolution and its bias kernel)
    enters the stream kernel by kernel: its first kernel runs once the host has queued it, not once the
    host has queued them all (an LSTM of 50 steps started after all 50 launches: its host time was
    charged on top of its device time). Its kernels share its device time and host cost equally (at most
    ``_SPLIT_KERNELS`` of them, which the timeline converges to well before).

    ``read_s``: the host's cost of reading a value back from the device (one copy call; 0 for a
    runtime with no host cost per kernel). A layer with ``Workload.host_waits`` makes the host wait for
    the device that many times (``rules.stream_timeline``'s waits), spread evenly over its kernels
    (split into as many, up to ``_SPLIT_WAITS``): after a device kernel whose output size it must learn
    (NonZero) or a loop body that computes its own condition; before a host-side layer that reads the
    device's results (NonMaxSuppression, Unique)."""
    live = [c for c in costs if c.time_s > 0]
    device, host, owner = [], [], []
    # (before, after) host reads per kernel, built only for a network that has any
    waits = [] if read_s > 0 and any(c.layer.workload.host_waits for c in live) else None
    for i, c in enumerate(live):
        reads = c.layer.workload.host_waits if waits is not None else 0
        on_host = c.unit == "host"
        n = min(max(1, c.kernels, reads), _SPLIT_WAITS if reads else _SPLIT_KERNELS) \
            if not on_host and c.t_launch > 0 else 1
        d = (0.0 if on_host else c.t_device) / n
        h = c.t_launch / n
        device.extend([d] * n)
        host.extend([h] * n)
        owner.extend([i] * n)
        if waits is not None:
            for j in range(n):  # piece j carries the reads that fall in it
                k = (j + 1) * reads // n - j * reads // n
                waits.append((k * read_s, 0.0) if on_host else (0.0, k * read_s))
    steps = [0.0] * len(live)
    for i, t in zip(owner, rules.stream_timeline(device, host, waits)):
        steps[i] += t
    for c, t in zip(live, steps):
        if _retime(c, t):
            c.cause = classify(c.losses, c.t_ideal, _starves(c.layer.workload))


_SPLIT_KERNELS = 64
_SPLIT_WAITS = 4096


def unscored_floor(rows, tensors: dict, hw: HardwareProfile) -> float:
    """A lower bound on the time of the nodes that could not be scored: each moves the tensors whose
    sizes are known once at DRAM bandwidth and launches one kernel (its math is unknown: left out)."""
    t = 0.0
    for r in rows:
        if r.workload is not None:
            continue
        nbytes = 0
        for name in dict.fromkeys(r.node.inputs + r.node.outputs):
            tensor = tensors.get(name) if name else None
            if tensor is not None and tensor.nbytes:
                nbytes += tensor.nbytes
        t += nbytes / hw.dram_bps + rules.launch_time(1, hw.launch_overhead_us)
    return t


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
