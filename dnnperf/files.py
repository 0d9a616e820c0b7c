"""Reading and writing the files dnnperf is given: one clear error per bad path, atomic writes."""

from __future__ import annotations

import os

from dnnperf.errors import DnnperfError


def require_file(path: str, kind: str, not_found_hint: str, expected: str) -> None:
    """Fail with one line when ``path`` is missing or a directory.

    ``kind`` names the file ("model file", "baseline"...), ``not_found_hint`` says how to get one,
    ``expected`` what to pass instead of a directory."""
    if not os.path.exists(path):
        raise DnnperfError(f"{kind} not found: '{path}' — {not_found_hint}")
    if os.path.isdir(path):
        raise DnnperfError(f"{kind} path '{path}' is a directory — pass {expected}")


def atomic_write_bytes(dst: str, data: bytes) -> None:
    """Write to a temp file in the same folder, then rename: no half-written file, ever."""
    import tempfile

    folder = os.path.dirname(os.path.abspath(dst)) or "."
    if not os.path.isdir(folder):
        raise DnnperfError(f"cannot write '{dst}': folder '{folder}' does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".dnnperf-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, dst)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
