"""Read and check: bytes from a path, a ModelProto without weight payloads, one clear error per fault.

Large files are rebuilt without their initializers' payloads before protobuf sees them (only each
tensor's dims, dtype and name are kept, plus small integer tensors, which are shapes), read through
small positioned reads that jump over the payloads: parsing then costs what the graph costs, not
what the weights cost, and the weight bytes are never read into memory. (Not a memory map: on
current kernels every byte touched through a map brings its whole page-cache folio, up to 2 MB,
into the process's resident memory: gpt2 with its weights peaked 100 MB above the imports that
way.) External-data locations are never opened.

Why one module this long: the wire-format payload skipper and the checks that run on its
output are one job (bytes -> checked ModelProto).
"""

from __future__ import annotations

import os
import re

from dnnperf.errors import DnnperfError
from dnnperf.files import require_file, require_regular
from dnnperf.ir import DTYPE_BITS, DTYPE_NAMES

# Largest integer tensor (elements) kept or folded as a "shape value".
MAX_VALUE_ELEMS = 4096
# float tensors this small are kept too: Resize's scales ([1, 1, 2, 2]) decide its output's shape, and
# with their payload dropped the shape stayed open (a folded or simplified export keeps them as
# initializers, not Constant nodes); a weight is never this small to matter. So are booleans this
# small: a Loop's or an If's condition stored as an initializer decides what runs
MAX_FLOAT_VALUE_ELEMS = 8
FLOAT_TYPES = _FLOAT_TYPES = (1, 10, 11, 16, 9)  # float, float16, double, bfloat16; bool
# and 8-bit ones this small: a quantized tensor's zero point (whether a QuantizeLinear undoes the
# DequantizeLinear before an op, which ONNX Runtime then runs on the 8-bit tensor: dnnperf.qdq)
EIGHT_BIT_TYPES = (2, 3)  # uint8, int8
# Refuse dims whose product cannot be represented: it is a broken or hostile file.
MAX_ELEMS = 2**62
# Files above this size are rebuilt without payloads before parsing (below it, parsing is cheaper).
_SCAN_ABOVE_BYTES = 4 * 1024 * 1024
STRIPPED_LOCATION = "__dnnperf_stripped__"


def read_model(path: str):
    """Path -> ModelProto with weight payloads dropped (see module docstring)."""
    if not path:
        raise DnnperfError("no model path given: pass the path of an .onnx file")
    require_file(path, "model file", "check the path", "the .onnx file inside it")
    require_regular(path, "model file")
    try:
        size = os.path.getsize(path)
        if size == 0:
            raise DnnperfError(f"'{path}' is empty (0 bytes) — re-export or re-download the model")
        with open(path, "rb", buffering=0) as fh:
            if size <= _SCAN_ABOVE_BYTES:
                data = fh.read()
            else:
                try:
                    data = skeleton_bytes(_FileBytes(fh, size))
                except _WireError:
                    raise _not_onnx(path) from None
    except PermissionError:
        raise DnnperfError(f"cannot read '{path}': permission denied — check the file's permissions") from None
    except OSError as exc:
        raise DnnperfError(f"cannot read '{path}': {exc.strerror or exc}") from None
    model = parse_model(data, path)
    keep = quant_params(model.graph)
    if size > _SCAN_ABOVE_BYTES:
        _restore_quant_params(model, path, size, keep)
    strip_payloads_inplace(model, keep)
    return model


def _restore_quant_params(model, path: str, size: int, keep: frozenset) -> None:
    """Read back from the file the payloads of the quantization parameters in ``keep`` (``quant_params``) the
    byte-level skeleton dropped (per-channel scales: more than MAX_FLOAT_VALUE_ELEMS floats); only a QDQ model has
    any to read. Walks the main graph's initializers, reading each one's name and the wanted ones whole."""
    from onnx import TensorProto

    want = {i.name for i in model.graph.initializer if i.name in keep and not has_payload(i)}
    if not want:
        return
    found = {}
    try:
        with open(path, "rb", buffering=0) as fh:
            buf = _FileBytes(fh, size)
            for g0, g1 in _messages(buf, 0, size, 7):  # ModelProto.graph
                for t0, t1 in _messages(buf, g0, g1, 5):  # GraphProto.initializer
                    name = next((bytes(buf[a:b]).decode("utf-8", "replace") for a, b in _messages(buf, t0, t1, 8)),
                                None)  # TensorProto.name
                    if name in want:
                        found[name] = bytes(buf[t0:t1])
    except (OSError, _WireError):
        return  # left without values: the QDQ rules then take the scales to fit, as for a stripped file
    for init in model.graph.initializer:
        if init.name in found:
            t = TensorProto.FromString(found[init.name])
            if is_shape_like(t, keep):
                init.CopyFrom(t)


def read_model_bytes(path: str) -> bytes:
    """The whole file, with one clear error for each way the path can be wrong."""
    if not path:
        raise DnnperfError("no model path given: pass the path of an .onnx file")
    require_file(path, "model file", "check the path", "the .onnx file inside it")
    require_regular(path, "model file")
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


def _not_onnx(path: str) -> DnnperfError:
    return DnnperfError(f"'{path}' is not a readable ONNX model (protobuf parse failed: truncated or not ONNX) — "
                        "re-export it or check the download")


def parse_model(data: bytes, path: str = "<bytes>"):
    """Parse bytes as an ONNX ModelProto, rejecting other protobufs and truncated files."""
    from google.protobuf.message import DecodeError

    from dnnperf.load import onnx_lite

    model = onnx_lite.model_proto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError, UnicodeDecodeError):
        raise _not_onnx(path) from None
    except RecursionError:
        raise DnnperfError(f"'{path}' nests subgraphs too deeply to parse — this is not a usable model") from None
    if model.ir_version <= 0 or not model.HasField("graph") or len(model.opset_import) == 0:
        raise DnnperfError(
            f"'{path}' parsed as protobuf but is not an ONNX model (no ir_version, graph or opset_import) — "
            "pass an .onnx model file"
        )
    if len(model.graph.node) == 0:
        raise DnnperfError(f"'{path}' contains a graph with no nodes — nothing to analyse")
    g = model.graph
    try:  # the protobuf runtime hands back a name that is not UTF-8 as bytes; every step matches on these
        "".join(vi.name for coll in (g.input, g.output, g.initializer) for vi in coll)
    except TypeError:
        raise CorruptName("input, output or weight names", f"'{path}'") from None
    return model


def default_opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 0


def check_opset(model, path: str) -> int:
    """The default-domain opset (0 for models that only use other domains, e.g. ai.onnx.ml)."""
    from dnnperf.load import onnx_lite

    for imp in model.opset_import:
        if imp.version <= 0:  # no operator set has version 0 or less: the ops' meaning is unknown
            dom = imp.domain if imp.domain not in ("", "ai.onnx") else "the default ONNX domain"
            raise DnnperfError(f"'{path}' imports {dom} at opset version {imp.version}, which does not exist (the "
                               "first is 1) — the file is corrupt; re-export it")
    opset = default_opset(model)
    supported = onnx_lite.opset_version()
    if opset > supported:
        raise DnnperfError(
            f"'{path}' uses ONNX opset {opset}, newer than the installed onnx package supports ({supported}) — "
            "upgrade onnx (pip install -U onnx) or export with an older opset"
        )
    return opset


def check_domains(model, path, nodes) -> None:
    """Every node's domain must be imported by the model (ONNX requires it). ``nodes``: the main
    graph's nodes (NodeProtos or their views)."""
    declared = {imp.domain or "" for imp in model.opset_import} | {"ai.onnx"}
    if "" in declared:
        declared.add("ai.onnx")
    for n in nodes:
        dom = n.domain or ""
        if dom not in declared:
            raise DnnperfError(
                f"node '{n.name or n.op_type}' in '{path}' uses domain '{dom}', which the model does not import "
                "(no opset_import entry) — the model is malformed; re-export it"
            )


# attributes that name an axis: beyond the int32 range ONNX's C++ inference wraps them round and reads
# out of bounds (LayerNormalization axis = 2^31 and GatherND batch_dims = -2^31 - 1 end the process)
AXIS_ATTRIBUTES = frozenset({"axis", "axes", "batch_dims", "batch_axis", "time_axis", "perm"})
# the attributes check_for_onnx_inference reads: those, and a Split's number of parts
_CHECKED_ATTRIBUTES = AXIS_ATTRIBUTES | {"num_outputs"}


def check_for_onnx_inference(node_lists, versions: dict, path: str) -> None:
    """What ONNX's C++ shape inference assumes of a node and does not check, checked here for every
    node of a domain ONNX knows: each input its schema requires is there (a non-empty name at that
    position, and at least the schema's minimum count), and every axis-naming attribute fits an int32.
    Otherwise it reads out of bounds and ends the whole process (segmentation faults with onnx 1.23: a
    RegexFullMatch or an ai.onnx.ml TreeEnsemble whose input name is empty, a LayerNormalization whose
    axis is 2^31, a GatherND whose batch_dims is negative). ``node_lists``: the nodes of the main graph
    (their views: ~3x faster to read) and of each body; ``versions``: domain -> the model's opset."""
    from dnnperf.load import onnx_lite

    defs = onnx_lite.defs()
    single = defs.OpSchema.FormalParameterOption.Single
    need: dict[tuple, tuple] = {}
    for nodes in node_lists:
        for n in nodes:
            op = n.op_type
            dom = n.domain
            if dom == "ai.onnx":
                dom = ""
            rule = need.get((dom, op))
            if rule is None:
                try:
                    schema = defs.get_schema(op, versions.get(dom, 1 << 30), dom)
                    rule = (tuple(i for i, f in enumerate(schema.inputs) if f.option == single), schema.min_input,
                            _CHECKED_ATTRIBUTES.intersection(schema.attributes))
                except Exception:  # an op ONNX does not know: its inference is not run
                    rule = ((), 0, ())
                need[(dom, op)] = rule
            ins = n.input
            positions, least, checked = rule
            count = len(ins)
            missing = count < least
            for i in positions:
                if i >= count or not ins[i]:
                    missing = True
            if missing:
                raise DnnperfError(f"node '{n.name or op}' ({op}) in '{path}' lacks an input its operator requires "
                                   f"(it has {list(ins)}) — the model is malformed; re-export it")
            if checked:
                for a in n.attribute:
                    name = a.name
                    if name not in checked:
                        continue
                    if name == "num_outputs":
                        if op == "Split" and a.i != len(n.output):
                            # ONNX indexes its split list by output: more outputs than parts aborts the
                            # process, 2^31 parts take a minute
                            raise DnnperfError(f"node '{n.name or op}' (Split) in '{path}' has num_outputs = {a.i} "
                                               f"but {len(n.output)} outputs — the model is malformed; re-export it")
                    elif name == "batch_dims" and op == "GatherND" and a.i < 0:
                        # a negative count of batch dims: ONNX's inference (onnx 1.23) ends the process
                        raise DnnperfError(f"node '{n.name or op}' (GatherND) in '{path}' has batch_dims = {a.i}, "
                                           "which must be 0 or more — the model is malformed; re-export it")
                    elif any(not -2**31 <= v < 2**31 for v in (a.ints if a.ints else (a.i,))):
                        raise DnnperfError(f"node '{n.name or op}' ({op}) in '{path}' has {name} = "
                                           f"{list(a.ints) if a.ints else a.i}, out of any tensor's rank — the model "
                                           "is malformed; re-export it")

def check_dims(dims, name, path):
    if dims is None:
        return
    n = 1
    for d in dims:
        if not isinstance(d, int):
            continue
        if d < 0:
            raise DnnperfError(f"tensor '{name}' in '{path}' has a negative dimension {list(dims)} — the model is malformed")
        n *= d
        if n > MAX_ELEMS:
            raise DnnperfError(
                f"tensor '{name}' in '{path}' has dims {list(dims)} whose product overflows int64 — the model is malformed"
            )


def short(exc: BaseException) -> str:
    text = re.sub(r"\s+", " ", " ".join(str(exc).split()))
    return text[:300] + ("..." if len(text) > 300 else "")


# --------------------------------------------------------------------------------------------
# protos -> plain values


class CorruptName(DnnperfError):
    """A name in the file that is not valid UTF-8 (the loader adds the file's path)."""

    def __init__(self, what: str, path: str = "the model"):
        super().__init__(f"{path} has {what} with bytes that are not valid UTF-8 — the file is corrupt; re-export it")
        self.what = what


# dim names that name no size: each such dim is a dimension of its own (Paddle2ONNX writes '?' for
# every dynamic dim of an input: [-1, 3, '?', '?'] is an image of any height and width)
ANONYMOUS_DIM_NAMES = frozenset({"?"})


def type_shape(tp) -> tuple[tuple | None, str]:
    """(dims or None, dtype) of a TypeProto; a dim is int, str (symbol) or None (unknown: no value and
    no name, the value -1 or the name '?', which exporters such as Paddle2ONNX write for a dynamic
    dim: two '?' dims are not one size)."""
    if not tp.HasField("tensor_type"):
        which = tp.WhichOneof("value")
        if which == "optional_type":  # an optional holds its element (or nothing): cost it as the element
            return type_shape(tp.optional_type.elem_type)
        if which in ("sequence_type", "map_type"):
            # a handle: its elements are counted where they are produced and consumed (0 bytes itself)
            return (), which.split("_")[0]
        return None, "float32"
    tt = tp.tensor_type
    dtype = DTYPE_NAMES.get(tt.elem_type, "float32")
    if not tt.HasField("shape"):
        return None, dtype
    dims = []
    for d in tt.shape.dim[:]:  # a slice is built in C; iterating the field is not
        v = d.dim_value
        if v > 0:
            dims.append(v)
        elif v == -1:
            dims.append(None)
        elif v:  # any other negative value: malformed, refused by check_dims
            dims.append(v)
        elif d.HasField("dim_value"):
            dims.append(0)
        else:
            sym = d.dim_param
            if sym.__class__ is bytes:  # the protobuf runtime hands back names that are not UTF-8 as bytes
                raise CorruptName("a dimension name")
            dims.append(None if not sym or sym in ANONYMOUS_DIM_NAMES else sym)
    return tuple(dims), dtype


_INT, _FLOAT, _STRING, _TENSOR, _FLOATS, _INTS, _STRINGS = 2, 1, 3, 4, 6, 7, 8


def plain_attrs(n) -> dict:
    """A node's attributes as plain Python values: numbers, strings, lists; a tensor attribute as
    its dims (its data is never needed); graph-valued attributes are left to the subgraph builder."""
    out = {}
    for a in n.attribute[:]:  # a slice of a repeated field is built in C; iterating it is not
        t = a.type
        if t == _INTS:
            out[a.name] = a.ints[:]
        elif t == _INT:
            out[a.name] = a.i
        elif t == _FLOAT:
            out[a.name] = a.f
        elif t == _STRING:
            out[a.name] = a.s.decode("utf-8", "replace")
        elif t == _FLOATS:
            out[a.name] = a.floats[:]
        elif t == _TENSOR:
            out[a.name] = tuple(a.t.dims)
        elif t == _STRINGS:
            out[a.name] = [x.decode("utf-8", "replace") for x in a.strings]
    try:
        "".join(out)
    except TypeError:
        raise CorruptName(f"attribute names on node '{n.name or n.op_type}'") from None
    return out


def static(dims) -> tuple[int, ...] | None:
    if dims is None:
        return None
    for d in dims:
        if d.__class__ is not int:
            return None
    return tuple(dims)


# --------------------------------------------------------------------------------------------
# weights out


def quant_params(graph) -> frozenset:
    """The initializers a QuantizeLinear or DequantizeLinear of ``graph`` reads as its scale or zero point. Kept
    with their values up to MAX_VALUE_ELEMS elements (``is_shape_like``'s ``keep``): ONNX Runtime's QDQ fusions
    compare them (a bias's scale against its input's times its weights'), and a per-channel scale has one value
    a channel."""
    return frozenset(i for n in graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")
                     and n.domain in ("", "ai.onnx", "com.microsoft") for i in n.input[1:3] if i)


def is_shape_like(init, keep: frozenset = frozenset()) -> bool:
    """Small integer initializers carry shapes (Reshape targets, Slice starts...), and tiny float ones
    may (Resize's scales), tiny bool ones decide control flow: keep their data; so are the quantization
    parameters in ``keep`` (``quant_params``) up to MAX_VALUE_ELEMS elements."""
    if init.data_type not in (6, 7) and init.data_type not in _FLOAT_TYPES and init.data_type not in EIGHT_BIT_TYPES:
        return False
    if init.data_location == 1:  # EXTERNAL: never opened
        return False
    n = 1
    for d in init.dims:
        n *= d
    if n > (MAX_VALUE_ELEMS if init.data_type in (6, 7) or init.name in keep else MAX_FLOAT_VALUE_ELEMS):
        return False
    # the typed fields an exporter may use instead of raw_data (a Resize's scales in float_data)
    return bool(init.raw_data) or len(init.int64_data) > 0 or len(init.int32_data) > 0 or len(init.float_data) > 0 \
        or len(init.double_data) > 0 or n == 0


def clear_payload(init) -> None:
    """Drop a tensor's data in place and mark it external at a location that does not exist."""
    for f in ("raw_data", "float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data"):
        init.ClearField(f)
    del init.external_data[:]
    init.data_location = 1
    e = init.external_data.add()
    e.key, e.value = "location", STRIPPED_LOCATION


def has_payload(init) -> bool:
    return not (init.data_location == 1 and not init.raw_data)


def strip_payloads_inplace(model, keep: frozenset) -> None:
    """Drop the weight payloads of the main graph's initializers (small integer tensors and the quantization
    parameters in ``keep``, ``quant_params`` of the graph, stay)."""
    for init in model.graph.initializer:
        if has_payload(init) and not is_shape_like(init, keep):
            clear_payload(init)


def sparse_weights(graphs) -> int:
    """The sparse initializers of each of ``graphs`` (a tensor of ``dims`` stored as its non-zero values
    and their indices) as the weights they are: an initializer of those dims and element type without a
    payload, as every weight is read (their values are never needed). Left aside, a model ONNX Runtime
    runs was called malformed (a node reading a tensor nobody produces). Returns the bytes of the
    values and indices dropped."""
    dropped = 0
    for g in graphs:
        if not len(g.sparse_initializer):
            continue
        for sp in g.sparse_initializer:
            dropped += sum(tensor_nbytes(x.dims, x.data_type) for x in (sp.values, sp.indices) if has_payload(x))
            t = g.initializer.add()
            t.name, t.data_type = sp.values.name, sp.values.data_type
            t.dims.extend(sp.dims)
            clear_payload(t)
        g.ClearField("sparse_initializer")
    return dropped


def tensor_nbytes(dims, data_type: int) -> int:
    n = 1
    for d in dims:
        n *= d
    return (n * DTYPE_BITS.get(DTYPE_NAMES.get(data_type, "float32"), 32) + 7) // 8


# --------------------------------------------------------------------------------------------
# protobuf wire format: rebuild a ModelProto without initializer payloads


class _WireError(Exception):
    pass


class _FileBytes:
    """A file's bytes by index and slice, read on demand through a small window: what the wire
    parser below needs (``len``, ``buf[i]``, ``buf[a:b]``) without mapping or reading the payloads
    it jumps over."""

    __slots__ = ("fh", "size", "lo", "hi", "win")
    WINDOW = 64 * 1024

    def __init__(self, fh, size: int):
        self.fh = fh
        self.size = size
        self.lo = self.hi = 0
        self.win = b""

    def __len__(self) -> int:
        return self.size

    def _read(self, start: int, n: int) -> bytes:
        self.fh.seek(start)
        parts = []
        while n > 0:
            chunk = self.fh.read(n)
            if not chunk:
                raise _WireError("file shorter than its fields")
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    def __getitem__(self, k):
        if k.__class__ is int:
            if self.lo <= k < self.hi:
                return self.win[k - self.lo]
            if not 0 <= k < self.size:
                raise IndexError(k)
            self.win = self._read(k, min(self.WINDOW, self.size - k))
            self.lo, self.hi = k, k + len(self.win)
            return self.win[0]
        start, stop = k.start, k.stop
        if self.lo <= start and stop <= self.hi:
            return self.win[start - self.lo:stop - self.lo]
        return self._read(start, stop - start) if stop > start else b""


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise _WireError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _WireError("varint too long")


def _enc_varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _skip(buf, pos: int, wt: int, end: int) -> int:
    if wt == 0:
        return _varint(buf, pos, end)[1]
    if wt == 1:
        pos += 8
    elif wt == 2:
        ln, pos = _varint(buf, pos, end)
        pos += ln
    elif wt == 5:
        pos += 4
    else:
        raise _WireError(f"unsupported wire type {wt}")
    if pos > end:
        raise _WireError("truncated field")
    return pos


_PAYLOAD_FIELDS = frozenset({4, 5, 6, 7, 9, 10, 11})  # float/int32/string/int64/raw/double/uint64 data


def _tensor_skeleton(buf, start: int, end: int) -> bytes:
    """A TensorProto's bytes without its payload (unless it is a small integer tensor)."""
    fields = []
    dims: list[int] = []
    dtype = 0
    location = 0
    pos = start
    while pos < end:
        key, p = _varint(buf, pos, end)
        fno, wt = key >> 3, key & 7
        nxt = _skip(buf, p, wt, end)
        if fno == 1:
            if wt == 0:
                dims.append(_varint(buf, p, end)[0])
            elif wt == 2:
                ln, q = _varint(buf, p, end)
                while q < nxt:
                    v, q = _varint(buf, q, nxt)
                    dims.append(v)
        elif fno == 2 and wt == 0:
            dtype = _varint(buf, p, end)[0]
        elif fno == 14 and wt == 0:
            location = _varint(buf, p, end)[0]
        fields.append((fno, pos, nxt))
        pos = nxt
    n = 1
    for d in dims:
        n *= d
    payload = [f for f in fields if f[0] in _PAYLOAD_FIELDS]
    keep_all = ((dtype in (6, 7) and n <= MAX_VALUE_ELEMS and location != 1)
                or ((dtype in _FLOAT_TYPES or dtype in EIGHT_BIT_TYPES) and n <= MAX_FLOAT_VALUE_ELEMS
                    and location != 1)
                or (location == 1 and not payload))
    if keep_all:
        return bytes(buf[start:end])
    out = bytearray()
    for fno, a, b in fields:
        if fno in _PAYLOAD_FIELDS or fno in (13, 14):
            continue
        out += buf[a:b]
    loc = STRIPPED_LOCATION.encode()
    entry = b"\x0a" + _enc_varint(8) + b"location" + b"\x12" + _enc_varint(len(loc)) + loc
    out += b"\x6a" + _enc_varint(len(entry)) + entry  # field 13 (external_data), length-delimited
    out += b"\x70\x01"  # field 14 (data_location) = EXTERNAL
    return bytes(out)


def _fields(buf, start: int, end: int):
    """(field number, wire type, field start, value start, field end) of each field of the message in
    ``buf[start:end]``, its value left unread."""
    pos = start
    while pos < end:
        key, p = _varint(buf, pos, end)
        nxt = _skip(buf, p, key & 7, end)
        yield key >> 3, key & 7, pos, p, nxt
        pos = nxt


def _messages(buf, start: int, end: int, field_no: int):
    """(value start, value end) of each length-delimited field ``field_no`` of the message in ``buf[start:end]``."""
    for fno, wt, _, p, _ in _fields(buf, start, end):
        if fno == field_no and wt == 2:
            ln, q = _varint(buf, p, end)
            yield q, q + ln


def _rewrite_field(buf, start: int, end: int, field_no: int, rewrite) -> bytes:
    """The message in ``buf[start:end]`` with every length-delimited field ``field_no`` replaced by
    ``rewrite(buf, value_start, value_end)``; every other field is copied as it is."""
    out = bytearray()
    for fno, wt, pos, p, nxt in _fields(buf, start, end):
        if fno == field_no and wt == 2:
            ln, q = _varint(buf, p, end)
            v = rewrite(buf, q, q + ln)
            out += buf[pos:p] + _enc_varint(len(v)) + v
        else:
            out += buf[pos:nxt]
    return bytes(out)


def _graph_skeleton(buf, start: int, end: int) -> bytes:
    return _rewrite_field(buf, start, end, 5, _tensor_skeleton)  # GraphProto.initializer


def skeleton_bytes(buf) -> bytes:
    """ModelProto bytes with the main graph's initializer payloads left out (``buf``: bytes, or a
    ``_FileBytes`` over the file)."""
    return _rewrite_field(buf, 0, len(buf), 7, _graph_skeleton)  # ModelProto.graph
