"""Shapes ONNX's forward inference leaves open, filled from what else the model states.

    bound_shapes     outputs whose size depends on the data: their upper bound, stated where they
                     are costed (``dnnperf.load.data_sized``)
    backward_shapes  a shape declared downstream (a graph or body output) carried back through
                     elementwise ops, where broadcasting leaves exactly one possible input size
    body_shapes      Scan and Loop bodies resolved with the enclosing graph's values and the shapes
                     of what the node feeds them (a Loop carrying a tensor sequence run trip by
                     trip, ``dnnperf.load.sequences``); from them the node's own outputs. A body's
                     own declared shapes fill only what its forward inference leaves open
    taken_branch     an If whose condition is known at load time (it folds from shapes): the
                     branch it takes, resolved, gives the If's outputs their shapes and values
    symbolic_lengths a length only known at run time (a Range of runtime size) named, carried forward
                     by ONNX's inference, and bound where it meets a declared size
    empty_shapes     a tensor with a zero-sized axis has no elements whatever its unknown axes are
    settle           the rules in order over a graph or a body, until nothing moves

Nothing here guesses: each rule fills a shape only where one size is possible.
"""

from __future__ import annotations

from dnnperf.ir import DTYPE_NAMES, taken_branch_label
from dnnperf.load import sequences
from dnnperf.load.data_sized import bound_shapes
from dnnperf.load.read import is_shape_like, static, type_shape
from dnnperf.load.shapes import axis_index

# ops whose first input has the output's shape
_SAME_SHAPE = frozenset({
    "Cast", "CastLike", "Sqrt", "Log", "Exp", "Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Reciprocal", "Floor", "Ceil",
    "Round", "Sin", "Cos", "Tan", "Erf", "Softmax", "LogSoftmax", "Identity", "Not", "Sign", "Softplus", "Softsign",
    "Elu", "Selu", "LeakyRelu", "HardSigmoid", "HardSwish", "Gelu", "Mish", "IsNaN", "IsInf", "Clip", "Dropout",
    "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "ThresholdedRelu", "Celu", "Shrink",
})

# ops whose output is the broadcast of all their inputs (multidirectional broadcasting)
_BROADCAST = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "And", "Or", "Xor", "Equal", "Less",
    "Greater", "LessOrEqual", "GreaterOrEqual", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Where",
})

_DEFAULT = ("", "ai.onnx")


def any_open(types) -> bool:
    """Is any tensor's shape still unknown? (Most models: no, and the passes below are skipped.)"""
    for dims, _ in types.values():
        if dims is None:
            return True
        for d in dims:
            if d.__class__ is not int:
                return True
    return False


def _forced(out: tuple, others: list[tuple]) -> bool:
    """True when an input broadcast with ``others`` to ``out`` can only have ``out``'s size: on every
    axis of size > 1 the others are 1 or absent, so the size came from this input."""
    for k in range(1, len(out) + 1):
        if out[-k] == 1:
            continue
        for o in others:
            if k <= len(o) and o[-k] != 1:
                return False
    return True


def backward_shapes(ordered, types) -> bool:
    """Carry known output shapes back to inputs whose shape forward inference could not find (a
    reduction over runtime axes, a Range of runtime length, a Slice at a runtime offset): through
    same-shape ops always, through broadcasting ops where the other inputs cannot have supplied the
    output's size. Returns whether anything was filled."""
    changed = False
    for n in reversed(ordered):
        op = n.op_type
        if n.domain not in _DEFAULT or not n.input or not n.output:
            continue
        if op not in _SAME_SHAPE and op not in _BROADCAST:
            continue
        ty = types.get(n.output[0])
        ys = static(ty[0]) if ty is not None else None
        if ys is None:
            continue
        ins = [i for i in n.input if i]
        if op in _SAME_SHAPE:
            ins = ins[:1]
        shapes = []
        for i in ins:
            t = types.get(i)
            shapes.append(static(t[0]) if t is not None else None)
        unknown = [k for k, s in enumerate(shapes) if s is None]
        if len(unknown) != 1:
            continue
        k = unknown[0]
        if op in _BROADCAST and not _forced(ys, [s for s in shapes if s is not None]):
            continue
        t = types.get(ins[k])
        if t is not None and t[1] in ("sequence", "map"):
            continue
        if t is not None and t[1]:
            dtype = t[1]
        elif op == "Where" and k == 0:
            dtype = "bool"
        else:
            dtype = next((types[i][1] for j, i in enumerate(ins) if j != k and i in types), ty[1])
        types[ins[k]] = (ys, dtype)
        changed = True
    return changed


FRESH = "?len"  # prefix of the names given to run-time lengths (never a user's symbol)


def _runtime(d) -> bool:
    """A length named here, or by ONNX's inference (which calls them unk__N)."""
    return d.__class__ is str and (d.startswith(FRESH) or d.startswith("unk__"))


def _fresh_symbols(types) -> bool:
    named = False
    k = 0
    for name, (dims, dtype) in list(types.items()):
        if dims and None in dims:
            new = []
            for d in dims:
                if d is None:
                    k += 1
                    d = f"{FRESH}{k}"
                new.append(d)
            types[name] = (tuple(new), dtype)
            named = True
    return named


def _bind(ordered, types) -> dict:
    """Run-time lengths that a statically shaped output pins down: through a same-shape op every
    axis; through a broadcast an axis where every other input is 1, absent, or the same length."""
    bound: dict[str, int] = {}
    for n in reversed(ordered):
        op = n.op_type
        if n.domain not in _DEFAULT or not n.input or not n.output or (op not in _SAME_SHAPE and op not in _BROADCAST):
            continue
        ty = types.get(n.output[0])
        ys = static(ty[0]) if ty is not None else None
        if ys is None:
            continue
        ins = [i for i in n.input if i][:1] if op in _SAME_SHAPE else [i for i in n.input if i]
        dims = [types.get(i, (None, ""))[0] for i in ins]
        if any(d is None for d in dims):
            continue
        for j, d in enumerate(dims):
            for k in range(1, min(len(d), len(ys)) + 1):
                s = d[-k]
                if not _runtime(s) or s in bound:
                    continue
                others = [o[-k] for m, o in enumerate(dims) if m != j and k <= len(o)]
                if op in _SAME_SHAPE or all(o == 1 or o == s for o in others):
                    bound[s] = ys[-k]
    return bound


def symbolic_lengths(ordered, types, res) -> bool:
    """Name every length still unknown, let ONNX's inference carry the names forward (a scalar
    times a [?len1] vector is [?len1]), and bind a name where its tensor meets a declared size (a
    graph output). Returns whether a length was bound; unbound names stay unknown."""
    if _fresh_symbols(types):
        for n in ordered:
            res.infer_node(n)
    bound = _bind(ordered, types)
    for name, (dims, dtype) in list(types.items()):
        if dims and any(_runtime(d) for d in dims):
            types[name] = (tuple(bound.get(d, d) if _runtime(d) else d for d in dims), dtype)
    return bool(bound)


def empty_shapes(types) -> None:
    """(0, ?) has no elements whatever ``?`` is: the unknown axes are written 0 so the tensor is
    costed exactly (nothing to read or write)."""
    for name, (dims, dtype) in list(types.items()):
        if dims and 0 in dims and static(dims) is None:
            types[name] = (tuple(d if d.__class__ is int else 0 for d in dims), dtype)


def _inner(res, body):
    """A Resolver for a subgraph: the enclosing graph's shapes and the outer-scope values its nodes
    read (folded on demand in the enclosing graph); the shapes the body declares are kept apart
    (``declared``) for ``_settle_body`` to use where inference leaves a gap."""
    from dnnperf.load.fold import Resolver, tensor_value

    sub = Resolver(res.model, res.opset, list(body.node))
    sub.types = dict(res.types)
    sub.values = dict(res.values)
    sub.seqs = dict(res.seqs)
    for init in body.initializer:  # the body's own weights and constants (its shape vectors with their values)
        sub.types[init.name] = (tuple(init.dims), DTYPE_NAMES.get(init.data_type, "float32"))
        v = tensor_value(init) if is_shape_like(init) else None
        if v is not None:
            sub.values[init.name] = v
    local = {o for bn in body.node for o in bn.output} | {i.name for i in body.input} | \
        {init.name for init in body.initializer}
    for bn in body.node:
        for i in bn.input:
            if i and i not in local and i not in sub.values:
                v = res.value(i)
                if v is not None:
                    sub.values[i] = v
    for vi in list(body.value_info) + list(body.output):  # what the body declares
        dims, dtype = type_shape(vi.type)
        if static(dims) is not None and vi.name not in sub.types:
            sub.declared[vi.name] = (static(dims), dtype)
    return sub


def _settle_body(body, sub, bodies: dict, sliced: list | None) -> None:
    """Forward inference over a body, then its declared shapes where it left a name open, then
    ``settle`` (whose bounds come last, after what the body declares). Computed first: an
    exporter's declaration can be stale (torchvision's MViT-V1 declares the output of a branch that
    squeezes a [1, 1, 6273, 192] tensor as [1, 31360, 192], which a later Add then contradicted)."""
    infer_all(body.node, sub, bodies, None)
    sub.types.update({k: t for k, t in sub.declared.items() if k not in sub.types or static(sub.types[k][0]) is None})
    settle(body.node, sub, bodies, sliced)


def _resolved(body, sub) -> dict:
    """{tensor: (dims, dtype)} of every body node output ``sub`` resolved."""
    out = {}
    for bn in body.node:
        for o in bn.output:
            t = sub.types.get(o)
            if o and t is not None and static(t[0]) is not None:
                out[o] = (static(t[0]), t[1])
    return out


def infer_all(nodes, res, bodies: dict, sliced: list | None = None) -> None:
    """Forward inference over ``nodes`` in order, control flow included (bodies and taken branches,
    nested ones too)."""
    for n in nodes:
        res.infer_node(n)
        if n.domain in _DEFAULT:
            if n.op_type in ("Scan", "Loop"):
                body_shapes(n, res, bodies, sliced)
            elif n.op_type == "If":
                taken_branch(n, res, bodies, sliced)


def settle(nodes, res, bodies: dict, sliced: list | None = None) -> None:
    """Every rule of this module over ``nodes`` (a graph or a body) with ``res``: forward inference,
    then, while shapes stay open, declared shapes carried back and run-time lengths bound, forward
    again (three rounds at most), and last the bounds of data-dependent sizes (again after each
    forward pass that reaches another data-dependent op)."""
    infer_all(nodes, res, bodies, sliced)
    for _ in range(3 if any_open(res.types) else 0):
        back = backward_shapes(nodes, res.types)
        if not (symbolic_lengths(nodes, res.types, res) or back):
            break
        infer_all(nodes, res, bodies, sliced)
    # a bound can feed another data-dependent op (a detector's NonZero over the rows an earlier
    # NonZero kept): bound, infer downstream, and again while new bounds appear
    for _ in range(16):
        if not (any_open(res.types) and bound_shapes(nodes, res.types, res, sliced)):
            break
        infer_all(nodes, res, bodies, sliced)  # downstream of the bounded outputs, branches and bodies too


def taken_branch(node, res, bodies: dict, sliced: list | None = None) -> bool:
    """An If whose condition folds to a constant (say ``Size(x) == 4`` on a static x): resolve the
    branch it takes with the enclosing graph's values; its outputs' shapes and small values become
    the If's (so the shape arithmetic after it folds too). The cost function then costs that branch
    alone. Returns whether the condition was known."""
    label = taken_branch_label(res.value(node.input[0]) if node.input and node.input[0] else None)
    if label is None:
        return False
    body = next((a.g for a in node.attribute if a.name == label), None)
    if body is None or len(body.output) != len(node.output):
        return False
    sub = _inner(res, body)
    _settle_body(body, sub, bodies, sliced)
    bodies[(tuple(node.output), label)] = _resolved(body, sub)
    # and the small values it computed, for the If's inside it (a branch runs once: they hold)
    bodies[(tuple(node.output), label, "values")] = {
        o: v for bn in body.node for o in bn.output if o and (v := sub.values.get(o)) is not None}
    for outer, inner in zip(node.output, body.output):
        t = sub.types.get(inner.name)
        if not outer or t is None or static(t[0]) is None:
            continue
        old = res.types.get(outer)
        if old is None or static(old[0]) is None:
            res.types[outer] = (static(t[0]), t[1])
        v = sub.value(inner.name)
        if v is not None and outer not in res.values:
            res.values[outer] = v
    return True


def body_shapes(node, res, bodies: dict, sliced: list | None = None) -> None:
    """Shapes inside a Scan or Loop body that ONNX inference left open because they need values of
    the enclosing graph (an Unsqueeze whose axes are an outer Constant) or the shapes of what the
    node feeds its body (a loop-carried state whose body input is untyped), and from them the node's
    own outputs. Scan: states as given, scan inputs without their scan axis. Loop: the iteration
    number and condition as ``sequences.counter_shape`` says, the states as given; a state whose shape
    changes in the body (it grows each iteration) stays unknown outside."""
    body = next((a.g for a in node.attribute if a.name == "body"), None)
    if body is None:
        return
    attrs = res.attrs(node)
    ins = list(node.input)
    if node.op_type == "Scan":
        m = int(attrs.get("num_scan_inputs", 0))
        n_state = len(ins) - m
        if m <= 0 or n_state < 0 or len(body.input) != len(ins):
            return
        in_axes = list(attrs.get("scan_input_axes") or [0] * m)
        out_axes = list(attrs.get("scan_output_axes") or [0] * (len(body.output) - n_state))
        first_state = 0
        feeds = list(zip(ins, body.input))
    else:  # Loop: (M, cond, states...) -> body (iter, cond, states...)
        n_state = len(ins) - 2
        if n_state < 0 or len(body.input) != len(ins):
            return
        in_axes, out_axes = [], []
        first_state = 1  # body outputs: (cond, states..., scans...)
        feeds = list(zip(ins[2:], body.input[2:]))
    seq = None
    if node.op_type == "Loop":
        trips = res.value(ins[0]) if ins and ins[0] else None
        if trips is not None and trips.size == 1 and 0 <= int(trips.reshape(-1)[0]) < 2**31:
            seq = int(trips.reshape(-1)[0])
            first = sequences.unroll(node, res, body, seq, _inner,
                                     lambda sub, first: _settle_body(body, sub, bodies, sliced if first else None))
            if first is not None:  # a sequence filled trip by trip: the first trip's shapes cost the body
                done = {i.name: first.types[i.name] for i in body.input if i.name in first.types}
                done.update(_resolved(body, first))
                bodies[(tuple(node.output), "body")] = done
                return
    sub = _inner(res, body)
    if node.op_type == "Loop":
        sub.types[body.input[0].name] = (sequences.counter_shape(body.input[0]), "int64")
        sub.types[body.input[1].name] = (sequences.counter_shape(body.input[1], False), "bool")
    for k, (outer, inner) in enumerate(feeds):
        t = res.types.get(outer)
        dims = static(t[0]) if t is not None else None
        if dims is None:
            if node.op_type == "Scan":
                return
            continue
        if node.op_type == "Scan" and k >= n_state:
            try:
                ax = axis_index(int(in_axes[k - n_state]), len(dims))
            except ValueError:  # a scalar, or an axis past the rank: malformed, the outputs stay open
                return
            seq = dims[ax]
            dims = dims[:ax] + dims[ax + 1:]
        sub.types[inner.name] = (tuple(dims), t[1])
    _settle_body(body, sub, bodies, sliced)
    resolved = {i.name: sub.types[i.name] for i in body.input if i.name in sub.types}
    resolved.update(_resolved(body, sub))
    for vi in body.output:
        t = sub.types.get(vi.name)
        if t is not None and static(t[0]) is not None:
            resolved[vi.name] = (static(t[0]), t[1])
    bodies[(tuple(node.output), "body")] = resolved
    outs = list(zip(node.output, body.output[first_state:]))
    for k, (outer, inner) in enumerate(outs):
        t = resolved.get(inner.name) or sub.types.get(inner.name)
        dims = static(t[0]) if t is not None else None
        if not outer or dims is None:
            continue
        if k >= n_state:  # scan outputs stack the per-step values along their axis
            if seq is None:
                continue
            ax = out_axes[k - n_state] % (len(dims) + 1) if out_axes else 0
            dims = dims[:ax] + (seq,) + dims[ax:]
        elif node.op_type == "Loop":  # a state leaves with its shape only if the body keeps it
            fed = sub.types.get(body.input[2 + k].name)
            if fed is None or static(fed[0]) != dims:
                continue
        elif seq is None:
            continue
        old = res.types.get(outer)
        if old is None or static(old[0]) is None:
            res.types[outer] = (tuple(dims), t[1])
