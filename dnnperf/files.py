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


def read_text(path: str, kind: str, limit: int) -> str:
    """The text of a file the user gave (``kind`` names it in messages), refused past ``limit`` bytes: a
    device or pipe that never ends (``/dev/zero``) or a file of the wrong sort is one line, not a read
    that hangs or fills the memory. Decoding errors are left to the caller (it knows the format)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise DnnperfError(f"cannot read {kind} '{path}': {exc.strerror or exc}") from None
    if len(data) > limit:
        raise DnnperfError(f"{kind} '{path}' is larger than {_size(limit)} — is it the right file?")
    return data.decode("utf-8")


def _size(n: int) -> str:
    return f"{n // 10**6} MB" if n >= 10**6 else f"{n} bytes"


def require_regular(path: str, kind: str) -> None:
    """A device or a pipe given as ``kind`` ("model file") is refused: its size is unknown to ``stat``."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # the reader says what is wrong
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise DnnperfError(f"{kind} '{path}' is not a regular file (a device or a pipe) — save it to a file and "
                           "pass that path")


def atomic_write_bytes(dst: str, data: bytes) -> None:
    """Write to a temp file in the same folder, then rename: no half-written file, ever. A symbolic
    link is written through (the link stays, its target gets the bytes, as a shell's ``>`` does); a
    destination that exists and is not a regular file (``/dev/stdout``, ``/dev/null``, a named pipe,
    a shell's ``>(...)``) is written into directly, never renamed over: a rename would put a plain
    file in its place (as root, over ``/dev/null`` itself). A write that fails (no space left, no
    permission) is one line, exit 2, and leaves no temp file behind. A file written over keeps its
    permissions; a new one gets the umask's."""
    import stat
    import tempfile

    try:
        mode = os.stat(dst).st_mode  # through any link (/dev/stdout -> /proc/self/fd/1 -> a pipe)
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISDIR(mode):
            raise DnnperfError(f"cannot write '{dst}': it is a directory — pass a file name")
        try:
            with open(dst, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise DnnperfError(f"cannot write '{dst}': {exc.strerror or exc}") from None
        return
    real = os.path.realpath(dst)
    folder = os.path.dirname(real) or "."
    if not os.path.isdir(folder):
        shown = folder if os.path.islink(dst) else os.path.dirname(os.path.abspath(dst))
        raise DnnperfError(f"cannot write '{dst}': folder '{shown}' does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".dnnperf-", dir=folder)
    except OSError as exc:
        raise DnnperfError(f"cannot write '{dst}': {exc.strerror or exc} (folder '{folder}')") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if mode is not None:  # a file written over keeps its permissions (a private 0600 file stays private)
            os.chmod(tmp, stat.S_IMODE(mode))
        else:
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, real)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise DnnperfError(f"cannot write '{dst}': {exc.strerror or exc}") from None
        raise
