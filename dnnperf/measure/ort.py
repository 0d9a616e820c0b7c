"""ONNX Runtime plumbing: sessions, robust timing, runnable copies of skeletons, profiled runs.

The only module that imports onnxruntime, and only when called (optional extra ``dnnperf[measure]``).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time

import numpy as np

from dnnperf.errors import DnnperfError


def ort():
    try:
        import onnxruntime
    except ImportError:
        raise DnnperfError('onnxruntime is not installed: pip install "dnnperf[measure]"') from None
    onnxruntime.set_default_logger_severity(4)  # fatal only: a run that fails is dnnperf's one line, not ORT's log too
    return onnxruntime


def session(model_bytes: bytes, threads: int | None, profile_prefix: str | None = None):
    rt = ort()
    so = rt.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    try:
        return rt.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises its own exception types
        raise DnnperfError(f"ONNX Runtime could not load the model: {' '.join(str(exc).split())[:300]}") from None


def robust_median(ts: list[float]) -> float:
    """Median of the faster half of the runs: on a shared machine other tenants only ever slow a run
    down, so the faster half describes the device and the slower half describes the neighbours."""
    ts = sorted(ts)
    return statistics.median(ts[: max(1, (len(ts) + 1) // 2)])


def timed_runs(sess, feeds, warmup: int, runs: int, budget_s: float) -> list[float]:
    """Wall-clock seconds of up to ``runs`` runs after ``warmup`` (at least 3 runs; stops after ``budget_s``)."""
    for _ in range(warmup):
        try:
            sess.run(None, feeds)
        except Exception as exc:  # ORT raises its own exception types; the first run tells
            raise DnnperfError(f"ONNX Runtime could not run the model with generated inputs: "
                               f"{' '.join(str(exc).split())[:300]}") from None
    ts = []
    t_end = time.perf_counter() + budget_s
    for i in range(runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        ts.append(time.perf_counter() - t)
        if time.perf_counter() > t_end and i >= 2:
            break
    return ts


def median_run(sess, feeds, warmup: int, runs: int, budget_s: float) -> float:
    return robust_median(timed_runs(sess, feeds, warmup, runs, budget_s))


# the measurement protocol shared by calibrate and validate
# (runs, budget s) per micro-benchmark in a round of a default / quick calibration; validate re-times
# the anchors exactly so: a memory stream speeds up over its first runs (a 192 MB Add: 7.1 ms in its
# first runs after warm-up, 6.3-6.6 from the fifteenth), so the 6 runs validate gives a model put
# the anchor ~8% slower than its calibration on a quiet machine, and every validation's drift
# correction read the memory 0.84-0.89x as fast as calibrated
CAL_TIMING = {False: (30, 1.0), True: (10, 0.25)}
ROUND_TOLERANCE = 0.03  # two rounds agree when one more round moved every median less than this
SMALL_TOLERANCE = 0.10  # ... or this for timings under SMALL_S (dispatch-sized)
SMALL_S = 50e-6


def settled_times(jobs: dict, rounds_min: int, rounds_max: int, runs: int, budget_s: float, progress=None,
                  strict: bool = True, settle_on: tuple | None = None, timing: dict | None = None,
                  check=None) -> dict:
    """Interleaved rounds over ``jobs`` ({name: (session or a function making one, feeds)}): sessions
    made by a function live only while their job is timed (an idle session's threads keep spinning
    and slow the others). Each round times every job once (robust median of its faster runs: other
    tenants only ever slow a run down), rotating the order so that a slow moment hits different
    jobs. A job's time is the median of its rounds: on a shared machine the fastest round is a lucky
    moment that does not come back (minimums of back-to-back calibrations differ by up to 60%, their
    medians over time by a few percent). Rounds repeat until one more round moves no job's median by
    more than the tolerance (and at least ``rounds_min`` ran; ``settle_on``: only these jobs are
    waited for, the others are timed in the same rounds); after ``rounds_max`` rounds without
    agreement the machine is too noisy (TooNoisy, exit 4), or, with ``strict=False`` (the test suite
    on shared CI machines), the medians so far are returned marked ``settled: False``.
    ``timing``: {job: (runs, budget_s)} for jobs timed otherwise than ``runs`` / ``budget_s``
    (validate's anchors: as calibrate timed them, ``CAL_TIMING``), or (runs, budget_s, rounds) for a
    job timed in its first ``rounds`` rounds only (it must not hold the others back: ``settle_on``).
    ``check(history)``: asked once the medians stop moving, None when what the times give holds as
    well (calibrate: its figures repeat between the two halves of the rounds), else what does not (the
    rounds go on; the TooNoisy message and the result's ``unsettled`` say it).
    Returns {"times": {name: s}, "rounds": n, "spread": {name: max/min - 1 over rounds}, "settled": bool,
    "history": {name: [s of each round it was timed in]}}, with "unsettled" (the last round's check)
    when a check kept it from settling."""
    from dnnperf.errors import TooNoisy

    names = list(jobs)
    history: dict[str, list[float]] = {n: [] for n in names}
    mid: dict[str, float] = {}
    moved: dict[str, float] = {}
    for r in range(rounds_max):
        k = r % len(names) if names else 0
        moved = {}
        why = None  # this round's check (asked only once the medians stop moving)
        for n in names[k:] + names[:k]:
            n_runs, budget, *cap = (timing or {}).get(n, (runs, budget_s))
            if cap and len(history[n]) >= cap[0]:
                continue
            sess, feeds = jobs[n]
            made = callable(sess)
            if made:
                sess = sess()
            t = median_run(sess, feeds, warmup=2, runs=n_runs, budget_s=budget)
            if made:
                del sess
            history[n].append(t)
            old = mid.get(n)
            mid[n] = statistics.median(history[n])
            if old is not None and (settle_on is None or n in settle_on):
                moved[n] = abs(old - mid[n]) / old
            if progress:
                progress(n)
        if r + 1 >= rounds_min and moved and all(
                v <= (SMALL_TOLERANCE if mid[n] < SMALL_S else ROUND_TOLERANCE) for n, v in moved.items()):
            why = check(history) if check else None
            if why is None:
                return {"times": mid, "rounds": r + 1, "settled": True, "history": history,
                        "spread": {n: max(h) / min(h) - 1 for n, h in history.items()}}
    if not strict:
        return {"times": mid, "rounds": rounds_max, "settled": False, "history": history,
                "spread": {n: max(h) / min(h) - 1 for n, h in history.items()}, **({"unsettled": why} if why else {})}
    if why:
        raise TooNoisy(f"the figures did not repeat in {rounds_max} rounds ({why}): the machine is too busy — stop "
                       "other work or pin the run (--threads), then try again; --accept-noisy keeps such figures")
    worst = max(moved, key=lambda n: moved[n]) if moved else "?"
    raise TooNoisy(f"measurements did not settle in {rounds_max} rounds (e.g. '{worst}' still moved by "
                   f"{moved.get(worst, 0) * 100:.0f}% in the last round): the machine is too busy — stop other "
                   "work or pin the run (--threads), then try again")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# a stand-in weight's value by what reads it: normalisation scales and variances 1, their shifts and
# means 0, so a skeleton's activations keep a trained network's magnitude
_NORM_INPUTS = {"BatchNormalization": (1.0, 0.0, 0.0, 1.0), "InstanceNormalization": (1.0, 0.0),
                "LayerNormalization": (1.0, 0.0), "SimplifiedLayerNormalization": (1.0,),
                "SkipLayerNormalization": (None, 1.0, 0.0), "SkipSimplifiedLayerNormalization": (None, 1.0),
                "GroupNormalization": (1.0, 0.0), "RMSNormalization": (1.0,)}


def _fan_in(dims: tuple, node, index: int) -> int | None:
    """The number of products each output of ``node`` sums over this weight (None: not a weight of
    a matrix op)."""
    op = node.op_type
    if len(dims) < 2:
        return None
    if op in ("Conv", "ConvTranspose", "QLinearConv", "ConvInteger") and index in (1, 3):
        n = 1
        for d in dims[1:]:
            n *= d
        return n if op != "ConvTranspose" else dims[0]
    if op in ("MatMul", "MatMulInteger", "FusedMatMul", "MatMulNBits") and index >= 1:
        return dims[-2]
    if op == "Gemm" and index == 1:
        trans = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return dims[1] if trans else dims[0]
    if op in ("LSTM", "GRU", "RNN") and index in (1, 2):
        return dims[-1]
    return None


def runnable_bytes(path: str, constants: dict[str, float] | None = None, filled: list | None = None) -> bytes:
    """The model with stand-in weights wherever the payload is absent or external (never opened);
    ``constants``: the value to fill such an initializer with, by name, where the estimate assumed
    one (``tanh_gelu.tanh_gelu_constants``); the names so filled are appended to ``filled``.

    The values are scaled as a trained network's are, so activations keep their size through the
    layers: a matrix weight has standard deviation 1/sqrt(fan-in), normalisation parameters are the
    identity (scale and variance 1, shift and mean 0). With one small scale everywhere activations
    shrink layer after layer into subnormal floats, which x86 computes many times slower (swin_t:
    70 ms measured, 56 ms with subnormals flushed): a cost no trained model pays."""
    from onnx import TensorProto, numpy_helper

    from dnnperf.ir import DTYPE_NAMES
    from dnnperf.load import parse_model, read_model_bytes
    from dnnperf.load.topology import walk_graphs

    model = parse_model(read_model_bytes(path), path)
    rng = np.random.default_rng(0)
    readers: dict[str, tuple] = {}
    for g in walk_graphs(model.graph, max_depth=64):
        for n in g.node:
            for k, i in enumerate(n.input):
                if i and i not in readers:
                    readers[i] = (n, k)
    for g in walk_graphs(model.graph, max_depth=64):
        for init in g.initializer:
            if init.data_location != TensorProto.EXTERNAL:
                continue
            dims = tuple(init.dims)
            dt = {1: np.float32, 10: np.float16, 7: np.int64, 6: np.int32, 3: np.int8, 2: np.uint8,
                  11: np.float64, 9: np.bool_}.get(init.data_type)
            if dt is None:
                raise DnnperfError(f"cannot materialise weights of dtype {DTYPE_NAMES.get(init.data_type)} for validation")
            if constants and init.name in constants and np.issubdtype(dt, np.floating):
                arr = np.full(dims, constants[init.name], dtype=dt)
                if filled is not None:
                    filled.append(init.name)
            elif np.issubdtype(dt, np.floating):
                node, k = readers.get(init.name, (None, -1))
                fixed = _NORM_INPUTS.get(node.op_type, ()) if node is not None else ()
                fan = _fan_in(dims, node, k) if node is not None else None
                if 0 <= k < len(fixed) and fixed[k] is not None:  # (k -1: an initializer no node reads)
                    arr = np.full(dims, fixed[k], dtype=dt)
                elif fan:
                    arr = (rng.standard_normal(dims) / np.sqrt(fan)).astype(dt)
                else:  # biases, embeddings, anything else: small values
                    arr = (rng.standard_normal(dims) * 0.05).astype(dt)
            elif dt is np.bool_:
                arr = np.ones(dims, dtype=bool)
            else:
                arr = np.zeros(dims, dtype=dt)
            init.CopyFrom(numpy_helper.from_array(arr, init.name))
    return model.SerializeToString()


def feeds_for(graph) -> dict:
    """Random inputs of the shapes and dtypes the (shape-resolved) graph declares; an input whose value
    the estimate used (``--value``: a Loop's trip count, a window's size) gets that value, so the run
    measures what was estimated."""
    rng = np.random.default_rng(1)
    feeds = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        if t.shape is None:
            raise DnnperfError(f"input '{name}' has no resolved shape: pass --batch/--dim/--input-shape")
        given = graph.values.get(name)
        if given is not None and tuple(np.shape(given)) == tuple(t.shape):
            feeds[name] = np.asarray(given).astype(_FEED_DTYPES.get(t.dtype, np.float32))
        elif t.dtype in ("int64", "int32") and "mask" in name.lower():  # attention masks: every position attends
            feeds[name] = np.ones(t.shape, dtype=np.int64 if t.dtype == "int64" else np.int32)
        elif t.dtype in ("int64", "int32"):
            feeds[name] = rng.integers(0, 100, size=t.shape).astype(np.int64 if t.dtype == "int64" else np.int32)
        elif t.dtype == "float16":
            feeds[name] = rng.standard_normal(t.shape).astype(np.float16)
        elif t.dtype == "bool":
            feeds[name] = np.ones(t.shape, dtype=bool)
        elif t.dtype == "string":  # words of a text or a category's labels: short lowercase ones
            words = np.array(["a", "b", "c", "the", "quick", "brown", "fox", "x", "y", "z"], dtype=object)
            feeds[name] = rng.choice(words, size=t.shape)
        else:
            feeds[name] = rng.standard_normal(t.shape).astype(np.float32)
    return feeds


_FEED_DTYPES = {"int64": np.int64, "int32": np.int32, "float16": np.float16, "float32": np.float32,
                "float64": np.float64, "bool": np.bool_, "int8": np.int8, "uint8": np.uint8}


# the node profiler's timing of a kernel: a chain of one-element Adds (each reading the one before),
# whose kernels do next to nothing, profiled against the same chain unprofiled
INFLATION_CHAIN = 41


def profiler_inflation_us(threads: int | None, runs: int = 60) -> float:
    """Microseconds ONNX Runtime's node profiler adds to every kernel it times. Its ``kernel_time``
    events span more than the kernel (the profiler's own bookkeeping sits inside the timed region)
    and are whole microseconds: on a 2-core EPYC VM (ONNX Runtime 1.32) a one-element Add that runs
    in 0.2 us unprofiled (a 51-Add chain less a 1-Add one, over 50) is reported at 3 us, and a
    4096-element one (0.6 us) at 3 us too; a layout conversion reported at 5 us took about 2. Read
    here as the mean reported time of a chain's Adds in a run (its slowest tenth dropped; the faster
    half of the runs: neighbours only slow a run down) less their unprofiled time per Add (the chain
    less a one-Add model, timed in turn). Subtracted from every profiled kernel (``profiled_kernels``),
    so the per-layer times of ``validate`` and the calibration's conversion figures describe the
    kernels, not the profiler."""
    from onnx import TensorProto, helper

    def chain(n: int) -> bytes:
        nodes, x = [], "x"
        for i in range(n):
            nodes.append(helper.make_node("Add", [x, "b"], [f"y{i}"]))
            x = f"y{i}"
        vi = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1]) for name in ("x", "b")]
        g = helper.make_graph(nodes, "inflation", vi, [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()

    feeds = {"x": np.ones(1, np.float32), "b": np.ones(1, np.float32)}
    long_b, one_b = chain(INFLATION_CHAIN), chain(1)
    long_s, one_s = session(long_b, threads), session(one_b, threads)
    t_long, t_one = [], []
    for s in (long_s, one_s):
        for _ in range(10):
            s.run(None, feeds)
    for _ in range(runs):
        for s, ts in ((long_s, t_long), (one_s, t_one)):
            t = time.perf_counter()
            s.run(None, feeds)
            ts.append(time.perf_counter() - t)
    per_add_us = max(robust_median(t_long) - robust_median(t_one), 0.0) / (INFLATION_CHAIN - 1) * 1e6
    del long_s, one_s  # an idle session's worker threads may keep spinning: freed before the profiled runs
    events = _events(long_b, feeds, threads, runs=runs // 2, warmup=20)
    return inflation_from([us for _name, _op, us, _io in events][20 * INFLATION_CHAIN:], per_add_us)


def inflation_from(reported: list[float], per_add_us: float, chain: int = INFLATION_CHAIN) -> float:
    """The profiler's time per kernel from the reported times of whole runs of a ``chain``-kernel
    chain (run after run) and the kernels' unprofiled time: per run the mean of its kernels less the
    slowest tenth, the robust median of those over the runs, less ``per_add_us``; never negative."""
    per_run = []
    for i in range(0, len(reported) - chain + 1, chain):
        one = sorted(reported[i:i + chain])
        per_run.append(statistics.fmean(one[: max(1, int(len(one) * 0.9))]))
    return max(robust_median(per_run) - per_add_us, 0.0) if per_run else 0.0


def profiled_kernels(data: bytes, feeds: dict, threads: int | None, runs: int, warmup: int,
                     inflation_us: float = 0.0, shapes: dict | None = None, floored: set | None = None) -> dict:
    """{ORT kernel name: (op, robust median us)} from ONNX Runtime's node profiler, in the order the
    kernels ran (the runtime's sequential executor runs them in one order every run), each less the
    profiler's own ``inflation_us`` (``profiler_inflation_us``; never below a tenth of the reported
    time). ``shapes``, when given, receives {kernel name: (input shapes, output shapes)}; ``floored``
    the kernels held at that tenth (reported at little more than the profiler's own time: faster than
    it can tell, so their figure is a guess the caller should say is one)."""
    per: dict[str, list] = {}
    ops: dict[str, str] = {}
    for name, op, us, io in _events(data, feeds, threads, runs, warmup):
        per.setdefault(name, []).append(us)
        ops[name] = op
        if shapes is not None:
            shapes[name] = io
    # drop warm-up occurrences: keep the last `runs` of each kernel
    out = {}
    for k, v in per.items():
        us = robust_median(v[-runs:])
        out[k] = (ops[k], max(us - inflation_us, 0.1 * us))
        if floored is not None and inflation_us > 0 and us - inflation_us <= 0.1 * us:
            floored.add(k)
    return out


def _events(data: bytes, feeds: dict, threads: int | None, runs: int, warmup: int) -> list:
    """[(kernel name, op, reported us, (input shapes, output shapes))] of ``warmup + runs`` profiled
    runs, in the order they ran."""
    with tempfile.TemporaryDirectory() as tmp:
        prof = session(data, threads, os.path.join(tmp, "ort"))
        for _ in range(warmup + runs):
            prof.run(None, feeds)
        pfile = prof.end_profiling()
        with open(pfile, encoding="utf-8") as fh:
            events = json.load(fh)
    out = []
    for e in sorted(events, key=lambda e: e.get("ts", 0)):
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        args = e.get("args", {})
        io = (_shapes(args.get("input_type_shape")), _shapes(args.get("output_type_shape")))
        out.append((e["name"][: -len("_kernel_time")], args.get("op_name", "?"), float(e["dur"]), io))
    return out


def _shapes(listed) -> tuple:
    """ORT's ``[{"float": [1, 48, 56, 56]}, ...]`` -> ((1, 48, 56, 56), ...)."""
    out = []
    for entry in listed or ():
        dims = next(iter(entry.values()), []) if isinstance(entry, dict) else []
        out.append(tuple(int(d) for d in dims) if isinstance(dims, list) else ())
    return tuple(out)
