"""The KV cache of an exported decoder, found in its graph: the cache inputs (transformers-style
``past_key_values.N.key``, ``past_key_N``, GPT-2's ``past_N``, ONNX Runtime GenAI's names; an
encoder-decoder's cross-attention caches, which do not grow), the batch / sequence / past / total
symbols a phase sets, a merged decoder's branch input, and the rotary table that bounds its positions.
``dnnperf.llm.phases`` runs the phases on what this finds.

Conventions: KV cache bytes per token are the growing cache inputs' bytes for one position of one
sequence (all layers, keys and values), at the cache inputs' dtype.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from dnnperf.errors import DnnperfError
from dnnperf.ir import DTYPE_BITS, ShapeOverrides


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

    def fixed_bytes(self, insp, size=None) -> int:
        """Bytes of the cross-attention caches (``CacheInput.grows`` False) in the step ``insp``: the
        encoder's keys and values, held whatever the context (0 for a decoder-only model). ``size``: a
        tensor's bytes (default its own; a precision what-if's, ``dnnperf.api.tensor_size``)."""
        total = 0
        for c in self.cache:
            t = insp.graph.tensors.get(c.name) if not c.grows else None
            if t is not None and t.shape is not None:
                total += t.nbytes if size is None else size(t)
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
    if tokens is None:  # a decoder fed embeddings (inputs_embeds [batch, sequence, hidden]: a multimodal model's
        # language half, optimum's exports with inputs_embeds): its sequence is the embeddings' second dim
        embeds = [n for n, d, t in ins if d is not None and len(d) == 3 and t.startswith(("float", "bfloat"))
                  and isinstance(d[1], str)]
        tokens = next((n for n in embeds if "embed" in n.lower()), embeds[0] if len(embeds) == 1 else None)
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
    if cache and tokens is None:
        raise DnnperfError(f"'{path}' has a KV cache but no input of its new tokens (input_ids [batch, sequence], "
                           "or inputs_embeds [batch, sequence, hidden]) — --phase needs one; pass the step's "
                           "sizes with --dim instead")
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
