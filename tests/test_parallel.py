"""Tensor-parallel decoder steps (``--tp``, dnnperf.llm.parallel) against hand calculation on the
``tiny`` Llama skeleton: 2 layers, hidden 256, 8 query heads and 2 key/value heads of 32, MLP 688,
vocabulary 1,024, float16."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dnnperf.cli import app
from dnnperf.llm.parallel import Collectives


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    p = tmp_path_factory.mktemp("tp") / "tiny.onnx"
    r = cli("llm", "skeleton", "--preset", "tiny", "-o", p)
    assert r.exit_code == 0, r.output
    return p


def decode(path, *extra, hw="h100"):
    r = cli("analyze", path, "--hw", hw, "--phase", "decode", "--context", "16", "-f", "json", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_a_two_way_split_holds_half_of_every_split_weight_and_the_replicated_ones_whole(tiny):
    """Weights by hand: each layer's q, o (256 x 256), k, v (256 x 64), gate, up (256 x 688) and down
    (688 x 256) = 692,224, two layers 1,384,448; the output projection 256 x 1,024 = 262,144; the
    embedding table 262,144 and the five RMSNorm scales 1,280 are replicated. One of 2 devices:
    (1,384,448 + 262,144) / 2 + 262,144 + 1,280 = 1,086,720 parameters = 2,173,440 B (both runs add the
    same few hundred bytes of rotary rows folded at fixed dims). The cache: 2 layers x (K, V) x 2 heads x
    32 x 2 B = 512 B a token, 17 tokens at context 16: 8,704 B, 4,352 B each."""
    whole = decode(tiny)["llm"]
    half = decode(tiny, "--tp", "2")["llm"]
    assert 0 <= whole["memory"]["weights_bytes"] - 2 * 1_910_016 < 400
    assert 0 <= half["memory"]["weights_bytes"] - 2_173_440 < 400
    assert whole["memory"]["cache_bytes"] == 8_704 and half["memory"]["cache_bytes"] == 4_352
    tp = half["tensor_parallel"]
    # per layer q, k, v, gate and up are column-parallel, o and down row-parallel; the output projection too
    assert tp["layers"]["column"] == 2 * 5 + 1 and tp["layers"]["row"] == 2 * 2


def test_a_step_adds_its_all_reduces_at_the_link_bandwidth_and_their_start(tiny):
    """One decoded token: each row-parallel product's output [1, 1, 256] fp16 = 512 B is all-reduced (2
    a layer: 4), the logits [1, 1, 1,024] fp16 = 2,048 B gathered once. Ring over 2 devices: each sends
    2 x 1/2 x 512 B per all-reduce and 1/2 x 2,048 B for the gather = 3,072 B at the H100 profile's
    360 GB/s, plus 5 x 10 us (the gpu default start): 50 us + 8.53 ns. The phase's time per token is
    one device's step plus that."""
    d = decode(tiny, "--tp", "2")
    tp = d["llm"]["tensor_parallel"]
    assert (tp["all_reduces_per_step"], tp["all_gathers_per_step"], tp["bytes_per_step"]) == (4, 1, 4 * 512 + 2_048)
    assert tp["collective_seconds_per_step"] == pytest.approx(50e-6 + 3_072 / 360e9, rel=1e-5)
    assert d["llm"]["decode"]["latency_s"] == pytest.approx(d["totals"]["latency_s"] + 50e-6 + 3_072 / 360e9, rel=1e-5)
    assert "10 us per collective (the gpu default)" in tp["assumed"]
    # the ring's arithmetic on its own: 8 devices, one all-reduce of 1 MB at 100 GB/s and 5 us
    assert Collectives(8, (10**6,), ()).seconds(100, 5) == pytest.approx(5e-6 + 2 * 7 / 8 * 1e6 / 100e9)


def test_a_split_the_heads_do_not_allow_and_a_split_without_a_phase_are_refused(tiny):
    # 2 key/value heads: 1 or 2 devices split them, a multiple of 2 replicates each; 3 does neither
    r = cli("analyze", tiny, "--hw", "h100", "--phase", "decode", "--tp", "3")
    assert r.exit_code == 2 and "--tp 3 neither divides the model's 2 key/value heads nor is a multiple" in r.stderr, r.output
    # 16 is a multiple of the 2 key/value heads, but 8 query heads (256 / 32) cannot be spread over 16 devices
    r = cli("analyze", tiny, "--hw", "h100", "--phase", "decode", "--tp", "16")
    assert r.exit_code == 2 and "--tp 16 does not divide the model's 8 query heads" in r.stderr, r.output
    r = cli("analyze", tiny, "--hw", "h100", "--tp", "2")
    assert r.exit_code == 2 and "it needs --phase" in r.stderr, r.output
    r = cli("sweep", tiny, "--hw", "h100", "--tp", "2")
    assert r.exit_code == 2 and "it needs --phase" in r.stderr, r.output
    r = cli("analyze", tiny, "--hw", "h100", "--phase", "decode", "--tp", "0")
    assert r.exit_code == 2 and "--tp must be >= 1" in r.stderr, r.output


def test_a_profile_without_a_link_between_devices_is_refused_and_a_pcie_card_uses_its_host_link(tiny, tmp_path):
    r = cli("analyze", tiny, "--hw", "cpu-avx2", "--phase", "decode", "--tp", "2")
    assert r.exit_code == 2 and "gives no link between devices" in r.stderr, r.output
    tp = decode(tiny, "--tp", "2", hw="t4")["llm"]["tensor_parallel"]  # no interconnect: its PCIe link
    assert tp["link_gbs"] == 15.75 and "the host link's 15.75 GB/s" in tp["assumed"]
    bad = tmp_path / "bad.yaml"
    text = open("profiles/h100.yaml", encoding="utf-8").read().replace("interconnect: {gbs: 360,",
                                                                       "interconnect: {gbps: 360,")
    bad.write_text(text.replace("name: h100", "name: bad"), encoding="utf-8")
    r = cli("analyze", tiny, "--hw", bad, "--phase", "decode", "--tp", "2")
    assert r.exit_code == 2 and "interconnect: unknown key 'gbps'" in r.stderr, r.output


def test_the_table_and_the_sweep_say_the_figures_are_one_devices(tiny):
    r = cli("analyze", tiny, "--hw", "h100", "--phase", "decode", "--context", "16", "--tp", "2")
    assert r.exit_code == 0, r.output
    assert "tensor parallel over 2 devices: every figure above is one device's" in r.stdout
    assert "memory of each device: weights" in r.stdout and "KV cache 8.7 KB / 2" in r.stdout, r.stdout
    assert "the layers and totals above are one device's share of the decode step" in r.stderr
    r = cli("sweep", tiny, "--hw", "h100", "--phase", "decode", "--tp", "2", "-b", "1,4")
    assert r.exit_code == 0 and "over 2 devices (--tp 2" in r.stdout, r.output
    r = cli("sweep", tiny, "--hw", "h100", "--phase", "decode", "--tp", "2", "-b", "1,4", "-f", "csv")
    head, first = r.stdout.splitlines()[:2]
    assert head.endswith(",tensor_parallel_devices") and first.endswith(",2"), r.stdout


def test_a_step_whose_products_are_out_of_reach_is_not_split_quietly(tmp_path):
    """A merged decoder whose branch input has a name the phases do not set: its one If is unscored, no
    product is seen taking a split input, so nothing would be all-reduced: refused rather than reported
    as a step split for free. The branch the phases do set is split as the plain decoder is (4 all-reduces
    and the logits' gather)."""
    from test_llm import TINY, _merged

    q = _merged(TINY, tmp_path / "flag.onnx", flag="flag")
    r = cli("analyze", q, "--hw", "a100", "--phase", "decode", "--tp", "2")
    assert r.exit_code == 2 and "no weight product in the step's graph takes a split input" in r.stderr, r.output
    p = _merged(TINY, tmp_path / "merged.onnx")
    tp = decode(p, "--tp", "2", hw="a100")["llm"]["tensor_parallel"]
    assert (tp["all_reduces_per_step"], tp["all_gathers_per_step"]) == (4, 1)


def test_a_mixture_of_experts_splits_its_experts_and_runs_its_router_whole(tmp_path):
    """tiny-moe (2 layers, 4 experts, top 2): per layer Q, K and V are column-parallel, the output
    projection row-parallel, the MoE layer splits every expert and all-reduces its output; the router's
    256 x 4 product (and the Reshape of its logits) runs whole on each device, as every device ranks
    the experts of every token. Column: 2 x 3 + the vocabulary projection = 7; all-reduces 2 x 2."""
    p = tmp_path / "moe.onnx"
    assert cli("llm", "skeleton", "--preset", "tiny-moe", "-o", p).exit_code == 0
    tp = decode(p, "--tp", "2", hw="a100")["llm"]["tensor_parallel"]
    assert tp["layers"]["column"] == 7 and tp["layers"]["row"] == 2 and tp["layers"]["experts"] == 2, tp["layers"]
    assert tp["all_reduces_per_step"] == 4


def test_the_html_report_of_a_split_step_says_so_and_compares_no_whole_steps_beside_it(tiny, tmp_path):
    out = tmp_path / "r.html"
    r = cli("report", tiny, "--hw", "h100", "--phase", "decode", "--context", "16", "--tp", "2", "-o", out)
    assert r.exit_code == 0, r.output
    page = out.read_text(encoding="utf-8")
    assert "tensor parallel over 2 devices: every figure above is one device" in page
    assert "the layers and totals above are one device" in r.stderr  # the report's note, on stderr too
    r = cli("report", tiny, "--hw", "h100,a100", "--phase", "decode", "--tp", "2", "-o", tmp_path / "r2.html")
    assert r.exit_code == 2 and "one --hw" in r.stderr and not (tmp_path / "r2.html").exists(), r.output


def test_the_report_memory_section_holds_one_devices_share_of_the_cache(tiny):
    """Batch 16 at context 512: the cache is 512 B x 513 tokens x 16 = 4,202,496 B, 2,101,248 B a device of 2.
    The report's own memory section (read off the step's tensors: the cache and the activations live at
    the peak, all split by heads but the few replicated ones) holds half the whole step's, give or take
    those, and agrees with the LLM block."""
    def run(*extra):
        r = cli("analyze", tiny, "--hw", "h100", "--phase", "decode", "--context", "512", "--batch", "16", "-f", "json",
                *extra)
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    whole, half = run(), run("--tp", "2")
    assert half["llm"]["memory"]["cache_bytes"] == 2_101_248
    w, h = whole["memory"]["activation_bytes"], half["memory"]["activation_bytes"]
    assert w / 2 <= h <= w / 2 + 8_192, (w, h)
    assert h == half["llm"]["memory"]["activation_bytes"]


def test_compare_splits_the_step_on_every_target_and_prices_all_its_devices(tiny):
    """A compare row of a split step is the step `analyze --tp` reports on that target (one device's share plus
    the collectives over that target's link), and its cost is the devices' together: 2 x the price of one
    for the step's time."""
    r = cli("compare", tiny, "--hw", "h100,a100", "--phase", "decode", "--context", "16", "--tp", "2", "-f", "json")
    assert r.exit_code == 0, r.output
    rows = {x["hardware"]: x for x in json.loads(r.stdout)["rows"]}
    for hw in ("h100", "a100"):
        alone = decode(tiny, "--tp", "2", hw=hw)["llm"]
        row = rows[hw]
        assert row["tensor_parallel_devices"] == 2
        assert row["latency_s"] == pytest.approx(alone["decode"]["latency_s"], rel=1e-5)
        assert row["price_per_hour"] == {"h100": 12.29, "a100": 4.10}[hw]  # the profiles' prices
        assert row["cost_per_million_usd"] == pytest.approx(2 * row["price_per_hour"] / 3600 * row["latency_s"] * 1e6,
                                                             rel=1e-4)
    r = cli("compare", tiny, "--hw", "h100", "--tp", "2")
    assert r.exit_code == 2 and "it needs --phase" in r.stderr, r.output


def test_a_baseline_of_a_split_step_records_it_and_check_repeats_it(tiny, tmp_path):
    """`baseline --phase decode --tp 2` records the step `analyze --tp 2` times (one device's layers plus the
    collectives) with its split in the recorded phase; `check` re-scores the same split step and passes; a
    recorded split of 0 devices is a malformed baseline (exit 2)."""
    out = tmp_path / "b.json"
    r = cli("baseline", tiny, "--hw", "h100", "--phase", "decode", "--context", "16", "--tp", "2", "-o", out)
    assert r.exit_code == 0, r.output
    e = json.loads(out.read_text(encoding="utf-8"))["entries"][0]
    assert e["settings"]["phase"] == {"phase": "decode", "prompt": 512, "context": 16, "tp": 2}
    assert e["latency_s"] == pytest.approx(decode(tiny, "--tp", "2")["llm"]["decode"]["latency_s"], rel=1e-5)
    r = cli("check", tiny, "--baseline", out)
    assert r.exit_code == 0, r.output
    bad = json.loads(out.read_text(encoding="utf-8"))
    bad["entries"][0]["settings"]["phase"]["tp"] = 0
    (tmp_path / "bad.json").write_text(json.dumps(bad), encoding="utf-8")
    r = cli("check", tiny, "--baseline", tmp_path / "bad.json")
    assert r.exit_code == 2 and "tp: >= 1" in r.stderr, r.output


@pytest.fixture(scope="module")
def mqa(tmp_path_factory):
    """The tiny shape with one key/value head (multi-query attention): 8 query heads of 32."""
    d = tmp_path_factory.mktemp("mqa")
    out = {}
    for style in ("plain", "genai"):
        p = d / f"{style}.onnx"
        r = cli("llm", "skeleton", "--layers", "2", "--hidden", "256", "--heads", "8", "--kv-heads", "1",
                "--intermediate", "688", "--vocab", "1024", "--style", style, "--weight-bits", "16", "-o", p)
        assert r.exit_code == 0, r.output
        out[style] = p
    return out


def test_more_devices_than_key_value_heads_hold_the_one_head_each_and_split_the_rest(mqa):
    """4 devices, 1 key/value head: each device computes, holds and reads the whole head (as vLLM and
    TensorRT-LLM replicate it), and a quarter of everything else. Weights by hand, per layer: q and o
    256 x 256 / 4 = 16,384 each, k and v 256 x 32 = 8,192 each (whole), gate, up and down 256 x 688 / 4 =
    44,032 each: 181,248; two layers 362,496; the output projection 256 x 1,024 / 4 = 65,536; the
    embedding 262,144 and five norm scales 1,280 whole: 691,456 parameters = 1,382,912 B. The cache:
    2 layers x (K, V) x 1 head x 32 x 2 B = 256 B a token, 17 tokens: 4,352 B on every device."""
    d = decode(mqa["plain"], "--tp", "4")
    llm = d["llm"]
    assert 0 <= llm["memory"]["weights_bytes"] - 1_382_912 < 400
    assert llm["memory"]["cache_bytes"] == 4_352 and llm["memory"]["cache_devices"] == 1
    # each sequence adds its whole 4,352 B of cache on every device: 80 GB less the weights held, / 4,352
    batch = next(f["text"] for f in llm["fixes"] if f["id"] == "bigger_batch")
    assert f"memory holds batch <= {(80_000_000_000 - llm['memory']['weights_bytes']) // 4_352} " in batch, batch
    assert llm["tensor_parallel"]["layers"]["column"] == 2 * 5 + 1 and llm["tensor_parallel"]["layers"]["row"] == 2 * 2
    r = cli("analyze", mqa["plain"], "--hw", "h100", "--phase", "decode", "--context", "16", "--tp", "4")
    assert r.exit_code == 0 and "memory of each device: weights 1.38 MB + KV cache 4.35 KB (17 tokens" in r.stdout, r.output
    assert llm["tensor_parallel"]["key_value_head_copies"] == 4
    assert "each key/value head is held, computed and read on 4 devices (fewer heads than devices)" in r.stdout
    layers = {x["name"]: x for x in d["layers"]}
    # the key projection of layer 0 whole on each device: 256 x 32 fp16 weights, one token's 32 keys written
    k = layers["MatMul_28"]
    assert (k["weight_bytes"], k["macs"], k["bytes_written"]) == (16_384, 8_192, 64)
    # the repeat of the head for the query heads reads the whole head (17 x 32 x 2 B) and writes the device's
    # 2 of the 8 query heads' copies (2 x 1,088 B)
    rep = [x for x in d["layers"] if x["op_type"] == "Expand"]
    assert rep and all((x["act_bytes_read"], x["bytes_written"]) == (1_088, 2_176) for x in rep), rep
    # the scores: 2 query heads x 17 positions x 32 = 1,088 MACs a device
    assert layers["MatMul_96"]["macs"] == 1_088


def test_a_product_packing_queries_keys_and_values_computes_its_queries_quarter_and_the_whole_head(mqa):
    """ONNX Runtime GenAI's layout: one product for q, k and v (256 x (256 + 2 x 32)) and a fused
    GroupQueryAttention. On 4 devices the product makes 256 / 4 + 2 x 32 = 128 columns (256 x 128 x 2 B =
    65,536 B of weights); the attention writes its 2 query heads' output (2 x 32 x 2 B = 128 B) and the new
    token's key and value of the one head (2 x 32 x 2 B = 128 B), and reads the whole cache of the layer
    (2 x 16 x 32 x 2 B = 2,048 B) with its quarter of the packed product's 640 B."""
    d = decode(mqa["genai"], "--tp", "4")
    layers = {x["name"]: x for x in d["layers"]}
    qkv = layers["MatMul_18"]
    assert (qkv["weight_bytes"], qkv["bytes_written"]) == (65_536, 256)
    att = layers["GroupQueryAttention_20"]
    # (+ 1: the 4 B of sequence lengths it reads, a replicated input, at its share like any split node's)
    assert att["bytes_written"] == 256 and att["act_bytes_read"] == 2_048 + 640 // 4 + 1
    assert d["llm"]["memory"]["cache_bytes"] == 4_352


def test_a_multi_query_model_too_large_for_one_device_is_told_the_split_that_holds_it(tmp_path):
    """40 layers of hidden 8,192, 64 query heads and 1 key/value head of 128, MLP 28,672, vocabulary 32,000:
    per layer 2 x 8,192^2 + 2 x 8,192 x 128 + 3 x 8,192 x 28,672 = 840,957,952 parameters, 40 layers plus
    the embedding and the output projection (2 x 32,000 x 8,192) and 81 norm scales of 8,192:
    34,163,269,632 parameters, 68.3 GB in fp16: more than an A100 40GB. Over 2 devices each holds half
    (34.2 GB) and the one key/value head whole (40 x 2 x 128 x 2 B = 20,480 B a token): the hint names
    --tp 2 (the one head used to rule out every split)."""
    p = tmp_path / "mqa.onnx"
    r = cli("llm", "skeleton", "--layers", "40", "--hidden", "8192", "--heads", "64", "--kv-heads", "1",
            "--intermediate", "28672", "--vocab", "32000", "-o", p)
    assert r.exit_code == 0, r.output
    r = cli("analyze", p, "--hw", "a100-40gb", "--phase", "decode", "--context", "1024")
    assert r.exit_code == 2 and "weights 68.33 GB" in r.stderr, r.stderr
    assert "--tp 2 would hold about 34.2 GB on each of 2 devices" in r.stderr, r.stderr
    r = cli("analyze", p, "--hw", "a100-40gb", "--phase", "decode", "--context", "1024", "--tp", "2", "-f", "json")
    assert r.exit_code == 0, r.output
    mem = json.loads(r.stdout)["llm"]["memory"]
    assert mem["cache_bytes"] == 20_480 * 1_025 and mem["fits"] is True


def test_a_fused_attention_over_one_replicated_head_runs_the_devices_query_heads_as_rows(mqa):
    """GroupQueryAttention stacks a key/value head's query heads as the rows of one product per head and
    sequence: whole, 8 query rows x 2 sequences (Gemm(m=8, count=2) at decode). On 4 devices each runs
    its one key/value head with 8 / 4 = 2 query heads: m = 2, still one product per sequence."""
    from dnnperf.ir import ShapeOverrides
    from dnnperf.llm import parallel, phases
    from dnnperf.llm.decoder import find_decoder

    dec = find_decoder(str(mqa["genai"]))
    insp = phases._inspect(str(mqa["genai"]), dec, ShapeOverrides(batch=2), 1, 16)
    whole = next(r.workload.gemm for r in insp.rows if r.node.op_type == "GroupQueryAttention")
    assert (whole.m, whole.n, whole.count) == (8, 17, 2)
    split = parallel.shard(insp, 4, dec.cache)[0]
    g = next(r.workload.gemm for r in split.rows if r.node.op_type == "GroupQueryAttention")
    assert (g.m, g.n, g.k, g.count) == (2, 17, 32, 2)


def test_a_split_past_the_devices_a_link_joins_runs_its_collectives_over_the_network(tmp_path):
    """The h100 profile's NVLink joins 8 devices (an HGX board; interconnect.devices) and its network
    reaches 40 GB/s a device between boards. 2 layers of hidden 512 with 16 query heads (2 key/value heads
    of 32, each replicated on 8 devices) over 16 devices: 4 all-reduces of 1 x 512 x 2 B and the logits'
    1,024 x 2 B gathered, 2 x 15/16 x 4 x 1,024 + 15/16 x 2,048 = 9,600 B a device, over the network:
    5 x 10 us + 9,600 B / 40 GB/s. Over 8 devices the same step stays on NVLink's 360 GB/s."""
    p = tmp_path / "m.onnx"
    r = cli("llm", "skeleton", "--layers", "2", "--hidden", "512", "--heads", "16", "--kv-heads", "2",
            "--intermediate", "1024", "--vocab", "1024", "-o", p)
    assert r.exit_code == 0, r.output
    tp = decode(p, "--tp", "16")["llm"]["tensor_parallel"]
    assert tp["link_gbs"] == 40 and tp["bytes_per_step"] == 4 * 1_024 + 2_048
    assert tp["collective_seconds_per_step"] == pytest.approx(50e-6 + 9_600 / 40e9, rel=1e-5)
    assert "16 devices span 2 groups of the 8 its link joins" in tp["assumed"]
    assert decode(p, "--tp", "8")["llm"]["tensor_parallel"]["link_gbs"] == 360
    # a profile whose link joins 8 devices and that names no network between them: refused past 8
    text = open("profiles/h100.yaml", encoding="utf-8").read().replace(", network_gbs: 40}", "}")
    one = tmp_path / "board.yaml"
    one.write_text(text.replace("name: h100", "name: board"), encoding="utf-8")
    r = cli("analyze", p, "--hw", one, "--phase", "decode", "--context", "16", "--tp", "16")
    assert r.exit_code == 2 and "links 8 devices (interconnect.devices) and gives no network" in r.stderr, r.output
    for bad, says in (("devices: 8", "devices: 1"), ("devices: 8", "devices: 2.5")):
        f = tmp_path / "bad.yaml"
        f.write_text(text.replace(bad, says).replace("name: h100", "name: bad"), encoding="utf-8")
        r = cli("analyze", p, "--hw", f, "--phase", "decode", "--tp", "2")
        assert r.exit_code == 2 and "interconnect.devices: expected a whole number of devices of at least 2" in r.stderr, \
            r.output


def test_the_collectives_move_activations_at_the_precision_what_ifs_width_never_below_16_bits(tiny, tmp_path):
    """The tiny skeleton in fp16 exchanges 4 x 512 + 2,048 B a step (above). Exported in fp32 it exchanges
    twice that; under -p fp16 the what-if's activations are 16-bit and so is the exchange; under -p int8
    the quantised products' partial sums are still reduced in 16-bit floats (as TensorRT-LLM and vLLM
    all-reduce them): the fp16 figure again; -p fp32 on the fp16 export doubles it."""
    p = tmp_path / "fp32.onnx"
    r = cli("llm", "skeleton", "--preset", "tiny", "--dtype", "fp32", "-o", p)
    assert r.exit_code == 0, r.output
    half = 4 * 512 + 2_048

    def moved(path, *extra):
        return decode(path, "--tp", "2", *extra)["llm"]["tensor_parallel"]["bytes_per_step"]

    assert moved(tiny) == half and moved(p) == 2 * half
    assert moved(p, "-p", "fp16") == half and moved(p, "-p", "int8") == half and moved(tiny, "-p", "int8") == half
    assert moved(tiny, "-p", "fp32") == 2 * half
    # compare prices the same exchange as analyze
    d = decode(p, "--tp", "2", "-p", "fp16")
    r = cli("compare", p, "--hw", "h100", "--phase", "decode", "--context", "16", "--tp", "2", "-p", "fp16", "-f", "json")
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)["rows"][0]
    assert row["latency_s"] == pytest.approx(d["llm"]["decode"]["latency_s"], rel=1e-4)


def test_plot_draws_one_devices_layers_of_a_split_step(tiny, tmp_path):
    out = tmp_path / "roofline.svg"
    r = cli("plot", tiny, "--hw", "h100", "--phase", "decode", "--context", "16", "--tp", "2", "-o", out)
    assert r.exit_code == 0 and out.read_text().startswith("<svg"), r.output
    assert "--tp 2: the chart is one device's layers of the step" in r.stderr
    r = cli("plot", tiny, "--hw", "h100", "--tp", "2", "-o", tmp_path / "x.svg")
    assert r.exit_code == 2 and "it needs --phase" in r.stderr and not (tmp_path / "x.svg").exists()


def test_replicated_heads_whose_projections_cannot_be_found_are_refused_not_guessed(tmp_path):
    """A step that reads its one key/value head's cache without extending it by a Concat or a fused attention
    op: the walk that finds the key/value projections (to hold them whole on each device) finds none, and a
    split over more devices than heads is refused rather than costed with those products cut n ways."""
    from onnx import TensorProto as T
    from onnx import helper

    from dnnperf.api import inspect_model
    from dnnperf.errors import DnnperfError
    from dnnperf.llm import parallel
    from dnnperf.llm.decoder import CacheInput
    from dnnperf.llm.replicated import ways_of
    from helpers import model, save, vi, weight

    m = model([helper.make_node("MatMul", ["x", "wk"], ["k"]), helper.make_node("Mul", ["past", "two"], ["y"])],
              [vi("x", [1, 1, 256]), vi("past", [1, 1, 16, 32])], [vi("k", None), vi("y", None)],
              [weight("wk", [256, 32]), helper.make_tensor("two", T.FLOAT, [], [2.0])])
    insp = inspect_model(save(m, tmp_path))
    cache = [CacheInput("past", (1, 1, 16, 32), "float32", seq_axis=2, batch_axis=0)]
    work = {r.node.name: r.workload for r in insp.costed()}
    role = parallel.roles(insp.graph, work, ["past"])
    with pytest.raises(DnnperfError, match="no product that writes its KV cache"):
        ways_of(insp.graph, role, cache, 4, 1, work)
