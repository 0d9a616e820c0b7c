"""PNG charts through matplotlib (optional extra ``dnnperf[plot]``); the SVG path never needs it."""

from __future__ import annotations


EXTENSIONS = (".png",)


def png_bytes(d: dict, chart: str) -> bytes:
    import io

    from dnnperf.errors import DnnperfError

    try:
        import matplotlib
    except ImportError:
        raise DnnperfError('PNG output needs matplotlib: pip install "dnnperf[plot]" (or write .svg)') from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dnnperf.render.svg import CAUSE_COLOURS, partial_mark

    fig, ax = plt.subplots(figsize=(9, 5.4), dpi=120)
    if chart == "roofline":
        bw = d["hardware"]["dram_gbs"] * 1e9
        roofs = [(r["label"], r["ops_per_s"]) for r in d["hardware"]["roofs"]]
        pts = [l for l in d["layers"] if l["latency_s"] > 0 and l["ops"] > 0 and l["intensity_ops_per_byte"] > 0]
        xs = [l["intensity_ops_per_byte"] for l in pts]
        lo, hi = min(xs + [0.1]) / 2, max(xs + [r[1] / bw for r in roofs]) * 3
        for label, peak in roofs:
            ridge = peak / bw
            ax.plot([lo, ridge, hi], [lo * bw, peak, peak], lw=1.5, label=f"{label} (ridge {ridge:.3g})")
        total = d["totals"]["latency_s"] or 1
        for l in pts:
            ax.scatter(l["intensity_ops_per_byte"], l["ops"] / l["latency_s"], s=10 + 400 * l["latency_s"] / total,
                       color=CAUSE_COLOURS.get(l["cause"], "#888"), alpha=0.55)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (ops per DRAM byte)")
        ax.set_ylabel("achieved ops/s (1 MAC = 2 ops)")
        ax.legend(fontsize=8)
    else:
        t = d["totals"]
        steps = [("at peak", t["ideal_s"])] + [(k, v) for k, v in sorted(t["losses_s"].items(), key=lambda kv: -kv[1]) if v > 0]
        acc = 0.0
        for i, (k, v) in enumerate(steps):
            ax.bar(i, v, bottom=acc, color=CAUSE_COLOURS.get(k, "#009E73"))
            acc += v
        ax.bar(len(steps), acc, color="#444")
        ax.set_xticks(range(len(steps) + 1), [k for k, _ in steps] + ["estimated"], rotation=30, ha="right")
        ax.set_ylabel("seconds")
    mark = partial_mark(d)
    ax.set_title(f"{d['model']['name']} on {d['hardware']['title']}" + (f"\n{mark}" if mark else ""), fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _chart(doc, style) -> bytes:
    return png_bytes(doc.data["report"], doc.data["chart"])


RENDERERS = {"chart": _chart}
