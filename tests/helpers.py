"""Tiny ONNX graphs built in the tests with onnx.helper (expected numbers are computed by hand)."""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(ROOT, "sample_models")

F32 = T.FLOAT


def vi(name, shape, dtype=F32):
    return helper.make_tensor_value_info(name, dtype, shape)


def weight(name, shape, dtype=F32):
    """An initializer with real (zero) data."""
    n = int(np.prod(shape)) if shape else 1
    np_dtype = {T.FLOAT: np.float32, T.FLOAT16: np.float16, T.INT8: np.int8, T.INT64: np.int64,
                T.UINT8: np.uint8, T.INT32: np.int32}[dtype]
    return onnx.numpy_helper.from_array(np.zeros(shape, dtype=np_dtype).reshape(shape) if n else
                                        np.zeros(shape, dtype=np_dtype), name)


def ints(name, values):
    return onnx.numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def model(nodes, inputs, outputs, inits=(), opset=17, extra_opsets=(), functions=()):
    g = helper.make_graph(nodes, "test", inputs, outputs, list(inits))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(g, opset_imports=ops, functions=list(functions))
    m.ir_version = 10 if opset >= 21 else 8
    return m


def save(m, tmp_path, name="m.onnx") -> str:
    p = os.path.join(str(tmp_path), name)
    with open(p, "wb") as fh:
        fh.write(m.SerializeToString())
    return p


def conv_model(cin, cout, h, w, k, pads=None, group=1, dtype=F32, strides=None, dilations=None, auto_pad=None,
               relu=False, batch=1, name="conv"):
    attrs = {}
    if pads is not None:
        attrs["pads"] = pads
    if strides is not None:
        attrs["strides"] = strides
    if dilations is not None:
        attrs["dilations"] = dilations
    if auto_pad is not None:
        attrs["auto_pad"] = auto_pad
    if group != 1:
        attrs["group"] = group
    nodes = [helper.make_node("Conv", ["x", "w"], ["c" if relu else "y"], name=name, **attrs)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"], name="relu"))
    return model(nodes, [vi("x", [batch, cin, h, w], dtype)], [vi("y", None, dtype)],
                 [weight("w", [cout, cin // group, k, k], dtype)])


def chain_1x1(channels, h, w, n_layers):
    """n 1x1 convs of channels -> channels: equal MACs to one 3x3 conv when n = 9."""
    nodes = []
    inits = []
    prev = "x"
    for i in range(n_layers):
        out = "y" if i == n_layers - 1 else f"t{i}"
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [out], name=f"pw{i}"))
        inits.append(weight(f"w{i}", [channels, channels, 1, 1]))
        prev = out
    return model(nodes, [vi("x", [1, channels, h, w])], [vi("y", None)], inits)


def spy_opens(monkeypatch) -> list:
    """Record every path opened through open(), io.open() and os.open() (external-data checks)."""
    import builtins
    import io

    opened: list = []
    real_open, real_io_open, real_os_open = builtins.open, io.open, os.open

    def wrap(real):
        def spy(f, *a, **k):
            opened.append(str(f))
            return real(f, *a, **k)

        return spy

    monkeypatch.setattr(builtins, "open", wrap(real_open))
    monkeypatch.setattr(io, "open", wrap(real_io_open))
    monkeypatch.setattr(os, "open", wrap(real_os_open))
    return opened


def sample_overrides(name: str, batch: int = 1, seq: int = 128):
    """The dims each sample model needs: sequence length for the transformers, one decode step at
    16 cached tokens for the KV-cache decoders."""
    from dnnperf.ir import ShapeOverrides

    if name.startswith(("gpt2", "bert")):
        return ShapeOverrides(batch=batch, dims=(("sequence_length", seq),))
    if name.startswith("tiny_llama"):
        dims = (("past_sequence_length", 16), ("sequence_length", 1))
        return ShapeOverrides(batch=batch, dims=dims + ((("total_sequence_length", 17),) if "genai" in name else ()))
    return ShapeOverrides(batch=batch)


def counted_loop_model():
    """A Loop run ``n`` times (a model input, so its count is unknown until given with --value), each
    iteration a 1x64 x 64x64 MatMul on its state: 4,096 MACs per iteration."""
    body = helper.make_graph([helper.make_node("MatMul", ["s_in", "w"], ["s_out"]),
                              helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
                             [vi("i", [], T.INT64), vi("c_in", [], T.BOOL), vi("s_in", [1, 64])],
                             [vi("c_out", [], T.BOOL), vi("s_out", [1, 64])])
    return model([helper.make_node("Loop", ["n", "c", "x"], ["y"], body=body)],
                 [vi("n", [], T.INT64), vi("c", [], T.BOOL), vi("x", [1, 64])], [vi("y", None)], [weight("w", [64, 64])])


def numpy_scalar(name, value, dtype=np.float32):
    """A scalar initializer (a quantisation scale or zero point)."""
    return onnx.numpy_helper.from_array(np.array(value, dtype=dtype), name)


# The ONNX Runtime release whose CPU provider dnnperf's CPU model describes: its graph optimiser's
# fusions and QDQ rules, the models it refuses, its kernels' channel blocks. A test that holds the model
# against what the installed runtime does is skipped on an older release, which fuses and refuses
# differently (of the tests that do, with 1.23, the last release for Python 3.10, 27 fail; with 1.24, 25;
# 1.28, 11; 1.30, 7; 1.32, none).
ORT_MODELLED = (1, 32)


def ort_version(ort) -> tuple[int, int]:
    return tuple(int(p) if p.isdigit() else 0 for p in ort.__version__.split(".")[:2])


def modelled_ort():
    """onnxruntime, when it is the release the CPU model describes or a later one; the test is skipped
    without onnxruntime or with an older release."""
    import pytest

    ort = pytest.importorskip("onnxruntime")
    if ort_version(ort) < ORT_MODELLED:
        pytest.skip(f"ONNX Runtime {ort.__version__} predates the release dnnperf's CPU model describes "
                    f"({'.'.join(map(str, ORT_MODELLED))}), whose optimiser fuses and refuses differently")
    return ort


def ort_op_types(m, tmp_path) -> list[str]:
    """The op types of ONNX Runtime's optimised graph of the model ``m`` on its CPU provider (the test is
    skipped without onnxruntime, or with a release older than the one the CPU model describes)."""
    ort = modelled_ort()
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "ort.onnx")
    so.log_severity_level = 3
    ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(str(tmp_path / "ort.onnx")).graph.node]
