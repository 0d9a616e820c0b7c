"""Large language models: KV-cache detection, prefill and decode phases, serving what-ifs, and
weightless Llama-architecture skeletons of any configuration."""

from __future__ import annotations


def phase_report_dicts(path: str, overrides, specs: list[str], settings, request, top: int | None = None) -> list[dict]:
    """One JSON report per profile for an LLM phase: the phase's report (decode step, or prefill)
    with an ``llm`` section (both phases' serving figures, KV cache, memory, LLM fixes)."""
    from dnnperf.documents import report_dict
    from dnnperf.hardware import load_profiles
    from dnnperf.llm.phases import analyze_phases

    out = []
    for hw in load_profiles(specs):
        rep, llm = analyze_phases(path, hw, settings, request, overrides)
        d = report_dict(rep, top)
        d["llm"] = rounded(llm)
        out.append(d)
    return out


def rounded(v):
    """An ``llm`` section with every float rounded as the JSON documents round them (``fmt.sig``)."""
    from dnnperf.fmt import sig

    if isinstance(v, float):
        return sig(v)
    if isinstance(v, dict):
        return {k: rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [rounded(x) for x in v]
    return v
