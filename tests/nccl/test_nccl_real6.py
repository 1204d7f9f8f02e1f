"""The sixth development set (fixtures/nccl-logs/real6/, its README): classes met for the first time. Every log
holds its verdict by the scorer's own rules; a known bug is named as the cause only at its own site and version,
and is the first of the candidates where its message is generic; the shared-memory segment's summary line alone is
the /dev/shm class with candidates ranked by what its name, errno and version tell; a SIGBUS in a run with NCCL
names /dev/shm first. The lines beside the real logs follow NCCL's format strings at the tags named."""

from __future__ import annotations

from pathlib import Path

import pytest
from score_corpus import findings_of, readme_rows, verdict_of

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

SET = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs" / "real6"
ROWS = readme_rows(SET)
H = "gpu7:4021:4090 [3]"
TRAIL = (
    f"{H} NCCL INFO transport/shm.cc:114 -> 2\n{H} NCCL INFO init.cc:1089 -> 2\n"
    f"{H} NCCL INFO group.cc:65 -> 2 [Async thread]\n"
)


def _findings(name: str) -> list[Finding]:
    return findings_of(SET, name)


def _explain(text: str) -> list[Finding]:
    return explain([parse_file("/x/rank0.log", text)])


def _candidates(f: Finding) -> list[str]:
    assert f.evidence["cause"]["confidence"] == "candidates"  # type: ignore[index]
    return [str(c) for c in f.evidence["candidates"]]  # type: ignore[union-attr]


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_log_holds_its_verdict(name: str) -> None:
    verdict = verdict_of(SET, ROWS[name], name)
    assert verdict in ("named-right", "cause-not-found-correct"), (name, verdict)


def test_a_known_bug_of_a_generic_message_is_the_first_candidate() -> None:
    """2.18.1's internal error: the proxy bug first, then the other causes of an internal error, and the release
    that tells them apart."""
    bug = _findings("nccl-1092-internal-error-2-18-1-title-line.log")[0]
    assert bug.code == "TD083" and "fixed in 2.19.1" in bug.message
    cands = _candidates(bug)
    assert "fixed in 2.19.1" in cands[0] and any("consistency check" in c for c in cands[1:])
    assert "To tell them apart" in bug.fix and "2.19.1 or later returns the proxy's own result" in bug.fix
    assert len(cands) == len(set(cands)) and not any(c == "an NCCL bug" for c in cands)  # the lead's short forms


def test_a_known_bug_at_its_own_site_and_version_is_the_cause() -> None:
    bug = _findings("nccl-1247-internal-error-2-18-6-nic-busid-ppc64le.log")[0]
    assert bug.code == "TD083" and "fixed in 2.20.3" in bug.message
    assert bug.evidence["cause"]["confidence"] == "known bug of the version"  # type: ignore[index]
    fixed = (SET / "nccl-1247-internal-error-2-18-6-nic-busid-ppc64le.log").read_text().replace("2.18.6", "2.20.3")
    assert not any(f.code == "TD083" for f in _explain(fixed))  # the release that fixed it: the topology class


def test_the_connector_copy_bug_is_named_at_its_line_and_not_after_its_fix() -> None:
    """2.18.1 - 2.18.5's transport.cc:154 cudaMemcpyAsync (fixed by 4365458 in 2.18.6)."""
    warn = f"{H} transport.cc:154 NCCL WARN Cuda failure 'invalid argument'\n{H} NCCL INFO init.cc:1358 -> 1\n"
    trail = f"{H} NCCL INFO group.cc:65 -> 1 [Async thread]\n"
    bug = _explain(f"{H} NCCL INFO NCCL version 2.18.3+cuda12.2\n{warn}{trail}")[0]
    assert bug.code == "TD083" and "fixed in 2.18.6" in bug.message
    assert not any(f.code == "TD083" for f in _explain(f"{H} NCCL INFO NCCL version 2.18.6+cuda12.2\n{warn}{trail}"))


def test_another_release_s_internal_error_is_not_2_18_s_proxy_bug() -> None:
    (f,) = _findings("pick-pytorch-82-internal-error-2-4-8-one-line.log")
    assert f.code == "TD049" and "2.18" not in f.message
    likely = f.evidence["likely_causes"]
    assert likely[0].startswith("a topology XML without an attribute") and likely[1:] == [  # type: ignore[index]
        "an NCCL bug",
        "a mix of NCCL builds",
    ]


def test_a_file_less_cuda_error_in_a_bug_s_range_names_the_bug_as_a_candidate_only() -> None:
    bug, lead = _findings("pytorch-147575-invalid-argument-2-25-1-last-error.log")[:2]
    assert bug.code == "TD083" and "fixed in 2.26.2" in _candidates(bug)[0]
    assert lead.code == "TD052" and "'invalid argument'" in lead.message  # typographic quotes read as NCCL's


def test_the_summary_line_alone_ranks_dev_shm_first_with_its_size() -> None:
    f = _findings("vllm-6689-shm-summary-last-error-2-20-5.log")[0]
    assert f.code == "TD043" and "5.5 MiB" in f.message and "holds 11 of them" in f.message
    cands = _candidates(f)
    assert cands[0].startswith("/dev/shm too small") and any("cudaHostRegister" in c for c in cands)
    assert not any("cuMem host memory" in c for c in cands)  # 2.20 has none


def test_the_summary_line_of_shm_h_names_its_fixed_names() -> None:
    """2.4 - 2.11 (include/shm.h): shm_open of nccl-shm-<hash>-..., and no summary after a CUDA failure."""
    line = (
        f"{H} include/shm.h:48 NCCL WARN Error while creating shared memory segment "
        "nccl-shm-recv-1462445a6f01cbfc-1-2-3 (size 9637888)\n"
    )
    cands = _candidates(_explain(line + TRAIL)[0])
    assert any("same name left by an earlier job" in c for c in cands)
    assert not any("mkstemp" in c or "cudaHostRegister" in c or "cuMem" in c for c in cands)


def test_the_summary_line_of_2_23_names_cumem_host_memory_and_its_errno() -> None:
    banner = f"{H} NCCL INFO NCCL version 2.23.4+cuda12.6\n"
    line = (
        f"{H} misc/shmutils.cc:128 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Xr1hgD (size "
        "9637888), error: Cannot allocate memory (12)\n"
    )
    f = _explain(banner + line + TRAIL)[0]
    cands = _candidates(f)
    assert f.code == "TD043" and "errno 12: Cannot allocate memory" in f.message
    assert cands[0].startswith("the process's memory limits")  # the errno says memory, not room
    assert any("NCCL_CUMEM_HOST_ENABLE" in c for c in cands) and any("mkstemp" in c for c in cands)


def test_the_attach_summary_alone_is_a_local_peer_s_segment() -> None:
    line = (
        f"{H} misc/shmutils.cc:113 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-Xr1hgD "
        "(size 9637888)\n"
    )
    f = _explain(line + TRAIL)[0]
    assert f.code == "TD074" and "local peer's shared-memory segment" in f.message
    assert "do not share /dev/shm" in _candidates(f)[0]


def test_a_sigbus_in_a_run_with_nccl_is_dev_shm_first() -> None:
    (f,) = _findings("pipedream-76-bus-error-in-nccl-docker-shm.log")
    assert f.code == "TD094" and f.evidence["signal"] == "SIGBUS"
    assert "--shm-size" in _candidates(f)[0] and "2.12 - 2.18" in _candidates(f)[0]


def test_the_deepspeed_launcher_s_return_code_minus_7_is_a_sigbus() -> None:
    """deepspeed/launcher/launch.py's sigkill_handler prints the rank's return code; -7 is signal 7."""
    line = (
        "[2024-01-03 14:05:36,716] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', "
        "'--local_rank=3'] exits with return code = -7\n"
    )
    (f,) = _explain(line)
    assert f.code == "TD094" and "/dev/shm" in _candidates(f)[0]


def test_a_bus_error_outside_any_nccl_run_is_no_nccl_log() -> None:
    log = parse_file("/x/a.log", "loading data\nBus error (core dumped)\n")
    assert not log.events and not log.speaks


def test_an_invalid_resource_handle_names_the_stream_s_device_first() -> None:
    f = _findings("pytorch-130414-enqueue-invalid-resource-handle-2-12.log")[0]
    assert f.code == "TD057" and "set_device" in _candidates(f)[0]


def test_nic_fusion_s_message_is_its_bug_unless_the_log_sets_a_graph_or_topology_file() -> None:
    """graph/topo.h's `Could not find NET with id N` in 2.25 - 2.26.6 is NIC fusion's bug; a file naming a NIC the
    node lacks prints the same id, so with NCCL_GRAPH_FILE set the bug is a candidate beside the file."""
    banner = f"{H} NCCL INFO NCCL version 2.26.2+cuda12.8\n"
    warn = (
        f"{H} graph/topo.h:220 NCCL WARN Could not find NET with id 0\n{H} NCCL INFO group.cc:75 -> 3 [Async thread]\n"
    )
    bug = _explain(banner + warn)[0]
    assert bug.code == "TD083" and bug.evidence["cause"]["confidence"] == "known bug of the version"  # type: ignore[index]
    graph = f"{H} NCCL INFO NCCL_GRAPH_FILE set by environment to /etc/graph.xml\n"
    cands = _candidates(_explain(banner + graph + warn)[0])
    assert "fixed in 2.27.3" in cands[0] and "NCCL_GRAPH_FILE=/etc/graph.xml" in cands[1]
