"""The rules engine's own words and choices at their edges: runs of GPUs and codes in the line an old
recording gets (two in a row are a pair, three a run, codes keep their width), the areas its missing
reads are about, a severity a rule does not document, the family a code names, the worst of no
findings, and rule patterns with spaces, lower case and names."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rule_case_kit import link, pcie, snapshot

from topodoctor.core.errors import InputError
from topodoctor.core.probed import ProbeError
from topodoctor.model.findings import Finding
from topodoctor.probe.environment import capture_environment
from topodoctor.probe.sources import probe_host
from topodoctor.rules import REGISTRY, Context, _areas, _runs, evaluate, worst
from topodoctor.rules.probe import probe_failures
from topodoctor.rules.registry import Issue, check_patterns, selected

UNREAD = ProbeError("NO_PERMISSION", "nvmlDeviceGetSerial", 4)


@pytest.mark.parametrize(
    ("items", "prefix", "told"),
    [
        (["GPU0", "GPU1", "GPU2", "GPU3"], "GPU", "GPU0-GPU3"),
        (["GPU0", "GPU1"], "GPU", "GPU0, GPU1"),
        (["GPU0", "GPU2", "GPU3", "GPU4", "GPU7"], "GPU", "GPU0, GPU2-GPU4, GPU7"),
        (["TD005", "TD006", "TD007", "TD009"], "TD", "TD005-TD007, TD009"),
        (["TD207", "TD208", "TD209", "TD211", "TD530"], "TD", "TD207-TD209, TD211, TD530"),
        (["GPU0", "recording"], "GPU", "GPU0, recording"),  # not all numbered: listed as they are
        (["GPU0", "GPUx"], "GPU", "GPU0, GPUx"),  # the prefix without a number after it
        (["GPU5"], "GPU", "GPU5"),
    ],
)
def test_runs_of_numbers_are_joined(items: list[str], prefix: str, told: str) -> None:
    assert _runs(items, prefix) == told


def test_the_reads_an_old_recording_lacks_are_named_by_area_once_each() -> None:
    calls = [
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetMaxClockInfo",
        "nvmlDeviceGetFieldValues[82]",
        "nvmlDeviceGetPowerUsage",
        "read /proc/uptime",
        "nvmlDeviceGetSomethingNew[3]",
    ]
    assert _areas(calls) == "clock-event reasons, clocks, counters, power, uptime, nvmlDeviceGetSomethingNew"


def test_a_severity_a_rule_does_not_document_is_refused() -> None:
    td101, td520 = REGISTRY["TD101"], REGISTRY["TD520"]
    assert td101.raised(Issue("GPU0", "m")) == "error"
    assert td101.raised(Issue("GPU0", "m", severity="error")) == "error"
    with pytest.raises(ValueError, match="rule TD101 raised warning, which it does not document"):
        td101.raised(Issue("GPU0", "m", severity="warning"))
    assert td520.raised(Issue("GPU0", "m", severity="warning")) == "warning"


@pytest.mark.parametrize(("code", "family"), [("TD001", "collectives"), ("TD101", "nvlink"), ("TD901", "probe")])
def test_a_code_names_its_family(code: str, family: str) -> None:
    assert REGISTRY[code].family == family


def test_the_worst_of_no_findings_is_none() -> None:
    def f(sev: str) -> Finding:
        return Finding("TD101", "n", sev, "s", "m", "f", {})  # type: ignore[arg-type]

    assert worst([]) is None
    assert worst([f("info"), f("critical"), f("warning")]) == "critical"
    assert worst(iter([f("warning"), f("info")])) == "warning"


def test_rule_patterns_take_spaces_lower_case_and_names_and_refuse_what_matches_nothing() -> None:
    assert [r.code for r in selected([" td10 "], [])] == [c for c in sorted(REGISTRY) if c.startswith("TD10")]
    assert [r.code for r in selected(["TD1"], ["nvlink-down", " TD102"])] == [
        c for c in sorted(REGISTRY) if c.startswith("TD1") and c not in ("TD101", "TD102")
    ]
    check_patterns(["td1", "nvlink-down", " TD901 ", ""])  # every one matches a rule (or is empty)
    with pytest.raises(InputError, match="no rule matches 'TD19'"):
        check_patterns(["TD19"])
    with pytest.raises(InputError, match="no rule matches 'nvlink-dow'"):
        check_patterns(["nvlink-dow"])  # a name is matched whole, never as a prefix


def test_a_field_the_probe_could_not_read_that_no_selected_check_uses_is_told_at_info() -> None:
    snap = probe_host("h200-x4").snapshot
    gpus = tuple(replace(g, serial=UNREAD) if g.index == 2 else g for g in snap.gpus)
    ctx = Context(replace(snap, gpus=gpus), capture_environment({}, system_conf="/nonexistent"))
    ev = evaluate(ctx, select=["TD701"])  # a measured rule: it reads no serial, and has nothing to judge here
    told = [(f.code, f.severity, f.subject) for f in ev.incomplete if f.evidence.get("field") == "serial"]
    assert told == [("TD901", "info", "GPU2")]
    (f,) = [f for f in ev.incomplete if f.evidence.get("field") == "serial"]
    assert f.message.endswith("no selected check uses it") and f.evidence["rules"] == []


def test_a_failed_read_is_named_by_its_path_inside_the_record() -> None:
    """A field inside a GPU's record by its dotted path, a link's by its own name under the link."""
    err = ProbeError("NO_PERMISSION", "nvmlDeviceGetFieldValues", 4)
    snap = link(2, 3, active=err)(pcie(2, width_current=err)(snapshot("h200-x4")))
    failed = [(s, w) for s, w, e in probe_failures(snap) if e is err]
    assert failed == [("GPU2", "pcie.width_current"), ("GPU2/nvlink3", "active")]
