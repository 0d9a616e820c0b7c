"""Exports without their parameters (``torch.onnx.export(..., export_params=False)``): the weights are
model inputs. They are read only where an op takes its parameters; dnnperf treats them as weights, so
``--batch`` leaves them alone and they are not counted as data transferred each inference."""

from __future__ import annotations

import onnx
from onnx import helper

from dnnperf.api import inspect_model
from dnnperf.ir import ShapeOverrides
from helpers import model, save, vi


def _noparams(extra_use: bool = False):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "beta", "mean", "var"], ["y"])]
    outputs = [vi("y", None)]
    if extra_use:  # the bias also read as data: not a parameter-only input
        nodes.append(helper.make_node("Add", ["b", "b"], ["bb"]))
        outputs.append(vi("bb", None))
    inputs = [vi("x", [1, 3, 8, 8]), vi("w", [16, 3, 3, 3]), vi("b", [16])] + [vi(n, [16]) for n in ("g", "beta", "mean", "var")]
    return model(nodes, inputs, outputs)


def test_parameter_inputs_are_weights_and_keep_their_shape_under_batch(tmp_path):
    path = save(_noparams(), tmp_path)
    one = inspect_model(path, ShapeOverrides(batch=1))
    two = inspect_model(path, ShapeOverrides(batch=2))
    assert two.graph.tensors["w"].shape == (16, 3, 3, 3)  # --batch 2 made it [2, 3, 3, 3] and refused
    assert two.graph.tensors["x"].shape == (2, 3, 8, 8)
    conv = next(r for r in two.rows if r.node.op_type == "Conv")
    assert conv.workload.macs == 2 * 16 * 8 * 8 * 3 * 9
    # 16 x 3 x 3 x 3 filters + 16 biases, fp32: weights, not input bytes
    assert conv.workload.weight_bytes == (16 * 27 + 16) * 4
    assert one.input_bytes == 1 * 3 * 8 * 8 * 4 and two.input_bytes == 2 * 3 * 8 * 8 * 4
    assert any("read only as parameters" in w and "export_params=False" in w for w in one.warnings)


def test_an_input_also_read_as_data_stays_an_input(tmp_path):
    """The bias ``b`` is read by an Add too, so it stays a data input; ``--batch 1`` would then make it
    [1], one bias value for 16 output channels, which contradicts the Conv (refused, naming it)."""
    import pytest

    from dnnperf.errors import DnnperfError

    path = save(_noparams(extra_use=True), tmp_path)
    with pytest.raises(DnnperfError, match=r"--batch 1 contradicts the model: node 'Conv_0' \(Conv\): bias \[1\]"):
        inspect_model(path, ShapeOverrides(batch=1))
    insp = inspect_model(path, ShapeOverrides())
    assert "b" in insp.graph.inputs and "w" not in insp.graph.inputs
    note = next(w for w in insp.warnings if "read only as parameters" in w)
    assert note.startswith("5 model input(s)")  # w, g, beta, mean, var



def test_sparse_initializers_are_weights(tmp_path):
    """A weight stored sparse (values and indices of a [4, 8] tensor: GraphProto.sparse_initializer) in
    the main graph or in a branch was not read: the model, which ONNX Runtime runs, was refused as
    malformed (a MatMul reading a tensor nobody produces). It is the dense [4, 8] weight the runtime
    builds from it at load: 2 x 4 x 8 = 64 MACs, 4 x 8 x 4 B = 128 B read."""
    import numpy as np
    from onnx import TensorProto as T, numpy_helper

    def sparse(name):
        return helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0, 2.0], np.float32), name),
                                         numpy_helper.from_array(np.array([0, 5], np.int64), name + "_i"), [4, 8])

    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [vi("x", [2, 4])], [vi("y", [2, 8])],
                          sparse_initializer=[sparse("w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    row = inspect_model(save(m, tmp_path)).rows[0]
    assert (row.workload.macs, row.workload.weight_bytes) == (64, 128)
    then = helper.make_graph([helper.make_node("MatMul", ["x", "wb"], ["o"])], "then", [], [vi("o", [2, 8])],
                             sparse_initializer=[sparse("wb")])
    other = helper.make_graph([helper.make_node("Identity", ["z"], ["o2"])], "else", [], [vi("o2", [2, 8])])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
              [vi("x", [2, 4]), vi("z", [2, 8]), vi("c", [], T.BOOL)], [vi("y", [2, 8])])
    insp = inspect_model(save(m, tmp_path, "if.onnx"), ShapeOverrides(values=(("c", (1.0,)),)))
    assert insp.coverage()["complete"] and sum(r.workload.macs for r in insp.rows) == 64
    # strip writes it as a declared dense weight: its 8 B of values and 16 B of indices removed
    from dnnperf.load.weights import skeleton_of

    data, info = skeleton_of(save(m, tmp_path, "if.onnx"))
    sk = onnx.load_from_string(data)
    assert info["weight_bytes_removed"] == 8 + 16
    assert not len(sk.graph.node[0].attribute[0].g.sparse_initializer)
