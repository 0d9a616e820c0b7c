"""Which precisions a device runs, what `-p` means on it, and the ladder precision advice walks.

A precision is *run* by a profile when one of its units lists it in ``peak_tops``. Asking for one
the device does not run is an error that names the precisions it does run, except for two
documented mappings that say so in a note:

    tf32 -> fp32        tf32 is a matrix mode for fp32 data; without it, fp32 math is what runs
    fp16/bf16 -> fp32   on a CPU profile without 16-bit units: frameworks compute in fp32 there

`-p best` picks the precision with the lowest estimated latency among those the device runs.
"""

from __future__ import annotations

from dnnperf.errors import DnnperfError
from dnnperf.hardware import HardwareProfile

# most precise first; precision advice walks it downwards one rung at a time
# (fp4 and int4 share the 4-bit rung: Blackwell's tensor cores run fp4 (NVFP4 / MXFP4), older ones int4)
LADDER = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4")
RUNG = {"fp64": 0, "fp32": 1, "tf32": 2, "bf16": 3, "fp16": 3, "fp8": 4, "int8": 5, "fp4": 6, "int4": 6}


def runs(hw: HardwareProfile, precision: str, matrix_only: bool = False) -> bool:
    for u in hw.units:
        if matrix_only and "matrix" not in u.serves:
            continue
        if precision in u.peak_tops:
            return True
    return False


def supported(hw: HardwareProfile) -> list[str]:
    return [p for p in LADDER if runs(hw, p)]


def resolve(hw: HardwareProfile, precision: str | None) -> tuple[str | None, str | None]:
    """(precision to cost with, note) for a `-p` value on ``hw``; None keeps the model's dtypes."""
    if precision is None or precision == "best":
        return precision, None
    if precision not in RUNG:
        raise DnnperfError(f"unknown precision '{precision}' (use one of {', '.join(LADDER)}, model or best)")
    if runs(hw, precision):
        return precision, None
    if precision == "tf32":
        return "fp32", f"{hw.name} has no tf32 mode: -p tf32 is costed as fp32 (tf32 is a matrix mode for fp32 data)"
    if precision in ("fp16", "bf16") and hw.kind == "cpu" and runs(hw, "fp32"):
        return "fp32", f"{hw.name} has no {precision} units: -p {precision} is costed as fp32 (CPU frameworks compute in fp32)"
    alt = [p for p in supported(hw) if RUNG[p] == RUNG[precision]]
    hint = f"use -p {alt[0]}" if alt else f"it runs {', '.join(supported(hw))}"
    raise DnnperfError(f"{hw.name} has no {precision} units — {hint} (or -p best)")


def cheaper_rungs(hw: HardwareProfile, precision: str) -> list[str]:
    """Precisions below ``precision`` on the ladder that a matrix unit of ``hw`` runs, nearest first
    (one name per rung: the device's own 16-bit float where it has only one), after the device's own
    precision of the same rung where no matrix unit runs ``precision`` (fp16 -> bf16 on a TPU)."""
    out = [] if runs(hw, precision, matrix_only=True) else \
        [p for p in LADDER if p != precision and RUNG[p] == RUNG.get(precision, -1) and runs(hw, p, matrix_only=True)][:1]
    for p in LADDER:
        if RUNG[p] > RUNG.get(precision, 1) and runs(hw, p, matrix_only=True) and all(RUNG[q] != RUNG[p] for q in out):
            out.append(p)
    return out
