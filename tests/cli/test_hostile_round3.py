"""Hostile input to the readers and options of this round: posted copy matrices, the NIC and
nvidia-smi pastes ``diagnose`` reads, and the Python API's keywords read by the option spec. Each
ends with one line and its documented exit code (2 for bad input), quickly, or with an
``InputError`` from the API; never a traceback, a hang, a fork of thousands or an exit 1."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

import topodoctor

PY = [sys.executable, "-m", "topodoctor"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
EVIDENCE = ROOT / "fixtures/evidence"
NVB_X8 = EVIDENCE / "h200-x8/nvb.txt"  # nvbandwidth on 8 H200s, with the bus id of each


def run(argv: list[str], budget_s: float = 10.0) -> tuple[int, str, str]:
    t0 = time.monotonic()
    r = subprocess.run([*PY, *argv], capture_output=True, text=True, env=ENV, timeout=30, errors="replace")
    assert time.monotonic() - t0 < budget_s, argv
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    return r.returncode, r.stdout, r.stderr


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topodoctor: error:"), err
    return lines[0]


# ------------------------------------------------------------------ sizes no host has
def test_a_topo_matrix_of_ten_thousand_gpus_is_refused_at_once(tmp_path: Path) -> None:
    """Its header alone: read as written, its pairs grow as the square (minutes, and the budget
    does not reach inside the reader)."""
    n = 10_000
    header = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\n"
    cells = ["NV18"] * n
    rows = "".join(f"GPU{i}\t" + "\t".join([*cells[:i], "X", *cells[i + 1 :]]) + "\t0-1\t0\n" for i in range(40))
    paste = tmp_path / "topo.txt"
    paste.write_text(header + rows)
    for argv in (["diagnose", str(paste)], ["bandwidth", "--from", str(paste), "--replay", "h200-x2"]):
        code, _, err = run(argv, budget_s=5)
        assert code == 2 and "10000 devices" in one_error_line(err), argv


def _nvbandwidth(columns: int, rows: int = 1) -> str:
    head = "nvbandwidth Version: v0.8\n\nRunning device_to_device_memcpy_read_ce.\n"
    table = "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n" + "".join(f"{j:>10}" for j in range(columns))
    body = "".join(f"\n{i:>2}" + "".join(f"{394.0:>10}" for _ in range(columns)) for i in range(rows))
    return head + table + body + "\n\nSUM device_to_device_memcpy_read_ce 1\n"


@pytest.mark.parametrize(("columns", "rows"), [(5000, 1), (8, 8)])
def test_a_posted_matrix_wider_than_the_host_is_an_input_error(tmp_path: Path, columns: int, rows: int) -> None:
    """No "Device N:" lines to map by bus: the GPUs the host lacks were dropped and the rest judged
    HEALTHY, exit 0, on the three pairs it shared with the host."""
    paste = tmp_path / "nvb.txt"
    paste.write_text(_nvbandwidth(columns, rows))
    code, out, err = run(["bandwidth", "--from", str(paste), "--replay", "h200-x2"])
    assert code == 2 and not out and "the host given has 2 GPUs" in one_error_line(err)


def test_a_posted_matrix_of_eight_gpus_against_a_two_gpu_host_names_the_gpus_it_lacks() -> None:
    code, _, err = run(["bandwidth", "--from", str(NVB_X8), "--replay", "h200-x2"])
    assert code == 2 and "GPUs 2, 3, 4, 5, 6, 7" in one_error_line(err)


def test_a_posted_matrix_whose_bus_ids_match_no_gpu(tmp_path: Path) -> None:
    paste = tmp_path / "nvb.txt"
    paste.write_text(NVB_X8.read_text().replace("00000000:00:0", "00000000:ee:0"))
    code, _, err = run(["bandwidth", "--from", str(paste), "--replay", "h200-x4"])
    assert code == 2 and "00000000:EE:06.0" in one_error_line(err)


# ------------------------------------------------------------------ the new kinds, mangled
PASTES = [
    "p2pbw-rtx4090-pair.txt",
    "h200-x8/nvb.txt",
    "ibstat-cx7-ndr-one-ca.txt",
    "ibstatus-hdr-ports-cut.txt",
    "ib-write-bw-roce-bond-gbits.txt",
    "nvlink-status-gb200.txt",
    "topo-h100-nv6-nics.txt",
]


def _mangled(text: bytes) -> dict[str, bytes]:
    half = len(text) // 2
    return {
        "crlf": text.replace(b"\n", b"\r\n"),
        "cr": text.replace(b"\n", b"\r"),
        "cut": text[: int(len(text) * 0.77)],
        "nul": text[:half] + b"\x00\x00" + text[half:],
        "bad-utf8": text[:half] + b"\xff\xfe\xc3\x28" + text[half:],
        "nan": text.replace(b"394.0", b"nan").replace(b"6.34", b"inf").replace(b"1015.27", b"1e309"),
    }


@pytest.mark.slow
@pytest.mark.parametrize("paste", PASTES)
def test_mangled_pastes_of_the_new_kinds(tmp_path: Path, paste: str) -> None:
    for name, data in _mangled((EVIDENCE / paste).read_bytes()).items():
        path = tmp_path / name
        path.write_bytes(data)
        for argv in (["diagnose", str(path)], ["bandwidth", "--from", str(path), "--replay", "h200-x4"]):
            code, _, err = run(argv)
            assert code in (0, 1, 2), (argv, name, err)
            if code == 2:
                one_error_line(err)


@pytest.fixture
def odd_files(tmp_path: Path) -> dict[str, str]:
    sparse = tmp_path / "sparse"
    sparse.touch()
    os.truncate(sparse, 2 << 30)  # 2 GiB, never written
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    loop = tmp_path / "loop"
    os.symlink("loop", loop)
    return {"sparse": str(sparse), "fifo": str(fifo), "loop": str(loop), "zero": "/dev/zero"}


@pytest.mark.parametrize(
    "argv",
    [
        ["bandwidth", "--from", "{}", "--replay", "h200-x2"],
        ["diagnose", "{}"],
        ["fleet", str(ROOT / "fixtures/fleet/h200-x2.bandwidth.1.json"), "--history", "{}"],
    ],
)
def test_files_that_are_no_files_are_refused_in_one_line(odd_files: dict[str, str], argv: list[str]) -> None:
    for path in odd_files.values():
        code, _, err = run([a.replace("{}", path) for a in argv], budget_s=5)
        assert code == 2, (path, err)
        one_error_line(err)


# ------------------------------------------------------------------ option values
def test_nprocs_beyond_any_host_is_refused_before_a_rank_starts() -> None:
    """Each rank is a process that loads torch: a million of them was a fork until memory ran out."""
    code, _, err = run(["collectives", "--backend", "gloo", "--nprocs", "1000000"])
    assert code == 2 and "--nprocs" in one_error_line(err)


@pytest.fixture(scope="module")
def host() -> topodoctor.Host:
    return topodoctor.scan(replay="h200-x2")


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda h: topodoctor.check(h, timeout=None), "timeout must be given a value, not None"),
        (lambda h: topodoctor.check(h, fail_level=None), "fail_level must be given a value"),
        (lambda h: topodoctor.check(h, timeout=10**400), "timeout is out of range"),
        (lambda h: topodoctor.check(h, select=5), "select takes rule codes"),
        (lambda h: topodoctor.scan(replay="h200-x2", sysfs_root=None), "sysfs_root must be given a value"),
        (lambda h: topodoctor.predict(h, ops=None), "ops must be given a value"),
        (lambda h: topodoctor.bandwidth(h, devices="0,1"), "devices takes NVML indices"),
        (lambda h: topodoctor.bandwidth(h, devices=["a"]), "devices takes NVML indices"),
        (lambda h: topodoctor.bandwidth(h, devices=5), "devices takes NVML indices"),
        (lambda h: topodoctor.bandwidth(h, size_bytes=float("nan")), "size_bytes must be a string"),
        (lambda h: topodoctor.bandwidth(h, size_bytes=-1), "size_bytes must be a string"),
        (lambda h: topodoctor.bandwidth(h, pair_timeout=float("nan")), "pair_timeout must be a number, not nan"),
        (lambda h: topodoctor.collectives(h, sizes=None), "sizes must be given a value"),
        (lambda h: topodoctor.collectives(h, nprocs=10**6), "nprocs must be at most"),
        (lambda h: topodoctor.collectives(h, op_timeout=float("nan")), "op_timeout must be a number, not nan"),
        (lambda h: topodoctor.diagnose(str(NVB_X8), fail_level=None), "fail_level must be given a value"),
    ],
)
def test_api_keywords_refused_as_input_errors(host: topodoctor.Host, call: Any, says: str) -> None:
    """Before: a KeyError, AttributeError, OverflowError or ValueError from deep inside, or a NaN
    that passed every limit (it compares false with all of them)."""
    t0 = time.monotonic()
    with pytest.raises(topodoctor.InputError, match=says) as got:
        call(host)
    assert time.monotonic() - t0 < 5 and got.value.exit_code == 2
    assert len(str(got.value).splitlines()) == 1


def test_api_keeps_none_where_the_default_is_none(host: topodoctor.Host) -> None:
    assert topodoctor.check(host, expect=None, baseline=None).exit_code == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["collectives", "--from", str(ROOT / "fixtures/collectives/derived/x2-healthy.json"), "--expect-busbw", "nan"],
        ["collectives", "--predict", "--replay", "h200-x2", "--op-timeout", "nan"],
        ["job", "--ras-file", str(ROOT / "fixtures/fleet/h200-x2.bandwidth.1.json"), "--late-ms", "nan"],
    ],
)
def test_nan_for_a_number_option_is_refused(argv: list[str]) -> None:
    """NaN passed typer's range (it compares false with both ends): --expect-busbw nan judged every op
    as reaching it, exit 0."""
    code, out, err = run(argv)
    assert code == 2 and not out and "nan is not a number" in one_error_line(err)


def test_bandwidth_from_a_text_of_no_known_kind_says_what_it_takes(tmp_path: Path) -> None:
    """Not "is not valid JSON": the file was never meant to be JSON; the line names what --from takes."""
    paste = tmp_path / "paste.txt"
    paste.write_text("some text a user pasted\nthat no reader knows\n")
    run = subprocess.run(
        [sys.executable, "-m", "topodoctor", "bandwidth", "--from", str(paste)],
        capture_output=True, text=True, env=ENV, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert "neither a bandwidth result" in run.stderr and "nvbandwidth" in run.stderr


def test_predict_refuses_the_files_that_judge_a_run() -> None:
    """--predict runs nothing: a --bandwidth or --from beside it was read by no one, silently."""
    for extra in (["--bandwidth", "/dev/zero"], ["--from", "/dev/null"]):
        run = subprocess.run(
            [sys.executable, "-m", "topodoctor", "collectives", "--predict", "--replay", "h200-x4", *extra],
            capture_output=True, text=True, env=ENV, timeout=60,
        )  # fmt: skip
        assert run.returncode == 2, extra
        assert run.stderr.count("\n") == 1 and extra[0] in run.stderr and "--predict" in run.stderr
