"""ONNX ops a CPU runtime runs as their function bodies.

ONNX defines some ops as functions of simpler ones. Where ONNX Runtime's CPU provider has no kernel for
such an op (at all, or at the model's 16-bit type), it expands the node into the function's nodes when it
loads the model, and each of them runs as a kernel of its own, with its own pass over the tensor. Read
off the runtime's optimised graphs (version 1.32, one-op models of every op ONNX defines as a function):

- in any precision: Mish (opset 18 on; Softplus, Tanh, Mul: its Softplus is a scalar loop of the C
  library's log and exp, [1, 64, 56, 56] fp32 took 1.18 ms on a 2-core x86 VM where a Tanh takes 41 us),
  GroupNormalization (18 and 21: two means, the deviation, its square, the division, the scale and the
  shift over the whole tensor, a few per-group ops and 14 kernels of shape arithmetic; [1, 320, 64, 64]
  took 0.81-1.09 ms where a single pass would be about 0.2), HardSwish (14: HardSigmoid, Mul; after a
  convolution the two fold back into its epilogue, ``dnnperf.fusion``) and Swish (24: Mul, Sigmoid, Mul).
- in 16 bits only (``HALF``): Softmax, LogSoftmax, Gelu, LeakyRelu and PRelu (opsets 16-18), ReduceL1,
  ReduceLogSum, ReduceSumSquare (18) - costed with the casts around them (``dnnperf.upcast``).

``inlined_body`` costs each body node with its own op's cost function, as the parts of one workload
(scored one by one, as a control-flow body's are).
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf.ir import Graph, Node, Tensor
from dnnperf.workload import Workload

# op -> (first opset, last opset or None, steps). A step is (op, inputs, output): inputs name the op's
# input 'x', its second and third inputs 's' and 't' (a slope, a scale, a shift), a scalar constant 'c' or
# an earlier step by index; the output has the input's shape ('x', 'b' as booleans), the op's reduced
# shape ('r': its output's; Softmax's with the axis kept as 1; GroupNormalization's one value per group)
# or is a scalar ('c'); GroupNormalization's body reads its input as [N, groups, rest] ('g') and scales
# and shifts the result as [N, channels, rest] ('h', the division's output reshaped: a view). In 16 bits
# a HardSwish at opset 18 was seen to expand its HardSigmoid too (five kernels), a Mish its Softplus:
# costed as the fp32 bodies.
_SOFTMAX = (("ReduceMax", ("x",), "r"), ("Sub", ("x", 0), "x"), ("Exp", (1,), "x"), ("ReduceSum", (2,), "r"))
_RELU_WHERE = (("Less", ("x", "c"), "b"), ("Where", (1, 0, "x"), "x"))
HALF = {
    "Softmax": (13, None, _SOFTMAX + (("Div", (2, 3), "x"),)),
    "LogSoftmax": (13, None, _SOFTMAX + (("Log", (3,), "r"), ("Sub", (1, 4), "x"))),
    "LeakyRelu": (16, 18, (("Mul", ("x", "c"), "x"),) + _RELU_WHERE),
    "PRelu": (16, 18, (("Mul", ("x", "s"), "x"),) + _RELU_WHERE),
    "Gelu": (20, None, (("Mul", ("x", "c"), "x"), ("Sqrt", ("c",), "c"), ("Div", ("x", 1), "x"), ("Erf", (2,), "x"),
                        ("Sum", (3, "c"), "x"), ("Mul", (0, 4), "x"))),
    "Gelu.tanh": (20, None, (("Mul", ("c", "x"), "x"), ("Pow", ("x", "c"), "x"), ("Mul", ("c", 1), "x"),
                             ("Sum", ("x", 2), "x"), ("Sqrt", ("c",), "c"), ("Mul", (4, 3), "x"), ("Tanh", (5,), "x"),
                             ("Sum", ("c", 6), "x"), ("Mul", (0, 7), "x"))),
    "ReduceL1": (18, None, (("Abs", ("x",), "x"), ("ReduceSum", (0,), "r"))),
    "ReduceLogSum": (18, None, (("ReduceSum", ("x",), "r"), ("Log", (0,), "r"))),
    "ReduceSumSquare": (18, None, (("Mul", ("x", "x"), "x"), ("ReduceSum", (0,), "r"))),
}
ANY = {
    "HardSwish": (14, None, (("HardSigmoid", ("x",), "x"), ("Mul", ("x", 0), "x"))),
    "Mish": (18, None, (("Softplus", ("x",), "x"), ("Tanh", (0,), "x"), ("Mul", ("x", 1), "x"))),
    "GroupNormalization": (18, None, (
        ("ReduceMean", ("x",), "r"), ("Mul", ("x", "x"), "g"), ("ReduceMean", (1,), "r"), ("Mul", (0, 0), "r"),
        ("Sub", (2, 3), "r"), ("Add", (4, "c"), "r"), ("Sqrt", (5,), "r"), ("Sub", ("x", 0), "g"),
        ("Div", (7, 6), "g"), ("Mul", ("h", "s"), "h"), ("Add", (9, "t"), "h"))),
    "Swish": (24, None, (("Mul", ("x", "c"), "x"), ("Sigmoid", (0,), "x"), ("Mul", ("x", 1), "x"))),
}
BODY_NOTE = "no 16-bit"  # how the note of a 16-bit layer run as its function body begins (dnnperf.fixes reads it)
ANY_NOTE = "no kernel"  # ... and of a layer run so in any precision


def body_key(node: Node, opset: int, table: dict) -> str | None:
    """The entry of ``table`` (``HALF`` or ``ANY``) a node of the default domain runs as, at the model's opset."""
    if node.domain not in ("", "ai.onnx"):
        return None
    key = f"{node.op_type}.tanh" if node.op_type == "Gelu" and node.attrs.get("approximate") == "tanh" else node.op_type
    first, last, _ = table.get(key, (0, -1, ()))
    return key if first <= opset and (last is None or opset <= last) else None


def function_ops(graph: Graph, node: Node) -> tuple[str, ...]:
    """The op types of the nodes ONNX's function body for ``node`` holds at the model's opset, in order, its
    Constants and CastLikes left out (the runtime folds them); () for an op without one. A body that depends
    on the node (GroupNormalization's, built for its attributes and input types) is built for it."""
    import numpy as np
    import onnx
    import onnx.defs
    from onnx import helper

    try:
        schema = onnx.defs.get_schema(node.op_type, graph.opset, node.domain if node.domain != "ai.onnx" else "")
        body = onnx.FunctionProto()
        if schema.has_function:
            body.ParseFromString(schema.get_function_with_opset_version(graph.opset))
        elif schema.has_context_dependent_function:
            types = []
            for i in node.inputs:
                t = graph.tensors.get(i) if i else None
                elem = helper.np_dtype_to_tensor_dtype(np.dtype(t.dtype)) if t is not None else 0
                types.append(helper.make_tensor_type_proto(elem, list(t.shape) if t is not None and t.shape else None))
            proto = helper.make_node(node.op_type, list(node.inputs), list(node.outputs), domain=node.domain,
                                     **node.attrs)
            body.ParseFromString(schema.get_context_dependent_function(proto.SerializeToString(),
                                                                       [t.SerializeToString() for t in types]))
        else:
            return ()
    except Exception:  # (not an ONNX op, an attribute or type the builder takes no other way: no body known)
        return ()
    return tuple(n.op_type for n in body.node if n.op_type not in ("Constant", "CastLike"))


def _reduced(node: Node, x: tuple, y: tuple) -> tuple:
    if node.op_type in ("Softmax", "LogSoftmax"):
        axis = int(node.attrs.get("axis", -1)) % max(len(x), 1)
        return tuple(1 if i == axis else d for i, d in enumerate(x))
    if node.op_type == "GroupNormalization" and len(x) >= 2:
        return (x[0], int(node.attrs.get("num_groups", 1)), 1)
    return y


def inlined_body(graph: Graph, node: Node, family: str, half: bool = True) -> Workload | None:
    """The fp32 kernels of the function body ONNX Runtime runs for ``node`` (``HALF`` for a 16-bit node, else
    ``ANY``), each costed by its own op's cost function, as the parts of one workload; None when the op is
    not one of them or a shape is missing."""
    from dnnperf.ops import Contradiction, Unsupported, cost_node

    table = HALF if half else ANY
    key = body_key(node, graph.opset, table)
    x = graph.tensors.get(node.inputs[0]) if node.inputs else None
    y = graph.tensors.get(node.outputs[0]) if node.outputs else None
    if key is None or x is None or x.shape is None or y is None or y.shape is None:
        return None
    reduced = _reduced(node, x.shape, y.shape)
    grouped, channels = x.shape, None
    if node.op_type == "GroupNormalization" and len(x.shape) >= 2:
        batch, numel = reduced[0], x.numel or 0
        grouped = (batch, reduced[1], numel // max(1, batch * reduced[1]))
        channels = (batch, x.shape[1], numel // max(1, batch * x.shape[1]))
    shapes = {"x": (x.shape, "float32"), "b": (x.shape, "bool"), "r": (reduced, "float32"), "c": ((), "float32"),
              "g": (grouped, "float32"), "h": (channels, "float32")}
    tensors = {"x": Tensor("x", grouped, "float32"), "c": Tensor("c", (), "float32")}
    if channels is not None:
        tensors["h"] = Tensor("h", channels, "float32")
    for k, name in zip(("s", "t"), node.inputs[1:3]):
        p = graph.tensors.get(name) if name else None
        if p is not None and p.shape is not None:
            # (a per-channel parameter, reshaped by the body to [channels, 1])
            tensors[k] = Tensor(k, (x.shape[1], 1) if channels is not None else p.shape, "float32")
    nodes = []
    for i, (op, ins, out) in enumerate(table[key][2]):
        tensors[f"t{i}"] = Tensor(f"t{i}", *shapes[out])
        nodes.append(Node(f"{node.name}/{op}", op, "", tuple(a if isinstance(a, str) else f"t{a}" for a in ins),
                          (f"t{i}",), {}))
    inputs = ("x", "h") if "h" in tensors else ("x",)
    body = Graph(node.name, nodes, tensors, frozenset({"c", "s", "t"} & set(tensors)), inputs, (nodes[-1].outputs[0],),
                 graph.opset)
    total, parts = Workload(family, launches=0), []
    for n in nodes:
        try:
            w = cost_node(body, n)
        except (Unsupported, Contradiction):
            return None
        total = total + w
        parts.append((n.op_type, w, 1))
    ops = ", ".join(op for op, _, _ in parts)
    copied = not half and _stash_copy(graph, node, x)
    if copied:
        size = x.numel or 0
        parts.append(("Cast", Workload("cast", dtype="float32", other_ops=size, act_bytes_read=4 * size,
                                       bytes_written=4 * size, parallel_work=size), 1))
        ops += ", a copy of its input"
    # the body's kernels of no arithmetic (shape reads, reshapes to and from the groups, casts of its constants),
    # each a dispatch: GroupNormalization's 14 at opset 18
    shaping = max(0, len(function_ops(graph, node)) - len(nodes) - copied) if not half else 0
    if shaping:
        parts.append(("Reshape", Workload("view", launches=0), shaping))
    what = f"{BODY_NOTE} {node.op_type} kernel" if half else f"{ANY_NOTE} of its own for {node.op_type}"
    return replace(total, family=family, dtype="float32", parts=tuple(parts),
                   note=f"{what}: the runtime runs its ONNX function body, {len(nodes)} fp32 kernels ({ops})"
                        + (f" and {shaping} kernels of shape arithmetic" if shaping else ""))


def _stash_copy(graph: Graph, node: Node, x: Tensor) -> bool:
    """Whether a GroupNormalization's body (opset 21 on) copies its input: its first node casts the input to the
    stash type (float32, the type it already has), which the runtime runs in place where the input has no other
    reader, and as a copy of the whole tensor where it has (a residual block's input, read again by the skip
    path) or is a graph input: [1, 320, 64, 64] 293 us against 4 on a 2-core EPYC VM (ONNX Runtime 1.32's
    profile)."""
    from dnnperf.fusion import consumers_of

    if node.op_type != "GroupNormalization" or graph.opset < 21 or x.dtype != "float32":
        return False
    return consumers_of(graph).get(x.name, 0) > 1 or x.name in graph.inputs  # (a graph output counts as a reader)


def function_bodies(graph: Graph, rows) -> dict:
    """{node name: the workload of its function body} for every node (``rows``: an inspection's) of an op the CPU
    runtime has no kernel for (``ANY``) whose body could be costed."""
    bodies = {}
    for row in rows:
        if row.node.op_type in ANY and row.workload is not None:
            body = inlined_body(graph, row.node, row.workload.family, half=False)
            if body is not None:
                bodies[row.node.name] = body
    return bodies


def run_as_bodies(layers: list, bodies: dict, precision: str | None = None) -> list:
    """``layers`` with each single-node layer of an op the CPU runtime has no kernel for costed as its function
    body (``bodies``: ``function_bodies``; under ``precision``, a what-if, where given): the layers of ONNX
    Runtime's CPU provider."""
    from dnnperf.scoring import with_precision

    out = []
    for layer in layers:
        body = bodies.get(layer.nodes[0]) if len(layer.nodes) == 1 and layer.op_type in ANY else None
        if body is not None:
            layer = replace(layer, workload=with_precision(body, precision) if precision else body)
        out.append(layer)
    return out
