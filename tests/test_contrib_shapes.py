"""The shape rules dnnperf keeps for ONNX Runtime's contrib ops (ONNX's own inference has none for
them) against the shapes ONNX Runtime's CPU kernels really produce: each op built in a few
configurations, run once, every output's shape compared with what the loader resolved."""

import os

import numpy as np
import pytest
from onnx import helper

from dnnperf.api import inspect_model

from helpers import ort_version

ort = pytest.importorskip("onnxruntime")
ORT_VERSION = ort_version(ort)
MS = "com.microsoft"
RNG = np.random.default_rng(0)


def _f(*shape):
    return RNG.random(shape, dtype=np.float32)


def _w(name, a):
    """A weight initializer holding ``a``."""
    return helper.make_tensor(name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape), a.tobytes(), raw=True)


def _write(tmp_path, name, node, feeds, weights, outputs) -> str:
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
              for n, a in feeds.items()]
    g = helper.make_graph([node], "g", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs],
                          [_w(n, a) for n, a in weights.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    path = os.path.join(str(tmp_path), name + ".onnx")
    with open(path, "wb") as fh:
        fh.write(m.SerializeToString())
    return path


def _compare(tmp_path, name, node, feeds, weights, outputs):
    path = _write(tmp_path, name, node, feeds, weights, outputs)
    real = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(outputs, feeds)
    tensors = inspect_model(path).graph.tensors
    # (an optional output an older ONNX Runtime computes no value for comes back as None)
    return [(o, tensors[o].shape, r.shape if r is not None else None) for o, r in zip(outputs, real)]


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


@pytest.mark.parametrize("b, s, past, buffer", [(1, 5, 0, 12), (2, 1, 6, 12), (1, 1, 11, 12)])
def test_group_query_attention_over_a_shared_buffer_attends_to_the_total_length(tmp_path, b, s, past, buffer):
    """ONNX Runtime's shared-buffer mode: the past is a buffer as long as the longest sequence (12) and
    comes back at that length (max(12, past + s)); each query attends to total_sequence_length = past + s
    keys, not to the buffer's 12 plus s (the loader added them: a 5-token prompt got a 17-long present).
    MACs by hand: b x 4 heads x s x (past + s) keys x (16 + 16)."""
    heads, kv, d = 4, 2, 16
    feeds = {"q": _f(b, s, heads * d), "k": _f(b, s, kv * d), "v": _f(b, s, kv * d), "pk": _f(b, kv, buffer, d),
             "pv": _f(b, kv, buffer, d)}
    weights = {"seq": np.full((b,), past + s - 1, np.int32), "tot": np.array(past + s, np.int32)}
    node = helper.make_node("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "seq", "tot"], ["y", "prk", "prv"],
                            domain=MS, num_heads=heads, kv_num_heads=kv)
    got = _compare(tmp_path, "gqa_buf", node, feeds, weights, ["y", "prk", "prv"])
    assert [g for _, g, _ in got] == [(b, s, heads * d), (b, kv, buffer, d), (b, kv, buffer, d)]
    assert all(g == w for _, g, w in got), got
    row = inspect_model(os.path.join(str(tmp_path), "gqa_buf.onnx")).rows[0]
    assert row.workload.macs == b * heads * s * (past + s) * (d + d)


@pytest.mark.parametrize("b, s, l, past", [(1, 4, 4, 0), (2, 1, 1, 5), (2, 3, 3, 2)])
def test_multi_head_attention_with_a_cache_grows_it_and_attends_to_it(tmp_path, b, s, l, past):
    """MultiHeadAttention with past_key / past_value (inputs 6 and 7): present key and value [b, 2 heads,
    past + l, 8] as ONNX Runtime gives them (the loader left them open), and each query attends to
    past + l keys (it was costed over l only). MACs by hand: b x 2 x s x (past + l) x (8 + 8)."""
    heads, d = 2, 8
    feeds = {"q": _f(b, s, heads * d), "k": _f(b, l, heads * d), "v": _f(b, l, heads * d)}
    names = ["q", "k", "v"]
    if past:
        feeds.update(pk=_f(b, heads, past, d), pv=_f(b, heads, past, d))
        names += ["", "", "", "pk", "pv"]
    node = helper.make_node("MultiHeadAttention", names, ["y", "prk", "prv"], domain=MS, num_heads=heads)
    got = _compare(tmp_path, "mha_past", node, feeds, {}, ["y", "prk", "prv"])
    assert [g for _, g, _ in got] == [(b, s, heads * d), (b, heads, past + l, d), (b, heads, past + l, d)]
    assert all(g == w for _, g, w in got), got
    row = inspect_model(os.path.join(str(tmp_path), "mha_past.onnx")).rows[0]
    assert row.workload.macs == b * heads * s * (past + l) * (d + d)


def test_packed_multi_head_attention_is_costed(tmp_path):
    """A packed QKV query [1, 6, 2 heads, 3, 8] (the transformer optimizer's self-attention for diffusion
    UNets) was refused as "not costed": output [1, 6, 16]; MACs 1 x 2 x 6 x 6 x (8 + 8) = 1,152. Packed
    K/V [1, 5, 2, 2, 8] with a [1, 6, 16] query: 1 x 2 x 6 x 5 x 16 = 960 (ONNX Runtime's CPU kernels
    take neither layout, so the figures are the hand count's)."""
    from onnx import TensorProto

    def build(name, inputs, node_inputs):
        g = helper.make_graph([helper.make_node("MultiHeadAttention", node_inputs, ["y"], domain=MS, num_heads=2)], "g",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_empty_tensor_value_info("y")])
        path = os.path.join(str(tmp_path), name)
        with open(path, "wb") as fh:
            fh.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
                     .SerializeToString())
        insp = inspect_model(path)
        return insp.graph.tensors["y"].shape, insp.rows[0].workload.macs

    assert build("qkv.onnx", [("q", [1, 6, 2, 3, 8])], ["q"]) == ((1, 6, 16), 1152)
    assert build("kv.onnx", [("q", [1, 6, 16]), ("kv", [1, 5, 2, 2, 8])], ["q", "kv"]) == ((1, 6, 16), 960)


@pytest.mark.parametrize("b, s, past", [(1, 4, 0), (2, 1, 3)])
def test_attention_present_cache_has_the_shape_onnx_runtime_gives(tmp_path, b, s, past):
    """com.microsoft Attention's second output, present [2, b, heads, past + s, head]: it was left open
    (its consumers unscored)."""
    heads, d, hin = 2, 4, 6
    feeds = {"x": _f(b, s, hin)}
    names = ["x", "w", "wb"]
    if past:
        feeds["past"] = _f(2, b, heads, past, d)
        names += ["", "past"]
    node = helper.make_node("Attention", names, ["y", "present"], domain=MS, num_heads=heads, unidirectional=1)
    got = _compare(tmp_path, "attn_present", node, feeds, {"w": _f(hin, 3 * heads * d), "wb": _f(3 * heads * d)},
                   ["y", "present"])
    assert [g for _, g, _ in got] == [(b, s, heads * d), (2, b, heads, past + s, d)]
    assert all(g == w for _, g, w in got), got


@pytest.mark.parametrize("attrs, nhwc, want", [({"channels_last": 1}, (1, 7, 6, 3), (1, 5, 4, 3)),
                                               ({"ceil_mode": 1, "strides": [2, 2]}, (1, 3, 8, 7), (1, 3, 4, 3)),
                                               ({"channels_last": 1, "ceil_mode": 1, "strides": [2, 2]},
                                                (1, 8, 7, 3), (1, 4, 3, 3))])
def test_quantized_average_pool_layouts_have_the_shapes_onnx_runtime_gives(tmp_path, attrs, nhwc, want):
    """QLinearAveragePool with channels_last (N x H x W x C in and out) or ceil_mode: the loader left
    its output open. 3 x 3 windows: 7 x 6 -> 5 x 4; stride 2 rounded up: 8 x 7 -> 4 x 3 (by hand)."""
    scale, zero = np.array(0.1, np.float32), np.array(0, np.uint8)
    node = helper.make_node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS,
                            kernel_shape=[3, 3], **attrs)
    got = _compare(tmp_path, "qavg", node, {"x": RNG.integers(0, 255, nhwc, dtype=np.uint8)},
                   {"xs": scale, "xz": zero, "ys": scale, "yz": zero}, ["y"])
    assert got == [("y", want, want)]
    assert inspect_model(os.path.join(str(tmp_path), "qavg.onnx")).graph.tensors["y"].dtype == "uint8"


def test_skip_layer_norm_statistics_are_float32(tmp_path):
    """SkipLayerNormalization's mean and inv_std_var outputs ([2, 3, 1], float): their element type was
    the number 1 (ONNX's code for float) rather than a type name: 24 bytes each by hand."""
    x = _f(2, 3, 8)
    node = helper.make_node("SkipLayerNormalization", ["x", "skip", "g"], ["y", "mean", "isv"], domain=MS)
    _compare(tmp_path, "sln", node, {"x": x, "skip": _f(2, 3, 8)}, {"g": _f(8)}, ["y", "mean", "isv"])
    t = inspect_model(os.path.join(str(tmp_path), "sln.onnx")).graph.tensors
    assert [(t[o].shape, t[o].dtype, t[o].nbytes) for o in ("mean", "isv")] == [((2, 3, 1), "float32", 24)] * 2


def _u8(*shape):
    return RNG.integers(0, 255, shape, dtype=np.uint8)


_DECODE_OPS = {
    # op: (inputs in order (name, array, weight?), attributes, outputs, shapes by hand)
    "GatherBlockQuantized": ([("data", _u8(10, 32), True), ("idx", np.array([[0, 3, 9]], np.int64), False),
                              ("sc", _f(10, 2), True)], {"bits": 4, "block_size": 32}, ["y"], [(1, 3, 64)]),
    "MatMulBnb4": ([("a", _f(2, 3, 64), False), ("b", _u8(64 * 8 // 2), True), ("ab", _f(64 * 8 // 32), True)],
                   {"K": 64, "N": 8, "block_size": 32, "quant_type": 1}, ["y"], [(2, 3, 8)]),
    "TransposeMatMul": ([("a", _f(4, 3), False), ("b", _f(5, 4), False)], {"transA": 1, "transB": 1}, ["y"], [(3, 5)]),
    "NhwcMaxPool": ([("x", _u8(1, 9, 7, 3), False)], {"kernel_shape": [3, 3], "strides": [2, 2]}, ["y"], [(1, 4, 3, 3)]),
    "QLinearWhere": ([("c", np.array([True, False]), False), ("x", _u8(3, 2), False), ("xs", np.float32(0.1), True),
                      ("xz", np.uint8(0), True), ("x2", _u8(1, 2), False), ("ys", np.float32(0.1), True),
                      ("yz", np.uint8(0), True), ("zs", np.float32(0.1), True), ("zz", np.uint8(0), True)], {}, ["y"],
                     [(3, 2)]),
    "Inverse": ([("x", _f(2, 3, 3) + 3 * np.eye(3, dtype=np.float32), False)], {}, ["y"], [(2, 3, 3)]),
    "CDist": ([("a", _f(4, 3), False), ("b", _f(6, 3), False)], {"metric": "euclidean"}, ["y"], [(4, 6)]),
    "ExpandDims": ([("x", _f(2, 3), False), ("ax", np.array(-1, np.int32), True)], {}, ["y"], [(2, 3, 1)]),
    "UnfoldTensor": ([("x", _f(2, 10), False)], {"dim": 1, "size": 3, "step": 2}, ["y"], [(2, 4, 3)]),
    "DecoderMaskedMultiHeadAttention": (
        [("q", _f(2, 1, 16), False), ("k", _f(2, 1, 16), False), ("v", _f(2, 1, 16), False), ("", None, False),
         ("", None, False), ("pk", _f(2, 2, 10, 8), False), ("pv", _f(2, 2, 10, 8), False),
         ("psl", np.array(4, np.int32), True)], {"num_heads": 2, "past_present_share_buffer": 1},
        ["y", "prk", "prv"], [(2, 1, 16), (2, 2, 10, 8), (2, 2, 10, 8)]),
}


# the first ONNX Runtime seen running an op of _DECODE_OPS that an older one cannot: 1.23.2, the last
# release for Python 3.10, dies with a segmentation fault (taking the test process with it) on
# ExpandDims with a scalar int32 axis; 1.32.0 runs it
_ORT_RUNS = {"ExpandDims": (1, 32)}


@pytest.mark.parametrize("op", sorted(_DECODE_OPS))
def test_decode_and_tool_chain_contrib_ops_have_the_shapes_onnx_runtime_gives(tmp_path, op):
    """Contrib ops that were listed as having no cost model (every layer after them unscored): now the
    shapes ONNX Runtime's CPU kernels give, which are also the hand-worked ones (a 4-bit table of 32
    bytes a row holds 64 values; a 3 x 3 stride-2 window over 9 x 7 gives 4 x 3; 10 elements in windows
    of 3 every 2 give 4)."""
    inputs, attrs, outputs, want = _DECODE_OPS[op]
    feeds = {n: a for n, a, w in inputs if n and not w}
    weights = {n: a for n, a, w in inputs if n and w}
    node = helper.make_node(op, [n for n, _, _ in inputs], outputs, domain=MS, **attrs)
    if ORT_VERSION < _ORT_RUNS.get(op, (0,)):  # the hand-worked shapes alone
        tensors = inspect_model(_write(tmp_path, op, node, feeds, weights, outputs)).graph.tensors
        got = [(o, tensors[o].shape, tuple(w)) for o, w in zip(outputs, want)]
    else:
        got = _compare(tmp_path, op, node, feeds, weights, outputs)
    assert [g for _, g, _ in got] == want
    assert all(g == tuple(w) for _, g, w in got), got
    insp = inspect_model(os.path.join(str(tmp_path), op + ".onnx"))
    assert not insp.unsupported and insp.rows[0].workload is not None


def test_gather_block_quantized_reads_the_rows_it_picks(tmp_path):
    """An int4 embedding table of 1,000 rows x 64 values (32 bytes a row, 2 float32 scales a row) read
    by 3 token ids: 3 x (32 + 8) = 120 bytes of table and scales read (not 40,000), 3 x 64 x 4 = 768
    bytes written, 2 ops a value dequantised: 384."""
    node = helper.make_node("GatherBlockQuantized", ["data", "idx", "sc"], ["y"], domain=MS, bits=4, block_size=32)
    _compare(tmp_path, "gbq", node, {"idx": np.array([[1, 7, 999]], np.int64)}, {"data": _u8(1000, 32),
                                                                              "sc": _f(1000, 2)}, ["y"])
    w = inspect_model(os.path.join(str(tmp_path), "gbq.onnx")).rows[0].workload
    assert (w.weight_bytes, w.bytes_written, w.other_ops, w.dtype) == (120, 768, 384, "float32")


@pytest.mark.parametrize("share, past, want_keys", [(1, 4, 5), (0, 6, 7)])
def test_decoder_masked_attention_attends_to_the_cached_tokens(tmp_path, share, past, want_keys):
    """A decode step of 2 sequences, 2 heads of 8: over a shared 10-slot buffer holding 4 tokens a query
    attends to 4 + 1 keys (not the buffer's 10), and the present cache is the buffer (ONNX Runtime's
    shapes); over a 6-token past (ONNX Runtime's CPU kernel takes only the shared buffer; its contrib
    operator documentation gives the present as past + 1 tokens), 6 + 1 keys and a 7-token present.
    MACs by hand: 2 x 2 x 1 x keys x (8 + 8)."""
    slots = 10 if share else past
    feeds = {"q": _f(2, 1, 16), "k": _f(2, 1, 16), "v": _f(2, 1, 16), "pk": _f(2, 2, slots, 8), "pv": _f(2, 2, slots, 8)}
    node = helper.make_node("DecoderMaskedMultiHeadAttention", ["q", "k", "v", "", "", "pk", "pv", "psl"],
                            ["y", "prk", "prv"], domain=MS, num_heads=2, past_present_share_buffer=share)
    weights = {"psl": np.array(past, np.int32)}
    if share:
        got = _compare(tmp_path, "dmmha", node, feeds, weights, ["y", "prk", "prv"])
        assert all(g == w for _, g, w in got), got
    path = _write(tmp_path, "dmmha", node, feeds, weights, ["y", "prk", "prv"])
    insp = inspect_model(path)
    assert insp.graph.tensors["prk"].shape == (2, 2, 10 if share else past + 1, 8)
    assert insp.rows[0].workload.macs == 2 * 2 * 1 * want_keys * (8 + 8)
    assert not insp.rows[0].workload.note
    if share:  # the filled length an input with no value: the whole buffer, said
        feeds["psl"] = weights.pop("psl")
        w = inspect_model(_write(tmp_path, "dmmha2", node, feeds, weights, ["y", "prk", "prv"])).rows[0].workload
        assert w.macs == 2 * 2 * 1 * 11 * (8 + 8) and "past_sequence_length not known" in w.note


def _inspect(tmp_path, name, node, feeds, weights, outputs):
    """Shapes and workloads of one node by dnnperf alone (an op ONNX Runtime's CPU provider does not run)."""
    insp = inspect_model(_write(tmp_path, name, node, feeds, weights, outputs))
    assert not insp.unsupported, insp.unsupported
    return insp.graph.tensors, insp.rows[0].workload


def test_cuda_provider_contrib_ops_by_hand(tmp_path):
    """The optimizer's CUDA-only ops (ONNX Runtime's own symbolic shape inference gives the same shapes;
    they were listed as having no cost model, every layer after them unscored). By hand:
    NhwcConv [1, 9, 7, 4] with [6, 3, 3, 4] weights, stride 2, pads 1: [1, 5, 4, 6], 1 x 6 x 20 x 4 x 9
    = 4,320 MACs (+ 120 bias adds); NhwcFusedConv with a Relu: 120 more. SkipGroupNorm on [2, 3, 3, 8]
    with a bias and SiLU: 144 x (7 + 1 + 1 + 4) = 1,872 ops, outputs Y and the sum. RelativePositionBias
    with a [32, 4] table (an input here: a table of weights alone with constant lengths is folded at
    load time), query length 5, key length 7: [1, 4, 5, 7], 35 x 6 + 140 = 350 ops.
    GatedRelativePositionBias, 2 x 3 tokens, 2 heads of 4 against a [4, 8] weight: [2, 2, 3, 3],
    12 rows x 4 x 8 = 384 MACs."""
    t, w = _inspect(tmp_path, "nhwc", helper.make_node("NhwcConv", ["x", "w", "b"], ["y"], domain=MS, strides=[2, 2],
                                                         pads=[1, 1, 1, 1]),
                    {"x": _f(1, 9, 7, 4)}, {"w": _f(6, 3, 3, 4), "b": _f(6)}, ["y"])
    assert (t["y"].shape, w.macs, w.other_ops, w.family) == ((1, 5, 4, 6), 4320, 120, "conv")
    t, w = _inspect(tmp_path, "nhwcf", helper.make_node("NhwcFusedConv", ["x", "w", "b"], ["y"], domain=MS,
                                                          strides=[2, 2], pads=[1, 1, 1, 1], activation="Relu"),
                    {"x": _f(1, 9, 7, 4)}, {"w": _f(6, 3, 3, 4), "b": _f(6)}, ["y"])
    assert (t["y"].shape, w.macs, w.other_ops) == ((1, 5, 4, 6), 4320, 240)
    t, w = _inspect(tmp_path, "sgn", helper.make_node("SkipGroupNorm", ["x", "g", "be", "s", "bi"], ["y", "sum"], domain=MS,
                                                        groups=2, activation=1, epsilon=1e-5, channels_last=1),
                    {"x": _f(2, 3, 3, 8), "s": _f(2, 3, 3, 8)}, {"g": _f(8), "be": _f(8), "bi": _f(8)}, ["y", "sum"])
    assert (t["y"].shape, t["sum"].shape, w.other_ops) == ((2, 3, 3, 8), (2, 3, 3, 8), 1872)
    t, w = _inspect(tmp_path, "rpb", helper.make_node("RelativePositionBias", ["tb", "ql", "kl"], ["y"], domain=MS,
                                                        max_distance=128, is_bidirectional=1),
                    {"tb": _f(32, 4)}, {"ql": np.array(5, np.int64), "kl": np.array(7, np.int64)}, ["y"])
    assert (t["y"].shape, w.other_ops) == ((1, 4, 5, 7), 350)
    t, w = _inspect(tmp_path, "grpb", helper.make_node("GatedRelativePositionBias", ["q", "qb", "rp", "w", "b", "eco"],
                                                         ["y"], domain=MS, num_heads=2),
                    {"q": _f(2, 3, 8), "rp": _f(1, 2, 3, 3)},
                    {"qb": _f(8), "w": _f(4, 8), "b": _f(8), "eco": _f(1, 2, 1, 1)}, ["y"])
    assert (t["y"].shape, w.macs) == ((2, 2, 3, 3), 384)


def test_group_query_attention_with_an_unknown_total_length_says_what_it_assumed(tmp_path):
    """total_sequence_length a graph input with no value: the keys are taken as the past's 64 + 1 new
    (4 heads x 65 x (16 + 16) = 8,320 MACs) and the layer says so; given with --value 20, 4 x 20 x 32 =
    2,560 and no note."""
    from dnnperf.ir import ShapeOverrides

    node = helper.make_node("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "seq", "tot"], ["y", "prk", "prv"],
                            domain=MS, num_heads=4, kv_num_heads=2)
    feeds = {"q": _f(1, 1, 64), "k": _f(1, 1, 32), "v": _f(1, 1, 32), "pk": _f(1, 2, 64, 16), "pv": _f(1, 2, 64, 16),
             "seq": np.array([19], np.int32), "tot": np.array(20, np.int32)}
    path = _write(tmp_path, "gqa_tot", node, feeds, {}, ["y", "prk", "prv"])
    w = inspect_model(path).rows[0].workload
    assert w.macs == 8320 and "total_sequence_length 'tot' not known" in w.note
    w = inspect_model(path, ShapeOverrides(values=(("tot", (20.0,)),))).rows[0].workload
    assert w.macs == 2560 and not w.note


def test_a_contrib_op_hints_at_value_inputs_only_where_its_shape_reads_them(tmp_path):
    """An unscored MultiHeadAttention (num_heads 0 is malformed) whose key and value are small model inputs
    used to end in "it follows from the value of model inputs 'k', 'v': give them with --value" (its shape
    reads no values: the hint could not help); a RelativePositionBias whose lengths are model inputs still
    names them."""
    from onnx import TensorProto

    def reasons(name, node, inputs):
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_empty_tensor_value_info("y")])
        path = os.path.join(str(tmp_path), name)
        with open(path, "wb") as fh:
            fh.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
                     .SerializeToString())
        return [u["reason"] for u in inspect_model(path).unsupported]

    mha = reasons("mha0.onnx", helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain=MS, num_heads=0),
                  [(n, TensorProto.FLOAT, [1, 2, 4]) for n in "qkv"])
    assert mha and not any("--value" in r for r in mha)
    rpb = reasons("rpb.onnx", helper.make_node("RelativePositionBias", ["tb", "ql", "kl"], ["y"], domain=MS),
                  [("tb", TensorProto.FLOAT, [32, 4]), ("ql", TensorProto.INT64, []), ("kl", TensorProto.INT64, [])])
    assert rpb and "--value kl=V,... --value ql=V,..." in rpb[0]
