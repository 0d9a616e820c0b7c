"""Attention masks that make a Softmax write subnormal floats.

A shifted-window transformer (Swin) adds -100 to the attention scores of pairs of positions that
must not attend to each other. After the Softmax those probabilities are about exp(-100) = 3.7e-44:
below the smallest normal float32 (1.18e-38), so they are stored as subnormal numbers, which x86
cores without flush-to-zero handle in microcode, tens of cycles per operation (measured, ORT 1.32,
2 threads, swin_t with stand-in weights, flush-to-zero off against on: 35-38 ns per such probability
in the MatMul that reads it, 4-7 in the Softmax; about 10 ms of its 60). A mask of -1e4, -1e9 or
-inf gives exact zeros.

The mask is computed from constants and shapes only (torchvision builds it with slices, ScatterND and
Where), so its values are known at load time: ``scan`` evaluates it, with numpy, for every float32
Softmax whose input is a sum with such a tensor, and counts the entries whose exponential is
subnormal (``SUBNORMAL_EXP``), taking the scores' own offset as small against the mask: an upper bound
for trained weights, whose larger logits push part of the masked values below 2^-149, where they
flush to exact zeros that cost nothing (stand-in weights, as validate uses, keep them all). Masks larger than
``MAX_MASK_ELEMS``, or held in an initializer (weight payloads are never read), are left alone.
"""

from __future__ import annotations

import math

import numpy as np


# exp(x) of a float32 x in this range is subnormal: ln(2^-149) .. ln(2^-126)
SUBNORMAL_EXP = (-149 * math.log(2), -126 * math.log(2))
MAX_MASK_ELEMS = 1 << 22
_VIEWS = frozenset({"Reshape", "Unsqueeze", "Squeeze", "Identity", "Flatten"})


def scan(ordered, res, types) -> dict[str, int]:
    """{Softmax output tensor: probabilities it writes as subnormal float32} (only Softmaxes with some)."""
    softmaxes = [n for n in ordered if n.op_type == "Softmax" and n.domain in ("", "ai.onnx") and n.input
                 and (types.get(n.input[0]) or (None, ""))[1] == "float32"]
    if not softmaxes:
        return {}
    producer = res.producer
    store: dict[str, np.ndarray] = {}  # the masks' large intermediate values (never the loader's table)
    out: dict[str, int] = {}
    for sm in softmaxes:
        t = sm.input[0]
        node = producer.get(t)
        while node is not None and node.op_type in _VIEWS and node.input:
            node = producer.get(node.input[0])
        if node is None or node.op_type != "Add" or len(node.input) != 2:
            continue
        total = _numel(types.get(node.output[0]))
        count = 0
        for m in node.input:
            v = res.value(m, limit=MAX_MASK_ELEMS, store=store)
            v = None if v is None else np.asarray(v)
            if v is None or v.dtype.kind != "f" or not v.size or total is None or total % v.size:
                continue
            lo, hi = SUBNORMAL_EXP
            count += int(np.count_nonzero((v >= lo) & (v <= hi))) * (total // v.size)
        if count and sm.output and sm.output[0]:
            out[sm.output[0]] = count
    return out


def _numel(t) -> int | None:
    if t is None or t[0] is None:
        return None
    n = 1
    for d in t[0]:
        if not isinstance(d, int):
            return None
        n *= d
    return n
