"""How GPU kernel libraries run matrix work: CTA tiles, waves over the SMs, split-K, the K-loop
latency, tensor-core feed, the convolution algorithm, the clock a board holds. Pure functions on a
``GpuLibrary`` (the generation defaults of ``data/gpu_generations.yaml`` merged with a profile's own
``gpu:`` section); the GPU steps of ``dnnperf.scoring`` call them.

A product (a GEMM, or a convolution as an implicit GEMM: M = batch x output pixels, N = output
channels, K = input channels x window) is cut into tm x tn output tiles; each tile is one CTA that
steps through K. CTAs run on the SMs in waves: the busiest SM runs ceil(CTAs / SMs) of them, in rounds
of the CTAs it holds at once (a last, partial round runs only the CTAs left); partial tiles at the
edges do full-tile work (tile and wave quantization). A CTA takes the longer of its math
(at the SM's rate, reduced when the tile's reuse is too low to feed the unit from L2) and its K loop's
latency (one L2 round trip per step of the MMA instruction's K, hidden only by other CTAs resident
on the same SM). When
there are fewer tiles than SMs and K is long, GEMM libraries split K (split-K) and add the partial
sums. The library picks the tile that finishes first.

Why one module this long: the tile, wave, split-K, K-loop and clock rules feed one plan per
product and must agree on its arithmetic; the library record they read is defined here beside them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from math import ceil, log

_FIELDS = ("tiles", "conv_tiles", "gemm_tiles", "feed_ops_per_element", "library_efficiency", "bandwidth_efficiency",
           "stream_efficiency", "split_k_min", "conv_split_k", "min_kernel_us", "graph_kernel_us",
           "graph_stream_kernel_us", "k_step_cycles", "conv_k_step_cycles", "gemm_k_step",
           "k_step", "ctas_per_sm_tile", "winograd", "winograd_tile", "winograd_fused_tile",
           "winograd_fused_efficiency", "fft", "fft_max", "tensor_core_precisions",
           "conv_efficiency", "misaligned_efficiency", "misaligned_vector", "split_k_precisions",
           "conv_split_k_precisions", "reorder_kernels", "reorder_traffic", "conv_bias_kernel",
           "strided_pointwise_sampled", "engine_fused_attention", "rnn_step_kernels", "sm_watts", "boost_clock_mhz",
           "l2_usable_fraction", "threads_per_sm",
           "ga10x_threads_per_sm", "shared_fp32_issue", "ga10x_shared_fp32_issue",
           "l2_bandwidth_factor", "l2_bytes_per_sm_clock", "l2_efficiency", "gemv_max", "gemv_precisions", "dies",
           "gemm_alignment_bytes", "gemm_misaligned_efficiency", "gemm_word_bytes", "depthwise_sm_macs",
           "grouped_efficiency", "stem_precision", "stem_efficiency", "matrix_overlap", "unverified", "integrated",
           "soc_launch_us", "fp32_lanes_per_sm", "ga10x_fp32_lanes_per_sm", "gb20x_threads_per_sm",
           "gp100_fp32_lanes_per_sm", "tensor_fp16_ops_per_sm_clock")
GENERATIONS = ("kepler", "maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")
# the generation a profile's title implies when it names none
_TITLE_HINTS = (("blackwell", ("b100", "b200", "gb200", "rtx 50", "blackwell")),
                ("hopper", ("h100", "h200", "h800", "gh200", "h20", "hopper")),
                ("ada", ("l4", "l40", "l20", "rtx 40", "ada", "rtx 6000 ada")),
                ("ampere", ("a100", "a800", "a10", "a30", "a40", "a16", "a2", "rtx 30", "rtx a", "ampere", "orin")),
                ("turing", ("t4", "t600", "t1000", "rtx 20", "titan rtx", "turing", "quadro rtx", "gtx 16", "quadro t")),
                ("volta", ("v100", "titan v", "gv100", "volta", "xavier")),
                ("pascal", ("p100", "p40", "p4", "gtx 10", "titan xp", "quadro p", "pascal", "tx2")),
                ("maxwell", ("m40", "m60", "gtx 9", "maxwell", "jetson nano", "tx1", "gtx titan x")),
                ("kepler", ("k80", "k40", "kepler")))


@dataclass(frozen=True)
class GpuLibrary:
    generation: str
    tiles: tuple[tuple[int, int], ...]
    conv_tiles: dict  # unit class -> tiles the convolution library's implicit-GEMM kernels come in
    gemm_tiles: dict  # "unit:precision" -> the only tiles a BLAS product wider than gemv_max comes in
    feed_ops_per_element: dict
    library_efficiency: dict
    bandwidth_efficiency: float
    stream_efficiency: float  # the same for streaming kernels (pointwise, normalisation, softmax, pooling, reduction)
    split_k_min: int
    conv_split_k: bool
    conv_split_k_precisions: tuple  # precisions whose convolution kernels split K (default split_k_precisions)
    min_kernel_us: float
    graph_kernel_us: float
    graph_stream_kernel_us: float  # a kernel's start before its work (the shortest streaming kernel in a graph)
    k_step_cycles: float
    conv_k_step_cycles: float  # the same for convolution kernels (implicit GEMM's gathered loads)
    k_step: dict
    gemm_k_step: dict  # K elements a GEMM kernel's loop step covers (the k_step_cycles kernels; absent: k_step)
    ctas_per_sm_tile: int
    winograd: dict
    winograd_tile: int  # output tile of the non-fused algorithm (transform kernels around batched GEMMs)
    winograd_fused_tile: int  # output tile of the fused kernel (0: none)
    winograd_fused_efficiency: float  # the share of the fused kernel's multiply saving it keeps
    fft: dict  # precision -> whether the library has FFT convolution kernels for it
    fft_max: int  # the largest padded map side its FFT algorithm transforms whole
    tensor_core_precisions: dict
    conv_efficiency: float
    misaligned_efficiency: float
    misaligned_vector: dict
    split_k_precisions: tuple
    reorder_kernels: dict
    reorder_traffic: bool  # the reorders transpose the activations (input, then output), not only weights
    conv_bias_kernel: bool  # frameworks add a library convolution's bias in a second kernel
    strided_pointwise_sampled: bool  # a strided 1 x 1 tensor-core convolution reads only the pixels it samples
    engine_fused_attention: bool  # a fusing engine runs attention as one kernel (TensorRT: Turing and later)
    rnn_step_kernels: int  # kernels per time step of a recurrent layer (cuDNN: the product and the gates)
    threads_per_sm: int  # resident threads per SM: lanes for a profile that gives only its SM count
    shared_fp32_issue: float  # share of the quoted fp32 CUDA-core rate a product's FP32 issue reaches where
    #                           half the FP32 lanes share their slots with INT32 (GA10x, Ada); 1: dedicated
    sm_watts: dict
    boost_clock_mhz: float
    tensor_fp16_ops_per_sm_clock: float  # dense fp16 tensor-core ops an SM does per clock at most (0: unknown)
    l2_usable_fraction: float
    l2_bandwidth_factor: float
    l2_bytes_per_sm_clock: float  # L2 -> SM bytes per SM per clock (0: unknown, l2_bandwidth_factor applies)
    l2_efficiency: float  # the share of that figure kernels reach
    gemv_max: int
    gemv_precisions: tuple
    dies: int
    gemm_alignment_bytes: int
    gemm_misaligned_efficiency: float
    gemm_word_bytes: int  # the narrowest load the misaligned kernels keep that factor at (0: any)
    depthwise_sm_macs: dict  # precision -> a framework depthwise kernel's MACs per SM per cycle
    grouped_efficiency: dict  # precision -> factor on a grouped (not depthwise) convolution's kernel efficiency
    stem_precision: str  # CUDA-core precision of the stem kernels (narrow-input convolutions; "": padded path)
    stem_efficiency: float  # factor on those kernels' efficiency
    matrix_overlap: float
    unverified: bool
    integrated: bool = False  # a GPU on a system-on-chip (Jetson): see soc_launch_us
    soc_launch_us: float = 0.0  # such a GPU's launch, per kernel, that the device waits for (eager, TensorRT)
    fp32_lanes_per_sm: tuple = ()  # the generation's SM designs' FP32 lanes (a profile's clock from its fp32 peak)


@lru_cache(maxsize=1)
def generation_table() -> dict:
    from dnnperf.hardware import safe_yaml

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpu_generations.yaml")
    with open(path, encoding="utf-8") as fh:
        return safe_yaml(fh.read(), "gpu generation table")


def _merge(base: dict, over: dict) -> dict:
    """``over`` on top of ``base``; a map merges key by key (a profile's ``library_efficiency:
    {tensor_cores: 0.8}`` keeps its generation's CUDA-core figure), except an empty one, which says
    "none" (``winograd: {}``: no Winograd in any precision)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = {**out[k], **v} if isinstance(v, dict) and v and isinstance(out.get(k), dict) else v
    return out


# the fields a part takes from its entry's prefixed keys (sm_part): an Ampere GA10x part the ``ga10x_``
# ones, a Blackwell GB20x part the ``gb20x_`` ones, Pascal's GP100 the ``gp100_`` ones
_PART_FIELDS = {"ga10x": ("threads_per_sm", "shared_fp32_issue", "fp32_lanes_per_sm"), "gb20x": ("threads_per_sm",),
                "gp100": ("fp32_lanes_per_sm",)}


def library(generation: str | None, overrides: dict | None = None, part: str = "") -> GpuLibrary:
    """The generation's defaults (``default`` filled in) with a profile's overrides on top; ``part``
    (``sm_part``): an Ampere GA10x, Blackwell GB20x or Pascal GP100 part, which takes the entry's prefixed
    fields (_PART_FIELDS) where the profile does not give the field itself."""
    table = generation_table()
    merged = _merge(table["default"], (table.get(generation) or {}) if generation else {})
    over = {k: v for k, v in (overrides or {}).items() if k in _FIELDS}
    merged = _merge(merged, over)
    if part:
        merged.update({k: merged[f"{part}_{k}"] for k in _PART_FIELDS[part]
                       if f"{part}_{k}" in merged and k not in over})
    return GpuLibrary(
        generation=generation or "default",
        tiles=tuple((int(a), int(b)) for a, b in merged["tiles"]),
        conv_tiles={u: tuple((int(a), int(b)) for a, b in ts) for u, ts in (merged.get("conv_tiles") or {}).items()},
        gemm_tiles={u: tuple((int(a), int(b)) for a, b in ts) for u, ts in (merged.get("gemm_tiles") or {}).items()},
        feed_ops_per_element=dict(merged["feed_ops_per_element"]),
        library_efficiency=dict(merged["library_efficiency"]),
        bandwidth_efficiency=float(merged["bandwidth_efficiency"]),
        stream_efficiency=float(merged["stream_efficiency"]),
        split_k_min=int(merged["split_k_min"]),
        conv_split_k=bool(merged["conv_split_k"]),
        conv_split_k_precisions=tuple(merged["split_k_precisions"] if merged.get("conv_split_k_precisions") is None
                                      else merged["conv_split_k_precisions"]),
        min_kernel_us=float(merged["min_kernel_us"]),
        graph_kernel_us=float(merged["graph_kernel_us"]),
        graph_stream_kernel_us=float(merged["graph_stream_kernel_us"]),
        k_step_cycles=float(merged["k_step_cycles"]),
        conv_k_step_cycles=float(merged["conv_k_step_cycles"]),
        k_step=dict(merged["k_step"]),
        gemm_k_step=dict(merged.get("gemm_k_step") or {}),
        ctas_per_sm_tile=int(merged["ctas_per_sm_tile"]),
        winograd=dict(merged.get("winograd") or {}),
        winograd_tile=int(merged["winograd_tile"]),
        winograd_fused_tile=int(merged.get("winograd_fused_tile") or 0),
        winograd_fused_efficiency=float(merged.get("winograd_fused_efficiency", 1.0)),
        fft=dict(merged.get("fft") or {}),
        fft_max=int(merged.get("fft_max") or 0),
        tensor_core_precisions={k: tuple(v) for k, v in merged["tensor_core_precisions"].items()},
        conv_efficiency=float(merged["conv_efficiency"]),
        misaligned_efficiency=float(merged["misaligned_efficiency"]),
        misaligned_vector=dict(merged["misaligned_vector"]),
        split_k_precisions=tuple(merged["split_k_precisions"]),
        reorder_kernels=dict(merged.get("reorder_kernels") or {}),
        reorder_traffic=bool(merged.get("reorder_traffic", False)),
        conv_bias_kernel=bool(merged.get("conv_bias_kernel", False)),
        strided_pointwise_sampled=bool(merged.get("strided_pointwise_sampled", False)),
        engine_fused_attention=bool(merged.get("engine_fused_attention", True)),
        rnn_step_kernels=max(1, int(merged.get("rnn_step_kernels", 1))),
        threads_per_sm=int(merged.get("threads_per_sm", 2048)),
        shared_fp32_issue=float(merged.get("shared_fp32_issue", 1.0)),
        sm_watts=dict(merged["sm_watts"]),
        boost_clock_mhz=float(merged["boost_clock_mhz"]),
        tensor_fp16_ops_per_sm_clock=float(merged.get("tensor_fp16_ops_per_sm_clock") or 0.0),
        l2_usable_fraction=float(merged["l2_usable_fraction"]),
        l2_bandwidth_factor=float(merged["l2_bandwidth_factor"]),
        l2_bytes_per_sm_clock=float(merged.get("l2_bytes_per_sm_clock") or 0.0),
        l2_efficiency=float(merged.get("l2_efficiency", 1.0)),
        gemv_max=int(merged["gemv_max"]),
        gemv_precisions=tuple(merged["gemv_precisions"]),
        dies=max(1, int(merged.get("dies", 1))),
        gemm_alignment_bytes=int(merged.get("gemm_alignment_bytes") or 0),
        gemm_misaligned_efficiency=float(merged.get("gemm_misaligned_efficiency", 1.0)),
        gemm_word_bytes=int(merged.get("gemm_word_bytes") or 0),
        depthwise_sm_macs=dict(merged.get("depthwise_sm_macs") or {}),
        grouped_efficiency=dict(merged.get("grouped_efficiency") or {}),
        stem_precision=str(merged.get("stem_precision") or ""),
        stem_efficiency=float(merged.get("stem_efficiency", 1.0)),
        matrix_overlap=float(merged["matrix_overlap"]),
        unverified=bool(merged.get("unverified", True)),
        integrated=bool(merged.get("integrated", False)),
        soc_launch_us=float(merged.get("soc_launch_us") or 0.0),
        fp32_lanes_per_sm=tuple(int(x) for x in merged.get("fp32_lanes_per_sm") or ()),
    )


def infer_generation(title: str, name: str) -> str | None:
    """The generation a profile's title (or name) implies: the architecture named outright wins ("RTX 5000
    Ada Generation" is Ada although "rtx 50" reads as Blackwell), then the Turing workstation cards
    ("Quadro RTX 4000" / "5000" are Turing although "rtx 40" / "rtx 50" read as Ada / Blackwell), then the
    product-name hints. The title speaks first; the name only when the title names no generation (a
    profile copied from a40.yaml and retitled "GeForce RTX 2080 Ti" is Turing). None when nothing matches (the
    defaults apply)."""
    return _generation_in(_words(title)) or _generation_in(_words(title, name))


def _generation_in(tokens: list[str]) -> str | None:
    for gen in GENERATIONS:
        if gen in tokens:
            return gen
    for gen, hints in (("turing", ("quadro rtx",)), *_TITLE_HINTS):
        if any(_names(tokens, h) for h in hints):
            return gen
    return None


def _names(tokens: list[str], hint: str) -> bool:
    """Whether ``tokens`` hold ``hint``'s words in a row, its last word starting a token ("rtx 30" names
    "RTX 3090", "a10" names "A10G"). A word's inner letters never match: "CDNA2" is not an A2."""
    words = hint.split()
    n = len(words)
    return any(tokens[i:i + n - 1] == words[:-1] and tokens[i + n - 1].startswith(words[-1])
               for i in range(len(tokens) - n + 1))


# Ampere's GA10x chips (compute capability 8.6 / 8.7: GeForce RTX 30, RTX A2000-A6000, A2, A10, A16,
# A40, Jetson Orin) keep fewer resident threads per SM than GA100 (A100, A800, A30) and share half their FP32
# lanes with INT32: the ampere entry's ga10x_threads_per_sm and ga10x_shared_fp32_issue (_PART_FIELDS)
_GA10X_TOKENS = ("a2", "a10", "a10g", "a10m", "a16", "a40", "orin")
_GA100_TOKENS = ("a100", "a800", "a30", "ga100")


def _words(*texts: str) -> list[str]:
    """``texts`` as lower-case words of letters and digits ("TITAN X (Pascal)", "V100-SXM2")."""
    import re

    return re.sub(r"[^a-z0-9]+", " ", " ".join(texts).lower()).split()


def _title_tokens(title: str, name: str) -> list[str]:
    """The words that name a profile's part: its title's and name's together, or its title's alone where
    the name names another generation than the title (a copied profile retitled, its name left)."""
    words = _words(title)
    own = _generation_in(words)
    if own and _generation_in(_words(name)) not in (None, own):
        return words
    return _words(title, name)


def sm_part(generation: str | None, title: str, name: str) -> str:
    """"ga10x" for an Ampere GA10x part, "gb20x" for a Blackwell GB20x part (GeForce RTX 50, RTX PRO
    Blackwell: compute capability 12.x, 1,536 resident threads per SM where B100 / B200 have 2,048), "gp100"
    for Pascal's GP100 (Tesla P100, Quadro GP100: 64 FP32 lanes per SM where GP10x parts have 128), else ""."""
    import re

    if generation == "ampere" and ampere_ga10x(title, name):
        return "ga10x"
    toks = _title_tokens(title, name)
    if generation == "pascal" and ("p100" in toks or "gp100" in toks):
        return "gp100"
    if generation == "blackwell" and (any(re.fullmatch(r"gb20[2-7]", t) for t in toks)
                                      or any(a == "rtx" and re.fullmatch(r"50\d\d", b) for a, b in zip(toks, toks[1:]))
                                      or {"rtx", "pro"} <= set(toks)):
        return "gb20x"
    return ""


def ampere_ga10x(title: str, name: str) -> bool:
    """Whether an Ampere profile's title or name names a GA10x part (see _GA10X_TOKENS)."""
    import re

    toks = _title_tokens(title, name)
    if any(t in _GA100_TOKENS for t in toks):
        return False
    if any(re.fullmatch(r"ga10[2-7b]", t) for t in toks) or any(t in _GA10X_TOKENS for t in toks):
        return True
    return any(a == "rtx" and re.fullmatch(r"30\d\d|a\d{4}", b) for a, b in zip(toks, toks[1:]))


# a GPU on a system-on-chip, named by a profile's title or name when its gpu section does not say
# (gpu.integrated): NVIDIA's Jetson and DRIVE modules and their Tegra chips
_SOC_TOKENS = ("jetson", "tegra", "igpu", "xavier", "orin", "tx1", "tx2", "drive")


def soc_gpu(title: str, name: str) -> bool:
    """Whether a profile's title or name names a GPU on a system-on-chip (see _SOC_TOKENS)."""
    return any(t in _SOC_TOKENS for t in _title_tokens(title, name))


_LIBS: dict = {}


def library_of(hw) -> GpuLibrary:
    """The library knowledge for a GPU profile: its ``gpu.generation`` (or the one its title names),
    the generation's defaults, its own overrides."""
    key = (hw.name, hw.title, hw.path, repr(sorted(hw.gpu.items())))
    lib = _LIBS.get(key)
    if lib is None:
        g = dict(hw.gpu)
        gen = g.pop("generation", None) or infer_generation(hw.title, hw.name)
        if "integrated" not in g:
            g["integrated"] = soc_gpu(hw.title, hw.name)
        lib = _LIBS[key] = library(gen, g, part=sm_part(gen, hw.title, hw.name))
    return lib


def library_summary(hw) -> str | None:
    """One line for a GPU profile's report and ``hw show``: which generation entry of the library
    table its estimates use, and whether that entry was checked against measured kernels (None for
    other kinds)."""
    if hw.kind != "gpu":
        return None
    lib = library_of(hw)
    own = sorted(k for k in hw.gpu if k not in ("generation", "tdp_w"))
    how = ("unverified: set from its spec sheets and the other generations' measurements" if lib.unverified
           else "checked against measured kernels")
    text = f"{lib.generation} entry of dnnperf/data/gpu_generations.yaml ({how})"
    if lib.integrated and lib.soc_launch_us:
        text += (f"; a GPU on a system-on-chip: {lib.soc_launch_us:g} us a kernel launch the device waits for "
                 "(eager and TensorRT runtimes; not in a CUDA graph)")
    mhz, where = clock_source(hw, lib)
    text += f"; SM clock {mhz:,.0f} MHz ({where})" + power_summary(hw, lib)
    return text + (f"; the profile overrides {', '.join(own)}" if own else "")


def power_summary(hw, lib: GpuLibrary) -> str:
    """'; power: ...' for the library line: the board's watts per SM and the share of the clock each of
    its unit classes holds when a kernel keeps it fully busy (``sustained_clock_fraction``, the power
    model's ``sm_watts``); '' for a profile without ``gpu.tdp_w`` or with its own sustained clock (the
    assumed note and the profile say which)."""
    tdp, sms = hw.gpu.get("tdp_w"), hw.compute_units
    if not tdp or not sms or hw.sustained_clock_given:
        return ""
    parts = []
    for i, cls in enumerate(sorted({unit_class(u.name) for u in hw.units})):
        need = sm_watts_need(lib, cls)
        f = sustained_clock_fraction(lib, tdp, sms, cls)
        parts.append(f"{unit_words(cls)} hold {f:.2f} of the clock (they need {need:g} W per SM)" if i == 0
                     else f"{unit_words(cls)} {f:.2f} ({need:g} W)")
    return f"; power: {tdp:g} W over {sms} SMs ({tdp / sms:.2f} W each): under full load " + ", ".join(parts)


def unit_class(unit_name: str) -> str:
    """Tensor cores (and other matrix-only units) vs the general CUDA cores."""
    return "tensor_cores" if "tensor" in unit_name or "matrix" in unit_name else "cuda_cores"


_UNIT_WORDS = {"cuda_cores": "CUDA cores", "tensor_cores": "tensor cores"}


def unit_words(unit_name: str) -> str:
    """A profile's unit as a text names it: NVIDIA's two in their own words, any other (an AMD
    profile's matrix_cores, stream_processors) by its name with spaces."""
    return _UNIT_WORDS.get(unit_name, unit_name.replace("_", " "))


def clock_hz(hw, lib: GpuLibrary) -> float:
    """The SM clock the per-clock figures (K-loop steps, the L2's bytes, depthwise MACs) run at: the
    profile's ``gpu.boost_clock_mhz``, else its own fp32 peak over its SMs' FP32 lanes, else the
    generation's clock (``clock_source`` says which)."""
    return clock_source(hw, lib)[0] * 1e6


def clock_source(hw, lib: GpuLibrary) -> tuple[float, str]:
    """(MHz, where it comes from) for ``clock_hz``. From the fp32 peak: a spec sheet quotes it at the
    boost clock (CUDA cores x 2 x clock), so peak / (2 x SMs x lanes per SM) is that clock. The lanes per SM
    come from the generation, or from the part its title names where a generation shipped two SM widths
    (``sm_part``: Ampere's GA10x, Pascal's GP100); a list of two widths (a profile's own
    ``gpu.fp32_lanes_per_sm``) takes the one whose clock lies nearest the entry's, the two being 2x apart."""
    if hw.gpu.get("boost_clock_mhz"):
        return float(hw.gpu["boost_clock_mhz"]), "gpu.boost_clock_mhz"
    fp32 = cuda_fp32_tflops(hw.units)
    sms = hw.compute_units or 0
    found = fp32_clock(fp32, sms, lib)
    if found is not None:
        mhz, lanes = found
        return mhz, (f"its fp32 peak: {fp32:g} TFLOP/s / (2 x {sms} SMs x {lanes} FP32 lanes)")
    return lib.boost_clock_mhz, f"the {lib.generation} entry's clock"


def cuda_fp32_tflops(units) -> float:
    """The CUDA cores' fp32 peak of a profile's units (TFLOP/s), 0 when none gives one."""
    return next((float(u.peak_tops["fp32"]) for u in units
                 if unit_class(u.name) == "cuda_cores" and u.peak_tops.get("fp32")), 0.0)


def fp32_clock(fp32_tflops: float, sms: int, lib: GpuLibrary) -> tuple[float, int] | None:
    """(MHz, FP32 lanes per SM) a CUDA-core fp32 peak implies over ``sms`` SMs of the library's widths (the one
    whose clock lies nearest the entry's where it lists two); None without a peak, SMs or widths."""
    if not fp32_tflops or not sms or not lib.fp32_lanes_per_sm:
        return None
    peak = fp32_tflops * 1e12
    lanes = min(lib.fp32_lanes_per_sm, key=lambda n: abs(log(peak / (2.0 * sms * n) / 1e6 / lib.boost_clock_mhz)))
    return peak / (2.0 * sms * lanes) / 1e6, lanes


def l2_bandwidth(hw, lib: GpuLibrary) -> float:
    """Bytes/s the L2 cache delivers to kernels: the profile's ``memory.onchip_gbs``; else, where the
    generation gives its L2's bytes per SM per clock, that x SMs x the clock x ``l2_efficiency`` (an L2
    is sized by the SMs it feeds and runs at their clock, so a board with faster DRAM, an H200 against
    an H100, gets no faster L2); else the DRAM figure x ``l2_bandwidth_factor``."""
    if hw.onchip_gbs:
        return hw.onchip_gbs * 1e9
    if lib.l2_bytes_per_sm_clock and hw.compute_units:
        return lib.l2_bytes_per_sm_clock * hw.compute_units * clock_hz(hw, lib) * lib.l2_efficiency
    return hw.dram_bps * lib.l2_bandwidth_factor


def sm_watts_need(lib: GpuLibrary, unit: str, precision: str = "") -> float:
    """Board watts per SM ``unit`` draws flat out at the boost clock (``sm_watts``: "unit:precision", else
    "unit", else the CUDA cores')."""
    w = lib.sm_watts
    return float(w.get(f"{unit}:{precision}", w.get(unit, w.get("cuda_cores", 3.5))))


def sustained_clock_fraction(lib: GpuLibrary, tdp_w: float | None, sms: int, unit: str, precision: str = "",
                             busy: float = 1.0) -> float:
    """Boards with less power per SM than a unit draws at full load throttle their clock, in
    proportion to how busy the kernel keeps the unit (``busy``: its fraction of the unit's peak).
    A 70 W T4 runs large fp32 GEMMs at about half its boost clock, tensor-core work higher."""
    need = sm_watts_need(lib, unit, precision)
    if not tdp_w or not sms or need <= 0 or busy <= 0:
        return 1.0
    return min(1.0, (tdp_w / sms) / (need * busy))


def tile_efficiency(tm: int, tn: int, feed_ops: float) -> float:
    """Fraction of the unit's rate a tile keeps: its reuse over what the unit needs from L2."""
    reuse = 2.0 * tm * tn / (tm + tn)
    return min(1.0, reuse / feed_ops)


@dataclass(frozen=True)
class Plan:
    """How the library runs one product: the tile, the split of K, and what it costs."""

    tile: tuple[int, int]
    split_k: int
    ctas: int
    waves: int  # rounds of resident CTAs on the busiest SM
    seconds: float  # compute time at the unit's rate x tile feed (before library efficiency)
    latency_bound: bool  # the K loop's latency, not math, sets the time
    tile_eff: float
    partial_bytes: int  # split-K partial sums written and read back
    math_share: float = 1.0  # math time over the K loop's time: how busy the unit is kept


def plan_gemm(m: int, n: int, k: int, count: int, sms: int, lib: GpuLibrary, unit: str, rate_per_s: float,
              hz: float, precision: str, split_k: bool = True, acc_bytes: int = 4, gemv: bool | str = True,
              tiles: tuple | None = None, step_cycles: float | None = None) -> Plan:
    """The tile (and split-K) a library would pick for ``count`` products of m x n x k on ``sms``
    SMs of total ``rate_per_s`` (ops/s at the clock ``hz``): the one that finishes first. ``gemv``:
    whether the library has matrix-vector kernels for this call (BLAS products; not convolutions), in
    its ``gemv_precisions`` or, with "any", in every precision (attention reading a cache).
    ``tiles``: the tile shapes to choose from (default the library's GEMM tiles, or its ``gemm_tiles``
    for the unit and precision when both sides are wider than ``gemv_max``); ``step_cycles``: the
    latency of one step of the K loop (default the library's GEMM figure, ``k_step_cycles``)."""
    key = (m, n, k, count, sms, id(lib), unit, rate_per_s, hz, precision, split_k, acc_bytes, gemv, tiles, step_cycles)
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is lib:  # the same library object (its id alone could be reused)
        return hit[1]
    plan = _plan_gemm(m, n, k, count, sms, lib, unit, rate_per_s, hz, precision, split_k, acc_bytes, gemv, tiles,
                      step_cycles)
    if len(_PLANS) >= 200_000:
        _PLANS.clear()
    _PLANS[key] = (lib, plan)
    return plan


# plans already made in this process: a model is scored several times (the fusion what-if, the
# precision rungs, downgrade candidates) and its repeated blocks ask for the same products
_PLANS: dict = {}


def _plan_gemm(m, n, k, count, sms, lib, unit, rate_per_s, hz, precision, split_k, acc_bytes, gemv, tiles,
               step_cycles) -> Plan:
    if gemv and min(m, n) <= lib.gemv_max and (gemv == "any" or precision in lib.gemv_precisions):
        # matrix-vector kernels: every SM streams a slice of the matrix and reduces K within the
        # block; no tile K loop to wait on, the memory step bounds them
        t = 2.0 * m * n * k * count / rate_per_s
        return Plan((min(m, n), max(m, n)), 1, sms, 1, t, False, 1.0, 0, 1.0)
    if tiles is None and gemv and min(m, n) > lib.gemv_max:
        tiles = lib.gemm_tiles.get(f"{unit}:{precision}")  # a kernel family with large tiles only
    feed = float(lib.feed_ops_per_element.get(unit, lib.feed_ops_per_element.get("cuda_cores", 48)))
    rate_sm = rate_per_s / max(sms, 1)
    step_s = (lib.k_step_cycles if step_cycles is None else step_cycles) / hz
    k_per_step = float(lib.k_step.get(f"{unit}:{precision}", lib.k_step.get(precision, 8)))
    if step_cycles is None:  # a GEMM kernel (or a pointwise convolution run as one): its own step, if the library has one
        k_per_step = float(lib.gemm_k_step.get(f"{unit}:{precision}", lib.gemm_k_step.get(precision, k_per_step)))
    best = None
    for tm, tn in tiles or lib.tiles:
        tiles_n = ceil(m / tm) * ceil(n / tn) * count
        s = 1
        if split_k and tiles_n < sms and k >= 2 * lib.split_k_min:
            s = max(1, min(sms // max(tiles_n, 1), k // lib.split_k_min))
        ks = ceil(k / s)
        ctas = tiles_n * s
        resident = max(1, min(8, lib.ctas_per_sm_tile // (tm * tn)))
        eff = tile_efficiency(tm, tn, feed)
        per_sm = ceil(ctas / sms)
        waves = ceil(per_sm / resident)
        busy = min(per_sm, resident)  # CTAs sharing the busiest SM in one round
        math_s = busy * 2.0 * tm * tn * ks / (rate_sm * eff)
        lat_s = ceil(ks / k_per_step) * step_s
        # rounds of `resident` CTAs on the busiest SM share its rate and each waits its K loop; a last,
        # partial round runs only the CTAs left (3 CTAs at 2 resident: 1.5 rounds of math, not 2)
        full, rem = divmod(per_sm, resident)
        t = full * max(math_s, lat_s) + (max(math_s * rem / busy, lat_s) if rem else 0.0)
        partial = (s - 1) * m * n * count * acc_bytes * 2 if s > 1 else 0
        key = (t, -tm * tn)
        if best is None or key < best[0]:
            share = min(1.0, math_s / lat_s) if lat_s > 0 else 1.0
            best = (key, Plan((tm, tn), s, ctas, waves, t, lat_s > math_s, eff, partial, share))
    return best[1]


def gemm_vector(lib: GpuLibrary, precision: str) -> int:
    """Values of ``precision`` in the vector the library's fast tensor-core GEMM kernels load with
    (``gemm_alignment_bytes``); 0 where the generation has no such rule or the width is unknown."""
    bits = _precision_bits(precision)
    return lib.gemm_alignment_bytes * 8 // bits if lib.gemm_alignment_bytes and bits else 0


def _precision_bits(precision: str) -> int:
    """Bits of one value of ``precision`` (0 when unknown)."""
    from dnnperf.ir import DTYPE_BITS
    from dnnperf.workload import DTYPE_OF_PRECISION

    return DTYPE_BITS.get(DTYPE_OF_PRECISION.get(precision, ""), 0)


def gemm_misaligned(lib: GpuLibrary, n: int, k: int, precision: str) -> bool:
    """Whether a row-major product's row strides (K elements of A, N of B and C) miss that vector."""
    vec = gemm_vector(lib, precision)
    return bool(vec) and any(d % vec for d in (n, k))


def gemm_stride_alignment(lib: GpuLibrary, n: int, k: int, precision: str) -> float:
    """Bytes both row strides (K of A, N of B and C) are multiples of: the largest power of two up to
    ``gemm_alignment_bytes`` dividing each stride (fp16 N = 7133: 2; K = 1530: 4; N = 1500: 8; an odd
    int4 width: half a byte). Counted in bits, so sub-byte precisions are not rounded up to a byte."""
    bits = _precision_bits(precision) or 8
    align = lib.gemm_alignment_bytes * 8
    for d in (n, k):
        stride = max(int(d), 1) * bits
        align = min(align, stride & -stride)  # the lowest set bit: the largest power of two dividing it
    return align / 8


def gemm_misaligned_factor(lib: GpuLibrary, n: int, k: int, precision: str, latency_bound: bool = False) -> float:
    """Factor on a tensor-core GEMM's rate for its row strides: 1 when they fill the library's vector;
    else ``gemm_misaligned_efficiency``, scaled down in proportion where the strides allow only loads
    narrower than ``gemm_word_bytes`` (an odd fp16 width: 2-byte loads, half the bytes per instruction
    of the 4-byte ones the factor was measured with) unless the K loop's latency, not its loads,
    bounds the kernel (H200: the M = 35, N = 8457 fp16 products matched the plain factor)."""
    if not gemm_misaligned(lib, n, k, precision):
        return 1.0
    f = lib.gemm_misaligned_efficiency
    if lib.gemm_word_bytes and not latency_bound:
        f *= min(1.0, gemm_stride_alignment(lib, n, k, precision) / lib.gemm_word_bytes)
    return f


def winograd_tiling(m: int, r: int, out_h: int, out_w: int) -> tuple[int, int, float]:
    """Winograd F(m x m, r x r) over an out_h x out_w map: (alpha, tiles, gain). Each m x m output
    tile comes from an (m + r - 1) x (m + r - 1) transform tile, alpha points with one product per
    input / output channel pair each, against (r m)^2 for the direct sum; an image needs
    ceil(out_h / m) x ceil(out_w / m) tiles, so the multiply saving (r m)^2 / alpha is scaled by the
    share of the tiles' outputs that fall on the map."""
    alpha = (m + r - 1) ** 2
    rows, cols = ceil(out_h / m), ceil(out_w / m)
    fill = out_h * out_w / (rows * cols * m * m)
    return alpha, rows * cols, (r * m) ** 2 / alpha * fill


def winograd_transforms(alpha: int, tiles: int, images: int, c: int, k: int, word: int,
                        filters: bool = True) -> tuple[int, ...]:
    """Bytes of each tensor the non-fused algorithm's transform kernels write for the next kernel to
    read: the transformed input (alpha points x tiles x C per image), the batched GEMMs' products
    (alpha x tiles x K, transformed back by the last kernel) and, with ``filters``, the transformed
    filters (alpha x C x K; a TensorRT engine transforms them when it is built)."""
    sizes = (alpha * tiles * images * c * word, alpha * tiles * images * k * word)
    return sizes + ((alpha * c * k * word,) if filters else ())


def fft_points(out_h: int, out_w: int, r: int) -> tuple[int, float]:
    """FFT convolution of an r x r filter at stride 1 over an out_h x out_w map: transforms of the
    padded map, (out_h + r - 1) x (out_w + r - 1) real points, of which fh x (fw // 2 + 1) complex
    ones remain (a real signal's spectrum is symmetric); one complex product (4 real multiplies) per
    point and channel pair against r^2 per output. Returns (points, multiply saving)."""
    fh, fw = out_h + r - 1, out_w + r - 1
    points = fh * (fw // 2 + 1)
    return points, r * r * out_h * out_w / (4 * points)


def fft_transforms(points: int, images: int, c: int, k: int, word: int, filters: bool = True) -> tuple[int, ...]:
    """Bytes of each complex spectrum an FFT convolution writes for the next kernel to read: the
    input's (points x C per image), the products' (points x K, transformed back by the last kernel)
    and, with ``filters``, the filters' (points x C x K); a complex value is two of ``word`` bytes."""
    sizes = (points * images * c * 2 * word, points * images * k * 2 * word)
    return sizes + ((points * c * k * 2 * word,) if filters else ())


def precision_bytes(precision: str) -> int:
    """Bytes of one value of ``precision`` (4 when unknown)."""
    bits = _precision_bits(precision)
    return max(1, bits // 8) if bits else 4


def board_share(hw, batch: int | None):
    """The part of a multi-die board (``gpu.dies`` > 1: K80, dual-GPU cards) a batch runs on. A
    framework sees each die as its own device, so a batch of B runs data-parallel on min(B, dies)
    dies; batch 1 uses one. The profile describes the whole board; the result describes the dies
    used (peaks, bandwidth, SMs, lanes, cache and power in proportion). Returns (profile, dies used)."""
    from dataclasses import replace

    if hw.kind != "gpu":
        return hw, 1
    dies = library_of(hw).dies
    if dies <= 1:
        return hw, 1
    used = max(1, min(dies, int(batch or 1)))
    f = used / dies
    units = tuple(replace(u, peak_tops={k: v * f for k, v in u.peak_tops.items()}) for u in hw.units)
    gpu = dict(hw.gpu, dies=1)
    if "tdp_w" in gpu:
        gpu["tdp_w"] = float(gpu["tdp_w"]) * f
    share = replace(hw, units=units, dram_gbs=hw.dram_gbs * f, lanes=max(1, int(hw.lanes * f)),
                    compute_units=max(1, int(round(hw.compute_units * f))), gpu=gpu,
                    onchip_mb=hw.onchip_mb * f if hw.onchip_mb else hw.onchip_mb,
                    onchip_gbs=hw.onchip_gbs * f if hw.onchip_gbs else hw.onchip_gbs,
                    headline_tops=hw.headline_tops * f)
    return share, used
