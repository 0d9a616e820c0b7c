"""Issue 17: every model of ONNX's own node test suite through ``dnnperf inspect``.

    python bench/onnx_suite.py [--jobs N] [--show 20]

``onnx.backend.test.case.node.collect_testcases()`` builds one small model per test case of every
operator from the installed onnx package. Each is written to a temporary file and inspected as a user
would (in-process, the same code path as ``dnnperf inspect -f json``). Counted: crashes (an exception
that is not dnnperf's one-line error), refusals (exit 2), models analysed with unscored nodes (by op
type and reason), and models with nothing to analyse. The baseline of the time ratio is the same
files through ``onnx.load`` + ``onnx.shape_inference`` in the same run.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def cases():
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return collect_testcases()


def expected_shapes(case) -> tuple:
    """(graph output, the shape of the output array the test case expects) for its first data set."""
    import numpy as np

    if not case.data_sets:
        return ()
    outs = case.data_sets[0][1]
    return tuple((vi.name, tuple(int(d) for d in want.shape))
                 for vi, want in zip(case.model.graph.output, outs) if isinstance(want, np.ndarray))


def given_values(case) -> tuple:
    """(graph input, its values) for the case's small integer inputs and short float vectors (a Pad's
    pads, a Slice's starts, a Resize's scales): what a user passes with --value."""
    import numpy as np

    if not case.data_sets:
        return ()
    out = []
    for vi, arr in zip(case.model.graph.input, case.data_sets[0][0]):
        if isinstance(arr, np.ndarray) and arr.size <= 64 and arr.dtype.kind in "iuf" \
                and (arr.dtype.kind in "iu" or (arr.size <= 8 and arr.ndim <= 1)) and np.isfinite(arr).all() \
                and arr.dtype.name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                                   "float32", "float64"):
            out.append((vi.name, tuple(float(v) for v in arr.reshape(-1))))
    return tuple(out)


def check_one(args) -> dict:
    name, data, tmp = args[:3]
    expected = args[3] if len(args) > 3 else ()
    values = args[4] if len(args) > 4 else ()
    from dnnperf.api import inspect_model
    from dnnperf.errors import DnnperfError

    path = os.path.join(tmp, name + ".onnx")
    with open(path, "wb") as fh:
        fh.write(data)
    t = time.perf_counter()
    try:
        insp = inspect_model(path)
    except DnnperfError as exc:
        return {"name": name, "status": "refused", "reason": str(exc)[:300], "s": time.perf_counter() - t}
    except Exception as exc:  # a crash: what this benchmark exists to find
        return {"name": name, "status": "crash", "reason": f"{type(exc).__name__}: {exc}"[:300],
                "s": time.perf_counter() - t}
    s = time.perf_counter() - t
    wrong = _wrong_shapes(data, tmp, name, expected) if expected else []
    if expected and values:  # again with the inputs shapes follow from given, as a user would
        wrong += [w for w in _wrong_shapes(data, tmp, name, expected, values) if w not in wrong]
    unscored = [(r.node.domain or "", r.node.op_type, r.kind, (r.reason or "")[:120]) for r in insp.unscored()]
    if unscored:
        return {"name": name, "status": "unscored", "unscored": unscored, "s": s, "wrong_shapes": wrong}
    if not insp.costed() or insp.totals()["ops"] == 0 and insp.totals()["bytes"] == 0:
        return {"name": name, "status": "empty", "s": s, "wrong_shapes": wrong}
    return {"name": name, "status": "ok", "s": s, "wrong_shapes": wrong}


def _wrong_shapes(data: bytes, tmp: str, name: str, expected, values=()) -> list:
    """The test case's model with its outputs' declared shapes removed (so that every shape comes from
    dnnperf's rules, folding or ONNX's inference, not from the file), inspected again: each resolved
    output whose shape is not the one the case's expected array has, as (output, resolved, expected,
    whether the node is costed at a stated bound: a data-dependent output). Outputs left open are not
    counted here (they are listed as unscored). ``values``: inputs given with --value."""
    import onnx

    from dnnperf.api import inspect_model
    from dnnperf.errors import DnnperfError
    from dnnperf.ir import ShapeOverrides

    m = onnx.load_from_string(data)
    for vi in m.graph.output:
        if vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")
    path = os.path.join(tmp, name + ".bare.onnx")
    with open(path, "wb") as fh:
        fh.write(m.SerializeToString())
    try:
        insp = inspect_model(path, ShapeOverrides(values=values, strict=False))
    except DnnperfError:
        return []
    tensors = insp.graph.tensors
    bound_nodes = {u["node"] for u in insp.unsupported if u["kind"] == "bound"}
    bounds = {o for r in insp.rows if r.node.name in bound_nodes for o in r.node.outputs}
    return [(out, tensors[out].shape, want, out in bounds) for out, want in expected
            if out in tensors and tensors[out].shape is not None and tuple(tensors[out].shape) != want]


def baseline_one(args) -> float:
    name, data, tmp = args[:3]
    import onnx

    t = time.perf_counter()
    try:
        m = onnx.load_from_string(data)
        onnx.shape_inference.infer_shapes(m)
    except Exception:
        pass
    return time.perf_counter() - t


def run(jobs: int | None = None) -> tuple[list[dict], float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        tasks = [(c.name, c.model.SerializeToString(), tmp, expected_shapes(c), given_values(c)) for c in cases()
                 if c.model is not None]
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            t = time.perf_counter()
            res = list(pool.map(check_one, tasks, chunksize=16))
            ours = time.perf_counter() - t
            t = time.perf_counter()
            list(pool.map(baseline_one, tasks, chunksize=16))
            base = time.perf_counter() - t
    return res, ours, base


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--show", type=int, default=20)
    args = ap.parse_args()
    import onnx

    res, ours, base = run(args.jobs)
    by = collections.Counter(r["status"] for r in res)
    print(f"onnx {onnx.__version__} (opset {onnx.defs.onnx_opset_version()}): {len(res)} node test models")
    for k in ("ok", "unscored", "empty", "refused", "crash"):
        print(f"  {k:<9} {by.get(k, 0)}")
    ops = collections.Counter()
    for r in res:
        for dom, op, kind, reason in r.get("unscored", []):
            ops[(dom, op, kind)] += 1
    if ops:
        print(f"unscored op types: {len({(d, o) for d, o, _ in ops})}")
        for (dom, op, kind), n in ops.most_common(args.show):
            print(f"  {n:>4}  {(dom + ':' if dom else '') + op:<40} {kind}")
    for r in [r for r in res if r["status"] in ("refused", "crash")][: args.show]:
        print(f"  {r['status']}: {r['name']}: {r['reason']}")
    print(f"time: dnnperf {ours:.1f} s vs onnx.load + shape_inference {base:.1f} s on the same files "
          f"({ours / base:.1f}x)")


if __name__ == "__main__":
    main()
