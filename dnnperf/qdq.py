"""Quantized layers in QDQ form: the precision a runtime really runs them in.

A model quantized in the QDQ format (ONNX Runtime's quantization tools, TensorRT's explicit
quantization) keeps its operators in float and brackets them with QuantizeLinear / DequantizeLinear
pairs: ``x -> Q -> DQ -> Conv <- DQ <- int8 weights``. Read by their dtypes, those layers would be
costed in fp32 with a Q and a DQ kernel each, four times the bytes, and the advice would be to move
them to fp16: the quantization the model carries would be lost. Runtimes that take such a model
(TensorRT, ONNX Runtime's QDQ transformers) run the bracketed products as int8 kernels instead:

- a matrix layer (Conv, ConvTranspose, MatMul, Gemm) whose data and weight inputs both come from a
  DequantizeLinear of integer (or 8-bit float) tensors runs at that quantized precision (the wider of
  the two when they differ: 4-bit weights with 8-bit activations run in int8), reading the quantized
  tensors (int8: 1 byte per element, not 4); outside an engine, not when its bias is a dequantized
  int32 tensor whose scale is off the input's times the weight's by more than 1% of it plus 1e-6, or when
  one of those three scales is computed at run time (ONNX Runtime refuses it, and the layer runs in float
  between its Q/DQ kernels, each weight dequantized at every inference: ONNX Runtime keeps DequantizeLinear
  nodes unfolded);
- a layer's output that goes only to QuantizeLinear nodes is written quantized, and those
  QuantizeLinear nodes launch nothing (the kernel requantizes); a QuantizeLinear after an
  activation that follows the layer stays a kernel without fusion and is the layer's epilogue with
  ``--fusion typical`` (``dnnperf.fusion``: an epilogue op);
- a DequantizeLinear whose every consumer is one of the above launches nothing (a weight's is
  folded at load time anyway).

- a MatMul or Gemm whose weight comes from a DequantizeLinear of quantized weights while its data
  input stays float is weight-only quantized (W4A16 / W8A16 LLMs in QDQ form: ONNX Runtime fuses the
  pair into its MatMulNBits kernel, TensorRT into a weight-only GEMM): it computes in the data's
  precision, reads the weights at their quantized width, and dequantizes each weight element as it goes
  (2 ops, as MatMulNBits is costed); outside an engine, not when the weight is computed at load time
  from a table other nodes read too (a tied embedding, which ONNX Runtime leaves unfused). A
  convolution keeps its float weights (no such kernels).

Only matrix layers are taken to run quantized: other operators between Q/DQ pairs keep their float
cost and their Q/DQ kernels, except in a TensorRT engine (``plan(..., engine=True)``), whose explicit
quantization fuses a DequantizeLinear / QuantizeLinear pair around an elementwise add, a pooling, a
concatenation or a data-movement op into that op run in int8 (its "quantizable" and "commuting" layers):
such an op whose every computed input is dequantized and whose every output is requantized runs
quantized, and its Q/DQ nodes launch nothing; and on ONNX Runtime's CPU provider (``plan(...,
ort_cpu=True)``, applied by ``dnnperf.qdq_runs``; its rules in ``dnnperf.qdq_ort``), whose QDQ transformers
rewrite such groups into its QLinear kernels or run max pooling and data movement on the 8-bit tensor,
and leave in float a Conv no QuantizeLinear takes and the matrix layers its quantized kernels and its
MatMulNBits fusion do not take (``qdq_ort.FLOAT_WHY``: 4-bit or float8 operands, blocked weights...).
ONNX Runtime 1.32 runs its NCHW 8-bit MaxPool an element at a time (0.75-1.56 ms for SqueezeNet 1.1's,
83 us in the float model: a calibrated loop) and its channels-last one after a QLinearConv at a float
pool's pace. Nothing here changes a model without DequantizeLinear nodes. ``-p`` what-ifs apply on top
as for any layer."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from dnnperf.ir import DTYPE_BITS, Graph, Node
from dnnperf.kernel_groups import reads_through_identity, users_of
from dnnperf.vocab import int8_operands
from dnnperf.workload import DTYPE_OF_PRECISION, Workload

MATRIX_OPS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm"})
# ops a TensorRT engine runs quantized between a DequantizeLinear and a QuantizeLinear (explicit
# quantization: elementwise and pooling layers it fuses with their Q/DQ, and the layers the Q/DQ nodes
# commute through)
ENGINE_OPS = frozenset({"Add", "Sub", "Mul", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Concat",
                        "Relu", "Clip", "LeakyRelu", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Pad",
                        "Slice", "Resize"})
_EIGHT_BIT = ("int8", "uint8")
# quantized element types a DequantizeLinear widens, and the precision a layer fed by them runs in
QUANTIZED = {"int8": "int8", "uint8": "int8", "float8e4m3fn": "fp8", "float8e4m3fnuz": "fp8", "float8e5m2": "fp8",
             "float8e5m2fnuz": "fp8", "int4": "int4", "uint4": "int4", "float4e2m1": "fp4"}
RUNG = {"int4": 0, "fp4": 0, "fp8": 1, "int8": 1}  # the wider precision of a layer's two inputs wins
_DEFAULT = ("", "ai.onnx", "com.microsoft")  # ONNX Runtime's contrib Q/DQ (16- and 4-bit QDQ models) read alike
# why a product with a misscaled bias runs in float (inspection warns with it)
MISSCALED_WHY = ("which ONNX Runtime does not fuse into a quantized kernel (a bias the quantizer shared between "
                 "layers); their weights are dequantized at every inference")
NOTE = "QDQ: runs in"  # how a quantized layer's workload note begins (dnnperf.api reads it)
WEIGHT_ONLY = "QDQ: weight-only,"  # ... and a weight-only quantized one's


@dataclass(frozen=True)
class Quantized:
    """How one node runs: ``precision``; the quantized dtype each input is read at (None: as it is);
    the dtype its outputs are written at (None: their declared type)."""

    precision: str
    inputs: tuple
    output: str | None
    weight_only: bool = False  # data input float, weights quantized: computes in the data's precision
    weight_extras: tuple = ()  # the weight's scale and zero point (read with it by a weight-only kernel)
    twin: Node | None = None  # the node ONNX Runtime's CPU provider runs instead (its QLinear kernel, the op on 8 bits)
    kernel: str = ""  # the twin's loop kernel, when the runtime runs it as one (``vocab.LOOP_KERNELS``)


def plan(graph: Graph, engine: bool = False, misscaled: dict | None = None, ort_cpu: bool = False,
         refused: dict | None = None) -> tuple[dict[str, Quantized], set[str]]:
    """({node run quantized: how}, {DequantizeLinear / QuantizeLinear nodes that launch nothing});
    ``engine``: as a TensorRT engine runs the model (``ENGINE_OPS`` between Q/DQ pairs too); ``ort_cpu``:
    as ONNX Runtime's CPU provider runs it (``qdq_ort.ORT_QLINEAR`` and ``ORT_DROP`` between them too, and the
    matrix layers its quantized kernels do not take in float: ``qdq_ort.FLOAT_WHY``);
    ``misscaled``, when given, receives the products whose int32 bias's scale is checked against the input's
    times the weight's (``bias_fits``: node -> "off", "computed", or "unread" for one run quantized on the
    assumption that it fits); ``refused``, with
    ``ort_cpu``, the matrix layers that provider leaves in float (node -> a ``qdq_ort.FLOAT_WHY`` key)."""
    refused = {} if refused is None else refused
    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    consumers = run_users(graph)

    def quantized_source(t: str) -> str | None:
        """The quantized dtype ``t`` is dequantized from, when a DequantizeLinear makes it."""
        p = producer.get(t)
        if p is None or p.op_type != "DequantizeLinear" or p.domain not in _DEFAULT or not p.inputs:
            return None
        src = graph.tensors.get(p.inputs[0])
        return src.dtype if src is not None and src.dtype in QUANTIZED else None

    from dnnperf import qdq_ort  # (its rules build on this module's types)

    folded = qdq_ort.folded_activations(graph, consumers) if ort_cpu else {}

    def requantized(n) -> str | None:
        """The dtype every output of ``n`` is quantized to when each goes only to QuantizeLinear nodes (on
        ONNX Runtime's CPU provider, through an activation it folds into the QuantizeLinear: ``folded``)."""
        dtypes = set()
        for o in n.outputs:
            users = consumers.get(o, []) if o else []
            if len(users) == 1 and users[0].name in folded:
                o = users[0].outputs[0]
                users = consumers.get(o, [])
            if not users or o in graph.outputs:
                return None
            for u in users:
                t = graph.tensors.get(u.outputs[0]) if u.op_type == "QuantizeLinear" and u.outputs else None
                if u.domain not in _DEFAULT or t is None or t.dtype not in QUANTIZED:
                    return None
                dtypes.add(t.dtype)
        return dtypes.pop() if len(dtypes) == 1 else None

    def bias_fits(n) -> str:
        """ONNX Runtime's QDQ selectors fuse a product whose bias is a dequantized int32 tensor only when
        that bias's scale is the input's scale times the weight's (its QLinearConv takes the bias at
        that scale) within 1% of the product plus 1e-6: otherwise ("off") the node runs in float between its
        DequantizeLinear and QuantizeLinear kernels (ONNX Runtime 1.32's quantizer gives a bias shared by
        several convolutions, as equal-valued biases are, one convolution's scale: 39 of MobileNetV2's 52
        convolutions then ran in float). The absolute term decides where scales are small: a product of
        1e-6 took a bias scale of 2e-6 and refused 2.02e-6, one of 2e-4 took 1.0145 times it and refused
        1.015 times; EfficientNet-B0's convolutions sharing a bias fused up to 0.94e-6 off and none from
        1.14e-6 (34 of them 13-122% off fused, 23 refused). It compares constants only: one of the three
        scales computed at run time (a graph input, or made from one) and the product stays in float
        ("computed"; without a bias such scales fuse, the output's scale either way). "unread": constants
        whose values the loader did not keep (``load.read.quant_params``' limit), taken to fit; "" fits."""
        if len(n.inputs) < 3 or not n.inputs[2] or quantized_source(n.inputs[2]) is not None:
            return ""  # no bias, a float bias, or an 8-bit one: not this check
        bias = n.inputs[2]
        p = producer.get(bias)
        while p is not None and p.op_type == "Identity" and p.inputs:  # the runtime removes Identity nodes first
            bias = p.inputs[0]
            p = producer.get(bias)
        src = graph.tensors.get(p.inputs[0]) if p is not None and p.op_type == "DequantizeLinear" and p.inputs else None
        if src is None or src.dtype != "int32":
            return ""
        names = [producer[t].inputs[1] if len(producer[t].inputs) > 1 else "" for t in (n.inputs[0], n.inputs[1])]
        names.append(p.inputs[1] if len(p.inputs) > 1 else "")
        if any(s not in graph.constants for s in names):
            return "computed"
        xs, ws, bs = (graph.values.get(s) for s in names)
        if xs is None or ws is None or bs is None:
            return "unread"
        try:
            as64 = [np.asarray(v, dtype=np.float64) for v in (xs, ws, bs)]
            fits = np.allclose(as64[2], as64[0] * as64[1], rtol=1e-2, atol=1e-6)
        except ValueError:  # shapes that do not broadcast: a malformed model, left to its costing
            return ""
        return "" if fits else "off"

    def from_shared(t: str) -> bool:
        """Whether weight ``t`` is dequantized from a tensor computed at load time out of an initializer
        other nodes read too (a tied embedding table transposed for the output projection, as
        quantize_dynamic leaves GPT-2's): ONNX Runtime 1.32 then fuses no MatMulNBits, and runs the
        DequantizeLinear (38.6 M elements, 5.8 ms on a 2-core VM) and a float product at every inference."""
        p = producer.get(t)
        todo = [producer.get(p.inputs[0])] if p is not None and p.inputs else []
        while todo:
            q = todo.pop()
            if q is None:
                continue
            for i in q.inputs:
                if i in graph.initializers and len(consumers.get(i, [])) > 1:
                    return True
                if i:
                    todo.append(producer.get(i))
        return False

    def unsigned(q) -> bool:
        """ONNX Runtime's x86 CPU provider turns an int8 QuantizeLinear -> DequantizeLinear pair into uint8 (its
        fast kernels take uint8 data) where the QuantizeLinear feeds that one DequantizeLinear and the
        DequantizeLinear at most one node: it first gives every reader a DequantizeLinear of its own, and a
        QuantizeLinear read by several stays int8. Checked against its optimised graphs of models quantized
        with int8 activations (its quantizer's default) and of 1,100 random QDQ chains."""
        users = consumers.get(q.outputs[0], []) if q.outputs else []
        if len(users) != 1 or users[0].op_type != "DequantizeLinear" or not users[0].outputs:
            return False
        out = users[0].outputs[0]  # (a graph output counts as a reader: QGemm then runs int8)
        return len(consumers.get(out, [])) + (out in graph.outputs) <= 1

    def run_dtype(t: str) -> str | None:
        """The 8-bit type ``t``'s DequantizeLinear reads as ONNX Runtime's CPU provider runs it (``unsigned``)."""
        src = quantized_source(t)
        if src == "int8" and ort_cpu:
            q = producer.get(producer[t].inputs[0])
            if q is not None and q.op_type == "QuantizeLinear" and q.domain in _DEFAULT and unsigned(q):
                return "uint8"
        return src

    def q_dtype(q) -> str | None:
        """The type a QuantizeLinear writes as that provider runs it."""
        t = graph.tensors.get(q.outputs[0]) if q.outputs else None
        dt = t.dtype if t is not None else None
        return "uint8" if dt == "int8" and ort_cpu and unsigned(q) else dt

    nodes: dict[str, Quantized] = {}
    for n in graph.nodes:
        if n.domain not in _DEFAULT:
            continue
        if n.op_type in MATRIX_OPS and len(n.inputs) >= 2:
            a, b = quantized_source(n.inputs[0]), quantized_source(n.inputs[1])
            if a is None and b is not None and n.op_type in ("MatMul", "Gemm") and n.inputs[1] in graph.constants:
                if not engine and from_shared(n.inputs[1]):
                    continue
                why = qdq_ort.nbits_refusal(graph, n, producer[n.inputs[1]], b, producer, consumers) if ort_cpu \
                    else None
                if why:
                    refused[n.name] = why
                    continue
                extras = tuple(i for i in producer[n.inputs[1]].inputs[1:] if i)
                nodes[n.name] = Quantized(QUANTIZED[b], (None, b), None, weight_only=True, weight_extras=extras)
                continue
            if a is None or b is None:
                continue
            bias = "" if engine else bias_fits(n)
            if bias and misscaled is not None:
                misscaled[n.name] = bias
            if bias in ("off", "computed"):
                continue
            why = qdq_ort.qlinear_refusal(graph, n, run_dtype(n.inputs[0]), b, producer[n.inputs[1]], consumers,
                                          folded) if ort_cpu else None
            out = requantized(n)
            if ort_cpu and n.op_type == "Conv" and out is None:
                why = why or "no_requantize"  # its QLinearConv writes 8 bits: without a QuantizeLinear after it, float
            after = consumers.get(n.outputs[0], [])
            if len(after) == 1 and after[0].name in folded:  # the QuantizeLinear behind a folded activation
                after = consumers.get(after[0].outputs[0], [])
            writes = {q_dtype(u) for u in after}
            if ort_cpu and not why and out is not None and writes != {run_dtype(n.inputs[0])}:
                why = "one_type"  # its QLinear kernels read and write one 8-bit type (int8 in kept, uint8 out)
            if why:
                refused[n.name] = why
                continue
            prec = max((QUANTIZED[a], QUANTIZED[b]), key=lambda p: RUNG[p])
            nodes[n.name] = Quantized(prec, (a, b), out)
        elif ort_cpu and (n.op_type in qdq_ort.ORT_QLINEAR or n.op_type in qdq_ort.ORT_DROP) and n.inputs:
            q = qdq_ort.group(graph, n, producer, consumers, run_dtype, q_dtype, nodes, folded)
            if q is not None:
                nodes[n.name] = q
        elif engine and n.op_type in ENGINE_OPS and n.inputs:
            data = [i for i in n.inputs if i and i not in graph.constants]
            srcs = [quantized_source(i) for i in data]
            out = requantized(n)
            if not data or any(s is None for s in srcs) or out is None:
                continue
            prec = max((QUANTIZED[s] for s in srcs), key=lambda p: RUNG[p])
            nodes[n.name] = Quantized(prec, tuple(quantized_source(i) if i in data else None for i in n.inputs), out)
    free = set()
    for n in graph.nodes:
        if n.domain not in _DEFAULT or not n.outputs or not n.outputs[0]:
            continue
        if n.op_type == "DequantizeLinear":
            users = consumers.get(n.outputs[0], [])
            if users and all(u.name in nodes for u in users) and n.outputs[0] not in graph.outputs \
                    and n.outputs[0] not in graph.constants:  # a weight's is folded at load time
                free.add(n.name)
        elif n.op_type == "QuantizeLinear" and n.inputs:
            p = producer.get(n.inputs[0])
            if p is not None and p.name in folded and p.inputs:
                p = producer.get(p.inputs[0])
            if p is not None and p.name in nodes and nodes[p.name].output is not None:
                free.add(n.name)
    free.update(folded)  # activations the provider folds into the QuantizeLinear after them
    return nodes, free


def run_users(graph: Graph) -> dict[str, list]:
    """tensor -> the nodes that read it at run time: ``users_of`` less the nodes whose every output is a value
    known when the model loads and not recomputed per inference (``Graph.host_shape``): a Shape of a tensor of
    static shape and the arithmetic on it, which ONNX Runtime folds before its QDQ fusions look at who reads a
    DequantizeLinear. ShuffleNet V2 exported with its channel shuffle's shape computed (Shape -> Gather ->
    Concat -> Reshape) reads each concatenation's DequantizeLinear by four Shape nodes and the Reshape: ONNX
    Runtime runs its QLinearConcat -> Reshape -> Transpose -> Reshape on the 8-bit tensor, no DequantizeLinear
    between (its optimised graph), where dnnperf kept 29 DequantizeLinear kernels ONNX Runtime does not run
    (predicted 15 us each in the first stage)."""
    def folded(n) -> bool:
        outs = [o for o in n.outputs if o]
        return bool(outs) and all(o in graph.values and o not in graph.host_shape for o in outs)

    return {t: [u for u in us if not folded(u)] for t, us in users_of(graph).items()}


def plan_warnings(nodes: dict, free: set, misscaled: dict) -> list[str]:
    """What a report says of ``plan``'s result: the layers run quantized, weight-only, or left in float."""
    from dnnperf.load.read import MAX_VALUE_ELEMS as QUANT_KEPT  # (how many values of a scale the loader keeps)

    out = []
    both = {k: q for k, q in nodes.items() if not q.weight_only}
    if both:
        precs = sorted({q.precision for q in both.values()})
        out.append(f"QDQ form: {len(both)} matrix layer(s) costed in {'/'.join(precs)}, reading quantized tensors as "
                   f"the runtimes that take QDQ models run them ({len(free)} QuantizeLinear / DequantizeLinear "
                   "node(s) around them launch nothing); -p sets another precision")
    if len(both) < len(nodes):
        wo = sorted({q.precision for q in nodes.values() if q.weight_only})
        out.append(f"QDQ form: {len(nodes) - len(both)} matrix layer(s) weight-only quantized ({'/'.join(wo)} weights, "
                   "float data): costed reading the quantized weights and dequantizing them on the fly, as ONNX "
                   "Runtime's MatMulNBits and TensorRT's weight-only GEMMs run them")
    counts = {why: sum(1 for v in misscaled.values() if v == why) for why in ("off", "computed", "unread")}
    if counts["off"]:
        out.append(f"QDQ form: {counts['off']} matrix layer(s) costed in float: each has an int32 bias whose scale is "
                   f"off its input's times its weights' by more than 1% of it plus 1e-6, {MISSCALED_WHY}")
    if counts["computed"]:
        out.append(f"QDQ form: {counts['computed']} matrix layer(s) with an int32 bias costed in float: a scale of "
                   "their input, weights or bias is computed at run time, which ONNX Runtime cannot check against "
                   "the others and does not fuse into a quantized kernel; their weights are dequantized at every "
                   "inference")
    if counts["unread"]:
        out.append(f"QDQ form: {counts['unread']} matrix layer(s) with an int32 bias assumed to run quantized: the "
                   f"values of their scales were not read (the loader keeps up to {QUANT_KEPT:,} a tensor); ONNX "
                   "Runtime runs such a layer in float when the bias's scale is off the input's times the weights' "
                   "by more than 1% (check with its optimised graph)")
    return out


def runtime_dequantizers(graph: Graph, nodes: dict) -> tuple[set[str], set[str]]:
    """(DequantizeLinear nodes of weights that a layer running in float reads, the convolutions that
    read such weights); ``nodes``: those run quantized, from ``plan``. ONNX Runtime does not fold
    DequantizeLinear nodes (it keeps them for its QDQ fusions), so it dequantizes such a weight at every
    inference (MobileNetV2 in QDQ form with 39 convolutions left in float); and its blocked layout,
    which reorders a convolution's weights once at load time, does not take a convolution whose weights
    are computed so (those 39 stayed plain Conv nodes in ONNX Runtime's optimised graph, none in NCHWc).
    One read only by quantized kernels is read by them; Identity nodes between are looked through (the
    runtime removes them first)."""
    users = users_of(graph)
    run: set = set()
    plain: set = set()
    for n in graph.nodes:
        if n.op_type != "DequantizeLinear" or n.domain not in _DEFAULT or not n.outputs or not n.outputs[0] \
                or n.outputs[0] not in graph.constants:
            continue
        reads = reads_through_identity(users, n.outputs[0])
        if reads and not all(u.name in nodes for u, _ in reads):
            run.add(n.name)
            plain.update(u.name for u, t in reads if u.op_type == "Conv" and len(u.inputs) > 1 and u.inputs[1] == t)
    return run, plain


def quantized_workload(graph: Graph, node, w: Workload, q: Quantized) -> Workload:
    """``w`` (costed from the float tensors around ``node``) as the quantized kernel runs it: inputs
    read at their quantized width (weights dequantized at load time count as weights, a bias or a
    shape as it is), outputs written quantized when they are requantized."""
    act = wgt = 0
    for k, name in enumerate(node.inputs):
        t = graph.tensors.get(name) if name else None
        if not name or name in node.inputs[:k]:
            continue  # absent, or a tensor read twice (x @ x) is read once
        if t is None or t.shape is None:
            return w
        dtype = q.inputs[k] if k < len(q.inputs) else None
        size = t.numel * DTYPE_BITS[dtype] // 8 if dtype else (t.nbytes or 0)
        if name in graph.constants:
            wgt += size
        else:
            act += size
    written = w.bytes_written
    if q.output is not None:
        written = 0
        for o in node.outputs:
            t = graph.tensors.get(o) if o else None
            if t is None or t.shape is None:
                return w
            written += t.numel * DTYPE_BITS[q.output] // 8
    read = "/".join(dict.fromkeys(d for d in q.inputs if d))
    if q.weight_only:
        t = graph.tensors.get(node.inputs[1])
        wgt += sum(graph.tensors[x].nbytes or 0 for x in q.weight_extras if x in graph.tensors)
        return replace(w, act_bytes_read=act, weight_bytes=wgt, other_ops=w.other_ops + 2 * (t.numel or 0),
                       note=(w.note + "; " if w.note else "") + f"{WEIGHT_ONLY} {read} weights, computed in {w.dtype}")
    return replace(w, dtype=DTYPE_OF_PRECISION[q.precision], act_bytes_read=act, weight_bytes=wgt, bytes_written=written,
                   operands=int8_operands(q.inputs[0], q.inputs[1]) if len(q.inputs) > 1 else "",
                   note=(w.note + "; " if w.note else "") + f"{NOTE} {q.precision} ({read} inputs"
                        + (f", {q.output} output)" if q.output else ")"))


def free_workload(op: str) -> Workload:
    """A DequantizeLinear its quantized consumers read through, or a QuantizeLinear its quantized
    producer writes through: no kernel, no bytes."""
    how = "read by its quantized consumer" if op == "DequantizeLinear" else "written by its quantized producer"
    return Workload(family="view", dtype="float32", launches=0, note=f"QDQ: {how}")
