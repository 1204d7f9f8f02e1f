"""The catalogue of messages (topodoctor/nccl/data/messages.json) against the sources it is read
from: NCCL's release tags in the git mirror (skipped where the mirror is absent), every class it
names a code of ours, matching without regard to case, and what the reader takes from it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from topodoctor.nccl.catalogue import KIND_CODE, entries, lookup, sourced
from topodoctor.nccl.explanations import EXPLANATIONS

ROOT = Path(__file__).resolve().parents[2]
MIRROR = Path("/work/.mirror/NVIDIA+nccl/repo")
needs_mirror = pytest.mark.skipif(not (MIRROR / "HEAD").exists(), reason="no NVIDIA/nccl mirror here")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(MIRROR), *args], capture_output=True, text=True, check=True).stdout


def _at(version: str) -> list:  # type: ignore[type-arg]
    """The NCCL WARN entries a version prints."""
    parts = tuple(int(x) for x in version.split("."))
    out = []
    for e in entries():
        if e.source != "nccl" or e.level != "WARN":
            continue
        for run in e.versions:
            lo, _, hi = run.partition("..")
            if tuple(int(x) for x in lo.split(".")) <= parts <= tuple(int(x) for x in (hi or lo).split(".")):
                out.append(e)
                break
    return out


@needs_mirror
@pytest.mark.parametrize("version", ["2.18.1", "2.26.2", "2.30.7"])
def test_warn_sites_of_a_release_are_all_in_the_catalogue(version: str) -> None:
    """Counted independently with git grep: the WARN( call sites of the tag's src/, which the
    catalogue's messages of that version may not exceed (one message can be printed from several
    sites, a macro's own WARN is one message) nor fall far below; and a message's fixed text is in
    a file it names."""
    tag = f"v{version}-1"
    listing = _git("grep", "-c", "-E", r"(^|[^A-Za-z_.>])WARN *\(", tag, "--", "src")
    sites: dict[str, int] = {}
    for line in listing.splitlines():  # v2.30.7-1:src/enqueue.cc:12
        _, path, n = line.split(":")
        if "/device/" not in path and "nvtx" not in path and "/test" not in path:
            sites[path.removeprefix("src/")] = int(n)
    mine = _at(version)
    total = sum(sites.values())
    assert 0.75 * total <= len(mine) <= total, (len(mine), total)
    for e in mine[::25]:  # a sample: the fixed text of the format is in the source of the tag
        literal = max(re.split(r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?[diouxXsfgcp%]", e.format), key=len)
        text = "".join(_git("show", f"{tag}:src/{f}") for f in e.files if f in sites)
        assert literal.strip().split("\\")[0][:20] in text.replace('"\n', "").replace('" "', ""), e.format


MIRRORS = [
    MIRROR,
    Path("/work/.mirror/aws+aws-ofi-nccl/repo"),
    Path("/work/.mirror/Mellanox+nccl-rdma-sharp-plugins/repo"),
]


@pytest.mark.skipif(not all((m / "HEAD").exists() for m in MIRRORS), reason="not every source mirror is here")
@pytest.mark.slow
def test_the_committed_catalogue_is_what_the_sources_give() -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "fixtures" / "nccl_messages_extract.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_class_has_a_code_of_ours() -> None:
    classed = [e for e in entries() if e.kind]
    assert len(classed) > 100
    for e in classed:
        assert e.code == KIND_CODE[e.kind], e
        assert e.code == "" or e.code in EXPLANATIONS, e
    sources = {"nccl", "aws-ofi-nccl", "nccl-rdma-sharp-plugins", "torch", "ld.so", "ld"}
    assert {e.source for e in entries()} == sources


def test_nccl_verdict_after_the_message_is_the_severity() -> None:
    """graph/rings.cc returns ncclInternalError after its loop-back WARN (every version); the
    topology search falls back after its pattern WARN, so that one is a warning."""
    ring = lookup("Error : ring 0 does not loop back to start (13 != 15).")
    assert ring is not None and ring.fatal and ring.severity == "error" and "ncclInternalError" in ring.returns
    assert "graph/rings.cc" in ring.files and ring.kind == "graph-search"
    pattern = lookup("Could not find a path for pattern 4, falling back to simple order")
    assert pattern is not None and not pattern.fatal and pattern.severity == "warning"


def test_matched_without_regard_to_case() -> None:
    """NCCL 2.19 - 2.29 print "Error : no algorithm/protocol available ...", 2.30 "No algorithm/protocol
    available ...": both are the invalid-setting class, both fatal."""
    old = lookup("Error : no algorithm/protocol available for function AllReduce with datatype ncclInt8.")
    new = lookup("No algorithm/protocol available for function AllReduce with datatype ncclInt8. NCCL_ALGO was set")
    assert old is not None and new is not None
    assert old.kind == new.kind == "invalid-setting" and old.fatal and new.fatal
    assert lookup("ERROR : NO ALGORITHM/PROTOCOL AVAILABLE") is not None


def test_aws_ofi_nccl_messages_carry_their_prefix() -> None:
    e = lookup("NET/OFI OFI fi_getinfo() call failed: No data available")
    assert e is not None and e.source == "aws-ofi-nccl" and e.fatal
    said = sourced("NET/OFI Unable to register memory (type = 1) for device 0. RC: -12, Error: Cannot allocate memory")
    assert said.get("fatal") == "1" and said["source_of"] == "aws-ofi-nccl"


def test_nccl_1x_messages_are_in_it() -> None:
    """NCCL 1.3's src/core.cu: the catalogue reads the 1.x tree too."""
    e = lookup("comm allocation failed")
    assert e is not None and e.versions[0].startswith("1.3") and "core.cu" in e.files


def test_unknown_text_is_not_a_message() -> None:
    assert lookup("epoch 3 loss 0.25") is None
    assert sourced("some words of the program") == {}


@needs_mirror
def test_cuda_call_sites_of_a_release_are_the_sources() -> None:
    """Every CUDACHECK / CUCHECK of v2.30.7-1's src/ (git grep, #define lines left out) is a site of
    the catalogue's CUDA call table at that version, and a sample of the sites holds its call in the
    source at that line."""
    from topodoctor.nccl.catalogue import cuda_calls_at

    tag = "v2.30.7-1"
    listing = _git("grep", "-n", "-E", r"(^|[^A-Za-z_#])(CUDACHECK|CUCHECK)(GOTO|IGNORE|THREAD)? *\(", tag, "--", "src")
    checks = []
    for line in listing.splitlines():  # v2.30.7-1:src/transport/p2p.cc:298:    CUDACHECK(...)
        _, path, n, text = line.split(":", 3)
        if "#define" not in text and "/device/" not in path and "nvtx" not in path:
            checks.append((path.removeprefix("src/"), n))
    assert len(checks) > 300
    missing = [f"{p}:{n}" for p, n in checks if not any(r.endswith("2.30.7") for r in _runs(cuda_calls_at(f"{p}:{n}")))]
    assert missing == []
    for path, n in checks[::40]:
        source = _git("show", f"{tag}:src/{path}").splitlines()[int(n) - 1]
        (call,) = [c for c, runs in cuda_calls_at(f"{path}:{n}").items() if any(r.endswith("2.30.7") for r in runs)]
        assert call in source, (path, n, call, source)


def _runs(calls: dict[str, tuple[str, ...]]) -> list[str]:
    return [r for runs in calls.values() for r in runs]


def test_the_counts_docs_give_are_the_catalogues() -> None:
    """docs/nccl-log.md says how many messages each source has; the sentence follows the file."""
    text = " ".join((Path(__file__).parents[2] / "docs" / "nccl-log.md").read_text().split())
    said = re.search(
        r"([\d,]+) messages: NCCL ([\d,]+) WARN and ([\d,]+) INFO, aws-ofi-nccl ([\d,]+) WARN and ([\d,]+) INFO, "
        r"the SHARP plugin ([\d,]+) WARN and ([\d,]+) INFO, torch ([\d,]+), the linker ([\d,]+)\.",
        text,
    )
    assert said is not None, "docs/nccl-log.md no longer states the catalogue's counts"
    every = list(entries())
    by = {(e.source, e.level) for e in every}
    count = {k: sum(1 for e in every if (e.source, e.level) == k) for k in by}
    want = [
        len(every),
        count[("nccl", "WARN")],
        count[("nccl", "INFO")],
        count[("aws-ofi-nccl", "WARN")],
        count[("aws-ofi-nccl", "INFO")],
        count[("nccl-rdma-sharp-plugins", "WARN")],
        count[("nccl-rdma-sharp-plugins", "INFO")],
        sum(n for (source, _), n in count.items() if source == "torch"),
        sum(n for (source, _), n in count.items() if source in ("ld.so", "ld")),
    ]
    assert [int(g.replace(",", "")) for g in said.groups()] == want
