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

# still open: each pattern (a regular expression on the test case name) with its reason. Empty: the
# last entries (expanded CenterCropPad and AffineGrid, sizes from a run-time input's value) resolve
# since the loader reads such values off the declared output shapes (dnnperf.load.pinned)
ALLOWED: dict[str, str] = {}


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


# models whose shapes follow from an input's value: the declared output shapes force the value, and
# the loader's reading of it must equal the test case's own input data (the elements that shape
# something) and give the same costs as that value passed with --value
VALUE_RESOLVED = re.compile(r"test_(center_crop_pad_.*|affine_grid_.*)_expanded$")


def test_runtime_value_models_resolve_from_declared_outputs(tmp_path):
    import numpy as np
    import onnx
    from onnx.backend.test.case.node import collect_testcases

    from dnnperf.api import inspect_model
    from dnnperf.ir import ShapeOverrides

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in collect_testcases(None) if VALUE_RESOLVED.match(c.name)]
    assert len(cases) >= 10
    for c in cases:
        path = str(tmp_path / f"{c.name}.onnx")
        onnx.save(c.model, path)
        graph_inputs = [i.name for i in c.model.graph.input]
        values = tuple((name, tuple(float(x) for x in np.asarray(arr).reshape(-1)))
                       for name, arr in zip(graph_inputs, c.data_sets[0][0]) if np.asarray(arr).dtype.kind in "iu")
        assert values, c.name
        insp = inspect_model(path, ShapeOverrides(values=values))
        assert not insp.unscored(), (c.name, values)
        assert insp.totals()["ops"] > 0
        assert not any("declared output shapes" in w for w in insp.warnings)  # given: nothing to read off
        read_off = inspect_model(path)
        assert not read_off.unscored(), c.name
        assert read_off.totals() == insp.totals(), c.name
        (name, vals), = values
        note = next(w for w in read_off.warnings if "declared output shapes" in w)
        shown = re.search(rf"'{name}' = \[([^\]]*)\]", note).group(1).split(", ")
        assert len(shown) == len(vals)
        # AffineGrid's channel count (element 1) shapes nothing: it is the one element marked 'any'
        assert [v for v, s in zip(vals, shown) if s != "any"] == [float(s) for s in shown if s != "any"], note
        assert shown.count("any") == (1 if "affine" in c.name else 0), note


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
        if c.name == "test_sequence_map_add_2_sequences":
            # without --dim: N assumed 1, as a batch is, and the note says so and how to set it; the
            # body's Add runs over N elements, once (the sequence length is a run-time figure)
            plain = inspect_model(path)
            assert not plain.unscored()
            assert any("assumed 1" in w and "--dim N=" in w for w in plain.warnings), plain.warnings
            assert plain.totals()["ops"] == 1
        insp = inspect_model(path, ShapeOverrides(dims=tuple((s, 3) for s in sorted(symbols))))
        assert not insp.unscored(), c.name
        if c.name == "test_sequence_map_add_2_sequences":
            assert insp.totals()["ops"] == 3


def _case(name, tmp_path):
    import onnx
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = next(c for c in collect_testcases(None) if c.name == name)
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(case.model, path)
    return case, path


@pytest.mark.parametrize("name", ["test_hannwindow_expanded", "test_hammingwindow_symmetric_expanded",
                                  "test_blackmanwindow_expanded"])
def test_window_length_read_from_the_declared_output(tmp_path, name):
    """The window's length is a runtime input; the graph declares its output [10]. The Range and the
    elementwise chain after it take that length, and the figures equal those computed from the
    input's own value (--value), a different path (forward folding)."""
    import numpy as np

    from dnnperf.api import inspect_model
    from dnnperf.ir import ShapeOverrides

    case, path = _case(name, tmp_path)
    declared = inspect_model(path)
    assert not declared.unscored()
    size = int(np.asarray(case.data_sets[0][0][0]).reshape(-1)[0])
    valued = inspect_model(path, ShapeOverrides(values=(("x", (float(size),)),)))
    assert declared.totals() == valued.totals()
    rng = next(r for r in declared.rows if r.node.op_type == "Range")
    assert rng.output_shape == (size,) == (10,)


def test_loop_trip_count_from_its_scan_output(tmp_path):
    """test_loop11: the trip count is a runtime input, the scan output is declared [5, 1]: 5 runs
    of a body whose two Adds each make one element (iteration + 1, y + x[i:i+1]) = 10 ops; the
    Slice at a runtime offset takes the 1-element size its Add's declared output pins."""
    from dnnperf.api import inspect_model

    _, path = _case("test_loop11", tmp_path)
    insp = inspect_model(path)
    assert not insp.unscored()
    assert insp.totals()["other_ops"] == 10
    assert not any("ONE iteration" in w for w in insp.warnings)


def test_growing_slice_is_costed_at_its_bound(tmp_path):
    """test_loop13_seq: x[0:i+1] grows every iteration: costed at x's 5 elements, and said."""
    from dnnperf.api import inspect_model

    _, path = _case("test_loop13_seq", tmp_path)
    insp = inspect_model(path)
    assert not insp.unscored()
    assert any("upper bound" in w and "slice_out" in w for w in insp.warnings), insp.warnings
    loop = insp.rows[0].node.subgraphs["body"]
    assert loop.tensors["slice_out"].shape == (5,)


def test_expanded_range_loop_resolves(tmp_path):
    """Range as a function: a Loop whose carried value is the scalar start (its body input untyped)
    and whose scan output is declared [2]: two iterations, one Add each."""
    from dnnperf.api import inspect_model

    _, path = _case("test_range_float_type_positive_delta_expanded", tmp_path)
    insp = inspect_model(path)
    assert not insp.unscored()
    loop = next(r for r in insp.rows if r.node.op_type == "Loop")
    assert loop.workload.other_ops == 2


def test_empty_string_split_costs_nothing(tmp_path):
    """An empty input: substrings [0, ?] has no elements whatever ? is."""
    from dnnperf.api import inspect_model

    _, path = _case("test_string_split_empty_tensor", tmp_path)
    insp = inspect_model(path)
    assert not insp.unscored()
    assert insp.totals()["bytes"] == 0


def test_if_with_a_condition_known_at_load_time(tmp_path):
    """If (Size(x) == 4) on a static 4-element x: the then-branch (an Add, 4 ops) is the one that
    runs, not the dearer else-branch (a 4x4 MatMul, 16 MACs); its output shape is the If's."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    from dnnperf.api import inspect_model

    then_g = h.make_graph([h.make_node("Add", ["x", "x"], ["t"])], "then", [],
                          [h.make_tensor_value_info("t", T.FLOAT, None)])
    else_g = h.make_graph([h.make_node("Reshape", ["x", "s"], ["x44"]), h.make_node("MatMul", ["x44", "x44"], ["e"])],
                          "else", [], [h.make_tensor_value_info("e", T.FLOAT, None)])
    nodes = [h.make_node("Size", ["x"], ["n"]), h.make_node("Constant", [], ["four"], value_int=4),
             h.make_node("Equal", ["n", "four"], ["c"]),
             h.make_node("Constant", [], ["s"], value_ints=[2, 2]),
             h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
             h.make_node("Relu", ["y"], ["z"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4])],
                     [h.make_tensor_value_info("z", T.FLOAT, None)])
    path = str(tmp_path / "if.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    insp = inspect_model(path)
    assert not insp.unscored()
    # the branch it takes stands in the If's place, node by node: its Add, not the MatMul
    assert [r.node.op_type for r in insp.rows if r.node.op_type in ("If", "Add", "MatMul")] == ["Add"]
    add = next(r for r in insp.rows if r.node.op_type == "Add")
    assert add.workload.macs == 0 and add.workload.other_ops == 4
    relu = next(r for r in insp.rows if r.node.op_type == "Relu")
    assert relu.output_shape == (4,) and relu.node.inputs == ("y",) and add.node.outputs == ("y",)


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


def test_every_resolved_output_has_the_shape_the_test_case_expects(results):
    """ONNX's node test cases carry their expected output arrays: every output shape dnnperf resolves,
    with the outputs' declared shapes removed from the file and again with the small inputs shapes
    follow from given as --value (a Pad's pads, a Slice's starts), equals the expected array's (onnx
    1.23: 2,017 and 843 outputs), but for a data-dependent output costed at a stated upper bound
    (Unique, NonZero, NonMaxSuppression, a Slice at run-time offsets), which must be at least the real
    size on every axis. It found STFT's bins (ONNX's own inference ignores ``onesided``)."""
    checked = sum(1 for r in results if "wrong_shapes" in r)
    assert checked > 1500
    wrong = [(r["name"], out, got, want) for r in results for out, got, want, bound in r.get("wrong_shapes", ())
             if not bound]
    assert not wrong, wrong[:10]
    bounds = [(got, want) for r in results for _, got, want, bound in r.get("wrong_shapes", ()) if bound]
    assert all(len(g) == len(w) and all(a >= b for a, b in zip(g, w)) for g, w in bounds), bounds
