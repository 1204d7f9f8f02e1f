"""The files users hand topodoctor, as they hand them, through every command that reads one.

A log attached to a ticket comes gzipped, zipped or as a .tar.gz; Windows PowerShell's ``>``
saves it as UTF-16 with a byte-order mark; a crashed node leaves NUL runs in it, a terminal its
colours, an editor CRLF. Each readable form is read exactly as its plain UTF-8 copy is (the same
answer, the same exit code); every other input (a FIFO with no writer, /dev/zero, a link loop, an
empty file, a zip bomb, a file over the cap) is one line and exit 2, never a traceback or a hang.

Inputs: nccl-tests' all_reduce table and NCCL's INFO log of a failed run measured on the H200 hosts
(fixtures/nccl-tests/h200-x2, fixtures/nccl-logs/failures/net-ib), a bandwidth result of the 4 x H200
host, the bundled h200-x2 recording, a node's result as `fleet` reads it.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import io
import json
import lzma
import os
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

import topodoctor
from topodoctor.cli.commands import main
from topodoctor.core import fileio, stdio
from topodoctor.core.errors import InputError

TABLE = FIXTURES / "nccl-tests" / "h200-x2" / "all_reduce.txt"
LOG = FIXTURES / "nccl-logs" / "failures" / "net-ib" / "info" / "rank0.txt"
SAYS = {"nccl-log": "TD040", "diagnose": "TD025"}  # what each makes of LOG: no NET plugin; sockets, not IB
# nccl-log's TD040 is an error; diagnose's TD025 a warning, as no NIC listing shows whether RDMA NICs exist
EXIT = {"nccl-log": 1, "diagnose": 0}
BANDWIDTH = FIXTURES / "bandwidth" / "h200-x4.quick.json"
RECORDING = ROOT / "topodoctor" / "probe" / "recordings" / "h200-x2.json"
NODE = FIXTURES / "fleet" / "h200-x2.bandwidth.1.json"


def _zip(data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("__MACOSX/._input", b"\x00\x05\x16\x07")  # a Mac's zip: its forks are passed over
        z.writestr("input", data)
    return out.getvalue()


def _tar_gz(data: bytes) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as t:
        info = tarfile.TarInfo("logs/input")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _nul_run(data: bytes) -> bytes:
    cut = data.index(b"\n", 200) + 1  # a block of NULs at the start of a line, as a crash leaves them
    return data[:cut] + b"\x00" * 4096 + data[cut:]


# Forms of any file that must be read as the file itself is.
SAME: dict[str, Callable[[bytes], bytes]] = {
    "utf-16-le-bom": lambda b: b"\xff\xfe" + b.decode().encode("utf-16-le"),
    "utf-16-be-bom": lambda b: b"\xfe\xff" + b.decode().encode("utf-16-be"),
    "utf-8-bom": lambda b: b"\xef\xbb\xbf" + b,
    "crlf": lambda b: b.replace(b"\n", b"\r\n"),
    "gzip": gzip.compress,
    "bzip2": bz2.compress,
    "xz": lzma.compress,
    "zip": _zip,
    "tar.gz": _tar_gz,
}
# Forms of a text (not a JSON document) that must be read as the text is.
SAME_TEXT: dict[str, Callable[[bytes], bytes]] = {
    **SAME,
    "utf-16-le-no-bom": lambda b: b.decode().encode("utf-16-le"),
    "lone-cr": lambda b: b.replace(b"\n", b"\r"),
    "nul-run": _nul_run,
    "ansi-colours": lambda b: b.replace(b"\n", b"\x1b[0m\n").replace(b"NCCL", b"\x1b[1;31mNCCL\x1b[0m"),
    "gzip-of-utf-16": lambda b: gzip.compress(b"\xff\xfe" + b.decode().encode("utf-16-le")),
}
# command -> (the file it reads, the command line for a path, reads a text rather than a JSON document)
COMMANDS: dict[str, tuple[Path, Callable[[str], list[str]], bool]] = {
    "diagnose": (TABLE, lambda f: ["diagnose", f, "-f", "json"], True),
    "nccl-log": (LOG, lambda f: ["nccl-log", f, "-f", "json"], True),
    "collectives --from": (TABLE, lambda f: ["collectives", "--from", f, "--replay", "h200-x2", "-f", "json"], True),
    "bandwidth --from": (BANDWIDTH, lambda f: ["bandwidth", "--from", f, "-f", "json"], False),
    "check --replay": (RECORDING, lambda f: ["check", "--replay", f, "-f", "json"], False),
    "scan --replay": (RECORDING, lambda f: ["scan", "--replay", f, "-f", "json"], False),
    "fleet": (NODE, lambda f: ["fleet", f, "-f", "json"], False),
}


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    got = capsys.readouterr()
    assert "Traceback" not in got.err, got.err
    return code, got.out, got.err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topodoctor: error:"), err
    return lines[0]


def _answer(out: str, path: Path) -> object:
    """A command's JSON answer with the file's name (and an archive member's) taken out, and the
    time the command took and the moment it ran left out."""
    text = out.replace(f"{path}:logs/input", "FILE").replace(f"{path}:input", "FILE").replace(str(path), "FILE")
    text = text.replace(f"{path.name}:logs/input", "FILE").replace(f"{path.name}:input", "FILE")
    text = text.replace(path.name, "FILE").replace('"input"', '"FILE"')  # nccl-log names a member by its own name
    return _timeless(json.loads(text))


def _timeless(doc: object) -> object:
    if isinstance(doc, dict):
        return {k: _timeless(v) for k, v in doc.items() if k not in ("elapsed_s", "measured_at")}
    if isinstance(doc, list):
        return [_timeless(v) for v in doc]
    return doc


def _cases() -> list[tuple[str, str]]:
    return [(c, form) for c, (_, _, text) in COMMANDS.items() for form in (SAME_TEXT if text else SAME)]


@pytest.mark.parametrize(("command", "form"), _cases())
def test_a_readable_form_is_read_as_its_plain_copy(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, form: str
) -> None:
    source, argv, text = COMMANDS[command]
    plain, other = tmp_path / "plain.in", tmp_path / "other.in"
    plain.write_bytes(source.read_bytes())
    other.write_bytes((SAME_TEXT if text else SAME)[form](source.read_bytes()))
    want_code, want, _ = run(capsys, argv(str(plain)))
    code, got, err = run(capsys, argv(str(other)))
    assert want_code in (0, 1) and code == want_code, err
    assert _answer(got, other) == _answer(want, plain)


def test_latin1_bytes_in_a_utf8_log_are_shown_not_fatal(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "rank0.txt"
    log.write_bytes(b"Jos\xe9's job on caf\xe9-node\n" + LOG.read_bytes())  # a code page's name before NCCL's lines
    code, out, _ = run(capsys, ["nccl-log", str(log), "-f", "json"])
    assert code == 1 and [f["code"] for f in json.loads(out)["findings"]][:1] == ["TD040"]
    code, out, _ = run(capsys, ["diagnose", str(log), "-f", "json"])
    assert code in (0, 1) and json.loads(out)["evidence"]["pieces"][0]["kind"] == "nccl-log"


@functools.cache
def _bomb() -> bytes:
    return gzip.compress(b"\x00" * (80 << 20), compresslevel=1)  # 80 MiB of NULs in 80 KB


@functools.cache
def _zip_bomb() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for k in range(3):  # each member under the cap, together over it
            z.writestr(f"part{k}.log", b"a" * (30 << 20))
    return out.getvalue()


def _special(tmp_path: Path, kind: str) -> str:
    path = tmp_path / f"input-{kind}"
    if kind == "fifo":
        os.mkfifo(path)  # no writer: opening it for reading must not wait for one
    elif kind == "dev-zero":
        return "/dev/zero"
    elif kind == "dev-urandom":
        return "/dev/urandom"
    elif kind == "link-loop":
        os.symlink(tmp_path / "other-end", path)
        os.symlink(path, tmp_path / "other-end")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "over-cap":
        with open(path, "wb") as f:
            f.truncate(65 << 20)  # sparse: 65 MiB that costs no disk
    elif kind == "gzip-bomb":
        path.write_bytes(_bomb())
    elif kind == "zip-bomb":
        path.write_bytes(_zip_bomb())
    elif kind == "png":
        path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    elif kind == "missing":
        pass
    return str(path)


REFUSED = {
    "fifo": "not a regular file",
    "dev-zero": "not a regular file",
    "dev-urandom": "not a regular file",
    "link-loop": "symbolic link loop",
    "empty": "empty",
    "over-cap": "larger than",
    "gzip-bomb": "once decompressed",
    "zip-bomb": "once decompressed",
    "png": "PNG image",
    "missing": "not found",
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(
    "kind", [pytest.param(k, marks=pytest.mark.slow) if k.endswith("bomb") else k for k in REFUSED]
)  # a bomb costs 0.3 s of decompressing to its cap
def test_what_cannot_be_read_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, kind: str
) -> None:
    _, argv, _ = COMMANDS[command]
    code, _, err = run(capsys, [a for a in argv(_special(tmp_path, kind)) if a not in ("-f", "json")])
    line = one_error_line(err)
    assert code == 2 and REFUSED[kind] in line, line
    if kind in ("over-cap", "gzip-bomb"):
        assert "MiB" in line  # the cap is said


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
@pytest.mark.parametrize("command", list(COMMANDS))
def test_permission_denied_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str) -> None:
    source, argv, _ = COMMANDS[command]
    f = tmp_path / "closed"
    f.write_bytes(source.read_bytes())
    f.chmod(0)
    code, _, err = run(capsys, argv(str(f)))
    assert code == 2 and "Permission denied" in one_error_line(err)


@pytest.mark.parametrize("command", ["diagnose", "nccl-log"])
def test_a_zero_byte_standard_input_is_said(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    code, _, err = run(capsys, [command, "-"])
    assert code == 2 and "empty" in one_error_line(err)


def test_standard_input_over_the_cap_says_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x" * (2 * 1024 * 1024 + 1))))
    with pytest.raises(InputError, match=r"^evidence on standard input is larger than 2 MiB$"):
        stdio.read_stdin("evidence", 2 * 1024 * 1024)


@pytest.mark.parametrize("command", ["diagnose", "nccl-log"])
def test_a_compressed_log_piped_in_is_read(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(LOG.read_bytes()))))
    code, out, _ = run(capsys, [command, "-", "-f", "json"])
    findings = [f["code"] for f in json.loads(out)["findings"]]
    assert code == EXIT[command] and SAYS[command] in findings


@pytest.mark.slow  # 60 MB written and read twice
def test_a_60_mb_line_without_a_newline_is_cut_and_said(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "stuck.log"
    log.write_bytes(LOG.read_bytes() + b"#" * (60 << 20))  # a progress bar that never printed a newline
    code, out, err = run(capsys, ["nccl-log", str(log), "-f", "json"])
    assert code == 1 and "TD040" in [f["code"] for f in json.loads(out)["findings"]]
    assert "1 line too long to read cut to 256 KiB; 1 word too long to read cut to 512" in " ".join(err.split())
    code, out, _ = run(capsys, ["diagnose", str(log), "-f", "json"])
    assert code == EXIT["diagnose"] and "1 line too long to read cut" in json.loads(out)["evidence"]["pieces"][0]["cut"]


@pytest.mark.slow  # two thousand files
def test_a_directory_of_thousands_of_files_and_its_odd_ones(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Two thousand empty rank logs, a deeply nested real one, and what a directory also holds: a FIFO,
    a link loop, a screenshot. The log is read, the rest said beside the answer; nothing hangs."""
    d = tmp_path / "logs"
    deep = d.joinpath(*[f"l{k}" for k in range(60)])
    deep.mkdir(parents=True)
    (deep / "rank0.log").write_bytes(LOG.read_bytes())
    for k in range(2000):
        (d / f"rank{k + 1}.log").write_bytes(b"")
    os.mkfifo(d / "pipe.log")
    os.symlink(d / "b.log", d / "a.log")
    os.symlink(d / "a.log", d / "b.log")
    (d / "shot.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    code, out, err = run(capsys, ["nccl-log", str(d), "-f", "json"])
    assert code == 1 and "TD040" in [f["code"] for f in json.loads(out)["findings"]]
    assert "not read:" in err and "pipe.log" in err and "symbolic link loop" in err and "PNG image" in err
    code, out, _ = run(capsys, ["diagnose", str(d), "-f", "json"])
    doc = json.loads(out)
    assert [p["kind"] for p in doc["evidence"]["pieces"]] == ["nccl-log"]
    assert any("pipe.log: evidence file is not a regular file" in u for u in doc["evidence"]["unreadable"])


def test_a_directory_of_compressed_logs_is_read(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "rank0.log.gz").write_bytes(gzip.compress(LOG.read_bytes()))
    (tmp_path / "job.tar.gz").write_bytes(_tar_gz(LOG.read_bytes()))
    (tmp_path / "notes.md").write_text("not a log")  # passed over by its name, as before
    code, out, _ = run(capsys, ["nccl-log", str(tmp_path), "-f", "json"])
    doc = json.loads(out)
    assert code == 1 and len(doc["summary"]["files"]) == 2 and "TD040" in [f["code"] for f in doc["findings"]]


@pytest.mark.slow  # four thousand files
def test_a_directory_over_the_file_count_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for k in range(4097):
        (tmp_path / f"r{k}.log").write_bytes(b"")
    code, _, err = run(capsys, ["nccl-log", str(tmp_path)])
    assert code == 2 and "more than 4096" in one_error_line(err)


@pytest.mark.parametrize("command", ["diagnose", "nccl-log"])
def test_a_file_that_vanishes_mid_walk_is_said(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: str
) -> None:
    (tmp_path / "rank0.log").write_bytes(LOG.read_bytes())
    (tmp_path / "rank1.log").write_bytes(LOG.read_bytes())
    listed = fileio.list_files

    def listing_then_rotated(*args: object, **kwargs: object) -> list[Path]:
        found = listed(*args, **kwargs)  # type: ignore[arg-type]
        (tmp_path / "rank1.log").unlink(missing_ok=True)  # log rotation between the walk and the read
        return found

    monkeypatch.setattr(fileio, "list_files", listing_then_rotated)
    code, out, err = run(capsys, [command, str(tmp_path), "-f", "json"])
    assert code == EXIT[command] and SAYS[command] in out
    assert "rank1.log" in (err if command == "nccl-log" else out) and "not found" in (err + out)


@pytest.mark.parametrize("name", ["with space.log", "ünïcødé-日本.log", "-leading-dash.log"])
def test_names_users_give(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    (tmp_path / name).write_bytes(LOG.read_bytes())
    monkeypatch.chdir(tmp_path)
    for command in ("nccl-log", "diagnose"):
        code, out, _ = run(capsys, [command, "-f", "json", "--", name])  # `--` ends the options
        assert code == EXIT[command] and SAYS[command] in out, command
    code, _, err = run(capsys, ["nccl-log", "-leading-dash.log"])  # without it: an unknown option
    assert code == 2 and "No such option" in one_error_line(err)


def test_a_tilde_is_not_a_home(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, ["nccl-log", "~/rank0.log"])  # quoted on the shell: no file of that name
    assert code == 2 and "not found: ~/rank0.log" in one_error_line(err)


@pytest.mark.parametrize("command", ["diagnose", "nccl-log"])
def test_a_file_given_twice_or_with_its_directory_is_read_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    f = tmp_path / "rank0.log"
    f.write_bytes(LOG.read_bytes())
    code, once, _ = run(capsys, [command, str(f), "-f", "json"])
    for argv in ([str(f), str(f)], [str(tmp_path), str(f)], [str(f), str(tmp_path / "." / "rank0.log")]):
        again_code, again, _ = run(capsys, [command, *argv, "-f", "json"])
        assert again_code == code and again == once, argv


@pytest.mark.parametrize("command", ["diagnose", "nccl-log"])
def test_standard_input_given_twice_is_read_once(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    answers = []
    for argv in (["-"], ["-", "-"]):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(LOG.read_bytes())))
        answers.append(run(capsys, [command, *argv, "-f", "json"])[:2])
    assert answers[0] == answers[1] and answers[0][0] == EXIT[command]


def test_the_python_api_reads_what_the_command_reads(tmp_path: Path) -> None:
    gz = tmp_path / "all_reduce.txt.gz"
    gz.write_bytes(gzip.compress(TABLE.read_bytes()))
    plain = topodoctor.diagnose(TABLE)
    got = topodoctor.diagnose(gz)
    assert got.exit_code == plain.exit_code and len(got.evidence.collectives) == len(plain.evidence.collectives) > 0
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InputError, match="not a regular file"):
        topodoctor.diagnose(tmp_path / "fifo")
