"""Parsed copies of the YAML files the package ships (hardware profiles, the GPU generation table, the
fix catalogue), so that a command using only shipped files does not import and run a YAML parser.

The YAML files stay the source: ``dnnperf/data/parsed_yaml.json`` maps the SHA-256 of each file's
text to its parsed data, and ``dnnperf.hardware.safe_yaml`` uses an entry only when the text it is
given hashes to it. An edited or a user's own file misses and is parsed as before, so a stale copy
costs time, never a wrong number. ``python -m dnnperf.parsed`` rewrites the copy (a test fails when a
shipped file has none or a copy differs from the parse).

JSON keeps strings, ints, floats, bools, null, lists and maps with string keys; a map with any other
key (a profile's ``matrix_m_efficiency: {1: 1.0}``) is stored as ``{"\\u0000map": [[key, value], ...]}``.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

try:  # the interpreter's built-in SHA-256: hashlib would load OpenSSL (~3 ms of every command's start)
    from _sha2 import sha256 as _sha256  # Python 3.12+
except ImportError:
    try:
        from _sha256 import sha256 as _sha256  # Python 3.10-3.11
    except ImportError:  # an interpreter built without them
        from hashlib import sha256 as _sha256

_MAP = "\x00map"
HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "data", "parsed_yaml.json")


def digest(text: str) -> str:
    return _sha256(text.encode("utf-8")).hexdigest()


def encode(data):
    """``data`` with every map that has a non-string key written as a list of pairs."""
    if isinstance(data, dict):
        if all(isinstance(k, str) for k in data):
            return {k: encode(v) for k, v in data.items()}
        return {_MAP: [[k, encode(v)] for k, v in data.items()]}
    if isinstance(data, list):
        return [encode(v) for v in data]
    return data


def _hook(obj: dict):
    if len(obj) == 1 and _MAP in obj:
        return {k: v for k, v in obj[_MAP]}
    return obj


@lru_cache(maxsize=1)
def _table() -> dict[str, str]:
    """{sha256 of a shipped file's text: its data as JSON text}; empty when the copy is missing or unreadable."""
    try:
        with open(PATH, encoding="utf-8") as fh:
            table = json.load(fh)
    except (OSError, ValueError):
        return {}
    return table if isinstance(table, dict) else {}


def lookup(text: str):
    """The parsed data of ``text`` if it is a shipped file's exact text (a fresh object each call), else None."""
    table = _table()
    if not table:
        return None
    entry = table.get(digest(text))
    return None if entry is None else json.loads(entry, object_hook=_hook)


def shipped_files() -> list[str]:
    """Every YAML file the package ships: the profiles and the data tables."""
    from dnnperf.hardware import profiles_dir

    out = []
    for folder in (profiles_dir(), os.path.join(HERE, "data")):
        if os.path.isdir(folder):
            out += [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".yaml")]
    return out


def build() -> dict[str, str]:
    """The table for the shipped files as they are now (parsed with the YAML parser, never the copy)."""
    from dnnperf.hardware import parse_yaml

    table = {}
    for path in shipped_files():
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        table[digest(text)] = json.dumps(encode(parse_yaml(text, os.path.basename(path))))  # in the file's order
    return dict(sorted(table.items()))


def main() -> None:
    from dnnperf.files import atomic_write_bytes

    table = build()
    atomic_write_bytes(PATH, (json.dumps(table, indent=0, sort_keys=True) + "\n").encode("utf-8"))
    print(f"wrote {os.path.relpath(PATH)}: {len(table)} files")


if __name__ == "__main__":
    main()
