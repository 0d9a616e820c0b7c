"""LLM requests against published latencies (issue 16), and the speed of analysing big decoders.

    python bench/llm.py

1. For every published row (model, GPU, batch, prompt, output tokens, end-to-end latency; sources
   in bench/data/llm-published.json) a weightless skeleton of the model is written with
   ``dnnperf llm skeleton`` (ONNX Runtime GenAI style, 16-bit weights: fused attention and norms
   like the TensorRT-LLM engines measured) and analysed with ``--phase both --runtime tensorrt``;
   predicted / measured is printed per row with the median error and the rank correlation.
2. For every published first-token latency (``first_token_rows``: batch 1, Llama-2-7B on one GPU and
   Llama-2-70B over 4 by tensor parallelism, ``--tp``), the prefill of the prompt with ``--runtime
   tensorrt`` at the row's precision; predicted / measured per row, by tensor-parallel split.
3. For every published static-batch throughput (``throughput_rows``: output tokens per second per GPU,
   Llama-2-7B at batch 48-768 on one GPU, Llama-2-70B over 2-4 H100s), the whole request (``--phase
   both``) at the row's batch, prompt and output length; predicted / measured per row.
4. Wall time of ``dnnperf analyze --phase decode`` on a 70B-class skeleton (80 layers, plain-op
   export style: ~3,900 nodes), against ``onnx.load`` + ``onnx.shape_inference`` of the same file
   measured in the same run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from dnnperf.hardware import load_profile  # noqa: E402
from dnnperf.llm.phases import PhaseRequest, analyze_phases  # noqa: E402
from dnnperf.llm.skeleton import PRESETS, skeleton_bytes  # noqa: E402
from dnnperf.published import spearman  # noqa: E402
from dnnperf.scoring import Settings  # noqa: E402


def _data() -> dict:
    with open(os.path.join(HERE, "data", "llm-published.json"), encoding="utf-8") as fh:
        return json.load(fh)


def _skeleton(tmp: str, name: str) -> str:
    """A preset's 16-bit GenAI-style skeleton in ``tmp``, written once."""
    path = os.path.join(tmp, f"{name}.onnx")
    if not os.path.exists(path):
        with open(path, "wb") as fh:
            fh.write(skeleton_bytes(PRESETS[name], "genai", 16))
    return path


def _profile(r: dict):
    """The row's profile: a shipped one, or (``spec_profile``) the one written from the GPU's datasheet
    alone in bench/data/spec-profiles/."""
    if r.get("spec_profile"):
        return load_profile(os.path.join(HERE, "data", "spec-profiles", f"{r['hw']}.yaml"))
    return load_profile(r["hw"])


def _groups(pairs: list) -> None:
    """Summary lines over (predicted, measured, tensor-parallel devices, spec-sheet profile) rows."""
    for label, sel in (("all", pairs), ("tp 1", [x for x in pairs if x[2] == 1]), ("tp > 1", [x for x in pairs if x[2] > 1]),
                       ("spec-sheet profile (l40s)", [x for x in pairs if x[3]])):
        if not sel:
            continue
        err = [max(p / m, m / p) for p, m, *_ in sel]
        print(f"{label}: {len(sel)} rows, median pred/meas {_median([p / m for p, m, *_ in sel]):.2f}x, median error "
              f"{_median(err):.2f}x, within 1.5x {sum(e <= 1.5 for e in err) / len(err):.0%}, rank rho "
              f"{spearman([p for p, *_ in sel], [m for _, m, *_ in sel]):.3f}")


def _median(xs) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def published(tmp: str) -> None:
    data = _data()
    print(f"{'model':<11} {'hw':<5} {'batch':>5}  {'measured':>9} {'predicted':>9}  {'pred/meas':>9}  (ttft, time per output token)")
    pairs = []
    for r in data["rows"]:
        _, d = analyze_phases(_skeleton(tmp, r["model"]), _profile(r), Settings(batch=r["batch"], runtime="tensorrt"),
                              PhaseRequest("both", r["prompt"], None, r["generate"]), with_fixes=False)
        pred = d["end_to_end"]["seconds"] * 1e3
        pairs.append((pred, r["latency_ms"]))
        print(f"{r['model']:<11} {r['hw']:<5} {r['batch']:>5}  {r['latency_ms']:7.1f}ms {pred:7.1f}ms  {pred / r['latency_ms']:8.2f}x"
              f"  ({d['prefill']['ttft_s'] * 1e3:.1f} ms, {d['end_to_end']['mean_time_per_output_token_s'] * 1e3:.2f} ms)")
    err = [max(p / m, m / p) for p, m in pairs]
    print(f"{len(pairs)} rows: median error {_median(err):.2f}x, within 1.5x {sum(e <= 1.5 for e in err) / len(err):.0%}, "
          f"rank rho {spearman([p for p, _ in pairs], [m for _, m in pairs]):.3f}")


def first_token(tmp: str, key: str = "first_token_rows") -> None:
    data = _data()
    print(f"\n{'model':<12} {'hw':<5} {'prec':<5} {'tp':>2} {'prompt':>6}  {'measured':>9} {'predicted':>9}  {'pred/meas':>9}  "
          "(first-token latency; collectives)")
    pairs, by = [], []
    for r in data[key]:
        path = _skeleton(tmp, r["model"])
        prec = None if r["precision"] == "fp16" else r["precision"]  # the skeleton's own 16-bit weights
        _, d = analyze_phases(path, _profile(r), Settings(batch=r["batch"], runtime="tensorrt", precision=prec),
                              PhaseRequest("prefill", r["prompt"], None, 1, r["tp"]), with_fixes=False)
        pred = d["prefill"]["ttft_s"] * 1e3
        coll = d.get("tensor_parallel", {}).get("collective_seconds_per_step", 0.0) * 1e3
        pairs.append((pred, r["ttft_ms"], r["tp"], bool(r.get("spec_profile"))))
        print(f"{r['model']:<12} {r['hw']:<5} {r['precision']:<5} {r['tp']:>2} {r['prompt']:>6}  {r['ttft_ms']:7.1f}ms "
              f"{pred:7.1f}ms  {pred / r['ttft_ms']:8.2f}x  ({coll:.1f} ms)")
        by.append((r, pred / r["ttft_ms"]))
    _groups(pairs)
    return by


def throughput(tmp: str, key: str = "throughput_rows") -> None:
    data = _data()
    print(f"\n{'model':<12} {'hw':<5} {'prec':<5} {'tp':>2} {'batch':>5} {'in':>5} {'out':>5}  {'measured':>9} {'predicted':>9}  "
          f"{'pred/meas':>9}  (output tokens/s per GPU; does the request fit?)")
    pairs, by = [], []
    for r in data[key]:
        prec = None if r["precision"] == "fp16" else r["precision"]
        _, d = analyze_phases(_skeleton(tmp, r["model"]), _profile(r),
                              Settings(batch=r["batch"], runtime="tensorrt", precision=prec),
                              PhaseRequest("both", r["prompt"], None, r["generate"], r["tp"]), with_fixes=False,
                              strict_memory=False)
        pred = d["end_to_end"]["output_tokens_per_s"] / r["tp"]
        pairs.append((pred, r["tokens_per_s_per_gpu"], r["tp"], bool(r.get("spec_profile"))))
        print(f"{r['model']:<12} {r['hw']:<5} {r['precision']:<5} {r['tp']:>2} {r['batch']:>5} {r['prompt']:>5} {r['generate']:>5}  "
              f"{r['tokens_per_s_per_gpu']:9.0f} {pred:9.0f}  {pred / r['tokens_per_s_per_gpu']:8.2f}x  "
              f"({'fits' if d['memory']['fits'] else 'does not fit'})")
        by.append((r, pred / r["tokens_per_s_per_gpu"]))
    _groups(pairs)
    return by


def _by(rows: list, field: str) -> None:
    """Median predicted / measured and median error per value of ``field`` over (row, ratio) pairs."""
    for v in sorted({r[field] for r, _ in rows}):
        q = [x for r, x in rows if r[field] == v]
        err = [max(x, 1 / x) for x in q]
        print(f"  {field} {v:<14} {len(q):>2} rows  median pred/meas {_median(q):.2f}x  median error {_median(err):.2f}x  "
              f"within 1.5x {sum(e <= 1.5 for e in err) / len(err):.0%}")


def speed(tmp: str) -> None:
    path = os.path.join(tmp, "llama-3-70b.onnx")
    with open(path, "wb") as fh:
        fh.write(skeleton_bytes(PRESETS["llama-3-70b"], "plain"))
    base = ("import onnx, time; t = time.perf_counter(); m = onnx.load(%r, load_external_data=False); "
            "onnx.shape_inference.infer_shapes(m); print(time.perf_counter() - t)" % path)
    ref = min(float(subprocess.run([sys.executable, "-c", base], capture_output=True, text=True).stdout) for _ in range(3))
    walls = []
    for _ in range(3):
        t = time.perf_counter()
        # int8 weights: the 141.1 GB of fp16 ones (the 2.1 GB embedding table included) do not fit its 141 GB
        subprocess.run([sys.executable, "-m", "dnnperf", "analyze", path, "--hw", "h200", "-p", "int8", "--phase",
                        "decode", "--context", "1024", "-q", "-o", os.path.join(tmp, "r.json")], check=True, cwd=ROOT)
        walls.append(time.perf_counter() - t)
    w = min(walls)
    print(f"llama-3-70b skeleton (80 layers): dnnperf analyze -p int8 --phase decode {w:.2f} s end to end (fresh process); "
          f"onnx.load + shape_inference alone {ref:.2f} s in process; ratio {w / ref:.1f}x")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        published(tmp)
        first_token(tmp)
        throughput(tmp)
        # TensorRT-LLM 0.9.0's tables: other models (Mistral 7B, Mixtral 8x7B), an H200, a later release; added
        # after the figures above were fixed, never tuned on
        print("\nTensorRT-LLM 0.9.0, held out (never tuned on): first-token latency")
        rows = first_token(tmp, "trtllm09_first_token_rows")
        for field in ("model", "hw"):
            _by(rows, field)
        print("\nTensorRT-LLM 0.9.0, held out (never tuned on): static-batch throughput")
        rows = throughput(tmp, "trtllm09_throughput_rows")
        for field in ("model", "hw"):
            _by(rows, field)
        speed(tmp)
