"""The fourth development set (fixtures/nccl-logs/real4/, its README): the launchers' and the job's own words
where NCCL said nothing. Every log holds its verdict by the scorer's own rules; the rank the elastic table names
as the first observed failure is the one quoted, a SIGKILL is named with its candidate senders unless a line
says it was the memory, and a store on the loopback address drops the firewall from its candidates."""

from __future__ import annotations

from pathlib import Path

import pytest
from score_corpus import findings_of, readme_rows, verdict_of

from topodoctor.model.findings import Finding
from topodoctor.nccl.parse import parse_file

SET = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs" / "real4"
ROWS = readme_rows(SET)


def _findings(name: str) -> list[Finding]:
    return findings_of(SET, name)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_log_holds_its_verdict(name: str) -> None:
    verdict = verdict_of(SET, ROWS[name], name)
    assert verdict in ("named-right", "cause-not-found-correct"), (name, verdict)


def test_the_first_observed_failure_is_quoted_with_its_host() -> None:
    (f,) = _findings("cppo-6-root-cause-rank0-sigkill.log")
    assert f.code == "TD090" and "rank 0" in f.message and "exitcode -9 (pid 14750)" in f.message
    assert "mlxlab115rp2n7682d40d9" in f.message
    assert f.evidence["cause"]["confidence"] == "candidates"  # type: ignore[index]
    assert "OOM killer" in f.evidence["candidates"][0]  # type: ignore[index]


def test_a_rank_killed_after_the_first_failure_is_not_the_cause() -> None:
    findings = _findings("speculators-1115-sigkill-after-root-cause-rank1.log")
    assert [f.code for f in findings] == ["TD049"]
    assert "first observed failure: rank 1" in findings[0].message


def test_a_memory_line_singles_out_the_memory() -> None:
    (f,) = _findings("vllm-1160-ray-workers-killed-memory-pressure.log")
    assert f.code == "TD090" and f.evidence["cause"]["confidence"] == "shown by the log"  # type: ignore[index]


def test_a_store_on_the_loopback_address_has_no_firewall_candidate() -> None:
    (f,) = _findings("controlnet-382-client-socket-timeout-loopback.log")
    assert f.code == "TD072" and "127.0.0.1:48391" in f.message
    candidates = f.evidence["candidates"]
    assert not any("firewall" in c for c in candidates)  # type: ignore[union-attr]
    assert "never reached the rendezvous" in candidates[0]  # type: ignore[index]


def test_the_port_in_use_is_named() -> None:
    (f,) = _findings("torchtune-392-store-port-29500-in-use.log")
    assert f.code == "TD091" and f.evidence["port"] == "29500"


def test_the_store_that_waited_for_clients_counts_them() -> None:
    (f,) = _findings("visual-rft-123-store-clients-joined.log")
    assert f.code == "TD072" and "1/3 joined" in f.message
    assert "missing ranks" in f.evidence["candidates"][0]  # type: ignore[index]


def test_torchs_allocator_in_a_rank_is_the_gpu_memory() -> None:
    (f,) = _findings("qwen3-coder-174-rank3-torch-cuda-oom.log")
    assert f.code == "TD058" and f.subject == "rank3" and "132.00 MiB" in f.message


def test_the_same_allocator_words_outside_a_distributed_run_are_no_nccl_log() -> None:
    text = (SET / "qwen3-coder-174-rank3-torch-cuda-oom.log").read_text().replace("[rank3]: ", "")
    log = parse_file("oom.log", text)
    assert not log.events and not log.speaks


def test_the_agents_first_failure_names_its_signal() -> None:
    (f,) = _findings("accelerate-3861-agent-first-failure-sigabrt.log")
    assert f.code == "TD049" and "rank 3, exitcode -6 (pid 3139623)" in f.message and "SIGABRT" in f.message


def test_the_unique_ids_store_timeout_ranks_its_candidates() -> None:
    (f,) = _findings("llamafactory-3698-nccl-unique-id-socket-timeout.log")
    assert f.code == "TD072" and f.evidence["cause"]["confidence"] == "candidates"  # type: ignore[index]
    assert "root rank that puts NCCL's unique id" in f.evidence["candidates"][0]  # type: ignore[index]


def test_a_worker_that_died_leads_the_remote_error_after_it() -> None:
    findings = _findings("openrlhf-621-ray-worker-died-then-remote-error.log")
    assert findings[0].code == "TD090"
    assert any("crash of the worker" in c for c in findings[0].evidence["candidates"])  # type: ignore[union-attr]
