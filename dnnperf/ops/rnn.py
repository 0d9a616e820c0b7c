"""Recurrent cells. Each time step is a small GEMM (batch x gates*H x (I + H)) that must wait
for the previous one, so only one step's outputs are available in parallel.

Gate arithmetic per hidden unit per step: LSTM ~ 10 ops (3 sigmoids, 2 tanh, 3 mul, 2 add), GRU ~ 9,
RNN ~ 2. The recurrent weights are read again at every step (``Workload.step_reads``): the runtimes
batch the input projection of all steps into one product, but the recurrent one waits for each step.
"""

from __future__ import annotations

from dnnperf.ir import DTYPE_BITS
from dnnperf.ops import Contradiction, Ctx, register
from dnnperf.workload import Gemm

_GATES = {"LSTM": (4, 10), "GRU": (3, 9), "RNN": (1, 2)}


def recurrent(ctx: Ctx):
    gates, per_unit = _GATES[ctx.node.op_type]
    x = ctx.in_shape(0)  # (S, B, I) or (B, S, I) with layout=1
    w = ctx.in_shape(1)  # (dirs, gates*H, I)
    if int(ctx.attr("layout", 0)) == 1:
        b, s, i = x
    else:
        s, b, i = x
    dirs, gh, wi = w
    h = gh // gates
    hidden = int(ctx.attr("hidden_size", h) or h)
    if wi != i or gh != gates * hidden:
        raise Contradiction(f"input of {i} features but the weights {list(w)} take {wi} (and {gates} gates of "
                            f"{hidden})" if wi != i else f"weights {list(w)} are not {gates} gates of {hidden}")
    macs = dirs * s * b * gh * (i + h)
    other = dirs * s * b * h * per_unit
    # every step multiplies the recurrent weights R (input 2: dirs x gates*H x H) again: read once per step
    rec = ctx.in_shape(2) if ctx.has_input(2) else (dirs, gh, h)  # R is required; a malformed model without it
    step_reads = ctx.numel(rec) * DTYPE_BITS.get(ctx.dtype(2 if len(ctx.node.inputs) > 2 else 1), 32) // 8
    return ctx.workload("rnn", macs=macs, other=other, gemm=Gemm(b, gh, i + h, dirs * s),
                        parallel=dirs * b * gh, launches=s, step_reads=step_reads)


register({"LSTM": recurrent, "GRU": recurrent, "RNN": recurrent})
