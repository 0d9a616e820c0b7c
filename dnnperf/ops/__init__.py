"""Op cost functions: one small function per op family, looked up in one explicit table.

``cost_node(graph, node)`` returns a Workload, or raises ``Unsupported`` with the reason. Every
entry in ``REGISTRY`` maps an ONNX op type (``domain:op`` for non-default domains) to a function
``fn(ctx) -> Workload``; ``ctx`` gives shapes, dtypes, attributes and the byte accounting. A function
that reads nothing else (see ``PURE``) is registered with ``pure=True``: its workloads are kept per graph
and signature, and a repeated block is costed once.

Ops outside the default domain (ONNX Runtime's com.microsoft fused ops) also need a shape rule,
since ONNX's shape inference does not know them: ``SHAPE_RULES`` maps the same keys to
``fn(attrs, input_types, n_outputs) -> [(dims, dtype) | None, ...]``, written next to each op's cost;
a rule marked ``takes_values`` also gets each input's value known at load time (or None).
"""

from __future__ import annotations

from typing import Callable

from dnnperf.ir import DTYPE_BITS, INDEX_DTYPES, NEVER_FOLDED, Graph, Node, attrs_key, op_key, value_inputs
from dnnperf.workload import Workload


class Unsupported(Exception):
    """This node cannot be costed; the message says why. It is listed, never counted as zero."""


class Contradiction(Unsupported):
    """The node's shapes contradict each other (e.g. 1 input channel for weights that expect 3):
    with user overrides this is the override's fault and is refused; otherwise the model is malformed."""


def broadcast_conflict(shapes) -> str | None:
    """None when ``shapes`` broadcast together (numpy rules: aligned from the right, every axis equal
    or 1), else what does not: "[1, 577, 768] and [1, 197, 768] do not broadcast (axis -2: 197 vs 577)"."""
    if len(shapes) == 2:  # the common case, without the sets
        a, b = shapes
        for k in range(1, min(len(a), len(b)) + 1):
            x, y = a[-k], b[-k]
            if x != y and x != 1 and y != 1:
                break
        else:
            return None
    for k in range(1, max((len(x) for x in shapes), default=0) + 1):
        sizes = {x[-k] for x in shapes if k <= len(x)} - {1}
        if len(sizes) > 1:
            return (f"{' and '.join(str(list(x)) for x in shapes)} do not broadcast "
                    f"(axis -{k}: {' vs '.join(map(str, sorted(sizes)))})")
    return None


def broadcasts_to(shape, target) -> bool:
    """``shape`` broadcasts one way onto ``target`` (ONNX's unidirectional broadcasting: at most its
    rank, every axis aligned from the right equal to the target's or 1): a Gemm's bias, a PRelu's
    slope, a LayerNorm's scale."""
    return len(shape) <= len(target) and all(d in (1, t) for d, t in zip(reversed(shape), reversed(target)))


class Ctx:
    """What a cost function may know about its node."""

    __slots__ = ("graph", "node")

    def __init__(self, graph: Graph, node: Node):
        self.graph = graph
        self.node = node

    # shapes -----------------------------------------------------------------------------
    def has_input(self, i: int) -> bool:
        return i < len(self.node.inputs) and bool(self.node.inputs[i])

    def shape(self, name: str) -> tuple[int, ...]:
        t = self.graph.tensors.get(name)
        if t is None or t.shape is None:
            raise Unsupported(f"shape of tensor '{name}' could not be resolved")
        return t.shape

    def in_shape(self, i: int) -> tuple[int, ...]:
        if not self.has_input(i):
            raise Unsupported(f"input {i} is missing")
        return self.shape(self.node.inputs[i])

    def known_shape(self, i: int) -> tuple[int, ...] | None:
        """Input ``i``'s shape, or None where it is absent or unresolved (a check that needs it then
        checks nothing: a node is not unscored for an input its cost does not read)."""
        if not self.has_input(i):
            return None
        t = self.graph.tensors.get(self.node.inputs[i])
        return None if t is None or t.shape is None else tuple(t.shape)

    def out_shape(self, i: int = 0) -> tuple[int, ...]:
        return self.shape(self.node.outputs[i])

    def numel(self, shape) -> int:
        n = 1
        for d in shape:
            n *= d
        return n

    def out_numel(self, i: int = 0) -> int:
        return self.numel(self.out_shape(i))

    def in_numel(self, i: int = 0) -> int:
        return self.numel(self.in_shape(i))

    def dtype(self, i: int = 0) -> str:
        if not self.has_input(i):
            return "float32"
        t = self.graph.tensors.get(self.node.inputs[i])
        return t.dtype if t else "float32"

    def attr(self, name: str, default=None):
        return self.node.attrs.get(name, default)

    def value(self, i: int):
        """Constant value of input ``i`` (initializer or folded shape value), or None."""
        if not self.has_input(i):
            return None
        return self.graph.values.get(self.node.inputs[i])

    # bytes ------------------------------------------------------------------------------
    def is_weight(self, name: str) -> bool:
        """An initializer, or a value computed from weights alone when the model loads (a Cast of fp32
        weights to fp16, a transposed or dequantized weight, a Constant node's value): runtimes fold
        those once and layers read them as weights. Values a CPU runtime builds every inference
        (``Graph.runtime_built``: a mask from the shapes of symbolic input dims) are not."""
        return weight_status(self.graph, name)

    def byte_split(self) -> tuple[int, int, int]:
        """(activation bytes read, weight bytes read, bytes written). Each distinct tensor once; weights
        as ``is_weight`` says."""
        act = wgt = out = 0
        graph = self.graph
        inits = graph.initializers
        constants = graph.constants
        built = graph.runtime_built
        get = graph.tensors.get
        ins = self.node.inputs
        for name in (dict.fromkeys(ins) if len(ins) > 1 else ins):
            if not name:
                continue
            t = get(name)
            if t is None or t.nbytes is None:
                raise Unsupported(f"shape of tensor '{name}' could not be resolved")
            if name in inits or (name in constants and name not in built):  # is_weight, inlined
                wgt += t.nbytes
            else:
                act += t.nbytes
        for name in self.node.outputs:
            if not name:
                continue
            t = get(name)
            if t is None or t.nbytes is None:
                raise Unsupported(f"shape of tensor '{name}' could not be resolved")
            out += t.nbytes
        return act, wgt, out

    def workload(self, family: str, macs: int = 0, other: int = 0, gemm=None, parallel: int | None = None,
                 dtype: str | None = None, **kw) -> Workload:
        act, wgt, out = self.byte_split()
        if parallel is None:
            parallel = 0
            get = self.graph.tensors.get
            for o in self.node.outputs:
                if o:
                    parallel += get(o).numel  # resolved: byte_split checked every output
        return Workload(family, dtype or self.compute_dtype(), int(macs), int(other), act, wgt, out, int(parallel),
                        gemm, **kw)

    def compute_dtype(self) -> str:
        get = self.graph.tensors.get
        for i in self.node.inputs:
            t = get(i) if i else None
            if t is not None and t.dtype not in INDEX_DTYPES and t.dtype in DTYPE_BITS:
                return t.dtype
        return self.dtype(0)


CostFn = Callable[[Ctx], Workload]
REGISTRY: dict[str, CostFn] = {}
ShapeFn = Callable[[dict, list, int], list]
SHAPE_RULES: dict[str, ShapeFn] = {}
# op keys whose cost function reads nothing of its node and graph but what ``_signature`` holds (the op,
# its attributes, the opset, each input's shape, element type, weight status and small value, each
# output's shape and element type, which inputs name one tensor): registered with ``pure=True``, their
# workloads are computed once per graph and signature (a transformer's 12-80 repeated blocks ask for
# the same few dozen). A function that reads anything else (node names, the graph's inputs, a large
# value) must not be registered pure.
PURE: set[str] = set()


def register(table: dict[str, CostFn], pure: bool = False) -> None:
    for k, fn in table.items():
        REGISTRY[k] = fn
        if pure:
            PURE.add(k)
        else:
            PURE.discard(k)


def register_shapes(table: dict[str, ShapeFn]) -> None:
    for k, fn in table.items():
        SHAPE_RULES[k] = fn


def register_pairs(domain: str, table: dict[str, tuple[CostFn, ShapeFn]]) -> None:
    """A table of op -> (cost function, shape rule) in ``domain``: both registered under ``domain:op``."""
    register({f"{domain}:{op}": fn for op, (fn, _) in table.items()})
    register_shapes({f"{domain}:{op}": rule for op, (_, rule) in table.items()})


def scalar_int(v) -> int | None:
    """A one-element tensor's value as an integer (an axis or a length given as an input), None when it
    is not known or not one element."""
    if v is None or getattr(v, "size", 0) != 1:
        return None
    return int(v.reshape(-1)[0])


def length_value(v) -> int | None:
    """``scalar_int`` when it is a positive length (a sequence length given as a tensor), else None."""
    n = scalar_int(v)
    return n if n is not None and n > 0 else None


def takes_values(fn: Callable) -> Callable:
    """Mark a shape rule whose outputs depend on an input's value (a sequence length given as a tensor):
    the loader passes a fourth argument, each input's value known at load time or None."""
    fn.takes_values = True
    return fn


# op key -> a check that raises Contradiction for shapes that contradict each other, run also for
# nodes folded at load time (a constant Expand to an incompatible shape is no less a contradiction)
CHECKS: dict[str, Callable[[Ctx], None]] = {}


def register_check(table: dict) -> None:
    CHECKS.update(table)


def shape_rule(key: str) -> ShapeFn | None:
    return SHAPE_RULES.get(key)


def key_of(node: Node) -> str:
    return op_key(node.domain, node.op_type)


# the workloads of folded and host-side nodes: the same for every such node (no code changes a
# Workload in place; variants are made with dataclasses.replace)
_SHAPE_INT64 = Workload(family="shape", dtype="int64", launches=0)
_SHAPE_FLOAT32 = Workload(family="shape", dtype="float32", launches=0)
_SHAPE_RUNTIME = Workload(family="shape_runtime", dtype="int64", launches=0)


def _refused(graph: Graph, node: Node, fold: bool) -> None:
    """Raise for a node ONNX's shape inference refuses (``graph.refused``): this module's own
    contradiction where a check here finds one (it names the attribute or the sizes), else ONNX's."""
    from dataclasses import replace

    try:
        cost_node(replace(graph, refused={}), node, fold)
    except Contradiction:
        raise
    except Exception:  # any other failure: ONNX's reason is the better one
        pass
    raise Contradiction(graph.refused[node.outputs[0]])


def cost_node(graph: Graph, node: Node, fold: bool = True) -> Workload:
    """The workload of ``node``; raises Unsupported when it cannot be costed. ``fold=False``: the
    kernel it is when run, even if its value is known at load time."""
    if graph.refused and node.outputs and node.outputs[0] in graph.refused:
        _refused(graph, node, fold)
    if fold and not node.subgraphs:
        values = graph.values
        constants = graph.constants  # values computed from a --value input are run-time work
        host = graph.host_shape
        on_host = False
        if host:
            for o in node.outputs:
                if o:
                    if o not in values:
                        on_host = False
                        break
                    if o in host:
                        on_host = True
        if on_host:  # every output a folded value, one of them recomputed on the host
            removed = graph.host_removed
            if all(o in removed for o in node.outputs if o):
                # a repeat of an earlier node, or a no-op cast: the runtime's optimiser removes it
                return _SHAPE_INT64
            # shape-vector arithmetic redone by the runtime every inference (dims symbolic in the
            # file): host work, no device kernel (dnnperf.scoring prices it per op on CPU runtimes);
            # what is built from it is costed as before (folded when all its inputs are known)
            return _SHAPE_RUNTIME
        folded = False
        for o in node.outputs:
            if o:
                if o not in values or o not in constants:
                    folded = False
                    break
                folded = True
        if folded:
            # folded at load time by any runtime (shape arithmetic): no kernel, no traffic
            return _SHAPE_INT64
        if node.inputs and node.op_type not in NEVER_FOLDED and _shapes_known(graph, node):
            for i in (node.inputs if node.op_type != "CastLike" else value_inputs(node)):
                if i and i not in constants:
                    break
            else:
                # every input is a weight or folded constant: runtimes fold it once at load time
                check = CHECKS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
                if check is not None:
                    check(Ctx(graph, node))
                return _SHAPE_FLOAT32
    key = key_of(node)
    fn = REGISTRY.get(key)
    if fn is None:
        if node.domain not in ("", "ai.onnx", "com.microsoft"):
            raise Unsupported(f"custom op {node.domain}:{node.op_type} has no cost model")
        raise Unsupported(f"op {key} has no cost model")
    if key in PURE:
        sig = _signature(graph, node, key)
        if sig is not None:
            memo = graph.costs
            try:
                w = memo.get(sig)
            except TypeError:  # an attribute or shape that is not hashable: computed as it comes
                return _costed(fn, graph, node)
            if w is None:
                w = _costed(fn, graph, node)  # raises for a node it cannot cost: nothing kept
                if len(memo) < _MEMO_MAX:
                    memo[sig] = w
            return w
    return _costed(fn, graph, node)


def _costed(fn: CostFn, graph: Graph, node: Node) -> Workload:
    """``fn``'s workload of ``node``, after its attributes are checked against its input
    (``dnnperf.ops.attributes``: an axis past the rank, a window of the wrong length)."""
    ctx = Ctx(graph, node)
    if (node.attrs or node.op_type in _RANKED) and node.domain in ("", "ai.onnx"):
        _check_attributes(ctx)
    return fn(ctx)


def weight_status(graph: Graph, name: str) -> bool:
    """``Ctx.is_weight``'s rule, held by ``_signature`` too: one home, so a change to it reaches the memo."""
    return name in graph.initializers or (name in graph.constants and name not in graph.runtime_built)


_MEMO_MAX = 100_000  # signatures kept per graph (a graph of distinct nodes gains nothing past this)
_SMALL_VALUE = 64  # elements of an input value a signature holds; a larger one is costed as it comes


def _signature(graph: Graph, node: Node, key: str) -> tuple | None:
    """Everything a ``PURE`` cost function may read, or None when an input's tensor is unknown or its
    value is too large to hold: the op, the opset, the attributes; for each input its shape, element
    type, whether it is a weight (``Ctx.is_weight``) and its value known at load time; the pattern of
    inputs naming one tensor (``Ctx.byte_split`` counts a tensor once); each output's shape and type.
    An attribute that stays unhashable (an array, a list of lists) makes the caller cost the node as
    it comes."""
    parts: list = [key, graph.opset, attrs_key(node.attrs)]
    get = graph.tensors.get
    values = graph.values
    ins = node.inputs
    for name in ins:
        if not name:
            parts.append(None)
            continue
        t = get(name)
        if t is None:
            return None
        v = values.get(name)
        if v is not None:
            try:
                if v.size > _SMALL_VALUE:
                    return None
                v = (v.dtype, v.shape, v.tobytes())
            except AttributeError:  # not an array
                return None
        parts.append((t.shape, t.dtype, weight_status(graph, name), v))
    if len(ins) > 1 and len(set(ins)) != len(ins):
        parts.append(tuple(ins.index(n) for n in ins))
    for o in node.outputs:
        t = get(o) if o else None
        parts.append(False if not o else None if t is None else (t.shape, t.dtype))
    return tuple(parts)


def _shapes_known(graph: Graph, node: Node) -> bool:
    """Whether every output of ``node`` has a resolved shape: a node computed from constants alone is
    folded at load time only when it is (a Conv fed a scalar has no output shape: its cost function
    says why, rather than the rest of the network being folded away without a word)."""
    tensors = graph.tensors
    for o in node.outputs:
        if o:
            t = tensors.get(o)
            if t is None or t.shape is None:
                return False
    return True


def _load() -> None:
    from dnnperf.ops import (attention, contrib, contrib_decode, contrib_nchwc, contrib_nhwc, control,  # noqa: F401
                             elementwise, experts, extra, matrix, ml, movement, norm, pool, retired, rnn,
                             transpose)


_load()
from dnnperf.ops.attributes import RANKED as _RANKED  # noqa: E402  (it builds on Ctx, above)
from dnnperf.ops.attributes import check as _check_attributes  # noqa: E402
