"""Constant folding: the values of small shape subgraphs (Shape -> Gather -> Concat -> Reshape
chains), evaluated node by node with numpy, for the Python shape path (``dnnperf.load.fast``) and for
what ONNX's shape inference leaves open when that path declines a graph.

Folding refuses ops whose output size comes from input values (Range, Expand, Tile...) when that
size is not small, so a hostile shape subgraph cannot allocate gigabytes.

Why one module this long: the resolver's walk (values on demand, per-node inference, the shape
rules' dispatch) and the evaluator it calls share the size guard every fold goes through.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnperf.ir import (BOOL_OUT, DTYPE_CODES, DTYPE_NAMES, FOLDABLE, SHAPE_VECTOR_INPUT, VALUE_DTYPES, cast_target,
                        op_key)
from dnnperf.load.read import MAX_VALUE_ELEMS, plain_attrs, static, type_shape
from dnnperf.load import sequences
from dnnperf.load.sequences import SEQ_OPS
from dnnperf.load.shapes import axis_index
from dnnperf.load.uninferred import RULES  # shapes.RULES with the ops ONNX's inference has no rule for

# element type -> (the TensorProto field that holds it when there is no raw_data, that field's numpy type)
_TYPED_FIELDS = {1: ("float_data", np.float32), 11: ("double_data", np.float64), 7: ("int64_data", np.int64),
                 6: ("int32_data", np.int32), 9: ("int32_data", np.int32), 2: ("int32_data", np.int32),
                 3: ("int32_data", np.int32), 4: ("int32_data", np.int32), 5: ("int32_data", np.int32),
                 10: ("int32_data", np.int32), 12: ("uint64_data", np.uint64), 13: ("uint64_data", np.uint64)}
_NP_DTYPES = {6: np.int32, 7: np.int64, 1: np.float32, 11: np.float64, 9: np.bool_, 10: np.float16,
              2: np.uint8, 3: np.int8, 12: np.uint32, 13: np.uint64, 4: np.uint16, 5: np.int16}


def tensor_value(t) -> np.ndarray | None:
    """A TensorProto's value as numpy, or None when it is large (not a shape) or unreadable."""
    dims = t.dims[:]
    n = 1
    for d in dims:
        n *= d
    if n > MAX_VALUE_ELEMS:
        return None
    if t.data_location == 1:  # EXTERNAL: its bytes are never read
        return None
    code = t.data_type
    dt = _NP_DTYPES.get(code)
    if dt is not None:
        raw = t.raw_data  # each read of the field copies it: once
        try:
            if raw:
                return np.frombuffer(raw, dtype=dt).reshape(dims).copy()
            field = _TYPED_FIELDS.get(code)
            if field is not None:  # the typed repeated field ONNX stores this element type in
                name, storage = field
                v = np.array(getattr(t, name)[:], dtype=storage)
                if code == 10:
                    v = v.astype(np.uint16).view(np.float16)  # float16 bit patterns, one per int32
                return v.astype(dt, copy=False).reshape(dims)
        except (ValueError, OverflowError):
            return None
    try:
        from onnx import numpy_helper

        return numpy_helper.to_array(t)
    except Exception:
        return None


def constant_value(node) -> np.ndarray | None:
    """The small value a Constant node holds (None when large or not numeric)."""
    t = getattr(node, "const", None)  # a view's: its value tensor, read once
    if t is not None:
        return tensor_value(t)
    for a in node.attribute[:]:
        name = a.name
        if name == "value":
            return tensor_value(a.t)
        if name == "value_int":
            return np.array(a.i, dtype=np.int64)
        if name == "value_ints":
            v = list(a.ints)
            return np.array(v, dtype=np.int64) if len(v) <= MAX_VALUE_ELEMS else None
        if name == "value_float":
            return np.array(a.f, dtype=np.float32)
        if name == "value_floats":
            v = list(a.floats)
            return np.array(v, dtype=np.float32) if len(v) <= MAX_VALUE_ELEMS else None
    return None


def single_values(nodes, known: dict) -> dict:
    """{output: value} of the Constant nodes holding one number (an exported ``x * 0.5`` or ``x + 0``;
    an integer index, ``qkv[0]``) whose value is not in ``known`` yet; anything longer is left to the
    folding that asks."""
    out = {}
    for node in nodes:
        if node.op_type != "Constant" or not node.output or node.output[0] in known:
            continue
        t = getattr(node, "const", None)  # a view's value tensor (decode only what can be one number)
        if t is not None:
            one = t.data_type in (1, 10, 11, 6, 7) and all(d == 1 for d in t.dims)
        else:
            a = node.attribute[0] if len(node.attribute) == 1 else None
            one = a is not None and (a.name == "value_float" or (a.name == "value" and a.t.data_type in (1, 10, 11, 6, 7)
                                                                 and all(d == 1 for d in a.t.dims)))
        if one:
            v = constant_value(node)
            if v is not None:
                out[node.output[0]] = v
    return out


# float inputs whose value ONNX's per-node inference is given (scales): short vectors only
_FLOAT_DATA = frozenset({"float32", "float16", "float64"})
_FLOAT_DATA_ELEMS = 16

# by dtype name (the loader's types); _NP_DTYPES above is by ONNX data type number
_NP_BY_NAME = {name: np.dtype(name).type for name in VALUE_DTYPES}


_NO_TYPE = (None, "")


class Resolver:
    """Per-node shape inference with constant shape values folded in numpy."""

    def __init__(self, model, opset: int, ordered: list):
        self.model = model
        self.opset = opset
        self.types: dict[str, Any] = {}  # name -> (dims tuple|None, dtype)
        self.values: dict[str, np.ndarray] = {}
        self.seqs: dict[str, list] = {}  # sequence -> its elements' (dims, dtype), where all are known
        self.declared: dict[str, Any] = {}  # a body's declared shapes, used where inference leaves gaps
        self._producer: dict[str, Any] | None = None
        self.ordered = ordered
        self.opset_imports = list(model.opset_import)
        self.ir_version = model.ir_version
        self._attrs: dict[int, dict] = {}
        from dnnperf.ops import shape_rule  # the contrib ops' rules, next to their costs

        self._shape_rule = shape_rule

    def attrs(self, node) -> dict:
        """``plain_attrs(node)``, decoded once per node."""
        a = self._attrs.get(id(node))
        if a is None:
            a = self._attrs[id(node)] = plain_attrs(node)
        return a

    @property
    def producer(self) -> dict:
        """tensor name -> producing node, built on first use (only folding needs it)."""
        if self._producer is None:
            self._producer = {o: n for n in self.ordered for o in n.output if o}
        return self._producer

    # -- values ---------------------------------------------------------------------------
    def value(self, name: str, depth: int = 0, limit: int = MAX_VALUE_ELEMS, store: dict | None = None):
        """The value of ``name`` when it follows from constants and folded shapes (numpy), else None;
        computed values up to ``limit`` elements are kept in ``values``, the loader's table of folded
        values. With a ``store`` (the attention masks of ``dnnperf.load.masks``, evaluated with a
        larger limit) what this call computes beyond the folded shapes goes there instead: values
        the loader itself would not fold never reach its table. Weight payloads are never read."""
        if not name:
            return None
        values = self.values
        v = values.get(name)  # folded values are arrays, never None
        if v is not None:
            return v
        if store is None:
            keep = values
        else:
            keep = store
            if name in store:
                return store[name]
        producer = self._producer if self._producer is not None else self.producer
        node = producer.get(name)
        if node is None:
            # any tensor with a zero-sized static shape has a known value: it is empty
            t = self.types.get(name)
            dims = static(t[0]) if t is not None else None
            if dims is not None and 0 in dims and t[1] in _NP_BY_NAME:
                val = np.zeros(dims, dtype=_NP_BY_NAME[t[1]])
                self.values[name] = val
                return val
            return None
        if depth > 200 or node.op_type not in FOLDABLE or node.domain not in ("", "ai.onnx"):
            return None
        if node.op_type in ("Shape", "Size"):
            dims = static(self.types.get(node.input[0], (None, ""))[0])
            if dims is None:
                return None
            if node.op_type == "Size":
                val = np.array(int(np.prod(dims, dtype=np.int64)), dtype=np.int64)
            else:
                a = self.attrs(node)
                val = np.array(dims[slice(a.get("start", 0), a.get("end", len(dims)))], dtype=np.int64)
            self.values[node.output[0]] = val
            return val
        if node.op_type == "Constant":
            arr = constant_value(node)
            if arr is not None:
                keep[node.output[0]] = arr
            return arr
        ins = []
        for i in node.input:
            if not i:
                ins.append(None)
                continue
            v = self.value(i, depth + 1, limit, store)
            if v is None:
                return None
            ins.append(v)
        if not fold_size_ok(node.op_type, ins, limit):
            return None
        try:
            outs = run_node(node, ins, self.opset_imports, self.attrs(node))
        except Exception:
            return None
        for oname, arr in zip(node.output, outs):
            if arr is not None and np.asarray(arr).size <= limit:
                keep[oname] = np.asarray(arr)
        return keep.get(name)

    # -- shapes -----------------------------------------------------------------------------
    def infer_node(self, node) -> None:
        types = self.types
        if node.op_type in SEQ_OPS and node.domain in ("", "ai.onnx"):
            sequences.infer(self, node)  # a handle's elements: never "resolved" by its () shape alone
            return
        for o in node.output:
            if o:
                t = types.get(o)
                if t is None or static(t[0]) is None:
                    break
        else:
            return  # every output already resolved
        contrib = self._shape_rule(op_key(node.domain, node.op_type))
        if node.domain not in ("", "ai.onnx") or contrib is not None:
            rule = contrib
            if rule is not None:
                ins = [types.get(i) if i else None for i in node.input]
                try:
                    if getattr(rule, "takes_values", False):
                        out = rule(self.attrs(node), ins, len(node.output),
                                   [self.value(i) if i else None for i in node.input])
                    else:
                        out = rule(self.attrs(node), ins, len(node.output))
                except (ArithmeticError, ValueError, TypeError, KeyError, IndexError):
                    out = []
                for o, t in zip(node.output, out):
                    if t is not None and o:
                        types[o] = t
            return
        rule = RULES.get(node.op_type)
        if rule is not None and self._by_rule(node, *rule):
            return
        from onnx import TypeProto, defs, helper, numpy_helper, shape_inference

        try:
            schema = defs.get_schema(node.op_type, self.opset, node.domain)
        except Exception:
            return
        in_types = {}
        in_data = {}
        for i in node.input:
            if not i or i not in types:
                continue
            dims, dtype = types[i]
            if dims is None:
                continue
            dims = [d if isinstance(d, (int, str)) else None for d in dims]  # symbols carried as dim_param
            try:
                in_types[i] = helper.make_tensor_type_proto(DTYPE_CODES.get(dtype, 1), dims)
            except ValueError:  # a dim past int64 (folded from a malformed shape): the node stays open
                return
            if dtype in ("int64", "int32"):
                v = self.value(i)
                if v is not None:
                    try:
                        in_data[i] = numpy_helper.from_array(np.asarray(v).astype(np.int64 if dtype == "int64" else np.int32), i)
                    except (TypeError, ValueError, OverflowError):  # a fold that gave no integers (a malformed graph)
                        pass
            elif dtype in _FLOAT_DATA and len(dims) <= 1 and all(isinstance(d, int) for d in dims) \
                    and (not dims or dims[0] <= _FLOAT_DATA_ELEMS):
                # a short float vector: Resize / Upsample scales computed from shapes (Cast, Div) or
                # given with --value; activations are never this small and one-dimensional
                v = self.value(i)
                if v is not None:
                    try:
                        in_data[i] = numpy_helper.from_array(np.asarray(v).astype(_NP_BY_NAME[dtype]), i)
                    except (TypeError, ValueError, OverflowError):
                        pass
        try:
            proto = getattr(node, "proto", node)  # a NodeView's node, for ONNX's own function
            res = shape_inference.infer_node_outputs(schema, proto, in_types, in_data, None, self.opset_imports,
                                                     self.ir_version)
        except Exception:
            res = {}
        for o, tp in res.items():
            if isinstance(tp, TypeProto):
                dims, dtype = type_shape(tp)
                old = types.get(o)
                if dims is not None and (old is None or static(old[0]) is None):
                    if old is not None and old[0] is not None and len(old[0]) == len(dims):
                        dims = tuple(d if d is not None else e for d, e in zip(dims, old[0]))  # keep what was known
                    types[o] = (dims, dtype)
        # still unknown: shape from the folded value itself
        for o in node.output:
            if o and static(types.get(o, (None, ""))[0]) is None:
                v = self.value(o)
                if v is not None:
                    types[o] = (tuple(int(d) for d in np.shape(v)), types.get(o, (None, _np_name(v)))[1])


    def _by_rule(self, node, fn, value_inputs, static_types: bool = False) -> bool:
        """Resolve ``node``'s outputs with a plain-tuple shape rule; False to defer to ONNX.
        ``static_types``: every dims tuple in ``types`` is known to be static (the Python path)."""
        types = self.types
        ins = node.input
        if static_types:
            dims = [(types.get(i) or _NO_TYPE)[0] if i else None for i in ins]
        else:
            dims = []
            for i in ins:
                t = types.get(i) if i else None
                dims.append(static(t[0]) if t is not None else None)
        vals = [None] * len(ins)
        for k in value_inputs:
            if k < len(ins) and ins[k]:
                vals[k] = self.value(ins[k])
        try:
            out = fn(self.attrs(node), dims, vals, self.opset)
        except (ArithmeticError, ValueError, TypeError, KeyError, IndexError):
            return False
        if not out or out[0] is None:
            return False
        first = types.get(ins[0]) if ins and ins[0] else None
        own = node.op_type in TYPED_BY_OP  # an output type the op sets, not its first input's
        plain = first[1] if first is not None and first[1] else "float32"
        k = 0
        for o, d in zip(node.output, out):
            if o and d is not None:
                old = types.get(o)
                if old is not None and old[1]:
                    dtype = old[1]
                elif own:
                    dtype = rule_dtype(node, k, types, first)
                    if not dtype:
                        return k > 0  # an element type that cannot be told: the output stays open
                else:
                    dtype = plain
                types[o] = (tuple(map(int, d)), dtype)
            k += 1
        return True


# ops whose output's element type is not their first input's (``rule_dtype``)
TYPED_BY_OP = BOOL_OUT | {"Cast", "CastLike", "Where", "ConstantOfShape", "Dropout"}


def rule_dtype(node, k: int, types: dict, first) -> str | None:
    """The element type of ``node``'s ``k``-th output where neither the file nor ONNX's inference states
    one (a control-flow body resolved here), for the ops of ``TYPED_BY_OP``: a Cast's ``to``, a
    CastLike's target, bool for comparisons and a Dropout's mask, a Where's branches', a
    ConstantOfShape's value (a Dropout's output: its input's). None when it cannot be told. (The first
    input's type for all of them gave a Cast to float of int64 indices inside a Mask R-CNN branch the
    type int64.)"""
    op = node.op_type
    if op == "Cast":
        to = next((a for a in node.attribute if a.name == "to"), None)
        return cast_target(to.s if to.type == 3 else to.i) if to is not None else None  # 3: Cast-1's string
    if op in ("CastLike", "Where"):
        t = types.get(node.input[1]) if len(node.input) > 1 and node.input[1] else None
        return t[1] if t is not None and t[1] else None
    if op in BOOL_OUT or (op == "Dropout" and k == 1):
        return "bool"
    if op == "ConstantOfShape":
        value = next((a for a in node.attribute if a.name == "value"), None)
        return DTYPE_NAMES.get(value.t.data_type) if value is not None else "float32"
    return first[1] if first is not None and first[1] else None


def fold_size_ok(op: str, ins: list, limit: int = MAX_VALUE_ELEMS) -> bool:
    """Refuse to fold ops whose output size comes from their input values (Range, Expand...) when
    that size is over ``limit`` elements."""
    try:
        if op == "Range":
            start, stop, delta = (float(np.asarray(x).reshape(-1)[0]) for x in ins[:3])
            return delta != 0 and abs((stop - start) / delta) <= limit
        if op in ("ConstantOfShape", "Expand", "Tile", "Reshape"):
            vals = [int(v) for v in np.asarray(ins[1] if op != "ConstantOfShape" else ins[0]).reshape(-1)]
            n = 1
            for v in vals:
                n *= max(abs(v), 1)
            if op == "Tile":
                n *= max(int(np.asarray(ins[0]).size), 1)
            return n <= limit
    except (TypeError, ValueError, IndexError, OverflowError):
        return False
    return True


def _np_name(v) -> str:
    return {np.dtype(np.int64): "int64", np.dtype(np.int32): "int32", np.dtype(np.float32): "float32",
            np.dtype(np.bool_): "bool"}.get(np.asarray(v).dtype, "float32")


def run_node(node, ins, opset_imports, attrs: dict | None = None):
    """Evaluate one small node with numpy (common shape ops) or ONNX's reference evaluator.
    ``attrs``: ``plain_attrs(node)`` when the caller has it already."""
    op = node.op_type
    if attrs is None:
        attrs = plain_attrs(node)
    ai = attrs.get
    k = SHAPE_VECTOR_INPUT.get(op)
    if k is not None and len(ins) > k and ins[k] is not None and np.ndim(ins[k]) != 1:
        raise ValueError(f"{op}'s shape input is not 1-D")  # numpy would read a [2, 2] target as four sizes

    if op == "Gather":
        x, i = ins[0], ins[1]
        if x.ndim == 1 and i.ndim == 0 and ai("axis", 0) in (0, -1):  # one element of a shape vector
            return [x[int(i)]]  # (np.take's answer: the same element, the same IndexError past the end)
        return [np.take(x, i.astype(np.int64), axis=ai("axis", 0))]
    if op == "Concat":
        if all(x.ndim for x in ins):
            return [np.concatenate(ins, axis=ai("axis", 0))]
        return [np.concatenate([np.atleast_1d(x) for x in ins], axis=ai("axis", 0))]
    if op == "Unsqueeze":
        axes = ins[1] if len(ins) > 1 and ins[1] is not None else ai("axes", [])
        x = ins[0]
        if x.ndim == 0 and np.size(axes) == 1 and int(np.asarray(axes).reshape(-1)[0]) in (0, -1):
            return [x.reshape(1)]  # a scalar made a one-element vector (shape arithmetic's commonest step)
        axes = [int(a) for a in np.asarray(axes).reshape(-1)]
        r = x.ndim + len(axes)
        new = sorted(axis_index(a, r) for a in axes)
        if len(set(new)) != len(new):
            raise ValueError("repeated Unsqueeze axis")
        shape = list(x.shape)
        for ax in new:
            shape.insert(ax, 1)
        return [x.reshape(shape)]
    if op in ("Add", "Sub", "Mul", "Equal", "Less", "Greater", "Max", "Min"):
        fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Equal": np.equal, "Less": np.less,
              "Greater": np.greater, "Max": np.maximum, "Min": np.minimum}[op]
        out = ins[0]
        for x in ins[1:]:
            out = fn(out, x)
        return [out.astype(ins[0].dtype) if op in ("Add", "Sub", "Mul", "Max", "Min") else out]
    if op == "Div" and np.issubdtype(ins[0].dtype, np.integer):
        return [(np.trunc(ins[0] / ins[1])).astype(ins[0].dtype)]
    if op == "Div" and np.issubdtype(ins[0].dtype, np.floating):
        return [np.divide(ins[0], ins[1]).astype(ins[0].dtype)]
    if op == "Cast":
        return [ins[0].astype(_NP_BY_NAME.get(cast_target(ai("to", 7)), np.float32))]
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
            sl[axis_index(ax, data.ndim)] = slice(st, en if abs(en) < 2**62 else None, sp)  # no axis taken modulo
        return [data[tuple(sl)]]
    if op == "ConstantOfShape":
        val = np.zeros(1, np.float32)
        for a in node.attribute:
            if a.name == "value":
                v = tensor_value(a.t)
                if v is None:
                    raise ValueError("unreadable ConstantOfShape value")
                val = v.reshape(-1)
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
        return [np.transpose(ins[0], ai("perm", None))]
    if op == "Not":
        return [np.logical_not(ins[0])]
    if op == "ScatterND" and ai("reduction", "none") == "none":
        data, idx, upd = ins[0], ins[1].astype(np.int64), ins[2]
        k = idx.shape[-1]
        if upd.shape != idx.shape[:-1] + data.shape[k:]:
            raise ValueError("ScatterND updates are not the shape the indices pick")
        out = data.copy()
        # one assignment for every index row, in order (a repeated row keeps its last update,
        # as a loop over the rows would)
        out[tuple(idx.reshape(-1, k).T)] = upd.reshape((-1,) + data.shape[k:])
        return [out]
    if op == "Squeeze":
        axes = ins[1] if len(ins) > 1 and ins[1] is not None else ai("axes", None)
        if axes is None:
            return [np.squeeze(ins[0])]
        return [np.squeeze(ins[0], axis=tuple(int(a) for a in np.atleast_1d(axes)))]
    if op == "Reshape":
        shape = [int(s) for s in ins[1]]
        shape = [ins[0].shape[i] if s == 0 and not ai("allowzero", 0) else s for i, s in enumerate(shape)]
        return [ins[0].reshape(shape)]
    out = _numpy_more(op, ins, ai)
    if out is not None:
        return out
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


_UNARY_FLOAT = {"Ceil": np.ceil, "Floor": np.floor, "Neg": np.negative, "Abs": np.abs, "Sqrt": np.sqrt,
                "Reciprocal": np.reciprocal, "Sign": np.sign}
_COMPARE = {"GreaterOrEqual": np.greater_equal, "LessOrEqual": np.less_equal, "And": np.logical_and,
            "Or": np.logical_or, "Xor": np.logical_xor}
_REDUCE = {"ReduceMin": np.min, "ReduceMax": np.max, "ReduceProd": np.prod, "ReduceSum": np.sum}


def _numpy_more(op: str, ins: list, ai) -> list | None:
    """Less common shape-arithmetic ops in numpy, as ONNX defines them (``run_node`` otherwise builds a
    one-node model for ONNX's reference evaluator, which imports the whole package;
    ``tests/test_load_fast.py`` checks these against ONNX's node-test outputs); None for a case left to
    that evaluator."""
    x = ins[0] if ins else None
    if x is None:
        return None
    if op in _UNARY_FLOAT and len(ins) == 1:
        if x.dtype.kind != "f":
            return None
        with np.errstate(all="ignore"):
            return [_UNARY_FLOAT[op](x).astype(x.dtype)]
    if op in _COMPARE and len(ins) == 2 and ins[1] is not None:
        if op in ("And", "Or", "Xor") and (x.dtype != np.bool_ or ins[1].dtype != np.bool_):
            return None
        return [_COMPARE[op](x, ins[1])]
    if op in _REDUCE and x.size:
        if len(ins) > 1 and ins[1] is not None:
            axes = [int(a) for a in np.asarray(ins[1]).reshape(-1)]
        else:
            axes = ai("axes", None)
            axes = None if axes is None else [int(a) for a in axes]
        if not axes:
            if ai("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(x.ndim))
        axes = tuple(axis_index(a, x.ndim) for a in axes)
        return [np.asarray(_REDUCE[op](x, axis=axes, keepdims=bool(ai("keepdims", 1)))).astype(x.dtype)]
    if op == "GatherElements" and len(ins) == 2 and ins[1] is not None:
        axis = axis_index(int(ai("axis", 0)), x.ndim)
        return [np.take_along_axis(x, ins[1].astype(np.int64), axis=axis)]
    if op == "CumSum" and len(ins) == 2 and ins[1] is not None and ins[1].size == 1 and x.ndim:
        axis = axis_index(int(ins[1].reshape(-1)[0]), x.ndim)
        y = np.flip(x, axis) if ai("reverse", 0) else x
        y = np.cumsum(y, axis=axis, dtype=x.dtype)
        if ai("exclusive", 0):  # each sum without its own element: shifted one along the axis, 0 first
            y = np.concatenate([np.zeros_like(np.take(y, [0], axis=axis)), np.take(y, range(y.shape[axis] - 1), axis=axis)],
                               axis=axis)
        return [np.flip(y, axis) if ai("reverse", 0) else y]
    if op == "Flatten" and len(ins) == 1:
        axis = int(ai("axis", 1))
        if not -x.ndim <= axis <= x.ndim:
            return None
        if axis < 0:
            axis += x.ndim
        return [x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), int(np.prod(x.shape[axis:], dtype=np.int64)))]
    return None
