"""Issue 12 benchmark: full-weight files (what most users have on disk), each tool as a whole process.

    python bench/bench_full.py [--rounds 3] [--models resnet50,vit_b_16]

Every bundled sample model is written out with its weights materialised (random values of the
right dtype and size, stored inside the file as an exporter writes them), then timed in fresh
processes, interleaved round by round, the fastest of the rounds kept (other tenants of a shared
machine only ever slow a run down):

    load        python -c "onnx.load(F)"                 the bare parse a user's own script pays
    dnnperf     dnnperf inspect F                        (dims a model leaves symbolic given on the line)
    onnx-tool   onnx_tool.Model(F) + shape_infer + profile, if onnx-tool is installed (optional,
                never a dependency)

and the peak resident memory of each. Printed per model: seconds, peak MB, dnnperf / load,
dnnperf peak / file size, dnnperf's peak above that of a process that only imports onnx (what the
interpreter and its libraries hold whatever the file) / file size, dnnperf / onnx-tool. Targets (issue 12): dnnperf <= 0.3x a bare load,
peak memory under a quarter of the file, faster than onnx-tool on every model. The files are
written to a temporary folder (about 1.5 GB) and removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

PY = sys.executable
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
RSS = ("import resource, subprocess, sys, time\n"
       "t = time.perf_counter(); r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
       "dt = time.perf_counter() - t\n"
       "print(dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)\n")
LOAD = "import sys, onnx\nonnx.load(sys.argv[1])\n"
# onnx-tool needs concrete inputs for the dims a model leaves symbolic
ONNX_TOOL = ("import sys, json, numpy as np, onnx, onnx_tool\n"
             "dims = json.loads(sys.argv[2])\n"
             "m = onnx.load(sys.argv[1], load_external_data=False)\n"
             "weights = {i.name for i in m.graph.initializer}\n"
             "feeds = {}\n"
             "for vi in m.graph.input:\n"
             "    if vi.name in weights: continue\n"
             "    tt = vi.type.tensor_type\n"
             "    shape = [d.dim_value or dims.get(d.dim_param, 1) for d in tt.shape.dim]\n"
             "    feeds[vi.name] = np.zeros(shape, onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))\n"
             "del m\n"
             "t = onnx_tool.Model(sys.argv[1]); t.graph.shape_infer(feeds); t.graph.profile()\n")

# symbol -> value for the models that leave more than the batch symbolic
DIMS = {"sequence_length": 128, "past_sequence_length": 128, "total_sequence_length": 256}
MODELS = ("resnet50", "mobilenet_v2", "shufflenet_v2_x1_0", "squeezenet1_1", "vit_b_16", "swin_t", "gpt2",
          "bert_base", "tiny_llama_kv", "tiny_llama_genai")


def run(cmd) -> tuple[float, float, int]:
    """(seconds, peak RSS MB, exit code) of a command in a fresh process."""
    out = subprocess.run([PY, "-c", RSS, *cmd], capture_output=True, text=True, check=True, env=ENV).stdout.split()
    return float(out[0]), int(out[1]) / 1024, int(out[2])


def symbols(path: str) -> list[str]:
    import onnx

    m = onnx.load(path, load_external_data=False)
    weights = {i.name for i in m.graph.initializer}
    found = []
    for vi in m.graph.input:
        if vi.name in weights:
            continue
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param and d.dim_param in DIMS and d.dim_param not in found:
                found.append(d.dim_param)
    return found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default=",".join(MODELS))
    a = ap.parse_args()
    from bench_inspect import materialise

    try:
        import onnx_tool  # noqa: F401 (only whether it is installed)

        have_tool = True
    except ImportError:
        have_tool = False
    import json

    tmp = tempfile.mkdtemp()
    try:
        print(f"{'model':<20} {'file MB':>8} | {'load s':>7} {'MB':>6} | {'dnnperf s':>9} {'MB':>6} | "
              f"{'onnx-tool s':>11} {'MB':>6} | {'dnnperf/load':>12} {'peak/file':>9} {'extra/file':>10} {'dnnperf/tool':>12}")
        worst = {"time": 0.0, "mem": 0.0, "tool": 0.0}
        for name in a.models.split(","):
            src = os.path.join(ROOT, "sample_models", f"{name}.onnx")
            full = os.path.join(tmp, f"{name}.onnx")
            materialise(src, full)
            size = os.path.getsize(full) / 2**20
            syms = symbols(full)
            flags = [x for s in syms for x in ("--dim", f"{s}={DIMS[s]}")]
            cmds = {"imp": [PY, "-c", "import onnx"], "load": [PY, "-c", LOAD, full],
                    "dnnperf": [PY, "-m", "dnnperf", "inspect", full, "--batch", "1", *flags, "-q"]}
            if have_tool:
                cmds["tool"] = [PY, "-c", ONNX_TOOL, full, json.dumps(DIMS)]
            for c in cmds.values():
                run(c)  # warm-up: bytecode written, the file in the page cache
            best: dict[str, tuple] = {}
            for _ in range(a.rounds):
                for k, c in cmds.items():
                    r = run(c)
                    if k not in best or r[0] < best[k][0]:
                        best[k] = (r[0], max(r[1], best.get(k, (0, 0))[1]), r[2])
                    else:
                        best[k] = (best[k][0], max(r[1], best[k][1]), best[k][2])
            im = best["imp"][1]
            lt, lm, _ = best["load"]
            dt, dm, drc = best["dnnperf"]
            if "tool" in best:
                tt, tm, trc = best["tool"]
                tool = f"{tt:>11.2f} {tm:>6.0f}" if trc == 0 else f"{'failed':>11} {'':>6}"
                ratio_tool = f"{dt / tt:>12.2f}" if trc == 0 else f"{'-':>12}"
                if trc == 0:
                    worst["tool"] = max(worst["tool"], dt / tt)
            else:
                tool, ratio_tool = f"{'-':>11} {'-':>6}", f"{'-':>12}"
            worst["time"] = max(worst["time"], dt / lt)
            worst["mem"] = max(worst["mem"], dm / size)
            worst["extra"] = max(worst.get("extra", 0.0), (dm - im) / size)
            print(f"{name:<20} {size:>8.1f} | {lt:>7.2f} {lm:>6.0f} | {dt:>9.2f} {dm:>6.0f} | {tool} | "
                  f"{dt / lt:>12.2f} {dm / size:>9.2f} {max(dm - im, 0) / size:>10.3f} {ratio_tool}" + ("" if drc == 0 else f"  (dnnperf exit {drc})"))
            os.remove(full)
        print(f"largest: dnnperf/load {worst['time']:.2f}x, peak/file {worst['mem']:.2f}x, "
              f"peak above a bare `import onnx` process / file {worst['extra']:.3f}x"
              + (f", dnnperf/onnx-tool {worst['tool']:.2f}x" if have_tool else
                 "  (onnx-tool not installed: pip install onnx-tool to include it)"))
        print("(seconds: fastest of the rounds of a fresh process, imports included; MB: peak resident memory)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
