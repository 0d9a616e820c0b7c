"""The micro-benchmark table ``dnnperf calibrate`` runs: one-node ONNX models, each entry carrying
the work it does (ops, bytes) so that the figure it measures is ``ops / t`` or ``bytes / t``.

Roles: ``peak`` (matrix throughput), ``dram`` / ``onchip`` (bandwidth; ``onchip`` sweeps the working
set to find the cache capacity), ``dispatch`` (per-op cost), ``host`` (a runtime's cost per op of
shape arithmetic on symbolic input dims: an exported channel shuffle over a symbolic and a static dim),
``cold`` (weight streaming behind math), ``cold_conv`` (convolution weights read back from DRAM),
``fixed`` (a family's fixed time per kernel: a chain of tiny ops), ``family`` (one op family's
efficiency against the roofline), ``op`` (one slow elementwise op), ``kernel`` (a chain of the plain
ops the runtime fuses into one kernel of its own), ``m_curve`` (GEMMs with few rows), ``nk_curve``
(GEMMs thin in N and K: few channels), ``shape`` (depthwise, grouped and plain blocked convolutions,
plain pooling, row norms, by shape: key ``<profile shape_efficiency key>:<x>``), ``epilogue`` (a
convolution chain with an activation the kernel applies in a pass of its own, key the activation, or
none), ``probe`` (not timed: a depthwise convolution or a pool whose layout conversions, or their
absence, show the runtime's channel alignment), ``reorder`` (not timed: a chain whose conversions
inside it give the pace of the runtime's layout conversions, key the tensor's pixels).

Why one module this long: it is a table; each entry's builder sits next to the constants that
size it, and calibrate reads them all as one list.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

# the head width of the MatMul after the Softmax; min(N, K) of the matmul family's products
from dnnperf.efficiency import NARROW_K1_CHANNELS, SUBNORMAL_COLUMNS, UNBLOCKED_CONVS, WIDE_PRODUCT
from dnnperf.vocab import EPILOGUE_ACTIVATIONS, INT8_OPERANDS
from dnnperf.upcast import HALF_LOOPS

M_ROWS = (1, 4, 16, 49, 128, 512)
# thin in N and K (few channels) at M = 3136: a curve of its own (matrix_nk_efficiency); merged with
# the row curve under min(M, N, K), a 16-channel convolution read the 16-row GEMM's 1.0 and ran at
# ~0.45 of the roof
NK_DIMS = (8, 16, 24, 32, 48, 64)
# depthwise convolutions by (kernel, stride, output side, channels): the shapes of inverted-residual
# blocks at the resolutions where a 224 x 224 network has them
DEPTHWISE = ((3, 1, 112, 32), (3, 1, 28, 192), (3, 1, 7, 960), (3, 2, 56, 96), (3, 2, 14, 240),
             (5, 1, 28, 240), (5, 1, 7, 1152), (5, 2, 14, 240), (5, 2, 7, 672), (7, 1, 56, 96), (7, 1, 7, 768))
# channel counts of 2 mod 4 fit no blocked layout (ONNX Runtime pads multiples of 4 up to its block)
UNBLOCKED = UNBLOCKED_CONVS  # plain convolutions: (kernel, channels, side)
# LayerNorm over rows of these lengths (ConvNeXt and Swin stages, up to the 768-wide rows of a ViT),
# as many elements as the norm family's representative ([1, 197, 768], the 768 point is that shape):
# a normalisation also pays per row, so short rows run slower per element
NORM_ROWS = (96, 192, 384, 768)
NORM_ELEMENTS = 197 * 768
# depthwise: (kernel, stride, output side, channels); the plain kernel expands each channel's taps, a strided
# one gathering every other input (its own curve, '...s2'), and the 56 x 56 points hold the rise in pace past
# 784 output pixels (0.083 ns a tap and output at 28 x 28, 0.059 at 56 x 56 on a 2-core EPYC VM)
DW_UNBLOCKED = ((3, 1, 28, 58), (3, 1, 7, 234), (3, 1, 56, 58), (3, 2, 28, 58), (3, 2, 7, 234), (3, 2, 56, 58))
LAYOUT_PROBES = (50, 52, 56, 64)  # depthwise channel counts whose layout conversions tell the alignment
POOL_PROBES = (24, 32)  # ... and pooling's own channel multiple (it is not padded like a convolution)
# conversions into and out of the blocked layout inside a chain (dnnperf.measure.reorder), by the
# tensor's pixels: (channels, side). A network converts large maps (EfficientNet's 112 x 112 and 56 x 56
# expansions) and small ones with many channels (its 7 x 7 squeeze-excite stages): the small ones
# run further below a copy's pace (the node profiler on the reference VM: 1,152 x 7 x 7 at 0.55 of
# the cache sweep's bandwidth, 64 x 56 x 56 at ~1.0)
REORDER_PROBES = ((512, 7), (64, 56))
POOL_UNBLOCKED = ((58, 56), (58, 112))  # plain max pools: (channels, input side); 58 = 2 mod 4, never blocked
CACHE_SWEEP_KB = (768, 1536, 3072, 6144, 12288, 24576, 49152)
SWEEP_CHAIN = 8  # adds per cache-sweep job
# 3 x 3 grouped convolutions by (input channels per group, output side): widths of ResNeXt / RegNet
# stages, and for the common widths the resolution too (a wide im2col spills the cache), down to the
# last stage's 7 x 7 (where a width-8 chain ran at 0.78-0.83 of what the 14 x 14 point, held flat below
# it, predicted). Timed as chains (each reading the one before, as in a network) of a ResNeXt stage's
# channels at that side (GROUPED_CHANNELS): eight copies of one 128-channel convolution on the same
# input, with the layout share calibrate subtracts, put RegNet's 16-wide layers at 288 x 14 x 14 and
# 672 x 7 x 7 at 0.71 and 0.63 of their measured time in the networks. Every stage of ResNeXt-50 32x4d (4 @ 56,
# 8 @ 28, 16 @ 14, 32 @ 7) and of ResNeXt-101 32x8d (8 @ 56, 16 @ 28, 32 @ 14, 64 @ 7) is a point of its
# own: a width's curve is held flat beyond its measured sides, and the pace at few pixels depends on the
# width (reference VM, one calibration: width 16 at 0.43 of the roof on 7 x 7 and 0.71 on 14 x 14, width
# 32 at 0.66 and 0.93, width 64 at 0.95 and 1.0), so no width's fall-off stands in for another's.
# ResNeXt-50's last stage ran 1.5-1.7x its estimate in five runs while width 32 had its 28 x 28 point only
GROUPED = ((4, 56), (4, 28), (8, 56), (8, 28), (8, 14), (8, 7), (16, 56), (16, 28), (16, 14), (16, 7), (32, 28),
           (32, 14), (32, 7), (64, 14), (64, 7))
GROUPED_CHANNELS = {56: 128, 28: 256, 14: 512, 7: 1024}
# ... and with stride 2 (the first block of every RegNet / ResNeXt stage), 128 channels, one
# convolution repeated: (width, output side)
GROUPED_S2 = ((8, 56), (8, 14), (8, 7), (16, 28), (16, 14))
# Concats of CONCAT_INPUTS inputs each small enough for the runtime to copy with one thread
# (efficiency.PARALLEL_COPY_CYCLES), as DenseNet's have them: (channels per input, side); the
# 'movement.serial' curve's points at the KB each reads and writes (401, 1,605, 3,211 and 6,422). Timed here:
# 16 x 50 KB inputs 58 GB/s, 8 x 200 KB 28 GB/s, where two 1.6 MB inputs (copied by both threads)
# reached 125-130 GB/s; DenseNet-121's 58 Concats took 2.2-2.4 ms against 0.8-1.0 estimated
CONCAT_SERIAL = ((16, 14), (16, 28), (32, 28), (64, 28))
CONCAT_INPUTS = 16
# unary and binary ops timed one by one (op_efficiency): ONNX Runtime runs the ones past Sqrt element by
# element with the C library's functions, on one 2-core EPYC VM at 1.3-8.4 ns an element (Softplus
# 8.4, Sin / Cos 2.7, Elu / Celu / Sign 1.8-2.0, Log 1.6) where Sigmoid takes 0.37: Mamba's two Softplus
# layers ran 57 us each against 1.6 estimated
OP_MICRO = ("Pow", "Tanh", "Erf", "Exp", "Sigmoid", "Div", "Sqrt", "Log", "Softplus", "Elu", "Selu", "Celu", "Sin",
            "Cos", "Atan", "Sign", "Max", "Min", "Floor", "Ceil", "Round", "LeakyRelu", "HardSwish", "Reciprocal",
            "Softsign")
# ... the second group slower than an Add of the same bytes, the elementwise family's figure (2-core EPYC VM,
# 393,216 elements in cache: Relu / Abs / Neg / Clip 18-20 us, HardSigmoid 24, Add 29 with its second
# input, Reciprocal 34, Softsign 36, LeakyRelu 41, Max 43, HardSwish 50, Floor 52, Min 75)
OP_BINARY = ("Pow", "Div", "Max", "Min")  # timed against a scalar second input
# the broadcast spans' fixed time (vocab.BROADCAST_SPANS): the same count of elements (SPAN_ELEMENTS) with a
# bias added in spans of the first width and of the second; the difference over the difference in spans
SPAN_WIDTHS = (16, 768)
SPAN_ELEMENTS = 393216
REDUCE_L2_SHAPE = (9408, 32)  # op_ReduceL2: rows of 32, as F.normalize's over a 32-wide attention head
# activations the blocked CPU convolution applies to its finished output in a pass of its own
# (vocab.EPILOGUE_ACTIVATIONS, efficiency.epilogue_pass): a chain of EPILOGUE_CHAIN 1 x 1 convolutions of EPILOGUE_MAP's channels and
# side, each but the last followed by one, timed against the same chain without them (``epilogue_ns``: ns
# per output element). The last convolution has none: an activation whose output is the graph's is not
# fused (HardSwish there became HardSigmoid + Mul). Timed on this VM at 64 x 56 x 56: Clip 0.28,
# HardSigmoid 0.35, HardSwish 0.37, LeakyRelu 0.44, Sigmoid 0.39, Tanh 0.35 ns per element, where one
# read and write of the output at the cache's bandwidth (the rule without a calibration) is 0.14
EPILOGUE_MAP = (32, 56)
EPILOGUE_CHAIN = 9
# plain blocked convolutions by output side, with a ResNet's channels at that side ((channels,
# side)): the blocked kernel walks output rows, and at 7 x 7 a chain of 512-channel 3 x 3
# convolutions ran at 0.81-0.86 of the GEMM peak where the 14-56 ones ran above it (resnet34's
# last stage on this VM: predicted 0.79x of measured with the thin-product curve alone)
CONV_PIXELS = ((64, 56), (128, 28), (256, 14), (512, 7))
# 1 x 1 ones as a bottleneck has them, expanding and reducing by 4 (ResNet's 256 <-> 64 at 56 x 56 to
# 2048 <-> 512 at 7 x 7): a C -> C chain of them depends on C in no monotonic way (128 -> 128 at 28 x 28
# ran at 0.77-0.81 of the peak, 64 <-> 256 at the same size above 0.97)
CONV1_PIXELS = ((256, 56), (512, 28), (1024, 14), (2048, 7))
# a network's first convolution reads the RGB image as it is (fewer channels than one block): ONNX
# Runtime's blocked layout has a kernel of its own for it, which broadcasts one input value at a time
# against one to four blocks of filters, so its pace follows the work per output pixel (input channels
# x kernel area x output channels, the curve's key). The stems of 224 x 224 networks, (output
# channels, kernel, stride): MobileNet-V3 / MnasNet-0.5 16, EfficientNet / MobileNet-V2 / RegNet 32,
# and ResNet's 7 x 7 64 (which also holds the curve's top: without it a 7 x 7 stem would read the 3 x 3
# points). Timed alone on this VM (the node profiler's kernel time): 3 -> 16 at 0.32 of the roof,
# 3 -> 32 at 0.48, 3 -> 64 7 x 7 at 0.87, where the thin-product curve (27 input values per pixel) had
# put the 3 x 3 ones at ~0.6; one calibration read 0.41, 0.58 and 1.0 (a 3 -> 64 3 x 3 point, 0.73 in a
# trial, is left out: the curve reads 0.70 there between its neighbours)
RGB_STEMS = ((16, 3, 2), (32, 3, 2), (64, 7, 2))
RGB_SIDE = 224
# a 1 x 1 convolution reading fewer channels than one block (MnasNet-0.5's 8 -> 24 expansion at
# 112 x 112) runs the same NCHW-input kernel, but its pace follows the kernel area, not the work per
# pixel: per output pixel and filter block it reads one value per input channel and kernel position,
# and each of those costs more for a 1 x 1 kernel (a new input plane each) than for a 3 x 3 one (rows
# reused). Timed alone on this VM at 112 x 112 (node profiler): 3 -> 32 97 us, 4 -> 24 118, 8 -> 16 125,
# 8 -> 24 187-197, 8 -> 32 178, 12 -> 24 257: 0.09-0.16 of the roof, where the stems' curve (its 432
# point: 0.32-0.40) had 8 -> 24 at 74 us. Their own curve, 'conv.rgb_k1', from that shape: a 1 x 1
# kernel this narrow is memory-bound on the roofline while its time grows with its input channels, so
# a point far from the networks' shape would not carry over. Kept only where 8 channels are fewer than
# one block (16-wide AVX-512 blocks; an 8-wide block takes them as a plain blocked convolution):
# (input channels, output channels)
NARROW_K1 = ((NARROW_K1_CHANNELS, 24),)
CONV_CHAIN = 4  # convolutions per chain (each reads the one before, as in a network)
# 1 x 1 stride-2 convolutions as a ResNet's downsampling shortcuts have them (C -> 2C, input side):
# ONNX Runtime's pointwise kernel walks a strided one output row at a time over a strided input, and
# such a convolution ran 12-20% slower than the stride-1 one with the same output and arithmetic
# (1024 -> 2048 at 14 -> 7: 787 against 696 us; 256 -> 512 at 56 -> 28: 785 against 656 us)
STRIDED_K1 = ((256, 56), (512, 28), (1024, 14))


@dataclass(frozen=True)
class Micro:
    name: str
    model: Any  # onnx.ModelProto
    feeds: dict
    # peak | peak_int8 | dram | onchip | dispatch | host | cold | cold_conv | fixed | family | op | kernel | m_curve | nk_curve
    # | shape | probe | reorder | subnormal | epilogue | loop | span | int8_depthwise | int8_depthwise_generic
    role: str
    key: str = ""  # the family, op type or thin dimension the entry measures
    ops: float = 0.0  # arithmetic ops the kernel does (1 MAC = 2 ops)
    nbytes: float = 0.0  # bytes it must move (inputs read + output written)


def _model(nodes, inputs, outputs, inits=(), opset=17, contrib=False, ml=False):
    from onnx import helper

    g = helper.make_graph(nodes, "calib", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]
                          + ([helper.make_opsetid("com.microsoft", 1)] if contrib else [])
                          + ([helper.make_opsetid("ai.onnx.ml", 3)] if ml else []))
    m.ir_version = 8
    return m


def _forest(trees: int, levels: int, rows: int, rng):
    """``trees`` balanced trees of ``levels`` levels (2^(levels-1) - 1 branches above 2^(levels-1)
    leaves, node ids breadth first) over 16 features, each branch a random feature and threshold."""
    from onnx import helper

    per = 2 ** levels - 1
    branches = 2 ** (levels - 1) - 1
    attrs: dict = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes",
                                   "nodes_truenodeids", "nodes_falsenodeids", "target_treeids", "target_nodeids",
                                   "target_ids", "target_weights")}
    for t in range(trees):
        for i in range(per):
            leaf = i >= branches
            attrs["nodes_treeids"].append(t)
            attrs["nodes_nodeids"].append(i)
            attrs["nodes_featureids"].append(0 if leaf else int(rng.integers(0, 16)))
            attrs["nodes_values"].append(0.0 if leaf else float(rng.standard_normal()))
            attrs["nodes_modes"].append("LEAF" if leaf else "BRANCH_LEQ")
            attrs["nodes_truenodeids"].append(0 if leaf else 2 * i + 1)
            attrs["nodes_falsenodeids"].append(0 if leaf else 2 * i + 2)
            if leaf:
                for k, v in (("target_treeids", t), ("target_nodeids", i), ("target_ids", 0),
                             ("target_weights", float(rng.standard_normal()))):
                    attrs[k].append(v)
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml", n_targets=1, **attrs)
    return _model([node], [_vi("x", [rows, 16])], [_vi("y", [rows, 1])], ml=True)


def _vi(name, shape, dtype=1):
    from onnx import helper

    return helper.make_tensor_value_info(name, dtype, shape)


def _const(name, value: float):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def _ints(name, values, scalar: bool = False):
    """An int64 constant: a list of values, or one value as a 0-d tensor."""
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array(values if not scalar else int(values), dtype=np.int64), name)


def _u8(name, value: int):
    """A uint8 scalar (a quantization zero point)."""
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array(value, dtype=np.uint8), name)


def _w(name, shape, dtype=np.float32, rng=None, scale: float = 1.0):
    from onnx import numpy_helper

    rng = rng or np.random.default_rng(0)
    if np.issubdtype(dtype, np.integer):
        return numpy_helper.from_array(rng.integers(0, 100, size=shape).astype(dtype), name)
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(dtype), name)


def reported_cache_mb() -> float:
    """The largest CPU cache the kernel reports, in MB (4 MB when unknown). On a virtual machine
    this may be the host's shared cache: calibrate measures the capacity instead."""
    return os_cache_mb() or 4.0


def os_cache_mb() -> float | None:
    """The largest CPU cache the kernel reports (sysfs), in MB; None when it reports none."""
    best = 0.0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for d in os.listdir(base):
            try:
                with open(os.path.join(base, d, "size"), encoding="utf-8") as fh:
                    txt = fh.read().strip().upper()
            except OSError:
                continue
            mult = 1e6 if txt.endswith("M") else (1e3 if txt.endswith("K") else 1.0)
            best = max(best, float(txt.rstrip("KMB")) * mult / 1e6)
    except OSError:
        pass
    return best or None


def _matmul(name, m, k, n, role, key="", pairing=""):
    """A float MatMul, or with ``pairing`` ('u8s8': uint8 data x int8 weights, vocab.INT8_OPERANDS) a
    MatMulInteger with int32 output."""
    from onnx import helper

    rng = np.random.default_rng(0)
    if pairing:
        types = {"u8": (2, np.uint8, 0, 255), "s8": (3, np.int8, -128, 127)}
        (ta, na, lo, hi), (_, nb, _, _) = types[pairing[:2]], types[pairing[2:]]
        model = _model([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], [_vi("a", [m, k], ta)],
                       [_vi("y", None, 6)], [_w("b", [k, n], nb)])
        feeds = {"a": rng.integers(lo, hi, (m, k)).astype(na)}
        return Micro(name, model, feeds, role, key, 2.0 * m * n * k, m * k + k * n + 4 * m * n)
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", [m, k])], [_vi("y", None)],
                   [_w("b", [k, n])])
    # a "cold" GEMM is there to stream its weights from DRAM: its bytes are the weights'
    nbytes = 4.0 * k * n if role == "cold" else 4.0 * (m * k + k * n + m * n)
    return Micro(name, model, {"a": rng.standard_normal((m, k)).astype(np.float32)}, role, key,
                 2.0 * m * n * k, nbytes)


# a chain of 1 x 1 convolutions alternating between COLD_CONV channels on COLD_CONV_SIDE^2 pixels (a
# ResNet's last stage), as many of them as it takes for their weights to be as large as the DRAM
# measurement's working set (dram_working_set): each run reads every filter back from DRAM, as a network
# that outgrows the cache does; the share of those reads its math does not hide is
# conv_weight_exposure. On this VM (2 threads): 302 us per convolution (a 4.2 MB filter set) with
# 16.8 MB of weights in the chain, 370 us with 201 MB (the filters alone at the DRAM figure: 114 us),
# where ResNet-101's last-stage 1 x 1 convolutions took 356-372 us in the network, estimated at 282
COLD_CONV = (2048, 512)
COLD_CONV_SIDE = 7


def _cold_conv(quick: bool) -> Micro:
    from onnx import helper, numpy_helper

    big, small = COLD_CONV
    per = big * small * 4
    n = -(-dram_working_set(quick) // per)
    n += n % 2  # an even count: the chain ends at the width it started with
    rng = np.random.default_rng(0)
    base = rng.standard_normal(big * small).astype(np.float32) * 0.01
    nodes, inits = [], []
    for i in range(n):
        cin, cout = (big, small) if i % 2 == 0 else (small, big)
        # distinct filters (the runtime must not share one buffer), made cheaply from one random set
        inits.append(numpy_helper.from_array((base + np.float32(i * 1e-3)).reshape(cout, cin, 1, 1), f"w{i}"))
        nodes.append(helper.make_node("Conv", ["x" if i == 0 else f"t{i - 1}", f"w{i}"],
                                      ["y" if i == n - 1 else f"t{i}"]))
    side = COLD_CONV_SIDE
    model = _model(nodes, [_vi("x", [1, big, side, side])], [_vi("y", None)], inits)
    return Micro("conv_cold", model, {"x": rng.standard_normal((1, big, side, side)).astype(np.float32)}, "cold_conv",
                 ops=2.0 * n * big * small * side * side, nbytes=float(n * per))


# the entries validate re-times next to a model: how fast this machine multiplies and streams now
# against when it was calibrated (its speed drifts on a shared machine)
ANCHORS = ("gemm_fp32", "bandwidth_add")
# and, where the calibration has it, one point of the cache sweep: how fast a working set that lives in
# the cache streams now. A 2-core VM had a state in which its GEMM and DRAM anchors read as calibrated
# while the kernels that stream through the cache ran 1.3-1.7x slower (layout conversions, pooling,
# Concat, Add, LayerNorm; bench/RESULTS.md, forty-seventh session): only a cached stream sees it
ONCHIP_ANCHOR_KB = 3072


def _peak_gemm(quick: bool) -> Micro:
    n = 512 if quick else 1024
    return _matmul("gemm_fp32", n, n, n, "peak")


def _dram_elements(quick: bool) -> int:
    """float32 elements of each operand of the DRAM measurement's Add."""
    return (8 if quick else 16) * 1024 * 1024


def dram_working_set(quick: bool) -> int:
    """Bytes the DRAM measurement's Add moves per run (two operands read, one result written)."""
    return 3 * 4 * _dram_elements(quick)


def _dram_add(quick: bool) -> Micro:
    from onnx import helper

    e = _dram_elements(quick)
    add = _model([helper.make_node("Add", ["a", "b"], ["y"])], [_vi("a", [e]), _vi("b", [e])], [_vi("y", None)])
    return Micro("bandwidth_add", add, {"a": np.ones(e, np.float32), "b": np.ones(e, np.float32)}, "dram",
                 ops=e, nbytes=dram_working_set(quick))


def anchor_models(quick: bool, onchip: bool = False) -> list[Micro]:
    """The ANCHORS entries, at the sizes of a quick or a default calibration; with ``onchip`` the cache
    sweep's ONCHIP_ANCHOR_KB point too."""
    return [_peak_gemm(quick), _dram_add(quick)] + ([_cache_sweep(ONCHIP_ANCHOR_KB)] if onchip else [])


def _cache_sweep(kb: int) -> Micro:
    """The cache sweep's point at a ``kb`` working set: a chain of SWEEP_CHAIN adds, each reading the
    previous sum and b and writing the next: three arrays live at a time (the runtime reuses the dead
    ones), as in one add of a network, and the worker threads' wake-up is paid once, not per kernel
    (alone, a 0.8 MB add took as long as a 1.6 MB one: 13 us, mostly wake-up)."""
    from onnx import helper

    c = kb * 1024 // 12
    chain = [helper.make_node("Add", ["a" if i == 0 else f"s{i - 1}", "b"],
                              ["y" if i == SWEEP_CHAIN - 1 else f"s{i}"]) for i in range(SWEEP_CHAIN)]
    add_c = _model(chain, [_vi("a", [c]), _vi("b", [c])], [_vi("y", None)])
    return Micro(f"cache_{kb}k", add_c, {"a": np.ones(c, np.float32), "b": np.ones(c, np.float32)}, "onchip",
                 str(3 * 4 * c), ops=SWEEP_CHAIN * c, nbytes=SWEEP_CHAIN * 3 * 4 * c)


def micro_models(quick: bool) -> list[Micro]:
    """The table, in measuring order. Sizes are big enough to time, small enough for ~1 minute."""
    from onnx import helper

    rng = np.random.default_rng(0)
    n = 512 if quick else 1024
    out = [
        _peak_gemm(quick),
        # one per pairing of data and weight types: the peak is the fastest, the others a share of it
        *(_matmul(f"gemm_int8_{p}", n, n, n, "peak_int8", p, pairing=p) for p in INT8_OPERANDS),
        _matmul("gemm_ffn", 197, WIDE_PRODUCT, 4 * WIDE_PRODUCT, "peak", "matmul"),  # a key: also a matmul-family entry
        _matmul("small_gemm", 128, WIDE_PRODUCT, WIDE_PRODUCT, "peak", "matmul"),
        _dram_add(quick),
    ]
    cold_n = 8192 if quick else 16384  # weights of 25-50 MB: larger than the last-level cache
    out.append(_matmul("gemm_cold", 49, 768, cold_n, "cold"))
    out.append(_cold_conv(quick))
    for m_rows in M_ROWS:  # thin in M (few rows), N = K = 768
        out.append(_matmul(f"gemm_m{m_rows}", m_rows, 768, 768, "m_curve", str(m_rows)))
    for d in NK_DIMS:  # thin in N and K (few channels), M = 3136 (56 x 56 pixels)
        out.append(_matmul(f"gemm_m{d}nk", 3136, d, d, "nk_curve", str(d)))
    # working sets from well inside a core's cache to well outside the last level
    out += [_cache_sweep(kb) for kb in CACHE_SWEEP_KB]
    xe = rng.standard_normal((1, 128, 3072)).astype(np.float32)
    for op in OP_MICRO:
        binary = op in OP_BINARY
        ins = ["x", "p"] if binary else ["x"]
        inits = [_w("p", [])] if binary else []
        m = _model([helper.make_node(op, ins, ["y"])], [_vi("x", [1, 128, 3072])], [_vi("y", None)], inits)
        out.append(Micro(f"op_{op}", m, {"x": np.abs(xe) if op in ("Pow", "Sqrt", "Log") else xe}, "op", op,
                         nbytes=2 * 4 * xe.size))
    # a Pow by a constant 2 (a decomposed norm's square; 3, a tanh GELU's cube, runs the same way): ONNX Runtime
    # multiplies instead of calling powf, 0.25-0.5 ns an element on a 2-core EPYC VM where the exponent 2.5 took
    # 2.4 (ops.elementwise names it 'Pow.square')
    from onnx import numpy_helper

    two = numpy_helper.from_array(np.array(2.0, np.float32), "p")
    square = _model([helper.make_node("Pow", ["x", "p"], ["y"])], [_vi("x", [1, 128, 3072])], [_vi("y", None)], [two])
    out.append(Micro("op_Pow.square", square, {"x": xe}, "op", "Pow.square", nbytes=2 * 4 * xe.size))
    # a ReduceL2 over rows of 32, as F.normalize exports over Swin V2's heads: ONNX Runtime squares and sums
    # at 0.15-0.25 ns an element for rows of 8 to 768 on a 2-core EPYC VM, 4x the reduce family's
    # figure (measured on a global average pool); an op figure of its own (op_efficiency)
    xr = rng.standard_normal(REDUCE_L2_SHAPE).astype(np.float32)
    out.append(Micro("op_ReduceL2", _model([helper.make_node("ReduceL2", ["x"], ["y"], axes=[1])],
                                           [_vi("x", list(REDUCE_L2_SHAPE))], [_vi("y", None)]),
                     {"x": xr}, "op", "ReduceL2"))
    # a Where choosing between a tensor and a scalar, as a masked_fill exports (a shifted-window
    # attention mask: -100 where two positions may not attend); ONNX Runtime 1.32 runs such
    # a Where at about a tenth of the roofline of its bytes (swin_t's ten: 1.1 ms profiled)
    out.append(Micro("op_Where", _model([helper.make_node("Where", ["c", "x", "fill"], ["y"])],
                                        [_vi("c", [1, 128, 3072], 9), _vi("x", [1, 128, 3072])], [_vi("y", None)],
                                        [_const("fill", -100.0)]),
                     {"c": (np.arange(xe.size) // 49 % 3 == 0).reshape(xe.shape), "x": xe}, "op", "Where",
                     nbytes=(1 + 4 + 4) * xe.size))  # a mask's condition comes in runs (49: a window row), not at random
    # a DequantizeLinear of a uint8 activation (per-tensor scale and zero point), as a QDQ model runs one
    # wherever a layer stays in float: ONNX Runtime 1.32 widens at 0.08-0.11 ns an element on a 2-core EPYC
    # VM (a Relu of the float tensor 0.04-0.05, with four times the bytes), and per-channel weights alike;
    # an op figure of its own (op_efficiency)
    xq = rng.integers(0, 255, size=xe.shape).astype(np.uint8)
    out.append(Micro("op_DequantizeLinear",
                     _model([helper.make_node("DequantizeLinear", ["x", "scale", "zero"], ["y"])],
                            [_vi("x", [1, 128, 3072], 2)], [_vi("y", None)],
                            [_const("scale", 0.02), _u8("zero", 128)]),
                     {"x": xq}, "op", "DequantizeLinear", nbytes=(1 + 4) * xq.size))
    # ONNX Runtime's QLinearAdd and QLinearMul of two uint8 tensors (a QDQ model's residual adds and its
    # squeeze-excite scaling, which it fuses into them) and its QLinearSigmoid (a table lookup per element; its
    # QLinearLeakyRelu takes the figure): about a float op's time per element on a 2-core EPYC VM although they
    # move a quarter of the bytes; op figures of their own (op_efficiency)
    qargs = ["scale", "zero"]
    for op, ins in (("QLinearAdd", ["a", "b"]), ("QLinearMul", ["a", "b"]), ("QLinearSigmoid", ["a"])):
        args = [a for i in ins for a in (i, *qargs)] + qargs
        out.append(Micro(f"op_{op}",
                         _model([helper.make_node(op, args, ["y"], domain="com.microsoft")],
                                [_vi(i, [1, 128, 3072], 2) for i in ins], [_vi("y", None, 2)],
                                [_const("scale", 0.02), _u8("zero", 128)], contrib=True),
                         {"a": xq, "b": xq[:, ::-1].copy()} if len(ins) == 2 else {"a": xq}, "op", op,
                         nbytes=(len(ins) + 1) * xq.size))
    # ONNX Runtime's 8-bit depthwise convolution as its channels-last pass leaves it (com.microsoft QLinearConv,
    # channels_last; every depthwise layer of a QDQ MobileNet or EfficientNet runs it): 96 channels of 3 x 3 at
    # 56 x 56 took 38-62 us on a 2-core EPYC VM where the float depthwise pace the layer is otherwise given
    # (the blocked kernel's figures, the int8 rate floored at the float one) says 26; its share of that pace
    # is a figure of its own (int8_depthwise_share)
    out.append(_int8_depthwise("int8_depthwise", INT8_DEPTHWISE[0], "int8_depthwise"))
    # MLAS (ONNX Runtime's kernels) has that fast depthwise kernel only for a channel count in whole groups of 16
    # on x86 (of 8 on ARM64: convsym.cpp's MlasConvSymPackWSize), and runs any other with a generic one: 72 and 88
    # channels at 56 x 56 took 75 and 88 us where 80 took 29 (a 2-core EPYC VM). Timed at a count in no group of 8
    # (its share: int8_depthwise_generic) and at one in groups of 8 but not 16 (which kernel takes those)
    for ch in INT8_DEPTHWISE_GENERIC:
        out.append(_int8_depthwise(f"int8_depthwise_{ch}", ch, "int8_depthwise_generic"))
    # the runtime's own transformer kernels (dnnperf.fusion.RUNTIME_KERNELS), built from the plain
    # ops it fuses into them, REPEAT of them in a chain (each reads the one before: copies on the
    # same inputs would be merged by the runtime's common-subexpression pass, and then not fused):
    # a bias and erf GELU over a BERT-base FFN, bias + residual + LayerNorm
    def erf_gelu(i, x, y):  # x * 0.5 * (1 + erf(x / sqrt 2))
        return [helper.make_node("Div", [x, "sqrt2"], [f"d{i}"]), helper.make_node("Erf", [f"d{i}"], [f"e{i}"]),
                helper.make_node("Add", [f"e{i}", "one"], [f"f{i}"]),
                helper.make_node("Mul", [x, f"f{i}"], [f"m{i}"]), helper.make_node("Mul", [f"m{i}", "half"], [y])]

    def tanh_gelu(i, x, y):  # 0.5 x (1 + tanh(c (x + 0.044715 x^3))), GPT-2's gelu_new as exported
        n = helper.make_node
        return [n("Mul", [x, "half"], [f"h{i}"]), n("Pow", [x, "three"], [f"p{i}"]),
                n("Mul", [f"p{i}", "k"], [f"q{i}"]), n("Add", [x, f"q{i}"], [f"a{i}"]),
                n("Mul", [f"a{i}", "c"], [f"b{i}"]), n("Tanh", [f"b{i}"], [f"t{i}"]),
                n("Add", [f"t{i}", "one"], [f"u{i}"]), n("Mul", [f"h{i}", f"u{i}"], [y])]

    gelu, plain_gelu, fast_gelu, skip, silu = [], [], [], [], []
    for i in range(REPEAT):
        x_in, x_out = ("x" if i == 0 else f"y{i - 1}"), ("y" if i == REPEAT - 1 else f"y{i}")
        gelu += [helper.make_node("Add", [x_in, "bias"], [f"s{i}"])] + erf_gelu(i, f"s{i}", x_out)
        # the same GELU without the bias (after MatMul + bias the runtime folds the bias into the product)
        plain_gelu += erf_gelu(i, x_in, x_out)
        # the runtime's FastGelu kernel (it leaves a GELU that writes a graph output unfused: the chain
        # ends in a Reshape, which moves nothing)
        fast_gelu += tanh_gelu(i, x_in, x_out if i < REPEAT - 1 else "z")
        skip += [helper.make_node("Add", [x_in, "r"], [f"s{i}"]),
                 helper.make_node("LayerNormalization", [f"s{i}", "g", "b"], [x_out], axis=-1)]
        # x * Sigmoid(x) (SiLU), which the runtime makes a QuickGelu kernel of
        silu += [helper.make_node("Sigmoid", [x_in], [f"g{i}"]), helper.make_node("Mul", [x_in, f"g{i}"], [x_out])]
    fast_gelu.append(helper.make_node("Reshape", ["z", "zshape"], ["y"]))
    xf = rng.standard_normal((1, 128, 3072)).astype(np.float32)
    out.append(Micro("op_BiasGelu", _model(gelu, [_vi("x", [1, 128, 3072])], [_vi("y", None)],
                                           [_w("bias", [3072]), _const("sqrt2", 1.4142135), _const("one", 1.0),
                                            _const("half", 0.5)]), {"x": xf}, "kernel", "BiasGelu"))
    out.append(Micro("op_Gelu", _model(plain_gelu, [_vi("x", [1, 128, 3072])], [_vi("y", None)],
                                       [_const("sqrt2", 1.4142135), _const("one", 1.0), _const("half", 0.5)]),
                     {"x": xf}, "kernel", "Gelu"))
    out.append(Micro("op_FastGelu", _model(fast_gelu, [_vi("x", [1, 128, 3072])], [_vi("y", None)],
                                           [_const("half", 0.5), _const("three", 3.0), _const("k", 0.044715),
                                            _const("c", 0.7978845608), _const("one", 1.0),
                                            _int_tensor("zshape", [1, 128, 3072], (3,))]),
                     {"x": xf}, "kernel", "FastGelu"))
    xs = rng.standard_normal((1, 128, 768)).astype(np.float32)
    out.append(Micro("op_SkipLayerNormalization",
                     _model(skip, [_vi("x", [1, 128, 768]), _vi("r", [1, 128, 768])], [_vi("y", None)],
                            [_w("g", [768]), _w("b", [768])]),
                     {"x": xs, "r": xs.copy()}, "kernel", "SkipLayerNormalization"))
    # the SiLU chain over a map as a network's middle layers have it (64 x 56 x 56: 0.8 MB read, 0.8 MB written)
    out.append(Micro("op_QuickGelu", _model(silu, [_vi("x", [1, 64, 56, 56])], [_vi("y", None)]),
                     {"x": rng.standard_normal((1, 64, 56, 56)).astype(np.float32)}, "kernel", "QuickGelu"))
    chain = [helper.make_node("Relu", ["x" if i == 0 else f"t{i - 1}"], [f"t{i}" if i < 199 else "y"]) for i in range(200)]
    out.append(Micro("dispatch_200", _model(chain, [_vi("x", [1, 16])], [_vi("y", None)]),
                     {"x": np.ones((1, 16), np.float32)}, "dispatch", "200"))
    out.append(Micro("dispatch_1", _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [1, 16])], [_vi("y", None)]),
                     {"x": np.ones((1, 16), np.float32)}, "dispatch", "1"))
    # the runtime's call with CALL_TENSORS graph inputs (summed into one output) and with as many outputs (one
    # input negated into each): beside dispatch_1's one input and one output, its cost per input and per output
    ones = [_vi(f"x{i}", [1, 16]) for i in range(CALL_TENSORS)]
    out.append(Micro("call_inputs", _model([helper.make_node("Sum", [v.name for v in ones], ["y"])], ones,
                                           [_vi("y", None)]),
                     {v.name: np.ones((1, 16), np.float32) for v in ones}, "call", "inputs"))
    out.append(Micro("call_outputs", _model([helper.make_node("Neg", ["x"], [f"y{i}"]) for i in range(CALL_TENSORS)],
                                            [_vi("x", [1, 16])], [_vi(f"y{i}", None) for i in range(CALL_TENSORS)]),
                     {"x": np.ones((1, 16), np.float32)}, "call", "outputs"))
    out += [_host_shape_chain(True), _host_shape_chain(False)]
    out += [_fixed_chain(fam) for fam in FIXED_FAMILIES]
    # one representative per op family
    x56 = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    x144 = rng.standard_normal((1, 144, 56, 56)).astype(np.float32)
    xa = rng.standard_normal((1, 12, 128, 128)).astype(np.float32)

    def fam(name, node, ins, inits, feeds, family):
        out.append(Micro(name, _model([node], ins, [_vi("y", None)], inits), feeds, "family", family))

    fam("conv", helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]), [_vi("x", [1, 64, 56, 56])],
        [_w("w", [64, 64, 3, 3])], {"x": x56}, "conv")
    fam("depthwise_conv", helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=144),
        [_vi("x", [1, 144, 56, 56])], [_w("w", [144, 1, 3, 3])], {"x": x144}, "depthwise_conv")
    fam("grouped_conv", helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=4),
        [_vi("x", [1, 64, 56, 56])], [_w("w", [64, 16, 3, 3])], {"x": x56}, "grouped_conv")
    fam("attention_like", helper.make_node("MatMul", ["a", "b"], ["y"]),
        [_vi("a", [1, 12, 128, 64]), _vi("b", [1, 12, 64, 128])], [],
        {"a": rng.standard_normal((1, 12, 128, 64)).astype(np.float32),
         "b": rng.standard_normal((1, 12, 64, 128)).astype(np.float32)}, "attention")
    # the elementwise family: an Add of two maps of one shape, the commonest standalone elementwise kernel
    # (a residual, a layer scale); ops slower than it per byte have figures of their own (OP_MICRO). Timed
    # as a Sigmoid (as before), the family put every Add, Mul and Relu at 2.1-2.9x its measured time
    fam("elementwise", helper.make_node("Add", ["x", "x2"], ["y"]), [_vi("x", [1, 64, 56, 56]), _vi("x2", [1, 64, 56, 56])],
        [], {"x": x56, "x2": x56.copy()}, "elementwise")
    for width in SPAN_WIDTHS:
        xw = rng.standard_normal((SPAN_ELEMENTS // width, width)).astype(np.float32)
        out.append(Micro(f"span_{width}", _model([helper.make_node("Add", ["x", "b"], ["y"])],
                                                 [_vi("x", list(xw.shape))], [_vi("y", None)], [_w("b", [width])]),
                         {"x": xw}, "span", str(width)))
    fam("norm", helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1), [_vi("x", [1, 197, 768])],
        [_w("g", [768]), _w("b", [768])], {"x": rng.standard_normal((1, 197, 768)).astype(np.float32)}, "norm")
    fam("softmax", helper.make_node("Softmax", ["x"], ["y"], axis=-1), [_vi("x", [1, 12, 128, 128])], [], {"x": xa},
        "softmax")
    out.append(Micro("op_Transpose", _model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])],
                                            [_vi("x", [1, 64, 56, 56])], [_vi("y", None)]), {"x": x56}, "op", "Transpose",
                     nbytes=2 * 4 * x56.size))
    # an Einsum as attention writes it (scores of 8 heads over 128 positions, 32 channels a head): ONNX
    # Runtime transposes its operands into a batched product of its own, 3-7x slower than a MatMul of
    # that shape on this VM (327 and 109 us against 46 estimated at the matmul family's figure)
    xq = rng.standard_normal((1, 128, 8, 32)).astype(np.float32)
    out.append(Micro("op_Einsum", _model([helper.make_node("Einsum", ["q", "k"], ["y"], equation="bqhd,bkhd->bhqk")],
                                         [_vi("q", [1, 128, 8, 32]), _vi("k", [1, 128, 8, 32])], [_vi("y", None)]),
                     {"q": xq, "k": xq.copy()}, "op", "Einsum"))
    # a decoder's 2x upsampling ConvTranspose follows no other family's pace (op_efficiency, against
    # dnnperf's own estimate of it): ONNX Runtime computes it as a product and scatters the columns back
    x28 = rng.standard_normal((1, 64, 28, 28)).astype(np.float32)
    out.append(Micro("op_ConvTranspose", _model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2],
                                                                  pads=[1, 1, 1, 1])],
                                                [_vi("x", [1, 64, 28, 28])], [_vi("y", None)], [_w("w", [64, 32, 4, 4])]),
                     {"x": x28}, "op", "ConvTranspose"))
    # Resize, a loop over its outputs (vocab.LOOP_KERNELS): 2x upsampling of 64 x 56 x 56 as a decoder or
    # an FPN has it (0.8 M outputs), per mode; calibrate divides the kernel time by the outputs
    ch, side, f = LOOP_UPSAMPLE
    xl = x56 if (ch, side) == (64, 56) else rng.standard_normal((1, ch, side, side)).astype(np.float32)
    # a Softmax over the second of four axes, as YOLOv8's box head has it (16 bins x 4 sides x 2,100 anchors)
    xs = rng.standard_normal(SOFTMAX_AXIS_SHAPE).astype(np.float32)
    out.append(Micro("loop_Softmax.axis", _model([helper.make_node("Softmax", ["x"], ["y"], axis=1)],
                                                 [_vi("x", list(SOFTMAX_AXIS_SHAPE))], [_vi("y", None)]),
                     {"x": xs}, "loop", "Softmax.axis"))
    # ScatterElements adding 5,000 x 64 updates into a 1,000 x 64 table (a GNN's scatter_add; opset 18)
    rows, width, n_upd = SCATTER_SHAPE
    out.append(Micro("loop_ScatterElements", _model(
        [helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction="add")],
        [_vi("x", [rows, width]), _vi("i", [n_upd, width], 7), _vi("u", [n_upd, width])], [_vi("y", None)], opset=18),
        {"x": np.zeros((rows, width), np.float32), "i": rng.integers(0, rows, (n_upd, width)).astype(np.int64),
         "u": rng.standard_normal((n_upd, width)).astype(np.float32)}, "loop", "ScatterElements"))
    # ONNX Runtime's own uint8 kernels of a QOperator model, each a loop over its outputs: a DenseNet
    # block's QLinearConcat (QCONCAT pieces of 32 x 28 x 28) and its transition's 2 x 2 QLinearAveragePool
    # of 128 x 56 x 56 (0.26-0.54 and 8.2-10 ns an output on a 2-core EPYC VM, where DenseNet-121's
    # were estimated at a movement's and a pool's roofline: 27.5 against 387 us, 12.8 against 583)
    q8 = [_const("s", 0.1), _u8("z", 128), _const("s2", 0.2), _u8("z2", 120)]
    n_q, ch_q, side_q = QCONCAT
    args = ["s2", "z2"] + [a for i in range(n_q) for a in (f"x{i}", "s", "z")]
    out.append(Micro("loop_QLinearConcat", _model(
        [helper.make_node("QLinearConcat", args, ["y"], domain="com.microsoft", axis=1)],
        [_vi(f"x{i}", [1, ch_q, side_q, side_q], 2) for i in range(n_q)], [_vi("y", None, 2)], q8, contrib=True),
        {f"x{i}": rng.integers(0, 255, (1, ch_q, side_q, side_q)).astype(np.uint8) for i in range(n_q)},
        "loop", "QLinearConcat"))
    ch_p, side_p = QPOOL
    out.append(Micro("loop_QLinearAveragePool", _model(
        [helper.make_node("QLinearAveragePool", ["x", "s", "z", "s2", "z2"], ["y"], domain="com.microsoft",
                          kernel_shape=[2, 2], strides=[2, 2])],
        [_vi("x", [1, ch_p, side_p, side_p], 2)], [_vi("y", None, 2)], q8, contrib=True),
        {"x": rng.integers(0, 255, (1, ch_p, side_p, side_p)).astype(np.uint8)}, "loop", "QLinearAveragePool"))
    # ONNX Runtime's 8-bit MaxPool in NCHW, as a QDQ model's runs once its Q/DQ pair is dropped (7.6-8.5 ns an
    # output on a 2-core EPYC VM, 20x the float pool; after a QLinearConv it runs NhwcMaxPool instead)
    ch_m, side_m = MAXPOOL8
    out.append(Micro("loop_MaxPool.int8", _model(
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2])],
        [_vi("x", [1, ch_m, side_m, side_m], 2)], [_vi("y", None, 2)]),
        {"x": rng.integers(0, 255, (1, ch_m, side_m, side_m)).astype(np.uint8)}, "loop", "MaxPool.int8"))
    # the element loops (ELEMENT_LOOPS): key -> (node, its input's shape, its constants)
    (tr_shape, perm), (runs, run), m56 = TRANSPOSE_LOOP, EXPAND_FILL, (1, 64, 56, 56)
    loops = {"Transpose.elements": (helper.make_node("Transpose", ["x"], ["y"], perm=list(perm)), tr_shape, []),
             "Transpose.blocks": (helper.make_node("Transpose", ["x"], ["y"], perm=list(TRANSPOSE_RUNS[1])),
                                  TRANSPOSE_RUNS[0], []),
             "Transpose.planes": (helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1]),
                                  TRANSPOSE_PLANE_LOOP, []),
             "Slice.strided": (helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"]), m56,
                               [_ints("s", [0]), _ints("e", [56]), _ints("a", [3]), _ints("t", [2])]),
             "Gather.blocks": (helper.make_node("Gather", ["x", "i"], ["y"], axis=3), m56,
                               [_ints("i", list(range(0, 56, 2)))]),
             "CumSum.last": (helper.make_node("CumSum", ["x", "a"], ["y"]), m56, [_ints("a", 3, scalar=True)]),
             "DepthToSpace": (helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2), m56, []),
             "SpaceToDepth": (helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2), m56, []),
             "ArgMax": (helper.make_node("ArgMax", ["x"], ["y"], axis=1), m56, []),
             "Expand.fill": (helper.make_node("Expand", ["x", "s"], ["y"]), (runs, 1), [_ints("s", [runs, run])]),
             "PRelu": (helper.make_node("PRelu", ["x", "slope"], ["y"]), m56, [_w("slope", [64, 1, 1])]),
             "ReduceLogSumExp": (helper.make_node("ReduceLogSumExp", ["x"], ["y"], axes=[1]), m56, [])}
    for key, (node, shape, consts) in loops.items():
        y = _vi("y", None, 7 if key == "ArgMax" else 1)  # ArgMax writes int64 indices
        x = x56 if shape == m56 else rng.standard_normal(shape).astype(np.float32)
        out.append(Micro(f"loop_{key}", _model([node], [_vi("x", list(shape))], [y], consts), {"x": x}, "loop", key))
    # the 16-bit element ops ONNX Runtime runs with kernels of their own, converting element by element
    # (dnnperf.upcast.HALF_LOOPS): HALF_LOOP fp16 elements each; Max and Min of the input with itself
    xh = rng.standard_normal((1, HALF_LOOP)).astype(np.float16)
    for op in HALF_LOOPS:
        node = helper.make_node(op, ["x", "x"] if op in ("Max", "Min") else ["x"], ["y"])
        out.append(Micro(f"loop_{op}.half", _model([node], [_vi("x", [1, HALF_LOOP], 10)], [_vi("y", None, 10)]),
                         {"x": xh}, "loop", f"{op}.half"))
    # a forest as gradient boosting exports it (ai.onnx.ml TreeEnsembleRegressor): TREE_FOREST[0] balanced
    # trees of TREE_FOREST[1] levels over 16 features, TREE_FOREST[2] rows; each row walks every tree
    out.append(Micro("loop_TreeEnsemble.level", _forest(*TREE_FOREST, rng), {
        "x": rng.standard_normal((TREE_FOREST[2], 16)).astype(np.float32)}, "loop", "TreeEnsemble.level"))
    # an RBF support-vector regressor (scikit-learn's SVR exports one): SVM_SHAPE's support vectors of
    # its features, its rows; each row's kernel against each vector, a term a feature
    n_sv, feats, rows = SVM_SHAPE
    svr = helper.make_node("SVMRegressor", ["x"], ["y"], domain="ai.onnx.ml", kernel_type="RBF",
                           kernel_params=[0.05, 0.0, 3.0], n_supports=n_sv, rho=[0.1],
                           coefficients=[float(v) for v in rng.standard_normal(n_sv)],
                           support_vectors=[float(v) for v in rng.standard_normal(n_sv * feats)])
    out.append(Micro("loop_SVM.term", _model([svr], [_vi("x", [rows, feats])], [_vi("y", [rows, 1])], ml=True),
                     {"x": rng.standard_normal((rows, feats)).astype(np.float32)}, "loop", "SVM.term"))
    # an LRN across 5 channels, as AlexNet and GoogLeNet have them, on LRN_SHAPE
    out.append(Micro("loop_LRN", _model([helper.make_node("LRN", ["x"], ["y"], size=5, alpha=1e-4, beta=0.75, bias=1.0)],
                                        [_vi("x", list(LRN_SHAPE))], [_vi("y", None)]),
                     {"x": rng.standard_normal(LRN_SHAPE).astype(np.float32)}, "loop", "LRN"))
    # ONNX Runtime's MatMulNBits on one row (a decoder's step): 4-bit weights in blocks of 32, a chain of
    # NBITS_GEMV[0] products of K x N, their packed weights (42 MB) past the cache as a model's are,
    # unpacked and scaled in float32 (accuracy_level 0) or multiplied as bytes (4)
    layers, k_n, n_n = NBITS_GEMV
    for key, level in (("MatMulNBits.fp32", 0), ("MatMulNBits.int8", 4)):
        nodes, inits = [], []
        for i in range(layers):
            nodes.append(helper.make_node("MatMulNBits", ["x" if i == 0 else f"h{i}", f"qw{i}", f"sc{i}"],
                                          ["y" if i == layers - 1 else f"h{i + 1}"], domain="com.microsoft", K=k_n,
                                          N=n_n, bits=4, block_size=32, accuracy_level=level))
            inits += [_w(f"qw{i}", [n_n, k_n // 32, 16], np.uint8, rng),
                      _w(f"sc{i}", [n_n * (k_n // 32)], np.float32, rng, scale=0.01)]
        out.append(Micro(f"loop_{key}", _model(nodes, [_vi("x", [1, k_n])], [_vi("y", None)], inits, contrib=True),
                         {"x": rng.standard_normal((1, k_n)).astype(np.float32)}, "loop", key))
    for mode in ("nearest", "linear", "cubic"):
        out.append(Micro(f"loop_Resize.{mode}", _model([helper.make_node("Resize", ["x", "", "sc"], ["y"], mode=mode)],
                                                       [_vi("x", [1, ch, side, side])], [_vi("y", None)],
                                                       [_const("sc", [1.0, 1.0, float(f), float(f)])]),
                         {"x": xl}, "loop", f"Resize.{mode}"))
    fam("movement", helper.make_node("Concat", ["x", "x2"], ["y"], axis=1),
        [_vi("x", [1, 64, 56, 56]), _vi("x2", [1, 64, 56, 56])], [], {"x": x56, "x2": x56}, "movement")
    fam("reduce", helper.make_node("GlobalAveragePool", ["x"], ["y"]), [_vi("x", [1, 64, 56, 56])], [], {"x": x56},
        "reduce")
    for k, stride, side, ch in DEPTHWISE:
        out.append(_conv(f"dw_k{k}s{stride}_{side}", ch, side * stride, k, stride, ch,
                         f"depthwise_conv.k{k}s{stride}:{side * side}"))
    for cout, k, stride in RGB_STEMS:  # 3 input channels: the blocked layout's kernel for an image
        out.append(_conv(f"conv_rgb_{cout}_k{k}", 3, RGB_SIDE, k, stride, 1, f"conv.rgb:{3 * k * k * cout}", out=cout))
    for cin, cout in NARROW_K1:
        out.append(_conv(f"conv_rgb_k1_{cin}_{cout}", cin, RGB_SIDE // 2, 1, 1, 1, f"conv.rgb_k1:{cin * cout}", out=cout))
    for ch, side in STRIDED_K1:  # C -> 2C: the conv.k1s2 curve's point at its output pixels
        out.append(_conv(f"conv_k1s2_{side // 2}", ch, side, 1, 2, 1, f"conv.k1s2:{(side // 2) ** 2}", out=2 * ch))
    for k, ch, side in UNBLOCKED:  # channel counts in no whole SIMD block: the plain NCHW kernel
        out.append(_conv(f"conv_unblocked_k{k}", ch, side, k, 1, 1, f"conv.unblocked_k{k}:{side * side}"))
    for k, stride, side, ch in DW_UNBLOCKED:
        out.append(_conv(f"dw_unblocked_k{k}s{stride}_{side}", ch, side * stride, k, stride, ch,
                         f"depthwise_conv.unblocked_k{k}{'s2' if stride > 1 else ''}:{side * side}"))
    for ch in LAYOUT_PROBES:  # not timed: only their layout conversions are looked at
        out.append(replace(_conv(f"probe_dw{ch}", ch, 14, 3, 1, ch, str(ch)), role="probe"))
    for ch, side in REORDER_PROBES:  # not timed: only their conversions inside the chain are looked at
        out.append(_reorder_probe(ch, side))
    for ch in POOL_PROBES:
        out.append(replace(_pool(f"probe_pool{ch}", ch, 28, "probe"), key=f"pool{ch}"))
    for ch, side in POOL_UNBLOCKED:  # pooling the blocked layout never takes: the plain kernel
        out.append(_pool(f"pool_unblocked_{side}", ch, side, "shape", f"pool.unblocked:{(side // 2) ** 2}"))
    for ch, side in CONCAT_SERIAL:
        out.append(_concat_serial(ch, side))
    for what in ("softmax", "matmul"):
        for masked in (True, False):
            out.append(_subnormal(what, masked))
    out += [_epilogue_chain(act) for act in ("", *EPILOGUE_ACTIVATIONS)]
    for c in NORM_ROWS:
        rows = NORM_ELEMENTS // c
        out.append(Micro(f"norm_row{c}", _model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)],
                                                [_vi("x", [1, rows, c])], [_vi("y", None)], [_w("g", [c]), _w("b", [c])]),
                         {"x": rng.standard_normal((1, rows, c)).astype(np.float32)}, "shape", f"norm.row:{c}"))
    for gw, side in GROUPED_S2:
        out.append(_conv(f"grouped_w{gw}s2_{side}", 128, side * 2, 3, 2, 128 // gw, f"grouped_conv.w{gw}s2:{side * side}"))
    out = [repeated(mb) if mb.role in REPEATED_ROLES else mb for mb in out]
    # pooling as a network has it: each pool reads what the one before wrote. Copies of one stride-2
    # pool reading the same cached input ran at the roof (efficiency 1) while the networks' pools
    # took about twice their estimate (googlenet's 13: 187 us predicted, 408 measured; every stem pool)
    out.append(_pool_chain(256, 28))
    # chained, not repeated: copies of one 1 x 1 convolution reading the same input ran at another
    # pace than the same convolutions in a chain (each reading the output before it)
    return out + [_conv_chain(ch, side, 3) for ch, side in CONV_PIXELS] + \
        [_conv_chain(ch, side, 1, ch // 4) for ch, side in CONV1_PIXELS] + \
        [_conv_chain(GROUPED_CHANNELS[side], side, 3, width=gw) for gw, side in GROUPED]


def _pool_chain(ch: int, side: int) -> Micro:
    """CONV_CHAIN 3 x 3 stride-1 max pools of ``ch`` channels over ``side`` x ``side`` pixels in a
    chain: the pool family's efficiency."""
    from onnx import helper

    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MaxPool", ["x" if i == 0 else f"t{i - 1}"], ["y" if i == CONV_CHAIN - 1 else f"t{i}"],
                              kernel_shape=[3, 3], pads=[1, 1, 1, 1]) for i in range(CONV_CHAIN)]
    model = _model(nodes, [_vi("x", [1, ch, side, side])], [_vi("y", None)])
    return Micro("pool", model, {"x": rng.standard_normal((1, ch, side, side)).astype(np.float32)}, "family", "pool")


def _conv_chain(ch: int, side: int, k: int, other: int | None = None, width: int | None = None) -> Micro:
    """CONV_CHAIN ``k`` x ``k`` convolutions over ``side`` x ``side`` pixels in a chain, ``ch`` channels
    in and out, or alternating between ``ch`` and ``other``: the ``conv.k<k>`` curve's point at
    side x side output pixels; with ``width``, grouped ones of ``width`` channels per group: the
    ``grouped_conv.w<width>`` curve's point."""
    from onnx import helper

    rng = np.random.default_rng(0)
    nodes, inits = [], []
    widths = [ch if other is None or i % 2 == 0 else other for i in range(CONV_CHAIN + 1)]
    for i in range(CONV_CHAIN):
        x, y = ("x" if i == 0 else f"t{i - 1}"), ("y" if i == CONV_CHAIN - 1 else f"t{i}")
        inits.append(_w(f"w{i}", [widths[i + 1], width or widths[i], k, k], rng=rng))
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [y], pads=[k // 2] * 4, group=ch // width if width else 1))
    model = _model(nodes, [_vi("x", [1, ch, side, side])], [_vi("y", None)], inits)
    name, key = (f"grouped_w{width}_{side}", f"grouped_conv.w{width}:{side * side}") if width else \
        (f"conv_k{k}_{side}", f"conv.k{k}:{side * side}")
    return Micro(name, model, {"x": rng.standard_normal((1, ch, side, side)).astype(np.float32)}, "shape", key)


# short kernels are timed as REPEAT back-to-back copies in one run: a lone short kernel pays the
# wake-up of the runtime's worker threads on every run (a 60 us Exp measures 46-160 us), while inside
# a network its threads are already spinning
REPEAT = 8
REPEATED_ROLES = ("family", "op", "shape", "m_curve", "nk_curve")


def repeated(mb: Micro, k: int = REPEAT) -> Micro:
    """``mb`` with its nodes copied ``k`` times on the same inputs (each copy writes its own outputs)."""
    from onnx import helper

    g = mb.model.graph
    produced = {o for n in g.node for o in n.output}
    nodes, outputs = [], []
    for i in range(k):
        ren = {o: f"{o}_r{i}" for o in produced}
        for j, n in enumerate(g.node):
            c = helper.make_node(n.op_type, [ren.get(x, x) for x in n.input], [ren[o] for o in n.output],
                                 name=f"{n.name or f'{n.op_type}{j}'}_r{i}", domain=n.domain)
            c.attribute.extend(n.attribute)
            nodes.append(c)
        outputs += [helper.make_tensor_value_info(ren[o.name], o.type.tensor_type.elem_type, None) for o in g.output]
    model = _model(nodes, list(g.input), outputs, list(g.initializer), contrib=any(n.domain for n in g.node))
    return Micro(mb.name, model, mb.feeds, mb.role, mb.key, mb.ops * k, mb.nbytes * k)


def _concat_serial(ch: int, side: int) -> Micro:
    """A Concat of CONCAT_INPUTS inputs of ``ch`` x ``side`` x ``side`` along the channels: the
    'movement.serial' curve's point at the KB it reads and writes."""
    from onnx import helper

    rng = np.random.default_rng(0)
    names = [f"x{i}" for i in range(CONCAT_INPUTS)]
    node = helper.make_node("Concat", names, ["y"], axis=1)
    model = _model([node], [_vi(n, [1, ch, side, side]) for n in names], [_vi("y", None)])
    kb = 2 * CONCAT_INPUTS * ch * side * side * 4 // 1000
    return Micro(f"concat_serial_{kb}k", model,
                 {n: rng.standard_normal((1, ch, side, side)).astype(np.float32) for n in names}, "shape",
                 f"movement.serial:{kb}")


# subnormal probabilities: SUBNORMAL_HEADS Swin-sized attention maps (49 x 49), -100 added to every
# other position (a shifted-window mask) or nothing; the difference over the values the mask makes
# subnormal is what each costs (``subnormal_ns``). The scores are small (standard deviation 0.1, as a
# network with stand-in weights has them), so that every masked probability is subnormal, as the
# loader counts them: with scores of deviation 1 some fall below 2^-149 and flush to exact zeros (the
# MatMul's share per masked value fell from 35 to 22 ns, at deviation 3 to 8 ns). A mask of -1e4 is no
# baseline: the Softmax's exp takes a slow path for it (933 us against 160 unmasked)
SUBNORMAL_HEADS = 32
SUBNORMAL_WINDOW = 49


def _subnormal_positions() -> np.ndarray:
    """The positions of a SUBNORMAL_WINDOW-square map the mask covers: every other one."""
    w = SUBNORMAL_WINDOW
    return (np.add.outer(np.arange(w), np.arange(w)) % 2).astype(bool)


def subnormal_count() -> int:
    """Subnormal probabilities one masked micro-benchmark writes: the masked positions of each map."""
    return SUBNORMAL_HEADS * int(_subnormal_positions().sum())


def _subnormal(what: str, masked: bool) -> Micro:
    """Scores + mask -> Softmax (-> MatMul with a [heads, 49, 32] operand for ``what`` 'matmul')."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    h, w = SUBNORMAL_HEADS, SUBNORMAL_WINDOW
    mask = np.where(_subnormal_positions(), -100.0 if masked else 0.0, 0.0).astype(np.float32).reshape(1, 1, w, w)
    nodes = [helper.make_node("Add", ["x", "mask"], ["s"]), helper.make_node("Softmax", ["s"], ["p" if what == "matmul" else "y"], axis=-1)]
    ins = [_vi("x", [1, h, w, w])]
    feeds = {"x": (0.1 * rng.standard_normal((1, h, w, w))).astype(np.float32)}
    if what == "matmul":
        nodes.append(helper.make_node("MatMul", ["p", "v"], ["y"]))
        ins.append(_vi("v", [1, h, w, SUBNORMAL_COLUMNS]))
        feeds["v"] = rng.standard_normal((1, h, w, SUBNORMAL_COLUMNS)).astype(np.float32)
    model = _model(nodes, ins, [_vi("y", None)], [numpy_helper.from_array(mask, "mask")])
    return Micro(f"subnormal_{what}_{'masked' if masked else 'clear'}", model, feeds, "subnormal", what)


def _reorder_probe(ch: int, side: int) -> Micro:
    """A 1 x 1 convolution of ``ch`` channels over ``side`` x ``side`` pixels, its output multiplied by
    a per-channel input (a squeeze-excite's scale: the blocked layout does not take a broadcast
    multiply) and a second convolution: the runtime converts the first output out of its blocked
    layout and the product back in. Role ``reorder``, key the tensor's pixels (not timed)."""
    from onnx import helper

    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"]), helper.make_node("Mul", ["c", "s"], ["m"]),
             helper.make_node("Conv", ["m", "w2"], ["y"])]
    model = _model(nodes, [_vi("x", [1, ch, side, side]), _vi("s", [1, ch, 1, 1])], [_vi("y", None)],
                   [_w("w1", [ch, ch, 1, 1], scale=0.05), _w("w2", [ch, ch, 1, 1], scale=0.05)])
    feeds = {"x": rng.standard_normal((1, ch, side, side)).astype(np.float32),
             "s": rng.standard_normal((1, ch, 1, 1)).astype(np.float32)}
    return Micro(f"reorder_{side}", model, feeds, "reorder", str(side * side))


def _pool(name: str, ch: int, side: int, role: str, key: str = "") -> Micro:
    """A 3 x 3 stride-2 max pool of ``ch`` channels over ``side`` x ``side`` pixels."""
    from onnx import helper

    rng = np.random.default_rng(0)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    model = _model([node], [_vi("x", [1, ch, side, side])], [_vi("y", None)])
    return Micro(name, model, {"x": rng.standard_normal((1, ch, side, side)).astype(np.float32)}, role, key)


# the fixed time of one kernel of a family beyond the dispatch: FIXED_CHAIN tiny ops of it in a chain
# (each reads the one before), so small that their arithmetic is negligible. ONNX Runtime's threaded
# kernels (its blocked-layout convolutions and pooling, LayerNormalization) pay a fork and join of
# the thread pool and their set-up whatever their size: on a 2-core VM a 16-channel 7 x 7 1 x 1
# convolution took 2.7 us against 0.3 us for a tiny Relu. "control": a Scan of FIXED_CHAIN runs of a body
# of one Add as the elementwise chain's (its fixed time per iteration: slicing the scanned input, running
# the body's executor, stacking the output)
FIXED_CHAIN = 24
FIXED_FAMILIES = ("conv", "depthwise_conv", "grouped_conv", "pool", "norm", "matmul", "elementwise", "softmax",
                  "movement", "rnn", "control")


# Resize's loop (vocab.LOOP_KERNELS) timed on (channels, side, factor): 64 x 56 x 56 upsampled 2x
LOOP_UPSAMPLE = (64, 56, 2)
SOFTMAX_AXIS_SHAPE = (1, 16, 4, 2100)
SCATTER_SHAPE = (1000, 64, 5000)  # table rows, row width, updated rows
QCONCAT = (8, 32, 28)  # QLinearConcat: pieces, channels each, side
QPOOL = (128, 56)  # QLinearAveragePool 2 x 2 / 2: channels, input side
INT8_DEPTHWISE = (96, 56)  # ONNX Runtime's channels-last 8-bit depthwise 3 x 3: channels, side (MobileNetV2's stage 2)
# the generic kernel's channel counts: one in no whole group of 8, one in groups of 8 but not of 16
INT8_DEPTHWISE_GENERIC = (84, 88)
MAXPOOL8 = (128, 55)  # an 8-bit MaxPool 3 x 3 / 2 (SqueezeNet's): channels, input side (27 x 27 outputs)
TREE_FOREST = (64, 8, 512)  # trees, levels (a leaf the last), rows: 262,144 levels walked
SVM_SHAPE = (256, 32, 256)  # support vectors, features, rows: 2,097,152 terms
LRN_SHAPE = (1, 32, 28, 28)  # 25,088 elements
NBITS_GEMV = (4, 4096, 4096)  # MatMulNBits on one row: products chained, K, N (67,108,864 weights)
# loops whose steps per run are the product of their shape's figures (trees x levels x rows, ...)
SHAPED_LOOPS = {"TreeEnsemble.level": TREE_FOREST, "SVM.term": SVM_SHAPE, "LRN": LRN_SHAPE,
                "MatMulNBits.fp32": NBITS_GEMV, "MatMulNBits.int8": NBITS_GEMV}
# a permutation ONNX Runtime's CPU Transpose copies element by element (ops.transpose.element_loop): no
# single axis moved, the last axis moved (301,056 elements)
TRANSPOSE_LOOP = ((16, 32, 49, 12), (2, 0, 3, 1))
# ... and one it copies as runs of several elements (ops.transpose.copied_blocks), attention's head split with runs
# of 4 float32 elements (16 B; 196,608 runs, 3 MB): the calls, not the bytes, set its time
TRANSPOSE_RUNS = ((1, 12, 16384, 4), (0, 2, 1, 3))
# ... and one it runs as many small 2-D transposes (ops.transpose.transposed_planes): 3,136 planes of 8 x 12, the
# calls, not the bytes, set its time
TRANSPOSE_PLANE_LOOP = (3136, 8, 12)
# an Expand filling runs of 32 from one element each, as F.normalize's over Swin V2's 32-wide heads
EXPAND_FILL = (9408, 32)  # runs, run length
# the element loops' steps per run (their loop_items, else outputs): those Transposes' elements and runs; on a
# 64 x 56 x 56 map a Slice taking every other column, a Gather of 28 columns (blocks of one), a running sum along
# the rows, 2 x 2 pixel shuffles both ways, an ArgMax over the channels (its inputs, as a segmentation head's over
# its classes); that Expand (its inputs); a PRelu with a slope per channel; a ReduceLogSumExp over the
# channels (its inputs)
ELEMENT_LOOPS = {"Transpose.elements": int(np.prod(TRANSPOSE_LOOP[0])), "Transpose.blocks": 12 * 16384,
                 "Transpose.planes": TRANSPOSE_PLANE_LOOP[0],
                 "Slice.strided": 64 * 56 * 28,
                 "Gather.blocks": 64 * 56 * 28, "CumSum.last": 64 * 56 * 56, "DepthToSpace": 64 * 56 * 56,
                 "SpaceToDepth": 64 * 56 * 56, "ArgMax": 64 * 56 * 56, "Expand.fill": EXPAND_FILL[0],
                 "PRelu": 64 * 56 * 56, "ReduceLogSumExp": 64 * 56 * 56}


CALL_TENSORS = 32  # graph inputs, and outputs, of the call micro-benchmarks (call_us)
# elements of each 16-bit element op's micro-benchmark (ELEMENT_LOOPS): the fp16 Clip's pace per element is
# not one figure (2 threads, 2-core EPYC VM: 0.5-0.9 ns from 16,384 to 65,536 elements, 1.6-2.1 from 98,304
# to 786,432); this size reads the larger tensors' figure, which puts a small Clip up to 2-4x slow
HALF_LOOP = 196608
ELEMENT_LOOPS.update({f"{op}.half": HALF_LOOP for op in HALF_LOOPS})


def loop_elements(key: str = "Resize") -> int:
    """Elements of work (outputs; a scatter's updates) of one run of the loop_ns micro-benchmark of ``key``."""
    if key.startswith("Softmax"):
        return int(np.prod(SOFTMAX_AXIS_SHAPE))
    if key == "ScatterElements":
        return SCATTER_SHAPE[1] * SCATTER_SHAPE[2]
    if key == "QLinearConcat":
        return QCONCAT[0] * QCONCAT[1] * QCONCAT[2] ** 2
    if key == "QLinearAveragePool":
        return QPOOL[0] * (QPOOL[1] // 2) ** 2
    if key == "MaxPool.int8":
        return MAXPOOL8[0] * ((MAXPOOL8[1] - 3) // 2 + 1) ** 2
    if key in ELEMENT_LOOPS:
        return ELEMENT_LOOPS[key]
    if key in SHAPED_LOOPS:
        return int(np.prod(SHAPED_LOOPS[key]))
    ch, side, f = LOOP_UPSAMPLE
    return ch * (side * f) ** 2


def epilogue_elements() -> int:
    """Output elements that pass through an activation in one run of an epilogue chain."""
    ch, side = EPILOGUE_MAP
    return (EPILOGUE_CHAIN - 1) * ch * side * side


def _epilogue_chain(act: str) -> Micro:
    """EPILOGUE_CHAIN 1 x 1 convolutions, each but the last followed by ``act`` (none for '')."""
    from onnx import helper

    rng = np.random.default_rng(0)
    ch, side = EPILOGUE_MAP
    nodes, inits = [], []
    attrs = {"alpha": 0.1} if act == "LeakyRelu" else {}
    for i in range(EPILOGUE_CHAIN):
        x, y = ("x" if i == 0 else f"t{i - 1}"), ("y" if i == EPILOGUE_CHAIN - 1 else f"t{i}")
        # weights scaled so the values stay near 1 along the chain (no growth, no subnormals)
        inits.append(_w(f"w{i}", [ch, ch, 1, 1], rng=rng, scale=ch ** -0.5))
        last = i == EPILOGUE_CHAIN - 1
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [y if last or not act else f"c{i}"]))
        if act and not last:
            extra = ["zero", "six"] if act == "Clip" else []
            nodes.append(helper.make_node(act, [f"c{i}", *extra], [y], **attrs))
    if act == "Clip":
        inits += [_const("zero", 0.0), _const("six", 6.0)]
    model = _model(nodes, [_vi("x", [1, ch, side, side])], [_vi("y", None)], inits)
    return Micro(f"epilogue_{act or 'none'}", model, {"x": rng.standard_normal((1, ch, side, side)).astype(np.float32)},
                 "epilogue", act)


def _fixed_chain(family: str) -> Micro:
    from onnx import helper

    rng = np.random.default_rng(0)
    shape = {"conv": [1, 16, 7, 7], "depthwise_conv": [1, 16, 7, 7], "grouped_conv": [1, 16, 7, 7],
             "pool": [1, 16, 8, 8], "matmul": [8, 16], "elementwise": [1, 16, 7, 7]}.get(family, [1, 16, 16])
    if family == "rnn":  # one LSTM of FIXED_CHAIN tiny steps: each step's fixed time inside one op
        x = rng.standard_normal((FIXED_CHAIN, 1, 8)).astype(np.float32)
        model = _model([helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=8)], [_vi("x", [FIXED_CHAIN, 1, 8])],
                       [_vi("y", None)], [_w("w", [1, 32, 8], rng=rng, scale=0.3), _w("r", [1, 32, 8], rng=rng, scale=0.3)])
        return Micro("fixed_rnn", model, {"x": x}, "fixed", "rnn")
    if family == "control":
        x = rng.standard_normal((FIXED_CHAIN, 1, 16, 7, 7)).astype(np.float32)
        body = helper.make_graph([helper.make_node("Add", ["xi", "w"], ["yi"])], "body", [_vi("xi", [1, 16, 7, 7])],
                                 [_vi("yi", [1, 16, 7, 7])])
        model = _model([helper.make_node("Scan", ["x"], ["y"], body=body, num_scan_inputs=1)],
                       [_vi("x", list(x.shape))], [_vi("y", None)], [_w("w", [1, 16, 7, 7], rng=rng)])
        return Micro("fixed_control", model, {"x": x}, "fixed", "control")
    nodes, inits = [], []
    for i in range(FIXED_CHAIN):
        x, y = ("x" if i == 0 else f"t{i - 1}"), ("y" if i == FIXED_CHAIN - 1 else f"t{i}")
        if family in ("conv", "depthwise_conv", "grouped_conv"):
            groups = {"conv": 1, "depthwise_conv": 16, "grouped_conv": 4}[family]
            k = 1 if family == "conv" else 3
            inits.append(_w(f"w{i}", [16, 16 // groups, k, k], rng=rng))
            nodes.append(helper.make_node("Conv", [x, f"w{i}"], [y], pads=[k // 2] * 4, group=groups))
        elif family == "pool":
            nodes.append(helper.make_node("MaxPool", [x], [y], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        elif family == "norm":
            inits.append(_w(f"g{i}", [16], rng=rng))
            nodes.append(helper.make_node("LayerNormalization", [x, f"g{i}"], [y], axis=-1))
        elif family == "matmul":
            inits.append(_w(f"w{i}", [16, 16], rng=rng))
            nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [y]))
        elif family == "elementwise":
            inits.append(_w(f"w{i}", shape, rng=rng))
            nodes.append(helper.make_node("Add", [x, f"w{i}"], [y]))
        elif family == "softmax":
            nodes.append(helper.make_node("Softmax", [x], [y], axis=-1))
        else:  # movement
            nodes.append(helper.make_node("Transpose", [x], [y], perm=[0, 2, 1]))
    model = _model(nodes, [_vi("x", shape)], [_vi("y", None)], inits)
    return Micro(f"fixed_{family}", model, {"x": rng.standard_normal(shape).astype(np.float32)}, "fixed", family)


# shape arithmetic a runtime redoes every inference when the input dims are symbolic: rounds of an
# exported ShuffleNet unit (a 1 x 1 convolution, then the channel shuffle: Shape, four Gathers, a Div,
# Unsqueezes and Concats building the shapes of Reshape -> Transpose -> Reshape), once over a symbolic
# batch dim and once over a static one (which the runtime folds): the difference is the shape
# arithmetic alone, as it runs between a network's layers on network-sized tensors (a chain of shape
# ops on a tiny tensor alone ran at 0.28 us an op on this VM; between 64-channel 28 x 28 convolutions
# 0.77, and ShuffleNet V2 x1.0 itself pays 0.86: dynamic 2.85 ms against 2.49 ms static, 414 ops)
HOST_SHAPE_ROUNDS = 16
HOST_SHAPE_TENSOR = (64, 28)  # channels, side: a ShuffleNet V2 stage-2 branch


def _host_shape_chain(dynamic: bool) -> Micro:
    from onnx import TensorProto, helper, numpy_helper

    ch, side = HOST_SHAPE_TENSOR
    rng = np.random.default_rng(0)
    inits = [_int_tensor(f"i{d}", d, ()) for d in range(4)] + [
        _int_tensor("two", 2, ()), _int_tensor("ax", [0], (1,)), _int_tensor("g", [2], (1,)),
        _int_tensor("m1", [-1], (1,))]
    nodes = []
    cur = "x"
    for r in range(HOST_SHAPE_ROUNDS):
        p = f"r{r}_"
        inits.append(numpy_helper.from_array((rng.standard_normal((ch, ch, 1, 1)) * 0.1).astype(np.float32), p + "wt"))
        nodes.append(helper.make_node("Conv", [cur, p + "wt"], [p + "cv"]))
        cur = p + "cv"
        nodes.append(helper.make_node("Shape", [cur], [p + "s"]))
        for d, dim in enumerate("bchw"):
            nodes.append(helper.make_node("Gather", [p + "s", f"i{d}"], [p + dim]))
        nodes.append(helper.make_node("Div", [p + "c", "two"], [p + "cg"]))
        for dim in ("b", "cg", "h", "w"):
            nodes.append(helper.make_node("Unsqueeze", [p + dim, "ax"], [p + "u" + dim]))
        nodes += [helper.make_node("Concat", [p + "ub", "g", p + "ucg", p + "uh", p + "uw"], [p + "s5"], axis=0),
                  helper.make_node("Reshape", [cur, p + "s5"], [p + "y"]),
                  helper.make_node("Transpose", [p + "y"], [p + "t"], perm=[0, 2, 1, 3, 4]),
                  helper.make_node("Concat", [p + "ub", "m1", p + "uh", p + "uw"], [p + "s4"], axis=0),
                  helper.make_node("Reshape", [p + "t", p + "s4"], [p + "x"])]
        cur = p + "x"
    dims = ["n" if dynamic else 1, ch, side, side]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                   [helper.make_tensor_value_info(cur, TensorProto.FLOAT, None)], inits)
    name = "host_shape_dynamic" if dynamic else "host_shape_static"
    return Micro(name, model, {"x": np.ones((1, ch, side, side), np.float32)}, "host", name)


def _int_tensor(name: str, value, shape: tuple):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array(value, dtype=np.int64).reshape(shape), name)


def _int8_depthwise(name: str, ch: int, role: str) -> Micro:
    """ONNX Runtime's channels-last 8-bit depthwise 3 x 3 convolution (com.microsoft QLinearConv, uint8 data,
    int8 weights with zero points of 0) on ``ch`` channels at INT8_DEPTHWISE's side."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    side = INT8_DEPTHWISE[1]
    wd = numpy_helper.from_array(rng.integers(-3, 4, size=(ch, 1, 3, 3)).astype(np.int8), "w")
    return Micro(name, _model(
        [helper.make_node("QLinearConv", ["x", "scale", "zero", "w", "ws", "wz", "ys", "zero"], ["y"],
                          domain="com.microsoft", channels_last=1, group=ch, kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        [_vi("x", [1, side, side, ch], 2)], [_vi("y", None, 2)],
        [_const("scale", 0.02), _u8("zero", 128), wd, _const("ws", 0.01),
         numpy_helper.from_array(np.array(0, np.int8), "wz"), _const("ys", 0.05)], contrib=True),
        {"x": rng.integers(0, 255, size=(1, side, side, ch)).astype(np.uint8)}, role, "depthwise_conv")


def _conv(name: str, ch: int, side: int, k: int, stride: int, groups: int, key: str, out: int | None = None) -> Micro:
    """A ``k`` x ``k`` convolution of ``ch`` channels (``out`` output channels, default ``ch``) over
    ``side`` x ``side`` input pixels in ``groups`` groups."""
    from onnx import helper

    rng = np.random.default_rng(0)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[k // 2] * 4, strides=[stride, stride], group=groups)
    model = _model([node], [_vi("x", [1, ch, side, side])], [_vi("y", None)], [_w("w", [out or ch, ch // groups, k, k])])
    return Micro(name, model, {"x": rng.standard_normal((1, ch, side, side)).astype(np.float32)}, "shape", key)
