"""Ground truth on this machine's CPU through ONNX Runtime (optional extra: ``dnnperf[measure]``).

``calibrate()`` measures peak matrix throughput, achievable bandwidth, per-op dispatch cost and
per-family efficiency, and returns a profile dict in the normal schema. ``validate()`` runs a model
(random weights for skeletons; external-data paths are never opened), reads ONNX Runtime's
per-node profile, maps its (possibly fused) kernels back to dnnperf's layers and compares.
This is the only module that imports onnxruntime, and only when called.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import tempfile
import time

import numpy as np

from dnnperf.errors import DnnperfError


def _ort():
    try:
        import onnxruntime as ort
    except ImportError:
        raise DnnperfError('onnxruntime is not installed: pip install "dnnperf[measure]"') from None
    ort.set_default_logger_severity(3)
    return ort


def _session(model_bytes: bytes, threads: int | None, profile_prefix: str | None = None):
    ort = _ort()
    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    try:
        return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises its own exception types
        raise DnnperfError(f"ONNX Runtime could not load the model: {' '.join(str(exc).split())[:300]}") from None


def robust_median(ts: list[float]) -> float:
    """Median of the faster half of the runs: on a shared machine other tenants only ever slow a run
    down, so the faster half describes the device and the slower half describes the neighbours."""
    ts = sorted(ts)
    return statistics.median(ts[: max(1, (len(ts) + 1) // 2)])


def _median_run(sess, feeds, warmup: int, runs: int, budget_s: float) -> float:
    for _ in range(warmup):
        sess.run(None, feeds)
    ts = []
    t_end = time.perf_counter() + budget_s
    for i in range(runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        ts.append(time.perf_counter() - t)
        if time.perf_counter() > t_end and i >= 2:
            break
    return robust_median(ts)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# --------------------------------------------------------------------------------------------
# micro-models


def _model(nodes, inputs, outputs, inits=(), opset=17):
    from onnx import helper

    g = helper.make_graph(nodes, "calib", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name, shape, dtype=1):
    from onnx import helper

    return helper.make_tensor_value_info(name, dtype, shape)


def _w(name, shape, dtype=np.float32, rng=None):
    from onnx import numpy_helper

    rng = rng or np.random.default_rng(0)
    if np.issubdtype(dtype, np.integer):
        return numpy_helper.from_array(rng.integers(0, 100, size=shape).astype(dtype), name)
    return numpy_helper.from_array(rng.standard_normal(shape).astype(dtype), name)


M_ROWS = (1, 4, 16, 49, 128, 512)
NK_DIMS = (8, 24, 64)
OP_MICRO = ("Pow", "Tanh", "Erf", "Exp", "Sigmoid", "Div", "Sqrt", "Log")


def onchip_mb() -> float:
    """The largest CPU cache reported by the kernel, in MB (4 MB when unknown)."""
    best = 0.0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for d in os.listdir(base):
            try:
                with open(os.path.join(base, d, "size"), encoding="utf-8") as fh:
                    txt = fh.read().strip().upper()
            except OSError:
                continue
            mult = 1e6 if txt.endswith("M") else (1e3 if txt.endswith("K") else 1.0)
            best = max(best, float(txt.rstrip("KMB")) * mult / 1e6)
    except OSError:
        pass
    return best or 4.0


def micro_models(quick: bool) -> dict:
    """name -> (model, feeds, family). Sizes are big enough to time, small enough for ~1 minute."""
    from onnx import helper

    rng = np.random.default_rng(0)
    n = 512 if quick else 1024
    out = {}
    out["gemm_fp32"] = (_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", [n, n])], [_vi("y", None)],
                               [_w("b", [n, n])]), {"a": rng.standard_normal((n, n)).astype(np.float32)}, "matmul")
    out["gemm_int8"] = (_model([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], [_vi("a", [n, n], 2)],
                               [_vi("y", None, 6)], [_w("b", [n, n], np.uint8)]),
                        {"a": rng.integers(0, 255, (n, n)).astype(np.uint8)}, "matmul")
    e = (8 if quick else 16) * 1024 * 1024
    out["bandwidth_add"] = (_model([helper.make_node("Add", ["a", "b"], ["y"])], [_vi("a", [e]), _vi("b", [e])],
                                   [_vi("y", None)]),
                            {"a": np.ones(e, np.float32), "b": np.ones(e, np.float32)}, "elementwise")
    cold_n = 8192 if quick else 16384  # weights of 25-50 MB: larger than the last-level cache
    out["gemm_cold"] = (_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", [49, 768])], [_vi("y", None)],
                               [_w("b", [768, cold_n])]), {"a": rng.standard_normal((49, 768)).astype(np.float32)}, None)
    out["gemm_ffn"] = (_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", [197, 768])], [_vi("y", None)],
                              [_w("b", [768, 3072])]), {"a": rng.standard_normal((197, 768)).astype(np.float32)}, "matmul")
    for m_rows in M_ROWS:  # thin in M (few rows), N = K = 768
        out[f"gemm_m{m_rows}"] = (_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", [m_rows, 768])],
                                         [_vi("y", None)], [_w("b", [768, 768])]),
                                  {"a": rng.standard_normal((m_rows, 768)).astype(np.float32)}, "m_curve")
    for d in NK_DIMS:  # thin in N and K (few channels), M = 3136 (56 x 56 pixels)
        out[f"gemm_m{d}nk"] = (_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", [3136, d])],
                                      [_vi("y", None)], [_w("b", [d, d])]),
                               {"a": rng.standard_normal((3136, d)).astype(np.float32)}, "m_curve")
    c = 256 * 1024
    out["onchip_add"] = (_model([helper.make_node("Add", ["a", "b"], ["y"])], [_vi("a", [c]), _vi("b", [c])],
                                [_vi("y", None)]), {"a": np.ones(c, np.float32), "b": np.ones(c, np.float32)}, None)
    xe = rng.standard_normal((1, 128, 3072)).astype(np.float32)
    for op in OP_MICRO:
        binary = op in ("Pow", "Div")
        ins = ["x", "p"] if binary else ["x"]
        inits = [_w("p", [])] if binary else []
        out[f"op_{op}"] = (_model([helper.make_node(op, ins, ["y"])], [_vi("x", [1, 128, 3072])], [_vi("y", None)], inits),
                           {"x": np.abs(xe) if op in ("Pow", "Sqrt", "Log") else xe}, "op")
    chain = [helper.make_node("Relu", ["x" if i == 0 else f"t{i - 1}"], [f"t{i}" if i < 199 else "y"]) for i in range(200)]
    out["dispatch_200"] = (_model(chain, [_vi("x", [1, 16])], [_vi("y", None)]), {"x": np.ones((1, 16), np.float32)}, None)
    out["dispatch_1"] = (_model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [1, 16])], [_vi("y", None)]),
                         {"x": np.ones((1, 16), np.float32)}, None)
    # family representatives
    x56 = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    out["conv"] = (_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [_vi("x", [1, 64, 56, 56])],
                          [_vi("y", None)], [_w("w", [64, 64, 3, 3])]), {"x": x56}, "conv")
    x144 = rng.standard_normal((1, 144, 56, 56)).astype(np.float32)
    out["depthwise_conv"] = (_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=144)],
                                    [_vi("x", [1, 144, 56, 56])], [_vi("y", None)], [_w("w", [144, 1, 3, 3])]),
                             {"x": x144}, "depthwise_conv")
    out["grouped_conv"] = (_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=4)],
                                  [_vi("x", [1, 64, 56, 56])], [_vi("y", None)], [_w("w", [64, 16, 3, 3])]),
                           {"x": x56}, "grouped_conv")
    xs = rng.standard_normal((128, 768)).astype(np.float32)
    out["small_gemm"] = (_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", [128, 768])], [_vi("y", None)],
                                [_w("b", [768, 768])]), {"a": xs}, "matmul")
    xa = rng.standard_normal((1, 12, 128, 128)).astype(np.float32)
    out["attention_like"] = (_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", [1, 12, 128, 64]),
                                                                                    _vi("b", [1, 12, 64, 128])],
                                    [_vi("y", None)]),
                             {"a": rng.standard_normal((1, 12, 128, 64)).astype(np.float32),
                              "b": rng.standard_normal((1, 12, 64, 128)).astype(np.float32)}, "attention")
    out["elementwise"] = (_model([helper.make_node("Sigmoid", ["x"], ["y"])], [_vi("x", [1, 64, 56, 56])], [_vi("y", None)]),
                          {"x": x56}, "elementwise")
    out["norm"] = (_model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)],
                          [_vi("x", [1, 197, 768])], [_vi("y", None)], [_w("g", [768]), _w("b", [768])]),
                   {"x": rng.standard_normal((1, 197, 768)).astype(np.float32)}, "norm")
    out["softmax"] = (_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [_vi("x", [1, 12, 128, 128])],
                             [_vi("y", None)]), {"x": xa}, "softmax")
    out["op_Transpose"] = (_model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])],
                                  [_vi("x", [1, 64, 56, 56])], [_vi("y", None)]), {"x": x56}, "op")
    out["movement"] = (_model([helper.make_node("Concat", ["x", "x2"], ["y"], axis=1)],
                              [_vi("x", [1, 64, 56, 56]), _vi("x2", [1, 64, 56, 56])], [_vi("y", None)]),
                       {"x": x56, "x2": x56}, "movement")
    out["pool"] = (_model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                          [_vi("x", [1, 64, 56, 56])], [_vi("y", None)]), {"x": x56}, "pool")
    out["reduce"] = (_model([helper.make_node("GlobalAveragePool", ["x"], ["y"])], [_vi("x", [1, 64, 56, 56])],
                            [_vi("y", None)]), {"x": x56}, "reduce")
    return out


def calibrate(quick: bool = False, threads: int | None = None, progress=None) -> dict:
    """Measure this CPU and return a profile dict (schema dnnperf-hw/1)."""
    ort = _ort()
    t0 = time.perf_counter()
    models = micro_models(quick)
    runs = 15 if quick else 60
    budget = 0.8 if quick else 3.5
    times = {}
    for name, (m, feeds, _) in models.items():
        sess = _session(m.SerializeToString(), threads)
        times[name] = _median_run(sess, feeds, warmup=2, runs=runs, budget_s=budget)
        del sess
        if progress:
            progress(name)
    n = 512 if quick else 1024
    peak_fp32 = max(2 * n ** 3 / times["gemm_fp32"], 2 * 197 * 768 * 3072 / times["gemm_ffn"],
                    2 * 128 * 768 * 768 / times["small_gemm"]) / 1e12
    peak_int8 = 2 * n ** 3 / times["gemm_int8"] / 1e12
    e = (8 if quick else 16) * 1024 * 1024
    bw = 3 * 4 * e / times["bandwidth_add"] / 1e9
    dispatch_us = max((times["dispatch_200"] - times["dispatch_1"]) / 199 * 1e6, 0.05)
    onchip_bw = 3 * 4 * 256 * 1024 / max(times["onchip_add"] - dispatch_us * 1e-6, 1e-9) / 1e9
    n_threads = threads or os.cpu_count() or 1
    profile = {
        "schema": "dnnperf-hw/1",
        "name": "local",
        "title": f"{cpu_name()} ({n_threads} threads, ONNX Runtime CPU), calibrated",
        "kind": "cpu",
        "headline": {"precision": "fp32", "tops": _sig(peak_fp32)},
        "units": [{"name": "cpu", "serves": ["matrix", "vector"],
                   "peak_tops": {"fp32": _sig(peak_fp32), "int8": _sig(max(peak_int8, peak_fp32))}}],
        "memory": {"dram_gbs": _sig(bw), "onchip_mb": _sig(onchip_mb()), "onchip_gbs": _sig(max(onchip_bw, bw))},
        "parallelism": {"compute_units": n_threads, "lanes": n_threads * 8},
        "launch_overhead_us": _sig(dispatch_us),
        "host_link_gbs": None,
        "sources": {"all": "measured on this machine by `dnnperf calibrate` (medians after warm-up)"},
    }
    from dnnperf.hardware import profile_from_dict

    base = profile_from_dict(profile, "calibration")
    eff: dict[str, list] = {}
    op_eff = {}
    m_curve: dict[int, float] = {}
    for name, (m, _feeds, family) in models.items():
        if family is None or name in ("gemm_fp32", "gemm_int8", "bandwidth_add"):
            continue
        # subtract the fixed cost of one session.run (binding, allocation) measured on a 1-op model
        kernel_s = max(times[name] - times["dispatch_1"] + dispatch_us * 1e-6, 1e-7)
        ratio = min(1.0, max(0.01, _predict_micro(m, base) / kernel_s))
        if family == "op":
            op_eff[name[3:]] = _sig(ratio)
        elif family == "m_curve":
            key = int(name[6:].replace("nk", ""))
            m_curve[key] = _sig(min(ratio, m_curve.get(key, 1.0)))
        else:
            eff.setdefault(family, []).append(ratio)
    profile["efficiency"] = {k: _sig(statistics.median(v)) for k, v in sorted(eff.items())}
    profile["op_efficiency"] = dict(sorted(op_eff.items()))
    # how much of a cache-busting GEMM's weight streaming hides behind its math
    cold_n = 8192 if quick else 16384
    t_c = 2 * 49 * 768 * cold_n / (peak_fp32 * 1e12)
    t_m = 4 * 768 * cold_n / (bw * 1e9)
    t_meas = max(times["gemm_cold"] - times["dispatch_1"], 1e-9)
    profile["memory_overlap"] = _sig(min(1.0, max(0.0, (t_c + t_m - t_meas) / min(t_c, t_m))))
    profile["matrix_m_efficiency"] = dict(sorted(m_curve.items()))
    profile["measured"] = {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_name(),
        "threads": n_threads,
        "onnxruntime": ort.__version__,
        "mode": "quick" if quick else "default",
        "seconds": round(time.perf_counter() - t0, 1),
        "micro_benchmarks_s": {k: _sig(v) for k, v in sorted(times.items())},
    }
    return profile


def _predict_micro(m, hw) -> float:
    """dnnperf's estimate for a micro-model (efficiency 1, no launch cost): the roofline part."""
    from dnnperf.analysis import Settings
    from dnnperf.api import analyze, inspect_graph
    from dnnperf.load import graph_from_model

    from onnx import ModelProto

    m2 = ModelProto()
    m2.CopyFrom(m)
    insp = inspect_graph(graph_from_model(m2), "<micro>")
    rep = analyze(insp, hw, Settings(), with_fixes=False)
    return sum(c.time_s - c.t_launch for c in rep.score.layers) + hw.launch_overhead_us * 1e-6


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


# --------------------------------------------------------------------------------------------
# validate


def runnable_bytes(path: str) -> bytes:
    """The model with random weights wherever the payload is absent or external (never opened)."""
    from onnx import TensorProto, numpy_helper

    from dnnperf.ir import DTYPE_NAMES
    from dnnperf.load import parse_model, read_model_bytes

    model = parse_model(read_model_bytes(path), path)
    rng = np.random.default_rng(0)

    def fill(g):
        for init in g.initializer:
            if init.data_location == TensorProto.EXTERNAL:
                dims = tuple(init.dims)
                dt = {1: np.float32, 10: np.float16, 7: np.int64, 6: np.int32, 3: np.int8, 2: np.uint8,
                      11: np.float64, 9: np.bool_}.get(init.data_type)
                if dt is None:
                    raise DnnperfError(f"cannot materialise weights of dtype {DTYPE_NAMES.get(init.data_type)} for validation")
                if np.issubdtype(dt, np.floating):
                    arr = (rng.standard_normal(dims) * 0.05).astype(dt)
                elif dt is np.bool_:
                    arr = np.ones(dims, dtype=bool)
                else:
                    arr = np.zeros(dims, dtype=dt)
                new = numpy_helper.from_array(arr, init.name)
                init.CopyFrom(new)
        for n in g.node:
            for a in n.attribute:
                if a.type == 5:
                    fill(a.g)

    fill(model.graph)
    return model.SerializeToString()


def _feeds(graph) -> dict:
    rng = np.random.default_rng(1)
    feeds = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        if t.shape is None:
            raise DnnperfError(f"input '{name}' has no resolved shape: pass --batch/--dim/--input-shape")
        if t.dtype in ("int64", "int32"):
            feeds[name] = rng.integers(0, 100, size=t.shape).astype(np.int64 if t.dtype == "int64" else np.int32)
        elif t.dtype == "float16":
            feeds[name] = rng.standard_normal(t.shape).astype(np.float16)
        elif t.dtype == "bool":
            feeds[name] = np.ones(t.shape, dtype=bool)
        else:
            feeds[name] = rng.standard_normal(t.shape).astype(np.float32)
    return feeds


def measure(path: str, graph, threads: int | None, runs: int = 20, warmup: int = 3):
    """(median model latency s, {ORT kernel name: (op, median us)}) with profiling on."""
    data = runnable_bytes(path)
    feeds = _feeds(graph)
    # plain session for the end-to-end latency (profiling adds overhead per node)
    sess = _session(data, threads)
    latency = _median_run(sess, feeds, warmup=warmup, runs=runs, budget_s=10.0)
    # an idle session's worker threads may keep spinning: free it before the profiled run
    del sess
    import gc

    gc.collect()
    with tempfile.TemporaryDirectory() as tmp:
        prof = _session(data, threads, os.path.join(tmp, "ort"))
        for _ in range(warmup + runs):
            prof.run(None, feeds)
        pfile = prof.end_profiling()
        with open(pfile, encoding="utf-8") as fh:
            events = json.load(fh)
    per: dict[str, list] = {}
    ops: dict[str, str] = {}
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        name = e["name"][: -len("_kernel_time")]
        per.setdefault(name, []).append(float(e["dur"]))
        ops[name] = e.get("args", {}).get("op_name", "?")
    # drop warm-up occurrences: keep the last `runs` of each kernel
    kernels = {k: (ops[k], robust_median(v[-runs:])) for k, v in per.items()}
    return latency, kernels


def map_kernels(kernels: dict, graph, layers) -> tuple[dict, dict]:
    """Attribute each ORT kernel to the dnnperf layer it implements.

    ORT fuses nodes and renames them (e.g. ``<tensor>_nchwc`` for layout-transformed convs). A
    kernel is matched by its node name, else by the tensor its name is derived from (the output of
    the last fused node), else it stays unmatched (e.g. layout reorders ORT adds) and is reported.
    Returns ({layer name: measured us}, {unmatched kernel: us}).
    """
    node_to_layer = {}
    for l in layers:
        for n in l.nodes:
            node_to_layer[n] = l.name
    producer = {}
    for n in graph.nodes:
        for o in n.outputs:
            producer[o] = n.name
    measured: dict[str, float] = {}
    unmatched: dict[str, float] = {}
    for k, (_op, us) in sorted(kernels.items()):
        target = None
        cands = [k]
        for suf in ("_nchwc", "_output_0_nchwc"):
            if k.endswith(suf):
                cands.append(k[: -len(suf)])
        for c in cands:
            if c in node_to_layer:
                target = node_to_layer[c]
                break
            if c in producer and producer[c] in node_to_layer:
                target = node_to_layer[producer[c]]
                break
        if target is None:
            import re

            # ORT names fused kernels "<first node>/<SomethingFusion>/" or "<node>_token_<n>"
            base = re.sub(r"/[A-Za-z0-9]*Fusion/?$", "", k).split("_token_")[0]
            if base in node_to_layer:
                target = node_to_layer[base]
        if target is None:
            unmatched[k] = us
        else:
            measured[target] = measured.get(target, 0.0) + us
    return measured, unmatched


def validate(path: str, hw, overrides, threads: int | None = None, runs: int = 20) -> dict:
    from dnnperf.analysis import Settings
    from dnnperf.api import analyze, inspect_graph
    from dnnperf.load import load_graph

    graph = load_graph(path, overrides)
    insp = inspect_graph(graph, path)
    rep = analyze(insp, hw, Settings(fusion="typical"), with_fixes=False)
    latency, kernels = measure(path, graph, threads, runs=runs)
    layers = [c.layer for c in rep.score.layers]
    meas, unmatched = map_kernels(kernels, graph, layers)
    pred = {c.name: c.time_s for c in rep.score.layers if c.time_s > 0}
    rows = []
    for c in rep.score.layers:
        if c.name not in meas and c.time_s == 0:
            continue
        m_s = meas.get(c.name, 0.0) * 1e-6
        rows.append({"layer": c.name, "op_type": c.layer.op_type, "predicted_s": _sig(c.time_s),
                     "measured_s": _sig(m_s), "error": _sig((c.time_s - m_s) / m_s) if m_s > 0 else None})
    top_meas = [k for k, _ in sorted(meas.items(), key=lambda kv: (-kv[1], kv[0]))[:5]]
    # tie-aware: identical layers (12 equal encoder blocks) predict equal times, so a layer is "in the
    # predicted top-k" when its predicted time reaches the k-th largest predicted time
    ranked_pred = sorted(pred.values(), reverse=True)
    kth5 = ranked_pred[min(4, len(ranked_pred) - 1)] if ranked_pred else 0.0
    kth10 = ranked_pred[min(9, len(ranked_pred) - 1)] if ranked_pred else 0.0
    top_pred5 = [k for k in pred if pred[k] >= kth5 * (1 - 1e-9)]
    top_pred10 = [k for k in pred if pred[k] >= kth10 * (1 - 1e-9)]
    predicted = rep.score.totals["latency_s"]
    return {
        "schema_version": "dnnperf-validate/1",
        "model": os.path.basename(path),
        "hardware": hw.name,
        "threads": threads or os.cpu_count(),
        "predicted_s": _sig(predicted),
        "measured_s": _sig(latency),
        "error": _sig((predicted - latency) / latency),
        "measured_top5": top_meas,
        "top5_also_predicted_top5": [k for k in top_meas if k in top_pred5],
        "top5_inside_predicted_top10": all(k in top_pred10 for k in top_meas),
        "kernels_matched": len(kernels) - len(unmatched),
        "kernels_unmatched": {k: _sig(v * 1e-6) for k, v in sorted(unmatched.items())},
        "layers": rows,
    }
