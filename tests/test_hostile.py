"""Hostile inputs: every one ends with exit 2, one clear line on stderr, no traceback, nothing
written; and external-data paths are never opened."""

import json
import os
import random

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper
from typer.testing import CliRunner

from dnnperf.cli import app
from helpers import SAMPLES, conv_model, model, save, spy_opens, vi

runner = CliRunner()
RESNET = os.path.join(SAMPLES, "resnet50.onnx")


def expect_exit2(args, needle=None):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code == 2, (args, r.exit_code, r.output)
    err = r.stderr
    assert err.startswith("dnnperf: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and r.stdout == ""
    if needle:
        assert needle in err, err
    return err


def write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


# -- model files -------------------------------------------------------------------------------

def test_empty_random_truncated(tmp_path):
    expect_exit2(["analyze", write(tmp_path, "e.onnx", b"")], "empty")
    rnd = random.Random(7)
    for i in range(5):
        expect_exit2(["analyze", write(tmp_path, f"r{i}.onnx", bytes(rnd.getrandbits(8) for _ in range(4096)))])
    data = open(RESNET, "rb").read()
    for cut in (1, 17, 256, 5000, len(data) // 3, len(data) - 1):
        expect_exit2(["analyze", write(tmp_path, f"t{cut}.onnx", data[:cut])])


def test_other_message_directory_missing(tmp_path):
    t = onnx.numpy_helper.from_array(np.zeros((4, 4), np.float32), "w")
    expect_exit2(["inspect", write(tmp_path, "t.onnx", t.SerializeToString())])
    g = helper.make_graph([], "g", [], [])
    expect_exit2(["inspect", write(tmp_path, "g.onnx", g.SerializeToString())])
    expect_exit2(["inspect", tmp_path], "directory")
    expect_exit2(["inspect", tmp_path / "missing.onnx"], "not found")


def test_inputs_that_never_end_or_are_pipes_are_refused_not_read(tmp_path):
    """A device or pipe as the model, and a stream with no end as a baseline, a published-data file or
    a search space: one line each, never a read that hangs (a baseline of /dev/zero was read until the
    memory ran out) and never 'empty (0 bytes)' for a device whose size stat cannot tell."""
    if not os.path.exists("/dev/zero") or not hasattr(os, "mkfifo"):
        pytest.skip("needs /dev/zero and named pipes")
    fifo = tmp_path / "model.onnx"
    os.mkfifo(fifo)  # opened for reading, it would block: the check comes before any open
    for args in (["analyze", "/dev/zero", "--hw", "v100"], ["inspect", fifo],
                 ["strip", "/dev/zero", "-o", tmp_path / "s.onnx"]):
        expect_exit2(args, "not a regular file")
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (2**20 + 1))  # a comment: valid YAML, one byte past the limit
    for args, needle in ((["check", RESNET, "--baseline", "/dev/zero"], "baseline '/dev/zero' is larger than 256 MB"),
                         (["validate", "--published", "/dev/zero", "--hw", "v100"], "larger than 64 MB"),
                         (["lut", "--hw", "v100", "--space", "/dev/zero"], "larger than 1 MB"),
                         (["lut", "--hw", "v100", "--space", big], "larger than 1 MB")):
        expect_exit2(args, needle)
    assert sorted(os.listdir(tmp_path)) == ["big.yaml", "model.onnx"]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file(tmp_path):
    p = write(tmp_path, "u.onnx", open(RESNET, "rb").read())
    p.chmod(0)
    expect_exit2(["inspect", p], "permission")


def test_graph_structure_errors(tmp_path):
    cyc = model([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
                [vi("x", [1])], [vi("a", None)])
    expect_exit2(["inspect", save(cyc, tmp_path, "c.onnx")], "cycle")
    dup = model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Sigmoid", ["x"], ["y"])],
                [vi("x", [1, 4])], [vi("y", None)])
    expect_exit2(["inspect", save(dup, tmp_path, "d.onnx")], "produced twice")
    dang = model([helper.make_node("Relu", ["never_made"], ["y"])], [vi("x", [1])], [vi("y", None)])
    expect_exit2(["inspect", save(dang, tmp_path, "n.onnx")], "never_made")


def test_bad_dims(tmp_path):
    zero = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1, 0, 4])], [vi("y", None)])
    # a zero-sized input is valid ONNX (the node test suite has such models): analysed, nothing to
    # compute, and the note says so
    r = runner.invoke(app, ["inspect", save(zero, tmp_path, "z.onnx")])
    assert r.exit_code == 0 and "zero-sized" in r.output, r.output
    neg = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1, -3, 4])], [vi("y", None)])
    expect_exit2(["inspect", save(neg, tmp_path, "neg.onnx")], "negative")
    big = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2**31, 2**31, 2**31])], [vi("y", None)])
    expect_exit2(["inspect", save(big, tmp_path, "big.onnx")], "overflow")
    wbig = conv_model(1, 1, 4, 4, 1)
    w = wbig.graph.initializer[0]
    w.ClearField("raw_data")
    del w.dims[:]
    w.dims.extend([2**40, 2**40])
    expect_exit2(["inspect", save(wbig, tmp_path, "wbig.onnx")], "overflow")


def test_future_opset_and_unknown_domain(tmp_path):
    m = conv_model(1, 1, 4, 4, 1)
    m.opset_import[0].version = 999
    expect_exit2(["inspect", save(m, tmp_path, "f.onnx")], "opset 999")
    u = model([helper.make_node("Mystery", ["x"], ["y"], domain="evil.corp")], [vi("x", [1, 4])], [vi("y", None)])
    expect_exit2(["inspect", save(u, tmp_path, "u.onnx")], "evil.corp")


@pytest.mark.parametrize("location", ["../../etc/passwd", "/etc/passwd", "../../../../../../root/.ssh/id_rsa"])
def test_external_data_paths_are_never_opened(tmp_path, monkeypatch, location):
    m = conv_model(4, 8, 6, 6, 3)
    init = m.graph.initializer[0]
    init.ClearField("raw_data")
    init.data_location = T.EXTERNAL
    e = init.external_data.add()
    e.key, e.value = "location", location
    p = save(m, tmp_path, "ext.onnx")
    opened = spy_opens(monkeypatch)
    r = runner.invoke(app, ["analyze", str(p), "-f", "json"])
    monkeypatch.undo()
    assert r.exit_code == 0, r.output  # weights are never needed: the analysis simply works
    assert json.loads(r.stdout)["totals"]["macs"] == 8 * 16 * 4 * 9
    assert not any(("passwd" in o) or ("id_rsa" in o) for o in opened), opened


def test_strip_of_a_model_with_external_weights_never_opens_them_and_says_so(tmp_path, monkeypatch):
    """A model whose 8 x 4 x 3 x 3 fp32 weight (1,152 bytes) lives in an external file: strip never opens
    that file, says the weight was external (it said '0 weight bytes removed ... already a skeleton'
    or counted only the inline bytes), and the skeleton points at no file of the original's."""
    m = conv_model(4, 8, 6, 6, 3)
    init = m.graph.initializer[0]
    init.ClearField("raw_data")
    init.data_location = T.EXTERNAL
    e = init.external_data.add()
    e.key, e.value = "location", "weights.bin"
    p = save(m, tmp_path, "ext.onnx")
    opened = spy_opens(monkeypatch)
    r = runner.invoke(app, ["strip", str(p), "-o", str(tmp_path / "sk.onnx")])
    monkeypatch.undo()
    assert r.exit_code == 0, r.output
    assert not any("weights.bin" in o for o in opened), opened
    assert "1 weight(s), 1,152 bytes by their dims, were in external data files, which are never opened" in r.stderr
    sk = onnx.load(str(tmp_path / "sk.onnx"), load_external_data=False)
    assert {x.value for i in sk.graph.initializer for x in i.external_data if x.key == "location"} \
        == {"__dnnperf_stripped__"}
    again = runner.invoke(app, ["strip", str(tmp_path / "sk.onnx"), "-o", str(tmp_path / "sk2.onnx")])
    assert "it was already a skeleton" in again.stderr and "external" not in again.stderr


def _deep_if_bytes(depth: int) -> bytes:
    """A model whose If nodes nest ``depth`` subgraphs, encoded directly in protobuf wire format."""

    def ld(field, payload: bytes) -> bytes:
        key = (field << 3) | 2
        n = len(payload)
        out = bytearray([key])
        while True:
            b = n & 0x7F
            n >>= 7
            out.append(b | (0x80 if n else 0))
            if not n:
                break
        return bytes(out) + payload

    inner = b""
    for _ in range(depth):
        attr = ld(1, b"then_branch") + bytes([20 << 3, 5]) + ld(6, inner)
        node = ld(1, b"c") + ld(2, b"o") + ld(4, b"If") + ld(5, attr)
        inner = ld(1, node)
    graph = inner
    opset = ld(1, b"") + bytes([2 << 3, 17])
    return bytes([1 << 3, 8]) + ld(7, graph) + ld(8, opset)


def test_ten_thousand_deep_subgraphs(tmp_path):
    expect_exit2(["inspect", write(tmp_path, "deep.onnx", _deep_if_bytes(10_000))])


def test_one_gigabyte_doc_string_is_handled(tmp_path):
    m = conv_model(4, 8, 6, 6, 3)
    m.doc_string = "x" * (1 << 30)
    p = tmp_path / "doc.onnx"
    with open(p, "wb") as fh:
        fh.write(m.SerializeToString())
    del m
    r = runner.invoke(app, ["analyze", str(p), "-f", "json"])
    assert r.exit_code == 0
    assert len(r.stdout) < 100_000  # the doc string is never echoed
    p.unlink()


# -- profiles ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text,needle", [
    ("{{{{ : [", "fix the syntax at that line"),
    ("!!python/object/apply:os.system ['touch /tmp/dnnperf-pwned']\n", "tag"),
    ("a: &a [x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b]\n"
     "d: &d [*c,*c,*c,*c,*c,*c,*c,*c]\ne: [*d,*d,*d,*d,*d,*d,*d,*d]\n", "alias"),
    ("schema: dnnperf-hw/1\nname: x\n", "missing required key"),
    ("- just\n- a list\n", "mapping"),
    ("# nothing but a comment\n", "the profile is empty"),
])
def test_hostile_profiles(tmp_path, text, needle):
    p = tmp_path / "p.yaml"
    p.write_text(text)
    expect_exit2(["analyze", RESNET, "--hw", p], needle)
    assert not os.path.exists("/tmp/dnnperf-pwned")


@pytest.mark.parametrize("edit,needle", [
    (("memory", "dram_gbs", "fast"), "dram_gbs"),
    (("memory", "dram_gbs", 0), "dram_gbs"),
    (("memory", "dram_gbs", -1), "dram_gbs"),
    (("memory", "dram_gbs", float("nan")), "dram_gbs"),
    (("memory", "dram_gbs", float("inf")), "dram_gbs"),
    (("headline", "tops", 0), "tops"),
    ((None, "surprise", 1), "surprise"),
])
def test_hostile_profile_values(tmp_path, edit, needle):
    import yaml

    from dnnperf.hardware import load_profile

    d = yaml.safe_load(open(load_profile("v100").path))
    sect, key, val = edit
    (d[sect] if sect else d)[key] = val
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(d))
    expect_exit2(["analyze", RESNET, "--hw", p], needle)


def test_zero_tile(tmp_path):
    import yaml

    from dnnperf.hardware import load_profile

    d = yaml.safe_load(open(load_profile("v100").path))
    d["units"][0]["tile"]["fp16"] = [0, 0, 0]
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(d))
    expect_exit2(["analyze", RESNET, "--hw", p], "tile")


# -- CLI flags --------------------------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    (["analyze", RESNET, "--batch", "0"], "--batch"),
    (["analyze", RESNET, "--batch", "-1"], "--batch"),
    (["analyze", RESNET, "--top", "0"], "--top"),
    (["inspect", RESNET, "--dim", "not_a_symbol=4"], "not_a_symbol"),
    (["inspect", RESNET, "--batch", "2", "--input-shape", "input=4x3x224x224"], "conflicting"),
    (["inspect", RESNET, "--input-shape", "nosuch=1x3"], "nosuch"),
    (["sweep", RESNET, "--batch", "1,0"], "--batch"),
    (["sweep", RESNET, "--precision", "fp7"], "fp7"),
    (["compare", RESNET, "--hw", "v100", "--max-latency", "fast"], "--max-latency"),
    # an infinite requirement is no requirement ('0x the inf/s required'): refused like a negative one
    (["compare", RESNET, "--hw", "v100", "--max-latency", "infms"], "--max-latency"),
    (["compare", RESNET, "--hw", "v100", "--min-throughput", "inf"], "--min-throughput"),
    (["compare", RESNET, "--hw", "v100", "--min-throughput", "nan"], "--min-throughput"),
    (["check", RESNET, "--max-regression", "lots"], "--max-regression"),
    # validate ran with '-2 threads' (and told the user to calibrate with --threads -2); more threads than
    # the process has CPUs never finished (999 on 2 CPUs: over 5 minutes for squeezenet)
    (["validate", RESNET, "--hw", "cpu-avx2", "--threads", "-2"], "--threads"),
    (["validate", RESNET, "--hw", "cpu-avx2", "--threads", "0"], "--threads"),
    (["validate", RESNET, "--hw", "cpu-avx2", "--threads", "100000"], "logical CPU"),
    (["validate", RESNET, "--hw", "cpu-avx2", "--retry-unsteady", "-1"], "--retry-unsteady"),
    (["calibrate", "-o", "never-written.yaml", "--threads", "100000"], "logical CPU"),
    # sizes past int64 reached the protobuf writer ('internal error (ValueError: Value out of range)', exit 3);
    # every size a flag gives is held to 2^31 - 1, the largest dimension cuBLAS and cuDNN take
    (["analyze", RESNET, "--hw", "v100", "--batch", str(2**63)], "--batch 9,223,372,036,854,775,808 is larger"),
    (["analyze", RESNET, "--hw", "v100", "--batch", str(2**31)], "2,147,483,647"),
    (["inspect", RESNET, "--input-shape", f"input=1x3x{2**64}x2"], "--input-shape"),
    (["inspect", os.path.join(SAMPLES, "gpt2.onnx"), "--dim", f"sequence_length={10**20}"], "--dim"),
    (["sweep", RESNET, "--hw", "v100", "--batch", f"1,4,{10**21}"], "--batch"),
    (["analyze", os.path.join(SAMPLES, "tiny_llama_kv.onnx"), "--hw", "v100", "--phase", "decode", "--context",
      str(10**20)], "--context"),
    (["llm", "skeleton", "--preset", "tiny", "--vocab", str(10**20), "-o", "never-written.onnx"], "--vocab"),
])
def test_bad_flags(args, needle):
    expect_exit2(args, needle)


def test_hostile_shape_subgraph_is_not_materialised(tmp_path):
    # Range(0, 2^40, 1) feeding a Reshape target: folding it would allocate terabytes
    from helpers import ints

    nodes = [helper.make_node("Range", ["s", "l", "d"], ["r"]),
             helper.make_node("Shape", ["r"], ["rs"]),
             helper.make_node("Reshape", ["x", "rs"], ["y"])]
    m = model(nodes, [vi("x", [4, 4])], [vi("y", None)], [ints("s", 0), ints("l", 2**40), ints("d", 1)])
    r = runner.invoke(app, ["inspect", str(save(m, tmp_path, "range.onnx")), "-f", "json"])
    assert r.exit_code in (0, 2) and "Traceback" not in r.stderr
    if r.exit_code == 0:
        assert json.loads(r.stdout)["unsupported_ops"]  # listed, not silently zero


@pytest.mark.skipif(not hasattr(os, "fork") or not os.path.exists("/proc/self"), reason="RLIMIT_AS is Linux-specific")
def test_a_long_one_dimensional_elementwise_op_is_not_materialised(tmp_path):
    # ONNX's data propagation turns a 1-D tensor of static length n feeding Add into n symbolic
    # values (~225 bytes each: 2^26 elements would need ~15 GB); shape vectors are never that long,
    # so the loader must not ask for it. Run under a 3 GB address-space cap: exit 0, one Add costed.
    import resource
    import subprocess
    import sys

    n = 1 << 26
    m = model([helper.make_node("Add", ["a", "b"], ["c"])], [vi("a", [n]), vi("b", [n])], [vi("c", [n])])
    path = save(m, tmp_path, "long1d.onnx")

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    r = subprocess.run([sys.executable, "-m", "dnnperf", "inspect", path, "-f", "json", "-q"], capture_output=True,
                       text=True, preexec_fn=cap, timeout=600)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    add = [x for x in doc["layers"] if x["op_type"] == "Add"]
    assert len(add) == 1 and add[0]["other_ops"] == n
    assert add[0]["act_bytes_read"] == 2 * n * 4 and add[0]["bytes_written"] == n * 4  # fp32: two read, one written


@pytest.mark.parametrize("where", ["dim", "node", "tensor", "attribute", "input"])
@pytest.mark.parametrize("cmd", [["analyze", "--hw", "v100"], ["inspect"],
                                 ["analyze", "--hw", "v100", "--phase", "decode", "--context", "8"]])
def test_names_that_are_not_utf8(tmp_path, where, cmd):
    """Bytes that are not UTF-8 where ONNX keeps a string (a symbolic dim, a node, tensor or attribute
    name, an input's name): the protobuf runtime hands them back as bytes; a mutation fuzz of
    tiny_llama_genai.onnx hit them in a dim name and an input name, each an internal error (exit 3)."""
    mark = "QQQQ"
    xn = "QQQQ" if where == "input" else "x"
    x = helper.make_tensor_value_info(xn, T.FLOAT, ["QQQQ" if where == "dim" else 1, "S" if where == "input" else 8])
    node = helper.make_node("Relu", [xn], ["QQQQ" if where == "tensor" else "y"], name="QQQQ" if where == "node" else "r")
    if where == "attribute":
        node = helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.1)
        node.attribute[0].name = mark
    y = helper.make_tensor_value_info("QQQQ" if where == "tensor" else "y", T.FLOAT, None)
    data = model([node], [x], [y]).SerializeToString()
    assert mark.encode() in data
    p = write(tmp_path, "m.onnx", data.replace(mark.encode(), b"\xff\xfe\xfd\xfc"))
    if "--phase" in cmd and where in ("node", "attribute"):  # the cache inputs are looked for first: none here
        expect_exit2([cmd[0], p, *cmd[1:], "-b", "1"], "no recognisable KV cache")
        return
    err = expect_exit2([cmd[0], p, *cmd[1:], "-b", "1"], "not valid UTF-8")
    assert str(p) in err


@pytest.mark.parametrize("node,inputs", [
    # ONNX's own shape inference reads the missing input anyway: the process died (segmentation fault)
    (helper.make_node("RegexFullMatch", [""], ["y"], pattern="a+"), [vi("x", [2], T.STRING)]),
    (helper.make_node("Conv", ["x"], ["y"]), [vi("x", [1, 3, 8, 8])]),  # no weights
    (helper.make_node("Gemm", ["x", ""], ["y"]), [vi("x", [2, 3])]),
    (helper.make_node("TreeEnsemble", [""], ["y"], domain="ai.onnx.ml", n_targets=1, tree_roots=[0],
                      leaf_targetids=[0], leaf_weights=helper.make_tensor("w", T.DOUBLE, [1], [1.0])),
     [vi("x", [3, 2], T.DOUBLE)]),  # another domain: the same crash
])
def test_a_node_without_its_required_inputs_is_refused(tmp_path, node, inputs):
    m = model([node], inputs, [vi("y", None)], opset=20, extra_opsets=[("ai.onnx.ml", 5)])
    err = expect_exit2(["analyze", save(m, tmp_path), "--hw", "v100"], "lacks an input its operator requires")
    assert f"({node.op_type})" in err


@pytest.mark.parametrize("attrs", [{"axis": 2 ** 31}, {"axis": -2 ** 31 - 1}])
def test_an_axis_past_the_int32_range_is_refused(tmp_path, attrs):
    """ONNX's inference wraps such an axis round and reads out of bounds: the process died (segmentation
    fault) on a LayerNormalization with axis 2^31. An axis that fits an int32 but not the rank is
    ONNX's own clear error."""
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y"], **attrs)
    m = model([node], [vi("x", [2, 3, 5]), vi("s", [5])], [vi("y", None)], opset=17)
    expect_exit2(["analyze", save(m, tmp_path), "--hw", "v100"], f"has axis = {attrs['axis']}, out of any tensor's rank")


def test_a_negative_gathernd_batch_dims_is_refused_before_onnx_inference_ends_the_process(tmp_path):
    """ONNX's C++ shape inference (onnx 1.23) dies with a segmentation fault on a GatherND whose batch_dims
    is negative: the process ended with no message (exit -11). Run in a child process, so that a
    regression fails this test rather than ending the suite."""
    import subprocess
    import sys

    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=-10)
    m = model([node], [vi("x", [2, 2, 2]), helper.make_tensor_value_info("i", T.INT64, [2, 1])], [vi("y", None)])
    p = subprocess.run([sys.executable, "-m", "dnnperf", "inspect", save(m, tmp_path)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "batch_dims = -10, which must be 0 or more" in p.stderr and p.stderr.count("\n") == 1


@pytest.mark.parametrize("parts", [2, 2 ** 31])
def test_a_split_into_another_number_of_parts_than_outputs_is_refused(tmp_path, parts):
    """ONNX's inference indexes its list of parts by output: 2 parts for 3 outputs aborted the process
    (an assertion in its C++), 2^31 parts took 51 s."""
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=parts)
    m = model([node], [vi("x", [2, 8])], [vi(o, None) for o in "abc"], opset=18)
    expect_exit2(["analyze", save(m, tmp_path), "--hw", "t4"], f"num_outputs = {parts} but 3 outputs")


def _attribute_of_type(node, name, value):
    node.attribute.append(helper.make_attribute(name, value))
    return node


@pytest.mark.parametrize("node,attr,given", [
    # a Transpose whose perm is floats came out a scalar of 4 bytes, without a word
    (_attribute_of_type(helper.make_node("Transpose", ["x"], ["y"], name="t"), "perm", [1.0, 0.0]), "perm", "FLOATS"),
    (_attribute_of_type(helper.make_node("LeakyRelu", ["x"], ["y"], name="t"), "alpha", 2), "alpha", "INT"),
    (_attribute_of_type(helper.make_node("Softmax", ["x"], ["y"], name="t"), "axis", [1]), "axis", "INTS"),
    (_attribute_of_type(helper.make_node("Constant", [], ["y"], name="t"), "value_float", 3), "value_float", "INT"),
])
def test_an_attribute_of_another_type_than_its_operator_defines_is_refused(tmp_path, node, attr, given):
    """ONNX's checker and ONNX Runtime refuse such a file; read by the shape rules, it was priced as
    something else. Next to a well-formed node of the same op, in either order (a memo of the
    well-formed one's shape must not answer for it)."""
    op = node.op_type
    good = {"Transpose": dict(perm=[1, 0]), "LeakyRelu": dict(alpha=0.1), "Softmax": dict(axis=1),
            "Constant": dict(value_float=3.0)}[op]
    well = helper.make_node(op, [] if op == "Constant" else ["x"], ["z"], name="w", **good)
    for nodes in ([well, node], [node, well]):
        m = model(nodes, [vi("x", [4, 8])], [vi("y", None), vi("z", None)])
        p = save(m, tmp_path, "m.onnx")
        expect_exit2(["inspect", p], f"gives attribute '{attr}' as {given} where {op} defines")


@pytest.mark.parametrize("node,x,reason", [
    # each was priced as if valid, with no word (ONNX Runtime refuses every one of them)
    (helper.make_node("Transpose", ["x"], ["y"], perm=[0]), [4, 8],
     "perm [0] is not a permutation of the input's 2 axes"),
    (helper.make_node("Softmax", ["x"], ["y"], axis=5), [4, 8], "axis 5 is out of range for a rank-2 input"),
    (helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=-3), [4, 8], "axis -3 is out of range"),
    (helper.make_node("Concat", ["x", "x"], ["y"], axis=2), [40, 80], "axis 2 is out of range"),
    (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[0, 0]), [1, 4, 8, 8], "kernel_shape [0, 0]"),
    (helper.make_node("LRN", ["x"], ["y"], size=0), [1, 4, 8, 8], "size 0"),
    # found by mutating the attributes of ONNX's node-test models where ONNX Runtime refuses the result
    (helper.make_node("Flatten", ["x"], ["y"], axis=3), [4, 8], "axis 3 is out of range for a rank-2 input"),
    (helper.make_node("Gather", ["x", "i"], ["y"], axis=-3), [4, 8], "axis -3 is out of range"),
    (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2]), [1, 4, 8, 8],
     "kernel_shape [2] has 1 values where a 2-D window needs 2"),
    (helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], pads=[2, 2, 2, 2]), [1, 4, 8, 8],
     "pads [2, 2, 2, 2] are not all smaller than the window [2, 2]"),
    (helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1]), [1, 4, 8, 8], "pads [1, 1, 1] has 3 values"),
    (helper.make_node("Conv", ["x", "w"], ["y"], strides=[0, 1]), [1, 4, 8, 8], "strides [0, 1]: each must be 1"),
    (helper.make_node("ReduceSum", ["x"], ["y"], axes=[1, -1]), [4, 8], "axes [1, -1] name an axis twice"),
    (helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=0), [1, 4, 8, 8], "blocksize 0 must be 1 or more"),
    (helper.make_node("ConvTranspose", ["x", "w"], ["y"], group=3), [1, 4, 8, 8],
     "group=3 does not divide the input's 4 channels"),
])
def test_an_attribute_its_input_contradicts_leaves_the_node_unscored_and_says_why(tmp_path, node, x, reason):
    opset = 11 if node.op_type == "ReduceSum" else 17  # (axes an attribute before opset 13)
    inits = [helper.make_tensor("s", T.FLOAT, [8], np.ones(8, np.float32))] if "s" in node.input else []
    if "w" in node.input:
        inits.append(helper.make_tensor("w", T.FLOAT, [4, 4, 3, 3], np.zeros(144, np.float32)))
    if "i" in node.input:
        inits.append(helper.make_tensor("i", T.INT64, [2], [0, 1]))
    p = save(model([node], [vi("x", x)], [vi("y", None)], inits, opset=opset), tmp_path, "m.onnx")
    r = runner.invoke(app, ["inspect", str(p), "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    found = [(u["kind"], reason in u["reason"]) for u in d["unsupported_ops"]]
    assert found == [("contradiction", True)], d["unsupported_ops"]
    assert "PARTIAL" in r.stderr
    # the same ops with valid attributes are scored (axis counted from the end, a 1 x 1 window)
    for ok in (helper.make_node("Softmax", ["x"], ["y"], axis=-2),
               helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1, 1]),
               helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0]),
               helper.make_node("Flatten", ["x"], ["y"], axis=2),  # [-r, r]: after the last axis is valid
               helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[2, 2, 2, 2])):
        shape = [1, 4, 8, 8] if ok.op_type in ("MaxPool", "AveragePool") else [4, 8]
        p = save(model([ok], [vi("x", shape)], [vi("y", None)]), tmp_path, "ok.onnx")
        d = json.loads(runner.invoke(app, ["inspect", str(p), "-f", "json", "-q"]).stdout)
        assert d["unsupported_ops"] == [], (ok.op_type, d["unsupported_ops"])


def test_an_attribute_of_another_type_inside_a_branch_is_refused(tmp_path):
    """The same check reaches control-flow bodies: an If whose then-branch holds the float-perm Transpose."""
    bad = _attribute_of_type(helper.make_node("Transpose", ["x"], ["t"], name="inner"), "perm", [1.0, 0.0])
    then = helper.make_graph([bad], "then", [], [vi("t", None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [vi("e", None)])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    m = model([node], [vi("x", [4, 8]), helper.make_tensor_value_info("c", T.BOOL, [])], [vi("y", None)])
    expect_exit2(["inspect", save(m, tmp_path)], "node 'inner' (Transpose)")


def test_an_attribute_without_a_type_is_read_as_before(tmp_path):
    """Files of before IR version 2 may leave an attribute's type out (0): not refused for it."""
    node = helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0])
    node.attribute[0].type = 0
    p = save(model([node], [vi("x", [4, 8])], [vi("y", None)]), tmp_path, "m.onnx")
    r = runner.invoke(app, ["inspect", str(p), "-f", "json", "-q"])
    assert r.exit_code == 0, r.output


def test_an_unknown_profile_key_names_the_keys_that_exist(tmp_path):
    """A spec-sheet profile written with a guessed key ('l2_mb' for the L2, a typo of 'dram_gbs') is told
    which key it meant, or the keys the section has, not only that its key is unknown."""
    import yaml

    base = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), "..", "profiles", "l4.yaml")))
    for section, bad, good, needle in (("memory", "l2_mb", "onchip_mb", "keys here: "),
                                       ("memory", "dram_gb_s", "dram_gbs", "did you mean 'dram_gbs'")):
        d = {**base, section: {**{k: v for k, v in base[section].items() if k != good}, bad: base[section][good]}}
        p = tmp_path / f"{bad}.yaml"
        p.write_text(yaml.safe_dump(d))
        err = expect_exit2(["analyze", RESNET, "--hw", p], f"unknown key '{bad}'")
        assert needle in err and "dnnperf hw schema" in err
        if needle == "keys here: ":
            assert "onchip_mb" in err


def _conv_typed(where: str, code: int):
    """A 3 -> 8 channel 3 x 3 Conv whose input ("input") or weights ("weight") state element type ``code``."""
    m = conv_model(3, 8, 16, 16, 3)
    if where == "input":
        m.graph.input[0].type.tensor_type.elem_type = code
    else:
        m.graph.initializer[0].data_type = code
    return m


@pytest.mark.parametrize("where,code", [("input", 0), ("input", 99), ("weight", 0), ("weight", 99)])
def test_an_element_type_that_is_not_an_onnx_type_is_refused(tmp_path, where, code):
    """Read as float32 and priced at 4 bytes an element without a word, before."""
    m = _conv_typed(where, code)
    name = "'x'" if where == "input" else "'w'"
    expect_exit2(["analyze", save(m, tmp_path), "--hw", "v100"], f"{name} in ")
    expect_exit2(["inspect", save(m, tmp_path)], f"has element type {code}, which is not an ONNX data type")


@pytest.mark.parametrize("version", [0, -1])
def test_an_operator_set_version_below_one_is_refused(tmp_path, version):
    """Read as the newest opset without a word, before."""
    m = conv_model(3, 8, 16, 16, 3)
    m.opset_import[0].version = version
    expect_exit2(["inspect", save(m, tmp_path)], f"at opset version {version}, which does not exist")


@pytest.mark.parametrize("where,dtype,name", [("input", T.STRING, "string"), ("input", T.BOOL, "bool"),
                                              ("weight", T.STRING, "string")])
def test_text_or_flags_read_as_numbers_are_refused(tmp_path, where, dtype, name):
    """A string image into a Conv was priced at 8 bytes an element, a bool one at 1, without a word;
    ONNX Runtime refuses such a file. Conv takes float16, float and double at opset 17."""
    m = _conv_typed(where, dtype)
    tensor = "x" if where == "input" else "w"
    expect_exit2(["analyze", save(m, tmp_path), "--hw", "t4"],
                 f"node 'conv' (Conv) in '{tmp_path / 'm.onnx'}' reads '{tensor}' as {name}, which Conv does not accept "
                 "at opset 17 (double, float, float16)")


def test_a_number_of_a_width_its_reader_does_not_accept_is_analysed_at_that_width_and_said(tmp_path):
    """An int64 image into a Conv of int64 weights: 8 bytes an element (3 x 16 x 16 x 8 = 6,144 bytes
    read), and a note that the file is not valid ONNX, in every format; none for the float32 original."""
    m = conv_model(3, 8, 16, 16, 3, pads=[1, 1, 1, 1])
    r = runner.invoke(app, ["inspect", save(m, tmp_path, "f.onnx"), "-f", "json"])
    assert r.exit_code == 0 and "does not accept" not in r.output
    m.graph.input[0].type.tensor_type.elem_type = T.INT64
    m.graph.initializer[0].data_type = T.INT64
    p = save(m, tmp_path)
    r = runner.invoke(app, ["inspect", p, "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["layers"][0]["act_bytes_read"] == 3 * 16 * 16 * 8
    assert "1 node(s) read a tensor the file states in a type their op does not accept (node 'conv' (Conv) reads 'x' " \
           "as int64; Conv takes double, float, float16 at opset 17)" in r.stderr
    assert any("ONNX Runtime would refuse the file" in n for n in doc["warnings"])


def test_a_stated_type_check_takes_every_type_the_schema_allows(tmp_path):
    """The same Conv in float16 and double, an int64 Reshape target and a MatMul of int32 (which MatMul
    accepts) are analysed."""
    for dtype in (T.FLOAT16, T.DOUBLE):
        m = conv_model(3, 8, 16, 16, 3)
        m.graph.input[0].type.tensor_type.elem_type = dtype
        m.graph.initializer[0].data_type = dtype
        r = runner.invoke(app, ["inspect", save(m, tmp_path)])
        assert r.exit_code == 0, r.output
    mm = model([helper.make_node("MatMul", ["a", "b"], ["y"])], [vi("a", [4, 8], T.INT32), vi("b", [8, 2], T.INT32)],
               [vi("y", None, T.INT32)])
    r = runner.invoke(app, ["inspect", save(mm, tmp_path, "mm.onnx")])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("cut", ["outputs", "inputs", "branch"])
def test_a_control_flow_body_short_of_what_its_operator_defines_is_refused(tmp_path, cut):
    """A Loop with one carried value needs a body of 2 + 1 inputs and 1 + 1 outputs; with its outputs
    cleared the loader indexed past them (an internal error, found by a fuzz of mvit_v1_b's Loops); an
    If needs one output per node output in each branch."""
    from helpers import counted_loop_model

    if cut == "branch":
        then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [vi("t", [2])])
        other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [])
        m = model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)],
                  [vi("c", [], T.BOOL), vi("x", [2])], [vi("y", None)])
        needle = "node 'if' (If) in "
        tail = "its else_branch has 0 inputs and 0 outputs where the node's 1 inputs and 1 outputs need 1 outputs"
    else:
        m = counted_loop_model()
        m.graph.node[0].name = "loop"
        body = m.graph.node[0].attribute[0].g
        del (body.output if cut == "outputs" else body.input)[:]
        needle = "node 'loop' (Loop) in "
        have = "3 inputs and 0 outputs" if cut == "outputs" else "0 inputs and 2 outputs"
        tail = f"its body has {have} where the node's 3 inputs and 1 outputs need 3 inputs and 2 outputs"
    err = expect_exit2(["analyze", save(m, tmp_path), "--hw", "v100", "--value", "n=3"], needle)
    assert tail in err, err
