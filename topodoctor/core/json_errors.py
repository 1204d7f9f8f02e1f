"""JSON that the user gave, refused in one line: what the decoder says becomes an InputError
naming the document, the same words for every reader (core/fileio.py ``parse_json``, the fleet's
result files)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from topodoctor.core.errors import InputError


def no_constant(name: str) -> Any:
    """json's hook for NaN, Infinity and -Infinity: refused (JSON has no such numbers)."""
    raise ValueError(f"{name} is not a number JSON allows")


# A decoder that refuses NaN and Infinity, for callers that take numbers as they come (made once:
# json.loads with a hook makes a decoder every call).
STRICT_DECODER = json.JSONDecoder(parse_constant=no_constant)


@contextlib.contextmanager
def json_errors(what: str) -> Iterator[None]:
    """Decoding ``what`` inside: what the decoder refuses becomes one InputError naming it."""
    try:
        yield
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} is not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except ValueError as exc:
        raise InputError(f"{what} is not acceptable JSON: {exc}") from None
    except RecursionError:
        raise InputError(f"{what} is nested too deeply") from None
