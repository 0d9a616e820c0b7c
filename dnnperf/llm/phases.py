"""Decoders with a KV cache: find the cache in the exported graph, run the prefill and decode phases,
and turn latencies into what serving cares about (time to first token, tokens per second, cache
memory).

Conventions (stated in every result):

- ``prompt`` N: prefill processes N tokens with an empty cache; its latency is the time to first token.
- ``context`` C: a decode step processes 1 new token per sequence with C tokens already in the cache
  (attention reads C + 1 keys and values); its latency is the time per output token.
- ``generate`` M: the end-to-end time of a request is prefill(N) + the decode steps at contexts
  N .. N + M - 1 (integrated with Simpson's rule over three contexts: decode time grows linearly
  with the context, so the rule is exact for it).
- KV cache bytes per token: the cache inputs' bytes for one position of one sequence (all layers,
  keys and values), at the cache inputs' dtype.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from dnnperf.errors import DnnperfError
from dnnperf.ir import DTYPE_BITS, ShapeOverrides

PHASES = ("prefill", "decode", "both")


@dataclass(frozen=True)
class CacheInput:
    name: str
    dims: tuple  # as exported, symbols as strings
    dtype: str
    seq_axis: int
    batch_axis: int
    # False for an encoder-decoder's cross-attention cache (past_key_values.N.encoder.key: the encoder's
    # keys and values, as long as its input, the same at every step): it does not grow with the context
    grows: bool = True

    def bytes_per_token(self) -> int:
        """Bytes of one cache position of one sequence (all other axes' sizes x dtype)."""
        n = 1
        for i, d in enumerate(self.dims):
            if i in (self.seq_axis, self.batch_axis):
                continue
            if not isinstance(d, int):
                raise DnnperfError(f"cache input '{self.name}' has an unresolved dimension {d!r} besides batch and "
                                   "sequence — pass it with --dim")
            n *= d
        return n * DTYPE_BITS.get(self.dtype, 16) // 8


@dataclass(frozen=True)
class Decoder:
    """What was found in the graph: the token input, the cache inputs and the symbols to set."""

    tokens: str
    batch_symbol: str | None
    seq_symbol: str | None
    past_symbol: str | None
    total_symbol: str | None
    cache: tuple[CacheInput, ...]
    fixed_past: int | None = None  # a cache length baked into the export
    max_positions: int | None = None  # the rows of its rotary cos/sin table, when it has one
    position_table: str = ""  # that table's name
    # a merged decoder's branch input (optimum's ``use_cache_branch``: one If holds the graph with the
    # cache and the one without): set per step, 1 to read the cache, 0 for a prefill into an empty one
    branch: str = ""

    @property
    def bytes_per_token(self) -> int:
        """Bytes one position of one sequence adds to the caches that grow (cross-attention ones do not)."""
        return sum(c.bytes_per_token() for c in self.cache if c.grows)

    @property
    def layers(self) -> int:
        grows = [c for c in self.cache if c.grows]
        keys = [c for c in grows if "key" in c.name.lower().replace("key_values", "") or len(c.dims) == 5]
        return len(keys) or len(grows) // 2

    def fixed_bytes(self, insp) -> int:
        """Bytes of the cross-attention caches (``CacheInput.grows`` False) in the step ``insp``: the
        encoder's keys and values, held whatever the context (0 for a decoder-only model)."""
        total = 0
        for c in self.cache:
            t = insp.graph.tensors.get(c.name) if not c.grows else None
            if t is not None and t.shape is not None:
                total += t.nbytes
        return total

    @property
    def cache_dtype(self) -> str:
        return self.cache[0].dtype if self.cache else "-"

    def describe(self) -> dict:
        d = {"token_input": self.tokens, "cache_inputs": len(self.cache),
             "cross_attention_inputs": sum(1 for c in self.cache if not c.grows), "layers": self.layers,
             "cache_dtype": self.cache_dtype, "kv_bytes_per_token": self.bytes_per_token,
             "symbols": {"batch": self.batch_symbol, "sequence": self.seq_symbol, "past": self.past_symbol,
                         "total": self.total_symbol}}
        if self.branch:
            d["branch_input"] = self.branch
        return d

    def overrides(self, base: ShapeOverrides, seq: int, past: int) -> ShapeOverrides:
        """The user's overrides with the phase's sequence, past and total lengths set."""
        dims = dict(base.dims)
        for sym, v in ((self.seq_symbol, seq), (self.past_symbol, past), (self.total_symbol, past + seq)):
            if sym:
                if dims.get(sym, v) != v:  # the user's --dim for a length the phase sets: which one?
                    raise DnnperfError(f"--dim {sym}={dims[sym]} conflicts with the phase, which sets {sym} to {v} "
                                       "(--prompt and --context set the sequence and cache lengths) — drop "
                                       f"--dim {sym}")
                dims[sym] = v
        if self.fixed_past is not None and self.fixed_past != past:
            raise DnnperfError(f"the model's cache length is fixed at {self.fixed_past} in the export; it cannot run "
                               f"with {past} cached tokens — re-export with a dynamic past sequence axis")
        values = base.values
        if self.branch and self.branch not in dict(values):  # the user's --value for it stands
            values = values + ((self.branch, (1.0 if past > 0 else 0.0,)),)
        return replace(base, dims=tuple(sorted(dims.items())), values=values)


_PAST = re.compile(r"past|cache", re.I)
# an encoder-decoder's cross-attention cache (optimum: past_key_values.N.encoder.key; "cross" in others)
_CROSS = re.compile(r"encoder|cross", re.I)


def find_decoder(path: str) -> Decoder:
    """The KV-cache inputs of an exported decoder: transformers-style ``past_key_values.N.key``,
    ``past_key_N`` / ``past_value_N``, ONNX Runtime GenAI's names, and GPT-2's legacy ``past_N``
    ([2, batch, heads, past, head]). Refuses (exit 2) a model without a recognisable cache."""
    from dnnperf.load.read import CorruptName, read_model, type_shape

    model = read_model(path)
    inits = {i.name for i in model.graph.initializer}
    try:
        ins = [(vi.name, *type_shape(vi.type)) for vi in model.graph.input if vi.name not in inits]
    except CorruptName as exc:
        raise CorruptName(exc.what, f"'{path}'") from None
    tokens = next((n for n, d, t in ins if n in ("input_ids", "tokens", "input")), None)
    if tokens is None:
        tokens = next((n for n, d, t in ins if d is not None and len(d) == 2 and t in ("int64", "int32")), None)
    cache = []
    for name, dims, dtype in ins:
        if dims is None or not _PAST.search(name) or len(dims) not in (4, 5):
            continue
        if len(dims) == 5:  # legacy [2, batch, heads, past, head]
            cache.append(CacheInput(name, tuple(dims), dtype, 3, 1))
        else:
            seq_axis = 2
            sym = [i for i, d in enumerate(dims) if isinstance(d, str) and i != 0]
            if sym and seq_axis not in sym:
                seq_axis = sym[0]
            cache.append(CacheInput(name, tuple(dims), dtype, seq_axis, 0, not _CROSS.search(name)))
    if cache and not any(c.grows for c in cache):  # named for the encoder alone: nothing to tell them apart by
        cache = [replace(c, grows=True) for c in cache]
    if tokens is None or not cache:
        raise DnnperfError(f"'{path}' has no recognisable KV cache (inputs named past_key_values.N.key/value, "
                           "past_key_N, past_N...) — --phase needs a decoder exported with its cache "
                           "(dnnperf llm skeleton writes one for any Llama-style configuration); without one, "
                           "a plain analysis at the prompt's length is the prefill"
                           + (f" (--input-shape {tokens}=1xN)" if tokens else ""))
    tdims = next(d for n, d, t in ins if n == tokens) or ()
    batch_sym = tdims[0] if len(tdims) > 0 and isinstance(tdims[0], str) else None
    seq_sym = tdims[1] if len(tdims) > 1 and isinstance(tdims[1], str) else None
    c0 = next(c for c in cache if c.grows)
    past = c0.dims[c0.seq_axis]
    past_sym = past if isinstance(past, str) else None
    total_sym = None
    for n, d, t in ins:
        if d and len(d) == 2 and "mask" in n.lower() and isinstance(d[1], str) and d[1] not in (seq_sym, past_sym):
            total_sym = d[1]
    table, rows = _position_table(model)
    branch = next((n for n, d, t in ins if t == "bool" and "use_cache" in n.lower() and _numel(d) == 1), "")
    return Decoder(tokens, batch_sym, seq_sym, past_sym, total_sym, tuple(cache),
                   None if past_sym else int(past), rows, table, branch)


def _numel(dims) -> int | None:
    """Elements of an input of these dims (None when one is symbolic or unknown)."""
    if dims is None or any(not isinstance(d, int) for d in dims):
        return None
    n = 1
    for d in dims:
        n *= d
    return n


def _position_table(model) -> tuple[str, int | None]:
    """(name, rows) of the rotary cos table the decoder reads its positions from, ("", None) when
    none is found: GroupQueryAttention's cos_cache input (ONNX Runtime GenAI), else a 2-D weight
    named as a rotary cos cache (transformers-style exports that store it, ``dnnperf llm skeleton``).
    A model that computes its angles from the positions (no table) has no such limit."""
    dims = {i.name: tuple(i.dims) for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "GroupQueryAttention" and len(n.input) > 7 and len(dims.get(n.input[7], ())) == 2:
            return n.input[7], int(dims[n.input[7]][0])
    for name, d in dims.items():
        low = name.lower()
        if len(d) == 2 and "cos" in low and ("cache" in low or "rotary" in low or "rope" in low):
            return name, int(d[0])
    return "", None


# -- phases -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class PhaseRequest:
    phase: str = "decode"
    prompt: int = 512
    context: int | None = None  # decode: tokens in the cache (default: the prompt)
    generate: int = 128

    def check(self) -> None:
        if self.phase not in PHASES:
            raise DnnperfError(f"--phase must be one of {', '.join(PHASES)}, got '{self.phase}'")
        for k in ("prompt", "generate"):
            if getattr(self, k) < 1:
                raise DnnperfError(f"--{k} must be >= 1, got {getattr(self, k)}")
        if self.context is not None and self.context < 0:
            raise DnnperfError(f"--context must be >= 0, got {self.context}")


def _check_positions(dec: Decoder, req: PhaseRequest, ctx: int) -> None:
    """Refuse a request past the model's rotary table: position p reads row p, so the model cannot
    run it (a decode step at --context 4096 on a 4096-row table slices an empty row: the shapes then
    contradict each other deep in the graph, or a larger prompt would be costed as if it ran)."""
    if dec.max_positions is None:
        return
    asks = []
    if req.phase == "prefill":
        asks.append((req.prompt, f"--prompt {req.prompt}"))
    if req.phase == "both":  # decode steps at contexts prompt .. prompt + generate - 1
        asks.append((req.prompt + req.generate, f"--prompt {req.prompt} then --generate {req.generate}"))
    if req.phase == "decode":
        asks.append((ctx + 1, f"--context {ctx} and the new token"))
    for need, what in asks:
        if need > dec.max_positions:
            raise DnnperfError(f"this request needs {need} positions ({what}), but the model's rotary table '{dec.position_table}' "
                               f"holds {dec.max_positions} — keep the sequence within {dec.max_positions} tokens "
                               "(or export the model with a longer table)")


def phase_inspection(path: str, req: PhaseRequest, base: ShapeOverrides = ShapeOverrides()):
    """The inspection of one phase's step (a decode step at --context cached tokens, or the prefill of
    --prompt tokens), its KV cache resident on the device, for commands that score one step on many
    profiles (`compare --phase`); ``both`` is a request of many steps, which they refuse."""
    dec, base, seq, past = _one_step(path, req, base, "times a whole request (`dnnperf analyze --phase both`); "
                                     "here one step is scored on every target")
    return _inspect(path, dec, base, seq, past)


def phase_overrides(path: str, req: PhaseRequest, base: ShapeOverrides = ShapeOverrides()) -> ShapeOverrides:
    """The overrides that run one step of a decoder (a decode step at --context cached tokens, or the
    prefill of --prompt tokens), for commands that run the model itself (`validate --phase`)."""
    dec, base, seq, past = _one_step(path, req, base, "is a whole request of many steps (`dnnperf analyze --phase "
                                     "both`); validate runs one step")
    return dec.overrides(base, seq, past)


def _one_step(path: str, req: PhaseRequest, base: ShapeOverrides, refusal: str):
    """(the decoder, ``base`` at the request's batch, new tokens, cached tokens) of one step: a decode
    step at --context cached tokens or the prefill of --prompt tokens; ``--phase both`` is refused
    with ``refusal`` (what the caller does instead)."""
    req.check()
    if req.phase not in ("prefill", "decode"):
        raise DnnperfError(f"--phase {req.phase} {refusal}: --phase prefill or --phase decode")
    dec, base, ctx = _prepared(path, req, base, base.batch or 1)
    return (dec, base, 1, ctx) if req.phase == "decode" else (dec, base, req.prompt, 0)


def _prepared(path: str, req: PhaseRequest, base: ShapeOverrides, batch: int):
    """(the decoder, ``base`` at ``batch``, the cached tokens of a decode step) for a checked request that
    fits the model's rotary table."""
    req.check()
    dec = find_decoder(path)
    ctx = req.context if req.context is not None else req.prompt
    _check_positions(dec, req, ctx)
    return dec, replace(base, batch=batch), ctx


def _inspect(path, dec: Decoder, base: ShapeOverrides, seq: int, past: int):
    """One step's inspection. The KV cache lives in device memory between steps: only the other inputs
    (token ids, masks, positions) cross the host link."""
    from dnnperf.api import inspect_model

    insp = inspect_model(path, dec.overrides(base, seq, past))
    resident = 0
    for c in dec.cache:
        t = insp.graph.tensors.get(c.name)
        if t is not None and t.shape is not None:
            resident += t.nbytes
    return replace(insp, input_bytes=max(0, insp.input_bytes - resident))


def _run(path, dec: Decoder, base: ShapeOverrides, hw, settings, seq: int, past: int, with_fixes: bool):
    """One phase's report (``_inspect`` scored on ``hw``)."""
    from dnnperf.api import analyze

    return analyze(_inspect(path, dec, base, seq, past), hw, settings, with_fixes=with_fixes)


def _bound(report) -> str:
    """memory, compute or overhead: what holds most of the layers' time (overhead: kernels too small for
    the device, starved or waiting on the host)."""
    sides = {"memory": ("memory", "overlap"), "compute": ("compute", "specialization", "thermal", "unoptimized"),
             "overhead": ("launch_overhead", "parallelism")}
    t = {k: sum(c.time_s for c in report.score.layers if c.cause in v) for k, v in sides.items()}
    return max(("memory", "compute", "overhead"), key=lambda k: (t[k], k == "memory"))


def _held_weights(report) -> int:
    """The weights a device holds, each once (a rotary table every layer reads is one table); the
    report's ``weight_bytes`` total counts what the step reads."""
    figs = report.memory_figures
    return figs.weights if figs is not None else report.score.totals["weight_bytes"]


def _live(report) -> int:
    """The activations a phase's step holds at once at its peak besides its inputs and outputs (the
    cache): a plain export's attention scores at a long prompt, ``capacity.MemoryFigures.live``."""
    figs = report.memory_figures
    return figs.live if figs is not None else 0


def _fits(hw, weights: int, cache: int, batch: int, activations: int = 0) -> dict:
    """The weights, the KV cache and the activations held next to it against the memory of one device;
    on a multi-die board (``capacity.die_memory``) each die used holds the weights and its share of
    the batch's cache and activations."""
    from dnnperf.capacity import dies_used, die_memory

    cap = die_memory(hw)
    dies = dies_used(hw, batch)
    need = weights + -(-(cache + activations) // dies)
    return {"weights_bytes": weights, "cache_bytes": cache, "activation_bytes": activations, "needed_bytes": need,
            "dies": dies, "device_bytes": cap or None, "fits": (need <= cap) if cap else None,
            "missing_bytes": max(0, need - cap) if cap else None}


def analyze_phases(path: str, hw, settings, req: PhaseRequest, base: ShapeOverrides = ShapeOverrides(),
                   strict_memory: bool = True, with_fixes: bool = True):
    """(the report to render, the ``llm`` section). The report is the decode step's (prefill's for
    --phase prefill); the section holds both phases' serving figures, cache memory and LLM fixes."""
    batch = settings.batch or base.batch or 1
    dec, base, ctx = _prepared(path, req, base, batch)
    settings = replace(settings, batch=batch)
    # the cache at the precision the step is scored in: a precision what-if (-p) holds and reads it at
    # that width, as the report's memory section and the step's layers count it
    cache_dtype, scale = dec.cache_dtype, 1.0
    if settings.precision and DTYPE_BITS.get(dec.cache_dtype):
        from dnnperf.workload import DTYPE_OF_PRECISION

        cache_dtype = DTYPE_OF_PRECISION[settings.precision]
        scale = DTYPE_BITS.get(cache_dtype, 32) / DTYPE_BITS[dec.cache_dtype]
    per_tok = int(dec.bytes_per_token * scale)
    out: dict = {"phase": req.phase, "batch": batch, "decoder": dec.describe(),
                 "conventions": "prompt: tokens prefilled into an empty cache; context: tokens already cached when "
                                "a decode step runs; KV bytes per token: one position of one sequence, all layers"}
    # the largest cache the request holds decides whether it fits
    peak_ctx = max(ctx + 1, req.prompt + req.generate if req.phase == "both" else 0,
                   req.prompt if req.phase == "prefill" else 0)
    main = None
    if req.phase in ("prefill", "both"):
        pre = _run(path, dec, base, hw, settings, req.prompt, 0, with_fixes and req.phase == "prefill")
        t = pre.score.totals["latency_s"]
        out["prefill"] = {"prompt": req.prompt, "latency_s": t, "ttft_s": t, "tokens_per_s": batch * req.prompt / t,
                          "bound": _bound(pre), "achieved_tops": pre.score.totals["achieved_tops"]}
        main = pre
        weights = _held_weights(pre)
    if req.phase in ("decode", "both"):
        c0 = req.prompt if req.phase == "both" else ctx
        dec_rep = _run(path, dec, base, hw, settings, 1, c0, with_fixes)
        t = dec_rep.score.totals["latency_s"]
        out["decode"] = {"context": c0, "latency_s": t, "tokens_per_s_per_sequence": 1.0 / t,
                         "tokens_per_s": batch / t, "bound": _bound(dec_rep),
                         "achieved_tops": dec_rep.score.totals["achieved_tops"],
                         "bytes_per_step": dec_rep.score.totals["bytes"]}
        main = dec_rep
        weights = _held_weights(dec_rep)
        if req.phase == "both":
            m = req.generate
            if m > 1:
                mid = _run(path, dec, base, hw, settings, 1, c0 + (m - 1) // 2, False).score.totals["latency_s"]
                last = _run(path, dec, base, hw, settings, 1, c0 + m - 1, False).score.totals["latency_s"]
                decode_total = m / 6.0 * (t + 4 * mid + last)
            else:
                decode_total = t
            e2e = out["prefill"]["ttft_s"] + decode_total
            out["end_to_end"] = {"prompt": req.prompt, "generate": m, "seconds": e2e,
                                 "decode_seconds": decode_total,
                                 "output_tokens_per_s": batch * m / e2e,
                                 "mean_time_per_output_token_s": decode_total / m}
    fixed = int(dec.fixed_bytes(main.inspection) * scale)  # cross-attention caches: the same at every step
    cache_bytes = per_tok * peak_ctx * batch + fixed
    out["kv_cache"] = {"bytes_per_token": per_tok, "tokens": peak_ctx, "bytes": cache_bytes,
                       "dtype": cache_dtype}
    if fixed:
        out["kv_cache"]["cross_attention_bytes"] = fixed
    # next to the cache, each phase's step holds its own activations (a plain export's attention scores
    # at a long prompt): the most held beyond the largest cache, over the phases run (a prefill holds
    # its prompt's cache, a decode step the largest)
    held = [cache_bytes]
    if "prefill" in out:
        held.append(per_tok * req.prompt * batch + fixed + _live(pre))
    if "decode" in out:
        held.append(cache_bytes + _live(dec_rep))
    held = max(held)
    out["memory"] = _fits(hw, weights, cache_bytes, batch, max(0, held - cache_bytes))
    mem = out["memory"]
    if strict_memory and mem["fits"] is False:
        from dnnperf.capacity import memory_words

        n = mem["dies"]
        share = f", {n} dies sharing it: {(mem['needed_bytes'] - weights) / 1e9:.2f} GB each" if n > 1 else ""
        act = mem["activation_bytes"]
        raise DnnperfError(
            f"does not fit {memory_words(hw)}: weights {weights / 1e9:.2f} GB + KV cache "
            f"{cache_bytes / 1e9:.2f} GB (batch {batch} x {peak_ctx} tokens x {per_tok / 1e6:.3g} MB"
            + (f" + {fixed / 1e9:.2f} GB of cross-attention caches" if fixed else "") + f"{share})"
            + (f" + activations {act / 1e9:.2f} GB" if act >= 5e6 else "") + " = "
            f"{mem['needed_bytes'] / 1e9:.2f} GB, {mem['missing_bytes'] / 1e9:.2f} GB missing — lower --batch or the "
            "context, quantise the weights (-p int8) or the cache, or pick a device with more memory")
    cov = main.inspection.coverage()
    if not cov["complete"]:  # the phase's figures are the scored nodes' only: said first, where they are read
        out["partial"] = (f"{cov['nodes_unscored']} of {cov['nodes_total']} nodes of the step are NOT scored: the "
                          "figures below leave them out (the report's NOT scored list says why)")
    if with_fixes:
        from dnnperf.llm.fixes import llm_fixes

        out["fixes"] = llm_fixes(main, out, dec, hw)
    return main, out


def sweep_phases(path: str, hw, settings, req: PhaseRequest, batches: list[int], base: ShapeOverrides = ShapeOverrides()):
    """One row per batch for the decode (or prefill) phase: tokens/s, bound, cache memory and
    whether it fits. Rows past the memory limit are kept and marked."""
    rows = []
    for b in batches:
        rep, d = analyze_phases(path, hw, replace(settings, batch=b), replace(req, phase=req.phase if req.phase != "both" else "decode"),
                                replace(base, batch=b), strict_memory=False, with_fixes=False)
        ph = d.get("decode") or d.get("prefill")
        rows.append({
            "batch": b, "phase": d["phase"] if d["phase"] != "both" else "decode",
            "context": ph.get("context", ph.get("prompt")),
            "latency_s": ph["latency_s"],
            "tokens_per_s": ph["tokens_per_s"],
            "tokens_per_s_per_sequence": ph.get("tokens_per_s_per_sequence", ph["tokens_per_s"] / b),
            "achieved_tops": ph["achieved_tops"],
            "bound": ph["bound"],
            "kv_cache_bytes": d["kv_cache"]["bytes"],
            "needed_bytes": d["memory"]["needed_bytes"],
            "fits": d["memory"]["fits"],
        })
    return rows


def sweep_document(path: str, hw, settings, req: PhaseRequest, batches: list[int],
                   base: ShapeOverrides = ShapeOverrides()) -> dict:
    """``sweep --phase``: the rows of ``sweep_phases`` and where decode turns compute-bound, where the
    cache stops fitting, and the best throughput that fits."""
    import os

    from dnnperf.fmt import sig

    req.check()
    rows = sweep_phases(path, hw, settings, req, batches, base)
    compute_from = min((r["batch"] for r in rows if r["bound"] == "compute"), default=None)  # any order given
    fits = [r for r in rows if r["fits"] is not False]
    fit_max = max((r["batch"] for r in fits), default=None) if rows and rows[0]["fits"] is not None else None
    best = max(fits, key=lambda r: (r["tokens_per_s"], -r["batch"]), default=None)
    for r in rows:
        for k in ("latency_s", "tokens_per_s", "tokens_per_s_per_sequence", "achieved_tops"):
            r[k] = sig(r[k])
    return {"schema_version": "dnnperf-llm-sweep/1", "model": os.path.basename(path), "hardware": hw.name,
            "phase": rows[0]["phase"] if rows else req.phase, "rows": rows,
            "summary": {"compute_bound_from_batch": compute_from, "fits_up_to_batch": fit_max,
                        "best_batch": best["batch"] if best else None,
                        "best_tokens_per_s": best["tokens_per_s"] if best else None}}
