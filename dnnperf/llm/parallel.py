"""Tensor parallelism (Megatron-style, as TensorRT-LLM, vLLM and NeMo serve a decoder over N GPUs):
what one device of N runs of a decoder step, and what the devices exchange.

The split follows the data, not names. A tensor is either replicated (every device holds all of it:
the residual stream, the norms' outputs, token ids, masks, rotary tables) or split (each device holds
1/N of it: one device's attention heads, its columns of the MLP). Walking the step in graph order:

- a weight product whose activation input is replicated is column-parallel: each device multiplies by
  1/N of the weight's columns (the product's N), its output is split (Q, K, V, the MLP's gate and up,
  the vocabulary projection);
- a weight product whose activation input is split is row-parallel: each device multiplies its 1/N of
  the rows (the product's K) and the partial sums are added over the devices by one all-reduce of the
  output, which is replicated after it (attention's output projection, the MLP's down projection);
- a mixture-of-experts layer splits every expert's matrices the same way (its input replicated, its
  output all-reduced); its router's product runs whole on every device;
- any other node is split when one of its inputs is split (attention over the device's heads and its
  share of the KV cache, the activations between the MLP's products), else replicated (norms, residual
  Adds, the embedding lookup: every device does all of it);
- the cache inputs are split by heads; a split graph output that is not a cache (the logits) is
  gathered by one all-gather;
- a model with fewer key/value heads than devices (n a multiple of them) keeps one whole head on each
  device: its key and value projections, the cache and the nodes between them at 1/r (r the heads), the
  rest at 1/n (``dnnperf.llm.replicated``).

One device's share of a layer: a column-parallel product at N/n columns (``Workload.with_width``), a
row-parallel one at K/n, a split node at 1/n of its work and bytes, a replicated one whole. The
collectives are costed as NCCL's ring algorithms do: an all-reduce of B bytes sends 2 (n - 1) / n x B
per device, an all-gather (n - 1) / n x B, over the profile's ``interconnect.gbs`` (the bandwidth a
collective reaches between two devices, one direction), plus ``interconnect.latency_us`` each (the
start of one small collective; default ``dnnperf/data/kind_defaults.yaml``). A step's collectives run
between its kernels on the same stream: their time adds to the step's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dnnperf.errors import DnnperfError
from dnnperf.ir import DTYPE_BITS, Tensor
from dnnperf.vocab import EXPERTS_KERNEL
from dnnperf.workload import DTYPE_OF_PRECISION, Workload

REPLICATED, COLUMN, ROW, SPLIT, EXPERTS = "replicated", "column", "row", "split", "experts"


@dataclass(frozen=True)
class Collectives:
    """What the devices exchange in one step: (all-reduce bytes, ...), (all-gather bytes, ...), at the
    exported tensors' widths (``bits``: one per all-reduce, then one per all-gather)."""

    devices: int
    all_reduce: tuple[int, ...]
    all_gather: tuple[int, ...]
    bits: tuple[int, ...] = ()

    def at_precision(self, precision: str | None) -> "Collectives":
        """The same exchange under a precision what-if (``-p``): the activations move at that width, but
        never below 16 bits (a quantised product's partial sums are reduced in 16-bit floats, as
        TensorRT-LLM and vLLM all-reduce them); the model's own widths for None."""
        if precision is None or len(self.bits) != len(self.all_reduce) + len(self.all_gather):
            return self
        new = max(16, DTYPE_BITS.get(DTYPE_OF_PRECISION.get(precision, ""), 16))
        scaled = [b * new // old if old else b for b, old in zip(self.all_reduce + self.all_gather, self.bits)]
        k = len(self.all_reduce)
        return Collectives(self.devices, tuple(scaled[:k]), tuple(scaled[k:]), (new,) * len(scaled))

    def seconds(self, gbs: float, latency_us: float) -> float:
        """Ring collectives over ``gbs`` GB/s a device, ``latency_us`` each."""
        n = self.devices
        sent = sum(2 * (n - 1) * b / n for b in self.all_reduce) + sum((n - 1) * b / n for b in self.all_gather)
        return (len(self.all_reduce) + len(self.all_gather)) * latency_us * 1e-6 + sent / (gbs * 1e9)


def kv_heads(cache) -> int | None:
    """The key/value heads of a cache input ([batch, heads, tokens, head dim], or the legacy
    [2, batch, heads, tokens, head dim]): the axis before its sequence axis."""
    i = cache.seq_axis - 1
    if i < 0 or i == cache.batch_axis:
        return None
    d = cache.dims[i]
    return d if isinstance(d, int) else None


def kv_head_counts(cache) -> set[int]:
    """The key/value heads of the growing cache inputs whose heads axis is known."""
    return {h for h in (kv_heads(c) for c in cache if c.grows) if h is not None}


def kv_ways(n: int, cache) -> int:
    """Over how many devices the key/value heads are split: ``n`` when ``n`` divides them, else (``n`` a
    multiple of them: the vLLM / TensorRT-LLM split of a grouped- or multi-query model over more devices than
    it has KV heads) their count, each head then replicated on ``n`` / heads devices. ``check_devices``
    refuses any other ``n``."""
    return min([n] + [h for h in kv_head_counts(cache) if h < n])


def check_devices(n: int, dec) -> None:
    """Refuse a split the model's key/value heads do not allow (each device holds whole heads: ``n``
    divides them, or is a multiple of them and each head is replicated); ``n`` >= 1
    (``PhaseRequest.check``)."""
    if n == 1:
        return
    heads = kv_head_counts(dec.cache)
    if not heads:
        raise DnnperfError("--tp: the heads of the model's KV cache are not known (a cache input without a heads axis), "
                           "so the step cannot be split by heads — analyse it on one device")
    bad = sorted(h for h in heads if h % n and n % h)
    if bad:
        raise DnnperfError(f"--tp {n} neither divides the model's {bad[0]} key/value heads nor is a multiple of them: "
                           f"each device holds whole heads — pick a divisor of {bad[0]}, or a multiple of it (each "
                           "head then held on several devices)")


def roles(graph, work: dict, cache_names) -> dict[str, str]:
    """node name -> how one device runs it (REPLICATED, COLUMN, ROW, SPLIT, EXPERTS), walking ``graph``
    in order (see the module docstring); ``work``: node name -> its workload."""
    split = set(cache_names)
    consts = graph.constants or graph.initializers
    out: dict[str, str] = {}
    made: dict[str, object] = {}
    for node in graph.nodes:
        w = work.get(node.name)
        acts = [i for i in node.inputs if i and i not in consts]
        in_split = any(i in split for i in acts)
        if w is not None and w.kernel == EXPERTS_KERNEL:
            role = EXPERTS
            # the router's logits: every device ranks the experts for every token (a few columns, run whole)
            chain = _chain_to_column(node.inputs[1] if len(node.inputs) > 1 else "", made, out, consts)
            for m in chain:
                out[m.name] = REPLICATED
                split.difference_update(m.outputs)
        elif w is not None and w.is_matrix and w.family != "attention" and w.weight_bytes > 0 and w.gemm is not None \
                and w.gemm.count == 1 and any(i in consts for i in node.inputs if i):
            # (a fused attention op reads constants too, its rotary tables: one key/value head makes it one product)
            role = ROW if in_split else COLUMN
        elif node.op_type in ("Shape", "Size"):
            role = REPLICATED  # a shape is known to every device
        else:
            role = SPLIT if in_split else REPLICATED
        out[node.name] = role
        made.update((o, node) for o in node.outputs if o)
        if role in (COLUMN, SPLIT):
            split.update(o for o in node.outputs if o)
    return out


def share(w: Workload, role: str, n: int) -> Workload:
    """One device's part of a layer ``role`` over ``n`` devices."""
    if n == 1 or role == REPLICATED:
        return w
    if role == COLUMN:
        return w.with_width(-(-w.gemm.n // n))
    g = w.gemm
    if role == ROW:
        k = -(-g.k // n)
        f = k / g.k
        return replace(w, gemm=replace(g, k=k), macs=int(round(w.macs * f)), weight_bytes=int(round(w.weight_bytes * f)),
                       act_bytes_read=int(round(w.act_bytes_read * f)))
    # SPLIT and EXPERTS: 1/n of the work, the bytes and the outputs to spread over lanes
    return replace(w, macs=-(-w.macs // n), other_ops=-(-w.other_ops // n), act_bytes_read=-(-w.act_bytes_read // n),
                   weight_bytes=-(-w.weight_bytes // n), bytes_written=-(-w.bytes_written // n),
                   weights_unread=-(-w.weights_unread // n), parallel_work=max(1, -(-w.parallel_work // n)),
                   gemm=None if g is None else replace(g, count=-(-g.count // n)) if g.count >= n
                   else replace(g, n=-(-g.n // n)))


def shard(insp, n: int, cache) -> tuple:
    """(the inspection one device of ``n`` runs, the step's Collectives, {role: layers}); ``cache``: the
    decoder's cache inputs (``llm.decoder.CacheInput``), held 1/n a device, their heads split (over fewer
    devices than ``n`` when the model has fewer key/value heads: ``dnnperf.llm.replicated``)."""
    if n == 1:
        return insp, Collectives(1, (), ()), {}
    cache_names = [c.name for c in cache]
    graph = insp.graph
    work = {x.node.name: x.workload for x in insp.costed()}
    role = roles(graph, work, cache_names)
    r = kv_ways(n, cache)
    ways = None
    if r < n:  # fewer key/value heads than devices: each head held whole on n / r of them
        from dnnperf.llm.replicated import share_replicated, ways_of

        ways = ways_of(graph, role, cache, n, r, work)
    rows, reduce_, counts = [], [], {}
    split_out = set(cache_names)
    for row in insp.rows:
        ro = role.get(row.node.name, REPLICATED)
        if row.workload is not None:
            counts[ro] = counts.get(ro, 0) + 1
            w = share(row.workload, ro, n) if ways is None else share_replicated(row, ro, n, r, ways, graph)
            row = replace(row, workload=w)
        rows.append(row)
        if ro in (ROW, EXPERTS):
            reduce_.extend(graph.tensors[o] for o in row.node.outputs if o and o in graph.tensors
                           and graph.tensors[o].shape is not None)
        elif ro in (COLUMN, SPLIT):
            split_out.update(o for o in row.node.outputs if o)
    if not counts.get(ROW) and not counts.get(EXPERTS):
        # nothing to all-reduce: the products are out of reach (a control-flow body) or the graph is not a
        # decoder of column- and row-parallel products; a "split" step then would be quietly wrong
        raise DnnperfError(f"--tp {n}: no weight product in the step's graph takes a split input (the products that "
                           "tensor parallelism all-reduces), so it cannot be split as Megatron-style serving splits a "
                           "decoder — analyse it on one device")
    # a split graph output a column-parallel product makes (the logits) is gathered; the caches stay split
    made = {o: node for node in graph.nodes for o in node.outputs if o}
    gathered = [o for o in graph.outputs if o in split_out and _chain_to_column(o, made, role, graph.constants)
                and o in graph.tensors and graph.tensors[o].shape is not None]
    gather = [graph.tensors[o] for o in gathered]
    # what a device holds of each split tensor (the caches' heads, its share of every activation between a
    # column- and a row-parallel product), for the memory figures the report reads off the graph's tensors
    held = {t: n if ways is None else ways.tensors.get(t, n) for t in split_out.difference(gathered)}
    tensors = _split_tensors(graph.tensors, cache, held)
    coll = Collectives(n, tuple(t.nbytes for t in reduce_), tuple(t.nbytes for t in gather),
                       tuple(DTYPE_BITS.get(t.dtype, 16) for t in reduce_ + gather))
    return replace(insp, rows=rows, graph=replace(graph, tensors=tensors), collectives=coll), coll, counts


def _split_tensors(tensors: dict, cache, held: dict) -> dict:
    """``tensors`` with each of ``held`` (name -> devices it is spread over) at that share: a cache input
    along its heads (the axis before its sequence axis), any other along its largest axis the count
    divides (only its size is read); one that no axis divides stays whole."""
    out = dict(tensors)
    heads = {c.name: c.seq_axis - 1 for c in cache if c.seq_axis - 1 not in (-1, c.batch_axis)}
    for name, n in held.items():
        t = out.get(name)
        if t is None or t.shape is None or n <= 1:
            continue
        i = heads.get(name)
        if i is None or i >= len(t.shape) or t.shape[i] % n:
            i = max((k for k, d in enumerate(t.shape) if d % n == 0 and d >= n), key=lambda k: t.shape[k], default=None)
        if i is None:
            continue
        shape = list(t.shape)
        shape[i] //= n
        out[name] = Tensor(name, tuple(shape), t.dtype)
    return out


def _chain_to_column(name: str, made: dict, role: dict, consts) -> list:
    """The nodes from a column-parallel product to tensor ``name`` through single-input nodes (a Cast, a
    Reshape), the product first; empty when ``name`` does not come from one that way."""
    chain = []
    for _ in range(8):
        node = made.get(name)
        if node is None:
            return []
        chain.append(node)
        if role.get(node.name) == COLUMN:
            return chain[::-1]
        acts = [i for i in node.inputs if i and i not in consts]
        if len(acts) != 1:
            return []
        name = acts[0]
    return []


def collective_seconds(insp, hw, precision: str | None = None) -> tuple[float, str]:
    """(seconds the collectives of ``insp``'s split step take over ``hw``'s link under the precision
    what-if ``precision`` (``Collectives.at_precision``), the assumption made about that link); (0, "") for
    a step that is not split."""
    coll = insp.collectives
    if coll is None or coll.devices == 1:
        return 0.0, ""
    coll = coll.at_precision(precision)
    gbs, latency, assumed = link(hw, coll.devices)
    return coll.seconds(gbs, latency), assumed


def link(hw, n: int = 2) -> tuple[float, float, str]:
    """(GB/s, latency in us, the assumption made, if any) of the link a collective over ``n`` of ``hw``'s
    devices runs on: the profile's ``interconnect`` (NVLink within a board), or past the devices that link
    joins (``interconnect.devices``) its ``network_gbs``, the slowest hop of a ring that leaves the board."""
    from dnnperf.hardware import kind_defaults

    ic = hw.interconnect
    latency = ic.get("latency_us")
    said = []
    if latency is None:
        latency = kind_defaults()[hw.kind]["collective_latency_us"]
        said.append(f"{latency:g} us per collective (the {hw.kind} default)")
    joined = ic.get("devices")
    if joined is not None and n > joined:
        gbs = ic.get("network_gbs")
        if gbs is None:
            raise DnnperfError(f"--tp {n}: profile '{hw.name}' links {joined} devices (interconnect.devices) and gives no "
                               "network between such groups — add interconnect.network_gbs (GB/s a collective reaches "
                               f"per device across the cluster network), or keep --tp at most {joined}")
        said.append(f"{n} devices span {-(-n // joined)} groups of the {joined} its link joins: the collectives run at "
                    f"the network's {gbs:g} GB/s")
        return float(gbs), float(latency), "; ".join(said)
    gbs = ic.get("gbs")
    if gbs is None:
        if not hw.host_link_gbs:
            raise DnnperfError(f"--tp: profile '{hw.name}' gives no link between devices — add interconnect: "
                               "{gbs: GB/s a collective reaches one way, latency_us: ...} to it (NVLink, or PCIe: "
                               "host_link_gbs is used when given)")
        gbs = hw.host_link_gbs
        said.append(f"the host link's {gbs:g} GB/s between devices (no interconnect in the profile)")
    return float(gbs), float(latency), "; ".join(said)
