"""Never quietly wrong: partial estimates, impossible overrides and precisions a device lacks are
loud (exit 1 or 2, or a visible mark), and the CI gate only passes what it can see."""

import json
import os
import shutil

import onnx
import pytest
import yaml
from onnx import helper
from typer.testing import CliRunner

from dnnperf.cli import app
from helpers import SAMPLES, conv_model, model, save, vi, weight

runner = CliRunner()
RESNET = os.path.join(SAMPLES, "resnet50.onnx")
GPT2 = os.path.join(SAMPLES, "gpt2.onnx")


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def one_line_error(r, code, *needles):
    assert r.exit_code == code, r.output
    assert r.stderr.startswith("dnnperf: error: ") and r.stderr.count("\n") == 1, r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)


@pytest.fixture(scope="module")
def magic(tmp_path_factory):
    """resnet50 with its ten layer4 convolutions turned into a vendor op nobody can cost."""
    d = tmp_path_factory.mktemp("magic")
    m = onnx.load(RESNET, load_external_data=False)
    for n in m.graph.node:
        if n.op_type == "Conv" and "layer4" in n.name:
            n.op_type, n.domain = "MagicConv", "my.vendor"
    m.opset_import.append(helper.make_opsetid("my.vendor", 1))
    orig = d / "resnet50.onnx"
    shutil.copy(RESNET, orig)
    bad_dir = d / "bad"
    bad_dir.mkdir()
    onnx.save(m, bad_dir / "resnet50.onnx")
    return str(orig), str(bad_dir / "resnet50.onnx")


# -- 1. partial estimates --------------------------------------------------------------------

def test_partial_estimate_is_marked_at_the_top(magic, tmp_path):
    _, bad = magic
    d = json.loads(invoke("analyze", bad, "--hw", "v100", "-f", "json").stdout)
    cov = d["coverage"]
    assert not cov["complete"] and cov["nodes_total"] == 169
    assert cov["unscored_by_kind"]["unsupported"] == 10 and cov["unscored_op_types"][0] == "my.vendor:MagicConv"
    assert cov["unscored_by_kind"]["shape_lost"] == 15  # downstream of the custom op, reported as such
    assert 0 < d["totals"]["coverage"] < 1 and d["warnings"][0].startswith("PARTIAL")
    table = invoke("analyze", bad, "--hw", "v100").stdout
    assert table.splitlines()[0].startswith("PARTIAL ESTIMATE: 144 of 169 nodes scored")
    md = invoke("analyze", bad, "--hw", "v100", "-f", "md").stdout
    assert "PARTIAL ESTIMATE" in md.splitlines()[0] + md.splitlines()[1]
    # the HTML report too: the mark above its first section, its notes (the batch assumed) listed, and
    # the runtime the estimate describes (it said none of the three)
    page = tmp_path / "r.html"
    assert invoke("report", bad, "--hw", "v100", "-o", str(page)).exit_code == 0
    html = page.read_text()
    head = html[:html.index("<h2>")]
    assert "PARTIAL ESTIMATE: 144 of 169 nodes scored" in head and "runtime eager" in head
    assert "<h2>Notes</h2>" in html and "assumed 1 (pass --batch N)" in html
    # and the roofline picture (`dnnperf plot`, SVG) carries the mark where it is seen
    pic = tmp_path / "r.svg"
    assert invoke("plot", bad, "--hw", "v100", "-o", str(pic)).exit_code == 0
    assert ">PARTIAL ESTIMATE: 144 of 169 nodes scored</text>" in pic.read_text()
    whole = tmp_path / "whole.svg"
    assert invoke("plot", RESNET, "--hw", "v100", "-o", str(whole)).exit_code == 0
    assert "PARTIAL" not in whole.read_text()


def test_bounded_nodes_are_not_called_unscored(tmp_path):
    """A NonZero is scored at its upper bound (every element non-zero) and the coverage says all nodes
    are scored: the analyze table and the HTML report listed it under "NOT scored" / "not scored", and the
    totals rows counted it as unsupported (an MoE router's 8 NonZero nodes: 8 "unsupported")."""
    m = model([helper.make_node("NonZero", ["x"], ["i"], name="nz"),
               helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
              [vi("x", [3, 4])], [vi("i", None), vi("y", None)], [weight("w", [4, 4])])
    p = save(m, tmp_path)
    d = json.loads(invoke("analyze", p, "--hw", "v100", "-f", "json", "-q").stdout)
    assert d["coverage"]["complete"] and [u["kind"] for u in d["unsupported_ops"]] == ["bound"]
    table = invoke("analyze", p, "--hw", "v100").stdout
    assert "Costed at a stated bound (1 nodes, counted)" in table and "NOT scored" not in table
    page = tmp_path / "r.html"
    assert invoke("report", p, "--hw", "v100", "-o", str(page)).exit_code == 0
    html = page.read_text()
    assert "<h2>Costed at a stated bound (scored)</h2>" in html and "not scored" not in html
    rows = json.loads(invoke("analyze", p, "--hw", "v100", "--totals-only", "-f", "json", "-q").stdout)
    row = rows["rows"][0] if isinstance(rows, dict) else rows[0]
    assert (row["unsupported"], row["bounded"]) == (0, 1)
    totals = json.loads(invoke("inspect", p, "-f", "json", "-q").stdout)["totals"]
    assert (totals["unsupported"], totals["bounded"]) == (0, 1)
    # an op nobody can cost is still listed as NOT scored, next to the bounded one
    m.graph.node.append(helper.make_node("MagicOp", ["y"], ["z"], name="magic", domain="my.vendor"))
    m.graph.output.append(vi("z", None))
    m.opset_import.append(helper.make_opsetid("my.vendor", 1))
    table = invoke("analyze", save(m, tmp_path, "m2.onnx"), "--hw", "v100").stdout
    assert "NOT scored (1 nodes)" in table and "Costed at a stated bound (1 nodes, counted)" in table


def test_compress_is_exact_on_a_known_condition_and_bounded_on_a_run_time_one(tmp_path):
    """Compress keeps the slices its 1-D condition selects. ONNX's inference leaves the count open,
    so a Compress and every layer after it were unscored. A condition known at load time gives the
    count (by hand: [1, 0, 1, 1] on the rows of a [4, 8] input: [3, 8]; without an axis, [0, 1] on the
    32 flattened elements: [1]); one computed at run time is costed at its upper bound (every row
    kept, [4, 8]), listed as such, with the read back it costs the host."""
    T = onnx.TensorProto
    cond = helper.make_tensor("c", T.BOOL, [4], [1, 0, 1, 1])
    for nodes, inits, want in (
            ([helper.make_node("Compress", ["x", "c"], ["s"], axis=0)], [cond], (3, 8)),
            ([helper.make_node("Compress", ["x", "c2"], ["s"])], [helper.make_tensor("c2", T.BOOL, [2], [0, 1])], (1,))):
        m = model(nodes + [helper.make_node("Relu", ["s"], ["y"])], [vi("x", [4, 8])], [vi("y", None)], inits)
        d = json.loads(invoke("inspect", save(m, tmp_path), "-f", "json", "-q").stdout)
        assert d["totals"]["unsupported"] == 0 and d["totals"]["bounded"] == 0, d["unsupported_ops"]
        assert [tuple(r["output_shape"]) for r in d["layers"]] == [want, want], d["layers"]
    m = model([helper.make_node("Greater", ["r", "z"], ["c"]), helper.make_node("Compress", ["x", "c"], ["s"], axis=0),
               helper.make_node("Relu", ["s"], ["y"])], [vi("x", [4, 8]), vi("r", [4])], [vi("y", None)],
              [weight("z", [])])
    d = json.loads(invoke("analyze", save(m, tmp_path), "--hw", "v100", "-f", "json", "-q").stdout)
    assert d["coverage"]["complete"] and [u["kind"] for u in d["unsupported_ops"]] == ["bound"]
    layers = {r["op_type"]: r for r in d["layers"]}
    assert tuple(layers["Relu"]["output_shape"]) == (4, 8)


def test_string_normalizer_keeps_its_strings_or_is_bounded_by_them(tmp_path):
    """ONNX's inference gives a StringNormalizer's 1-D output an unknown length (the stopwords may
    drop strings), so it was unscored. Without stopwords it keeps every string ([5] -> [5]); with them
    it is costed at that upper bound and listed as bounded."""
    for stop, kinds in (([], []), (["a"], ["bound"])):
        kw = {"stopwords": stop} if stop else {}
        m = model([helper.make_node("StringNormalizer", ["s"], ["y"], case_change_action="LOWER", **kw)],
                  [vi("s", [5], onnx.TensorProto.STRING)], [vi("y", None, onnx.TensorProto.STRING)], opset=10)
        d = json.loads(invoke("inspect", save(m, tmp_path), "-f", "json", "-q").stdout)
        assert [tuple(r["output_shape"]) for r in d["layers"]] == [(5,)], d
        assert d["totals"]["unsupported"] == 0 and [u["kind"] for u in d["unsupported_ops"]] == kinds


def test_value_hint_names_only_inputs_that_would_resolve_the_shape(tmp_path):
    """A shape that follows from a model input's value through ops the loader folds (a Cast) names
    the input to give with --value, and giving it resolves the shape; through an op it cannot fold (a
    Sigmoid: the shape follows from data at run time), or for an input whose type --value refuses
    (bfloat16), the hint named an input that could not help. Unsigned inputs take --value too."""
    T = onnx.TensorProto

    def reshape_by(chain, dtype):
        nodes = [helper.make_node(op, [src], [dst], **kw) for op, src, dst, kw in chain]
        nodes.append(helper.make_node("Reshape", ["data", chain[-1][2]], ["y"], name="rs"))
        m = model(nodes, [vi("data", [2, 6]), vi("s", [2], dtype)], [vi("y", None)])
        p = save(m, tmp_path, f"{dtype}_{len(chain)}.onnx")
        return p, invoke("analyze", p, "--hw", "v100").stdout

    cast = [("Cast", "s", "t", {"to": T.INT64})]
    p, out = reshape_by(cast, T.INT64)
    assert "give it with --value s=V,..." in out, out
    d = json.loads(invoke("analyze", p, "--hw", "v100", "--value", "s=3,4", "-f", "json", "-q").stdout)
    assert d["coverage"]["complete"]
    _, out = reshape_by([("Sigmoid", "s", "u", {}), ("Cast", "u", "t", {"to": T.INT64})], T.FLOAT)
    assert "NOT scored" in out and "--value" not in out, out
    _, out = reshape_by(cast, T.BFLOAT16)
    assert "NOT scored" in out and "--value" not in out, out
    p, out = reshape_by(cast, T.UINT32)
    assert "give it with --value s=V,..." in out, out
    d = json.loads(invoke("analyze", p, "--hw", "v100", "--value", "s=4,3", "-f", "json", "-q").stdout)
    assert d["coverage"]["complete"]
    # a window's length is its first input (the hint looked past it, at the data inputs of other ops)
    m = model([helper.make_node("HannWindow", ["n"], ["y"])], [vi("n", [], T.INT64)], [vi("y", None)])
    p = save(m, tmp_path, "hann.onnx")
    assert "give it with --value n=V,..." in invoke("analyze", p, "--hw", "v100").stdout
    d = json.loads(invoke("inspect", p, "--value", "n=400", "-f", "json", "-q").stdout)
    assert [tuple(r["output_shape"]) for r in d["layers"]] == [(400,)]


def test_gate_fails_when_a_node_stops_being_scored(magic, tmp_path):
    orig, bad = magic
    base = tmp_path / "base.json"
    assert invoke("baseline", orig, "--hw", "v100", "-o", base).exit_code == 0
    assert json.loads(base.read_text())["entries"][0]["coverage"]["nodes_scored"] == 169
    r = invoke("check", bad, "--baseline", base)
    assert r.exit_code == 1, r.output  # it is FASTER (the layers vanished) and still fails
    assert "NOT scored" in r.stdout and "/layer4/layer4.0/conv1/Conv" in r.stdout and "coverage dropped" in r.stdout
    # a team can accept a known custom op explicitly, on a baseline recorded with it
    base2 = tmp_path / "base2.json"
    assert invoke("baseline", bad, "--hw", "v100", "-o", base2).exit_code == 0
    assert invoke("check", bad, "--baseline", base2).exit_code == 1  # default: no unscored node allowed
    assert invoke("check", bad, "--baseline", base2, "--max-unscored", "25").exit_code == 0


# -- 2. the batch reaches every tensor that carried it --------------------------------------

def macs(*args):
    r = invoke("inspect", *args, "-f", "json", "-q")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["totals"]["macs"]


def test_batch_pinned_in_reshape_constants_is_rewritten():
    one = macs(GPT2, "--dim", "sequence_length=128", "--batch", "1")
    assert one == 16_114_089_984
    assert macs(GPT2, "--dim", "sequence_length=128", "--batch", "4") == 4 * one  # was 68.08 G: batch folded into sequence
    r = invoke("inspect", GPT2, "--dim", "sequence_length=128", "--batch", "4", "-f", "json")
    assert "fixed the exported batch" in r.stderr
    assert macs(GPT2, "--dim", "sequence_length=512", "--batch", "8") == 8 * macs(GPT2, "--dim", "sequence_length=512")


def _quadratic_batch_model(tmp_path):
    """x (B,4,8) -> [-1, 8] -> x x^T: a (4B x 4B) product that relates every sample to every other."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["flat"], name="flatten"),
             helper.make_node("Transpose", ["flat"], ["flat_t"], name="transpose"),
             helper.make_node("MatMul", ["flat", "flat_t"], ["y"], name="mixing_matmul")]
    from helpers import ints

    return save(model(nodes, [vi("x", ["batch", 4, 8])], [vi("y", None)], [ints("shape", [-1, 8])]), tmp_path, "q.onnx")


def _sliced_batch_model(tmp_path):
    """x (B,4,8) -> x[0:1] -> MatMul with weights: the batch is dropped before the layer."""
    from helpers import ints

    nodes = [helper.make_node("Slice", ["x", "s", "e", "a"], ["x0"], name="first_sample"),
             helper.make_node("MatMul", ["x0", "w"], ["y"], name="proj")]
    return save(model(nodes, [vi("x", ["batch", 4, 8])], [vi("y", None)],
                      [ints("s", [0]), ints("e", [1]), ints("a", [0]), weight("w", [8, 16])]), tmp_path, "s.onnx")


def test_batch_that_cannot_be_applied_is_refused_naming_the_node(tmp_path):
    # a product of the batch with itself grows as B^2: real work at that batch, not a batch pinned in
    # the export (CLIP's [images, texts] logits at --batch 4 were refused as 'the export fixes the batch
    # inside the graph'); it runs, and a note names the node and says its figures do not scale
    r = invoke("inspect", _quadratic_batch_model(tmp_path), "--batch", "4", "-f", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["totals"]["macs"] == 16 * 16 * 8  # the (16 x 8) x (8 x 16) product at batch 4
    assert any("'mixing_matmul'" in w and "16x its size at batch 1" in w and "do not carry" in w
               for w in d["warnings"]), d["warnings"]
    one_line_error(invoke("inspect", _sliced_batch_model(tmp_path), "--batch", "4"), 2, "--batch 4", "proj")
    assert invoke("inspect", _sliced_batch_model(tmp_path), "--batch", "1").exit_code == 0


def test_sequence_first_lstm_reads_its_batch_from_dim_1(tmp_path):
    # X is (seq=100, batch, 32); the model's batch is dim 1, not the sequence length
    m = model([helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=64, name="lstm")],
              [vi("x", [100, "batch", 32])], [vi("y", None)], [weight("w", [1, 256, 32]), weight("r", [1, 256, 64])])
    p = save(m, tmp_path, "lstm.onnx")
    d = json.loads(invoke("analyze", p, "--hw", "v100", "-f", "json", "-q").stdout)
    assert d["settings"]["batch"] == 1  # not 100
    assert d["totals"]["throughput_per_s"] == pytest.approx(1 / d["totals"]["latency_s"], rel=1e-3)
    d8 = json.loads(invoke("analyze", p, "--hw", "v100", "--batch", "8", "-f", "json", "-q").stdout)
    assert d8["settings"]["batch"] == 8
    assert d8["totals"]["macs"] == 8 * d["totals"]["macs"]  # 100 x 8 x 256 x (32 + 64) per direction
    assert d["totals"]["macs"] == 100 * 1 * 256 * (32 + 64)
    texts = [f["text"] for f in d["model_fixes"] + [f for l in d["layers"] for f in l["fixes"]]]
    assert not any("batch 100" in t or "to 800" in t for t in texts)  # each text apart (one ends "at each batch")


# -- 3. shapes that contradict the model ----------------------------------------------------

def test_input_shape_with_wrong_rank_or_channels_is_refused():
    one_line_error(invoke("analyze", RESNET, "--input-shape", "input=1x3x224"), 2, "rank 4", "input")
    one_line_error(invoke("analyze", RESNET, "--input-shape", "input=1x1x224x224"), 2, "/conv1/Conv", "3", "--input-shape")
    r = invoke("analyze", RESNET, "--input-shape", "input=1x3x320x320", "-f", "json")  # another resolution is fine
    assert r.exit_code == 0 and json.loads(r.stdout)["coverage"]["complete"]


# -- 4. precisions the device does not run --------------------------------------------------

def latency(*args):
    r = invoke("analyze", *args, "-f", "json", "-q")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["totals"]["latency_s"]


def test_precision_a_device_lacks_is_refused_or_mapped_with_a_note():
    one_line_error(invoke("analyze", RESNET, "--hw", "tpu-v4", "-p", "fp16"), 2, "tpu-v4", "bf16")
    one_line_error(invoke("analyze", RESNET, "--hw", "v100", "-p", "int4"), 2, "v100", "int4")
    one_line_error(invoke("sweep", RESNET, "--hw", "v100", "-p", "int4", "--batch", "1"), 2, "int4")
    one_line_error(invoke("sweep", RESNET, "--hw", "tpu-v2", "-p", "fp64", "--batch", "1"), 2, "fp64")
    # a CPU without 16-bit units computes fp16 in fp32: never faster than fp32, and it says so
    r = invoke("analyze", RESNET, "--hw", "cpu-avx512", "-p", "fp16")
    assert r.exit_code == 0 and "costed as fp32" in r.stderr
    assert latency(RESNET, "--hw", "cpu-avx512", "-p", "fp16") == latency(RESNET, "--hw", "cpu-avx512", "-p", "fp32")
    # tpu-v4 stays first in compare when asked for 16-bit: bf16 is its format
    d = json.loads(invoke("compare", RESNET, "--hw", "v100,t4,tpu-v4", "-p", "bf16", "-f", "json", "-q").stdout)
    assert [r["hardware"] for r in d["rows"]][0] == "tpu-v4" and {s["hardware"] for s in d["skipped"]} == {"v100", "t4"}


def test_best_precision_is_the_fastest_the_device_runs():
    best = latency(RESNET, "--hw", "a100", "-p", "best")
    for p in ("fp32", "tf32", "fp16", "bf16", "int8", "int4"):
        assert best <= latency(RESNET, "--hw", "a100", "-p", p)
    assert latency(RESNET, "--hw", "tpu-v1", "-p", "best") == latency(RESNET, "--hw", "tpu-v1", "-p", "int8")


# -- 5. precision advice walks the ladder --------------------------------------------------------

def test_precision_advice_walks_the_ladder_and_flags_sensitive_layers(tmp_path):
    from helpers import conv_model

    # a first layer of 16 channels (whole 16-byte vectors) takes the tensor cores one precision down,
    # with the warning that it sees the raw input
    first = save(conv_model(16, 64, 112, 112, 3, pads=[1, 1, 1, 1]), tmp_path, "first.onnx")
    f = json.loads(invoke("analyze", first, "--hw", "a100", "-p", "fp32", "-f", "json", "-q").stdout)["layers"][0]["fixes"]
    lower = [x["text"] for x in f if x["id"] == "use_specialized_units"]
    assert lower and "moves this Conv onto tensor_cores" in lower[0] and "first layer" in lower[0]
    d = json.loads(invoke("analyze", RESNET, "--hw", "a100", "-p", "fp32", "-f", "json", "-q").stdout)
    texts = {l["name"]: [f["text"] for f in l["fixes"] if f["id"] == "use_specialized_units"] for l in d["layers"]}
    # the 3-channel stem fills no 16-byte tf32 or bf16 vector: no lower precision moves it to the tensor cores
    assert texts["/conv1/Conv"] == []
    assert texts["/layer1/layer1.0/conv2/Conv"][0].startswith("fp32 -> bf16 moves this Conv onto tensor_cores")
    assert all("int4" not in t for ts in texts.values() for t in ts)
    g = json.loads(invoke("analyze", GPT2, "--dim", "sequence_length=128", "--hw", "a100", "-p", "fp32", "-f", "json",
                          "-q").stdout)
    out = [f["text"] for l in g["layers"] for f in l["fixes"] if f["id"] == "use_specialized_units" and "output layer" in f["text"]]
    assert out and out[0].startswith("fp32 -> tf32")
    # the whole-model precision fix, first when it is the biggest win: resnet50 on TPU v1 fp32 -> int8
    t = json.loads(invoke("analyze", RESNET, "--hw", "tpu-v1", "-f", "json", "-q").stdout)
    first = t["model_fixes"][0]
    assert first["id"] == "use_specialized_units" and "fp32 -> int8" in first["text"]
    assert first["saving_s"] == pytest.approx(t["totals"]["latency_s"] - latency(RESNET, "--hw", "tpu-v1", "-p", "int8"),
                                              rel=1e-3)


# -- 6. a gate people can trust ----------------------------------------------------------------

def _conv(tmp_path, cout, name="net.onnx"):
    from helpers import conv_model

    return save(conv_model(64, cout, 56, 56, 3, pads=[1, 1, 1, 1], relu=True), tmp_path, name)


def test_gate_tolerance_both_sides_and_absolute(tmp_path):
    base = tmp_path / "b.json"
    p = _conv(tmp_path, 64)
    invoke("baseline", p, "--hw", "t4", "-o", base)
    data = json.loads(base.read_text())
    lat = data["entries"][0]["latency_s"]
    for factor, status in ((1.024, "SAME"), (0.997, "SAME"), (0.9, "FASTER"), (1.1, "SLOWER")):
        data["entries"][0]["latency_s"] = lat / factor  # pretend the baseline was this much faster/slower
        base.write_text(json.dumps(data))
        r = invoke("check", p, "--baseline", base)
        assert r.stdout.startswith(status), (factor, r.stdout)
        assert r.exit_code == (1 if status == "SLOWER" else 0)
    # an absolute tolerance absorbs a 10% change of a few microseconds
    r = invoke("check", p, "--baseline", base, "--abs-tolerance", "1ms")
    assert r.exit_code == 0 and r.stdout.startswith("SAME")


def test_gate_ranks_changes_by_effect(tmp_path):
    from helpers import conv_model

    base = tmp_path / "b.json"
    m = conv_model(16, 32, 32, 32, 3, pads=[1, 1, 1, 1])
    p = save(m, tmp_path, "net.onnx")
    invoke("baseline", p, "--hw", "v100", "-o", base)
    m.graph.node[0].output[0] = "c"
    m.graph.node.extend([helper.make_node("Sigmoid", ["c"], ["s"], name="small_added"),
                         helper.make_node("Conv", ["s", "w2"], ["y"], name="big_added", pads=[1, 1, 1, 1])])
    m.graph.initializer.append(weight("w2", [256, 32, 3, 3]))
    save(m, tmp_path, "net.onnx")
    d = json.loads(invoke("check", p, "--baseline", base, "-f", "json").stdout)
    layers = d["results"][0]["layers"]
    assert [n["layer"] for n in layers][:2] == ["big_added", "small_added"]


def test_gate_notices_an_edited_profile_and_works_from_another_folder(tmp_path, monkeypatch):
    from dnnperf.hardware import load_profile

    prof = yaml.safe_load(open(load_profile("t4").path))
    prof["name"] = "my-t4"
    (tmp_path / "profiles").mkdir()
    (tmp_path / "ci").mkdir()
    ppath = tmp_path / "profiles" / "my.yaml"
    ppath.write_text(yaml.safe_dump(prof))
    p = _conv(tmp_path, 64)
    monkeypatch.chdir(tmp_path)
    assert invoke("baseline", "net.onnx", "--hw", "profiles/my.yaml", "-o", "ci/base.json").exit_code == 0
    entry = json.loads((tmp_path / "ci" / "base.json").read_text())["entries"][0]
    assert entry["hardware"] == "../profiles/my.yaml" and len(entry["profile_sha256"]) == 16
    monkeypatch.chdir(tmp_path / "ci")  # check from another folder: the path is relative to the baseline
    assert invoke("check", p, "--baseline", "base.json").exit_code == 0
    prof["memory"]["dram_gbs"] = 100
    ppath.write_text(yaml.safe_dump(prof))
    r = invoke("check", p, "--baseline", "base.json")
    assert r.exit_code == 1 and "changed since the baseline" in r.stdout


def test_gate_checks_a_subset_and_selects_profiles(tmp_path):
    a, b = _conv(tmp_path, 64, "a.onnx"), _conv(tmp_path, 32, "b.onnx")
    base = tmp_path / "base.json"
    assert invoke("baseline", a, b, "--hw", "v100,t4", "-o", base).exit_code == 0
    r = invoke("check", a, "--baseline", base, "--hw", "t4", "-f", "json")
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    assert [(x["model"], x["hardware"]) for x in d["results"]] == [("a.onnx", "t4")]
    assert len(d["skipped"]) == 3 and "skipped" in r.stderr


# -- 7. requirements nothing meets ------------------------------------------------------------

def test_compare_requirement_nothing_meets_exits_1_with_the_closest():
    r = invoke("compare", RESNET, "--hw", "v100,t4,tpu-v4", "--max-latency", "1us", "-f", "json")
    assert r.exit_code == 1
    rec = json.loads(r.stdout)["recommendation"]
    assert rec["chosen"] is None and rec["closest"]["hardware"] == "tpu-v4"
    table = invoke("compare", RESNET, "--hw", "v100,t4,tpu-v4", "--max-latency", "1us").stdout
    assert "no target meets the requirement" in table and "closest: tpu-v4" in table


def test_unpriced_targets_are_shown_never_silently_dropped():
    d = json.loads(invoke("compare", RESNET, "--hw", "h100,tpu-v4", "--max-latency", "5ms", "-f", "json").stdout)
    rec = d["recommendation"]
    assert rec["chosen"] == "h100" and rec["unpriced"] == ["tpu-v4"] and "tpu-v4" in rec["note"]
    assert "unpriced" in invoke("compare", RESNET, "--hw", "h100,tpu-v4").stdout


# -- 8. the batch list form the fixes suggest works -----------------------------------------

def test_suggested_batch_list_form_runs():
    d = json.loads(invoke("analyze", RESNET, "--hw", "h100", "-f", "json", "-q").stdout)
    text = next(f["text"] for f in d["model_fixes"] if f["id"] == "bigger_batch")
    form = text.split("--batch ")[1].split("`")[0]
    r = invoke("sweep", RESNET, "--hw", "v100", "--batch", form, "-f", "json")
    assert r.exit_code == 0
    assert [x["batch"] for x in json.loads(r.stdout)["rows"]] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert invoke("sweep", RESNET, "--batch", "1..8", "-f", "json").exit_code == 0


def _range_model(tmp_path):
    """y = r * r for r = Range(0, n, 1): the output's length is the value of input n."""
    from onnx import TensorProto, helper

    from helpers import model, save

    nodes = [helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", TensorProto.INT64, [], [0])),
             helper.make_node("Constant", [], ["one"], value=helper.make_tensor("o", TensorProto.INT64, [], [1])),
             helper.make_node("Range", ["zero", "n", "one"], ["r"], name="range"),
             helper.make_node("Cast", ["r"], ["f"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["f", "f"], ["y"], name="square")]
    m = model(nodes, [helper.make_tensor_value_info("n", TensorProto.INT64, [])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return save(m, tmp_path, "range.onnx")


def test_value_of_an_input_resolves_the_shapes_computed_from_it(tmp_path):
    from dnnperf.api import inspect_model
    from dnnperf.ir import ShapeOverrides

    path = _range_model(tmp_path)
    assert {r.node.name for r in inspect_model(path).unscored()} >= {"cast", "square"}  # unknown without it
    insp = inspect_model(path, ShapeOverrides(values=(("n", (10.0,)),)))
    assert not insp.unscored()
    rows = {r.node.name: r for r in insp.rows}
    # n is a run-time input: what is computed from it is work, not a folded constant
    assert rows["square"].workload is not None and rows["square"].workload.ops == 10  # 10 multiplies by hand
    assert rows["square"].output_shape == (10,)


def _resize_model(tmp_path, computed: bool):
    """x 1x3x32x32 upsampled by float scales, then a 3x3 convolution of 8 filters: the scales are a model
    input, or computed from two shapes (Cast + Div, an upsample to a skip connection's size)."""
    from onnx import TensorProto as T

    conv = helper.make_node("Conv", ["r", "w"], ["y"], name="conv")
    if computed:
        nodes = [helper.make_node("Shape", ["t"], ["st"]), helper.make_node("Shape", ["x"], ["sx"]),
                 helper.make_node("Cast", ["st"], ["stf"], to=T.FLOAT), helper.make_node("Cast", ["sx"], ["sxf"], to=T.FLOAT),
                 helper.make_node("Div", ["stf", "sxf"], ["scales"]),
                 helper.make_node("Resize", ["x", "", "scales"], ["r"], name="resize", mode="nearest"), conv]
        inputs = [vi("x", [1, 3, 32, 32]), vi("t", [1, 3, 64, 64])]
    else:
        nodes = [helper.make_node("Resize", ["x", "", "scales"], ["r"], name="resize", mode="nearest"), conv]
        inputs = [vi("x", [1, 3, 32, 32]), vi("scales", [4])]
    return save(model(nodes, inputs, [vi("y", None)], [weight("w", [8, 3, 3, 3])]), tmp_path)


def test_float_scales_computed_or_given_resolve_a_resize(tmp_path):
    from dnnperf.api import inspect_model
    from dnnperf.ir import ShapeOverrides

    # 64 x 64 after the upsample, 62 x 62 after the unpadded 3x3: 8 x 62 x 62 x 27 MACs by hand
    insp = inspect_model(_resize_model(tmp_path, computed=True))
    assert not insp.unscored()
    rows = {r.node.name: r for r in insp.rows}
    assert rows["resize"].output_shape == (1, 3, 64, 64) and rows["conv"].workload.macs == 8 * 62 * 62 * 27
    given = _resize_model(tmp_path, computed=False)
    unknown = {r.node.name: r for r in inspect_model(given).unscored()}
    assert set(unknown) == {"resize", "conv"}
    assert "--value scales=" in unknown["resize"].reason  # what resolves it is named
    insp = inspect_model(given, ShapeOverrides(values=(("scales", (1.0, 1.0, 2.0, 2.0)),)))
    assert not insp.unscored()
    assert {r.node.name: r for r in insp.rows}["conv"].workload.macs == 8 * 62 * 62 * 27


def test_nodes_sized_by_an_upper_bound_say_so(tmp_path):
    import numpy as np
    from onnx import numpy_helper

    from dnnperf.api import inspect_model

    # the rows a threshold keeps (NonZero: at most all 1,000), gathered and multiplied: the MatMul's
    # 1000 x 256 x 128 MACs are an upper bound like NonZero's output, and the report says so
    nodes = [helper.make_node("Greater", ["s", "thr"], ["m"]), helper.make_node("NonZero", ["m"], ["idx"], name="nz"),
             helper.make_node("Transpose", ["idx"], ["idxT"]), helper.make_node("GatherND", ["x", "idxT"], ["sel"]),
             helper.make_node("MatMul", ["sel", "w"], ["y"], name="mm")]
    thr = numpy_helper.from_array(np.array(0.5, np.float32), "thr")
    m = model(nodes, [vi("x", [1000, 256]), vi("s", [1000])], [vi("y", None)], [thr, weight("w", [256, 128])])
    insp = inspect_model(save(m, tmp_path))
    assert {r.node.name: r for r in insp.rows}["mm"].workload.macs == 1000 * 256 * 128
    said = [w for w in insp.warnings if "downstream of nz" in w]
    assert len(said) == 1 and "mm" in said[0] and "upper bounds too" in said[0]


def test_a_bound_that_feeds_another_data_dependent_op_is_bounded_too(tmp_path):
    """torchvision's detectors keep the boxes one NonZero selects, then select among them again (and
    run their NMS inside an If on ``numel() == 0``): each bound sizes the next. A second NonZero over
    the 1,000 rows the first may keep, and an If whose taken branch holds a NonZero, were left with
    unknown shapes (the MatMul after them unscored); both are bounded now, 1000 x 256 x 128 MACs at
    most, and many bounded nodes of one op are named in one line, not one each."""
    import numpy as np
    from onnx import TensorProto as T
    from onnx import numpy_helper

    from dnnperf.api import inspect_model

    thr = numpy_helper.from_array(np.array(0.5, np.float32), "thr")
    nodes = [helper.make_node("Greater", ["s", "thr"], ["m"]), helper.make_node("NonZero", ["m"], ["i1"], name="nz1"),
             helper.make_node("Squeeze", ["i1"], ["k1"]), helper.make_node("Gather", ["s", "k1"], ["s2"]),
             helper.make_node("Greater", ["s2", "thr"], ["m2"]), helper.make_node("NonZero", ["m2"], ["i2"], name="nz2"),
             helper.make_node("Squeeze", ["i2"], ["k2"]), helper.make_node("Gather", ["x", "k2"], ["sel"]),
             helper.make_node("MatMul", ["sel", "w"], ["y"], name="mm")]
    m = model(nodes, [vi("x", [1000, 256]), vi("s", [1000])], [vi("y", None)], [thr, weight("w", [256, 128])])
    insp = inspect_model(save(m, tmp_path))
    assert not insp.unscored()
    assert {r.node.name: r for r in insp.rows}["mm"].workload.macs == 1000 * 256 * 128
    said = [w for w in insp.warnings if "(NonZero): data-dependent output" in w]
    assert said == ["2 nodes: nz1, nz2 (NonZero): data-dependent output: costed at its upper bound (every element "
                    "non-zero)"]
    # the same selection inside the branch an If takes (its condition folds from a static size)
    branch = helper.make_graph([helper.make_node("Greater", ["s", "thr"], ["bm"]),
                                helper.make_node("NonZero", ["bm"], ["bi"]), helper.make_node("Squeeze", ["bi"], ["bk"]),
                                helper.make_node("Gather", ["x", "bk"], ["bsel"])], "keep", [], [vi("bsel", None)])
    empty = helper.make_graph([helper.make_node("Identity", ["x"], ["all"])], "all", [], [vi("all", None)])
    nodes = [helper.make_node("Size", ["s"], ["n"]), helper.make_node("Equal", ["n", "zero"], ["none"]),
             helper.make_node("If", ["none"], ["sel"], then_branch=empty, else_branch=branch, name="if"),
             helper.make_node("MatMul", ["sel", "w"], ["y"], name="mm")]
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    m = model(nodes, [vi("x", [1000, 256]), vi("s", [1000])], [vi("y", None)], [thr, zero, weight("w", [256, 128])])
    insp = inspect_model(save(m, tmp_path, "if.onnx"))
    assert not insp.unscored()
    assert {r.node.name: r for r in insp.rows}["mm"].workload.macs == 1000 * 256 * 128
    # the If's condition is known: its taken branch stands in its place, the bounded NonZero among them
    assert any("downstream of keep/NonZero_1" in w and "mm" in w for w in insp.warnings)


def test_a_cast_in_a_taken_branch_has_the_type_it_casts_to(tmp_path):
    """Inside the branch an If takes (its condition known at load time) a tensor ONNX's inference gives
    no type took its first input's: a Cast of int64 indices to float stayed int64, the Mul after it was
    priced in int64 and the report said ONNX Runtime would refuse the file (Mask R-CNN's box offsets)."""
    import numpy as np
    from onnx import TensorProto as T, numpy_helper

    from dnnperf.api import inspect_model

    branch = helper.make_graph([helper.make_node("Cast", ["idx"], ["f"], to=T.FLOAT),
                                helper.make_node("Mul", ["f", "x"], ["o"]),
                                helper.make_node("Less", ["o", "x"], ["lt"]),
                                helper.make_node("Where", ["lt", "o", "x"], ["w"])], "scale", [], [vi("w", None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["o2"])], "same", [], [vi("o2", None)])
    nodes = [helper.make_node("Size", ["idx"], ["n"]), helper.make_node("Equal", ["n", "zero"], ["none"]),
             helper.make_node("If", ["none"], ["y"], then_branch=other, else_branch=branch, name="if")]
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    m = model(nodes, [vi("x", [8]), vi("idx", [8], T.INT64)], [vi("y", None)], [zero])
    insp = inspect_model(save(m, tmp_path))
    t = insp.graph.tensors
    assert [t[k].dtype for k in ("f", "o", "lt", "w")] == ["float32", "float32", "bool", "float32"]
    assert not any("different element types" in w for w in insp.warnings), insp.warnings


def test_a_body_reading_an_untyped_outer_tensor_is_not_called_malformed(tmp_path):
    """A --batch that contradicts the model leaves the tensors after the contradiction untyped; an If
    body that reads one of them was refused as 'malformed' (reading a name nobody produces) instead
    of naming the contradiction (a detector's [3, H, W] image at --batch 2)."""
    from onnx import TensorProto as T

    other = helper.make_graph([helper.make_node("ReduceMax", ["y"], ["mx"], keepdims=0)], "else", [], [vi("mx", [])])
    zero = helper.make_graph([helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", T.FLOAT, [], [0.0]))],
                             "then", [], [vi("c", [])])
    nodes = [helper.make_node("Sub", ["x", "mean"], ["y"]),
             helper.make_node("If", ["cond"], ["out"], then_branch=zero, else_branch=other)]
    m = model(nodes, [vi("x", [3, 4]), vi("cond", [], T.BOOL)], [vi("out", [])], [weight("mean", [3, 1])])
    r = invoke("inspect", save(m, tmp_path), "--batch", "2")
    one_line_error(r, 2, "--batch 2 contradicts the model", "Sub")
    assert "malformed" not in r.stderr


def test_an_input_without_a_batch_axis_is_one_sample(tmp_path):
    """A detector traced on a list of images takes one [3, H, W] image and stacks it into the
    [1, 3, H, W] its first convolution reads: its first dim is channels, and the report said
    'batch 3' (throughput 3x too high). One run is one sample, and a note says why."""
    from helpers import ints

    nodes = [helper.make_node("Unsqueeze", ["img", "ax"], ["x"]),
             helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])]
    m = model(nodes, [vi("img", [3, 32, 32])], [vi("y", [1, 8, 32, 32])], [ints("ax", [0]), weight("w", [8, 3, 3, 3])])
    d = json.loads(invoke("analyze", save(m, tmp_path), "--hw", "t4", "-f", "json", "-q").stdout)
    assert d["settings"]["batch"] == 1
    assert d["totals"]["throughput_per_s"] == pytest.approx(1 / d["totals"]["latency_s"], rel=1e-6)
    assert any("'img' [3, 32, 32] has no batch axis" in w for w in d["warnings"])
    # a batch the model cannot take is refused by every command, a sweep too (it printed a
    # partial 'batch 2' row with no error), saying why: the input has no batch axis (it said only that
    # the convolution's channels contradict its weights)
    for cmd in (["analyze", "--batch", "2"], ["sweep", "--batch", "2,4"], ["compare", "--batch", "2"]):
        one_line_error(invoke(cmd[0], save(m, tmp_path), "--hw", "t4", *cmd[1:]), 2, "--batch 2", "'img'",
                       "has no batch axis")
    # --batch 1 rewrote the first dim, the channels, to 1: with a per-channel normalisation first (a
    # detector's), [1, 32, 32] - [3, 1, 1] broadcast back to 3 channels and the run went on (then it was
    # refused, though one run of such a model is batch 1: a script passing --batch 1 to every model
    # stopped at each detector); it is the model as the file states it, its note saying so
    norm = model([helper.make_node("Sub", ["img", "mean"], ["c"]), helper.make_node("Unsqueeze", ["c", "ax"], ["x"]),
                  helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])],
                 [vi("img", [3, 32, 32])], [vi("y", [1, 8, 32, 32])],
                 [weight("mean", [3, 1, 1]), ints("ax", [0]), weight("w", [8, 3, 3, 3])])
    for p in (save(norm, tmp_path, "norm.onnx"), save(m, tmp_path)):
        plain = json.loads(invoke("analyze", p, "--hw", "t4", "-f", "json", "-q").stdout)
        r = invoke("analyze", p, "--hw", "t4", "--batch", "1", "-f", "json", "-q")
        assert r.exit_code == 0, r.output
        d = json.loads(r.stdout)
        assert d["settings"]["batch"] == 1 and any("has no batch axis" in w for w in d["warnings"])
        assert d["totals"]["macs"] == 8 * 3 * 9 * 32 * 32 and d["totals"] == plain["totals"]
    # --batch 8 there breaks the normalisation's broadcast ([8, 32, 32] - [3, 1, 1]) before any convolution:
    # the error named the Sub and asked for "shapes that match the model's weights"; the cause is the same
    one_line_error(invoke("analyze", save(norm, tmp_path, "norm.onnx"), "--hw", "t4", "--batch", "8"), 2, "--batch 8",
                   "'img'", "no batch axis")
    # a baseline records no batch for it, so check repeats the file's own shape (it passed --batch 1)
    bl = str(tmp_path / "bl.json")
    assert invoke("baseline", save(m, tmp_path), "--hw", "t4", "-o", bl).exit_code == 0
    assert json.loads(open(bl).read())["entries"][0]["settings"]["batch"] is None
    r = invoke("check", save(m, tmp_path), "--baseline", bl)
    assert r.exit_code == 0 and "PASSED" in r.stdout, r.output
    # a convolution over a computed tensor does not take the model's input: Mamba's token ids [1, 32],
    # embedded and transposed to [1, 16, 32] for its Conv1d, were called a sample without a batch axis
    # (a note on every report, and --batch 1 or a sweep refused); a spectrogram's frames alike
    toks = model([helper.make_node("Gather", ["emb", "ids"], ["e"]),
                  helper.make_node("Transpose", ["e"], ["x"], perm=[0, 2, 1]),
                  helper.make_node("Conv", ["x", "w"], ["y"], name="conv", group=16, pads=[3, 3])],
                 [vi("ids", ["batch", 32], 7)], [vi("y", None)], [weight("emb", [100, 16]), weight("w", [16, 1, 4])])
    dt = json.loads(invoke("analyze", save(toks, tmp_path, "toks.onnx"), "--hw", "t4", "--batch", "1", "-f", "json",
                           "-q").stdout)
    assert dt["settings"]["batch"] == 1 and not any("no batch axis" in w for w in dt["warnings"])
    r = invoke("sweep", save(toks, tmp_path, "toks.onnx"), "--hw", "t4", "--batch", "1,4")
    assert r.exit_code == 0, r.output
    # a real batch in the first dim is kept: [4, 3, 32, 32] into the convolution directly
    m4 = model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [vi("x", [4, 3, 32, 32])],
               [vi("y", [4, 8, 32, 32])], [weight("w", [8, 3, 3, 3])])
    d4 = json.loads(invoke("analyze", save(m4, tmp_path, "b4.onnx"), "--hw", "t4", "-f", "json", "-q").stdout)
    assert d4["settings"]["batch"] == 4 and not any("no batch axis" in w for w in d4["warnings"])
    # a batch-1 spectrogram [1, 80, 64] given a channel axis ([1, 1, 80, 64]) has its batch first: not flagged,
    # and --batch 4 reaches it
    spec = model([helper.make_node("Unsqueeze", ["mel", "ax"], ["x"]),
                  helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])],
                 [vi("mel", ["batch", 80, 64])], [vi("y", None)], [ints("ax", [1]), weight("w", [8, 1, 3, 3])])
    ds = json.loads(invoke("analyze", save(spec, tmp_path, "mel.onnx"), "--hw", "t4", "-f", "json", "-q").stdout)
    assert ds["settings"]["batch"] == 1 and not any("no batch axis" in w for w in ds["warnings"])
    d4s = json.loads(invoke("analyze", save(spec, tmp_path, "mel.onnx"), "--hw", "t4", "--batch", "4", "-f", "json",
                            "-q").stdout)
    assert d4s["settings"]["batch"] == 4 and d4s["totals"]["macs"] == 4 * ds["totals"]["macs"]


def test_an_input_shape_sizes_every_input_declared_with_its_symbols():
    from dnnperf.api import inspect_model
    from dnnperf.ir import ShapeOverrides

    bert = os.path.join(SAMPLES, "bert_base.onnx")
    # input_ids and attention_mask are both declared [batch_size, sequence_length]: giving one sizes both
    one = inspect_model(bert, ShapeOverrides(input_shapes=(("input_ids", (2, 128)),)))
    both = inspect_model(bert, ShapeOverrides(batch=2, dims=(("sequence_length", 128),)))
    assert one.totals()["macs"] == both.totals()["macs"] > 0
    assert one.graph.tensors["attention_mask"].shape == (2, 128)
    assert any("sequence_length=128 (from --input-shape input_ids=2x128)" in w for w in one.warnings)
    # two sizes for one symbol: refused in one line naming both flags (it used to fail on a MatMul's dims)
    one_line_error(invoke("inspect", bert, "--input-shape", "input_ids=2x128", "--input-shape", "attention_mask=2x64"), 2,
                   "input_ids=2x128", "attention_mask=2x64", "'sequence_length'")
    one_line_error(invoke("inspect", bert, "--input-shape", "input_ids=2x128", "--dim", "sequence_length=64"), 2,
                   "--dim sequence_length=64", "input_ids=2x128")


def test_every_command_that_estimates_a_model_takes_value(tmp_path):
    from helpers import counted_loop_model

    # a Loop run n times (a model input): --value n=10 costs ten iterations of its MatMul in every command
    path = save(counted_loop_model(), tmp_path)
    one = json.loads(invoke("analyze", path, "--hw", "v100", "--value", "n=10", "-f", "json").stdout)
    assert one["totals"]["macs"] == 10 * 64 * 64
    once = json.loads(invoke("analyze", path, "--hw", "v100", "-f", "json").stdout)["totals"]["latency_s"]
    assert one["totals"]["latency_s"] > 5 * once  # ten iterations, not the one costed without the value
    r = invoke("compare", path, "--hw", "v100,t4", "--value", "n=10", "-f", "json")
    assert r.exit_code == 0, r.output
    assert {row["hardware"]: row["latency_s"] for row in json.loads(r.stdout)["rows"]}["v100"] == one["totals"]["latency_s"]
    r = invoke("sweep", path, "--hw", "v100", "--batch", "1", "--value", "n=10", "-f", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rows"][0]["latency_s"] == one["totals"]["latency_s"]
    for cmd, out in (("plot", "r.svg"), ("report", "r.html")):
        r = invoke(cmd, path, "--hw", "v100", "--value", "n=10", "-o", tmp_path / out)
        assert r.exit_code == 0 and (tmp_path / out).stat().st_size > 0, r.output


def test_overlap_input_means_the_same_in_every_command(tmp_path):
    # resnet50 at batch 8 on a V100: its 4.8 MB input crosses PCIe in ~306 us, hidden when prefetched
    args = [RESNET, "--hw", "v100", "--batch", "8", "--overlap-input", "-f", "json"]
    one = json.loads(invoke("analyze", *args).stdout)["totals"]["latency_s"]
    plain = json.loads(invoke("analyze", *args[:-3], "-f", "json").stdout)["totals"]["latency_s"]
    assert plain - one == pytest.approx(8 * 3 * 224 * 224 * 4 / 15.75e9, rel=0.01)
    assert json.loads(invoke("compare", *args).stdout)["rows"][0]["latency_s"] == one
    assert json.loads(invoke("sweep", RESNET, "--hw", "v100", "--batch", "8", "--overlap-input", "-f", "json")
                      .stdout)["rows"][0]["latency_s"] == one
    b = tmp_path / "b.json"
    assert invoke("baseline", *args[:-2], "-o", b).exit_code == 0
    entry = json.loads(b.read_text())["entries"][0]
    assert entry["settings"]["overlap_input"] is True and entry["latency_s"] == one
    assert invoke("check", RESNET, "--baseline", b).exit_code == 0


def test_value_errors_are_one_line(tmp_path):
    path = _range_model(tmp_path)
    for args, words in ((["--value", "m=10"], "model's inputs are: n"),
                        (["--value", "n=1,2"], "2 value(s) given"),
                        (["--value", "n=2.5"], "whole numbers"),
                        (["--value", "n=ten"], "numbers separated by commas"),
                        (["--value", "n"], "NAME=V"),
                        # numpy printed a RuntimeWarning for these and cast them to an arbitrary integer
                        (["--value", "n=1e300"], "values must lie in"),
                        (["--value", "n=inf"], "finite numbers"),
                        (["--value", "n=nan"], "finite numbers")):
        r = runner.invoke(app, ["inspect", path, *args])
        assert r.exit_code == 2, (args, r.output)
        assert words in r.output and "Traceback" not in r.output and "Warning" not in r.output
        assert r.stderr.count("\n") == 1, (args, r.stderr)


def _shape_input_model(tmp_path, outputs, name):
    """z = zeros(shape) for a run-time int64[2] input 'shape', reduced along each axis."""
    from onnx import TensorProto, helper

    from helpers import ints, model, save

    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["z"], name="zeros"),
             helper.make_node("ReduceSum", ["z", "ax1"], ["rows"], name="sum_rows", keepdims=0),
             helper.make_node("ReduceSum", ["z", "ax0"], ["cols"], name="sum_cols", keepdims=0),
             helper.make_node("Reshape", ["z", "flat"], ["flat_z"], name="flatten")]
    m = model(nodes, [helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
              [helper.make_tensor_value_info(o, TensorProto.FLOAT, dims) for o, dims in outputs],
              inits=[ints("ax1", [1]), ints("ax0", [0]), ints("flat", [-1])])
    return save(m, tmp_path, name)


def test_input_value_forced_by_declared_output_shapes_is_used_and_stated(tmp_path):
    from dnnperf.api import inspect_model

    path = _shape_input_model(tmp_path, [("rows", [3]), ("cols", [4]), ("flat_z", [12])], "forced.onnx")
    insp = inspect_model(path)
    assert not insp.unscored()
    rows = {r.node.name: r for r in insp.rows}
    assert rows["zeros"].output_shape == (3, 4)  # rows = shape[0] = 3, cols = shape[1] = 4
    assert rows["flatten"].output_shape == (12,)
    assert any("'shape' = [3, 4]" in w and "declared output shapes" in w for w in insp.warnings), insp.warnings


def test_input_value_not_forced_by_declared_shapes_stays_unknown(tmp_path):
    from dnnperf.api import inspect_model

    # only the flattened length is declared: 12 = 3 x 4 = 2 x 6 = ...: the value is not forced
    path = _shape_input_model(tmp_path, [("rows", None), ("cols", None), ("flat_z", [12])], "product.onnx")
    insp = inspect_model(path)
    assert {"zeros", "sum_rows"} <= {r.node.name for r in insp.unscored()}
    assert not any("declared output shapes" in w for w in insp.warnings)
    # two outputs name shape[0] with different sizes (3 and 5): contradictory, nothing is read off
    path = _shape_input_model(tmp_path, [("rows", [3]), ("cols", [4]), ("flat_z", None)], "ok.onnx")
    assert not inspect_model(path).unscored()  # the premise: consistent, it resolves
    import onnx

    m = onnx.load(path)
    extra = onnx.helper.make_node("ReduceSum", ["z", "ax1"], ["rows2"], name="sum_rows2", keepdims=0)
    m.graph.node.append(extra)
    m.graph.output.append(onnx.helper.make_tensor_value_info("rows2", onnx.TensorProto.FLOAT, [5]))
    bad = str(tmp_path / "conflict.onnx")
    onnx.save(m, bad)
    insp = inspect_model(bad)
    assert "zeros" in {r.node.name for r in insp.unscored()}
    assert not any("declared output shapes" in w for w in insp.warnings)
    # rows declared [3] names shape[0]; shape[1] changes the shape of z and no output names it
    path = _shape_input_model(tmp_path, [("rows", [3]), ("cols", None), ("flat_z", None)], "half.onnx")
    insp = inspect_model(path)
    assert "zeros" in {r.node.name for r in insp.unscored()}
    assert not any("declared output shapes" in w for w in insp.warnings)


def _shuffle_shape_model(tmp_path, batch, name):
    """y = Relu(Reshape(x, [N, -1])) with the target shape computed from Shape(x), as an exporter
    writes it: two Shape nodes of x (one a repeat), a Gather of each, a no-op Cast, an Unsqueeze and a
    Concat."""
    from onnx import TensorProto, helper

    from helpers import ints, model, save

    nodes = [helper.make_node("Shape", ["x"], ["s1"], name="shape1"),
             helper.make_node("Shape", ["x"], ["s2"], name="shape2"),
             helper.make_node("Gather", ["s1", "zero"], ["g1"], name="gather1"),
             helper.make_node("Gather", ["s2", "zero"], ["g2"], name="gather2"),
             helper.make_node("Cast", ["g1"], ["c1"], name="cast", to=TensorProto.INT64),
             helper.make_node("Unsqueeze", ["c1", "axes"], ["u1"], name="unsq"),
             helper.make_node("Unsqueeze", ["g2", "axes"], ["u2"], name="unsq2"),
             helper.make_node("Concat", ["u1", "minus1"], ["target"], name="concat", axis=0),
             helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    m = model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8, 4, 4])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None), helper.make_tensor_value_info("u2", TensorProto.INT64, None)],
              inits=[ints("zero", 0), ints("axes", [0]), ints("minus1", [-1])])
    return save(m, tmp_path, name)


def test_shape_arithmetic_over_symbolic_dims_is_host_work_on_cpu_runtimes(tmp_path):
    import yaml

    from dnnperf.api import analyze, inspect_model
    from dnnperf.hardware import load_profile
    from dnnperf.scoring import Settings

    insp = inspect_model(_shuffle_shape_model(tmp_path, "N", "dyn.onnx"))
    fam = {r.node.name: r.workload.family for r in insp.rows}
    # the runtime computes shape1, gather1, unsq and concat every inference; shape2 and gather2 repeat
    # shape1 and gather1 (removed by common-subexpression elimination), the int64 -> int64 cast is a
    # no-op, and unsq2 repeats unsq once the cast is gone
    assert [n for n, f in fam.items() if f == "shape_runtime"] == ["shape1", "gather1", "unsq", "concat"]
    assert {fam[n] for n in ("shape2", "gather2", "cast", "unsq2")} == {"shape"}
    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "cpu-avx2.yaml")) as fh:
        d = yaml.safe_load(fh)
    d.update(name="hostcpu", host_op_us=2.5)
    p = tmp_path / "hostcpu.yaml"
    p.write_text(yaml.safe_dump(d))
    on_cpu = analyze(insp, load_profile(str(p)), Settings(), with_fixes=False)
    host = [c for c in on_cpu.score.layers if c.layer.workload.family == "shape_runtime"]
    assert len(host) == 4 and all(c.time_s == pytest.approx(2.5e-6) for c in host)  # 4 ops x 2.5 us by hand
    assert all(c.losses["launch_overhead"] == c.time_s for c in host)
    # the advice names the cause, never "0 launches" (they launch no kernel)
    fixed = analyze(insp, load_profile(str(p)), Settings())
    texts = [f["text"] for c in fixed.score.layers if c.layer.workload.family == "shape_runtime" for f in c.fixes]
    assert texts and all("symbolic" in t and "0 launch" not in t for t in texts), texts
    # a GPU's host runs the arithmetic ahead of the device: no time
    on_gpu = analyze(insp, load_profile("v100"), Settings(), with_fixes=False)
    assert all(c.time_s == 0 for c in on_gpu.score.layers if c.layer.workload.family == "shape_runtime")
    # static dims: every runtime folds it
    static = inspect_model(_shuffle_shape_model(tmp_path, 1, "static.onnx"))
    assert not any(r.workload.family == "shape_runtime" for r in static.rows)


def test_a_batch_the_device_cannot_hold_is_marked(tmp_path):
    """A 3 x 3 convolution 3 -> 64 channels at 224 x 224 (no padding: 222 x 222 out), fp32, batch
    20,000 reads 20,000 x 3 x 224 x 224 x 4 B = 12.04 GB and writes 20,000 x 64 x 222 x 222 x 4 B =
    252.3 GB: no 16 GB V100 holds that at once. The estimate is still printed, with a note that says
    the run cannot happen; at batch 1 (12 MB) there is none."""
    from helpers import conv_model

    p = save(conv_model(3, 64, 224, 224, 3), tmp_path)
    r = invoke("analyze", p, "--hw", "v100", "-b", "20000", "-f", "json")
    assert r.exit_code == 0, r.output
    note = next(w for w in json.loads(r.stdout)["warnings"] if w.startswith("does not fit"))
    assert "v100's 16 GB" in note and "12 GB" in note and "252 GB" in note and "batch 20000" in note
    assert "does not fit" in r.stderr
    r1 = invoke("analyze", p, "--hw", "v100", "-b", "1", "-f", "json")
    assert not any("does not fit" in w for w in json.loads(r1.stdout)["warnings"])
    # the CI gate: baseline says so when it records such a run, and check fails on it (exit 1) though
    # its time did not move
    base = tmp_path / "base.json"
    r = invoke("baseline", p, "--hw", "v100", "-b", "20000", "-o", base)
    assert r.exit_code == 0 and "m.onnx on v100: does not fit v100's 16 GB" in r.stderr, r.output
    r = invoke("check", p, "--baseline", base)
    assert r.exit_code == 1 and "does not fit v100's 16 GB" in r.stdout and "+0.0%" in r.stdout, r.output
    base1 = tmp_path / "base1.json"
    assert invoke("baseline", p, "--hw", "v100", "-b", "1", "-o", base1).exit_code == 0
    assert invoke("check", p, "--baseline", base1).exit_code == 0
    # a sweep marks the rows the device cannot hold
    r = invoke("sweep", p, "--hw", "v100", "--batch", "1,20000", "-f", "json")
    assert [row["fits_memory"] for row in json.loads(r.stdout)["rows"]] == [True, False], r.output
    table = invoke("sweep", p, "--hw", "v100", "--batch", "1,20000").stdout
    assert [line.split()[1] for line in table.splitlines() if "(does not fit)" in line] == ["20000"], table


def test_weights_the_device_cannot_hold_are_marked_and_meet_no_requirement(tmp_path):
    """The note above counted a layer's activations only: a 70B decoder's 139 GB of fp16 weights were
    timed on an 80 GB H100, an A100 and a 24 GB L4 without a word, and `compare --max-latency`
    recommended the H100. A [1, 1024] x [1024, 1024] float32 product holds 1024 x 1024 x 4 B =
    4.19 MB of weights and moves 4 KB + 4 KB: on a copy of the v100 profile with 1 MB of memory
    (dram_gb 0.001) the note names the weights, the row says it does not fit and meets no
    requirement, and the recommendation is the v100 (16 GB) although the copy is as fast."""
    from dnnperf.hardware import load_profile

    m = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [1, 1024])], [vi("y", None)],
              [weight("w", [1024, 1024])])
    p = save(m, tmp_path)
    d = yaml.safe_load(open(load_profile("v100").path))
    d.update(name="tiny-v100")
    d["memory"]["dram_gb"] = 0.001
    prof = tmp_path / "tiny.yaml"
    prof.write_text(yaml.safe_dump(d))
    r = invoke("analyze", p, "--hw", prof, "-f", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    note = next(w for w in d["warnings"] if w.startswith("does not fit"))
    assert "tiny-v100's 0.001 GB: the weights hold 4.19 MB" in note and "8.19 KB" in note, note
    # the same check for scripts, in the report's own fields: 4,194,304 B of weights, the product's
    # 4,096 B read and 4,096 B written next to them (more than the 4,096 B of the model's input)
    assert d["memory"] == {"weights_bytes": 4_194_304, "activation_bytes": 8_192,
                           "activations_of": f"layer {d['ranking'][0]}", "dies": 1, "needed_bytes": 4_202_496,
                           "device_bytes": 1_000_000, "fits": False}
    d = json.loads(invoke("analyze", p, "--hw", "v100", "-f", "json").stdout)
    assert d["memory"]["device_bytes"] == 16_000_000_000 and d["memory"]["fits"] is True
    # a precision what-if holds everything at that precision: 2 bytes an element in fp16
    d = json.loads(invoke("analyze", p, "--hw", "v100", "-p", "fp16", "-f", "json").stdout)
    assert (d["memory"]["weights_bytes"], d["memory"]["activation_bytes"]) == (2_097_152, 4_096)
    # ... the model's inputs too (a table fed as an input, one row gathered: 1,000 x 1,000 x 4 B + the
    # int64 index's 8 B, which stays 8 B)
    m = model([helper.make_node("Gather", ["table", "i"], ["y"])], [vi("table", [1000, 1000]), vi("i", [1], onnx.TensorProto.INT64)],
              [vi("y", None)])
    g = save(m, tmp_path, "gather.onnx")
    for prec, want in ((None, 4_000_008), ("fp16", 2_000_008)):
        d = json.loads(invoke("analyze", g, "--hw", "v100", *(("-p", prec) if prec else ()), "-f", "json").stdout)
        assert (d["memory"]["activations_of"], d["memory"]["activation_bytes"]) == ("model inputs", want), prec
    r = invoke("compare", p, "--hw", f"v100,{prof}", "--max-latency", "1s", "-f", "json")
    assert r.exit_code == 0, r.output
    c = json.loads(r.stdout)
    fits = {row["hardware"]: (row["fits_memory"], row["meets_requirement"], row["memory_needed_bytes"]) for row in c["rows"]}
    assert fits == {"v100": (True, True, 4_202_496), "tiny-v100": (False, False, 4_202_496)}, fits
    assert c["recommendation"]["chosen"] == "v100"
    assert [m["hardware"] for m in c["recommendation"]["misses"]] == ["tiny-v100"]
    r = invoke("compare", p, "--hw", str(prof), "--max-latency", "1s")
    assert r.exit_code == 1 and "misses: tiny-v100" in r.stdout and "its memory cannot hold the run" in r.stdout, r.output
    assert "(does not fit)" in r.stdout
    assert "no target's memory holds the run" in r.stdout
    # the HTML report's comparison table marks it too
    assert invoke("report", p, "--hw", f"v100,{prof}", "-o", tmp_path / "r.html").exit_code == 0
    html = (tmp_path / "r.html").read_text()
    across = html[html.index("Across targets"):]
    assert across.count("(does not fit)") == 1 and across.index("tiny-v100") < across.index("(does not fit)")



def test_an_embedding_table_is_held_whole_though_a_step_reads_its_rows(tmp_path):
    """The memory check summed the weight bytes each layer reads: an embedding Gather read 8 rows of
    its table, so BERT-base was held at 343 MB of its 438 MB (the 94 MB word table missing) and
    Llama-2-7B at 13.22 of 13.48 GB. A [1,000, 64] float32 table (256,000 B) gathered at 8 token ids,
    then a [64, 10] product (2,560 B): 258,560 B held (the rows read, 8 x 64 x 4 = 2,048 B, were all
    that counted: 4,608 B). With the product reading the same table transposed (tied weights, a
    transpose folded at load time, as GPT-2's output layer reads its embedding table) it is held once:
    256,000 B; and the time of a step still reads only the rows (the Gather moves 2,048 B)."""
    ids = vi("ids", [1, 8], onnx.TensorProto.INT64)
    m = model([helper.make_node("Gather", ["table", "ids"], ["e"]), helper.make_node("MatMul", ["e", "w"], ["y"])],
              [ids], [vi("y", None)], [weight("table", [1000, 64]), weight("w", [64, 10])])
    d = json.loads(invoke("analyze", save(m, tmp_path, "emb.onnx"), "--hw", "v100", "-f", "json").stdout)
    assert d["memory"]["weights_bytes"] == 256_000 + 2_560
    gather = next(la for la in d["layers"] if la["op_type"] == "Gather")
    assert gather["weight_bytes"] == 2_048, gather
    tied = model([helper.make_node("Gather", ["table", "ids"], ["e"]), helper.make_node("Transpose", ["table"], ["t"]),
                  helper.make_node("MatMul", ["e", "t"], ["y"])], [ids], [vi("y", None)], [weight("table", [1000, 64])])
    d = json.loads(invoke("analyze", save(tied, tmp_path, "tied.onnx"), "--hw", "v100", "-f", "json").stdout)
    assert d["memory"]["weights_bytes"] == 256_000
    # under a precision what-if the unread rows take its width too
    d = json.loads(invoke("analyze", save(m, tmp_path, "emb.onnx"), "--hw", "v100", "-p", "fp16", "-f", "json").stdout)
    assert d["memory"]["weights_bytes"] == (256_000 + 2_560) // 2


def test_activations_held_across_layers_count_against_memory(tmp_path):
    """The check held the largest layer's input and output next to the weights, though a network holds
    every tensor a later layer still reads (skip connections, DenseNet's concatenations: 31% more at
    DenseNet-121's peak). A chain of four Relus over 1,000 x 1,000 float32 (4 MB a tensor) whose first
    two outputs are added back at the end: while the fourth Relu runs, a, b (both still read), its input
    c and its output d are live: 16 MB; the largest layer, an Add, reads 8 MB and writes 4 MB; the
    model's input 4 MB. On a copy of the v100 profile with 14 MB the run does not fit."""
    from dnnperf.hardware import load_profile

    nodes = [helper.make_node("Relu", [i], [o], name=f"r{k}") for k, (i, o) in enumerate(
        (("x", "a"), ("a", "b"), ("b", "c"), ("c", "d")), 1)]
    nodes += [helper.make_node("Add", ["a", "d"], ["y1"], name="add1"), helper.make_node("Add", ["b", "y1"], ["y"], name="add2")]
    p = save(model(nodes, [vi("x", [1, 1, 1000, 1000])], [vi("y", None)]), tmp_path)
    d = yaml.safe_load(open(load_profile("v100").path))
    d.update(name="v100-14mb")
    d["memory"]["dram_gb"] = 0.014
    prof = tmp_path / "small.yaml"
    prof.write_text(yaml.safe_dump(d))
    rep = json.loads(invoke("analyze", p, "--hw", prof, "-f", "json").stdout)
    assert rep["memory"] == {"weights_bytes": 0, "activation_bytes": 16_000_000, "activations_of": "live at the peak",
                             "dies": 1, "needed_bytes": 16_000_000, "device_bytes": 14_000_000, "fits": False}
    note = next(w for w in rep["warnings"] if w.startswith("does not fit"))
    assert "the activations live at once at the peak of an inference hold 16 MB (batch 1; layer 'add1' alone reads 8 MB " \
           "and writes 4 MB)" in note, note
    # the table says it in its header, fitting or not
    out = invoke("analyze", p, "--hw", prof).stdout
    assert "memory held, at least: weights 0 B + activations 16 MB (live at the peak) = 16 MB of 14 MB — does NOT fit" in out
    out = invoke("analyze", p, "--hw", "v100").stdout
    assert "memory held, at least: weights 0 B + activations 16 MB (live at the peak) = 16 MB of 16 GB\n" in out
    assert invoke("report", p, "--hw", prof, "-o", tmp_path / "r.html").exit_code == 0
    assert "<span>memory: does NOT fit</span><b>16 MB of 14 MB</b>" in (tmp_path / "r.html").read_text()


def test_a_batch_sweep_names_the_largest_batch_memory_holds(tmp_path):
    """`sweep` marked each row that does not fit but never said where the limit lies. A 3 x 3
    convolution 16 -> 32 channels over 56 x 56 (padded), float32: 16 x 32 x 9 x 4 = 18,432 B of weights,
    and per sample 16 x 56 x 56 x 4 = 200,704 B read and 32 x 56 x 56 x 4 = 401,408 B written. On a copy
    of the v100 profile with 10 MB: (10,000,000 - 18,432) // 602,112 = batch 16; in fp16 the weights and
    activations halve: (10,000,000 - 9,216) // 301,056 = batch 33."""
    from dnnperf.hardware import load_profile

    p = save(conv_model(16, 32, 56, 56, 3, pads=[1, 1, 1, 1]), tmp_path)
    d = yaml.safe_load(open(load_profile("v100").path))
    d.update(name="v100-10mb")
    d["memory"]["dram_gb"] = 0.01
    prof = tmp_path / "small.yaml"
    prof.write_text(yaml.safe_dump(d))
    r = invoke("sweep", p, "--hw", prof, "--batch", "1,16,17", "-p", "fp32,fp16", "-f", "json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["memory_holds_batch"] == {"fp32": 16, "fp16": 33}
    assert [row["fits_memory"] for row in s["rows"] if row["precision"] == "fp32"] == [True, True, False]
    assert [row["memory_needed_bytes"] for row in s["rows"] if row["precision"] == "fp32"] == [
        18_432 + b * 602_112 for b in (1, 16, 17)]
    out = invoke("sweep", p, "--hw", prof, "--batch", "1,16,17").stdout
    assert "memory holds at most batch: model: 16 (" in out
    # one batch swept: no second point to read the growth off
    assert json.loads(invoke("sweep", p, "--hw", prof, "--batch", "4", "-f", "json").stdout)["memory_holds_batch"] == {
        "model": None}

def test_each_die_of_a_board_holds_the_weights(tmp_path):
    """A two-die board (k80-board: 24 GB, 12 GB a die) runs a batch data-parallel, each die a GPU of its
    own with a copy of the weights: a [1, 60000] x [60000, 60000] float32 product's 14.4 GB of weights
    (60,000^2 x 4 B, a weightless skeleton) fit neither die, though the board's total would hold them;
    a single-die 80 GB a100 holds them."""
    init = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[60000, 60000])
    init.data_location = onnx.TensorProto.EXTERNAL
    e = init.external_data.add()
    e.key, e.value = "location", "weights.bin"
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [1, 60000])], [vi("y", None)], [init])
    p = save(m, tmp_path)
    d = json.loads(invoke("analyze", p, "--hw", "k80-board", "-f", "json").stdout)
    notes = d["warnings"]
    assert any(n.startswith("does not fit k80-board's 12 GB a die (24 GB in all): the weights hold 14.4 GB") for n in notes), notes
    assert (d["memory"]["weights_bytes"], d["memory"]["device_bytes"], d["memory"]["fits"]) == (
        14_400_000_000, 12_000_000_000, False)
    # at batch 2 both dies run, each with the weights and one sample's 240,000 B in and 240,000 B out
    m2 = json.loads(invoke("analyze", p, "--hw", "k80-board", "--batch", "2", "-f", "json").stdout)["memory"]
    assert (m2["dies"], m2["activation_bytes"], m2["needed_bytes"]) == (2, 960_000, 14_400_000_000 + 480_000)
    notes = json.loads(invoke("analyze", p, "--hw", "a100", "-f", "json").stdout)["warnings"]
    assert not any("does not fit" in n for n in notes), notes


def test_an_empty_sequence_keeps_its_batch():
    """gpt2 with --dim sequence_length=0: input_ids is 1 x 0 (no bytes), and the report's batch was
    read off the inputs' bytes, so it said "batch None"; the batch is still 1."""
    r = invoke("analyze", GPT2, "--hw", "v100", "--dim", "sequence_length=0", "-f", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["settings"]["batch"] == 1


def test_a_model_with_nothing_scored_on_a_cpu_is_a_partial_estimate(tmp_path):
    """Every node unscored (a MatMul whose inner dims contradict each other, 8 vs 3) on a CPU (no
    input transfer): the latency is 0 and the downgrade advice divided by it (internal error, exit 3;
    found by a mutation fuzz of squeezenet1_1.onnx)."""
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [1, 8])], [vi("y", [1, 4])],
              [weight("w", [3, 4])])
    r = invoke("analyze", save(m, tmp_path), "--hw", "cpu-avx2", "-f", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["totals"]["latency_s"] == 0 and doc["warnings"][0].startswith("PARTIAL")


@pytest.mark.parametrize("node", [
    helper.make_node("Concat", ["x", "x"], ["y"], axis=4),
    helper.make_node("Transpose", ["x"], ["y"], perm=[0, 1, 2, -1]),
    helper.make_node("Flatten", ["x"], ["y"], axis=7),
    helper.make_node("Unique", ["x"], ["y"], axis=6),
])
def test_an_axis_out_of_range_is_never_wrapped_round(tmp_path, node):
    """The load-time shape rules took axes modulo the rank: Concat at axis 4 of a rank-4 tensor came out
    as a concatenation along axis 0 ([2, 2, 3, 4]), fully scored; the bound of a Unique's data-dependent
    output took axis 6 as axis 2. Such a node is not scored now (ONNX's own inference refuses the
    axis), and the estimate says it is partial."""
    m = model([node], [vi("x", [1, 2, 3, 4])], [vi("y", None)])
    r = invoke("analyze", save(m, tmp_path), "--hw", "v100", "-f", "json")
    assert r.exit_code in (0, 2), r.output
    if r.exit_code == 0:
        doc = json.loads(r.stdout)
        assert doc["warnings"][0].startswith("PARTIAL") and doc["coverage"]["nodes_scored"] == 0


def test_a_gather_past_its_table_is_refused(tmp_path):
    """Positions computed from the sequence length read a learned position table: a sequence longer
    than the table asks for rows the model does not have (ONNX forbids it; ONNX Runtime refuses the
    index), yet every shape resolved and the estimate came out confident. Built by hand: positions
    Range(0, S) into a 10-row table; S = 10 reads rows 0..9, S = 11 reads row 10."""
    from onnx import TensorProto as TP

    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["s"], axis=0),
             helper.make_node("Range", ["zero", "s", "one"], ["pos"]),
             helper.make_node("Gather", ["table", "pos"], ["emb"], name="positions", axis=0),
             helper.make_node("Add", ["x3", "emb"], ["y"])]
    for side, ok in ((10, True), (11, False)):
        m = model(nodes, [vi("x", [1, side], TP.INT64), vi("x3", [1, side, 4])], [vi("y", None)],
                  [weight("table", [10, 4]), helper.make_tensor("zero", TP.INT64, [], [0]),
                   helper.make_tensor("one", TP.INT64, [], [1])])
        r = runner.invoke(app, ["analyze", save(m, tmp_path, f"t{side}.onnx"), "--hw", "v100", "-q"])
        if ok:
            assert r.exit_code == 0, r.output
        else:
            assert r.exit_code == 2 and "Traceback" not in r.output and not r.stdout
            assert "'positions' (Gather) reads row 10 of 'table', which has 10" in r.stderr
    # GPT-2's 1,024 learned positions: 1,024 tokens run, 1,025 do not
    gpt2 = os.path.join(SAMPLES, "gpt2.onnx")
    r = runner.invoke(app, ["inspect", gpt2, "--dim", "sequence_length=1024", "-q", "-f", "json"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["inspect", gpt2, "--dim", "sequence_length=1025", "-q"])
    assert r.exit_code == 2 and "row 1024 of 'transformer.wpe.weight', which has 1024" in r.stderr


def test_inputs_that_do_not_broadcast_are_a_contradiction_not_a_lost_shape(tmp_path):
    """ViT-B/16 at 384 x 384 has 24^2 + 1 = 577 tokens against its 14^2 + 1 = 197-entry position
    table; BERT's 512 positions at 513 tokens expand a [1, 512] buffer to [1, 513]. Both left most of
    the graph unscored as 'shapes unresolved' (a PARTIAL estimate of 4-40% of the model) instead of
    saying that the override contradicts the model; a malformed file without overrides is marked as
    a contradiction in its coverage."""
    r = runner.invoke(app, ["analyze", os.path.join(SAMPLES, "vit_b_16.onnx"), "--hw", "v100",
                            "--input-shape", "input=1x3x384x384", "-q"])
    assert r.exit_code == 2 and not r.stdout
    assert "node '/encoder/Add' (Add): inputs [1, 577, 768] and [1, 197, 768] do not broadcast" in r.stderr
    r = runner.invoke(app, ["analyze", os.path.join(SAMPLES, "bert_base.onnx"), "--hw", "v100",
                            "--dim", "sequence_length=513", "-q"])
    assert r.exit_code == 2 and "(Expand): input and target shape [1, 512] and [1, 513] do not broadcast" in r.stderr
    r = runner.invoke(app, ["analyze", os.path.join(SAMPLES, "bert_base.onnx"), "--hw", "v100",
                            "--dim", "sequence_length=512", "-q", "-f", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["coverage"]["complete"]
    m = model([helper.make_node("Add", ["a", "b"], ["c"], name="add"), helper.make_node("Relu", ["c"], ["y"])],
              [vi("a", [2, 3]), vi("b", [4, 3])], [vi("y", None)])
    r = runner.invoke(app, ["analyze", save(m, tmp_path), "--hw", "v100", "-f", "json", "-q"])
    assert r.exit_code == 0, r.output
    cov = json.loads(r.stdout)["coverage"]
    assert cov["unscored_by_kind"]["contradiction"] == 1 and not cov["complete"]


def _mask_model(tmp_path, batch, name):
    """y = x + 0.5 * ones(shape(x)[1:]): the mask is built from the Shape of x (Gather, Concat,
    ConstantOfShape, Mul), as an exporter writes a shifted-window attention mask."""
    from onnx import TensorProto, helper, numpy_helper

    from helpers import ints, model, save

    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "hw"], ["dims"], name="gather"),
             helper.make_node("ConstantOfShape", ["dims"], ["ones"], name="fill", value=one),
             helper.make_node("Mul", ["ones", "half"], ["mask"], name="scale"),
             helper.make_node("Add", ["x", "mask"], ["y"], name="add")]
    import numpy as np

    m = model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4, 6])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
              inits=[ints("hw", [1, 2]), numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half")])
    return save(m, tmp_path, name)


def test_values_built_from_symbolic_shapes_are_kernels_on_cpu_only(tmp_path):
    """With the batch symbolic in the file, ONNX Runtime on a CPU builds the mask every inference:
    the fill (writes 4 x 6 floats = 96 B) and the scale (reads 96 B, writes 96 B) are kernels there,
    and a note says so; a GPU profile keeps them folded, as does every profile with static dims."""
    from dnnperf.api import analyze, inspect_model
    from dnnperf.hardware import load_profile
    from dnnperf.scoring import Settings

    insp = inspect_model(_mask_model(tmp_path, "N", "dyn.onnx"))
    assert set(insp.graph.runtime_built) == {"ones", "mask"}
    on_cpu = analyze(insp, load_profile("cpu-avx2"), Settings(), with_fixes=False)
    by = {c.layer.nodes[0]: c for c in on_cpu.score.layers}
    fill, scale = by["fill"].layer.workload, by["scale"].layer.workload
    assert (fill.family, fill.launches, fill.bytes_written) == ("movement", 1, 96)
    assert (scale.launches, scale.act_bytes_read, scale.bytes_written) == (1, 96, 96)
    assert by["fill"].time_s > 0 and by["scale"].time_s > 0
    assert any("symbolic" in n and "every inference" in n for n in on_cpu.notes)
    assert {r.workload.family for r in insp.rows if r.node.name in ("fill", "scale")} == {"shape"}  # left as it was
    on_gpu = analyze(insp, load_profile("v100"), Settings(), with_fixes=False)
    gpu = {c.layer.nodes[0]: c for c in on_gpu.score.layers}
    assert gpu["fill"].time_s == 0 and gpu["scale"].time_s == 0
    static = inspect_model(_mask_model(tmp_path, 2, "static.onnx"))
    assert not static.graph.runtime_built
    st = {c.layer.nodes[0]: c for c in analyze(static, load_profile("cpu-avx2"), Settings(), with_fixes=False).score.layers}
    assert st["fill"].time_s == 0 and st["scale"].time_s == 0


def test_a_runtime_built_node_without_a_kernel_cost_is_named(tmp_path, monkeypatch):
    """A runtime-built node that cannot be costed as a kernel stays at 0 s on a CPU, and the note
    says so, naming it (never a silent zero)."""
    import dnnperf.inspection as inspection
    from dnnperf.api import analyze, inspect_model
    from dnnperf.hardware import load_profile
    from dnnperf.ops import Unsupported
    from dnnperf.scoring import Settings

    real = inspection.cost_node

    def no_fill(graph, node, fold=True):
        if node.name == "fill" and not fold:
            raise Unsupported("no kernel cost")
        return real(graph, node, fold)

    monkeypatch.setattr(inspection, "cost_node", no_fill)
    insp = inspect_model(_mask_model(tmp_path, "N", "dyn.onnx"))
    rep = analyze(insp, load_profile("cpu-avx2"), Settings(), with_fixes=False)
    by = {c.layer.nodes[0]: c for c in rep.score.layers}
    assert by["fill"].time_s == 0 and by["scale"].time_s > 0
    note = next(n for n in rep.notes if "symbolic dims" in n)
    assert note.startswith("1 node(s)") and "1 more such node(s) could not be costed" in note and "(fill)" in note


def test_products_of_weights_alone_are_reconciled_with_framework_counts(tmp_path):
    """Swin V2 computes its position bias with an MLP over a constant table: products of weights
    alone, which runtimes fold when they load the model (nothing per inference) but a counter
    running the framework's modules counts (torchvision gives swin_v2_t 5.94 G, the ONNX totals
    5.921 G). The totals leave them out and a note gives the MACs they would take: here a
    [225, 2] x [2, 512] product (230,400 MACs) and a [225, 512] x [512, 8] one (921,600)."""
    from dnnperf.api import inspect_model

    nodes = [helper.make_node("MatMul", ["table", "w1"], ["h"], name="mlp1"), helper.make_node("Relu", ["h"], ["hr"]),
             helper.make_node("MatMul", ["hr", "w2"], ["bias"], name="mlp2"),
             helper.make_node("MatMul", ["x", "wx"], ["xy"], name="proj"), helper.make_node("Add", ["xy", "bias"], ["y"])]
    m = model(nodes, [vi("x", [225, 64])], [vi("y", [225, 8])],
              [weight("table", [225, 2]), weight("w1", [2, 512]), weight("w2", [512, 8]), weight("wx", [64, 8])])
    insp = inspect_model(save(m, tmp_path))
    assert insp.totals()["macs"] == 225 * 64 * 8  # only the product of the input
    said = [w for w in insp.warnings if "compute from weights alone" in w]
    assert len(said) == 1 and "2 matrix node(s)" in said[0] and "mlp1, mlp2" in said[0]
    assert "1.152 MMACs if run" in said[0]  # 230,400 + 921,600


def test_a_size_the_export_baked_in_is_named_as_such(tmp_path):
    """A static export writes its sequence length into Reshape and Expand constants (a Mistral export
    at 128 tokens given --input-shape input_ids=1x256): the error said to match the model's weights,
    which have nothing to do with it; it says the graph fixes that size now."""
    from helpers import ints

    nodes = [helper.make_node("Reshape", ["x", "to"], ["y"], name="split_heads"),
             helper.make_node("MatMul", ["y", "w"], ["z"])]
    m = model(nodes, [vi("x", [1, 8, 4])], [vi("z", [1, 8, 2, 3])], [ints("to", [1, 8, 2, 2]), weight("w", [2, 3])])
    r = invoke("analyze", save(m, tmp_path), "--hw", "t4", "--input-shape", "x=1x16x4")
    one_line_error(r, 2, "contradicts the model", "'split_heads'", "fixes that size inside the graph")
    # a mismatch with the weights keeps its advice
    c = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")], [vi("x", [1, 8, 4])], [vi("y", [1, 8, 3])],
              [weight("w", [4, 3])])
    one_line_error(invoke("analyze", save(c, tmp_path, "w.onnx"), "--hw", "t4", "--input-shape", "x=1x8x5"), 2,
                   "'proj'", "match the model's weights")


def test_a_flag_that_names_the_same_thing_twice_is_refused(tmp_path):
    """`--dim seq=64 --dim seq=32` analysed at 32 without a word (the last one won); so did two
    --input-shape or --value for one input, and a --dim for a length the LLM phase sets (`--phase
    prefill --prompt 64 --dim sequence_length=128` ran 64). Each is refused naming both values; the
    same value twice, or a --dim equal to the phase's, is accepted."""
    kv = os.path.join(SAMPLES, "tiny_llama_kv.onnx")
    one_line_error(invoke("inspect", GPT2, "--dim", "sequence_length=64", "--dim", "sequence_length=32"), 2,
                   "--dim gives 'sequence_length' twice (64 and 32)")
    assert macs(GPT2, "--dim", "sequence_length=64", "--dim", "sequence_length=64") == macs(GPT2, "--dim", "sequence_length=64")
    one_line_error(invoke("inspect", RESNET, "--input-shape", "input=1x3x224x224", "--input-shape", "input=1x3x112x112"),
                   2, "--input-shape gives 'input' twice (1x3x224x224 and 1x3x112x112)")
    one_line_error(invoke("inspect", GPT2, "--dim", "sequence_length=4", "--value", "input_ids=1,2,3,4",
                          "--value", "input_ids=5,6,7,8"), 2, "--value gives 'input_ids' twice (1,2,3,4 and 5,6,7,8)")
    one_line_error(invoke("analyze", kv, "--hw", "a100", "--phase", "prefill", "--prompt", "64", "--dim",
                          "sequence_length=128"), 2, "--dim sequence_length=128 conflicts with the phase",
                   "sets sequence_length to 64")
    agreed = invoke("analyze", kv, "--hw", "a100", "--phase", "prefill", "--prompt", "64", "--dim",
                    "sequence_length=64", "-f", "json", "-q")
    assert agreed.exit_code == 0 and json.loads(agreed.stdout)["llm"]["prefill"]["prompt"] == 64


def test_a_concat_of_maps_that_differ_off_its_axis_is_a_contradiction(tmp_path):
    """An FPN or U-Net joins an upsampled deep map with a shallow one: at a side the network's stride does
    not divide (33 rows: 17 after the stride-2 convolution, 34 after the 2x upsampling) the two differ
    on axis 2 and a runtime refuses the Concat. It was costed at its first input's shape, silently."""
    from helpers import numpy_scalar

    nodes = [helper.make_node("Conv", ["x", "w"], ["d"], strides=[2, 2], pads=[1, 1, 1, 1], name="down"),
             helper.make_node("Resize", ["d", "", "sc"], ["u"], mode="nearest", name="up"),
             helper.make_node("Concat", ["u", "x"], ["y"], axis=1, name="join")]
    m = model(nodes, [vi("x", [1, 8, "h", 32])], [vi("y", None)],
              [weight("w", [8, 8, 3, 3]), numpy_scalar("sc", [1.0, 1.0, 2.0, 2.0])])
    p = save(m, tmp_path)
    d = json.loads(invoke("inspect", p, "--dim", "h=32", "-f", "json").stdout)
    assert d["coverage"]["complete"]
    one_line_error(invoke("analyze", p, "--hw", "t4", "--dim", "h=33"), 2, "--dim h=33", "'join' (Concat)",
                   "[1, 8, 34, 32] and [1, 8, 33, 32] differ on axis 2 (34 vs 33)", "total stride")


@pytest.mark.parametrize("name, nodes, inputs, inits, bad, good, needle", [
    ("gemm", [("Gemm", ["x", "w"], {})], [("x", [1, "k"])], [("w", [64, 8])], "k=100", "k=64",
     "Gemm inner dims differ (100 vs 64)"),
    ("layernorm", [("LayerNormalization", ["x", "g", "b"], {"axis": -1})], [("x", [1, 4, "k"])], [("g", [64]), ("b", [64])],
     "k=100", "k=64", "its scale [64] does not fit the normalised axes [100]"),
    ("batchnorm", [("BatchNormalization", ["x", "s", "b", "m", "v"], {})], [("x", [1, "c", 8, 8])],
     [("s", [16]), ("b", [16]), ("m", [16]), ("v", [16])], "c=20", "c=16", "input has 20 channels but its parameter [16]"),
    ("instnorm", [("InstanceNormalization", ["x", "s", "b"], {})], [("x", [1, "c", 8, 8])], [("s", [16]), ("b", [16])],
     "c=12", "c=16", "input has 12 channels"),
    ("convtranspose", [("ConvTranspose", ["x", "w"], {"strides": [2, 2]})], [("x", [1, "c", 8, 8])], [("w", [16, 8, 2, 2])],
     "c=12", "c=16", "input has 12 channels but the weights [16, 8, 2, 2] expect 16"),
    ("prelu", [("PRelu", ["x", "s"], {})], [("x", [1, "c", 8, 8])], [("s", [16, 1, 1])], "c=12", "c=16",
     "its slope [16, 1, 1] does not broadcast to the input [1, 12, 8, 8]"),
    ("einsum", [("Einsum", ["a", "w"], {"equation": "ij,jk->ik"})], [("a", [4, "k"])], [("w", [8, 6])], "k=5", "k=8",
     "index 'j' is 5 in one operand and 8 in another"),
    ("lstm", [("LSTM", ["x", "W", "R"], {"hidden_size": 8})], [("x", [5, 1, "k"])], [("W", [1, 32, 16]), ("R", [1, 32, 8])],
     "k=10", "k=16", "input of 10 features but the weights [1, 32, 16] take 16"),
    ("matmul", [("MatMul", ["a", "w"], {})], [("a", ["n", 4, 8])], [("w", [3, 8, 4])], "n=2", "n=3",
     "MatMul batch dims [2] and [3] do not broadcast"),
    ("attention", [("com.microsoft:Attention", ["x", "w", "b"], {"num_heads": 4})], [("x", [1, 8, "k"])],
     [("w", [64, 192]), ("b", [192])], "k=100", "k=64", "input of hidden size 100 but the QKV weights [64, 192] take 64"),
])
def test_a_size_that_does_not_fit_an_op_s_parameters_is_refused(tmp_path, name, nodes, inputs, inits, bad, good, needle):
    """A --dim that changes the size an op's weights or parameters are made for (the reduction of a
    Gemm, a norm's channels, an LSTM's input features, an Einsum index, a MatMul's batch) was costed
    at the new size, silently: a runtime refuses such a model. Exit 2 naming the node and the sizes;
    the size the weights fit is analysed."""
    m = model([helper.make_node(op.split(":")[-1], ins, ["y"], name=name, domain=op.split(":")[0] if ":" in op else "",
                                **attrs) for op, ins, attrs in nodes],
              [vi(n, s) for n, s in inputs], [vi("y", None)], [weight(n, s) for n, s in inits],
              extra_opsets=[("com.microsoft", 1)])
    p = save(m, tmp_path)
    one_line_error(invoke("inspect", p, "--dim", bad), 2, f"--dim {bad} contradicts the model", f"'{name}'", needle)
    r = invoke("inspect", p, "--dim", good, "-f", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["coverage"]["complete"], r.output


def test_a_layer_norm_scale_of_the_rows_size_in_another_shape_is_taken(tmp_path):
    """ONNX Runtime takes a LayerNorm scale of the normalised size in any shape ([1, 1, 64] for rows of
    64): not a contradiction."""
    m = model([helper.make_node("LayerNormalization", ["x", "g"], ["y"], axis=-1, name="ln")], [vi("x", [1, 4, "k"])],
              [vi("y", None)], [weight("g", [1, 1, 64])])
    r = invoke("inspect", save(m, tmp_path), "--dim", "k=64", "-f", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["coverage"]["complete"], r.output
    one_line_error(invoke("inspect", save(m, tmp_path), "--dim", "k=100"), 2, "'ln'", "its scale [1, 1, 64]")


@pytest.mark.parametrize("op, scale", [("LayerNormalization", [4, 64]), ("LayerNormalization", [2, 4, 64]),
                                       ("RMSNormalization", [2, 4, 64]), ("RMSNormalization", [2, 1, 64])])
def test_a_row_norm_scale_that_broadcasts_to_the_whole_input_is_taken(tmp_path, op, scale):
    """ONNX's definition multiplies the normalised input by the scale, so a scale that broadcasts to the
    input ([2, 4, 64] or [4, 64] for [2, 4, 64] normalised over its last axis) is well formed, and ONNX
    Runtime 1.32 runs it: it was refused as not fitting the normalised axes. One whose axes differ
    from the input's ([3, 64]) stays unscored, a contradiction."""
    m = model([helper.make_node(op, ["x", "g"], ["y"], axis=-1, name="ln")], [vi("x", [2, 4, 64])],
              [vi("y", None)], [weight("g", scale)], opset=23)
    r = invoke("inspect", save(m, tmp_path), "-f", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["coverage"]["complete"], r.output
    bad = model([helper.make_node(op, ["x", "g"], ["y"], axis=-1, name="ln")], [vi("x", [2, 4, 64])],
                [vi("y", None)], [weight("g", [3, 64])], opset=23)
    d = json.loads(invoke("inspect", save(bad, tmp_path), "-f", "json").stdout)["coverage"]
    assert d["unscored_by_kind"]["contradiction"] == 1 and d["unscored_nodes"] == ["ln"]


def test_split_sizes_that_do_not_add_up_are_refused(tmp_path):
    from helpers import ints

    m = model([helper.make_node("Split", ["x", "s"], ["y1", "y2"], axis=1, name="halves")], [vi("x", [1, "c"])],
              [vi("y1", None), vi("y2", None)], [ints("s", [3, 5])])
    p = save(m, tmp_path)
    one_line_error(invoke("inspect", p, "--dim", "c=20"), 2, "'halves'", "its pieces [3, 5] add up to 8, not the 20 of axis 1")
    assert invoke("inspect", p, "--dim", "c=8").exit_code == 0


def test_matmul_nbits_input_features_must_be_its_k(tmp_path):
    """MatMulNBits' packed weights are K x N (attributes): 100 input features against K = 64 was costed."""
    import numpy as np
    import onnx

    m = model([helper.make_node("MatMulNBits", ["x", "w", "s"], ["y"], domain="com.microsoft", K=64, N=32, bits=4,
                                block_size=32, name="q4")], [vi("x", [1, "k"])], [vi("y", None)],
              [onnx.numpy_helper.from_array(np.zeros((32, 2, 16), np.uint8), "w"), weight("s", [64])],
              extra_opsets=[("com.microsoft", 1)])
    p = save(m, tmp_path)
    one_line_error(invoke("inspect", p, "--dim", "k=100"), 2, "'q4' (MatMulNBits)",
                   "input of 100 features but the packed weights are 64 x 32")
    assert invoke("inspect", p, "--dim", "k=64").exit_code == 0


def test_an_input_with_no_shape_at_all_is_a_clear_error(tmp_path):
    """An input whose type states no shape (not even a rank) left every node after it unresolved and the
    report said 'estimated latency 0' (exit 0, partial). It is an unresolved input like a symbolic dim:
    exit 2 naming the input and the flag that gives its dims; with that flag the model is analysed."""
    from onnx import TensorProto

    m = model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)], [vi("y", None)], [weight("w", [4, 3, 3, 3])])
    p = save(m, tmp_path)
    for cmd in (["inspect"], ["analyze", "--hw", "t4"]):
        one_line_error(invoke(*cmd[:1], p, *cmd[1:]), 2, "input 'x'", "has no shape in the file", "--input-shape x=")
    d = json.loads(invoke("analyze", p, "--hw", "t4", "--input-shape", "x=1x3x8x8", "-f", "json").stdout)
    assert d["totals"]["macs"] == 4 * 3 * 9 * 64 and d["coverage"]["complete"]


def test_a_loop_whose_condition_can_end_it_early_is_an_upper_bound(tmp_path):
    """A Loop of constant trip count 5 whose body computes its next condition (a `while` export: here
    i < 2) may stop after 3 trips: it was costed at 5 with nothing said. It is costed at 5 and listed as
    a stated upper bound; a body that passes its condition through (a `for i in range(5)` export) or
    writes a constant true runs exactly 5 trips and is not flagged."""
    import numpy as np
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    from dnnperf.api import inspect_model
    from helpers import model, save, vi, weight

    def loop(cond_nodes):
        body = helper.make_graph([helper.make_node("MatMul", ["s_in", "w"], ["s_out"])] + cond_nodes, "body",
                                 [vi("i", [], T.INT64), vi("c_in", [], T.BOOL), vi("s_in", [1, 64])],
                                 [vi("c_out", [], T.BOOL), vi("s_out", [1, 64])])
        inits = [weight("w", [64, 64]), numpy_helper.from_array(np.array(5, np.int64), "m"),
                 numpy_helper.from_array(np.array(True), "c")]
        return model([helper.make_node("Loop", ["m", "c", "x"], ["y"], name="loop", body=body)],
                     [vi("x", [1, 64])], [vi("y", None)], inits)

    two = helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2, np.int64)))
    cases = {"while": [two, helper.make_node("Less", ["i", "two"], ["c_out"])],
             "for": [helper.make_node("Identity", ["c_in"], ["c_out"])],
             "true": [helper.make_node("Constant", [], ["c_out"], value=numpy_helper.from_array(np.array(True)))]}
    for name, nodes in cases.items():
        insp = inspect_model(save(loop(nodes), tmp_path, f"{name}.onnx"))
        row = next(r for r in insp.rows if r.node.op_type == "Loop")
        assert row.workload.macs == 5 * 64 * 64, name
        bound = [u for u in insp.unsupported if u["node"] == "loop" and u["kind"] == "bound"]
        if name == "while":
            assert bound and "maximum trip count 5 (an upper bound)" in bound[0]["reason"], insp.unsupported
        else:
            assert not bound, (name, insp.unsupported)


@pytest.mark.parametrize("op,bias", [("Conv", [3]), ("Conv", [8, 1]), ("ConvTranspose", [3])])
def test_a_convolutions_bias_that_is_not_one_value_per_output_channel_is_a_contradiction(tmp_path, op, bias):
    """A Conv of 8 output channels with a bias of 3 values was scored without a word (ONNX's inference
    does not look at it; ONNX Runtime refuses to run it: 'bias must be a 1D tensor of size
    output_channels'); it is a contradiction in the coverage, like a BatchNormalization's or a Gemm's
    parameters of the wrong size. The same model with an 8-value bias is complete."""
    w = [8, 4, 3, 3] if op == "Conv" else [4, 8, 3, 3]
    for b, ok in ((bias, False), ([8], True)):
        m = model([helper.make_node(op, ["x", "w", "b"], ["y"], name="c")], [vi("x", [1, 4, 16, 16])],
                  [vi("y", None)], [weight("w", w), weight("b", b)])
        r = runner.invoke(app, ["analyze", save(m, tmp_path, f"{ok}.onnx"), "--hw", "v100", "-f", "json", "-q"])
        assert r.exit_code == 0, r.output
        cov = json.loads(r.stdout)["coverage"]
        assert cov["complete"] is ok and cov["unscored_by_kind"].get("contradiction", 0) == (0 if ok else 1), cov


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_a_conv_whose_kernel_shape_contradicts_its_weights_is_a_contradiction(tmp_path, op):
    """kernel_shape [3, 3] on 4 x 3 weights: the output was sized by the attribute (a ConvTranspose's by
    the weights) and the MACs counted by the weights, without a word (ONNX Runtime: 'kernel_shape is not
    compatible with W shape'); it is a contradiction in the coverage. The consistent [4, 3] is complete."""
    for ks, ok in (([3, 3], False), ([4, 3], True)):
        w = [8, 4, 4, 3] if op == "Conv" else [4, 8, 4, 3]  # ConvTranspose: input channels first
        m = model([helper.make_node(op, ["x", "w"], ["y"], name="c", kernel_shape=ks)], [vi("x", [1, 4, 16, 16])],
                  [vi("y", None)], [weight("w", w)])
        r = runner.invoke(app, ["analyze", save(m, tmp_path, f"{ok}.onnx"), "--hw", "v100", "-f", "json", "-q"])
        assert r.exit_code == 0, r.output
        cov = json.loads(r.stdout)["coverage"]
        assert cov["complete"] is ok and cov["unscored_by_kind"].get("contradiction", 0) == (0 if ok else 1), cov


def test_an_attribute_its_operator_does_not_define_is_said(tmp_path):
    """A Relu with strides and a MaxPool with an axis (ONNX Runtime refuses the file: 'Unrecognized
    attribute'): analysed as before, nothing reads them, with one warning that counts them and names the
    first, in stderr and the JSON; none for the same model without them."""
    def build(extra):
        return model([helper.make_node("Relu", ["x"], ["r"], name="relu", **({"strides": [2, 2]} if extra else {})),
                      helper.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[2, 2],
                                       **({"axis": 1} if extra else {}))],
                     [vi("x", [1, 4, 16, 16])], [vi("y", None)])
    clean = runner.invoke(app, ["inspect", save(build(False), tmp_path, "c.onnx"), "-f", "json"])
    assert clean.exit_code == 0 and "do not define" not in clean.output
    r = runner.invoke(app, ["inspect", save(build(True), tmp_path), "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    text = ("2 node(s) carry attributes their operator does not define at opset 17 (node 'relu' (Relu): strides): "
            "ONNX Runtime refuses such a file as an invalid graph")
    assert text in r.stderr and any(text in w for w in doc["warnings"])
    assert json.loads(clean.stdout)["totals"] == doc["totals"]


def test_a_layer_fed_only_constants_whose_output_has_no_shape_is_not_folded_away(tmp_path):
    """A Conv whose input is a scalar Constant (a rewired export) computes from constants alone, but it
    has no output shape: it and everything after it were folded as load-time constants, the rest of
    the network costed 0 with coverage complete; now they are unscored, and said. A global pooling of
    a rank-1 tensor likewise has no output shape (ONNX: N x C x spatial)."""
    conv = model([helper.make_node("Constant", [], ["k"], value=helper.make_tensor("v", 1, [], [0.5])),
                  helper.make_node("Conv", ["k", "w"], ["c"], name="conv"),
                  helper.make_node("Relu", ["c"], ["y"], name="relu")],
                 [vi("x", [1, 4, 8, 8])], [vi("y", None)], [weight("w", [8, 4, 3, 3])])
    pool = model([helper.make_node("GlobalAveragePool", ["b"], ["g"], name="gap"),
                  helper.make_node("Relu", ["g"], ["y"], name="relu")], [vi("x", [1, 4])], [vi("y", None)],
                 [weight("b", [512])])
    for m, name, unscored in ((conv, "conv", 2), (pool, "gap", 2)):
        r = runner.invoke(app, ["analyze", save(m, tmp_path, f"{name}.onnx"), "--hw", "v100", "-f", "json", "-q"])
        assert r.exit_code == 0, r.output
        doc = json.loads(r.stdout)
        cov = doc["coverage"]
        assert not cov["complete"] and cov["nodes_total"] - cov["nodes_scored"] == unscored, cov
        assert name in {n for u in doc["unsupported_ops"] for n in u["nodes"]}


@pytest.mark.parametrize("attrs,wdtype,ok", [
    ({"auto_pad": "SAME_UPPER", "pads": [1, 1, 1, 1]}, 1, False),  # ONNX Runtime: cannot have both
    ({"auto_pad": "SAME_UPPER", "pads": [0, 0, 0, 0]}, 1, False),
    ({"auto_pad": "VALID", "pads": [0, 0, 0, 0]}, 1, True),  # both say: no padding
    ({"auto_pad": "SAME_UPPER"}, 1, True),
    ({"pads": [1, 1, 1, 1]}, 10, False),  # float32 input, float16 weights: ONNX's T binds both
])
def test_a_conv_whose_padding_or_element_types_disagree_is_a_contradiction(tmp_path, attrs, wdtype, ok):
    """Padding given twice (auto_pad and explicit pads) was read as auto_pad's without a word, and a
    float32 input with float16 weights priced as if valid; ONNX Runtime refuses both files."""
    w = helper.make_tensor("w", wdtype, [8, 4, 3, 3], [0.0] * 288)
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", **attrs)], [vi("x", [1, 4, 16, 16])],
              [vi("y", None)], [w])
    r = runner.invoke(app, ["analyze", save(m, tmp_path), "--hw", "v100", "-f", "json", "-q"])
    assert r.exit_code == 0, r.output
    cov = json.loads(r.stdout)["coverage"]
    assert cov["complete"] is ok and cov["unscored_by_kind"].get("contradiction", 0) == (0 if ok else 1), cov


@pytest.mark.parametrize("bound,ok", [([], True), ([1], True), ([4], False)])
def test_a_clip_bound_of_more_than_one_value_is_a_contradiction(tmp_path, bound, ok):
    """Clip's min and max are one value each (ONNX: a scalar; ONNX Runtime also takes [1]): a max of 4
    values was priced as an elementwise op, where the runtime refuses it."""
    m = model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")], [vi("x", [1, 4, 8, 8])],
              [vi("y", None)], [helper.make_tensor("lo", 1, [], [0.0]),
                                helper.make_tensor("hi", 1, bound, [6.0] * (4 if bound == [4] else 1))])
    r = runner.invoke(app, ["analyze", save(m, tmp_path), "--hw", "t4", "-f", "json", "-q"])
    assert r.exit_code == 0, r.output
    cov = json.loads(r.stdout)["coverage"]
    assert cov["complete"] is ok and cov["unscored_by_kind"].get("contradiction", 0) == (0 if ok else 1), cov


def test_what_onnx_runtime_refuses_in_a_transformer_is_marked(tmp_path):
    """Found by running mutated GPT-2 / BERT exports that dnnperf scored completely: GPT-2 with its
    Range's step (the initializer val_8, 1) set to -1 makes no positions, and the embeddings' Add then
    meets [1, 8, 768] and [1, 0, 768] (ONNX's per-node inference carried [1, 8, 768] through; numpy and
    ONNX Runtime do not broadcast 8 against 0); a LayerNormalization whose bias has more axes than its input (4 x 4 = 16
    values for 16 rows; ONNX Runtime: 'Scale/Bias rank cannot exceed Input rank'), an Unsqueeze whose
    axes name one axis twice ([-2, 1] on a vector), a Slice whose step is 0. Each is refused or marked in the
    coverage now."""
    from onnx import TensorProto

    from onnx import numpy_helper

    gpt2 = onnx.load(os.path.join(SAMPLES, "gpt2.onnx"), load_external_data=False)
    step = next(t for t in gpt2.graph.initializer if t.name == "val_8")
    assert int(numpy_helper.to_array(step)) == 1
    step.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(step) * -1, "val_8"))
    r = runner.invoke(app, ["analyze", save(gpt2, tmp_path, "gpt2.onnx"), "--hw", "v100", "--dim", "sequence_length=8",
                            "-q"])
    assert r.exit_code == 2 and "(Add): inputs [1, 8, 768] and [1, 0, 768] do not broadcast (axis -2: 0 vs 8)" \
        in r.stderr, r.output
    # the same GPT-2 with a Slice's step (val_17, also its end and axis) set to 0: ONNX refuses a 0 step
    gpt2 = onnx.load(os.path.join(SAMPLES, "gpt2.onnx"), load_external_data=False)
    step = next(t for t in gpt2.graph.initializer if t.name == "val_17")
    step.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(step) * 0, "val_17"))
    r = runner.invoke(app, ["analyze", save(gpt2, tmp_path, "gpt2s.onnx"), "--hw", "v100", "--dim", "sequence_length=8",
                            "-q"])
    assert r.exit_code == 2 and "node 'node_slice_1' (Slice): its steps [0] hold a 0" in r.stderr, r.output
    ln = model([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="ln", axis=-1)],
               [vi("x", [1, 8, 16])], [vi("y", None)], [weight("s", [16]), weight("b", [1, 1, 4, 4])])
    unsq = model([helper.make_node("Unsqueeze", ["x", "ax"], ["u"], name="unsq"),
                  helper.make_node("Relu", ["u"], ["y"], name="relu")], [vi("x", [8])], [vi("y", None)],
                 [helper.make_tensor("ax", TensorProto.INT64, [2], [-2, 1])])
    for m, name in ((ln, "ln"), (unsq, "unsq")):
        r = runner.invoke(app, ["analyze", save(m, tmp_path, f"{name}.onnx"), "--hw", "v100", "-f", "json", "-q"])
        assert r.exit_code == 0, (name, r.output)
        doc = json.loads(r.stdout)
        assert not doc["coverage"]["complete"], name
        assert name in {n for u in doc["unsupported_ops"] for n in u["nodes"]}, (name, doc["unsupported_ops"])


def test_inputs_of_one_type_parameter_in_different_types_are_said(tmp_path):
    """A Gemm fed an int64 tensor where its weights are float32 (a Cast rewired in front of it), and an
    Add of a float16 and a float32 tensor: ONNX Runtime refuses both files ('Type parameter (T) of
    Optype (Gemm) bound to different types'). Analysed as stated, with one warning that counts the
    nodes and names the first with both types, in stderr and the JSON; none for the consistent model."""
    def build(bad):
        return model([helper.make_node("Cast", ["x"], ["c"], name="cast", to=7 if bad else 1),
                      helper.make_node("Gemm", ["c", "w"], ["g"], name="gemm"),
                      helper.make_node("Cast", ["g"], ["h"], name="half", to=10 if bad else 1),
                      helper.make_node("Add", ["h", "g"], ["y"], name="add")],
                     [vi("x", [4, 8])], [vi("y", None)], [weight("w", [8, 16])])
    clean = runner.invoke(app, ["inspect", save(build(False), tmp_path, "c.onnx"), "-f", "json"])
    assert clean.exit_code == 0, clean.output
    assert "different element types" not in clean.output
    r = runner.invoke(app, ["inspect", save(build(True), tmp_path), "-f", "json"])
    assert r.exit_code == 0, r.output
    text = ("2 node(s) read inputs of different element types where their operator requires one (node 'gemm' "
            "(Gemm): 'c' is int64, 'w' is float32): ONNX Runtime refuses such a file")
    assert text in r.stderr and any(text in w for w in json.loads(r.stdout)["warnings"])


@pytest.mark.parametrize("op,idx,attrs,ok", [
    ("Gather", [0, 4], {"axis": 1}, True), ("Gather", [0, 7], {"axis": 1}, False), ("Gather", [0, -6], {"axis": 1}, False),
    ("Gather", [-5, 2], {"axis": 1}, True), ("GatherElements", [[0, 4]], {"axis": 1}, True),
    ("GatherElements", [[0, 5]], {"axis": 1}, False), ("GatherND", [[2, 4]], {}, True), ("GatherND", [[0, 9]], {}, False),
    ("GatherND", [[3, 0]], {}, False)])
def test_indices_known_at_load_time_out_of_range_are_a_contradiction(tmp_path, op, idx, attrs, ok):
    """Constant indices past the axis they pick from on data [3, 5] (ONNX Runtime stops the run: 'indices
    element out of data bounds, idx=7 must be within the inclusive range [-5,4]'): the node is a
    contradiction in the coverage; indices in range, negative ones counted from the end, are complete."""
    import numpy as np
    from onnx import numpy_helper

    m = model([helper.make_node(op, ["x", "i"], ["g"], name="g", **attrs),
               helper.make_node("Relu", ["g"], ["y"], name="relu")],
              [vi("x", [3, 5])], [vi("y", None)], [numpy_helper.from_array(np.array(idx, np.int64), "i")])
    r = runner.invoke(app, ["inspect", save(m, tmp_path), "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    cov = doc["coverage"]
    assert cov["complete"] is ok and cov["unscored_by_kind"]["contradiction"] == (0 if ok else 1), cov
    if not ok:
        assert "indices reach" in json.dumps(doc["unsupported_ops"])


def test_shape_arithmetic_built_from_constants_is_checked_too(tmp_path):
    """Nodes computed from constants alone are folded at load time, but a runtime still refuses them when
    their shapes disagree: a Reshape of a 12-element constant to 3 x 5, a Concat of constants that differ
    off the joined axis, a ScatterND whose updates are not the shape its indices pick (all three seen in
    mutated Swin-T attention masks, scored complete before). Each is a contradiction in the coverage; the
    consistent twins are complete."""
    import numpy as np
    from onnx import numpy_helper

    def const(name, arr):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(arr), name + "_v"))

    def run(nodes, name):
        m = model(nodes + [helper.make_node("Add", ["x", "k"], ["y"], name="add")], [vi("x", [1])], [vi("y", None)])
        r = runner.invoke(app, ["inspect", save(m, tmp_path, name), "-f", "json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["coverage"]

    cases = {
        "reshape": lambda bad: [const("c", np.zeros(12, np.float32)), const("s", np.array([3, 5 if bad else 4], np.int64)),
                                helper.make_node("Reshape", ["c", "s"], ["r"], name="bad"),
                                helper.make_node("ReduceSum", ["r"], ["k"], name="sum", keepdims=0)],
        "concat": lambda bad: [const("a", np.zeros((2, 3), np.float32)), const("b", np.zeros((2, 4 if bad else 3), np.float32)),
                               helper.make_node("Concat", ["a", "b"], ["r"], name="bad", axis=0),
                               helper.make_node("ReduceSum", ["r"], ["k"], name="sum", keepdims=0)],
        "scatter": lambda bad: [const("d", np.zeros((4, 4), np.float32)), const("i", np.array([[0], [2]], np.int64)),
                                const("u", np.ones((2, 3 if bad else 4), np.float32)),
                                helper.make_node("ScatterND", ["d", "i", "u"], ["r"], name="bad"),
                                helper.make_node("ReduceSum", ["r"], ["k"], name="sum", keepdims=0)],
    }
    for label, build in cases.items():
        good, bad = run(build(False), f"{label}_ok.onnx"), run(build(True), f"{label}_bad.onnx")
        assert good["complete"], (label, good)
        assert not bad["complete"] and bad["unscored_by_kind"]["contradiction"] >= 1 and "bad" in bad["unscored_nodes"], \
            (label, bad)


def test_gather_nd_indices_past_the_data_rank_are_a_contradiction(tmp_path):
    """GatherND with batch_dims 1 over data [2, 8] and index vectors of 2 (a mutated GPT-2 export): the
    vectors address two axes where one is left after the batch dim (ONNX Runtime: 'Last dimension of
    indices ... must not be larger than the rank of data'). It was sized and scored without a word; now it
    is a contradiction, and batch_dims 0 is complete."""
    for b, ok in ((0, True), (1, False)):
        m = model([helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd", batch_dims=b)],
                  [vi("x", [2, 8]), vi("i", [2, 3, 2], onnx.TensorProto.INT64)], [vi("y", None)])
        r = runner.invoke(app, ["inspect", save(m, tmp_path, f"{b}.onnx"), "-f", "json"])
        assert r.exit_code == 0, r.output
        cov = json.loads(r.stdout)["coverage"]
        assert cov["complete"] is ok and cov["unscored_by_kind"]["contradiction"] == (0 if ok else 1), cov


@pytest.mark.parametrize("op", ["Expand", "Reshape", "ConstantOfShape"])
def test_a_target_shape_that_is_not_a_vector_is_a_contradiction(tmp_path, op):
    """The target shape of an Expand, a Reshape or a ConstantOfShape is a 1-D tensor (ONNX: 'shape input
    must be 1D tensor'); a [1, 2] one (a mutated Swin-T mask, rewired) was read as two sizes and scored.
    Now the node is a contradiction in the coverage, fed to a node that runs; the [2] vector is complete."""
    import numpy as np
    from onnx import numpy_helper

    for shape, ok in (([1, 4], True), ([[1, 4]], False)):
        s = helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(np.array(shape, np.int64), "sv"))
        if op == "ConstantOfShape":
            nodes = [s, helper.make_node(op, ["s"], ["t"], name="op"), helper.make_node("Add", ["x", "t"], ["y"], name="add")]
        else:
            nodes = [s, helper.make_node(op, ["x", "s"], ["t"], name="op"), helper.make_node("Relu", ["t"], ["y"], name="relu")]
        m = model(nodes, [vi("x", [1, 4] if op == "Reshape" else [1])], [vi("y", None)])
        r = runner.invoke(app, ["inspect", save(m, tmp_path, f"{op}{ok}.onnx"), "-f", "json"])
        assert r.exit_code == 0, r.output
        cov = json.loads(r.stdout)["coverage"]
        assert cov["complete"] is ok, cov
        if not ok:
            assert cov["unscored_by_kind"]["contradiction"] == 1 and "op" in cov["unscored_nodes"], cov


def test_a_file_that_contradicts_itself_does_not_blame_the_flags(tmp_path):
    """An Add of a [batch, 3] and a [batch, 4] input contradicts itself at any batch: with --batch 2 (or 1) it
    was refused as '--batch 2 contradicts the model', sending the user after the flag. Now the result is
    what the file gives without flags (PARTIAL, the node a contradiction); a contradiction only the flag
    makes (--input-shape giving one input 4 columns where the other keeps 3) still exits 2 naming it."""
    m = model([helper.make_node("Add", ["x", "y"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["z"], name="relu")],
              [vi("x", ["batch", 3]), vi("y", ["batch", 4])], [vi("z", None)])
    p = save(m, tmp_path)
    for flags in ([], ["--batch", "2"], ["--batch", "1"]):
        r = runner.invoke(app, ["inspect", p, "-f", "json", *flags])
        assert r.exit_code == 0, (flags, r.output)
        cov = json.loads(r.stdout)["coverage"]
        assert cov["unscored_by_kind"]["contradiction"] == 1 and cov["unscored_nodes"] == ["add", "relu"], cov
    ok = model([helper.make_node("Add", ["x", "y"], ["s"], name="add")], [vi("x", ["batch", 3]), vi("y", ["batch", 3])],
               [vi("s", None)])
    r = runner.invoke(app, ["inspect", save(ok, tmp_path, "ok.onnx"), "--input-shape", "y=1x4"])
    one_line_error(r, 2, "--input-shape y=1x4 contradicts the model", "'add'")


def test_a_batch_override_does_not_keep_the_outputs_declared_batch(tmp_path):
    """An export of batch 1 declares its output [1, 4, 16, 16]. Its last layer upsamples to the input's
    own batch and channels (torchvision's F.interpolate(size=...): Shape, Slice, Concat, Resize). With
    --batch 4, ONNX's inference kept the declared [1, 4, 16, 16] over the sizes it could not fold, so
    the Resize was costed for one image of four (torchvision's LR-ASPP: 22.7 MB written instead of
    90.9 MB). By hand: 4 x 4 x 16 x 16 nearest outputs, 16,384 B written."""
    from onnx import TensorProto as T

    from dnnperf.api import inspect_model
    from dnnperf.ir import ShapeOverrides

    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
             helper.make_node("Shape", ["c"], ["s"]),
             helper.make_node("Slice", ["s", "z", "two"], ["nc"]),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
             helper.make_node("Resize", ["c", "", "", "sizes"], ["y"], mode="nearest")]
    inits = [weight("w", [4, 3, 1, 1]), helper.make_tensor("z", T.INT64, [1], [0]),
             helper.make_tensor("two", T.INT64, [1], [2]), helper.make_tensor("hw", T.INT64, [2], [16, 16])]
    p = save(model(nodes, [vi("x", [1, 3, 8, 8])], [vi("y", [1, 4, 16, 16])], inits), tmp_path)
    one = inspect_model(p)
    four = inspect_model(p, ShapeOverrides(batch=4))
    assert one.rows[-1].output_shape == (1, 4, 16, 16)
    assert four.coverage()["complete"], four.warnings
    resize = four.rows[-1]
    assert (resize.node.op_type, resize.output_shape) == ("Resize", (4, 4, 16, 16))
    assert resize.workload.bytes_written == 4 * 4 * 16 * 16 * 4


def test_a_range_of_run_time_length_is_listed_or_costed_as_the_kernel_it_is(tmp_path):
    """Range was a free shape op whatever its limits: with a limit known only at run time its output
    shape was unknown, yet the node counted as scored, and the layers after it were listed without the
    input that decides them. Listed now, naming the input to give; given (--value n=10, still run-time
    work: the runtime computes it each inference), a kernel writing 10 int64 = 80 B."""
    import numpy as np
    from onnx import TensorProto as T, numpy_helper

    nodes = [helper.make_node("Range", ["zero", "n", "one"], ["r"], name="rng"),
             helper.make_node("Cast", ["r"], ["f"], to=T.FLOAT), helper.make_node("Cos", ["f"], ["y"])]
    m = model(nodes, [vi("n", [], T.INT64)], [vi("y", None)],
              [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array(1, np.int64), "one")])
    p = save(m, tmp_path)
    d = json.loads(invoke("inspect", p, "-f", "json", "-q").stdout)
    rng = next(u for u in d["unsupported_ops"] if u["op_type"] == "Range")
    assert rng["nodes"] == ["rng"] and "give it with --value n=V" in rng["reason"], d["unsupported_ops"]
    d = json.loads(invoke("inspect", p, "--value", "n=10", "-f", "json", "-q").stdout)
    assert d["totals"]["unsupported"] == 0
    rng = {r["name"]: r for r in d["layers"]}["rng"]
    assert rng["output_shape"] == [10] and rng["bytes_written"] == 80 and rng["family"] == "movement"
