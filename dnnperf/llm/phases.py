"""Decoders with a KV cache: run the prefill and decode phases on the cache ``dnnperf.llm.decoder``
finds in the exported graph, and turn latencies into what serving cares about (time to first token,
tokens per second, cache memory).

Conventions (stated in every result):

- ``prompt`` N: prefill processes N tokens with an empty cache; its latency is the time to first token.
- ``context`` C: a decode step processes 1 new token per sequence with C tokens already in the cache
  (attention reads C + 1 keys and values); its latency is the time per output token.
- ``generate`` M: the end-to-end time of a request is prefill(N) + the decode steps at contexts
  N .. N + M - 1 (integrated with Simpson's rule over three contexts: decode time grows linearly
  with the context, so the rule is exact for it).
- KV cache bytes per token: the cache inputs' bytes for one position of one sequence (all layers,
  keys and values), at the cache inputs' dtype (at a precision what-if's width under -p, as the step's
  layers read it).
- The cache stays in device memory between steps; a fused attention op writes only the new tokens
  into it (serving runtimes share the past and present buffers); a plain export's Concat copies it.
- ``tp`` devices (``dnnperf.llm.parallel``): a step's figures are one device's share plus its collectives.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dnnperf.errors import DnnperfError
from dnnperf.ir import ShapeOverrides, size_fits
from dnnperf.llm import parallel
from dnnperf.llm.decoder import Decoder, find_decoder  # noqa: F401  (find_decoder re-exported: callers import it here)

PHASES = ("prefill", "decode", "both")


@dataclass(frozen=True)
class PhaseRequest:
    phase: str = "decode"
    prompt: int = 512
    context: int | None = None  # decode: tokens in the cache (default: the prompt)
    generate: int = 128
    tp: int = 1  # tensor-parallel devices (dnnperf.llm.parallel)

    def check(self) -> None:
        if self.phase not in PHASES:
            raise DnnperfError(f"--phase must be one of {', '.join(PHASES)}, got '{self.phase}'")
        if self.tp < 1:
            raise DnnperfError(f"--tp must be >= 1, got {self.tp}")
        for k in ("prompt", "generate"):
            if getattr(self, k) < 1:
                raise DnnperfError(f"--{k} must be >= 1, got {getattr(self, k)}")
        if self.context is not None and self.context < 0:
            raise DnnperfError(f"--context must be >= 0, got {self.context}")
        for k in ("prompt", "generate", "context", "tp"):
            size_fits(getattr(self, k), f"--{k}")


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
    profiles (`compare --phase`, `baseline` / `check`); ``both`` is a request of many steps, which they
    refuse. With ``req.tp`` > 1 one device's share, its ``collectives`` set (``dnnperf.llm.parallel``)."""
    dec, base, seq, past = _one_step(path, req, base, "times a whole request (`dnnperf analyze --phase both`); "
                                     "here one step is scored on every target")
    # over --tp devices: one device's share, carrying the collectives each target's link times
    return parallel.shard(_inspect(path, dec, base, seq, past), req.tp, dec.cache)[0]


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
    parallel.check_devices(req.tp, dec)
    ctx = req.context if req.context is not None else req.prompt
    _check_positions(dec, req, ctx)
    return dec, replace(base, batch=batch), ctx


def _inspect(path, dec: Decoder, base: ShapeOverrides, seq: int, past: int):
    """One step's inspection. The KV cache lives in device memory between steps: only the other inputs
    (token ids, masks, positions) cross the host link. A fused attention op (GroupQueryAttention,
    MultiHeadAttention, Attention) that reads the cache writes its present cache in place: the new
    tokens' keys and values only, as serving runtimes bind past and present to one buffer (ONNX Runtime
    GenAI's shared past/present buffer, TensorRT-LLM's and vLLM's paged caches); a plain export's
    Concat still copies the whole cache, as exported."""
    from dnnperf.api import inspect_model

    insp = inspect_model(path, dec.overrides(base, seq, past))
    tensors = insp.graph.tensors
    resident = 0
    for c in dec.cache:
        t = tensors.get(c.name)
        if t is not None and t.shape is not None:
            resident += t.nbytes
    caches, outputs = {c.name for c in dec.cache if c.grows}, set(insp.graph.outputs)
    rows = insp.rows
    if past and caches:
        rows = [_in_place(r, caches, outputs, tensors, past / (past + seq)) for r in rows]
    return replace(insp, rows=rows, input_bytes=max(0, insp.input_bytes - resident))


def _in_place(row, caches: set, outputs: set, tensors: dict, old: float):
    """``row`` with a fused attention op's present-cache outputs written for the new tokens only (``old``:
    the share of each present tensor that is the past it already holds)."""
    w = row.workload
    if w is None or w.family != "attention" or not caches.intersection(row.node.inputs):
        return row
    kept = sum(tensors[o].nbytes for o in row.node.outputs[1:] if o in outputs and o in tensors
               and tensors[o].shape is not None)
    if not kept:
        return row
    return replace(row, workload=replace(w, bytes_written=max(0, w.bytes_written - int(kept * old))))


def _run(path, dec: Decoder, base: ShapeOverrides, hw, settings, seq: int, past: int, with_fixes: bool, tp: int = 1):
    """(one phase's report (``_inspect`` scored on ``hw``), its time in seconds, its layers by role). Over
    ``tp`` devices the report is one device's share of the step (``dnnperf.llm.parallel``; its inspection
    carries the step's collectives) and the time adds them."""
    from dnnperf.api import analyze

    insp, _, counts = parallel.shard(_inspect(path, dec, base, seq, past), tp, dec.cache)
    rep = analyze(insp, hw, settings, with_fixes=with_fixes)
    return rep, rep.score.totals["latency_s"] + parallel.collective_seconds(insp, hw, settings.precision)[0], counts


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
    out: dict = {"phase": req.phase, "batch": batch, "decoder": dec.describe(),
                 "conventions": "prompt: tokens prefilled into an empty cache; context: tokens already cached when "
                                "a decode step runs; KV bytes per token: one position of one sequence, all layers"}
    # the largest cache the request holds decides whether it fits
    peak_ctx = max(ctx + 1, req.prompt + req.generate if req.phase == "both" else 0,
                   req.prompt if req.phase == "prefill" else 0)
    main = None
    if req.phase in ("prefill", "both"):
        pre, t, roles = _run(path, dec, base, hw, settings, req.prompt, 0, with_fixes and req.phase == "prefill", req.tp)
        out["prefill"] = {"prompt": req.prompt, "latency_s": t, "ttft_s": t, "tokens_per_s": batch * req.prompt / t,
                          "bound": _bound(pre), "achieved_tops": pre.score.totals["achieved_tops"]}
        main = pre
        weights = _held_weights(pre)
    if req.phase in ("decode", "both"):
        c0 = req.prompt if req.phase == "both" else ctx
        dec_rep, t, roles = _run(path, dec, base, hw, settings, 1, c0, with_fixes, req.tp)
        out["decode"] = {"context": c0, "latency_s": t, "tokens_per_s_per_sequence": 1.0 / t,
                         "tokens_per_s": batch / t, "bound": _bound(dec_rep),
                         "achieved_tops": dec_rep.score.totals["achieved_tops"],
                         "bytes_per_step": dec_rep.score.totals["bytes"]}
        main = dec_rep
        weights = _held_weights(dec_rep)
        if req.phase == "both":
            m = req.generate
            if m > 1:
                mid = _run(path, dec, base, hw, settings, 1, c0 + (m - 1) // 2, False, req.tp)[1]
                last = _run(path, dec, base, hw, settings, 1, c0 + m - 1, False, req.tp)[1]
                decode_total = m / 6.0 * (t + 4 * mid + last)
            else:
                decode_total = t
            e2e = out["prefill"]["ttft_s"] + decode_total
            out["end_to_end"] = {"prompt": req.prompt, "generate": m, "seconds": e2e,
                                 "decode_seconds": decode_total,
                                 "output_tokens_per_s": batch * m / e2e,
                                 "mean_time_per_output_token_s": decode_total / m}
    # the cache at the width the step is scored in: a precision what-if (-p) holds and reads it so, as
    # the report's memory section and the step's layers count it (``api.tensor_size``)
    from dnnperf.api import tensor_size

    size = tensor_size(settings.precision)
    per_tok, cache_dtype = dec.bytes_per_token, dec.cache_dtype
    first = main.inspection.graph.tensors.get(dec.cache[0].name)
    if size is not None and first is not None and first.nbytes:
        from dnnperf.workload import DTYPE_OF_PRECISION

        per_tok, cache_dtype = per_tok * size(first) // first.nbytes, DTYPE_OF_PRECISION[settings.precision]
    fixed = dec.fixed_bytes(main.inspection, size)  # cross-attention caches: the same at every step
    cache_bytes = per_tok * peak_ctx * batch + fixed
    out["kv_cache"] = {"bytes_per_token": per_tok, "tokens": peak_ctx, "bytes": cache_bytes,
                       "dtype": cache_dtype}
    if fixed:
        out["kv_cache"]["cross_attention_bytes"] = fixed
    # next to the cache, each phase's step holds its own activations (a plain export's attention scores
    # at a long prompt): the most held beyond the largest cache, over the phases run (a prefill holds
    # its prompt's cache, a decode step the largest)
    # over --tp devices each holds its share of the weights and its live activations (the reports are one
    # device's: its heads' attention scores) and 1/tp of the cache (1/heads of it when there are fewer
    # key/value heads than devices: dnnperf.llm.replicated)
    tp = req.tp
    kv = parallel.kv_ways(tp, dec.cache)  # fewer than tp when each key/value head is held on several devices
    dev_cache = -(-cache_bytes // kv)
    held = [dev_cache]
    if "prefill" in out:
        held.append(-(-(per_tok * req.prompt * batch + fixed) // kv) + _live(pre))
    if "decode" in out:
        held.append(dev_cache + _live(dec_rep))
    out["memory"] = _fits(hw, weights, dev_cache, batch, max(0, max(held) - dev_cache))
    mem = out["memory"]
    if tp > 1:
        out["memory"]["tensor_parallel_devices"] = tp
        out["memory"]["cache_devices"] = kv  # the devices the cache is spread over (its heads, when fewer)
        out["tensor_parallel"] = tpf = _parallel_figures(hw, req, out,
                                                         main.inspection.collectives.at_precision(settings.precision), roles,
                                                         kv)
        main.notes.append(f"tensor parallel over {tp} devices (--tp {tp}): the layers and totals above are one device's "
                          f"share of the {tpf['phase']} step; its {tpf['all_reduces_per_step'] + tpf['all_gathers_per_step']} "
                          f"collectives add {tpf['collective_seconds_per_step'] * 1e3:.3g} ms, which the LLM figures include")
    if strict_memory and mem["fits"] is False:
        from dnnperf.capacity import memory_words

        n = mem["dies"]
        share = f", {n} dies sharing it: {(mem['needed_bytes'] - weights) / 1e9:.2f} GB each" if n > 1 else ""
        act = mem["activation_bytes"]
        each = f" on each of {tp} devices (--tp {tp})" if tp > 1 else ""
        raise DnnperfError(
            f"does not fit {memory_words(hw)}{each}: weights {weights / 1e9:.2f} GB + KV cache "
            f"{dev_cache / 1e9:.2f} GB (batch {batch} x {peak_ctx} tokens x {per_tok / 1e6:.3g} MB"
            + (f" + {fixed / 1e9:.2f} GB of cross-attention caches" if fixed else "") + (f", / {kv}" if kv > 1 else "")
            + f"{share})" + (f" + activations {act / 1e9:.2f} GB" if act >= 5e6 else "") + " = "
            f"{mem['needed_bytes'] / 1e9:.2f} GB, {mem['missing_bytes'] / 1e9:.2f} GB missing — lower --batch or the "
            "context, quantise the weights (-p int8) or the cache, or pick a device with more memory"
            + (f" (or split the model over devices: {_devices_hint(dec, tp, mem, hw)})" if mem["device_bytes"] else ""))
    cov = main.inspection.coverage()
    if not cov["complete"]:  # the phase's figures are the scored nodes' only: said first, where they are read
        out["partial"] = (f"{cov['nodes_unscored']} of {cov['nodes_total']} nodes of the step are NOT scored: the "
                          "figures below leave them out (the report's NOT scored list says why)")
    if with_fixes:
        from dnnperf.llm.fixes import llm_fixes

        out["fixes"] = llm_fixes(main, out, dec, hw)
    return main, out


def _devices_hint(dec, tp: int, mem: dict, hw) -> str:
    """The smallest tensor-parallel split that would hold the request among the splits the KV heads allow,
    taking the weights and activations as split over the devices (the replicated norms and embedding are a
    small share) and the cache over the key/value heads' share (``parallel.kv_ways``)."""
    heads = sorted(parallel.kv_head_counts(dec.cache))
    rest = (mem["weights_bytes"] + mem["activation_bytes"]) * tp
    cache = mem["cache_bytes"] * parallel.kv_ways(tp, dec.cache)
    for n in range(tp + 1, 4097):
        if not all(h % n == 0 or n % h == 0 for h in heads):
            continue
        each = rest / n + cache / parallel.kv_ways(n, dec.cache)
        if each <= mem["device_bytes"]:
            joined = hw.interconnect.get("devices")
            over = (f", more than the {joined} its link joins: the collectives would cross the network"
                    if joined and n > joined else "")
            return f"--tp {n} would hold about {each / 1e9:.1f} GB on each of {n} devices{over}"
    return f"no tensor-parallel split of its {heads[0] if heads else '?'} key/value heads holds it"


def _parallel_figures(hw, req: PhaseRequest, out: dict, coll, counts: dict, kv: int) -> dict:
    """The tensor-parallel section: the devices, the collectives of the main phase's step (decode's, or
    the prefill's) and their time, the link assumed; ``kv``: the devices the cache is spread over."""
    ph = "decode" if "decode" in out else "prefill"
    gbs, latency, assumed = parallel.link(hw, req.tp)
    t = coll.seconds(gbs, latency)
    # a model with fewer key/value heads than devices holds each head on tp / kv of them
    copies = {"key_value_head_copies": req.tp // kv} if kv < req.tp else {}
    return {"devices": req.tp, "phase": ph, **copies, "all_reduces_per_step": len(coll.all_reduce),
            "all_gathers_per_step": len(coll.all_gather),
            "bytes_per_step": sum(coll.all_reduce) + sum(coll.all_gather), "collective_seconds_per_step": t,
            "share_of_step": t / out[ph]["latency_s"], "link_gbs": gbs, "latency_us": latency,
            "layers": {k: counts[k] for k in sorted(counts)}, "assumed": assumed,
            "convention": "figures are one device's: its share of every split layer, every replicated layer whole; "
                          "a step's time adds its collectives (ring all-reduce: 2 (n - 1) / n of the bytes a device)"}


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
            "tensor_parallel_devices": req.tp,  # needed_bytes, latency and TOP/s are one device's when > 1
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
            "phase": rows[0]["phase"] if rows else req.phase, "tensor_parallel_devices": req.tp, "rows": rows,
            "summary": {"compute_bound_from_batch": compute_from, "fits_up_to_batch": fit_max,
                        "best_batch": best["batch"] if best else None,
                        "best_tokens_per_s": best["tokens_per_s"] if best else None}}
