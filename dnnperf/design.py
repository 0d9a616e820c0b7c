"""Design-space tools: latency lookup tables for NAS, layer-shape advice, model diffs.

LUT rows are costed with the same op cost functions and scoring rules as `analyze`, on tiny
in-memory graphs (no ONNX serialisation), so thousands of configurations take about a second.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from dnnperf.scoring import Layer, LayerCost, rescore, score_layer
from dnnperf.errors import DnnperfError
from dnnperf.fmt import sig
from dnnperf.ir import Graph, Node, Tensor
from dnnperf.hardware import PRECISIONS, HardwareProfile
from dnnperf.ops import cost_node
from dnnperf.vocab import EXPERTS_KERNEL
from dnnperf.workload import DTYPE_OF_PRECISION

SPACE_KEYS = {
    "ops": "op types: conv (k x k), dwconv (depthwise k x k), pwconv (1 x 1), mbconv (1x1 expand, k x k "
           "depthwise, 1x1 project), linear (tokens = resolution)",
    "channels_in": "input channels (or input features for linear)",
    "channels_out": "output channels (ignored by dwconv: out = in)",
    "kernel": "kernel sizes", "stride": "strides", "resolution": "input height = width (tokens for linear)",
    "expansion": "mbconv expansion ratios (others ignore it)", "batch": "batch sizes",
    "precision": f"precisions ({', '.join(PRECISIONS)})",
}
OPS = ("conv", "dwconv", "pwconv", "mbconv", "linear")
KEY_DOC = ("key = op|cin|cout|k|s|res|e|b|prec, e.g. 'conv|32|64|3|1|56|1|1|fp16': one row per configuration; "
           "latency_s is seconds for one layer (mbconv: its three convs) including launch overhead")


def read_space(path: str) -> dict:
    from dnnperf.files import read_text, require_file
    from dnnperf.hardware import safe_yaml

    require_file(path, "search-space file", "check the path", "a .yaml file")
    try:
        text = read_text(path, "search-space file", 10**6)
    except UnicodeDecodeError:
        raise DnnperfError(f"search-space file '{path}' is not UTF-8 text — pass a .yaml file") from None
    d = safe_yaml(text, f"space '{path}'")
    if not isinstance(d, dict):
        raise DnnperfError(f"space '{path}': expected a mapping of {', '.join(SPACE_KEYS)}")
    out = {}
    for k in d:
        if k not in SPACE_KEYS:
            raise DnnperfError(f"space '{path}': unknown key '{k}' (keys: {', '.join(SPACE_KEYS)})")
    defaults = {"ops": ["conv"], "channels_in": [32], "channels_out": [32], "kernel": [3], "stride": [1],
                "resolution": [56], "expansion": [1], "batch": [1], "precision": ["fp32"]}
    for k, default in defaults.items():
        v = d.get(k, default)
        if not isinstance(v, list) or not v:
            raise DnnperfError(f"space '{path}'.{k}: expected a non-empty list")
        if k == "ops":
            bad = [x for x in v if x not in OPS]
            if bad:
                raise DnnperfError(f"space '{path}'.ops: unknown {bad} (use {', '.join(OPS)})")
        elif k == "precision":
            bad = [x for x in v if x not in PRECISIONS]
            if bad:
                raise DnnperfError(f"space '{path}'.precision: unknown {bad}")
        else:
            if any(isinstance(x, bool) or not isinstance(x, int) or x < 1 or x > 1_000_000 for x in v):
                raise DnnperfError(f"space '{path}'.{k}: integers between 1 and 1,000,000")
        out[k] = list(dict.fromkeys(v))  # a value listed twice is one configuration: keys stay unique
    n = 1
    for v in out.values():
        n *= len(v)
    if n > 5_000_000:
        raise DnnperfError(f"space '{path}' has {n:,} configurations; keep it under 5,000,000")
    return out


# -- tiny graphs --------------------------------------------------------------------------------

def _conv_layer(name, b, cin, cout, res, k, s, groups, dtype) -> tuple[Layer, int]:
    out = (res + 2 * (k // 2) - k) // s + 1
    t = {
        "x": Tensor("x", (b, cin, res, res), dtype),
        "w": Tensor("w", (cout, cin // groups, k, k), dtype),
        "y": Tensor("y", (b, cout, out, out), dtype),
    }
    g = Graph(name, [], t, frozenset({"w"}), ("x",), ("y",), 17)
    node = Node(name, "Conv", "", ("x", "w"), ("y",), {"group": groups, "kernel_shape": [k, k]})
    return Layer(name, "Conv", (name,), cost_node(g, node), (b, cout, out, out)), out


def _linear_layer(name, b, tokens, fin, fout, dtype) -> Layer:
    t = {"x": Tensor("x", (b, tokens, fin), dtype), "w": Tensor("w", (fin, fout), dtype),
         "y": Tensor("y", (b, tokens, fout), dtype)}
    g = Graph(name, [], t, frozenset({"w"}), ("x",), ("y",), 17)
    node = Node(name, "MatMul", "", ("x", "w"), ("y",), {})
    return Layer(name, "MatMul", (name,), cost_node(g, node), (b, tokens, fout))


def config_layers(op, cin, cout, k, s, res, e, b, dtype) -> list[Layer]:
    if op == "conv":
        return [_conv_layer("conv", b, cin, cout, res, k, s, 1, dtype)[0]]
    if op == "pwconv":
        return [_conv_layer("pwconv", b, cin, cout, res, 1, s, 1, dtype)[0]]
    if op == "dwconv":
        return [_conv_layer("dwconv", b, cin, cin, res, k, s, cin, dtype)[0]]
    if op == "mbconv":
        mid = cin * e
        layers = []
        if e != 1:
            layers.append(_conv_layer("expand", b, cin, mid, res, 1, 1, 1, dtype)[0])
        dw, out = _conv_layer("depthwise", b, mid, mid, res, k, s, mid, dtype)
        layers.append(dw)
        layers.append(_conv_layer("project", b, mid, cout, out, 1, 1, 1, dtype)[0])
        return layers
    if op == "linear":
        return [_linear_layer("linear", b, res, cin, cout, dtype)]
    raise DnnperfError(f"unknown op '{op}'")


def _space_precisions(space: dict, hw: HardwareProfile, notes: list) -> dict[str, str]:
    """{precision asked: precision costed} for the space's precisions on ``hw``, by ``-p``'s rules
    (``dnnperf.precision.resolve``): one the device does not run is refused, naming those it runs (its
    rows would be costed at some other unit's rate, silently); the documented mappings (tf32 -> fp32
    without a tf32 mode, 16-bit floats on a CPU) are kept and noted."""
    from dnnperf import precision as precision_rules

    out = {}
    for p in space["precision"]:
        try:
            out[p], note = precision_rules.resolve(hw, p)
        except DnnperfError:
            raise DnnperfError(f"the search space's precision {p}: {hw.name} has no {p} units — it runs "
                               f"{', '.join(precision_rules.supported(hw))}; take {p} out of the space's precision list") from None
        if note:
            notes.append(note.replace(f"-p {p} is", f"the space's {p} rows are"))
    return out


def lut_space(space: dict, hw: HardwareProfile, notes: list | None = None, runtime: str = "eager") -> list[dict]:
    """One row per configuration of ``space`` on ``hw`` in ``runtime`` (eager, graph, tensorrt: what
    each kernel's start and the host's launches cost). ``notes`` (a list) receives what the table
    assumed: precisions mapped to another, configurations too large for the device's memory."""
    notes = [] if notes is None else notes
    costed_as = _space_precisions(space, hw, notes)
    cap = (hw.dram_gb or 0) * 1e9
    too_big: list[str] = []
    no_room: list[tuple] = []  # (key, window, map side): windows wider than the map they slide over
    rows = []
    for op, cin, cout, k, s, res, e, b, prec in itertools.product(
            space["ops"], space["channels_in"], space["channels_out"], space["kernel"], space["stride"],
            space["resolution"], space["expansion"], space["batch"], space["precision"]):
        if op in ("pwconv", "linear") and k != space["kernel"][0]:
            continue  # kernel does not apply: one row, not duplicates
        if op == "dwconv" and cout != space["channels_out"][0]:
            continue
        if op != "mbconv" and e != space["expansion"][0]:
            continue
        kk = 1 if op in ("pwconv", "linear") else k
        co = cin if op == "dwconv" else cout
        key = f"{op}|{cin}|{co}|{kk}|{s}|{res}|{e}|{b}|{prec}"
        if res < k and op in ("conv", "dwconv", "mbconv"):
            no_room.append((key, k, res))
            continue
        dtype = DTYPE_OF_PRECISION[prec]
        layers = config_layers(op, cin, cout, k, s, res, e, b, dtype)
        costs = [score_layer(l, hw, costed_as[prec], runtime=runtime) for l in layers]
        lat = sum(c.time_s for c in costs)
        main = max(costs, key=lambda c: c.time_s)
        rows.append({
            "key": key, "op": op, "cin": cin, "cout": co, "kernel": kk,
            "stride": s, "resolution": res, "expansion": e, "batch": b, "precision": prec,
            "macs": sum(l.workload.macs for l in layers), "bytes": sum(l.workload.bytes_total for l in layers),
            "latency_s": sig(lat), "cause": main.cause,
        })
        if cap and any(l.workload.bytes_total > cap for l in layers):
            too_big.append(key)
    if no_room and rows:
        key, k, res = no_room[0]
        notes.append(f"{len(no_room)} configuration(s) have no row: their {k} x {k} window is wider than the "
                     f"{res} x {res} map it slides over (e.g. {key})")
    if too_big:
        notes.append(f"{len(too_big)} configuration(s) do not fit {hw.name}'s {hw.dram_gb:g} GB (one layer's weights, input "
                     f"and output alone are larger, e.g. {too_big[0]}): their latency times a run the device cannot hold")
    return rows


def lut_from_report(report) -> list[dict]:
    """Per-layer latency of an existing model: key = layer name, plus its shape signature."""
    rows = []
    prec = report.score.settings.precision or "model"
    for c in report.score.layers:
        w = c.layer.workload
        if c.time_s <= 0:
            continue
        g = w.gemm
        rows.append({"key": c.name, "op": c.layer.op_type, "output_shape": "x".join(map(str, c.layer.output_shape or ())),
                     "gemm_mnk": f"{g.m}x{g.n}x{g.k}x{g.count}" if g else "", "precision": c.precision if prec == "model" else prec,
                     "macs": w.macs, "bytes": w.bytes_total, "latency_s": sig(c.time_s), "cause": c.cause})
    return rows


# -- shapes ---------------------------------------------------------------------------------------

def _rescale(c: LayerCost, n2: int) -> Layer:
    return replace(c.layer, workload=c.layer.workload.with_width(n2))


MAX_WIDTHS = 1024  # widths rescored per layer at most


def candidate_widths(lo: int, hi: int, most: int = MAX_WIDTHS) -> range:
    """The widths ``shape_advice`` tries between ``lo`` and ``hi``: every one when there are at most
    ``most``, else the multiples of the smallest power of two that leaves at most ``most`` (a wide
    layer's span, a vocabulary of 50,257 +-12.5%, holds thousands of widths; the multiples of 16
    include every width a tile or an alignment rule favours; a corrupt file's 2^31 channels would
    otherwise be rescored half a billion times)."""
    step = 1
    while (hi - lo) // step + 1 > most:
        step *= 2
    return range(-(-lo // step) * step, hi + 1, step)


def _peak(hw, unit: str, precision: str) -> float:
    """The peak TOP/s of ``hw``'s unit named ``unit`` at ``precision`` (0 when it has none)."""
    u = hw.unit_named(unit)
    return float(u.peak_tops.get(precision, 0.0)) if u is not None else 0.0


def _time_change(x: float) -> str:
    """'+8% time', or 'the same time' when the change rounds to nothing (never '-0%')."""
    return "the same time" if abs(x) < 0.005 else f"{x:+.0%} time"


def shape_advice(report, span: float = 0.125, per_layer: int = 3) -> list[dict]:
    """For each matrix layer: nearby output widths (within +-span) that cost less time per MAC.

    Only the layer itself is rescored (its output channels / hidden size N change; the next layer's
    input width would change too and is not included). Ranked by time per MAC gained, one width per
    time (the widest of a tile step). Wide layers try aligned widths only (``candidate_widths``). A
    width that moves the layer to a unit of lower peak is never suggested: on T4 a misaligned 71 in
    place of 64 fp16 channels skips the tensor cores' layout reorders and comes out faster at batch 1
    in eager runs, which no one should design a network around (the reorders have their own fix)."""
    prec = report.score.settings.precision
    hw = report.score.hw
    out = []
    for c in report.score.layers:
        w = c.layer.workload
        if not w.is_matrix or w.gemm is None or c.time_s <= 0 or w.macs == 0 or w.kernel == EXPERTS_KERNEL:
            continue  # (an MoE's product has no one width: vocab.EXPERTS_KERNEL)
        n = w.gemm.n
        lo, hi = max(1, int(n * (1 - span))), int(n * (1 + span))
        base_tpm = c.time_s / w.macs
        cands = []
        for n2 in candidate_widths(lo, hi):
            if n2 == n:
                continue
            l2 = _rescale(c, n2)
            c2 = rescore(c, l2, report.score, prec)
            if c2.unit != c.unit and _peak(hw, c2.unit, c2.precision) < _peak(hw, c.unit, c.precision):
                continue  # off the specialised unit: faster only by its fixed costs (eager layout reorders)
            tpm = c2.time_s / max(l2.workload.macs, 1)
            if tpm < base_tpm * 0.98:
                change = c2.time_s / c.time_s - 1
                cands.append({"to": n2, "macs_change": l2.workload.macs / w.macs - 1,
                              "time_change": 0.0 if abs(change) < 1e-9 else change,  # (rounding noise: the same time)
                              "time_per_mac_gain": 1 - tpm / base_tpm, "new_latency_s": c2.time_s, "unit": c2.unit,
                              "tile_efficiency": c2.tile_efficiency})
        if not cands:
            continue
        cands.sort(key=lambda x: (-x["time_per_mac_gain"], abs(x["to"] - n)))
        best: list[dict] = []
        for cand in cands:  # one width per time: the widths of one tile step cost the same, the widest ranks first
            if all(abs(cand["new_latency_s"] - b["new_latency_s"]) > 0.005 * b["new_latency_s"] for b in best):
                best.append(cand)
                if len(best) == per_layer:
                    break
        out.append({"layer": c.name, "op_type": c.layer.op_type, "dim": "output channels" if "Conv" in c.layer.op_type
                    else "output features", "current": n, "latency_s": c.time_s, "unit": c.unit,
                    "tile_efficiency": c.tile_efficiency,
                    "suggestions": [{k: (sig(v, 4) if isinstance(v, float) else v) for k, v in s.items()} for s in best],
                    "text": "; ".join(f"{n} -> {s['to']}: {s['macs_change']:+.0%} MACs, {_time_change(s['time_change'])}"
                                      for s in best)})
    out.sort(key=lambda r: (-r["suggestions"][0]["time_per_mac_gain"] * r["latency_s"], r["layer"]))
    return out


# -- diff -----------------------------------------------------------------------------------------

def diff(rep_a, rep_b) -> dict:
    """Layer-by-layer comparison: matched by name first, then by position among same-type layers."""
    a = [c for c in rep_a.score.layers if c.time_s > 0]
    b = [c for c in rep_b.score.layers if c.time_s > 0]
    bn = {c.name: c for c in b}
    pairs, left_a = [], []
    used = set()
    for c in a:
        if c.name in bn:
            pairs.append((c, bn[c.name], "name"))
            used.add(c.name)
        else:
            left_a.append(c)
    left_b = [c for c in b if c.name not in used]
    # position: k-th unmatched layer of an op type in A <-> k-th of the same op type in B
    by_type: dict[str, list] = {}
    for c in left_b:
        by_type.setdefault(c.layer.op_type, []).append(c)
    only_a = []
    for c in left_a:
        q = by_type.get(c.layer.op_type)
        if q:
            pairs.append((c, q.pop(0), "position"))
        else:
            only_a.append(c)
    only_b = [c for q in by_type.values() for c in q]
    rows = []
    for x, y, how in pairs:
        rows.append({"layer_a": x.name, "layer_b": y.name, "op_type": x.layer.op_type, "matched_by": how,
                     "a_s": x.time_s, "b_s": y.time_s, "delta_s": y.time_s - x.time_s, "cause_a": x.cause, "cause_b": y.cause,
                     "macs_a": x.layer.workload.macs, "macs_b": y.layer.workload.macs})
    for x in only_a:
        rows.append({"layer_a": x.name, "layer_b": None, "op_type": x.layer.op_type, "matched_by": "only in A",
                     "a_s": x.time_s, "b_s": 0.0, "delta_s": -x.time_s, "cause_a": x.cause, "cause_b": None,
                     "macs_a": x.layer.workload.macs, "macs_b": 0})
    for y in only_b:
        rows.append({"layer_a": None, "layer_b": y.name, "op_type": y.layer.op_type, "matched_by": "only in B",
                     "a_s": 0.0, "b_s": y.time_s, "delta_s": y.time_s, "cause_a": None, "cause_b": y.cause,
                     "macs_a": 0, "macs_b": y.layer.workload.macs})
    rows.sort(key=lambda r: (-abs(r["delta_s"]), str(r["layer_a"] or r["layer_b"])))
    ta, tb = rep_a.score.totals["latency_s"], rep_b.score.totals["latency_s"]
    for r in rows:
        for k in ("a_s", "b_s", "delta_s"):
            r[k] = sig(r[k])
    matched = {k: sum(1 for r in rows if r["matched_by"] == how)
               for k, how in (("by_name", "name"), ("by_position", "position"), ("only_in_a", "only in A"),
                              ("only_in_b", "only in B"))}
    return {"schema_version": "dnnperf-diff/1", "a": rep_a.inspection.model_name, "b": rep_b.inspection.model_name,
            "hardware": rep_a.hw.name, "a_latency_s": sig(ta), "b_latency_s": sig(tb),
            "delta_s": sig(tb - ta), "input_transfer_delta_s":
            sig(rep_b.score.input_transfer_s - rep_a.score.input_transfer_s), "matched": matched, "layers": rows}


def diff_note(d: dict) -> str | None:
    """A note when most of the layers were paired by position, not by name: the two graphs differ in
    structure or naming (two different networks, two exporters), and a positional pair compares the
    k-th convolution of one with the k-th of the other, which may be unrelated layers."""
    m = d["matched"]
    paired = m["by_name"] + m["by_position"]
    if not paired or m["by_name"] * 2 >= paired:
        return None
    return (f"only {m['by_name']} of {paired} matched layer pairs share a name ({m['by_position']} paired by position "
            "among layers of the same op type): the two graphs differ in structure or naming, so a pair may be two "
            "unrelated layers — the totals compare; the rows may not")


__all__ = ["read_space", "lut_space", "lut_from_report", "shape_advice", "diff", "diff_note", "KEY_DOC"]
