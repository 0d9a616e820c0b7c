"""Weight stripping: a weightless skeleton of a model that dnnperf analyses exactly like the original.

Each initializer keeps its dims and data type; its payload is cleared and it is marked as external
data at a location that does not exist, which dnnperf (and ``onnx.load(..., load_external_data=False)``)
read without complaint. Small integer initializers (shape constants) keep their values.
"""

from __future__ import annotations

from dnnperf.load.read import (STRIPPED_LOCATION, clear_payload, has_payload, is_shape_like, parse_model,
                               quant_params, read_model_bytes, sparse_weights, tensor_nbytes)
from dnnperf.load.topology import all_initializers, walk_graphs


def skeletonize_inplace(model) -> int:
    """Clear every weight payload (keeping dims, dtype and small shape constants), subgraphs included;
    return the payload bytes actually removed (0 for a model that is already a skeleton). Weights kept
    in external data files (never opened) are pointed at the stripped location too, so the skeleton
    refers to no file of the original's."""
    return _skeletonize(model)[0]


def _skeletonize(model) -> tuple[int, int, int]:
    """(payload bytes removed, weights that were in external files, their bytes by dims and dtype)."""
    # sparse weights: declared dense, without their values and indices
    removed = sparse_weights(walk_graphs(model.graph, max_depth=10_000))
    external = external_bytes = 0
    keep = quant_params(model.graph)  # per-channel scales keep their values (the QDQ rules read them)
    for init in all_initializers(model.graph):
        if not has_payload(init):
            if not any(e.key == "location" and e.value == STRIPPED_LOCATION for e in init.external_data):
                external += 1
                external_bytes += tensor_nbytes(init.dims, init.data_type)
                clear_payload(init)
            continue
        if is_shape_like(init, keep):
            continue
        removed += tensor_nbytes(init.dims, init.data_type)
        clear_payload(init)
    return removed, external, external_bytes


def drop_metadata_inplace(model) -> None:
    """Remove doc strings and per-node metadata (exporters put stack traces with local paths there).
    Cleared, not set to "": ONNX's fields are proto2 optionals, and an empty string set on each node
    is still written (a skeleton grew by 2 bytes a node)."""
    model.ClearField("doc_string")
    for g in walk_graphs(model.graph, max_depth=10_000):
        g.ClearField("doc_string")
        for n in g.node:
            n.ClearField("doc_string")
            del n.metadata_props[:]
        for coll in (g.input, g.output, g.value_info):
            for vi in coll:
                vi.ClearField("doc_string")
                del vi.metadata_props[:]
    for f in model.functions:
        for n in f.node:
            n.ClearField("doc_string")
            del n.metadata_props[:]


def skeleton_of(src: str, drop_metadata: bool = False) -> tuple[bytes, dict]:
    """(skeleton bytes, summary) for the model at ``src``; nothing is written here."""
    data = read_model_bytes(src)
    model = parse_model(data, src)
    before = len(data)
    del data
    removed, external, external_bytes = _skeletonize(model)
    if drop_metadata:
        drop_metadata_inplace(model)
    out = model.SerializeToString()
    return out, {"input_bytes": before, "output_bytes": len(out), "weight_bytes_removed": removed,
                 "external_weights": external, "external_weight_bytes": external_bytes}


def strip_file(src: str, dst: str, drop_metadata: bool = False) -> dict:
    """Write the skeleton of ``src`` to ``dst`` atomically (library use; the CLI goes through its
    emitter, which also refuses to write over an input)."""
    import os

    from dnnperf.errors import DnnperfError
    from dnnperf.files import atomic_write_bytes

    if os.path.exists(dst) and os.path.exists(src) and os.path.samefile(src, dst):
        raise DnnperfError(f"refusing to write the skeleton over its input '{src}'")
    data, info = skeleton_of(src, drop_metadata)
    atomic_write_bytes(dst, data)
    return info
