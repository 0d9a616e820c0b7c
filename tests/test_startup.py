"""One-model commands load a model without importing the ``onnx`` package (``dnnperf.load.onnx_lite``):
its ``__init__`` imports numpy's extra element types (``ml_dtypes``), most of a command's time on the
reference VM. Each command runs in a fresh interpreter; what it imported is read from ``sys.modules``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "sample_models")

_RUN = r"""
import json, runpy, sys
out = []
for args in json.loads(sys.argv[1]):
    sys.argv = ["dnnperf"] + args
    try:
        runpy.run_module("dnnperf", run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code
    out.append(code)
print(json.dumps({"codes": out, "onnx": "onnx" in sys.modules, "ml_dtypes": "ml_dtypes" in sys.modules,
                  "pb2": "onnx.onnx_ml_pb2" in sys.modules}), file=sys.stderr)
"""


def _run(commands: list[list[str]]) -> dict:
    r = subprocess.run([sys.executable, "-c", _RUN, json.dumps(commands)], capture_output=True, text=True, cwd=ROOT,
                       timeout=600)
    return json.loads(r.stderr.strip().splitlines()[-1])


def test_analysing_the_sample_models_never_imports_the_onnx_package():
    """inspect, analyze (GPU, CPU, TPU), shapes and a JSON report on CNNs, a transformer with shape
    arithmetic folded at load time (GPT-2: ReduceMin, CumSum, GatherElements folds) and a KV-cache LLM:
    every command succeeds, ONNX's protobuf module is loaded, the package itself is not."""
    m = lambda name: os.path.join(MODELS, f"{name}.onnx")  # noqa: E731
    got = _run([["inspect", m("swin_t"), "-q"],
                ["analyze", m("resnet50"), "--hw", "v100", "-q"],
                ["analyze", m("gpt2"), "--dim", "sequence_length=64", "--hw", "t4", "-f", "json", "-q"],
                ["analyze", m("bert_base"), "--dim", "sequence_length=64", "--hw", "cpu-avx2", "-q"],
                ["analyze", m("tiny_llama_kv"), "--dim", "sequence_length=1", "--dim", "past_sequence_length=64",
                 "--hw", "tpu-v4", "-q"],
                ["shapes", m("mobilenet_v2"), "-q"]])
    assert got["codes"] == [0] * 6, got
    assert got["pb2"] and not got["onnx"] and not got["ml_dtypes"], got


def test_a_file_that_is_not_onnx_is_refused_without_the_package_too(tmp_path):
    """The parse (and its one-line refusal, exit 2) does not need the package either."""
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07\x12\x04junk" * 10)
    got = _run([["inspect", str(bad)]])
    assert got["codes"] == [2] and not got["onnx"], got


def test_the_onnx_package_imported_after_a_light_load_is_whole():
    """A program that loads a model through dnnperf first and imports onnx afterwards gets the package as
    usual: the same ModelProto class, its submodules as attributes, ONNX's own load and shape inference."""
    code = r"""
import sys
from dnnperf.load import load_graph
g = load_graph(sys.argv[1])
assert "onnx" not in sys.modules
import onnx
assert onnx.onnx_ml_pb2 is sys.modules["onnx.onnx_ml_pb2"] and onnx.onnx_cpp2py_export is sys.modules["onnx.onnx_cpp2py_export"]
m = onnx.load(sys.argv[1], load_external_data=False)
assert type(m) is onnx.ModelProto
inferred = onnx.shape_inference.infer_shapes(m)
print(len(g.nodes), len(m.graph.node), len(inferred.graph.value_info) > 0, onnx.defs.get_schema("Conv", 17).name)
"""
    r = subprocess.run([sys.executable, "-c", code, os.path.join(MODELS, "squeezenet1_1.onnx")], capture_output=True,
                       text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["83", "83", "True", "Conv"]
