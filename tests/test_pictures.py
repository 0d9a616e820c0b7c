"""Charts and the HTML report: valid XML, every ranked layer in the chart data, and a real render
in headless Chromium (skipped with a reason when Chromium is absent; .ci/run installs it)."""

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from dnnperf.cli import app
from helpers import SAMPLES

runner = CliRunner()


def test_roofline_and_waterfall_svg_are_valid_and_complete(tmp_path):
    for chart in ("roofline", "waterfall"):
        out = tmp_path / f"{chart}.svg"
        r = runner.invoke(app, ["plot", os.path.join(SAMPLES, "mobilenet_v2.onnx"), "--hw", "v100", "--chart", chart,
                                "-o", str(out)])
        assert r.exit_code == 0, r.output
        root = ET.parse(out).getroot()
        assert root.tag.endswith("svg")
    import json

    d = json.loads(runner.invoke(app, ["analyze", os.path.join(SAMPLES, "mobilenet_v2.onnx"), "--hw", "v100",
                                       "-f", "json"]).stdout)
    text = (tmp_path / "roofline.svg").read_text()
    drawn = set(re.findall(r"data-layer='([^']*)'", text))
    import html

    drawn = {html.unescape(x) for x in drawn}
    timed = {l["name"] for l in d["layers"] if l["latency_s"] > 0 and l["ops"] > 0}
    assert timed <= drawn
    assert "quoted peak fp16" in text and "cuda_cores fp32" in text  # the gap the article is about


def test_png_needs_matplotlib_or_says_so(tmp_path):
    r = runner.invoke(app, ["plot", os.path.join(SAMPLES, "squeezenet1_1.onnx"), "-o", str(tmp_path / "r.png")])
    try:
        import matplotlib  # noqa: F401

        assert r.exit_code == 0 and (tmp_path / "r.png").stat().st_size > 1000
    except ImportError:
        assert r.exit_code == 2 and "matplotlib" in r.stderr


def _report(tmp_path, model="swin_t.onnx"):
    out = tmp_path / "report.html"
    r = runner.invoke(app, ["report", os.path.join(SAMPLES, model), "--hw", "v100", "--hw", "t4", "--hw", "tpu-v2",
                            "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def test_report_is_self_contained(tmp_path):
    page = _report(tmp_path).read_text()
    assert "<svg" in page and "Top 15 bottlenecks" in page and "Across targets" in page
    assert not re.search(r"(src|href)=['\"]https?:", page)  # no network, no CDN
    for svg in re.findall(r"<svg.*?</svg>", page, re.S):
        ET.fromstring(svg)


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


@pytest.mark.skipif(_chromium() is None, reason="Chromium not installed (apt-get install chromium); .ci/run installs it")
def test_report_renders_in_headless_chromium(tmp_path):
    page = _report(tmp_path)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'prof'}",
             "--window-size=1366,2200"]
    shot = tmp_path / "shot.png"
    subprocess.run([_chromium(), *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 50_000
    dom = subprocess.run([_chromium(), *flags, "--virtual-time-budget=3000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    m = re.search(r'data-charts="([^"]*)"', dom)
    assert m, "the page's load handler did not run"
    sizes = [tuple(int(v) for v in s.split("x")) for s in m.group(1).split(",")]
    assert len(sizes) == 2 and all(w > 400 and h > 200 for w, h in sizes)
    assert not re.search(r'<body[^>]*data-errors=', dom)
