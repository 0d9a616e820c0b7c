"""Rewrites ONNX Runtime's CPU provider makes to a graph before it runs it, and that dnnperf's
``--fusion typical`` on a CPU profile follows (dnnperf.rewrites, dnnperf.kernel_groups, dnnperf.fusion):
sibling Gathers and Slices that cover one axis become one Split (GatherSliceToSplitFusion), a constant
scalar scale on a MatMul operand folds into the product (MatMulScaleFusion), a MatMul + Add becomes a
Gemm only when the Add is a Gemm's bias, arithmetic that changes nothing is removed (NoopElimination),
and only a 2-D convolution takes a residual sum into its kernel. Each expectation is what ONNX Runtime
1.32's optimised graph (x86) of the same small graph holds, probed one case at a time
(bench/cpu_kernel_check.py does it on whole models)."""

import os

import numpy as np
import pytest
import yaml
from onnx import helper, numpy_helper

from dnnperf.api import analyze, inspect_model
from dnnperf.hardware import load_profile
from dnnperf.ir import ShapeOverrides
from dnnperf.scoring import Settings
from helpers import ints, model, save, vi, weight

n = helper.make_node


def _layers(path, hw="cpu-avx2", batch=None):
    insp = inspect_model(path, ShapeOverrides(batch=batch) if batch else ShapeOverrides())
    rep = analyze(insp, load_profile(hw), Settings(fusion="typical"), with_fixes=False)
    return [(c.layer.op_type, c.layer.nodes, c.layer.workload) for c in rep.score.layers
            if c.layer.workload.launches and c.layer.op_type != "LayoutReorder"]


def _slices(bounds, shape, axis=1):
    """x -> Relu -> one Slice per (start, end) on ``axis``."""
    nodes = [n("Relu", ["x"], ["p"], name="relu")]
    inits = []
    for k, (s, e) in enumerate(bounds):
        inits += [ints(f"s{k}", [s]), ints(f"e{k}", [e]), ints(f"a{k}", [axis]), ints(f"t{k}", [1])]
        nodes.append(n("Slice", ["p", f"s{k}", f"e{k}", f"a{k}", f"t{k}"], [f"o{k}"], name=f"slice{k}"))
    return model(nodes, [vi("x", shape)], [vi(f"o{k}", None) for k in range(len(bounds))], inits)


def test_slices_that_cover_an_axis_run_as_one_split(tmp_path):
    """ShuffleNetV2's channel split (two halves) and a roll (a negative start) are one Split kernel:
    it reads the tensor once and writes both parts (4 x 8 x 4 x 4 floats in all)."""
    for i, bounds in enumerate((((0, 4), (4, 8)), ((-3, 2 ** 62), (0, -3)), ((0, 2), (2, 5), (5, 8)))):
        layers = _layers(save(_slices(bounds, [1, 8, 4, 4]), tmp_path, f"c{i}.onnx"))
        assert [op for op, _, _ in layers] == ["Relu", "Split"], bounds
        split = layers[1][2]
        assert split.act_bytes_read == split.bytes_written == 8 * 4 * 4 * 4
        assert layers[1][1] == tuple(f"slice{k}" for k in range(len(bounds)))


def test_slices_that_do_not_cover_it_stay_apart(tmp_path):
    """A gap, an overlap or a single Slice: the runtime keeps Slice kernels."""
    for i, bounds in enumerate((((0, 2), (4, 8)), ((0, 5), (4, 8)), ((0, 4),))):
        layers = _layers(save(_slices(bounds, [1, 8, 4, 4]), tmp_path, f"g{i}.onnx"))
        assert [op for op, _, _ in layers] == ["Relu"] + ["Slice"] * len(bounds), bounds


def test_a_symbolic_batch_keeps_the_slices_of_a_tensor_sized_at_run_time(tmp_path):
    """The runtime needs the axis's size from the file. With the batch symbolic it knows it after a Relu
    of the input (one Split) but not after a Reshape to a shape computed from a Shape at run time, as
    torchvision's exports write them (ShuffleNetV2, ViT-B/16 and Swin-T as exported: no Split in the
    optimised graph; with batch 1 fixed in the file: 13, 12 and 32 Splits)."""
    m = _slices(((0, 4), (4, 8)), ["N", 8, 4, 4])
    layers = _layers(save(m, tmp_path, "known.onnx"), batch=1)
    assert [op for op, _, _ in layers] == ["Relu", "Split"]
    g = m.graph
    g.node.insert(1, n("Shape", ["p"], ["sh"], name="shape"))
    g.node.insert(2, n("Reshape", ["p", "sh"], ["r"], name="reshape"))
    for node in g.node:
        if node.op_type == "Slice":
            node.input[0] = "r"
    layers = _layers(save(m, tmp_path, "unknown.onnx"), batch=1)
    assert [op for op, _, _ in layers] == ["Relu", "Reshape", "Slice", "Slice"]  # (the Reshape: one dispatch)


def test_three_gathers_of_q_k_v_run_as_one_split(tmp_path):
    """qkv[0], qkv[1], qkv[2] (torch's multi-head attention) with constant indices: one Split; two of
    three rows: two Gathers."""
    def qkv(picks):
        nodes = [n("Relu", ["x"], ["p"], name="relu")]
        inits = []
        for k in picks:
            inits.append(numpy_helper.from_array(np.array(k, dtype=np.int64), f"i{k}"))
            nodes.append(n("Gather", ["p", f"i{k}"], [f"o{k}"], name=f"gather{k}", axis=0))
        return model(nodes, [vi("x", [3, 16, 64])], [vi(f"o{k}", None) for k in picks], inits)
    assert [op for op, _, _ in _layers(save(qkv((0, 1, 2)), tmp_path, "a.onnx"))] == ["Relu", "Split"]
    assert [op for op, _, _ in _layers(save(qkv((0, 1)), tmp_path, "b.onnx"))] == ["Relu", "Gather", "Gather"]


def test_a_split_copies_on_one_thread_at_the_serial_copy_pace(tmp_path):
    """ONNX Runtime's CPU Split copies every output with memcpy on the calling thread (split.cc, one
    CopyMatrix per output), never on its pool: on a calibrated CPU it takes the one-thread copy curve
    ('movement.serial', measured on one-thread Concat copies) for all its bytes, whether the graph
    spells it as a Split or as sibling Slices the runtime fuses into one. A Slice on its own keeps the
    movement family's figure. Curve and figures made up; the bytes by hand (8 x 16 x 16 floats read
    and written: 16 KB, the curve's 16 KB point)."""
    import os

    import yaml
    from dnnperf.efficiency import family_efficiency

    prof = tmp_path / "serial.yaml"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d.update(name="serial", shape_efficiency={"movement.serial": {16: 0.4, 64: 0.5}})
    d["efficiency"] = {**d.get("efficiency", {}), "movement": 0.9}
    prof.write_text(yaml.safe_dump(d))
    hw = load_profile(str(prof))

    def eff(m, name):
        insp = inspect_model(save(m, tmp_path, name))
        rep = analyze(insp, hw, Settings(fusion="typical"), with_fixes=False)
        layer = next(c.layer for c in rep.score.layers if c.layer.op_type in ("Split", "Slice"))
        w = layer.workload
        assert w.act_bytes_read + w.bytes_written == 2 * 8 * 16 * 16 * 4
        return layer.op_type, family_efficiency(layer, hw)

    split = model([n("Relu", ["x"], ["p"], name="relu"), n("Split", ["p"], ["a", "b"], name="split", axis=1)],
                  [vi("x", [1, 8, 16, 16])], [vi("a", None), vi("b", None)], opset=17)
    assert eff(split, "split.onnx") == ("Split", 0.4)
    assert eff(_slices(((0, 4), (4, 8)), [1, 8, 16, 16]), "siblings.onnx") == ("Split", 0.4)
    one = eff(_slices(((0, 8),), [1, 8, 16, 16]), "one.onnx")
    assert one[0] == "Slice" and one[1] != 0.4


def test_gpu_profiles_keep_the_slices(tmp_path):
    """The rewrite is ONNX Runtime's: a GPU profile's layers are the graph's."""
    layers = _layers(save(_slices(((0, 4), (4, 8)), [1, 8, 4, 4]), tmp_path), hw="t4")
    assert [op for op, _, _ in layers].count("Slice") == 2


def _attention(scale_from_shape: bool):
    """q, k [1, 4, 16, 8]: scores = (q * s) @ (k^T * s) + a constant position bias [4, 16, 16]."""
    nodes = [n("Relu", ["q"], ["qr"], name="rq"), n("Relu", ["k"], ["kr"], name="rk"),
             n("Transpose", ["kr"], ["kt"], name="kt", perm=[0, 1, 3, 2]),
             n("Mul", ["qr", "s"], ["qs"], name="scale_q"), n("Mul", ["kt", "s"], ["ks"], name="scale_k"),
             n("MatMul", ["qs", "ks"], ["sc"], name="scores"), n("Add", ["sc", "bias"], ["y"], name="pos_bias")]
    inits = [weight("bias", [4, 16, 16])]
    if scale_from_shape:  # s = sqrt(1 / sqrt(last dim of q)), computed from its Shape
        nodes = [n("Shape", ["q"], ["sh"], name="shape"), n("Gather", ["sh", "last"], ["d"], name="dim", axis=0),
                 n("Cast", ["d"], ["df"], name="cast", to=1), n("Sqrt", ["df"], ["r"], name="sqrt"),
                 n("Div", ["one", "r"], ["s2"], name="inv"), n("Sqrt", ["s2"], ["s"], name="sqrt2")] + nodes
        inits += [numpy_helper.from_array(np.array(-1, dtype=np.int64), "last"),
                  numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")]
    else:
        inits.append(numpy_helper.from_array(np.array(0.59, dtype=np.float32), "s"))
    return model(nodes, [vi("q", ["N", 4, 16, 8] if scale_from_shape else [1, 4, 16, 8]),
                         vi("k", ["N", 4, 16, 8] if scale_from_shape else [1, 4, 16, 8])], [vi("y", None)], inits)


def test_a_constant_scale_and_k_transpose_fold_into_the_scores(tmp_path):
    """ONNX Runtime's optimised graph: Relu, Relu, FusedMatMul (alpha = 0.59^2, transB), Add: the two
    scales and the transpose run no kernel; the position bias is no Gemm bias (the product's operands
    are both 4-D), so its Add is a kernel of its own."""
    layers = _layers(save(_attention(False), tmp_path))
    assert [(op, nodes) for op, nodes, _ in layers] == [
        ("Relu", ("rq",)), ("Relu", ("rk",)), ("MatMul", ("scores",)), ("Add", ("pos_bias",))]


def test_a_scale_before_a_linear_layer_runs(tmp_path):
    """A scaled input to a MatMul whose bias Add makes it a Gemm: the runtime builds the Gemm first and
    runs the Mul (optimised graph: Relu, Mul, Gemm); without the bias the scale folds (Relu, FusedMatMul)."""
    def scaled(bias):
        nodes = [n("Relu", ["x"], ["r"], name="relu"), n("Mul", ["r", "c"], ["s"], name="scale"),
                 n("MatMul", ["s", "w"], ["m"], name="mm")]
        inits = [numpy_helper.from_array(np.array(0.5, dtype=np.float32), "c"), weight("w", [64, 32]), weight("b", [32])]
        if bias:
            nodes.append(n("Add", ["m", "b"], ["y"], name="bias"))
        return model(nodes, [vi("x", [16, 64])], [vi("y" if bias else "m", None)], inits)
    assert [op for op, _, _ in _layers(save(scaled(True), tmp_path, "b.onnx"))] == ["Relu", "Mul", "MatMul+Add"]
    assert [op for op, _, _ in _layers(save(scaled(False), tmp_path, "n.onnx"))] == ["Relu", "MatMul"]


def test_a_scale_computed_at_run_time_runs(tmp_path):
    """With the dims symbolic in the file, the scale comes from a Shape at run time (ViT-B/16 as
    exported): the runtime runs the two Muls and the transpose before them."""
    ops = [op for op, _, _ in _layers(save(_attention(True), tmp_path), batch=1)]
    assert ops.count("Mul") == 2 and "Transpose" in ops


def _residual(xshape, neutral=None, kshape=(1,), last_is_output=False):
    """x -> conv0 -> r; conv1(r) + r -> Relu [-> neutral op] -> conv2."""
    pads = [1] * (2 * (len(xshape) - 2))
    wshape = [16, 16] + [3] * (len(xshape) - 2)
    nodes = [n("Conv", ["x", "w0"], ["r"], name="conv0", pads=pads),
             n("Conv", ["r", "w1"], ["c"], name="conv1", pads=pads),
             n("Add", ["c", "r"], ["s"], name="sum"), n("Relu", ["s"], ["y"], name="relu")]
    inits = [weight(f"w{i}", wshape) for i in range(3)]
    last = "y"
    if neutral:
        op, v = neutral
        inits.append(numpy_helper.from_array(np.full(kshape, v, dtype=np.float32), "k"))
        nodes.append(n(op, ["y", "k"], ["z"], name="neutral"))
        last = "z"
    outs = [vi("out", None)] + ([vi(last, None)] if last_is_output else [])
    nodes.append(n("Conv", [last, "w2"], ["out"], name="conv2", pads=pads))
    return model(nodes, [vi("x", list(xshape))], outs, inits)


def test_only_a_2d_convolution_takes_the_residual_sum(tmp_path):
    """ONNX Runtime's optimised graph: a 2-D convolution sums the residual and applies the ReLU in its
    kernel (Conv, Conv, Conv); a 1-D or 3-D one (R3D-18's) runs the Add and the ReLU as kernels of their
    own (Conv, Conv, Add, Relu, Conv)."""
    ops = [op for op, _, _ in _layers(save(_residual([1, 16, 8, 8]), tmp_path, "c2.onnx"))]
    assert ops == ["Conv", "Conv+Add+Relu", "Conv"]
    for i, shape in enumerate(([1, 16, 8], [1, 16, 4, 8, 8])):
        ops = [op for op, _, _ in _layers(save(_residual(shape), tmp_path, f"c{i}.onnx"))]
        assert ops == ["Conv", "Conv", "Add", "Relu", "Conv"], shape


def test_arithmetic_that_changes_nothing_runs_no_kernel(tmp_path):
    """ONNX Runtime removes a Mul or Div by one and an Add or Sub of zero (one constant value): Conv,
    Conv, Conv in its optimised graph, also after a 3-D convolution. A Mul by two, a per-channel Mul by
    ones (run as a 1x1 depthwise convolution) or one whose output is a graph output stays a kernel."""
    for i, (op, v) in enumerate((("Mul", 1.0), ("Add", 0.0), ("Div", 1.0), ("Sub", 0.0))):
        layers = _layers(save(_residual([1, 16, 8, 8], (op, v)), tmp_path, f"n{i}.onnx"))
        assert [o for o, _, _ in layers] == ["Conv", "Conv+Add+Relu", "Conv"], op
    layers = _layers(save(_residual([1, 16, 4, 8, 8], ("Mul", 1.0)), tmp_path, "n3d.onnx"))
    assert "Mul" not in [o for o, _, _ in layers]
    for i, m in enumerate((_residual([1, 16, 8, 8], ("Mul", 2.0)), _residual([1, 16, 8, 8], ("Mul", 1.0), (16, 1, 1)),
                           _residual([1, 16, 8, 8], ("Mul", 1.0), last_is_output=True))):
        layers = _layers(save(m, tmp_path, f"k{i}.onnx"))
        assert any("neutral" in nodes for _, nodes, _ in layers), i


def test_an_einsum_a_transposed_convolution_and_a_recurrent_layer_take_no_epilogue(tmp_path):
    """The CPU provider folds a bias, a scale or an activation into a convolution, a MatMul or a Gemm
    (Gemm + Relu -> FusedGemm), but runs the op after an Einsum (MaxViT's attention scores + their
    position bias), a ConvTranspose or an LSTM as a kernel of its own."""
    b = numpy_helper.from_array(np.ones((4, 49, 49), np.float32), "b")
    ein = model([n("Einsum", ["q", "k"], ["s"], name="qk", equation="bhqd,bhkd->bhqk"),
                 n("Add", ["s", "b"], ["y"], name="bias")],
                [vi("q", [1, 4, 49, 32]), vi("k", [1, 4, 49, 32])], [vi("y", None)], [b])
    assert [op for op, _, _ in _layers(save(ein, tmp_path, "e.onnx"))] == ["Einsum", "Add"]
    ct = model([n("ConvTranspose", ["x", "w"], ["c"], name="up", strides=[2, 2]), n("Relu", ["c"], ["y"], name="r")],
               [vi("x", [1, 16, 14, 14])], [vi("y", None)], [weight("w", [16, 8, 2, 2])])
    assert [op for op, _, _ in _layers(save(ct, tmp_path, "c.onnx"))] == ["ConvTranspose", "Relu"]
    lstm = model([n("LSTM", ["x", "W", "R"], ["h"], name="lstm", hidden_size=8), n("Relu", ["h"], ["y"], name="r")],
                 [vi("x", [5, 1, 4])], [vi("y", None)], [weight("W", [1, 32, 4]), weight("R", [1, 32, 8])])
    assert [op for op, _, _ in _layers(save(lstm, tmp_path, "l.onnx"))] == ["LSTM", "Relu"]
    gemm = model([n("Gemm", ["x", "w"], ["c"], name="fc"), n("Relu", ["c"], ["y"], name="r")],
                 [vi("x", [4, 16])], [vi("y", None)], [weight("w", [16, 8])])
    assert [op for op, _, _ in _layers(save(gemm, tmp_path, "g.onnx"))] == ["Gemm+Relu"]


def test_a_transpose_of_size_1_axes_is_a_one_thread_copy_on_a_cpu(tmp_path):
    """ONNX Runtime's CPU Transpose of a permutation that keeps the axes larger than 1 in order copies the tensor
    with one memcpy on the calling thread (its IsTransposeReshape, then CopyCpuTensor): ViT's [1, 197, 768] ->
    [197, 1, 768] took 30-41 us on a 2-core EPYC VM as a one-node model and between two Adds, static or symbolic
    batch, and its optimised graph keeps the node. So on a CPU profile it moves 197 x 768 x 4 = 605,184 bytes
    each way; with a bandwidth of 50 GB/s and a one-thread copy curve of 0.5 that is 1,210,368 / 50e9 / 0.5 =
    24.2 us, plus a dispatch. On a GPU it stays a view (no layer time)."""
    from dnnperf.hardware import profile_from_dict

    m = model([n("Transpose", ["x"], ["y"], perm=[1, 0, 2], name="t")], [vi("x", [1, 197, 768])], [vi("y", None)])
    path = save(m, tmp_path, "reshape.onnx")
    with open(os.path.join(os.path.dirname(__file__), "..", "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        cpu = yaml.safe_load(fh)
    cpu.update({"memory": {"dram_gbs": 50, "onchip_mb": 64, "bandwidth_curve": {0.001: 50, 1000: 50}},
                "efficiency": {"movement": 1.0}, "shape_efficiency": {"movement.serial": {1: 0.5, 100000: 0.5}}})
    hw = profile_from_dict(cpu, "x")
    layer = analyze(inspect_model(path), hw, Settings(fusion="typical"), with_fixes=False).score.layers[0]
    assert layer.layer.workload.family == "movement" and layer.layer.workload.bytes_written == 605_184
    assert layer.time_s - layer.t_launch == pytest.approx(1_210_368 / 50e9 / 0.5, rel=1e-3)
    gpu = analyze(inspect_model(path), load_profile("v100"), Settings(fusion="typical"), with_fixes=False)
    assert all(c.time_s == 0.0 for c in gpu.score.layers)


def _qkv(tail: str):
    """A [1, 49, 288] input reshaped to [1, 49, 3, 3, 32] and permuted (2, 0, 3, 1, 4), q, k and v taken by
    scalar Gathers (Swin's and timm's attention), then ``tail``: 'attention' (q scaled, k transposed
    (0, 1, 3, 2), q @ k^T, Softmax, @ v) or 'two' (q and k only, q @ k^T)."""
    import numpy as np

    inits = [ints("shp", [1, 49, 3, 3, 32]), numpy_helper.from_array(np.array(0.17, np.float32), "sc")] + [
        numpy_helper.from_array(np.array(i, np.int64), f"i{i}") for i in range(3)]
    take = "qkv" if tail == "attention" else "qk"
    nodes = [n("Reshape", ["x", "shp"], ["r"], name="reshape"),
             n("Transpose", ["r"], ["t"], perm=[2, 0, 3, 1, 4], name="T2")]
    nodes += [n("Gather", ["t", f"i{i}"], [c], axis=0, name=f"g{c}") for i, c in enumerate(take)]
    nodes.append(n("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2], name="T3"))
    if tail == "attention":
        nodes += [n("Mul", ["q", "sc"], ["qs"], name="scale"), n("MatMul", ["qs", "kt"], ["s"], name="mm1"),
                  n("Softmax", ["s"], ["p"], axis=-1, name="sm"), n("MatMul", ["p", "v"], ["y"], name="mm2")]
    else:
        nodes.append(n("MatMul", ["q", "kt"], ["y"], name="mm1"))
    return model(nodes, [vi("x", [1, 49, 288])], [vi("y", None)], inits)


def test_a_transpose_read_only_by_scalar_gathers_is_pushed_past_them_on_a_cpu(tmp_path):
    """ONNX Runtime's transpose optimizer moves a Transpose past the scalar Gathers that read it: each Gather
    takes its index from the Transpose's input and its result is transposed by the rest of the permutation
    ((2, 0, 3, 1, 4) less its first place: (0, 2, 1, 3) on [1, 49, 3, 32]), composed with a Transpose that
    reads it (k's (0, 1, 3, 2) after (0, 2, 1, 3): (0, 2, 3, 1), which no MatMul takes as a transposed operand).
    Its optimised graphs: with q, k, v and attention, Split + three Transposes and a FusedMatMul; with q and k
    only, two Gathers and two Transposes. So on a CPU profile the qkv Transpose's layer is the q and v branches'
    Transposes (runs of 32: 49 x 3 = 147 each), the key's Transpose is a 2-D transpose of its own (not folded
    into the product), and with q and k only the qkv layer is q's one Transpose. On a GPU the qkv Transpose stays
    one kernel and the key's folds into the product."""
    from helpers import ort_op_types

    attention, two = _qkv("attention"), _qkv("two")
    assert ort_op_types(attention, tmp_path).count("Transpose") == 3
    assert ort_op_types(two, tmp_path).count("Transpose") == 2
    cpu = {c.layer.name: c.layer.workload for c in analyze(inspect_model(save(attention, tmp_path, "a.onnx")),
           load_profile("cpu-avx2"), Settings(fusion="typical"), with_fixes=False).score.layers}
    branches = [(op, w.kernel, w.loop_items) for op, w, _ in cpu["T2"].parts]
    assert branches == [("Transpose", "Transpose.blocks", 147)] * 2
    assert cpu["T3"].family == "movement" and cpu["T3"].kernel == "" and cpu["T3"].bytes_written == 49 * 96 * 4
    qk = {c.layer.name: c.layer.workload for c in analyze(inspect_model(save(two, tmp_path, "t.onnx")),
          load_profile("cpu-avx2"), Settings(fusion="typical"), with_fixes=False).score.layers}
    assert not qk["T2"].parts and qk["T2"].kernel == "Transpose.blocks" and qk["T2"].loop_items == 147
    gpu = {c.layer.name: c for c in analyze(inspect_model(save(attention, tmp_path, "g.onnx")), load_profile("v100"),
           Settings(fusion="typical"), with_fixes=False).score.layers}
    assert not gpu["T2"].layer.workload.parts and gpu["T2"].layer.workload.bytes_written == 3 * 49 * 96 * 4
    assert "T3" not in gpu or gpu["T3"].time_s == 0.0


def test_validate_maps_the_transposes_the_runtime_made_of_a_pushed_one(tmp_path):
    """The Transposes ONNX Runtime makes when it pushes one past its Gathers are named 'Transpose_token_<n>' after
    no node (Swin-T: 24 kernels, 1.0 ms, left unmatched); each goes to the pushed Transpose's layer by its input
    shape, q's and v's [1, 49, 3, 32] here: 40 + 41 us to 'T2'; the key's composed Transpose keeps its node's
    name; a token Transpose of another shape stays unmatched."""
    from dnnperf.measure import map_kernels

    insp = inspect_model(save(_qkv("attention"), tmp_path, "a.onnx"))
    layers = [c.layer for c in analyze(insp, load_profile("cpu-avx2"), Settings(fusion="typical"),
                                       with_fixes=False).score.layers]
    kernels = {"T3": ("Transpose", 30.0), "Transpose_token_7": ("Transpose", 40.0),
               "Transpose_token_8": ("Transpose", 41.0), "Transpose_token_9": ("Transpose", 5.0)}
    shapes = {"T3": (((1, 49, 3, 32),), ((1, 3, 32, 49),)), "Transpose_token_7": (((1, 49, 3, 32),), ((1, 3, 49, 32),)),
              "Transpose_token_8": (((1, 49, 3, 32),), ((1, 3, 49, 32),)), "Transpose_token_9": (((7, 7),), ((7, 7),))}
    measured, unmatched = map_kernels(kernels, insp.graph, layers, shapes)
    assert measured["T2"] == pytest.approx(81.0) and measured["T3"] == pytest.approx(30.0)
    assert unmatched == {"Transpose_token_9": 5.0}


def test_a_view_the_runtime_runs_costs_one_dispatch_on_a_cpu(tmp_path):
    """ONNX Runtime runs a Reshape, Squeeze or Unsqueeze as a node of its own: nothing moves, but it is
    dispatched like any node (timed: Squeezes and Unsqueezes in turn 0.17 us a node, a Relu chain
    0.16); a Reshape right after another is merged into it (200 in a row timed as none). So on a CPU
    profile: Unsqueeze -> Reshape -> Reshape costs two dispatches (the profile's launch_overhead_us,
    read from its file), no bytes; on a GPU (a framework's views launch nothing) none."""
    nodes = [n("Relu", ["x"], ["p"], name="relu"), n("Unsqueeze", ["p", "ax"], ["u"], name="unsq"),
             n("Reshape", ["u", "s1"], ["r1"], name="r1"), n("Reshape", ["r1", "s2"], ["y"], name="r2")]
    m = model(nodes, [vi("x", [1, 16, 8])], [vi("y", None)],
              [ints("ax", [0]), ints("s1", [16, 8]), ints("s2", [128])])
    path = save(m, tmp_path, "views.onnx")
    with open(os.path.join(os.path.dirname(__file__), "..", "profiles", "cpu-avx2.yaml"), encoding="utf-8") as fh:
        dispatch_s = yaml.safe_load(fh)["launch_overhead_us"] * 1e-6
    rep = analyze(inspect_model(path), load_profile("cpu-avx2"), Settings(fusion="typical"), with_fixes=False)
    cost = {c.layer.name: c for c in rep.score.layers}
    assert cost["unsq"].time_s == pytest.approx(dispatch_s) and cost["r1"].time_s == pytest.approx(dispatch_s)
    assert cost["unsq"].t_memory == 0.0 and cost["unsq"].cause == "launch_overhead"
    assert cost["r2"].time_s == 0.0
    gpu = analyze(inspect_model(path), load_profile("v100"), Settings(fusion="typical"), with_fixes=False)
    assert all(c.time_s == 0.0 for c in gpu.score.layers if c.layer.name in ("unsq", "r1", "r2"))


def _heads(perm=(1, 0, 2), lead=(1, 12), symbolic=False):
    """torchvision ViT's attention on [197, 12, 64] per head: q, k, v each Relu'd (computed), transposed by ``perm``
    and reshaped to ``lead`` + [197, 64] (``lead`` (): not reshaped; perm (0, 2, 1, 3) on [1, 197, 12, 64]: no
    reshape); q scaled by a constant, k transposed (0, 1, 3, 2) (or (0, 2, 1)); scores, Softmax, times v."""
    shape = [1, 197, 12, 64] if len(perm) == 4 else ["L" if symbolic else 197, 12, 64]
    nodes, inits = [], [numpy_helper.from_array(np.array(0.125, np.float32), "sc")]
    if len(perm) == 3:
        inits.append(ints("shp", list(lead) + [197, 64]))
    for c in "qkv":
        reshaped = len(perm) == 3 and lead
        nodes += [n("Relu", [c], [c + "r"], name="relu_" + c),
                  n("Transpose", [c + "r"], [c + "t" if reshaped else c + "h"], perm=list(perm), name="T" + c)]
        if reshaped:
            nodes.append(n("Reshape", [c + "t", "shp"], [c + "h"], name="R" + c))
    rank = 2 + len(lead) if len(perm) == 3 and lead else len(perm)
    nodes += [n("Transpose", ["kh"], ["kT"], perm=list(range(rank - 2)) + [rank - 1, rank - 2], name="KT"),
              n("Mul", ["qh", "sc"], ["qs"], name="scale"), n("MatMul", ["qs", "kT"], ["s"], name="scores"),
              n("Softmax", ["s"], ["p"], axis=-1, name="sm"), n("MatMul", ["p", "vh"], ["y"], name="pv")]
    return model(nodes, [vi(c, shape) for c in "qkv"], [vi("y", None)], inits)


def test_a_transpose_bringing_the_first_axis_to_a_products_rows_is_read_in_place_on_a_cpu(tmp_path):
    """ONNX Runtime's MatMul + Transpose fusion reads an operand whose Transpose moves its first axis next to its
    last ((1, 0, 2) on [197, 12, 64] per head, torchvision ViT's q.view(L, heads, d).transpose(0, 1)) in place (a
    FusedMatMul's transBatchA / transBatchB), also through a Reshape to [1, 12, 197, 64] that splits only the
    leading axis and composed with the key's (0, 1, 3, 2): so on a CPU profile no Transpose of the block runs a
    kernel (ViT-B/16 with its batch fixed: 85 Transpose kernels -> 49, ORT's 49). (0, 2, 1, 3) on [1, 197, 12, 64]
    (BERT's) is no such permutation: its three run; with the input dims symbolic the runtime keeps the Reshape
    after the Transpose and the three run; a GPU profile keeps its Transposes."""
    def transposes(m, name, hw="cpu-avx2"):
        rep = analyze(inspect_model(save(m, tmp_path, name)), load_profile(hw), Settings(fusion="typical"),
                      with_fixes=False)
        return sorted(c.layer.name for c in rep.score.layers
                      if c.layer.op_type == "Transpose" and c.layer.workload.launches)

    assert transposes(_heads(), "vit.onnx") == []
    assert transposes(_heads(lead=()), "direct.onnx") == []
    assert transposes(_heads(lead=(2, 6)), "split.onnx") == []
    assert transposes(_heads(perm=(0, 2, 1, 3)), "bert.onnx") == ["Tk", "Tq", "Tv"]
    assert transposes(_heads(symbolic=True), "sym.onnx") == ["Tk", "Tq", "Tv"]
    assert transposes(_heads(), "gpu.onnx", "v100") == ["Tk", "Tq", "Tv"]


def test_the_runtime_reads_such_transposes_in_place(tmp_path):
    """ONNX Runtime 1.32's optimised graphs of the models above."""
    from helpers import ort_op_types

    assert "Transpose" not in ort_op_types(_heads(), tmp_path)
    assert "Transpose" not in ort_op_types(_heads(lead=()), tmp_path)
    assert "Transpose" not in ort_op_types(_heads(lead=(2, 6)), tmp_path)
    assert ort_op_types(_heads(perm=(0, 2, 1, 3)), tmp_path).count("Transpose") == 3
    assert ort_op_types(_heads(symbolic=True), tmp_path).count("Transpose") == 3


def _scaled_product(op="Mul", const=(), bias=False):
    """[12, 49, 32] @ [12, 32, 64] (two computed operands; with ``bias``: [49, 32] @ a [32, 64] weight + a [64]
    bias), then ``op`` with a constant of shape ``const`` (0.5 everywhere), then a Relu."""
    inits = [numpy_helper.from_array(np.full(const, 0.5, np.float32), "c")]
    if bias:
        nodes = [n("MatMul", ["a", "w"], ["m0"], name="mm"), n("Add", ["m0", "b"], ["m"], name="bias")]
        inits += [weight("w", [32, 64]), weight("b", [64])]
        inputs = [vi("a", [49, 32])]
    else:
        nodes = [n("MatMul", ["a", "b"], ["m"], name="mm")]
        inputs = [vi("a", [12, 49, 32]), vi("b", [12, 32, 64])]
    nodes += [n(op, ["m", "c"], ["s"], name="op"), n("Relu", ["s"], ["y"], name="relu")]
    return model(nodes, inputs, [vi("y", None)], inits)


_SCALED = {"scalar": dict(), "scalar_111": dict(const=(1, 1, 1)), "div": dict(op="Div"),
           "vector": dict(const=(64,)), "per_head": dict(const=(12, 1, 1)), "sub": dict(op="Sub"),
           "gemm": dict(bias=True)}


def test_a_product_takes_only_a_scale_by_one_value_on_a_cpu(tmp_path):
    """ONNX Runtime's CPU provider folds a MatMul's output scale into the product only when it is one value (times
    or divided by a scalar, a [1, 1, 1]: the FusedMatMul's alpha); times a [64] vector or a [12, 1, 1] per-head scale
    (Swin V2's logit scale: 12 Mul kernels dnnperf had folded), minus a scalar, or a scale after the bias that made
    the MatMul a Gemm runs as a kernel of its own. The Relu after a MatMul with no bias is always a kernel."""
    def ops(kind):
        rep = analyze(inspect_model(save(_scaled_product(**_SCALED[kind]), tmp_path, kind + ".onnx")),
                      load_profile("cpu-avx2"), Settings(fusion="typical"), with_fixes=False)
        return [c.layer.op_type for c in rep.score.layers if c.layer.workload.launches]

    for kind in ("scalar", "scalar_111"):
        assert ops(kind) == ["MatMul+Mul", "Relu"], kind
    assert ops("div") == ["MatMul+Div", "Relu"]
    for kind, op in (("vector", "Mul"), ("per_head", "Mul"), ("sub", "Sub")):
        assert ops(kind) == ["MatMul", op, "Relu"], kind
    assert ops("gemm") == ["MatMul+Add", "Mul", "Relu"]


def test_the_runtime_folds_only_a_scale_by_one_value(tmp_path):
    """ONNX Runtime 1.32's optimised graphs of the models above."""
    from helpers import ort_op_types

    folded, apart = ["FusedMatMul", "Relu"], ["MatMul", "Mul", "Relu"]
    want = {"scalar": folded, "scalar_111": folded, "div": folded, "vector": apart, "per_head": apart,
            "sub": ["MatMul", "Sub", "Relu"], "gemm": ["Gemm", "Mul", "Relu"]}
    for kind, ops in want.items():
        assert ort_op_types(_scaled_product(**_SCALED[kind]), tmp_path) == ops, kind


def _swap_split_swap(xs, p, shape, q, symbolic=False):
    """Relu, Transpose ``p``, Reshape to ``shape``, Transpose ``q``, Relu (MaxViT's departition: (0, 2, 1, 3) on
    [1, 64, 49, 64], Reshape to [1, 7, 7, 8, 8, 64], (0, 5, 1, 3, 2, 4))."""
    nodes = [n("Relu", ["x"], ["xr"], name="relu"), n("Transpose", ["xr"], ["y"], perm=list(p), name="T1"),
             n("Reshape", ["y", "s"], ["z"], name="R"), n("Transpose", ["z"], ["w"], perm=list(q), name="T2"),
             n("Relu", ["w"], ["o"], name="relu2")]
    return model(nodes, [vi("x", ["N"] + list(xs[1:]) if symbolic else list(xs))], [vi("o", None)],
                 [ints("s", [-1 if symbolic else shape[0]] + list(shape[1:]))])


_MAXVIT = ((1, 64, 49, 64), (0, 2, 1, 3), (1, 7, 7, 8, 8, 64), (0, 5, 1, 3, 2, 4))
_SPLIT_ONE = ((2, 12, 64), (1, 0, 2), (12, 2, 8, 8), (0, 2, 1, 3))
_MERGE = ((1, 7, 7, 8, 8, 64), (0, 2, 4, 3, 5, 1), (1, 49, 64, 64), (0, 2, 1, 3))


def test_two_transposes_around_a_splitting_reshape_are_one_kernel_on_a_cpu(tmp_path):
    """ONNX Runtime's transpose optimizer reshapes the first Transpose's input instead when the Reshape after it
    only splits axes, and composes the two Transposes into one: MaxViT's departition (13 of its Transpose kernels)
    becomes one Transpose (0, 5, 3, 1, 4, 2) of [1, 8, 8, 7, 7, 64]. On a CPU profile the first runs no kernel and
    the second's layer is that transpose: 1 x 64 x 49 x 64 floats, 802,816 bytes each way. A Reshape that merges
    axes, or a symbolic batch, keeps both."""
    from dnnperf.rewrites import pushed_transposes

    def kernels(case, name, **kw):
        rep = analyze(inspect_model(save(_swap_split_swap(*case, **kw), tmp_path, name)), load_profile("cpu-avx2"),
                      Settings(fusion="typical"), with_fixes=False)
        return {c.layer.name: c.layer.workload for c in rep.score.layers
                if c.layer.op_type == "Transpose" and c.layer.workload.launches}

    got = kernels(_MAXVIT, "maxvit.onnx")
    assert list(got) == ["T2"] and got["T2"].bytes_written == 64 * 49 * 64 * 4
    g = inspect_model(save(_swap_split_swap(*_MAXVIT), tmp_path, "m.onnx")).graph
    assert pushed_transposes(g) == {"T1": [], "T2": [((1, 8, 8, 7, 7, 64), [0, 5, 3, 1, 4, 2])]}
    g = inspect_model(save(_swap_split_swap(*_SPLIT_ONE), tmp_path, "s.onnx")).graph
    assert pushed_transposes(g) == {"T1": [], "T2": [((2, 12, 8, 8), [1, 2, 0, 3])]}
    assert list(kernels(_MERGE, "merge.onnx")) == ["T1", "T2"]
    assert list(kernels(_MAXVIT, "sym.onnx", symbolic=True)) == ["T1", "T2"]


def test_the_runtime_composes_the_transposes_around_a_splitting_reshape(tmp_path):
    """ONNX Runtime 1.32's optimised graphs of the models above: the composed permutations dnnperf computes."""
    import onnx

    from helpers import ort_op_types

    def transposes(case, **kw):
        assert ort_op_types(_swap_split_swap(*case, **kw), tmp_path)
        g = onnx.load(str(tmp_path / "ort.onnx")).graph
        return [list(a.ints) for node in g.node if node.op_type == "Transpose" for a in node.attribute]

    assert transposes(_MAXVIT) == [[0, 5, 3, 1, 4, 2]]
    assert transposes(_SPLIT_ONE) == [[1, 2, 0, 3]]
    assert len(transposes(_MERGE)) == 2
    assert len(transposes(_MAXVIT, symbolic=True)) == 2


def test_a_16_bit_operands_transpose_runs_on_a_cpu(tmp_path):
    """ONNX Runtime's CPU provider (no fp16 arithmetic on this x86) keeps the batch Transpose of an fp16 model: its
    optimised graph of Relu -> Transpose (1, 0, 2) -> MatMul in fp16 is Cast, Cast, Relu, Transpose, MatMul, Cast
    (in fp32 and fp64: Relu, FusedMatMul)."""
    from onnx import TensorProto

    from helpers import ort_op_types

    def heads(dtype):
        nodes = [n("Relu", ["x"], ["xr"], name="relu"), n("Transpose", ["xr"], ["t"], perm=[1, 0, 2], name="T"),
                 n("MatMul", ["t", "w"], ["y"], name="mm")]
        return model(nodes, [vi("x", [197, 12, 64], dtype), vi("w", [12, 64, 197], dtype)], [vi("y", None, dtype)])

    for dtype, runs in ((TensorProto.FLOAT16, True), (TensorProto.FLOAT, False), (TensorProto.DOUBLE, False)):
        rep = analyze(inspect_model(save(heads(dtype), tmp_path, f"h{dtype}.onnx")), load_profile("cpu-avx2"),
                      Settings(fusion="typical"), with_fixes=False)
        assert any(c.layer.name == "T" and c.layer.workload.launches for c in rep.score.layers) == runs, dtype
    assert "Transpose" in ort_op_types(heads(TensorProto.FLOAT16), tmp_path)
    assert "Transpose" not in ort_op_types(heads(TensorProto.FLOAT), tmp_path)
