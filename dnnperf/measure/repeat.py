"""Whether a calibration's figures repeat: the profile worked out from the first and from the second
half of its rounds apart, figure by figure (``dnnperf.measure.calibrate`` asks it before it settles;
``bench/calibrate_repeat.py`` compares whole calibrations the same way)."""

from __future__ import annotations

import statistics


# two calibrations in a row should agree within this share on every figure. What a run can check of
# that: the figures the first and the second half of its rounds give on their own. A half's median has
# about twice a whole run's variance, so two halves sit about sqrt(2) further apart than two runs: held
# to the same share, a run whose halves agree is, if anything, stricter than asked
FIGURE_TOLERANCE = 0.05
MAX_GAP = 99.0  # a recorded gap's cap (a figure at 0 in one half only)


def gap_text(name: str, gap: float) -> str:
    return (f"'{name}' differs by {gap:.0%} between the first and the second half of the rounds"
            if gap < MAX_GAP else f"'{name}' is 0 in one half of the rounds only")


def widest(gaps: dict[str, float]) -> list[str]:
    """The figures of ``figure_gaps`` from the widest apart down (by name on a tie)."""
    return sorted(gaps, key=lambda k: (-gaps[k], k))


def apart(gaps: dict[str, float]) -> str | None:
    """What does not repeat (``gap_text`` of the widest figure past FIGURE_TOLERANCE), or None."""
    first = next(iter(widest(gaps)), None)
    return gap_text(first, gaps[first]) if first is not None and gaps[first] > FIGURE_TOLERANCE else None


def half_times(history: dict) -> tuple[dict, dict]:
    """Each job's median over the first and over the second half of the rounds it was timed in (the
    first half takes the middle round of an odd count; a job timed once gives its time to both)."""
    first, second = {}, {}
    for n, h in history.items():
        k = (len(h) + 1) // 2
        first[n] = statistics.median(h[:k])
        second[n] = statistics.median(h[k:] or h)
    return first, second


def numeric_figures(d: dict, prefix: str = "") -> dict:
    """Every number of a profile dict by its dotted path (``measured``, ``sources`` and ``title`` left
    out: they record, they are not figures)."""
    out = {}
    for k, v in d.items():
        k = str(k)
        if k in ("measured", "sources", "title"):
            continue
        if isinstance(v, dict):
            out.update(numeric_figures(v, prefix + k + "."))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                if isinstance(x, dict):
                    out.update(numeric_figures(x, prefix + f"{k}[{i}]."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[prefix + k] = v
    return out


def figure_gaps(a: dict, b: dict) -> dict[str, float]:
    """max / min - 1 of each figure two profiles share (both 0: 0; 0 in one only: inf)."""
    fa, fb = numeric_figures(a), numeric_figures(b)
    out = {}
    for k in fa.keys() & fb.keys():
        lo, hi = sorted((abs(fa[k]), abs(fb[k])))
        out[k] = hi / lo - 1 if lo > 0 else (0.0 if hi == 0 else float("inf"))
    return out
