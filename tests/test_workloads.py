"""MAC / op / byte counts against hand calculation and the article's worked examples."""

import numpy as np
from onnx import TensorProto as T
from onnx import helper

from dnnperf.api import inspect_model
from helpers import conv_model, ints, model, numpy_scalar, save, vi, weight


def one(tmp_path, m, path=None, **kw):
    from dnnperf.ir import ShapeOverrides

    insp = inspect_model(path or save(m, tmp_path), ShapeOverrides(**kw))
    return insp


def layer(insp, op):
    rows = [r for r in insp.rows if r.node.op_type == op]
    assert rows, f"no {op} row"
    return rows[0]


def test_article_3x3_conv_is_225M_macs(tmp_path):
    # 3*3*100*100*50*50 = 225,000,000 MACs = 450,000,000 ops (the article's first example)
    insp = one(tmp_path, conv_model(100, 100, 50, 50, 3, pads=[1, 1, 1, 1]))
    w = layer(insp, "Conv").workload
    assert w.macs == 225_000_000
    assert 2 * w.macs == 450_000_000
    assert layer(insp, "Conv").output_shape == (1, 100, 50, 50)
    # bytes: input 50*50*100*4, weights 3*3*100*100*4, output 50*50*100*4
    assert w.act_bytes_read == 1_000_000
    assert w.weight_bytes == 360_000
    assert w.bytes_written == 1_000_000


def test_article_1x1_conv_is_2450_macs(tmp_path):
    # 1*1*10*5*7*7 = 2,450 MACs (the article's work-starvation example)
    insp = one(tmp_path, conv_model(10, 5, 7, 7, 1))
    assert layer(insp, "Conv").workload.macs == 2450
    assert layer(insp, "Conv").workload.parallel_work == 5 * 7 * 7


def test_fp16_halves_bytes(tmp_path):
    insp = one(tmp_path, conv_model(100, 100, 50, 50, 3, pads=[1, 1, 1, 1], dtype=T.FLOAT16))
    w = layer(insp, "Conv").workload
    assert (w.act_bytes_read, w.weight_bytes, w.bytes_written) == (500_000, 180_000, 500_000)
    assert w.dtype == "float16"


def test_depthwise_stride_dilation_autopad(tmp_path):
    # depthwise 3x3 on 32x112x112, pad 1: 32 * 112*112 * 9 MACs
    insp = one(tmp_path, conv_model(32, 32, 112, 112, 3, pads=[1, 1, 1, 1], group=32))
    w = layer(insp, "Conv").workload
    assert w.macs == 32 * 112 * 112 * 9
    assert w.family == "depthwise_conv"
    # dilation 2, no pad: 10 -> 10 - 2*2 = 6
    insp = one(tmp_path, conv_model(1, 1, 10, 10, 3, dilations=[2, 2]))
    assert layer(insp, "Conv").output_shape == (1, 1, 6, 6)
    assert layer(insp, "Conv").workload.macs == 36 * 9
    # SAME_UPPER stride 2 on 7 -> ceil(7/2) = 4
    insp = one(tmp_path, conv_model(4, 8, 7, 7, 3, strides=[2, 2], auto_pad="SAME_UPPER"))
    assert layer(insp, "Conv").output_shape == (1, 8, 4, 4)
    assert layer(insp, "Conv").workload.macs == 8 * 16 * 4 * 9


def test_grouped_conv(tmp_path):
    # 64 -> 128 channels in 4 groups, 3x3 on 8x8 with pad 1: 128 * 64 * (64/4) * 9
    insp = one(tmp_path, conv_model(64, 128, 8, 8, 3, pads=[1, 1, 1, 1], group=4))
    w = layer(insp, "Conv").workload
    assert w.macs == 128 * 64 * 16 * 9
    assert w.family == "grouped_conv"
    assert (w.gemm.m, w.gemm.n, w.gemm.k, w.gemm.count) == (64, 32, 16 * 9, 4)


def test_conv_transpose(tmp_path):
    # input 4x5x5, weight (4, 2, 3, 3), stride 2: every input pixel x every weight tap
    m = model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])],
              [vi("x", [1, 4, 5, 5])], [vi("y", None)], [weight("w", [4, 2, 3, 3])])
    insp = one(tmp_path, m)
    assert layer(insp, "ConvTranspose").output_shape == (1, 2, 11, 11)
    assert layer(insp, "ConvTranspose").workload.macs == 4 * 25 * 2 * 9


def test_gemm_with_transposes(tmp_path):
    # A is (K=3, M=4) transposed, B is (N=5, K=3) transposed -> 4 x 5 x 3 = 60 MACs, + 20 bias adds
    m = model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1)],
              [vi("a", [3, 4]), vi("b", [5, 3])], [vi("y", None)], [weight("c", [5])])
    w = layer(one(tmp_path, m), "Gemm").workload
    assert w.macs == 60
    assert w.other_ops == 20


def test_batched_broadcast_matmul(tmp_path):
    # (2,1,4,3) @ (5,3,6) -> (2,5,4,6): 2*5*4*6*3 MACs
    m = model([helper.make_node("MatMul", ["a", "b"], ["y"])], [vi("a", [2, 1, 4, 3]), vi("b", [5, 3, 6])],
              [vi("y", None)])
    r = layer(one(tmp_path, m), "MatMul")
    assert r.output_shape == (2, 5, 4, 6)
    assert r.workload.macs == 720


def test_einsum(tmp_path):
    m = model([helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")],
              [vi("a", [2, 3, 4]), vi("b", [2, 4, 5])], [vi("y", None)])
    assert layer(one(tmp_path, m), "Einsum").workload.macs == 2 * 3 * 5 * 4


def test_attention_opset23(tmp_path):
    # Q (1,2,4,8), K/V (1,2,6,8): QK^T 1*2*4*6*8 + PV 1*2*4*6*8 = 768 MACs
    m = model([helper.make_node("Attention", ["q", "k", "v"], ["y"])],
              [vi("q", [1, 2, 4, 8]), vi("k", [1, 2, 6, 8]), vi("v", [1, 2, 6, 8])], [vi("y", None)], opset=23)
    w = layer(one(tmp_path, m), "Attention").workload
    assert w.macs == 768
    assert w.other_ops == 1 * 2 * 4 * 6 * 6  # softmax (5) + scale (1) per score


def test_lstm(tmp_path):
    # S=5, B=2, I=3, H=4: 5*2*(4*4)*(3+4) = 1120 MACs
    m = model([helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=4)],
              [vi("x", [5, 2, 3])], [vi("y", None)], [weight("w", [1, 16, 3]), weight("r", [1, 16, 4])])
    w = layer(one(tmp_path, m), "LSTM").workload
    assert w.macs == 1120
    assert w.launches == 5  # one step after another


def test_broadcast_add_and_softmax(tmp_path):
    m = model([helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Softmax", ["s"], ["y"], axis=-1)],
              [vi("a", [2, 3, 4]), vi("b", [4])], [vi("y", None)])
    insp = one(tmp_path, m)
    add = layer(insp, "Add").workload
    assert add.macs == 0 and add.other_ops == 24
    assert add.act_bytes_read == 24 * 4 + 4 * 4 and add.bytes_written == 96
    assert layer(insp, "Softmax").workload.other_ops == 5 * 24


def test_views_and_shape_chain_cost_nothing_but_resolve(tmp_path):
    # Shape -> Gather -> Concat -> Reshape (a channel-shuffle style chain), then a MatMul
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax"], ["bu"]),
        helper.make_node("Concat", ["bu", "rest"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("MatMul", ["r", "w"], ["y"]),
    ]
    m = model(nodes, [vi("x", ["N", 4, 6])], [vi("y", None)],
              [ints("i0", 0), ints("ax", [0]), ints("rest", [24]), weight("w", [24, 10])])
    insp = one(tmp_path, m, batch=3)
    assert layer(insp, "Reshape").output_shape == (3, 24)
    assert layer(insp, "MatMul").workload.macs == 3 * 24 * 10
    assert layer(insp, "Reshape").workload.launches == 0
    assert layer(insp, "Reshape").workload.bytes_total == 0
    assert not insp.unsupported


def test_custom_op_is_listed_never_zero(tmp_path):
    m = model([helper.make_node("MyFancyOp", ["x"], ["y"], domain="my.company")], [vi("x", [1, 8])],
              [vi("y", None)], extra_opsets=[("my.company", 1)])
    insp = one(tmp_path, m)
    assert len(insp.unsupported) == 1
    assert insp.unsupported[0]["op_type"] == "my.company:MyFancyOp"
    assert insp.rows[0].workload is None


def test_a_custom_op_s_declared_output_shape_lets_the_layers_after_it_be_costed(tmp_path):
    """A custom op (no rule in ONNX or here) stays unscored, but the shape the file's value_info
    declares for its output lets the Relu and the pooling after it be costed (by hand: the Relu reads
    and writes 1 x 64 x 56 x 56 fp32, 802,816 B each way), with a note that says where the shape came
    from. A symbolic batch in that declaration follows --batch; after --input-shape changes a size the
    file fixed, the declaration is stale and is not used (the layers after stay unscored)."""
    from dnnperf.ir import ShapeOverrides

    def build(batch):
        g = model([helper.make_node("MyFancyAct", ["x"], ["a"], domain="my.company"),
                   helper.make_node("Relu", ["a"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["y"])],
                  [vi("x", [batch, 64, 56, 56])], [vi("y", None)], extra_opsets=[("my.company", 1)])
        g.graph.value_info.append(vi("a", [batch, 64, 56, 56]))
        return g

    insp = one(tmp_path, build(1))
    assert [u["op_type"] for u in insp.unsupported] == ["my.company:MyFancyAct"]
    relu = layer(insp, "Relu")
    assert relu.output_shape == (1, 64, 56, 56)
    assert relu.workload.act_bytes_read == relu.workload.bytes_written == 64 * 56 * 56 * 4
    assert layer(insp, "GlobalAveragePool").workload is not None
    assert any("value_info declares" in n and "my.company:MyFancyAct" in n for n in insp.graph.notes)
    # a symbolic batch: the declared shape takes the user's size
    insp = one(tmp_path, build("N"), batch=8)
    assert layer(insp, "Relu").output_shape == (8, 64, 56, 56)
    # a fixed size overridden: the declaration no longer describes the model
    insp = one(tmp_path, build(1), input_shapes=(("x", (1, 64, 28, 28)),))
    assert layer(insp, "Relu").workload is None
    assert not any("value_info declares" in n for n in insp.graph.notes)


def test_com_microsoft_fused_ops(tmp_path):
    nodes = [
        helper.make_node("FusedConv", ["x", "w"], ["c"], domain="com.microsoft", activation="Relu"),
        helper.make_node("SkipLayerNormalization", ["t", "t2", "g"], ["n"], domain="com.microsoft"),
        helper.make_node("Attention", ["t", "aw", "ab"], ["a"], domain="com.microsoft", num_heads=2),
        helper.make_node("FastGelu", ["a"], ["y"], domain="com.microsoft"),
    ]
    m = model(nodes, [vi("x", [1, 3, 8, 8]), vi("t", [1, 4, 8]), vi("t2", [1, 4, 8])],
              [vi("c", None), vi("n", None), vi("y", None)],
              [weight("w", [16, 3, 3, 3]), weight("g", [8]), weight("aw", [8, 24]), weight("ab", [24])],
              extra_opsets=[("com.microsoft", 1)])
    insp = one(tmp_path, m)
    assert not insp.unsupported, insp.unsupported
    # FusedConv 3x3 no pad on 8x8 -> 6x6: 16 * 36 * 27 MACs
    assert layer(insp, "FusedConv").workload.macs == 16 * 36 * 27
    # Attention: projection 1*4*8*24 + scores 2 heads * 4 * 4 * (4 + 4)
    assert layer(insp, "Attention").workload.macs == 1 * 4 * 8 * 24 + 2 * 4 * 4 * 8
    assert layer(insp, "FastGelu").output_shape == (1, 4, 8)


def test_quantized_ops(tmp_path):
    nodes = [
        helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["c"]),
        helper.make_node("MatMulInteger", ["a", "b"], ["m"]),
    ]
    m = model(nodes, [vi("x", [1, 4, 5, 5], T.UINT8), vi("a", [3, 4], T.UINT8)],
              [vi("c", None, T.UINT8), vi("m", None, T.INT32)],
              [weight("xs", []), weight("xz", [], T.UINT8), weight("w", [8, 4, 3, 3], T.INT8), weight("ws", []),
               weight("wz", [], T.INT8), weight("ys", []), weight("yz", [], T.UINT8), weight("b", [4, 2], T.UINT8)])
    insp = one(tmp_path, m)
    assert layer(insp, "QLinearConv").workload.macs == 8 * 9 * 4 * 9
    assert layer(insp, "QLinearConv").workload.weight_bytes >= 8 * 4 * 9  # int8 weights: 1 byte each
    assert layer(insp, "MatMulInteger").workload.macs == 3 * 2 * 4


def _body_graph():
    # body(i, cond, x) -> (cond, x @ w)
    n = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("MatMul", ["x_in", "w"], ["x_out"])]
    return helper.make_graph(n, "body", [vi("i", [], T.INT64), vi("cond_in", [], T.BOOL), vi("x_in", [2, 4])],
                             [vi("cond_out", [], T.BOOL), vi("x_out", [2, 4])])


def test_loop_constant_trip_count_and_unknown(tmp_path):
    loop = helper.make_node("Loop", ["M", "c", "x"], ["y"], body=_body_graph())
    m = model([loop], [vi("x", [2, 4])], [vi("y", None)],
              [ints("M", 3), onnx_bool("c"), weight("w", [4, 4])])
    insp = one(tmp_path, m)
    assert layer(insp, "Loop").workload.macs == 3 * 2 * 4 * 4
    # the body's weight comes from the enclosing graph: 4x4 fp32 = 64 bytes read per iteration
    assert layer(insp, "Loop").workload.weight_bytes == 3 * 64
    m2 = model([helper.make_node("Loop", ["M", "c", "x"], ["y"], body=_body_graph())],
               [vi("x", [2, 4]), vi("M", [], T.INT64)], [vi("y", None)], [onnx_bool("c"), weight("w", [4, 4])])
    insp2 = one(tmp_path, m2)
    assert any("unknown trip count" in u["reason"] for u in insp2.unsupported)


def test_unknown_trip_count_names_the_input_to_give(tmp_path):
    # the trip count is a model input: the note says how to give it; one iteration is a lower bound
    m = model([helper.make_node("Loop", ["M", "c", "x"], ["y"], body=_body_graph())],
              [vi("x", [2, 4]), vi("M", [], T.INT64)], [vi("y", None)], [onnx_bool("c"), weight("w", [4, 4])])
    insp = one(tmp_path, m)
    assert layer(insp, "Loop").workload.macs == 2 * 4 * 4
    note = layer(insp, "Loop").workload.note
    assert "a lower bound" in note and "--value M=N" in note


def test_nested_loop_with_unknown_trip_count_is_flagged(tmp_path):
    # an inner Loop whose trip count is the outer iteration number (known only at run time) inside an
    # outer Loop of 3: costed as one inner iteration per outer one (3 x 2x4x4 MACs), and the outer node
    # carries the inner assumption (it used to be dropped: a bound reported as an exact figure)
    inner = _body_graph()
    outer = helper.make_graph(
        [helper.make_node("Loop", ["k", "go_in", "h_in"], ["h_out"], body=inner),
         helper.make_node("Identity", ["go_in"], ["go_out"])], "outer",
        [vi("k", [], T.INT64), vi("go_in", [], T.BOOL), vi("h_in", [2, 4])],
        [vi("go_out", [], T.BOOL), vi("h_out", [2, 4])])
    m = model([helper.make_node("Loop", ["M", "c", "x"], ["y"], body=outer)], [vi("x", [2, 4])], [vi("y", None)],
              [ints("M", 3), onnx_bool("c"), weight("w", [4, 4])])
    insp = one(tmp_path, m)
    assert layer(insp, "Loop").workload.macs == 3 * 2 * 4 * 4
    bound = [u for u in insp.unsupported if u["kind"] == "bound"]
    assert len(bound) == 1 and "unknown trip count" in bound[0]["reason"]
    assert "--value" not in bound[0]["reason"]  # 'k' is the body's input, not the model's
    assert any("unknown trip count" in w for w in insp.warnings)


def test_if_costs_the_dearer_branch(tmp_path):
    cheap = helper.make_graph([helper.make_node("Relu", ["x"], ["o1"])], "then", [], [vi("o1", [2, 4])])
    dear = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["o2"])], "else", [], [vi("o2", [2, 4])])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=cheap, else_branch=dear)],
              [vi("x", [2, 4]), vi("c", [], T.BOOL)], [vi("y", None)], [weight("w", [4, 4])])
    insp = one(tmp_path, m)
    assert layer(insp, "If").workload.macs == 2 * 4 * 4
    assert "--value c=1 or --value c=0" in layer(insp, "If").workload.note  # the condition is a model input
    # given, the branch it picks stands in its place: then (a Relu, no MACs) or else (the 2x4x4 MatMul)
    then = one(tmp_path, m, values=(("c", (1.0,)),))
    assert [r.node.op_type for r in then.rows] == ["Relu"] and then.rows[0].node.outputs == ("y",)
    other = one(tmp_path, m, values=(("c", (0.0,)),))
    assert [r.node.op_type for r in other.rows] == ["MatMul"] and layer(other, "MatMul").workload.macs == 2 * 4 * 4


def test_if_on_a_bool_initializer_costs_the_branch_it_takes(tmp_path):
    # the condition is stored as a one-element bool initializer (a folded export): its value is kept
    # with the skeleton's shape data, so the then-branch (a Relu) is costed, not the dearer MatMul
    cheap = helper.make_graph([helper.make_node("Relu", ["x"], ["o1"])], "then", [], [vi("o1", [2, 4])])
    dear = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["o2"])], "else", [], [vi("o2", [2, 4])])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=cheap, else_branch=dear)],
              [vi("x", [2, 4])], [vi("y", None)], [onnx_bool("c"), weight("w", [4, 4])])
    insp = one(tmp_path, m)
    assert [r.node.op_type for r in insp.rows] == ["Relu"]  # the branch it takes, in its place
    assert not any(u["kind"] == "bound" for u in insp.unsupported)


def test_an_if_inside_a_taken_branch_costs_the_branch_it_takes(tmp_path):
    """silero-vad's exported LSTM: an If on the state's shape whose taken branch holds Ifs whose
    conditions the branch itself computes from shapes (Not(Size(Shape(h)) == 0)). The outer If was
    resolved and costed, but the inner conditions' values were left behind with the loader, so each
    inner If costed its dearer branch, whose shapes nobody resolves: the whole If unscored. Here the
    inner If takes its then-branch, a 2x4x4 MatMul; its else-branch's Unsqueeze reads an axis only a
    run-time value gives."""
    inner_then = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["i1"])], "ithen", [], [vi("i1", None)])
    inner_else = helper.make_graph([helper.make_node("Unsqueeze", ["x", "ax"], ["i2"])], "ielse", [], [vi("i2", None)])
    branch = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Size", ["s"], ["n"]),
         helper.make_node("Equal", ["n", "zero"], ["e"]), helper.make_node("Not", ["e"], ["ne"]),
         helper.make_node("If", ["ne"], ["b"], name="inner", then_branch=inner_then, else_branch=inner_else)],
        "then", [], [vi("b", None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "else", [], [vi("o", None)])
    m = model([helper.make_node("Shape", ["x"], ["xs"]), helper.make_node("Size", ["xs"], ["rank"]),
               helper.make_node("Equal", ["rank", "two"], ["c"]),
               helper.make_node("If", ["c"], ["y"], name="outer", then_branch=branch, else_branch=other)],
              [vi("x", [2, 4]), vi("ax", [1], T.INT64)], [vi("y", None)],
              [weight("w", [4, 4]), ints("zero", 0), ints("two", 2)])
    insp = one(tmp_path, m)
    assert insp.coverage()["complete"], insp.unsupported
    # both Ifs are decided at load time: the inner one's taken branch stands in the outer's place
    assert [r.node.op_type for r in insp.rows if r.node.op_type in ("If", "MatMul", "Unsqueeze")] == ["MatMul"]
    assert layer(insp, "MatMul").workload.macs == 2 * 4 * 4 and layer(insp, "MatMul").node.outputs == ("y",)
    assert any(w.startswith("2 If node(s) whose condition is known at load time") for w in insp.warnings)


def test_model_local_function_is_inlined(tmp_path):
    f = helper.make_function("local", "Mm", ["a", "b"], ["c"], [helper.make_node("MatMul", ["a", "b"], ["c"])],
                             [helper.make_opsetid("", 17)])
    m = model([helper.make_node("Mm", ["x", "w"], ["y"], domain="local")], [vi("x", [3, 5])], [vi("y", None)],
              [weight("w", [5, 7])], extra_opsets=[("local", 1)], functions=[f])
    insp = one(tmp_path, m)
    assert not insp.unsupported
    assert sum(r.workload.macs for r in insp.costed()) == 3 * 5 * 7


def onnx_bool(name):
    import onnx

    return onnx.numpy_helper.from_array(np.array(True), name)


def test_macs_scale_linearly_with_batch(tmp_path):
    m = conv_model(8, 16, 10, 10, 3, pads=[1, 1, 1, 1], batch=1)
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    p = save(m, tmp_path)
    from dnnperf.ir import ShapeOverrides

    a = inspect_model(p, ShapeOverrides(batch=1)).totals()["macs"]
    b = inspect_model(p, ShapeOverrides(batch=7)).totals()["macs"]
    assert b == 7 * a == 7 * 16 * 100 * 8 * 9


def test_data_dependent_outputs_are_costed_at_a_marked_bound(tmp_path):
    # NonZero of a 3x4 tensor: at most 12 non-zero elements, indices [rank 2, 12] int64 = 192 bytes
    m = model([helper.make_node("NonZero", ["x"], ["y"])], [vi("x", [3, 4])], [vi("y", None)])
    insp = inspect_model(save(m, tmp_path))
    row = insp.rows[0]
    assert row.workload is not None and row.workload.bytes_written == 2 * 12 * 8
    assert [u["kind"] for u in insp.unsupported] == ["bound"] and "upper bound" in insp.unsupported[0]["reason"]
    assert insp.coverage()["complete"]


def test_slice_reads_only_the_region_it_keeps(tmp_path):
    """A rotary cos table [8192, 32] fp32 (1,048,576 bytes, weightless) sliced at a position given at
    run time (--value pos=8) to one row [1, 32] reads that row's 128 bytes plus its int64 axes (8
    bytes), not the table; a channel split of an activation [1, 64, 8, 8] into its first half reads
    32 x 8 x 8 x 4 = 8,192 bytes of the 16,384 (plus three int64 index tensors)."""
    m = model([helper.make_node("Add", ["pos", "one"], ["e"]),
               helper.make_node("Slice", ["cos", "pos", "e", "a"], ["row"], name="rot"),
               helper.make_node("Slice", ["x", "z", "h", "c"], ["half"], name="split")],
              [vi("x", [1, 64, 8, 8]), vi("pos", [1], T.INT64)], [vi("row", None), vi("half", None)],
              [weight("cos", [8192, 32]), ints("one", [1]), ints("a", [0]), ints("z", [0]), ints("h", [32]),
               ints("c", [1])])
    m.graph.initializer[0].ClearField("raw_data")  # a weightless skeleton's table, as exported models ship
    m.graph.initializer[0].data_location = T.EXTERNAL
    m.graph.initializer[0].external_data.add(key="location", value="absent.bin")
    insp = one(tmp_path, m, values=(("pos", (8,)),))
    rot = next(r for r in insp.rows if r.node.name == "rot")
    assert rot.output_shape == (1, 32) and rot.workload.family == "movement"
    assert rot.workload.weight_bytes == 128 + 8 and rot.workload.bytes_written == 128
    half = next(r for r in insp.rows if r.node.name == "split")
    assert half.output_shape == (1, 32, 8, 8)
    assert half.workload.bytes_written == 8_192
    assert half.workload.act_bytes_read + half.workload.weight_bytes == 8_192 + 3 * 8


def test_gather_elements_and_gather_nd_read_only_what_they_pick(tmp_path):
    """GatherElements of 4 x 2 indices from a [1000, 50] fp32 activation (200,000 bytes) reads the 8 picked
    floats (32 bytes) plus its int64 indices (64 bytes); GatherND of 3 rows (indices [3, 1]) reads 3 x 50
    x 4 = 600 bytes plus 24 bytes of indices."""
    m = model([helper.make_node("GatherElements", ["x", "i"], ["y"], name="ge", axis=0),
               helper.make_node("GatherND", ["x", "r"], ["z"], name="gnd")],
              [vi("x", [1000, 50])], [vi("y", None), vi("z", None)],
              [ints("i", [[0, 1], [2, 3], [4, 5], [6, 7]]), ints("r", [[0], [5], [9]])])
    insp = one(tmp_path, m)
    ge = next(r for r in insp.rows if r.node.name == "ge")
    assert ge.output_shape == (4, 2)
    assert ge.workload.act_bytes_read == 32 and ge.workload.weight_bytes == 64 and ge.workload.bytes_written == 32
    gnd = next(r for r in insp.rows if r.node.name == "gnd")
    assert gnd.output_shape == (3, 50)
    assert gnd.workload.act_bytes_read == 600 and gnd.workload.weight_bytes == 24 and gnd.workload.bytes_written == 600


def test_onnx_runtime_quantizer_and_optimizer_ops_by_hand(tmp_path):
    """QOperator ops (ONNX Runtime's quantizer) and EmbedLayerNormalization (its transformer optimizer):
    costed with every shape resolved. Dequantising is 2 ops per element, requantising 3."""
    ms = "com.microsoft"
    q = [numpy_scalar("s", 0.1), numpy_scalar("z", 0, np.uint8), weight("w", [16, 8, 3, 3], T.UINT8),
         weight("g", [10, 32], T.UINT8)]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
        helper.make_node("QLinearConv", ["xq", "s", "z", "w", "s", "z", "s", "z"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("QLinearSigmoid", ["c", "s", "z", "s", "z"], ["sg"], domain=ms),
        helper.make_node("QLinearAdd", ["c", "s", "z", "sg", "s", "z", "s", "z"], ["a"], domain=ms),
        helper.make_node("QLinearGlobalAveragePool", ["a", "s", "z", "s", "z"], ["p"], domain=ms),
        helper.make_node("QLinearConcat", ["s", "z", "p", "s", "z", "p", "s", "z"], ["cat"], domain=ms, axis=1),
        helper.make_node("Flatten", ["cat"], ["fl"]),
        helper.make_node("QGemm", ["fl", "s", "z", "g", "s", "z", "", "s", "z"], ["y8"], domain=ms, transB=1),
        helper.make_node("DequantizeLinear", ["y8", "s", "z"], ["y"]),
    ]
    insp = one(tmp_path, model(nodes, [vi("x", [1, 8, 14, 14])], [vi("y", None)], q, extra_opsets=[(ms, 1)]))
    assert not insp.unsupported
    px = 16 * 14 * 14  # the conv's output elements
    assert layer(insp, "QLinearSigmoid").workload.other_ops == (2 + 3 + 3) * px
    assert layer(insp, "QLinearAdd").workload.other_ops == (2 * 2 + 1 + 3) * px
    assert layer(insp, "QLinearGlobalAveragePool").output_shape == (1, 16, 1, 1)
    assert layer(insp, "QLinearGlobalAveragePool").workload.other_ops == px + 3 * 16
    assert layer(insp, "QLinearConcat").output_shape == (1, 32, 1, 1)
    fc = layer(insp, "QGemm")
    assert fc.output_shape == (1, 10) and fc.workload.macs == 32 * 10 and fc.workload.other_ops == 3 * 10
    # BERT's embeddings: 2 x 16 tokens, hidden 64; three rows gathered per token (not the 1000-row table)
    tables = [weight("we", [1000, 64]), weight("pe", [32, 64]), weight("se", [2, 64]), weight("gamma", [64]),
              weight("beta", [64]), weight("W", [64, 64])]
    nodes = [helper.make_node("EmbedLayerNormalization", ["ids", "seg", "we", "pe", "se", "gamma", "beta"], ["e", "mi"],
                              domain=ms),
             helper.make_node("MatMul", ["e", "W"], ["y"])]
    insp = one(tmp_path, model(nodes, [vi("ids", [2, 16], T.INT32), vi("seg", [2, 16], T.INT32)], [vi("y", None)],
                               tables, extra_opsets=[(ms, 1)]))
    assert not insp.unsupported
    emb = layer(insp, "EmbedLayerNormalization")
    elems = 2 * 16 * 64
    # two adds an element for the three rows, then a layer norm's 7 (dnnperf.ops.norm)
    assert emb.output_shape == (2, 16, 64) and emb.workload.other_ops == 2 * elems + 7 * elems
    assert emb.workload.weight_bytes == (elems + elems + 2 * 64) * 4 + 2 * 64 * 4  # rows picked, then gamma/beta
    assert layer(insp, "MatMul").workload.macs == 2 * 16 * 64 * 64


def test_weights_transformed_at_load_time_count_as_weights(tmp_path):
    """A weight cast, transposed or otherwise computed from weights alone when the model loads is
    read by its layer as a weight, not an activation (GPT-2's lm_head reads the token table through a
    Transpose: its 154 MB counted as activation bytes and the model's weights as 340 MB, not ~496)."""
    from helpers import SAMPLES

    k, n = 64, 32
    direct = one(tmp_path, model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [1, k])], [vi("y", None)],
                                 [weight("w", [k, n])]))
    cast = one(tmp_path, model([helper.make_node("Cast", ["w16"], ["w"], to=T.FLOAT),
                                helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [1, k])], [vi("y", None)],
                               [weight("w16", [k, n], T.FLOAT16)]))
    trans = one(tmp_path, model([helper.make_node("Transpose", ["wt"], ["w"], perm=[1, 0]),
                                 helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [1, k])], [vi("y", None)],
                                [weight("wt", [n, k])]))
    for insp in (direct, cast, trans):
        mm = layer(insp, "MatMul").workload
        assert (mm.weight_bytes, mm.act_bytes_read) == (k * n * 4, k * 4)
    gpt2 = one(tmp_path, None, path=f"{SAMPLES}/gpt2.onnx", dims=(("sequence_length", 128),))
    head = max(gpt2.costed(), key=lambda r: r.workload.weight_bytes)
    assert head.output_shape == (1, 128, 50257)
    assert (head.workload.weight_bytes, head.workload.act_bytes_read) == (50257 * 768 * 4, 128 * 768 * 4)


def test_dynamically_quantized_bert_ops_by_hand(tmp_path):
    """QAttention (ONNX Runtime's dynamic quantization of an optimized BERT) and GemmFastGelu: a 2 x 16
    x 64 input, 4 heads: the QKV projection 2*16*64*192 MACs plus QK^T and PV 2 * 2*4*16*16*16; the
    GELU product 2*16*64*256 MACs with a bias and FastGelu (8 ops) per output."""
    ms = "com.microsoft"
    inits = [weight("w", [64, 192], T.INT8), weight("b", [192]), numpy_scalar("is", 0.1), numpy_scalar("ws", 0.1),
             numpy_scalar("iz", 0, np.uint8), numpy_scalar("wz", 0, np.int8), weight("W2", [64, 256]), weight("b2", [256])]
    nodes = [helper.make_node("QAttention", ["x", "w", "b", "is", "ws", "", "iz", "wz"], ["a"], domain=ms, num_heads=4),
             helper.make_node("GemmFastGelu", ["a", "W2", "b2"], ["y"], domain=ms)]
    insp = one(tmp_path, model(nodes, [vi("x", [2, 16, 64], T.UINT8)], [vi("y", None)], inits, extra_opsets=[(ms, 1)]))
    assert not insp.unsupported
    qa, g = layer(insp, "QAttention"), layer(insp, "GemmFastGelu")
    assert qa.output_shape == (2, 16, 64) and qa.workload.macs == 2 * 16 * 64 * 192 + 2 * (2 * 4 * 16 * 16 * 16)
    assert g.output_shape == (2, 16, 256) and g.workload.macs == 2 * 16 * 64 * 256
    assert g.workload.other_ops == (8 + 1) * 2 * 16 * 256


def test_quantized_average_pool_by_hand(tmp_path):
    """QLinearAveragePool 3x3 stride 2 pad 1 over 1 x 16 x 14 x 14: a 7 x 7 output, 9 adds per output, the
    input dequantized (2 ops per element) and each mean requantized (3)."""
    ms = "com.microsoft"
    q = [numpy_scalar("s", 0.1), numpy_scalar("z", 0, np.uint8)]
    node = helper.make_node("QLinearAveragePool", ["x", "s", "z", "s", "z"], ["y"], domain=ms, kernel_shape=[3, 3],
                            strides=[2, 2], pads=[1, 1, 1, 1])
    insp = one(tmp_path, model([node], [vi("x", [1, 16, 14, 14], T.UINT8)], [vi("y", None)], q, extra_opsets=[(ms, 1)]))
    p = layer(insp, "QLinearAveragePool")
    assert p.output_shape == (1, 16, 7, 7)
    assert p.workload.other_ops == 16 * 49 * 9 + 2 * 16 * 14 * 14 + 3 * 16 * 49


def test_topk_spreads_over_its_input_like_a_reduction(tmp_path):
    """TopK of 10 over [4, 50,000] scores: 200,000 x log2(10) comparisons, worked on by every input
    element (running top-k per thread, then a merge), as ArgMax's reduction is. Its parallel work was
    its 40 outputs: 0.015% of an H100's lanes, 34.8 us for 0.8 MB; now 200,000 items."""
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1)], [vi("x", [4, 50000])],
              [vi("v", None), vi("i", None, T.INT64)], [numpy_scalar("k", [10], np.int64)])
    w = inspect_model(save(m, tmp_path)).rows[0].workload
    assert w.other_ops == int(200_000 * np.log2(10))
    assert w.parallel_work == 200_000


def test_resize_scales_stored_as_an_initializer_decide_its_shape(tmp_path):
    """A folded or simplified export keeps Resize's scales [1, 1, 16, 16] as a float initializer, not a
    Constant node: its payload was dropped with the weights' and the output shape stayed open (the
    layer unscored); a skeleton made by `strip` lost it too. 21 x 16 x 16 upsampled 16x: 21 x 256 x 256
    outputs, bilinear 8 ops each (2 x 2^2 corners)."""
    from dnnperf.load import skeleton_of

    m = model([helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear")], [vi("x", [1, 21, 16, 16])],
              [vi("y", None)], [numpy_scalar("sc", [1.0, 1.0, 16.0, 16.0])])
    p = save(m, tmp_path)
    row = inspect_model(p).rows[0]
    assert row.output_shape == (1, 21, 256, 256)
    assert row.workload.other_ops == 8 * 21 * 256 * 256 and row.workload.kernel == "Resize.linear"
    sk = str(tmp_path / "sk.onnx")
    with open(sk, "wb") as fh:
        fh.write(skeleton_of(p)[0])
    assert inspect_model(sk).rows[0].output_shape == (1, 21, 256, 256)


def test_resize_scales_in_a_typed_field_decide_its_shape(tmp_path):
    """The same scales written the way helper.make_tensor and older exporters write them, in
    float_data, not raw_data: the loader kept only raw bytes, so the value was dropped with the
    weights' and the Resize (an opset-9 Upsample alike) was left unscored, its shape unknown."""
    sc = helper.make_tensor("sc", T.FLOAT, [4], [1.0, 1.0, 16.0, 16.0])
    assert not sc.raw_data and len(sc.float_data) == 4
    for node, opset in ((helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear"), 17),
                        (helper.make_node("Upsample", ["x", "sc"], ["y"], mode="linear"), 9)):
        m = model([node], [vi("x", [1, 21, 16, 16])], [vi("y", None)], [sc], opset=opset)
        row = inspect_model(save(m, tmp_path, f"{node.op_type}.onnx")).rows[0]
        assert row.output_shape == (1, 21, 256, 256), node.op_type
        assert row.workload.other_ops == 8 * 21 * 256 * 256


def test_a_training_mode_batch_norm_has_per_channel_statistics(tmp_path):
    """A training-mode export (opset 13, TrainingMode.TRAINING) gives BatchNormalization five outputs:
    Y, the running mean and variance and the saved mean and variance, each of the latter [C]; ONNX's
    inference leaves them open and the layer was left unscored."""
    nodes = [helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["y", "rm", "rv", "sm", "sv"])]
    m = model(nodes, [vi("x", [2, 16, 8, 8])], [vi("y", None)],
              [weight(n, [16]) for n in ("g", "b", "m", "v")], opset=13)
    insp = one(tmp_path, m)
    assert insp.coverage()["complete"], insp.warnings
    assert [insp.graph.tensors[t].shape for t in ("y", "rm", "rv", "sm", "sv")] == [(2, 16, 8, 8)] + [(16,)] * 4


def test_a_transpose_that_moves_only_unit_axes_is_a_view(tmp_path):
    """A decoder at one token transposes [1, 1, 32, 128] to [1, 32, 1, 128]: every element stays where it
    was (PyTorch's transpose is a view; ONNX Runtime's transpose optimizer makes it a Reshape). It was
    costed as a copy kernel: 128 of them per Llama-3-8B decode step, 5 us each in eager mode. Four
    tokens make it a real permutation again."""
    for seq, family in ((1, "view"), (4, "movement")):
        node = helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 2, 1, 3])
        insp = inspect_model(save(model([node], [vi("x", [1, seq, 32, 128])], [vi("y", None)]), tmp_path, f"t{seq}.onnx"))
        w = insp.rows[0].workload
        assert w.family == family, (seq, w)
        assert w.launches == (0 if seq == 1 else 1)


def test_attentions_k_transpose_is_read_by_the_product(tmp_path):
    """Q x K^T with K^T an explicit Transpose of the last two axes: the GEMM takes a transposed operand
    (ONNX Runtime fuses the pair into a FusedMatMul, PyTorch's matmul reads the transposed view), so the
    layers a runtime runs have no kernel for the Transpose. A Transpose another op also reads, or one
    that moves other axes (attention's V, [0, 2, 1, 3]: ONNX Runtime keeps it), is still a copy."""
    from dnnperf.api import build_layers

    def run(perm, extra_reader):
        nodes = [helper.make_node("Transpose", ["k"], ["kt"], name="t", perm=perm),
                 helper.make_node("MatMul", ["q", "kt"], ["s"], name="mm")]
        outs = [vi("s", None)]
        if extra_reader:
            nodes.append(helper.make_node("Relu", ["kt"], ["r"], name="relu"))
            outs.append(vi("r", None))
        q = [1, 12, 128, 64] if perm[-1] == 2 else [1, 128, 5, 12]  # kt: [1, 12, 64, 128] or [1, 128, 12, 64]
        m = model(nodes, [vi("q", q), vi("k", [1, 12, 128, 64])], outs)
        layers = build_layers(inspect_model(save(m, tmp_path, f"a{perm}{extra_reader}.onnx")))
        return next(l for l in layers if l.op_type == "Transpose").workload

    assert run([0, 1, 3, 2], False).launches == 0
    assert run([0, 1, 3, 2], True).launches == 1
    assert run([0, 2, 1, 3], False).launches == 1


def test_a_training_mode_dropout_is_a_kernel_not_a_view(tmp_path):
    """torch.onnx.export(..., training=TrainingMode.TRAINING) keeps Dropout with training_mode = true: it
    draws a mask and scales the kept elements, reading 1,024 floats and writing 1,024 floats and the
    1,024-byte mask, 3 ops an element. It was costed as a view (no kernel, no bytes). Without the
    training flag it still passes its input through."""
    from onnx import TensorProto as T

    for training in (True, False):
        ins = ["x", "ratio", "train"] if training else ["x"]
        node = helper.make_node("Dropout", ins, ["y", "mask"], name="drop")
        inits = [numpy_scalar("ratio", 0.1), numpy_scalar("train", True, np.bool_)] if training else []
        m = model([node], [vi("x", [1, 1024])], [vi("y", None), vi("mask", None, T.BOOL)], inits)
        w = inspect_model(save(m, tmp_path, f"d{training}.onnx")).rows[0].workload
        if training:
            assert (w.family, w.other_ops, w.act_bytes_read, w.bytes_written) == ("elementwise", 3072, 4096, 4096 + 1024)
        else:
            assert w.family == "view" and w.launches == 0


def test_a_dropout_whose_training_flag_comes_at_run_time_is_an_upper_bound(tmp_path):
    """ONNX's own test_training_dropout models take training_mode as a graph input: unknown at load time,
    it was read as inference (a view). It is costed as training and listed as a stated upper bound whose
    note names the --value that settles it (0: inference, a view again)."""
    from onnx import TensorProto as T

    from dnnperf.ir import ShapeOverrides

    node = helper.make_node("Dropout", ["x", "ratio", "train"], ["y"], name="drop")
    m = model([node], [vi("x", [1, 1024]), vi("train", [], T.BOOL)], [vi("y", None)], [numpy_scalar("ratio", 0.1)])
    path = save(m, tmp_path)
    insp = inspect_model(path)
    w = insp.rows[0].workload
    assert (w.family, w.other_ops) == ("elementwise", 3072)
    [bound] = [u for u in insp.unsupported if u["node"] == "drop"]
    assert bound["kind"] == "bound" and "--value train=0 for inference" in bound["reason"]
    off = inspect_model(path, ShapeOverrides(values=(("train", (0.0,)),))).rows[0].workload
    assert off.family == "view" and off.launches == 0


def test_onnx_runtimes_quantized_lstm_costs_as_its_float_lstm(tmp_path):
    """DynamicQuantizeLSTM (ONNX Runtime's quantizer turns an LSTM into it: ddddocr's captcha model)
    had no cost: the LSTM and the 9 nodes after it unscored. By hand, 25 steps, batch 1, 64 features,
    hidden 32, both directions: 2 x 25 x 1 x 128 x (64 + 32) = 614,400 MACs, as the float LSTM of the
    same sizes; its weights are int8 and stored [dirs, I, 4H] / [dirs, H, 4H]: 2 x (64 + 32) x 128 bytes."""
    q = helper.make_node("DynamicQuantizeLSTM", ["x", "w", "r", "", "", "", "", "", "ws", "wz", "rs", "rz"],
                         ["y", "yh", "yc"], domain="com.microsoft", hidden_size=32, direction="bidirectional")
    inits = [weight("w", [2, 64, 128], T.INT8), weight("r", [2, 32, 128], T.INT8), weight("ws", [2]),
             weight("wz", [2], T.INT8), weight("rs", [2]), weight("rz", [2], T.INT8)]
    m = model([q], [vi("x", [25, 1, 64])], [vi("y", None), vi("yh", None), vi("yc", None)], inits,
              extra_opsets=[("com.microsoft", 1)])
    insp = one(tmp_path, m)
    assert insp.coverage()["complete"], insp.unsupported
    w = layer(insp, "DynamicQuantizeLSTM").workload
    assert w.macs == 2 * 25 * 1 * 128 * (64 + 32) and w.dtype == "int8" and w.operands == "u8s8"
    assert w.weight_bytes == 2 * (64 + 32) * 128 + 2 * 4 + 2 + 2 * 4 + 2
    t = insp.graph.tensors
    assert (t["y"].shape, t["yh"].shape, t["yc"].shape) == ((25, 2, 1, 32), (2, 1, 32), (2, 1, 32))
    f = helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=32, direction="bidirectional")
    flt = model([f], [vi("x", [25, 1, 64])], [vi("y", None)], [weight("w", [2, 128, 64]), weight("r", [2, 128, 32])])
    assert layer(one(tmp_path, flt, path=save(flt, tmp_path, "f.onnx")), "LSTM").workload.macs == w.macs


def test_a_taken_branch_that_passes_an_outer_value_through_stays_one_if(tmp_path):
    """A branch whose output is a value from outside it (no node of its own makes it) cannot stand in
    the If's place (there is nothing to rename): the If stays, costed as its taken branch (a Relu's 8
    ops here is the other branch, not taken)."""
    through = helper.make_graph([], "then", [], [vi("x", [2, 4])])
    relu = helper.make_graph([helper.make_node("Relu", ["x"], ["r"])], "else", [], [vi("r", [2, 4])])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=through, else_branch=relu)],
              [vi("x", [2, 4])], [vi("y", None)], [onnx_bool("c")])
    insp = one(tmp_path, m)
    assert [r.node.op_type for r in insp.rows] == ["If"] and insp.coverage()["complete"]
    assert layer(insp, "If").workload.other_ops == 0


def test_a_prelu_before_opset_7_takes_one_slope_per_channel(tmp_path):
    """PRelu-6 applies a slope of C values along axis 1 whatever the rank (ONNX's own backend tests,
    pytorch-converted/test_PReLU_1d_multiparam: x [2, 3, 4], slope [3]); dnnperf read it with today's
    numpy broadcasting and called the file self-contradictory (PARTIAL, 0 of 1 nodes). From opset 7
    the same shapes do contradict each other."""
    def prelu(opset):
        return model([helper.make_node("PRelu", ["x", "s"], ["y"])], [vi("x", [2, 3, 4])], [vi("y", None)],
                     [weight("s", [3])], opset=opset)

    old = one(tmp_path, prelu(6), path=save(prelu(6), tmp_path, "p6.onnx"))
    assert old.coverage()["complete"], old.unsupported
    assert layer(old, "PRelu").output_shape == (2, 3, 4)
    new = one(tmp_path, prelu(9), path=save(prelu(9), tmp_path, "p9.onnx"))
    assert [u["kind"] for u in new.unsupported] == ["contradiction"]


def test_the_retired_experimental_ops_pass_their_shapes_and_are_costed(tmp_path):
    """ONNX's experimental ops of opsets 1-9, since removed from the standard (ONNX's inference no
    longer knows them): the model zoo's tiny-yolov2 opens with an ImageScaler, which left every later
    layer without a shape (nothing scored). By hand: ImageScaler 2 ops per element on 3 x 416 x 416,
    the 3 x 3 convolution after it 16 x 416^2 x 27 MACs."""
    nodes = [helper.make_node("ImageScaler", ["x"], ["s"], scale=1 / 255, bias=[0.0, 0.0, 0.0]),
             helper.make_node("Conv", ["s", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    insp = one(tmp_path, model(nodes, [vi("x", [1, 3, 416, 416])], [vi("y", None)], [weight("w", [16, 3, 3, 3])],
                               opset=8))
    assert insp.coverage()["complete"], insp.warnings
    scaler, conv = insp.rows
    assert scaler.workload.other_ops == 2 * 3 * 416 * 416 and scaler.workload.macs == 0
    assert conv.output_shape == (1, 16, 416, 416) and conv.workload.macs == 16 * 416 * 416 * 27
    # the elementwise ones: ops per element of [1, 4, 5, 5] (100 elements)
    for op, per in (("Affine", 2), ("Scale", 1), ("ScaledTanh", 3), ("ParametricSoftplus", 5)):
        row = one(tmp_path, model([helper.make_node(op, ["x"], ["y"])], [vi("x", [1, 4, 5, 5])], [vi("y", None)],
                                  opset=8), path=None).rows[0]
        assert (row.output_shape, row.workload.other_ops) == ((1, 4, 5, 5), per * 100), op
    # Crop: border = left, top, right, bottom; scale = the kept height and width from the left and top
    for attrs, shape in (({"border": [1, 2, 3, 4]}, (1, 3, 20 - 2 - 4, 30 - 1 - 3)),
                         ({"border": [1, 2, 0, 0], "scale": [10, 12]}, (1, 3, 10, 12))):
        row = one(tmp_path, model([helper.make_node("Crop", ["x"], ["y"], **attrs)], [vi("x", [1, 3, 20, 30])],
                                  [vi("y", None)], opset=8)).rows[0]
        kept = 4 * shape[2] * shape[3] * 3
        assert row.output_shape == shape
        assert (row.workload.act_bytes_read, row.workload.bytes_written, row.workload.macs) == (kept, kept, 0)


def _old(tmp_path, node, inits=(), opset=1, x=(1, 3, 224, 224)):
    """One node of an opset-1..6 model (IR 3: its initializers are also graph inputs)."""
    m = model([node], [vi("x", list(x))] + [vi(t.name, list(t.dims), t.data_type) for t in inits], [vi("y", None)],
              list(inits), opset=opset)
    m.ir_version = 3
    return one(tmp_path, m)


def test_the_first_opsets_semantics(tmp_path):
    """Caffe2-era exports (opsets 1-6, the model zoo's oldest files) spell some ops differently, and
    ONNX's own inference has no rule for several of them: Reshape-1 takes its target as an attribute,
    Pad-1 calls its pads 'paddings', Concat-1's axis defaults to 1 (it was read as 0: a [2, 3, ...]
    output, quietly wrong), and a binary op broadcasts only with broadcast=1, its second operand
    matched from `axis` (a bias [3] at axis 1 of [1, 3, 224, 224]; numpy's rule called that a
    contradiction or left the shape open). Each was unscored or wrong."""
    cases = [(helper.make_node("Reshape", ["x"], ["y"], shape=[1, 3, 112, 448]), (), 4, (1, 3, 112, 448)),
             (helper.make_node("Pad", ["x"], ["y"], paddings=[0, 0, 1, 1, 0, 0, 1, 1]), (), 1, (1, 3, 226, 226)),
             (helper.make_node("Concat", ["x", "x"], ["y"]), (), 1, (1, 6, 224, 224)),
             (helper.make_node("Sum", ["x", "x"], ["y"]), (), 1, (1, 3, 224, 224)),
             (helper.make_node("Add", ["x", "b"], ["y"], broadcast=1, axis=1), (weight("b", [3]),), 1, (1, 3, 224, 224)),
             (helper.make_node("Mul", ["x", "c"], ["y"], broadcast=1), (weight("c", [224]),), 6, (1, 3, 224, 224))]
    for node, inits, opset, shape in cases:
        insp = _old(tmp_path, node, inits, opset)
        assert insp.coverage()["complete"], (node.op_type, insp.warnings)
        assert insp.rows[-1].output_shape == shape, node.op_type
    # the per-channel bias is one value in each of the 3 channels' loops of 224 x 224 (ONNX Runtime's
    # broadcaster), as a [1, 3, 1, 1] bias is from opset 7 on; the [224] row vector is read in each of
    # the 3 x 224 rows
    w = _old(tmp_path, cases[4][0], cases[4][1], 1).rows[0].workload
    assert (w.other_ops, w.loop_items) == (3 * 224 * 224, 3)
    assert _old(tmp_path, cases[5][0], cases[5][1], 6).rows[0].workload.loop_items == 3 * 224
    # a second operand that does not fit from its axis contradicts the first: listed, not costed
    bad = _old(tmp_path, helper.make_node("Add", ["x", "d"], ["y"], broadcast=1, axis=1), (weight("d", [4]),), 6)
    assert not bad.coverage()["complete"]
    assert bad.rows[0].kind == "contradiction" and "[4] does not fit" in bad.rows[0].reason


def test_tile_1_and_upsample_1_pass_their_shapes(tmp_path):
    """Tile-1 takes its count and axis as one-element float tensors, and the experimental Upsample-1 its
    scales as height_scale / width_scale attributes: ONNX's inference has no rule for either, so both
    were unscored (and Tile-1's scalar count called a contradiction). By hand: [1, 3, 224, 224] tiled 3
    times on axis 1 is [1, 9, 224, 224]; upsampled by 2 x 3, [1, 3, 448, 672], bilinear 2 x 2^2 = 8 ops an
    output element (as Resize's linear mode), nearest 1."""
    f = T.FLOAT
    tile = _old(tmp_path, helper.make_node("Tile", ["x", "t", "a"], ["y"]),
                (helper.make_tensor("t", f, [], [3.0]), helper.make_tensor("a", f, [], [1.0])), 1)
    assert tile.coverage()["complete"], tile.warnings
    assert tile.rows[0].output_shape == (1, 9, 224, 224)
    assert tile.rows[0].workload.bytes_written == 9 * 224 * 224 * 4
    for mode, per in (("bilinear", 8), ("nearest", 1)):
        up = _old(tmp_path, helper.make_node("Upsample", ["x"], ["y"], height_scale=2.0, width_scale=3.0, mode=mode))
        assert up.coverage()["complete"], up.warnings
        assert up.rows[0].output_shape == (1, 3, 448, 672)
        assert up.rows[0].workload.other_ops == per * 3 * 448 * 672
    # a count that is not whole, or from opset 6 on the scalar spelling: not resolved, listed
    half = _old(tmp_path, helper.make_node("Tile", ["x", "t", "a"], ["y"]),
                (helper.make_tensor("t", f, [], [2.5]), helper.make_tensor("a", f, [], [1.0])), 1)
    assert not half.coverage()["complete"]
    late = _old(tmp_path, helper.make_node("Tile", ["x", "t"], ["y"]), (helper.make_tensor("t", T.INT64, [], [3]),), 6)
    assert not late.coverage()["complete"]


def test_every_op_without_an_onnx_shape_function_has_a_rule():
    """The installed onnx's schemas (every version) with no shape inference function: each has a rule
    here (``load.shapes.RULES``, with ``load.uninferred``'s), a contrib-style rule next to its cost, or is
    named in ``uninferred.WITHOUT_RULE`` with the reason. A new onnx that adds such an op fails here."""
    import onnx.defs

    from dnnperf.load.uninferred import RULES, WITHOUT_RULE
    from dnnperf.ops import SHAPE_RULES

    missing = sorted({s.name for s in onnx.defs.get_all_schemas_with_history()
                      if s.domain == "" and not s.has_type_and_shape_inference_function
                      and s.name not in RULES and s.name not in SHAPE_RULES and s.name not in WITHOUT_RULE})
    assert missing == []


def test_normalizations_onnx_infers_nothing_for_keep_the_shape(tmp_path):
    """GroupNormalization (opset 18 and 21) and MeanVarianceNormalization are function ops ONNX's
    inference gives no shape for: a diffusion UNet's first GroupNormalization left every later layer
    unscored. Their output is their input's shape; so the 3 x 3 convolution after one, 8 -> 8 channels
    on 16 x 16, costs 8 x 8 x 9 x 256 = 147,456 MACs. LpPool-1 (no shape function either): 3 x 3 windows
    at stride 2 on 16 x 16 give 7 x 7."""
    x = [vi("x", [1, 8, 16, 16])]
    for opset, groups in ((18, 4), (21, 8)):
        nodes = [helper.make_node("GroupNormalization", ["x", "s", "b"], ["g"], num_groups=4),
                 helper.make_node("Conv", ["g", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                 helper.make_node("MeanVarianceNormalization", ["c"], ["y"])]
        insp = one(tmp_path, model(nodes, x, [vi("y", None)], [weight("s", [groups]), weight("b", [groups]),
                                                                weight("w", [8, 8, 3, 3])], opset=opset))
        assert insp.coverage()["complete"], (opset, insp.warnings)
        assert [r.output_shape for r in insp.rows] == [(1, 8, 16, 16)] * 3
        assert insp.rows[1].workload.macs == 147_456
    pool = _old(tmp_path, helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], p=2.0),
                x=(1, 8, 16, 16))
    assert pool.coverage()["complete"] and pool.rows[0].output_shape == (1, 8, 7, 7)


def test_split_1_reads_its_sizes_from_either_place(tmp_path):
    """Split-1 takes its parts' sizes as an optional second input or as the ``split`` attribute. Given as the
    input, the sizes were ignored and the axis cut in equal parts: [1, 3] of a [4, 3, 8] input came out as
    two [2, 3, 8] halves, quietly wrong; in a graph ONNX's inference loads (an LRN beside it), Split-1 had no
    rule at all. By hand: [1, 3, 8] and [3, 3, 8]; the attribute [1, 2] on axis 1: [4, 1, 8] and [4, 2, 8]."""
    x = [vi("x", [4, 3, 8])]
    sizes = helper.make_tensor("sz", T.INT64, [2], [1, 3])
    for extra in ([], [helper.make_node("LRN", ["z"], ["w"], size=3)]):
        ins = x + ([vi("z", [1, 3, 8, 8])] if extra else [])
        outs = [vi("a", None), vi("b", None)] + ([vi("w", None)] if extra else [])
        for node, inits, want in ((helper.make_node("Split", ["x", "sz"], ["a", "b"]), [sizes], [(1, 3, 8), (3, 3, 8)]),
                                  (helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[1, 2]), [],
                                   [(4, 1, 8), (4, 2, 8)])):
            m = model([node] + extra, ins + [vi(i.name, list(i.dims), i.data_type) for i in inits], outs, inits, opset=1)
            m.ir_version = 3  # its initializers are also graph inputs
            t = one(tmp_path, m).graph.tensors
            assert [t["a"].shape, t["b"].shape] == want, (extra, want)


def test_cast_1_names_its_target_type(tmp_path):
    """Cast-1 (opsets 1-5) names its target as a string ("INT64"), later Casts give its number: the
    output stayed unresolved (and unscored, with every layer after it), and a folded Cast-1 made float32
    values whatever it named. By hand: [2, 3] float32 -> int64, 6 elements of 8 bytes written = 48 B."""
    import numpy as np

    from dnnperf.load.fold import run_node

    for extra in ([], [helper.make_node("LRN", ["z"], ["w"], size=3)]):  # the fast path, and ONNX's
        ins = [vi("x", [2, 3])] + ([vi("z", [1, 3, 4, 4])] if extra else [])
        m = model([helper.make_node("Cast", ["x"], ["y"], to="INT64")] + extra, ins,
                  [vi("y", None, T.INT64)] + ([vi("w", None)] if extra else []), opset=1)
        m.ir_version = 3
        insp = one(tmp_path, m)
        assert insp.coverage()["complete"], insp.warnings
        assert (insp.rows[0].dtype, insp.rows[0].workload.bytes_written) == ("int64", 48)
    out = run_node(helper.make_node("Cast", ["x"], ["y"], to="INT64"), [np.array([2.0, 3.0], np.float32)],
                   [helper.make_opsetid("", 1)])[0]
    assert out.dtype == np.int64 and out.tolist() == [2, 3]


def test_an_image_scaler_bias_per_channel(tmp_path):
    """ImageScaler's bias is one value per channel: 2 values for 3 channels contradict the input."""
    m = model([helper.make_node("ImageScaler", ["x"], ["y"], scale=1.0, bias=[0.0, 1.0])], [vi("x", [1, 3, 8, 8])],
              [vi("y", None)], opset=8)
    row = one(tmp_path, m).rows[0]
    assert row.kind == "contradiction" and "2 values for 3 channels" in row.reason


def test_a_one_sided_stft_keeps_half_the_bins(tmp_path):
    """STFT of a real signal [1, 128, 1], frames of 16 every 8 samples: 15 frames of 16 // 2 + 1 = 9 bins
    (``onesided``, the default; ONNX's node test expects [1, 15, 9, 2]). ONNX's own inference gives 16
    bins, and the FFT was costed at n = 30. By hand: 15 x (5 x 16 x log2 16 + 16) = 5,040 ops; two-sided,
    16 bins of the same FFT."""
    for onesided, bins in ((1, 9), (0, 16)):
        nodes = [helper.make_node("STFT", ["x", "step", "", "len"], ["y"], onesided=onesided)]
        inits = [helper.make_tensor("step", T.INT64, [], [8]), helper.make_tensor("len", T.INT64, [], [16])]
        row = one(tmp_path, model(nodes, [vi("x", [1, 128, 1])], [vi("y", None)], inits)).rows[0]
        assert row.output_shape == (1, 15, bins, 2)
        assert row.workload.other_ops == 15 * (5 * 16 * 4 + 16)
    # in a graph ONNX's inference loads (an LRN has no Python rule), its shape is corrected and carried on
    nodes = [helper.make_node("STFT", ["x", "step", "", "len"], ["y"]), helper.make_node("Abs", ["y"], ["a"]),
             helper.make_node("LRN", ["z"], ["w"], size=3)]
    insp = one(tmp_path, model(nodes, [vi("x", [1, 128, 1]), vi("z", [1, 3, 8, 8])], [vi("a", None), vi("w", None)],
                               inits))
    assert [r.output_shape for r in insp.rows[:2]] == [(1, 15, 9, 2)] * 2


def test_window_shapes_onnx_inference_gets_wrong(tmp_path):
    """Shapes ONNX's own inference (onnx 1.23) gives otherwise than the ONNX spec and ONNX Runtime, found
    by running random pooling and transposed-convolution nodes in ONNX Runtime: with ceil_mode a last
    window that would start in the end padding is dropped (MaxPool k = [5, 1], strides 3 on 20 x 5:
    [6, 2]; with its indices output the model took ONNX's [6, 3]); with VALID padding ceil_mode still
    rounds up (k = [4, 2], strides [3, 2] on 12 x 3: [4, 2], where the Python rule said [3, 1]); a
    ConvTranspose with SAME padding is input x stride, its output_padding inside the padding ([20, 15] at
    strides [2, 3]: [40, 45], ONNX said [41, 45]), unless that padding would be negative (ONNX Runtime
    then pads nothing: 2 x 11 + 0 + 1 = 23 rows where input x stride is 24)."""
    def shape(node, x, inits=(), out=0):
        m = model([node], [vi("x", list(x))], [vi(o, None) for o in node.output], list(inits), opset=19)
        return one(tmp_path, m).graph.tensors[node.output[out]].shape

    pool = dict(kernel_shape=[5, 1], strides=[3, 3], ceil_mode=1)
    assert shape(helper.make_node("MaxPool", ["x"], ["y"], **pool), (2, 8, 20, 5)) == (2, 8, 6, 2)
    for out in (0, 1):
        assert shape(helper.make_node("MaxPool", ["x"], ["y", "i"], **pool), (2, 8, 20, 5), out=out) == (2, 8, 6, 2)
    assert shape(helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[4, 2], strides=[3, 2], auto_pad="VALID",
                                  ceil_mode=1), (1, 4, 12, 3)) == (1, 4, 4, 2)
    assert shape(helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[3, 2], strides=[2, 3],
                                  auto_pad="SAME_LOWER", output_padding=[1, 1]),
                 (2, 3, 20, 15), [weight("w", [3, 1, 3, 2])]) == (2, 1, 40, 45)
    assert shape(helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[1, 4], strides=[2, 3], group=4,
                                  auto_pad="SAME_UPPER", output_padding=[0, 2]),
                 (1, 4, 12, 4), [weight("w", [4, 1, 1, 4])]) == (1, 4, 23, 12)


def test_a_backward_slice_clamps_as_onnx_says(tmp_path):
    """Stepping backwards, ONNX clamps a Slice's start to [0, dim - 1] and its end to [-1, dim - 1], -1 meaning
    before the first element (the spec's text, and ONNX Runtime): starts = ends = -10 with step -2 on one
    element keep it (Python's slicing, which the rule used, keeps nothing); on [6, 5, 1, 3], starts [-10, 1,
    -3], ends [-1, -10, -10], steps [3, -1, -2] over axes 0-2 keep [2, 2, 1, 3]."""
    from dnnperf.load.shapes import slice_length

    assert slice_length(-10, -10, -2, 1) == 1 and slice_length(0, -1, -1, 5) == 0 and slice_length(4, -10, -1, 5) == 5
    assert slice_length(-1, -2**63, -1, 5) == 5 and slice_length(1, 2**63 - 1, 1, 5) == 4 and slice_length(0, 5, 2, 5) == 3

    def ints(name, v):
        return helper.make_tensor(name, T.INT64, [len(v)], v)

    nodes = [helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])]
    inits = [ints("s", [-10, 1, -3]), ints("e", [-1, -10, -10]), ints("a", [0, 1, 2]), ints("st", [3, -1, -2])]
    assert one(tmp_path, model(nodes, [vi("x", [6, 5, 1, 3])], [vi("y", None)], inits)).rows[0].output_shape == (2, 2, 1, 3)


def test_a_gelu_op_costs_what_the_graph_it_stands_for_costs(tmp_path):
    """The same GELU counted one way: the exact form exported as nodes (x / sqrt 2, Erf, + 1, x *, * 0.5:
    5 ops an element), ONNX's Gelu-20 and ONNX Runtime's Gelu (8 before: the tanh form's count) and
    BiasGelu (its bias + 5); the tanh form as nodes (Pow, * 0.044715, + x, * sqrt(2 / pi), Tanh, + 1, x *,
    * 0.5: 8), Gelu-20 with approximate="tanh" and FastGelu (+ 1 with its bias). By hand on [4, 16]:
    64 x 5 = 320 and 64 x 8 = 512; with a bias 384 and 576."""
    x = [vi("x", [4, 16])]
    s = lambda name, v: numpy_scalar(name, v)  # noqa: E731
    erf_nodes = [helper.make_node("Div", ["x", "r2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
                 helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["x", "e1"], ["m"]),
                 helper.make_node("Mul", ["m", "half"], ["y"])]
    tanh_nodes = [helper.make_node("Pow", ["x", "three"], ["p"]), helper.make_node("Mul", ["p", "c"], ["pc"]),
                  helper.make_node("Add", ["x", "pc"], ["a"]), helper.make_node("Mul", ["a", "k"], ["ak"]),
                  helper.make_node("Tanh", ["ak"], ["t"]), helper.make_node("Add", ["t", "one"], ["t1"]),
                  helper.make_node("Mul", ["x", "t1"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    consts = [s("r2", 1.4142135), s("one", 1.0), s("half", 0.5), s("three", 3.0), s("c", 0.044715), s("k", 0.7978846)]
    bias = [weight("b", [16])]

    def other_ops(nodes, inits, opset=20, ms=False):
        m = model(nodes, x, [vi("y", None)], inits, opset=opset,
                  extra_opsets=[("com.microsoft", 1)] if ms else ())
        return sum(r.workload.other_ops for r in inspect_model(save(m, tmp_path)).rows if r.workload is not None)

    assert other_ops(erf_nodes, consts) == 320
    assert other_ops([helper.make_node("Gelu", ["x"], ["y"])], []) == 320
    assert other_ops([helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")], [], ms=True) == 320
    assert other_ops([helper.make_node("BiasGelu", ["x", "b"], ["y"], domain="com.microsoft")], bias, ms=True) == 384
    assert other_ops(tanh_nodes, consts) == 512
    assert other_ops([helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")], []) == 512
    assert other_ops([helper.make_node("FastGelu", ["x"], ["y"], domain="com.microsoft")], [], ms=True) == 512
    assert other_ops([helper.make_node("FastGelu", ["x", "b"], ["y"], domain="com.microsoft")], bias, ms=True) == 576


def test_a_skip_layer_norm_costs_the_adds_it_replaces(tmp_path):
    """ONNX Runtime's optimizer fuses (x + bias) + skip -> LayerNormalization into one
    SkipLayerNormalization with a bias input: 1 + 1 + 7 ops an element, as the three nodes count (the
    bias's add was dropped: BERT-base's optimized export lost 2.36 M ops against its own graph). By hand
    on [2, 3, 8]: 48 x 9 = 432; without a bias 48 x 8 = 384; the simplified (RMS) form 48 x (4 + 1 + 1)."""
    ins = [vi("x", [2, 3, 8]), vi("skip", [2, 3, 8])]
    params = [weight("g", [8]), weight("be", [8]), weight("bi", [8])]

    def other_ops(nodes, ms=True):
        m = model(nodes, ins, [vi("y", None)], params, opset=17, extra_opsets=[("com.microsoft", 1)] if ms else ())
        return sum(r.workload.other_ops for r in inspect_model(save(m, tmp_path)).rows if r.workload is not None)

    plain = [helper.make_node("Add", ["x", "bi"], ["xb"]), helper.make_node("Add", ["xb", "skip"], ["s"]),
             helper.make_node("LayerNormalization", ["s", "g", "be"], ["y"], axis=-1)]
    assert other_ops(plain, ms=False) == 432
    sln = lambda ins_, op="SkipLayerNormalization": [helper.make_node(op, ins_, ["y"], domain="com.microsoft")]  # noqa: E731
    assert other_ops(sln(["x", "skip", "g", "be", "bi"])) == 432
    assert other_ops(sln(["x", "skip", "g", "be"])) == 384
    assert other_ops(sln(["x", "skip", "g", "bi"], "SkipSimplifiedLayerNormalization")) == 48 * 6


def test_a_normalisation_op_costs_what_its_exported_graph_costs(tmp_path):
    """LayerNormalization as exporters spelled it before opset 17 (ReduceMean, Sub, Pow, ReduceMean,
    Add eps, Sqrt, Div, Mul, Add) and an RMS norm as LLM exports spell it (Pow, ReduceMean, Add eps,
    Sqrt, Div, Mul) against the one ops (LayerNormalization, RMSNormalization-23, ONNX Runtime's
    SimplifiedLayerNormalization): 7 and 4 ops an element (they counted 8 and 5), the per-row epsilon
    and square root apart. By hand on [2, 3, 8]: 48 x 7 + 2 x 6 = 348 against 336; 48 x 4 + 2 x 6 = 204
    against 192."""
    x = [vi("x", [2, 3, 8])]
    consts = [numpy_scalar("two", 2.0), numpy_scalar("eps", 1e-5), weight("g", [8]), weight("b", [8])]
    ax = helper.make_tensor("ax", T.INT64, [1], [-1])

    def other_ops(nodes, opset=17, ms=False, inits=()):
        m = model(nodes, x, [vi("y", None)], consts + [ax] + list(inits), opset=opset,
                  extra_opsets=[("com.microsoft", 1)] if ms else ())
        return sum(r.workload.other_ops for r in inspect_model(save(m, tmp_path)).rows if r.workload is not None)

    ln = [helper.make_node("ReduceMean", ["x", "ax"], ["mu"]), helper.make_node("Sub", ["x", "mu"], ["xc"]),
          helper.make_node("Pow", ["xc", "two"], ["sq"]), helper.make_node("ReduceMean", ["sq", "ax"], ["var"]),
          helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
          helper.make_node("Div", ["xc", "sd"], ["n"]), helper.make_node("Mul", ["n", "g"], ["ng"]),
          helper.make_node("Add", ["ng", "b"], ["y"])]
    rms = [helper.make_node("Pow", ["x", "two"], ["sq"]), helper.make_node("ReduceMean", ["sq", "ax"], ["ms"]),
           helper.make_node("Add", ["ms", "eps"], ["me"]), helper.make_node("Sqrt", ["me"], ["rt"]),
           helper.make_node("Div", ["x", "rt"], ["n"]), helper.make_node("Mul", ["n", "g"], ["y"])]
    assert other_ops(ln, opset=18) == 348
    assert other_ops([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)]) == 336
    assert other_ops(rms, opset=18) == 204
    assert other_ops([helper.make_node("RMSNormalization", ["x", "g"], ["y"], axis=-1)], opset=23) == 192
    assert other_ops([helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], axis=-1)]) == 192
