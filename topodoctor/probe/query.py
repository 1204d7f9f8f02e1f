"""The one place that decides what an NVML or sysfs failure means (``classify``).

``Nvml.ask`` turns an answer into ``Probed``: a value, ``Unsupported`` (NOT_SUPPORTED, a
function this driver or binding lacks) or ``ProbeError`` (anything else); field batches and
sysfs reads, listings and links go through the same function. Once a GPU answers
GPU_IS_LOST or RESET_REQUIRED (to a call or to one field of a batch) it is marked gone and
asked nothing more, so a GPU that falls off the bus mid-scan costs one failed call, not
hundreds of timeouts.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any, TypeVar

from topodoctor.core.probed import Probed, ProbeError, Unsupported
from topodoctor.model.nvml_codes import GPU_GONE_CODES
from topodoctor.probe.api import UNSUPPORTED_CODES, NvmlApi, NvmlCallError, error_name
from topodoctor.probe.sysfs import Sysfs, os_error_name

T = TypeVar("T")


def classify(error: NvmlCallError | OSError | int, call: str) -> Unsupported | ProbeError:
    """What a failed NVML call (or one field of a batch, by its return code) or a failed sysfs
    access means. The only place that decides it:

    - NVML NOT_SUPPORTED, a function the driver or binding lacks, a sysfs file or directory
      that does not exist: the feature is absent (``Unsupported``), which is normal and quiet;
    - anything else (no permission, GPU lost, timeout, EACCES, EIO, ...): the query failed
      (``ProbeError``) and whatever depends on it could not be checked.
    """
    if isinstance(error, OSError):
        if isinstance(error, (FileNotFoundError, NotADirectoryError)) or error.errno in (errno.ENOENT, errno.ENOTDIR):
            return Unsupported("ABSENT")
        return ProbeError(os_error_name(error), call)
    code = error.code if isinstance(error, NvmlCallError) else int(error)
    if code in UNSUPPORTED_CODES:
        return Unsupported(error_name(code))
    return ProbeError(error_name(code), call, code)


def _tokens(args: tuple[Any, ...]) -> list[str]:
    return [a for a in args if isinstance(a, str) and a.startswith("gpu:")]


class Nvml:
    """The probe's view of NVML: every answer classified, and a lost GPU asked nothing more."""

    def __init__(self, api: NvmlApi) -> None:
        self.api = api
        self.lost: dict[str, ProbeError] = {}  # device token -> the error that lost it
        # Device tokens of calls naming two GPUs that answered GPU_IS_LOST: which one is gone
        # is asked again before the scan ends (see ``settle``).
        self.suspects: set[str] = set()

    def ask(self, fn: str, *args: Any, convert: Callable[[Any], T] | None = None) -> Probed[T]:
        """Call ``fn``; map the answer to a value, Unsupported or ProbeError."""
        for a in args:
            if isinstance(a, str) and a in self.lost:
                return self.lost[a]
        try:
            raw = self.api.call(fn, *args)
        except NvmlCallError as exc:
            return self.failed(exc.code, fn, _tokens(args))
        if convert is None:
            return raw  # type: ignore[no-any-return]
        try:
            return convert(raw)
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            return ProbeError(f"UNEXPECTED_ANSWER: {type(exc).__name__}", fn)

    def failed(self, code: int, call: str, tokens: list[str]) -> Unsupported | ProbeError:
        """Classify a failed answer; GPU_IS_LOST / RESET_REQUIRED marks the GPU gone.

        A call about one GPU blames that GPU. A call about two (P2P status, common ancestor)
        cannot say which of them fell off the bus, so both become suspects to ask again.
        """
        got = classify(code, call)
        if isinstance(got, ProbeError) and code in GPU_GONE_CODES:
            if len(tokens) == 1:
                self.lost.setdefault(tokens[0], got)
            else:
                self.suspects.update(tokens)
        return got

    def settle(self, liveness_call: str) -> None:
        """Ask each suspect GPU one single-GPU question; the ones that answer lost are lost."""
        for token in sorted(self.suspects - set(self.lost)):
            self.ask(liveness_call, token)
        self.suspects.clear()


def sys_read(fs: Sysfs, path: str, convert: Callable[[str], Probed[T]]) -> Probed[T]:
    """Read one sysfs file: absent means Unsupported, unreadable or unparsable means ProbeError."""
    try:
        text = fs.read(path)
    except OSError as exc:
        return classify(exc, f"read {path}")
    try:
        return convert(text)
    except (ValueError, IndexError) as exc:
        return ProbeError(f"UNPARSABLE: {exc}", f"read {path}")


def sys_list(fs: Sysfs, path: str) -> Probed[list[str]]:
    """Directory entries; a directory that does not exist is Unsupported (nothing there), one
    that cannot be read is a ProbeError, never an empty list."""
    try:
        return fs.listdir(path)
    except OSError as exc:
        return classify(exc, f"list {path}")


def sys_realpath(fs: Sysfs, path: str) -> Probed[str]:
    """Resolve one sysfs link: absent means Unsupported, any other error ProbeError."""
    try:
        return fs.realpath(path)
    except OSError as exc:
        return classify(exc, f"realpath {path}")


def entries(listing: Probed[list[str]], problems: list[ProbeError]) -> list[str]:
    """The names of a listing; a failed listing goes to ``problems`` and lists nothing."""
    if isinstance(listing, ProbeError):
        problems.append(listing)
        return []
    return listing if isinstance(listing, list) else []


def mask_words_to_ids(words: list[int], bits_per_word: int = 64) -> tuple[int, ...]:
    """NVML affinity masks come as an array of 64-bit words, lowest CPU in word 0 bit 0."""
    ids = []
    for w, word in enumerate(words):
        for bit in range(bits_per_word):
            if (int(word) >> bit) & 1:
                ids.append(w * bits_per_word + bit)
    return tuple(ids)
