"""The library API: functions that return data and never print.

    inspect_model(path)            -> Inspection (per-node workloads, no hardware)
    analyze(inspection, hw, ...)   -> Report (scored layers, totals, loss breakdown, fixes)

The JSON documents built from these live in ``dnnperf.documents``; rendering in ``dnnperf.render``.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

from dnnperf.scoring import (Layer, Score, Settings, conv_algorithm_note, dp4a_conv_note, effective_precision,
                             precision_of, score, tf32_by_default, top_cause)
from dnnperf.capacity import MemoryFigures, held_inputs, memory_figures, memory_note
from dnnperf.hardware import HardwareProfile
from dnnperf.inspection import Inspection, Row, inspect_graph, recomputed, recomputed_note
from dnnperf.layers import build_layers
from dnnperf.ir import ShapeOverrides
from dnnperf.load import load_graph
from dnnperf.ops.ml import unpriced_notes as ml_unpriced_notes
from dnnperf.overrides_check import checked
from dnnperf.qdq_runs import engine_quantized, ort_cpu_quantized, runtime_notes
from dnnperf.reuse import repeated_weight_bytes
from dnnperf.rules import prices_far_reads
from dnnperf.workload import FREE_FAMILIES

__all__ = ["inspect_model", "inspect_graph", "analyze", "build_layers", "ranked", "Report", "Inspection", "Row"]


@contextmanager
def _no_cyclic_gc():
    """Python's cyclic collector off while a model loads: the loader allocates tens of thousands of
    long-lived, acyclic objects (nodes, tensors, tuples) whose every full collection it would walk
    again (swin_t: 12% of the CPU time of a load, fastest of 3 x 12 runs); reference counting still
    frees everything, and the collector is restored as it was."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            # what the load allocated counts toward the youngest generation: re-enabled as it is, the
            # collector's next allocation walks all of it at once (swin_t: ~5% of an inspect). Moved to
            # the oldest generation instead (freeze + unfreeze: a list splice, counts reset), it waits for
            # a full collection, by which time reference counting has freed what the caller dropped
            gc.freeze()
            gc.unfreeze()
            gc.enable()


def inspect_model(path: str, overrides: ShapeOverrides = ShapeOverrides()) -> Inspection:
    """Load ``path`` and cost every node (no hardware involved). Overrides that leave a node with
    contradicting shapes (1 channel where the weights expect 3) are refused, naming the node."""
    with _no_cyclic_gc():
        insp = inspect_graph(load_graph(path, overrides), path)
    return checked(insp, overrides)


@dataclass
class Report:
    inspection: Inspection
    score: Score
    alt_latency_s: dict = field(default_factory=dict)  # fusion what-if: {"none": s, "typical": s}
    model_fixes: list = field(default_factory=list)
    notes: list = field(default_factory=list)  # assumptions made for this hardware (precision mappings)
    memory: str | None = None  # the note when the device's memory cannot hold the run (dnnperf.capacity), else None
    memory_figures: MemoryFigures | None = None  # what the run holds against the device's memory

    @property
    def hw(self) -> HardwareProfile:
        return self.score.hw

    @property
    def top_cause(self) -> str:
        return top_cause(self.score)


def analyze(insp: Inspection, hw: HardwareProfile, settings: Settings, with_fixes: bool = True,
            alternatives=None, what_if: bool = True) -> Report:
    """Score ``insp`` on ``hw``; with fixes, ``alternatives`` are the profiles the downgrade advice
    may suggest: a tuple, or a function ``(kind, below_tops) -> profiles`` called only when that
    advice applies (None: the shipped profiles, read only then). ``settings.precision`` is checked against the device
    (``dnnperf.precision``); "best" tries every precision the device runs and keeps the fastest.
    ``what_if=False`` (with no fixes) skips scoring the other fusion setting, for callers that read
    neither the report's fusion what-if nor its fixes (totals rows, sweeps, baselines, tables)."""
    from dataclasses import replace

    from dnnperf import precision as prec

    if settings.batch is None:
        settings = replace(settings, batch=insp.batch)
    if settings.runtime == "tensorrt" and settings.fusion != "typical":
        # the engine fuses as --fusion typical does, whoever builds the settings (the CLI does the same)
        settings = replace(settings, fusion="typical")
    p, note = prec.resolve(hw, settings.precision)
    notes = [note] if note else []
    if hw.assumed:
        notes.append(hw.assumed_note())
    if p == "best":
        cands = [c for c in prec.supported(hw) if c != "fp64"]
        timed = [(_score(insp, hw, replace(settings, precision=c)).totals["latency_s"], prec.RUNG[c], c) for c in cands]
        p = min(timed)[2]
        notes.append(f"-p best on {hw.name}: {p} (fastest of {', '.join(cands)}; check the accuracy of the quantised model)")
    elif p is None:
        used = sorted({precision_of(r.workload) for r in insp.costed() if r.workload.is_matrix})
        missing = [u for u in used if not prec.runs(hw, u)]
        if missing and _upcasts(hw, settings.precision) and set(missing) <= {"fp16", "bf16"}:
            notes.append(f"{hw.name} has no {'/'.join(missing)} arithmetic: the model's {'/'.join(missing)} layers are "
                         "costed in fp32 with the runtime's casts at their boundaries (dnnperf/upcast.py)")
        elif missing:
            notes.append(f"{hw.name} has no {'/'.join(missing)} units: the model's {'/'.join(missing)} matrix layers are "
                         "costed in fp32 on the fastest unit that runs it (the runtime's upcast)")
        if "fp32" in used and tf32_by_default(hw):
            # one wording for every such GPU: compare --hw all prints it once, not once per profile
            notes.append("the model's fp32 matrix layers are costed in tf32 on GPUs with a tf32 mode (Ampere and "
                         "later), as ONNX Runtime's CUDA provider, TensorRT and PyTorch's convolutions run them by "
                         "default there; -p fp32 costs strict fp32 (eager PyTorch's own matrix products, or those "
                         "runtimes with TF32 switched off)")
    settings = replace(settings, precision=p)
    sc = _score(insp, hw, settings)
    sub = _subnormal_note(insp, hw, sc)
    if sub:
        notes.append(sub)
    uncal = _uncalibrated_kernels_note(hw, sc)
    if uncal:
        notes.append(uncal)
    notes.extend(ml_unpriced_notes(hw, [c.layer for c in sc.layers]))
    twice = _exposure_twice_note(hw, sc)
    if twice:
        notes.append(twice)
    if hw.kind == "cpu":
        built = recomputed_note(insp)
        if built:
            notes.append(built)
    quant = _cpu_qdq_note(insp, hw, sc)
    if quant:
        notes.append(quant)
    stems = _stem_note(hw, sc)
    if stems:
        notes.append(stems)
    padded = [c for c in sc.layers if c.padded_from]
    if padded:
        names = [c.name for c in padded]
        from dnnperf.gpu import unit_words

        units = unit_words(padded[0].unit)
        notes.append(f"{len(names)} convolution(s) with fewer input channels than the {units}' vector "
                     f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}) run padded with zeros on the "
                     f"{units}, as TensorRT reformats them (the padding's MACs count as specialization loss)")
    notes.extend(n for n in (_engine_wider_note(sc), conv_algorithm_note(sc), dp4a_conv_note(sc)) if n)
    cpu = hw.kind == "cpu"
    notes.extend(runtime_notes(recomputed(insp) if cpu else insp, cpu, _engine_qdq(hw, settings)))
    inputs = held_inputs(insp.graph, tensor_size(sc.settings.precision))
    figs = memory_figures(hw, sc, inputs, _live_bytes(insp, sc),
                          repeated_weight_bytes(insp, [c.layer for c in sc.layers], held=True))
    memory = memory_note(hw, sc, figs)
    if memory:
        notes.append(memory)
    waits = _host_waits_note(hw, sc)
    if waits:
        notes.append(waits)
    alt = {settings.fusion: sc.totals["latency_s"]}
    if what_if or with_fixes:  # the other fusion setting, scored for the report and the fusion fix
        other = "typical" if settings.fusion == "none" else "none"
        alt[other] = _score(insp, hw, replace(settings, fusion=other)).totals["latency_s"]
    report = Report(insp, sc, alt_latency_s=alt, notes=notes, memory=memory, memory_figures=figs)
    if with_fixes:
        from dnnperf.fixes import attach_fixes

        if alternatives is None:
            from dnnperf.hardware import shipped_profiles as alternatives
        attach_fixes(report, alternatives)
    return report


def _engine_wider_note(sc: Score) -> str | None:
    """Matrix layers a TensorRT engine built for an 8- or 4-bit precision runs in fp16 because that
    kernel is the faster one there (``scoring._engine_wider``)."""
    from dnnperf.scoring import ENGINE_ALSO_FP16

    p = sc.settings.precision
    if sc.settings.runtime != "tensorrt" or p not in ENGINE_ALSO_FP16:
        return None
    matrix = [c for c in sc.layers if c.layer.workload.is_matrix]
    wider = [c for c in matrix if c.precision == "fp16"]
    if not wider:
        return None
    return (f"{len(wider)} of {len(matrix)} matrix layers run in fp16, not {p}: a TensorRT engine built for {p} "
            f"also allows fp16 (as `trtexec --{p} --fp16` and NVIDIA's published {p} builds) and times both "
            f"kernels for every layer; on {sc.hw.name} these are faster in fp16")


def _host_waits_note(hw: HardwareProfile, sc: Score) -> str | None:
    """On a GPU, the times the host must read a device result before it can queue more work
    (``Workload.host_waits``: NonZero / Unique / NonMaxSuppression output sizes, a Loop condition its
    body computes, an If condition known only at run time), and how they are priced."""
    if hw.kind != "gpu":
        return None
    held = [c for c in sc.layers if c.layer.workload.host_waits]
    if not held:
        return None
    n = sum(c.layer.workload.host_waits for c in held)
    ops = sorted({c.layer.op_type for c in held})
    where = f"{n} time(s) the host reads a result back from the device before it can queue more work ({', '.join(ops[:4])}" \
            f"{', ...' if len(ops) > 4 else ''}: an output size, a loop or branch condition)"
    if sc.settings.runtime == "eager":
        return (f"{where}: at each the host waits for the device to finish what it queued, then pays one call to copy "
                f"the value ({hw.launch_overhead_us:g} us, the profile's launch figure), and the device idles until the "
                "next kernel is queued; priced on the stream")
    if sc.settings.runtime == "graph":
        return (f"{where}: a captured CUDA graph cannot hold such a read, so the runtime splits the graph there or "
                "runs that part eagerly; not priced (the estimate assumes one uninterrupted replay)")
    return f"{where}: the engine resolves them inside, at synchronisations of its own; not priced"


def _stem_note(hw: HardwareProfile, sc: Score) -> str | None:
    """Convolutions a GPU library runs on its stem kernels in another precision than the layer's own."""
    if hw.kind != "gpu":
        return None
    from dnnperf import gpu
    from dnnperf.scoring import is_stem

    lib = gpu.library_of(hw)
    found: dict[str, list[str]] = {}  # the layer's own precision -> names
    units = ""
    for c in sc.layers:
        own = effective_precision(c.layer.workload, hw, sc.settings.precision)
        if c.precision != own and is_stem(c.layer.workload, hw, lib, own):
            found.setdefault(own, []).append(c.name)
            units = gpu.unit_words(c.unit)
    if not found:
        return None
    names = [n for v in found.values() for n in v]
    return (f"{len(names)} convolution(s) with fewer input channels than one 16-byte vector ({', '.join(names[:3])}"
            f"{', ...' if len(names) > 3 else ''}) run on the library's {lib.stem_precision} stem kernels on the "
            f"{units}, "
            f"not in {'/'.join(sorted(found))} (the {lib.generation} entry's stem_precision)")


def _subnormal_note(insp: Inspection, hw: HardwareProfile, sc: Score) -> str | None:
    """What the subnormal probabilities of a -100 attention mask (``dnnperf.load.masks``) cost on a CPU."""
    from dnnperf.fmt import t as fmt_time
    from dnnperf.efficiency import subnormal_time

    n = sum(insp.graph.subnormal.values())
    if not n or hw.kind != "cpu":
        return None
    fix = ("a mask of -inf or -1e4 (exp gives exact zeros) or ONNX Runtime's session option "
           "session.set_denormal_as_zero removes it")
    if not hw.subnormal_ns:
        return (f"{n:,} attention probabilities underflow to subnormal floats (an additive mask near -100 before a "
                f"Softmax); x86 CPUs without flush-to-zero pay tens of ns for each, NOT in this estimate ({hw.name} has "
                f"no calibrated subnormal_ns: run dnnperf calibrate on the target); {fix}")
    extra = sum(subnormal_time(c.layer.workload, hw) for c in sc.layers)
    return (f"{n:,} attention probabilities underflow to subnormal floats (an additive mask near -100 before a "
            f"Softmax): {fmt_time(extra)} of this estimate on {hw.name} (subnormal_ns, calibrated); {fix}")


def _cpu_qdq_note(insp: Inspection, hw: HardwareProfile, sc: Score) -> str | None:
    """QDQ layers (``dnnperf.qdq``) costed in int8 on a CPU: the profile's int8 figure is a GEMM's, and
    ONNX Runtime's int8 convolutions do not keep up with its float ones without VNNI instructions."""
    if hw.kind != "cpu":
        return None
    from dnnperf.qdq import NOTE

    quantized = {r.node.name for r in insp.rows if r.workload is not None and NOTE in r.workload.note}
    n = sum(1 for c in sc.layers if c.precision == "int8" and any(x in quantized for x in c.layer.nodes))
    if not n:
        return None
    return (f"{n} QDQ layer(s) costed in int8 at {hw.name}'s int8 rate, a GEMM's: ONNX Runtime's int8 convolutions "
            "(QLinearConv) beat its float ones only with VNNI instructions (AVX512-VNNI, AVX-VNNI); without them "
            "this estimate is optimistic (a 2-core AVX2 VM ran SqueezeNet 1.1's QDQ export in 10-13 ms, its float "
            "model in 4.9 ms; estimated 7.2 ms) — time it with dnnperf validate")


def _uncalibrated_kernels_note(hw: HardwareProfile, sc: Score) -> str | None:
    """A calibrated CPU profile (one with a bandwidth curve) prices the runtime's own kernels (``RUNTIME_KERNELS``),
    the pass a fused activation makes over a blocked convolution's output (``epilogue_ns``), convolutions
    reading fewer channels than one block (``conv.rgb``: a network's first layer, a squeeze-excite's expansion;
    ``conv.rgb_k1`` for 1 x 1 ones where the calibration could time one), layout conversions
    (``layout.reorder``), loops over outputs (``loop_ns``), 8-bit and plain depthwise kernels
    (``efficiency.missing_conv_figures``) and the ops timed for a figure of their own (``vocab.OWN_OP_FIGURES``,
    and those priced with one: ``OP_PRICED_AS``) at their pace, and adds its call's cost (``call_us``); a profile
    calibrated before one of them was timed has no figure for it (its layers take a general one): say so."""
    from collections import Counter

    from dnnperf.efficiency import (epilogue_activations, loop_figure, missing_conv_figures, narrow_k1_timed,
                                    reads_image, run_as)
    from dnnperf.vocab import LOOP_KERNELS, OP_PRICED_AS, OWN_OP_FIGURES, RUNTIME_KERNELS

    if not hw.bandwidth_curve:
        return None
    missing: Counter = Counter({} if hw.call_us else {"call from Python (left out of the estimate)": 0})  # -> layers
    for c in sc.layers:
        op = run_as(c.layer)
        if c.layer.workload.family in FREE_FAMILIES:  # folded at load time, or a view: no kernel to price
            continue
        if op in RUNTIME_KERNELS and op not in hw.op_efficiency:  # (a kernel timed later: its twin's figure)
            alias = OP_PRICED_AS.get(op)
            missing[f"{op}, priced with its {alias} figure" if alias in hw.op_efficiency else op] += 1
        elif (op in OWN_OP_FIGURES or op in OP_PRICED_AS) and OP_PRICED_AS.get(op, op) not in hw.op_efficiency:
            missing[op] += 1
        for act in epilogue_activations(c.layer, hw):
            if act not in hw.epilogue_ns:
                missing[f"{act} pass after a convolution"] += 1
        w = c.layer.workload
        if reads_image(w, hw):
            if "conv.rgb" not in hw.shape_efficiency:
                missing["convolution with fewer input channels than one block (the image-reading kind)"] += 1
            elif tuple(w.conv[1:3]) == (1, 1) and "conv.rgb_k1" not in hw.shape_efficiency \
                    and narrow_k1_timed(hw.cpu_layout[0]):
                missing["1 x 1 convolution with fewer input channels than one block"] += 1
        for what in missing_conv_figures(w, hw):
            missing[what] += 1
        if op == "LayoutReorder" and hw.cpu_layout is not None and "layout.reorder" not in hw.shape_efficiency:
            missing["layout conversion (timed only at a one-node model's edges)"] += 1
        if w.kernel in LOOP_KERNELS and w.kernel not in hw.loop_ns:
            missing[loop_figure(w.kernel)] += 1
    if not missing:
        return None
    which = ", ".join(f"{op} ({n} layer{'s' if n > 1 else ''})" if n else op for op, n in sorted(missing.items()))
    return (f"{hw.name} has no calibrated figure for ONNX Runtime's {which}: costed at a general figure "
            "instead (an assumption); run dnnperf calibrate again to measure them")


def _exposure_twice_note(hw: HardwareProfile, sc: Score) -> str | None:
    """A CPU profile calibrated before ``calibrate.settle_exposure`` (its ``measured`` record has no
    ``exposure_rounds``) read its convolution shape figures with the weights' exposure inside them
    where their chains reach past the cache; this version adds the exposure to every convolution
    whose weights come back from beyond the cache, so such a layer pays it twice: say so."""
    from dnnperf import rules

    if not (hw.bandwidth_curve and hw.conv_weight_exposure and hw.measured) or "exposure_rounds" in hw.measured \
            or sc.weights_resident or rules.beyond_cache(sc.weight_reach or sc.footprint, hw) == 0:
        return None
    n = sum(1 for c in sc.layers if c.layer.workload.family == "conv" and c.layer.workload.weight_bytes)
    if not n:
        return None
    return (f"{hw.name} was calibrated before its convolution figures were read apart from the weights' exposure: "
            f"{n} convolution layer{'s' if n > 1 else ''} whose weights come back from beyond the cache may pay it "
            "twice (an overestimate); run dnnperf calibrate again")


def _upcasts(hw: HardwareProfile, precision: str | None) -> bool:
    """A CPU without 16-bit float arithmetic runs a model's own 16-bit layers in fp32."""
    from dnnperf import precision as prec

    return hw.kind == "cpu" and precision is None and not (prec.runs(hw, "fp16") or prec.runs(hw, "bf16"))


def _engine_qdq(hw: HardwareProfile, settings: Settings) -> bool:
    """Whether a QDQ model runs as a TensorRT engine runs it (``qdq_runs.engine_quantized``): on a
    GPU under the engine, in the model's own precisions (a -p what-if replaces them)."""
    return hw.kind == "gpu" and settings.runtime == "tensorrt" and settings.precision is None


def _fused_attention(hw: HardwareProfile, settings: Settings) -> bool:
    """Whether fused layers may join attention into one kernel: not under a TensorRT engine on a GPU
    generation it has no fused attention kernel for (``engine_fused_attention``)."""
    if hw.kind != "gpu" or settings.runtime != "tensorrt":
        return True
    from dnnperf.gpu import library_of

    return library_of(hw).engine_fused_attention


def _score(insp: Inspection, hw: HardwareProfile, settings: Settings) -> Score:
    if hw.kind == "cpu":
        insp = ort_cpu_quantized(recomputed(insp))  # ONNX Runtime's QDQ kernels beyond the matrix layers
    elif _engine_qdq(hw, settings):
        insp = engine_quantized(insp)  # a QDQ model's Q/DQ pairs fold into the ops between them
    attention, upcast = _fused_attention(hw, settings), _upcasts(hw, settings.precision)
    def built(unsummed: frozenset = frozenset()) -> list[Layer]:
        layers = build_layers(insp, settings.fusion, settings.precision, hw.kind != "cpu", attention, unsummed, upcast)
        if upcast:
            from dnnperf.upcast import add_casts

            layers = add_casts(insp, layers)
        return layers

    layers = built()
    if hw.cpu_layout is not None:
        from dnnperf.layout import laid_out

        layers = laid_out(insp.graph, layers, hw.cpu_layout, built if settings.fusion == "typical" else None)
    repeated = repeated_weight_bytes(insp, layers)  # a weight several layers share is one weight on any device
    if prices_far_reads(hw):  # reads priced by how far back they were written
        from dataclasses import replace

        from dnnperf.reuse import arena_bytes, reuse_reads

        reads = reuse_reads(insp, layers)
        layers = [replace(la, reads=reads[la.name]) if la.name in reads else la for la in layers]
        if hw.cpu_layout is not None:  # the image kernel's first touches (rules.cold_start_time)
            from dnnperf.efficiency import reads_image
            from dnnperf.reuse import cold_start_bytes

            cold = cold_start_bytes(insp, layers, lambda la: la.workload.family == "conv" and reads_image(la.workload, hw))
            layers = [replace(la, cold_bytes=cold[la.name]) if la.name in cold else la for la in layers]
        return score(layers, hw, settings, insp.input_bytes, arena_bytes(insp, layers, size=tensor_size(settings.precision)),
                     repeated, insp.graph.io)
    return score(layers, hw, settings, insp.input_bytes, repeated=repeated, io=insp.graph.io)


def _live_bytes(insp: Inspection, sc) -> int:
    """The model's own activation bytes live at once at the peak of one inference, its inputs and
    outputs left out (``dnnperf.reuse.arena_bytes``; the memory check counts the inputs apart: a
    decoder's KV cache, which a serving runtime updates in place, is held once)."""
    from dnnperf.reuse import arena_bytes

    return arena_bytes(insp, [c.layer for c in sc.layers], internal=True, size=tensor_size(sc.settings.precision))


def tensor_size(precision: str | None):
    """A tensor's bytes under a precision what-if (float and int8 tensors at that precision, as
    ``scoring.with_precision`` scales a layer's bytes); None (their own) without one."""
    if not precision:
        return None
    from dnnperf.ir import DTYPE_BITS, INDEX_DTYPES
    from dnnperf.workload import DTYPE_OF_PRECISION

    bits = DTYPE_BITS.get(DTYPE_OF_PRECISION[precision], 32)

    def size(t):
        old = DTYPE_BITS.get(t.dtype, 32)
        return t.nbytes if t.dtype in INDEX_DTYPES or not old else t.nbytes * bits // old
    return size


def ranked(report: Report, top: int | None = None) -> list:
    """Layers that cost time, ranked by time lost against the quoted peak (then name)."""
    rows = [c for c in report.score.layers if c.layer.workload.family not in FREE_FAMILIES]
    rows.sort(key=lambda c: (-c.lost_s, c.name))
    return rows if top is None else rows[:top]
