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


def _one(op, inputs, inits=(), opset=13, n_out=1, **attrs):
    outs = [f"y{k}" for k in range(n_out)]
    names = [name for name, *_ in inputs]
    vis = [vi(name, shape, dtype) for name, shape, dtype in inputs if name]
    return model([helper.make_node(op, names, outs, name="n", **attrs)], vis, [vi(o, None) for o in outs], inits,
                 opset=opset)


I64 = T.INT64


def _qmm(**shapes):
    """A QLinearMatMul of uint8 [2, 4] x [4, 3], its scales and zero points one value each unless given."""
    names = ("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point")
    base = {"a": [2, 4], "b": [4, 3]}
    return [(n, shapes.get(n, base.get(n, [1])), T.FLOAT if n.endswith("scale") else T.UINT8) for n in names]


def _att(mask, past=None):
    """ONNX Attention: query [2, 4 heads, 3, 8], key and value [2, 2 heads, 5, 8], an attn_mask (and a past)."""
    ins = [("q", [2, 4, 3, 8], T.FLOAT), ("k", [2, 2, 5, 8], T.FLOAT), ("v", [2, 2, 5, 8], T.FLOAT),
           ("m", mask, T.FLOAT)]
    return ins + ([("pk", past, T.FLOAT), ("pv", past, T.FLOAT)] if past else [])


@pytest.mark.parametrize("op, inputs, opset, n_out, attrs, needle", [
    # lists given as tensors (at run time, values unknown): their rank and length are the operator's
    ("Slice", [("x", [4, 5], T.FLOAT), ("s", [1, 1], I64), ("e", [1], I64)], 13, 1, {},
     "its starts is [1, 1] where Slice takes a 1-D tensor"),
    ("Slice", [("x", [4, 5], T.FLOAT), ("s", [2], I64), ("e", [1], I64)], 13, 1, {},
     "its ends hold 1 values where 2 are needed"),
    ("Slice", [("x", [4, 5], T.FLOAT), ("s", [3], I64), ("e", [3], I64)], 13, 1, {},
     "its starts hold 3 values for a rank-2 input"),
    ("ReduceSum", [("x", [4, 5], T.FLOAT), ("a", [], I64)], 13, 1, {}, "its axes is [] where ReduceSum takes a 1-D"),
    ("ReduceMean", [("x", [4, 5], T.FLOAT), ("a", [1, 1], I64)], 18, 1, {}, "its axes is [1, 1] where ReduceMean"),
    ("TopK", [("x", [3, 4], T.FLOAT), ("k", [], I64)], 13, 2, {}, "its k is [] where TopK takes a 1-D tensor of one"),
    ("Tile", [("x", [4, 5], T.FLOAT), ("r", [3], I64)], 13, 1, {}, "its repeats hold 3 values where 2 are needed"),
    ("Pad", [("x", [4, 5], T.FLOAT), ("p", [3], I64)], 13, 1, {}, "its pads hold 3 values where 4 are needed"),
    ("Pad", [("x", [4, 5], T.FLOAT), ("p", [4], I64), ("c", [2], T.FLOAT)], 13, 1, {},
     "its constant_value is [2] where Pad takes one element"),
    ("CumSum", [("x", [4, 5], T.FLOAT), ("a", [2], I64)], 14, 1, {}, "its axis is [2] where CumSum takes one value"),
    ("Range", [("a", [2], T.FLOAT), ("b", [], T.FLOAT), ("c", [], T.FLOAT)], 11, 1, {},
     "its start is [2] where Range takes one value"),
    ("Resize", [("x", [1, 1, 4, 4], T.FLOAT), ("", None, None), ("s", [3], T.FLOAT)], 13, 1, {},
     "its scales hold 3 values where 4 are needed"),
    ("ReverseSequence", [("x", [5, 4, 2], T.FLOAT), ("l", [3], I64)], 10, 1, {"batch_axis": 1, "time_axis": 0},
     "its sequence_lens hold 3 values where 4 are needed"),
    # boxes, indices, updates
    ("NonMaxSuppression", [("b", [1, 6], T.FLOAT), ("s", [1, 1, 6], T.FLOAT)], 11, 1, {},
     "its boxes [1, 6] are not [batch, boxes, 4]"),
    ("NonMaxSuppression", [("b", [1, 5, 4], T.FLOAT), ("s", [1, 1, 6], T.FLOAT)], 11, 1, {},
     "differ in batch or box count"),
    ("GatherElements", [("x", [3, 3], T.FLOAT), ("i", [2], I64)], 13, 1, {},
     "its indices [2] are not of its data's rank"),
    ("ScatterElements", [("x", [3, 3], T.FLOAT), ("i", [1, 2], I64), ("u", [1, 3], T.FLOAT)], 13, 1, {},
     "its updates [1, 3] are not the shape of its indices [1, 2]"),
    ("MaxUnpool", [("x", [1, 1, 2, 2], T.FLOAT), ("i", [1, 1, 2, 3], I64)], 11, 1, {"kernel_shape": [2, 2]},
     "its indices [1, 1, 2, 3] are not the shape of its input"),
    ("SpaceToDepth", [("x", [1, 3, 6, 5], T.FLOAT)], 13, 1, {"blocksize": 2},
     "height and width 6 x 5 are not multiples of blocksize 2"),
    ("AffineGrid", [("t", [2, 3, 3], T.FLOAT), ("z", [4], I64)], 20, 1, {},
     "its theta [2, 3, 3] is not [N, 2, 3] for a 2-D grid"),
    ("DeformConv", [("x", [1, 1, 3, 3], T.FLOAT), ("w", [1, 1, 2, 2], T.FLOAT), ("o", [1, 4, 2, 2], T.FLOAT)], 19, 1,
     {}, "its offset is [1, 4, 2, 2] where its window and output need [1, 8, 2, 2]"),
    ("RotaryEmbedding", [("x", [1, 2, 3, 4], T.FLOAT), ("c", [5, 4], T.FLOAT), ("s", [5, 4], T.FLOAT),
                         ("p", [1, 3], I64)], 23, 1, {}, "its cos cache [5, 4] is not [positions, 2]"),
    ("RotaryEmbedding", [("x", [1, 2, 3, 4], T.FLOAT), ("c", [5, 2], T.FLOAT), ("s", [5, 2], T.FLOAT),
                         ("p", [2, 3], I64)], 23, 1, {}, "its position_ids [2, 3] are not [batch, sequence]"),
    ("QLinearMatMul", _qmm(a_scale=[1, 1]), 21, 1, {}, "its a_scale is [1, 1] where it takes one value"),
    ("QLinearMatMul", _qmm(b_scale=[2]), 21, 1, {}, "its b_scale is [2] where it takes one value or one per output "
                                                     "column (3)"),
    ("DFT", [("x", [1, 8, 3], T.FLOAT)], 20, 1, {}, "its input [1, 8, 3] ends in 3 values a sample"),
    ("Attention", _att([3, 6]), 23, 1, {}, "its attn_mask [3, 6] does not fit (batch, heads, query length, "
                                           "total length) [2, 4, 3, 5]"),
    ("Attention", _att([2, 3, 5]), 23, 1, {}, "its attn_mask [2, 3, 5] does not fit"),
    ("Attention", _att(None)[:3] + [("", None, None)] * 3 + [("n", [2, 1], I64)], 24, 1, {},
     "its nonpad_kv_seqlen [2, 1] is not one length per sample (2)"),
    ("CumSum", [("x", [], T.FLOAT), ("a", [], I64)], 14, 1, {}, "its input has rank 0 where CumSum takes rank 1"),
    ("ScatterND", [("x", [4], T.FLOAT), ("i", [], I64), ("u", [], T.FLOAT)], 13, 1, {},
     "its data [4] and indices [] must each have an axis or more"),
    # an attribute that contradicts the window an operand's length sets (Col2Im's image_shape at run time)
    ("Col2Im", [("x", [1, 9, 4], T.FLOAT), ("img", [2], I64), ("blk", [2], I64)], 18, 1, {"strides": [1, 1, 1]},
     "strides [1, 1, 1] has 3 values where a 2-D window needs 2"),
])
def test_an_operand_of_a_shape_its_operator_does_not_take_is_a_contradiction(tmp_path, op, inputs, opset, n_out,
                                                                             attrs, needle):
    """Lists an op takes as tensors (starts, axes, pads, scales, k) and the operands of NMS and the
    element gathers and scatters: ONNX's inference checks them only when it knows their values, so given
    at run time a Slice with starts of [1, 1] or a TopK with a scalar k was priced. ONNX Runtime refuses
    each of these when it runs the node (the node-test models with an input of another rank or size:
    1,821 variants it refuses at run time scored completely)."""
    found = _contradictions(save(_one(op, inputs, opset=opset, n_out=n_out, **attrs), tmp_path))
    assert len(found) == 1 and needle in found[0][1], found


@pytest.mark.parametrize("op, inputs, opset, n_out, attrs", [
    ("Slice", [("x", [4, 5], T.FLOAT), ("s", [2], I64), ("e", [2], I64), ("a", [2], I64), ("t", [2], I64)], 13, 1, {}),
    ("Slice", [("x", [4, 5], T.FLOAT), ("s", [0], I64), ("e", [0], I64)], 13, 1, {}),
    ("ReduceSum", [("x", [4, 5], T.FLOAT), ("a", [0], I64)], 13, 1, {}),
    ("Unsqueeze", [("x", [4, 1], T.FLOAT), ("a", [], I64)], 13, 1, {}),
    ("TopK", [("x", [3, 4], T.FLOAT), ("k", [1], I64)], 13, 2, {}),
    ("Pad", [("x", [4, 5], T.FLOAT), ("p", [4], I64), ("c", [1, 1], T.FLOAT)], 13, 1, {}),
    ("Pad", [("x", [4, 5], T.FLOAT), ("p", [2], I64), ("", None, None), ("a", [1], I64)], 18, 1, {}),
    ("CumSum", [("x", [4, 5], T.FLOAT), ("a", [], I64)], 14, 1, {}),
    ("Range", [("a", [1], T.FLOAT), ("b", [], T.FLOAT), ("c", [], T.FLOAT)], 11, 1, {}),
    ("Resize", [("x", [1, 1, 4, 4], T.FLOAT), ("", None, None), ("s", [1, 4], T.FLOAT)], 13, 1, {}),
    ("Resize", [("x", [1, 1, 4, 4], T.FLOAT), ("r", [4], T.FLOAT), ("s", [4], T.FLOAT)], 13, 1, {}),
    ("Resize", [("x", [1, 1, 4, 4], T.FLOAT), ("", None, None), ("s", [2], T.FLOAT)], 18, 1, {"axes": [2, 3]}),
    ("GatherElements", [("x", [3, 3], T.FLOAT), ("i", [4, 3], I64)], 13, 1, {}),
    ("ScatterElements", [("x", [3, 3], T.FLOAT), ("i", [4, 2], I64), ("u", [4, 2], T.FLOAT)], 13, 1, {}),
    ("NonMaxSuppression", [("b", [1, 6, 4], T.FLOAT), ("s", [1, 1, 6], T.FLOAT), ("m", [1, 1], I64)], 11, 1, {}),
    ("AffineGrid", [("t", [2, 3, 4], T.FLOAT), ("z", [5], I64)], 20, 1, {}),
    ("DeformConv", [("x", [1, 2, 3, 3], T.FLOAT), ("w", [1, 2, 2, 2], T.FLOAT), ("o", [1, 16, 2, 2], T.FLOAT)], 19, 1,
     {"offset_group": 2}),
    ("RotaryEmbedding", [("x", [1, 2, 3, 4], T.FLOAT), ("c", [1, 3, 2], T.FLOAT), ("s", [1, 3, 2], T.FLOAT)], 23, 1,
     {}),
    ("RotaryEmbedding", [("x", [1, 2, 3, 4], T.FLOAT), ("c", [5, 1], T.FLOAT), ("s", [5, 1], T.FLOAT),
                         ("p", [1, 3], I64)], 23, 1, {"rotary_embedding_dim": 2}),
    ("QLinearMatMul", _qmm(a_scale=[], b_scale=[3], b_zero_point=[3]), 21, 1, {}),
    ("DFT", [("x", [1, 8, 2], T.FLOAT)], 20, 1, {}),
    ("Attention", _att([1, 3, 5]), 23, 1, {}),
    ("Attention", _att([2, 1, 3, 4]), 23, 1, {}),
    ("Attention", _att([3, 11], past=[2, 2, 6, 8]), 23, 1, {}),
    ("Attention", _att(None)[:3] + [("", None, None)] * 3 + [("n", [2], I64)], 24, 1, {}),
])
def test_an_operand_of_a_shape_onnx_runtime_runs_is_scored(tmp_path, op, inputs, opset, n_out, attrs):
    """What ONNX Runtime 1.32 runs is not refused: an Unsqueeze's axes or a CumSum's axis as a scalar, a
    TopK's k as [1], a Pad's constant_value of one element in any shape, a Resize's scales counted
    whatever their shape (and its roi unread outside tf_crop_and_resize), a GatherElements index
    longer than the data along its axis."""
    assert _contradictions(save(_one(op, inputs, opset=opset, n_out=n_out, **attrs), tmp_path)) == []


@pytest.mark.parametrize("op, gates", [("RNN", 1), ("GRU", 3), ("LSTM", 4)])
@pytest.mark.parametrize("k, shape, needle", [
    (None, None, None),
    (2, [1, "G", 3], "its R is [1, G, 3] where its weights and input need [1, G, 4]"),
    (3, ["2G"], "its B is [2G] where its weights and input need [1, 2G]"),
    (4, [2], "its sequence_lens is [2] where its weights and input need [3]"),
    (5, [3, 4], "its initial_h is [3, 4] where its weights and input need [1, 3, 4]"),
    (1, [2, "G", 2], "its weights hold 2 direction(s) where a forward layer has 1"),
])
def test_a_recurrent_layer_s_other_inputs_must_fit_its_weights(tmp_path, op, gates, k, shape, needle):
    """X [2 steps, batch 3, 2 features] and W [1 direction, gates x 4, 2] fix R [1, gates x 4, 4], B
    [1, 2 x gates x 4], sequence_lens [3] and initial_h [1, 3, 4] (ONNX's definition; ONNX Runtime
    refuses each other shape when it runs the layer, which dnnperf priced)."""
    g = gates * 4
    sub = {"G": g, "2G": 2 * g}
    shapes = {0: [2, 3, 2], 1: [1, g, 2], 2: [1, g, 4], 3: [1, 2 * g], 4: [3], 5: [1, 3, 4]}
    if k is not None:
        shapes[k] = [sub.get(d, d) for d in shape]
        needle = needle.replace("[2G]", f"[{2 * g}]").replace("2G", str(2 * g)).replace("G", str(g))
    types = {4: T.INT32}
    inputs = [(f"i{j}", shapes[j], types.get(j, T.FLOAT)) for j in range(6)]
    found = _contradictions(save(_one(op, inputs, opset=14, hidden_size=4), tmp_path))
    if needle is None:
        assert found == [], found
    else:
        assert len(found) == 1 and needle in found[0][1], found


@pytest.mark.parametrize("counter, complete, note, inits", [([1], True, False, False), ([], False, False, False),
                                                        (None, True, True, False), (None, True, True, True)])
def test_a_loop_hands_its_body_the_iteration_number_of_the_rank_it_declares(tmp_path, counter, complete, note,
                                                                            inits):
    """A body that slices a table at its iteration number (torch.onnx's pattern in torchvision's MViT):
    ONNX Runtime hands the body the number as [1] where it declares [1] (the Slice's starts are then
    1-D), as a scalar where it declares a scalar (starts of [], which a Slice refuses), and refuses to
    run a Loop whose body leaves it without a shape: costed as [1] with a note that says so. The table
    held as a body initializer rather than a Constant node is read the same (it had no type in the
    loader's pass over the body, and the Gather on it no shape)."""
    from onnx import numpy_helper as nh
    import numpy as np
    it = helper.make_tensor_value_info("it", T.INT64, counter) if counter is not None else \
        helper.make_value_info("it", helper.make_tensor_type_proto(T.INT64, None))
    tables = [nh.from_array(np.array(v, dtype=np.int64), name) for name, v in (("tab", [0, 2, 4]), ("one", 1))]
    const = [] if inits else [helper.make_node("Constant", [], [t.name], value=t) for t in tables]
    body = helper.make_graph(
        const + [helper.make_node("Gather", ["tab", "it"], ["st"]), helper.make_node("Add", ["st", "one"], ["en"]),
                 helper.make_node("Slice", ["x", "st", "en"], ["piece"], name="cut"),
                 helper.make_node("Identity", ["c"], ["co"])],
        "body", [it, helper.make_tensor_value_info("c", T.BOOL, [])],
        [helper.make_tensor_value_info("co", T.BOOL, []), helper.make_tensor_value_info("piece", T.FLOAT, None)],
        tables if inits else [])
    m = model([helper.make_node("Loop", ["trips", "cond"], ["pieces"], name="loop", body=body)], [vi("x", [6, 8])],
              [vi("pieces", None)], [numpy_scalar("trips", 3, "int64"), numpy_scalar("cond", True, "bool")], opset=17)
    r = runner.invoke(app, ["inspect", save(m, tmp_path), "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    found = [u["reason"] for u in doc["unsupported_ops"] if u["kind"] != "bound"]
    assert (found == []) == complete, found
    if not complete:
        assert "its starts is [] where Slice takes a 1-D tensor" in found[0], found
    assert ("leave their body's iteration number without a shape" in r.stderr) == note, r.stderr
