"""Quantized layers in QDQ form: the precision a runtime really runs them in.

A model quantized in the QDQ format (ONNX Runtime's quantization tools, TensorRT's explicit
quantization) keeps its convolutions and products in float and brackets them with QuantizeLinear /
DequantizeLinear pairs: ``x -> Q -> DQ -> Conv <- DQ <- int8 weights``. Read by their dtypes, those
layers would be costed in fp32 with a Q and a DQ kernel each, four times the bytes, and the advice
would be to move them to fp16: the quantization the model carries would be lost. Runtimes that take
such a model (TensorRT, ONNX Runtime's QDQ transformers) run the layer as one int8 kernel instead:

- a matrix layer (Conv, ConvTranspose, MatMul, Gemm) whose data and weight inputs both come from a
  DequantizeLinear of integer (or 8-bit float) tensors runs at that quantized precision: it reads the
  quantized tensors (int8: 1 byte per element, not 4) and writes its output at its declared type;
- a DequantizeLinear whose every consumer is such a layer launches nothing: the layer reads its
  input (a weight's DequantizeLinear is folded at load time anyway);
- the QuantizeLinear after a layer (and its activation) is one more kernel without fusion, and the
  layer's epilogue with ``--fusion typical`` (``dnnperf.fusion``: an epilogue op), where the fused
  kernel writes the quantized output.

Layers whose quantized types differ (4-bit weights with 8-bit activations) run at the wider. Nothing
here changes a model without DequantizeLinear nodes. ``-p`` what-ifs apply on top as for any layer.
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf.ir import DTYPE_BITS, Graph
from dnnperf.workload import DTYPE_OF_PRECISION, Workload

MATRIX_OPS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm"})
# quantized element types a DequantizeLinear widens, and the precision a layer fed by them runs in
QUANTIZED = {"int8": "int8", "uint8": "int8", "float8e4m3fn": "fp8", "float8e4m3fnuz": "fp8", "float8e5m2": "fp8",
             "float8e5m2fnuz": "fp8", "int4": "int4", "uint4": "int4"}
RUNG = {"int4": 0, "fp8": 1, "int8": 1}  # the wider precision of a layer's two inputs wins
_DEFAULT = ("", "ai.onnx")


def plan(graph: Graph) -> tuple[dict[str, tuple[str, tuple[str, str]]], set[str]]:
    """({quantized layer: (precision, the quantized dtypes of its data and weight inputs)},
    {DequantizeLinear nodes every consumer of which is such a layer})."""
    producer = {}
    consumers: dict[str, list] = {}
    for n in graph.nodes:
        for o in n.outputs:
            if o:
                producer[o] = n
        for i in set(n.inputs):
            if i:
                consumers.setdefault(i, []).append(n)

    def quantized_source(t: str) -> str | None:
        """The quantized dtype ``t`` is dequantized from, when a DequantizeLinear makes it."""
        p = producer.get(t)
        if p is None or p.op_type != "DequantizeLinear" or p.domain not in _DEFAULT or not p.inputs:
            return None
        src = graph.tensors.get(p.inputs[0])
        return src.dtype if src is not None and src.dtype in QUANTIZED else None

    layers: dict[str, tuple[str, tuple[str, str]]] = {}
    for n in graph.nodes:
        if n.op_type not in MATRIX_OPS or n.domain not in _DEFAULT or len(n.inputs) < 2:
            continue
        a, b = quantized_source(n.inputs[0]), quantized_source(n.inputs[1])
        if a is None or b is None:
            continue
        layers[n.name] = (max((QUANTIZED[a], QUANTIZED[b]), key=lambda p: RUNG[p]), (a, b))
    absorbed = set()
    for n in graph.nodes:
        if n.op_type == "DequantizeLinear" and n.domain in _DEFAULT and n.outputs and n.outputs[0]:
            users = consumers.get(n.outputs[0], [])
            if users and all(u.name in layers for u in users) and n.outputs[0] not in graph.outputs \
                    and n.outputs[0] not in graph.constants:  # a weight's is folded at load time
                absorbed.add(n.name)
    return layers, absorbed


def quantized_workload(graph: Graph, node, w: Workload, precision: str, in_dtypes: tuple[str, str]) -> Workload:
    """``w`` (costed from the float tensors around ``node``) as the quantized kernel runs it: the
    data and weight inputs read at the quantized width, a bias as it is, the output at its declared
    type (a QuantizeLinear after it is its own kernel, or its epilogue with --fusion typical)."""
    act = wgt = 0
    for k, name in enumerate(node.inputs):
        t = graph.tensors.get(name) if name else None
        if not name or name in node.inputs[:k]:
            continue  # absent, or a tensor read twice (x @ x) is read once
        if t is None or t.shape is None:
            return w
        size = t.numel * DTYPE_BITS[in_dtypes[k]] // 8 if k < 2 else (t.nbytes or 0)  # a bias keeps its type
        if name in graph.constants:  # weights (dequantized at load time)
            wgt += size
        else:
            act += size
    return replace(w, dtype=DTYPE_OF_PRECISION[precision], act_bytes_read=act, weight_bytes=wgt,
                   note=(w.note + "; " if w.note else "") + f"QDQ: runs in {precision} ({in_dtypes[0]} data, "
                        f"{in_dtypes[1]} weights)")


def absorbed_workload() -> Workload:
    """A DequantizeLinear that its quantized consumers read through: no kernel, no bytes."""
    return Workload(family="view", dtype="float32", launches=0, note="QDQ: read by its quantized consumer")
