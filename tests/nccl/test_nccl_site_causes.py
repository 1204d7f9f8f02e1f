"""Every message site of the catalogue answered by class: a WARN no class names gets its site's
candidates (cause not found, ranked, each with what tells it apart), never nothing and never one cause
the site cannot know; ProcessGroupNCCL's own words end a run; a file of no NCCL line of any kind is not
an NCCL log (exit 2); `Could not find NET with id` and NCCL 2.30's several ranks on one GPU read by
their sites. The lines follow NCCL's format strings at their release tags (misc/socket.cc, proxy.cc,
misc/shmutils.cc, graph/topo.h, graph/topo.cc) and torch's ProcessGroupNCCL.cpp."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from measure_sites import codes_by_file, logs, verdict

from topodoctor.model.findings import Finding
from topodoctor.nccl.catalogue import entries
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file
from topodoctor.nccl.site_causes import site_candidates

H = "gpu3:5120:5188 [0]"
TRAIL = f"{H} NCCL INFO init.cc:1753 -> 2\n{H} NCCL INFO init.cc:1802 -> 2 [Async thread]\n"


def _errors(text: str) -> list[Finding]:
    return [f for f in explain([parse_file("rank0.log", text)]) if f.severity == "error"]


@pytest.mark.parametrize(
    ("where", "message", "kind", "first"),
    [
        (
            "misc/socket.cc:484",
            "socketTryAccept: exceeded error retry count (30), Input/output error",
            "sockets",
            "another rank failed first",
        ),
        (
            "proxy.cc:1219",
            "Mismatched response size for opId=0x7f3a2c000000",
            "consistency check",
            "the program using NCCL out of its contract",
        ),
        (
            "misc/shmutils.cc:96",
            "unlink shared memory /dev/shm/nccl-Ab12Cd failed, error: Input/output error (5)",
            "/dev/shm",
            "/dev/shm too small",
        ),
        ("misc/gdrwrap.cc:201", "gdr_map(handle 1f, size 1) failed: 1", "GDRCopy", "GDRCopy: the gdrdrv"),
        ("include/alloc.h:120", "Failed to CUDA host alloc 4194304 bytes", "allocation", "the memory"),
    ],
)
def test_a_warn_no_class_names_gets_its_sites_candidates(where: str, message: str, kind: str, first: str) -> None:
    (lead, *_) = _errors(f"{H} {where} NCCL WARN {message}\n{TRAIL}")
    assert lead.code == "TD052" and lead.evidence["cause"]["confidence"] == "candidates"
    assert kind in str(lead.evidence["site_kind"]) and str(lead.evidence["candidates"][0]).startswith(first)
    assert "[tells: " in lead.fix and "cause not found" in lead.message


def test_the_candidates_come_from_the_words_first_then_from_the_part_of_nccl() -> None:
    assert site_candidates("Failed to malloc 64 bytes", ("misc/socket.cc",))[0] == "an allocation that returned nothing"
    assert site_candidates("Connect to x failed", ("misc/socket.cc",))[0] == "NCCL's sockets"
    assert site_candidates("whatever", ())[1] == []


def test_every_error_site_of_the_catalogue_is_named_or_gets_candidates() -> None:
    """The measurement's floor: of NCCL's, the plugins' and torch's error sites, rendered and failed, at
    most a handful answer without candidates (format strings that are only a macro's name) and none
    exits 0, and no one cause is given that the site's file never raises."""
    counts: dict[str, int] = {}
    by_file = codes_by_file()
    for e in entries():
        if e.level in ("WARN", "ERROR") and (e.fatal or e.level == "ERROR"):
            for variant, text in logs(e):
                if variant == "failed":
                    v, _ = verdict(e, variant, text, by_file)
                    counts[v] = counts.get(v, 0) + 1
    assert counts.get("missed", 0) == 0  # torch's TCPStore "Socket Timeout" too: a store timeout in a rank
    assert counts.get("not-found", 0) <= 10
    assert counts.get("suspect", 0) == 0
    assert counts.get("named", 0) + counts.get("candidates", 0) >= 1300


@pytest.mark.parametrize(
    "line",
    [
        "[PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: boom",
        "[rank1]:[E1202 10:01:02.000 ProcessGroupNCCL.cpp:577] To avoid data inconsistency, we are taking the entire "
        "process down.",
    ],
)
def test_process_group_nccls_own_end_is_a_failure(line: str) -> None:
    (lead, *_) = _errors(f"{line}\n")
    assert lead.code in ("TD049", "TD052") and lead.evidence.get("likely_causes")


def test_the_heartbeat_monitors_own_end_is_the_watchdog_stuck() -> None:
    # ProcessGroupNCCL's heartbeatMonitor prints this only when the watchdog's heartbeat did not move
    line = (
        "[rank1]:[E1202 10:01:02.000 ProcessGroupNCCL.cpp:1595] [PG 0 Rank 1] Heartbeat monitor timed out! Process "
        "will be terminated after dumping debug info. workMetaList_.size()=1"
    )
    (lead, *_) = _errors(f"{line}\n")
    assert lead.code == "TD047" and "within its heartbeat timeout" in lead.message


def test_could_not_find_net_without_a_version_ranks_nic_fusion_first_with_what_tells() -> None:
    # topo.h:234 is the WARN's line in 2.26.2 - 2.26.6 alone: the known bug (TD083) leads, the search's own finding
    # (TD052) ranks the message's causes after it
    warn = f"{H} graph/topo.h:234 NCCL WARN Could not find NET with id 0\n"
    (bug, *rest) = _errors(warn + f"{H} NCCL INFO graph/search.cc:1222 -> 3\n" + TRAIL)
    lead = next(f for f in rest if f.code == "TD052")
    listed = [str(c) for c in lead.evidence["candidates"]]
    assert bug.code == "TD083" and listed[0].startswith("NIC fusion's bug of NCCL 2.25.0 - 2.26.6")
    assert "Made virtual device" in listed[0] and any("NCCL_GRAPH_FILE" in c for c in listed[1:])
    forced = f"{H} NCCL INFO NCCL_GRAPH_FILE set by environment to /etc/graph.xml\n"
    lead = next(f for f in _errors(forced + warn + TRAIL) if f.code == "TD052")
    assert "NCCL_GRAPH_FILE=/etc/graph.xml" in str(lead.evidence["candidates"][0])
    (lead, *_) = _errors(f"{H} NCCL INFO NCCL version 2.23.4+cuda12.6\n" + warn + TRAIL)
    assert lead.code == "TD052"  # the banner outranks the line
    assert not any("NIC fusion" in str(c) for c in lead.evidence["candidates"])  # not that release's bug


def test_several_ranks_on_one_gpu_in_2_30s_words_is_two_ranks_on_one_gpu() -> None:
    msg = "Multiple ranks detected using the same GPU on this node. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this"
    (lead, *_) = _errors(f"{H} graph/topo.cc:1500 NCCL WARN {msg} configuration.\n{TRAIL}")
    assert lead.code == "TD042"


def _run(path: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "topodoctor", "nccl-log", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_a_file_of_no_nccl_line_is_not_an_nccl_log(tmp_path: Path) -> None:
    plain = tmp_path / "app.log"
    plain.write_text("Epoch 1 started\nloading data from /data/train\n")
    done = _run(plain)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"topodoctor: error: not an NCCL log: no line of NCCL, torch.distributed, the dynamic linker on libnccl "
        f"or XLA's NCCL found in {plain}"
    ]


@pytest.mark.parametrize(
    "text",
    [
        "       8388608       2097152     float     sum      -1    992.6    8.45   16.20      0    986.0    8.51\n",
        '[rank0]: Traceback (most recent call last):\n[rank0]:   File "train.py", line 3\n',
        "gpu3:5120:5188 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>\n",
    ],
)
def test_nccl_tests_rows_torch_ranks_and_nccl_lines_are_nccl_output(text: str) -> None:
    assert parse_file("x.log", text).speaks
    assert not parse_file("x.log", "hello\nworld\n").speaks


@pytest.mark.parametrize(
    ("line", "code", "bug"),
    [
        (
            "enqueue.cc:1500 NCCL WARN Cuda failure 700 'an illegal memory access was encountered'",
            "TD057",
            "2.26.2 on Blackwell",
        ),
        ("enqueue.cc:1200 NCCL WARN Cuda failure 1 'invalid argument'", "TD057", "2.25.0 - 2.26.1"),
    ],
)
def test_a_known_bugs_sign_without_a_version_is_a_candidate_beside_any_class(line: str, code: str, bug: str) -> None:
    (lead, *_) = _errors(f"{H} {line}\n{TRAIL}")
    assert lead.code == code and bug in str(lead.evidence["bug_candidates"])
    assert "The log names no NCCL version" in lead.fix
    (banner, *_) = _errors(f"{H} NCCL INFO NCCL version 2.21.5+cuda12.4\n{H} {line}\n{TRAIL}")
    assert "bug_candidates" not in banner.evidence  # a version outside the bug's range: not that bug


def test_a_copy_refused_with_invalid_argument_is_its_arguments_not_an_earlier_fault() -> None:
    """transport.cc:154 is a cudaMemcpyAsync in 2.18.1 - 2.18.5: 'invalid argument' is the copy's own argument
    (a sticky fault of an earlier kernel comes back as its own code), an illegal address there stays sticky."""
    (lead, *_) = _errors(f"{H} transport.cc:154 NCCL WARN Cuda failure 'invalid argument'\n{TRAIL}")
    assert lead.code == "TD057" and str(lead.evidence["candidates"][0]).startswith("an address this process cannot")
    (sticky, *_) = _errors(
        f"{H} transport.cc:154 NCCL WARN Cuda failure 'an illegal memory access was encountered'\n{TRAIL}"
    )
    assert "sticky" in sticky.message
