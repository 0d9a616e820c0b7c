"""Profiles: every shipped one loads and cites sources; malformed ones are rejected by field."""

import math
import re
import os

import pytest
import yaml

from dnnperf.errors import DnnperfError
from dnnperf.hardware import load_profile, profile_from_dict, safe_yaml, shipped_names

REQUIRED = ["v100", "t4", "a100", "h100", "h200", "rtx4090", "jetson-orin-nano", "tpu-v1", "tpu-v2", "tpu-v4",
            "kirin970-npu", "cpu-avx512", "cpu-avx2", "raspberry-pi-4",
            "l4", "a10", "a100-40gb", "h100-pcie", "p100", "tpu-v3", "tpu-v5e"]


def test_required_profiles_ship():
    names = shipped_names()
    for n in REQUIRED:
        assert n in names


@pytest.mark.parametrize("name", REQUIRED)
def test_profile_loads_with_sources(name):
    p = load_profile(name)
    assert p.name == name
    assert p.sources, "every profile cites where its figures come from"
    assert p.headline_tops > 0 and p.dram_gbs > 0 and p.lanes > 0


def test_published_figures():
    # spot checks against ../shared/reference/hardware-facts.md
    v = load_profile("v100")
    assert (v.headline_tops, v.dram_gbs, v.lanes) == (125, 900, 80 * 2048)
    assert v.ridge_point("fp16") == pytest.approx(125e12 / 900e9)  # ~139 ops/byte
    assert v.ridge_point("fp32") == pytest.approx(15.7e12 / 900e9)  # ~17
    t1 = load_profile("tpu-v1")
    assert t1.headline_tops == 92 and t1.units[0].tile["int8"] == (1, 256, 256)
    assert 256 * 256 * 2 * 700e6 == pytest.approx(92e12, rel=0.01)  # 65,536 MACs x 2 x 700 MHz
    assert load_profile("tpu-v2").units[0].tile["bf16"] == (1, 128, 128)
    assert load_profile("a100").units[0].peak_tops["fp16"] == 312
    assert load_profile("h100").units[0].peak_tops["fp16"] == 989.4


@pytest.mark.parametrize("name,unit,precision,cores,ghz", [
    ("l4", "cuda_cores", "fp32", 58 * 128, 2.04),  # AD104: 7,424 cores at a 2,040 MHz boost
    ("a10", "cuda_cores", "fp32", 72 * 128, 1.695),  # GA102: 9,216 cores at 1,695 MHz
    ("h100-pcie", "cuda_cores", "fp32", 114 * 128, 1.755),  # 14,592 cores at 1,755 MHz
    ("p100", "cuda_cores", "fp32", 56 * 64, 1.303),  # GP100: 3,584 cores at 1,303 MHz (PCIe)
    ("tpu-v3", "mxu", "bf16", 4 * 128 * 128, 0.94),  # 4 MXUs of 128 x 128 MACs at 940 MHz
    ("tpu-v5e", "mxu", "bf16", 4 * 128 * 128, 1.5),  # 4 MXUs of 128 x 128 MACs at 1.5 GHz
])
def test_datasheet_peaks_agree_with_units_times_clock(name, unit, precision, cores, ghz):
    """A datasheet's peak is MAC units x 2 ops x clock: the shipped figure agrees within 1.5%."""
    p = load_profile(name)
    [u] = [u for u in p.units if u.name == unit]
    assert u.peak_tops[precision] == pytest.approx(cores * 2 * ghz / 1000, rel=0.015)


SPEC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "data", "spec-profiles")


@pytest.mark.parametrize("profile,mhz", [
    ("t4", 1590), ("a100", 1410), ("rtx4090", 2520), ("k80", 875),  # hardware facts A.2, A.3, A.5; K80 875
    ("jetson-orin-nano", 625), ("l4", 2040), ("a10", 1695), ("p100", 1303),  # the datasheets cited above
    ("spec:gtx1080ti", 1582), ("spec:titanx-pascal", 1531), ("spec:titanxp", 1582),  # Pascal GP102
    ("spec:p100", 1480),  # Pascal GP100 (SXM2)
    ("spec:jetson-nano", 921.6), ("spec:jetson-agx-xavier", 1377), ("spec:rtx3090", 1700),
    ("spec:rtx4070super", 2480), ("spec:rtx5090", 2407), ("spec:a30", 1440), ("spec:l40s", 2520),
])
def test_a_profile_without_a_clock_runs_at_the_boost_clock_of_its_spec_sheet(profile, mhz):
    """None of these profiles gives gpu.boost_clock_mhz: their clock comes from their own fp32 peak
    over their SMs' FP32 lanes, which must land on the boost clock their spec sheet states (within the
    rounding of the TFLOP/s figure). One clock per generation did not: the Orin Nano ran at the A100's
    1,410 MHz, the L4 at the RTX 4090's 2,500, the RTX 5090 at the table default's 1,500; a GP100 (64
    lanes per SM) and a GP102 (128) must each get their own width."""
    from dnnperf import gpu

    hw = load_profile(os.path.join(SPEC, profile[5:] + ".yaml") if profile.startswith("spec:") else profile)
    assert "boost_clock_mhz" not in hw.gpu
    assert gpu.clock_hz(hw, gpu.library_of(hw)) == pytest.approx(mhz * 1e6, rel=0.01)
    assert "boost_clock_mhz" not in hw.assumed_note()


def test_a_stated_clock_wins_and_a_clock_nothing_gives_is_noted(tmp_path):
    """gpu.boost_clock_mhz is taken as given; a GPU of no known generation (its cores counted its own
    way) keeps the table default's 1,500 MHz, and its assumed note says so."""
    import yaml

    from dnnperf import gpu

    d = yaml.safe_load(open(os.path.join(SPEC, "rtx3090.yaml")))
    d["gpu"]["boost_clock_mhz"] = 1395
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(d))
    hw = load_profile(str(tmp_path / "a.yaml"))
    assert gpu.clock_hz(hw, gpu.library_of(hw)) == 1395e6
    assert gpu.clock_source(hw, gpu.library_of(hw))[1] == "gpu.boost_clock_mhz"
    d["gpu"] = {"boost_clock_mhz": 1395, "fp32_lanes_per_sm": [64]}
    d["title"] = d["name"] = "acme-gpu"
    del d["gpu"]["boost_clock_mhz"]
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(d))
    hw = load_profile(str(tmp_path / "b.yaml"))  # lanes given by the profile: 35.6e12 / (2 x 82 x 64)
    assert gpu.clock_hz(hw, gpu.library_of(hw)) == pytest.approx(35.6e12 / (2 * 82 * 64), rel=1e-12)
    del d["gpu"]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(d))
    hw = load_profile(str(tmp_path / "c.yaml"))
    assert gpu.clock_hz(hw, gpu.library_of(hw)) == 1500e6
    assert "gpu.boost_clock_mhz 1500 (the default entry's clock" in hw.assumed_note()
    assert "SM clock 1,500 MHz (the default entry's clock)" in gpu.library_summary(hw)
    # Pascal's two SM widths go by the part the title names, not by which clock looks likelier: a Tesla P4 at
    # its 810 MHz base (GP104, 20 SMs x 128 lanes: 4.15 TFLOP/s) is not a 1,620 MHz part of 64 lanes, and a
    # Quadro GP100 (56 SMs x 64 lanes, 10.3 TFLOP/s) runs at 1,437 MHz, not 719
    for title, sms, tflops, mhz in (("NVIDIA Tesla P4 (Pascal GP104)", 20, 4.15, 4.15e12 / (2 * 20 * 128) / 1e6),
                                    ("NVIDIA Quadro GP100", 56, 10.3, 10.3e12 / (2 * 56 * 64) / 1e6)):
        p4 = {**d, "title": title, "name": "x", "parallelism": {"compute_units": sms}, "gpu": {"generation": "pascal"},
              "units": [{"name": "cuda_cores", "serves": ["matrix", "vector"], "peak_tops": {"fp32": tflops}}]}
        hw = profile_from_dict(p4, "x")
        assert gpu.clock_hz(hw, gpu.library_of(hw)) == pytest.approx(mhz * 1e6, rel=1e-12), title
    d["gpu"] = {"fp32_lanes_per_sm": [0]}
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(d))
    with pytest.raises(DnnperfError, match="fp32_lanes_per_sm: a list of whole numbers"):
        load_profile(str(tmp_path / "d.yaml"))


def test_the_library_line_states_the_power_model():
    """`hw show` and the report's library line say what the power model does with a board: the T4's 70 W
    over 40 SMs is 1.75 W per SM, against the 3.35 W (CUDA cores) and 2.9 W (tensor cores) per SM a unit
    draws at full speed (gpu_generations.yaml, sm_watts): 1.75 / 3.35 = 0.52 and 1.75 / 2.9 = 0.60 of the
    clock under full load. The V100 (300 W over 80 SMs, 3.75 W) holds its clock; a profile with its own
    sustained_clock_fraction (the Adreno 640) gets no such line."""
    from dnnperf import gpu

    t4 = gpu.library_summary(load_profile("t4"))
    assert ("power: 70 W over 40 SMs (1.75 W each): under full load CUDA cores hold 0.52 of the clock (they need "
            "3.35 W per SM), tensor cores 0.60 (2.9 W)") in t4
    assert "CUDA cores hold 1.00 of the clock (they need 3.35 W per SM), tensor cores 1.00" in gpu.library_summary(
        load_profile("v100"))
    assert "power:" not in gpu.library_summary(load_profile("adreno640"))


def test_a_gpu_profile_counting_cuda_cores_as_sms_is_refused(tmp_path):
    """An RTX 3090 profile with parallelism.compute_units 10,496 (its CUDA cores) instead of 82 SMs:
    35.6e12 / (2 x 10,496 x 128) = 13 MHz, a clock no GPU runs at; with gpu.boost_clock_mhz 1,695 it
    is 35.6e12 / (2 x 10,496 x 1.695e9) = 1.0 FP32 lanes per SM where GA10x SMs have 128. Both are
    refused in one line that names the count (exit 2 from the CLI); the true 82 SMs load (1,696 MHz)."""
    from typer.testing import CliRunner

    from dnnperf.cli import app

    d = yaml.safe_load(open(os.path.join(SPEC, "rtx3090.yaml")))
    d["parallelism"] = {"compute_units": 10496}
    with pytest.raises(DnnperfError, match=r"implies a 13 MHz clock: parallelism.compute_units counts SMs"):
        profile_from_dict(d, "x")
    d["gpu"]["boost_clock_mhz"] = 1695
    with pytest.raises(DnnperfError, match=r"is 1\.0 FP32 lanes per SM, where the ampere generation's SMs have 128"):
        profile_from_dict(d, "x")
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(d))
    res = CliRunner().invoke(app, ["hw", "show", str(tmp_path / "bad.yaml")])
    assert res.exit_code == 2 and "compute_units counts SMs" in res.output and "Traceback" not in res.output
    d["parallelism"] = {"compute_units": 82}
    assert profile_from_dict(d, "x").lanes == 82 * 1536


def test_a_sparse_tensor_figure_is_refused(tmp_path):
    """Spec sheets quote tensor rates "with sparsity" (2:4), twice the dense rate. The H100 SXM's fp16 is
    989.4 dense and 1,978.9 sparse (hardware-facts A.4): at 1,830 MHz over 132 SMs the dense one is
    989.4e12 / (132 x 1.83e9) = 4,096 ops per SM per clock, the sparse one 8,192. The A100's 312 dense
    (624 sparse) over 108 SMs at the 1,411 MHz its 19.5 fp32 TFLOP/s imply: 2,047 and 4,095; the L4's 121
    dense (242 sparse, its datasheet) over 58 SMs at the 30.3e12 / (2 x 58 x 128) = 2,040.7 MHz of its fp32
    figure: 1,022 and 2,045. The sparse ones are
    refused in one line (exit 2 from the CLI); a profile that says its part does more per SM loads."""
    from typer.testing import CliRunner

    from dnnperf.cli import app

    for name, dense in (("h100", 989.4), ("a100", 312), ("l4", 121)):
        d = yaml.safe_load(open(load_profile(name).path))
        tc = next(u for u in d["units"] if u["name"] == "tensor_cores")
        assert tc["peak_tops"]["fp16"] == dense
        profile_from_dict(d, "x")  # the shipped dense figure loads
        tc["peak_tops"]["fp16"] = 2 * dense
        with pytest.raises(DnnperfError, match=r"peak_tops.fp16 .* ops per SM per clock, 2\.0x the dense tensor-core rate .*"
                                               r"2:4-sparse figure"):
            profile_from_dict(d, "x")
    # a Hopper profile that states no clock derives none (no FP32 lanes per SM in its entry): the table's
    # 1,830 MHz stands in, and the sparse figure is refused all the same
    d = yaml.safe_load(open(load_profile("h100").path))
    d["gpu"].pop("boost_clock_mhz")
    next(u for u in d["units"] if u["name"] == "tensor_cores")["peak_tops"]["bf16"] = 1978.9
    with pytest.raises(DnnperfError, match=r"peak_tops.bf16 1978.9 TFLOP/s over 132 SMs at 1,830 MHz is 8,192"):
        profile_from_dict(d, "x")
    d = yaml.safe_load(open(load_profile("l4").path))
    next(u for u in d["units"] if u["name"] == "tensor_cores")["peak_tops"]["fp16"] = 242
    (tmp_path / "sparse.yaml").write_text(yaml.safe_dump(d))
    res = CliRunner().invoke(app, ["hw", "show", str(tmp_path / "sparse.yaml")])
    assert res.exit_code == 2 and "is 2,045 ops per SM per clock" in res.output and "Traceback" not in res.output
    d.setdefault("gpu", {})["tensor_fp16_ops_per_sm_clock"] = 2048
    assert profile_from_dict(d, "x").units


def test_sibling_parts_differ_only_where_their_sheets_do():
    """The 40 GB A100 is the 80 GB one with HBM2 at 1,555 GB/s; the L4 keeps 48 MB of L2 on 300 GB/s."""
    a, b = load_profile("a100"), load_profile("a100-40gb")
    assert (b.dram_gbs, a.dram_gbs) == (1555, 2039) and a.units == b.units and a.lanes == b.lanes
    l4 = load_profile("l4")
    assert (l4.dram_gbs, l4.onchip_mb, l4.lanes) == (300, 48, 58 * 1536)


def test_unknown_name_suggests():
    with pytest.raises(DnnperfError) as e:
        load_profile("v10")
    assert "v100" in str(e.value)


def _base():
    return safe_yaml(open(load_profile("t4").path).read(), "t4")


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d.pop("memory"), "memory"),
    # a missing key's message says what it holds where the schema says it briefly: the quoted peak's form
    (lambda d: d.pop("headline"), "missing required key 'headline': the quoted peak: {precision: fp16, tops: 125}"),
    (lambda d: d.pop("title"), "missing required key 'title': human-readable device name"),
    (lambda d: d.update(bogus=1), "bogus"),
    (lambda d: d["memory"].update(dram_gbs="fast"), "dram_gbs"),
    (lambda d: d["memory"].update(dram_gbs=0), "dram_gbs"),
    (lambda d: d["memory"].update(dram_gbs=-5), "dram_gbs"),
    (lambda d: d["memory"].update(dram_gbs=math.nan), "dram_gbs"),
    (lambda d: d["memory"].update(dram_gbs=math.inf), "dram_gbs"),
    (lambda d: d["units"][0]["peak_tops"].update(fp16=0), "peak_tops"),
    (lambda d: d["units"][0].update(tile={"fp16": [0, 16, 16]}), "tile"),
    (lambda d: d["units"][0].update(tile={"fp16": [16, 16]}), "tile"),
    (lambda d: d["units"][0]["peak_tops"].update(fp7=3), "fp7"),
    (lambda d: d.update(headline={"precision": "fp16", "tops": "lots"}), "headline"),
    (lambda d: d.update(schema="dnnperf-hw/0"), "schema"),
    (lambda d: d.update(kind="toaster"), "kind"),
    (lambda d: d.update(units=[]), "units"),
    (lambda d: d.update(kernel_fixed_us={"convolution": 2.0}), "kernel_fixed_us.convolution"),
    (lambda d: d.update(kernel_fixed_us={"conv": -1.0}), "kernel_fixed_us.conv"),
])
def test_malformed_profiles_name_the_field(mutate, needle):
    d = _base()
    mutate(d)
    with pytest.raises(DnnperfError) as e:
        profile_from_dict(d, "p")
    assert needle in str(e.value)


def test_yaml_is_safe(tmp_path):
    p = tmp_path / "evil.yaml"
    p.write_text("!!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(DnnperfError, match="tag"):
        load_profile(str(p))
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p_] * 9)}]\n" for p_, c in zip("abcdefgh", "bcdefghi"))
    p2 = tmp_path / "bomb.yaml"
    p2.write_text(bomb)
    with pytest.raises(DnnperfError, match="alias"):
        load_profile(str(p2))
    p3 = tmp_path / "notyaml.yaml"
    p3.write_text("{{{{ : : [")
    with pytest.raises(DnnperfError, match="YAML"):
        load_profile(str(p3))


def test_user_profile_file_works(tmp_path):
    d = _base()
    d["name"] = "my-t4"
    p = tmp_path / "mine.yaml"
    p.write_text(yaml.safe_dump(d))
    assert load_profile(str(p)).name == "my-t4"


def test_the_profile_scan_reads_what_the_parse_reads():
    """The downgrade advice scans shipped profiles' top-level kind and headline lines to parse only
    candidates (same kind, fewer quoted TOP/s); the scan must agree with the full parse everywhere."""
    from dnnperf.hardware import profiles_dir, scan_summary, shipped_names, shipped_profiles

    for name in shipped_names():
        p = load_profile(name)
        assert scan_summary(os.path.join(profiles_dir(), name + ".yaml")) == (p.kind, p.headline_tops), name
    t4 = load_profile("t4")
    expect = {p.name for p in (load_profile(n) for n in shipped_names())
              if p.kind == "gpu" and p.headline_tops < t4.headline_tops}
    assert {p.name for p in shipped_profiles("gpu", t4.headline_tops)} == expect and "k80" in expect


def test_a_profile_the_scan_cannot_read_is_parsed(tmp_path):
    from dnnperf.hardware import scan_summary

    p = tmp_path / "odd.yaml"
    p.write_text("schema: dnnperf-hw/1\nheadline:\n  precision: fp16\n  tops: 10\nkind: 'gpu'\n")
    assert scan_summary(str(p)) == (None, None)  # block style and a quoted kind: left to the parser


def _strict(a, b) -> bool:
    """Equal in value, type and map order (1 is not 1.0; {a, b} is not {b, a})."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_strict(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_strict(x, y) for x, y in zip(a, b))
    return a == b


def test_every_shipped_yaml_has_its_parsed_copy():
    """The parsed copies (dnnperf/data/parsed_yaml.json) are what the YAML parser reads, exactly:
    after editing a shipped YAML file, run `python -m dnnperf.parsed`."""
    from dnnperf import parsed
    from dnnperf.hardware import parse_yaml

    files = parsed.shipped_files()
    assert len(files) >= 20 and any(f.endswith("gpu_generations.yaml") for f in files)
    for path in files:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        copy = parsed.lookup(text)
        assert copy is not None, f"{path}: no parsed copy — run `python -m dnnperf.parsed`"
        assert _strict(copy, parse_yaml(text, path)), \
            f"{path}: the parsed copy differs — run `python -m dnnperf.parsed`"
        assert copy is not parsed.lookup(text)  # a fresh object each time: callers may change it


def test_an_edited_yaml_is_parsed_not_looked_up():
    from dnnperf import parsed
    from dnnperf.hardware import safe_yaml

    with open(load_profile("t4").path, encoding="utf-8") as fh:
        text = fh.read()
    edited = text.replace("dram_gbs: 320", "dram_gbs: 321")
    assert edited != text and parsed.lookup(edited) is None
    assert safe_yaml(edited, "t4")["memory"]["dram_gbs"] == 321


def test_parsed_copies_keep_non_string_keys():
    import json

    from dnnperf import parsed

    data = {"matrix_m_efficiency": {1: 1.0, 49: 0.9}, "curve": {0.5: 80.0}, "flags": {True: None}, "s": ["a", 1]}
    back = json.loads(json.dumps(parsed.encode(data)), object_hook=parsed._hook)
    assert _strict(back, data)


def test_every_kind_has_its_defaults():
    from dnnperf.hardware import KINDS, kind_defaults

    for kind in KINDS:
        assert set(kind_defaults()[kind]) == {"launch_overhead_us", "host_link_gbs", "collective_latency_us"}, kind


def test_the_title_names_the_part_before_the_name():
    """A profile copied from another and retitled, its `name` left as it was, is the part its title names:
    an 84-SM card titled "NVIDIA GeForce RTX 2080 Ti" (Turing: 1,024 resident threads per SM, CUDA
    programming guide) under the name a40 was an Ampere GA10x part (1,536) and the note said "named by its
    title". A title that names nothing leaves the name to decide, and the note says so."""
    base = {"schema": "dnnperf-hw/1", "kind": "gpu", "name": "a40", "headline": {"precision": "fp16", "tops": 149.7},
            "units": [{"name": "tensor_cores", "serves": ["matrix"], "peak_tops": {"fp16": 149.7}},
                      {"name": "cuda_cores", "serves": ["matrix", "vector"], "peak_tops": {"fp32": 37.4}}],
            "memory": {"dram_gbs": 696, "onchip_mb": 6}, "parallelism": {"compute_units": 84},
            "sources": {"all": "a datasheet"}}
    turing = profile_from_dict({**base, "title": "NVIDIA GeForce RTX 2080 Ti"}, "x")
    assert turing.lanes == 84 * 1024 and "gpu.generation turing (named by its title)" in turing.assumed
    plain = profile_from_dict({**base, "title": "my card"}, "x")
    assert plain.lanes == 84 * 1536 and "gpu.generation ampere (named by its name)" in plain.assumed
    a40 = profile_from_dict({**base, "title": "NVIDIA A40"}, "x")
    assert a40.lanes == 84 * 1536 and "gpu.generation ampere (named by its title)" in a40.assumed


def test_a_spec_sheet_profile_gets_documented_defaults_and_says_so(tmp_path):
    """A GPU profile with only spec-sheet figures (no lanes, launch cost or host link) loads: lanes
    are SMs x the generation's resident threads (Ampere's GA100 2048 and GA10x 1536, Turing 1024, Ada
    1536: CUDA programming guide), the launch cost the gpu default (5 us, dnnperf/data/kind_defaults.yaml), no host link;
    every default is listed in `assumed`, in the report's notes and its JSON."""
    import json

    from typer.testing import CliRunner

    from dnnperf.cli import app

    base = {"schema": "dnnperf-hw/1", "kind": "gpu", "headline": {"precision": "fp16", "tops": 125},
            "units": [{"name": "tensor_cores", "serves": ["matrix"], "peak_tops": {"fp16": 125}},
                      {"name": "cuda_cores", "serves": ["matrix", "vector"], "peak_tops": {"fp32": 31.2}}],
            "memory": {"dram_gbs": 600, "onchip_mb": 6}, "parallelism": {"compute_units": 72},
            "sources": {"all": "a datasheet"}}
    # Ampere's GA100 keeps 2048 resident threads per SM, its GA10x parts 1536 (compute capability 8.0 vs
    # 8.6: the A10 is a GA102, the RTX 3090 too; it was given 2048 before); Blackwell's GB20x parts (12.0:
    # GeForce RTX 50) 1536, its B200 (10.0) 2048 (CUDA programming guide; the RTX 5090 was given 2048)
    for title, per_sm, gen in (("NVIDIA A100 (Ampere GA100)", 2048, "ampere"), ("NVIDIA A10 (Ampere GA102)", 1536, "ampere"),
                               ("NVIDIA GeForce RTX 3090", 1536, "ampere"), ("NVIDIA A30", 2048, "ampere"),
                               ("NVIDIA T4", 1024, "turing"), ("NVIDIA L4 (Ada)", 1536, "ada"),
                               ("NVIDIA GeForce RTX 5090", 1536, "blackwell"),
                               ("NVIDIA RTX PRO 6000 Blackwell", 1536, "blackwell"),
                               ("NVIDIA B200", 2048, "blackwell")):
        hw = profile_from_dict({**base, "name": "x", "title": title}, "x")
        assert hw.lanes == 72 * per_sm and hw.launch_overhead_us == 5 and hw.host_link_gbs is None, title
        assert len(hw.assumed) == 5 and hw.assumed[0].startswith(f"parallelism.lanes {72 * per_sm}")
        # the library generation its title names, and no board power: the boost clock held under load
        assert hw.assumed[3] == f"gpu.generation {gen} (named by its title)" and hw.assumed[4].startswith("gpu.tdp_w (none")
    # a CPU has no generation table to derive lanes from: the refusal says how to count them
    with pytest.raises(DnnperfError, match=r"needs 'lanes' and 'compute_units' \(cores; lanes = cores x fp32 vector width"):
        profile_from_dict({**base, "name": "x", "title": "A server CPU", "kind": "cpu",
                           "units": [{"name": "simd", "serves": ["matrix", "vector"], "peak_tops": {"fp32": 5}}]}, "x")
    unnamed = profile_from_dict({**base, "name": "x", "title": "Some accelerator"}, "x")
    assert "gpu.generation (none recognised in its title: the table's default entry)" in unnamed.assumed
    # given figures are used as they are and not reported as assumed
    given = profile_from_dict({**base, "name": "x", "title": "NVIDIA A10", "launch_overhead_us": 9, "host_link_gbs": 32,
                               "parallelism": {"compute_units": 72, "lanes": 1000},
                               "gpu": {"generation": "ampere", "tdp_w": 150}}, "x")
    assert (given.lanes, given.launch_overhead_us, given.host_link_gbs, given.assumed) == (1000, 9, 32, ())
    # the profile's own threads per SM wins; a malformed one names itself
    own = profile_from_dict({**base, "name": "x", "title": "NVIDIA A10", "gpu": {"threads_per_sm": 1536}}, "x")
    assert own.lanes == 72 * 1536
    # reorder kernels are whole kernels, and a few of them (10^12 used to build a list of 10^12 sizes)
    # a count of SMs or lanes is a whole number >= 1 (0.5 SMs divided by zero in the tile plan: a fuzz find)
    for par in ({"compute_units": 0.5}, {"compute_units": 72, "lanes": 10.5}, {"compute_units": 72.5}):
        with pytest.raises(DnnperfError, match="a whole number >= 1"):
            profile_from_dict({**base, "name": "x", "title": "NVIDIA A10", "parallelism": par}, "x")
    for bad in ({"threads_per_sm": "many"}, {"threads_per_sm": 0}, {"reorder_traffic": "yes"},
                {"conv_bias_kernel": 1}, {"strided_pointwise_sampled": "no"}, {"reorder_kernels": {"fp16": 2.5}},
                {"reorder_kernels": {"fp16": 1e12}}):
        with pytest.raises(DnnperfError, match=f"gpu.{next(iter(bad))}"):
            profile_from_dict({**base, "name": "x", "title": "NVIDIA A10", "gpu": bad}, "x")
    # no sources: the figures are taken as given, and the profile says so among its assumptions
    bare = profile_from_dict({k: v for k, v in {**base, "name": "x", "title": "NVIDIA A10"}.items() if k != "sources"}, "x")
    assert bare.sources == {} and bare.assumed[-1].startswith("sources (none") and "sources (none" in bare.assumed_note()
    # other kinds still need their lanes
    with pytest.raises(DnnperfError, match="lanes"):
        profile_from_dict({**base, "name": "x", "title": "an NPU", "kind": "npu"}, "x")
    p = tmp_path / "a10.yaml"
    p.write_text(yaml.safe_dump({**base, "name": "a10", "title": "NVIDIA A10 (Ampere GA102)"}))
    from helpers import SAMPLES

    r = CliRunner().invoke(app, ["analyze", os.path.join(SAMPLES, "squeezenet1_1.onnx"), "--hw", str(p), "-b", "1",
                                 "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["hardware"]["lanes"] == 72 * 1536 and len(doc["hardware"]["assumed"]) == 5  # a GA102
    assert "does not give parallelism.lanes 110592" in r.stderr and "launch_overhead_us 5" in r.stderr
    assert r.stderr.count("does not give") == 1  # once, though the report carries it too
    # commands that do not pass a report's notes on say it too (the CLI collects it from the load)
    sq = os.path.join(SAMPLES, "squeezenet1_1.onnx")
    for args in (["lut", "--from", sq], ["shapes", sq], ["diff", sq, sq]):
        r = CliRunner().invoke(app, args + ["--hw", str(p), "-b", "1", "-f", "json"])
        assert r.exit_code == 0 and r.stderr.count("profile a10 does not give parallelism.lanes") == 1, (args, r.output)
    r = CliRunner().invoke(app, ["lut", "--from", sq, "--hw", "v100", "-b", "1", "-f", "json"])
    assert r.exit_code == 0 and "does not give" not in r.stderr  # nothing left over from the command before


def test_a_gpu_profile_says_which_library_entry_it_uses():
    """hw show and the JSON report name the generation entry of gpu_generations.yaml a GPU profile's
    estimates use and whether that entry was checked against measurements (Volta, Turing and Hopper
    were; Ampere was not); a profile's own library fields are listed; other kinds have none."""
    import json

    from typer.testing import CliRunner

    from dnnperf.cli import app
    from dnnperf.gpu import library_summary
    from helpers import SAMPLES

    assert library_summary(load_profile("v100")).startswith("volta entry") and "checked" in library_summary(load_profile("v100"))
    assert library_summary(load_profile("a100")).startswith("ampere entry") and "unverified" in library_summary(load_profile("a100"))
    assert library_summary(load_profile("cpu-avx2")) is None
    r = CliRunner().invoke(app, ["hw", "show", "h100"])
    assert r.exit_code == 0 and "# GPU library knowledge: hopper entry" in r.stdout
    r = CliRunner().invoke(app, ["analyze", os.path.join(SAMPLES, "squeezenet1_1.onnx"), "--hw", "t4", "-b", "1",
                                 "-f", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["hardware"]["library"].startswith("turing entry")
    with open(os.path.join(os.path.dirname(SAMPLES), "profiles", "t4.yaml"), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    d["gpu"] = {**d.get("gpu", {}), "min_kernel_us": 3}
    assert library_summary(profile_from_dict(d, "x")).endswith("the profile overrides min_kernel_us")


def test_every_gpu_library_field_is_checked_against_its_shape():
    """A profile's gpu section may override any field of gpu_generations.yaml; each is checked
    against its shape (one line naming the field, exit 2 from the CLI), and every entry of the
    shipped table passes the same checks."""
    from dnnperf.gpu import generation_table
    from dnnperf.hardware import _gpu_field

    for gen, entry in generation_table().items():
        for k, v in entry.items():
            _gpu_field(k, v, f"{gen}.{k}")
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "profiles", "t4.yaml"),
              encoding="utf-8") as fh:
        base = yaml.safe_load(fh)
    for bad, field in (({"k_step": {"cuda_cores:int8": "x"}}, "gpu.k_step.cuda_cores:int8"), ({"k_step": 5}, "gpu.k_step"),
                       ({"gemm_k_step": {"tensor_cores:fp16": 0}}, "gpu.gemm_k_step.tensor_cores:fp16"),
                       ({"gemm_k_step": 32}, "gpu.gemm_k_step"),
                       ({"gemv_max": "one"}, "gpu.gemv_max"), ({"gemv_max": 1.5}, "gpu.gemv_max"),
                       ({"depthwise_sm_macs": {"fp16": 0}}, "gpu.depthwise_sm_macs.fp16"),
                       ({"grouped_efficiency": 0.6}, "gpu.grouped_efficiency"),
                       ({"grouped_efficiency": {"fp32": 1.5}}, "gpu.grouped_efficiency.fp32"),
                       ({"l2_efficiency": 1.2}, "gpu.l2_efficiency"), ({"stem_precision": "fp31"}, "gpu.stem_precision"),
                       ({"stem_efficiency": 0}, "gpu.stem_efficiency"), ({"l2_bytes_per_sm_clock": -1}, "gpu.l2_bytes_per_sm_clock"),
                       ({"tiles": [[1, 2, 3]]}, "gpu.tiles"), ({"winograd": {"fp32": 1}}, "gpu.winograd"),
                       ({"conv_tiles": {"tensor_cores": [[0, 8]]}}, "gpu.conv_tiles.tensor_cores"),
                       ({"gemm_tiles": {"cuda_cores:int8": [128, 128]}}, "gpu.gemm_tiles.cuda_cores:int8"),
                       ({"tensor_core_precisions": {"gemm": "fp16"}}, "gpu.tensor_core_precisions.gemm"),
                       ({"gemv_precisions": "fp16"}, "gpu.gemv_precisions"), ({"unverified": "no"}, "gpu.unverified")):
        with pytest.raises(DnnperfError, match=re.escape(field)):
            profile_from_dict({**base, "gpu": {**base.get("gpu", {}), **bad}}, "x")
