"""LLM helpers: llm skeleton (a weightless Llama-architecture decoder with its KV cache)."""


from typing import Annotated, Optional

import typer

from dnnperf.cli.app import Out, Output, Quiet, command, llm_app
from dnnperf.documents import Document
from dnnperf.errors import DnnperfError

_Int = Optional[int]


@command(llm_app, "skeleton", kinds=("model",), no_output=True)
def skeleton(
    output: Output = None,
    preset: Annotated[Optional[str], typer.Option("--preset", help="A published configuration: llama-2-7b, llama-2-13b, "
                                                  "llama-2-70b, llama-3-8b, llama-3-70b, llama-3.1-8b, llama-3.1-70b, llama-3.1-405b, mistral-7b, "
                                                  "tinyllama-1.1b, tiny, mixtral-8x7b, "
                                                  "mixtral-8x22b, phi-3.5-moe, tiny-moe.")] = None,
    layers: Annotated[_Int, typer.Option("--layers", help="Decoder layers.")] = None,
    hidden: Annotated[_Int, typer.Option("--hidden", help="Hidden size.")] = None,
    heads: Annotated[_Int, typer.Option("--heads", help="Attention (query) heads.")] = None,
    kv_heads: Annotated[_Int, typer.Option("--kv-heads", help="Key/value heads (grouped-query attention; default: --heads).")] = None,
    intermediate: Annotated[_Int, typer.Option("--intermediate", help="MLP intermediate size.")] = None,
    vocab: Annotated[_Int, typer.Option("--vocab", help="Vocabulary size.")] = None,
    max_positions: Annotated[_Int, typer.Option("--max-positions", help="Rotary table length.")] = None,
    experts: Annotated[_Int, typer.Option("--experts", help="A mixture of experts in place of each MLP: experts a layer "
                                          "holds (0: a dense MLP).")] = None,
    experts_per_token: Annotated[_Int, typer.Option("--experts-per-token", help="Experts each token is routed to "
                                                    "(default 2).")] = None,
    dtype: Annotated[Optional[str], typer.Option("--dtype", help="fp16 (default), bf16 or fp32.")] = None,
    style: Annotated[str, typer.Option("--style", help="plain (transformers-style plain ops) or genai (ONNX Runtime "
                                       "GenAI: GroupQueryAttention, MatMulNBits).")] = "plain",
    weight_bits: Annotated[int, typer.Option("--weight-bits", help="--style genai: 4 or 8 (MatMulNBits) or 16.")] = 4,
    quiet: Quiet = False,
):
    """Write a weightless ONNX decoder with a KV cache for any Llama-architecture configuration (a
    preset, with any field overridden): analyse a 70B model without its weights."""
    from dataclasses import replace

    from dnnperf.llm.skeleton import PRESETS, LlamaConfig, skeleton_bytes

    if output is None:
        raise DnnperfError("llm skeleton needs -o FILE.onnx")
    given = {"layers": layers, "hidden": hidden, "heads": heads, "kv_heads": kv_heads, "intermediate": intermediate,
             "vocab": vocab, "max_positions": max_positions, "dtype": dtype, "experts": experts,
             "experts_per_token": experts_per_token}
    if preset is not None:
        if preset not in PRESETS:
            raise DnnperfError(f"unknown preset '{preset}' — one of {', '.join(PRESETS)}")
        cfg = replace(PRESETS[preset], **{k: v for k, v in given.items() if v is not None})
    else:
        missing = [k for k in ("layers", "hidden", "heads", "intermediate", "vocab") if given[k] is None]
        if missing:
            raise DnnperfError(f"pass --preset NAME or all of --{', --'.join(m.replace('_', '-') for m in missing)}")
        cfg = LlamaConfig(layers, hidden, heads, kv_heads or heads, intermediate, vocab,
                          max_positions or 4096, dtype or "fp16", name="llama", experts=experts or 0,
                          experts_per_token=experts_per_token or 2)
    out = Out("llm skeleton", ("model",), "onnx", output, quiet, [])
    data = skeleton_bytes(cfg, style, weight_bits)
    note = (f"wrote {output}: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads ({cfg.kv_heads} KV), "
            f"{cfg.params() / 1e9:.3g} B parameters" +
            (f" ({cfg.experts} experts a layer, {cfg.experts_per_token} a token: {cfg.active_params() / 1e9:.3g} B "
             "read per token)" if cfg.experts else "") + f" as a weightless skeleton ({len(data):,} bytes)")
    out.emit(Document("model", data, notes=(note,)))
