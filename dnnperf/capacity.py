"""Whether a run fits the device's memory: the weights, each once, stay in it for the whole run, and
next to them the activations live at once at the peak of an inference, all of the model's inputs
(a decoder's KV cache, which lives in device memory between steps) or the largest layer's input and
output, whichever is the most. A lower bound of what a run holds (a runtime's workspaces and allocator
slack come on top), in the report's ``memory`` section and "does not fit" note, used by ``compare``,
whose rows that cannot hold the run meet no requirement, by ``baseline`` / ``check``, and by the downgrade
advice, which never names a device that cannot hold the run.
``analyze --phase`` refuses a request whose weights and whole KV cache do not fit
(``dnnperf.llm.phases``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from dnnperf.hardware import HardwareProfile
from dnnperf.scoring import LayerCost, Score, held_weights


def held_inputs(graph, size=None) -> int:
    """Bytes of all the graph's inputs, there when a run starts: the ones the host sends and the ones
    already in device memory (a decoder's KV cache, which the report's input transfer leaves out).
    ``size``: a tensor's bytes (default its own; a precision what-if's, ``dnnperf.api.tensor_size``)."""
    total = 0
    for name in graph.inputs:
        t = graph.tensors.get(name)
        if t is not None and t.shape is not None:
            total += (t.nbytes if size is None else size(t)) or 0
    return total


@dataclass(frozen=True)
class MemoryFigures:
    """What a run holds against what one device has (``memory_figures``); bytes throughout."""

    weights: int  # each weight once, at the precision scored
    activations: int  # held next to the weights: the most of the peak's live activations, the model's
    # inputs and the largest layer's input and output
    of: str  # whose they are: "inputs" (a decoder's KV cache among them), "live" (the peak of one
    # inference's live activations, dnnperf.reuse.arena_bytes) or "layer" (the next field's input and output)
    layer: LayerCost  # the layer moving the most activation bytes
    dies: int  # dies the batch is split over (a multi-die board); each holds the weights and its share
    needed: int  # the weights and a die's share of the activations
    device: int | None  # one die's memory; None when the profile gives no size
    live: int = 0  # the activations live at once at the peak, the model's inputs and outputs left out

    @property
    def fits(self) -> bool | None:
        return None if not self.device else self.needed <= self.device

    def on(self, hw: HardwareProfile, batch: int | None) -> "MemoryFigures":
        """The same run held on another device of the kind (the same layers, so the same weights and
        activations): its dies and memory (the downgrade advice's candidates)."""
        dies = dies_used(hw, batch)
        cap = die_memory(hw)
        return replace(self, dies=dies, needed=self.weights + self.activations // dies,
                       device=int(cap) if cap else None)

    def as_dict(self) -> dict:
        return {"weights_bytes": self.weights, "activation_bytes": self.activations,
                "activations_of": {"inputs": "model inputs", "live": "live at the peak"}.get(self.of, f"layer {self.layer.name}"),
                "dies": self.dies, "needed_bytes": self.needed, "device_bytes": self.device, "fits": self.fits}


def memory_figures(hw: HardwareProfile, sc: Score, inputs: int, live: int, repeated: int) -> MemoryFigures | None:
    """The weights (each once, at the precision scored), the activation bytes held next to them (the
    most of: the activations live at once at the peak of an inference, ``live``; all of the model's
    inputs, a decoder's KV cache among them, which stay in device memory; the input and output of the
    layer moving the most activation bytes) and a die's share of those (a batch split data-parallel
    over a multi-die board, ``die_memory``), against one die's memory. A lower bound: a runtime's
    workspaces and allocator slack come on top. None for a graph without scored layers. ``inputs``:
    ``held_inputs`` of the scored graph; ``live``: ``dnnperf.reuse.arena_bytes`` (0: not known). The
    weights include what a run holds but does not read (``Workload.weights_unread``: an embedding
    table's unpicked rows, the experts no token is routed to); ``repeated``: the weight bytes counted
    twice among them (``dnnperf.reuse.repeated_weight_bytes(..., held=True)``, not the score's, which
    counts read bytes)."""
    if not sc.layers:
        return None
    layers = [c.layer for c in sc.layers]
    # (the repeat taken off the sum of all, not of the read bytes alone: two Gathers of one table
    # repeat more than either reads)
    weights = max(held_weights(layers, 0) + sum(la.workload.weights_unread for la in layers) - repeated, 0)
    big = max(sc.layers, key=lambda c: c.layer.workload.act_bytes_read + c.layer.workload.bytes_written)
    act = big.layer.workload.act_bytes_read + big.layer.workload.bytes_written
    held, of = max((inputs, "inputs"), (live, "live"), (act, "layer"), key=lambda h: (h[0], h[1] == "layer"))
    dies = dies_used(hw, sc.settings.batch)
    cap = die_memory(hw)
    return MemoryFigures(weights, held, of, big, dies, weights + held // dies, int(cap) if cap else None, live)


def die_memory(hw: HardwareProfile) -> float:
    """Bytes of memory one device holds: a multi-die board's (``gpu.dies``: a K80) is split between its
    dies, each of which a framework sees as its own GPU holding its own copy of the weights; 0 when the
    profile gives no memory size."""
    return (hw.dram_gb or 0) * 1e9 / board_dies(hw)


def board_dies(hw: HardwareProfile) -> int:
    if hw.kind != "gpu":
        return 1
    from dnnperf import gpu

    return max(1, gpu.library_of(hw).dies)


def dies_used(hw: HardwareProfile, batch: int | None) -> int:
    return max(1, min(board_dies(hw), int(batch or 1)))


def memory_words(hw: HardwareProfile) -> str:
    """'k80's 12 GB', or "k80-board's 12 GB a die (24 GB in all)"."""
    n = board_dies(hw)
    if n == 1:
        return f"{hw.name}'s {hw.dram_gb:g} GB"
    return f"{hw.name}'s {hw.dram_gb / n:g} GB a die ({hw.dram_gb:g} GB in all)"


def memory_note(hw: HardwareProfile, sc: Score, figs: MemoryFigures | None) -> str | None:
    """A run the device's memory cannot hold (``memory_figures`` that do not fit: a --batch or --dim far
    past what the device holds; a 70B decoder's 140 GB of weights on an 80 GB GPU; a cache of 100,000
    tokens). The estimate then times a run that cannot happen, and says so. A lower bound only (a
    runtime's workspaces come on top); None when it fits or the profile gives no memory size."""
    from dnnperf.fmt import b as fmt_bytes

    if figs is None or figs.fits is not False:
        return None
    weights, big, held, of = figs.weights, figs.layer, figs.activations, figs.of
    head = f"does not fit {memory_words(hw)}: "
    tail = ", so this estimate times a run the device cannot hold — "
    w = big.layer.workload
    if held >= weights:  # the activations' part: a batch or a size too large (the figures: the whole batch's)
        weights_too = f", next to {fmt_bytes(weights)} of weights" if weights else ""
        if of == "inputs":
            return (head + f"the model's inputs hold {fmt_bytes(held)} (batch {sc.settings.batch}; a decoder's KV cache "
                    "among them)" + weights_too + tail
                    + "lower --batch or the --dim sizes (the context), or pick a device with more memory")
        if of == "live":
            return (head + f"the activations live at once at the peak of an inference hold {fmt_bytes(held)} (batch "
                    f"{sc.settings.batch}; layer '{big.name}' alone reads {fmt_bytes(w.act_bytes_read)} and writes "
                    f"{fmt_bytes(w.bytes_written)})" + weights_too + tail + "lower --batch or the --dim sizes, or split "
                    "the input")
        return (head + f"layer '{big.name}' alone reads {fmt_bytes(w.act_bytes_read)} and writes "
                f"{fmt_bytes(w.bytes_written)} (batch {sc.settings.batch})" + weights_too + tail
                + "lower --batch or the --dim sizes, or split the input")
    beside = {"inputs": f"the model's inputs hold {fmt_bytes(held)} (a decoder's KV cache among them)",
              "live": f"the activations live at once at the peak of an inference hold {fmt_bytes(held)}"}.get(
        of, f"layer '{big.name}' moves {fmt_bytes(held)}")
    return (head + f"the weights hold {fmt_bytes(weights)} (each once, at the precision scored), and {beside} next to "
            "them" + tail + "quantise the weights to fewer bits, split the model over several devices, or pick one with "
            "more memory")
