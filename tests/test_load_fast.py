"""The loader's Python shape path (dnnperf.load.fast) against ONNX's own shape inference."""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import pytest

from dnnperf.ir import ShapeOverrides
from dnnperf.load import fast, load_graph

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = sorted(glob.glob(os.path.join(ROOT, "sample_models", "*.onnx")) + glob.glob(os.path.join(ROOT, "bench", "models", "cpu", "*.onnx")))


def _overrides(path: str) -> ShapeOverrides:
    return ShapeOverrides(batch=1, dims=(("sequence_length", 128), ("past_sequence_length", 16),
                                         ("total_sequence_length", 17)), strict=False)


def _both(path: str, monkeypatch):
    ov = _overrides(path)
    g_fast = load_graph(path, ov)
    with monkeypatch.context() as m:
        m.setattr(fast, "python_shapes", lambda *a: None)  # the Python path declines every graph
        g_onnx = load_graph(path, ov)
    return g_fast, g_onnx


@pytest.mark.parametrize("path", MODELS, ids=os.path.basename)
def test_python_shapes_equal_onnx_inference(path, monkeypatch):
    g_fast, g_onnx = _both(path, monkeypatch)
    assert [n.name for n in g_fast.nodes] == [n.name for n in g_onnx.nodes]
    assert g_fast.unresolved == g_onnx.unresolved
    assert set(g_fast.tensors) >= {o for n in g_onnx.nodes for o in n.outputs if o}
    for n in g_onnx.nodes:
        for o in n.outputs:
            if o:
                a, b = g_fast.tensors[o], g_onnx.tensors[o]
                assert (a.shape, a.dtype) == (b.shape, b.dtype), (n.name, o)


def test_sample_models_skip_onnx_inference(monkeypatch):
    """Every sample model (CNNs, transformers with their shape arithmetic, ONNX Runtime's contrib
    ops) loads with ONNX's inference made to fail: the Python path covered it; a QDQ model
    (QuantizeLinear has no rule here) still needs it."""
    def refuse(*a, **k):
        raise AssertionError("ONNX shape inference called")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", refuse)
    for path in glob.glob(os.path.join(ROOT, "sample_models", "*.onnx")):
        g = load_graph(path, _overrides(path))
        assert not g.unresolved, path
    with pytest.raises(Exception):
        load_graph(os.path.join(ROOT, "tests", "data", "squeezenet1_1_qdq_ort.onnx"), ShapeOverrides(batch=1))


@pytest.mark.parametrize("attrs,sizes,n,opset,expected", [
    ({"axis": 1}, None, 3, 13, [(2, 4, 5)] * 3),  # 12 channels in 3 equal parts
    ({"axis": -1}, np.array([2, 3]), 2, 13, [(2, 12, 2), (2, 12, 3)]),  # sizes by input
    ({"axis": 1, "split": [10, 2]}, None, 2, 11, [(2, 10, 5), (2, 2, 5)]),  # sizes by attribute before 13
    ({"axis": 1, "num_outputs": 5}, None, 5, 18, [(2, 3, 5)] * 4 + [(2, 0, 5)]),  # ceil(12 / 5) = 3: 3+3+3+3+0
    ({"axis": 1, "num_outputs": 5}, None, 5, 17, None),  # no num_outputs before 18, 12 does not divide by 5
    ({"axis": 1}, np.array([5, 5]), 2, 13, None),  # sizes that do not add up to 12
    ({"axis": 1}, np.array([6, 6]), 3, 13, None),  # two sizes for three outputs
])
def test_split_output_shapes_by_hand(attrs, sizes, n, opset, expected):
    from dnnperf.load.shapes import split

    assert split(attrs, (2, 12, 5), sizes, n, opset) == expected


def test_binary_op_with_one_input_is_left_to_onnx():
    """An Add with one input is malformed: the rule declines (ONNX's route then refuses the model
    with its one line), where broadcasting one shape would have resolved it."""
    from dnnperf.load.shapes import RULES

    add, _ = RULES["Add"]
    where, _ = RULES["Where"]
    assert add({}, [(2, 3)], [None], 17) is None
    assert add({}, [(2, 3), (3,)], [None, None], 17) == [(2, 3)]
    assert where({}, [(2, 3), (3,)], [None, None], 17) is None
    assert RULES["Max"][0]({}, [(4, 1)], [None], 17) == [(4, 1)]  # Max of one input is valid


def test_repeated_nodes_ask_their_shape_rule_once_and_attributes_tell_them_apart(monkeypatch, tmp_path):
    """Ten MatMuls of the same shapes call the MatMul rule once (the memo of ``fast._node``); two
    Transposes of one input with different ``perm`` are told apart by their attributes: (2, 3, 4)
    by perm 2,0,1 is (4, 2, 3), by 1,2,0 (3, 4, 2) (taking the attributes out of the key gives the
    second the first's shape)."""
    from onnx import TensorProto, helper

    from dnnperf.load import shapes

    calls = []
    rule, reads = shapes.RULES["MatMul"]

    def counted(*a):
        calls.append(1)
        return rule(*a)

    monkeypatch.setitem(shapes.RULES, "MatMul", (counted, reads))
    nodes = [helper.make_node("MatMul", [f"x{i}", "w"], [f"x{i + 1}"], name=f"mm{i}") for i in range(10)]
    nodes.append(helper.make_node("Transpose", ["t"], ["t1"], perm=[2, 0, 1]))
    nodes.append(helper.make_node("Transpose", ["t"], ["t2"], perm=[1, 2, 0]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x0", TensorProto.FLOAT, [8, 16]),
                                       helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3, 4])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("x10", "t1", "t2")],
                          [helper.make_tensor("w", TensorProto.FLOAT, [16, 16], np.zeros(256, np.float32))])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    inspected = []
    real = fast.python_shapes
    monkeypatch.setattr(fast, "python_shapes", lambda *a: inspected.append(1) or real(*a))
    graph = load_graph(str(path))
    assert inspected and len(calls) == 1
    assert graph.tensors["x10"].shape == (8, 16)
    assert graph.tensors["t1"].shape == (4, 2, 3) and graph.tensors["t2"].shape == (3, 4, 2)


@pytest.mark.parametrize("attrs,x,w,expected", [
    # 224 input, 7x7 stride 2 pad 3: (224 + 6 - 7) // 2 + 1 = 112
    ({"kernel_shape": [7, 7], "strides": [2, 2], "pads": [3, 3, 3, 3]}, (1, 3, 224, 224), (64, 3, 7, 7), (1, 64, 112, 112)),
    # SAME_UPPER, stride 2 on 7: ceil(7 / 2) = 4
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (1, 8, 7, 7), (16, 8, 3, 3), (1, 16, 4, 4)),
    # VALID 3x3 dilation 2 on 10: extent 5, (10 - 5) // 1 + 1 = 6
    ({"auto_pad": "VALID", "dilations": [2, 2]}, (1, 4, 10, 10), (4, 4, 3, 3), (1, 4, 6, 6)),
])
def test_convolution_output_sizes_by_hand(attrs, x, w, expected):
    assert fast.windowed("Conv", attrs, x, [x, w]) == expected


def test_ceil_mode_pooling_by_hand():
    # 3x3 stride 2 on 112, no pad: floor((112 - 3) / 2) + 1 = 55, ceil mode 56
    a = {"kernel_shape": [3, 3], "strides": [2, 2]}
    assert fast.windowed("MaxPool", a, (1, 64, 112, 112), [None]) == (1, 64, 55, 55)
    assert fast.windowed("MaxPool", {**a, "ceil_mode": 1}, (1, 64, 112, 112), [None]) == (1, 64, 56, 56)
    # ceil mode never starts a window in the end padding: 5 wide, k 2, s 2, pad 0/1 -> 3 (not 4)
    assert fast.windowed("MaxPool", {"kernel_shape": [2], "strides": [2], "pads": [0, 1], "ceil_mode": 1},
                          (1, 1, 5), [None]) == (1, 1, 3)


def test_reduce_output_shapes_by_hand():
    """ONNX's reduce rules: axes an attribute before opset 18 (ReduceSum: 13), an input from it;
    negative axes count from the end; keepdims (default 1) keeps 1s; no axes reduce everything unless
    noop_with_empty_axes."""
    from dnnperf.load.shapes import RULES

    mean, _ = RULES["ReduceMean"]
    total, _ = RULES["ReduceSum"]
    x = (1, 1024, 7, 7)
    assert mean({"axes": [2, 3], "keepdims": 0}, [x], [None], 17) == [(1, 1024)]
    assert mean({"axes": [-1, -2]}, [x], [None], 17) == [(1, 1024, 1, 1)]
    assert mean({}, [x], [None], 17) == [(1, 1, 1, 1)]
    assert mean({"keepdims": 0}, [x, (2,)], [None, np.array([2, 3])], 18) == [(1, 1024)]
    assert mean({}, [x, (2,)], [None, None], 18) is None  # axes known only at run time
    assert mean({}, [x, None], [None, None], 18) is None  # ... even their shape unknown: never "all axes"
    assert mean({}, [x], [None], 18) == [(1, 1, 1, 1)]  # no axes input: every axis
    assert total({"noop_with_empty_axes": 1}, [x], [None], 13) == [x]
    assert total({"keepdims": 0}, [x, (1,)], [None, np.array([1])], 13) == [(1, 7, 7)]
    assert mean({"axes": [4]}, [x], [None], 17) is None  # out of range: left to ONNX


@pytest.mark.parametrize("axis,expected", [(1, (2, 60)), (0, (1, 120)), (4, (120, 1)), (-1, (24, 5)), (-4, (1, 120)),
                                           (5, None), (-5, None)])
def test_flatten_axes_by_hand(axis, expected):
    """ONNX's Flatten of a [2, 3, 4, 5] tensor: the dims before ``axis`` (in [-4, 4]; a negative one
    counts from the end) multiply into the first output dim. -1 was taken modulo 5, as axis 4."""
    from dnnperf.load.shapes import RULES

    fn, _ = RULES["Flatten"]
    try:
        out = fn({"axis": axis}, [(2, 3, 4, 5)], [None], 13)
    except ValueError:
        out = None
    assert out == (None if expected is None else [expected])


@pytest.fixture(scope="module")
def node_cases():
    """ONNX's own node test suite: one small model per test case of every operator, with its inputs
    and expected outputs (built from the installed onnx package, no network)."""
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return collect_testcases()


def test_python_path_equals_onnx_inference_on_onnx_node_tests(tmp_path, node_cases):
    """Every model of ONNX's own node test suite that the Python path takes (about 700 of 1,884)
    loads to the same shape and dtype for every node output as through ONNX's inference, and a model
    one path refuses the other refuses with the same line."""
    from dnnperf.errors import DnnperfError

    cases = node_cases
    real = fast.python_shapes

    def load(path, shapes_fn):
        fast.python_shapes = shapes_fn
        try:
            return load_graph(path)
        except DnnperfError as exc:
            return str(exc)
        finally:
            fast.python_shapes = real

    taken, wrong = 0, []
    for case in cases:
        path = str(tmp_path / f"{case.name}.onnx")
        with open(path, "wb") as fh:
            fh.write(case.model.SerializeToString())
        hits = []
        a = load(path, lambda *args: hits.append(real(*args)) or hits[-1])
        if not hits or hits[-1] is None:
            continue
        taken += 1
        b = load(path, lambda *args: None)
        if isinstance(a, str) or isinstance(b, str):
            if a != b:
                wrong.append((case.name, a, b))
            continue
        for n in b.nodes:
            for o in n.outputs:
                if o and (a.tensors[o].shape, a.tensors[o].dtype) != (b.tensors[o].shape, b.tensors[o].dtype):
                    wrong.append((case.name, o, a.tensors[o], b.tensors[o]))
    assert taken > 500
    assert not wrong, wrong[:5]


# the ops the folder evaluates with numpy itself (the rest go through ONNX's reference evaluator)
_NUMPY_FOLDS = {"Gather", "Concat", "Unsqueeze", "Add", "Sub", "Mul", "Equal", "Less", "Greater", "Max", "Min", "Div",
                "Cast", "Identity", "Slice", "ConstantOfShape", "Range", "Where", "Expand", "Mod", "Transpose", "Not",
                "ScatterND", "Squeeze", "Reshape", "Ceil", "Floor", "Neg", "Abs", "Sqrt", "Reciprocal", "Sign",
                "GreaterOrEqual", "LessOrEqual", "And", "Or", "Xor", "ReduceMin", "ReduceMax", "ReduceProd", "ReduceSum",
                "Flatten", "GatherElements", "CumSum"}


def test_folder_matches_onnx_node_test_outputs(node_cases):
    """The shape-arithmetic folder (``fold.run_node``) on the inputs of ONNX's node tests of the ops
    it evaluates with numpy gives ONNX's expected outputs: shape, dtype and values."""
    from dnnperf.load.fold import run_node
    from dnnperf.load.read import plain_attrs

    checked, wrong = 0, []
    for case in node_cases:
        g = case.model.graph
        if len(g.node) != 1 or g.node[0].op_type not in _NUMPY_FOLDS:
            continue
        node = g.node[0]
        for ins, expected in case.data_sets:
            if not all(isinstance(x, np.ndarray) for x in ins) or \
                    not all(isinstance(e, np.ndarray) and e.dtype.kind in "fiub" for e in expected):
                continue  # sequences, optionals, exotic float types
            feed = dict(zip([i.name for i in g.input], ins))
            with np.errstate(all="ignore"):
                got = run_node(node, [feed.get(i) if i else None for i in node.input], list(case.model.opset_import),
                               plain_attrs(node))
            checked += 1
            for a, e in zip(got, expected):
                a = np.asarray(a)
                if a.shape != e.shape or a.dtype != e.dtype or not np.allclose(a.astype(float), e.astype(float),
                                                                              equal_nan=True):
                    wrong.append((case.name, a.shape, a.dtype, e.shape, e.dtype))
    assert checked > 150
    assert not wrong, wrong[:5]
