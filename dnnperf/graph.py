"""Load an ONNX file into a shape-resolved graph without ever touching weight bytes.

This is the only module that imports ``onnx``. It
- parses the file itself (``ModelProto.ParseFromString``), so external-data paths are never opened;
- drops weight payloads before shape inference (only small integer initializers, which carry
  shapes, are kept);
- runs ONNX shape inference with data propagation, then resolves what it left unknown node by node,
  folding constant shape subgraphs (Shape -> Gather -> Concat -> Reshape chains) with numpy;
- reports anything still unresolved by name instead of silently calling it zero.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnperf.errors import DnnperfError
from dnnperf.files import atomic_write_bytes, require_file

# Largest integer tensor (elements) we keep or fold as a "shape value".
_MAX_VALUE_ELEMS = 4096
# Refuse dims whose product cannot be represented: it is a broken or hostile file.
_MAX_ELEMS = 2**62

DTYPE_NAMES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz",
    19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1",
}
DTYPE_BITS = {
    "float32": 32, "uint8": 8, "int8": 8, "uint16": 16, "int16": 16, "int32": 32, "int64": 64,
    "string": 64, "bool": 8, "float16": 16, "float64": 64, "uint32": 32, "uint64": 64,
    "complex64": 64, "complex128": 128, "bfloat16": 16, "float8e4m3fn": 8, "float8e4m3fnuz": 8,
    "float8e5m2": 8, "float8e5m2fnuz": 8, "uint4": 4, "int4": 4, "float4e2m1": 4,
}
_NP_DTYPES = {6: np.int32, 7: np.int64, 1: np.float32, 11: np.float64, 9: np.bool_, 10: np.float16,
              2: np.uint8, 3: np.int8, 12: np.uint32, 13: np.uint64, 4: np.uint16, 5: np.int16}


class Tensor:
    """A tensor's static description. ``shape`` is None when it could not be resolved.

    ``numel`` and ``nbytes`` are computed once (sub-byte types round up to whole bytes).
    """

    __slots__ = ("name", "shape", "dtype", "numel", "nbytes")

    def __init__(self, name: str, shape: tuple[int, ...] | None, dtype: str):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        if shape is None:
            self.numel = self.nbytes = None
        else:
            n = 1
            for d in shape:
                n *= d
            self.numel = n
            self.nbytes = (n * DTYPE_BITS.get(dtype, 32) + 7) // 8

    def __eq__(self, other) -> bool:
        return isinstance(other, Tensor) and (self.name, self.shape, self.dtype) == (other.name, other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((self.name, self.shape, self.dtype))

    def __repr__(self) -> str:
        return f"Tensor(name={self.name!r}, shape={self.shape!r}, dtype={self.dtype!r})"


@dataclass(slots=True)
class Node:
    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any]
    subgraphs: dict[str, "Graph"] = field(default_factory=dict)


@dataclass
class Graph:
    """Nodes in topological order plus every tensor's shape and dtype (no weight bytes)."""

    name: str
    nodes: list[Node]
    tensors: dict[str, Tensor]
    initializers: frozenset[str]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    opset: int
    values: dict[str, np.ndarray] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)  # node names with unknown output shapes
    constants: frozenset = frozenset()  # weights and everything computed only from weights
    producer_version: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ShapeOverrides:
    """How the user resolves dynamic dims: --batch, --input-shape NAME=AxB, --dim SYMBOL=V."""

    batch: int | None = None
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    dims: tuple[tuple[str, int], ...] = ()
    strict: bool = True  # False when one set of flags serves many models: unknown names are ignored


# --------------------------------------------------------------------------------------------
# reading the file


def read_model_bytes(path: str) -> bytes:
    """Read a model file with one clear error for each way the path can be wrong."""
    if not path:
        raise DnnperfError("no model path given: pass the path of an .onnx file")
    require_file(path, "model file", "check the path", "the .onnx file inside it")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except PermissionError:
        raise DnnperfError(f"cannot read '{path}': permission denied — check the file's permissions") from None
    except OSError as exc:
        raise DnnperfError(f"cannot read '{path}': {exc.strerror or exc}") from None
    if not data:
        raise DnnperfError(f"'{path}' is empty (0 bytes) — re-export or re-download the model")
    return data


def parse_model(data: bytes, path: str = "<bytes>"):
    """Parse bytes as an ONNX ModelProto, rejecting other protobufs and truncated files."""
    import onnx
    from google.protobuf.message import DecodeError

    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError, UnicodeDecodeError):
        raise DnnperfError(
            f"'{path}' is not a readable ONNX model (protobuf parse failed: truncated or not ONNX) — "
            "re-export it or check the download"
        ) from None
    except RecursionError:
        raise DnnperfError(f"'{path}' nests subgraphs too deeply to parse — this is not a usable model") from None
    if model.ir_version <= 0 or not model.HasField("graph") or len(model.opset_import) == 0:
        raise DnnperfError(
            f"'{path}' parsed as protobuf but is not an ONNX model (no ir_version, graph or opset_import) — "
            "pass an .onnx model file"
        )
    if len(model.graph.node) == 0:
        raise DnnperfError(f"'{path}' contains a graph with no nodes — nothing to analyse")
    _check_text(model, path)
    return model


def _check_text(model, path: str) -> None:
    """Names must be valid UTF-8 (protobuf hands back bytes otherwise): a corrupt file otherwise."""

    def bad(x) -> bool:
        return isinstance(x, bytes)

    def walk(g, depth=0):
        for coll in (g.input, g.output, g.value_info, g.initializer):
            for v in coll:
                if bad(v.name):
                    return v.name
        for n in g.node:
            for x in (n.name, n.op_type, n.domain, *n.input, *n.output):
                if bad(x):
                    return x
            for a in n.attribute:
                if bad(a.name):
                    return a.name
                if a.type == 5 and depth < 64:
                    r = walk(a.g, depth + 1)
                    if r is not None:
                        return r
        return None

    found = walk(model.graph)
    if found is None:
        for imp in model.opset_import:
            if bad(imp.domain):
                found = imp.domain
    if found is not None:
        raise DnnperfError(f"'{path}' has names that are not valid UTF-8 ({found[:20]!r}...) — the file is corrupt; re-export it")


def _default_opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 0


def check_opset(model, path: str) -> int:
    import onnx

    opset = _default_opset(model)
    supported = onnx.defs.onnx_opset_version()
    if opset > supported:
        raise DnnperfError(
            f"'{path}' uses ONNX opset {opset}, newer than the installed onnx package supports ({supported}) — "
            "upgrade onnx (pip install -U onnx) or export with an older opset"
        )
    if opset <= 0:
        raise DnnperfError(f"'{path}' imports no default-domain opset — re-export the model with a standard opset")
    return opset


# --------------------------------------------------------------------------------------------
# weights out


def _is_shape_like(init) -> bool:
    """Small integer initializers carry shapes (Reshape targets, Slice starts...): keep their data."""
    if init.data_type not in (6, 7):
        return False
    if init.data_location == 1:  # EXTERNAL: never opened
        return False
    n = 1
    for d in init.dims:
        n *= d
    if n > _MAX_VALUE_ELEMS:
        return False
    return bool(init.raw_data) or len(init.int64_data) > 0 or len(init.int32_data) > 0 or n == 0


def strip_weights_inplace(model) -> dict[str, Tensor]:
    """Drop weight payloads in place (our own parsed copy: nothing is copied); return every
    initializer's shape and dtype. Small integer initializers keep their values (they are shapes).
    External-data entries are read as dims and dtype only; their ``location`` is never opened."""
    info: dict[str, Tensor] = {}
    for init in model.graph.initializer:
        name = init.name
        info[name] = Tensor(name, tuple(init.dims), DTYPE_NAMES.get(init.data_type, "float32"))
        if init.data_location == 1 and not init.raw_data:
            continue  # already external (a skeleton): no payload here, and its location is never opened
        if not _is_shape_like(init):
            _clear_payload(init)
    return info


def _clear_payload(init) -> None:
    for f in ("raw_data", "float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data"):
        init.ClearField(f)
    del init.external_data[:]
    init.data_location = 1
    e = init.external_data.add()
    e.key, e.value = "location", "__dnnperf_stripped__"


def _dtype_code(name: str) -> int:
    for k, v in DTYPE_NAMES.items():
        if v == name:
            return k
    return 1


# --------------------------------------------------------------------------------------------
# shapes


def _type_shape(tp) -> tuple[tuple | None, str]:
    """(dims or None, dtype) of a TypeProto; a dim is int, str (symbol) or None (unknown)."""
    if tp.WhichOneof("value") != "tensor_type":
        if tp.HasField("sequence_type") or tp.HasField("optional_type"):
            return None, "sequence"
        return None, "float32"
    tt = tp.tensor_type
    dtype = DTYPE_NAMES.get(tt.elem_type, "float32")
    if not tt.HasField("shape"):
        return None, dtype
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return tuple(dims), dtype


def _static(dims) -> tuple[int, ...] | None:
    if dims is None or any(not isinstance(d, int) for d in dims):
        return None
    return tuple(dims)


def _parse_overrides(model, ov: ShapeOverrides, path: str, weights: set[str]) -> list[str]:
    """Write the user's dims into the graph inputs; fail listing anything still symbolic."""
    g = model.graph
    init_names = {i.name for i in g.initializer} | weights
    real_inputs = [i for i in g.input if i.name not in init_names]
    by_name = {i.name: i for i in real_inputs}
    for name, _ in ov.input_shapes:
        if name not in by_name and ov.strict:
            raise DnnperfError(
                f"--input-shape names '{name}', but the model's inputs are: "
                f"{', '.join(sorted(by_name)) or '(none)'}"
            )
    symbols_seen: set[str] = set()
    for vi in real_inputs:
        dims, _ = _type_shape(vi.type)
        if dims is not None:
            symbols_seen.update(d for d in dims if isinstance(d, str))
    dim_map = dict(ov.dims)
    for sym in dim_map:
        if sym not in symbols_seen and ov.strict:
            raise DnnperfError(
                f"--dim {sym}=...: the model has no symbolic input dimension '{sym}' "
                f"(symbols: {', '.join(sorted(symbols_seen)) or 'none'})"
            )
    shapes = dict(ov.input_shapes)
    if ov.batch is not None:
        for name, dims in ov.input_shapes:
            if dims and dims[0] != ov.batch:
                raise DnnperfError(
                    f"conflicting flags: --batch {ov.batch} but --input-shape gives '{name}' a first dim of {dims[0]}"
                    " — drop one of them"
                )
    missing = []
    assumed: list[str] = []
    for vi in real_inputs:
        if not vi.type.HasField("tensor_type"):
            continue
        shp = vi.type.tensor_type.shape
        if vi.name in shapes:
            new = shapes[vi.name]
            del shp.dim[:]
            for v in new:
                shp.dim.add().dim_value = v
            continue
        for i, d in enumerate(shp.dim):
            if i == 0 and (ov.batch is not None or (d.HasField("dim_param") and d.dim_param not in dim_map)):
                if ov.batch is None:
                    assumed.append(f"{vi.name}[0]='{d.dim_param}'")
                d.Clear()
                d.dim_value = ov.batch if ov.batch is not None else 1
            elif d.HasField("dim_param") and d.dim_param in dim_map:
                v = dim_map[d.dim_param]
                d.Clear()
                d.dim_value = v
            elif not d.HasField("dim_value"):
                missing.append((vi.name, i, d.dim_param or "?"))
    if missing:
        parts = [f"{n}[{i}]='{s}'" for n, i, s in missing]
        syms = sorted({s for _, _, s in missing if s != "?"})
        hint = " ".join(f"--dim {s}=N" for s in syms) or "--input-shape NAME=1x3x224x224"
        raise DnnperfError(
            f"unresolved dynamic input dims in '{path}': {', '.join(parts)} — fix with {hint}"
            + (" (or --batch N for the first dim)" if any(i == 0 for _, i, _ in missing) else "")
        )
    return [f"batch dim {', '.join(assumed)} unresolved: assumed 1 (pass --batch N)"] if assumed else []


def _tensor_value(init) -> np.ndarray | None:
    try:
        from onnx import numpy_helper

        return numpy_helper.to_array(init)
    except Exception:
        return None


class _Resolver:
    """Finish shape inference: per-node inference with constant shape values folded in numpy."""

    FOLDABLE = {
        "Shape", "Size", "Gather", "Concat", "Unsqueeze", "Squeeze", "Slice", "Cast", "Add", "Sub", "Mul",
        "Div", "Identity", "Constant", "ConstantOfShape", "Range", "Reshape", "Equal", "Where", "ReduceProd",
        "Expand", "Floor", "Ceil", "Sqrt", "Neg", "Abs", "Max", "Min", "Mod", "Not", "Less", "Greater",
        "Tile", "Flatten", "Transpose", "Split", "ScatterND", "GatherElements", "ReduceSum", "ReduceMax",
        "ReduceMin", "Pow", "Sign", "Clip", "NonZero", "Trilu", "CumSum", "And", "Or", "Xor",
        "LessOrEqual", "GreaterOrEqual", "Round", "Reciprocal",
    }

    def __init__(self, model, opset: int):
        self.model = model
        self.opset = opset
        self.types: dict[str, Any] = {}  # name -> (dims tuple|None, dtype)
        self.values: dict[str, np.ndarray] = {}
        self._producer: dict[str, Any] | None = None
        self.ordered: list = []
        self.opset_imports = list(model.opset_import)
        self.ir_version = model.ir_version

    @property
    def producer(self) -> dict:
        """tensor name -> producing node, built on first use (only folding needs it)."""
        if self._producer is None:
            self._producer = {o: n for n in self.ordered for o in n.output if o}
        return self._producer

    # -- values ---------------------------------------------------------------------------
    def value(self, name: str, depth: int = 0):
        if not name:
            return None
        if name in self.values:
            return self.values[name]
        node = self.producer.get(name)
        if node is None or depth > 200 or node.op_type not in self.FOLDABLE or node.domain not in ("", "ai.onnx"):
            return None
        if node.op_type in ("Shape", "Size"):
            dims = _static(self.types.get(node.input[0], (None, ""))[0])
            if dims is None:
                return None
            if node.op_type == "Size":
                val = np.array(int(np.prod(dims, dtype=np.int64)), dtype=np.int64)
            else:
                start, end = 0, len(dims)
                for a in node.attribute:
                    if a.name == "start":
                        start = a.i
                    elif a.name == "end":
                        end = a.i
                val = np.array(dims[slice(start, end)], dtype=np.int64)
            self.values[node.output[0]] = val
            return val
        if node.op_type == "Constant":
            from onnx import helper

            for a in node.attribute:
                v = helper.get_attribute_value(a)
                if a.name == "value":
                    arr = _tensor_value(v)
                elif a.name in ("value_int", "value_float"):
                    arr = np.array(v)
                elif a.name in ("value_ints", "value_floats"):
                    arr = np.array(v)
                else:
                    arr = None
                if arr is not None and arr.size <= _MAX_VALUE_ELEMS:
                    self.values[node.output[0]] = arr
                    return arr
            return None
        ins = []
        for i in node.input:
            if not i:
                ins.append(None)
                continue
            v = self.value(i, depth + 1)
            if v is None:
                return None
            ins.append(v)
        if not _fold_size_ok(node.op_type, ins):
            return None
        try:
            outs = _run_node(node, ins, self.opset_imports)
        except Exception:
            return None
        for oname, arr in zip(node.output, outs):
            if arr is not None and np.asarray(arr).size <= _MAX_VALUE_ELEMS:
                self.values[oname] = np.asarray(arr)
        return self.values.get(name)

    # -- shapes -----------------------------------------------------------------------------
    def infer_node(self, node) -> None:
        types = self.types
        done = True
        for o in node.output:
            if o:
                t = types.get(o)
                if t is None or _static(t[0]) is None:
                    done = False
                    break
        if done:
            return
        from onnx import TypeProto, defs, helper, numpy_helper, shape_inference
        if node.domain not in ("", "ai.onnx"):
            out = custom_domain_shapes(node, self.types)
            for o, t in zip(node.output, out):
                if t is not None and o:
                    self.types[o] = t
            return
        try:
            schema = defs.get_schema(node.op_type, self.opset, node.domain)
        except Exception:
            return
        in_types = {}
        in_data = {}
        for i in node.input:
            if not i or i not in self.types:
                continue
            dims, dtype = self.types[i]
            if dims is None:
                continue
            dims = tuple(d if isinstance(d, int) else None for d in dims)
            tp = helper.make_tensor_type_proto(_dtype_code(dtype), [d for d in dims])
            in_types[i] = tp
            if dtype in ("int64", "int32"):
                v = self.value(i)
                if v is not None:
                    in_data[i] = numpy_helper.from_array(np.asarray(v).astype(np.int64 if dtype == "int64" else np.int32), i)
        try:
            res = shape_inference.infer_node_outputs(
                schema, node, in_types, in_data, None, self.opset_imports, self.ir_version
            )
        except Exception:
            res = {}
        for o, tp in res.items():
            if isinstance(tp, TypeProto):
                dims, dtype = _type_shape(tp)
                old = self.types.get(o)
                if dims is not None and (old is None or _static(old[0]) is None):
                    self.types[o] = (dims, dtype)
        # still unknown: shape from the folded value itself
        for o in node.output:
            if o and _static(self.types.get(o, (None, ""))[0]) is None:
                v = self.value(o)
                if v is not None:
                    self.types[o] = (tuple(int(d) for d in np.shape(v)), self.types.get(o, (None, _np_name(v)))[1])


def _fold_size_ok(op: str, ins: list) -> bool:
    """Refuse to fold ops whose output size comes from their input values (Range, Expand...) when
    that size is not small: a hostile shape subgraph must not allocate gigabytes."""
    try:
        if op == "Range":
            start, limit, delta = (float(np.asarray(x).reshape(-1)[0]) for x in ins[:3])
            return delta != 0 and abs((limit - start) / delta) <= _MAX_VALUE_ELEMS
        if op in ("ConstantOfShape", "Expand", "Tile", "Reshape"):
            vals = [int(v) for v in np.asarray(ins[1] if op != "ConstantOfShape" else ins[0]).reshape(-1)]
            n = 1
            for v in vals:
                n *= max(abs(v), 1)
            if op == "Tile":
                n *= max(int(np.asarray(ins[0]).size), 1)
            return n <= _MAX_VALUE_ELEMS
    except (TypeError, ValueError, IndexError, OverflowError):
        return False
    return True


def _np_name(v) -> str:
    return {np.dtype(np.int64): "int64", np.dtype(np.int32): "int32", np.dtype(np.float32): "float32",
            np.dtype(np.bool_): "bool"}.get(np.asarray(v).dtype, "float32")


def _run_node(node, ins, opset_imports):
    """Evaluate one small node with numpy (common shape ops) or ONNX's reference evaluator."""
    op = node.op_type
    attrs = {a.name: a for a in node.attribute}

    def ai(name, default):
        a = attrs.get(name)
        if a is None:
            return default
        from onnx import helper

        return helper.get_attribute_value(a)

    if op == "Gather":
        return [np.take(ins[0], ins[1].astype(np.int64), axis=ai("axis", 0))]
    if op == "Concat":
        return [np.concatenate([np.atleast_1d(x) for x in ins], axis=ai("axis", 0))]
    if op == "Unsqueeze":
        axes = ins[1] if len(ins) > 1 and ins[1] is not None else ai("axes", [])
        out = ins[0]
        r = out.ndim + len(list(np.atleast_1d(axes)))
        for ax in sorted(int(a) % r for a in np.atleast_1d(axes)):
            out = np.expand_dims(out, ax)
        return [out]
    if op in ("Add", "Sub", "Mul", "Equal", "Less", "Greater", "Max", "Min"):
        fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Equal": np.equal, "Less": np.less,
              "Greater": np.greater, "Max": np.maximum, "Min": np.minimum}[op]
        out = ins[0]
        for x in ins[1:]:
            out = fn(out, x)
        return [out.astype(ins[0].dtype) if op in ("Add", "Sub", "Mul", "Max", "Min") else out]
    if op == "Div" and np.issubdtype(ins[0].dtype, np.integer):
        return [(np.trunc(ins[0] / ins[1])).astype(ins[0].dtype)]
    if op == "Cast":
        to = ai("to", 7)
        return [ins[0].astype(_NP_DTYPES.get(to, np.float32))]
    if op == "Identity":
        return [ins[0]]
    if op == "Slice":
        data = ins[0]
        starts = [int(x) for x in np.atleast_1d(ins[1])]
        ends = [int(x) for x in np.atleast_1d(ins[2])]
        axes = [int(x) for x in np.atleast_1d(ins[3])] if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
        steps = [int(x) for x in np.atleast_1d(ins[4])] if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
        sl = [slice(None)] * data.ndim
        for st, en, ax, sp in zip(starts, ends, axes, steps):
            sl[ax % data.ndim] = slice(st, en if abs(en) < 2**62 else (None if sp > 0 else None), sp)
        return [data[tuple(sl)]]
    if op == "ConstantOfShape":
        from onnx import numpy_helper

        val = np.zeros(1, np.float32)
        if "value" in attrs:
            val = numpy_helper.to_array(attrs["value"].t).reshape(-1)
        return [np.full(tuple(int(x) for x in np.atleast_1d(ins[0])), val[0], dtype=val.dtype)]
    if op == "Range":
        return [np.arange(ins[0].item(), ins[1].item(), ins[2].item()).astype(ins[0].dtype)]
    if op == "Where":
        return [np.where(ins[0], ins[1], ins[2])]
    if op == "Expand":
        shape = tuple(int(x) for x in np.atleast_1d(ins[1]))
        return [ins[0] * np.ones(shape, dtype=ins[0].dtype)]
    if op == "Mod" and np.issubdtype(ins[0].dtype, np.integer) and not ai("fmod", 0):
        return [np.mod(ins[0], ins[1])]
    if op == "Transpose":
        perm = ai("perm", None)
        return [np.transpose(ins[0], perm)]
    if op == "Squeeze":
        axes = ins[1] if len(ins) > 1 and ins[1] is not None else ai("axes", None)
        if axes is None:
            return [np.squeeze(ins[0])]
        return [np.squeeze(ins[0], axis=tuple(int(a) for a in np.atleast_1d(axes)))]
    if op == "Reshape":
        shape = [int(s) for s in ins[1]]
        shape = [ins[0].shape[i] if s == 0 and not ai("allowzero", 0) else s for i, s in enumerate(shape)]
        return [ins[0].reshape(shape)]
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    in_names = [f"i{k}" if x is not None else "" for k, x in enumerate(ins)]
    n2 = helper.make_node(op, in_names, [f"o{k}" for k in range(len(node.output))], domain=node.domain)
    n2.attribute.extend(node.attribute)
    g = helper.make_graph(
        [n2], "fold",
        [helper.make_tensor_value_info(n, 0, None) for n in in_names if n],
        [helper.make_tensor_value_info(f"o{k}", 0, None) for k in range(len(node.output))],
    )
    m = helper.make_model(g, opset_imports=opset_imports)
    sess = ReferenceEvaluator(m)
    feeds = {n: x for n, x in zip(in_names, ins) if n}
    return sess.run(None, feeds)


def custom_domain_shapes(node, types) -> list:
    """Output (dims, dtype) for the common com.microsoft fused ops; None where unknown."""
    op = node.op_type

    def t(i):
        if i < len(node.input) and node.input[i]:
            return types.get(node.input[i])
        return None

    first = t(0)
    if first is None or first[0] is None:
        return [None] * len(node.output)
    dims, dtype = first
    attrs = {a.name: a for a in node.attribute}
    if op in ("BiasGelu", "FastGelu", "QuickGelu", "Gelu", "BiasAdd", "BiasSoftmax", "FusedGemm"):
        if op == "FusedGemm":
            b = t(1)
            if b is None or b[0] is None:
                return [None]
            ta = attrs.get("transA").i if "transA" in attrs else 0
            tb = attrs.get("transB").i if "transB" in attrs else 0
            m = dims[1] if ta else dims[0]
            n = b[0][0] if tb else b[0][1]
            return [((m, n), dtype)]
        return [(dims, dtype)] + [None] * (len(node.output) - 1)
    if op in ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "EmbedLayerNormalization"):
        return [(dims, dtype)] + [None] * (len(node.output) - 1) if op != "EmbedLayerNormalization" else [None] * len(node.output)
    if op == "FusedConv":
        return [_conv_out_shape(node, types)] + [None] * (len(node.output) - 1)
    if op == "FusedMatMul":
        b = t(1)
        if b is None or b[0] is None:
            return [None]
        a_d, b_d = list(dims), list(b[0])
        if attrs.get("transA") is not None and attrs["transA"].i and len(a_d) >= 2:
            a_d[-1], a_d[-2] = a_d[-2], a_d[-1]
        if attrs.get("transB") is not None and attrs["transB"].i and len(b_d) >= 2:
            b_d[-1], b_d[-2] = b_d[-2], b_d[-1]
        return [(_matmul_shape(tuple(a_d), tuple(b_d)), dtype)]
    if op == "Attention":
        # input [B, S, Hin], weights [Hin, 3H] (or qkv_hidden_sizes)
        w = t(1)
        if w is None or w[0] is None or len(dims) != 3:
            return [None] * len(node.output)
        hid = w[0][1] // 3
        if "qkv_hidden_sizes" in attrs:
            hid = list(attrs["qkv_hidden_sizes"].ints)[2]
        return [((dims[0], dims[1], hid), dtype)] + [None] * (len(node.output) - 1)
    if op in ("MultiHeadAttention", "GroupQueryAttention"):
        if len(dims) == 3:
            v = t(2)
            out_hidden = dims[2]
            if op == "MultiHeadAttention" and v is not None and v[0] is not None and len(v[0]) == 3:
                out_hidden = v[0][2]
            return [((dims[0], dims[1], out_hidden), dtype)] + [None] * (len(node.output) - 1)
        return [None] * len(node.output)
    return [None] * len(node.output)


def _matmul_shape(a, b):
    if len(a) == 1:
        a = (1,) + tuple(a)
        squeeze_a = True
    else:
        squeeze_a = False
    if len(b) == 1:
        b = tuple(b) + (1,)
        squeeze_b = True
    else:
        squeeze_b = False
    batch = tuple(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2])))
    out = batch + (a[-2], b[-1])
    if squeeze_a:
        out = out[:-2] + out[-1:]
    if squeeze_b:
        out = out[:-1]
    return out


def _conv_out_shape(node, types):
    x = types.get(node.input[0])
    w = types.get(node.input[1]) if len(node.input) > 1 else None
    if x is None or w is None or x[0] is None or w[0] is None:
        return None
    xd, wd = x[0], w[0]
    attrs = {a.name: a for a in node.attribute}
    k = list(attrs["kernel_shape"].ints) if "kernel_shape" in attrs else list(wd[2:])
    nsp = len(xd) - 2
    strides = list(attrs["strides"].ints) if "strides" in attrs else [1] * nsp
    dil = list(attrs["dilations"].ints) if "dilations" in attrs else [1] * nsp
    pads = list(attrs["pads"].ints) if "pads" in attrs else [0] * (2 * nsp)
    auto = attrs["auto_pad"].s.decode() if "auto_pad" in attrs else "NOTSET"
    out = []
    for i in range(nsp):
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-xd[2 + i] // strides[i]))
        elif auto == "VALID":
            out.append((xd[2 + i] - (k[i] - 1) * dil[i] - 1) // strides[i] + 1)
        else:
            out.append((xd[2 + i] + pads[i] + pads[i + nsp] - (k[i] - 1) * dil[i] - 1) // strides[i] + 1)
    return ((xd[0], wd[0], *out), x[1])


# --------------------------------------------------------------------------------------------
# topology


_SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def topo_order(nodes, available: set[str], graph_name: str = "main graph") -> list:
    """Nodes in a valid execution order; reject cycles, duplicate producers and dangling inputs.

    ONNX requires nodes to be stored sorted, so one pass usually confirms the order; otherwise
    Kahn's algorithm sorts them (and finds cycles)."""
    seen = set(available)
    in_order = True
    for n in nodes:
        if n.op_type in _SUBGRAPH_OPS or (n.domain and len(n.attribute) and any(a.type in (5, 10) for a in n.attribute)):
            in_order = False  # bodies may read outer names: let Kahn's algorithm account for them
            break
        for i in n.input:
            if i and i not in seen:
                in_order = False
                break
        if not in_order:
            break
        for o in n.output:
            if o:
                if o in seen:
                    in_order = False
                    break
                seen.add(o)
        if not in_order:
            break
    if in_order:
        return list(nodes)
    return _kahn(nodes, available, graph_name)


def _kahn(nodes, available: set[str], graph_name: str) -> list:
    produced_by: dict[str, int] = {}
    for idx, n in enumerate(nodes):
        for o in n.output:
            if o:
                if o in produced_by or o in available:
                    raise DnnperfError(
                        f"tensor '{o}' is produced twice in the {graph_name} (node '{n.name or n.op_type}') — "
                        "the model is malformed; re-export it"
                    )
                produced_by[o] = idx
    indeg = [0] * len(nodes)
    users: dict[int, list[int]] = {}
    outer = available
    for idx, n in enumerate(nodes):
        deps = set()
        for i in _node_inputs_with_subgraphs(n):
            if not i or i in outer:
                continue
            p = produced_by.get(i)
            if p is None:
                if i in _node_direct_inputs(n):
                    raise DnnperfError(
                        f"node '{n.name or n.op_type}' reads tensor '{i}', which no node, input or initializer "
                        f"produces in the {graph_name} — the model is malformed; re-export it"
                    )
                continue  # outer-scope name used in a subgraph that we cannot see: tolerate
            deps.add(p)
        indeg[idx] = len(deps)
        for p in deps:
            users.setdefault(p, []).append(idx)
    ready = [i for i in range(len(nodes)) if indeg[i] == 0]
    order = []
    import heapq

    heapq.heapify(ready)
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users.get(i, ()):
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        stuck = [nodes[i].name or nodes[i].op_type for i in range(len(nodes)) if indeg[i] > 0][:3]
        raise DnnperfError(
            f"the {graph_name} has a cycle (nodes {', '.join(stuck)} ... depend on each other) — "
            "ONNX graphs must be acyclic; re-export the model"
        )
    return [nodes[i] for i in order]


def _node_direct_inputs(n) -> set[str]:
    return {i for i in n.input if i}


def _node_inputs_with_subgraphs(n):
    yield from n.input
    for a in n.attribute:
        if a.type == 5:  # GRAPH
            yield from _outer_names(a.g)
        elif a.type == 10:
            for g in a.graphs:
                yield from _outer_names(g)


def _outer_names(g):
    local = {i.name for i in g.input} | {i.name for i in g.initializer}
    for n in g.node:
        local.update(o for o in n.output if o)
    for n in g.node:
        for i in n.input:
            if i and i not in local:
                yield i


# --------------------------------------------------------------------------------------------
# public entry


def load_graph(path: str, overrides: ShapeOverrides = ShapeOverrides()) -> Graph:
    """Path -> shape-resolved Graph. Raises DnnperfError (exit 2) on any bad input."""
    data = read_model_bytes(path)
    model = parse_model(data, path)
    del data
    return graph_from_model(model, overrides, path)


def graph_from_model(model, overrides: ShapeOverrides = ShapeOverrides(), path: str = "<model>") -> Graph:
    import onnx

    opset = check_opset(model, path)
    if len(model.functions):
        try:
            import onnx.inliner

            model = onnx.inliner.inline_local_functions(model)
        except Exception as exc:
            raise DnnperfError(f"cannot inline the model-local functions of '{path}': {_short(exc)}") from None
    init_info = strip_weights_inplace(model)
    for t in init_info.values():
        _check_dims(t.shape, t.name, path)
    notes = _parse_overrides(model, overrides, path, set(init_info))
    for vi in model.graph.input:
        dims, _ = _type_shape(vi.type)
        if dims:
            _check_dims(tuple(d for d in dims if isinstance(d, int)), vi.name, path)
            if vi.name not in init_info and any(d == 0 for d in dims):
                raise DnnperfError(
                    f"model input '{vi.name}' in '{path}' has a zero-sized dimension {list(dims)}: there is no work to "
                    "analyse — pass real sizes with --input-shape NAME=AxBxC"
                )
    _check_domains(model, path)
    # topological sanity before inference (cycles, dangling names, duplicates)
    available = {i.name for i in model.graph.input} | {i.name for i in model.graph.initializer}
    ordered = topo_order(list(model.graph.node), available)
    # clear stale value_info that could disagree with the user's dims, then infer
    del model.graph.value_info[:]
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except RecursionError:
        raise DnnperfError(f"'{path}' nests subgraphs too deeply for shape inference") from None
    except Exception as exc:
        raise DnnperfError(f"ONNX shape inference rejected '{path}': {_short(exc)}") from None
    res = _Resolver(inferred, opset)
    g = inferred.graph
    for coll in (g.input, g.value_info, g.output):
        for vi in coll:
            dims, dtype = _type_shape(vi.type)
            if vi.name not in res.types or _static(res.types[vi.name][0]) is None:
                res.types[vi.name] = (dims, dtype)
    for init in g.initializer:
        res.types[init.name] = (tuple(init.dims), DTYPE_NAMES.get(init.data_type, "float32"))
        if _is_shape_like(init):
            v = _tensor_value(init)
            if v is not None:
                res.values[init.name] = v
    res.ordered = ordered
    for n in ordered:
        res.infer_node(n)
    tensors: dict[str, Tensor] = {}
    for name, (dims, dtype) in res.types.items():
        if name in init_info:
            continue  # weights: their Tensor is already in init_info
        t = Tensor(name, _static(dims), dtype)
        if t.shape is not None and (t.numel > _MAX_ELEMS or (t.shape and min(t.shape) < 0)):
            _check_dims(t.shape, name, path)  # raises with the full message
        tensors[name] = t
    tensors.update(init_info)
    init_names = frozenset(init_info)
    nodes = []
    unresolved = []
    seen_names: dict[str, int] = {}
    for idx, n in enumerate(ordered):
        name = n.name or f"{n.op_type}_{idx}"
        if name in seen_names:
            seen_names[name] += 1
            name = f"{name}#{seen_names[name]}"
        else:
            seen_names[name] = 0
        attrs, subgraphs = _attrs(n, tensors, opset, path, 0, init_names)
        node = Node(name, n.op_type, n.domain, tuple(n.input), tuple(n.output), attrs, subgraphs)
        nodes.append(node)
        for o in n.output:
            if o and (o not in tensors or tensors[o].shape is None):
                unresolved.append(name)
                break
    graph_inputs = tuple(i.name for i in model.graph.input if i.name not in init_names)
    constants = set(init_names) | set(res.values)
    for node in nodes:
        if node.inputs and not node.subgraphs and all(i in constants for i in node.inputs if i) \
                and node.op_type not in ("RandomNormal", "RandomUniform", "Multinomial", "Bernoulli"):
            constants.update(o for o in node.outputs if o)
        elif not node.inputs and node.op_type in ("Constant",):
            constants.update(o for o in node.outputs if o)
    return Graph(
        name=model.graph.name or os.path.splitext(os.path.basename(path))[0],
        nodes=nodes,
        tensors=tensors,
        initializers=init_names,
        inputs=graph_inputs,
        outputs=tuple(o.name for o in model.graph.output),
        opset=opset,
        values=dict(res.values),
        unresolved=unresolved,
        constants=frozenset(constants),
        producer_version=f"{model.producer_name} {model.producer_version}".strip(),
        notes=notes,
    )


def _attrs(n, tensors, opset, path, depth: int = 0, inits: frozenset = frozenset()) -> tuple[dict, dict]:
    from onnx import helper

    attrs: dict[str, Any] = {}
    subs: dict[str, Graph] = {}
    for a in n.attribute:
        if a.type == 5:
            subs[a.name] = _subgraph(a.g, tensors, opset, path, depth + 1, inits)
        elif a.type == 4:  # TENSOR (Constant value): keep dims only
            attrs[a.name] = tuple(int(d) for d in a.t.dims)
        elif a.type == 10:
            for k, g in enumerate(a.graphs):
                subs[f"{a.name}[{k}]"] = _subgraph(g, tensors, opset, path, depth + 1, inits)
        else:
            v = helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode("utf-8", "replace")
            elif isinstance(v, list):
                v = [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in v]
            attrs[a.name] = v
    return attrs, subs


def _subgraph(g, outer_tensors, opset, path, depth: int = 1, outer_inits: frozenset = frozenset()) -> Graph:
    """A control-flow body with the shapes ONNX inference recorded in its value_info; weights of
    the enclosing graphs stay weights inside it."""
    if depth > 64:
        raise DnnperfError(f"'{path}' nests control-flow subgraphs more than 64 deep — refusing to analyse it")
    tensors: dict[str, Tensor] = {}
    for coll in (g.input, g.value_info, g.output):
        for vi in coll:
            dims, dtype = _type_shape(vi.type)
            tensors[vi.name] = Tensor(vi.name, _static(dims), dtype)
    inits = set()
    for init in g.initializer:
        tensors[init.name] = Tensor(init.name, tuple(init.dims), DTYPE_NAMES.get(init.data_type, "float32"))
        inits.add(init.name)
    available = {i.name for i in g.input} | inits | set(outer_tensors)
    ordered = topo_order(list(g.node), available, graph_name=f"subgraph '{g.name}'")
    merged = dict(outer_tensors)
    merged.update(tensors)
    nodes = []
    unresolved = []
    for idx, n in enumerate(ordered):
        attrs, subs = _attrs(n, merged, opset, path, depth, frozenset(inits) | outer_inits)
        name = n.name or f"{g.name}/{n.op_type}_{idx}"
        nodes.append(Node(name, n.op_type, n.domain or "", tuple(n.input), tuple(n.output), attrs, subs))
        if any(o and (o not in merged or merged[o].shape is None) for o in n.output):
            unresolved.append(name)
    return Graph(g.name, nodes, merged, frozenset(inits) | outer_inits, tuple(i.name for i in g.input),
                 tuple(o.name for o in g.output), opset, unresolved=unresolved)


def _check_domains(model, path) -> None:
    """Every node's domain must be imported by the model (ONNX requires it)."""
    declared = {imp.domain or "" for imp in model.opset_import} | {"ai.onnx"}
    if "" in declared:
        declared.add("ai.onnx")
    for n in model.graph.node:
        dom = n.domain or ""
        if dom not in declared:
            raise DnnperfError(
                f"node '{n.name or n.op_type}' in '{path}' uses domain '{dom}', which the model does not import "
                "(no opset_import entry) — the model is malformed; re-export it"
            )


def _check_dims(dims, name, path):
    if dims is None:
        return
    n = 1
    for d in dims:
        if not isinstance(d, int):
            continue
        if d < 0:
            raise DnnperfError(f"tensor '{name}' in '{path}' has a negative dimension {list(dims)} — the model is malformed")
        n *= d
        if n > _MAX_ELEMS:
            raise DnnperfError(
                f"tensor '{name}' in '{path}' has dims {list(dims)} whose product overflows int64 — the model is malformed"
            )


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = re.sub(r"\s+", " ", text)
    return text[:300] + ("..." if len(text) > 300 else "")


# --------------------------------------------------------------------------------------------
# strip


def strip_file(src: str, dst: str, drop_metadata: bool = False) -> dict:
    """Write a weightless skeleton of ``src`` to ``dst`` (atomically). Returns a small summary.

    Each initializer keeps its dims and data type; its payload is cleared and it is marked as
    external data at a location that does not exist, which dnnperf (and
    ``onnx.load(..., load_external_data=False)``) read without complaint. Small integer
    initializers (shape constants) keep their values: they are shapes, not weights.
    """
    data = read_model_bytes(src)
    model = parse_model(data, src)
    before = len(data)
    del data
    removed = skeletonize_inplace(model)
    if drop_metadata:
        drop_metadata_inplace(model)
    out = model.SerializeToString()
    atomic_write_bytes(dst, out)
    return {"input_bytes": before, "output_bytes": len(out), "weight_bytes_removed": removed}


def skeletonize_inplace(model) -> int:
    """Clear every weight payload (keeping dims, dtype and small shape constants); return bytes removed."""
    removed = 0
    for init in _all_initializers(model.graph):
        if _is_shape_like(init):
            continue
        n = 1
        for d in init.dims:
            n *= d
        removed += (n * DTYPE_BITS.get(DTYPE_NAMES.get(init.data_type, "float32"), 32) + 7) // 8
        _clear_payload(init)
    return removed


def drop_metadata_inplace(model) -> None:
    """Remove doc strings and per-node metadata (exporters put stack traces with local paths there)."""
    model.doc_string = ""

    def clean(g):
        g.doc_string = ""
        for n in g.node:
            n.doc_string = ""
            del n.metadata_props[:]
            for a in n.attribute:
                if a.type == 5:
                    clean(a.g)
                elif a.type == 10:
                    for sg in a.graphs:
                        clean(sg)
        for coll in (g.input, g.output, g.value_info):
            for vi in coll:
                vi.doc_string = ""
                del vi.metadata_props[:]

    clean(model.graph)
    for f in model.functions:
        for n in f.node:
            n.doc_string = ""
            del n.metadata_props[:]


def _all_initializers(g):
    yield from g.initializer
    for n in g.node:
        for a in n.attribute:
            if a.type == 5:
                yield from _all_initializers(a.g)
            elif a.type == 10:
                for sg in a.graphs:
                    yield from _all_initializers(sg)
