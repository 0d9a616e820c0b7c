"""Workloads of repeated nodes computed once per graph and signature (``dnnperf.ops.PURE``).

Every expected figure is a hand count of the node's work; the memo may change no figure, so each
pair below differs in exactly one thing the signature must hold and must cost differently."""

import os
import sys

import numpy as np
import pytest

from dnnperf import ops
from dnnperf.ir import Graph, Node, Tensor
from dnnperf.ops import REGISTRY, cost_node, key_of
from helpers import sample_overrides


def _graph(tensors, weights=(), values=None, opset=17):
    t = {n: Tensor(n, s, d) for n, (s, d) in tensors.items()}
    g = Graph("g", [], t, frozenset(weights), (), (), opset)
    g.values.update(values or {})
    g.constants = frozenset(weights) | frozenset(values or {})
    return g


def _node(name, op, ins, outs, **attrs):
    return Node(name, op, "", tuple(ins), tuple(outs), dict(attrs))


F = "float32"


def test_a_weight_and_an_activation_operand_are_two_signatures():
    # [4, 8, 16] x [16, 32]: a weight right operand is one GEMM of M = 4 x 8 (the weight shared), an
    # activation one is 4 products of 8 x 32 x 16; the same MACs, 4 x 8 x 32 x 16 = 16,384
    g = _graph({"a": ((4, 8, 16), F), "w": ((16, 32), F), "x": ((16, 32), F), "y1": ((4, 8, 32), F),
                "y2": ((4, 8, 32), F)}, weights={"w"})
    w1 = cost_node(g, _node("n1", "MatMul", ("a", "w"), ("y1",)))
    w2 = cost_node(g, _node("n2", "MatMul", ("a", "x"), ("y2",)))
    assert w1.macs == w2.macs == 16_384
    assert (w1.gemm.m, w1.gemm.count) == (32, 1)
    assert (w2.gemm.m, w2.gemm.count) == (8, 4)
    assert (w1.weight_bytes, w1.act_bytes_read) == (16 * 32 * 4, 4 * 8 * 16 * 4)
    assert (w2.weight_bytes, w2.act_bytes_read) == (0, 4 * 8 * 16 * 4 + 16 * 32 * 4)


def test_one_tensor_read_twice_is_its_own_signature():
    # Mul(x, x) reads x's 1,024 float32 once (4,096 bytes); Mul(x, z) reads two tensors (8,192)
    g = _graph({"x": ((1024,), F), "z": ((1024,), F), "y1": ((1024,), F), "y2": ((1024,), F)})
    sq = cost_node(g, _node("n1", "Mul", ("x", "x"), ("y1",)))
    two = cost_node(g, _node("n2", "Mul", ("x", "z"), ("y2",)))
    assert sq.act_bytes_read == 4096
    assert two.act_bytes_read == 8192


def test_a_constant_exponent_is_held_by_value():
    # Pow by a constant 2: squared by a multiply (kernel Pow.square); by 2.5: the C library's powf
    g = _graph({"x": ((64,), F), "p2": ((), F), "p25": ((), F), "y1": ((64,), F), "y2": ((64,), F)},
               values={"p2": np.array(2.0, np.float32), "p25": np.array(2.5, np.float32)})
    assert cost_node(g, _node("n1", "Pow", ("x", "p2"), ("y1",))).kernel == "Pow.square"
    assert cost_node(g, _node("n2", "Pow", ("x", "p25"), ("y2",))).kernel == ""


def test_attributes_and_element_types_are_held():
    # a 2 x 2 max pool over [1, 1, 8, 8] (stride 2): 16 outputs x 4 window elements = 64 ops; 3 x 3: 144
    g = _graph({"x": ((1, 1, 8, 8), F), "y1": ((1, 1, 4, 4), F), "y2": ((1, 1, 4, 4), F),
                "h": ((1, 1, 8, 8), "float16"), "y3": ((1, 1, 4, 4), "float16")})
    assert cost_node(g, _node("n1", "MaxPool", ("x",), ("y1",), kernel_shape=[2, 2], strides=[2, 2])).other_ops == 64
    assert cost_node(g, _node("n2", "MaxPool", ("x",), ("y2",), kernel_shape=[3, 3], strides=[2, 2])).other_ops == 144
    h = cost_node(g, _node("n3", "MaxPool", ("h",), ("y3",), kernel_shape=[2, 2], strides=[2, 2]))
    assert (h.dtype, h.act_bytes_read, h.bytes_written) == ("float16", 128, 32)


def test_repeated_nodes_are_costed_once_and_a_refusal_is_not_kept(monkeypatch):
    calls = []
    fn = REGISTRY["Add"]
    monkeypatch.setitem(REGISTRY, "Add", lambda ctx: calls.append(ctx.node.name) or fn(ctx))
    g = _graph({f"t{i}": ((2, 3), F) for i in range(12)} | {"bad": ((2, 4), F), "o": ((2, 3), F)})
    nodes = [_node(f"add{i}", "Add", (f"t{i}", f"t{i + 1}"), (f"t{i + 2}",)) for i in range(10)]
    ws = [cost_node(g, n) for n in nodes]
    assert calls == ["add0"]  # the ten share one signature: [2, 3] + [2, 3] -> [2, 3], activations
    assert all(w.other_ops == 6 and w.act_bytes_read == 48 for w in ws)
    bad = _node("clash", "Add", ("t0", "bad"), ("o",))
    for _ in range(2):
        with pytest.raises(ops.Contradiction):
            cost_node(g, bad)
    assert calls[1:] == ["clash", "clash"]


def test_an_impure_op_is_never_kept():
    # a Loop's cost reads its body and the graph's inputs: not in PURE; nor any contrib op with a
    # context of its own
    assert "Loop" not in ops.PURE and "If" not in ops.PURE and "com.microsoft:QLinearConv" not in ops.PURE
    assert {"MatMul", "Conv", "Add", "LayerNormalization", "Softmax", "Transpose"} <= ops.PURE


@pytest.mark.parametrize("name", ["resnet50", "shufflenet_v2_x1_0", "swin_t", "bert_base", "tiny_llama_genai"])
def test_every_sample_node_costs_the_same_with_and_without_the_memo(name):
    from dnnperf.load import load_graph

    g = load_graph(f"sample_models/{name}.onnx", sample_overrides(name))
    hits = 0
    for node in g.nodes:
        try:
            w = cost_node(g, node, fold=False)
        except ops.Unsupported:
            continue
        if key_of(node) in ops.PURE:
            fresh = REGISTRY[key_of(node)](ops.Ctx(g, node))  # the cost function itself, no memo
            assert fresh == w, node.name
            hits += 1
    assert hits > 10
    assert 0 < len(g.costs) < hits  # repeated blocks share signatures


def test_the_outputs_asked_for_are_held():
    # LayerNormalization of [2, 8] float32 writes 64 bytes; asked for its mean and inverse deviation
    # too ([2, 1] each), 64 + 8 + 8 = 80
    g = _graph({"x": ((2, 8), F), "s": ((8,), F), "b": ((8,), F), "y1": ((2, 8), F), "y2": ((2, 8), F),
                "m": ((2, 1), F), "r": ((2, 1), F)}, weights={"s", "b"})
    assert cost_node(g, _node("n1", "LayerNormalization", ("x", "s", "b"), ("y1",), axis=-1)).bytes_written == 64
    both = cost_node(g, _node("n2", "LayerNormalization", ("x", "s", "b"), ("y2", "m", "r"), axis=-1))
    assert both.bytes_written == 80


class _Reads:
    """A stand-in for a graph, a node or one of their tables that records what a cost function reads."""

    def __init__(self, real, log: list, where: str):
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_log", log)
        object.__setattr__(self, "_where", where)

    def __getattr__(self, name):
        self._log.append((self._where, name))
        value = getattr(self._real, name)
        if self._where == "graph" and name in _GRAPH_TABLES:
            return _Reads(value, self._log, name)
        return value

    def _tensor(self, value):
        return _Reads(value, self._log, "tensor") if self._where == "tensors" and value is not None else value

    def get(self, key, default=None):
        self._log.append((self._where, key))
        return self._tensor(self._real.get(key, default))

    def __getitem__(self, key):
        self._log.append((self._where, key))
        return self._tensor(self._real[key])

    def __contains__(self, key):
        self._log.append((self._where, key))
        return key in self._real


_GRAPH_TABLES = ("tensors", "values", "initializers", "constants", "runtime_built")


def _stray_reads(g, node) -> list:
    """What ``node``'s PURE cost function reads beyond its signature: the graph's opset and its tables
    looked up by the node's own inputs and outputs only, a tensor's shape, type and sizes; the node's op,
    domain, inputs, outputs and attributes (never its name, a tensor's name, the graph's inputs, outputs,
    nodes or notes)."""
    log: list = []
    try:
        REGISTRY[key_of(node)](ops.Ctx(_Reads(g, log, "graph"), _Reads(node, log, "node")))
    except ops.Unsupported:
        pass
    own = set(node.inputs) | set(node.outputs)
    allowed = {"graph": ("opset",) + _GRAPH_TABLES, "node": ("op_type", "domain", "inputs", "outputs", "attrs"),
               "tensor": ("shape", "dtype", "numel", "nbytes")}
    return [(where, what) for where, what in log if what not in allowed.get(where, own)]


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2", "swin_t", "bert_base", "gpt2", "tiny_llama_kv"])
def test_a_pure_cost_function_reads_only_what_the_signature_holds(name):
    from dnnperf.load import load_graph

    g = load_graph(f"sample_models/{name}.onnx", sample_overrides(name))
    pure = [n for n in g.nodes if key_of(n) in ops.PURE]
    assert len(pure) > 20
    for node in pure:
        assert not _stray_reads(g, node), (node.name, _stray_reads(g, node))


def test_pure_cost_functions_over_the_onnx_node_suite(tmp_path):
    # every test case of ONNX's own node suite (the installed onnx's; every attribute an op defines): no
    # PURE cost function reads beyond its signature (~7,000 nodes, ~7 s)
    import warnings

    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import onnx_suite

    from dnnperf.errors import DnnperfError
    from dnnperf.ir import ShapeOverrides
    from dnnperf.load import load_graph

    path, checked, stray = str(tmp_path / "m.onnx"), 0, []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in onnx_suite.cases():
            with open(path, "wb") as fh:
                fh.write(case.model.SerializeToString())
            try:
                g = load_graph(path, ShapeOverrides(strict=False))
            except DnnperfError:
                continue
            for node in g.nodes:
                if key_of(node) in ops.PURE:
                    checked += 1
                    stray += [(case.name, node.op_type, r) for r in _stray_reads(g, node)]
    assert checked > 5000
    assert not stray, stray[:5]
