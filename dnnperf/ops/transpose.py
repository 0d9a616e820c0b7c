"""Transpose: which kernel ONNX Runtime's CPU provider copies a permutation with.

A permutation that keeps the axes larger than 1 in order moves no element: a view for a framework, one memcpy
for ONNX Runtime's CPU kernel (``dnnperf.scoring.cpu_dispatched``). Any other the kernel copies in one of three
ways, read off its source and timed on a 2-core EPYC VM (ONNX Runtime 1.32): a tiled 2-D transpose where the
last axis moves with one other (the profile's 'Transpose' figure); runs of several elements, the trailing axes
left in place, one copy call a run (``copied_blocks``, loop_ns 'Transpose.blocks'); and, where the last axis
moves with more than one other, a loop over every element (``element_loop``, loop_ns 'Transpose.elements').
"""

from __future__ import annotations

from math import prod

from dnnperf.ir import DTYPE_BITS
from dnnperf.ops import Contradiction, Ctx, register
from dnnperf.vocab import TRANSPOSE_BLOCKS, TRANSPOSE_ELEMENTS, TRANSPOSE_PLANES, TRANSPOSE_RESHAPE
from dnnperf.workload import Workload


def transpose(ctx: Ctx):
    """A permutation that moves only axes of size 1 leaves every element where it was (a decoder's
    [1, 1, heads, d] -> [1, heads, 1, d] at one token): a view, as PyTorch's transpose is (ONNX Runtime's CPU
    kernel still copies it, with one memcpy: ``scoring.cpu_dispatched``). Any other permutation copies every byte;
    one that ONNX Runtime's CPU kernel copies element by element (``element_loop``) names that loop
    (loop_ns 'Transpose.elements' on a calibrated CPU), one it copies as runs of several elements
    (``copied_blocks``) its copies of a run (loop_ns 'Transpose.blocks'), one it runs as many 2-D transposes
    (``transposed_planes``) its calls (loop_ns 'Transpose.planes')."""
    x = ctx.in_shape(0)
    perm = ctx.attr("perm", None)
    perm = list(range(len(x)))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(len(x))):
        raise Contradiction(f"perm {perm} is not a permutation of the input's {len(x)} axes")
    how = copy_kind(x, perm, DTYPE_BITS.get(ctx.dtype(0), 32) // 8)
    if how is None:
        return Workload(family="view", dtype=ctx.dtype(0), launches=0)
    return ctx.workload("movement", kernel=how[0], loop_items=how[1])


def copy_kind(shape, perm: list[int], item: int = 4) -> tuple[str, int] | None:
    """(the loop kernel, its steps) ONNX Runtime's CPU Transpose copies ``shape`` by ``perm`` with ('' and 0:
    the tiled 2-D transpose); None where the permutation moves only axes of size 1 (a view). ``item``: bytes
    an element."""
    kept = [a for a in range(len(shape)) if shape[a] != 1]
    if sorted(perm) == list(range(len(shape))) and [a for a in perm if shape[a] != 1] == kept:
        return None
    if element_loop(shape, perm):
        return TRANSPOSE_ELEMENTS, 0
    blocks = copied_blocks(shape, perm, item)
    if blocks:
        return TRANSPOSE_BLOCKS, blocks
    planes = transposed_planes(shape, perm)
    return (TRANSPOSE_PLANES, planes) if planes > 1 else ("", 0)


def transposed_planes(shape, perm: list[int]) -> int:
    """How many 2-D planes ONNX Runtime's CPU Transpose transposes one call each when the permutation's last
    axis moves with one other (merged, ``merged_axes``: [P, R, C] -> [P, C, R], the leading axes it leaves in
    place the planes); 0 for any other kind. Each call is split over the thread pool and costs a fixed time
    (2-core EPYC VM, 2 threads): [1, 64, 3136] 43 us, [64, 64, 49] 99, [256, 64, 12] 244, [3136, 8, 12] 2,113
    (7.0 ns an element where one plane takes 0.21): 0.65-0.9 us a plane beyond the first, 1.3-3.7 for planes
    of 49 x 96 to 197 x 64 (their split over the threads wastes more)."""
    moved = _moved(shape, perm)
    if moved is None or moved[1][-1] == len(moved[1]) - 1 or not single_axis_move(moved[1]):
        return 0
    return _in_place(*moved, trailing=False)


def permuted(shape, perm: list[int], dtype: str) -> Workload:
    """The workload of a Transpose of an activation of ``shape`` and ``dtype`` by ``perm`` that ONNX Runtime's CPU
    provider runs though the graph holds none (``dnnperf.rewrites.pushed_transposes``); one that moves only axes
    of size 1 is its memcpy (``copied``)."""
    how = copy_kind(shape, perm, DTYPE_BITS.get(dtype, 32) // 8)
    return copied(shape, dtype, *(how or (TRANSPOSE_RESHAPE, 0)))


def copied(shape, dtype: str, kernel: str = "", loop_items: int = 0) -> Workload:
    """A copy of an activation of ``shape`` and ``dtype`` by the CPU kernel ``kernel``: every byte read and written."""
    n = prod(shape)
    nbytes = (n * DTYPE_BITS.get(dtype, 32) + 7) // 8
    return Workload("movement", dtype, act_bytes_read=nbytes, bytes_written=nbytes, parallel_work=n, kernel=kernel,
                    loop_items=loop_items)


def _moved(shape, perm: list[int]) -> tuple[list[int], list[int]] | None:
    """``merged_axes`` of a permutation that moves an axis larger than 1; None for any other (not a permutation
    of ``shape``'s axes, or one that keeps the axes larger than 1 in order: a plain copy)."""
    if sorted(perm) != list(range(len(shape))):
        return None
    merged, order = merged_axes(shape, perm)
    big = [a for a in order if merged[a] != 1]
    return None if big == sorted(big) else (merged, order)


def _in_place(merged: list[int], order: list[int], trailing: bool = True) -> int:
    """The elements of the trailing (else the leading) merged axes ``order`` leaves in place."""
    n = 1
    for i in (range(len(order) - 1, -1, -1) if trailing else range(len(order))):
        if order[i] != i:
            break
        n *= merged[i]
    return n


def single_axis_move(perm: list[int]) -> bool:
    """Whether ``perm`` moves one axis and keeps the others in order ([0, 2, 3, 1]: axis 1 moved in to
    the last place; [0, 1, 3, 2]; [1, 0, 2]), size-1 axes counted like any other."""
    for axis in range(len(perm)):
        others = [a for a in perm if a != axis]
        if others == sorted(others):
            return True
    return False


def merged_axes(shape, perm: list[int]) -> tuple[list[int], list[int]]:
    """(shape, perm) with the axes that stay next to each other in the same order taken as one:
    [1, 9, 91, 100, 100] (0, 3, 4, 1, 2), a detector head's permute, is [1, 819, 10000] (0, 2, 1)."""
    groups: list[list[int]] = []  # input axes, in output order
    for a in perm:
        if groups and groups[-1][-1] + 1 == a:
            groups[-1].append(a)
        else:
            groups.append([a])
    order = sorted(groups, key=lambda g: g[0])
    size = []
    for g in order:
        n = 1
        for a in g:
            n *= shape[a]
        size.append(n)
    index = {g[0]: i for i, g in enumerate(order)}
    return size, [index[g[0]] for g in groups]


def element_loop(shape, perm: list[int]) -> bool:
    """Whether ONNX Runtime's CPU Transpose copies this permutation one element at a time. Axes that
    stay next to each other in order move as one (``merged_axes``); then its kernel takes the first
    of: axes larger than 1 kept in order (a plain copy); one axis moved, size-1 axes counted (a 2-D
    transpose per outer index, or strided block copies); otherwise a copy of the trailing axes the
    permutation leaves in place as blocks, and, when those hold a single element (the last axis
    moves), a loop over every element that steps a multi-index per element: 2.2-2.8 ns an element on
    a 2-core EPYC VM (3 GB/s read and written) against 0.05-0.23 ns for every other kind, from a 4-D
    [16, 32, 49, 12] (2, 0, 3, 1) to MaxViT's 6-D window and grid partitions (0, 2, 4, 3, 5, 1)."""
    moved = _moved(shape, perm)
    return moved is not None and not single_axis_move(moved[1]) and _in_place(*moved) == 1


def copied_blocks(shape, perm: list[int], item: int = 4) -> int:
    """How many runs of more than one element ONNX Runtime's CPU Transpose copies one by one for this
    permutation, 0 where it copies otherwise. Axes that stay next to each other in order move as one
    (``merged_axes``); the trailing axes the permutation leaves in place are a run the kernel copies with
    one call (attention's [1, 12, 128, 64] (0, 2, 1, 3): 1,536 runs of 64), and each call costs a fixed
    time the bytes do not show: 4.1-5.0 ns a run on a 2-core EPYC VM (2 threads) for runs of 4 to 3,072
    float32 elements, 16 B to 12 KB, on top of the copy at the bandwidth of its working set (786,432
    elements in runs of 4: 0.89 ms; of 64: 0.11; of 768: 0.06). A plain copy (the axes larger than 1 kept
    in order) and a permutation whose last axis moves (a 2-D transpose or an element loop) make no runs; nor
    does one axis moved over runs of 1, 2, 4 or 8 bytes (``item``: bytes an element), which the kernel moves
    as single wider elements in a typed loop (fp16 runs of 4: 1.0 ns a run against 4.7 for fp32 ones)."""
    moved = _moved(shape, perm)
    if moved is None:
        return 0
    run = _in_place(*moved)
    if run == 1 or (run * item in (1, 2, 4, 8) and single_axis_move(moved[1])):
        return 0
    return prod(moved[0]) // run


register({"Transpose": transpose}, pure=True)
