"""Recurrent cells. Each time step is a small GEMM (batch x gates*H x (I + H)) that must wait
for the previous one, so only one step's outputs are available in parallel.

Gate arithmetic per hidden unit per step: LSTM ~ 10 ops (3 sigmoids, 2 tanh, 3 mul, 2 add), GRU ~ 9,
RNN ~ 2. The recurrent weights are read again at every step (``Workload.step_reads``): the runtimes
batch the input projection of all steps into one product, but the recurrent one waits for each step.
"""

from __future__ import annotations

from dataclasses import replace

from dnnperf.ir import DTYPE_BITS
from dnnperf.ops import Contradiction, Ctx, register, register_shapes
from dnnperf.ops.matrix import known, with_operands
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
    _operands_fit(ctx, dirs, gates, hidden, b)
    # every step multiplies the recurrent weights R (input 2: dirs x gates*H x H) again: read once per step
    rec = ctx.in_shape(2) if ctx.has_input(2) else (dirs, gh, h)  # R is required; a malformed model without it
    step_reads = ctx.numel(rec) * DTYPE_BITS.get(ctx.dtype(2 if len(ctx.node.inputs) > 2 else 1), 32) // 8
    return _steps(ctx, s, b, i, h, dirs, gh, dirs * s * b * h * per_unit, step_reads)


# input -> its name and shape, given (directions, gates, hidden size, batch): ONNX's definition of the
# recurrent layers (input 3 the two biases of every gate, input 7 an LSTM's three peephole vectors; with
# layout 1 the initial states put the batch first, as the input does)
_OPERANDS = {2: ("R", lambda d, g, h, b: (d, g * h, h)), 3: ("B", lambda d, g, h, b: (d, 2 * g * h)),
             4: ("sequence_lens", lambda d, g, h, b: (b,)), 5: ("initial_h", lambda d, g, h, b: (d, b, h)),
             6: ("initial_c", lambda d, g, h, b: (d, b, h)), 7: ("P", lambda d, g, h, b: (d, 3 * h))}


def _operands_fit(ctx: Ctx, dirs: int, gates: int, hidden: int, batch: int) -> None:
    """The weights W fix every other input's shape (``_OPERANDS``), and ``direction`` their first
    axis (two for a bidirectional layer): ONNX Runtime refuses a recurrent weight, bias, state or
    peephole of another shape when it runs the layer, and the figures would be another layer's."""
    direction = str(ctx.attr("direction", "forward"))
    want = 2 if direction == "bidirectional" else 1
    if dirs != want:
        raise Contradiction(f"its weights hold {dirs} direction(s) where a {direction} layer has {want}")
    batch_first = int(ctx.attr("layout", 0)) == 1
    for i, (name, shape) in _OPERANDS.items():
        got = ctx.known_shape(i)
        if got is not None:  # (an unresolved one is not needed to price the layer)
            need = shape(dirs, gates, hidden, batch)
            if batch_first and i in (5, 6):
                need = (batch, dirs, hidden)
            if got != need:
                raise Contradiction(f"its {name} is {list(got)} where its weights and input need {list(need)}")


def _steps(ctx: Ctx, s: int, b: int, i: int, h: int, dirs: int, gh: int, other: int, step_reads: int):
    """A recurrent layer of ``s`` steps over ``dirs`` directions: each step's product of the batch's
    input and state (``i + h``) with ``gh`` gate columns, waiting for the step before."""
    return ctx.workload("rnn", macs=dirs * s * b * gh * (i + h), other=other, gemm=Gemm(b, gh, i + h, dirs * s),
                        parallel=dirs * b * gh, launches=s, step_reads=step_reads)


def dynamic_quantize_lstm(ctx: Ctx):
    """ONNX Runtime's DynamicQuantizeLSTM (its quantizer's LSTM: X float [S, B, I], W int8 [dirs, I, 4H]
    and R [dirs, H, 4H], stored transposed against LSTM's, with scales and zero points): an LSTM whose
    products are integer, each step's input and state quantised on the fly (5 ops an element, as
    DynamicQuantizeLinear)."""
    s, b, i = ctx.in_shape(0)
    dirs, wi, gh = ctx.in_shape(1)
    hidden = int(ctx.attr("hidden_size", gh // 4) or gh // 4)
    if wi != i or gh != 4 * hidden:
        raise Contradiction(f"input of {i} features but the weights {[dirs, wi, gh]} take {wi}" if wi != i
                            else f"weights {[dirs, wi, gh]} are not 4 gates of {hidden}")
    rec = ctx.in_shape(2) if ctx.has_input(2) else (dirs, hidden, gh)
    w = _steps(ctx, s, b, i, hidden, dirs, gh, dirs * s * b * (hidden * _GATES["LSTM"][1] + 5 * (i + hidden)),
               ctx.numel(rec) * DTYPE_BITS.get(ctx.dtype(2 if ctx.has_input(2) else 1), 8) // 8)
    return with_operands(ctx, replace(w, dtype=ctx.dtype(1)), 0, 1, data="uint8")


def _dynamic_quantize_lstm_shape(attrs, ins, n_out):
    """Y [S, dirs, B, H], Y_h and Y_c [dirs, B, H], in X's type."""
    x, w = ins[0], ins[1] if len(ins) > 1 else None
    if not (known(x) and known(w)) or len(x[0]) != 3 or len(w[0]) != 3:
        return []
    (s, b, _), dirs = x[0], w[0][0]
    h = int(attrs.get("hidden_size") or w[0][2] // 4)
    return [((s, dirs, b, h), x[1]), ((dirs, b, h), x[1]), ((dirs, b, h), x[1])][:n_out]


register({"LSTM": recurrent, "GRU": recurrent, "RNN": recurrent,
          "com.microsoft:DynamicQuantizeLSTM": dynamic_quantize_lstm})
register_shapes({"com.microsoft:DynamicQuantizeLSTM": _dynamic_quantize_lstm_shape})
