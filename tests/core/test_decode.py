"""core/decode alone: what it reads as text, and what it refuses, naming the kind; what it
unpacks never outgrows the cap, whatever an archive's headers declare."""

from __future__ import annotations

import gzip
import io
import zipfile

import pytest

from topodoctor.core import decode
from topodoctor.core.errors import InputError


def test_decode_bounds_and_names() -> None:
    """The decoder alone: its refusals name the kind; what it reads never outgrows the cap."""
    assert decode.texts(b"", "f", 100) == [decode.Text("f", "")]
    assert decode.texts(b"\x28\xb5\x2f\xfd....", "f", 100)[0].why.startswith("zstd-compressed")
    assert "flight-recorder" in decode.texts(b"\x80\x04\x95...", "f", 100)[0].why
    assert decode.texts(b"\x00" * 100, "f", 1000)[0].why.startswith("nothing but NUL bytes")
    assert decode.texts(bytes(range(1, 32)) * 40, "f", 10_000)[0].why == "binary data, not text"
    lines = b"".join(b"NCCL WARN line %d\n" % k for k in range(100_000))
    cut = gzip.compress(lines)[:-4000]  # a download that stopped: what it holds is read
    got = decode.texts(cut, "f", 4 << 20)[0].text
    assert got.startswith("NCCL WARN line 0\n") and 0 < len(got) < len(lines)
    assert "larger than 100 B" in decode.texts(gzip.compress(b"a" * 101), "f", 100)[0].why
    with pytest.raises(InputError, match="archive of 2 files"):
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            z.writestr("a.json", "{}")
            z.writestr("b.json", "{}")
        decode.document(out.getvalue(), "result", "r.zip", 1000)
    with pytest.raises(InputError, match=r"is not UTF-8 text \(byte 3\)"):
        decode.document(b"\xef\xbb\xbf\xff{}", "result", "r.json", 1000)


def test_utf32_and_a_stray_bom() -> None:
    text = "NCCL WARN x\n"
    assert decode.texts(b"\xff\xfe\x00\x00" + text.encode("utf-32-le"), "f", 1000)[0].text == text
    assert decode.texts(b"\x00\x00\xfe\xff" + text.encode("utf-32-be"), "f", 1000)[0].text == text
    # "\xff\xfe" opening a UTF-8 log (a terminal's garbage) is no UTF-16: the log after it is read
    got = decode.texts(b"\xff\xfe garbage\n" + text.encode(), "f", 1000)[0].text
    assert got.endswith(text) and "\ufffd" in got


def test_an_archive_header_that_lies_is_refused_not_read_past() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("big.log", b"a" * 5000)
    data = bytearray(out.getvalue())
    # the central directory's and the local header's "uncompressed size" rewritten to 10 bytes
    for sig, at in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):
        k = bytes(data).index(sig) + at
        data[k : k + 4] = (10).to_bytes(4, "little")
    got = decode.texts(bytes(data), "f", 100_000)[0]  # read no further than declared: its CRC fails
    assert got.why.startswith("a zip archive that cannot be read (Bad CRC-32") and not got.text
    big = io.BytesIO()
    with zipfile.ZipFile(big, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("big.log", b"a" * 5000)
    assert "larger than 1000 B" in decode.texts(big.getvalue(), "f", 1000)[0].why  # the declared size, first
    assert decode.texts(gzip.compress(b"ok\n"), "f", 1000) == [decode.Text("f", "ok\n")]


@pytest.mark.parametrize(
    ("opening", "json"),
    [
        ('{"results": []}', True),
        ('[{"header": {}}]', True),
        ("[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]", False),  # p2pBandwidthLatencyTest's first line
        ("[2026-11-25 00:25:00] vm:456:456 [0] NCCL INFO", False),  # a launcher's time stamp
        ("[1,0]<stderr>: NCCL INFO", False),  # mpirun --tag-output
    ],
)
def test_a_text_opening_with_a_bracket_is_not_taken_for_json(opening: str, json: bool) -> None:
    """A JSON document is kept whole; any other text has its overlong lines cut (the readers' patterns
    cost the square of a word's length)."""
    got = decode.texts((opening + "\n" + "#" * 100_000 + "\n").encode(), "f", 1 << 20)[0]
    assert decode.json_like(opening) is json
    assert (got.cut == "") is json and (len(got.text) > 100_000) is json


def test_a_log_in_a_windows_code_page_is_read_and_random_bytes_are_not() -> None:
    log = "训练开始 第一步\nnode:1:1 [0] misc/socket.cc:72 NCCL WARN socketProgress: Connection closed\n"
    got = decode.texts(log.encode("gbk"), "f", 1 << 20)[0]
    assert not got.why and got.text.endswith("NCCL WARN socketProgress: Connection closed\n")
    noise = bytes((k * 7919 + 13) % 256 for k in range(65536))  # every byte value, evenly
    assert decode.texts(noise, "f", 1 << 20)[0].why == "binary data, not text"


def test_a_long_word_is_shortened_in_a_line_of_any_length() -> None:
    """The readers' patterns cost the square of a run without a space, so every word past the limit keeps
    its first MAX_WORD_CHARS, in a short line too; the words around it and the other lines are kept."""
    blob = "A" * (decode.MAX_WORD_CHARS + 100)
    text = f"host:1:2 [0] NCCL INFO key {blob} end\nhost:1:2 [0] NCCL INFO Init COMPLETE\n"
    got = decode.texts(text.encode(), "f", 1 << 20)[0]
    assert got.text.splitlines()[0] == f"host:1:2 [0] NCCL INFO key {'A' * decode.MAX_WORD_CHARS} end"
    assert got.text.splitlines()[1] == "host:1:2 [0] NCCL INFO Init COMPLETE"
    assert got.cut == "1 word too long to read cut to 512 characters"
    short = "host:1:2 [0] NCCL INFO " + "B" * decode.MAX_WORD_CHARS + "\n"
    assert decode.texts(short.encode(), "f", 1 << 20)[0].cut == ""
