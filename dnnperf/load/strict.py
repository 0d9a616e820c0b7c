"""The nodes ONNX's shape inference refuses, one by one.

The loader runs ONNX's inference in its lenient mode, which skips a node whose shapes break its
operator's rules (a Softmax of a scalar, a Col2Im whose ``image_shape`` has three entries for two
spatial axes, an AffineGrid whose ``size`` has nine entries) and carries on: the node's
outputs keep whatever the file declares, and the figures were priced on them, silently. ONNX Runtime
runs the same rules when it loads a model and refuses the file. So inference runs strict first; a
model it passes costs nothing more. Where it fails, its report (every failing node of the main graph,
by operator and name) is read here into ``{first output: why}``; the lenient pass supplies the
shapes, and each node named is left unscored as a contradiction (exit 2 when a flag made it so).

Three kinds of report line are dropped: a node whose input has no type because an earlier node failed
(that one is reported), a failure inside an operator's function body (ONNX 1.2x expands
MeanVarianceNormalization into a Constant it then refuses, for a model ONNX Runtime runs), and a
declared shape or type that differs from the inferred one. Where a graph output's declared shape is
the one that differs, the loader drops the outputs' declarations and infers again: the lenient pass
keeps a declaration over what the node makes, and the figures priced the declaration.
"""

from __future__ import annotations

import re

# "(op_type:Softmax, node name: s): [ShapeInferenceError] Input rank must be >= 1 for Softmax."
_LINE = re.compile(r"^\(op_type:([^,)]*)(?:, node name: (.*?))?\): \[(\w+)\] (.*)$")
# ONNX's own pointer at the node ("... in node Softmax (n7)", "... in ."), said already
_WHERE = re.compile(r"\s+in (?:node .*|\.)$")
_CASCADE = "expected to have type but instead is null"
# a shape or element type the file declares (a graph output, a control-flow body's input) that differs
# from the one inferred: the graph outputs' declared shapes are dropped (``drop_output_declarations``) so the
# figures price what the node makes, and a flag that resizes the model leaves a body's declarations
# behind (ONNX Runtime warns and runs such a body at the size it is given)
_DECLARED = ("Inferred elem type differs from existing elem type", "Can't merge shape info",
             "Inferred shape and existing shape differ", "Mismatch between number of inferred and declared dimensions")
_TAG = "dnnperf-node-"


def infer(model, lenient):
    """(ONNX's inferred copy of ``model``, its strict report or ''). ``lenient()``: the loader's own
    call of the lenient inference (it turns ONNX's other failures into one-line errors)."""
    import onnx
    from onnx.shape_inference import InferenceError

    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=True, data_prop=False), ""
    except InferenceError as exc:
        return lenient(), str(exc)
    except Exception:  # anything else: the lenient pass says it (or gets through)
        return lenient(), ""


def _failures(report: str) -> list[tuple[str, str, str]]:
    """(op type, node name, why) for each node's own failure in a strict report."""
    out = []
    for line in report.splitlines():
        line = line.strip()
        if line.startswith("[ShapeInferenceError] Inference error(s): "):
            line = line[len("[ShapeInferenceError] Inference error(s): "):]
        m = _LINE.match(line)
        if m is None:
            continue
        op, name, _, why = m.groups()
        if _CASCADE in why or "Inference error(s)" in why or any(d in why for d in _DECLARED):
            continue
        why = _WHERE.sub("", why.strip()).rstrip(" .")
        out.append((op, name or "", why or "its shapes break its operator's rules"))
    return out


def outputs_disagree(report: str) -> bool:
    """Whether a strict report holds a graph output declared of another shape or element type than its
    node makes (not a control-flow body's declaration: a flag that resizes the model leaves those behind)."""
    return any("Graph attribute inferencing failed" not in line and any(d in line for d in _DECLARED)
               for line in report.splitlines())


def drop_output_declarations(model) -> None:
    """Forget the shapes and element types ``model``'s graph outputs declare (what a node makes wins:
    ONNX's lenient inference keeps a declaration over its own and the figures would price it)."""
    inputs = {vi.name for vi in model.graph.input}
    for vi in model.graph.output:
        if vi.type.HasField("tensor_type") and vi.name not in inputs:
            vi.type.tensor_type.ClearField("shape")
            vi.type.tensor_type.elem_type = 0


def refused(model, report: str) -> dict[str, str]:
    """{a refused main-graph node's first output: why}. Names in the report are matched to nodes; where
    a name is empty or repeated, the model is inferred once more with every node named by its place."""
    fails = _failures(report)
    if not fails:
        return {}
    import onnx

    nodes = model.graph.node
    names = [n.name for n in nodes]
    if any(not nm for nm in names) or len(set(names)) != len(names):
        named = onnx.ModelProto()
        named.CopyFrom(model)
        for i, n in enumerate(named.graph.node):
            n.name = f"{_TAG}{i}"
        try:
            onnx.shape_inference.infer_shapes(named, check_type=False, strict_mode=True, data_prop=False)
            return {}
        except Exception as exc:
            fails = _failures(str(exc))
        where = {f"{_TAG}{i}": n for i, n in enumerate(nodes)}
    else:
        where = {n.name: n for n in nodes}
    out: dict[str, str] = {}
    for op, name, why in fails:
        n = where.get(name)
        if n is not None and n.op_type == op:
            key = next((o for o in n.output if o), "")
            if key and key not in out:
                out[key] = f"ONNX's shape inference refuses it ({why}), as ONNX Runtime does on loading the model"
    return out
