"""Hardware profiles: plain YAML a user can write from a spec sheet, strictly validated.

All hardware numbers live in YAML (``profiles/*.yaml``); this module only reads and checks them.
YAML is read with ``yaml.safe_load`` only (no object tags), with an alias budget so that an
alias bomb is rejected instead of expanding.

Why one module this long: the schema table, the validating parser of every section and the
profile dataclass are one contract; splitting them would spread one schema over several files.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache

from dnnperf.errors import DnnperfError
from dnnperf.files import read_text, require_file
from dnnperf.vocab import EPILOGUE_ACTIVATIONS, INT8_OPERANDS, LOOP_KERNELS, PROFILE_FAMILIES

SCHEMA_ID = "dnnperf-hw/1"
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4", "int4")
SERVES = ("matrix", "vector")
KINDS = ("gpu", "tpu", "npu", "cpu", "dsp")
FAMILIES = PROFILE_FAMILIES
CALL_KEYS = ("fixed", "per_input", "per_output")  # call_us

# Documented schema: key -> (type, required, description). `hw schema` prints this.
SCHEMA = {
    "schema": ("str", True, f"always '{SCHEMA_ID}'"),
    "name": ("str", True, "short id used with --hw"),
    "title": ("str", True, "human-readable device name"),
    "kind": ("str", True, f"one of {', '.join(KINDS)}"),
    "headline": ("map", True, "the quoted peak: {precision: fp16, tops: 125} (dense, ops = 2 x MACs)"),
    "units": ("list", True, "compute units: [{name, serves: [matrix|vector], peak_tops: {precision: TOP/s}, "
                            "tile: {precision: [M, N, K]}, alignment: {precision: channels}, arrays: how many "
                            "weight-stationary systolic arrays of the tile [1, C, R] the unit is (TPU MXUs; optional: a "
                            "matrix layer then keeps them busy by weight blocks and streamed rows, not outputs over lanes)}]"),
    "memory": ("map", True, "{dram_gbs: GB/s, dram_gb: GB, onchip_mb: MB, onchip_gbs: GB/s for layers whose bytes fit "
                            "on chip (optional), activations_onchip: bool, bandwidth_curve: {working set MB: GB/s} "
                            "(optional, calibrated CPUs: a layer's traffic streams at the figure for its working set, "
                            "log-interpolated, DRAM beyond the largest), dram_measured_mb: the working set dram_gbs "
                            "was measured at (optional, calibrated CPUs)}"),
    "parallelism": ("map", True, "{lanes: concurrently resident work items (GPUs: default SMs x the generation's "
                                 "threads_per_sm, noted as assumed), compute_units: SMs/cores/arrays, "
                                 "ops_per_item: ops each work item needs to keep its lane busy (optional, default 1)}"),
    "launch_overhead_us": ("num", False, "per-kernel launch / dispatch cost in microseconds; default by kind "
                                         "(dnnperf/data/kind_defaults.yaml: gpu 5), noted as assumed"),
    "host_op_us": ("num", False, "CPU runtimes: host cost in microseconds of one shape-arithmetic op the runtime "
                                 "redoes every inference in a model with symbolic input dims (Shape, Gather, "
                                 "Concat on shape vectors; calibrated); default launch_overhead_us"),
    "call_us": ("map", False, "CPU runtimes: microseconds of one inference call through the runtime's Python API "
                              "besides its kernels: 'fixed' (one input, one output), 'per_input' and 'per_output' "
                              "(each further graph input / output); calibrated; default none"),
    "kernel_fixed_us": ("map", False, "CPU runtimes: op family -> fixed time in microseconds of one kernel of that "
                                      "family beyond launch_overhead_us, whatever its size (the thread pool's fork "
                                      "and join, kernel set-up; calibrated on chains of tiny ops; rnn: per time "
                                      "step inside one recurrent op, which is dispatched once; control: per "
                                      "iteration of a Loop or Scan body, besides its nodes' own), default 0"),
    "subnormal_ns": ("map", False, "CPUs: {softmax: ns, matmul: ns} each subnormal float32 probability costs the "
                                   "Softmax that writes it and the MatMul that multiplies it (per 32 output columns) "
                                   "(x86 without flush-to-zero: microcode assists; calibrated), default 0"),
    "epilogue_ns": ("map", False, "CPU runtimes: activation -> ns per output element of the pass a blocked "
                                  "convolution or GEMM makes to apply it (Clip, HardSigmoid, HardSwish, LeakyRelu, "
                                  "Sigmoid, Tanh; calibrated on 1 x 1 convolution chains with and without it); "
                                  "default: one read and write of the output at the on-chip bandwidth, at the op's "
                                  "op_efficiency"),
    "loop_ns": ("map", False, "CPU runtimes: kernel -> ns per element of work (outputs; a scatter's updates) of ops "
                              "the runtime runs as one loop over them, far from any roof ('Resize.linear', "
                              "'Resize.nearest', 'Resize.cubic', 'Softmax.axis' (a softmax over an axis that is not the "
                              "last), 'ScatterElements', ONNX Runtime's uint8 'QLinearConcat' and "
                              "'QLinearAveragePool', 'MaxPool.int8' (an 8-bit max pool in NCHW), 'Transpose.elements' "
                              "(a permutation copied element by element), "
                              "'Slice.strided', 'Gather.blocks', 'CumSum.last', 'DepthToSpace', 'SpaceToDepth', "
                              "'ArgMax' (an ArgMax or ArgMin, per input element), 'Expand.fill' (per input element of an "
                              "Expand broadcasting a last axis of one), 'PRelu', 'LRN', 'ReduceLogSumExp' (per input "
                              "element), 'TreeEnsemble.level' (per level of a row's walk down a tree), 'SVM.term' (per "
                              "support vector and feature of a row); calibrated); the layer takes that or its roofline "
                              "time, "
                              "whichever is longer; default: the roofline at the family's efficiency. "
                              "'Broadcast.span': ns per span of a broadcasting binary op's loop, added to its time. "
                              "'MatMulNBits.fp32' / 'MatMulNBits.int8': ns per weight (K x N) of ONNX Runtime's 4-bit "
                              "MatMulNBits below accuracy_level 4 / at 4, in place of its roofline and traffic (a product "
                              "of many rows: its math, if longer)"),
    "host_link_gbs": ("num|null", False, "host -> device link for inputs in GB/s; null when inputs are already in "
                                         "memory (the default, noted as assumed)"),
    "interconnect": ("map", False, "{gbs: GB/s a collective between two of these devices reaches, one way (NVLink, "
                                   "PCIe), latency_us: the start of one collective, devices: how many that link joins "
                                   "(an 8-GPU NVLink board), network_gbs: GB/s a collective reaches per device between "
                                   "such groups (the cluster network)}: tensor-parallel LLM steps (--tp); absent: "
                                   "host_link_gbs for any number of devices, and collective_latency_us from "
                                   "dnnperf/data/kind_defaults.yaml"),
    "sustained_clock_fraction": ("num", False, "fraction of boost clock held under load (thermal envelope); default 1, "
                                               "or for GPUs the generation default by board power per SM"),
    "gpu": ("map", False, "GPU library knowledge: {generation: volta|turing|ampere|ada|hopper|pascal|..., tdp_w: W, "
                          "and any field of dnnperf/data/gpu_generations.yaml to override} (kind gpu; defaults apply)"),
    "efficiency": ("map", False, "per op-family fraction of the roofline actually achieved (calibrated), default 1"),
    "matrix_m_efficiency": ("map", False, "GEMM rows M -> fraction of the roof for matrix layers (calibrated; "
                                          "log-interpolated: products with few rows reuse each packed weight "
                                          "panel less); without matrix_nk_efficiency it is read at min(M, N, K)"),
    "matrix_nk_efficiency": ("map", False, "smaller of a GEMM's N and K (a convolution's channels) -> fraction "
                                           "of the roof (calibrated at M = 3136; log-interpolated)"),
    "shape_efficiency": ("map", False, "convolutions whose speed depends on their shape: {'depthwise_conv.k3s1': "
                                       "{output pixels: fraction of the roof}, 'grouped_conv.w8' (stride 1; 'grouped_conv.w8s2' stride 2): {output pixels: fraction} for 8 input "
                                       "channels per group, 'conv.unblocked_k1' and 'depthwise_conv.unblocked_k3' "
                                       "('...k3s2' strided): {output pixels: fraction} for convolutions a blocked CPU "
                                       "layout cannot take, 'pool.unblocked': {output pixels: "
                                       "fraction} for pooling it cannot take, 'norm.row': {elements per normalised row: fraction} for "
                                       "LayerNorm-like ops, 'conv.k1' / 'conv.k3': {output pixels: fraction} for plain "
                                       "convolutions it takes blocked (1 x 1 kernels, the rest; 'conv.k1s2' for strided "
                                       "1 x 1 ones when measured; only ever lowers the "
                                       "thin-product figure), 'conv.rgb': {MACs per output pixel: fraction} for "
                                       "plain convolutions with fewer input channels than one block (a network's "
                                       "first layer reading the image; 'conv.rgb_k1' for 1 x 1 ones), 'movement.serial': {KB read and written: fraction} for "
                                       "Concats whose inputs are small enough to be copied by one thread, 'layout.reorder': {pixels per "
                                       "channel: fraction} for the runtime's conversions into and out of its blocked "
                                       "layout} (calibrated; log-interpolated in pixels, channels per group "
                                       "and row length; overrides the family's figure)"),
    "cpu_layout": ("map", False, "{block: channels per block, grouped_min_width: channels per group, "
                                 "channel_alignment: channel multiple padded up to whole blocks, pool_alignment: "
                                 "channel multiple pooling needs (default: the block)}: the runtime "
                                 "runs convolutions and pooling in a channel-blocked layout and converts at the "
                                 "boundaries with other ops (dnnperf/layout.py; calibrated CPUs)"),
    "memory_overlap": ("num", False, "fraction of the shorter of memory and compute time hidden behind the longer "
                                     "(1 = perfect roofline overlap, the default; calibrations before product_overlap "
                                     "wrote their cold-GEMM figure here)"),
    "product_overlap": ("num", False, "CPU runtimes: memory_overlap for matrix products (MatMul, Gemm), which stream "
                                      "their weights: the share of the shorter of memory and compute time such a "
                                      "product hides (calibrated on a 49-row GEMM with 50 MB of weights); absent: "
                                      "memory_overlap"),
    "conv_weight_exposure": ("num", False, "CPU runtimes: share of a convolution's weight reads (their time at "
                                           "dram_gbs) its math does not hide when they come from beyond the cache: "
                                           "when what the model touches between two reads of a weight (its weights "
                                           "and activation buffers) outgrows the cache the weights do not stay "
                                           "there between inferences (scaled by rules.beyond_cache; calibrated on a "
                                           "chain of convolutions with as many weight bytes as the DRAM "
                                           "measurement's working set), default 0"),
    "int8_operands": ("map", False, "CPU runtimes: fraction of the int8 peak an 8-bit integer product reaches by the "
                                    "element types of its data and weights ('u8s8': uint8 data x int8 weights; "
                                    "'u8u8', 's8s8', 's8u8'): x86 runtimes have a fast kernel for one pairing only "
                                    "(calibrated on MatMulInteger; the int8 peak is the fastest pairing's); "
                                    "default 1 (every pairing at the peak)"),
    "int8_depthwise_share": ("num", False, "CPU runtimes: share of the float depthwise pace an 8-bit depthwise "
                                           "convolution reaches (ONNX Runtime's channels-last QLinearConv; "
                                           "calibrated), default 1"),
    "int8_depthwise_generic": ("map", False, "CPU runtimes: {channel_multiple: the channel counts the fast 8-bit "
                                             "depthwise kernel takes (multiples of it; 16 for MLAS on x86), share: the "
                                             "share of the float depthwise pace the generic kernel that runs any other "
                                             "count reaches} (calibrated); without it every count takes "
                                             "int8_depthwise_share"),
    "op_efficiency": ("map", False, "per op-type fraction of the roofline (e.g. Pow, Tanh; LayoutReorder for the runtime's "
                                   "layout conversions: calibrated), overrides the family's"),
    "unoptimized_ops": ("list", False, "op types with no fast kernel: run at unoptimized_efficiency, no overlap"),
    "unoptimized_efficiency": ("num", False, "fraction of peak those ops reach, default 0.1"),
    "accelerator_families": ("list|null", False, "op families the accelerator runs; others go to fallback"),
    "fallback": ("map", False, "{name, peak_tops: {precision: TOP/s}, dram_gbs, transfer_gbs} for unsupported ops"),
    "price_per_hour": ("num|null", False, "on-demand price in USD per hour (cloud targets)"),
    "price_source": ("str", False, "where and when the price was read"),
    "sources": ("map", False, "field -> address of the published figure (absent: the figures are taken as given, "
                              "noted as assumed)"),
    "unverified": ("list", False, "fields whose figure is a widely quoted but unconfirmed value"),
    "notes": ("str", False, "free text"),
    "measured": ("map", False, "how a calibrated profile was measured"),
    "validation": ("list", False, "how far to trust the profile: [{data, sheet, precision, kernels | networks, "
                                  "median_error, within_1_25, within_2, rho}] against published measurements: kernels "
                                  "(bench/published.py --records prints them) or whole-network latencies (networks: "
                                  "bench/trt_bert.py --records); absent: never validated"),
}
VALIDATION_KEYS = ("data", "sheet", "precision", "kernels", "median_error", "within_1_25", "within_2", "rho")
# a record counts published kernels or whole-network latencies: one of these two keys
VALIDATION_COUNTS = ("kernels", "networks")


@dataclass(frozen=True)
class Unit:
    name: str
    serves: tuple[str, ...]
    peak_tops: dict[str, float]
    tile: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    alignment: dict[str, int] = field(default_factory=dict)
    arrays: int | None = None  # weight-stationary systolic arrays of the tile [1, C, R] (rules.systolic_occupancy)

    def rate(self, precision: str) -> float | None:
        """Peak ops/s for ``precision`` or None if the unit cannot run it."""
        v = self.peak_tops.get(precision)
        return None if v is None else v * 1e12


@dataclass(frozen=True)
class Fallback:
    name: str
    peak_tops: dict[str, float]
    dram_gbs: float
    transfer_gbs: float


@dataclass(frozen=True)
class HardwareProfile:
    name: str
    title: str
    kind: str
    headline_precision: str
    headline_tops: float
    units: tuple[Unit, ...]
    dram_gbs: float
    dram_gb: float | None
    onchip_mb: float | None
    activations_onchip: bool
    lanes: int
    compute_units: int
    launch_overhead_us: float
    host_link_gbs: float | None
    host_op_us: float | None = None
    interconnect: dict = field(default_factory=dict)  # {gbs, latency_us}: tensor-parallel collectives (dnnperf.llm.parallel)
    kernel_fixed_us: dict[str, float] = field(default_factory=dict)
    call_us: dict[str, float] = field(default_factory=dict)  # {fixed, per_input, per_output}: rules.call_time
    subnormal_ns: dict[str, float] = field(default_factory=dict)
    epilogue_ns: dict[str, float] = field(default_factory=dict)
    loop_ns: dict[str, float] = field(default_factory=dict)
    sustained_clock_fraction: float = 1.0
    sustained_clock_given: bool = False
    gpu: dict = field(default_factory=dict)
    efficiency: dict[str, float] = field(default_factory=dict)
    op_efficiency: dict[str, float] = field(default_factory=dict)
    int8_operands: dict[str, float] = field(default_factory=dict)
    int8_depthwise_share: float | None = None  # None: not calibrated (the float pace stands)
    int8_depthwise_generic: tuple[int, float] | None = None  # (channel multiple, generic kernel's share)
    matrix_m_efficiency: tuple[tuple[int, float], ...] = ()
    matrix_nk_efficiency: tuple[tuple[int, float], ...] = ()
    shape_efficiency: dict[str, tuple[tuple[int, float], ...]] = field(default_factory=dict)
    cpu_layout: tuple[int, int, int, int] | None = None  # (block, grouped_min_width, channel_alignment, pool_alignment)
    ops_per_item: float = 1.0
    memory_overlap: float = 1.0
    product_overlap: float | None = None
    conv_weight_exposure: float = 0.0
    dram_measured_mb: float | None = None
    onchip_gbs: float | None = None
    bandwidth_curve: tuple[tuple[float, float], ...] = ()  # (working set MB, GB/s), ascending
    unoptimized_ops: tuple[str, ...] = ()
    unoptimized_efficiency: float = 0.1
    accelerator_families: tuple[str, ...] | None = None
    fallback: Fallback | None = None
    price_per_hour: float | None = None
    price_source: str = ""
    sources: dict[str, str] = field(default_factory=dict)
    unverified: tuple[str, ...] = ()
    notes: str = ""
    validation: tuple[dict, ...] = ()
    measured: dict = field(default_factory=dict)  # how a calibrated profile was measured (threads...)
    assumed: tuple[str, ...] = ()  # defaults applied for what the profile leaves out (kind_defaults.yaml)
    path: str = ""

    def unit_named(self, name: str) -> Unit | None:
        """The unit called ``name`` (None when the profile has none: a host or fallback layer)."""
        return next((u for u in self.units if u.name == name), None)

    def kernel_us(self, family: str) -> float:
        """Time per kernel of ``family`` besides its work: the dispatch, plus the family's fixed time
        on a calibrated CPU (``kernel_fixed_us``)."""
        return self.launch_overhead_us + self.kernel_fixed_us.get(family, 0.0)

    def assumed_note(self) -> str:
        """The one line that says which figures the kind defaults supplied ('' when the profile gives all)."""
        if not self.assumed:
            return ""
        return (f"profile {self.name} does not give {'; '.join(self.assumed)}: assumed (defaults: "
                "dnnperf/data/kind_defaults.yaml, gpu_generations.yaml)")

    def validation_summary(self) -> str:
        """One line: "fp16: median error 1.13x over 173 published kernels, 65% within 1.25x; ..." or
        "not validated"."""
        if not self.validation:
            return "not validated"
        return "; ".join(f"{v['precision']}: median error {v['median_error']:.2f}x over "
                         + (f"{v['kernels']} published kernels" if "kernels" in v else
                            f"{v['networks']} published whole-network timings ({v['sheet']})")
                         + f", {v['within_1_25'] * 100:.0f}% within 1.25x" for v in self.validation)

    @property
    def headline_rate(self) -> float:
        return self.headline_tops * 1e12

    @property
    def dram_bps(self) -> float:
        return self.dram_gbs * 1e9

    def ridge_point(self, precision: str) -> float:
        """Ops per byte above which the best unit for ``precision`` is compute-bound."""
        best = max((u.rate(precision) or 0.0) for u in self.units)
        return best / self.dram_bps if best else 0.0

    def best_rate(self, precision: str, matrix: bool) -> float:
        rates = [u.rate(precision) or 0.0 for u in self.units if ("matrix" if matrix else "vector") in u.serves]
        return max(rates, default=0.0)

    def with_bandwidth(self, factor: float) -> "HardwareProfile":
        """What-if: every memory bandwidth figure (DRAM, on-chip, a calibrated curve) ``factor`` times."""
        from dataclasses import replace

        return replace(self, dram_gbs=self.dram_gbs * factor,
                       onchip_gbs=self.onchip_gbs * factor if self.onchip_gbs else self.onchip_gbs,
                       bandwidth_curve=tuple((mb, gbs * factor) for mb, gbs in self.bandwidth_curve))

    def with_overrides(self, **kw) -> "HardwareProfile":
        from dataclasses import replace

        return replace(self, **kw)


# --------------------------------------------------------------------------------------------
# YAML


def safe_yaml(text: str, what: str):
    """yaml.safe_load with an alias budget (an alias bomb is rejected, not expanded). The text of a
    file the package ships is not parsed again: its parsed copy is used (``dnnperf.parsed``)."""
    from dnnperf.parsed import lookup

    data = lookup(text)
    return parse_yaml(text, what) if data is None else data


def parse_yaml(text: str, what: str):
    """``safe_yaml`` without the parsed copies: always the YAML parser."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: same rules, faster
    try:
        aliases = 0
        # an alias is written '*name': text without a '*' has none, and needs no second pass
        for ev in yaml.parse(text, Loader=loader) if "*" in text else ():
            if isinstance(ev, yaml.AliasEvent):
                aliases += 1
                if aliases > 20:
                    raise DnnperfError(f"{what}: too many YAML aliases (alias bomb?) — write the values out")
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader (SafeLoader or its C twin)
    except DnnperfError:
        raise
    except yaml.constructor.ConstructorError as exc:
        raise DnnperfError(f"{what}: YAML tag not allowed ({_first_line(exc)}) — profiles are plain data") from None
    except yaml.YAMLError as exc:
        example = " (`dnnperf hw show v100` prints a working profile)" if what.startswith("profile") else ""
        raise DnnperfError(f"{what}: not valid YAML ({_first_line(exc)}) — fix the syntax at that line{example}") from None
    except RecursionError:
        raise DnnperfError(f"{what}: YAML nested too deeply") from None


def _first_line(exc) -> str:
    return " ".join(str(exc).split())[:160]


def _num(v, where: str, *, positive=True, allow_zero=False, upper=None) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise DnnperfError(f"{where}: expected a number, got {type(v).__name__} {v!r}")
    f = float(v)
    if math.isnan(f) or math.isinf(f):
        raise DnnperfError(f"{where}: must be a finite number, got {v!r}")
    if positive and (f < 0 or (f == 0 and not allow_zero)):
        raise DnnperfError(f"{where}: must be {'>= 0' if allow_zero else '> 0'}, got {v!r}")
    if upper is not None and f > upper:
        raise DnnperfError(f"{where}: must be <= {upper}, got {v!r}")
    return f


def _whole(v, where: str) -> int:
    """A count of things (SMs, cores, lanes): a whole number >= 1 (0.5 SMs used to divide by zero)."""
    f = _num(v, where)
    if f != int(f) or f < 1:
        raise DnnperfError(f"{where}: a whole number >= 1, got {v!r}")
    return int(f)


def _map(v, where: str) -> dict:
    if not isinstance(v, dict):
        raise DnnperfError(f"{where}: expected a mapping, got {type(v).__name__}")
    return v


def _str(v, where: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise DnnperfError(f"{where}: expected a non-empty string, got {v!r}")
    return v


def _prec_map(v, where: str) -> dict[str, float]:
    out = {}
    for k, x in _map(v, where).items():
        if k not in PRECISIONS:
            raise DnnperfError(f"{where}.{k}: unknown precision (use one of {', '.join(PRECISIONS)})")
        out[k] = _num(x, f"{where}.{k}")
    return out


def _check_keys(d: dict, allowed, where: str) -> None:
    for k in d:
        if k not in allowed:
            close = difflib.get_close_matches(str(k), list(allowed), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (keys here: {', '.join(sorted(map(str, allowed)))})"
            raise DnnperfError(f"{where}: unknown key '{k}'{hint} — see `dnnperf hw schema`")


def profile_from_dict(d, where: str = "profile") -> HardwareProfile:
    """Validate a parsed YAML document and build the profile; every error names the field."""
    if d is None:  # an empty file (or only comments)
        raise DnnperfError(f"{where}: the profile is empty — a profile is a YAML mapping of fields (name, kind, "
                           "headline, ...): start from `dnnperf hw show v100`")
    d = _map(d, where)
    _check_keys(d, SCHEMA, where)
    for k, (_, required, what) in SCHEMA.items():
        if required and k not in d:
            # what the key holds, where the schema says it in a few words (headline's example)
            hint = f": {what}" if len(what) <= 80 else ""
            raise DnnperfError(f"{where}: missing required key '{k}'{hint} (see `dnnperf hw schema`)")
    if d["schema"] != SCHEMA_ID:
        raise DnnperfError(f"{where}.schema: expected '{SCHEMA_ID}', got {d['schema']!r}")
    kind = _str(d["kind"], f"{where}.kind")
    if kind not in KINDS:
        raise DnnperfError(f"{where}.kind: must be one of {', '.join(KINDS)}, got {kind!r}")
    head = _map(d["headline"], f"{where}.headline")
    _check_keys(head, ("precision", "tops"), f"{where}.headline")
    hp = head.get("precision")
    if hp not in PRECISIONS:
        raise DnnperfError(f"{where}.headline.precision: must be one of {', '.join(PRECISIONS)}, got {hp!r}")
    htops = _num(head.get("tops"), f"{where}.headline.tops")
    units_raw = d["units"]
    if not isinstance(units_raw, list) or not units_raw:
        raise DnnperfError(f"{where}.units: expected a non-empty list of units")
    units = []
    for i, u in enumerate(units_raw):
        w = f"{where}.units[{i}]"
        u = _map(u, w)
        _check_keys(u, ("name", "serves", "peak_tops", "tile", "alignment", "arrays", "notes"), w)
        serves = u.get("serves")
        if not isinstance(serves, list) or not serves or any(s not in SERVES for s in serves):
            raise DnnperfError(f"{w}.serves: a list drawn from {list(SERVES)}, got {serves!r}")
        peaks = _prec_map(u.get("peak_tops"), f"{w}.peak_tops")
        if not peaks:
            raise DnnperfError(f"{w}.peak_tops: at least one precision is needed")
        tiles = {}
        for p, t in _map(u.get("tile", {}) or {}, f"{w}.tile").items():
            if p not in PRECISIONS:
                raise DnnperfError(f"{w}.tile.{p}: unknown precision")
            if not isinstance(t, list) or len(t) != 3:
                raise DnnperfError(f"{w}.tile.{p}: expected [M, N, K], got {t!r}")
            dims = tuple(int(_num(x, f"{w}.tile.{p}")) for x in t)
            if any(x < 1 or x > 65536 for x in dims):
                raise DnnperfError(f"{w}.tile.{p}: each dim must be 1..65536, got {t!r}")
            tiles[p] = dims
        align = {}
        for p, a in _map(u.get("alignment", {}) or {}, f"{w}.alignment").items():
            if p not in PRECISIONS:
                raise DnnperfError(f"{w}.alignment.{p}: unknown precision")
            align[p] = int(_num(a, f"{w}.alignment.{p}", upper=4096))
        arrays = None
        if u.get("arrays") is not None:
            arrays = _whole(u["arrays"], f"{w}.arrays")
            if "matrix" not in serves or any(t[0] != 1 for t in tiles.values()) or not tiles:
                raise DnnperfError(f"{w}.arrays: only a unit serving 'matrix' with weight-stationary tiles [1, C, R] is "
                                   "made of systolic arrays; drop 'arrays' or give every tile M = 1")
        units.append(Unit(_str(u.get("name"), f"{w}.name"), tuple(serves), peaks, tiles, align, arrays))
    if not any("vector" in u.serves for u in units):
        raise DnnperfError(f"{where}.units: one unit must serve 'vector' (elementwise work needs somewhere to run)")
    mem = _map(d["memory"], f"{where}.memory")
    _check_keys(mem, ("dram_gbs", "dram_gb", "onchip_mb", "activations_onchip", "onchip_gbs", "bandwidth_curve",
                      "dram_measured_mb"),
                f"{where}.memory")
    curve = tuple(sorted((_num(k, f"{where}.memory.bandwidth_curve key"), _num(v, f"{where}.memory.bandwidth_curve.{k}"))
                         for k, v in _map(mem.get("bandwidth_curve", {}) or {}, f"{where}.memory.bandwidth_curve").items()))
    if "dram_gbs" not in mem:
        raise DnnperfError(f"{where}.memory: missing 'dram_gbs'")
    par = _map(d["parallelism"], f"{where}.parallelism")
    _check_keys(par, ("lanes", "compute_units", "ops_per_item", "notes"), f"{where}.parallelism")
    if "compute_units" not in par or ("lanes" not in par and kind != "gpu"):
        how = {"cpu": " (cores; lanes = cores x fp32 vector width x FMA units: 64 AVX2 cores with 2 FMA units "
                      "= 64 x 8 x 2 = 1024)",
               "gpu": " (SMs or compute units; lanes default to SMs x the generation's resident threads)"}
        raise DnnperfError(f"{where}.parallelism: needs 'lanes' and 'compute_units'{how.get(kind, '')}")
    units_n = _whole(par["compute_units"], f"{where}.parallelism.compute_units")
    assumed = []
    if "lanes" in par:
        lanes = _whole(par["lanes"], f"{where}.parallelism.lanes")
    else:
        lanes, how = _gpu_lanes(d, units_n, where)
        assumed.append(f"parallelism.lanes {lanes} ({how})")
    defaults = kind_defaults()[kind]  # every kind has its entry (a test checks)
    launch = d.get("launch_overhead_us")
    if launch is None:
        launch = defaults["launch_overhead_us"]
        assumed.append(f"launch_overhead_us {launch} (the {kind} default)")
    if "host_link_gbs" in d:
        host = d["host_link_gbs"]
    else:
        host = defaults.get("host_link_gbs")
        assumed.append("host_link_gbs none (inputs already in device memory)" if host is None
                       else f"host_link_gbs {host} (the {kind} default)")
    fb = None
    if d.get("fallback") is not None:
        f = _map(d["fallback"], f"{where}.fallback")
        _check_keys(f, ("name", "peak_tops", "dram_gbs", "transfer_gbs"), f"{where}.fallback")
        fb = Fallback(_str(f.get("name"), f"{where}.fallback.name"), _prec_map(f.get("peak_tops"), f"{where}.fallback.peak_tops"),
                      _num(f.get("dram_gbs"), f"{where}.fallback.dram_gbs"),
                      _num(f.get("transfer_gbs"), f"{where}.fallback.transfer_gbs"))
    fams = d.get("accelerator_families")
    if fams is not None:
        if not isinstance(fams, list) or any(x not in FAMILIES for x in fams):
            raise DnnperfError(f"{where}.accelerator_families: a list drawn from {', '.join(FAMILIES)}")
        if fb is None:
            raise DnnperfError(f"{where}.accelerator_families needs a 'fallback' unit for the other families")
    eff = {}
    for k, v in _map(d.get("efficiency", {}) or {}, f"{where}.efficiency").items():
        if k not in FAMILIES:
            raise DnnperfError(f"{where}.efficiency.{k}: unknown op family (use {', '.join(FAMILIES)})")
        eff[k] = _num(v, f"{where}.efficiency.{k}", upper=1.0)
    fixed = {}
    for k, v in _map(d.get("kernel_fixed_us", {}) or {}, f"{where}.kernel_fixed_us").items():
        if k not in FAMILIES:
            raise DnnperfError(f"{where}.kernel_fixed_us.{k}: unknown op family (use {', '.join(FAMILIES)})")
        fixed[k] = _num(v, f"{where}.kernel_fixed_us.{k}", allow_zero=True)
    if fixed and kind == "gpu":  # the GPU steps do not read it: a GPU kernel's minimum time is the library's
        raise DnnperfError(f"{where}.kernel_fixed_us: not for kind gpu — a GPU kernel's minimum time is "
                           "gpu.min_kernel_us / gpu.graph_kernel_us")
    call = {}
    for k, v in _map(d.get("call_us", {}) or {}, f"{where}.call_us").items():
        if k not in CALL_KEYS:
            raise DnnperfError(f"{where}.call_us.{k}: use one of {', '.join(CALL_KEYS)}")
        call[k] = _num(v, f"{where}.call_us.{k}", allow_zero=True)
    if call and kind != "cpu":
        raise DnnperfError(f"{where}.call_us: for kind cpu only (an accelerator's host side is its launch overhead)")
    subnormal = {}
    for k, v in _map(d.get("subnormal_ns", {}) or {}, f"{where}.subnormal_ns").items():
        if k not in ("softmax", "matmul"):
            raise DnnperfError(f"{where}.subnormal_ns.{k}: use 'softmax' or 'matmul'")
        subnormal[k] = _num(v, f"{where}.subnormal_ns.{k}", allow_zero=True)
    epilogue = {}
    for k, v in _map(d.get("epilogue_ns", {}) or {}, f"{where}.epilogue_ns").items():
        if k not in EPILOGUE_ACTIVATIONS:
            raise DnnperfError(f"{where}.epilogue_ns.{k}: use one of {', '.join(EPILOGUE_ACTIVATIONS)}")
        epilogue[k] = _num(v, f"{where}.epilogue_ns.{k}", allow_zero=True)
    if epilogue and kind == "gpu":
        raise DnnperfError(f"{where}.epilogue_ns: only for CPU runtimes (a GPU library fuses the activation into "
                           "its kernel's epilogue)")
    loop = {}
    for k, v in _map(d.get("loop_ns", {}) or {}, f"{where}.loop_ns").items():
        if k not in LOOP_KERNELS:
            raise DnnperfError(f"{where}.loop_ns.{k}: use one of {', '.join(LOOP_KERNELS)}")
        loop[k] = _num(v, f"{where}.loop_ns.{k}")
    if loop and kind == "gpu":
        raise DnnperfError(f"{where}.loop_ns: only for CPU runtimes")
    int8_ops = {}
    for k, v in _map(d.get("int8_operands", {}) or {}, f"{where}.int8_operands").items():
        if k not in INT8_OPERANDS:
            raise DnnperfError(f"{where}.int8_operands.{k}: use one of {', '.join(INT8_OPERANDS)}")
        int8_ops[k] = _num(v, f"{where}.int8_operands.{k}", upper=1.0)
    if int8_ops and kind == "gpu":
        raise DnnperfError(f"{where}.int8_operands: only for CPU runtimes (GPU int8 kernels take signed operands)")
    dw8 = None if d.get("int8_depthwise_share") is None else _num(
        d["int8_depthwise_share"], f"{where}.int8_depthwise_share", upper=1.0)
    if "int8_depthwise_share" in d and kind == "gpu":
        raise DnnperfError(f"{where}.int8_depthwise_share: only for CPU runtimes")
    dw8_generic = None
    if d.get("int8_depthwise_generic") is not None:
        gen = _map(d["int8_depthwise_generic"], f"{where}.int8_depthwise_generic")
        _check_keys(gen, ("channel_multiple", "share"), f"{where}.int8_depthwise_generic")
        if "channel_multiple" not in gen or "share" not in gen:
            raise DnnperfError(f"{where}.int8_depthwise_generic: give both channel_multiple and share")
        multiple = _num(gen["channel_multiple"], f"{where}.int8_depthwise_generic.channel_multiple")
        if multiple < 1 or multiple != int(multiple):
            raise DnnperfError(f"{where}.int8_depthwise_generic.channel_multiple: a whole number of channels, "
                               f"got {gen['channel_multiple']!r}")
        dw8_generic = (int(multiple), _num(gen["share"], f"{where}.int8_depthwise_generic.share", upper=1.0))
        if kind == "gpu":
            raise DnnperfError(f"{where}.int8_depthwise_generic: only for CPU runtimes")
    op_eff = {}
    for k, v in _map(d.get("op_efficiency", {}) or {}, f"{where}.op_efficiency").items():
        op_eff[str(k)] = _num(v, f"{where}.op_efficiency.{k}", upper=1.0)
    m_eff, nk_eff = [], []
    for field_name, out in (("matrix_m_efficiency", m_eff), ("matrix_nk_efficiency", nk_eff)):
        for k, v in _map(d.get(field_name, {}) or {}, f"{where}.{field_name}").items():
            out.append((int(_num(k, f"{where}.{field_name} key")), _num(v, f"{where}.{field_name}.{k}", upper=1.0)))
    shape_eff = {}
    for k, pts in _map(d.get("shape_efficiency", {}) or {}, f"{where}.shape_efficiency").items():
        if not re.fullmatch(r"depthwise_conv\.k\d+s\d+|grouped_conv\.w\d+(s\d+)?|(depthwise_)?conv\.unblocked_k\d+|"
                            r"depthwise_conv\.unblocked_k\d+s2|conv\.k1s2|conv\.k[13]|"
                            r"conv\.rgb(_k1)?|pool\.unblocked|norm\.row|movement\.serial|layout\.reorder", str(k)):
            raise DnnperfError(f"{where}.shape_efficiency.{k}: use 'depthwise_conv.k<kernel>s<stride>', "
                               "'grouped_conv.w<channels per group>[s<stride>]', '[depthwise_]conv.unblocked_k<kernel>', "
                               "'depthwise_conv.unblocked_k<kernel>s2', "
                               "'conv.k1', 'conv.k1s2', 'conv.k3', 'conv.rgb', 'conv.rgb_k1', 'pool.unblocked', 'norm.row', "
                               "'movement.serial' or 'layout.reorder'")
        shape_eff[str(k)] = tuple(sorted(
            (int(_num(x, f"{where}.shape_efficiency.{k} key")), _num(v, f"{where}.shape_efficiency.{k}.{x}", upper=1.0))
            for x, v in _map(pts, f"{where}.shape_efficiency.{k}").items()))
    cpu_layout = None
    if d.get("cpu_layout") is not None:
        lay = _map(d["cpu_layout"], f"{where}.cpu_layout")
        _check_keys(lay, ("block", "grouped_min_width", "channel_alignment", "pool_alignment"), f"{where}.cpu_layout")
        block = int(_num(lay.get("block"), f"{where}.cpu_layout.block"))
        cpu_layout = (block, int(_num(lay.get("grouped_min_width"), f"{where}.cpu_layout.grouped_min_width")),
                      int(_num(lay.get("channel_alignment", block), f"{where}.cpu_layout.channel_alignment")),
                      int(_num(lay.get("pool_alignment", block), f"{where}.cpu_layout.pool_alignment")))
    unopt = d.get("unoptimized_ops", []) or []
    if not isinstance(unopt, list) or any(not isinstance(x, str) for x in unopt):
        raise DnnperfError(f"{where}.unoptimized_ops: a list of op type names")
    if kind == "gpu":
        g = _gpu_section(d.get("gpu"), kind, where)
        clock = _gpu_clock_figures(d, g, units, units_n)
        _gpu_clock_check(g, clock, where)
        _gpu_tensor_check(g, clock, units, where)
        assumed += _gpu_assumed(d, g, clock)
    if d.get("sources") is None:
        sources = {}
        assumed.append("sources (none: its figures are taken as given, unchecked)")
    else:
        sources = _map(d["sources"], f"{where}.sources")
    unverified = d.get("unverified", []) or []
    if not isinstance(unverified, list):
        raise DnnperfError(f"{where}.unverified: a list of field names")
    price = d.get("price_per_hour")
    return HardwareProfile(
        name=_str(d["name"], f"{where}.name"),
        title=_str(d["title"], f"{where}.title"),
        kind=kind,
        headline_precision=hp,
        headline_tops=htops,
        units=tuple(units),
        dram_gbs=_num(mem["dram_gbs"], f"{where}.memory.dram_gbs"),
        dram_gb=None if mem.get("dram_gb") is None else _num(mem["dram_gb"], f"{where}.memory.dram_gb"),
        onchip_mb=None if mem.get("onchip_mb") is None else _num(mem["onchip_mb"], f"{where}.memory.onchip_mb"),
        activations_onchip=bool(mem.get("activations_onchip", False)),
        lanes=lanes,
        compute_units=units_n,
        launch_overhead_us=_num(launch, f"{where}.launch_overhead_us", allow_zero=True),
        host_link_gbs=None if host is None else _num(host, f"{where}.host_link_gbs"),
        host_op_us=None if d.get("host_op_us") is None else _num(d["host_op_us"], f"{where}.host_op_us", allow_zero=True),
        interconnect=_interconnect(d.get("interconnect"), where),
        kernel_fixed_us=fixed,
        call_us=call,
        subnormal_ns=subnormal,
        epilogue_ns=epilogue,
        loop_ns=loop,
        sustained_clock_fraction=_num(d.get("sustained_clock_fraction", 1.0), f"{where}.sustained_clock_fraction", upper=1.0),
        sustained_clock_given="sustained_clock_fraction" in d,
        gpu=_gpu_section(d.get("gpu"), kind, where),
        efficiency=eff,
        op_efficiency=op_eff,
        int8_operands=int8_ops,
        int8_depthwise_share=dw8,
        int8_depthwise_generic=dw8_generic,
        matrix_m_efficiency=tuple(sorted(m_eff)),
        matrix_nk_efficiency=tuple(sorted(nk_eff)),
        shape_efficiency=shape_eff,
        cpu_layout=cpu_layout,
        ops_per_item=_num(par.get("ops_per_item", 1), f"{where}.parallelism.ops_per_item"),
        memory_overlap=_num(d.get("memory_overlap", 1.0), f"{where}.memory_overlap", allow_zero=True, upper=1.0),
        product_overlap=None if d.get("product_overlap") is None else _num(
            d["product_overlap"], f"{where}.product_overlap", allow_zero=True, upper=1.0),
        conv_weight_exposure=_num(d.get("conv_weight_exposure", 0.0), f"{where}.conv_weight_exposure", allow_zero=True,
                                  upper=1.0),
        dram_measured_mb=None if mem.get("dram_measured_mb") is None else _num(mem["dram_measured_mb"],
                                                                           f"{where}.memory.dram_measured_mb"),
        onchip_gbs=None if mem.get("onchip_gbs") is None else _num(mem["onchip_gbs"], f"{where}.memory.onchip_gbs"),
        bandwidth_curve=curve,
        unoptimized_ops=tuple(unopt),
        unoptimized_efficiency=_num(d.get("unoptimized_efficiency", 0.1), f"{where}.unoptimized_efficiency", upper=1.0),
        accelerator_families=None if fams is None else tuple(fams),
        fallback=fb,
        price_per_hour=None if price is None else _num(price, f"{where}.price_per_hour"),
        price_source=str(d.get("price_source", "")),
        sources={str(k): str(v) for k, v in sources.items()},
        unverified=tuple(str(x) for x in unverified),
        notes=str(d.get("notes", "")),
        validation=_validation(d.get("validation"), where),
        measured=dict(d["measured"]) if isinstance(d.get("measured"), dict) else {},
        assumed=tuple(assumed),
    )


def _validation(v, where: str) -> tuple[dict, ...]:
    if v is None:
        return ()
    if not isinstance(v, list):
        raise DnnperfError(f"{where}.validation: expected a list of records, got {type(v).__name__}")
    out = []
    for i, rec in enumerate(v):
        w = f"{where}.validation[{i}]"
        rec = _map(rec, w)
        _check_keys(rec, VALIDATION_KEYS + ("networks", "notes"), w)
        counts = [k for k in VALIDATION_COUNTS if k in rec]
        missing = [k if k != "kernels" else "kernels (or networks)" for k in VALIDATION_KEYS
                   if k not in rec and not (k == "kernels" and counts)]
        if missing:
            raise DnnperfError(f"{w}: missing {', '.join(missing)} (bench/published.py --records and bench/trt_bert.py --records print complete records)")
        if len(counts) > 1:
            raise DnnperfError(f"{w}: give kernels or networks, not both (a record counts one kind of measurement)")
        r = {k: str(rec[k]) for k in ("data", "sheet", "precision")}
        r[counts[0]] = int(_num(rec[counts[0]], f"{w}.{counts[0]}"))
        r["median_error"] = _num(rec["median_error"], f"{w}.median_error")
        for k in ("within_1_25", "within_2"):
            r[k] = _num(rec[k], f"{w}.{k}", allow_zero=True, upper=1.0)
        r["rho"] = _num(rec["rho"], f"{w}.rho", positive=False, upper=1.0)
        out.append(r)
    return tuple(out)


def _interconnect(d, where: str) -> dict:
    """A profile's ``interconnect`` section: {gbs, latency_us, devices, network_gbs}, each optional, each a
    positive number (``devices`` a whole one, at least 2)."""
    if d is None:
        return {}
    ic = _map(d, f"{where}.interconnect")
    keys = ("gbs", "latency_us", "devices", "network_gbs")
    _check_keys(ic, keys, f"{where}.interconnect")
    out = {k: _num(ic[k], f"{where}.interconnect.{k}") for k in keys if ic.get(k) is not None}
    if "devices" in out:
        n = out["devices"]
        if n != int(n) or n < 2:
            raise DnnperfError(f"{where}.interconnect.devices: expected a whole number of devices of at least 2 "
                               f"(how many the link joins, e.g. 8 on an HGX board), got {ic['devices']!r}")
        out["devices"] = int(n)
    return out


@lru_cache(maxsize=1)
def kind_defaults() -> dict:
    """What a profile may leave out, by kind (``dnnperf/data/kind_defaults.yaml``)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "kind_defaults.yaml")
    with open(path, encoding="utf-8") as fh:
        return safe_yaml(fh.read(), "kind defaults")


def _gpu_lanes(d: dict, sms: int, where: str) -> tuple[int, str]:
    """A GPU profile without parallelism.lanes: SMs x its generation's resident threads per SM (the
    profile's own gpu.threads_per_sm when it gives one)."""
    from dnnperf import gpu

    g = d.get("gpu") if isinstance(d.get("gpu"), dict) else {}
    gen = g.get("generation") or gpu.infer_generation(str(d.get("title", "")), str(d.get("name", "")))
    if "threads_per_sm" in g:
        _gpu_field("threads_per_sm", g["threads_per_sm"], f"{where}.gpu.threads_per_sm")  # before the section's own check
        per_sm = int(g["threads_per_sm"])
    else:
        part = gpu.sm_part(gen, str(d.get("title", "")), str(d.get("name", "")))
        per_sm = gpu.library(gen if gen in gpu.GENERATIONS else None, part=part).threads_per_sm
        if part in ("ga10x", "gb20x"):  # the parts whose resident threads differ from their generation's
            what = {"ga10x": "an Ampere GA10x part (compute capability 8.6/8.7)",
                    "gb20x": "a Blackwell GB20x part (compute capability 12.x)"}[part]
            return sms * per_sm, f"{sms} SMs x {per_sm} resident threads, {what}"
    return sms * per_sm, f"{sms} SMs x {per_sm} resident threads, {gen or 'default'} generation"


def _gpu_assumed(d: dict, g: dict, clock: tuple) -> list[str]:
    """What a GPU profile leaves to the library table: the generation (named by its title or the
    defaults), the clock (its entry, where its figures give none) and the board power (without it the
    boost clock is taken as held under any load). ``g``: the validated gpu section; ``clock``:
    ``_gpu_clock_figures``, whose generation is the one the title or name implies where ``g`` names none."""
    from dnnperf import gpu

    out = []
    if not g.get("generation"):
        gen = clock[0]
        by = "title" if gen and gpu.infer_generation(str(d.get("title", "")), "") == gen else "name"
        out.append(f"gpu.generation {gen} (named by its {by})" if gen else
                   "gpu.generation (none recognised in its title: the table's default entry)")
    note = _gpu_clock_assumed(g, clock)
    if note:  # '' when the profile's figures give the clock
        out.append(note)
    if not g.get("tdp_w") and "sustained_clock_fraction" not in d:
        out.append("gpu.tdp_w (none: the boost clock is taken as held under load; a low-power board, a 70 W T4, "
                   "throttles large kernels well below it)")
    return out


def _gpu_clock_figures(d: dict, g: dict, units: list, sms: int) -> tuple:
    """(generation, its library, the CUDA cores' fp32 peak in TFLOP/s or 0, SMs) for a GPU profile, as
    ``gpu.clock_source`` reads them: ``g`` the validated gpu section, ``units`` the validated units, ``sms``
    the validated parallelism.compute_units. Built once for the checks and the assumed note."""
    from dnnperf import gpu

    title, name = str(d.get("title", "")), str(d.get("name", ""))
    gen = g.get("generation") or gpu.infer_generation(title, name)
    gen = gen if gen in gpu.GENERATIONS else None
    return gen, gpu.library(gen, g, part=gpu.sm_part(gen, title, name)), gpu.cuda_fp32_tflops(units), sms


def _gpu_clock_assumed(g: dict, clock: tuple) -> str:
    """The assumed-note entry for a GPU profile whose clock is the generation table's (it gives no
    gpu.boost_clock_mhz and no CUDA-core fp32 peak the table's lanes per SM turn into one); ''
    otherwise. ``clock``: ``_gpu_clock_figures``."""
    gen, lib, fp32, _ = clock
    if g.get("boost_clock_mhz") or (fp32 and lib.fp32_lanes_per_sm):
        return ""
    return (f"gpu.boost_clock_mhz {lib.boost_clock_mhz:g} (the {gen or 'default'} entry's clock: "
            + ("no CUDA-core fp32 peak to derive it from" if not fp32 else "the entry derives none from the fp32 peak")
            + "; it sets the K loop's latency, the L2's rate and depthwise kernels' rate)")


# the SM clocks a GPU profile's figures may imply (MHz): NVIDIA's boards run between a Jetson's ~600 MHz
# and a GeForce's ~2.9 GHz; a figure far outside says a count is off (CUDA cores given as SMs)
_CLOCK_RANGE_MHZ = (250.0, 4000.0)


def _gpu_clock_check(g: dict, clock: tuple, where: str) -> None:
    """Refuse a GPU profile whose fp32 peak, SM count and FP32 lanes per SM cannot go together: the
    clock they imply (or, with gpu.boost_clock_mhz, the lanes per SM they imply) is off by far more
    than a spec sheet's rounding. The usual cause: parallelism.compute_units given in CUDA cores.
    ``clock``: ``_gpu_clock_figures``."""
    gen, lib, fp32, sms = clock
    lanes = lib.fp32_lanes_per_sm
    if not (fp32 and lanes):
        return
    hint = (f"parallelism.compute_units counts SMs, not CUDA cores (here CUDA cores / {max(lanes)})"
            + ("; gpu.boost_clock_mhz is in MHz" if g.get("boost_clock_mhz") else "; or give gpu.boost_clock_mhz")
            + "; or give gpu.fp32_lanes_per_sm")
    if g.get("boost_clock_mhz"):
        per_sm = fp32 * 1e12 / (2.0 * sms * float(g["boost_clock_mhz"]) * 1e6)
        if not min(lanes) / 2 <= per_sm <= 2 * max(lanes):
            raise DnnperfError(f"{where}: fp32 {fp32:g} TFLOP/s over {sms} SMs at gpu.boost_clock_mhz "
                               f"{g['boost_clock_mhz']:g} is {per_sm:.1f} FP32 lanes per SM, where the "
                               f"{gen or 'default'} generation's SMs have {' or '.join(map(str, lanes))}: {hint}")
        return
    mhz = [fp32 * 1e12 / (2.0 * sms * n) / 1e6 for n in lanes]
    if not any(_CLOCK_RANGE_MHZ[0] <= c <= _CLOCK_RANGE_MHZ[1] for c in mhz):
        raise DnnperfError(f"{where}: fp32 {fp32:g} TFLOP/s over {sms} SMs of {' or '.join(map(str, lanes))} FP32 "
                           f"lanes implies a {min(mhz, key=lambda c: abs(c - 1500)):,.0f} MHz clock: {hint}")


def _gpu_tensor_check(g: dict, clock: tuple, units: list, where: str) -> None:
    """Refuse a tensor-core fp16 or bf16 figure far above what an SM of the profile's generation does per
    clock (``tensor_fp16_ops_per_sm_clock``, dense) at the profile's own clock: a spec sheet's 2:4-sparse
    figure ("with sparsity", twice the dense rate), which would make every tensor-core estimate twice as
    fast. The clock is the profile's (stated, or from its fp32 peak as ``gpu.clock_source`` reads it), else
    its generation's (Hopper derives none); 1.5x leaves room for a figure quoted at a higher clock than the
    fp32 one. A generation without the figure (none known, or no tensor cores) is not checked. ``clock``:
    ``_gpu_clock_figures``; ``units``: the validated units."""
    from dnnperf import gpu

    gen, lib, fp32, sms = clock
    most = lib.tensor_fp16_ops_per_sm_clock
    if gen is None or most <= 0:
        return
    derived = gpu.fp32_clock(fp32, sms, lib)
    mhz = float(g["boost_clock_mhz"]) if g.get("boost_clock_mhz") else derived[0] if derived else lib.boost_clock_mhz
    for u in units:
        if gpu.unit_class(u.name) != "tensor_cores":
            continue
        for p in ("fp16", "bf16"):
            v = u.peak_tops.get(p)
            if not v:
                continue
            per = v * 1e12 / (sms * mhz * 1e6)
            if per > 1.5 * most:
                raise DnnperfError(
                    f"{where}: units[{u.name}].peak_tops.{p} {v:g} TFLOP/s over {sms} SMs at {mhz:,.0f} MHz "
                    f"is {per:,.0f} ops per SM per clock, {per / most:.1f}x the dense tensor-core rate of the {gen} "
                    f"generation's SMs ({most:,.0f}): a spec sheet's 2:4-sparse figure (\"with sparsity\")? give "
                    "the dense one (half of it); a part that does more per SM: gpu.tensor_fp16_ops_per_sm_clock")


def _gpu_section(v, kind: str, where: str) -> dict:
    """Validate the optional ``gpu:`` section (generation, tdp_w, library overrides)."""
    if v is None:
        return {}
    from dnnperf.gpu import _FIELDS, GENERATIONS

    g = _map(v, f"{where}.gpu")
    if kind != "gpu":
        raise DnnperfError(f"{where}.gpu: only profiles of kind gpu take a gpu section")
    _check_keys(g, ("generation", "tdp_w") + _FIELDS, f"{where}.gpu")
    if "generation" in g and g["generation"] not in GENERATIONS:
        raise DnnperfError(f"{where}.gpu.generation: one of {', '.join(GENERATIONS)}, got {g['generation']!r}")
    for k, v in g.items():
        if k != "generation":
            _gpu_field(k, v, f"{where}.gpu.{k}")
    return dict(g)


# the shape of every library field a profile's gpu section may override (dnnperf/data/gpu_generations.yaml)
_GPU_BOOL = frozenset({"conv_split_k", "reorder_traffic", "conv_bias_kernel", "strided_pointwise_sampled",
                       "engine_fused_attention", "unverified", "integrated"})
_GPU_FRACTION = frozenset({"bandwidth_efficiency", "stream_efficiency", "winograd_fused_efficiency",
                           "conv_efficiency", "misaligned_efficiency", "gemm_misaligned_efficiency",
                           "l2_usable_fraction", "matrix_overlap", "l2_efficiency", "stem_efficiency",
                           "shared_fp32_issue", "ga10x_shared_fp32_issue"})
_GPU_ZERO_OK = frozenset({"matrix_overlap", "gemm_alignment_bytes", "gemv_max", "gemm_word_bytes",
                          "l2_bytes_per_sm_clock", "soc_launch_us", "winograd_fused_tile", "fft_max",
                          "tensor_fp16_ops_per_sm_clock"})
_GPU_INT = frozenset({"split_k_min", "ctas_per_sm_tile", "winograd_tile", "winograd_fused_tile", "threads_per_sm",
                      "ga10x_threads_per_sm", "gb20x_threads_per_sm", "dies", "fft_max", "gemv_max", "rnn_step_kernels",
                      "gemm_alignment_bytes", "gemm_word_bytes"})
_GPU_NUMBER_MAPS = {"feed_ops_per_element": None, "k_step": None, "gemm_k_step": None, "misaligned_vector": None,
                    "sm_watts": None, "reorder_kernels": 16, "library_efficiency": 1.0, "depthwise_sm_macs": None,
                    "grouped_efficiency": 1.0}
_GPU_STRING_LISTS = frozenset({"split_k_precisions", "conv_split_k_precisions", "gemv_precisions"})


def _tile_list(v, where: str) -> None:
    if not isinstance(v, list) or not v or any(
            not isinstance(t, list) or len(t) != 2 or any(isinstance(x, bool) or not isinstance(x, int) or x <= 0 for x in t)
            for t in v):
        raise DnnperfError(f"{where}: a list of [rows, columns] tiles of positive whole numbers, got {v!r}")


def _gpu_field(k: str, v, where: str) -> None:
    """One library field of a gpu section, checked against its shape (one clear line when it is off)."""
    if k in _GPU_BOOL or k in ("winograd", "fft"):
        per = k in ("winograd", "fft")
        vals = _map(v, where).values() if per else (v,)
        if any(not isinstance(x, bool) for x in vals):
            raise DnnperfError(f"{where}: true or false{' per precision' if per else ''}, got {v!r}")
    elif k in _GPU_NUMBER_MAPS:
        for kk, x in _map(v, where).items():
            f = _num(x, f"{where}.{kk}", upper=_GPU_NUMBER_MAPS[k], allow_zero=k == "reorder_kernels")
            if k == "reorder_kernels" and f != int(f):
                raise DnnperfError(f"{where}.{kk}: a whole number of kernels, got {x!r}")
    elif k == "tiles":
        _tile_list(v, where)
    elif k in ("conv_tiles", "gemm_tiles"):
        for kk, x in _map(v, where).items():
            _tile_list(x, f"{where}.{kk}")
    elif k == "tensor_core_precisions":
        for kk, x in _map(v, where).items():
            if not isinstance(x, list) or any(not isinstance(p, str) for p in x):
                raise DnnperfError(f"{where}.{kk}: a list of precision names, got {x!r}")
    elif k == "stem_precision":
        from dnnperf.workload import DTYPE_OF_PRECISION

        if v not in ("", None) and v not in DTYPE_OF_PRECISION:
            raise DnnperfError(f"{where}: a precision name ({', '.join(sorted(DTYPE_OF_PRECISION))}) or empty, got {v!r}")
    elif k in ("fp32_lanes_per_sm", "ga10x_fp32_lanes_per_sm", "gp100_fp32_lanes_per_sm"):
        if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) or x <= 0 for x in v):
            raise DnnperfError(f"{where}: a list of whole numbers of FP32 lanes per SM (e.g. [128]), got {v!r}")
    elif k in _GPU_STRING_LISTS:
        if not isinstance(v, list) or any(not isinstance(p, str) for p in v):
            raise DnnperfError(f"{where}: a list of precision names, got {v!r}")
    else:  # a number
        f = _num(v, where, upper=1.0 if k in _GPU_FRACTION else None, allow_zero=k in _GPU_ZERO_OK)
        if k in _GPU_INT and f != int(f):
            raise DnnperfError(f"{where}: a whole number, got {v!r}")


# --------------------------------------------------------------------------------------------
# lookup


def profiles_dir() -> str:
    """Shipped profiles: inside the wheel (dnnperf/profiles) or the repo's profiles/ folder."""
    here = os.path.dirname(os.path.abspath(__file__))
    inside = os.path.join(here, "profiles")
    if os.path.isdir(inside):
        return inside
    return os.path.join(os.path.dirname(here), "profiles")


def shipped_names() -> list[str]:
    d = profiles_dir()
    if not os.path.isdir(d):
        return []
    return sorted(f[:-5] for f in os.listdir(d) if f.endswith(".yaml"))


# the notes of profiles loaded with kind defaults since the last ``assumed_notes(clear=True)``: every
# command that reads a profile (whatever path the profile took to it) says so once (dnnperf.cli.app)
_ASSUMED: dict[str, str] = {}


def assumed_notes(clear: bool = False) -> list[str]:
    """The ``assumed_note`` of every profile loaded with kind defaults since the last clear."""
    out = list(_ASSUMED.values())
    if clear:
        _ASSUMED.clear()
    return out


def load_profile(spec: str) -> HardwareProfile:
    """``spec`` is a shipped profile name or a path to a YAML file."""
    hw = _find_profile(spec)
    if hw.assumed:
        _ASSUMED[hw.path] = hw.assumed_note()
    return hw


def _find_profile(spec: str) -> HardwareProfile:
    if not spec or not spec.strip():
        raise DnnperfError("empty --hw value: pass a profile name (see `dnnperf hw list`) or a YAML path")
    looks_like_path = spec.endswith((".yaml", ".yml")) or os.sep in spec or "/" in spec
    if looks_like_path:
        return _load_path(spec)
    names = shipped_names()
    if spec in names:
        return _load_path(os.path.join(profiles_dir(), spec + ".yaml"))
    close = difflib.get_close_matches(spec.lower(), names, n=3, cutoff=0.4)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise DnnperfError(f"unknown hardware profile '{spec}': {hint}see `dnnperf hw list`, or pass a YAML path")


@lru_cache(maxsize=64)
def _load_cached(path: str, mtime: float) -> HardwareProfile:
    text = read_text(path, "profile", 10**6)  # (a device that never ends, or a file of another sort: refused)
    data = safe_yaml(text, f"profile '{os.path.basename(path)}'")
    from dataclasses import replace

    return replace(profile_from_dict(data, where=os.path.basename(path)), path=path)


def _load_path(path: str) -> HardwareProfile:
    require_file(path, "profile file", "check the path or use a name from `dnnperf hw list`", "a .yaml file")
    try:
        return _load_cached(os.path.abspath(path), os.path.getmtime(path))
    except UnicodeDecodeError:
        raise DnnperfError(f"profile '{path}' is not UTF-8 text — pass a YAML file") from None


def load_profiles(specs: list[str]) -> list[HardwareProfile]:
    """Expand comma lists and 'all'; keep order, drop duplicates."""
    return [load_profile(s) for s in expand_specs(specs)]


def shipped_profiles(kind: str | None = None, below_tops: float | None = None) -> tuple[HardwareProfile, ...]:
    """The shipped profiles (read once per process: ``_load_cached``); with ``kind`` / ``below_tops``
    only those of that kind quoting fewer TOP/s: a profile's top-level ``kind:`` and ``headline:``
    lines are scanned first and only the candidates are parsed (a file the scan cannot read is
    parsed; a test checks the scan against the parse for every shipped file)."""
    names = shipped_names()
    if kind is not None or below_tops is not None:
        keep = []
        for n in names:
            k, tops = scan_summary(os.path.join(profiles_dir(), n + ".yaml"))
            if (kind is None or k is None or k == kind) and (below_tops is None or tops is None or tops < below_tops):
                keep.append(n)
        names = keep
    # alternatives for advice, not profiles the user chose: their assumptions are not the command's notes
    return tuple(_find_profile(n) for n in names)


_KIND_LINE = re.compile(r"^kind:\s*([A-Za-z0-9_]+)\s*(#.*)?$", re.M)
_HEADLINE_LINE = re.compile(r"^headline:\s*\{[^}\n]*\btops:\s*([0-9][0-9.eE+-]*)\s*[,}]", re.M)


def scan_summary(path: str) -> tuple[str | None, float | None]:
    """(kind, headline TOP/s) read off a profile's top-level lines without parsing it; None for what
    the scan cannot find (the caller then parses the file)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(1_000_001)
    except OSError:
        return None, None
    k = _KIND_LINE.search(text)
    h = _HEADLINE_LINE.search(text)
    try:
        tops = float(h.group(1)) if h else None
    except ValueError:
        tops = None
    return (k.group(1) if k else None), tops


def expand_specs(specs: list[str]) -> list[str]:
    """``['v100,t4', 'all']`` -> profile names and paths as the user wrote them, in order, once each."""
    out: list[str] = []
    for s in specs:
        for part in s.split(","):
            part = part.strip()
            if not part:
                continue
            if part == "all":
                out.extend(shipped_names())
            else:
                out.append(part)
    seen = []
    for s in out:
        if s not in seen:
            seen.append(s)
    if not seen:
        raise DnnperfError("no hardware profile given: pass --hw NAME (see `dnnperf hw list`)")
    return seen
