"""Nodes whose input shapes break their operator's own rules: ONNX Runtime refuses such a model when it
loads it, so dnnperf leaves the node unscored as a contradiction (a visible partial estimate), or exits
2 when a flag made the shapes so. Found by giving each input of ONNX's single-node test models another
rank or size and asking ONNX Runtime which results it refuses: 2,148 of the 12,040 variants whose
original runs were refused by ONNX Runtime and scored completely by dnnperf (Col2Im of a 2-D input,
AffineGrid with nine sizes for a 4-D grid, a Softmax of a scalar...)."""

import json

import pytest
from onnx import TensorProto as T
from onnx import helper
from typer.testing import CliRunner

from dnnperf.api import inspect_model
from dnnperf.cli import app
from helpers import model, numpy_scalar, save, vi, weight

runner = CliRunner()


def _contradictions(path, *args) -> list[tuple[str, str]]:
    r = runner.invoke(app, ["inspect", path, "-f", "json", *args])
    assert r.exit_code == 0, r.output
    return [(n, u["reason"]) for u in json.loads(r.stdout)["unsupported_ops"] if u["kind"] == "contradiction"
            for n in u["nodes"]]


def test_a_node_onnx_inference_refuses_is_unscored_and_says_why(tmp_path):
    """GridSample takes an input and a grid of one rank; a 3-D input against a 4-D grid was priced as
    given. ONNX's rule says so; the node next to it, well formed, is scored."""
    nodes = [helper.make_node("GridSample", ["x", "grid"], ["y"], name="bad"),
             helper.make_node("GridSample", ["x4", "grid"], ["y4"], name="good")]
    m = model(nodes, [vi("x", [3, 8, 8]), vi("x4", [1, 3, 8, 8])], [vi("y", None), vi("y4", None)],
              [weight("grid", [1, 4, 4, 2])], opset=20)
    found = _contradictions(save(m, tmp_path))
    assert [n for n, _ in found] == ["bad"], found
    assert found[0][1].startswith("ONNX's shape inference refuses it (The input tensor and grid tensor must have "
                                  "the same rank"), found


def test_unnamed_nodes_of_one_op_are_told_apart(tmp_path):
    """ONNX's report names a node by its op type alone when the file leaves it unnamed: of two unnamed
    AffineGrids, only the second (a size of six entries) is refused."""
    nodes = [helper.make_node("AffineGrid", ["t", "s4"], ["g1"]), helper.make_node("AffineGrid", ["t", "s5"], ["g2"])]
    m = model(nodes, [vi("t", [1, 2, 3])], [vi("g1", None), vi("g2", None)],
              [numpy_scalar("s4", [1, 1, 8, 8], "int64"), weight("s5", [6], T.INT64)], opset=20)
    found = _contradictions(save(m, tmp_path))
    assert len(found) == 1 and found[0][0] == "AffineGrid_1", found
    assert "It must be 4 for 2D or 5 for 5D" in found[0][1]


def test_a_flag_that_makes_onnx_refuse_a_node_exits_2(tmp_path):
    """A --dim that gives a GridSample's input another batch than its grid's (a weight of batch 1) is the
    flag's fault: exit 2 naming the node; the model is analysed at the batch that fits."""
    m = model([helper.make_node("GridSample", ["x", "grid"], ["y"], name="gs")], [vi("x", ["n", 3, 8, 8])],
              [vi("y", None)], [weight("grid", [1, 4, 4, 2])], opset=20)
    p = save(m, tmp_path)
    assert _contradictions(p, "--dim", "n=1") == []
    r = runner.invoke(app, ["inspect", p, "--dim", "n=2"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert "--dim n=2 contradicts the model" in r.stderr and "'gs' (GridSample)" in r.stderr, r.stderr


def test_what_onnx_says_of_declarations_and_function_bodies_is_not_held_against_a_node(tmp_path):
    """Not a node's fault, so not refused: a graph output declared another shape or type than the node
    makes (the figures follow the node), and a failure inside an operator's function body (ONNX expands
    MeanVarianceNormalization into a Constant its own strict check refuses; ONNX Runtime runs it)."""
    mvn = model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"])], [vi("x", [3, 3, 3, 1])],
                [vi("y", [3, 3, 3, 1])], opset=13)
    assert inspect_model(save(mvn, tmp_path, "mvn.onnx")).coverage()["complete"]
    stale = model([helper.make_node("Col2Im", ["x", "img", "blk"], ["y"])], [vi("x", [1, 9, 4])],
                  [vi("y", [1, 2, 7, 7], T.INT64)],
                  [numpy_scalar("img", [4, 4], "int64"), numpy_scalar("blk", [3, 3], "int64")], opset=18)
    insp = inspect_model(save(stale, tmp_path, "stale.onnx"))
    assert insp.coverage()["complete"] and insp.graph.tensors["y"].shape == (1, 1, 4, 4)


@pytest.mark.parametrize("op, shape, good, attrs, needle", [
    ("Softmax", [], [4], {}, "rank 0 where Softmax takes rank 1 or more"),
    ("ArgMax", [], [4], {}, "rank 0 where ArgMax takes rank 1 or more"),
    ("Trilu", [5], [5, 5], {}, "rank 1 where Trilu takes rank 2 or more"),
    ("DepthToSpace", [1, 8, 4], [1, 8, 4, 4], {"blocksize": 2}, "rank 3 where DepthToSpace takes rank 4"),
    ("MaxPool", [1, 8], [1, 8, 4], {"kernel_shape": [2]}, "rank 2 where MaxPool takes rank 3 or more"),
])
def test_an_input_of_a_rank_its_operator_does_not_take_is_a_contradiction(tmp_path, op, shape, good, attrs, needle):
    """The path that resolves common ops without ONNX's inference (load.fast) held no rank rule: a Softmax
    of a scalar or a Trilu of a vector was scored. The same op at a rank it takes is scored."""
    m = model([helper.make_node(op, ["x"], ["y"], name="n", **attrs)], [vi("x", shape)], [vi("y", None)], opset=23)
    found = _contradictions(save(m, tmp_path))
    assert len(found) == 1 and needle in found[0][1], found
    ok = model([helper.make_node(op, ["x"], ["y"], name="n", **attrs)], [vi("x", good)], [vi("y", None)], opset=23)
    assert _contradictions(save(ok, tmp_path, "ok.onnx")) == []


def test_rules_onnx_checks_only_in_a_function_body_are_checked_on_the_node(tmp_path):
    """SoftmaxCrossEntropyLoss and CenterCropPad are ONNX functions: their rules fail inside the body,
    which the loader does not hold against the node, so the cost checks them: scores N x C x d against
    a target N x d, a size per cropped axis; and ONNX's RotaryEmbedding needs num_heads for a 3-D input."""
    sce = model([helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y"], name="sce")],
                [vi("x", [3, 5, 2]), vi("t", [3, 4], T.INT64)], [vi("y", None)], opset=13)
    assert "target [3, 4] do not agree" in _contradictions(save(sce, tmp_path, "sce.onnx"))[0][1]
    crop = model([helper.make_node("CenterCropPad", ["x", "s"], ["y"], name="crop")], [vi("x", [10, 8, 3])],
                 [vi("y", None)], [numpy_scalar("s", [6, 6], "int64")], opset=18)
    assert "where 3 sizes are needed" in _contradictions(save(crop, tmp_path, "crop.onnx"))[0][1]
    rot = model([helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"], name="rot")],
                [vi("x", [1, 4, 64])], [vi("y", None)], [weight("c", [4, 16]), weight("s", [4, 16])], opset=23)
    assert "needs the num_heads attribute" in _contradictions(save(rot, tmp_path, "rot.onnx"))[0][1]
    good = model([helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y"], name="sce")],
                 [vi("x", [3, 5, 4]), vi("t", [3, 4], T.INT64)], [vi("y", None)], opset=13)
    assert _contradictions(save(good, tmp_path, "good.onnx")) == []


@pytest.mark.parametrize("win, complete", [([16], True), ([], False), ([8], False), ([16, 1], False)])
def test_an_stft_window_is_one_weight_per_sample_of_a_frame(tmp_path, win, complete):
    """ONNX Runtime ends the whole process (abort) on an STFT window of another shape than [frame
    length]; dnnperf scored it. A 1-D window of the frame's 16 samples is scored."""
    m = model([helper.make_node("STFT", ["x", "step", "w", "len"], ["y"], name="stft")], [vi("x", [1, 128, 1])],
              [vi("y", None)], [numpy_scalar("step", 8, "int64"), weight("w", win), numpy_scalar("len", 16, "int64")],
              opset=17)
    found = _contradictions(save(m, tmp_path))
    assert (found == []) == complete, found
    if not complete:
        assert f"its window {win} is not one weight per sample of a frame (16)" in found[0][1], found


@pytest.mark.parametrize("q, k, v, attrs, needle", [
    ([2, 8, 16, 64], [2, 2, 32, 64], [2, 2, 32, 64], {}, None),
    ([2, 16, 512], [2, 32, 128], [2, 32, 128], {"q_num_heads": 8, "kv_num_heads": 2}, None),
    ([2, 8, 16, 64], [1, 2, 32, 64], [1, 2, 32, 64], {}, "batch sizes differ"),
    ([2, 8, 16, 64], [2, 3, 32, 64], [2, 3, 32, 64], {}, "the key's heads do not divide the query's"),
    ([2, 8, 16, 64], [2, 2, 32, 32], [2, 2, 32, 64], {}, "query and key head sizes differ"),
    ([2, 8, 16, 64], [2, 2, 32, 64], [2, 2, 24, 64], {}, "key and value lengths differ"),
    ([2, 8, 16, 64], [2, 32, 128], [2, 32, 128], {"kv_num_heads": 2}, "differ in rank"),
    ([2, 16, 500], [2, 32, 128], [2, 32, 128], {"q_num_heads": 8, "kv_num_heads": 2}, "does not split into 8 heads"),
    ([2, 16, 512], [2, 32, 128], [2, 32, 128], {}, "is 3-D: q_num_heads and kv_num_heads must say"),
])
def test_an_onnx_attention_s_query_key_and_value_must_agree(tmp_path, q, k, v, attrs, needle):
    """ONNX's Attention (opset 23) checks its operands only inside its function body; ONNX Runtime refuses
    a model whose query, key and value disagree (the node-test models given another batch, rank or past:
    972 such variants scored, 282 after). GQA's 8 query heads over 2 key heads agree."""
    m = model([helper.make_node("Attention", ["q", "k", "v"], ["y"], name="att", **attrs)],
              [vi("q", q), vi("k", k), vi("v", v)], [vi("y", None)], opset=23)
    found = _contradictions(save(m, tmp_path))
    if needle is None:
        assert found == [], found
    else:
        assert len(found) == 1 and needle in found[0][1], found


def test_an_onnx_attention_s_past_must_fit_its_key(tmp_path):
    """The past key and value are (B, kv heads, P, head size) of one length P: a past of another batch
    (the decode step of a batch-2 model given a batch-1 cache) is refused; the cache that fits is scored."""
    def att(past):
        m = model([helper.make_node("Attention", ["q", "k", "v", "", "pk", "pv"], ["y", "pk2", "pv2"], name="att")],
                  [vi("q", [2, 8, 1, 64]), vi("k", [2, 2, 1, 64]), vi("v", [2, 2, 1, 64]), vi("pk", past),
                   vi("pv", past)], [vi("y", None), vi("pk2", None), vi("pv2", None)], opset=23)
        return _contradictions(save(m, tmp_path, f"p{past[0]}.onnx"))
    assert att([2, 2, 127, 64]) == []
    found = att([1, 2, 127, 64])
    assert len(found) == 1 and "past key and value [1, 2, 127, 64]" in found[0][1], found
