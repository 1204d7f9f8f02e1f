"""What a user's file holds, as text: the bytes ``fileio`` read, unpacked and decoded the way
the user who attached them expects.

Logs are attached compressed (``.gz``, ``.bz2``, ``.xz``) or zipped with their neighbours
(``.zip``, ``.tar.gz``), and saved by Windows PowerShell's ``>`` as UTF-16 with a byte-order
mark; a crashed node leaves runs of NUL bytes in a log, a terminal's colours leave escapes.
Each is told by its bytes, never its name, and read: every archive member and every stream is
decompressed in bounded steps, so no member, nor all of them together, grows past the cap the
file itself was read under (a zip bomb costs a refusal, not the memory). What is not text (an
image, a program, a flight-recorder dump, a kind of compression the standard library lacks) is
said in a few words naming the kind.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from topodoctor.core.errors import InputError
from topodoctor.core.text import plural

MiB = 1 << 20
MAX_DEPTH = 3  # a .tar.gz is two layers; a .gz of a .zip of .gz logs three
MAX_MEMBERS = 4096
_CHUNK = 64 * 1024  # a stream cut short loses at most its last chunk
_SNIFF = 1 << 16  # how much of a decoded text is looked at to tell text from binary data
# C0 controls above this share: not text (random bytes hold 10 %). Undecodable bytes do not count: a
# log in a Windows code page (GBK, Shift-JIS) is mostly those, and its NCCL lines still read.
_BINARY_SHARE = 0.05
# No reader takes a line this long (NCCL's are under 4 KiB, the header of a topo -m matrix of 10,000
# devices under 100 KiB), nor a word this long: the readers' patterns, tried at every position of a run
# without a space, cost the square of its length (an 8 KiB run took most of a second per pattern). A line
# longer than MAX_LINE_CHARS is cut there, and in every line a word longer than MAX_WORD_CHARS (a blob, a
# progress bar of '#', a long PATH) keeps its first MAX_WORD_CHARS. JSON is kept whole.
MAX_LINE_CHARS = 256 * 1024
MAX_WORD_CHARS = 512
_LONG_WORD = re.compile(rf"\S{{{MAX_WORD_CHARS + 1},}}")

_STREAMS: tuple[tuple[str, Callable[[bytes], bool]], ...] = (
    ("gzip", lambda d: d[:2] == b"\x1f\x8b"),
    ("bzip2", lambda d: d[:3] == b"BZh" and d[3:4].isdigit()),
    ("xz", lambda d: d[:6] == b"\xfd7zXZ\x00"),
)
# Kinds that are not text, by their first bytes: what the refusal names.
_NOT_TEXT = (
    (b"\x28\xb5\x2f\xfd", "zstd-compressed (decompress it with `zstd -d` first)"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive (extract it first)"),
    (b"Rar!\x1a\x07", "a RAR archive (extract it first)"),
    (b"\x89PNG", "a PNG image, not text"),
    (b"\xff\xd8\xff", "a JPEG image, not text"),
    (b"GIF8", "a GIF image, not text"),
    (b"%PDF", "a PDF document, not text"),
    (b"\x7fELF", "a program (ELF), not text"),
    (b"SQLite format 3\x00", "an SQLite database, not text"),
)
_PICKLE = re.compile(rb"\x80[\x02-\x05]")  # torch's flight-recorder dumps are pickles
_BOMS = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")  # colours, titles, links
# How a JSON document of a kind we read opens: an object, or an array of them ("[2026-11-25 00:25:00]
# host:...", "[1,0]<stderr>:" and "[P2P (Peer-to-Peer)..." open lines of text).
_JSON_START = re.compile(r'\{\s*["}]|\[\s*[{\["\]]')
_CONTROLS = re.compile("[\x01-\x08\x0e-\x1a\x1c-\x1f]")  # not tab, LF, VT, FF, CR or ESC


@dataclass(frozen=True)
class Text:
    """One text a file holds (the file itself, or one member of an archive): ``text``, or ``why``
    it is not text."""

    name: str
    text: str = ""
    why: str = ""
    cut: str = ""  # what was left out of the text, said beside what it shows


class _Refused(Exception):
    pass


def texts(data: bytes, name: str, max_bytes: int) -> list[Text]:
    """Every text in ``data`` (the bytes of the file ``name``): one, or one per archive member
    (named ``name:member``). Decompressed output is bounded by ``max_bytes`` in all."""
    try:
        members = _unpacked(data, name, max_bytes, MAX_DEPTH, [0])
    except _Refused as why:
        return [Text(name, why=str(why))]
    return [_text(n, d) for n, d in members]


def document(data: bytes, what: str, name: str, max_bytes: int) -> str:
    """The text of a document (JSON, TOML): unpacked and decoded as ``texts`` does, but strict:
    one member, UTF-8 (a byte-order mark allowed) or UTF-16/32 with one, else ``InputError``
    ("WHAT NAME is why"; ``name`` may be "" where ``what`` names the file)."""
    try:
        members = _unpacked(data, name, max_bytes, MAX_DEPTH, [0])
    except _Refused as why:
        raise InputError(f"{_label(what, name)} is {why}") from None
    if len(members) != 1:
        raise InputError(f"{_label(what, name)} is an archive of {len(members)} files, where one document was expected")
    inner, raw = members[0]
    codec, skip = _bom(raw)
    try:
        return raw[skip:].decode(codec or "utf-8")
    except UnicodeDecodeError as exc:
        kind = _not_text(raw) or f"not UTF-8 text (byte {exc.start + skip})"
        raise InputError(f"{_label(what, inner)} is {kind}") from None


def _label(what: str, name: str) -> str:
    return f"{what} {name}" if name else what


def _unpacked(data: bytes, name: str, max_bytes: int, depth: int, total: list[int]) -> list[tuple[str, bytes]]:
    """``data`` itself, or what its compression or archive holds, every member once."""
    if depth > 0:
        for kind, is_kind in _STREAMS:
            if is_kind(data):
                inner = _decompressed(kind, _opened(kind, io.BytesIO(data)), max_bytes, total)
                return _unpacked(inner, name, max_bytes, depth - 1, total)
        if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
            return _zip_members(data, name, max_bytes, depth, total)
        if data[257:262] == b"ustar":
            return _tar_members(data, name, max_bytes, depth, total)
    return [(name, data)]


def _opened(kind: str, raw: IO[bytes]) -> io.BufferedIOBase:
    """A decompressing reader of ``raw`` (``_decompressed`` closes it)."""
    # The compression modules load only for a compressed input: a check's start-up never pays for them.
    if kind == "gzip":
        import gzip  # only for a compressed input

        return gzip.GzipFile(fileobj=raw)
    if kind == "bzip2":
        import bz2  # only for a compressed input

        return bz2.BZ2File(raw)
    import lzma  # only for a compressed input

    return lzma.LZMAFile(raw)


def _decompressed(kind: str, stream: IO[bytes] | io.BufferedIOBase, max_bytes: int, total: list[int]) -> bytes:
    """A compressed stream's content, read a chunk at a time: never more than the cap in memory.
    A stream cut short (an attachment whose download stopped) gives what it holds."""
    import lzma  # only for a compressed input: its error class
    import zlib  # only for a compressed input: its error class

    chunks: list[bytes] = []
    try:
        with stream:
            while chunk := stream.read(_CHUNK):
                chunks.append(chunk)
                _count(total, len(chunk), max_bytes, kind)
    except EOFError:
        if not chunks:
            raise _Refused(f"{kind}-compressed, and cut before any of it could be read") from None
    except (OSError, lzma.LZMAError, zlib.error) as exc:
        raise _Refused(f"{kind}-compressed, but corrupt ({exc})") from None
    return b"".join(chunks)


def _count(total: list[int], n: int, max_bytes: int, kind: str) -> None:
    total[0] += n
    if total[0] > max_bytes:
        cap = f"{max_bytes // MiB} MiB" if max_bytes >= MiB else f"{max_bytes} B"
        raise _Refused(f"{kind}-compressed, and larger than {cap} once decompressed (the cap on one input)")


def _zip_members(data: bytes, name: str, max_bytes: int, depth: int, total: list[int]) -> list[tuple[str, bytes]]:
    import zipfile  # only for a zip archive

    out: list[tuple[str, bytes]] = []
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            infos = [i for i in z.infolist() if not i.is_dir() and _kept(i.filename)]
            _many(len(infos), "zip")
            for info in infos:
                if info.flag_bits & 0x1:
                    raise _Refused(f"a zip archive whose {info.filename} is encrypted")
                _count([total[0]], info.file_size, max_bytes, "zip")  # what its header declares
                with z.open(info) as member:  # read bounded all the same: a header can lie
                    got = _decompressed("zip", member, max_bytes, total)
                out.extend(_unpacked(got, f"{name}:{info.filename}", max_bytes, depth - 1, total))
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError, EOFError, ValueError) as exc:
        raise _Refused(f"a zip archive that cannot be read ({exc})") from None
    return out


def _tar_members(data: bytes, name: str, max_bytes: int, depth: int, total: list[int]) -> list[tuple[str, bytes]]:
    import tarfile  # only for a tar archive

    out: list[tuple[str, bytes]] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
            infos = [m for m in t.getmembers() if m.isfile() and _kept(m.name)]
            _many(len(infos), "tar")
            for m in infos:
                member = t.extractfile(m)
                if member is None:
                    continue
                got = _decompressed("tar", member, max_bytes, total)
                out.extend(_unpacked(got, f"{name}:{m.name}", max_bytes, depth - 1, total))
    except tarfile.TarError as exc:
        raise _Refused(f"a tar archive that cannot be read ({exc})") from None
    return out


def _kept(member: str) -> bool:
    """Not an archiver's bookkeeping: macOS's ``__MACOSX/`` and ``._*`` forks, dot-files."""
    base = member.rsplit("/", 1)[-1]
    return not member.startswith("__MACOSX/") and not base.startswith(".")


def _many(n: int, kind: str) -> None:
    if n == 0:
        raise _Refused(f"an empty {kind} archive")
    if n > MAX_MEMBERS:
        raise _Refused(f"a {kind} archive of more than {MAX_MEMBERS} files")


def _bom(data: bytes) -> tuple[str | None, int]:
    """The encoding a byte-order mark names, and its length; (None, 0) without one."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return codec, len(bom)
    return None, 0


def _utf16_without_bom(head: bytes) -> str | None:
    """ASCII text in UTF-16 (every other byte NUL) written without a byte-order mark."""
    half = len(head) // 2
    if half < 4:
        return None
    even, odd = head[0::2].count(0), head[1::2].count(0)
    if odd > 0.4 * half and even < 0.05 * half:
        return "utf-16-le"
    if even > 0.4 * half and odd < 0.05 * half:
        return "utf-16-be"
    return None


def _ascii_in_utf16(sample: bytes, codec: str) -> bool:
    """Whether ``sample`` reads as a log in UTF-16 does: mostly ASCII, so a NUL in a quarter or more
    of the characters' high bytes."""
    high = sample[1::2] if codec == "utf-16-le" else sample[0::2]
    return not high or high.count(0) >= 0.25 * len(high)


def _not_text(data: bytes) -> str:
    """The kind of a file that is no text, by its first bytes ("" when none of those)."""
    for magic, kind in _NOT_TEXT:
        if data.startswith(magic):
            return kind
    if _PICKLE.match(data[:2]):
        return "a Python pickle (a flight-recorder dump? `topodoctor job` reads those), not text"
    return ""


def _text(name: str, data: bytes) -> Text:
    """``data`` as text: by its byte-order mark, as UTF-16 where every other byte is NUL, else
    UTF-8 with undecodable bytes (Latin-1 in a UTF-8 log) shown as U+FFFD. NUL bytes are dropped
    and terminal escapes taken out; what is then mostly controls is binary data, said."""
    if kind := _not_text(data):
        return Text(name, why=kind)
    codec, skip = _bom(data)
    if codec in ("utf-16-le", "utf-16-be") and not _ascii_in_utf16(data[skip : skip + 4096], codec):
        codec, skip = None, 0  # "\xff\xfe" opening a UTF-8 log's stray bytes: no UTF-16 follows
    codec = codec or _utf16_without_bom(data[:4096]) or "utf-8"
    text = data[skip:].decode(codec, "replace")
    if "\x00" in text:
        text = text.replace("\x00", "")
        if data and not text.strip():
            return Text(name, why="nothing but NUL bytes (a log a crash left unwritten?)")
    if "\x1b" in text:
        text = _ESCAPES.sub("", text)
    sniff = text[:_SNIFF]
    if sniff and len(_CONTROLS.findall(sniff)) > _BINARY_SHARE * len(sniff):
        return Text(name, why="binary data, not text")
    if len(text) > MAX_WORD_CHARS and not json_like(text):
        return _short_lines(name, text)
    return Text(name, text)


def json_like(text: str) -> bool:
    """Whether ``text`` opens as a JSON document we read does (an object, or an array of them)."""
    return _JSON_START.match(text.lstrip()[:64]) is not None


def _short_lines(name: str, text: str) -> Text:
    """``text`` with every line too long for the readers cut (``MAX_LINE_CHARS``) and every word too
    long for them shortened (``MAX_WORD_CHARS``), and that said."""
    if not _LONG_WORD.search(text) and len(text) <= MAX_LINE_CHARS:
        return Text(name, text)
    lines = text.splitlines(keepends=True)
    long_lines = words = 0
    for k, line in enumerate(lines):
        if len(line) > MAX_LINE_CHARS:
            line, long_lines = line[:MAX_LINE_CHARS] + "\n", long_lines + 1
        line, n = _LONG_WORD.subn(lambda m: m.group()[:MAX_WORD_CHARS], line)
        lines[k], words = line, words + n
    said = []
    if long_lines:
        said.append(f"{plural(long_lines, 'line')} too long to read cut to {MAX_LINE_CHARS // 1024} KiB")
    if words:
        said.append(f"{plural(words, 'word')} too long to read cut to {MAX_WORD_CHARS} characters")
    if not said:
        return Text(name, text)
    return Text(name, "".join(lines), cut="; ".join(said))
