"""Hardware profiles: hw list, hw show, hw schema."""


from typing import Annotated

import typer

from dnnperf.cli.app import Format, Output, Quiet, command, hw_app
from dnnperf.documents import Document


@command(hw_app, "list", kinds=("hw_list",))
def hw_list(fmt: Format = None, output: Output = None, quiet: Quiet = False):
    """Shipped profiles with their quoted peak, bandwidth, lanes and how far they were validated."""
    from dnnperf.hardware import load_profile, shipped_names

    rows = []
    for n in shipped_names():
        p = load_profile(n)
        rows.append({"name": n, "title": p.title, "kind": p.kind, "peak_tops": p.headline_tops,
                     "peak_precision": p.headline_precision, "dram_gbs": p.dram_gbs, "lanes": p.lanes,
                     "launch_overhead_us": p.launch_overhead_us, "price_per_hour": p.price_per_hour,
                     "validation": _short_validation(p)})
    return Document("hw_list", {"schema_version": "dnnperf-hw-list/1", "rows": rows})


@command(hw_app, "show", kinds=("profile",))
def hw_show(name: Annotated[str, typer.Argument(help="Profile name or YAML path.")], fmt: Format = None,
            output: Output = None, quiet: Quiet = False):
    """Print a profile (its YAML with sources and unverified fields; -f json for the parsed values)."""
    import yaml

    from dnnperf.hardware import load_profile

    p = load_profile(name)
    with open(p.path, encoding="utf-8") as fh:
        text = fh.read()
    from dnnperf.gpu import library_summary

    return Document("profile", {"yaml": text, "profile": yaml.safe_load(text), "validation": p.validation_summary(),
                                "assumed": list(p.assumed), "library": library_summary(p)})


def _short_validation(p) -> str:
    """"fp32 1.12x, fp16 1.13x (346 kernels); fp16 1.38x (40 networks)": median error factor per precision,
    over published kernels and over published whole-network latencies; where records of several tables
    give one precision, the one over the most measurements (hw show lists them all)."""
    if not p.validation:
        return "not validated"
    parts = []
    for unit in ("kernels", "networks"):
        best: dict = {}
        for v in p.validation:
            if unit in v and v[unit] >= best.get(v["precision"], {}).get(unit, 0):
                best[v["precision"]] = v
        recs = list(best.values())
        if recs:
            parts.append(", ".join(f"{v['precision']} {v['median_error']:.2f}x" for v in recs)
                         + f" ({sum(v[unit] for v in recs)} {unit})")
    return "; ".join(parts)


@command(hw_app, "schema", kinds=("hw_schema",))
def hw_schema(fmt: Format = None, output: Output = None, quiet: Quiet = False):
    """Document the profile schema (every key, whether it is required, what it means)."""
    from dnnperf.hardware import SCHEMA

    rows = [{"key": k, "type": typ, "required": req, "description": desc} for k, (typ, req, desc) in SCHEMA.items()]
    return Document("hw_schema", {"schema_version": "dnnperf-hw-schema/1", "rows": rows})
