"""Which calibrated fraction of its roof a layer runs at, and what a CPU runtime adds beyond it.

The profile's figures (``efficiency`` per family, ``op_efficiency`` per op or runtime kernel, the
GEMM row and channel curves, the ``shape_efficiency`` curves of convolutions, pools, row norms and
one-thread copies) are looked up here for the scoring's "unoptimized" step (``dnnperf.scoring``),
together with the passes ONNX Runtime's CPU kernels make that no roofline shows: a fused activation
other than Relu (``epilogue_pass``), the subnormal values of a -100 attention mask
(``subnormal_time``), and how evenly the runtime's static split keeps the threads of a blocked
convolution busy (``thread_split``). Each rule is a small function with its evidence in its docstring.

Why one module this long: every rule here reads the same calibrated tables and the same test of
whether the CPU's blocked layout takes a convolution (``_unblocked``, ``reads_image``); apart, each
module would import that test from the other.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dnnperf import rules
from dnnperf.hardware import HardwareProfile
from dnnperf.ir import DTYPE_BITS
from dnnperf.qdq import MATRIX_OPS as QDQ_MATRIX_OPS
from dnnperf.vocab import (BROADCAST_SPANS, EPILOGUE_ACTIVATIONS, NBITS_KERNELS, OP_PRICED_AS, OWN_OP_FIGURES,
                           TRANSPOSE_BLOCKS, TRANSPOSE_PLANES, TRANSPOSE_RESHAPE)
from dnnperf.workload import PRECISION_OF_DTYPE, Workload

if TYPE_CHECKING:
    from dnnperf.scoring import Layer


def family_efficiency(layer: Layer, hw: HardwareProfile) -> float:
    """Calibrated fraction of the roof: the family's (thin GEMMs lower for matrix work); an op-type
    figure (e.g. Pow) replaces it for a single op. A fused group runs at its anchor's efficiency:
    its epilogue ops ride along in registers. An 8-bit integer product runs at its operand pairing's
    share of the int8 peak on top (``int8_operands``; a ``-p int8`` what-if, with no pairing of its own,
    at the fastest pairing's)."""
    eff = _family_efficiency(layer, hw)
    w = layer.workload
    if hw.int8_operands and w.is_matrix and (w.operands or PRECISION_OF_DTYPE.get(w.dtype) == "int8"):
        eff *= _pairing_share(layer, hw, w.operands)
    return eff * qlinear_thread_share(layer, hw)


# ONNX Runtime's QLinear element loops ask its thread pool's cost model (Eigen's) how to split: at one cycle
# of work and 11/64 of a cycle per byte read and per byte written an element, a loop costing under 210,000
# cycles (100,000 to start plus 100,000 for a second thread, less the model's 0.9 rounding) runs on the calling
# thread alone; a longer one is cut into blocks of at least 40,000 cycles' work (and at most 4 blocks a thread),
# so no more threads than blocks work on it. Timed on a 2-core EPYC VM: QLinearAdd, QLinearMul and
# QLinearSigmoid of 156,000 uint8 elements ran on one thread, of 157,000 on two (1.65-1.8x faster);
# 210,000 / (1 + 2 x 11 / 64) = 156,279.
ORT_SPLIT_CYCLES = 210_000
ORT_BLOCK_CYCLES = 40_000
QLINEAR_ELEMENT_CYCLES = 1 + 2 * 11 / 64
QLINEAR_LOOPS = ("QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu")
QLINEAR_TIMED_ELEMENTS = 128 * 3072  # the elements calibrate times them on (dnnperf.measure.micro: [1, 128, 3072])


def qlinear_thread_share(layer: Layer, hw: HardwareProfile) -> float:
    """The threads a CPU runtime runs this QLinear element loop (a QOperator node, or a QDQ group it runs as one)
    on, over those its figure was timed on (``op_efficiency``: 393,216 elements; all of ``compute_units`` where the
    profile has no figure); 1 for any other layer. EfficientNet-B0's squeeze-excite and SiLU multiplies from the
    14 x 14 stage on (94,080-131,712 elements) run on one thread of two."""
    n = layer.workload.parallel_work
    op = run_as(layer)
    if hw.kind != "cpu" or hw.compute_units <= 1 or "+" in layer.op_type or op not in QLINEAR_LOOPS or n <= 0:
        return 1.0
    timed = _loop_threads(QLINEAR_TIMED_ELEMENTS, hw.compute_units) if OP_PRICED_AS.get(op, op) in hw.op_efficiency \
        else hw.compute_units
    return _loop_threads(n, hw.compute_units) / timed


# the element ops ONNX Runtime computes with the C library's functions, one element at a time (measure.micro.OP_MICRO
# past Sqrt), and the share of its roofline under which such an op's calibrated figure (op_efficiency, timed on
# QLINEAR_TIMED_ELEMENTS elements) says its math, not its bytes, sets its time (``scalar_loop_time``)
SCALAR_LOOP_OPS = frozenset({"Pow", "Log", "Softplus", "Elu", "Selu", "Celu", "Sin", "Cos", "Atan", "Sign"})
SCALAR_LOOP_EFFICIENCY = 0.1


def scalar_loop_time(layer: Layer, hw: HardwareProfile, eff: float, t_compute: float) -> float | None:
    """An element op ONNX Runtime computes one element at a time with the C library's functions (Softplus, Sin,
    Log, Elu, Pow: a calibrated figure under SCALAR_LOOP_EFFICIENCY of its roofline) takes the same time per
    element at any size: its time is its elements at the pace calibrate timed (the roofline of the timed tensor
    over the figure). Scaled by its bytes' time instead, which the bandwidth curve makes slower per byte for a
    small working set, a Softplus of 43,264 elements read 2.0x its measured 243-275 us on a 2-core EPYC VM where
    200,704 read 1.1x; both ran 5.6-6.4 ns an element. None for any other layer (a vector op's small tensors do
    pay the curve's overheads: a Tanh of 43,264 elements took 0.38 ns an element, of 200,704 0.20)."""
    w = layer.workload
    if hw.kind != "cpu" or run_as(layer) not in SCALAR_LOOP_OPS or w.family != "elementwise" \
            or eff >= SCALAR_LOOP_EFFICIENCY or run_as(layer) not in hw.op_efficiency or w.parallel_work <= 0:
        return None
    scale = QLINEAR_TIMED_ELEMENTS / w.parallel_work
    ws = (w.act_bytes_read + w.bytes_written) * scale
    timed = max(t_compute * scale, ws / rules.bandwidth_for(int(ws), hw))
    return timed / eff / scale


def _loop_threads(n: int, units: int) -> int:
    """Threads ONNX Runtime's cost model gives a QLinear loop of ``n`` elements on ``units`` threads."""
    if n * QLINEAR_ELEMENT_CYCLES < ORT_SPLIT_CYCLES:
        return 1
    block = max(-(-n // (4 * units)), int(ORT_BLOCK_CYCLES / QLINEAR_ELEMENT_CYCLES))
    return min(units, -(-n // block))


def blocked_batchnorm(layer: Layer, hw: HardwareProfile) -> bool:
    """Whether a calibrated CPU runs this standing BatchNormalization (alone or with the activation it
    takes) as its blocked layout's depthwise kernel: ONNX Runtime's NCHWc pass turns a 4-D
    BatchNormalization over whole channel blocks into a 1 x 1 depthwise convolution. That kernel keeps
    the pace per element the depthwise family was calibrated at (a 3 x 3 one: its nine multiplies per
    element ride in the same loads), not the 'norm' figure of a row normalisation with its reductions:
    DenseNet-161's 82 pre-activations ran 65-70 ps an element from 0.1 to 1.2 M elements (2-core EPYC,
    AVX-512; the depthwise family ~75), where the norm figure had them at 2.0-2.5x their time. Only
    on a tensor already in that layout (``Layer.blocked``): one that reads a plain tensor (a graph
    input, a Transpose's output) stays the runtime's plain BatchNormalization kernel."""
    if hw.cpu_layout is None or not layer.blocked or layer.op_type.split("+", 1)[0] != "BatchNormalization":
        return False
    shape = layer.output_shape or ()
    return len(shape) == 4 and shape[1] % hw.cpu_layout[0] == 0


def _pairing_share(layer: Layer, hw: HardwareProfile, pairing: str) -> float:
    """The share of the int8 peak an integer product of ``pairing`` reaches. A float operator in QDQ
    form (a Conv between DequantizeLinear and QuantizeLinear nodes) keeps its float kernel as the
    runtime's fallback: ONNX Runtime on x86 ran ResNet-18 in QDQ form with int8 activations as 9
    QLinearConv kernels and 11 float convolutions with their DequantizeLinear nodes (14.4-14.9 ms;
    the float model 17.5, the same model with uint8 activations 5.2-5.6), where an int8-only operator
    (QLinearConv in the QOperator form, int8 x int8: 76 ms) has no such way out. So a QDQ layer
    never runs slower than the float rate."""
    share = hw.int8_operands.get(pairing, 1.0)
    floor = min(1.0, hw.best_rate("fp32", True) / max(hw.best_rate("int8", True), 1e-30))
    w = layer.workload
    if w.family in ("depthwise_conv", "grouped_conv") or (w.conv and w.conv[0] < 4):
        # the byte dot products sum four products of one output: a depthwise filter or an image's
        # three channels cannot fill them, and the int8 kernel runs each group of a grouped one as a
        # product of its own (RegNetX-400MF's 16-wide groups: 62-95 us each, 4-5x the int8 peak's
        # figure); such a layer gains nothing over its float pace
        share = min(share, floor)
    if layer.op_type.split("+")[0] in QDQ_MATRIX_OPS:  # a float operator between Q/DQ pairs
        share = max(share, floor)
    if w.family == "depthwise_conv" and hw.int8_depthwise_share is not None:
        # ONNX Runtime's 8-bit depthwise kernel (channels-last QLinearConv) at its calibrated share of that
        # float pace: 0.4-0.7 on a 2-core EPYC VM (MobileNetV2's 96-channel 3 x 3 at 56 x 56: 38-62 us, the float
        # figures' 26); a channel count that kernel does not take at the generic kernel's share
        generic = hw.int8_depthwise_generic
        fast = generic is None or w.gemm is None or w.gemm.count % generic[0] == 0
        share *= hw.int8_depthwise_share if fast else generic[1]
    return share


def _family_efficiency(layer: Layer, hw: HardwareProfile) -> float:
    w = layer.workload
    if layer.op_type == "LayoutReorder" and "layout.reorder" in hw.shape_efficiency:
        return rules.interp_log(_reorder_pixels(layer), hw.shape_efficiency["layout.reorder"])
    eff = family = hw.efficiency.get(w.family, 1.0)
    if blocked_batchnorm(layer, hw) and "depthwise_conv" in hw.efficiency:
        return _op_or(layer, hw, hw.efficiency["depthwise_conv"])
    thin = 1.0  # the thin-product figure (few channels)
    if w.is_matrix and w.gemm is not None:
        g = w.gemm
        if hw.matrix_nk_efficiency:  # rows and channels measured apart
            if hw.matrix_m_efficiency:
                eff = min(eff, rules.interp_log(g.m, hw.matrix_m_efficiency))
            thin = thin_product(min(g.n, g.k), hw, family)
        elif hw.matrix_m_efficiency:  # one curve (profiles calibrated before the split)
            eff = min(eff, rules.interp_log(min(g.m, g.n, g.k), hw.matrix_m_efficiency))
    shaped = shape_efficiency(layer, hw)
    if shaped is not None:
        return _op_or(layer, hw, shaped)
    rgb = _image_efficiency(layer, hw)
    if rgb is not None:  # measured on exactly such thin products: no thin-product curve on top
        return _op_or(layer, hw, min(eff, rgb))
    pixel = _pixel_efficiency(layer, hw)
    if pixel is None:
        return _op_or(layer, hw, min(eff, thin))
    # the pixel curve only lowers the figure. It was measured on convolution chains at least
    # PIXEL_CHAIN_MIN_CHANNELS wide, so it already holds their thinness: the thin-product curve (1 x 1
    # products thin in both N and K) lowers it only for narrower layers, by how far it drops below
    # that width. Taking both as they are counted the width twice (VGG's and ResNet's 64-channel 3 x 3
    # layers: 0.9 of a pace the chain of that width had measured at 1.0)
    if w.gemm is not None and tuple(w.conv[1:3]) == (1, 1) and hw.cpu_layout is not None and not eight_bit_conv(w):
        pixel *= _pointwise_blocks(w.gemm, hw)
    elif hw.matrix_nk_efficiency and w.gemm is not None and min(w.gemm.n, w.gemm.k) < PIXEL_CHAIN_MIN_CHANNELS:
        pixel *= min(1.0, thin / rules.interp_log(PIXEL_CHAIN_MIN_CHANNELS, hw.matrix_nk_efficiency))
    return _op_or(layer, hw, min(eff, pixel))


def _pointwise_blocks(g, hw: HardwareProfile) -> float:
    """A 1 x 1 convolution in the CPU's blocked layout is no matrix product: its kernel multiplies
    whole channel blocks (``cpu_layout.block``) of each pixel by the weights of a few output blocks at
    a time. Two things follow, both from the layout: the channels on either side are padded up to
    whole blocks (24 -> 32 with 16-channel blocks: 3/4 of the multiplies do useful work), and only
    the output side can be too thin to fill the kernel's registers (one or two output blocks: the
    thin-product curve at the padded output width, below the chains' PIXEL_CHAIN_MIN_CHANNELS). A
    narrow input (16 channels into 96: EfficientNet's and MnasNet's expansions at 112 x 112) costs
    only its padding; the thin-product curve, measured on d x d products, had slowed it by d."""
    block = hw.cpu_layout[0]
    kp = -(-g.k // block) * block
    np_ = -(-g.n // block) * block
    f = (g.k * g.n) / (kp * np_) if kp and np_ else 1.0
    if hw.matrix_nk_efficiency and np_ < PIXEL_CHAIN_MIN_CHANNELS:
        f *= min(1.0, rules.interp_log(np_, hw.matrix_nk_efficiency)
                 / rules.interp_log(PIXEL_CHAIN_MIN_CHANNELS, hw.matrix_nk_efficiency))
    return f


def _op_or(layer: Layer, hw: HardwareProfile, eff: float) -> float:
    """An op-type figure (e.g. Pow) replaces the family's for a single op; a fused group keeps it. An
    op that runs the same loop as a timed one takes its figure (``vocab.OP_PRICED_AS``); a layer the
    runtime runs as another op (a QDQ group's Add as QLinearAdd: ``Workload.kernel``) takes that op's."""
    if block_copies(layer, hw):  # a copy whose runs are priced apart: at the movement family's pace
        return eff
    op = run_as(layer)
    if "+" not in layer.op_type and op in hw.op_efficiency:  # one op, or one kernel the runtime makes
        return hw.op_efficiency[op]
    alias = OP_PRICED_AS.get(op)
    return hw.op_efficiency[alias] if alias in hw.op_efficiency else eff


def run_as(layer: Layer) -> str:
    """The op a layer's figure is looked up by: the op the runtime runs it as, when its workload names one
    with a figure of its own (``vocab.OWN_OP_FIGURES``, ``OP_PRICED_AS``), else its op type."""
    k = layer.workload.kernel
    return k if k and (k in OWN_OP_FIGURES or k in OP_PRICED_AS) else layer.op_type


def thin_product(width: int, hw: HardwareProfile, wide: float) -> float:
    """The thin-product curve (``matrix_nk_efficiency``, measured on 3136 x d x d products up to
    d = 64) at a GEMM's smaller channel count ``width``. Past its last point the curve climbs, in
    log(width), to ``wide`` (the matrix family's own figure) at WIDE_PRODUCT, the width of the
    family's calibration products, and stays there: a product as wide as those runs at their measured
    pace. Held flat past d = 64 instead, the 64-wide point (0.80 in one calibration) slowed ViT's
    768-wide products of exactly the calibrated shape by 22%."""
    pts = hw.matrix_nk_efficiency
    if pts and pts[-1][0] < WIDE_PRODUCT:
        pts = (*pts, (WIDE_PRODUCT, max(wide, pts[-1][1])))
    return rules.interp_log(width, pts)


# min(N, K) of the products the matrix family's efficiency is calibrated on (dnnperf.measure.micro:
# gemm_ffn, 197 x 768 x 3072, and small_gemm, 128 x 768 x 768)
WIDE_PRODUCT = 768

# input channels of the narrow 1 x 1 micro-benchmark behind 'conv.rgb_k1' (dnnperf.measure.micro.NARROW_K1):
# calibrate keeps its point only where the blocked layout's block is wider (``narrow_k1_timed``)
NARROW_K1_CHANNELS = 8

# the plain (unblocked) convolutions behind '<family>.unblocked_k<kernel>' (dnnperf.measure.micro times
# them): (kernel, channels, side). Channel counts in no whole SIMD block, so the runtime expands their
# input and runs one product per group, as it does for a grouped convolution the blocked layout refuses;
# the channel count places the curve among the grouped widths (``_grouped_curves``)
UNBLOCKED_CONVS = ((1, 58, 28), (3, 18, 56))


def narrow_k1_timed(block: int) -> bool:
    """Whether calibrate times the 'conv.rgb_k1' point on a runtime with ``block``-channel blocks: its
    micro-benchmark reads the NCHW input only where its channels are fewer than one block."""
    return NARROW_K1_CHANNELS < block

# the narrowest convolution chain behind a calibrated pixel curve (dnnperf.measure.micro: CONV_PIXELS,
# and CONV1_PIXELS' 256 <-> 64 chain at 56 x 56); a test keeps the two equal
PIXEL_CHAIN_MIN_CHANNELS = 64


def _unblocked(w: Workload, hw: HardwareProfile) -> bool:
    """A convolution a calibrated CPU's blocked layout does not take (it runs the plain kernel). Never an
    8-bit one (``eight_bit_conv``): it runs kernels of its own, neither blocked nor plain."""
    return hw.cpu_layout is not None and not eight_bit_conv(w) and not rules.blocked_conv(w, *hw.cpu_layout[:3])


def eight_bit_conv(w: Workload) -> bool:
    """An 8-bit convolution (a QDQ Conv run quantized, a QLinearConv): ONNX Runtime's CPU provider runs it as
    its channels-last QLinearConv (MLAS's 8-bit kernels), outside the float blocked layout, so its channel
    counts are not padded to the layout's blocks and no plain-kernel curve applies: 58 -> 58 at 28 x 28, 1 x 1,
    took the same time as 56 -> 56 (the plain curve had it 0.75 of the blocked pace), and 58 depthwise
    channels at 56 x 56, stride 2, 21 us where the plain depthwise curve said 83 (a 2-core EPYC VM)."""
    return bool(w.conv) and w.family in ("conv", "grouped_conv", "depthwise_conv") \
        and PRECISION_OF_DTYPE.get(w.dtype) == "int8"


def depthwise_block_fill(w: Workload, hw: HardwareProfile) -> float:
    """Useful share of a blocked depthwise convolution's channels. The CPU's blocked layout
    (``cpu_layout``) pads a channel count up to whole blocks, and the kernel computes, stores, reads
    and writes every padded channel: 24 channels cost as many as 32 with 16-channel blocks. Timed
    on the reference VM (ONNX Runtime 1.32, AVX-512; 3 x 3 at 56 x 56, by difference of 9- and
    1-convolution chains): 24 channels 23.5 us against 25.6 for 32, 40 channels 39.7 against 39.6
    for 48; 8 channels at 112 x 112 47.6 against 44.3 for 16. The calibrated depthwise curves are
    measured on whole blocks (``dnnperf.measure.micro.DEPTHWISE``), so they hold no padding of their
    own. 1.0 for anything else (plain 1 x 1 convolutions pad in ``_pointwise_blocks``)."""
    if hw.cpu_layout is None or w.family != "depthwise_conv" or w.gemm is None or _unblocked(w, hw) \
            or eight_bit_conv(w):
        return 1.0
    return rules.dim_fit(w.gemm.count, hw.cpu_layout[0])  # one group per channel


def _reorder_pixels(layer: Layer) -> int:
    """Pixels per channel of the tensor a layout conversion (``dnnperf.layout``) converts: the
    calibrated 'layout.reorder' curve is keyed by them (a conversion walks each channel block's
    pixels; small maps with many channels run further below a copy's pace). A conversion that absorbs
    a channels-last Transpose (the only kind with nodes of its own) has its channels last."""
    if not layer.nodes:
        return _pixels(layer)
    return max(math.prod((layer.output_shape or ())[1:-1]), 1)


# output filter blocks one call of ONNX Runtime's blocked convolution kernel computes (MLAS
# MLAS_NCHWC_GROUPED_CONV_ALGORITHM::FilterSetSize): its threads split sets of this many blocks
FILTER_SET_BLOCKS = 4


def thread_split(layer: Layer, hw: HardwareProfile) -> float:
    """The share of its threads a blocked CPU convolution keeps busy (``rules.static_split_share``):
    ONNX Runtime's kernels cut the work into units of one output row of one set of up to
    FILTER_SET_BLOCKS filter blocks (depthwise: of one channel block), per image and group, and hand
    each of the profile's threads (``compute_units``) an equal count of units in order (MLAS
    ``MLAS_NCHWC_GROUPED_CONV_ALGORITHM::PrepareWork``). A last set with fewer blocks makes its units
    cheaper, so the thread holding it waits for the other, but not in proportion to its blocks: fewer
    filters share each input load, so a set runs at the calibrated thin-product pace of a product that
    wide (``_set_cost``). Two threads: 400 output channels at 7 x 7 (six sets of four blocks and one
    of one) 0.875 busy by blocks, 160 at 14 x 14 (4, 4, 2) 0.833; weighted by the thin-product curve
    of a 2-core EPYC (16 channels at 0.58 of 64's pace, 32 at 0.89) 0.90 and 0.85. In networks on that
    VM (node profiler, nine networks), layers split 0.8-0.9 went from 0.84 to 0.95 of their measured
    time, 0.9-1 from 0.90 to 0.94, those below 0.8 (a last set of one block) from 0.77 to 1.04 (1.17
    split by blocks alone). A convolution reading the image (``reads_image``, its own kernel) is not
    split: SqueezeNet 1.0's 96-filter stem (sets of 4 and 2 at 111 rows) took 661 us where the even
    estimate said 689 and the split one 919. 1.0 for any other layer or profile (no blocked layout)."""
    w = layer.workload
    if hw.cpu_layout is None or not w.conv or w.gemm is None or hw.compute_units <= 1 \
            or w.family not in ("conv", "grouped_conv", "depthwise_conv") or layer.op_type.split("+")[0] != "Conv" \
            or w.dtype != "float32" or w.operands or _unblocked(w, hw) or reads_image(w, hw):
        return 1.0  # the blocked kernels are float Conv's (an 8-bit convolution runs kernels of its own)
    shape = layer.output_shape
    if not shape or len(shape) != 4:
        return 1.0
    batch, rows = int(shape[0]), int(shape[2])
    groups = max(w.gemm.count, 1)
    block = hw.cpu_layout[0]
    if w.family == "depthwise_conv":
        return rules.static_split_share(((rows, 1.0),), batch * -(-groups // block), hw.compute_units)
    blocks = -(-w.gemm.n // block)  # the product's output channels per group (a width what-if changes them)
    sets = [min(FILTER_SET_BLOCKS, blocks - i) for i in range(0, blocks, FILTER_SET_BLOCKS)]
    return rules.static_split_share(tuple((rows, _set_cost(b, block, hw)) for b in sets), batch * groups,
                                    hw.compute_units)


def _set_cost(blocks: int, block: int, hw: HardwareProfile) -> float:
    """What one unit of a set of ``blocks`` filter blocks costs, in full-set blocks: its blocks at the
    thin-product pace (``matrix_nk_efficiency``) of a product ``blocks`` x ``block`` wide, relative to
    a full set's; in proportion to its blocks on a profile without that curve."""
    if not hw.matrix_nk_efficiency:
        return float(blocks)
    full = thin_product(FILTER_SET_BLOCKS * block, hw, 1.0)
    return blocks * full / thin_product(blocks * block, hw, 1.0)


def _pixels(layer: Layer) -> int:
    pixels = 1
    for d in (layer.output_shape or ())[2:]:
        pixels *= int(d)
    return max(pixels, 1)


def reads_image(w: Workload, hw: HardwareProfile) -> bool:
    """A plain convolution with fewer input channels than one block of the CPU's blocked layout (a
    network's first layer, reading the image as it is; also a squeeze-excite's expansion from a few
    channels): the runtime runs a kernel of its own for it."""
    return hw.cpu_layout is not None and rules.reads_nchw(w, hw.cpu_layout[0]) and not _unblocked(w, hw)


def _image_efficiency(layer: Layer, hw: HardwareProfile) -> float | None:
    """The image kernel's pace follows the work per output pixel: the ``conv.rgb`` curve, keyed by input
    channels x kernel area x output channels (the MACs of one output pixel), when the profile has it;
    a 1 x 1 kernel takes ``conv.rgb_k1`` (same key) when calibrated. None for any other layer or
    without the curve."""
    w = layer.workload
    curve = hw.shape_efficiency.get("conv.rgb") if hw.shape_efficiency else None
    if tuple(w.conv[1:3]) == (1, 1) and hw.shape_efficiency and "conv.rgb_k1" in hw.shape_efficiency:
        curve = hw.shape_efficiency["conv.rgb_k1"]  # a 1 x 1 kernel: its own, slower pace (micro.NARROW_K1)
    if not curve or not reads_image(w, hw):
        return None
    return rules.interp_log(w.gemm.k * w.gemm.n, curve)


def _pixel_efficiency(layer: Layer, hw: HardwareProfile) -> float | None:
    """A plain convolution the CPU's blocked layout takes, by output pixels: its kernel walks output
    rows, so a 7 x 7 map runs below the pace of a 56 x 56 one (``conv.k1`` for 1 x 1 kernels,
    ``conv.k1s2`` for strided ones when the profile has it, ``conv.k3`` for the rest). None without
    such a curve or for any other layer."""
    w = layer.workload
    if w.family != "conv" or not w.conv or not hw.shape_efficiency:
        return None
    if tuple(w.conv[1:3]) == (1, 1):
        # a strided 1 x 1 kernel walks one output row at a time over a strided input: its own curve
        # when calibrated (ResNet's downsampling shortcuts)
        strided = w.conv[3] > 1 or w.conv[4] > 1
        curve = (strided and hw.shape_efficiency.get("conv.k1s2")) or hw.shape_efficiency.get("conv.k1")
    else:
        curve = hw.shape_efficiency.get("conv.k3")
    return None if not curve or _unblocked(w, hw) else rules.interp_log(_pixels(layer), curve)


def _plain_curve(family: str, side: int, hw: HardwareProfile, kernels=None,
                 stride: int = 1) -> tuple[int, tuple] | None:
    """(kernel size, points) of the calibrated plain-kernel curve (``<family>.unblocked_k<kernel>``; a strided
    layer's ``...k<kernel>s2`` when the profile has one) of the kernel size nearest ``side`` (the smaller on
    a tie), among ``kernels`` when given; None when the profile has none."""
    plain = []
    for k, pts in hw.shape_efficiency.items():
        if k.startswith(f"{family}.unblocked_k"):
            kernel, _, st = k.split("_k")[1].partition("s")
            plain.append((int(kernel), int(st or 1), pts))
    plain = [kp for kp in plain if kernels is None or kp[0] in kernels]
    strided = [kp for kp in plain if kp[1] > 1]
    plain = strided if stride > 1 and strided else [kp for kp in plain if kp[1] == 1]
    best = min(plain, key=lambda kp: (abs(kp[0] - side), kp[0])) if plain else None
    return None if best is None else (best[0], best[2])


def _plain_conv(family: str, side: int, pixels: int, hw: HardwareProfile, stride: int = 1) -> float | None:
    """The calibrated plain-kernel figure (``_plain_curve``) at ``pixels`` output pixels; None when the
    profile has none."""
    curve = _plain_curve(family, side, hw, stride=stride)
    return None if curve is None else rules.interp_log(pixels, curve[1])


def plain_depthwise(w: Workload, hw: HardwareProfile) -> bool:
    """A 2-D depthwise convolution a calibrated CPU's blocked layout does not take, priced by the plain kernel's
    curves ('depthwise_conv.unblocked_k<kernel>', '...s2' for a strided one). ONNX Runtime runs it as MLAS's
    expand-then-GEMM one channel at a time (convolve.cpp: the taps of each output expanded into a buffer, then a
    one-row product), so its time follows the taps it expands and a fixed cost per channel, not its bytes or
    where they come from: its curves' figures apply to its math (``scoring._paced``), and a stride-2 one, whose
    expansion gathers every other input, has its own. Timed alone (a 2-core EPYC VM, weights dequantized at run
    time): 960 channels at 7 x 7 took 102 us, in MobileNetV2's QDQ model 103, where the roofline with the
    input read from the cache said 65; per tap and output a stride-2 layer took 1.0-1.1x a stride-1 one's time
    at 49 output pixels, 1.6x at 196, 1.8x at 784 and 2.6x at 3,136. A 1-D or 3-D depthwise one (a speech model's
    Conv1d) runs the same kernel. A profile calibrated before those curves were read against the math
    (``stale_plain_curves``) keeps its figures on the roofline they were read against."""
    return _plain_depthwise_kernel(w, hw) and not stale_plain_curves(hw)


def _plain_depthwise_kernel(w: Workload, hw: HardwareProfile) -> bool:
    """A depthwise convolution the profile prices by the plain kernel's curve (``plain_depthwise``)."""
    if w.family != "depthwise_conv" or hw.cpu_layout is None:
        return False
    side = max(w.conv[1], w.conv[2]) if w.conv else _plain_kernel_size(w)
    return bool(side) and (not w.conv or _unblocked(w, hw)) and _plain_curve("depthwise_conv", side, hw) is not None


def stale_plain_curves(hw: HardwareProfile) -> bool:
    """A calibrated profile (its ``measured`` record) with no stride-2 plain depthwise curve: calibrated before
    calibrate timed one and read the plain depthwise curves against the layers' math, so its figures are the
    roofline's."""
    return bool(hw.measured) and not any(k.startswith("depthwise_conv.unblocked_k") and k.endswith("s2")
                                         for k in hw.shape_efficiency)


def missing_conv_figures(w: Workload, hw: HardwareProfile) -> list[str]:
    """What a calibrated CPU profile lacks to price convolution ``w`` as its runtime runs it (the report's
    missing-figure note): the 8-bit depthwise kernel's share, the generic one's (a profile calibrated before
    calibrate timed it prices every channel count at the fast kernel's share), and plain depthwise curves read
    against the math (``stale_plain_curves``)."""
    out = []
    if hw.int8_operands and w.family == "depthwise_conv" and "int8" in w.dtype:
        if hw.int8_depthwise_share is None:
            out.append("8-bit depthwise convolution (QLinearConv)")
        elif hw.int8_depthwise_generic is None:
            out.append("8-bit depthwise convolution's generic kernel (QLinearConv on a channel count its fast "
                       "kernel does not take)")
    if _plain_depthwise_kernel(w, hw) and stale_plain_curves(hw):
        out.append("depthwise convolution its blocked layout refuses (the plain kernel's curves by stride, "
                   "read against its math)")
    return out


def _plain_kernel_size(w: Workload) -> int:
    """The kernel size a 1-D or 3-D convolution's kernel name carries ("Conv1d.k3": 3), 0 for any other."""
    head, _, size = w.kernel.rpartition(".k")
    return int(size) if head.startswith("Conv") and size.isdigit() else 0


def _plain_width(plain: float, w: Workload, side: int, hw: HardwareProfile) -> float:
    """The plain kernel's figure ``plain`` for a convolution as wide as ``w``. That kernel expands the input
    and runs one product min(output channels, input channels x window) wide, and its curve was timed on
    UNBLOCKED_CONVS' narrow channel counts (18 channels for 3 x 3: a product 18 wide): a wider product runs
    as much faster as the thin-product curve says (up to the convolution family's figure), a narrower one
    slower. ONNX Runtime 1.32 ran ResNet-50's 64- to 512-channel 3 x 3 convolutions whose weights a QDQ model
    dequantizes at run time (plain kernels) at 0.65-0.7 of the calibrated peak, where the 18-channel curve
    gave 0.4 (a 2-core EPYC VM: 615 us measured, 1,025 estimated for 64 channels at 56 x 56)."""
    curve = _plain_curve(w.family, side, hw)
    timed = dict((k, ch) for k, ch, _side in UNBLOCKED_CONVS).get(curve[0]) if curve else None
    if not timed or not hw.matrix_nk_efficiency or w.gemm is None:
        return plain
    family = hw.efficiency.get("conv", 1.0)
    width = min(w.gemm.n, w.gemm.k)
    return min(max(family, plain), plain * thin_product(width, hw, family) / thin_product(timed, hw, family))


def shape_efficiency(layer: Layer, hw: HardwareProfile) -> float | None:
    """The calibrated figure for this convolution's (or pool's) shape that replaces the family's, when
    the profile has one: a row normalisation by its row length (``norm.row``); a pool, a plain or
    depthwise convolution the CPU's blocked layout cannot take (a 1-D or 3-D one never)
    (``pool.unblocked``, ``<family>.unblocked_k<kernel>``); depthwise by kernel and stride (the nearest kernel size measured with that stride), log-interpolated in
    output pixels; grouped by stride (stride-2 curves when calibrated), input channels per group
    (log-interpolated between the measured widths) and output pixels. None when the profile has no such curve."""
    w = layer.workload
    if w.family == "pool" and hw.shape_efficiency and hw.cpu_layout is not None:
        return _plain_pool_efficiency(layer, hw)
    if w.family == "norm" and w.row and "norm.row" in hw.shape_efficiency:
        # a normalisation pays per row too: short rows (ConvNeXt's 96 channels) cost more per element
        return rules.interp_log(w.row, hw.shape_efficiency["norm.row"])
    curve = serial_curve(w, hw) if w.family == "movement" else None
    if curve:
        return _concat_efficiency(w, hw, curve)
    if w.family in ("conv", "depthwise_conv") and not w.conv and _plain_kernel_size(w) \
            and hw.cpu_layout is not None and hw.shape_efficiency:
        # a 1-D or 3-D convolution (R3D-18's, S3D's): ONNX Runtime's blocked kernels are 2-D only, so
        # it runs the plain kernel (its input expanded, then a product), as an unblocked 2-D one does
        return _plain_conv(w.family, _plain_kernel_size(w), _pixels(layer), hw)
    if not hw.shape_efficiency or not w.conv or w.family not in ("conv", "depthwise_conv", "grouped_conv"):
        return None
    cin_g, kh, kw, sh, _sw, _dil = w.conv
    pixels = _pixels(layer)
    if w.family in ("conv", "depthwise_conv") and _unblocked(w, hw):
        # a convolution the blocked layout cannot take runs the plain kernel, measured apart
        plain = _plain_conv(w.family, max(kh, kw), pixels, hw, stride=max(sh, w.conv[4]))
        if plain is not None:
            return _plain_width(plain, w, max(kh, kw), hw) if w.family == "conv" else plain
    if w.family == "conv":
        return None  # a blocked one: the pixel curve (_pixel_efficiency) lowers the family's figure
    if w.family == "grouped_conv":
        curves = _grouped_curves(w, hw)
        widths = sorted(curves.get(min(sh, 2)) or curves.get(1) or [])
        if not widths:
            return None
        return rules.interp_log(cin_g, tuple((gw, rules.interp_log(pixels, pts)) for gw, pts in widths))
    measured = [k for k in hw.shape_efficiency if k.startswith("depthwise_conv.k")]
    same_stride = [k for k in measured if k.endswith(f"s{min(sh, 2)}")] or measured
    if not same_stride:
        return None
    key = min(same_stride, key=lambda k: (abs(int(k.split(".k")[1].split("s")[0]) - max(kh, kw)), k))
    return rules.interp_log(pixels, hw.shape_efficiency[key])


def _grouped_curves(w: Workload, hw: HardwareProfile) -> dict:
    """The calibrated grouped curves a grouped convolution reads, by stride: 'grouped_conv.w<width>'
    (stride 1) and '...w<width>s2' (stride 2), as [(width, points)]. Only the widths the blocked layout
    treats as it treats this layer: the runtime runs a width it takes (a multiple of the measured
    ``grouped_min_width``) with its blocked kernel and any other with its plain one (input expanded,
    one product per group), whatever lies between the widths measured. A width of 24 on a 16-channel
    block is plain: read between the narrower plain widths (4, 8) and the plain convolution of the
    nearest kernel (``UNBLOCKED_CONVS``, its channels as the width), not between the blocked 16 and 32
    (ONNX Runtime 1.32, AVX-512: RegNetY-1.6GF's 24-wide 3 x 3 layers took 2.0-2.4x the blocked
    widths' estimate). Without a layout, or with no curve of the layer's kind: every width."""
    every: dict = {}
    for k, pts in hw.shape_efficiency.items():
        if k.startswith("grouped_conv.w"):
            width, _, stride = k.split(".w")[1].partition("s")
            every.setdefault(int(stride or 1), []).append((int(width), pts))
    if hw.cpu_layout is None:
        return every
    grouped_min = hw.cpu_layout[1]
    blocked = not _unblocked(w, hw)
    same = {st: [(gw, pts) for gw, pts in v if rules.grouped_width_blocked(gw, grouped_min) == blocked]
            for st, v in every.items()}
    channels = {k: ch for k, ch, _side in UNBLOCKED_CONVS}  # the plain convolutions calibrate times
    curve = _plain_curve("conv", max(w.conv[1], w.conv[2]), hw, channels) if not blocked and w.conv else None
    if curve is not None:
        kernel, pts = curve
        for st in same:
            if not any(gw >= channels[kernel] for gw, _ in same[st]):
                same[st].append((channels[kernel], pts))
    same = {st: v for st, v in same.items() if v}
    return same or every


# ONNX Runtime copies each input of a Concat on its thread pool only when the copy's estimated cost
# (its Eigen cost model: 11/64 cycle per byte loaded or stored and one per element) reaches the
# 210,000 cycles two threads take (100,000 to start, 100,000 more per thread): 88,000 float32
# elements. Timed (eight inputs at 28 x 28, 2 threads): 307 KB inputs copied at one thread's pace
# whatever the thread count, 357 KB ones twice as fast with two threads as with one
PARALLEL_COPY_CYCLES = 210_000


# ONNX Runtime's CPU Split copies each output's rows with memcpy on the calling thread, never on its
# thread pool (split.cc: one CopyMatrix per output): all of it at one thread's copy pace. Swin V2's
# window rolls and qkv splits (2-core EPYC VM) took 2.2-3x the two-thread copy estimate
SPLIT_KERNEL = "Split"
# ... and so does its Transpose of a permutation that keeps the axes larger than 1 in order (its
# IsTransposeReshape: one CopyCpuTensor, a memcpy; vocab.TRANSPOSE_RESHAPE): [1, 197, 768] -> [197, 1, 768] took
# 30-41 us on the VM (40 GB/s read and written), as a one-node model and between two Adds, static batch or symbolic
ONE_THREAD_COPIES = (SPLIT_KERNEL, TRANSPOSE_RESHAPE)


def serial_pieces_share(w: Workload) -> float:
    """Share of a Concat's elements in inputs small enough for a CPU runtime to copy with one thread
    (a Split: all of them)."""
    if w.kernel in ONE_THREAD_COPIES:
        return 1.0
    total = sum(w.pieces)
    if not total:
        return 0.0
    return sum(p for p in w.pieces if one_thread(p, w.dtype)) / total


def one_thread(elements: int, dtype: str) -> bool:
    """Whether ONNX Runtime's thread pool runs a loop over ``elements`` (a copy, an elementwise op's
    spans) on the calling thread alone: it splits a loop only when Eigen's cost model puts it at
    PARALLEL_COPY_CYCLES or more (one cycle per element, 11/64 per byte read and per byte written;
    88,000 float32 elements)."""
    return elements * (1.0 + 2 * 11 / 64 * DTYPE_BITS.get(dtype, 32) / 8) < PARALLEL_COPY_CYCLES


def serial_curve(w: Workload, hw: HardwareProfile):
    """The calibrated one-thread copy curve ('movement.serial') when it applies to this Concat, Split or
    reshaping Transpose's copy."""
    if not (w.pieces or w.kernel in ONE_THREAD_COPIES) or not hw.shape_efficiency:
        return None
    curve = hw.shape_efficiency.get("movement.serial")
    return curve if curve and serial_pieces_share(w) > 0 else None


def _concat_efficiency(w: Workload, hw: HardwareProfile, curve) -> float:
    """A Concat whose small inputs are copied by one thread (a Split: all of it): those bytes at the
    'movement.serial' curve's fraction for the Concat's working set (KB read and written; calibrated on Concats of 16
    such inputs, so a few microseconds per input are in it), the rest at the movement family's figure
    (in cache; beyond it the bandwidth curve already holds the copy's pace). Time-weighted."""
    share = serial_pieces_share(w)
    ws = w.act_bytes_read + w.bytes_written
    serial = rules.interp_log(max(ws // 1000, 1), curve)
    cache = (hw.onchip_mb or 0) * 1e6
    parallel = hw.efficiency.get("movement", 1.0) if ws <= cache or not hw.bandwidth_curve else 1.0
    return 1.0 / (share / serial + (1.0 - share) / parallel)


def _plain_pool_efficiency(layer: Layer, hw: HardwareProfile) -> float | None:
    """A pooling layer the blocked layout does not take runs the plain kernel, calibrated apart
    (``pool.unblocked``, log-interpolated in output pixels)."""
    shape = layer.output_shape or ()
    pts = hw.shape_efficiency.get("pool.unblocked")
    if not pts or len(shape) != 4 or rules.blocked_pool(int(shape[1]), hw.cpu_layout[0], hw.cpu_layout[3]):
        return None
    return rules.interp_log(_pixels(layer), pts)


# the columns a calibrated subnormal_ns.matmul figure was measured at (a Swin head's width): each
# subnormal value of the left operand is multiplied into every column of its row
SUBNORMAL_COLUMNS = 32


def broadcast_span_time(layer: Layer, hw: HardwareProfile, paced: float) -> float:
    """A binary op whose inputs broadcast calls its vector loop once per span
    (``ops.elementwise.broadcast_spans``), and each call costs a fixed time the stream does not show:
    ONNX Runtime on a 2-core EPYC VM added a 96-wide bias to 393,216 elements in 38 us against 29 for
    the same count in 768-wide spans and 96 in 16-wide ones, 2.8 ns a span on top of the stream
    (``loop_ns`` 'Broadcast.span', timed by calibrate as the difference of two such adds). An operand
    read as a vector in every span is read again each time (``Workload.rereads``), from cache at the
    pace the layer streams its own bytes: the 768-wide bias add took what an Add of two [512, 768]
    tensors takes (26 against 27 us), not the two thirds its bytes say. Out of cache the stream from
    memory hides those reads. A fused group has no such loop (its anchor's kernel applies the op); a
    profile without the figure (calibrated before it, or not calibrated) prices none of it.

    The figure is timed on 393,216 elements, which the runtime splits over all its threads; an op too
    small to be split (``one_thread``) makes every call on one thread: the spans cost the profile's
    threads times the figure. A [4096, 20] minus a [20] row on the 2-core VM: 48 us an op (a chain of
    16) where the threads' figure said 33; [512, 20]: 6.7 us against 4.4."""
    w = layer.workload
    if w.kernel != BROADCAST_SPANS or "+" in layer.op_type or BROADCAST_SPANS not in hw.loop_ns:
        return 0.0
    t = w.loop_items * hw.loop_ns[BROADCAST_SPANS] * 1e-9
    if hw.compute_units > 1 and w.parallel_work and one_thread(w.parallel_work, w.dtype):  # its output elements
        t *= hw.compute_units
    moved = w.act_bytes_read + w.weight_bytes + w.bytes_written
    if w.rereads and moved and w.act_bytes_read + w.bytes_written <= (hw.onchip_mb or 0) * 1e6:
        t += paced * w.rereads / moved
    return t


def loop_figure(kernel: str) -> str:
    """What a loop kernel's calibrated figure (``loop_ns``) prices, as a note names it when a profile lacks it."""
    if kernel == BROADCAST_SPANS:
        return "broadcasting binary op (its spans' fixed time)"
    if kernel == TRANSPOSE_BLOCKS:
        return "Transpose copying runs of elements (its fixed time per run)"
    if kernel == TRANSPOSE_PLANES:
        return "Transpose of many 2-D planes (its fixed time per plane)"
    return f"{kernel} (its time per weight)" if kernel in NBITS_KERNELS else f"{kernel} (a loop over its outputs)"


def _calls_priced(layer: Layer, hw: HardwareProfile, kernels: tuple[str, ...]) -> bool:
    """Whether ``layer`` is, alone, a Transpose of one of ``kernels`` whose calls the profile times (``loop_ns``)."""
    return layer.workload.kernel in kernels and "+" not in layer.op_type and layer.workload.kernel in hw.loop_ns


def block_copies(layer: Layer, hw: HardwareProfile) -> bool:
    """Whether ``layer`` is a Transpose that copies runs of several elements (``ops.transpose.copied_blocks``)
    on a profile with their calibrated time per run (``loop_ns`` 'Transpose.blocks')."""
    return _calls_priced(layer, hw, (TRANSPOSE_BLOCKS,))


def transpose_calls_time(layer: Layer, hw: HardwareProfile) -> float:
    """Seconds a Transpose spends on the calls it makes beyond its bytes: the copy of each run of several elements
    it copies one by one, on top of those bytes at the movement family's pace (``ops.transpose.copied_blocks``;
    ``loop_ns`` 'Transpose.blocks', timed by calibrate on runs of 4 float32 elements, where the calls are 0.93 of
    the time), or the 2-D transposes of its many planes past the first (``ops.transpose.transposed_planes``;
    'Transpose.planes', timed on 3,136 planes of 8 x 12; the 2-D figure it keeps holds one plane's call). ONNX
    Runtime 1.32 on a 2-core EPYC VM (2 threads), 786,432 float32 elements moved by (0, 2, 1, 3): runs of 4
    0.89 ms, 16 0.30, 64 0.11, 768 0.06; the 2-D transpose's figure (op_efficiency 'Transpose', timed on NCHW ->
    NHWC), which every Transpose took before, had the 64-wide runs of BERT's and ViT's attention heads at
    1.8-2.0x their time and ShuffleNetV2's channel shuffles at 2.4x, and the 4-wide ones at 0.16x. A profile
    without the figure prices none of it (and every Transpose as before)."""
    w = layer.workload
    if not _calls_priced(layer, hw, (TRANSPOSE_BLOCKS, TRANSPOSE_PLANES)):
        return 0.0
    calls = w.loop_items if w.kernel == TRANSPOSE_BLOCKS else max(w.loop_items - 1, 0)
    return calls * hw.loop_ns[w.kernel] * 1e-9


def subnormal_time(w: Workload, hw: HardwareProfile) -> float:
    """Seconds a CPU spends on the subnormal float32 values a Softmax writes or the MatMul after it
    multiplies (``Workload.subnormals``; ``dnnperf.load.masks``), at the profile's calibrated cost
    per value (``subnormal_ns``; 0 where the CPU flushes them or was not calibrated)."""
    if not w.subnormals or not hw.subnormal_ns:
        return 0.0
    if w.family == "softmax":
        return w.subnormals * hw.subnormal_ns.get("softmax", 0.0) * 1e-9
    if w.gemm is not None:
        return w.subnormals * hw.subnormal_ns.get("matmul", 0.0) * 1e-9 * w.gemm.n / SUBNORMAL_COLUMNS
    return 0.0


def epilogue_activations(layer: Layer, hw: HardwareProfile) -> list[str]:
    """The fused activations a calibrated CPU (one with a blocked layout) applies to this matrix
    layer's finished output in a pass of their own (``vocab.EPILOGUE_ACTIVATIONS``: every fused one
    but Relu, which the kernel applies in its own loop, free)."""
    if hw.cpu_layout is None or not layer.workload.is_matrix or "+" not in layer.op_type:
        return []
    return [op for op in layer.op_type.split("+")[1:] if op in EPILOGUE_ACTIVATIONS]


def epilogue_pass(layer: Layer, hw: HardwareProfile) -> float:
    """A calibrated CPU's convolution or GEMM fused with an activation other than Relu (Clip as ReLU6,
    HardSwish, HardSigmoid, LeakyRelu, Sigmoid, Tanh) applies it in a second pass over each finished
    piece of output while it is still in cache. Its cost per output element is measured by calibrate
    (``epilogue_ns``: a 1 x 1 convolution chain with and without the activation); a profile without
    that figure gets the output read and written once more at the on-chip bandwidth, at the op's own
    calibrated pace when it has one (Sigmoid, Tanh: transcendental). Timed alone on an AMD VM (1 x 1,
    3 x 3 and depthwise convolutions, 0.2-4.8 MB of output): Relu adds nothing, Clip 85-92 us on a 4.8 MB
    output, Sigmoid 2.2x that (bench/RESULTS.md, "Thirteenth session"); on an Intel VM every one of them
    cost 2-3x that pass (0.28-0.44 ns per element against 0.14), HardSwish 0.52 ms of
    mobilenet_v3_large's 6.1 ms (its HardSwish layers made Relu), estimated at 0.23 ms by the pass."""
    w = layer.workload
    acts = epilogue_activations(layer, hw)
    if not acts or not layer.output_shape:
        return 0.0
    elements = 1
    for d in layer.output_shape:
        elements *= int(d)
    t = 0.0
    for op in acts:
        if op in hw.epilogue_ns:
            t += elements * hw.epilogue_ns[op] * 1e-9
        elif hw.onchip_gbs:  # one read and write of the output in cache, at the op's own pace
            one_pass = 2 * elements * DTYPE_BITS.get(w.dtype, 32) / 8 / (hw.onchip_gbs * 1e9)
            t += one_pass / min(1.0, hw.op_efficiency.get(op, 1.0))
    return t
