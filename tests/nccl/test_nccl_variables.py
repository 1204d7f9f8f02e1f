"""The table of NCCL's variables (topodoctor/nccl/data/variables.json, written by
fixtures/nccl_variables_extract.py from NCCL's source at every release 2.18.1 - 2.30.7): the
committed file is what NCCL's source says, its counts per release are sane against an independent
count of NCCL's own sites, and ``check``'s lint judges names against the job's release."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from topodoctor.core.probed import Unsupported
from topodoctor.model.collectives import load_result
from topodoctor.model.environment import Environment
from topodoctor.nccl import guide, variables
from topodoctor.nccl.names import judge_names, not_read
from topodoctor.nccl.variables import judge_as, parse_version, read_in, releases, shown, table
from topodoctor.probe.environment import capture_process
from topodoctor.probe.sources import probe_host
from topodoctor.rules import Context, evaluate

MIRROR = Path("/work/.mirror/NVIDIA+nccl/repo")
needs_mirror = pytest.mark.skipif(not (MIRROR / "HEAD").exists(), reason="no NVIDIA/nccl git mirror here")


def _extractor():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "fixtures"))
    try:
        import nccl_variables_extract  # a script beside the fixtures, not a package module
    finally:
        sys.path.pop(0)
    return nccl_variables_extract


@needs_mirror
def test_the_committed_table_is_what_nccls_source_says() -> None:
    x = _extractor()
    assert x.dump(x.build(MIRROR)) == (ROOT / "topodoctor" / "nccl" / "data" / "variables.json").read_text(
        encoding="utf-8"
    )


@needs_mirror
@pytest.mark.parametrize("tag", ["v2.18.1-1", "v2.26.6-1", "v2.30.7-1"])
def test_every_nccl_param_and_ncclgetenv_site_is_in_the_table(tag: str) -> None:
    # An independent count: NCCL_PARAM's suffixes and ncclGetEnv's literal names, by git grep -o.
    def grep(pattern: str) -> set[str]:
        out = subprocess.run(
            ["git", "-C", str(MIRROR), "grep", "-h", "-o", "-E", pattern, tag, "--", "src"],
            capture_output=True,
            text=True,
            check=False,  # 1: no match (2.18 reads its strings with getenv, not yet ncclGetEnv)
        ).stdout
        return set(re.findall(r'"([A-Z0-9_]+)"', out))

    sites = {"NCCL_" + s for s in grep(r'NCCL_PARAM\([A-Za-z0-9_]+, *"[A-Z0-9_]+"')}
    sites |= grep(r'ncclGetEnv\("NCCL_[A-Z0-9_]+"')
    v = parse_version(tag)
    assert v is not None
    read = {n for n in read_in(v) if not table()[n].plugin}
    assert sites <= read
    # what the table adds on top: getenv / getEnvFunc sites, ncclGetLevel's, 2.30's registry
    extra = read - sites
    assert {"NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL", "NCCL_P2P_DISABLE"} <= extra
    assert len(extra) < 40


def test_counts_per_release_are_the_tables_own_and_grow() -> None:
    counts = variables.counts()
    assert tuple(counts) == releases()
    for rel, n in counts.items():
        assert n == sum(1 for name in read_in(rel) if not table()[name].plugin)
    first, last = counts[releases()[0]], counts[releases()[-1]]
    assert 100 <= first < last <= 300
    # the 2.26 and 2.30 figures NCCL_PARAM and ncclGetEnv alone give are 151 and 231: the table holds more
    assert counts[(2, 26, 6)] >= 151 and counts[(2, 30, 7)] >= 231


def test_a_variable_knows_its_releases_type_default_and_unset() -> None:
    shm = table()["NCCL_SHM_USE_CUDA_MEMCPY"]
    assert shm.type == "int64" and shm.default == "0"
    assert shm.read_by((2, 30, 4)) and not shm.read_by((2, 30, 7))
    assert shm.span == "2.18.1 - 2.30.4"
    assert "src/transport/shm.cc" in shm.files
    assert table()["NCCL_BUFFSIZE"].unset.startswith("NCCL decides at run time")
    assert table()["NCCL_P2P_LEVEL"].type == "level"
    assert table()["NCCL_IB_HCA"].type == "string"
    assert table()["NCCL_PROFILE_EVENT_MASK"].plugin  # the example profiler plugin's


def test_versions_are_judged_as_a_release_of_the_table() -> None:
    assert parse_version("2.28.9+cuda12.4") == (2, 28, 9) == parse_version("v2.28.9-1")
    assert parse_version("2.28.3-1") == (2, 28, 3) and parse_version("none") is None
    assert judge_as((2, 26, 4)).release == (2, 26, 3)
    assert judge_as((2, 31, 0)).release == releases()[-1] and judge_as((2, 31, 0)).note.startswith("newer")
    assert judge_as((2, 17, 1)).release is None and judge_as(None).release is None


def test_not_read_says_added_removed_or_gap() -> None:
    assert "from 2.23.4 on" in (not_read("NCCL_PAT_ENABLE", judge_as((2, 18, 6))) or "")
    assert "2.18.1 - 2.30.4" in (not_read("NCCL_SHM_USE_CUDA_MEMCPY", judge_as((2, 30, 7))) or "")
    gin = not_read("NCCL_GIN_NCONTEXTS", judge_as((2, 30, 7)))
    assert gin is not None and "ignores it" in gin
    assert not_read("NCCL_PAT_ENABLE", judge_as((2, 24, 3))) is None
    assert not_read("NCCL_PAT_ENABLE", judge_as(None)) is None  # unknown version: the union
    assert not_read("NCCL_NCHANNELS_PER_PEER", judge_as((2, 20, 3))) is not None  # before 2.18 only


def test_the_guide_covers_the_settings_users_set_and_each_is_a_real_variable() -> None:
    for name in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_P2P_DISABLE", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"):
        s = guide.BY_NAME[name]
        assert s.meaning and s.harm and s.fix and s.variable is not None
    assert guide.BY_NAME["NCCL_ALGO"].debug_only and not guide.BY_NAME["NCCL_IB_HCA"].debug_only
    assert all(s.variable is not None for s in guide.SETTINGS if s.name.startswith("NCCL_"))


def _codes(env: dict[str, str]) -> dict[str, str]:
    process = capture_process(env, system_conf="/nonexistent/nccl.conf", affinity=Unsupported())
    ctx = Context(probe_host("h200-x4").snapshot, Environment.of(process))
    return {f.code: f.message for f in evaluate(ctx, select=["TD6"]) if f.code in ("TD614", "TD625")}


@pytest.mark.parametrize("release", releases(), ids=shown)
def test_the_lint_at_every_release_2_18_to_2_30(release: tuple[int, int, int]) -> None:
    image = {"NCCL_VERSION": f"{shown(release)}-1"}
    read = sorted(n for n in read_in(release) if not table()[n].plugin)
    assert _codes(image | {n: "1" for n in read[:40]}) == {}  # what the release reads: nothing to say
    later = next((n for n, v in table().items() if v.releases[0][0] > release and not v.plugin), None)
    if later is not None:
        said = _codes(image | {later: "1"})
        assert set(said) == {"TD625"} and f"NCCL {shown(release)}" in said["TD625"]
    gone = next((n for n, v in table().items() if v.releases[-1][1] < release), None)
    if gone is not None and gone not in variables.DEPRECATED:
        assert "ignores it" in _codes(image | {gone: "1"})["TD625"]


def test_a_typo_still_names_the_variable_and_says_whether_the_version_was_known() -> None:
    unknown = _codes({"NCCL_SOCKET_IFNAM": "eth0"})["TD614"]
    assert "did you mean NCCL_SOCKET_IFNAME?" in unknown and "version is not known" in unknown
    known = _codes({"NCCL_VERSION": "2.24.3-1", "NCCL_P2P_DISABL": "1"})["TD614"]
    assert "did you mean NCCL_P2P_DISABLE?" in known and "2.24.3" in known


def test_judge_names_serves_any_reader_that_knows_the_version() -> None:
    # a log's banner said 2.18.6: what its "set by environment" names, or a job script's, come to
    said = judge_names(
        ["NCCL_SOCKET_IFNAM", "NCCL_PAT_ENABLE", "NCCL_MAX_RINGS", "NCCL_VERSION"], (2, 18, 6), "a banner"
    )
    assert [(v.name, v.kind) for v in said] == [
        ("NCCL_SOCKET_IFNAM", "unknown"),
        ("NCCL_PAT_ENABLE", "not-in-version"),
        ("NCCL_MAX_RINGS", "deprecated"),
    ]
    assert said[0].suggestion == "NCCL_SOCKET_IFNAME" and said[1].message.endswith("(the version from a banner)")
    newer = judge_names(["NCCL_BRAND_NEW_KNOB"], (2, 31, 2))
    assert "is newer, so it may be new" in newer[0].message
    assert judge_names(["NCCL_PAT_ENABLE", "NCCL_P2P_LEVEL"], None) == []  # unknown version: every release


def test_the_measured_collectives_version_wins_over_the_images() -> None:
    # torch 2.11's NCCL 2.28.9 ran the collectives (fixtures/collectives/real); the image says 2.30.7
    res = load_result(ROOT / "fixtures" / "collectives" / "real" / "h100-x2-default.json")
    env = {"NCCL_VERSION": "2.30.7-1", "NCCL_ALLGATHERV_ENABLE": "0", "NCCL_SHM_USE_CUDA_MEMCPY": "1"}
    process = capture_process(env, system_conf="/nonexistent/nccl.conf", affinity=Unsupported())
    ctx = Context(res.snapshot, Environment.of(process), collectives=res)
    found = [f for f in evaluate(ctx, select=["TD625"]) if f.code == "TD625"]
    assert [f.subject for f in found] == ["env:NCCL_ALLGATHERV_ENABLE"]  # 2.29.2 on; SHM_USE_CUDA_MEMCPY 2.28.9 reads
    assert "NCCL 2.28.9" in found[0].message and "measured collectives" in found[0].message
