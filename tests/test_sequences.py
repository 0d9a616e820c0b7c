"""Tensor sequences sized at load time (dnnperf.load.sequences): the legacy exporter's
``torch.tensor_split`` (a Loop filling a sequence with Slices at the iteration number) and the plain
sequence ops. Every expected shape is worked out by hand from the graph."""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper

from dnnperf.api import inspect_model
from dnnperf.ir import ShapeOverrides
from helpers import ints, model, save, vi

UNSEEN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "models", "unseen")


def _true(name):
    return onnx.numpy_helper.from_array(np.array(True), name)


def _split_loop(trips_input: bool = False):
    """x [1, 4, 10, 8] split on axis 2 at (3, 5): a Loop of 2 trips inserts x[:, :, 0:3] and
    x[:, :, 3:5], then the rest x[:, :, 5:10] is appended after the Loop (tensor_split's export)."""
    body = helper.make_graph(
        [helper.make_node("Gather", ["starts", "i"], ["s"], axis=0),
         helper.make_node("Gather", ["ends", "i"], ["e"], axis=0),
         helper.make_node("Unsqueeze", ["s", "zero"], ["s1"]),
         helper.make_node("Unsqueeze", ["e", "zero"], ["e1"]),
         helper.make_node("Slice", ["x", "s1", "e1", "ax"], ["piece"]),
         helper.make_node("SequenceInsert", ["seq_in", "piece"], ["seq_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [vi("i", [], T.INT64), vi("c_in", [], T.BOOL), onnx.helper.make_tensor_sequence_value_info("seq_in", T.FLOAT, None)],
        [vi("c_out", [], T.BOOL), onnx.helper.make_tensor_sequence_value_info("seq_out", T.FLOAT, None)])
    nodes = [
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=T.FLOAT),
        helper.make_node("Loop", ["M", "c", "empty"], ["parts"], body=body),
        helper.make_node("Slice", ["x", "five", "big", "ax"], ["rest"]),
        helper.make_node("SequenceInsert", ["parts", "rest"], ["all"]),
        helper.make_node("SequenceAt", ["all", "p0"], ["a"]),
        helper.make_node("SequenceAt", ["all", "pm1"], ["b"]),
        helper.make_node("Relu", ["a"], ["ya"]),
        helper.make_node("MatMul", ["b", "w"], ["yb"]),
        helper.make_node("SequenceLength", ["all"], ["n"]),
        helper.make_node("ConcatFromSequence", ["all"], ["cat"], axis=2),
    ]
    inits = [ints("starts", [0, 3]), ints("ends", [3, 5]), ints("zero", [0]), ints("ax", [2]), ints("five", [5]),
             ints("big", [10]), ints("p0", 0), ints("pm1", -1), _true("c"),
             onnx.numpy_helper.from_array(np.zeros((8, 6), np.float32), "w")]
    inputs = [vi("x", [1, 4, 10, 8])]
    if trips_input:
        inputs.append(vi("M", [], T.INT64))
    else:
        inits.append(ints("M", 2))
    return model(nodes, inputs, [vi("ya", None), vi("yb", None), vi("n", None), vi("cat", None)], inits)


def test_tensor_split_loop_sizes_every_piece(tmp_path):
    insp = inspect_model(save(_split_loop(), tmp_path), ShapeOverrides())
    shape = {t: insp.graph.tensors[t].shape for t in ("a", "b", "ya", "yb", "cat")}
    assert shape == {"a": (1, 4, 3, 8), "b": (1, 4, 5, 8), "ya": (1, 4, 3, 8), "yb": (1, 4, 5, 6),
                     "cat": (1, 4, 10, 8)}
    assert insp.graph.values["n"].tolist() == 3
    assert insp.coverage()["complete"], insp.warnings
    mm = next(r for r in insp.rows if r.node.op_type == "MatMul")
    assert mm.workload.macs == 4 * 5 * 8 * 6  # the last piece, [1, 4, 5, 8] x [8, 6]
    # each trip's Slice is at offsets known from the iteration number: no run-time offset bound
    assert not any("known only at run time" in w for w in insp.warnings)


def test_a_loop_without_a_condition_input_runs_every_trip(tmp_path):
    m = _split_loop()
    loop = next(n for n in m.graph.node if n.op_type == "Loop")
    loop.input[1] = ""  # no condition: the Loop runs its count (the body passes on an absent value)
    insp = inspect_model(save(m, tmp_path), ShapeOverrides())
    assert insp.graph.tensors["b"].shape == (1, 4, 5, 8) and insp.graph.values["n"].tolist() == 3


def test_unknown_trip_count_leaves_the_pieces_open(tmp_path):
    insp = inspect_model(save(_split_loop(trips_input=True), tmp_path), ShapeOverrides())
    assert insp.graph.tensors["a"].shape is None and insp.graph.tensors["yb"].shape is None
    assert not insp.coverage()["complete"]
    assert {r.node.op_type for r in insp.unscored()} >= {"SequenceAt", "MatMul"}


def test_split_construct_erase_and_stack(tmp_path):
    nodes = [
        # 10 in chunks of 4: 4, 4, 2
        helper.make_node("SplitToSequence", ["x", "four"], ["chunks"], axis=2),
        helper.make_node("SequenceAt", ["chunks", "p2"], ["c2"]),
        # no split: one element per index, axis dropped with keepdims=0 -> [1, 4, 8] each
        helper.make_node("SplitToSequence", ["x"], ["rows"], axis=2, keepdims=0),
        helper.make_node("SequenceLength", ["rows"], ["nrows"]),
        helper.make_node("ConcatFromSequence", ["rows"], ["stacked"], axis=1, new_axis=1),
        # explicit sizes 7 + 3, then the first erased: [x[.., 7:10]] and a constructed pair
        helper.make_node("SplitToSequence", ["x", "sizes"], ["two"], axis=-2),
        helper.make_node("SequenceErase", ["two", "p0"], ["one"]),
        helper.make_node("SequenceAt", ["one", "p0"], ["last"]),
        helper.make_node("SequenceConstruct", ["x", "x"], ["pair"]),
        helper.make_node("ConcatFromSequence", ["pair"], ["wide"], axis=-1),
    ]
    m = model(nodes, [vi("x", [1, 4, 10, 8])],
              [vi(o, None) for o in ("c2", "nrows", "stacked", "last", "wide")],
              [ints("four", 4), ints("p2", 2), ints("sizes", [7, 3]), ints("p0", 0)])
    insp = inspect_model(save(m, tmp_path), ShapeOverrides())
    t = insp.graph.tensors
    assert t["c2"].shape == (1, 4, 2, 8)
    assert insp.graph.values["nrows"].tolist() == 10
    assert t["stacked"].shape == (1, 10, 4, 8)
    assert t["last"].shape == (1, 4, 3, 8)
    assert t["wide"].shape == (1, 4, 10, 16)
    assert insp.coverage()["complete"], insp.warnings


def test_out_of_range_position_is_not_guessed(tmp_path):
    # elements of two sizes: which one a position picks is the rule's answer alone
    nodes = [helper.make_node("SequenceConstruct", ["x", "z"], ["pair"]),
             helper.make_node("SequenceAt", ["pair", "p5"], ["e"]),
             helper.make_node("SequenceAt", ["pair", "pm1"], ["f"]),
             helper.make_node("Relu", ["e"], ["y"])]
    m = model(nodes, [vi("x", [2, 3]), vi("z", [2, 5])], [vi("y", None), vi("f", None)],
              [ints("p5", 5), ints("pm1", -1)])
    insp = inspect_model(save(m, tmp_path), ShapeOverrides())
    assert insp.graph.tensors["f"].shape == (2, 5)
    assert insp.graph.tensors["y"].shape is None and not insp.coverage()["complete"]


def test_mvit_matches_torchvision_published_macs():
    """torchvision's MViT V2-S (legacy export): its class token is split off with tensor_split, a
    Loop over a sequence, in each of 16 blocks' attention poolings. 64.224 GMACs is torchvision's
    published figure for 16 x 224 x 224 frames (weights meta ``_ops``)."""
    insp = inspect_model(os.path.join(UNSEEN, "mvit_v2_s.onnx"))
    assert insp.coverage()["complete"], insp.warnings[:3]
    assert abs(insp.totals()["macs"] / 1e9 - 64.224) <= 0.0005


def test_a_stale_declared_branch_shape_gives_way_to_the_computed_one(tmp_path):
    """torchvision's MViT-V1 export declares the output of an If branch that squeezes a
    [1, 1, 6273, 192] tensor as [1, 31360, 192] (a stale trace). The branch taken (its condition
    folds to true) computes [1, 1, 6, 4] -> [1, 6, 4]; the declaration must not win, or the Add
    after it contradicts its other input and the If is left unscored."""
    then = helper.make_graph([helper.make_node("Squeeze", ["x", "one"], ["sq"])], "then", [],
                             [vi("sq", [1, 30, 4])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["id"])], "else", [], [vi("id", [1, 1, 30, 4])])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["d1"], axis=0),
             helper.make_node("Equal", ["d1", "one"], ["c"]),
             helper.make_node("If", ["c"], ["b"], then_branch=then, else_branch=other),
             helper.make_node("Add", ["b", "r"], ["y"])]
    m = model(nodes, [vi("x", [1, 1, 6, 4]), vi("r", [1, 6, 4])], [vi("y", None)], [ints("one", [1])])
    insp = inspect_model(save(m, tmp_path), ShapeOverrides())
    assert insp.graph.tensors["b"].shape == (1, 6, 4) and insp.graph.tensors["y"].shape == (1, 6, 4)
    assert insp.coverage()["complete"], insp.warnings


def test_mvit_v1_matches_torchvision_published_macs():
    """MViT V1-B (legacy export): 16 blocks' tensor_split Loops and pool-skip Ifs whose branch outputs
    the export declares with stale sizes; torchvision publishes 70.599 GMACs at 16 x 224 x 224."""
    insp = inspect_model(os.path.join(UNSEEN, "mvit_v1_b.onnx"))
    assert insp.coverage()["complete"], insp.warnings[:3]
    assert abs(insp.totals()["macs"] / 1e9 - 70.599) <= 0.0005
