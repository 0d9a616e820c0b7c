"""Match the solution catalogue (data/fixes.yaml) to scored layers and make each fix concrete.

Each concretiser is a small function ``(cost, ctx) -> (text, saving_s) | None``: it computes the
numbers for this layer on this profile (what batch fills the lanes, which channel count fits the
tile, what precision moves the layer onto the fast unit...). A fix without numbers falls back to
the catalogue's summary.

Why one module this long: one concretiser per catalogue entry, each a few lines, kept next to
the matching and ranking code they plug into.
"""

from __future__ import annotations

import os
from dataclasses import replace
from functools import lru_cache
from math import ceil

from dnnperf import rules
from dnnperf.efficiency import FILTER_SET_BLOCKS, thread_split
from dnnperf.gpu import unit_words
from dnnperf.scoring import LayerCost, effective_precision, padded_channels, rescore, with_precision
from dnnperf.vocab import EXPERTS_KERNEL, HOST_SHAPE_FAMILIES
from dnnperf.fmt import b as fmt_bytes
from dnnperf.fmt import sig
from dnnperf.fmt import t as fmt_time


@lru_cache(maxsize=1)
def catalogue() -> dict[str, dict]:
    from dnnperf.hardware import safe_yaml

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "fixes.yaml")
    with open(path, encoding="utf-8") as fh:
        items = safe_yaml(fh.read(), "fix catalogue")
    return {it["id"]: it for it in items}


class Ctx:
    def __init__(self, report):
        self.report = report
        self.hw = report.score.hw
        self.settings = report.score.settings
        self._edges: dict | None = None
        self._nodes: dict | None = None

    def edge_nodes(self) -> dict[str, tuple[int, bool, bool]]:
        """{node: (graph position, reads a graph input, writes a graph output)} for the nodes at the
        graph's edges, found once per report."""
        if self._edges is None:
            g = self.report.inspection.graph
            inputs, outputs = set(g.inputs), set(g.outputs)
            self._edges = {}
            for k, n in enumerate(g.nodes):
                first = any(i in inputs for i in n.inputs)
                last = any(o in outputs for o in n.outputs)
                if first or last:
                    self._edges.setdefault(n.name, (k, first, last))
        return self._edges

    def node(self, name: str):
        """The graph's node of that name (the IR's), found once per report."""
        if self._nodes is None:
            self._nodes = {n.name: n for n in self.report.inspection.graph.nodes}
        return self._nodes.get(name)


# -- concretisers ---------------------------------------------------------------------------


def _index_traffic(c: LayerCost, x: Ctx):
    """A ScatterND or GatherND that addresses single elements (its indices' last axis is the data's
    rank: a row of integers per element) and whose indices are most of the bytes it moves. PyTorch
    exports a slice assignment (``x[:, :, 1:, 1:] += y``) this way (MViTv2's relative positions: 629 MB
    of int64 indices to write 79 MB); when the indices pick a box, Slice/Pad with Add or Concat move
    only the data. The saving assumes the time follows the bytes (the layer is memory-bound)."""
    l = c.layer
    if l.op_type not in ("ScatterND", "GatherND") or len(l.nodes) != 1:
        return None
    n = x.node(l.nodes[0])
    tensors = x.report.inspection.graph.tensors
    data, idx = (tensors.get(n.inputs[k]) if n is not None and len(n.inputs) > 1 else None for k in (0, 1))
    total = l.workload.bytes_total
    if (data is None or idx is None or not idx.shape or data.shape is None or idx.shape[-1] != len(data.shape)
            or not idx.nbytes or not total or 2 * idx.nbytes <= total):
        return None
    save = c.time_s * idx.nbytes / total
    return (f"its indices ({fmt_bytes(idx.nbytes)} of {idx.dtype}, a row of {idx.shape[-1]} per element) are "
            f"{idx.nbytes / total:.0%} of the {fmt_bytes(total)} it moves: if they pick a box, as a slice assignment "
            "such as x[:, :, 1:, 1:] += y exports, Slice/Pad with Add or Concat move only the data "
            f"(~{fmt_time(save)} saved)", save)


def _raise_intensity(c: LayerCost, x: Ctx):
    w = c.layer.workload
    ridge = x.hw.ridge_point(c.precision)
    if not ridge or w.intensity >= ridge or c.t_bias >= c.t_memory or c.t_compute > c.t_memory:
        # (a separate bias pass that outweighs the layer's own traffic: _layer_fusion says so; a kernel
        # slower than its traffic is not set by memory, whatever its intensity)
        return None
    indexed = _index_traffic(c, x)
    if indexed is not None:
        return indexed
    return (f"{w.intensity:.1f} ops/byte against a ridge point of {ridge:.0f} ops/byte ({c.precision} on {x.hw.name}): "
            f"memory traffic, not math, sets this layer's {fmt_time(c.time_s)}", None)


def _one_kernel(c: LayerCost, x: Ctx):
    """A 16-bit op the CPU runtime runs as its ONNX function body (``functions.inlined_body``): the fp32 op
    in the model is one kernel of the runtime's own (a Cast around it, which it has anyway)."""
    from dnnperf.ops import cost_node
    from dnnperf.functions import BODY_NOTE

    l = c.layer
    if not l.workload.parts or not l.workload.note.startswith(BODY_NOTE):
        return None
    node = next((n for n in x.report.inspection.graph.nodes if n.name == l.nodes[0]), None)
    if node is None:
        return None
    one = rescore(c, replace(l, workload=with_precision(cost_node(x.report.inspection.graph, node), "fp32")),
                  x.report.score, "fp32")
    n = len(l.workload.parts)
    return (f"ONNX Runtime has no 16-bit {l.op_type} kernel and runs the op's ONNX function body, {n} fp32 kernels: "
            f"keep this {l.op_type} in fp32 in the model (casts around it, as the runtime adds anyway) and it is one "
            f"kernel of its own, {fmt_time(one.time_s)} instead of {fmt_time(c.time_s)}", c.time_s - one.time_s)


def _layer_fusion(c: LayerCost, x: Ctx):
    l = c.layer
    if (one := _one_kernel(c, x)) is not None:
        return one
    if c.t_bias >= 0.1 * c.time_s:  # scoring._gpu_bias_pass
        return (f"the framework adds this convolution's bias in a kernel of its own, one more read and write of its "
                f"{fmt_bytes(l.workload.bytes_written)} output ({fmt_time(c.t_bias)}): a runtime that fuses the bias "
                "into the convolution's epilogue (TensorRT, a compiled graph) saves it", c.t_bias)
    if x.settings.fusion == "none" and l.fusable_into:
        save = l.saved_bytes_if_fused / x.hw.dram_bps + c.t_launch
        save = min(save, c.time_s)
        return (f"fuse {l.op_type} into '{l.fusable_into}': saves 1 launch and {fmt_bytes(l.saved_bytes_if_fused)} "
                f"of DRAM traffic (~{fmt_time(save)})", save)
    if len(l.nodes) > 1:
        return None
    if l.workload.family in ("elementwise", "norm", "softmax", "cast", "movement"):
        return (f"fold this {l.op_type} into a neighbouring kernel: its {fmt_bytes(l.workload.bytes_total)} round trip "
                f"and launch ({fmt_time(c.time_s)}) would disappear", c.time_s)
    return None


def _more_bandwidth(c: LayerCost, x: Ctx):
    if c.t_memory <= c.t_compute:
        return None
    new = rescore(c, c.layer, x.report.score, x.settings.precision, x.hw.with_bandwidth(2.0)).time_s
    if new >= c.time_s * 0.99:
        return None  # the launch or the math sets this layer's time: more bandwidth buys nothing
    return (f"with 2x the {x.hw.dram_gbs:g} GB/s this layer would take {fmt_time(new)} instead of {fmt_time(c.time_s)}",
            c.time_s - new)


def _lane_occupancy(c: LayerCost, x: Ctx) -> float:
    """The share of the device's lanes the layer's outputs fill: its occupancy without a CPU
    convolution's thread split (``efficiency.thread_split``, offered its own fix), which more outputs
    of the same shape do not mend."""
    return min(1.0, c.occupancy / thread_split(c.layer, x.hw))


def _lane_work(c: LayerCost, x: Ctx, gemm=None, work: int | None = None) -> int:
    """Lanes the layer's outputs occupy, a product's output sides padded to its unit's tile as the
    scoring counts them (``rules.padded_work``); ``gemm`` / ``work``: another width's product."""
    w = c.layer.workload
    tile = next((u.tile.get(c.precision) for u in x.hw.units if u.name == c.unit), None) if w.is_matrix else None
    return round(rules.padded_work(w.parallel_work if work is None else work, gemm or w.gemm, tile))


def _bigger_batch(c: LayerCost, x: Ctx):
    w = c.layer.workload
    b = x.settings.batch or 1
    if _lane_occupancy(c, x) >= 1:
        return None
    if _planned(c, x):  # tiles in waves over the SMs, or blocks over systolic arrays: the what-if, rescored
        # a systolic array's rows fill at R rows a block (128, 256): further than a GPU's waves
        factors = (2, 4, 8, 16, 32) + ((64, 128, 256) if _arrays(c, x) else ())
        return _plan_what_if(c, x, [(f"batch {b} -> {b * f}", f, w.with_batch(f)) for f in factors])
    lost = c.losses.get("launch_overhead", 0.0)
    if c.cause == "launch_overhead" and lost > 0:
        # launches cost the same at any batch: a bigger one shares them (its work is taken to grow
        # with the batch, so the figure is an upper bound per sample)
        f = 8
        each = (c.time_s - lost) + lost / f
        return (f"batch {b} -> {b * f}: {f}x the samples share this layer's {fmt_time(lost)} of fixed "
                f"per-launch time, at most {fmt_time(each)} per sample instead of {fmt_time(c.time_s)}", None)
    if w.parts:  # a loop's occupancy is its body kernels' mean: no one output count to scale
        return None
    lanes = _lane_work(c, x)
    need = rules.lanes_needed_batch(lanes, b, x.hw.lanes)
    target = max(b * 8, 8) if need > b * 8 else need
    per = max(lanes // b, 1)
    occ_t = rules.occupancy(per * target, x.hw.lanes)
    return (f"batch {b} -> {target} raises lane occupancy from {_lane_occupancy(c, x):.1%} to {occ_t:.1%}"
            + (f"; all {x.hw.lanes:,} lanes busy from batch {need}" if need != target else ""), None)


def _even_thread_split(c: LayerCost, x: Ctx):
    """A calibrated CPU's blocked convolution whose threads split it unevenly
    (``efficiency.thread_split``): the output widths in whole filter sets either side, rescored."""
    w = c.layer.workload
    share = thread_split(c.layer, x.hw)
    if share >= 0.97 or w.family != "conv" or w.gemm is None or w.gemm.count != 1:
        return None
    per_set = FILTER_SET_BLOCKS * x.hw.cpu_layout[0]
    n = w.gemm.n
    rows = c.layer.output_shape[2]
    parts = [f"{x.hw.compute_units} threads take equal counts of this convolution's {rows} rows x "
             f"{-(-n // per_set)} filter sets ({per_set} output channels a set): {share:.0%} busy"]
    best = None
    for n2 in sorted({-(-n // per_set) * per_set, (n // per_set) * per_set} - {0, n}):
        text, saving = _retry(c, x, n2, f"{n} -> {n2} output channels")
        parts.append(text)
        best = saving if best is None else max(best, saving)
    if best is None:  # whole sets already: the rows do not divide among the threads
        parts.append(f"its sets are whole, its {rows} rows do not divide among {x.hw.compute_units} threads: a row "
                     "count they divide (or more images a run) splits it evenly")
    return "; ".join(parts), best


def _shallower_wider(c: LayerCost, x: Ctx):
    w = c.layer.workload
    if _lane_occupancy(c, x) >= 1 or w.kernel == EXPERTS_KERNEL:  # an MoE's product has no one width
        return None
    if _planned(c, x):
        n = w.gemm.n
        return _plan_what_if(c, x, [(f"output channels {n} -> {2 * n}", 2, w.with_width(2 * n))], per_sample=False)
    wide = _lane_work(c, x, replace(w.gemm, n=2 * w.gemm.n) if w.gemm is not None else None, 2 * w.parallel_work)
    return (f"{w.parallel_work:,} parallel outputs for {x.hw.lanes:,} lanes: a layer twice as wide keeps "
            f"{rules.occupancy(wide, x.hw.lanes):.1%} of them busy at the same latency", None)


def _planned(c: LayerCost, x: Ctx) -> bool:
    """A matrix layer whose occupancy is not outputs over lanes: a GPU library's tile plan, or weight
    blocks over a unit's systolic arrays (``rules.systolic_occupancy``)."""
    return c.plan is not None or _arrays(c, x) is not None


def _arrays(c: LayerCost, x: Ctx) -> int | None:
    return rules.systolic_arrays(x.hw.unit_named(c.unit), c.layer.workload, c.precision)


def _spread(c: LayerCost, x: Ctx) -> str:
    arrays = _arrays(c, x) if c.plan is None else None
    if arrays:
        return f"weight blocks over {arrays} systolic arrays of {c.unit}"
    return f"the library's tiles in waves over {x.hw.compute_units} SMs"


def _plan_what_if(c: LayerCost, x: Ctx, variants: list, per_sample: bool = True):
    """A GPU matrix layer's occupancy is its tile plan's (tiles in waves over the SMs, split-K), and
    a systolic unit's its weight blocks and streamed rows, not outputs over lanes: rescore
    ``variants`` ``(label, work multiple, workload)`` in order and report
    the first that keeps the SMs 90% busy (else the one with the shortest time per unit of work;
    nothing when that is not 5% below the layer's own), with its time per sample (the variant's time
    over its batch: the model's batch times the multiple) or for how many times the work (a width). A
    variant without a workload (the batch of a product of two activations) gets the advice without
    figures and the command that computes them."""
    found = None
    for label, f, w2 in variants:
        if w2 is None:  # a product of two activations: where its batch goes (count or rows) is not known
            adds = (f"rows to the weight blocks over {_arrays(c, x)} systolic arrays" if c.plan is None
                    else f"tiles to the waves over {x.hw.compute_units} SMs")
            return (f"more work per call adds {adds} (now {c.occupancy:.1%} occupancy); "
                    "how a bigger batch reshapes this product is not known here: "
                    "`dnnperf sweep --batch 1,2,4,...` scores the whole model at each batch", None)
        c2 = rescore(c, replace(c.layer, workload=w2), x.report.score, x.settings.precision)
        if c2.occupancy >= 0.9:
            found = (label, f, c2)
            break
        if found is None or c2.time_s / f < found[2].time_s / found[1]:
            found = (label, f, c2)
    label, f, c2 = found
    if c2.time_s / f >= 0.95 * c.time_s:  # the work costs as much per unit at any size: no starvation to fix
        return None
    what = (f"raises occupancy from {c.occupancy:.1%} to {c2.occupancy:.1%}" if c2.occupancy >= c.occupancy + 0.01
            else f"leaves occupancy near {c.occupancy:.1%} but spreads the layer's fixed waits over more work")
    return (f"{label} {what} ({_spread(c, x)}): {fmt_time(c.time_s)} -> {fmt_time(c2.time_s)}"
            + (f", {fmt_time(c2.time_s / (f * (x.settings.batch or 1)))} per sample" if per_sample
               else f" for {f}x the work"), None)


def _downgrade(c: LayerCost, x: Ctx):
    occ = x.report.score.totals["mean_occupancy"]
    if occ >= 0.5:
        return None
    return (f"the model keeps {occ:.0%} of {x.hw.name}'s lanes busy on average: `dnnperf compare --hw all` "
            "shows cheaper targets with similar latency", None)


def _accuracy_sensitive(c: LayerCost, x: Ctx) -> str:
    """The first layer (reads the raw input) and the output layer lose most accuracy when quantised."""
    edges = x.edge_nodes()
    hits = sorted(edges[n] for n in set(c.layer.nodes) if n in edges)  # the first in graph order decides
    if not hits:
        return ""
    _, first, _ = hits[0]
    if first:
        return "first layer: it sees the raw input; keep it at higher precision if accuracy drops"
    return "output layer: keep it at higher precision if accuracy drops"


def _use_specialized_units(c: LayerCost, x: Ctx):
    """Walk the precision ladder one rung at a time (fp32 -> tf32 -> bf16/fp16 -> fp8 -> int8 -> fp4/int4)
    and offer the nearest rung that moves the layer onto a matrix unit and makes it faster."""
    from dnnperf.precision import cheaper_rungs

    w = c.layer.workload
    if not w.is_matrix:
        return None
    matrix_units = {u.name for u in x.hw.units if "matrix" in u.serves and "vector" not in u.serves}
    if not matrix_units or c.unit in matrix_units:
        return None
    # from the layer's own precision: one no unit runs is costed on another unit in that unit's precision
    # (fp32 on an fp16-only NPU's vector unit), which is not where the ladder starts
    own = _own_precision(c, x)
    for p in cheaper_rungs(x.hw, own):
        if p in ("int4", "fp4") and own not in ("int8", "fp8"):
            break  # one step at a time: 4-bit only from a model that already runs in 8-bit
        w2 = with_precision(w, p)
        c2 = rescore(c, replace(c.layer, workload=w2), x.report.score, p)
        how = ""
        if c2.unit not in matrix_units:  # the unit refuses the width in that precision (819 channels, rule of 8)
            fit = _aligned_width(w2, x.hw, matrix_units, p)
            if fit:
                c2 = rescore(c, replace(c.layer, workload=w2.with_width(fit[0])), x.report.score, p)
                how = f" with output channels {w.gemm.n} -> {fit[0]} (a multiple of {fit[1]})"
        if c2.unit in matrix_units and c2.time_s < c.time_s * 0.95:
            text = (f"{own} -> {p}{how} moves this {c.layer.op_type} onto {c2.unit}: {fmt_time(c.time_s)} -> "
                    f"{fmt_time(c2.time_s)}")
            caution = _accuracy_sensitive(c, x)
            return (text + (f" ({caution})" if caution else ""), c.time_s - c2.time_s)
    return None


def _aligned_width(w, hw, matrix_units: set, precision: str) -> tuple[int, int] | None:
    """(width, alignment): the output width rounded up to a matrix unit's ``alignment`` in ``precision``,
    which the unit would accept where only the width misses the rule (the reduction already fits)."""
    g = w.gemm
    for u in hw.units:
        a = u.alignment.get(precision)
        if u.name in matrix_units and a and g is not None and g.n % a and g.k % a == 0:
            return ceil(g.n / a) * a, a
    return None


def _fit_the_tile(c: LayerCost, x: Ctx):
    w = c.layer.workload
    g = w.gemm
    if g is None or not w.is_matrix:
        return None
    pad = _misaligned_gemm(c, x) or _misaligned_conv(c, x)
    if pad is not None:
        return pad
    if c.padded_from:  # the engine padded the input channels itself (scoring._engine_padded)
        return (f"TensorRT runs this layer with its {c.padded_from} input channels zero-padded to the "
                f"{unit_words(c.unit)}' "
                f"vector: the padding's MACs cost {fmt_time(c.losses['specialization'])} of its {fmt_time(c.time_s)}",
                None)
    unit = x.hw.unit_named(c.unit)
    # alignment: the fast unit refused the layer
    for u in x.hw.units:
        a = u.alignment.get(c.precision)
        if a and u.name != c.unit and not rules.aligned(g, a):
            if g.n % a:
                n2 = ceil(g.n / a) * a
                return _retry(c, x, n2,
                              f"output channels {g.n} -> {n2} (a multiple of {a}) lets {u.name} take this layer")
            # the reduction misses the rule (a stem's 3 input channels): padding it costs MACs
            if w.conv:
                cin, kh, kw = w.conv[0], w.conv[1], w.conv[2]
                cin2 = ceil(cin / a) * a
                text = (f"the reduction depth {g.k} ({cin} input channels x {kh} x {kw}) is not a multiple of {a}, so "
                        f"{u.name} refuses this layer: input channels padded {cin} -> {cin2} (zeros) would let it take "
                        f"the layer at {cin2 / cin:.1f}x the MACs")
                padded = rescore(c, replace(c.layer, workload=w.with_in_channels(cin2)), x.report.score,
                                 x.settings.precision)
                if padded.unit == u.name:
                    delta = c.time_s - padded.time_s
                    return (f"{text}: {'-' if delta >= 0 else '+'}{fmt_time(abs(delta))} ({fmt_time(c.time_s)} -> "
                            f"{fmt_time(padded.time_s)})", delta if delta > 0 else None)
                return text, None
            return (f"the reduction depth {g.k} is not a multiple of {a}, so {u.name} refuses this layer: "
                    f"padded to {ceil(g.k / a) * a} (zeros) it would take it", None)
    if unit is None or c.tile_efficiency >= 0.95:
        return None
    if w.family in ("depthwise_conv", "grouped_conv"):  # the product is per group: its width is not a free choice
        return (f"a {'depthwise' if w.family == 'depthwise_conv' else 'grouped'} convolution's product is per group "
                f"({g.n} output channel{'s' if g.n != 1 else ''} per group): it fills "
                f"{c.tile_efficiency:.{1 if c.tile_efficiency < 0.1 else 0}%} of "
                f"{c.unit}'s tile; a dense convolution of the same receptive field (a fused MBConv block, as "
                "EfficientNet-EdgeTPU uses on such units) fills it", None)
    tile = unit.tile.get(c.precision)
    if tile is None:
        return None
    tn = tile[1]
    if tn > 1 and g.n % tn:
        up = ceil(g.n / tn) * tn
        down = (g.n // tn) * tn
        parts = [f"output channels {g.n} fill {rules.dim_fit(g.n, tn):.0%} of the {tn}-wide tile"]
        alt = _retry(c, x, up, f"{g.n} -> {up} costs +{(up / g.n - 1):.0%} MACs")
        if alt:
            parts.append(alt[0])
        if down > 0:
            alt2 = _retry(c, x, down, f"{g.n} -> {down} saves {(1 - down / g.n):.0%} MACs")
            if alt2:
                parts.append(alt2[0])
        return ("; ".join(parts), None)
    tk = tile[2]
    if tk > 1 and g.k % tk:
        return (f"reduction depth {g.k} fills {rules.dim_fit(g.k, tk):.0%} of the {tk}-deep tile: "
                f"{ceil(g.k / tk) * tk} would waste nothing", None)
    return None


def _misaligned_gemm(c: LayerCost, x: Ctx):
    """A tensor-core product whose row strides miss the library's vector width (a vocabulary of
    50,257): pad the width (or say which length to pad) so the fast kernels take it."""
    from dnnperf import gpu

    g = c.layer.workload.gemm
    if x.hw.kind != "gpu" or c.algorithm != "gemm" or gpu.unit_class(c.unit) != "tensor_cores":
        return None
    lib = gpu.library_of(x.hw)
    if not gpu.gemm_misaligned(lib, g.n, g.k, c.precision):
        return None
    vec = gpu.gemm_vector(lib, c.precision)
    why = f"not a multiple of {vec} {c.precision} values ({lib.gemm_alignment_bytes} bytes), so the library falls back to slower kernels"
    if g.k % vec:
        return (f"the reduction length {g.k} is {why}: pad it to {ceil(g.k / vec) * vec}", None)
    n2 = ceil(g.n / vec) * vec
    what = "the sequence length" if c.layer.workload.weight_bytes == 0 else "the vocabulary or hidden size"
    return _retry(c, x, n2, f"{g.n} output columns are {why}: {g.n} -> {n2} (pad {what})")


def _misaligned_conv(c: LayerCost, x: Ctx):
    """A GPU convolution whose input channels do not fill the library's channel vector (an image's 3
    channels in fp16: ``misaligned_vector``) runs generic CUDA-core kernels; zero-padded to whole vectors
    it is the tensor cores' (the stem of MLPerf's ResNet-50 reads 4 padded channels for this reason).
    Offered when the padded layer is faster, with both times; a profile that states its tensor cores'
    `alignment` gets its own wording (``_fit_the_tile``)."""
    from dnnperf import gpu

    w = c.layer.workload
    if x.hw.kind != "gpu" or gpu.unit_class(c.unit) != "cuda_cores" or any(u.alignment for u in x.hw.units):
        return None
    lib = gpu.library_of(x.hw)
    own = _own_precision(c, x)  # a stem the library runs on its fp32 kernels (stem_precision) reports fp32
    c2 = padded_channels(w, x.hw, lib, own)
    if not c2:
        return None
    cin, vec = w.conv[0], int(lib.misaligned_vector[own])
    padded = rescore(c, replace(c.layer, workload=w.with_in_channels(c2)), x.report.score, x.settings.precision)
    if padded.time_s >= c.time_s or gpu.unit_class(padded.unit) != "tensor_cores":
        return None
    kernels = (f"its {c.precision} stem kernels" if c.precision != own
               else f"generic kernels on the {unit_words(c.unit)}")
    return (f"{cin} input channels do not fill one {vec}-value {own} vector, so the library runs {kernels}: "
            f"zero-padded to {c2} channels ({c2 / cin:.1f}x the MACs) the {unit_words(padded.unit)} take it: "
            f"-{fmt_time(c.time_s - padded.time_s)} ({fmt_time(c.time_s)} -> {fmt_time(padded.time_s)})",
            c.time_s - padded.time_s)


def _own_precision(c: LayerCost, x: Ctx) -> str:
    """The precision the layer is asked to run in (the -p what-if, else its dtype's), which the one it
    was costed in may not be (a stem on fp32 stem kernels, fp32 on an fp16-only unit)."""
    return effective_precision(c.layer.workload, x.hw, x.settings.precision)


def _retry(c: LayerCost, x: Ctx, n2: int, label: str):
    """Rescore this layer at output width ``n2``: (text with the time change, saving)."""
    w2 = c.layer.workload.with_width(n2)
    c2 = rescore(c, replace(c.layer, workload=w2), x.report.score, x.settings.precision)
    delta = c2.time_s - c.time_s
    if abs(delta) <= 0.005 * c.time_s:  # the wider layer fits the same tiles: the extra width costs no time
        return (f"{label}: the same {fmt_time(c.time_s)}", -delta)
    sign = "+" if delta >= 0 else "-"
    return (f"{label}: {sign}{fmt_time(abs(delta))} ({fmt_time(c.time_s)} -> {fmt_time(c2.time_s)})", -delta)


def _nas(c: LayerCost, x: Ctx):
    return (f"`dnnperf lut --hw {x.hw.name} --from MODEL` writes this target's per-layer latency table", None)


def _mish_as_silu(c: LayerCost, x: Ctx):
    """A Mish the CPU runtime runs as its function body (``functions.inlined_body``), its Softplus a scalar
    loop over every element: SiLU (x * sigmoid(x), the Sigmoid and Mul of a Swish body) in its place."""
    from dnnperf.functions import ANY_NOTE, inlined_body
    from dnnperf.ir import Node

    l = c.layer
    if l.op_type != "Mish" or not l.workload.parts or not l.workload.note.startswith(ANY_NOTE):
        return None
    graph = x.report.inspection.graph
    node = next((n for n in graph.nodes if n.name == l.nodes[0]), None)
    swish = inlined_body(replace(graph, opset=max(graph.opset, 24)),
                         Node(l.name, "Swish", "", node.inputs[:1], node.outputs[:1], {}), l.workload.family,
                         half=False) if node is not None else None
    if swish is None:
        return None
    silu = rescore(c, replace(l, workload=replace(l.workload, parts=swish.parts[1:])), x.report.score, None)
    return (f"ONNX Runtime's CPU provider has no Mish kernel and runs its function body (Softplus, Tanh, Mul): its "
            f"Softplus computes a logarithm and an exponential per element in a scalar loop, {fmt_time(c.time_s)} "
            f"here; SiLU (x * sigmoid(x), two vectorised kernels) in its place takes {fmt_time(silu.time_s)} "
            "(fine-tune after the swap)", c.time_s - silu.time_s)


def _framework_depthwise(c: LayerCost, x: Ctx):
    """A depthwise convolution on a GPU framework's own kernel (``scoring._depthwise_eff``), slower than its
    traffic: TensorRT's kernels, or in fp32 cuDNN's 16-bit ones, where the profile has them."""
    w = c.layer.workload
    if (x.hw.kind != "gpu" or c.algorithm != "direct" or w.family != "depthwise_conv" or c.t_compute <= c.t_memory
            or c.losses["unoptimized"] <= 0 or x.settings.runtime == "tensorrt"):
        return None
    text = (f"the framework's own depthwise kernel multiplies at {w.macs / c.t_compute / 1e12:.2f} TMAC/s here: "
            f"{fmt_time(c.t_compute)} where its {fmt_bytes(w.bytes_total)} of traffic take {fmt_time(c.t_memory)}; "
            "TensorRT brings tuned depthwise kernels (--runtime tensorrt)")
    if c.precision == "fp32" and any("fp16" in u.peak_tops for u in x.hw.units):
        half = rescore(c, replace(c.layer, workload=with_precision(w, "fp16")), x.report.score, "fp16")
        if half.time_s < 0.9 * c.time_s:
            text += f", and in fp16 the library's kernels take {fmt_time(half.time_s)} (-p fp16)"
    return text, c.losses["unoptimized"]


def _replace_slow(c: LayerCost, x: Ctx):
    if (silu := _mish_as_silu(c, x)) is not None:
        return silu
    if (dw := _framework_depthwise(c, x)) is not None:
        return dw
    # only an op the profile says has no fast kernel (a misaligned convolution or a calibrated
    # family's low efficiency is a different problem, with its own fixes)
    if c.layer.op_type not in x.hw.unoptimized_ops:
        return None
    return (f"{c.layer.op_type} has no fast kernel here ({x.hw.unoptimized_efficiency:.0%} of peak, no overlap): "
            f"{fmt_time(c.losses['unoptimized'] + c.losses['overlap'])} lost", c.losses["unoptimized"])


def _cooling(c: LayerCost, x: Ctx):
    if x.hw.kind == "gpu" and not x.hw.sustained_clock_given and x.hw.gpu.get("tdp_w"):  # the power model's clock
        return (f"under its {x.hw.gpu['tdp_w']:g} W board power this layer's kernels hold {c.clock:.0%} of the "
                f"boost clock, which costs it {fmt_time(c.losses['thermal'])}: a higher power limit or better "
                "cooling raises it; plan with the sustained clock", c.losses["thermal"])
    return (f"the profile's sustained clock, {c.clock:.0%} of the clock its quoted peak assumes, costs this layer "
            f"{fmt_time(c.losses['thermal'])}: plan with it; better cooling raises it where heat sets it (phones, "
            "fanless boards), not where a power or wide-vector limit does (AVX-512 on server CPUs)", c.losses["thermal"])


def _use_all_units(c: LayerCost, x: Ctx):
    fb = x.hw.fallback.name if x.hw.fallback else "the fallback unit"
    return (f"{c.layer.op_type} ({c.layer.workload.family}) is not run by the accelerator: it falls back to {fb} "
            f"and pays {fmt_time(c.losses['heterogeneity'])} extra", c.losses["heterogeneity"])


STATIC_DIMS_TEXT = ("fix the input dims at export (or with onnxsim's --overwrite-input-shape) and the runtime "
                    "folds it once at load time")


def _fewer_launches(c: LayerCost, x: Ctx):
    if c.layer.workload.family in HOST_SHAPE_FAMILIES:
        return (f"shape arithmetic redone every inference because the model's input dims are symbolic "
                f"({fmt_time(c.t_launch)} on the host): {STATIC_DIMS_TEXT}", c.t_launch)
    lost = c.losses["launch_overhead"]
    w = c.layer.workload
    n = w.launches
    each = f"{n} launch{'es' if n != 1 else ''} x {sig(x.hw.kernel_us(w.family)):g} us"
    if w.parts:  # a loop: its body's kernels dispatched again at every iteration
        fixed = x.hw.kernel_fixed_us.get("control", 0.0) if x.hw.kind == "cpu" else 0.0
        each = f"{n} launch{'es' if n != 1 else ''} of its body's kernels" + (
            f" and {w.iterations} iteration{'s' if w.iterations != 1 else ''} x {sig(fixed):g} us" if fixed else "")
        if w.iterations > 1:
            recurrent = any(pw.is_matrix for _, pw, _ in w.parts)
            how = ("a recurrent cell exported as ONNX's LSTM / GRU / RNN op runs its steps inside one kernel, and a "
                   "short fixed count unrolled lets a runtime fuse them") if recurrent else (
                  "iterations that do not depend on each other (a distance to every row of a table) written as one "
                  "broadcast op over all of them run as a few kernels")
            return (f"{each}: {fmt_time(lost)} of this layer's {fmt_time(c.time_s)}, against "
                    f"{fmt_time(c.time_s - lost)} of work; the body's kernels are dispatched again at every one of "
                    f"its {w.iterations} iterations: {how}", lost)
    if x.hw.kind == "gpu":  # the host queues kernels ahead; each device kernel also starts and has a floor
        k = max(c.kernels, n)
        return (f"{each} of host time, and {k} device kernel{'s' if k != 1 else ''} that each take a start and a "
                f"minimum time: {fmt_time(lost)} of this layer's {fmt_time(c.time_s)}, against "
                f"{fmt_time(c.time_s - lost)} of work", lost)
    return (f"{each}: {fmt_time(lost)} of this layer's {fmt_time(c.time_s)} is spent launching, against "
            f"{fmt_time(c.time_s - lost)} of work", lost)


def _software_pipelining(c: LayerCost, x: Ctx):
    if c.losses["overlap"] <= 0 or c.plan is not None:
        # a GPU library's tiled GEMM/convolution already pipelines its loads; what it does not hide
        # near the ridge point (gpu matrix_overlap) is not the user's to schedule
        return None
    return (f"memory and math run back to back here: overlapping them saves up to {fmt_time(c.losses['overlap'])}",
            c.losses["overlap"])


CONCRETE = {
    "raise_intensity": _raise_intensity,
    "layer_fusion": _layer_fusion,
    "more_bandwidth": _more_bandwidth,
    "bigger_batch": _bigger_batch,
    "even_thread_split": _even_thread_split,
    "shallower_wider": _shallower_wider,
    "downgrade_hardware": _downgrade,
    "use_specialized_units": _use_specialized_units,
    "fit_the_tile": _fit_the_tile,
    "nas_lookup_table": _nas,
    "replace_slow_op": _replace_slow,
    "software_pipelining": _software_pipelining,
    "cooling": _cooling,
    "use_all_units": _use_all_units,
    "fewer_launches": _fewer_launches,
}


def fixes_for(c: LayerCost, x: Ctx, limit: int = 4) -> list[dict]:
    """Concrete fixes for one layer: the best fix for its cause and for every other loss above 10%
    of its time, then further fixes for those causes until ``limit``. A layer its math bounds
    (cause 'compute') gets only rescored what-ifs that save it at least 1%."""
    cat = catalogue()
    causes = [c.cause] + [k for k, v in sorted(c.losses.items(), key=lambda kv: (-kv[1], kv[0]))
                          if v > 0.1 * c.time_s and k != c.cause]
    per_cause: list[list[dict]] = []
    seen: set[str] = set()
    for cause in causes:
        found = []
        for fid, entry in cat.items():
            if cause not in entry["causes"] or fid in seen:
                continue
            fn = CONCRETE.get(fid)
            res = fn(c, x) if fn else None
            if fn is not None and res is None:
                continue
            text, saving = res if res else (entry["summary"], None)
            if c.cause == "compute" and (saving is None or saving < 0.01 * c.time_s):
                continue  # a layer its math bounds: only a what-if that buys it at least 1% is worth its line
            seen.add(fid)
            found.append({"id": fid, "cause": cause, "problem": entry["problem"], "difficulty": entry["difficulty"],
                          "text": text, "saving_s": None if saving is None else sig(max(saving, 0.0))})
        per_cause.append(found)
    out = [f[0] for f in per_cause if f][:limit]
    for found in per_cause:
        for f in found[1:]:
            if len(out) >= limit:
                return out
            out.append(f)
    return out


def attach_fixes(report, alternatives=(), top: int = 200) -> None:
    """Fixes for the layers that matter: the ``top`` layers by time lost, plus any layer losing at
    least 0.5% of the model's lost time (on a 50,000-layer graph, the long tail gets none).
    ``alternatives``: the profiles the downgrade advice may point to, or a function ``(kind,
    below_tops) -> profiles`` (called only when that advice applies; the caller loads them)."""
    x = Ctx(report)
    # a layer its math bounds still gets the fixes for a loss above a tenth of its time (a CPU
    # convolution whose threads split it unevenly: 20% idle, under its math)
    layers = [c for c in report.score.layers if c.time_s > 0 and (c.cause != "compute" or any(
        v > 0.1 * c.time_s for k, v in c.losses.items() if k != "input_io"))]
    total_lost = sum(c.lost_s for c in layers) or 1.0
    ranked = sorted(layers, key=lambda c: (-c.lost_s, c.name))
    for k, c in enumerate(ranked):
        if k < top or c.lost_s >= 0.005 * total_lost:
            c.fixes = fixes_for(c, x)
    report.model_fixes = model_fixes(report, alternatives)


def model_fixes(report, alternatives=()) -> list[dict]:
    """Whole-model suggestions: input transfer, prefetching, fusion and launch totals."""
    cat = catalogue()
    sc = report.score
    hw = sc.hw
    out = []
    t_in = sc.input_transfer_s
    insp = report.inspection
    if t_in > 0 and t_in > 0.02 * sc.totals["latency_s"]:
        dtypes = sorted({insp.graph.tensors[n].dtype for n in insp.graph.inputs if n in insp.graph.tensors})
        small = insp.input_bytes // 4 if "float32" in dtypes else insp.input_bytes // 2
        out.append(_entry(cat, "compress_inputs", "input_io",
                          f"input is {fmt_bytes(insp.input_bytes)} {'/'.join(dtypes)} over {hw.host_link_gbs:g} GB/s "
                          f"= {fmt_time(t_in)}: send uint8 ({fmt_bytes(small)}, {fmt_time(t_in * small / insp.input_bytes)}) "
                          "and decode on the device", t_in * (1 - small / insp.input_bytes)))
        if not sc.settings.overlap_input:
            out.append(_entry(cat, "prefetch", "overlap",
                              f"prefetching the next input hides {fmt_time(min(t_in, sc.totals['latency_s'] - t_in))} "
                              "of transfer behind compute (try --overlap-input)", min(t_in, sc.totals["latency_s"] - t_in)))
    alt = report.alt_latency_s
    if sc.settings.fusion == "none" and alt.get("typical", 0) < alt.get("none", 0) * 0.97:
        saved = alt["none"] - alt["typical"]
        out.append(_entry(cat, "layer_fusion", "memory",
                          f"typical runtime fusion (Conv+BN+activation, MatMul+bias+activation, elementwise chains) "
                          f"takes {fmt_time(alt['none'])} -> {fmt_time(alt['typical'])} (--fusion typical)", saved))
    host = [c for c in sc.layers if c.layer.workload.family in HOST_SHAPE_FAMILIES and c.time_s > 0]
    host_s = sum(c.time_s for c in host)
    launches = sc.losses.get("launch_overhead", 0.0) - host_s  # the kernels' share (host arithmetic below)
    if launches > 0.2 * sc.totals["latency_s"]:
        share = f"{launches / sc.totals['latency_s']:.0%} of the estimate"
        if sc.settings.runtime == "eager":
            how = "capture a CUDA graph or use a fusing runtime" if hw.kind == "gpu" else \
                "fuse them (a fusing runtime, --fusion typical)"
            reads = sum(c.layer.workload.host_waits for c in sc.layers) if hw.kind == "gpu" else 0
            if reads:  # a captured graph cannot hold a read back to the host (api._host_waits_note)
                how += (f" (a graph holds only the kernels between the model's {reads} read(s) back to the host: "
                        "capture the network up to them, or move the data-dependent ops out of the model)")
            if hw.kind == "gpu":  # the host runs ahead of the device: only part of its time shows
                host_total = sc.totals["launches"] * hw.launch_overhead_us * 1e-6
                text = (f"{sc.totals['launches']} kernel launches x {hw.launch_overhead_us:g} us of host time "
                        f"({fmt_time(host_total)}, partly hidden behind longer kernels): the device waits "
                        f"{fmt_time(launches)} on them and on short kernels' minimum time ({share}): {how}")
            else:
                per = f"x {hw.launch_overhead_us:g} us" if not hw.kernel_fixed_us else \
                    f"x {hw.launch_overhead_us:g} us of dispatch plus each family's fixed time (kernel_fixed_us)"
                text = f"{sc.totals['launches']} kernel launches {per} = {fmt_time(launches)} ({share}): {how}"
        else:  # no host cost per kernel here: what is left is each short kernel's minimum device time
            text = (f"{sc.totals['launches']} kernels, each at least its minimum device time: {fmt_time(launches)} "
                    f"({share}): fuse the short ones (--fusion typical, a fusing runtime)")
        out.append(_entry(cat, "fewer_launches", "launch_overhead", text, launches))
    if host_s > 0.02 * sc.totals["latency_s"]:
        out.append(_entry(cat, "fewer_launches", "launch_overhead",
                          f"{len(host)} shape-arithmetic ops run on the host every inference because the model's "
                          f"input dims are symbolic: {fmt_time(host_s)} ({host_s / sc.totals['latency_s']:.0%} of the "
                          f"estimate): {STATIC_DIMS_TEXT}", host_s))
    lower = precision_advice(report)
    if lower:
        out.append(_entry(cat, "use_specialized_units", "specialization", lower[0], lower[1]))
    down = downgrade_advice(report, alternatives)
    if down:
        out.append(_entry(cat, "downgrade_hardware", "parallelism", down[0], down[1]))
    occ = sc.totals["mean_occupancy"]
    if occ < 0.5:
        b = sc.settings.batch or 1
        out.append(_entry(cat, "bigger_batch", "parallelism",
                          f"at batch {b} the layers keep {occ:.0%} of {hw.lanes:,} lanes busy on average "
                          "(time-weighted): `dnnperf sweep --batch 1,2,4,...,256` shows where starvation stops", None))
    # the biggest win first; advice without a figure after the quantified ones
    out.sort(key=lambda f: (f["saving_s"] is None, -(f["saving_s"] or 0.0)))
    return out


def precision_advice(report) -> tuple[str, float] | None:
    """The whole model one rung down the precision ladder (the nearest rung a matrix unit runs that
    saves at least 10%), and the best further rung: the article's "use the specialised units" for
    the model, when it is among the biggest wins."""
    from dnnperf.api import _score
    from dnnperf.precision import RUNG, cheaper_rungs

    sc = report.score
    insp = report.inspection
    lat = sc.totals["latency_s"]
    current = sc.settings.precision or _model_precision(report, sc.hw)
    if current is None or lat <= 0:
        return None
    found = []
    for p in cheaper_rungs(sc.hw, current):
        t = _score(insp, sc.hw, replace(sc.settings, precision=p)).totals["latency_s"]
        if t < lat * 0.9:
            found.append((p, t))
    if not found:
        return None
    p1, t1 = found[0]
    text = f"whole model {current} -> {p1}: {fmt_time(lat)} -> {fmt_time(t1)} (-{1 - t1 / lat:.0%}; -p {p1})"
    best = min(found, key=lambda pt: (pt[1], RUNG[pt[0]]))
    if best[0] != p1 and best[1] < t1 * 0.9:
        text += f"; {best[0]}: {fmt_time(best[1])}"
    text += "; quantise with calibration data and keep the first and output layers higher if accuracy drops"
    return text, lat - t1


def _model_precision(report, hw) -> str | None:
    """The precision most of the model's matrix work runs in on ``hw`` (its stored dtype, or tf32
    where the runtimes take fp32 there by default)."""
    by: dict[str, int] = {}
    for r in report.inspection.costed():
        if r.workload.is_matrix:
            p = effective_precision(r.workload, hw, None)
            by[p] = by.get(p, 0) + r.workload.macs
    return max(by, key=lambda k: (by[k], k)) if by else None


def downgrade_advice(report, alternatives) -> tuple[str, float | None] | None:
    """When the model starves a big device, the cheapest of ``alternatives`` of the same kind that is
    estimated within 10% of its latency (by price when both have one, else by quoted peak)."""
    from dnnperf.scoring import score

    sc = report.score
    hw = sc.hw
    t = sc.totals
    lat = t["latency_s"]
    if lat <= 0 or (t["mean_occupancy"] >= 0.5 and t["fraction_of_peak"] >= 0.05):
        return None  # (nothing scored and no input to move: no time to compare against)
    layers = [c.layer for c in sc.layers]
    # what the run holds (the weights, each once, and the activations next to them) is the same on any
    # device of the kind: a candidate that cannot hold it is not worth scoring
    held = report.memory_figures
    best = None
    if callable(alternatives):  # only a device of the same kind quoting fewer TOP/s is a candidate
        alternatives = alternatives(hw.kind, hw.headline_tops)
    for other in alternatives:
        name = other.name
        if name == hw.name:
            continue
        if other.kind != hw.kind or other.headline_tops >= hw.headline_tops:
            continue
        if hw.price_per_hour is not None and (other.price_per_hour is None or other.price_per_hour >= hw.price_per_hour):
            continue
        if hw.price_per_hour is None and _draws_more(other, hw):
            continue
        if held is not None and held.on(other, sc.settings.batch).fits is False:
            continue  # its memory cannot hold the run (a 70B decoder's 141 GB of weights for a 24 GB L4)
        other = _same_host(other, hw)
        # cheap lower bound first: its launches plus all ops at its fastest unit
        best_rate = max(max(u.peak_tops.values()) for u in other.units) * 1e12
        if t["launches"] * other.launch_overhead_us * 1e-6 + t["ops"] / best_rate > lat * 1.10:
            continue
        # same kind of device: the same layers (and fusion) apply; only the scoring changes
        l2 = score(layers, other, sc.settings, report.inspection.input_bytes, sc.arena, sc.repeated,
                   sc.io).totals["latency_s"]
        if l2 > lat * 1.10:
            continue
        key = (other.price_per_hour if hw.price_per_hour is not None else other.headline_tops, name)
        if best is None or key < best[0]:
            best = (key, other, l2)
    if best is None:
        return None
    _, other, l2 = best
    b = sc.settings.batch or 1
    text = (f"at batch {b} this model keeps {t['mean_occupancy']:.0%} of {hw.name}'s lanes busy and reaches "
            f"{t['fraction_of_peak']:.1%} of its peak; {other.name} is estimated at {fmt_time(l2)} "
            f"({(l2 / lat - 1) * 100:+.0f}% vs {fmt_time(lat)})")
    if hw.price_per_hour and other.price_per_hour:
        text += f" at {other.price_per_hour / hw.price_per_hour:.0%} of the price per hour"
    else:
        text += f" with {other.headline_tops:g} instead of {hw.headline_tops:g} quoted TOP/s"
        a, b = hw.gpu.get("tdp_w"), other.gpu.get("tdp_w")
        if a and b:
            text += f", {float(b):g} W instead of {float(a):g} W"
    return text, None


def _same_host(other, hw):
    """``other`` as the user would run it: a discrete GPU swapped into the same server keeps the host and
    the framework, so its per-kernel host cost is ``hw``'s (the h200 profile's 20 us is eager PyTorch's;
    a K80 at its own 7 us looked faster for launching, not for computing). A GPU on a system-on-chip has
    its own host CPU and keeps its own figure."""
    from dataclasses import replace

    from dnnperf import gpu

    if hw.kind != "gpu" or other.kind != "gpu" or other.launch_overhead_us == hw.launch_overhead_us \
            or gpu.library_of(hw).integrated or gpu.library_of(other).integrated:
        return other
    return replace(other, launch_overhead_us=hw.launch_overhead_us)


def _draws_more(other, hw) -> bool:
    """Whether ``other`` draws more power than ``hw`` by their stated board power (``gpu.tdp_w``):
    without prices, a device drawing more is no downgrade, however few TOP/s it quotes (a 150 W K80 die
    for a 15 W Jetson module). Unknown for either: not ruled out."""
    a, b = hw.gpu.get("tdp_w"), other.gpu.get("tdp_w")
    return bool(a and b and float(b) > float(a))


def _entry(cat, fid, cause, text, saving):
    e = cat[fid]
    return {"id": fid, "cause": cause, "problem": e["problem"], "difficulty": e["difficulty"], "text": text,
            "saving_s": None if saving is None else sig(max(saving, 0.0))}
