"""Load an ONNX file into a shape-resolved ``dnnperf.ir.Graph`` without ever touching weight bytes.

This package is the only place that imports ``onnx`` (measurement aside). Its jobs, one module each:

    onnx_lite  ONNX's protobuf classes and operator schemas, without the onnx package's __init__
    read       bytes -> ModelProto without payloads; structural and text checks
    overrides  --batch / --dim / --input-shape written into the inputs
    topology   execution order, cycles and dangling names, the subgraph walker
    fold       per-node inference and numpy folding where ONNX's own inference leaves gaps
    gaps       what is still open, from what the model states elsewhere: declared output shapes
               carried back, control-flow bodies with outer values, bounds of data-dependent sizes
    declared   the outputs of ops no rule knows (a custom domain's), from the file's value_info
    pinned     small integer inputs whose value the declared output shapes force
    inline     Ifs decided at load time replaced by the nodes of the branch they take
    hostshape  shape arithmetic: folded at load time, or redone on the host (symbolic input dims)
    stated     element types and attributes the file states, against the operator schemas
    weights    weightless skeletons (``dnnperf strip``)

``load_graph`` runs them in order: read, check, override, ONNX shape inference (C++, does almost
everything; without data propagation, see ``_graph_from_model``), fold the rest, build the IR.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

from dnnperf.errors import DnnperfError
from dnnperf.ir import DTYPE_NAMES, NEVER_FOLDED, Graph, Node, ShapeOverrides, Tensor, op_key, value_inputs
from dnnperf.load import bounds, declared, fast, gaps, hostshape, sequences, strict
from dnnperf.load.fold import Resolver, single_values, tensor_value
from dnnperf.load.onnx_fixes import onnx_wrong_shapes
from dnnperf.load.overrides import apply_overrides, batch_axes, user_values, weight_inputs, weight_inputs_note
from dnnperf.load.read import (EIGHT_BIT_TYPES, FLOAT_TYPES, MAX_ELEMS, CorruptName, check_dims, check_domains,
                               check_for_onnx_inference, check_opset, clear_payload, has_payload, is_shape_like,
                               parse_model, plain_attrs, quant_params, read_model, read_model_bytes, short,
                               sparse_weights, static, type_shape)
from dnnperf.load.stated import check_attribute_types, check_types, mixed_types, unknown_attributes
from dnnperf.load.topology import (MAX_DEPTH, WITH_BODIES, check_bodies, node_subgraphs, topo_order, views,
                                   walk_graphs)
from dnnperf.load.weights import skeleton_of, skeletonize_inplace

__all__ = ["load_graph", "resolve", "graph_from_model", "parse_model", "read_model", "read_model_bytes", "skeleton_of",
           "skeletonize_inplace", "ShapeOverrides"]


def load_graph(path: str, overrides: ShapeOverrides = ShapeOverrides()) -> Graph:
    """Path -> shape-resolved Graph. Raises DnnperfError (exit 2) on any bad input."""
    try:
        return resolve(read_model(path), overrides, path)
    except CorruptName as exc:
        raise CorruptName(exc.what, f"'{path}'") from None


def _copy(model):
    from dnnperf.load import onnx_lite

    m = onnx_lite.model_proto()
    m.CopyFrom(model)
    return m


def resolve(model, overrides: ShapeOverrides = ShapeOverrides(), path: str = "<model>") -> Graph:
    """``graph_from_model`` with --batch verified (see ``dnnperf.load.batch``): batch pins baked into
    shape constants are rewritten, and the result must scale from a batch-1 load as a batch does."""
    from dnnperf.load import batch as pin

    b = overrides.batch
    if b is None or b == 1:
        return graph_from_model(model, overrides, path)
    rewritten = _copy(model)
    ref = graph_from_model(_copy(model), pin.batch_one(overrides, {}), path)
    if ref.batch_axes:  # sequence-first recurrent inputs: the reference needs their batch axis
        ref = graph_from_model(_copy(model), pin.batch_one(overrides, ref.batch_axes), path)
    g = graph_from_model(model, overrides, path)
    notes: list[str] = []
    for _ in range(pin.MAX_ROUNDS):
        pins = pin.pinned_reshapes(g, ref, b)
        if not pins:
            break
        notes += pin.rewrite_pins(rewritten, pins)
        g = graph_from_model(_copy(rewritten), overrides, path)
    pin.verify(g, ref, b, f"--batch {b}")
    if notes:
        g.notes.append(pin.pin_note(notes, b))
    return g


def graph_from_model(model, overrides: ShapeOverrides = ShapeOverrides(), path: str = "<model>") -> Graph:
    """A parsed ModelProto (modified in place: payloads dropped, overrides written) -> Graph. Shapes
    still open that follow from a small integer input's value are resolved where the declared
    output shapes force that value (``dnnperf.load.pinned``), and a note says so."""
    dynamic = hostshape.symbolic_inputs(model)  # before the overrides are written into the inputs
    g = _graph_from_model(model, overrides, path, dynamic)
    if g.unresolved and g.outputs:
        from dnnperf.load import pinned

        found = pinned.pin(model, g, overrides, lambda m, ov: _graph_from_model(m, ov, path, dynamic))
        if found is not None:
            g, used = found
            g.notes.append(pinned.note(used))
    return g


def _graph_from_model(model, overrides: ShapeOverrides, path: str, dynamic: bool) -> Graph:
    from dnnperf.load import onnx_lite

    opset = check_opset(model, path)
    if opset <= 0:
        # only other domains (ai.onnx.ml, training): valid; schemas are looked up per domain
        opset = onnx_lite.opset_version()
    if len(model.functions):
        try:
            import onnx.inliner

            model = onnx.inliner.inline_local_functions(model)
        except Exception as exc:
            raise DnnperfError(f"cannot inline the model-local functions of '{path}': {short(exc)}") from None
    g = model.graph
    sparse_weights([g])
    init_info: dict[str, Tensor] = {}
    codes: dict[str, int] = {}  # initializer -> its element type code, as stored
    shape_inits = []  # initializers whose values may decide shapes (read.is_shape_like)
    keep = quant_params(g)  # and the quantization parameters (per-channel scales)
    for init in g.initializer:  # each weight's fields read once here
        name, code = init.name, init.data_type
        t = Tensor(name, tuple(init.dims), DTYPE_NAMES.get(code, "float32"))
        check_dims(t.shape, name, path)
        init_info[name] = t
        codes[name] = code
        if (code in (6, 7) or code in FLOAT_TYPES or code in EIGHT_BIT_TYPES) and is_shape_like(init, keep):
            shape_inits.append(init)
        elif has_payload(init):  # a model built in memory (read_model's have none): its payload dropped
            clear_payload(init)
    stored = views(g.node)
    sparse_weights(sg for v in stored if v.op_type in WITH_BODIES or v.domain not in ("", "ai.onnx")
                   for _, b in node_subgraphs(v) for sg in walk_graphs(b))
    fed = weight_inputs(model, set(init_info), stored)  # parameters an export left out: weights fed at run time
    init_info.update(fed)
    weights = set(init_info)
    axes = batch_axes(model, weights, stored)
    before = {vi.name: type_shape(vi.type)[0] for vi in g.input}
    notes = apply_overrides(model, overrides, path, weights, axes)
    after = {vi.name: type_shape(vi.type)[0] for vi in g.input}
    bindings = declared.input_bindings(before, after)  # symbol -> the size the overrides gave it
    if bindings is None:
        # an override changed a size the file fixed (--batch 4 on an export of batch 1): the outputs'
        # declared shapes are the old size's, and ONNX's inference keeps a declared shape over its own
        # (torchvision's LR-ASPP ended in a Resize of 4 x 21 x 65 x 65 into 1 x 21 x 520 x 520)
        for vi in g.output:
            if vi.type.HasField("tensor_type") and vi.name not in before:
                vi.type.tensor_type.ClearField("shape")
    notes += check_types(g, stored, opset, path, codes)  # unknown type codes, text or flags read as numbers: refused
    check_attribute_types(stored, opset, path)  # an attribute of another type than its operator defines: refused
    if fed:
        notes.append(weight_inputs_note(list(fed)))
    stated = declared.declared_shapes(g, stored)  # what the file states for its unknown ops' outputs, before dropping it
    empty, real = [], 0
    for vi in g.input:
        dims, _ = type_shape(vi.type)
        if dims:
            check_dims(tuple(d for d in dims if isinstance(d, int)), vi.name, path)
        if vi.name in init_info:
            continue
        if dims and any(d == 0 for d in dims):
            empty.append((vi.name, dims))
        else:
            real += 1
    if empty and not real:  # valid, but nothing to compute: say so and carry on
        name, dims = empty[0]
        notes.append(f"model input '{name}' has a zero-sized dimension {list(dims)}: there is no work to analyse "
                     "— pass real sizes with --input-shape NAME=AxBxC")
    check_domains(model, path, stored)
    check_bodies(stored, path)
    available = {i.name for i in g.input} | set(init_info)
    ordered = topo_order(stored, available)
    del g.value_info[:]  # stale entries could disagree with the user's dims
    res = fast_res = fast.python_shapes(model, opset, ordered, {k: init_info[k] for k in codes}, shape_inits)
    refused: dict[str, str] = {}  # nodes ONNX's inference refuses (first output -> why)
    if res is not None:  # every shape settled by the rules: ONNX's inference (and its registry) not needed
        inferred = model
    else:
        inferred, res, refused = _onnx_inference(model, path, opset, stored, ordered)
    ig = inferred.graph
    types = res.types
    # the Python path has read the inputs and weights already (a graph output no node makes is read here)
    for coll in ((ig.input, ig.value_info, ig.output) if res is not fast_res else (ig.output,)):
        for vi in coll[:]:
            name = vi.name
            old = types.get(name)
            if old is None or static(old[0]) is None:
                types[name] = type_shape(vi.type)
    if res is not fast_res:
        for init in ig.initializer:
            types[init.name] = (tuple(init.dims), DTYPE_NAMES.get(init.data_type, "float32"))
            if is_shape_like(init, keep):
                v = tensor_value(init)
                if v is not None:
                    res.values[init.name] = v
    res.values.update(single_values(ordered, res.values))  # is an Add of one a no-op? (dnnperf.layout)
    fed = user_values(overrides, g, init_info, types, res, path)
    # (a node's outputs, subgraph label) -> the shapes resolved in it; (outputs, label, "values") -> a
    # taken If branch's small values
    bodies: dict[tuple, dict] = {}
    sliced: list[str] = []  # Slices at run-time offsets, costed at their input's size
    if res is not fast_res:  # the Python path leaves nothing open and declines control flow
        filled = declared.declared_outputs(ordered, types, stated, bindings, declared.has_rule)
        if filled:
            ops = sorted({op_key(n.domain, n.op_type) for n in filled})
            notes.append(f"the output shapes of {len(filled)} node(s) no shape rule covers ({', '.join(ops[:3])}"
                         f"{', ...' if len(ops) > 3 else ''}) are the ones the file's value_info declares, so the "
                         "layers after them are scored")
        gaps.settle(ordered, res, bodies, sliced)
        if gaps.any_open(types):
            gaps.empty_shapes(types)
    bounds.check(ordered, res, {k: t.shape for k, t in init_info.items()}, path)
    if res is not fast_res and (untyped := sequences.untyped_counters(ordered)):  # (the fast path takes no Loop)
        notes.append(sequences.untyped_note(untyped))
    if sliced:
        notes.append(f"{len(sliced)} Slice(s) at offsets known only at run time ({', '.join(sliced[:3])}"
                     f"{', ...' if len(sliced) > 3 else ''}) costed at their input's size: an upper bound")
    tensors: dict[str, Tensor] = {}
    for name, (dims, dtype) in types.items():
        if name in init_info:
            continue  # weights: their Tensor is already in init_info
        t = Tensor(name, static(dims), dtype)
        if t.shape is not None and (t.numel > MAX_ELEMS or (t.shape and min(t.shape) < 0)):
            check_dims(t.shape, name, path)  # raises with the full message
        tensors[name] = t
    tensors.update(init_info)
    init_names = frozenset(init_info)
    try:
        "".join(tensors)  # value names as dict keys: bytes means a corrupt file
    except TypeError:
        raise DnnperfError(f"'{path}' has names that are not valid UTF-8 — the file is corrupt; re-export it") from None
    from dnnperf.load import masks

    subnormal = masks.scan(ordered, res, types)
    nodes, unresolved = _build_nodes(ordered, tensors, opset, path, init_names, None, 0, res.attrs, bodies)
    if bodies:  # Ifs decided at load time: their taken branches stand in for them, node by node
        from dnnperf.load.inline import inline

        nodes, init_names = inline(nodes, tensors, res, unresolved, init_names, notes)
    notes += unknown_attributes(nodes, opset) + mixed_types(nodes, tensors, opset)
    host_shape, host_removed = hostshape.shape_arithmetic(nodes, res, init_names, dynamic)
    # values computed from a --value input are run-time work, never constants nor host arithmetic
    fed_values = _downstream(nodes, fed)  # (the IR's nodes: a branch inlined above included)
    host_shape -= fed_values
    graph_inputs = tuple(i.name for i in g.input if i.name not in init_names)
    known = init_names | (set(res.values) - fed_values)
    constants = constants_of(nodes, known)
    runtime_built = frozenset()
    if host_shape:
        runtime_built = frozenset(constants - constants_of(nodes, known - host_shape) - host_shape)
    return Graph(
        name=g.name or os.path.splitext(os.path.basename(path))[0],
        nodes=nodes,
        tensors=tensors,
        initializers=init_names,
        inputs=graph_inputs,
        outputs=tuple(o.name for o in g.output),
        opset=opset,
        values=dict(res.values),
        unresolved=unresolved,
        constants=constants,
        runtime_built=runtime_built,
        host_shape=frozenset(host_shape),
        host_removed=frozenset(host_removed),
        producer_version=f"{model.producer_name} {model.producer_version}".strip(),
        notes=notes,
        batch_axes=axes,
        symbolic_inputs=dynamic,
        subnormal=subnormal,
        bounded=frozenset(sliced),
        refused=refused,
    )


def _onnx_inference(model, path: str, opset: int, stored: list, ordered: list):
    """ONNX's own shape inference over ``model``: (the inferred copy, a Resolver over ``ordered``
    seeded with nothing yet, the nodes it refuses: ``strict.refused``). ``stored``, the views of
    ``model``'s nodes in file order, are pointed at the inferred copy's nodes (the same nodes, with
    control-flow bodies annotated by inference)."""
    import onnx

    versions = {("" if imp.domain == "ai.onnx" else imp.domain): int(imp.version) for imp in model.opset_import}
    bodies = (sg.node for sg in walk_graphs(model.graph) if sg is not model.graph)
    check_for_onnx_inference(itertools.chain([stored], bodies), versions, path)

    def infer():
        try:
            # no data propagation: ONNX's would turn every 1-D tensor of static length n that reaches an
            # elementwise op into n symbolic values (~225 bytes each; a 2^26-element Add needs ~15 GB);
            # the shape arithmetic it is meant for is folded by gaps.settle below
            return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=False)
        except RecursionError:
            raise DnnperfError(f"'{path}' nests subgraphs too deeply for shape inference") from None
        except Exception as exc:
            raise DnnperfError(f"ONNX shape inference rejected '{path}': {short(exc)}") from None

    inferred, report = strict.infer(model, infer)
    if report and strict.outputs_disagree(report):  # a graph output declared otherwise: the node's shape wins
        strict.drop_output_declarations(model)
        inferred, report = strict.infer(model, infer)
    fixes = onnx_wrong_shapes(inferred, opset)
    if fixes:  # declared, ONNX's inference keeps them and carries them downstream: a second pass
        from onnx import helper

        model.graph.value_info.extend(helper.make_tensor_value_info(name, elem, dims) for name, elem, dims in fixes)
        inferred, report = strict.infer(model, infer)
    inferred_nodes = inferred.graph.node
    if len(inferred_nodes) != len(stored):
        raise DnnperfError(f"ONNX shape inference changed the node count of '{path}' — please report this model")
    for view, node in zip(stored, inferred_nodes):
        view.attribute = node.attribute
        view.proto = node
    return inferred, Resolver(inferred, opset, ordered), strict.refused(model, report) if report else {}


def _downstream(nodes: list[Node], names: set[str]) -> set[str]:
    """Every tensor computed from ``names``: inputs at run time, so never folded constants."""
    out = set(names)
    if not names:
        return out
    for n in nodes:
        if any(i in out for i in n.inputs if i):
            out.update(o for o in n.outputs if o)
    return out


def constants_of(nodes: list[Node], known: set[str]) -> frozenset:
    """Weights, folded values, and every output computed only from them (runtimes fold those once)."""
    constants = set(known)
    add = constants.add
    for node in nodes:
        ins = node.inputs if node.op_type != "CastLike" else value_inputs(node)
        if ins:
            if node.subgraphs or node.op_type in NEVER_FOLDED:
                continue
            for i in ins:
                if i and i not in constants:
                    break
            else:
                for o in node.outputs:
                    if o:
                        add(o)
        elif node.op_type == "Constant":
            for o in node.outputs:
                if o:
                    add(o)
    return frozenset(constants)


def _build_nodes(ordered, tensors: dict, opset: int, path: str, inits: frozenset, gname: str | None,
                 depth: int, attrs_of=plain_attrs, bodies: dict | None = None,
                 scope: frozenset = frozenset()) -> tuple[list[Node], list[str]]:
    nodes: list[Node] = []
    unresolved: list[str] = []
    seen_names: dict[str, int] = {}
    inner_scope = None
    append = nodes.append
    get = tensors.get
    join = "".join
    for idx, n in enumerate(ordered):
        op = n.op_type
        ins = tuple(n.input)
        outs = tuple(n.output)
        name = n.name
        domain = n.domain
        try:  # a bytes value here means the file holds names that are not UTF-8
            join((name, op, domain))
            join(ins)
            join(outs)
        except TypeError:
            raise DnnperfError(f"'{path}' has names that are not valid UTF-8 — the file is corrupt; re-export it") from None
        if not name:
            name = f"{op}_{idx}" if gname is None else f"{gname}/{op}_{idx}"
        if name in seen_names:
            seen_names[name] += 1
            name = f"{name}#{seen_names[name]}"
        else:
            seen_names[name] = 0
        subs: dict[str, Graph] = {}
        t = n.const if op == "Constant" else None
        if t is not None:
            attrs = {"value": tuple(t.dims)}  # plain_attrs' answer, without its loop
        elif n.attribute:
            attrs: dict[str, Any] = attrs_of(n)
            if len(attrs) < len(n.attribute):  # graph-valued (or exotic) attributes left out
                if inner_scope is None:  # every name an enclosing graph produces, typed or not
                    inner_scope = scope | {o for m in ordered for o in m.output if o}
                for label, sg in node_subgraphs(n):
                    known = (bodies or {}).get((outs, label))
                    subs[label] = _subgraph(sg, tensors, opset, path, depth + 1, inits, known, bodies, inner_scope,
                                            (bodies or {}).get((outs, label, "values")))
        else:
            attrs = {}
        append(Node(name, op, domain, ins, outs, attrs, subs))
        for o in outs:
            if o:
                t = get(o)
                if t is None or t.shape is None:
                    unresolved.append(name)
                    break
    return nodes, unresolved


def _subgraph(g, outer_tensors, opset, path, depth: int, outer_inits: frozenset, known: dict | None = None,
              bodies: dict | None = None, scope: frozenset = frozenset(), values: dict | None = None) -> Graph:
    """A control-flow body with the shapes ONNX inference recorded in its value_info, overridden by
    those ``gaps`` resolved with the enclosing graph's values; weights of the enclosing graphs stay
    weights inside it. ``values``: the small values a taken If branch computed (the conditions of the
    Ifs inside it)."""
    if depth > MAX_DEPTH:
        raise DnnperfError(f"'{path}' nests control-flow subgraphs more than {MAX_DEPTH} deep — refusing to analyse it")
    tensors: dict[str, Tensor] = {}
    for coll in (g.input, g.value_info, g.output):
        for vi in coll:
            dims, dtype = type_shape(vi.type)
            tensors[vi.name] = Tensor(vi.name, static(dims), dtype)
    for name, (dims, dtype) in (known or {}).items():  # computed shapes win over declared ones (stale in exports)
        tensors[name] = Tensor(name, dims, dtype)
    inits = set()
    for init in g.initializer:
        tensors[init.name] = Tensor(init.name, tuple(init.dims), DTYPE_NAMES.get(init.data_type, "float32"))
        inits.add(init.name)
    # an enclosing graph's name is in scope even where inference left it untyped
    available = {i.name for i in g.input} | inits | set(outer_tensors) | scope
    ordered = topo_order(views(g.node), available, graph_name=f"subgraph '{g.name}'")
    merged = dict(outer_tensors)
    merged.update(tensors)
    all_inits = frozenset(inits) | outer_inits
    nodes, unresolved = _build_nodes(ordered, merged, opset, path, all_inits, g.name, depth, bodies=bodies,
                                     scope=frozenset(scope))
    return Graph(g.name, nodes, merged, all_inits, tuple(i.name for i in g.input),
                 tuple(o.name for o in g.output), opset, values=dict(values or {}), unresolved=unresolved,
                 is_body=True)
