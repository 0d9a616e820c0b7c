"""User overrides: write --batch / --dim / --input-shape into the graph inputs before inference (never into
the weights an export without its parameters takes as inputs),
and fail with the flag that fixes it when a dimension stays symbolic; --value's input values joined to
the folded ones (``user_values``)."""

from __future__ import annotations

from dnnperf.errors import DnnperfError
from dnnperf.ir import ShapeOverrides, Tensor
from dnnperf.load import dim_expr
from dnnperf.load.read import ANONYMOUS_DIM_NAMES, static, type_shape


# where an op reads its parameters: an input consumed only there is a weight fed at run time
WEIGHT_SLOTS = {"Conv": (1, 2), "ConvTranspose": (1, 2), "Gemm": (1, 2), "BatchNormalization": (1, 2, 3, 4),
                "InstanceNormalization": (1, 2), "LayerNormalization": (1, 2), "GroupNormalization": (1, 2),
                "LSTM": (1, 2, 3), "GRU": (1, 2, 3), "RNN": (1, 2, 3), "PRelu": (1,)}


def weight_inputs(model, weights: set[str], nodes) -> dict[str, Tensor]:
    """Model inputs with a static shape that every node reading them reads as a parameter (a
    convolution's filters, a norm's scale): an export without its parameters (``export_params=False``)
    takes its weights as inputs. They are weights, not per-inference data: --batch must not resize
    them (ResNet-18's conv1.weight [64, 3, 7, 7] became [2, 3, 7, 7] under --batch 2)."""
    g = model.graph
    candidates, types = {}, {}
    for vi in g.input:
        if vi.name in weights or not vi.type.HasField("tensor_type"):
            continue
        dims, dtype = type_shape(vi.type)
        if dims and all(isinstance(d, int) for d in dims):
            candidates[vi.name] = True
            types[vi.name] = Tensor(vi.name, tuple(dims), dtype)
    if not candidates:
        return {}
    used = set()
    for n in nodes:
        slots = None
        for k, i in enumerate(n.input):
            if i in candidates:
                used.add(i)
                if slots is None:
                    slots = WEIGHT_SLOTS.get(n.op_type, ()) if n.domain in ("", "ai.onnx") else ()
                if k not in slots:
                    candidates[i] = False
    return {name: types[name] for name, ok in candidates.items() if ok and name in used}


def weight_inputs_note(names: list[str]) -> str:
    return (f"{len(names)} model input(s) are read only as parameters ({', '.join(names[:3])}"
            f"{', ...' if len(names) > 3 else ''}): the export left its weights out (export_params=False); they are "
            "costed as weights, not as data each inference transfers, and --batch leaves them alone")


def batch_axes(model, weights: set[str], nodes) -> dict[str, int]:
    """Which dim of each model input is its batch: 0, except for inputs fed straight into a recurrent
    op with layout 0 (sequence-first: [seq, batch, features]), whose batch is dim 1, and for a sequence
    of rank 3 or more a Scan steps through along dim 0 (a recurrent cell written as a Scan, time-major
    as its ONNX ops are): dim 1, the batch of each step's slice. ``nodes``: the main graph's nodes
    (NodeProtos or their views)."""
    axes = {}
    inputs = {i.name for i in model.graph.input if i.name not in weights}
    ranks = {i.name: len(type_shape(i.type)[0] or ()) for i in model.graph.input if i.name in inputs}
    for n in nodes:
        if n.domain not in ("", "ai.onnx") or not n.input:
            continue
        if n.op_type in ("LSTM", "GRU", "RNN") and n.input[0] in inputs:
            layout = next((a.i for a in n.attribute if a.name == "layout"), 0)
            axes[n.input[0]] = 0 if layout else 1
        elif n.op_type == "Scan":
            n_scan = next((a.i for a in n.attribute if a.name == "num_scan_inputs"), 0)
            along = next((list(a.ints) for a in n.attribute if a.name == "scan_input_axes"), [])
            scanned = n.input[len(n.input) - n_scan:] if 0 < n_scan <= len(n.input) else []
            for k, name in enumerate(scanned):
                if name in inputs and ranks.get(name, 0) >= 3 and (along[k] if k < len(along) else 0) == 0:
                    axes[name] = 1
    return axes


_LISTED = 4  # entries a one-line message names before it counts the rest, when there are over 6


def _first(items: list[str], what: str) -> str:
    """``items`` joined; past six, the first ``_LISTED`` named and the rest counted (a decoder's 160
    cache inputs made a 10 KB error line): "a, b, c, d and 157 more (161 dims)"."""
    if len(items) <= 6:
        return ", ".join(items)
    return f"{', '.join(items[:_LISTED])} and {len(items) - _LISTED} more ({len(items)} {what})"


def apply_overrides(model, ov: ShapeOverrides, path: str, weights: set[str],
                    axes: dict[str, int] | None = None) -> list[str]:
    """Write the user's dims into the graph inputs; return notes; fail listing anything still symbolic.

    ``weights``: the names of every initializer and of inputs that carry weights (``weight_inputs``);
    ``axes``: the batch dim of each input (``batch_axes``); --batch sets that dim."""
    axes = axes or {}
    g = model.graph
    init_names = weights
    real_inputs = [i for i in g.input if i.name not in init_names]
    by_name = {i.name: i for i in real_inputs}
    for name, dims in ov.input_shapes:
        if name not in by_name:
            if ov.strict:
                raise DnnperfError(
                    f"--input-shape names '{name}', but the model's inputs are: "
                    f"{', '.join(sorted(by_name)) or '(none)'}"
                )
            continue
        declared, _ = type_shape(by_name[name].type)
        if declared is not None and len(declared) != len(dims):
            shown = "[" + ", ".join(str(d) if d is not None else "?" for d in declared) + "]"
            raise DnnperfError(
                f"--input-shape {name}={'x'.join(map(str, dims))} gives {len(dims)} dims, but input '{name}' has "
                f"rank {len(declared)} ({shown}) — pass {len(declared)} dims"
            )
    symbols_seen: set[str] = set()
    for vi in real_inputs:
        dims, _ = type_shape(vi.type)
        if dims is not None:
            for d in dims:
                if isinstance(d, str):  # a name, or arithmetic on names ("past_sequence_length + 1")
                    symbols_seen.add(d)
                    symbols_seen.update(dim_expr.names(d))
        elem = _sequence_elem_shape(vi.type)
        if elem is not None:
            symbols_seen.update(d.dim_param for d in elem.dim if d.HasField("dim_param"))
    dim_map = dict(ov.dims)
    for sym in dim_map:
        if sym not in symbols_seen and ov.strict:
            raise DnnperfError(
                f"--dim {sym}=...: the model has no symbolic input dimension '{sym}' "
                f"(symbols: {', '.join(sorted(symbols_seen)) or 'none'})"
            )
    shapes = dict(ov.input_shapes)
    bound = _symbols_from_shapes(by_name, ov, dim_map)
    dim_map.update({sym: v for sym, (v, _) in bound.items()})
    shared = sorted(sym for sym in bound if sym in _symbols_of_inputs(real_inputs, set(shapes)))
    if ov.batch is not None:
        for name, dims in ov.input_shapes:
            ax = axes.get(name, 0)
            if len(dims) > ax and dims[ax] != ov.batch:
                raise DnnperfError(
                    f"conflicting flags: --batch {ov.batch} but --input-shape gives '{name}' a batch dim of {dims[ax]}"
                    " — drop one of them"
                )
    missing = []
    shapeless = []  # tensor inputs whose file states no shape at all, not even a rank (kept if a node reads them)
    assumed: list[str] = []
    batch_values: dict[str, int] = {}  # a symbol set as some tensor input's batch -> its value
    for vi in real_inputs:
        if _sequence_elem_shape(vi.type) is not None or not vi.type.HasField("tensor_type"):
            continue
        shp = vi.type.tensor_type.shape
        if vi.name not in shapes and not vi.type.tensor_type.HasField("shape"):
            shapeless.append(vi.name)
            continue
        if vi.name in shapes:
            new = shapes[vi.name]
            del shp.dim[:]
            for v in new:
                shp.dim.add().dim_value = v
            continue
        bax = axes.get(vi.name, 0)
        for i, d in enumerate(shp.dim):
            # a batch axis left symbolic, named or anonymous (skl2onnx writes None as a dim with neither
            # a value nor a name, Paddle2ONNX -1), is assumed 1 with a note
            anonymous = (d.dim_param in ANONYMOUS_DIM_NAMES if d.HasField("dim_param")
                         else not d.HasField("dim_value") or d.dim_value == -1)
            if i == bax and (ov.batch is not None or (d.HasField("dim_param") and d.dim_param not in dim_map)
                             or anonymous):
                if ov.batch is None:
                    assumed.append(f"{vi.name}[{bax}]='{d.dim_param or '?'}'")
                if d.HasField("dim_param") and not anonymous:
                    batch_values.setdefault(d.dim_param, ov.batch if ov.batch is not None else 1)
                d.Clear()
                d.dim_value = ov.batch if ov.batch is not None else 1
            elif not anonymous and d.HasField("dim_param") and d.dim_param in dim_map:
                v = dim_map[d.dim_param]
                d.Clear()
                d.dim_value = v
            elif not anonymous and d.HasField("dim_param") and (v := dim_expr.value(d.dim_param, dim_map)) is not None:
                if v < 0:
                    raise DnnperfError(f"input '{vi.name}' dim {i} is '{d.dim_param}', which the sizes given make "
                                       f"{v} — give sizes that make it 0 or more")
                d.Clear()
                d.dim_value = v
            elif anonymous or not d.HasField("dim_value"):
                missing.append((vi.name, i, "?" if anonymous else d.dim_param))
    seq_assumed = _sequence_dims(real_inputs, dim_map, batch_values)
    if shapeless:  # an input no node reads needs no shape (the graph's nodes walked only in this rare case)
        consumed = {i for n in g.node for i in n.input}
        shapeless = [n for n in shapeless if n in consumed]
    if shapeless:
        raise DnnperfError(
            f"input {', '.join(repr(n) for n in shapeless)} of '{path}' has no shape in the file (not even a rank) — "
            f"give it with --input-shape {shapeless[0]}=1x3x224x224 (its real dims)")
    if missing:
        parts = _first([f"{n}[{i}]='{s}'" for n, i, s in missing], "dims")
        # an input with a dim that has no name: its shape as far as it is known, N where it is not (the
        # names of its other open dims need no --dim then)
        unnamed = list(dict.fromkeys(n for n, _, s in missing if s == "?"))
        syms = sorted({x for n, _, s in missing if s != "?" and n not in unnamed
                       for x in ([y for y in dim_expr.names(s) if y not in dim_map] or [s])})
        given = {vi.name: "x".join(str(d.dim_value) if d.HasField("dim_value") and d.dim_value != -1 else "N"
                                   for d in vi.type.tensor_type.shape.dim) for vi in real_inputs if vi.name in unnamed}
        shown = unnamed if len(unnamed) <= 6 else unnamed[:_LISTED]
        hint = " ".join([f"--dim {s}=N" for s in syms] + [f"--input-shape {n}={given[n]}" for n in shown])
        if len(unnamed) > len(shown):
            hint += f" (and one --input-shape for each of the {len(unnamed) - _LISTED} other inputs)"
        raise DnnperfError(
            f"unresolved dynamic input dims in '{path}': {parts} — fix with {hint}"
            + (" (or --batch N for the batch dim)" if any(i == axes.get(n, 0) for n, i, _ in missing) else "")
            + ("; a decoder with a KV cache: --phase prefill --prompt N or --phase decode --context N sets them"
               if any("past" in n.lower() for n, _, _ in missing) else "")
        )
    notes = [f"batch dim {_first(assumed, 'inputs')} unresolved: assumed 1 (pass --batch N)"] if assumed else []
    if shared:
        notes.append("input dims declared with the same name as one an --input-shape sets take its size: "
                     + ", ".join(f"{sym}={bound[sym][0]} (from {bound[sym][1]})" for sym in shared))
    if seq_assumed:
        notes.append("sequence element dims " + ", ".join(f"'{s}' ({n})" for s, n in sorted(seq_assumed.items()))
                     + " unresolved: assumed 1 (pass " + " ".join(f"--dim {s}=SIZE" for s in sorted(seq_assumed)) + ")")
    return notes


def _symbols_from_shapes(by_name: dict, ov: ShapeOverrides, dim_map: dict) -> dict[str, tuple[int, str]]:
    """Symbol -> (size, the flag that set it) for every symbolic dim of an input given by --input-shape:
    other inputs declared with the same symbol (BERT's attention_mask beside its input_ids) take that
    size. Two flags that give one symbol two sizes are refused, naming both."""
    bound: dict[str, tuple[int, str]] = {}
    for name, dims in ov.input_shapes:
        vi = by_name.get(name)
        if vi is None:
            continue
        declared, _ = type_shape(vi.type)
        flag = f"--input-shape {name}={'x'.join(map(str, dims))}"
        for sym, v in zip(declared or (), dims):
            if not isinstance(sym, str):
                continue
            if sym in dim_map and dim_map[sym] != v:
                raise DnnperfError(f"conflicting flags: --dim {sym}={dim_map[sym]} but {flag} makes '{sym}' {v} — "
                                   "drop one of them")
            if sym in bound and bound[sym][0] != v:
                raise DnnperfError(f"conflicting flags: {bound[sym][1]} makes '{sym}' {bound[sym][0]} but {flag} makes it "
                                   f"{v}; the model declares both with the same size — give them equal sizes")
            bound.setdefault(sym, (v, flag))
    return bound


def _symbols_of_inputs(real_inputs, skip: set[str]) -> set[str]:
    """Symbolic dims declared by the tensor inputs not in ``skip``."""
    out = set()
    for vi in real_inputs:
        if vi.name in skip or not vi.type.HasField("tensor_type"):
            continue
        dims, _ = type_shape(vi.type)
        out.update(d for d in dims or () if isinstance(d, str))
    return out


def _sequence_dims(real_inputs, dim_map: dict, batch_values: dict) -> dict[str, str]:
    """Symbolic dims of sequence inputs' element tensors: --dim sets them; a symbol that is also a
    tensor input's batch takes the batch's value; any other is assumed 1, as a batch is, and
    returned (symbol -> input) for the note that says so."""
    assumed: dict[str, str] = {}
    for vi in real_inputs:
        elem = _sequence_elem_shape(vi.type)
        if elem is None:
            continue
        for d in elem.dim:
            if not d.HasField("dim_param"):
                continue
            sym = d.dim_param
            if sym in dim_map:
                v = dim_map[sym]
            elif sym in batch_values:
                v = batch_values[sym]
            else:
                v = 1
                assumed.setdefault(sym, vi.name)
            d.Clear()
            d.dim_value = v
    return assumed


def _sequence_elem_shape(tp):
    """The shape of a sequence input's element tensors (None for anything else)."""
    if tp.WhichOneof("value") != "sequence_type":
        return None
    elem = tp.sequence_type.elem_type
    if not elem.HasField("tensor_type") or not elem.tensor_type.HasField("shape"):
        return None
    return elem.tensor_type.shape


def user_values(ov: ShapeOverrides, g, init_info, types, res, path: str) -> set[str]:
    """--value NAME=V,...: the input's value joins the folded values (shapes computed from it
    resolve), checked against its declared shape. Returns the names given."""
    import numpy as np

    from dnnperf.load.fold import _NP_BY_NAME

    inputs = [i.name for i in g.input if i.name not in init_info]
    given = set()
    for name, vals in ov.values:
        if name not in inputs:
            if ov.strict:
                raise DnnperfError(f"--value names '{name}', but the model's inputs are: {', '.join(sorted(inputs)) or '(none)'}")
            continue
        dims, dtype = types.get(name, (None, "float32"))
        shape = static(dims) if dims is not None else None
        if shape is None:
            if dims is not None and len(dims) == 1:
                shape = (len(vals),)
            elif dims is not None and len(dims) == 0:
                shape = ()
            else:
                raise DnnperfError(f"--value {name}: the input's shape is unknown; give it with --input-shape {name}=N")
        numel = 1
        for d in shape:
            numel *= d
        if numel != len(vals):
            raise DnnperfError(f"--value {name}: {len(vals)} value(s) given, but input '{name}' has shape "
                               f"{list(shape)} ({numel} values)")
        np_dtype = _NP_BY_NAME.get(dtype)
        if np_dtype is None:
            raise DnnperfError(f"--value {name}: inputs of type {dtype} cannot be given a value")
        arr = np.array(vals, dtype=np.float64).reshape(shape)
        if not np.all(np.isfinite(arr)):
            raise DnnperfError(f"--value {name}: give finite numbers (not inf or nan)")
        if np.issubdtype(np_dtype, np.integer):
            if not np.all(arr == np.round(arr)):
                raise DnnperfError(f"--value {name}: input '{name}' is {dtype}: give whole numbers")
            lo, hi = np.iinfo(np_dtype).min, np.iinfo(np_dtype).max
            if arr.size and (arr.min() < lo or arr.max() > hi):
                raise DnnperfError(f"--value {name}: input '{name}' is {dtype}: values must lie in {lo}..{hi}")
        elif np_dtype is not np.bool_ and arr.size and np.abs(arr).max() > np.finfo(np_dtype).max:
            raise DnnperfError(f"--value {name}: input '{name}' is {dtype}: values beyond its range")
        res.values[name] = arr.astype(np_dtype)
        types[name] = (shape, dtype)
        given.add(name)
    return given
