"""Design-space tools: LUT rows, width advice and diffs against hand-computed tile fit."""

import csv
import io
import json

import pytest
from onnx import TensorProto as T
from onnx import helper
from typer.testing import CliRunner

from dnnperf.cli import app
from helpers import chain_1x1, conv_model, model, save, vi, weight

runner = CliRunner()


def test_lut_row_by_hand(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("ops: [conv]\nchannels_in: [32]\nchannels_out: [64]\nkernel: [3]\nstride: [1]\n"
                     "resolution: [56]\nbatch: [1]\nprecision: [fp16]\n")
    r = runner.invoke(app, ["lut", "--hw", "v100", "--space", str(space)])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert len(rows) == 1
    row = rows[0]
    assert row["key"] == "conv|32|64|3|1|56|1|1|fp16"
    assert int(row["macs"]) == 56 * 56 * 64 * 32 * 9
    # 115.6 MOPs would take 0.925 us on the tensor cores, but on Volta cuDNN reorders NCHW to NHWC and
    # back around a tensor-core convolution: 3 kernels, each at least the 5 us device floor, and an
    # eager runtime's 3 x 5 us of host launches running alongside: max(15 us, 15 us) = 15 us
    assert float(row["latency_s"]) == pytest.approx(3 * 5e-6, rel=1e-4)
    assert row["cause"] != "compute"


def test_lut_space_and_json(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("ops: [conv, dwconv, pwconv, mbconv, linear]\nchannels_in: [16, 32]\nchannels_out: [16, 32]\n"
                     "kernel: [3, 5]\nstride: [1, 2]\nresolution: [28]\nexpansion: [1, 6]\nbatch: [1, 8]\n"
                     "precision: [fp32, fp16]\n")
    r = runner.invoke(app, ["lut", "--hw", "t4", "--space", str(space), "-f", "json"])
    d = json.loads(r.stdout)
    keys = [x["key"] for x in d["rows"]]
    assert len(keys) == len(set(keys))  # a NAS code can index it directly
    assert all(x["latency_s"] > 0 for x in d["rows"])
    # 8 samples take at most 8x one sample
    one = {x["key"]: x["latency_s"] for x in d["rows"]}
    assert one["conv|32|32|3|1|28|1|8|fp16"] <= 8 * one["conv|32|32|3|1|28|1|1|fp16"]


def test_lut_keys_stay_unique_and_missing_configurations_are_named(tmp_path):
    """A value listed twice (channels_in [16, 16]) gave two rows with one key, and configurations whose
    window is wider than the map (9 x 9 on 4 x 4) were left out without a word. 2 ops x 1 cin x 2 cout x
    2 kernels x 2 resolutions: conv 2 x 2 x 2 = 8 minus the two 9 x 9 on 4 x 4 = 6 rows; dwconv (cout
    is cin) 2 x 2 = 4 minus one = 3; 3 configurations named in a note."""
    space = tmp_path / "space.yaml"
    space.write_text("ops: [conv, dwconv]\nchannels_in: [16, 16]\nchannels_out: [32, 64]\nkernel: [9, 3]\n"
                     "stride: [1]\nresolution: [4, 56]\n")
    r = runner.invoke(app, ["lut", "--hw", "v100", "--space", str(space), "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    keys = [x["key"] for x in d["rows"]]
    assert len(keys) == len(set(keys)) == 9
    said = [w for w in d["warnings"] if "no row" in w]
    assert len(said) == 1 and said[0].startswith("3 configuration(s)") and "9 x 9 window" in said[0]
    assert "9 x 9 window" in r.stderr


def test_lut_from_model():
    import os

    from helpers import SAMPLES

    r = runner.invoke(app, ["lut", "--hw", "v100", "--from", os.path.join(SAMPLES, "squeezenet1_1.onnx")])
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert sum(int(x["macs"]) for x in rows) == 349_151_936


@pytest.mark.parametrize("bad,needle", [("ops: [teleport]\n", "teleport"), ("kernel: [0]\n", "kernel"),
                                        ("colour: [1]\n", "colour")])
def test_bad_space(tmp_path, bad, needle):
    space = tmp_path / "space.yaml"
    space.write_text(bad)
    r = runner.invoke(app, ["lut", "--space", str(space)])
    assert r.exit_code == 2 and needle in r.stderr


def test_lut_space_precisions_follow_the_devices_units(tmp_path):
    """A space precision the device does not run is refused, naming those it runs (int4 rows on a
    V100 were costed at some other unit's rate without a word); tf32 on a device without a tf32
    mode is fp32 math, said so in the JSON's warnings, and its row costs exactly the fp32 row."""
    space = tmp_path / "space.yaml"
    space.write_text("precision: [fp32, int4]\n")
    r = runner.invoke(app, ["lut", "--hw", "v100", "--space", str(space)])
    assert r.exit_code == 2 and "int4" in r.stderr and "fp16, int8" in r.stderr and not r.stdout
    assert "Traceback" not in r.output
    space.write_text("precision: [fp32, tf32]\n")
    r = runner.invoke(app, ["lut", "--hw", "v100", "--space", str(space), "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    by = {x["precision"]: x for x in d["rows"]}
    assert by["tf32"]["latency_s"] == by["fp32"]["latency_s"]
    assert any("tf32" in w and "fp32" in w for w in d["warnings"])
    r = runner.invoke(app, ["lut", "--hw", "a100", "--space", str(space), "-f", "json"])
    d = json.loads(r.stdout)
    by = {x["precision"]: x for x in d["rows"]}
    assert by["tf32"]["latency_s"] != by["fp32"]["latency_s"] and d["warnings"] == []  # A100 has tf32 tensor cores


def test_lut_space_marks_configurations_the_device_cannot_hold(tmp_path):
    """A configuration whose one layer outgrows the device's memory is timed, but the table says so
    (in JSON warnings and on stderr): 512 x 512 channels at 1024 x 1024 and batch 64 is 2 x 64 x 512 x
    1024^2 x 4 bytes = 275 GB of input and output against a T4's 16 GB; at batch 1, 4.3 GB, fits."""
    space = tmp_path / "space.yaml"
    space.write_text("channels_in: [512]\nchannels_out: [512]\nresolution: [56, 1024]\nbatch: [1, 64]\n")
    r = runner.invoke(app, ["lut", "--hw", "t4", "--space", str(space), "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert len(d["rows"]) == 4
    warn = [w for w in d["warnings"] if "do not fit" in w]
    assert len(warn) == 1 and warn[0].startswith("1 configuration(s)") and "conv|512|512|3|1|1024|1|64|fp32" in warn[0]
    assert "do not fit" in r.stderr
    r = runner.invoke(app, ["lut", "--hw", "t4", "--space", str(space), "-q"])
    assert r.exit_code == 0 and "do not fit" not in r.stderr


def test_shapes_on_a_256_systolic_array(tmp_path):
    # 1x1 conv 256 -> 100 (int8) at 56x56 on TPU v1: every width from 88 to 112 is one pass of the
    # 256-wide array, so the time stays and 112 gets 12% more MACs for free (100/256 -> 112/256 used)
    p = save(conv_model(256, 100, 56, 56, 1, dtype=T.INT8), tmp_path)
    r = runner.invoke(app, ["shapes", p, "--hw", "tpu-v1", "-f", "json"])
    assert r.exit_code == 0, r.output
    layer = json.loads(r.stdout)["layers"][0]
    assert layer["current"] == 100
    assert layer["tile_efficiency"] == pytest.approx(100 / 256, rel=1e-3)
    best = layer["suggestions"][0]
    assert best["to"] == 112
    assert best["macs_change"] == pytest.approx(0.12, abs=0.001)
    assert abs(best["time_change"]) < 0.01
    assert best["tile_efficiency"] == pytest.approx(112 / 256, rel=1e-3)


def test_shapes_lists_alike_layers_once(tmp_path):
    """A transformer's equal products filled `shapes` with one row each (BERT: twelve rows of the same
    768 -> 832 advice). Three 1 x 1 convolutions 256 -> 100 (int8) at 56 x 56 from the same input, on
    TPU v1 (each the case of the test above): the JSON keeps a layer each, the table one row, n = 3,
    with the advice 100 -> 112."""
    nodes = [helper.make_node("Conv", ["x", f"w{i}"], [f"c{i}"], name=f"conv{i}") for i in range(3)]
    nodes.append(helper.make_node("Sum", ["c0", "c1", "c2"], ["y"], name="sum"))
    m = model(nodes, [vi("x", [1, 256, 56, 56], T.INT8)], [vi("y", None)],
              [weight(f"w{i}", [100, 256, 1, 1], T.INT8) for i in range(3)])
    p = save(m, tmp_path)
    d = json.loads(runner.invoke(app, ["shapes", p, "--hw", "tpu-v1", "-f", "json"]).stdout)
    assert sorted(layer["layer"] for layer in d["layers"]) == ["conv0", "conv1", "conv2"]
    table = runner.invoke(app, ["shapes", p, "--hw", "tpu-v1"]).stdout
    rows = [line.split() for line in table.splitlines() if line.startswith("conv")]
    assert len(rows) == 1 and rows[0][1:3] == ["3", "Conv"] and "100 -> 112" in table, table


def test_shapes_alignment_on_v100(tmp_path):
    # fp16 with 100 output channels misses the tensor cores' multiple-of-8 rule; a multiple of 8 takes them
    p = save(conv_model(128, 100, 28, 28, 3, pads=[1, 1, 1, 1], dtype=T.FLOAT16), tmp_path)
    layer = json.loads(runner.invoke(app, ["shapes", p, "--hw", "v100", "-f", "json"]).stdout)["layers"][0]
    best = layer["suggestions"][0]
    assert best["to"] % 8 == 0 and best["unit"] == "tensor_cores" and layer["unit"] == "cuda_cores"
    assert best["time_change"] < -0.4


def test_diff_names_the_changed_layer(tmp_path):
    a = save(conv_model(16, 32, 128, 128, 3, pads=[1, 1, 1, 1], relu=True), tmp_path, "a.onnx")
    b = save(conv_model(16, 128, 128, 128, 3, pads=[1, 1, 1, 1], relu=True), tmp_path, "b.onnx")
    d = json.loads(runner.invoke(app, ["diff", a, b, "--hw", "v100", "-f", "json"]).stdout)
    assert d["delta_s"] > 0
    conv = next(r for r in d["layers"] if r["layer_a"] == "conv")
    assert conv["matched_by"] == "name" and conv["delta_s"] > 0
    assert conv["macs_b"] == 4 * conv["macs_a"]
    assert sum(r["delta_s"] for r in d["layers"]) == pytest.approx(d["delta_s"] - d["input_transfer_delta_s"], rel=1e-3)


def test_diff_lists_alike_layers_once(tmp_path):
    """Six equal 1 x 1 convolutions 64 -> 64 against six 72 -> 72 (14 x 14), matched by name, on a TPU
    (where the six are alike in each model: the test of the report's groups): the JSON keeps a row per
    layer, the table one row, n = 6."""
    a = save(chain_1x1(64, 14, 14, 6), tmp_path, "a.onnx")
    b = save(chain_1x1(72, 14, 14, 6), tmp_path, "b.onnx")
    d = json.loads(runner.invoke(app, ["diff", a, b, "--hw", "tpu-v4", "-f", "json"]).stdout)
    assert sorted(r["layer_a"] for r in d["layers"]) == [f"pw{i}" for i in range(6)]
    table = runner.invoke(app, ["diff", a, b, "--hw", "tpu-v4"]).stdout
    rows = [line.split() for line in table.splitlines() if line.startswith("pw")]
    assert len(rows) == 1 and rows[0][1:3] == ["6", "Conv"], table



def test_diff_says_when_most_pairs_are_matched_by_position(tmp_path):
    """Two graphs whose layers share no name (another network, another exporter's naming) were
    compared row by row without a word, the k-th convolution of one against the k-th of the other:
    the document counts how each pair was made and a note says the rows may pair unrelated layers.
    Six 1 x 1 convolutions renamed in B: 0 of 6 pairs by name; against itself, 6 of 6 and no note."""
    a = save(chain_1x1(64, 14, 14, 6), tmp_path, "a.onnx")
    m = chain_1x1(64, 14, 14, 6)
    for n in m.graph.node:
        n.name = "other_" + n.name
    b = save(m, tmp_path, "b.onnx")
    r = runner.invoke(app, ["diff", a, b, "--hw", "v100", "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["matched"] == {"by_name": 0, "by_position": 6, "only_in_a": 0, "only_in_b": 0}
    assert "only 0 of 6 matched layer pairs share a name (6 paired by position" in r.stderr
    r = runner.invoke(app, ["diff", a, a, "--hw", "v100", "-f", "json"])
    assert json.loads(r.stdout)["matched"]["by_name"] == 6 and "share a name" not in r.stderr

def test_fix_text_and_shapes_agree_on_the_same_width_change(tmp_path):
    """fit_the_tile's "100 -> 104" and `dnnperf shapes` price the same change identically."""
    import json

    from typer.testing import CliRunner

    from dnnperf.cli import app
    from helpers import conv_model, save

    p = save(conv_model(64, 100, 28, 28, 3, pads=[1, 1, 1, 1], dtype=10), tmp_path, "c100.onnx")  # fp16
    run = CliRunner()
    rep = json.loads(run.invoke(app, ["analyze", p, "--hw", "v100", "-f", "json"]).stdout)
    fix = next(f for f in rep["layers"][0]["fixes"] if f["id"] == "fit_the_tile")
    assert "100 -> 104" in fix["text"]
    new_time_text = fix["text"].split("-> ")[-1].rstrip(")")
    sh = json.loads(run.invoke(app, ["shapes", p, "--hw", "v100", "-f", "json", "--span", "10%"]).stdout)
    s104 = next(s for s in sh["layers"][0]["suggestions"] if s["to"] == 104)
    from dnnperf.fmt import t

    assert t(s104["new_latency_s"]) == new_time_text


def test_candidate_widths_are_bounded_and_aligned():
    from dnnperf.design import candidate_widths

    # a narrow span: every width, ends included
    assert list(candidate_widths(88, 112)) == list(range(88, 113))
    # 50,257 +- 12.5% holds 12,565 widths: 16 apart (12,565 / 16 is under 1,024), all multiples of 16
    wide = candidate_widths(43974, 56539)
    assert wide.step == 16 and all(n % 16 == 0 for n in wide)
    assert len(wide) <= 1024 and wide[0] == 43984 and wide[-1] == 56528
    # a corrupt file's 2^31 channels: still at most 1,024 widths
    huge = candidate_widths(1879048192, 2415919104)
    assert len(huge) <= 1024 and huge.step == 2 ** 20


def test_shapes_on_a_very_wide_layer_tries_aligned_widths(tmp_path):
    """A Linear of 1,000,003 outputs used to be rescored at each of 250,000 widths (a corrupt file
    with 2^31 channels never finished); now at most 1,024 of them, aligned."""
    import onnx

    init = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[64, 1_000_003])
    init.data_location = onnx.TensorProto.EXTERNAL
    e = init.external_data.add()
    e.key, e.value = "location", "absent.bin"
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [1, 64])], [vi("y", [1, 1_000_003])], [init])
    r = runner.invoke(app, ["shapes", save(m, tmp_path), "--hw", "v100", "-f", "json"])
    assert r.exit_code == 0, r.output
    for layer in json.loads(r.stdout)["layers"]:
        assert all(s["to"] % 256 == 0 for s in layer["suggestions"])  # 250,000 widths / 1,024 -> every 256th


def test_shapes_never_suggests_leaving_the_tensor_cores(tmp_path):
    """T4, fp16, batch 1, eager: a 64 -> 64 1 x 1 convolution on the tensor cores pays three layout
    reorders of 5 us each; at a misaligned 71 channels it runs on the CUDA cores without them and
    scores faster. That width used to be the first suggestion; a width that moves the layer to a unit
    of lower peak is not a design change anyone should make. And each suggestion costs a different
    time (the widths of one tile step used to be listed one after the other: 3456, 3455, 3454)."""
    p = save(conv_model(64, 64, 56, 56, 1, dtype=T.FLOAT16), tmp_path)
    r = runner.invoke(app, ["shapes", p, "--hw", "t4", "-b", "1", "-f", "json", "--span", "25%"])
    assert r.exit_code == 0, r.output
    for layer in json.loads(r.stdout)["layers"]:
        assert layer["unit"] == "tensor_cores"
        assert all(s["unit"] == "tensor_cores" and s["to"] % 8 == 0 for s in layer["suggestions"]), layer
        times = [s["new_latency_s"] for s in layer["suggestions"]]
        assert all(abs(a - b) > 0.005 * b for i, a in enumerate(times) for b in times[:i]), times


def test_design_commands_take_the_shape_flags_and_never_print_minus_zero(tmp_path):
    from helpers import SAMPLES, counted_loop_model

    loop = save(counted_loop_model(), tmp_path)
    # --value: a Loop run 10 times is one LUT row of 10 x 1x64x64 MACs, and diff sees the same 10 iterations
    r = runner.invoke(app, ["lut", "--from", loop, "--hw", "v100", "--value", "n=10"])
    assert r.exit_code == 0, r.output
    assert [int(row["macs"]) for row in csv.DictReader(io.StringIO(r.stdout))] == [10 * 64 * 64]
    r = runner.invoke(app, ["diff", loop, loop, "--hw", "v100", "--value", "n=10", "-f", "json"])
    assert r.exit_code == 0, r.output
    # --input-shape: resnet50 at 320 x 320 leaves a 10 x 10 map in layer4; on the TPU v1 its fp32 layers
    # run on the vector pipeline whose lanes they underfill, so 512 -> 576 outputs take the same time
    # (it printed '-0% time' for a rounding residue of -1e-16)
    r = runner.invoke(app, ["shapes", f"{SAMPLES}/resnet50.onnx", "--hw", "tpu-v1", "--input-shape",
                            "input=1x3x320x320", "-f", "json"])
    assert r.exit_code == 0, r.output
    layers = json.loads(r.stdout)["layers"]
    assert all("-0%" not in x["text"] for x in layers)
    same = [x for x in layers if x["suggestions"][0]["time_change"] == 0.0]
    assert same and all("the same time" in x["text"] for x in same)


def test_lut_rows_follow_the_runtime(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("ops: [conv]\nchannels_in: [32]\nchannels_out: [64]\nkernel: [3]\nstride: [1]\n"
                     "resolution: [56]\nbatch: [1]\nprecision: [fp16]\n")
    rows = {}
    for rt in ("eager", "graph", "tensorrt"):
        r = runner.invoke(app, ["lut", "--hw", "t4", "--space", str(space), "--runtime", rt])
        assert r.exit_code == 0, r.output
        rows[rt] = float(next(csv.DictReader(io.StringIO(r.stdout)))["latency_s"])
    # the same layer as a one-node model analysed in that runtime: the table gives its device time (alone
    # in a network the eager layer also waits for the host to queue its four kernels)
    path = save(conv_model(32, 64, 56, 56, 3, pads=[1, 1, 1, 1], dtype=T.FLOAT16), tmp_path)
    for rt, lat in rows.items():
        d = json.loads(runner.invoke(app, ["analyze", path, "--hw", "t4", "--runtime", rt, "-f", "json"]).stdout)
        assert d["layers"][0]["device_s"] == pytest.approx(lat, rel=0.01)  # (a network prices its L2 reads)
    # eager pays cuDNN 7's reorder kernels and the host's launch; a TensorRT engine neither
    assert rows["eager"] > rows["graph"] > rows["tensorrt"]
