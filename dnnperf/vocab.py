"""The project's vocabularies, each defined once: op families, loss causes, precisions.

Everything else derives from these enums: the workload and profile validation, the scoring step
table, the renderers' colours and the JSON Schema's enum lists (a test checks the schema against
them). Values are plain strings in data and JSON (``Family.conv.value == "conv"``).
"""

from __future__ import annotations

from enum import Enum


class Family(str, Enum):
    """What kind of kernel a node is: decides the unit that runs it and the fixes that apply."""

    conv = "conv"
    depthwise_conv = "depthwise_conv"
    grouped_conv = "grouped_conv"
    matmul = "matmul"
    attention = "attention"
    rnn = "rnn"
    elementwise = "elementwise"
    cast = "cast"
    norm = "norm"
    softmax = "softmax"
    pool = "pool"
    reduce = "reduce"
    resize = "resize"
    movement = "movement"
    control = "control"
    host = "host"  # runs on the host CPU (strings, ML-domain ops, data-dependent bookkeeping)
    view = "view"  # relabels a buffer: no kernel, no bytes
    shape = "shape"  # folded at load time: no kernel, no bytes
    shape_runtime = "shape_runtime"  # shape arithmetic the runtime redoes every inference (dims symbolic in the file): host work, no kernel


class Cause(str, Enum):
    """Why a layer (or the model) is slower than the quoted peak: each loss has one cause."""

    compute = "compute"  # time at the quoted peak itself dominates
    memory = "memory"
    parallelism = "parallelism"
    input_io = "input_io"
    overlap = "overlap"
    specialization = "specialization"
    unoptimized = "unoptimized"
    launch_overhead = "launch_overhead"
    heterogeneity = "heterogeneity"
    thermal = "thermal"


class Algorithm(str, Enum):
    """How a GPU library runs a layer (``LayerCost.algorithm``; other devices: none)."""

    gemm = "gemm"  # a BLAS product
    implicit_gemm = "implicit_gemm"  # a convolution as a product over gathered input patches
    winograd_fused = "winograd_fused"  # F(2x2, 3x3) in one kernel
    winograd = "winograd"  # non-fused: transform kernels around batched products
    fft = "fft"  # spectra of the padded map, batched complex products, the inverse transform
    direct = "direct"  # the library's own kernel of a matrix op that is not a product (depthwise)
    elementwise = "elementwise"  # no matrix work


def values(enum) -> tuple[str, ...]:
    return tuple(m.value for m in enum)


FAMILIES = values(Family)
ALGORITHMS = values(Algorithm)
MATRIX_FAMILIES = frozenset({"conv", "depthwise_conv", "grouped_conv", "matmul", "attention", "rnn"})
FREE_FAMILIES = frozenset({"view", "shape"})  # no kernel launched, no bytes moved
# views ONNX Runtime's CPU provider still runs as nodes of their own: no bytes move (the output aliases
# the input), but each costs a dispatch like any node (a Squeeze / Unsqueeze chain 0.17 us a node, a
# Relu chain 0.16); a Transpose that moves only size-1 axes is one too, whose kernel copies the tensor with one
# memcpy (``dnnperf.scoring.cpu_dispatched``)
CPU_VIEW_KERNELS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose"})
HOST_SHAPE_FAMILIES = frozenset({"shape_runtime"})  # no kernel: a CPU runtime pays a host cost per op
# families a profile may name (efficiency, accelerator_families): everything that launches a kernel
PROFILE_FAMILIES = tuple(f for f in FAMILIES if f not in FREE_FAMILIES and f not in HOST_SHAPE_FAMILIES)
CAUSES = values(Cause)
LOSS_KEYS = tuple(c for c in CAUSES if c != "compute")  # every cause but compute is a loss

# kernels ONNX Runtime's CPU provider makes of activation and transformer patterns (dnnperf.kernel_groups)
RUNTIME_KERNELS = ("Gelu", "BiasGelu", "SkipLayerNormalization", "QuickGelu", "FastGelu")
# the kernels ONNX Runtime makes of a layer normalisation spelled as nodes (dnnperf.kernel_groups: RMSNorm, a
# layer norm exported before opset 17): the norm ops they are, priced as such (the norm family, by row length)
NORM_KERNELS = ("SimplifiedLayerNormalization", "LayerNormalization")
# the names ONNX Runtime's profile gives a runtime kernel, where they are not the kernel's own (its
# FastGelu fusion names the tanh GELU it makes 'GPT2Gelu', 'GPT2Gelu_token_<n>')
RUNTIME_KERNEL_NAMES = {"FastGelu": ("FastGelu", "GPT2Gelu")}
# the calibrated kernel a profile timed before this one existed prices it (one pass, one transcendental
# per element: the tanh GELU as the erf one)
RUNTIME_KERNEL_PRICED_AS = {"FastGelu": "Gelu"}
# ONNX Runtime's CPU reductions without a vector fast path: ReduceSumSquare, ReduceL1, ReduceLogSum and
# ReduceProd go through the same generic loop as ReduceL2 and take what it takes an element (0.15-0.5 ns on a
# 2-core EPYC VM over rows of 20 to 2,000, against 0.03-0.09 for ReduceSum / Mean / Max / Min): priced with
# its calibrated figure (op_efficiency ReduceL2)
OP_PRICED_AS = {**RUNTIME_KERNEL_PRICED_AS, "ReduceSumSquare": "ReduceL2", "ReduceL1": "ReduceL2",
                "ReduceLogSum": "ReduceL2", "ReduceProd": "ReduceL2", "QLinearLeakyRelu": "QLinearSigmoid"}
# ops outside the elementwise op table (measure.micro.OP_MICRO) that calibrate times for an op_efficiency of their own
# (a layer ONNX Runtime runs as one of them, a QDQ group's Add as its QLinearAdd, names it as its Workload.kernel).
# ONNX Runtime's 8-bit QLinearAdd, QLinearMul and QLinearSigmoid (a table lookup per element, as QLinearLeakyRelu)
# take about a float op's time per element on a 2-core EPYC VM (0.05-0.15, 0.09-0.24 and 0.12-0.29 ns) although
# they move a quarter of its bytes
OWN_OP_FIGURES = ("ReduceL2", "Where", "DequantizeLinear", "QLinearAdd", "QLinearMul", "QLinearSigmoid", "Pow.square")
# the activations ONNX Runtime's CPU convolutions and GEMMs fuse (dnnperf.fusion.CPU_CONV_ACTIVATIONS)
# that are applied in a pass of their own over the finished output (Relu is applied in the kernel's
# loop): what a profile's epilogue_ns may name, and what calibrate times
EPILOGUE_ACTIVATIONS = ("Clip", "HardSigmoid", "HardSwish", "LeakyRelu", "Sigmoid", "Tanh")
# the CPU convolution activations (dnnperf.fusion.CPU_CONV_ACTIVATIONS) ONNX Runtime's blocked layout takes
# standalone, on a blocked tensor (its 1.32 NCHWc pass): the only ones a standalone BatchNormalization, which
# that pass turns into a per-channel convolution after the activation fusions have run, applies itself. A Clip
# or a LeakyRelu after one stays a kernel of its own, out of the blocked layout and back (its optimised graph of
# Conv, BatchNormalization, Clip, Conv: a ReorderOutput before the Clip, a ReorderInput after; with a Relu, one
# blocked convolution with activation Relu)
BLOCKED_ACTIVATIONS = frozenset({"Relu", "Sigmoid", "Tanh", "HardSigmoid"})
# the activations ONNX Runtime's FusedGemm applies (its GemmActivationFusion), and only to a 2-D Gemm: a Gemm
# node, or a 2-D MatMul its bias Add (or a BatchNormalization folded into it) made one. Its optimised graphs:
# Gemm -> Elu one FusedGemm, Gemm -> Clip a Gemm and a Clip, a MatMul without a bias and its Relu two kernels, a
# 3-D MatMul and its bias Add a Gemm between two Reshapes with the Relu after them
GEMM_ACTIVATIONS = frozenset({"Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Elu", "Selu", "Softplus",
                              "Softsign", "ThresholdedRelu"})
# kernels a CPU runtime runs as one loop over their outputs (ONNX Runtime's Resize: 0.58 ns per output element nearest,
# 0.82 linear on a 2-core EPYC VM, whatever the shape; a Softmax over an axis that is not the last: 8-13 ns;
# ScatterElements: 5-9 ns an update; the uint8 QLinearConcat 0.26-0.54 ns and QLinearAveragePool 8.2-10 ns an output; an
# 8-bit MaxPool in NCHW (a QDQ model's, its Q/DQ pair dropped) 7.6-8.5 ns an output, 20x its float twin, where the
# NhwcMaxPool it runs after a QLinearConv takes 0.2; a Transpose that moves the last axis and more than one axis, copied
# element by element, 2.3-2.8 ns: dnnperf.ops.transpose.element_loop; a Slice stepping through the last axis 0.8; a
# Gather of small blocks 2.6-3.4 a block; a CumSum along the last axis 1.6-3; DepthToSpace 0.6-2.6 and SpaceToDepth
# 0.25-0.33; ArgMax / ArgMin 0.24-0.48 an input element; an Expand that broadcasts a last axis of one element 23-25 an
# input element; PRelu 2.0-2.8 an element, whatever its slope's shape; a tree ensemble 2.1-4.5 ns a level of a row's
# walk down one tree, 10 to 200 trees of 3 to 12 levels, 4,096 rows; an SVM's kernels 0.5 ns a term, one support
# vector's one feature for one row; an LRN 12 ns an element, AlexNet's and GoogLeNet's at 0.2 to 0.6 M elements; a
# ReduceLogSumExp 2.0-2.4 ns an input element, an exponential each, over rows of 20 to 2,000): what a profile's loop_ns
# may name (Workload.kernel), per step of the layer's work (Workload.loop_items, else Workload.parallel_work: outputs, a
# scatter's updates, a Gather's blocks), and what calibrate times. ADDED_LOOPS' figures add to a kernel's time instead
# of replacing it
LOOP_KERNELS = ("Resize.nearest", "Resize.linear", "Resize.cubic", "Softmax.axis", "ScatterElements", "QLinearConcat",
                "QLinearAveragePool", "MaxPool.int8", "Transpose.elements", "Slice.strided", "Gather.blocks",
                "CumSum.last", "DepthToSpace", "SpaceToDepth", "ArgMax", "Expand.fill", "PRelu", "TreeEnsemble.level",
                "SVM.term", "LRN", "ReduceLogSumExp", "Broadcast.span", "MatMulNBits.fp32", "MatMulNBits.int8",
                "Clip.half", "Max.half", "Min.half", "Round.half", "Shrink.half",  # 16-bit element ops: dnnperf.upcast
                "Transpose.blocks", "Transpose.planes")
# ONNX Runtime's CPU MatMulNBits (4-bit weights in blocks): its kernel unpacks and scales every weight on
# each call, in float32 (accuracy_level 0-3) or after quantising the input to 8 bits (accuracy_level 4: byte
# dot products), at a calibrated time per weight (K x N; a 2-core EPYC VM, one row, 4096 x 4096 products
# past the cache: 0.047-0.051 ns in float32, twice the float32 peak's estimate; 0.017-0.018 in int8;
# 0.036 / 0.010 for 2048 x 2048 ones held in the cache); a bias added by the same kernel (a fused
# MatMulNBits+Add) keeps the figure
NBITS_KERNELS = ("MatMulNBits.fp32", "MatMulNBits.int8")
# a binary op whose inputs broadcast is run by ONNX Runtime as one call of its vector loop per span (the
# innermost run of axes over which neither input changes between broadcast and not: a bias of 96 added
# to [4096, 96] is 4,096 spans of 96): each span costs a fixed time on top of the stream (2-core EPYC VM,
# 393,216 elements: 16-wide spans 96 us, 48 50, 96 38, 192 29, 768 28; 2.85 ns a span)
BROADCAST_SPANS = "Broadcast.span"
# a Transpose that copies runs of several elements (the trailing axes it leaves in place) calls a copy once a
# run, at a fixed time per call on top of its bytes (dnnperf.ops.transpose.copied_blocks: 4.1-5.0 ns a run)
TRANSPOSE_BLOCKS = "Transpose.blocks"
# ... and one that transposes many small 2-D planes calls its tiled 2-D transpose once a plane, each call split
# over the thread pool (dnnperf.ops.transpose.transposed_planes: 0.65-0.9 us a plane beyond the first)
TRANSPOSE_PLANES = "Transpose.planes"
ADDED_LOOPS = (BROADCAST_SPANS, TRANSPOSE_BLOCKS, TRANSPOSE_PLANES)
# ... the element loop of one that moves the last axis with more than one other (dnnperf.ops.transpose.element_loop)
TRANSPOSE_ELEMENTS = "Transpose.elements"
# ... and the one memcpy of one that moves only axes of size 1, on the calling thread (dnnperf.scoring.cpu_dispatched)
TRANSPOSE_RESHAPE = "Transpose.reshape"
# a convolution whose weights are computed at every inference (dequantized by a DequantizeLinear ONNX Runtime
# keeps unfolded): its blocked layout reorders weights once at load time, so it runs the plain kernel
PLAIN_CONV = "Conv.runtime_weights"
# a mixture of experts (com.microsoft MoE / QMoE, dnnperf.ops.experts): its product's N is the sum of
# one expert's matrices' widths, no width a designer sets, so no width what-if is made of it
EXPERTS_KERNEL = "MoE"
# the element types of an 8-bit integer product's data and weights (u: uint8, s: int8), which pick the
# CPU kernel: ONNX Runtime on x86 multiplies uint8 data by int8 weights with the VNNI / AVX2 byte
# dot-product instructions, and every other pairing on slower paths (a 2-core AVX-512 VNNI VM, 1024^3
# MatMulInteger: u8s8 0.80-0.87 TOP/s, u8u8 0.31-0.33, s8s8 and s8u8 0.065-0.07, fp32 MatMul
# 0.15-0.20): what a profile's int8_operands may name, and what calibrate times
INT8_OPERANDS = ("u8s8", "u8u8", "s8s8", "s8u8")
_SIGN = {"uint8": "u8", "int8": "s8"}


def int8_operands(data: str | None, weight: str | None) -> str:
    """'u8s8' for uint8 data x int8 weights (and so on); '' unless both are 8-bit integers."""
    a, b = _SIGN.get(data or ""), _SIGN.get(weight or "")
    return a + b if a and b else ""
