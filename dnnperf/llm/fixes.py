"""The article's fixes made concrete for LLM serving: each one with its saving on this model and
device, computed from the phase's own report (no new measurements), and the assumptions it makes.

- bigger batch (continuous batching): decode reads every weight once per step whatever the batch
  (a mixture of experts: the experts its tokens reach, more at a larger batch) and each sequence's
  cache; the batch at which a step's arithmetic intensity reaches the device's ridge point is where
  it stops being memory-bound.
- weight-only quantisation (int8 / int4): fewer weight bytes per step.
- KV-cache quantisation (fp8 / int8): fewer cache bytes per step.
- grouped-query attention: fewer KV heads, fewer cache bytes (needs a model trained that way).
- fused attention (FlashAttention-style): the [batch, heads, S, T] score matrix never reaches DRAM.
- speculative decoding: a small draft model proposes tokens the big one verifies in one pass.
"""

from __future__ import annotations

from dnnperf.capacity import board_dies, die_memory
from dnnperf.ir import DTYPE_BITS
from dnnperf.ops.experts import step_weights

_MATRIX = ("MatMul", "Gemm", "com.microsoft:MatMulNBits", "MatMulNBits", "FusedMatMul")
# speculative decoding: the assumptions it is priced with (stated in the fix)
SPEC_DRAFT_TOKENS = 4
SPEC_ACCEPTANCE = 0.7
SPEC_DRAFT_COST = 0.05  # a draft step's time as a share of the target's


def _bw(report) -> float:
    from dnnperf import gpu

    hw = report.score.hw
    eff = gpu.library_of(hw).bandwidth_efficiency if hw.kind == "gpu" else 1.0
    return hw.dram_bps * eff


def _fix(fid: str, difficulty: str, text: str, saving_s: float, assumes: str = "") -> dict:
    return {"id": fid, "difficulty": difficulty, "text": text, "saving_s": max(0.0, saving_s), "assumes": assumes}


def llm_fixes(report, d: dict, dec, hw) -> list[dict]:
    from dnnperf.fmt import b as nbytes, t as tfmt

    fixes: list[dict] = []
    phase = "decode" if "decode" in d else "prefill"
    step = d[phase]["latency_s"]
    batch = d["batch"]
    tot = report.score.totals
    bw = _bw(report)
    weights = tot["weight_bytes"]
    # the precision the matrix layers run in (the model's own when no -p was given)
    prec = report.score.settings.precision or max(
        ((c.time_s, c.precision) for c in report.score.layers if c.layer.workload.is_matrix), default=(0, "fp32"))[1]
    ridge = hw.ridge_point(prec)
    if phase == "decode":
        ops1 = tot["ops"] / batch  # ops per sequence per step
        # cache bytes one sequence reads per step (an encoder-decoder's cross-attention caches too)
        kv = d["kv_cache"]  # (at the precision scored)
        cs = kv["bytes_per_token"] * (d["decode"]["context"] + 1) + kv.get("cross_attention_bytes", 0) / batch
        # over --tp devices each holds and reads its heads' share (the whole of one head when the model has
        # fewer key/value heads than devices: memory.cache_devices)
        cs /= d["memory"].get("cache_devices", 1)
        # each die of a multi-die board holds the weights and the cache of its share of the batch
        cap, dies = die_memory(hw), board_dies(hw)
        held = d["memory"]["weights_bytes"]  # each weight once (``weights``: what a step reads)
        max_b = int((cap - held) // cs) * dies if cap and cs and cap > held else None

        def read_at(b: float) -> float:
            """Weight bytes a step reads at batch ``b``: a mixture of experts reaches more experts."""
            return step_weights([c.layer for c in report.score.layers], report.inspection.graph, b / batch)

        if ops1 > ridge * cs and ridge > 0:
            b_star = ridge * weights / (ops1 - ridge * cs)
            for _ in range(4):  # the weights read grow with the batch (experts): settle the batch they allow
                b_star = ridge * read_at(b_star) / (ops1 - ridge * cs)
            where = f"decode stays memory-bound up to batch ~{b_star:.0f} (the ridge point, {ridge:.0f} ops/byte)"
        else:
            b_star = None
            where = "the cache traffic alone keeps decode memory-bound at any batch"
        lim = f"; memory holds batch <= {max_b} at this context" if max_b is not None else ""
        if d["decode"]["bound"] in ("memory", "overhead"):
            # a bigger step reads more: each sequence's cache and, in a mixture of experts, more experts;
            # the bytes it adds come at the bandwidth kernels reach, on top of the step's own time
            target = int(min(b_star or 64, max_b or 10**9, 256))
            if target > batch:
                w_t = read_at(target)
                slower = 1 + max(0.0, (w_t + target * cs) - (weights + batch * cs)) / bw / step
                if slower < 1.1:
                    gain = f"serves ~{target / batch:.0f}x the tokens per second at nearly the same time per token"
                else:
                    gain = (f"serves ~{target / batch / slower:.0f}x the tokens per second at ~{slower:.1f}x the time per "
                            f"token (each step reads {nbytes(w_t)} of weights and {nbytes(target * cs)} of cache "
                            f"instead of {nbytes(weights)} and {nbytes(batch * cs)}"
                            + ("; a mixture of experts reaches more of its experts as the batch grows)"
                               if w_t > 1.05 * weights else ")"))
                fixes.append(_fix("bigger_batch", "Easy",
                                  f"continuous batching: {where}{lim}; batch {batch} -> {target} {gain}", 0.0,
                                  "the step stays memory-bound up to that batch; the bytes it adds (cache, experts) "
                                  "cost their time at the bandwidth kernels reach"))
        wbits = _weight_bits(report)
        if wbits >= 16:
            for bits, name in ((8, "int8"), (4, "int4")):
                save = weights * (1 - bits / wbits) / bw
                fixes.append(_fix("weight_quantization", "Depends on library support",
                                  f"weight-only {name} (e.g. GPTQ/AWQ, MatMulNBits): weights {nbytes(weights)} -> "
                                  f"{nbytes(weights * bits / wbits)} per step, ~{tfmt(save)} less per token "
                                  f"({tfmt(step)} -> {tfmt(max(step - save, 0))})", save,
                                  "the step is memory-bound and dequantisation hides behind the loads"))
        cbits = DTYPE_BITS.get(kv["dtype"], 16)
        if cbits > 8:
            save = batch * cs * (1 - 8 / cbits) / bw
            fixes.append(_fix("kv_cache_quantization", "Depends on library support",
                              f"fp8/int8 KV cache: {nbytes(batch * cs)} -> {nbytes(batch * cs * 8 / cbits)} read per step, "
                              f"~{tfmt(save)} less per token, and {cbits // 8}x the tokens fit in the same memory", save,
                              "the attention kernels read the quantised cache directly"))
        heads_kv, hidden = _kv_heads_and_hidden(report, dec)
        if heads_kv and hidden and heads_kv * (dec.cache[0].dims[-1] if dec.cache else 0) == hidden and heads_kv >= 8:
            g = 8
            save = batch * cs * (1 - g / heads_kv) / bw
            fixes.append(_fix("grouped_query_attention", "Advanced",
                              f"grouped-query attention with {g} KV heads instead of {heads_kv}: cache {heads_kv // g}x smaller "
                              f"(~{tfmt(save)} less per token, {heads_kv // g}x the batch in memory); needs a model trained "
                              "or uptrained that way", save))
        if d["decode"]["bound"] == "memory":
            k, a, c = SPEC_DRAFT_TOKENS, SPEC_ACCEPTANCE, SPEC_DRAFT_COST
            tokens = (1 - a ** (k + 1)) / (1 - a)
            speed = tokens / (1 + k * c)
            fixes.append(_fix("speculative_decoding", "Advanced",
                              f"speculative decoding: a draft model proposes {k} tokens, the model verifies them in one "
                              f"memory-bound pass: ~{tokens:.2f} tokens per pass, ~{speed:.1f}x tokens/s per sequence "
                              f"({tfmt(step)} -> {tfmt(step / speed)} per token)", step - step / speed,
                              f"acceptance rate {a}, draft step {c:.0%} of the model's, verifying {k + 1} tokens costs one "
                              "decode step (memory-bound); real gains depend on how well the draft predicts the model"))
    scores = _score_matrix_layers(report)
    if scores:
        t_s = sum(c.time_s for c in scores)
        moved = sum(c.layer.workload.bytes_total for c in scores)
        fixes.append(_fix("fused_attention", "Easy with a library (FlashAttention, fused SDPA kernels)",
                          f"fused attention: {len(scores)} layers around the score matrices move {nbytes(moved)} "
                          f"({tfmt(t_s)}); a FlashAttention-style kernel keeps the scores on chip", t_s,
                          "the fused kernel's math hides behind its loads of Q, K and V"))
    return sorted(fixes, key=lambda f: (-f["saving_s"], f["id"]))


def _weight_bits(report) -> int:
    """Bits per weight element of the matrix layers (4 for packed 4-bit MatMulNBits)."""
    for c in report.score.layers:
        w = c.layer.workload
        if c.layer.op_type in ("MatMulNBits", "com.microsoft:MatMulNBits") and w.macs:
            return 4
        if c.layer.op_type in ("MatMul", "Gemm") and w.weight_bytes and w.gemm is not None:
            return int(round(8 * w.weight_bytes / (w.gemm.n * w.gemm.k)))
    return 16


def _kv_heads_and_hidden(report, dec):
    c = dec.cache[0] if dec.cache else None
    if c is None or len(c.dims) != 4:
        return None, None
    heads = c.dims[1] if isinstance(c.dims[1], int) else None
    hidden = None
    for lc in report.score.layers:
        if lc.layer.op_type == "Gather" and lc.layer.output_shape:
            hidden = lc.layer.output_shape[-1]
            break
    return heads, hidden


def _score_matrix_layers(report) -> list:
    """Non-matrix layers whose output is an attention score matrix [B, heads, S, T] with T > 1
    (scale, mask, softmax): the traffic a fused attention kernel removes. Scores come from Q K^T: a
    MatMul of the network has the same output shape (the shapes gathered once: a scan of every layer
    per candidate took 0.15 s on an 80-layer decoder)."""
    products = {tuple(c.layer.output_shape) for c in report.score.layers
                if c.layer.op_type == "MatMul" and c.layer.output_shape}
    out = []
    for c in report.score.layers:
        shp = c.layer.output_shape
        if not shp or len(shp) != 4 or c.layer.op_type in _MATRIX:
            continue
        if c.layer.op_type in ("Softmax", "Mul", "Div", "Add", "Where", "Cast") and shp[3] > 1 and shp[1] > 1 \
                and tuple(shp) in products:
            out.append(c)
    return out
