"""Whether a run fits the device's memory: the weights, each once, stay in it for the whole run, and the
largest layer's input and output must be there with them. A lower bound of what a run holds (every
other live tensor comes on top), used for the report's "does not fit" note and by ``compare``, whose
rows that cannot hold the run meet no requirement. (A decoder's requests, weights plus KV cache, are
checked in ``dnnperf.llm.phases``.)"""

from __future__ import annotations

from dnnperf.hardware import HardwareProfile
from dnnperf.scoring import Score, distinct_weights


def memory_shortfall(hw: HardwareProfile, sc: Score) -> tuple | None:
    """(weight bytes, each once; the layer moving the most activation bytes; those bytes) when the two
    together outgrow ``hw``'s memory, else None (also when the profile gives no memory size)."""
    cap = (hw.dram_gb or 0) * 1e9
    if not cap or not sc.layers:
        return None
    weights = max(sum(distinct_weights(c.layer.workload) for c in sc.layers) - sc.repeated, 0)
    big = max(sc.layers, key=lambda c: c.layer.workload.act_bytes_read + c.layer.workload.bytes_written)
    act = big.layer.workload.act_bytes_read + big.layer.workload.bytes_written
    return (weights, big, act) if weights + act > cap else None


def memory_note(hw: HardwareProfile, sc: Score) -> str | None:
    """A run the device's memory cannot hold: the weights, each once, stay in it for the whole run, and
    the largest layer's input and output must be there with them (a --batch or --dim far past what the
    device holds; a 70B decoder's 140 GB of weights on an 80 GB GPU). The estimate then times a run that
    cannot happen, and says so. A lower bound only (every other live tensor comes on top); None when it
    fits or the profile gives no memory size."""
    from dnnperf.fmt import b as fmt_bytes

    short = memory_shortfall(hw, sc)
    if short is None:
        return None
    weights, big, act = short
    w = big.layer.workload
    if act > hw.dram_gb * 1e9 or act >= weights:
        return (f"does not fit {hw.name}'s {hw.dram_gb:g} GB: layer '{big.name}' alone reads {fmt_bytes(w.act_bytes_read)} "
                f"and writes {fmt_bytes(w.bytes_written)} (batch {sc.settings.batch})"
                + (f", next to {fmt_bytes(weights)} of weights" if weights else "")
                + ", so this estimate times a run the device cannot hold — lower --batch or the --dim sizes, or split "
                "the input")
    return (f"does not fit {hw.name}'s {hw.dram_gb:g} GB: the weights hold {fmt_bytes(weights)} (each once, at "
            f"the precision scored), and layer '{big.name}' moves {fmt_bytes(act)} next to them, so this estimate times "
            "a run the device cannot hold — quantise the weights to fewer bits, split the model over several devices, or "
            "pick one with more memory")
