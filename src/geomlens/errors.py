"""The one exception type that reaches the user as a plain sentence."""

from __future__ import annotations

import argparse
import errno
import math
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


class GeomlensError(Exception):
    """A problem with the user's input: the message says what is wrong and what to do.

    The command line prints the message alone (no traceback) and exits with code 2.
    """


class NonFiniteResult(GeomlensError):
    """A number geomlens computed is NaN or infinite: it is never saved or printed as a
    result; the message names the part (a layer's statistic, a score, the logits)."""


class LimitError(GeomlensError):
    """A list the user supplied is longer than geomlens takes (``LIMITS``)."""


class IdentityError(GeomlensError):
    """What was given does not match what the run names (a loaded model of another folder
    or dtype, a weight stored as another dtype than its data)."""


class InternalError(GeomlensError):
    """A failure inside geomlens or a library it calls, met at the Python API's boundary:
    the API raises ``GeomlensError`` subclasses only, and this one says it is a bug. The
    original exception is its ``__cause__``."""


@contextmanager
def api_boundary(name: str) -> Iterator[None]:
    """The Python API's one error boundary (the command line's is ``geomlens.cli.main``):
    inside the block a ``GeomlensError`` passes as it is, a failed file operation becomes
    its one sentence (``os_error_sentence``), and any other exception an ``InternalError``
    naming ``name``. KeyboardInterrupt and SystemExit pass untouched."""
    try:
        yield
    except GeomlensError:
        raise
    except OSError as exc:
        raise GeomlensError(os_error_sentence(exc)) from exc
    except Exception as exc:
        what = one_line(f"{type(exc).__name__}: {exc}")
        what = what if len(what) <= 300 else what[:297] + "..."
        raise InternalError(
            f"{name}() failed inside geomlens ({what}); this is a bug in geomlens or a "
            "library it calls, not in the arguments: the original error is this one's "
            "__cause__."
        ) from exc


LIMITS = {
    "choices": 100,
    "items": 100_000,
    "nouns": 10_000,
    "scheme combinations": 100_000,
}
"""The longest lists a user may supply, by what they hold (docs/errors.md, "Limits"):
answer choices (endings) of one task item; items of one task file; probe nouns in a
``--nouns`` file; combinations of field values in one ``--sweep`` grid (the paper's grid
has 12,032, fewer distinct schemes). Each bounds a run's memory and time: a choice is
scored by a forward pass, a noun probed at every layer, a scheme scores the task."""

FILE_LIMITS = {
    "--text-file": 16 * 2**20,
    "--nouns": 16 * 2**20,
    "task file": 512 * 2**20,
}
"""The most bytes geomlens reads from a text file a user names (docs/errors.md, "Limits"): a
walk text longer than any model's positions is far below 16 MiB; the largest public
multiple-choice sets (HellaSwag's training split, about 50 MB) fit in 512 MiB. A device
such as /dev/zero, or a file past its limit, is refused before it fills memory."""


def within_limit(what: str, kind: str, count: int, advice: str) -> None:
    """Refuse ``count`` entries of ``kind`` (a key of ``LIMITS``) in ``what`` beyond its
    limit, with one sentence naming the limit and ``advice`` (what to change)."""
    limit = LIMITS[kind]
    if count > limit:
        raise LimitError(
            f"{what} has {count:,} {kind}, more than the {limit:,} geomlens takes; {advice}."
        )


def distinct_choices(where: str, choices: Sequence[str]) -> None:
    """Refuse an item whose choices are too many or not all different: the same text
    twice gets the same score, so the gold answer cannot be told from its copy."""
    within_limit(where, "choices", len(choices), "split the item or keep fewer choices")
    seen: dict[str, int] = {}
    for i, choice in enumerate(choices):
        if choice in seen:
            shown = choice if len(choice) <= 40 else choice[:37] + "..."
            raise GeomlensError(
                f"{where} has the same choice twice (choices {seen[choice]} and {i}: "
                f"{shown!r}); every choice must differ so its score can tell it apart."
            )
        seen[choice] = i


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


def seconds_option(text: str) -> float:
    """An option's number of seconds (``--checkpoint-every``): 0 or more (``inf``: never),
    never NaN; for argparse's ``type=`` (the error becomes its one-line usage error)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value < 0:
        raise argparse.ArgumentTypeError(f"takes a number of seconds, 0 or more (got {text!r})")
    return value


def one_line(message: str) -> str:
    """A message folded onto one line (messages quoting other libraries may span several)."""
    return " ".join(str(message).split())


QUOTED_CHARS = 80
"""The most characters of one item of the user's data an error message quotes."""


def clipped(text: object, limit: int = QUOTED_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters (an ellipsis marking the cut), so an
    error quoting a user's text, name or value stays one short sentence."""
    text = one_line(str(text))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_list(values: Sequence[object], n: int = 5) -> str:
    """A list as the user would write it, at most ``n`` items then how many more:
    ``[99]``, ``[7, 8, 9, 10, 11, ... and 995 more]`` (a message stays one short line)."""
    shown = ", ".join(str(v) for v in list(values[:n]))
    more = f", ... and {len(values) - n} more" if len(values) > n else ""
    return f"[{shown}{more}]"
