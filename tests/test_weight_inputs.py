"""Exports without their parameters (``torch.onnx.export(..., export_params=False)``): the weights are
model inputs. They are read only where an op takes its parameters; dnnperf treats them as weights, so
``--batch`` leaves them alone and they are not counted as data transferred each inference."""

from __future__ import annotations

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

