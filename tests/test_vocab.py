"""One home per vocabulary: the JSON Schema, the profile validation, the scoring steps and the
renderers all use the enums in dnnperf/vocab.py."""

import json
import os
import subprocess
import sys

from dnnperf import scoring
from dnnperf.hardware import FAMILIES as PROFILE_FAMILIES
from dnnperf.render.svg import CAUSE_COLOURS
from dnnperf.vocab import CAUSES, FAMILIES, LOSS_KEYS, Cause, Family
from helpers import ROOT


def _enums(node, key="", out=None):
    out = {} if out is None else out
    if isinstance(node, dict):
        if "enum" in node:
            out.setdefault(key, []).append(node["enum"])
        for k, v in node.items():
            _enums(v, k, out)
    elif isinstance(node, list):
        for v in node:
            _enums(v, key, out)
    return out


def test_schema_enums_equal_the_code():
    schema = json.load(open(os.path.join(ROOT, "schema", "report.schema.json")))
    found = _enums(schema)
    assert found["cause"] and all(e == [c.value for c in Cause] for e in found["cause"])
    assert found["top_cause"] == [list(CAUSES)]
    assert found["family"] == [[f.value for f in Family]]
    losses = schema["properties"]["totals"]["properties"]["losses_s"]
    assert sorted(losses["required"]) == sorted(LOSS_KEYS) and "compute" not in LOSS_KEYS
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "sync_schema.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_every_cause_has_a_colour_and_every_loss_a_step():
    assert set(CAUSE_COLOURS) == set(CAUSES)
    step_causes = {c for c, _ in scoring.STEPS} | {c for c, _ in scoring.FALLBACK_STEPS}
    # every loss a layer can have comes from a step; input_io is the model-level transfer
    assert step_causes | {"input_io"} == set(LOSS_KEYS)


def test_profile_families_are_the_kernel_families():
    # view and shape launch nothing; shape_runtime is host arithmetic (priced by host_op_us)
    assert set(PROFILE_FAMILIES) == set(FAMILIES) - {"view", "shape", "shape_runtime"}


def test_every_algorithm_a_report_names_is_in_the_vocabulary():
    from dnnperf.api import analyze, inspect_model
    from dnnperf.documents import report_dict
    from dnnperf.hardware import load_profile
    from dnnperf.ir import ShapeOverrides
    from dnnperf.scoring import Settings
    from dnnperf.vocab import ALGORITHMS

    seen = set()
    for model, hw, prec in (("resnet50", "v100", None), ("mobilenet_v2", "t4", "fp16"), ("resnet50", "cpu-avx2", None)):
        insp = inspect_model(os.path.join(ROOT, "sample_models", f"{model}.onnx"), ShapeOverrides(batch=8))
        layers = report_dict(analyze(insp, load_profile(hw), Settings(precision=prec)))["layers"]
        names = {layer["algorithm"] for layer in layers}
        assert names <= set(ALGORITHMS) | {None}
        assert (names == {None}) == (hw == "cpu-avx2")  # a GPU library's choice, no other device's
        seen |= names
    # fp32 3 x 3 convolutions at batch 8 take a Winograd algorithm; depthwise ones the library's own kernel
    assert {"implicit_gemm", "gemm", "elementwise", "direct"} <= seen and seen & {"winograd", "winograd_fused"}
