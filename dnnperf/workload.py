"""The cost of one node, independent of any hardware.

Convention: ``macs`` counts multiply-accumulates of matrix-type ops (Conv, ConvTranspose, Gemm,
MatMul, Einsum, attention, recurrent cells); 1 MAC = 2 ops. ``other_ops`` counts every other
arithmetic operation (elementwise, normalisation, softmax, pooling, reductions, resize), one op per
elementary operation per element. Bytes are what the node reads and writes, assuming each tensor
crosses DRAM once per node (perfect reuse inside the node, none between nodes).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dnnperf.vocab import EXPERTS_KERNEL, FREE_FAMILIES, MATRIX_FAMILIES  # noqa: F401  (families live in vocab)


@dataclass(frozen=True, slots=True)
class Gemm:
    """Matrix shape seen by a matrix unit: ``count`` independent M x N x K products."""

    m: int
    n: int
    k: int
    count: int = 1

    @property
    def macs(self) -> int:
        return self.m * self.n * self.k * self.count


@dataclass(slots=True)
class Workload:
    family: str
    dtype: str = "float32"
    macs: int = 0
    other_ops: int = 0
    act_bytes_read: int = 0
    weight_bytes: int = 0
    bytes_written: int = 0
    parallel_work: int = 0  # independent output elements available to spread over lanes
    gemm: Gemm | None = None
    launches: int = 1
    note: str = ""
    conv: tuple = ()  # convolutions: (input channels per group, kernel h, kernel w, stride h, stride w, dilated)
    row: int = 0  # normalisations: elements each row reduces over (LayerNorm's normalised axes)
    pieces: tuple = ()  # Concat: elements of each input, each copied into the output as one piece
    subnormals: int = 0  # subnormal float32 values it writes (a Softmax) or multiplies (the MatMul after it)
    bias: bool = False  # a plain Conv or ConvTranspose with a bias input (GPU frameworks add it in a kernel of its own)
    step_reads: int = 0  # recurrent layers: bytes read again at every step after the first (the recurrent weights)
    kernel: str = ""  # the runtime kernel an attribute picks ('Resize.linear'): a calibrated CPU may time it per element
    taps: float = 1.0  # a dilated convolution: its kernel taps inside the input over those at dilation 1 (ops.matrix)
    operands: str = ""  # an integer product's data x weight element types ('u8s8', vocab.INT8_OPERANDS)
    loop_items: int = 0  # a loop kernel's steps when they are not its parallel_work (a Gather's picked blocks)
    rereads: int = 0  # a broadcasting binary op: bytes its kernel reads again from cache (an operand read at every span)
    # control flow (If, Loop, Scan): the body's nodes, each (op type, its workload, how many times it runs),
    # scored each as the kernel it is (scoring._control), and the times a Loop or Scan body starts
    parts: tuple = ()
    iterations: int = 0
    # times the host must read a result back from the device before it can go on queueing work: an
    # output size known only once computed (NonZero, Unique, NonMaxSuppression), a Loop condition the
    # body computes (each iteration), an If condition known only at run time (scoring._queue_on_stream)
    host_waits: int = 0
    # weight bytes the layer holds in memory but one run does not read: an embedding table's rows no
    # index picks, a mixture-of-experts layer's experts no token is routed to. Memory counts them
    # (capacity.memory_figures); time and cache reuse do not
    weights_unread: int = 0

    @property
    def ops(self) -> int:
        """Total ops: 2 per MAC plus the other ops."""
        return 2 * self.macs + self.other_ops

    @property
    def bytes_read(self) -> int:
        return self.act_bytes_read + self.weight_bytes

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in ops per DRAM byte (0 when nothing moves)."""
        b = self.bytes_total
        return self.ops / b if b else 0.0

    @property
    def is_matrix(self) -> bool:
        return self.family in MATRIX_FAMILIES and self.macs > 0

    def scaled(self, factor: int) -> "Workload":
        """The same work repeated ``factor`` times (loop bodies, scan steps)."""
        return replace(
            self,
            parts=tuple((op, w, n * factor) for op, w, n in self.parts),
            iterations=self.iterations * factor,
            host_waits=self.host_waits * factor,
            macs=self.macs * factor,
            other_ops=self.other_ops * factor,
            act_bytes_read=self.act_bytes_read * factor,
            weight_bytes=self.weight_bytes * factor,
            bytes_written=self.bytes_written * factor,
            launches=self.launches * factor,
            gemm=None if self.gemm is None else replace(self.gemm, count=self.gemm.count * factor),
        )

    def with_width(self, n2: int) -> "Workload":
        """What-if: the same layer with ``n2`` output channels / features (the GEMM's N) instead of
        ``gemm.n``. MACs, epilogue ops, weights, output bytes and parallel outputs scale with the
        width; the input does not. The one width what-if (fixes and ``dnnperf shapes`` use it)."""
        g = self.gemm
        if g is None or g.n <= 0 or self.kernel == EXPERTS_KERNEL:  # no one width (vocab.EXPERTS_KERNEL)
            return self
        f = n2 / g.n
        return replace(self, gemm=replace(g, n=n2), macs=int(round(self.macs * f)),
                       other_ops=int(round(self.other_ops * f)), weight_bytes=int(round(self.weight_bytes * f)),
                       bytes_written=int(round(self.bytes_written * f)),
                       parallel_work=max(1, int(round(self.parallel_work * f))))

    def with_in_channels(self, c2: int) -> "Workload":
        """What-if: an ungrouped convolution reading ``c2`` input channels instead of ``conv[0]`` (the
        input zero-padded): MACs, the product's K, the weights and the input bytes scale with the
        channels (a fused layer's other inputs too: meant for a network's first convolution, whose
        only activation input is the image); the output and its epilogue do not."""
        g = self.gemm
        if g is None or not self.conv or self.conv[0] <= 0 or self.family != "conv":
            return self
        f = c2 / self.conv[0]
        return replace(self, conv=(c2, *self.conv[1:]), gemm=replace(g, k=int(round(g.k * f))),
                       macs=int(round(self.macs * f)), weight_bytes=int(round(self.weight_bytes * f)),
                       act_bytes_read=int(round(self.act_bytes_read * f)))

    def with_batch(self, factor: int) -> "Workload | None":
        """What-if: the same layer at ``factor`` times the batch, for the layers whose batch is known
        to run along the product's rows (a convolution's N x OH x OW, a weight product's M, a
        recurrent layer's every step's M): MACs, other ops, activation bytes, output bytes, parallel
        outputs and ``gemm.m`` scale, the weights do not. None for any other layer (a product of two
        activations carries the batch in ``gemm.count`` or in M depending on the graph: no guess)."""
        g = self.gemm
        rows = g is not None and (g.count == 1 or self.family == "rnn")  # every product's M is the batch's
        if g is None or factor < 1 or not (self.conv or (self.weight_bytes > 0 and rows)):
            return None
        return replace(self, gemm=replace(g, m=g.m * factor), macs=self.macs * factor, other_ops=self.other_ops * factor,
                       act_bytes_read=self.act_bytes_read * factor, bytes_written=self.bytes_written * factor,
                       parallel_work=self.parallel_work * factor)

    def __add__(self, other: "Workload") -> "Workload":
        return Workload(
            family=self.family if self.ops >= other.ops else other.family,
            dtype=self.dtype,
            macs=self.macs + other.macs,
            other_ops=self.other_ops + other.other_ops,
            act_bytes_read=self.act_bytes_read + other.act_bytes_read,
            weight_bytes=self.weight_bytes + other.weight_bytes,
            bytes_written=self.bytes_written + other.bytes_written,
            parallel_work=max(self.parallel_work, other.parallel_work),
            gemm=self.gemm or other.gemm,
            launches=self.launches + other.launches,
            row=self.row or other.row,
            subnormals=self.subnormals + other.subnormals,
            host_waits=self.host_waits + other.host_waits,
            weights_unread=self.weights_unread + other.weights_unread,
        )


PRECISION_OF_DTYPE = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "int8": "int8", "uint8": "int8", "int4": "int4", "uint4": "int4",
    "float8e4m3fn": "fp8", "float8e4m3fnuz": "fp8", "float8e5m2": "fp8", "float8e5m2fnuz": "fp8",
    "float4e2m1": "fp4",
    "int32": "fp32", "int64": "fp32", "bool": "fp32", "int16": "fp16", "uint16": "fp16",
}
DTYPE_OF_PRECISION = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16",
                      "int8": "int8", "fp8": "float8e4m3fn", "int4": "int4", "fp4": "float4e2m1",
                      "fp64": "float64"}
