"""Mixture-of-experts layers (ONNX Runtime's com.microsoft MoE and QMoE) against hand calculation:
MACs of the experts a token is routed to, the weights a step reads under even routing and the ones
it holds, packed weights, shapes that contradict each other, and a Mixtral skeleton's parameters
against the published counts."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper
from typer.testing import CliRunner

from dnnperf.api import inspect_model
from dnnperf.cli import app
from dnnperf.ir import ShapeOverrides
from dnnperf.llm.skeleton import PRESETS
from dnnperf.ops.experts import experts_reached
from helpers import model, save, vi, weight

H, I, E, K = 64, 128, 8, 2  # hidden, expert MLP width, experts, experts a token


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def moe_model(tokens: int, experts_in_weights: int = E, bits: int = 0):
    """A router product [tokens, 64] x [64, 8] and a top-2 MoE of 8 fused-SwiGLU experts (fc1 [8, 256,
    64]: gate and up; fc2 [8, 64, 128]) in float16; ``bits``: QMoE with weights packed to that width
    and column-wise scales."""
    nodes = [helper.make_node("MatMul", ["x", "wg"], ["logits"]),
             helper.make_node("Reshape", ["logits", "shp"], ["probs"])]
    inits = [weight("wg", [H, E], T.FLOAT16), onnx.numpy_helper.from_array(__import__("numpy").array([-1, E]), "shp")]
    attrs = dict(k=K, activation_type="swiglu", swiglu_fusion=1)
    n = experts_in_weights
    if bits:
        inits += [weight("fc1", [n, 2 * I, H * bits // 8], T.UINT8), weight("s1", [n, 2 * I], T.FLOAT16),
                  weight("fc2", [n, H, I * bits // 8], T.UINT8), weight("s2", [n, H], T.FLOAT16)]
        nodes.append(helper.make_node("QMoE", ["x", "probs", "fc1", "s1", "", "fc2", "s2"], ["y"], domain="com.microsoft",
                                      expert_weight_bits=bits, **attrs))
    else:
        inits += [weight("fc1", [n, 2 * I, H], T.FLOAT16), weight("fc2", [n, H, I], T.FLOAT16)]
        nodes.append(helper.make_node("MoE", ["x", "probs", "fc1", "", "fc2"], ["y"], domain="com.microsoft", **attrs))
    return model(nodes, [vi("x", [1, tokens, H], T.FLOAT16)], [vi("y", None, T.FLOAT16)], inits,
                 extra_opsets=(("com.microsoft", 1),))


def moe_row(path):
    insp = inspect_model(path, ShapeOverrides())
    assert insp.coverage()["complete"], insp.unsupported
    return next(r for r in insp.rows if r.node.op_type in ("MoE", "QMoE"))


def test_experts_reached_under_even_routing_by_hand():
    # one token picks 2 of 8: 2 reached; two tokens: 8 x (1 - (6/8)^2) = 3.5; many: all 8
    assert experts_reached(8, 2, 1) == pytest.approx(2.0)
    assert experts_reached(8, 2, 2) == pytest.approx(3.5)
    assert experts_reached(8, 2, 512) == pytest.approx(8.0)
    assert experts_reached(8, 8, 1) == pytest.approx(8.0)


def test_a_decoded_token_reads_the_experts_it_is_routed_to_and_the_device_holds_them_all(tmp_path):
    """One token, top-2 of 8 experts: MACs 2 x (256 x 64 + 64 x 128) = 49,152; weights 8 x 24,576
    elements x 2 B = 393,216 B held, 2 of 8 experts read = 98,304 B; the report's memory holds every
    expert and the router's 64 x 8 x 2 B = 1,024 B: 394,240 B; the layer says what it assumed."""
    p = save(moe_model(1), tmp_path, "moe1.onnx")
    w = moe_row(p).workload
    assert w.macs == 49_152
    assert (w.weight_bytes, w.weights_unread) == (98_304, 294_912)
    assert w.launches == 6  # routing, permutation, fc1, the SwiGLU, fc2, the combine
    r = cli("analyze", p, "--hw", "a100", "-f", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["memory"]["weights_bytes"] == 394_240
    assert d["coverage"]["complete"] is True
    assert any("top-2 of 8 experts reach ~2.0 of them" in x and "25% of the layer's" in x for x in d["warnings"]), d["warnings"]
    # 64 tokens reach every expert: all of them read, no assumption left to state
    w64 = moe_row(save(moe_model(64), tmp_path, "moe64.onnx")).workload
    assert w64.macs == 64 * 49_152 and (w64.weight_bytes, w64.weights_unread) == (393_216, 0) and not w64.note


def test_packed_experts_cost_their_bytes_and_the_dequantisation(tmp_path):
    """QMoE with 4-bit weights: fc1 [8, 256, 32] uint8 = 65,536 B, fc2 [8, 64, 64] = 32,768 B, scales
    8 x 256 x 2 + 8 x 64 x 2 = 5,120 B: 103,424 B, a quarter read for one token (25,856 B); the
    same 49,152 MACs as in float16, and 2 ops a weight element read to dequantise (2 x 2 x 24,576)."""
    w = moe_row(save(moe_model(1, bits=4), tmp_path, "q.onnx")).workload
    f = moe_row(save(moe_model(1), tmp_path, "f.onnx")).workload
    assert w.macs == 49_152
    assert (w.weight_bytes, w.weights_unread) == (25_856, 103_424 - 25_856)
    assert w.other_ops - f.other_ops == 2 * 2 * 24_576


def test_experts_the_router_does_not_rank_are_a_contradiction(tmp_path):
    """fc1 / fc2 of 4 experts under a router over 8: ONNX Runtime refuses the node; it is listed."""
    insp = inspect_model(save(moe_model(1, experts_in_weights=4), tmp_path, "bad.onnx"), ShapeOverrides())
    bad = [u for u in insp.unsupported if u["op_type"] == "com.microsoft:MoE"]
    assert bad and bad[0]["kind"] == "contradiction" and "8 experts" in bad[0]["reason"], insp.unsupported


def test_mixtral_skeleton_matches_its_published_parameters_and_reads_its_active_ones(tmp_path):
    """Mixtral 8x7B (Mistral AI's announcement): 46.7 B parameters, 12.9 B used per token. By hand: per
    layer 2 x 4096^2 + 2 x 4096 x 1024 (attention) + 8 x 3 x 4096 x 14336 (experts) + 4096 x 8 (router)
    + 2 x 4096 (norms) = 1,451,270,144; x 32 + 2 x 32000 x 4096 + 4096 = 46,702,792,704; a token reads
    6 experts a layer fewer: - 32 x 6 x 3 x 4096 x 14336 = 12,879,925,248. A decode step on an H200
    holds them all in fp16 (2 B each; the rows of the rotary tables a step reads are folded at fixed
    dims, a few KB with the shape constants) and reads the active
    ones but the embedding table's unpicked rows: 2 x (12,879,925,248 - 32,000 x 4,096) B."""
    cfg = PRESETS["mixtral-8x7b"]
    assert cfg.params() == 46_702_792_704 and cfg.active_params() == 12_879_925_248
    p = tmp_path / "mixtral.onnx"
    r = cli("llm", "skeleton", "--preset", "mixtral-8x7b", "-o", p)
    assert r.exit_code == 0 and "46.7 B parameters (8 experts a layer, 2 a token: 12.9 B read per token)" in r.stderr, r.output
    r = cli("analyze", p, "--hw", "h200", "--phase", "decode", "--prompt", "512", "-f", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    rep = d["reports"][0] if "reports" in d else d
    held = rep["llm"]["memory"]["weights_bytes"]
    assert 0 <= held - 2 * 46_702_792_704 < 100_000, held
    read = rep["totals"]["weight_bytes"]
    assert abs(read - 2 * (12_879_925_248 - 32_000 * 4_096)) < 1e-3 * read, read
    # a bigger batch reaches every expert: 256 tokens of top-2 of 8 leave none unread, so a step reads
    # all 2 x (46,702,792,704 - 32,000 x 4,096 + 256 x 4,096) B = 93.1 GB instead of 25.5 GB
    text = next(f["text"] for f in rep["llm"]["fixes"] if f["id"] == "bigger_batch")
    assert "reads 93.1 GB of weights" in text and "instead of 25.5 GB" in text, text
    assert "a mixture of experts reaches more of its experts as the batch grows" in text, text
    # on an H100's 80 GB the fp16 weights alone do not fit: refused, one line
    r = cli("analyze", p, "--hw", "h100", "--phase", "decode")
    assert r.exit_code == 2 and "does not fit h100's 80 GB" in r.stderr, r.output
    # ... and names the tensor-parallel split that holds its 93.48 GB: 2 devices (the 8 KV heads divide by
    # 2), 93.48 / 2 = 46.7 GB each
    assert "--tp 2 would hold about 46.7 GB on each of 2 devices" in r.stderr, r.stderr
    # which runs: each H100 holds the replicated embedding table, router and norms whole and half of every
    # expert and attention weight (and of the output projection's columns): more than half the 93.4 GB,
    # less than half plus the whole 32,000 x 4,096 fp16 embedding table
    r = cli("analyze", p, "--hw", "h100", "--phase", "decode", "--tp", "2", "-f", "json")
    assert r.exit_code == 0, r.output
    tp = json.loads(r.stdout)["llm"]
    held = tp["memory"]["weights_bytes"]
    assert 46_702_792_704 < held < 46_702_792_704 + 2 * 32_000 * 4_096, held
    assert tp["tensor_parallel"]["all_reduces_per_step"] == 2 * 32  # attention's output and the experts', each layer
    assert tp["memory"]["fits"] is True


def test_no_width_what_if_is_made_of_an_expert_layer(tmp_path):
    """The product an MoE is scored as has N = one expert's matrices' widths summed (2 x 128 + 64 x 128
    / 64 = 384): no width a designer sets. `shapes` proposed "384 -> 432" and the wider-layer fix
    "output channels 384 -> 768"; neither is made of it (the router product keeps its own)."""
    p = save(moe_model(64), tmp_path, "moe64.onnx")
    r = cli("shapes", p, "--hw", "a100", "-f", "json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["layers"]
    assert [row["op_type"] for row in rows] == ["MatMul"], rows
    d = json.loads(cli("analyze", p, "--hw", "a100", "-f", "json").stdout)
    moe = next(la for la in d["layers"] if la["op_type"] == "MoE")
    assert not any("output channels" in f["text"] or f["id"] == "shallower_wider" for f in moe["fixes"]), moe["fixes"]
    w = moe_row(p).workload
    assert w.with_width(432) is w


def test_moe_presets_match_their_published_parameter_counts():
    """The model cards: Mixtral 8x22B 141 B parameters, 39 B active; Phi-3.5-MoE 41.9 B, 6.6 B active
    (Llama-style layers, the experts' gate/up/down, a router, no biases, untied embeddings)."""
    big, phi = PRESETS["mixtral-8x22b"], PRESETS["phi-3.5-moe"]
    assert round(big.params() / 1e9) == 141 and round(big.active_params() / 1e9) == 39
    assert round(phi.params() / 1e9, 1) == 41.9 and round(phi.active_params() / 1e9, 1) == 6.6
