"""Words and strings every writer shares: counted nouns in English, and text that any output
format can carry.

Values we write come from the host, a recording or the environment: a GPU or host name may
hold a lone surrogate (undecodable bytes passed through ``surrogateescape``), ESC, BEL, NUL or
``]]>``. UTF-8 cannot encode a lone surrogate and XML 1.0 cannot hold most C0 controls, so
each writer passes its strings through the helper for its format. What cannot be carried is
written as the escape the terminal shows (``printable``): ``\\x1b``, ``\\udcff``, so the same
value reads the same in every output.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from typing import IO, Any

_ES_ENDINGS = ("s", "x", "z", "ch", "sh")


def noun(n: int, word: str) -> str:
    """``word`` in the number ``n`` asks for: "rank" for 1, "ranks" otherwise, "processes"."""
    if n == 1:
        return word
    return f"{word}{'es' if word.endswith(_ES_ENDINGS) else 's'}"


def plural(n: int | None, word: str) -> str:
    """``n`` and ``word``, counted in English: "1 GPU", "2 GPUs", "2 processes", "0 errors";
    a count that was not read (None) is "an unknown number of GPUs"."""
    if n is None:
        return f"an unknown number of {noun(2, word)}"
    return f"{n} {noun(n, word)}"


_SURROGATE = re.compile("[\ud800-\udfff]")
# What XML 1.0 cannot hold (its Char production): C0 controls other than tab, LF and CR,
# surrogates, U+FFFE and U+FFFF. C1 controls and DEL are allowed but act on a terminal that
# shows the file; they are escaped too.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def numbered(items: Iterable[str]) -> str:
    """Ranked candidates as the findings write them: "(1) a; (2) b"."""
    return "; ".join(f"({i}) {item}" for i, item in enumerate(items, 1))


def _escape(match: re.Match[str]) -> str:
    c = ord(match.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


# A Prometheus label value: prometheus_client escapes backslash, quote and LF, but a reader
# that splits lines the way Python's str.splitlines does (prometheus_client's own parser) also
# breaks at CR, FS/GS/RS, NEL and U+2028/9; other controls would reach every dashboard raw.
_NOT_LABEL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\ufffe\uffff]")


def label_safe(text: str) -> str:
    """``text`` fit for a Prometheus label value: controls other than tab and LF, lone
    surrogates and Unicode line separators written as ``\\xNN`` / ``\\uNNNN`` escapes."""
    return _NOT_LABEL.sub(_escape, text)


def utf8_safe(text: str) -> str:
    """``text`` with each lone surrogate written as ``\\udcNN``: encodable as UTF-8."""
    return _SURROGATE.sub(_escape, text)


def escape_controls(text: str) -> str:
    """``text`` with what XML 1.0 cannot hold (controls, surrogates) written as ``\\xNN`` /
    ``\\uNNNN`` escapes; markup characters are left to the XML writer's own escaping."""
    return _NOT_XML.sub(_escape, text)


def utf8_safe_doc(doc: Any) -> Any:
    """A JSON-ready document with every string (keys too) made ``utf8_safe``."""
    if isinstance(doc, str):
        return utf8_safe(doc)
    if isinstance(doc, dict):
        return {utf8_safe_doc(k): utf8_safe_doc(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [utf8_safe_doc(v) for v in doc]
    return doc


# C0 controls, DEL and C1 controls: ESC starts ANSI sequences, CR and BS overwrite what was
# shown, NEL and LF would split a one-line drain reason. Tab stays: the connection matrix is
# tab-separated, as nvidia-smi prints it.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)) if c != 0x09}
_CONTROLS[ord("\n")] = "\\n"
_CONTROLS[ord("\r")] = "\\r"


def printable(value: object) -> str:
    """``value`` as one line of text a terminal shows literally.

    Controls become ``\\xNN`` escapes; a lone surrogate (undecodable bytes smuggled through a
    file name or a recording) becomes ``\\udcNN``; everything else is kept.
    """
    text = value if isinstance(value, str) else str(value)
    text = text.translate(_CONTROLS)
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def human_size(n: int) -> str:
    """A byte count as nccl-tests and our options write sizes: ``1G``, ``64M``, ``8B``."""
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n}B" if n < 1024 else f"{n / 1024:.1f}K"


LINE_LIMIT = 200  # Slurm keeps a drain reason short; the rest is in the JSON


def truncate(line: str, limit: int = LINE_LIMIT) -> str:
    """``line`` within ``limit`` characters, shortened at a word boundary with "...": a reason
    read by people loses its last words, never half of one, and a parenthesis is kept whole or
    left out (a cut inside one leaves an aside without its end)."""
    if len(line) <= limit:
        return line
    cut = line[: limit - 2]  # one more than fits, so a word ending exactly at the limit stays whole
    outside = _outside_spaces(cut)
    if outside and outside[-1] > limit // 3:
        return cut[: outside[-1]].rstrip(" ,;:") + "..."
    space = cut.rfind(" ")
    # A single word longer than half the room (a path, a long bus id list) is cut where it must be.
    cut = cut[:space] if space > limit // 2 else cut[: limit - 3]
    return cut.rstrip(" ,;:") + "..."


def _outside_spaces(text: str) -> list[int]:
    """Where ``text`` has a space outside every parenthesis, or right before one opens."""
    out, depth = [], 0
    for i, c in enumerate(text):
        if c == "(":
            if depth == 0 and i and text[i - 1] == " ":
                out.append(i - 1)
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif c == " " and depth == 0:
            out.append(i)
    return out


def truncate_middle(text: str, limit: int, keep_head: int = 15) -> str:
    """``text`` within ``limit`` characters, its middle replaced by "...": for what ends in the
    part that matters ("; cannot write /a/long/path/file.prom: No space left on device" keeps
    its start, the file's name and the reason)."""
    if len(text) <= limit:
        return text
    head = min(keep_head, max(0, limit - 3))
    return text[:head] + "..." + text[len(text) - (limit - head - 3) :]


def unknown_line(reason: str, limit: int = LINE_LIMIT) -> str:
    """The one line of `check --format line` when the host could not be judged."""
    return truncate(printable(f"topodoctor UNKNOWN: {reason}"), limit)


# XML text and attribute values, as xml.sax.saxutils writes them: that module imports urllib.request
# (and with it http.client, email and ssl) at every start of a command that can draw.
_XML_TEXT = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_XML_ATTR = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"})


def xml_escape(text: str) -> str:
    """``&``, ``<`` and ``>`` escaped for XML character data."""
    return text.translate(_XML_TEXT)


def xml_quoteattr(text: str) -> str:
    """An XML attribute value, escaped and quoted: double quotes unless the value holds ``"`` and
    no ``'`` (then single), ``"`` written as ``&quot;`` where both occur."""
    value = text.translate(_XML_ATTR)
    if '"' not in value:
        return f'"{value}"'
    if "'" not in value:
        return f"'{value}'"
    return '"{}"'.format(value.replace('"', "&quot;"))


# The one width policy of text for people, every command alike: COLUMNS where set, the terminal's
# width on a terminal, and in a pipe or a file this fixed width (wide enough that tables stay tables).
PIPE_WIDTH = 150


def text_width(stream: IO[str] | None = None) -> int:
    """The columns text for people may fill on ``stream`` (standard output by default): COLUMNS
    where set, the terminal's width on a terminal, ``PIPE_WIDTH`` in a pipe or a file."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stream = stream if stream is not None else sys.stdout
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):  # no descriptor (a test's buffer), or not a terminal
        pass
    return PIPE_WIDTH
