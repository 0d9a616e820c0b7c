"""The shape rules dnnperf keeps for ONNX Runtime's contrib ops (ONNX's own inference has none for
them) against the shapes ONNX Runtime's CPU kernels really produce: each op built in a few
configurations, run once, every output's shape compared with what the loader resolved."""

import os

import numpy as np
import pytest
from onnx import helper

from dnnperf.api import inspect_model

ort = pytest.importorskip("onnxruntime")
MS = "com.microsoft"
RNG = np.random.default_rng(0)


def _f(*shape):
    return RNG.random(shape, dtype=np.float32)


def _w(name, a):
    """A weight initializer holding ``a``."""
    return helper.make_tensor(name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape), a.tobytes(), raw=True)


def _compare(tmp_path, name, node, feeds, weights, outputs):
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
              for n, a in feeds.items()]
    g = helper.make_graph([node], "g", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs],
                          [_w(n, a) for n, a in weights.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    path = os.path.join(str(tmp_path), name + ".onnx")
    with open(path, "wb") as fh:
        fh.write(m.SerializeToString())
    real = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(outputs, feeds)
    tensors = inspect_model(path).graph.tensors
    return [(o, tensors[o].shape, r.shape) for o, r in zip(outputs, real)]


@pytest.mark.parametrize("b, s, heads, head_dim", [(1, 1, 1, 8), (2, 5, 2, 16), (3, 16, 4, 8)])
def test_transformer_ops_have_the_shapes_onnx_runtime_gives(tmp_path, b, s, heads, head_dim):
    h = heads * head_dim
    x, kv_len = _f(b, s, h), 7
    cases = {
        "FastGelu": (helper.make_node("FastGelu", ["x", "bias"], ["y"], domain=MS), {"x": x}, {"bias": _f(h)}, ["y"]),
        "BiasGelu": (helper.make_node("BiasGelu", ["x", "bias"], ["y"], domain=MS), {"x": x}, {"bias": _f(h)}, ["y"]),
        "SkipLayerNormalization": (
            helper.make_node("SkipLayerNormalization", ["x", "skip", "g", "be", "bi"], ["y", "mean", "isv", "sum"],
                             domain=MS), {"x": x, "skip": _f(b, s, h)}, {"g": _f(h), "be": _f(h), "bi": _f(h)},
            ["y", "sum"]),
        "Attention": (helper.make_node("Attention", ["x", "w", "wb"], ["y"], domain=MS, num_heads=heads), {"x": x},
                      {"w": _f(h, 3 * h), "wb": _f(3 * h)}, ["y"]),
        "MultiHeadAttention": (helper.make_node("MultiHeadAttention", ["x", "k", "v"], ["y"], domain=MS, num_heads=heads),
                               {"x": x, "k": _f(b, kv_len, h), "v": _f(b, kv_len, h)}, {}, ["y"]),
        "FusedMatMul": (helper.make_node("FusedMatMul", ["x", "o"], ["y"], domain=MS, transB=1, alpha=0.5),
                        {"x": x, "o": _f(b, 7, h)}, {}, ["y"]),
        "RotaryEmbedding": (helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS,
                                             num_heads=heads),
                            {"x": x, "pos": np.tile(np.arange(s, dtype=np.int64), (b, 1))},
                            {"cos": _f(64, head_dim // 2), "sin": _f(64, head_dim // 2)}, ["y"]),
        "MatMulNBits": (helper.make_node("MatMulNBits", ["x", "q", "sc"], ["y"], domain=MS, K=h, N=24, bits=4,
                                         block_size=16),
                        {"x": x}, {"q": RNG.integers(0, 255, (24, -(-h // 16), 8), dtype=np.uint8),
                                   "sc": _f(24 * -(-h // 16))}, ["y"]),
    }
    wrong = []
    for name, (node, feeds, weights, outputs) in cases.items():
        wrong += [(name, o, got, want) for o, got, want in _compare(tmp_path, name, node, feeds, weights, outputs)
                  if got != want]
    assert not wrong, wrong


@pytest.mark.parametrize("b, s, past", [(1, 5, 0), (1, 3, 8), (2, 1, 8)])
def test_group_query_attention_has_the_shapes_onnx_runtime_gives(tmp_path, b, s, past):
    """Output [b, s, 4 x 16] and the present key and value caches [b, 2, past + s, 16]."""
    heads, kv, d = 4, 2, 16
    feeds = {"q": _f(b, s, heads * d), "k": _f(b, s, kv * d), "v": _f(b, s, kv * d), "pk": _f(b, kv, past, d),
             "pv": _f(b, kv, past, d), "seq": np.full((b,), past + s - 1, np.int32),
             "tot": np.array(past + s, np.int32)}
    node = helper.make_node("GroupQueryAttention", list(feeds), ["y", "prk", "prv"], domain=MS, num_heads=heads,
                            kv_num_heads=kv)
    got = _compare(tmp_path, "gqa", node, feeds, {}, ["y", "prk", "prv"])
    assert [g for _, g, _ in got] == [(b, s, heads * d), (b, kv, past + s, d), (b, kv, past + s, d)]
    assert all(g == w for _, g, w in got), got


def test_embedding_and_quantized_ops_have_the_shapes_onnx_runtime_gives(tmp_path):
    ids = RNG.integers(0, 100, (2, 9)).astype(np.int32)
    eln = _compare(tmp_path, "eln", helper.make_node("EmbedLayerNormalization",
                                                      ["ids", "seg", "we", "pe", "se", "g", "be"], ["y", "mask"], domain=MS),
                   {"ids": ids, "seg": np.zeros_like(ids)},
                   {"we": _f(100, 32), "pe": _f(64, 32), "se": _f(2, 32), "g": _f(32), "be": _f(32)}, ["y", "mask"])
    assert [(g, tuple(w)) for _, g, w in eln] == [((2, 9, 32), (2, 9, 32)), ((2,), (2,))]
    scale, zero = np.array(0.1, np.float32), np.array(128, np.uint8)
    conv = _compare(tmp_path, "qconv", helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
                                                        ["y"], pads=[1, 1, 1, 1], strides=[2, 2]),
                    {"x": RNG.integers(0, 255, (1, 3, 14, 14), dtype=np.uint8)},
                    {"xs": scale, "xz": zero, "w": RNG.integers(0, 255, (8, 3, 3, 3), dtype=np.uint8), "ws": scale,
                     "wz": zero, "ys": scale, "yz": zero}, ["y"])
    assert [(g, tuple(w)) for _, g, w in conv] == [((1, 8, 7, 7), (1, 8, 7, 7))]
