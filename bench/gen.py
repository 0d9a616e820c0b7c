"""Synthetic graphs for the benchmarks (weightless: initializers keep dims, no payload)."""

from __future__ import annotations

import onnx
from onnx import TensorProto as T
from onnx import helper


def _w(name, dims):
    t = onnx.TensorProto()
    t.name = name
    t.data_type = T.FLOAT
    t.dims.extend(dims)
    t.data_location = T.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", "__absent__"
    return t


def transformer_like(n_nodes: int, seq: int = 128, d: int = 768, ff: int = 3072) -> onnx.ModelProto:
    """Blocks of 10 nodes (MatMul, Add, Softmax, MatMul, Add, LayerNorm, MatMul, Gelu-ish, MatMul, Add)."""
    nodes, inits = [], []
    x = "x"
    blocks = max(1, n_nodes // 10)
    for b in range(blocks):
        p = f"b{b}_"
        inits += [_w(p + "wq", [d, d]), _w(p + "bq", [d]), _w(p + "wo", [d, d]), _w(p + "g", [d]),
                  _w(p + "be", [d]), _w(p + "w1", [d, ff]), _w(p + "w2", [ff, d])]
        nodes += [
            helper.make_node("MatMul", [x, p + "wq"], [p + "q"], name=p + "q"),
            helper.make_node("Add", [p + "q", p + "bq"], [p + "qb"], name=p + "qb"),
            helper.make_node("Softmax", [p + "qb"], [p + "s"], axis=-1, name=p + "s"),
            helper.make_node("MatMul", [p + "s", p + "wo"], [p + "o"], name=p + "o"),
            helper.make_node("Add", [p + "o", x], [p + "r"], name=p + "r"),
            helper.make_node("LayerNormalization", [p + "r", p + "g", p + "be"], [p + "n"], axis=-1, name=p + "n"),
            helper.make_node("MatMul", [p + "n", p + "w1"], [p + "h"], name=p + "h"),
            helper.make_node("Relu", [p + "h"], [p + "a"], name=p + "a"),
            helper.make_node("MatMul", [p + "a", p + "w2"], [p + "f"], name=p + "f"),
            helper.make_node("Add", [p + "f", p + "n"], [p + "y"], name=p + "y"),
        ]
        x = p + "y"
    g = helper.make_graph(nodes, "transformer_like", [helper.make_tensor_value_info("x", T.FLOAT, [1, seq, d])],
                          [helper.make_tensor_value_info(x, T.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def huge_skeleton(layers: int = 48, d: int = 8192) -> onnx.ModelProto:
    """A skeleton claiming layers x d x d fp32 weights (48 x 8192^2 x 4 B = 12.9 GB)."""
    nodes, inits = [], []
    x = "x"
    for i in range(layers):
        inits.append(_w(f"w{i}", [d, d]))
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"y{i}"], name=f"mm{i}"))
        x = f"y{i}"
    g = helper.make_graph(nodes, "huge", [helper.make_tensor_value_info("x", T.FLOAT, [8, d])],
                          [helper.make_tensor_value_info(x, T.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def small_cnn(seed: int) -> onnx.ModelProto:
    """A NAS-style random CNN (deterministic per seed)."""
    import random

    rnd = random.Random(seed)
    nodes, inits = [], []
    x, c, h = "x", 3, 64
    for i in range(rnd.randint(6, 14)):
        cout = rnd.choice([16, 24, 32, 48, 64, 96])
        k = rnd.choice([1, 3, 5])
        s = 2 if (h > 8 and rnd.random() < 0.3) else 1
        inits.append(_w(f"w{i}", [cout, c, k, k]))
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[k // 2] * 4, strides=[s, s]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        x, c, h = f"r{i}", cout, (h + s - 1) // s
    g = helper.make_graph(nodes, f"cnn{seed}", [helper.make_tensor_value_info("x", T.FLOAT, [1, 3, 64, 64])],
                          [helper.make_tensor_value_info(x, T.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m
