"""The layers a runtime runs, built from an inspection's per-node rows: one per node, or fused the
way a runtime fuses them (``dnnperf.fusion``), with the precision what-if applied per part.
``dnnperf.api`` scores them."""

from __future__ import annotations

from dnnperf.errors import DnnperfError
from dnnperf.inspection import Inspection, Row
from dnnperf.scoring import Layer, cpu_dispatched, with_precision
from dnnperf.workload import Workload

RESHAPES = frozenset({"Reshape", "Flatten"})


def merged_reshapes(insp: Inspection) -> frozenset[str]:
    """The Reshapes (and Flattens) ONNX Runtime merges into the one before them: a chain of them runs
    as one kernel (200 Reshapes back to back timed as none, where Squeezes and Unsqueezes in turn took
    a dispatch each, 0.17 us, as a Relu does: ONNX Runtime on a 2-core EPYC VM)."""
    made_by = {o: n.op_type for n in insp.graph.nodes for o in n.outputs if o}
    return frozenset(n.name for n in insp.graph.nodes
                     if n.op_type in RESHAPES and n.inputs and made_by.get(n.inputs[0]) in RESHAPES)


def build_layers(insp: Inspection, fusion: str = "none", precision: str | None = None, chains: bool = True,
                 attention: bool = True, unsummed: frozenset = frozenset(), upcast: bool = False) -> list[Layer]:
    """The layers a runtime runs: ``fusion`` none or typical, ``chains`` (GPU-style elementwise chains,
    else ONNX Runtime's CPU groups, which run the ops it has no kernel for as their ONNX function bodies:
    ``dnnperf.functions``), ``attention`` (a fused attention kernel where the runtime has one),
    ``unsummed`` (CPU: residual Adds no convolution takes, ``dnnperf.layout.add_reorders``), ``upcast`` (a
    CPU that runs 16-bit layers in fp32: a Clip whose 16-bit bounds it casts every inference fuses into
    nothing, ``dnnperf.upcast.cast_bound_clips``). Built once per inspection and set of arguments: a report
    builds them again for each precision what-if, and ``--hw all`` for each profile, with the same arguments
    (a new list each call; the layers themselves are never changed in place)."""
    key = ("layers", fusion, precision, chains, attention, unsummed, upcast)
    layers = insp.derived.get(key)
    if layers is None:
        layers = insp.derived[key] = _layers(insp, fusion, precision, chains, attention, unsummed, upcast)
    return list(layers)


def _layers(insp: Inspection, fusion: str, precision: str | None, chains: bool, attention: bool,
            unsummed: frozenset, upcast: bool) -> list[Layer]:
    layers = _built(insp, fusion, precision, chains, attention, unsummed, upcast)
    if chains:
        return layers
    from dnnperf.functions import function_bodies, run_as_bodies

    bodies = _derived(insp, "function_bodies", lambda: function_bodies(insp.graph, insp.rows))
    return run_as_bodies(layers, bodies, precision)


def _pushed(branches: list, dtype: str) -> Workload:
    """The Transposes a pushed one becomes (``rewrites.pushed_transposes``), as the parts of one layer; none: no
    kernel."""
    from dataclasses import replace

    from dnnperf.ops.transpose import permuted

    ws = [permuted(shape, perm, dtype) for shape, perm in branches]
    if not ws:
        return Workload("view", dtype, launches=0)
    if len(ws) == 1:
        return ws[0]
    total = Workload("movement", dtype, launches=0)
    for w in ws:
        total = total + w
    return replace(total, family="movement", dtype=dtype, parts=tuple(("Transpose", w, 1) for w in ws))


def shared_weights(insp: Inspection) -> dict:
    """The inspection's ``upcast.shared_half_weights``, found once (a report builds its layers several times)."""
    from dnnperf.upcast import shared_half_weights

    return _derived(insp, "shared_half_weights", lambda: shared_half_weights(insp.graph))


def _derived(insp: Inspection, key: str, build):
    """What depends on the graph alone, built once per inspection (a report scores it several times)."""
    if key not in insp.derived:
        insp.derived[key] = build()
    return insp.derived[key]


def _built(insp: Inspection, fusion: str, precision: str | None, chains: bool, attention: bool,
           unsummed: frozenset, upcast: bool) -> list[Layer]:
    from dnnperf.fusion import fuse, fusion_candidates, intermediate_bytes, merge_siblings
    from dnnperf.kernel_groups import framework_op_groups, group_candidates, runtime_kernel_groups, transposed_operands
    from dnnperf.rewrites import cpu_absorbed, pushed_transposes, read_in_place, split_groups
    from dnnperf.upcast import cast_bound_clips

    def derived(key: str, build):
        return _derived(insp, key, build)

    cands = derived("fusion_candidates" if attention else "fusion_candidates:unfused_attention",
                    lambda: fusion_candidates(insp.graph, insp.rows, attention=attention))  # for the fix hints
    if fusion == "typical" and not chains:  # ONNX Runtime's CPU provider: K^T, a constant scale folded into
        # a MatMul, arithmetic that changes nothing
        absorbed = derived("cpu_absorbed", lambda: cpu_absorbed(
            insp.graph, derived("runtime_kernel_groups", lambda: runtime_kernel_groups(insp.graph))))
    else:
        absorbed = derived("transposed_operands", lambda: transposed_operands(insp.graph))  # attention's K^T

    merged = derived("merged_reshapes", lambda: merged_reshapes(insp)) if not chains else frozenset()
    pushed = derived("pushed_transposes", lambda: pushed_transposes(insp.graph)) \
        if fusion == "typical" and not chains else {}

    def make(row: Row) -> Layer:
        w = row.workload if row.node.name not in absorbed else Workload("view", row.workload.dtype, launches=0)
        if row.node.name in pushed and not (row.node.name in absorbed and all(
                read_in_place(perm) for _, perm in pushed[row.node.name])):  # (a product still reads it in place)
            w = _pushed(pushed[row.node.name], row.workload.dtype)  # ORT's transpose optimizer moved or merged it
        if not chains and w is row.workload and row.node.name not in merged:
            w = cpu_dispatched(row.node.op_type, w, row.output_shape)  # ORT dispatches a view as any other node
        if precision:
            w = with_precision(w, precision)
        c = cands.get(row.node.name)
        saved = 2 * intermediate_bytes(insp.graph.tensors.get(c[1]), w) if c is not None else 0
        return Layer(row.node.name, row.node.op_type, (row.node.name,), w, row.output_shape,
                     fusable_into=c[0] if c else None, saved_bytes_if_fused=saved)

    if fusion == "typical":
        if chains:
            return fuse(insp.graph, insp.rows, make, cands)
        groups = derived("runtime_kernel_groups", lambda: runtime_kernel_groups(insp.graph))
        plain = derived("cast_bound_clips", lambda: cast_bound_clips(insp.graph, shared_weights(insp))) \
            if upcast else frozenset()
        cpu_cands = derived(f"cpu_fusion:{sorted(unsummed)}:{upcast}",
                            lambda: fusion_candidates(insp.graph, insp.rows, False, groups, unsummed=unsummed,
                                                      unfused=plain))
        layers = fuse(insp.graph, insp.rows, make, cpu_cands, {names[0]: kernel for kernel, names in groups})
        return merge_siblings(layers, derived("split_groups", lambda: split_groups(insp.graph)))
    if fusion != "none":
        raise DnnperfError(f"--fusion must be 'none' or 'typical', got '{fusion}'")
    if chains:  # a GPU framework's one-kernel ops (erf GELU, SiLU, Linear)
        ops = derived("framework_op_groups", lambda: framework_op_groups(insp.graph))
        if ops:
            op_cands = derived("framework_op_candidates", lambda: group_candidates(insp.graph, ops))
            return fuse(insp.graph, insp.rows, make, op_cands, {names[0]: k for k, names in ops})
    return [make(r) for r in insp.rows if r.workload is not None]

