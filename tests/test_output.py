"""Output through one place: every command x every format, with and without -o; notes and -q;
refusing to write over an input or into a directory; escaping of names in every format."""

import csv
import io
import json
import os
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from dnnperf.cli import app
from dnnperf.render import format_names, formats_for
from helpers import SAMPLES, chain_1x1, conv_model, save

runner = CliRunner()
SQUEEZE = os.path.join(SAMPLES, "squeezenet1_1.onnx")


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("out")
    a = save(conv_model(16, 32, 16, 16, 3, pads=[1, 1, 1, 1], relu=True), d, "a.onnx")
    b = save(conv_model(16, 40, 16, 16, 3, pads=[1, 1, 1, 1], relu=True), d, "b.onnx")
    space = d / "space.yaml"
    space.write_text("ops: [conv, dwconv]\nchannels_in: [16]\nchannels_out: [16, 24]\nresolution: [28]\n")
    base = d / "base.json"
    assert invoke("baseline", a, "--hw", "v100", "-o", base).exit_code == 0
    return {"a": a, "b": b, "space": str(space), "base": str(base), "dir": d}


# command -> (args, document kind)
def commands(f):
    return {
        "inspect": (["inspect", f["a"]], "inspection"),
        "analyze": (["analyze", f["a"], "--hw", "t4"], "report"),
        "analyze-many": (["analyze", f["a"], f["b"], "--hw", "t4"], "reports"),
        "analyze-totals": (["analyze", f["a"], f["b"], "--hw", "t4", "--totals-only"], "totals"),
        "compare": (["compare", f["a"], "--hw", "v100,t4"], "compare"),
        "sweep": (["sweep", f["a"], "--hw", "t4", "--batch", "1,4"], "sweep"),
        "check": (["check", f["a"], "--baseline", f["base"]], "check"),
        "lut": (["lut", "--hw", "t4", "--space", f["space"]], "lut"),
        "shapes": (["shapes", f["a"], "--hw", "tpu-v1"], "shapes"),
        "diff": (["diff", f["a"], f["b"], "--hw", "t4"], "diff"),
        "hw-list": (["hw", "list"], "hw_list"),
        "hw-show": (["hw", "show", "t4"], "profile"),
        "hw-schema": (["hw", "schema"], "hw_schema"),
    }


def _parse(fmt: str, text: str):
    if fmt == "json":
        return json.loads(text)
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert rows or text.strip(), "empty CSV"
        return rows
    if fmt == "md":
        assert "|" in text or text.lstrip().startswith("-")
    if fmt == "svg":
        ET.fromstring(text)
    if fmt == "html":
        assert text.startswith("<!DOCTYPE html>")
    if fmt == "yaml":
        import yaml

        assert isinstance(yaml.safe_load(text), dict)
    assert text.strip()
    return text


@pytest.mark.parametrize("name", ["inspect", "analyze", "analyze-many", "analyze-totals", "compare", "sweep", "check",
                                  "lut", "shapes", "diff", "hw-list", "hw-show", "hw-schema"])
def test_every_command_every_format_and_output_file(files, name):
    args, kind = commands(files)[name]
    supported = formats_for(kind)
    assert "json" in supported or kind == "profile"
    for fmt in format_names():
        r = invoke(*args, "-f", fmt)
        if fmt not in supported:
            assert r.exit_code == 2, (name, fmt, r.output)
            assert "not available" in r.stderr and r.stdout == ""
            continue
        assert r.exit_code in (0, 1), (name, fmt, r.output)  # check may exit 1 on a regression
        stdout = r.stdout
        _parse(fmt, stdout)
        out = files["dir"] / f"{name}.{fmt}"
        r2 = invoke(*args, "-f", fmt, "-o", out)
        assert r2.exit_code == r.exit_code, (name, fmt, r2.output)
        assert r2.stdout == ""  # everything went to the file
        assert out.read_text() == stdout, (name, fmt)


def test_format_follows_the_output_extension(files, tmp_path):
    out = tmp_path / "r.json"
    assert invoke("analyze", files["a"], "--hw", "t4", "-o", out).exit_code == 0
    assert json.loads(out.read_text())["hardware"]["name"] == "t4"
    out = tmp_path / "r.csv"
    assert invoke("compare", files["a"], "--hw", "v100,t4", "-o", out).exit_code == 0
    assert len(list(csv.DictReader(io.StringIO(out.read_text())))) == 2


def test_notes_go_to_stderr_for_every_format_and_q_hides_them():
    for fmt in ("table", "json", "csv", "md"):
        r = invoke("analyze", SQUEEZE, "--hw", "v100,t4,a100", "-f", fmt)
        assert r.exit_code == 0
        assert r.stderr.count("assumed 1") == 1, (fmt, r.stderr)  # once, not once per profile
        if fmt == "json":  # machine output carries them as data as well
            assert any("assumed 1" in w for w in json.loads(r.stdout)["reports"][0]["warnings"])
        else:
            assert "assumed 1" not in r.stdout
        q = invoke("analyze", SQUEEZE, "--hw", "v100,t4,a100", "-f", fmt, "-q")
        assert q.exit_code == 0 and q.stderr == "", (fmt, q.stderr)
        assert q.stdout == r.stdout


def test_output_never_overwrites_an_input(tmp_path):
    m = save(conv_model(8, 8, 8, 8, 3), tmp_path, "m.onnx")
    before = open(m, "rb").read()
    for args in (["analyze", m, "--hw", "v100", "-f", "json", "-o", m],
                 ["inspect", m, "-o", m],
                 ["strip", m, "-o", m],
                 ["plot", m, "-o", m],
                 ["analyze", m, "--hw", "v100", "-o", os.path.join(str(tmp_path), ".", "m.onnx")]):
        r = invoke(*args)
        assert r.exit_code == 2, (args, r.output)
        assert "inputs" in r.stderr and r.stderr.count("\n") == 1
    assert open(m, "rb").read() == before
    # a profile given with --hw is an input too
    import yaml

    from dnnperf.hardware import load_profile

    prof = tmp_path / "p.yaml"
    prof.write_text(yaml.safe_dump(yaml.safe_load(open(load_profile("t4").path))))
    text = prof.read_text()
    assert invoke("analyze", m, "--hw", prof, "-o", prof).exit_code == 2
    assert prof.read_text() == text
    assert sorted(os.listdir(tmp_path)) == ["m.onnx", "p.yaml"]


def test_output_to_a_directory_is_exit_2(tmp_path):
    m = save(conv_model(8, 8, 8, 8, 3), tmp_path, "m.onnx")
    for args in (["analyze", m, "--hw", "v100", "-o", tmp_path], ["strip", m, "-o", tmp_path],
                 ["inspect", m, "-o", tmp_path / "missing" / "x.json"]):
        r = invoke(*args)
        assert r.exit_code == 2, (args, r.output)
        assert r.stderr.startswith("dnnperf: error:") and r.stderr.count("\n") == 1


def test_output_through_a_link_or_into_a_pipe_keeps_what_is_there(tmp_path):
    """-o writes through a symbolic link (the link stays) and into a named pipe (it stays a pipe): a
    rename over either would put a plain file in its place (as root, over /dev/null itself)."""
    import stat
    import threading

    m = save(conv_model(8, 8, 8, 8, 3), tmp_path, "m.onnx")
    target = tmp_path / "target.json"
    target.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(target.name)
    r = invoke("analyze", m, "--hw", "v100", "-f", "json", "-q", "-o", link)
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and json.loads(target.read_text())["model"]["name"] == "m.onnx"
    if not hasattr(os, "mkfifo"):
        return
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    r = invoke("analyze", m, "--hw", "v100", "-f", "json", "-q", "-o", fifo)
    reader.join(10)
    assert r.exit_code == 0, r.output
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(got[0])["model"]["name"] == "m.onnx"
    assert sorted(os.listdir(tmp_path)) == ["link.json", "m.onnx", "pipe", "target.json"]  # no temp file left


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_a_file_written_over_keeps_its_permissions(tmp_path):
    """strip --in-place of a private model, and -o over a report readable by a group only: the file
    keeps its mode (the rename put a 0644 file in its place: a private model became world-readable); a
    new file gets the umask's mode."""
    import stat

    m = save(conv_model(8, 8, 8, 8, 3), tmp_path, "m.onnx")
    m_mode = 0o600
    os.chmod(m, m_mode)
    assert invoke("strip", m, "--in-place", "-q").exit_code == 0
    report = tmp_path / "r.json"
    report.write_text("{}")
    os.chmod(report, 0o640)
    assert invoke("analyze", m, "--hw", "v100", "-f", "json", "-q", "-o", report).exit_code == 0
    assert stat.S_IMODE(os.stat(m).st_mode) == m_mode and stat.S_IMODE(os.stat(report).st_mode) == 0o640
    mask = os.umask(0o022)
    try:
        assert invoke("analyze", m, "--hw", "v100", "-f", "json", "-q", "-o", tmp_path / "new.json").exit_code == 0
    finally:
        os.umask(mask)
    assert stat.S_IMODE(os.stat(tmp_path / "new.json").st_mode) == 0o644


def test_a_failed_write_is_one_line_and_exit_2(tmp_path, monkeypatch):
    """A full disk or a folder without write permission is the user's to fix, not an internal error
    (exit 3): one line, exit 2, and no temp file left in the folder."""
    import errno
    import subprocess
    import sys
    import tempfile

    m = save(conv_model(8, 8, 8, 8, 3), tmp_path, "m.onnx")
    real_replace = os.replace

    def full(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    r = invoke("analyze", m, "--hw", "v100", "-f", "json", "-o", tmp_path / "r.json")
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and "cannot write" in r.stderr and "No space left" in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["m.onnx"]
    monkeypatch.setattr(os, "replace", real_replace)

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    r = invoke("analyze", m, "--hw", "v100", "-f", "json", "-o", tmp_path / "r.json")
    assert r.exit_code == 2 and "Permission denied" in r.stderr and r.stderr.count("\n") == 1, r.output
    monkeypatch.undo()
    if os.path.exists("/dev/full"):  # standard output on a full device (a redirection replaces nothing)
        with open("/dev/full", "wb") as full_dev:
            p = subprocess.run([sys.executable, "-m", "dnnperf", "analyze", str(m), "--hw", "v100", "-f", "json"],
                               stdout=full_dev, stderr=subprocess.PIPE, text=True, timeout=120)
        assert p.returncode == 2, p.stderr
        assert p.stderr.startswith("dnnperf: error: cannot write to standard output") and p.stderr.count("\n") == 1


def test_worker_processes_give_what_one_process_gives_and_never_outnumber_the_files(tmp_path):
    """``analyze`` of several files in worker processes: the same document as in one process, in the
    files' order; --jobs far past the number of files runs one worker per file (10**20 overflowed the
    pool's C int: 'internal error', exit 3)."""
    a = save(conv_model(8, 16, 16, 16, 3), tmp_path, "a.onnx")
    b = save(conv_model(16, 8, 8, 8, 1), tmp_path, "b.onnx")
    one = invoke("analyze", a, b, "--hw", "v100", "-f", "json", "-q", "--jobs", "1")
    assert one.exit_code == 0, one.output
    for jobs in ("2", str(10**20)):
        many = invoke("analyze", a, b, "--hw", "v100", "-f", "json", "-q", "--jobs", jobs)
        assert many.exit_code == 0, (jobs, many.output)
        assert many.stdout == one.stdout


def test_strip_in_place_only_with_the_flag(tmp_path):
    m = save(conv_model(8, 8, 8, 8, 3), tmp_path, "m.onnx")
    size = os.path.getsize(m)
    r = invoke("strip", m, "--in-place")
    assert r.exit_code == 0, r.output
    assert os.path.getsize(m) < size and "weight bytes removed" in r.stderr
    r = invoke("strip", m, "--in-place")  # a skeleton has nothing left to remove: it says so
    assert r.exit_code == 0 and "already a skeleton" in r.stderr
    assert invoke("strip", m).exit_code == 2  # neither -o nor --in-place


def _named(tmp_path, name):
    from onnx import helper

    m = conv_model(8, 8, 8, 8, 3, relu=True)
    m.graph.node[0].name = name
    return save(m, tmp_path, "named.onnx")


@pytest.mark.parametrize("name", ["evil\nname | x", "<img src=x onerror=alert(1)>", "[bold]red[/bold]", "a`b*c_d"])
def test_names_are_escaped_in_every_format(tmp_path, name):
    p = _named(tmp_path, name)
    md = invoke("analyze", p, "--hw", "v100", "-f", "md").stdout
    assert "<img" not in md
    for line in md.splitlines():
        if line.startswith("| 1 |"):
            assert line.count(" | ") == 9, line  # (10 columns) the newline / pipe did not break the row
    table = invoke("analyze", p, "--hw", "v100").stdout
    if name.startswith("[bold]"):
        assert "[bold]red[/bold]" in table  # shown, not interpreted as markup
    js = json.loads(invoke("analyze", p, "--hw", "v100", "-f", "json").stdout)
    assert name in {layer["name"] for layer in js["layers"]}
    rows = list(csv.DictReader(io.StringIO(invoke("analyze", p, "--hw", "v100", "-f", "csv").stdout)))
    assert name in {r["name"] for r in rows}
    html = invoke("report", p, "--hw", "v100", "-o", tmp_path / "r.html")
    assert html.exit_code == 0 and "<img src" not in (tmp_path / "r.html").read_text()


def test_alike_layers_rank_once_with_their_number(tmp_path):
    """BERT's top 10 was ten copies of one product (its 12 layers' equal MatMuls), an 80-layer decoder's
    the same: alike layers (same op, shape, time, loss, cause and fix) now rank once with their number,
    and the next distinct bottlenecks follow. Six equal 1 x 1 convolutions 64 -> 64 over 14 x 14: on a
    TPU (no host stream) one entry of six; on a V100 the first waits alone for the host's first launch,
    the other five are one entry. ``ranking`` still names every layer; the table, Markdown and HTML
    show the groups."""
    p = save(chain_1x1(64, 14, 14, 6), tmp_path)
    d = json.loads(invoke("analyze", p, "--hw", "tpu-v4", "-f", "json").stdout)
    assert d["ranked_groups"] == [{"layer": "pw0", "alike": ["pw1", "pw2", "pw3", "pw4", "pw5"]}]
    assert sorted(d["ranking"]) == ["pw0", "pw1", "pw2", "pw3", "pw4", "pw5"]
    d = json.loads(invoke("analyze", p, "--hw", "v100", "-f", "json").stdout)
    assert d["ranked_groups"] == [{"layer": "pw0", "alike": []}, {"layer": "pw1", "alike": ["pw2", "pw3", "pw4", "pw5"]}]
    by = {layer["name"]: layer for layer in d["layers"]}
    assert len({(by[n]["latency_s"], by[n]["lost_s"], by[n]["cause"]) for n in ("pw1", "pw2", "pw3", "pw4", "pw5")}) == 1
    table = invoke("analyze", p, "--hw", "tpu-v4").stdout
    rows = [line.split() for line in table.splitlines() if line.lstrip().startswith(("1 ", "2 "))]
    assert rows and rows[0][:4] == ["1", "pw0", "6", "Conv"] and len(rows) == 1, table
    md = invoke("analyze", p, "--hw", "tpu-v4", "-f", "md").stdout
    assert "| 1 | pw0 | 6 | Conv |" in md and "| 2 |" not in md, md
    assert invoke("report", p, "--hw", "v100", "-o", tmp_path / "r.html").exit_code == 0
    assert "and 4 alike" in (tmp_path / "r.html").read_text()


def test_unknown_format_is_one_line():
    r = invoke("inspect", SQUEEZE, "-f", "xml")
    assert r.exit_code == 2 and "unknown format" in r.stderr and r.stderr.count("\n") == 1


def test_counts_keep_a_space_before_their_unit():
    """A model of 500 MACs used to print "500MACs" (the prefixed counts read "12.85 MMACs")."""
    from dnnperf.fmt import counted

    assert counted(500, "MACs") == "500 MACs" and counted(0, "ops") == "0 ops"
    assert counted(12_850_000, "MACs") == "12.85 MMACs" and counted(4.089e9, "MACs") == "4.089 GMACs"


def test_a_figure_just_under_a_unit_boundary_takes_the_larger_unit():
    """A fix text said "92.1 us -> 1e+03 us" for 999.7 us (rounding to three digits came after the unit
    was picked); sizes and counts had the same flaw. Expected strings by hand."""
    from dnnperf.fmt import b, count, t

    assert t(999.7e-6) == "1 ms" and t(999.7e-9) == "1 us" and t(0.9997) == "1 s" and t(961.9e-6) == "962 us"
    assert t(4321.0) == "4,321 s" and t(12.34e-3) == "12.3 ms"
    assert b(999.7e6) == "1 GB" and b(999.7e3) == "1 MB" and b(1.6e12) == "1.6 TB" and b(999) == "999 B"
    assert count(999_960) == "1 M" and count(4_089_000_000) == "4.089 G" and count(999) == "999"


def test_a_rate_above_a_thousand_tops_reads_as_a_whole_number(tmp_path):
    """The LLM block printed "1.21e+03 TOP/s" for Mixtral 8x7B prefilling 64 x 1,024 tokens at -p fp8
    on an H100. TOP/s keep three digits and read whole from 1,000 up (by hand)."""
    from dnnperf.fmt import tops

    assert tops(1210.4) == "1,210" and tops(999.4) == "999" and tops(999.6) == "1,000" and tops(0.00724) == "0.00724"
    assert tops(31.04) == "31" and tops(8.472) == "8.47"
    from dnnperf.render.views import llm_block

    m = {"phase": "prefill", "batch": 64, "decoder": {"cache_inputs": 2, "layers": 1, "cache_dtype": "float16",
         "kv_bytes_per_token": 512, "symbols": {}}, "prefill": {"prompt": 1024, "ttft_s": 1.4, "tokens_per_s": 46_650,
         "achieved_tops": 1210.4, "bound": "compute"}, "kv_cache": {"bytes": 1, "tokens": 1}, "memory": {
         "weights_bytes": 1, "needed_bytes": 2}}
    line = next(x for x in llm_block(m).lines if x.startswith("prefill"))
    assert "1,210 TOP/s" in line and "e+0" not in line, line


def test_a_throughput_above_ten_thousand_reads_as_a_prefixed_count(tmp_path):
    """A small model's throughput printed "7.613e+06/s"; per-second figures are four digits below
    10,000 and a prefixed count above. Expected strings by hand; the table's header line uses it."""
    from dnnperf.fmt import rate

    assert rate(881.34) == "881.3" and rate(9999.4) == "9999" and rate(7_613_000) == "7.613 M" and rate(12_345) == "12.35 K"
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    r = invoke("analyze", str(path), "--hw", "v100", "-q")
    assert r.exit_code == 0 and "e+0" not in r.stdout and " K/s" in r.stdout


def test_every_command_with_shape_flags_has_all_of_them():
    """--dim, --input-shape and --value mean the same thing everywhere: a command that takes one takes
    all three (compare, sweep, plot, report, baseline, lut, shapes, diff and validate lacked some); one
    that takes --precision takes --runtime (lut and shapes lacked it), one that takes --fusion takes
    --overlap-input (only analyze had it)."""
    import typer

    group = typer.main.get_command(app)
    seen = []

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, path + [name])
            return
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        if "--dim" in opts:
            seen.append(" ".join(path))
            assert {"--input-shape", "--value"} <= opts, (path, sorted(opts))
        if "--precision" in opts:  # an estimate's runtime (eager, graph, tensorrt) changes it as much
            assert "--runtime" in opts, (path, sorted(opts))
        if "--fusion" in opts:  # so does prefetching the next input
            assert "--overlap-input" in opts, (path, sorted(opts))

    walk(group, [])
    assert {"analyze", "inspect", "compare", "sweep", "plot", "report", "baseline", "lut", "shapes", "diff",
            "validate"} <= set(seen)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_draws_on_stderr_without_a_thread(monkeypatch):
    """The bar of a many-model run is drawn on stderr at a terminal, on each tick and by no thread of
    its own: ``--jobs`` forks worker processes while it is up, and a fork taken while a refresh thread
    holds the console's or stderr's lock leaves that lock held in the child."""
    import threading

    from dnnperf.cli.app import progress

    err, out = _Terminal(), io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr("sys.stdout", out)
    before = threading.active_count()
    with progress(5, "analysing models", quiet=False) as tick:
        assert tick is not None
        assert threading.active_count() == before
        drawn = len(err.getvalue())
        tick()
        tick()
        assert len(err.getvalue()) > drawn  # redrawn by the tick itself
        assert "40%" in err.getvalue()
    assert out.getvalue() == ""
    for total, quiet in ((3, False), (5, True)):  # a short run, or -q: no bar
        with progress(total, "x", quiet=quiet) as tick:
            assert tick is None
