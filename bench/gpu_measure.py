"""Ground truth on a real GPU (issue 14, item 5): kernel and whole-network times measured with torch.

Runs only where torch and a CUDA GPU are (never imported by dnnperf or its tests):

    python bench/gpu_measure.py --out DIR [--budget-s 420]
    python bench/gpu_measure.py --out DIR --networks-only --fold-bn [--budget-s 300]
    python bench/gpu_measure.py --out DIR --dry      # CPU smoke run of every code path, tiny sizes

``--fold-bn`` folds every BatchNorm into the convolution before it (torch.fx), as the ONNX export of
the skeletons did, so torch runs the graph dnnperf analyses; it also counts the GPU kernels of one
forward pass (torch profiler) and the host time of one eager op (``host_us_per_op``).

What it measures, in this order (each part stops starting new work when the budget is spent, and
both output files are rewritten after every measurement, so a run cut short keeps what it has):

1. the card's own ceilings: a device-to-device copy and a large GEMM per precision, clocks;
2. the sample models (torchvision, BERT, GPT-2; random weights) at batch 1, 8, 64 in fp32 and fp16,
   each *eager* (one Python dispatch per op) and as a *CUDA graph* replay (one launch per batch);
3. every distinct GEMM and convolution shape of DeepBench (bench/data/deepbench-v100-t4.json) in
   fp16 and in fp32, plus depthwise and grouped convolutions and elementwise adds;
4. models dnnperf was never tuned on (bench/models/cpu's held-out list), the same way as 2.;
5. if time is left: the kernels with TF32 allowed.

Conventions: fp32 means TF32 *off* for cuBLAS and cuDNN (torch's own default allows TF32 in cuDNN);
``cudnn.benchmark`` is on (the fastest algorithm is picked, as frameworks do). A kernel's time is
the median of 5 replays of a CUDA graph holding R back-to-back calls, divided by R (R sized for
~10 ms per replay): device time without the host's launch cost, as DeepBench reports it. A network's
eager time is the median over 3 rounds of N back-to-back ``model(x)`` calls timed by CUDA events
(host dispatch included: it is what the user waits for); its graph time the same for replays.

Outputs (DIR): ``<gpu>-kernels.json`` in the published-kernel format that ``bench/published.py
--data`` reads, and ``<gpu>-networks.json`` (model, precision, batch, runtime, ms per batch).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))

SAMPLE = ["resnet50", "mobilenet_v2", "shufflenet_v2_x1_0", "squeezenet1_1", "vit_b_16", "swin_t",
          "bert_base", "gpt2"]
HELD_OUT = ["resnext50_32x4d", "efficientnet_b0", "densenet121", "convnext_tiny", "mobilenet_v3_large",
            "regnet_y_400mf", "resnet18"]
SEQ = 128  # BERT and GPT-2 sequence length (the sample ONNX models leave it symbolic)

# depthwise (groups = C) and grouped convolutions of the shapes mobile and ResNeXt networks use:
# (N, C, H, W, K, R, S, pad, stride, groups)
EXTRA_CONV = [(n, c, h, h, c, 3, 3, 1, s, c) for n in (1, 8, 64)
              for c, h, s in ((32, 112, 1), (96, 112, 2), (144, 56, 1), (192, 28, 1), (384, 14, 1),
                              (576, 14, 1), (960, 7, 1))]
EXTRA_CONV += [(n, c, h, h, c, 3, 3, 1, s, 32) for n in (1, 8, 64)
               for c, h, s in ((128, 56, 1), (256, 28, 1), (512, 14, 1), (1024, 7, 1), (256, 56, 2))]
EXTRA_CONV += [(n, c, h, h, c, 5, 5, 2, 1, c) for n in (1, 8, 64) for c, h in ((240, 28), (672, 14))]
ELEMENTWISE = [2 ** k for k in range(12, 29, 2)]  # elements per operand of an Add


class Clock:
    """CUDA events on a GPU, perf_counter on the CPU (--dry)."""

    def __init__(self, cuda: bool):
        self.cuda = cuda

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def span(self, fn, n: int) -> float:
        """Seconds for n back-to-back calls of fn."""
        if self.cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(n):
                fn()
            b.record()
            b.synchronize()
            return a.elapsed_time(b) * 1e-3
        t = time.perf_counter()
        for _ in range(n):
            fn()
        return time.perf_counter() - t


def graph_of(fn, reps: int):
    """A CUDA graph holding ``reps`` calls of fn (warmed up on a side stream first)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    return g


def kernel_time(clock: Clock, fn, target_s: float = 0.01) -> dict:
    fn()
    fn()  # cudnn.benchmark picks its algorithm on the first call
    clock.sync()
    est = clock.span(fn, 3) / 3
    reps = max(1, min(200, int(target_s / max(est, 1e-7))))
    if not clock.cuda:
        t = [clock.span(fn, reps) / reps for _ in range(3)]
        return {"ms": statistics.median(t) * 1e3, "reps": reps, "method": "cpu loop"}
    g = graph_of(fn, reps)
    g.replay()
    clock.sync()
    t = [clock.span(g.replay, 1) / reps for _ in range(5)]
    del g
    return {"ms": statistics.median(t) * 1e3, "min_ms": min(t) * 1e3, "reps": reps}


def network_time(clock: Clock, fn, runtime: str, target_s: float = 0.25) -> dict:
    for _ in range(3):
        fn()
    clock.sync()
    est = clock.span(fn, 2) / 2
    n = max(3, min(200, int(target_s / max(est, 1e-6))))
    if runtime == "eager":
        t = [clock.span(fn, n) / n for _ in range(3)]
        return {"ms": statistics.median(t) * 1e3, "min_ms": min(t) * 1e3, "iters": n}
    g = graph_of(fn, 1)
    g.replay()
    clock.sync()
    t = [clock.span(g.replay, n) / n for _ in range(3)]
    del g
    return {"ms": statistics.median(t) * 1e3, "min_ms": min(t) * 1e3, "iters": n}


def build_model(name: str):
    """(module, input factory(batch, device, dtype) -> tuple of inputs, batches to time)."""
    if name == "bert_base":
        from transformers import BertConfig, BertModel

        cfg = BertConfig()
        cfg._attn_implementation = "eager"  # as the sample ONNX model was exported
        m = BertModel(cfg)

        def inputs(b, dev, dt):
            ids = torch.randint(0, cfg.vocab_size, (b, SEQ), device=dev)
            return ids, torch.ones(b, SEQ, dtype=torch.long, device=dev)
        return m, inputs, (1, 8, 64)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(use_cache=False)
        cfg._attn_implementation = "eager"
        m = GPT2LMHeadModel(cfg)
        return m, (lambda b, dev, dt: (torch.randint(0, cfg.vocab_size, (b, SEQ), device=dev),)), (1,)
    try:
        import torchvision
    except RuntimeError:  # a CPU-only torch next to a PyPI torchvision (the --dry run): see export script
        lib = torch.library.Library("torchvision", "DEF")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        import torchvision

    m = torchvision.models.get_model(name, weights=None)
    return m, (lambda b, dev, dt: (torch.randn(b, 3, 224, 224, device=dev, dtype=dt),)), (1, 8, 64)


def count_kernels(m, x, cuda: bool) -> int | None:
    """GPU kernels one forward pass launches (torch profiler), None on the CPU."""
    if not cuda:
        return None
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode():
        m(*x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            m(*x)
            torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def ceilings(clock, dev, rec, dry: bool):
    """The card's own ceilings: a device-to-device copy, a large GEMM per precision."""
    n = 2 ** 14 if dry else 2 ** 28
    a = torch.empty(n, dtype=torch.float32, device=dev)
    b = torch.empty_like(a)
    r = kernel_time(clock, lambda: b.copy_(a))
    rec.ceilings["copy_gbs"] = round(2 * a.numel() * 4 / (r["ms"] * 1e-3) / 1e9, 1)
    del a, b
    for dt, name in ((torch.float32, "fp32"), (torch.float16, "fp16"), (torch.bfloat16, "bf16")):
        s = 256 if dry else 8192
        x = torch.randn(s, s, device=dev, dtype=dt)
        y = torch.randn(s, s, device=dev, dtype=dt)
        z = torch.empty(s, s, device=dev, dtype=dt)
        r = kernel_time(clock, lambda: torch.matmul(x, y, out=z))
        rec.ceilings[f"gemm{s}_{name}_tflops"] = round(2 * s ** 3 / (r["ms"] * 1e-3) / 1e12, 1)
        del x, y, z


def host_overhead(clock, dev, rec, log):
    """Host time per eager op when the GPU work is negligible: a chain of tiny adds, called as bare
    torch functions and as nn.Module calls (how a model's layers are dispatched)."""
    x = torch.ones(16, device=dev)
    y = torch.empty_like(x)
    relu = torch.nn.ReLU()
    for label, fn in (("torch.add", lambda: torch.add(x, x, out=y)), ("nn.ReLU module", lambda: relu(x))):
        for _ in range(200):
            fn()
        clock.sync()
        t0 = time.perf_counter()
        for _ in range(2000):
            fn()
        clock.sync()
        rec.ceilings[f"host_us_per_op {label}"] = round((time.perf_counter() - t0) / 2000 * 1e6, 2)
    log("host overhead", {k: v for k, v in rec.ceilings.items() if k.startswith("host")})


class Recorder:
    def __init__(self, out: str, gpu_tag: str, meta: dict):
        self.out = out
        self.tag = gpu_tag
        self.meta = meta
        self.sheets: dict = {}
        self.nets: list = []
        self.errors: list = []
        self.ceilings: dict = {}

    def sheet(self, precision: str) -> dict:
        name = f"{self.meta['gpu']} | {precision}"
        return self.sheets.setdefault(name, {"gpu": self.meta["gpu"], "precision": precision, "runtime": "graph",
                                             "system": self.meta,
                                             "gemm": [], "conv": [], "elementwise": []})

    def write(self):
        kern = {"source": f"bench/gpu_measure.py on {self.meta['gpu']} ({self.meta['date']}); "
                          f"torch {self.meta['torch']}, CUDA {self.meta['cuda']}, cuDNN {self.meta['cudnn']}",
                "conventions": {"gemm": "C[M,N] = A[M,K] x B[K,N]; ms: device time per kernel (CUDA graph replay)",
                                "conv": "input N x C x H x W, K filters of R x S, pad_h/pad_w, stride_h/stride_w, "
                                        "group (1 when absent); fwd_ms: device time per kernel",
                                "elementwise": "Add of two tensors of `elements` each into a third; ms per kernel",
                                "fp32": "TF32 off in cuBLAS and cuDNN; cudnn.benchmark on"},
                "ceilings": self.ceilings, "sheets": self.sheets}
        nets = {"source": kern["source"], "system": self.meta,
                "conventions": {"ms": "milliseconds per batch; eager: back-to-back model(x) calls (host dispatch "
                                      "included); graph: CUDA graph replay of one forward pass",
                                "layout": "NCHW (torch default) unless layout says otherwise",
                                "sequence": f"BERT and GPT-2 run {SEQ} tokens per sequence"},
                "rows": self.nets, "errors": self.errors}
        for fname, doc in ((f"{self.tag}-kernels.json", kern), (f"{self.tag}-networks.json", nets)):
            tmp = os.path.join(self.out, fname + ".tmp")
            with open(tmp, "w") as fh:
                json.dump(doc, fh, indent=1)
            os.replace(tmp, os.path.join(self.out, fname))


def deepbench_shapes() -> tuple[list, list]:
    with open(os.path.join(HERE, "data", "deepbench-v100-t4.json")) as fh:
        data = json.load(fh)
    gemm, conv = [], []
    for sh in data["sheets"].values():
        for g in sh.get("gemm", []):
            key = (g["M"], g["N"], g["K"])
            if key not in gemm:
                gemm.append(key)
        for c in sh.get("conv", []):
            key = tuple(c[k] for k in ("N", "C", "H", "W", "K", "R", "S", "pad_h", "pad_w", "stride_h", "stride_w"))
            if key not in conv:
                conv.append(key)
    return gemm, conv


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument("--dry", action="store_true")
    ap.add_argument("--networks-only", action="store_true", help="skip the ceilings and kernels")
    ap.add_argument("--fold-bn", action="store_true",
                    help="fold each BatchNorm into the convolution before it (torch.fx), as the ONNX export did, "
                         "so torch runs the graph dnnperf analyses; count kernels per forward pass (profiler)")
    args = ap.parse_args()
    t_start = time.time()
    cuda = torch.cuda.is_available() and not args.dry
    dev = "cuda" if cuda else "cpu"
    clock = Clock(cuda)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    gpu = torch.cuda.get_device_name(0) if cuda else "CPU-dry"
    meta = {"gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if cuda else None, "cpu": platform.processor() or platform.machine(),
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}
    if cuda:
        p = torch.cuda.get_device_properties(0)
        meta.update(sms=p.multi_processor_count, memory_gb=round(p.total_memory / 2 ** 30, 1),
                    l2_mb=round(getattr(p, "L2_cache_size", 0) / 2 ** 20, 1))
    tag = gpu.lower().replace("nvidia ", "").split()[0] if cuda else "cpu-dry"
    rec = Recorder(args.out, tag + ("-bnfolded" if args.fold_bn else ""), meta)
    meta["bn_folded"] = bool(args.fold_bn)
    dry = args.dry

    def left() -> float:
        return args.budget_s - (time.time() - t_start)

    def log(*a):
        print(f"[{time.time() - t_start:6.1f}s]", *a, flush=True)

    def smi(label):
        if not cuda:
            return
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu",
                                "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout.strip()
            rec.ceilings[f"nvidia-smi {label}"] = q
            log("nvidia-smi", label, q)
        except Exception as exc:  # noqa: BLE001 - a missing tool is recorded, not fatal
            rec.ceilings[f"nvidia-smi {label}"] = f"failed: {exc}"

    # 1. ceilings
    smi("start")
    if args.networks_only:
        host_overhead(clock, dev, rec, log)
    else:
        ceilings(clock, dev, rec, dry)
    smi("after ceilings")
    log("ceilings", rec.ceilings)
    rec.write()

    def run_models(names, held_out: bool, stop_at: float):
        for name in names:
            if left() < stop_at:
                log("budget: skipping", name)
                rec.errors.append({"model": name, "error": "not measured: time budget spent"})
                continue
            try:
                model, inputs, batches = build_model(name)
            except Exception as exc:  # noqa: BLE001
                rec.errors.append({"model": name, "error": f"build: {exc!r}"[:300]})
                continue
            model = model.eval()
            folded = False
            if args.fold_bn and any(isinstance(mod, torch.nn.BatchNorm2d) for mod in model.modules()):
                try:
                    from torch.fx.experimental.optimization import fuse as fx_fuse

                    model = fx_fuse(model)
                    folded = not any(isinstance(mod, torch.nn.BatchNorm2d) for mod in model.modules())
                except Exception as exc:  # noqa: BLE001
                    rec.errors.append({"model": name, "error": f"fold-bn: {exc!r}"[:300]})
            model = model.to(dev)
            for prec, dt in (("fp32", torch.float32), ("fp16", torch.float16)):
                if dry and prec == "fp16":
                    continue
                m = model.to(dt)
                for batch in (batches[:1] if dry else batches):
                    x = inputs(batch, dev, dt)
                    kernels = None
                    if args.fold_bn and batch == 1:
                        try:
                            kernels = count_kernels(m, x, cuda)
                        except Exception as exc:  # noqa: BLE001
                            rec.errors.append({"model": name, "error": f"profiler: {exc!r}"[:300]})
                    for runtime in (("eager",) if not cuda else ("eager", "graph")):
                        if left() < stop_at:
                            break
                        try:
                            with torch.inference_mode():
                                t = network_time(clock, lambda: m(*x), runtime, 0.05 if dry else 0.15)
                            rec.nets.append({"model": name, "precision": prec, "batch": batch, "runtime": runtime,
                                             "ms": round(t["ms"], 4), "min_ms": round(t["min_ms"], 4),
                                             "iters": t["iters"], "held_out": held_out, "bn_folded": folded,
                                             **({"kernels_per_pass": kernels} if kernels is not None else {})})
                            log(name, prec, batch, runtime, f"{t['ms']:.3f} ms")
                        except Exception as exc:  # noqa: BLE001
                            rec.errors.append({"model": name, "precision": prec, "batch": batch, "runtime": runtime,
                                               "error": repr(exc)[:300]})
                            log(name, prec, batch, runtime, "FAILED", repr(exc)[:200])
                        rec.write()
                    del x
            del model, m
            if cuda:
                torch.cuda.empty_cache()

    def run_kernels(label: str, dt, stop_at: float, gemms, convs, extra: bool):
        sheet = rec.sheet(label)
        for (mm, nn, kk) in gemms:
            if left() < stop_at:
                log("budget: kernels", label, "stopped")
                return
            try:
                A = torch.randn(mm, kk, device=dev, dtype=dt)
                B = torch.randn(kk, nn, device=dev, dtype=dt)
                C = torch.empty(mm, nn, device=dev, dtype=dt)
                t = kernel_time(clock, lambda: torch.matmul(A, B, out=C))
                sheet["gemm"].append({"M": mm, "N": nn, "K": kk, "ms": round(t["ms"], 5)})
                del A, B, C
            except Exception as exc:  # noqa: BLE001
                rec.errors.append({"kernel": f"gemm {mm}x{nn}x{kk} {label}", "error": repr(exc)[:300]})
        rec.write()
        conv_list = [c + (1,) for c in convs]
        if extra:
            conv_list += [(n, c, h, w, k, r, s, p, p, st, st, g) for n, c, h, w, k, r, s, p, st, g in EXTRA_CONV]
        for (n, c, h, w, k, r, s, ph, pw, sh, sw, g) in conv_list:
            if left() < stop_at:
                log("budget: kernels", label, "stopped")
                break
            try:
                X = torch.randn(n, c, h, w, device=dev, dtype=dt)
                W = torch.randn(k, c // g, r, s, device=dev, dtype=dt)
                t = kernel_time(clock, lambda: F.conv2d(X, W, None, (sh, sw), (ph, pw), 1, g))
                row = {"N": n, "C": c, "H": h, "W": w, "K": k, "R": r, "S": s, "pad_h": ph, "pad_w": pw,
                       "stride_h": sh, "stride_w": sw, "fwd_ms": round(t["ms"], 5)}
                if g != 1:
                    row["group"] = g
                sheet["conv"].append(row)
                del X, W
            except Exception as exc:  # noqa: BLE001
                rec.errors.append({"kernel": f"conv {(n, c, h, w, k, r, s, ph, pw, sh, sw, g)} {label}",
                                   "error": repr(exc)[:300]})
        if extra:
            for e in ELEMENTWISE[:3] if dry else ELEMENTWISE:
                P = torch.randn(e, device=dev, dtype=dt)
                Q = torch.randn(e, device=dev, dtype=dt)
                Z = torch.empty(e, device=dev, dtype=dt)
                t = kernel_time(clock, lambda: torch.add(P, Q, out=Z))
                sheet["elementwise"].append({"op": "Add", "elements": e, "ms": round(t["ms"], 5)})
                del P, Q, Z
        rec.write()
        log("kernels", label, len(sheet["gemm"]), "gemm", len(sheet["conv"]), "conv")

    if args.networks_only:
        run_models(SAMPLE[:1] if dry else SAMPLE, False, stop_at=0.45 * args.budget_s)
        run_models(HELD_OUT[:1] if dry else HELD_OUT, True, stop_at=15)
        rec.write()
        log("done", len(rec.nets), "network rows,", len(rec.errors), "errors")
        return
    gemms, convs = deepbench_shapes()
    if dry:
        gemms, convs = [(64, 16, 64), (128, 32, 64)], [convs[0][:0] + (1, 3, 16, 16, 8, 3, 3, 1, 1, 1, 1)]
        EXTRA_CONV[:] = EXTRA_CONV[:1] + [(1, 8, 8, 8, 8, 3, 3, 1, 1, 8)]
    # 2. sample models; 3. kernels; 4. held-out models; 5. TF32 kernels
    run_models(SAMPLE[:1] if dry else SAMPLE, False, stop_at=0.62 * args.budget_s)
    run_kernels("fp16", torch.float16, 0.35 * args.budget_s, gemms, convs, True)
    run_kernels("fp32", torch.float32, 0.25 * args.budget_s, gemms, convs, True)
    run_models(HELD_OUT[:1] if dry else HELD_OUT, True, stop_at=25)
    if left() > 30:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        run_kernels("tf32", torch.float32, 12, gemms, convs, False)
    smi("end")
    rec.write()
    log("done", len(rec.nets), "network rows,", sum(len(s["gemm"]) + len(s["conv"]) for s in rec.sheets.values()),
        "kernels,", len(rec.errors), "errors")


if __name__ == "__main__":
    sys.exit(main())
