"""16-bit floats on a CPU without 16-bit arithmetic.

A CPU profile whose units list no fp16/bf16 rate computes such models in fp32. ONNX Runtime's CPU
provider does it this way: ops that only move data (Reshape, Transpose, Slice, Concat, Gather,
Split...) have 16-bit kernels and run as they are; before any other op it inserts a Cast of each
16-bit input to fp32, runs the op in fp32, and casts the result back where it meets a data-movement
op or a graph output. Consecutive fp32 ops pass the fp32 tensor on (no cast between them), and a
Cast of a weight is folded once at load time (the weight is then an fp32 weight).

So a 16-bit model costs the fp32 model's compute and traffic, plus a Cast kernel at each boundary:
measured on a 2-core x86 VM, a Llama-architecture decoder step in fp16 took 371 us, the same model
in fp32 336 us (32 Casts in the fp16 run's profile); costed with 16-bit bytes it came out at 172 us.

Each Cast becomes a layer of its own (op type ``Cast``, family ``elementwise``) so it shows in the
table and the totals.
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf.ir import Graph
from dnnperf.layout import convert_once, layer_io
from dnnperf.scoring import Layer, with_precision
from dnnperf.workload import Workload

HALF = frozenset({"float16", "bfloat16"})
# families whose kernels take 16-bit tensors as they are (data movement, and no kernel at all)
HALF_NATIVE = frozenset({"movement", "view", "shape"})


def _cast(graph: Graph, tensor: str, to: str) -> Layer | None:
    t = graph.tensors.get(tensor)
    if t is None or not t.numel:
        return None
    n = t.numel
    half, full = 2 * n, 4 * n
    w = Workload("elementwise", dtype="float32", other_ops=n,
                 act_bytes_read=half if to == "fp32" else full, bytes_written=full if to == "fp32" else half,
                 parallel_work=n, note="precision cast added by the runtime (no 16-bit arithmetic on this CPU)")
    return Layer(f"cast to {to} {tensor}", "Cast", (), w, t.shape)


def add_casts(graph: Graph, layers: list[Layer]) -> list[Layer]:
    """``layers`` with the 16-bit compute layers costed in fp32 and a ``Cast`` layer at each
    boundary between them and 16-bit data (see the module docstring)."""
    nodes = {n.name: n for n in graph.nodes}
    full: set[str] = set()  # 16-bit tensors that exist as fp32 (cast up, or computed in fp32)
    produced_full: set[str] = set()  # ... of them, those that exist ONLY as fp32 (computed in fp32)
    cast_back: set[str] = set()
    out: list[Layer] = []

    def half(name: str) -> bool:
        t = graph.tensors.get(name)
        return t is not None and t.dtype in HALF

    def down(t: str):
        return _cast(graph, t, "fp16")

    for layer in layers:
        members, ins = layer_io(graph, layer, nodes)
        if not members:
            out.append(layer)
            continue
        outs = [o for n in members for o in n.outputs if o]
        if layer.workload.family in HALF_NATIVE:
            convert_once(out, ins, produced_full.__contains__, cast_back, down)
            out.append(layer)
            continue
        if layer.workload.dtype not in HALF and not any(half(i) for i in ins):
            out.append(layer)
            continue
        convert_once(out, ins, half, full, lambda t: _cast(graph, t, "fp32"))
        w = with_precision(layer.workload, "fp32") if layer.workload.dtype in HALF else layer.workload
        out.append(replace(layer, workload=w))
        for o in outs:
            if half(o):
                full.add(o)
                produced_full.add(o)
    convert_once(out, graph.outputs, produced_full.__contains__, cast_back, down)
    return out
