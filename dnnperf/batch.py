"""Many models x many profiles: parse each file once, score it per profile, spread files over a
process pool. Workers return plain dicts, so results are identical to a serial run."""

from __future__ import annotations

import os

from dnnperf.scoring import Settings
from dnnperf.ir import ShapeOverrides


def analyze_file(path: str, ov: ShapeOverrides, profile_specs: list[str], settings: Settings,
                 totals_only: bool) -> tuple[list[dict], list[str]]:
    """(one report dict, or totals row, per profile; the inspection's notes)."""
    from dnnperf.api import analyze, inspect_model
    from dnnperf.documents import report_dict
    from dnnperf.hardware import load_profiles

    insp = inspect_model(path, ov)
    out = []
    notes = list(insp.warnings)
    profiles = load_profiles(profile_specs)
    for hw in profiles:
        rep = analyze(insp, hw, settings, with_fixes=not totals_only, what_if=not totals_only)
        notes.extend(rep.notes)
        d = report_dict(rep)
        out.append(totals_row(d) if totals_only else d)
    return out, notes


def totals_row(d: dict) -> dict:
    t = d["totals"]
    return {"model": d["model"]["name"], "path": d["model"]["path"], "hardware": d["hardware"]["name"],
            "batch": d["settings"]["batch"], "macs": t["macs"], "bytes": t["bytes"], "latency_s": t["latency_s"],
            "throughput_per_s": t["throughput_per_s"], "achieved_tops": t["achieved_tops"],
            "fraction_of_peak": t["fraction_of_peak"], "top_cause": t["top_cause"],
            "precision": d["settings"]["precision"], "coverage": t["coverage"],
            "unsupported": sum(u["count"] for u in d["unsupported_ops"] if u.get("kind") != "bound"),
            "bounded": sum(u["count"] for u in d["unsupported_ops"] if u.get("kind") == "bound")}


def _task(args):
    from dnnperf.errors import DnnperfError

    try:
        return ("ok", analyze_file(*args))
    except DnnperfError as exc:
        return ("error", str(exc))


def analyze_many(paths: list[str], ov: ShapeOverrides, profile_specs: list[str], settings: Settings,
                 totals_only: bool, jobs: int | None, progress=None) -> tuple[list[dict], list[str]]:
    """(results in input order, notes). ``jobs``: worker processes (None = all cores, 1 = in-process)."""
    from dnnperf.errors import DnnperfError

    # never more workers than files (--jobs 10**20 used to overflow the pool's C int: exit 3)
    jobs = min(jobs or os.cpu_count() or 1, len(paths))
    tasks = [(p, ov, profile_specs, settings, totals_only) for p in paths]
    results: list = []
    if jobs == 1 or len(paths) == 1:
        for t in tasks:
            results.append(_task(t))
            if progress:
                progress()
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for r in pool.map(_task, tasks, chunksize=max(1, len(tasks) // (jobs * 8))):
                results.append(r)
                if progress:
                    progress()
    out: list[dict] = []
    notes: list[str] = []
    for status, val in results:
        if status == "error":
            raise DnnperfError(val)
        out.extend(val[0])
        notes.extend(val[1])
    return out, notes
