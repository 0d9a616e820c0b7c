"""ONNX's own node test suite (one model per test case of every operator, built from the installed
onnx package) through dnnperf's loader and cost functions: no crash, no refusal of a valid model, and
no unscored node outside an explicit allow-list whose every entry says why it is still open.

The whole suite (1,884 models with onnx 1.23) runs here: about 6 s of CPU time."""

from __future__ import annotations

import collections
import os
import re
import sys
import warnings

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bench"))

# still open: each pattern (a regular expression on the test case name) with its reason
ALLOWED = {
    r"test_(hann|hamming|blackman)window(_symmetric)?_expanded":
        "function body: Range over the window size, a runtime input value: resolves with --value "
        "(test_runtime_value_models_resolve_with_value)",
    r"test_center_crop_pad_.*_expanded":
        "function body: Pad amounts computed from the runtime 'shape' input's value: resolves with --value",
    r"test_affine_grid_.*_expanded":
        "function body: grid size taken from the runtime 'size' input's value",
    r"test_range_.*_expanded":
        "function body: a Loop whose trip count and carried shapes come from runtime input values",
    r"test_loop(11|13_seq|16_seq_none)":
        "Loop-carried tensors that grow every iteration (shape known only at run time)",
    r"test_sequence_map_.*":
        "sequence elements with a symbolic dimension (N) nobody set: resolves with --dim N=... "
        "(test_sequence_element_dims_resolve_with_dim)",
    r"test_string_split_empty_tensor":
        "StringSplit's output width depends on the strings' contents",
}


@pytest.fixture(scope="module")
def results():
    onnx_suite = pytest.importorskip("onnx_suite")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res, _, _ = onnx_suite.run(jobs=min(4, os.cpu_count() or 1))
    return res


def test_no_crash_and_no_refused_valid_model(results):
    by = collections.Counter(r["status"] for r in results)
    assert len(results) > 1500
    bad = [(r["name"], r.get("reason")) for r in results if r["status"] in ("crash", "refused")]
    assert not bad, bad[:10]
    assert by["ok"] > 0.9 * len(results)


def test_every_unscored_node_is_on_the_allow_list(results):
    pats = [re.compile(p + "$") for p in ALLOWED]
    stray = [(r["name"], r["unscored"][:2]) for r in results if r["status"] == "unscored"
             and not any(p.match(r["name"]) for p in pats)]
    assert not stray, stray[:10]


def test_allow_list_entries_are_still_needed(results):
    """An entry that no longer matches an unscored model must be removed (the list only shrinks)."""
    unscored = [r["name"] for r in results if r["status"] == "unscored"]
    stale = [p for p in ALLOWED if not any(re.match(p + "$", n) for n in unscored)]
    assert not stale, stale


def test_no_op_type_is_unscored_for_lack_of_a_cost_model(results):
    missing = {(d, op) for r in results for d, op, kind, _ in r.get("unscored", []) if kind == "unsupported"}
    assert not missing, sorted(missing)


def test_every_standard_op_has_a_cost_function():
    """Every operator the installed onnx defines in the default, preview and training domains."""
    from onnx import defs

    from dnnperf.ops import REGISTRY

    missing = sorted({(s.domain, s.name) for s in defs.get_all_schemas_with_history()
                      if s.domain in ("", "ai.onnx", "ai.onnx.preview", "ai.onnx.preview.training")
                      and (s.name if s.domain in ("", "ai.onnx") else f"{s.domain}:{s.name}") not in REGISTRY})
    assert not missing, missing


# models whose shapes follow from an input's value: with that value (here from the test case's own
# input data, as a user who knows it would pass --value), every node is scored
VALUE_RESOLVED = re.compile(r"test_((hann|hamming|blackman)window(_symmetric)?|center_crop_pad_.*)_expanded$")


def test_runtime_value_models_resolve_with_value(tmp_path):
    import numpy as np
    import onnx
    from onnx.backend.test.case.node import collect_testcases

    from dnnperf.api import inspect_model
    from dnnperf.ir import ShapeOverrides

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in collect_testcases(None) if VALUE_RESOLVED.match(c.name)]
    assert len(cases) >= 6
    for c in cases:
        path = str(tmp_path / f"{c.name}.onnx")
        onnx.save(c.model, path)
        graph_inputs = [i.name for i in c.model.graph.input]
        values = tuple((name, tuple(float(x) for x in np.asarray(arr).reshape(-1)))
                       for name, arr in zip(graph_inputs, c.data_sets[0][0]) if np.asarray(arr).dtype.kind in "iu")
        assert values, c.name
        without = inspect_model(path)
        assert without.unscored(), c.name  # the premise: unresolved without the value
        insp = inspect_model(path, ShapeOverrides(values=values))
        assert not insp.unscored(), (c.name, values)
        assert insp.totals()["ops"] > 0


def test_sequence_element_dims_resolve_with_dim(tmp_path):
    import onnx
    from onnx.backend.test.case.node import collect_testcases

    from dnnperf.api import inspect_model
    from dnnperf.ir import ShapeOverrides

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in collect_testcases(None) if c.name.startswith("test_sequence_map_")]
    assert len(cases) >= 10
    for c in cases:
        path = str(tmp_path / f"{c.name}.onnx")
        onnx.save(c.model, path)
        symbols = set()
        for vi in c.model.graph.input:
            tt = (vi.type.sequence_type.elem_type if vi.type.WhichOneof("value") == "sequence_type" else vi.type)
            symbols |= {d.dim_param for d in tt.tensor_type.shape.dim if d.dim_param}
        if c.name == "test_sequence_map_add_2_sequences":  # without: listed, and the note says how
            plain = inspect_model(path)
            assert plain.unscored() and any("--dim N=" in w for w in plain.warnings), plain.warnings
        insp = inspect_model(path, ShapeOverrides(dims=tuple((s, 3) for s in sorted(symbols))))
        assert not insp.unscored(), c.name


def test_scan_bodies_resolve_with_outer_scope_values(tmp_path):
    """LinearAttention's expanded body: a Scan whose Unsqueeze axes are Constants of the enclosing
    graph. query/key/value [2, 4, 32] with 4 heads: per step and batch x head (2 x 4), the outer
    product k v^T (8 x 1 x 8 = 64 MACs) and the read-out q S (1 x 8 x 8 = 64 MACs), over 4 steps."""
    import onnx
    from onnx.backend.test.case.node import collect_testcases

    from dnnperf.api import inspect_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = next(c for c in collect_testcases(None) if c.name == "test_linear_attention_linear_expanded")
    path = str(tmp_path / "la.onnx")
    onnx.save(case.model, path)
    insp = inspect_model(path)
    assert not insp.unscored()
    assert insp.totals()["macs"] == 4 * (2 * 4) * (64 + 64)
