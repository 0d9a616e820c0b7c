"""Formatting of numbers: human SI strings for tables, Markdown and fix texts, and the one rounding
rule for machine output (JSON/CSV keep raw numbers, rounded by ``sig``)."""

from __future__ import annotations


def t(s: float | None) -> str:
    # each unit from 0.9995 of it: 999.7 us reads "1 ms", never "1e+03 us" (three digits round up)
    if s is None:
        return "-"
    if s == 0:
        return "0"
    if s >= 999.5:
        return f"{s:,.0f} s"
    if s >= 0.9995:
        return f"{s:.3g} s"
    if s >= 0.9995e-3:
        return f"{s * 1e3:.3g} ms"
    if s >= 0.9995e-6:
        return f"{s * 1e6:.3g} us"
    return f"{s * 1e9:.3g} ns"


def b(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= 0.9995 * scale:  # 999.7 MB reads "1 GB", never "1e+03 MB"
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} B"


def count(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= 0.99995 * scale:  # 999.96 K reads "1 M", never "1e+03 K"
            return f"{n / scale:.4g} {unit}"
    return f"{int(n)}"


def rate(x: float) -> str:
    """A per-second figure (throughput, tokens/s): four digits below 10,000, a prefixed count above
    ("7.613 M", where ``:.4g`` printed "7.613e+06")."""
    return f"{x:.4g}" if x < 9999.5 else count(x)


def tops(x: float) -> str:
    """A TOP/s figure: three significant digits, whole numbers from 1,000 up ("1,210", where ``:.3g``
    printed "1.21e+03" for a large model's prefill on an H100)."""
    return f"{x:.3g}" if x < 999.5 else f"{x:,.0f}"


def counted(n: float | None, unit: str) -> str:
    """``count`` with its unit: "12.85 MMACs", "500 MACs" (never "500MACs")."""
    c = count(n)
    return f"{c}{unit}" if c[-1:] in ("T", "G", "M", "K") else f"{c} {unit}"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def shape(s) -> str:
    return "?" if s is None else "x".join(str(d) for d in s) or "scalar"


def sig(x: float | None, digits: int = 6) -> float | None:
    """Round to ``digits`` significant digits so machine output is stable and readable (None and NaN
    stay None / become 0.0). The one rounding rule for JSON, CSV, baselines and profiles."""
    if x is None:
        return None
    if x == 0 or x != x:
        return 0.0
    return float(f"{x:.{digits}g}")


def peak_basis(totals: dict, hardware: dict) -> str:
    """' of its int8 peak, 0.096 TOP/s' when a report's fraction of peak is taken against a precision's
    peak above the quoted one (its layers run int8 on a CPU quoted in fp32); '' for the quoted peak."""
    basis = totals.get("peak_tops", hardware["peak_tops"])
    return f" of its {totals.get('peak_precision', '')} peak, {basis:g} TOP/s" if basis != hardware["peak_tops"] else ""
