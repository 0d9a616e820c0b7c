"""Published kernel timings as ground truth: estimate each kernel and compare.

A published file (e.g. ``bench/data/deepbench-v100-t4.json``, DeepBench's V100/T4 sheets) holds
``sheets``; each sheet names its GPU and precision and lists GEMMs (C[M,N] = A[M,K] x B[K,N], ``ms``)
and convolutions (N x C x H x W input, K filters of R x S, pads, strides, ``fwd_ms``). Each distinct
kernel (same dimensions; DeepBench lists some GEMMs twice, with A or B transposed, whose times are
then averaged geometrically) becomes a one-node graph, is scored on the matching profile, and its
predicted kernel time (device time: the host's launch cost is not part of a published kernel time)
is compared with the measured one. A sheet may say ``"runtime": "graph"`` (its kernels were timed in
a CUDA graph replay: the shorter in-graph minimum kernel time applies), a convolution may carry a
``group`` (depthwise and grouped convolutions), and a sheet may list ``elementwise`` kernels (``op``,
``elements``: a binary op reads two tensors of that many elements and writes a third, a unary op
reads one and writes one; or ``shape``, a list of dimensions, in place of ``elements``) and row-wise
kernels (``op`` Softmax or LayerNormalization with its ``shape``: the last dimension is the one each row
normalises, as in a transformer's attention scores or hidden states); a GEMM may carry a ``batch``
(that many products of the same shape in one kernel, both operands computed: attention's batched
products). Any other key in a sheet (but
``system``, ``source``, ``notes``) or in a kernel is refused: kernels of a kind this reader does not
estimate, or with a dimension it would not read, are never dropped or estimated without a word.

A deterministic quarter of the kernels (by a hash of their dimensions) is *held out*: the project's
constants were never tuned on it, and the statistics are reported for it separately.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass

from dnnperf.errors import DnnperfError
from dnnperf.files import read_text, require_file
from dnnperf.hardware import HardwareProfile
from dnnperf.ir import Graph, Node, Tensor

# the elementwise ops a sheet may time, with their number of inputs (each of `elements` elements)
ELEMENTWISE = {"Add": 2, "Sub": 2, "Mul": 2, "Div": 2, "Relu": 1, "Sigmoid": 1, "Tanh": 1, "Exp": 1, "Neg": 1,
               "Abs": 1, "Sqrt": 1}
# row-wise kernels a sheet may time (one input of `shape`, normalised along its last dimension)
ROWWISE = ("Softmax", "LayerNormalization")
# what a sheet may hold: its kernels (gemm, conv, elementwise) and what describes them
_SHEET_KEYS = frozenset({"gpu", "precision", "runtime", "system", "source", "notes", "gemm", "conv", "elementwise"})
# what a kernel of each kind may carry: its dimensions, its time, and words about it (DeepBench's
# `app`, its operands' transposition `at` / `bt`, which its GEMM times do not depend on)
_ROW_KEYS = {
    "gemm": frozenset({"M", "N", "K", "batch", "ms", "at", "bt", "app", "notes"}),
    "conv": frozenset({"N", "C", "H", "W", "K", "R", "S", "pad_h", "pad_w", "stride_h", "stride_w", "group", "fwd_ms",
                       "app", "notes"}),
    "elementwise": frozenset({"op", "elements", "shape", "ms", "app", "notes"}),
}
_PRECISION = {"float": "fp32", "16 bit inputs": "fp16", "int8": "int8", "mixed precision": "int8", "fp16": "fp16",
              "half": "fp16", "fp32": "fp32", "bf16": "bf16", "tf32": "tf32"}


@dataclass(frozen=True)
class Kernel:
    sheet: str
    gpu: str
    precision: str
    kind: str  # gemm | conv | elementwise
    dims: tuple  # gemm: (M, N, K[, batch]); conv: (N, C, H, W, K, R, S, pad_h, pad_w, stride_h, stride_w[, group]);
    #              elementwise: (elements,) or the tensor's shape
    measured_s: float
    held_out: bool
    runtime: str = "eager"  # how the sheet timed its kernels: "eager" (back to back from a stream), "graph"
    op: str = ""  # elementwise: the ONNX op

    @property
    def label(self) -> str:
        if self.kind == "elementwise":
            if self.op in ROWWISE or len(self.dims) > 1:
                return f"{self.op} of shape {'x'.join(map(str, self.dims))}"
            return f"{self.op} of {self.dims[0]} elements"
        if self.kind == "gemm":
            b = f" batch {self.dims[3]}" if len(self.dims) > 3 else ""
            return "gemm M={} N={} K={}".format(*self.dims) + b
        n, c, h, w, k, r, s, ph, pw, sh, sw = self.dims[:11]
        g = f" group {self.dims[11]}" if len(self.dims) > 11 else ""
        return f"conv N={n} C={c} H={h} W={w} K={k} {r}x{s} pad {ph},{pw} stride {sh},{sw}{g}"


def sheet_precision(text: str) -> str:
    low = str(text).lower()
    for key, p in _PRECISION.items():
        if low.startswith(key) or key in low:
            return p
    raise DnnperfError(f"published sheet precision '{text}' is not understood (expected Float, 16 bit..., Int8...)")


def _held_out(kind: str, dims: tuple) -> bool:
    h = hashlib.sha256(f"{kind}:{dims}".encode()).digest()
    return h[0] % 4 == 0


def load_published(path: str) -> list[Kernel]:
    """Every distinct kernel of every sheet (see the module docstring)."""
    require_file(path, "published data file", "pass a JSON file of published kernel timings", "the JSON file")
    try:
        data = json.loads(read_text(path, "published data file", 64 * 10**6))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DnnperfError(f"'{path}' is not valid JSON ({exc.__class__.__name__})") from None
    sheets = data.get("sheets") if isinstance(data, dict) else None
    if not isinstance(sheets, dict) or not sheets:
        raise DnnperfError(f"'{path}' has no 'sheets' object — see bench/data/deepbench-v100-t4.json for the format")
    out: list[Kernel] = []
    for name, sh in sheets.items():
        if not isinstance(sh, dict):
            raise DnnperfError(f"'{path}': sheet '{name}' is not an object")
        unknown = sorted(set(sh) - _SHEET_KEYS)
        if unknown:  # kernels of a kind this reader does not estimate would be dropped without a word
            raise DnnperfError(f"'{path}': sheet '{name}' has '{unknown[0]}', which is not read (a sheet holds "
                               f"{', '.join(sorted(_SHEET_KEYS))})")
        prec = sheet_precision(sh.get("precision", ""))
        gpu = str(sh.get("gpu", name))
        runtime = str(sh.get("runtime", "eager"))
        if runtime not in ("eager", "graph"):
            raise DnnperfError(f"'{path}': sheet '{name}' has runtime '{runtime}' (expected eager or graph)")
        groups: dict[tuple, list[float]] = {}
        for g in _entries(path, name, sh, "gemm"):
            try:
                dims = (int(g["M"]), int(g["N"]), int(g["K"]))
                batch = int(g.get("batch", 1))
                if batch != 1:  # a batched product (kept out of the tuple otherwise: the held-out hash stays)
                    dims += (batch,)
                key = ("gemm", dims)
                ms = float(g["ms"])
                if min(dims) < 1:
                    raise ValueError
            except (KeyError, TypeError, ValueError, OverflowError):
                raise DnnperfError(f"'{path}': sheet '{name}' has a GEMM without M, N, K (whole numbers >= 1, and a "
                                   f"batch >= 1 if any) and ms: {g}") from None
            groups.setdefault(key, []).append(ms)
        for c in _entries(path, name, sh, "conv"):
            try:
                dims = tuple(int(c[k]) for k in ("N", "C", "H", "W", "K", "R", "S", "pad_h", "pad_w", "stride_h", "stride_w"))
                if min(dims[:7] + dims[9:]) < 1 or min(dims[7:9]) < 0 or dims[2] + 2 * dims[7] < dims[5] \
                        or dims[3] + 2 * dims[8] < dims[6]:
                    raise ValueError  # no output pixel (or no work)
                group = int(c.get("group", 1))
                if group != 1:  # depthwise / grouped (kept out of the tuple otherwise: the held-out hash stays)
                    if group <= 0 or dims[1] % group or dims[4] % group:
                        raise ValueError
                    dims += (group,)
                ms = float(c["fwd_ms"])
            except (KeyError, TypeError, ValueError, OverflowError):
                raise DnnperfError(f"'{path}': sheet '{name}' has a conv without N, C, H, W, K, R, S, strides (>= 1), "
                                   f"pads (>= 0) that leave an output, and fwd_ms (or a group that does not divide C "
                                   f"and K): {c}") from None
            groups.setdefault(("conv", dims), []).append(ms)
        for e in _entries(path, name, sh, "elementwise"):
            try:
                op, ms = str(e["op"]), float(e["ms"])
                if ("elements" in e) == ("shape" in e) or (op in ROWWISE and "shape" not in e):
                    raise ValueError  # one of the two; a row-wise kernel needs its rows' length
                shape = e["shape"] if "shape" in e else [e["elements"]]
                if not isinstance(shape, list) or not shape or any(isinstance(d, bool) for d in shape):
                    raise ValueError
                dims = tuple(int(d) for d in shape)
                if op not in ELEMENTWISE and op not in ROWWISE or min(dims) <= 0 \
                        or any(d != v for d, v in zip(dims, shape)):
                    raise ValueError
            except (KeyError, TypeError, ValueError, OverflowError):
                raise DnnperfError(f"'{path}': sheet '{name}' has an elementwise kernel without op (one of "
                                   f"{', '.join(ELEMENTWISE)}, or the row-wise {' and '.join(ROWWISE)}), either a "
                                   f"positive number of elements or a shape of positive whole numbers (row-wise: a "
                                   f"shape), and ms: {e}") from None
            groups.setdefault(("elementwise:" + op, dims), []).append(ms)
        for (key, dims), times in groups.items():
            if any(not (0 < t < math.inf) for t in times):
                raise DnnperfError(f"'{path}': sheet '{name}' has a time that is not a positive number for "
                                   f"{key} {dims}")
            gm = math.exp(sum(math.log(t) for t in times) / len(times)) * 1e-3
            kind, _, op = key.partition(":")  # "elementwise:Add"
            out.append(Kernel(name, gpu, prec, kind, dims, gm, _held_out(key, dims), runtime, op))
    return out


def _entries(path: str, sheet: str, sh: dict, key: str) -> list:
    """A sheet's list of kernels of one kind (none when absent); a kernel with a key this reader does
    not know (a misspelt `grops`, a `dilation` it would not model) is refused, never estimated without it."""
    v = sh.get(key) or []
    if not isinstance(v, list):
        raise DnnperfError(f"'{path}': sheet '{sheet}': '{key}' must be a list of kernels, got {type(v).__name__}")
    for row in v:
        unknown = sorted(set(row) - _ROW_KEYS[key]) if isinstance(row, dict) else None
        if unknown is None or unknown:
            what = f"has '{unknown[0]}', which is not read" if unknown else "is not an object"
            raise DnnperfError(f"'{path}': sheet '{sheet}': a {key} kernel {what} (a {key} kernel holds "
                               f"{', '.join(sorted(_ROW_KEYS[key]))}): {row}")
    return v


def kernel_graph(k: Kernel, dtype: str) -> tuple[Graph, Node]:
    """The one-node graph of a kernel: MatMul [M, K] x weight [K, N], Conv, an elementwise op, or a row-wise
    Softmax / LayerNormalization (with its scale and bias as weights) over the last axis."""
    if k.kind == "elementwise" and k.op == "LayerNormalization":
        row = (k.dims[-1],)
        t = {"a": Tensor("a", k.dims, dtype), "scale": Tensor("scale", row, dtype), "bias": Tensor("bias", row, dtype),
             "y": Tensor("y", k.dims, dtype)}
        g = Graph("kernel", [], t, frozenset({"scale", "bias"}), ("a",), ("y",), 17)
        node = Node("op", k.op, "", ("a", "scale", "bias"), ("y",), {"axis": -1})
    elif k.kind == "elementwise":
        ins = ("a", "b")[:ELEMENTWISE.get(k.op, 1)]
        t = {x: Tensor(x, k.dims, dtype) for x in (*ins, "y")}
        g = Graph("kernel", [], t, frozenset(), ins, ("y",), 17)
        node = Node("op", k.op, "", ins, ("y",), {"axis": -1} if k.op == "Softmax" else {})
    elif k.kind == "gemm" and len(k.dims) > 3:  # batched: [batch, M, K] x [batch, K, N], both computed
        m, n, kk, b = k.dims
        t = {"a": Tensor("a", (b, m, kk), dtype), "b": Tensor("b", (b, kk, n), dtype),
             "y": Tensor("y", (b, m, n), dtype)}
        g = Graph("kernel", [], t, frozenset(), ("a", "b"), ("y",), 17)
        node = Node("gemm", "MatMul", "", ("a", "b"), ("y",), {})
    elif k.kind == "gemm":
        m, n, kk = k.dims
        t = {"a": Tensor("a", (m, kk), dtype), "b": Tensor("b", (kk, n), dtype), "y": Tensor("y", (m, n), dtype)}
        g = Graph("kernel", [], t, frozenset({"b"}), ("a",), ("y",), 17)
        node = Node("gemm", "MatMul", "", ("a", "b"), ("y",), {})
    else:
        n, c, h, w, kout, r, s, ph, pw, sh, sw = k.dims[:11]
        group = k.dims[11] if len(k.dims) > 11 else 1
        oh = (h + 2 * ph - r) // sh + 1
        ow = (w + 2 * pw - s) // sw + 1
        t = {"x": Tensor("x", (n, c, h, w), dtype), "w": Tensor("w", (kout, c // group, r, s), dtype),
             "y": Tensor("y", (n, kout, oh, ow), dtype)}
        g = Graph("kernel", [], t, frozenset({"w"}), ("x",), ("y",), 17)
        node = Node("conv", "Conv", "", ("x", "w"), ("y",),
                    {"kernel_shape": [r, s], "pads": [ph, pw, ph, pw], "strides": [sh, sw], "group": group})
    g.nodes.append(node)
    return g, node


def predict(k: Kernel, hw: HardwareProfile):
    """(predicted device seconds, the layer's cost) for one kernel on ``hw``."""
    from dnnperf.ops import cost_node
    from dnnperf.scoring import Layer, score_layer
    from dnnperf.workload import DTYPE_OF_PRECISION

    g, node = kernel_graph(k, DTYPE_OF_PRECISION[k.precision])
    w = cost_node(g, node)
    cost = score_layer(Layer(node.name, node.op_type, (node.name,), w, g.tensors["y"].shape), hw, k.precision,
                       runtime=k.runtime)
    return cost.t_device, cost


def spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for kk in range(i, j + 1):
                r[order[kk]] = (i + j) / 2
            i = j + 1
        return r

    if len(xs) < 2:
        return 1.0
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    vy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (vx * vy) if vx and vy else 1.0


def _median(v: list[float]) -> float:
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def stats(rows: list[dict]) -> dict:
    """Median predicted/measured, median error factor (max of the ratio and its inverse), shares
    within 1.25x and 2x, Spearman rank correlation of predicted vs measured."""
    if not rows:
        return {"kernels": 0}
    ratios = [r["predicted_s"] / r["measured_s"] for r in rows]
    err = [max(x, 1 / x) for x in ratios]
    out = {
        "kernels": len(rows),
        "median_ratio": _median(ratios),
        "median_error": _median(err),
        "within_1_25": sum(e <= 1.25 for e in err) / len(err),
        "within_1_5": sum(e <= 1.5 for e in err) / len(err),
        "within_2": sum(e <= 2.0 for e in err) / len(err),
        "rho": spearman([r["predicted_s"] for r in rows], [r["measured_s"] for r in rows]),
    }
    for kind in ("gemm", "conv", "elementwise"):
        sub = [x for r, x in zip(rows, ratios) if r.get("kind") == kind]
        out[f"median_ratio_{kind}"] = _median(sub) if sub else None
    return out


def group_of(k: Kernel, cost) -> str:
    """The class of ``k`` as the model runs it, for a breakdown of the errors by class (``bench/published.py
    --groups``): a convolution's window, stride, grouping and algorithm; a product's shape (thin: a side of at
    most 128), split-K and whether its K loop's latency bounds it; an elementwise kernel's op."""
    if k.kind == "conv":
        r, s, sh = k.dims[5], k.dims[6], k.dims[9]
        g = k.dims[11] if len(k.dims) > 11 else 1
        kind = "" if g == 1 else " depthwise" if g == k.dims[1] else " grouped"
        return f"conv {r}x{s} stride {sh}{kind} {cost.algorithm}"
    if k.kind == "gemm":
        plan = cost.plan
        return "gemm " + ("thin" if min(k.dims[:2]) <= 128 else "wide") + (" batched" if len(k.dims) > 3 else "") \
            + (" split-K" if plan is not None and plan.split_k > 1 else "") \
            + (" latency-bound" if plan is not None and plan.latency_bound else "")
    return k.op


def class_rows(rows: list[dict], digits: int | None = None) -> list[dict]:
    """Per (precision, class of kernel: ``group_of``), sorted: the fitted kernels' count, median
    predicted/measured and share within 1.25x, and the held-out kernels' count and median, apart
    (figures rounded to ``digits``, or not)."""
    out = []
    r4 = (lambda v: v) if digits is None else (lambda v: round(v, digits))
    for key in sorted({(r["precision"], r["group"]) for r in rows}):
        mine = [r for r in rows if (r["precision"], r["group"]) == key]
        fit, held = [r for r in mine if not r["held_out"]], [r for r in mine if r["held_out"]]
        f, hs = stats(fit), stats(held)
        out.append({"precision": key[0], "class": key[1], "kernels": f["kernels"],
                    "median_ratio": r4(f["median_ratio"]) if fit else None,
                    "within_1_25": r4(f["within_1_25"]) if fit else None, "held_out_kernels": hs["kernels"],
                    "held_out_median_ratio": r4(hs["median_ratio"]) if held else None})
    return out


def validate_published(kernels: list[Kernel], hw: HardwareProfile) -> dict:
    rows = []
    for k in kernels:
        pred, cost = predict(k, hw)
        rows.append({"sheet": k.sheet, "kind": k.kind, "kernel": k.label, "precision": k.precision,
                     "held_out": k.held_out, "measured_s": k.measured_s, "predicted_s": pred,
                     "ratio": pred / k.measured_s, "cause": cost.cause, "unit": cost.unit, "group": group_of(k, cost)})
    return {"hardware": hw.name, "rows": rows, "all": stats(rows),
            "fit": stats([r for r in rows if not r["held_out"]]),
            "held_out": stats([r for r in rows if r["held_out"]])}


def records(kernels: list[Kernel], hw: HardwareProfile, data_label: str) -> list[dict]:
    """The profile's ``validation`` records: one per sheet of ``kernels`` measured on ``hw``'s GPU."""
    res = validate_published(kernels, hw)
    out = []
    for sheet in dict.fromkeys(r["sheet"] for r in res["rows"]):
        rows = [r for r in res["rows"] if r["sheet"] == sheet]
        st = stats(rows)
        out.append({"data": data_label, "sheet": sheet, "precision": rows[0]["precision"], "kernels": st["kernels"],
                    "median_error": round(st["median_error"], 2), "within_1_25": round(st["within_1_25"], 3),
                    "within_2": round(st["within_2"], 3), "rho": round(st["rho"], 3)})
    return out


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", str(text).lower())


def _runs(tokens: list[str]) -> set[str]:
    """Every run of consecutive tokens, joined: "NVIDIA TITAN Xp" -> titan, titanxp, nvidiatitanxp, ..."""
    return {"".join(tokens[i:j]) for i in range(len(tokens)) for j in range(i + 1, len(tokens) + 1)}


def sheets_for(kernels: list[Kernel], hw: HardwareProfile) -> list[Kernel]:
    """The kernels of the sheets measured on ``hw``'s GPU; none when no sheet names it (never another
    GPU's measurements). A sheet names the GPU when the profile's name is a run of whole words of the
    sheet's GPU ("gtx1080ti" in "NVIDIA GeForce GTX 1080 Ti", but "titanxp" is not in "NVIDIA TITAN X
    Pascal"), or when a model number of the profile's title (letters and digits: v100, t4) is a word
    of it (form factors such as SXM2 or PCIe name no GPU)."""
    name = "".join(_tokens(hw.name))
    models = {t for t in _tokens(hw.title) if re.search(r"[a-z]", t) and re.search(r"[0-9]", t)
              and not t.startswith(("sxm", "pcie", "gddr", "hbm", "lpddr", "ddr"))}
    out, seen = [], {}
    for k in kernels:
        if k.gpu not in seen:
            words = _tokens(k.gpu)
            seen[k.gpu] = name in _runs(words) or bool(models & set(words))
        if seen[k.gpu]:
            out.append(k)
    return out


def default_data() -> str:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(here, "bench", "data", "deepbench-v100-t4.json")


def published_document(path: str, hw: HardwareProfile, worst: int = 10) -> dict:
    """``dnnperf validate --published FILE --hw NAME``: per sheet and overall statistics, the held-out
    quarter on its own, and the worst kernels with the cause dnnperf gives them."""
    every = load_published(path)
    kernels = sheets_for(every, hw)
    if not kernels:
        gpus = ", ".join(sorted({k.gpu for k in every}))
        raise DnnperfError(f"no sheet of '{path}' was measured on {hw.name} ({hw.title}); its sheets are for: {gpus} "
                           "— pass the profile of one of those GPUs with --hw")
    res = validate_published(kernels, hw)
    rows = []
    for sheet in dict.fromkeys(r["sheet"] for r in res["rows"]):
        st = stats([r for r in res["rows"] if r["sheet"] == sheet])
        rows.append({"set": sheet, **_rounded(st)})
    rows.append({"set": "all", **_rounded(res["all"])})
    rows.append({"set": "held-out quarter", **_rounded(res["held_out"])})
    bad = sorted(res["rows"], key=lambda r: (-max(r["ratio"], 1 / r["ratio"]), r["kernel"]))[:worst]
    return {"schema_version": "dnnperf-published/1", "data": path, "hardware": hw.name,
            "convention": "ratio = predicted / measured device time; error = max(ratio, 1/ratio)",
            "rows": rows, "classes": class_rows(res["rows"], 4),
            "worst": [{"sheet": r["sheet"], "kernel": r["kernel"], "precision": r["precision"],
                       "predicted_s": round(r["predicted_s"], 9), "measured_s": round(r["measured_s"], 9),
                       "ratio": round(r["ratio"], 3), "cause": r["cause"], "held_out": r["held_out"]} for r in bad]}


def network_records(rows: list[tuple[str, float, float]], data_label: str, sheet: str) -> list[dict]:
    """A profile's ``validation`` records from published whole-network latencies: one per precision (in
    the order the rows give them) over its (precision, predicted seconds, measured seconds) rows, counted
    as ``networks``."""
    out = []
    for prec in dict.fromkeys(p for p, _, _ in rows):
        st = stats([{"predicted_s": pr, "measured_s": m} for p, pr, m in rows if p == prec])
        out.append({"data": data_label, "sheet": sheet, "precision": prec, "networks": st["kernels"],
                    "median_error": round(st["median_error"], 2), "within_1_25": round(st["within_1_25"], 3),
                    "within_2": round(st["within_2"], 3), "rho": round(st["rho"], 3)})
    return out


def _rounded(st: dict) -> dict:
    keys = ("kernels", "median_ratio", "median_ratio_gemm", "median_ratio_conv", "median_ratio_elementwise",
            "median_error", "within_1_25",
            "within_2", "rho")
    return {k: (round(st[k], 4) if isinstance(st.get(k), float) else st.get(k)) for k in keys}
