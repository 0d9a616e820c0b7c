"""The intermediate representation every stage after loading works on: tensors, nodes, graphs.

No ``onnx`` import here: the loader (``dnnperf.load``) fills these types from a file, the op cost
functions, scoring, fusion and design tools read them. Shapes are tuples of ints, ``None`` when a
shape could not be resolved; dtypes are ONNX's element-type names ("float32", "int8"...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# ONNX TensorProto element type code -> name, and the storage bits of each name.
DTYPE_NAMES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz",
    19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1",
    24: "float8e8m0", 25: "uint2", 26: "int2",
}
DTYPE_CODES = {v: k for k, v in DTYPE_NAMES.items()}
# Cast-1 (opsets 1-5) names its target type as a string, TensorProto's enum name ("FLOAT", "INT64")
_TYPE_ENUM = {"FLOAT": 1, "UINT8": 2, "INT8": 3, "UINT16": 4, "INT16": 5, "INT32": 6, "INT64": 7, "STRING": 8,
              "BOOL": 9, "FLOAT16": 10, "DOUBLE": 11, "UINT32": 12, "UINT64": 13, "COMPLEX64": 14, "COMPLEX128": 15,
              "BFLOAT16": 16}


def cast_target(to) -> str | None:
    """The element type a Cast's ``to`` names: a type number (opset 6 on) or Cast-1's enum name."""
    if isinstance(to, (str, bytes)):
        to = _TYPE_ENUM.get((to.decode("utf-8", "replace") if isinstance(to, bytes) else to).upper())
    return DTYPE_NAMES.get(to)


DTYPE_BITS = {
    "sequence": 0, "map": 0,  # handles to a sequence / map: elements are counted where produced
    "float32": 32, "uint8": 8, "int8": 8, "uint16": 16, "int16": 16, "int32": 32, "int64": 64,
    "string": 64, "bool": 8, "float16": 16, "float64": 64, "uint32": 32, "uint64": 64,
    "complex64": 64, "complex128": 128, "bfloat16": 16, "float8e4m3fn": 8, "float8e4m3fnuz": 8,
    "float8e5m2": 8, "float8e5m2fnuz": 8, "uint4": 4, "int4": 4, "float4e2m1": 4, "float8e8m0": 8,
    "uint2": 2, "int2": 2,
}
# element types that carry indices, shapes or flags rather than the model's arithmetic
INDEX_DTYPES = frozenset({"int64", "int32", "bool", "string"})

# Ops whose outputs are not a function of their inputs: never folded at load time, even when every
# input is a constant. Everything else computed only from weights is folded once by any runtime.
NEVER_FOLDED = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                          "Bernoulli", "If", "Loop", "Scan"})


# ops whose small integer outputs are evaluated at load time (shape arithmetic)
FOLDABLE = frozenset({
    "Shape", "Size", "Gather", "Concat", "Unsqueeze", "Squeeze", "Slice", "Cast", "Add", "Sub", "Mul",
    "Div", "Identity", "Constant", "ConstantOfShape", "Range", "Reshape", "Equal", "Where", "ReduceProd",
    "Expand", "Floor", "Ceil", "Sqrt", "Neg", "Abs", "Max", "Min", "Mod", "Not", "Less", "Greater",
    "Tile", "Flatten", "Transpose", "Split", "ScatterND", "GatherElements", "ReduceSum", "ReduceMax",
    "ReduceMin", "Pow", "Sign", "Clip", "NonZero", "Trilu", "CumSum", "And", "Or", "Xor",
    "LessOrEqual", "GreaterOrEqual", "Round", "Reciprocal",
})
# ops whose output is bool whatever their inputs' type
BOOL_OUT = frozenset({"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not",
                      "IsNaN", "IsInf"})
# the element types a folded value (and a value given with --value) may have
VALUE_DTYPES = ("int64", "int32", "float32", "float16", "float64", "int8", "uint8", "bool", "int16", "uint16", "uint32",
                "uint64")

# op -> the input that holds a target shape (or Tile's repeat counts): a 1-D tensor for ONNX, whose
# inference and ONNX Runtime refuse any other rank (numpy would read a [2, 2] target as four sizes)
SHAPE_VECTOR_INPUT = {"Reshape": 1, "Expand": 1, "ConstantOfShape": 0, "Tile": 1}


def taken_branch_label(cond) -> str | None:
    """The attribute naming the branch an If takes on ``cond``, a value known at load time (a numpy
    array of one element); None when it is not known."""
    if cond is None or cond.size != 1:
        return None
    return "then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"


# binary ops whose opset 1-6 versions broadcast the old way (Caffe2-era exports: a bias or a folded
# batch norm's scale as Add / Mul with broadcast=1, axis=1): only when ``broadcast`` is 1, the second
# operand's dims matched to the first's starting at ``axis`` (default: its trailing dims); the output
# has the first operand's shape
LEGACY_BROADCAST = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"})


def legacy_operand(op_type: str, attrs: dict, a: tuple, b: tuple, opset: int) -> tuple | None:
    """The second operand's dims, padded with 1s so that numpy-style broadcasting against ``a``
    means what the opset 1-6 op meant (B = [3] at axis 1 of [1, 3, 224, 224]: [1, 3, 1, 1]); None when
    the op broadcasts the numpy way (opset 7 on, another op) or ``b`` does not fit ``a`` there."""
    if opset >= 7 or op_type not in LEGACY_BROADCAST:
        return None
    a, b = tuple(a), tuple(b)
    if not attrs.get("broadcast", 0):
        return b if b == a else None
    axis = attrs.get("axis", len(a) - len(b))
    if axis < 0:
        axis += len(a)
    if axis < 0 or axis + len(b) > len(a) or any(d not in (1, a[axis + i]) for i, d in enumerate(b)):
        return None
    return (1,) * axis + b + (1,) * (len(a) - axis - len(b))


def attrs_key(attrs: dict) -> tuple:
    """A node's plain attributes as a hashable key (lists as tuples), for the memos that answer for
    nodes alike: the loader's shape rules (``dnnperf.load.fast``) and the costs (``dnnperf.ops``). A value
    that stays unhashable (a list of lists) makes the caller's lookup raise TypeError."""
    return tuple([(k, tuple(v) if type(v) is list else v) for k, v in attrs.items()])


def value_inputs(node) -> list:
    """The inputs whose values an op's output depends on: all of them, but CastLike's target, read
    for its element type alone (an unoptimised dynamo export builds every bias-free convolution's
    zero bias as CastLike(0, activation) -> Expand: constants, which a runtime folds once)."""
    if node.op_type == "CastLike" and len(node.inputs) > 1:
        return node.inputs[:1]
    return node.inputs


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
    """One operator instance. ``attrs`` holds plain Python values (ints, floats, strings, lists;
    tensor attributes as their dims); control-flow bodies are in ``subgraphs``."""

    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any]
    subgraphs: dict[str, "Graph"] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """``Op`` for the default domain, ``domain:Op`` otherwise (the op-table key)."""
        return op_key(self.domain, self.op_type)


def op_key(domain: str, op_type: str) -> str:
    return f"{domain}:{op_type}" if domain not in ("", "ai.onnx") else op_type


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
    values: dict[str, Any] = field(default_factory=dict)  # small constant values (shapes): numpy arrays
    unresolved: list[str] = field(default_factory=list)  # node names with unknown output shapes
    constants: frozenset = frozenset()  # weights and everything computed only from weights
    # small values (shape arithmetic) a runtime recomputes every inference: the model's input dims are
    # symbolic in the file, so nothing can fold the Shape ops they start from
    host_shape: frozenset = frozenset()
    host_removed: frozenset = frozenset()  # ... of it, what a runtime's graph optimisations remove (repeats, no-op casts)
    # larger values built from that arithmetic (a shifted-window attention mask): constants at load
    # time, but a runtime that executes the graph as stored (ONNX Runtime on a CPU) computes them
    # every inference (``dnnperf.inspection.recomputed``)
    runtime_built: frozenset = frozenset()
    producer_version: str = ""
    notes: list[str] = field(default_factory=list)
    batch_axes: dict[str, int] = field(default_factory=dict)  # input -> axis of its batch dim (default 0)
    # the file declares symbolic input dims (resolved here by the user's dims or the defaults): a
    # runtime loading the file sees them symbolic, and some of its fusions need static shapes
    symbolic_inputs: bool = False
    # Softmax output tensor -> probabilities it stores as subnormal float32 (an additive -100 mask;
    # dnnperf.load.masks)
    subnormal: dict[str, int] = field(default_factory=dict)
    is_body: bool = False  # a control-flow body (its inputs are the body's, not the model's)
    # Slices at offsets known only at run time (node names, or the first output of an unnamed one):
    # costed at their input's size, an upper bound (``dnnperf.load.data_sized.bound_shapes``)
    bounded: frozenset = frozenset()
    # nodes ONNX's shape inference refuses (their first output -> why; dnnperf.load.strict): left unscored
    refused: dict = field(default_factory=dict)
    # the workloads of ``dnnperf.ops.PURE`` cost functions, by signature (``dnnperf.ops.cost_node``);
    # a copy made with dataclasses.replace starts an empty one
    costs: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def io(self) -> tuple[int, int]:
        """(graph inputs, graph outputs): what a runtime's call binds (weights are not inputs)."""
        return len(self.inputs), len(self.outputs)


# the largest size a flag may give one dimension (--batch, --dim, --input-shape, --prompt...): cuBLAS's
# and cuDNN's sizes are 32-bit ints, and a size past 2^63 - 1 does not fit a model's int64 dims at all
MAX_SIZE = 2**31 - 1


def size_fits(value: int | None, what: str) -> None:
    """One line, exit 2, for a size no library takes (it used to reach the protobuf writer: exit 3)."""
    if value is not None and value > MAX_SIZE:
        from dnnperf.errors import DnnperfError

        raise DnnperfError(f"{what} {value:,} is larger than {MAX_SIZE:,} (2^31 - 1), the largest dimension the "
                           "GPU libraries take — give a smaller size")


@dataclass(frozen=True)
class ShapeOverrides:
    """How the user resolves dynamic dims: --batch, --input-shape NAME=AxB, --dim SYMBOL=V, and the
    values of inputs that shapes are computed from: --value NAME=V[,V...]."""

    batch: int | None = None
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    dims: tuple[tuple[str, int], ...] = ()
    values: tuple[tuple[str, tuple[float, ...]], ...] = ()  # --value NAME=V,...: inputs that shapes depend on
    strict: bool = True  # False when one set of flags serves many models: unknown names are ignored
