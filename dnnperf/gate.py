"""Non-interactive uses: compare targets, sweep batch/precision, and the CI regression gate.

All functions return plain data (dicts/lists); the CLI renders them.

Why one module this long: the three share the way a profile is named and recorded (a shipped
name, or a YAML path relative to the baseline), the rounding of every figure they store, and the
per-target rows compare and check both build; about half of it is the baseline's field-by-field
validation, which belongs with the gate that reads it.
"""

from __future__ import annotations

import json
import os
from dnnperf.scoring import Settings
from dnnperf.api import Inspection, analyze, checked, inspect_graph, ranked
from dnnperf.documents import coverage_dict, report_dict
from dnnperf.errors import DnnperfError
from dnnperf.fmt import sig as _r
from dnnperf.files import read_text, require_file
from dnnperf.ir import ShapeOverrides
from dnnperf.load import parse_model, read_model, resolve
from dnnperf.hardware import HardwareProfile, load_profile, shipped_names

BASELINE_SCHEMA = "dnnperf-baseline/2"
# a baseline larger than this is not one (swin_t records ~0.4 MB of layers per profile: 25 profiles of 25
# such models fit); sizes in decimal MB, as every bounded read of files.read_text
BASELINE_MAX_BYTES = 256 * 10**6


class ModelSource:
    """A model parsed once and reduced to its skeleton; each sweep point re-resolves shapes on a
    copy of the (small) skeleton instead of re-reading the file."""

    def __init__(self, path: str):
        self.path = path
        self._skeleton = read_model(path).SerializeToString()

    def inspect(self, ov: ShapeOverrides) -> Inspection:
        return checked(inspect_graph(resolve(parse_model(self._skeleton, self.path), ov, self.path), self.path), ov)


def cost_per_million(hw: HardwareProfile, latency_s: float, batch: int) -> float | None:
    """USD per million inferences at the profile's hourly price, one batch at a time."""
    if hw.price_per_hour is None or latency_s <= 0:
        return None
    return hw.price_per_hour / 3600.0 * latency_s / max(batch, 1) * 1e6


def compare(insp: Inspection, profiles: list[HardwareProfile], settings: Settings, sort: str = "latency",
            max_latency_s: float | None = None, min_throughput: float | None = None) -> dict:
    """One row per profile. A target that does not run the requested precision is left out and
    listed under ``skipped`` with the reason (the others are still compared). When ``insp`` is one
    device's share of a tensor-parallel step (``insp.collectives``), each row's latency adds the step's
    collectives over that target's link, and its cost is all the devices'."""
    from dnnperf.llm.parallel import collective_seconds

    rows = []
    skipped = []
    notes: list[str] = []
    devices = insp.collectives.devices if insp.collectives is not None else 1
    for hw in profiles:
        try:
            rep = analyze(insp, hw, settings, with_fixes=False, what_if=False)  # rows read no fix
        except DnnperfError as exc:
            if settings.precision is None or "has no" not in str(exc):
                raise
            skipped.append({"hardware": hw.name, "reason": str(exc)})
            continue
        notes.extend(rep.notes)
        used = rep.score.settings  # the batch the estimates used (the model's, or 1 assumed), not the option's None
        t = rep.score.totals
        top = ranked(rep, 1)
        b = used.batch or 1
        latency, throughput = t["latency_s"], t["throughput_per_s"]
        extra, assumed = collective_seconds(insp, hw, settings.precision)  # a split step: what its devices exchange, over this target's link
        if extra:
            latency += extra
            throughput = b / latency
        if assumed:
            notes.append(f"{hw.name} (--tp {devices}): {assumed}")
        # a target whose memory cannot hold the run meets no requirement (its note says so)
        fits = _fits(rep)
        meets = (max_latency_s is None or latency <= max_latency_s) and (
            min_throughput is None or throughput >= min_throughput) and fits is not False
        cost = cost_per_million(hw, latency, b)
        rows.append({
            "hardware": hw.name, "title": hw.title, "latency_s": _r(latency),
            "throughput_per_s": _r(throughput), "achieved_tops": _r(t["achieved_tops"]),
            "peak_tops": hw.headline_tops, "peak_basis_tops": t["peak_tops"], "fraction_of_peak": _r(t["fraction_of_peak"]),
            "mean_occupancy": _r(t["mean_occupancy"]), "top_cause": rep.top_cause,
            "top_layer": top[0].name if top else None, "top_layer_cause": top[0].cause if top else None,
            "price_per_hour": hw.price_per_hour, "cost_per_million_usd": _r(cost * devices) if cost is not None else None,
            "precision": rep.score.settings.precision or "model", "coverage": coverage_dict(insp, rep)["scored_share"],
            "meets_requirement": meets, "fits_memory": fits, "memory_needed_bytes": _needed(rep),
        })
        if devices > 1:
            rows[-1]["tensor_parallel_devices"] = devices  # memory and TOP/s are one device's; latency and cost the step's
    if not rows:
        raise DnnperfError(f"no target runs the requested precision: {'; '.join(s['reason'] for s in skipped)}")
    host = _host_cost_note(profiles, {r["hardware"] for r in rows}, settings)
    if host:
        notes.append(host)
    keys = {
        "latency": lambda r: (r["latency_s"], r["hardware"]),
        "throughput": lambda r: (-r["throughput_per_s"], r["hardware"]),
        "peak": lambda r: (-r["peak_tops"], r["hardware"]),
        "fraction": lambda r: (-r["fraction_of_peak"], r["hardware"]),
        "cost": lambda r: (r["cost_per_million_usd"] is None, r["cost_per_million_usd"] or 0, r["hardware"]),
        "name": lambda r: r["hardware"],
    }
    if sort not in keys:
        raise DnnperfError(f"--sort must be one of {', '.join(keys)}, got '{sort}'")
    rows.sort(key=keys[sort])
    out = {"schema_version": "dnnperf-compare/1", "model": insp.model_name,
           "settings": {**settings.as_dict(), "batch": used.as_dict()["batch"]},
           "sort": sort, "rows": rows, "skipped": skipped, "notes": notes}
    if max_latency_s is not None or min_throughput is not None:
        out["requirement"] = {"max_latency_s": max_latency_s, "min_throughput_per_s": min_throughput}
        out["recommendation"] = recommend(rows, max_latency_s, min_throughput)
    return out


def _host_cost_note(profiles: list[HardwareProfile], compared: set[str], settings: Settings) -> str | None:
    """GPUs compared under an eager runtime with different host costs per kernel (launch_overhead_us:
    the framework's and the host CPU's as much as the GPU's): at small batches part of the gap
    between them is that figure, which a reader of the table would take for the devices."""
    if settings.runtime != "eager":
        return None
    gpus = {hw.name: hw.launch_overhead_us for hw in profiles if hw.kind == "gpu" and hw.name in compared}
    if len(set(gpus.values())) < 2:
        return None
    listed = ", ".join(f"{n} {v:g} us" for n, v in sorted(gpus.items(), key=lambda kv: (kv[1], kv[0])))
    return (f"eager runtime: the GPUs' host cost per kernel differs ({listed}; a figure of the host and the framework "
            "as much as of the GPU): at small batches part of the latency gap is that figure — compare the devices "
            "alone with --runtime graph")


def recommend(rows: list[dict], max_latency_s: float | None = None, min_throughput: float | None = None) -> dict:
    """Cheapest target meeting the requirement (by cost, else by lowest quoted peak), why the others
    miss, targets that meet it but carry no price (cost cannot rank them: listed, never dropped),
    and smaller near-equivalents when the chosen one is starved. Nothing meets it: the closest."""
    ok = [r for r in rows if r["meets_requirement"]]
    miss = [{"hardware": r["hardware"], "latency_s": r["latency_s"], "top_cause": r["top_cause"],
             "fits_memory": r.get("fits_memory")} for r in rows if not r["meets_requirement"]]
    if not ok:
        rows = [r for r in rows if r.get("fits_memory") is not False] or rows  # the closest that can run it
        if max_latency_s is not None:
            best = min(rows, key=lambda r: (r["latency_s"], r["hardware"]))
            gap = f"{_x(best['latency_s'] / max_latency_s)} the {_t(max_latency_s)} allowed"
        else:
            best = max(rows, key=lambda r: (r["throughput_per_s"], r["hardware"]))
            gap = f"{_x(best['throughput_per_s'] / min_throughput)} the {min_throughput:g}/s required"
        closest = {"hardware": best["hardware"], "latency_s": best["latency_s"],
                   "throughput_per_s": best["throughput_per_s"], "top_cause": best["top_cause"]}
        why = (f"limited by {best['top_cause']}" if best.get("fits_memory") is not False else
               "but no target's memory holds the run — quantise the weights or split the model")
        return {"chosen": None, "misses": miss, "closest": closest,
                "note": f"closest: {best['hardware']} at {_t(best['latency_s'])} ({gap}), {why}"}
    priced = [r for r in ok if r["cost_per_million_usd"] is not None]
    unpriced = [r for r in ok if r["cost_per_million_usd"] is None]
    if priced:
        chosen = min(priced, key=lambda r: (r["cost_per_million_usd"], r["hardware"]))
        basis = "cost per million inferences among priced targets"
    else:
        chosen = min(ok, key=lambda r: (r["peak_tops"], r["hardware"]))
        basis = "lowest quoted peak (no target has a price)"
    notes = []
    if priced and unpriced:
        notes.append("also meet it but have no price (add price_per_hour to rank them by cost): " + ", ".join(
            f"{r['hardware']} {_t(r['latency_s'])} ({_x(chosen['latency_s'] / r['latency_s'])} the speed of "
            f"{chosen['hardware']})" for r in sorted(unpriced, key=lambda r: (r["latency_s"], r["hardware"]))))
    if chosen["mean_occupancy"] < 0.5 or chosen["fraction_of_peak"] < 0.1:
        near = [r["hardware"] for r in ok if r is not chosen and r["latency_s"] <= chosen["latency_s"] * 1.1
                and r["peak_tops"] < chosen["peak_tops"]]
        starved = (f"{chosen['hardware']} keeps {chosen['mean_occupancy']:.0%} of its lanes busy and reaches "
                   f"{chosen['fraction_of_peak']:.1%} of peak")
        if near:
            starved += f"; smaller targets at most 10% slower than it: {', '.join(near)}"
        notes.append(starved)
    return {"chosen": chosen["hardware"], "basis": basis, "misses": miss, "note": "; ".join(notes),
            "unpriced": [r["hardware"] for r in unpriced]}


def _x(ratio: float) -> str:
    return f"{ratio:,.0f}x" if ratio >= 10 else f"{ratio:.2g}x"


def _t(s: float) -> str:
    from dnnperf.fmt import t

    return t(s)


def starvation_end(rows: list[dict]) -> int | None:
    """The batch from which idle lanes cost less than 10% of the latency (``parallelism_share``) at
    it and at every larger batch swept, whatever order the rows come in; None when the largest does
    not. (A launch-bound batch 1 hides idle lanes that a bigger batch shows: starvation has not
    ended there.)"""
    first = None
    for r in sorted(rows, key=lambda r: -r["batch"]):
        if r["parallelism_share"] >= 0.10:
            break
        first = r["batch"]
    return first


def sweep(src: ModelSource, ov: ShapeOverrides, hw: HardwareProfile, batches: list[int],
          precisions: list[str | None], fusion: str = "none", runtime: str = "eager", overlap_input: bool = False) -> dict:
    from dnnperf.documents import coverage_dict

    rows = []
    notes: list[str] = []
    held: dict[str, list] = {}  # precision -> [(batch, MemoryFigures)]
    for prec in precisions:
        for b in batches:
            insp = src.inspect(ShapeOverrides(batch=b, input_shapes=ov.input_shapes, dims=ov.dims, values=ov.values))
            rep = analyze(insp, hw, Settings(b, prec, fusion, overlap_input, runtime), with_fixes=False, what_if=False)
            notes.extend(w for w in insp.warnings + rep.notes if w not in notes)
            t = rep.score.totals
            lat = t["latency_s"] or 1.0
            rows.append({
                "batch": b, "precision": prec or "model", "runs_as": rep.score.settings.precision or "model",
                "latency_s": _r(t["latency_s"]),
                "throughput_per_s": _r(t["throughput_per_s"]), "mean_occupancy": _r(t["mean_occupancy"]),
                "achieved_tops": _r(t["achieved_tops"]), "fraction_of_peak": _r(t["fraction_of_peak"]),
                "top_cause": rep.top_cause, "parallelism_share": _r(rep.score.losses["parallelism"] / lat),
                "coverage": coverage_dict(insp, rep)["scored_share"],
                "fits_memory": _fits(rep), "memory_needed_bytes": _needed(rep),
            })
            if rep.memory_figures is not None:
                held.setdefault(prec or "model", []).append((b, rep.memory_figures))
    stop = {prec or "model": starvation_end([r for r in rows if r["precision"] == (prec or "model")])
            for prec in precisions}
    limit = {prec or "model": batch_memory_limit(hw, held.get(prec or "model", [])) for prec in precisions}
    return {"schema_version": "dnnperf-sweep/1", "model": os.path.basename(src.path), "hardware": hw.name,
            "rows": rows, "starvation_ends_at_batch": stop, "memory_holds_batch": limit, "notes": notes}


def _fits(rep) -> bool | None:
    """Whether the device's memory holds the run (its record, ``capacity.memory_figures``); None when
    the profile gives no memory size."""
    figs = rep.memory_figures
    if figs is None:  # no layer scored: nothing held
        return None if not rep.hw.dram_gb else True
    return figs.fits


def _needed(rep) -> int | None:
    """Bytes one device (a die) holds at least for the run (``capacity.memory_figures``)."""
    return rep.memory_figures.needed if rep.memory_figures is not None else None


def batch_memory_limit(hw: HardwareProfile, held: list) -> int | None:
    """The largest batch whose weights and activations (``capacity.memory_figures``, a lower bound of
    what a run holds, so this is an upper bound on the batch) fit the device, each die of a board
    holding the weights and its share of the batch. Read off two swept batches whose activations
    grow in proportion to the batch (within 1%); None without a memory size, with fewer than two
    batches, or when the activations do not scale with the batch (an input without a batch axis)."""
    from dnnperf.capacity import board_dies

    pts = sorted({b: f for b, f in held}.items())
    if len(pts) < 2 or not pts[-1][1].device:
        return None
    (b1, f1), (b2, f2) = pts[0], pts[-1]
    per = f2.activations / b2
    if per <= 0 or abs(f1.activations / b1 - per) > 0.01 * per:
        return None
    room = f2.device - f2.weights
    return max(0, int(board_dies(hw) * room // per)) if room > 0 else 0


# --------------------------------------------------------------------------------------------
# CI gate


def profile_spec_for(spec: str, baseline_path: str | None) -> str:
    """How a profile is recorded in a baseline: a shipped name as is; a YAML path relative to the
    baseline file's folder (so `check` works from any directory), never absolute."""
    if baseline_path is None or spec in shipped_names() or not os.path.exists(spec):
        return spec
    base_dir = os.path.dirname(os.path.abspath(baseline_path))
    return os.path.relpath(os.path.abspath(spec), base_dir).replace(os.sep, "/")


def profile_from_entry(spec: str, baseline_path: str | None) -> HardwareProfile:
    if spec in shipped_names() or baseline_path is None:
        return load_profile(spec)
    return load_profile(os.path.join(os.path.dirname(os.path.abspath(baseline_path)), spec))


def profile_hash(hw: HardwareProfile) -> str:
    """sha256 (first 16 hex digits) of the profile file: an edited YAML moves the reference."""
    import hashlib

    with open(hw.path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()[:16]


def _recorded_shapes(ov: ShapeOverrides) -> dict:
    """The shape flags an entry was estimated with, as its settings record them: --dim pairs always;
    --input-shape and --value only when given (older baselines have neither)."""
    out = {"dims": [list(x) for x in ov.dims]}
    if ov.input_shapes:
        out["input_shapes"] = [[name, list(dims)] for name, dims in ov.input_shapes]
    if ov.values:
        out["values"] = [[name, list(vals)] for name, vals in ov.values]
    return out


def _entry(model_path: str, insp: Inspection, spec: str, hw: HardwareProfile, settings: Settings,
           ov: ShapeOverrides, phase: dict | None = None, notes: list | None = None) -> dict:
    from dnnperf import __version__
    from dnnperf.llm.parallel import collective_seconds

    rep = analyze(insp, hw, settings, with_fixes=False, what_if=False)
    if rep.memory and notes is not None:  # recorded all the same: `check` fails on it until it fits
        notes.append(f"{model_key(model_path)} on {spec}: {rep.memory}")
    d = report_dict(rep)
    cov = d["coverage"]
    # a tensor-parallel step (one device's layers): its time adds the collectives over this target's link
    latency = d["totals"]["latency_s"] + collective_seconds(insp, hw, settings.precision)[0]
    return {
        "model": model_key(model_path),
        "hardware": spec,
        "profile_sha256": profile_hash(hw),
        "tool_version": __version__,
        # a model whose input has no batch axis is recorded without one: check must not rewrite its first dim
        "settings": {**d["settings"], **_recorded_shapes(ov), **({"batch": None} if insp.no_batch_axis else {}),
                     **({"phase": phase} if phase else {})},
        "latency_s": _r(latency),
        "macs": d["totals"]["macs"],
        "bytes": d["totals"]["bytes"],
        "coverage": {"nodes_total": cov["nodes_total"], "nodes_scored": cov["nodes_scored"],
                     "unscored_nodes": [r.node.name for r in insp.unscored()]},
        "layers": {l["name"]: {"op_type": l["op_type"], "latency_s": l["latency_s"], "cause": l["cause"],
                               "macs": l["macs"]} for l in d["layers"]},
    }


def make_baseline(items: list[tuple[str, Inspection, str, Settings, ShapeOverrides]],
                  baseline_path: str | None = None, phase: dict | None = None, notes: list | None = None) -> dict:
    """``items``: (model path, inspection, profile spec as the user wrote it, settings, the shape flags
    it was inspected with: --dim, --input-shape, --value; ``check`` repeats them). ``phase``: the
    decoder step the inspections are of ({"phase", "prompt", "context"}, ``phase_inspection``).
    A shipped profile is stored by name, a custom one by its path relative to the baseline file,
    with a hash of its content; never an absolute path. ``notes`` receives a line for each entry whose
    run the device's memory cannot hold (``dnnperf.capacity``)."""
    entries = []
    for model_path, insp, spec, settings, ov in items:
        hw = load_profile(spec)
        entries.append(_entry(model_path, insp, profile_spec_for(spec, baseline_path), hw, settings, ov, phase, notes))
    entries.sort(key=lambda e: (e["model"], e["hardware"]))
    return {"schema_version": BASELINE_SCHEMA, "entries": entries}


def model_key(path: str) -> str:
    return os.path.basename(path)


def read_baseline(path: str) -> dict:
    require_file(path, "baseline", f"create it with `dnnperf baseline MODEL --hw NAME -o {path}`", "the JSON file")
    try:
        data = json.loads(read_text(path, "baseline", BASELINE_MAX_BYTES))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DnnperfError(f"baseline '{path}' is not valid JSON ({exc.__class__.__name__}) — regenerate it with `dnnperf baseline`") from None
    if not isinstance(data, dict) or data.get("schema_version") not in (BASELINE_SCHEMA, "dnnperf-baseline/1"):
        got = data.get("schema_version") if isinstance(data, dict) else type(data).__name__
        raise DnnperfError(f"baseline '{path}' has schema {got!r}, expected '{BASELINE_SCHEMA}' — regenerate it with `dnnperf baseline`")
    entries = data.get("entries")
    if not isinstance(entries, list) or not entries:
        raise DnnperfError(f"baseline '{path}' has no entries — regenerate it with `dnnperf baseline`")
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not all(k in e for k in ("model", "hardware", "settings", "latency_s", "layers")):
            raise DnnperfError(f"baseline '{path}' entry {i} is missing fields (model, hardware, settings, latency_s, layers)")
        if not _seconds(e["latency_s"]):
            raise DnnperfError(f"baseline '{path}' entry {i}: latency_s must be a number >= 0")
        if not isinstance(e["layers"], dict) or not isinstance(e["settings"], dict):
            raise DnnperfError(f"baseline '{path}' entry {i}: layers and settings must be objects")
        if not isinstance(e["model"], str) or not isinstance(e["hardware"], str):
            raise DnnperfError(f"baseline '{path}' entry {i}: model and hardware must be strings")
        for name, layer in e["layers"].items():
            if not isinstance(layer, dict) or not _seconds(layer.get("latency_s")):
                raise DnnperfError(f"baseline '{path}' entry {i}: layer '{name}' has no latency_s (a number >= 0)")
            if any(not isinstance(layer.get(k, ""), (str, type(None))) for k in ("op_type", "cause")):
                raise DnnperfError(f"baseline '{path}' entry {i}: layer '{name}': op_type and cause must be strings")
            if not _count(layer.get("macs", 0)):
                raise DnnperfError(f"baseline '{path}' entry {i}: layer '{name}': macs must be a whole number >= 0")
        problem = _settings_problem(e["settings"]) or _coverage_problem(e.get("coverage"))
        if problem is None and any(not isinstance(e.get(k, ""), (str, type(None))) for k in ("profile_sha256", "tool_version")):
            problem = "profile_sha256 and tool_version must be strings"
        if problem is None and any(not _count(e.get(k, 0)) for k in ("macs", "bytes")):
            problem = "macs and bytes must be whole numbers >= 0"
        if problem:
            raise DnnperfError(f"baseline '{path}' entry {i}: {problem} — regenerate it with `dnnperf baseline`")
    return data


def _seconds(v) -> bool:
    """A recorded time: a finite number >= 0."""
    return not isinstance(v, bool) and isinstance(v, (int, float)) and 0 <= v < float("inf")


def _count(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, int) and v >= 0


def _settings_problem(s: dict) -> str | None:
    """What is wrong with an entry's recorded settings (None: nothing; the values themselves, such as
    an unknown precision, are checked where they are used)."""
    b = s.get("batch")
    if b is not None and (not _count(b) or b < 1):
        return "settings.batch must be a whole number >= 1"
    for k in ("precision", "fusion", "runtime"):
        if not isinstance(s.get(k, ""), (str, type(None))):
            return f"settings.{k} must be a string"
    if not isinstance(s.get("overlap_input", False), bool):
        return "settings.overlap_input must be true or false"
    dims = s.get("dims", [])
    if not isinstance(dims, list) or any(not isinstance(d, list) or len(d) != 2 or not isinstance(d[0], str)
                                         or not _count(d[1]) for d in dims):
        return "settings.dims must be a list of [name, size] pairs"
    shapes = s.get("input_shapes", [])
    if not isinstance(shapes, list) or any(not isinstance(x, list) or len(x) != 2 or not isinstance(x[0], str)
                                           or not isinstance(x[1], list) or not all(_count(d) for d in x[1])
                                           for x in shapes):
        return "settings.input_shapes must be a list of [name, [sizes]] pairs"
    values = s.get("values", [])
    if not isinstance(values, list) or any(not isinstance(x, list) or len(x) != 2 or not isinstance(x[0], str)
                                           or not isinstance(x[1], list) or not x[1]
                                           or not all(_number(v) for v in x[1]) for x in values):
        return "settings.values must be a list of [name, [numbers]] pairs"
    ph = s.get("phase")
    if ph is not None and not (isinstance(ph, dict) and ph.get("phase") in ("prefill", "decode")
                               and _count(ph.get("prompt")) and ph["prompt"] >= 1
                               and (ph.get("context") is None or _count(ph["context"]))
                               and _count(ph.get("tp", 1)) and ph.get("tp", 1) >= 1):
        return "settings.phase must be {phase: prefill|decode, prompt: >= 1, context: >= 0 or null, tp: >= 1 (optional)}"
    return None


def entry_inspection(e: dict, path: str, ov: ShapeOverrides, inspect_fn) -> Inspection:
    """The inspection an entry's estimate is of: ``inspect_fn(path, ov)``, or the decoder step its
    recorded ``phase`` names (``dnnperf.llm.phases.phase_inspection``)."""
    ph = e["settings"].get("phase")
    if ph is None:
        return inspect_fn(path, ov)
    from dnnperf.llm.phases import PhaseRequest, phase_inspection

    return phase_inspection(path, PhaseRequest(ph["phase"], ph["prompt"], ph.get("context"), tp=ph.get("tp", 1)), ov)


def _number(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and abs(v) < float("inf")


def _coverage_problem(c) -> str | None:
    if c is None:
        return None
    if not isinstance(c, dict) or any(not _count(c.get(k)) for k in ("nodes_total", "nodes_scored")) \
            or c.get("nodes_scored", 0) > c.get("nodes_total", 0) \
            or not isinstance(c.get("unscored_nodes", []), list) \
            or any(not isinstance(n, str) for n in c.get("unscored_nodes", [])):
        return "coverage must hold nodes_total >= nodes_scored >= 0 and a list of unscored node names"
    return None


def entry_settings(e: dict) -> tuple[Settings, ShapeOverrides]:
    """(the settings, the shape flags) an entry was recorded with. The recorded --dim pairs served
    every model of the baseline, so symbols a model lacks are fine (not strict)."""
    s = e["settings"]
    prec = s.get("precision")
    batch = s.get("batch")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise DnnperfError(f"baseline entry for '{e['model']}': settings.batch must be a whole number >= 1")
    ov = ShapeOverrides(batch=batch, dims=tuple(tuple(x) for x in s.get("dims", [])),
                        input_shapes=tuple((n, tuple(d)) for n, d in s.get("input_shapes", [])),
                        values=tuple((n, tuple(float(v) for v in vals)) for n, vals in s.get("values", [])), strict=False)
    return (Settings(batch, None if prec in (None, "model") else prec, s.get("fusion", "none"),
                     bool(s.get("overlap_input", False)), s.get("runtime", "eager")), ov)


def classify_change(old: float, new: float, rel: float, abs_s: float) -> tuple[str, float | None]:
    """(status, relative change): slower/faster only beyond BOTH tolerances, on either side."""
    delta = new - old
    change = delta / old if old > 0 else (0.0 if new == 0 else None)
    beyond_abs = abs(delta) > abs_s
    if change is None:
        return ("slower" if beyond_abs else "same"), None
    if change > rel and beyond_abs:
        return "slower", change
    if change < -rel and beyond_abs:
        return "faster", change
    return "same", change


def check(baseline: dict, models: list[str], tolerance: float, inspect_fn, baseline_path: str | None = None,
          abs_tolerance_s: float = 0.0, max_unscored: int = 0, hw_filter: list[str] | None = None) -> dict:
    """Compare fresh estimates against the baseline. ``inspect_fn(path, shape overrides) -> Inspection``.

    An entry fails when it is slower beyond both tolerances, when its profile file changed since the
    baseline (the reference moved), when more than ``max_unscored`` nodes are not scored, when its
    coverage dropped, or when the device's memory cannot hold the run (``dnnperf.capacity``). Entries
    for models not given (or profiles not in ``hw_filter``) are skipped and listed."""
    from dnnperf.llm.parallel import collective_seconds

    by_key = {}
    for m in models:
        k = model_key(m)
        if k in by_key and by_key[k] != m:
            raise DnnperfError(f"two models share the file name '{k}': baselines key models by file name")
        by_key[k] = m
    known = {e["model"] for e in baseline["entries"]}
    extra = sorted(k for k in by_key if k not in known)
    if extra:
        raise DnnperfError(f"model '{extra[0]}' is not in the baseline (it has: {', '.join(sorted(known))}) — "
                           "record it with `dnnperf baseline` or `check --update`")
    if hw_filter:
        # a YAML profile is recorded by its path relative to the baseline: compare it the same way (given
        # as the user wrote it, it matched no entry and its entries were skipped without a failure)
        hw_filter = [profile_spec_for(h, baseline_path) for h in hw_filter]
        recorded = {e["hardware"] for e in baseline["entries"]}
        missing = [h for h in hw_filter if h not in recorded]
        if missing:
            raise DnnperfError(f"--hw '{missing[0]}' is not in the baseline (it has: {', '.join(sorted(recorded))}) — "
                               "record it with `dnnperf baseline`")
    results = []
    skipped = []
    failed = False
    cache: dict = {}
    for e in baseline["entries"]:
        path = by_key.get(e["model"])
        if path is None or (hw_filter and e["hardware"] not in hw_filter):
            skipped.append(f"{e['model']} on {e['hardware']}")
            continue
        hw = profile_from_entry(e["hardware"], baseline_path)
        settings, ov = entry_settings(e)
        key = (path, ov, json.dumps(e["settings"].get("phase"), sort_keys=True))
        insp = cache.get(key)
        if insp is None:
            insp = cache[key] = entry_inspection(e, path, ov, inspect_fn)
        rep = analyze(insp, hw, settings, with_fixes=False, what_if=False)
        d = report_dict(rep)
        new = _r(d["totals"]["latency_s"] + collective_seconds(insp, hw, settings.precision)[0])  # (a split step's collectives, as recorded)
        old = e["latency_s"]
        status, change = classify_change(old, new, tolerance, abs_tolerance_s)
        problems = []
        recorded_hash = e.get("profile_sha256")
        now_hash = profile_hash(hw)
        if recorded_hash and recorded_hash != now_hash:
            problems.append(f"profile '{e['hardware']}' changed since the baseline (sha256 {recorded_hash} -> {now_hash}): "
                            "the reference moved; re-record with `check --update`")
        if rep.memory:  # a run the device cannot hold fails the gate, whatever its time
            problems.append(rep.memory)
        unscored = [r.node.name for r in insp.unscored()]
        if len(unscored) > max_unscored:
            problems.append(f"{len(unscored)} node(s) NOT scored (allowed: {max_unscored}): {', '.join(unscored[:8])}"
                            + (" ..." if len(unscored) > 8 else "") + " — the estimate leaves them out")
        cov0 = e.get("coverage")
        if cov0 and cov0.get("nodes_total"):
            before = cov0["nodes_scored"] / cov0["nodes_total"]
            now = d["coverage"]["nodes_scored"] / max(d["coverage"]["nodes_total"], 1)
            newly = [n for n in unscored if n not in set(cov0.get("unscored_nodes", []))]
            if now < before - 1e-12 or newly:
                problems.append(f"coverage dropped ({before:.1%} -> {now:.1%} of nodes scored)"
                                + (f"; newly unscored: {', '.join(newly[:8])}" if newly else ""))
        layer_notes = []
        for l in d["layers"]:
            before = e["layers"].get(l["name"])
            if before is None:
                layer_notes.append({"layer": l["name"], "op_type": l["op_type"], "change": "added",
                                    "old_s": None, "new_s": l["latency_s"], "cause": l["cause"]})
            else:
                st, _ = classify_change(before["latency_s"], l["latency_s"], tolerance, 0.0)
                if st != "same":
                    layer_notes.append({"layer": l["name"], "op_type": l["op_type"], "change": st,
                                        "old_s": before["latency_s"], "new_s": l["latency_s"], "cause": l["cause"]})
        names = {l["name"] for l in d["layers"]}
        for name, before in sorted(e["layers"].items()):
            if name not in names:
                layer_notes.append({"layer": name, "op_type": before.get("op_type"), "change": "removed",
                                    "old_s": before.get("latency_s"), "new_s": None, "cause": before.get("cause")})
        # by effect: the largest time difference first
        layer_notes.sort(key=lambda n: (-abs((n["new_s"] or 0) - (n["old_s"] or 0)), n["layer"]))
        bad = status == "slower" or bool(problems)
        failed = failed or bad
        results.append({"model": e["model"], "hardware": e["hardware"], "old_latency_s": old, "new_latency_s": new,
                        "change": _r(change) if change is not None else None, "status": status, "problems": problems,
                        "passed": not bad, "coverage": d["totals"]["coverage"], "layers": layer_notes})
    if not results:
        raise DnnperfError("no baseline entry matches the given models and --hw — nothing was checked")
    return {"schema_version": "dnnperf-check/2", "tolerance": tolerance, "abs_tolerance_s": abs_tolerance_s,
            "max_unscored": max_unscored, "passed": not failed, "results": results, "skipped": skipped}
