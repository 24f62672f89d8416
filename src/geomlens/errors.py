"""The one exception type that reaches the user as a plain sentence."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence


class GeomlensError(Exception):
    """A problem with the user's input: the message says what is wrong and what to do.

    The command line prints the message alone (no traceback) and exits with code 2.
    """


_OS_ADVICE = {
    errno.ENOSPC: "free some space or choose another --out, then rerun to resume",
    errno.EDQUOT: "free some space or choose another --out, then rerun to resume",
    errno.EACCES: "fix the permissions or choose another --out",
    errno.EPERM: "fix the permissions or choose another --out",
    errno.EROFS: "choose an --out on a writable file system",
    errno.ENOTDIR: "a part of that path is a file, not a folder; choose another path",
    errno.ENOENT: "check the path",
}


def os_error_sentence(exc: OSError) -> str:
    """One sentence for a failed file operation: the path, the cause, what to do.

    Used by the command line for the errors only the operating system can report
    (a full disk, a permission, a read-only file system) wherever they happen.
    """
    code = exc.errno or 0
    cause = exc.strerror or (os.strerror(code) if code else type(exc).__name__)
    verb = "write" if code in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) else "access"
    where = f" {os.fsdecode(exc.filename)}" if exc.filename is not None else ""
    advice = _OS_ADVICE.get(code, "check the path and the disk")
    return f"cannot {verb}{where}: {cause.rstrip('.')}; {advice}."


def one_line(message: str) -> str:
    """A message folded onto one line (messages quoting other libraries may span several)."""
    return " ".join(str(message).split())


def short_list(values: Sequence[object], n: int = 5) -> str:
    """A list as the user would write it, at most ``n`` items then how many more:
    ``[99]``, ``[7, 8, 9, 10, 11, ... and 995 more]`` (a message stays one short line)."""
    shown = ", ".join(str(v) for v in list(values[:n]))
    more = f", ... and {len(values) - n} more" if len(values) > n else ""
    return f"[{shown}{more}]"
