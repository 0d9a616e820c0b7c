"""Issue 6 benchmark: interactive latency, big graphs (time and peak RSS), many models on all cores.

    python bench/bench_scale.py [--files 1000] [--nodes 50000]

Every figure is printed next to a baseline measured in the same run: the floor of
`onnx.load(load_external_data=False)` + `onnx.shape_inference.infer_shapes` on the same file(s),
run the same way (a fresh process where dnnperf runs as one). If onnx-tool is installed, its
profiler is timed on the same files too (optional; never a dependency).

Every child process may write and read bytecode (PYTHONDONTWRITEBYTECODE is dropped from its
environment), and one warm-up run precedes the timed ones: `pip install` compiles a package's
modules, so a user never pays for compiling dnnperf's sources, and neither does this benchmark.
onnx and numpy are compiled in site-packages already, so both sides are measured alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

PY = sys.executable
FLOOR = ("import sys, onnx\n"
         "for p in sys.argv[1:]:\n"
         "    onnx.shape_inference.infer_shapes(onnx.load(p, load_external_data=False))\n")
RSS = ("import resource, subprocess, sys, time\n"
       "t = time.perf_counter(); r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
       "dt = time.perf_counter() - t\n"
       "print(dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)\n")


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(cmd) -> tuple[float, float, int]:
    """(seconds, peak RSS MB, exit code) of a command in a fresh process."""
    out = subprocess.run([PY, "-c", RSS, *cmd], capture_output=True, text=True, check=True, env=ENV).stdout.split()
    return float(out[0]), int(out[1]) / 1024, int(out[2])


def med(cmd, n=5):
    run(cmd)  # warm-up: bytecode written, files in the page cache
    rs = [run(cmd) for _ in range(n)]
    return statistics.median(r[0] for r in rs), max(r[1] for r in rs), rs[0][2]


def dnnperf(*args):
    return [PY, "-m", "dnnperf", *args]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=50_000)
    ap.add_argument("--profiles", default="v100,t4,tpu-v2,kirin970-npu,cpu-avx2")
    a = ap.parse_args()
    from gen import huge_skeleton, small_cnn, transformer_like

    tmp = tempfile.mkdtemp()
    print(f"cores: {os.cpu_count()}")
    print("\n== interactive: `dnnperf analyze sample_models/resnet50.onnx --hw v100` (fresh process) ==")
    resnet = os.path.join(ROOT, "sample_models", "resnet50.onnx")
    # interleaved rounds (a quiet moment must not favour one side), the median of each
    cmds = {"imp": [PY, "-c", "import onnx"], "floor": [PY, "-c", FLOOR, resnet],
            "cli": dnnperf("analyze", resnet, "--hw", "v100"), "help": dnnperf("--help")}
    for c in cmds.values():
        run(c)  # warm-up: bytecode written, files in the page cache
    rounds = {k: [] for k in cmds}
    for _ in range(9):
        for k, c in cmds.items():
            rounds[k].append(run(c))
    t_imp, t_floor, t_cli, t_help = (statistics.median(r[0] for r in rounds[k]) for k in ("imp", "floor", "cli", "help"))
    rss, rc = max(r[1] for r in rounds["cli"]), rounds["cli"][0][2]
    print(f"python -c 'import onnx'         {t_imp:7.3f} s")
    print(f"floor (new process)             {t_floor:7.3f} s")
    print(f"dnnperf --help                  {t_help:7.3f} s")
    print(f"dnnperf analyze                 {t_cli:7.3f} s  ({t_cli / t_imp:.2f}x import onnx, {t_cli / t_floor:.2f}x floor, "
          f"peak RSS {rss:.0f} MB, exit {rc})")

    print("\n== big graphs ==")
    big = os.path.join(tmp, "transformer_like.onnx")
    with open(big, "wb") as fh:
        fh.write(transformer_like(a.nodes).SerializeToString())
    huge = os.path.join(tmp, "huge_skeleton.onnx")
    with open(huge, "wb") as fh:
        fh.write(huge_skeleton().SerializeToString())
    for label, path in ((f"{a.nodes}-node transformer-like", big), ("skeleton claiming 12.9 GB of weights", huge)):
        tf, rf, _ = med([PY, "-c", FLOOR, path], 3)
        td, rd, rc = med(dnnperf("analyze", path, "--hw", "v100", "-f", "json"), 3)
        print(f"{label:<40} file {os.path.getsize(path) / 1e6:7.2f} MB | floor {tf:6.2f} s {rf:6.0f} MB | "
              f"dnnperf {td:6.2f} s {rd:6.0f} MB | ratio {td / tf:5.2f}x time, {rd / rf:4.2f}x RSS (exit {rc})")

    print(f"\n== many models: {a.files} files x {len(a.profiles.split(','))} profiles ==")
    folder = os.path.join(tmp, "nas")
    os.makedirs(folder)
    files = []
    for i in range(a.files):
        p = os.path.join(folder, f"cnn{i:05d}.onnx")
        with open(p, "wb") as fh:
            fh.write(small_cnn(i).SerializeToString())
        files.append(p)
    tf, _, _ = med([PY, "-c", FLOOR, *files], 1)
    print(f"floor, 1 process, load+infer only    {tf:7.2f} s  {a.files / tf:8.1f} models/s")
    for jobs in (1, os.cpu_count() or 1):
        td, _, rc = med(dnnperf("analyze", *files, "--hw", a.profiles, "--totals-only", "-f", "csv", "-j", str(jobs)), 1)
        print(f"dnnperf -j {jobs:<3} (parse once, 5 scores) {td:7.2f} s  {a.files / td:8.1f} models/s  "
              f"({a.files * len(a.profiles.split(',')) / td:8.1f} model x profile/s; {td / tf:.2f}x floor; exit {rc})")

    try:
        import onnx_tool  # noqa: F401
    except ImportError:
        print("\nonnx-tool not installed: side-by-side skipped (pip install onnx-tool to include it)")
    else:
        code = ("import sys, onnx_tool\nfor p in sys.argv[1:]:\n"
                "    m = onnx_tool.Model(p); m.graph.shape_infer(); m.graph.profile()\n")
        for label, path in (("resnet50 skeleton", resnet), (f"{a.nodes}-node graph", big)):
            try:
                to, ro, rc = med([PY, "-c", code, path], 1)
                if rc:  # onnx-tool opens external data: it cannot read weightless skeletons
                    print(f"onnx-tool on {label:<24} failed (exit {rc}); full-weight files: bench/bench_full.py")
                else:
                    print(f"onnx-tool on {label:<24} {to:7.2f} s {ro:6.0f} MB (exit {rc})")
            except Exception as exc:  # noqa: BLE001
                print(f"onnx-tool on {label}: failed ({exc})")


if __name__ == "__main__":
    main()
