"""Write the vocabularies (dnnperf/vocab.py) into the JSON Schemas' enum lists.

    python scripts/sync_schema.py          # rewrite schema/*.schema.json in place
    python scripts/sync_schema.py --check  # exit 1 if a schema is out of date (the test suite runs this)

Every "cause" property gets the Cause values, every "family" property the Family values, every
"algorithm" property the Algorithm values (and null), and every "losses_s" object exactly one numeric
property per loss key.
"""

from __future__ import annotations

import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from dnnperf.vocab import ALGORITHMS, CAUSES, FAMILIES, LOSS_KEYS  # noqa: E402


def sync(node, key: str = ""):
    if isinstance(node, dict):
        if key in ("cause", "top_cause", "cause_b", "top_layer_cause") and "enum" in node:
            node["enum"] = list(CAUSES)
        if key == "family" and "enum" in node:
            node["enum"] = list(FAMILIES) + ([None] if None in node["enum"] else [])
        if key == "algorithm" and "enum" in node:
            node["enum"] = list(ALGORITHMS) + [None]
        if key == "losses_s" and node.get("type") == "object":
            node["properties"] = {k: {"type": "number", "minimum": 0} for k in LOSS_KEYS}
            node["required"] = list(LOSS_KEYS)
        for k, v in node.items():
            sync(v, k)
    elif isinstance(node, list):
        for v in node:
            sync(v, key)
    return node


def main() -> int:
    stale = []
    for path in sorted(glob.glob(os.path.join(ROOT, "schema", "*.schema.json"))):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        new = json.dumps(sync(json.loads(text)), indent=2, ensure_ascii=False) + "\n"
        if new != text:
            stale.append(os.path.basename(path))
            if "--check" not in sys.argv:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(new)
    if stale and "--check" in sys.argv:
        print(f"out of date: {', '.join(stale)} — run python scripts/sync_schema.py")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
