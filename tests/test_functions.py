"""Ops ONNX Runtime's CPU provider has no kernel for and runs as their ONNX function bodies, in any
precision (dnnperf/functions.py): each body node a kernel of its own."""

import collections

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from dnnperf.api import analyze, inspect_model
from dnnperf.hardware import load_profile
from dnnperf.scoring import Settings
from helpers import modelled_ort, ort_op_types, save


def _one_op(op, shape, opset, inits=(), **attrs):
    ins = ["x"] + [t.name for t in inits]
    g = helper.make_graph([helper.make_node(op, ins, ["y"], name="op", **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _layer(m, tmp_path, hw="cpu-avx2"):
    rep = analyze(inspect_model(save(m, tmp_path)), load_profile(hw), Settings(fusion="typical"), with_fixes=False)
    return next(c.layer for c in rep.score.layers if c.layer.nodes == ("op",))


def test_a_mish_runs_as_softplus_tanh_and_mul_on_a_cpu_and_as_one_kernel_on_a_gpu(tmp_path):
    """ONNX Runtime 1.32 has no Mish kernel: its optimised graph holds the body's three nodes, each a pass over
    the tensor. By hand, n = 64 * 56 * 56 fp32 elements: Softplus and Tanh read and write 4n bytes each, the
    Mul reads its two operands (4n each) and writes 4n: 28n in all, where the one op moves 8n."""
    m = _one_op("Mish", (1, 64, 56, 56), 18)
    assert ort_op_types(m, tmp_path) == ["Softplus", "Tanh", "Mul"]
    n = 64 * 56 * 56
    w = _layer(m, tmp_path).workload
    assert [(op, k) for op, _, k in w.parts] == [("Softplus", 1), ("Tanh", 1), ("Mul", 1)]
    assert w.bytes_total == 28 * n
    assert "function body" in w.note
    gpu = _layer(m, tmp_path, "t4").workload  # a GPU framework's Mish is one kernel
    assert not gpu.parts and gpu.bytes_total == 8 * n


def test_group_normalization_runs_its_body_of_seven_passes_and_its_shape_kernels(tmp_path):
    """A GroupNormalization (opset 18) in ONNX Runtime's optimised graph is its function body: 25 nodes here.
    dnnperf's layer runs as many kernels: 11 of arithmetic and 14 of shape arithmetic (dispatches). By hand,
    n = 16 * 8 * 8 elements in G = 4 groups: the square, the deviation, the division, the scale and the shift
    write the whole tensor (5n floats), the two means, the mean's square, the variance, + epsilon and the
    square root one value per group (6G)."""
    g, n = 4, 16 * 8 * 8
    params = [numpy_helper.from_array(np.ones(g, np.float32), "s"),
              numpy_helper.from_array(np.zeros(g, np.float32), "b")]
    m = _one_op("GroupNormalization", (1, 16, 8, 8), 18, params, num_groups=g)
    ort = collections.Counter(ort_op_types(m, tmp_path))
    w = _layer(m, tmp_path).workload
    ours = collections.Counter()
    for op, _, k in w.parts:
        ours[op] += k
    assert sum(ours.values()) == sum(ort.values()) == 25
    for op in ("ReduceMean", "Mul", "Sub", "Add", "Sqrt"):  # the arithmetic, node for node
        assert ours[op] == ort[op], op
    assert w.bytes_written == 4 * (5 * n + 6 * g)
    assert "14 kernels of shape arithmetic" in w.note


def test_hardswish_alone_is_two_kernels_and_after_a_convolution_its_epilogue(tmp_path):
    """Alone, ONNX Runtime runs a HardSwish as HardSigmoid and Mul; between two convolutions it folds it into
    the first (its blocked Conv with activation HardSwish): one layer, no parts."""
    m = _one_op("HardSwish", (1, 32, 8, 8), 14)
    assert ort_op_types(m, tmp_path) == ["HardSigmoid", "Mul"]
    assert [op for op, _, _ in _layer(m, tmp_path).workload.parts] == ["HardSigmoid", "Mul"]
    w = numpy_helper.from_array(np.ones((32, 32, 1, 1), np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                           helper.make_node("HardSwish", ["c"], ["h"], name="op"),
                           helper.make_node("Conv", ["h", "w"], ["y"], name="conv2")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    conv = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    assert "HardSigmoid" not in ort_op_types(conv, tmp_path)
    rep = analyze(inspect_model(save(conv, tmp_path, "conv.onnx")), load_profile("cpu-avx2"),
                  Settings(fusion="typical"), with_fixes=False)
    fused = [c.layer for c in rep.score.layers if "op" in c.layer.nodes]
    assert len(fused) == 1 and fused[0].op_type == "Conv+HardSwish" and not fused[0].workload.parts


def test_a_slow_mish_gets_silu_as_its_fix(tmp_path):
    """Where the profile's Softplus runs at 1% of its vector rate (a scalar log and exp per element, as
    calibrate times ONNX Runtime's), the Mish layer's fix is SiLU, two vectorised kernels, and it saves most
    of the layer's time."""
    import yaml

    from dnnperf.hardware import profiles_dir

    with open(f"{profiles_dir()}/cpu-avx2.yaml", encoding="utf-8") as fh:
        prof = yaml.safe_load(fh)
    prof.update(name="slow-softplus", op_efficiency={"Softplus": 0.01})
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(prof), encoding="utf-8")
    m = _one_op("Mish", (1, 64, 56, 56), 18)
    rep = analyze(inspect_model(save(m, tmp_path)), load_profile(str(path)), Settings(fusion="typical"))
    c = next(c for c in rep.score.layers if c.layer.nodes == ("op",))
    silu = [f for f in c.fixes if "SiLU" in f["text"]]
    assert silu and silu[0]["id"] == "replace_slow_op"
    assert silu[0]["saving_s"] > 0.8 * c.time_s


def test_the_kernels_of_a_group_normalizations_body_are_its_layer(tmp_path):
    """ONNX Runtime's profile of a GroupNormalization names each of its body's 25 kernels after the node it
    made ('ReduceMean_10'...): onnx builds that body for the node (its schema gives none without the node's
    attributes and input types), so validate maps all 25 to the layer and leaves none unmatched."""
    modelled_ort()
    from dnnperf.measure.ort import feeds_for, profiled_kernels
    from dnnperf.measure.validate import map_kernels

    g = 4
    params = [numpy_helper.from_array(np.ones(g, np.float32), "s"),
              numpy_helper.from_array(np.zeros(g, np.float32), "b")]
    m = _one_op("GroupNormalization", (1, 16, 8, 8), 18, params, num_groups=g)
    insp = inspect_model(save(m, tmp_path))
    kernels = profiled_kernels(m.SerializeToString(), feeds_for(insp.graph), 1, runs=2, warmup=1)
    assert len(kernels) == 25
    layers = [c.layer for c in analyze(insp, load_profile("cpu-avx2"), Settings(fusion="typical")).score.layers]
    measured, unmatched = map_kernels(kernels, insp.graph, layers)
    assert not unmatched and list(measured) == ["op"]


@pytest.mark.parametrize("opset,readers,copied", [(21, 2, True), (21, 1, False), (18, 2, False)])
def test_a_group_normalization_21_copies_an_input_something_else_reads(tmp_path, opset, readers, copied):
    """GroupNormalization-21's body first casts its input to the stash type (float32: the type it has). ONNX Runtime
    runs that Cast in place where nothing else reads the input, and copies the tensor where something does (a
    residual block's input, read again by its skip path): its profile of [1, 320, 64, 64] after a Relu, 4 us
    alone against 293 us with an Add reading the Relu too. So the layer gains one pass of 4 n bytes read and 4 n
    written (n = 16 x 8 x 8) in that case only; opset 18's body has no such cast."""
    g = 4
    c = 16 if opset >= 21 else g
    params = [numpy_helper.from_array(np.ones(c, np.float32), "s"),
              numpy_helper.from_array(np.zeros(c, np.float32), "b")]
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("GroupNormalization", ["r", "s", "b"], ["n"], name="op", num_groups=g)]
    nodes.append(helper.make_node("Add", ["n", "r"], ["y"], name="skip") if readers == 2
                 else helper.make_node("Sigmoid", ["n"], ["y"], name="act"))
    m = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                         [1, 16, 8, 8])],
                                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], params),
                          opset_imports=[helper.make_opsetid("", opset)])
    w = _layer(m, tmp_path).workload
    casts = [pw for op, pw, _ in w.parts if op == "Cast"]
    n = 16 * 8 * 8
    assert [(pw.act_bytes_read, pw.bytes_written) for pw in casts] == ([(4 * n, 4 * n)] if copied else [])
    assert sum(k for _, _, k in w.parts) == 11 + (14 if opset == 18 else 18)  # ORT's 25 / 29 kernels, either way
