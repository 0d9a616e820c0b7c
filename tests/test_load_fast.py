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
        m.setattr(fast, "MAX_NODES", -1)  # the Python path declines every graph
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


def test_plain_cnns_skip_onnx_inference(monkeypatch):
    """resnet50 and mobilenet_v2 (convolutions, pooling, elementwise, Flatten, Gemm) load with ONNX's
    inference made to fail: the Python path covered them; a transformer with symbolic shape arithmetic
    (gpt2) still needs it."""
    def refuse(*a, **k):
        raise AssertionError("ONNX shape inference called")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", refuse)
    # shufflenet_v2 ends in a ReduceMean
    for name in ("resnet50", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0"):
        g = load_graph(os.path.join(ROOT, "sample_models", f"{name}.onnx"), ShapeOverrides(batch=1))
        assert not g.unresolved
    with pytest.raises(Exception):
        load_graph(os.path.join(ROOT, "sample_models", "gpt2.onnx"), _overrides("gpt2"))


@pytest.mark.parametrize("attrs,x,w,expected", [
    # 224 input, 7x7 stride 2 pad 3: (224 + 6 - 7) // 2 + 1 = 112
    ({"kernel_shape": [7, 7], "strides": [2, 2], "pads": [3, 3, 3, 3]}, (1, 3, 224, 224), (64, 3, 7, 7), (1, 64, 112, 112)),
    # SAME_UPPER, stride 2 on 7: ceil(7 / 2) = 4
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (1, 8, 7, 7), (16, 8, 3, 3), (1, 16, 4, 4)),
    # VALID 3x3 dilation 2 on 10: extent 5, (10 - 5) // 1 + 1 = 6
    ({"auto_pad": "VALID", "dilations": [2, 2]}, (1, 4, 10, 10), (4, 4, 3, 3), (1, 4, 6, 6)),
])
def test_convolution_output_sizes_by_hand(attrs, x, w, expected):
    assert fast._windowed("Conv", attrs, x, [x, w]) == expected


def test_ceil_mode_pooling_by_hand():
    # 3x3 stride 2 on 112, no pad: floor((112 - 3) / 2) + 1 = 55, ceil mode 56
    a = {"kernel_shape": [3, 3], "strides": [2, 2]}
    assert fast._windowed("MaxPool", a, (1, 64, 112, 112), [None]) == (1, 64, 55, 55)
    assert fast._windowed("MaxPool", {**a, "ceil_mode": 1}, (1, 64, 112, 112), [None]) == (1, 64, 56, 56)
    # ceil mode never starts a window in the end padding: 5 wide, k 2, s 2, pad 0/1 -> 3 (not 4)
    assert fast._windowed("MaxPool", {"kernel_shape": [2], "strides": [2], "pads": [0, 1], "ceil_mode": 1},
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
