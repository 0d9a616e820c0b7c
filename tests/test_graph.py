"""Loading: weightless, never opening external data, strip round trip, clear errors."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from dnnperf.api import inspect_model
from dnnperf.errors import DnnperfError
from dnnperf.ir import ShapeOverrides
from dnnperf.load import load_graph
from dnnperf.load.weights import strip_file
from helpers import SAMPLES, conv_model, model, save, spy_opens, vi


def test_strip_round_trip_analyses_identically(tmp_path):
    m = conv_model(16, 32, 20, 20, 3, pads=[1, 1, 1, 1], relu=True)
    full = save(m, tmp_path, "full.onnx")
    skel = str(tmp_path / "skel.onnx")
    info = strip_file(full, skel)
    assert info["weight_bytes_removed"] == 32 * 16 * 9 * 4
    assert os.path.getsize(skel) < os.path.getsize(full)
    a = inspect_model(full).totals()
    b = inspect_model(skel).totals()
    assert a == b
    # the skeleton is still loadable by onnx without external data
    onnx.load(skel, load_external_data=False)


def _external_model(tmp_path, location):
    m = conv_model(4, 8, 6, 6, 3)
    init = m.graph.initializer[0]
    init.ClearField("raw_data")
    init.ClearField("float_data")
    init.data_location = onnx.TensorProto.EXTERNAL
    e = init.external_data.add()
    e.key, e.value = "location", location
    return save(m, tmp_path)


@pytest.mark.parametrize("location", ["../../etc/passwd", "/etc/passwd", "weights.bin"])
def test_external_data_is_never_opened(tmp_path, monkeypatch, location):
    path = _external_model(tmp_path, location)
    opened = spy_opens(monkeypatch)
    insp = inspect_model(path)
    assert insp.rows[0].workload.macs == 8 * 16 * 4 * 9
    assert all("passwd" not in p and "weights.bin" not in p for p in opened), opened


@pytest.mark.parametrize("content,needle", [
    (b"", "empty"),
    (b"\x00\x01\x02 definitely not protobuf \xff\xfe" * 10, "not"),
])
def test_bad_files(tmp_path, content, needle):
    p = tmp_path / "bad.onnx"
    p.write_bytes(content)
    with pytest.raises(DnnperfError) as e:
        load_graph(str(p))
    assert needle in str(e.value)


def test_truncated_model(tmp_path):
    data = open(os.path.join(SAMPLES, "resnet50.onnx"), "rb").read()
    for cut in (10, 1000, len(data) // 2, len(data) - 7):
        p = tmp_path / f"t{cut}.onnx"
        p.write_bytes(data[:cut])
        with pytest.raises(DnnperfError):
            load_graph(str(p))


def test_missing_path_and_directory(tmp_path):
    with pytest.raises(DnnperfError, match="not found"):
        load_graph(str(tmp_path / "nope.onnx"))
    with pytest.raises(DnnperfError, match="directory"):
        load_graph(str(tmp_path))


def test_other_protobuf_type(tmp_path):
    t = onnx.numpy_helper.from_array(np.zeros((3,), np.float32), "t")
    p = tmp_path / "tensor.onnx"
    p.write_bytes(t.SerializeToString())
    with pytest.raises(DnnperfError):
        load_graph(str(p))


def test_future_opset(tmp_path):
    m = conv_model(1, 1, 4, 4, 1)
    m.opset_import[0].version = onnx.defs.onnx_opset_version() + 5
    with pytest.raises(DnnperfError, match="opset"):
        load_graph(save(m, tmp_path))


def test_unresolved_dims_error_names_symbol_and_flag(tmp_path):
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["batch", "seq", 8])], [vi("y", None)])
    with pytest.raises(DnnperfError) as e:
        load_graph(save(m, tmp_path))
    msg = str(e.value)
    assert "seq" in msg and "--dim seq=" in msg
    g = load_graph(save(m, tmp_path), ShapeOverrides(batch=2, dims=(("seq", 5),)))
    assert g.tensors["y"].shape == (2, 5, 8)
    g = load_graph(save(m, tmp_path), ShapeOverrides(input_shapes=(("x", (3, 4, 8)),)))
    assert g.tensors["y"].shape == (3, 4, 8)


def test_unnamed_dims_error_writes_the_flag_with_the_inputs_known_dims(tmp_path):
    """silero-vad's inputs are [?, ?] and [2, ?, 128] with no dim names: the hint was the generic
    '--input-shape NAME=1x3x224x224'. It now names each input with the dims the file gives (the batch
    taken as 1) and N where it gives none."""
    m = model([helper.make_node("Add", ["x", "s"], ["y"])], [vi("x", [None, None]), vi("s", [2, None, 128])],
              [vi("y", None)])
    with pytest.raises(DnnperfError) as e:
        load_graph(save(m, tmp_path))
    msg = str(e.value)
    assert msg.endswith("fix with --input-shape x=1xN --input-shape s=2xNx128"), msg


def test_a_long_list_of_open_dims_names_four_and_counts_the_rest(tmp_path):
    """A decoder with a KV cache has two cache inputs a layer: an 80-layer one left 'past' open in 160
    of them, and the error line named all 160 (10 KB, one line); the batch note named its 161 batch
    dims. Past six, both now name the first four and count the rest. Eight inputs [batch, past, 4]
    summed: the error names k0..k3 and '4 more (8 dims)'; given --dim past=3, the note names four batch
    dims and '4 more (8 inputs)'; six are all named."""
    ins = [f"k{i}" for i in range(8)]
    nodes = [helper.make_node("Sum", ins, ["y"])]
    m = model(nodes, [vi(n, ["batch", "past", 4]) for n in ins], [vi("y", None)])
    with pytest.raises(DnnperfError) as e:
        load_graph(save(m, tmp_path))
    msg = str(e.value)
    assert ("k0[1]='past', k1[1]='past', k2[1]='past', k3[1]='past' and 4 more (8 dims) — fix with --dim past=N"
            in msg), msg
    assert "k4[1]" not in msg
    insp = inspect_model(save(m, tmp_path), ShapeOverrides(dims=(("past", 3),)))
    assert insp.graph.tensors["y"].shape == (1, 3, 4)
    note = [w for w in insp.warnings if "unresolved: assumed 1" in w]
    assert note == ["batch dim k0[0]='batch', k1[0]='batch', k2[0]='batch', k3[0]='batch' and 4 more (8 inputs) "
                    "unresolved: assumed 1 (pass --batch N)"], insp.warnings
    # inputs whose open dims have no names: one --input-shape each, four written out
    m = model(nodes, [vi(n, [1, None, 4]) for n in ins], [vi("y", None)])
    with pytest.raises(DnnperfError) as e:
        load_graph(save(m, tmp_path))
    assert str(e.value).endswith("and 4 more (8 dims) — fix with --input-shape k0=1xNx4 --input-shape k1=1xNx4 "
                                 "--input-shape k2=1xNx4 --input-shape k3=1xNx4 (and one --input-shape for each "
                                 "of the 4 other inputs)"), str(e.value)
    m = model([helper.make_node("Sum", ins[:6], ["y"])], [vi(n, ["batch", "past", 4]) for n in ins[:6]],
              [vi("y", None)])
    with pytest.raises(DnnperfError) as e:
        load_graph(save(m, tmp_path))
    assert "k4[1]='past', k5[1]='past' — fix with --dim past=N" in str(e.value), str(e.value)


def test_a_negative_input_dim_is_a_dynamic_one(tmp_path):
    """Paddle2ONNX writes -1 for a dynamic dim (RapidOCR's PP-OCR classifier: x [-1, 3, ?, ?]), and
    ONNX Runtime runs such files; dnnperf called them malformed and stopped. A -1 is an unnamed dim:
    the batch one assumed 1 with a note, any other asked for (and given with --input-shape). Any
    other negative size stays malformed (tests/test_hostile.py)."""
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [-1, 3, -1, 8])], [vi("y", None)])
    with pytest.raises(DnnperfError) as e:
        load_graph(save(m, tmp_path))
    assert str(e.value).endswith("x[2]='?' — fix with --input-shape x=1x3xNx8"), str(e.value)
    g = load_graph(save(m, tmp_path), ShapeOverrides(input_shapes=(("x", (2, 3, 5, 8)),)))
    assert g.tensors["y"].shape == (2, 3, 5, 8)
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [-1, 8])], [vi("y", None)])
    insp = inspect_model(save(m, tmp_path))
    assert insp.graph.tensors["y"].shape == (1, 8)
    assert any("x[0]='?' unresolved: assumed 1" in w for w in insp.warnings)
    # its '?' dims are two dims, not one size given twice: --input-shape x=6x3x48x192 was refused as
    # "makes '?' 48 but ... makes it 192; the model declares both with the same size"
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [-1, 3, "?", "?"])], [vi("y", None)])
    with pytest.raises(DnnperfError) as e:
        load_graph(save(m, tmp_path))
    assert str(e.value).endswith("x[2]='?', x[3]='?' — fix with --input-shape x=1x3xNxN"), str(e.value)
    g = load_graph(save(m, tmp_path), ShapeOverrides(input_shapes=(("x", (6, 3, 48, 192)),)))
    assert g.tensors["y"].shape == (6, 3, 48, 192)
    # a weight with a negative dim is still malformed
    bad = model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [2, 8])], [vi("y", None)])
    bad.graph.initializer.append(helper.make_tensor("w", T.FLOAT, [8], [0.0] * 8))
    bad.graph.initializer[0].dims[0] = -8
    with pytest.raises(DnnperfError, match="negative dimension"):
        load_graph(save(bad, tmp_path))


def test_dim_for_unknown_symbol_is_rejected(tmp_path):
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["batch", 8])], [vi("y", None)])
    with pytest.raises(DnnperfError, match="no symbolic input dimension 'nope'"):
        load_graph(save(m, tmp_path), ShapeOverrides(dims=(("nope", 3),)))


def test_overflowing_dims(tmp_path):
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2**40, 2**40])], [vi("y", None)])
    with pytest.raises(DnnperfError, match="overflow"):
        load_graph(save(m, tmp_path))


def test_cycle_and_dangling(tmp_path):
    cyc = model([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
                [vi("x", [1])], [vi("a", None)])
    with pytest.raises(DnnperfError, match="cycle"):
        load_graph(save(cyc, tmp_path))
    dang = model([helper.make_node("Relu", ["ghost"], ["y"])], [vi("x", [1])], [vi("y", None)])
    with pytest.raises(DnnperfError, match="ghost"):
        load_graph(save(dang, tmp_path))


def test_folded_cast_keeps_the_target_dtype():
    """Shape arithmetic folded at load time: Cast(to=INT64) of [2.0, 3.0] is int64 [2, 3] (the dtype
    table by ONNX type number was once shadowed by the one by name, and every Cast folded to float32)."""
    import numpy as np
    from onnx import TensorProto, helper

    from dnnperf.load.fold import run_node

    out = run_node(helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT64), [np.array([2.0, 3.0], np.float32)],
                   [helper.make_opsetid("", 17)])[0]
    assert out.dtype == np.int64 and out.tolist() == [2, 3]


def _range_model(tail, out_shape):
    """n (a runtime int64 scalar) -> Range(0, n, 1) -> Cast -> ``tail`` -> y (declared ``out_shape``)."""
    nodes = [helper.make_node("Constant", [], ["zero"], value_int=0),
             helper.make_node("Constant", [], ["one"], value_int=1),
             helper.make_node("Range", ["zero", "n", "one"], ["r"]),
             helper.make_node("Cast", ["r"], ["rf"], to=onnx.TensorProto.FLOAT)] + tail
    return model(nodes, [vi("n", [], onnx.TensorProto.INT64), vi("b", [4])], [vi("y", out_shape)])


def test_a_declared_output_fixes_a_runtime_length_only_where_one_size_is_possible(tmp_path):
    """Range(0, n) times a scalar is [n]; the output is declared [6]: n = 6 is the only size that
    gives it, so the Range, the Cast and the Mul are [6]. Added to a [4] tensor instead, a [1] or
    a [4] would both give [4]: dnnperf leaves that unresolved (listed), it does not guess."""
    two = helper.make_node("Constant", [], ["two"], value_float=2.0)
    pinned = load_graph(save(_range_model([two, helper.make_node("Mul", ["rf", "two"], ["y"])], [6]), tmp_path))
    assert pinned.tensors["r"].shape == (6,) and pinned.tensors["rf"].shape == (6,)
    ambiguous = _range_model([helper.make_node("Add", ["rf", "b"], ["y"])], [4])
    insp = inspect_model(save(ambiguous, tmp_path, "amb.onnx"))
    assert insp.graph.tensors["r"].shape is None
    # the Range of unknown length with them (it was counted as a free shape op)
    assert {r.node.op_type for r in insp.unscored()} == {"Range", "Cast", "Add"}


def test_a_large_full_weight_file_is_read_without_its_payloads(tmp_path, monkeypatch):
    """Above 4 MiB the reader jumps over weight payloads: it reads a small part of the file, the
    shapes and MACs equal those of the same model in memory, and every cut of the file is refused."""
    from dnnperf.load import read

    # 64 x 4096 -> 4096 x 64 float32 weights: 2 x 1 MiB, plus a 3 MiB bias-like tensor in between
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [8, 4096])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [8, 4096])
    rng = np.random.default_rng(0)
    w1 = onnx.numpy_helper.from_array(rng.standard_normal((4096, 64)).astype(np.float32), "w1")
    w2 = onnx.numpy_helper.from_array(rng.standard_normal((64, 4096)).astype(np.float32), "w2")
    b = onnx.numpy_helper.from_array(rng.standard_normal((3, 1 << 18)).astype(np.float32), "unused")
    shape = onnx.numpy_helper.from_array(np.array([8, 4096], np.int64), "shape")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["m"]),
                           helper.make_node("Reshape", ["m", "shape"], ["y"])], "g", [x], [y], [w1, b, w2, shape])
    p = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path, "full.onnx")
    size = os.path.getsize(p)
    assert size > 5 * 2**20
    read_bytes = []
    real = read._FileBytes._read
    monkeypatch.setattr(read._FileBytes, "_read", lambda self, start, n: read_bytes.append(n) or real(self, start, n))
    totals = inspect_model(p).totals()
    # two products: 8 x 4096 x 64 MACs each, by hand
    assert totals["macs"] == 2 * 8 * 4096 * 64
    assert sum(read_bytes) < 64 * 1024 * 5  # a few windows of headers, not the 5 MiB of payloads
    graph = load_graph(p)
    assert graph.tensors["w1"].shape == (4096, 64) and graph.values["shape"].tolist() == [8, 4096]
    data = open(p, "rb").read()
    for cut in (50, size // 3, size // 2, size - 9):
        t = tmp_path / f"cut{cut}.onnx"
        t.write_bytes(data[:cut])
        with pytest.raises(DnnperfError, match="not a readable ONNX model|truncated"):
            load_graph(str(t))


def test_an_unoptimised_dynamo_zero_bias_is_folded_not_run(tmp_path):
    """torch.onnx.export(dynamo=True, optimize=False) gives every bias-free convolution a zero bias built
    at run time from constants: Shape(weight)[:1] -> Expand(CastLike(0, activation)). CastLike reads
    the activation for its element type alone, so the bias is a constant a runtime folds once; it
    was costed as two kernels per convolution (ResNet-50: 280 launches instead of 174)."""
    from onnx import TensorProto as T

    from helpers import weight

    nodes = [
        helper.make_node("Shape", ["w"], ["cout"], name="shape", start=0, end=1),
        helper.make_node("Constant", [], ["one"], name="one", value_ints=[1]),
        helper.make_node("Expand", ["cout", "one"], ["bshape"], name="bshape"),
        helper.make_node("Constant", [], ["zero"], name="zero", value=helper.make_tensor("z", T.FLOAT, [], [0.0])),
        helper.make_node("CastLike", ["zero", "x"], ["zero_x"], name="castlike"),
        helper.make_node("Expand", ["zero_x", "bshape"], ["bias"], name="expand"),
        helper.make_node("Conv", ["x", "w", "bias"], ["y"], name="conv", pads=[1, 1, 1, 1]),
    ]
    m = model(nodes, [vi("x", [1, 8, 16, 16])], [vi("y", None)], [weight("w", [8, 8, 3, 3])])
    insp = inspect_model(save(m, tmp_path))
    run = [r.node.name for r in insp.rows if r.workload is not None and r.workload.launches > 0]
    assert run == ["conv"], run
    conv = next(r for r in insp.rows if r.node.name == "conv")
    assert conv.workload.macs == 16 * 16 * 8 * 8 * 9
