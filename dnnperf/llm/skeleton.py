"""Weightless ONNX skeletons of Llama-architecture decoders with a KV cache, for any configuration.

A 70B model is analysed from its configuration alone: every weight is an initializer with its dims
and dtype and no payload (marked as external data at a location that does not exist, like
``dnnperf strip`` writes). Two export styles:

``plain``  what a plain-op export (transformers -> torch.onnx) produces: RMSNorm as Pow/ReduceMean/
           Add/Sqrt/Div/Mul, rotary embeddings from a sliced cos/sin table, the cache appended with
           Concat, grouped KV heads repeated with Expand, attention as MatMul/Softmax/MatMul, a gated
           SiLU MLP, logits for every position.
``genai``  what ONNX Runtime GenAI's builder produces: SimplifiedLayerNormalization and
           SkipSimplifiedLayerNormalization, GroupQueryAttention (rotary inside), weights as
           MatMulNBits (4-bit blocks of 32 by default), logits for every position.

A mixture-of-experts configuration (``experts`` > 0, Mixtral's) replaces each layer's MLP by a router
product and ONNX Runtime's fused com.microsoft ``MoE`` (16-bit experts, a fused SwiGLU: fc1 holds
gate and up) or, with 4- or 8-bit genai weights, ``QMoE``, in both styles: a plain transformers
export has no static-op form of its per-expert routing loop.

Inputs: ``input_ids`` [batch, sequence_length] and, per layer, ``past_key_values.{i}.key`` / ``.value``
[batch, kv_heads, past_sequence_length, head_dim]; outputs ``logits`` and ``present.{i}.key`` /
``.value`` [batch, kv_heads, total_sequence_length, head_dim].
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dnnperf.errors import DnnperfError
from dnnperf.ir import size_fits


# decoder layers a skeleton may have (Llama-3.1-405B has 126; each layer is ~30 ONNX nodes)
MAX_LAYERS = 1024


@dataclass(frozen=True)
class LlamaConfig:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    max_positions: int = 4096
    dtype: str = "fp16"
    name: str = "llama"
    experts: int = 0  # a mixture of experts in place of each MLP: experts a layer holds (0: a dense MLP)
    experts_per_token: int = 2  # ... and the experts each token is routed to

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def check(self) -> None:
        for k in ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab", "max_positions"):
            v = getattr(self, k)
            if not isinstance(v, int) or v <= 0:
                raise DnnperfError(f"--{k.replace('_', '-')} must be a positive integer, got {v!r}")
            size_fits(v, f"--{k.replace('_', '-')}")
        size_fits(self.experts, "--experts")
        if self.layers > MAX_LAYERS:
            raise DnnperfError(f"--layers {self.layers} is more than {MAX_LAYERS:,} (the deepest published decoders "
                               "have ~130): a skeleton that deep would take minutes and gigabytes to write")
        if self.hidden % self.heads:
            raise DnnperfError(f"--hidden {self.hidden} is not a multiple of --heads {self.heads}")
        if self.heads % self.kv_heads:
            raise DnnperfError(f"--heads {self.heads} is not a multiple of --kv-heads {self.kv_heads}")
        if self.head_dim % 2:
            raise DnnperfError(f"head dimension {self.head_dim} must be even (rotary embeddings rotate pairs)")
        if not isinstance(self.experts, int) or self.experts < 0:
            raise DnnperfError(f"--experts must be 0 (a dense MLP) or more, got {self.experts!r}")
        if self.experts and not (isinstance(self.experts_per_token, int) and 1 <= self.experts_per_token <= self.experts):
            raise DnnperfError(f"--experts-per-token must be between 1 and --experts ({self.experts}), "
                               f"got {self.experts_per_token!r}")
        if self.dtype not in ("fp16", "bf16", "fp32"):
            raise DnnperfError(f"--dtype must be fp16, bf16 or fp32, got {self.dtype!r}")

    def params(self) -> int:
        """Parameters: embeddings + per layer (q, k, v, o, gate, up, down for each expert and a router
        when there are experts, two norms) + final norm + LM head."""
        h, kv = self.hidden, self.kv_heads * self.head_dim
        mlp = 3 * h * self.intermediate * max(self.experts, 1) + h * self.experts
        per_layer = h * h + 2 * h * kv + h * h + mlp + 2 * h
        return self.vocab * h + self.layers * per_layer + h + h * self.vocab

    def active_params(self) -> int:
        """Parameters one token's step reads: the experts it is routed to, not all of them."""
        if not self.experts:
            return self.params()
        return self.params() - self.layers * 3 * self.hidden * self.intermediate * (self.experts - self.experts_per_token)


# Published configurations (the models' config.json on their model cards)
PRESETS = {
    "llama-2-7b": LlamaConfig(32, 4096, 32, 32, 11008, 32000, 4096, name="llama-2-7b"),
    "llama-2-13b": LlamaConfig(40, 5120, 40, 40, 13824, 32000, 4096, name="llama-2-13b"),
    "llama-2-70b": LlamaConfig(80, 8192, 64, 8, 28672, 32000, 4096, name="llama-2-70b"),
    "llama-3-8b": LlamaConfig(32, 4096, 32, 8, 14336, 128256, 8192, name="llama-3-8b"),
    "llama-3-70b": LlamaConfig(80, 8192, 64, 8, 28672, 128256, 8192, name="llama-3-70b"),
    # Llama 3.1: the Llama 3 shapes with a 131,072-position rope table, and the 405B
    "llama-3.1-8b": LlamaConfig(32, 4096, 32, 8, 14336, 128256, 131072, name="llama-3.1-8b"),
    "llama-3.1-70b": LlamaConfig(80, 8192, 64, 8, 28672, 128256, 131072, name="llama-3.1-70b"),
    "llama-3.1-405b": LlamaConfig(126, 16384, 128, 8, 53248, 128256, 131072, name="llama-3.1-405b"),
    "mistral-7b": LlamaConfig(32, 4096, 32, 8, 14336, 32000, 32768, name="mistral-7b"),
    "tinyllama-1.1b": LlamaConfig(22, 2048, 32, 4, 5632, 32000, 2048, name="tinyllama-1.1b"),
    "tiny": LlamaConfig(2, 256, 8, 2, 688, 1024, 8192, name="tiny-llama"),
    "mixtral-8x7b": LlamaConfig(32, 4096, 32, 8, 14336, 32000, 32768, name="mixtral-8x7b", experts=8,
                                experts_per_token=2),
    "mixtral-8x22b": LlamaConfig(56, 6144, 48, 8, 16384, 32768, 65536, name="mixtral-8x22b", experts=8,
                                 experts_per_token=2),
    "phi-3.5-moe": LlamaConfig(32, 4096, 32, 8, 6400, 32064, 131072, name="phi-3.5-moe", experts=16,
                               experts_per_token=2),
    "tiny-moe": LlamaConfig(2, 256, 8, 2, 688, 1024, 8192, name="tiny-moe", experts=4, experts_per_token=2),
}

_ONNX_DTYPE = {"fp16": 10, "bf16": 16, "fp32": 1}


class _Builder:
    def __init__(self, cfg: LlamaConfig, style: str):
        from onnx import helper

        self.h = helper
        self.cfg = cfg
        self.style = style
        self.dt = _ONNX_DTYPE[cfg.dtype]
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def node(self, op: str, ins: list, outs: int | list = 1, domain: str = "", name: str | None = None, **attrs):
        outs = [self.name(op.lower()) for _ in range(outs)] if isinstance(outs, int) else outs
        self.nodes.append(self.h.make_node(op, ins, outs, name=name or self.name(op), domain=domain, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def weight(self, name: str, dims: list, dtype: int | None = None) -> str:
        """An initializer with dims and dtype and no payload."""
        from onnx import TensorProto

        from dnnperf.load.read import clear_payload

        t = TensorProto()
        t.name, t.data_type = name, self.dt if dtype is None else dtype
        t.dims.extend(int(d) for d in dims)
        clear_payload(t)
        self.inits.append(t)
        return name

    def const(self, name: str, values, dtype=np.int64) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.asarray(values, dtype=dtype), name))
        return name


def _rms_plain(b: _Builder, x: str, w: str) -> str:
    sq = b.node("Pow", [x, "two"])
    mean = b.node("ReduceMean", [sq], axes=[-1], keepdims=1)
    var = b.node("Add", [mean, "eps"])
    std = b.node("Sqrt", [var])
    return b.node("Mul", [b.node("Div", [x, std]), w])


def _rotate(b: _Builder, x: str, cos: str, sin: str, half: int) -> str:
    x1 = b.node("Slice", [x, "zero1", "half1", "minus1"])
    x2 = b.node("Slice", [x, "half1", "big1", "minus1"])
    rot = b.node("Concat", [b.node("Neg", [x2]), x1], axis=-1)
    return b.node("Add", [b.node("Mul", [x, cos]), b.node("Mul", [rot, sin])])


def build_model(cfg: LlamaConfig, style: str = "plain", weight_bits: int = 4):
    """The ModelProto of a weightless decoder (see the module docstring). ``weight_bits`` (genai
    style): 4 or 8 for MatMulNBits weights, 16 for plain MatMuls at the model's dtype."""
    from onnx import TensorProto, helper

    cfg.check()
    if style not in ("plain", "genai"):
        raise DnnperfError(f"--style must be plain or genai, got {style!r}")
    if weight_bits not in (4, 8, 16):
        raise DnnperfError(f"--weight-bits must be 4, 8 or 16, got {weight_bits}")
    b = _Builder(cfg, style)
    b.bits = weight_bits
    h, nh, nkv, d, inter = cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.intermediate
    dt = b.dt
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", dt, ["batch", "sequence_length", cfg.vocab])]
    cache_shape = ["batch", nkv, "past_sequence_length", d]
    present_shape = ["batch", nkv, "total_sequence_length", d]
    x = b.node("Gather", [b.weight("model.embed_tokens.weight", [cfg.vocab, h]), "input_ids"], axis=0)
    if style == "plain":
        b.inits.append(helper.make_tensor("two", dt, [], [2.0]))
        b.inits.append(helper.make_tensor("eps", dt, [], [1e-5]))
        b.inits.append(helper.make_tensor("scale", dt, [], [1.0 / float(np.sqrt(d))]))
        b.const("zero1", [0])
        b.const("half1", [d // 2])
        b.const("big1", [1 << 62])
        b.const("minus1", [-1])
        b.const("two1", [2])
        b.const("three1", [3])
        # positions past .. past + seq of the cos/sin tables: slice them by the cache's length
        past0 = b.node("Shape", ["past_key_values.0.key"], start=2, end=3)
        seq = b.node("Shape", ["input_ids"], start=1, end=2)
        end = b.node("Add", [past0, seq])
        cos = b.node("Slice", [b.weight("rotary.cos_cache", [cfg.max_positions, d]), past0, end, "zero1"])
        sin = b.node("Slice", [b.weight("rotary.sin_cache", [cfg.max_positions, d]), past0, end, "zero1"])
        rep = b.const("kv_repeat", [1, 1, nh // nkv, 1, 1])
    else:
        cos = b.weight("rotary.cos_cache", [cfg.max_positions, d // 2])
        sin = b.weight("rotary.sin_cache", [cfg.max_positions, d // 2])
        inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total_sequence_length"]))
        # seqlens_k and total_sequence_length as GenAI's graphs derive them from the attention mask
        ms = b.node("ReduceSum", ["attention_mask", b.const("one_axis", [1])], keepdims=0)
        seqlens = b.node("Cast", [b.node("Sub", [ms, b.const("one64", 1)])], to=TensorProto.INT32)
        total = b.node("Cast", [b.node("Shape", ["attention_mask"], start=1, end=2)], to=TensorProto.INT32)
        total = b.node("Squeeze", [total, b.const("zero_axis", [0])])
    for i in range(cfg.layers):
        p = f"model.layers.{i}"
        pk, pv = f"past_key_values.{i}.key", f"past_key_values.{i}.value"
        ok, ov = f"present.{i}.key", f"present.{i}.value"
        inputs += [helper.make_tensor_value_info(pk, dt, cache_shape), helper.make_tensor_value_info(pv, dt, cache_shape)]
        outputs += [helper.make_tensor_value_info(ok, dt, present_shape), helper.make_tensor_value_info(ov, dt, present_shape)]
        if style == "plain":
            hn = _rms_plain(b, x, b.weight(f"{p}.input_layernorm.weight", [h]))
            q = b.node("MatMul", [hn, b.weight(f"{p}.self_attn.q_proj.weight", [h, nh * d])])
            k = b.node("MatMul", [hn, b.weight(f"{p}.self_attn.k_proj.weight", [h, nkv * d])])
            v = b.node("MatMul", [hn, b.weight(f"{p}.self_attn.v_proj.weight", [h, nkv * d])])
            q = b.node("Transpose", [b.node("Reshape", [q, b.const(f"{p}.q_shape", [0, 0, nh, d])])], perm=[0, 2, 1, 3])
            k = b.node("Transpose", [b.node("Reshape", [k, b.const(f"{p}.k_shape", [0, 0, nkv, d])])], perm=[0, 2, 1, 3])
            v = b.node("Transpose", [b.node("Reshape", [v, b.const(f"{p}.v_shape", [0, 0, nkv, d])])], perm=[0, 2, 1, 3])
            q = _rotate(b, q, cos, sin, d // 2)
            k = _rotate(b, k, cos, sin, d // 2)
            kall = b.node("Concat", [pk, k], [ok], axis=2)
            vall = b.node("Concat", [pv, v], [ov], axis=2)
            if nkv != nh:  # repeat_kv: [B, kv, T, d] -> [B, kv, g, T, d] -> [B, heads, T, d]
                def repeat(t, tag):
                    t5 = b.node("Unsqueeze", [t, b.const(f"{p}.{tag}_axis", [2])])
                    shp = b.node("Mul", [b.node("Shape", [t5]), rep])
                    return b.node("Reshape", [b.node("Expand", [t5, shp]), b.const(f"{p}.{tag}_rep", [0, nh, -1, d])])
                kall, vall = repeat(kall, "k"), repeat(vall, "v")
            kt = b.node("Transpose", [kall], perm=[0, 1, 3, 2])
            scores = b.node("Mul", [b.node("MatMul", [q, kt]), "scale"])
            probs = b.node("Softmax", [scores], axis=-1)
            ctx = b.node("MatMul", [probs, vall])
            ctx = b.node("Reshape", [b.node("Transpose", [ctx], perm=[0, 2, 1, 3]), b.const(f"{p}.o_shape", [0, 0, h])])
            x = b.node("Add", [x, b.node("MatMul", [ctx, b.weight(f"{p}.self_attn.o_proj.weight", [nh * d, h])])])
            hn = _rms_plain(b, x, b.weight(f"{p}.post_attention_layernorm.weight", [h]))
            if cfg.experts:
                x = b.node("Add", [x, _experts(b, hn, p)])
                continue
            gate = b.node("MatMul", [hn, b.weight(f"{p}.mlp.gate_proj.weight", [h, inter])])
            up = b.node("MatMul", [hn, b.weight(f"{p}.mlp.up_proj.weight", [h, inter])])
            act = b.node("Mul", [b.node("Mul", [gate, b.node("Sigmoid", [gate])]), up])
            x = b.node("Add", [x, b.node("MatMul", [act, b.weight(f"{p}.mlp.down_proj.weight", [inter, h])])])
        else:
            hn = b.node("SimplifiedLayerNormalization", [x, b.weight(f"{p}.input_layernorm.weight", [h])],
                        axis=-1, epsilon=1e-5)
            qkv = _nbits(b, hn, f"{p}.attn.qkv_proj", h, (nh + 2 * nkv) * d)
            attn, _, _ = b.node("GroupQueryAttention", [qkv, "", "", pk, pv, seqlens, total, cos, sin],
                                [b.name("attn"), ok, ov], domain="com.microsoft", num_heads=nh, kv_num_heads=nkv,
                                do_rotary=1, scale=1.0 / float(np.sqrt(d)))
            o = _nbits(b, attn, f"{p}.attn.o_proj", nh * d, h)
            hn, _, _, x = b.node("SkipSimplifiedLayerNormalization",
                                 [o, x, b.weight(f"{p}.post_attention_layernorm.weight", [h])],
                                 [b.name("hn"), b.name("unused"), b.name("unused"), b.name("resid")],
                                 domain="com.microsoft", epsilon=1e-5)
            if cfg.experts:
                x = b.node("Add", [x, _experts(b, hn, p)])
                continue
            gate = _nbits(b, hn, f"{p}.mlp.gate_proj", h, inter)
            up = _nbits(b, hn, f"{p}.mlp.up_proj", h, inter)
            act = b.node("Mul", [b.node("Mul", [gate, b.node("Sigmoid", [gate])]), up])
            x = b.node("Add", [x, _nbits(b, act, f"{p}.mlp.down_proj", inter, h)])
    if style == "plain":
        xn = _rms_plain(b, x, b.weight("model.norm.weight", [h]))
    else:
        xn = b.node("SimplifiedLayerNormalization", [x, b.weight("model.norm.weight", [h])], axis=-1, epsilon=1e-5)
    b.node("MatMul", [xn, b.weight("lm_head.weight", [h, cfg.vocab])], ["logits"])
    graph = helper.make_graph(b.nodes, cfg.name, inputs, outputs, initializer=b.inits)
    opsets = [helper.make_opsetid("", 17)]
    if style == "genai" or cfg.experts:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    m = helper.make_model(graph, opset_imports=opsets, producer_name="dnnperf llm skeleton")
    m.ir_version = 8
    meta = m.metadata_props.add()
    meta.key, meta.value = "dnnperf.llm_config", repr(sorted(asdict(cfg).items()))
    return m


def _experts(b: _Builder, x: str, p: str) -> str:
    """A mixture-of-experts MLP: the router's logits ([tokens, experts]) and ONNX Runtime's fused
    SwiGLU experts (fc1: gate and up interleaved, [E, 2 x inter, hidden]; fc2: [E, hidden, inter]);
    ``QMoE`` with column-wise scales when the builder packs weights to 4 or 8 bits."""
    from onnx import TensorProto

    cfg = b.cfg
    h, inter, e = cfg.hidden, cfg.intermediate, cfg.experts
    logits = b.node("MatMul", [x, b.weight(f"{p}.block_sparse_moe.gate.weight", [h, e])])
    probs = b.node("Reshape", [logits, b.const(f"{p}.router_shape", [-1, e])])
    attrs = dict(k=cfg.experts_per_token, activation_type="swiglu", swiglu_fusion=1, normalize_routing_weights=1)
    bits = getattr(b, "bits", 16) if b.style == "genai" else 16
    if bits == 16:
        fc1 = b.weight(f"{p}.experts.fc1.weight", [e, 2 * inter, h])
        fc2 = b.weight(f"{p}.experts.fc2.weight", [e, h, inter])
        return b.node("MoE", [x, probs, fc1, "", fc2], domain="com.microsoft", **attrs)
    fc1 = b.weight(f"{p}.experts.fc1.qweight", [e, 2 * inter, h * bits // 8], TensorProto.UINT8)
    s1 = b.weight(f"{p}.experts.fc1.scales", [e, 2 * inter])
    fc2 = b.weight(f"{p}.experts.fc2.qweight", [e, h, inter * bits // 8], TensorProto.UINT8)
    s2 = b.weight(f"{p}.experts.fc2.scales", [e, h])
    return b.node("QMoE", [x, probs, fc1, s1, "", fc2, s2], domain="com.microsoft", expert_weight_bits=bits, **attrs)


def _nbits(b: _Builder, x: str, name: str, k: int, n: int, block: int = 32) -> str:
    """com.microsoft MatMulNBits: B packed as [N, K / block, block * bits / 8] uint8 with scales [N * K / block];
    a plain MatMul with a [K, N] weight when the builder keeps 16-bit weights."""
    from onnx import TensorProto

    bits = b.bits
    if bits == 16:
        return b.node("MatMul", [x, b.weight(f"{name}.weight", [k, n])])
    blocks = -(-k // block)
    w = b.weight(f"{name}.qweight", [n, blocks, block * bits // 8], TensorProto.UINT8)
    s = b.weight(f"{name}.scales", [n * blocks])
    return b.node("MatMulNBits", [x, w, s], domain="com.microsoft", K=k, N=n, bits=bits, block_size=block)


def skeleton_bytes(cfg: LlamaConfig, style: str = "plain", weight_bits: int = 4) -> bytes:
    return build_model(cfg, style, weight_bits).SerializeToString()
