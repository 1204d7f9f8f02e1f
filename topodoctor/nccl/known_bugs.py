"""Known bugs of NCCL releases: the versions that have one, the message it logs, the release that
fixed it, where that is said (NCCL's release notes, the commit of the release tag, the issue
thread where a maintainer settled it) and the workaround where one is known. A log whose NCCL
version falls in a bug's range and that shows its message gets "a known bug of 2.x.y, fixed in
2.x.z: upgrade NCCL" first (TD083). Data and one matcher; no I/O."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from topodoctor.model.findings import Finding
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.logfile import LogFile

Version = tuple[int, int, int]


@dataclass(frozen=True)
class KnownBug:
    """One bug: ``first`` .. ``last`` (inclusive) print ``symptom`` (read in a message, and in
    ``source`` when that is not "": the file NCCL names); ``fixed_in`` is the first good release."""

    name: str
    first: Version
    last: Version
    symptom: re.Pattern[str]
    source: str  # the NCCL file that prints it ("" for any)
    fixed_in: str
    what: str  # the bug, in a few words
    reference: str  # release notes or the thread
    workaround: str = ""
    platform: str = ""  # where the bug shows (GPUs, fabric): said with the finding
    alone: bool = False  # the message alone shows the run fails on it (no failure need follow in the log)
    weak: re.Pattern[str] | None = None  # a message that shows it only when no other cause is found (a fallback)


# the INFO line that shows a bug (enqueue.cc, 2.25+): the kernels ask more shared memory than the GPU has
INFO_SIGN = "exceeds device/fn maxSharedMem"

KNOWN_BUGS = (
    KnownBug(
        "nccl-1",
        (1, 0, 0),
        (1, 99, 99),
        re.compile(""),
        "",
        "NCCL 2",
        "NCCL 1.x is the single-process library NCCL 2 replaced in 2017; its failures are not fixed any more",
        "NVIDIA/nccl-tests#5 (settled by updating NCCL 1.0 to NCCL 2)",
    ),
    KnownBug(
        "blackwell-shared-memory-size",
        (2, 25, 0),
        (2, 26, 1),
        re.compile(re.escape(INFO_SIGN)),
        "",
        "2.26.2",
        "the kernels ask more shared memory than the GPU has (sm_120), so they cannot run",
        "NVIDIA/nccl-tests#287 (the maintainers: 2.25.1 cannot work on RTX 5090; 2.26.2 works); 2.26.2-1 release "
        "notes: shared memory usage fixed on recent Blackwell GPUs",
        platform="Blackwell GPUs (RTX 50xx, RTX PRO 6000: sm_120)",
        alone=True,
    ),
    KnownBug(
        "proxy-error-as-internal",
        (2, 18, 0),
        (2, 18, 6),
        re.compile(r"(?!)"),  # the sign is weak: 2.18 says "internal error" for the proxy's failure, whatever it was
        "",
        "2.19.1",
        "a failure of NCCL's proxy thread (a /dev/shm segment, a socket, a registration) comes back as 'internal "
        "error': the main thread read the proxy's closed socket, not the proxy's result",
        "NCCL's source: in 2.18 proxy.cc's ncclPollProxyResponse returns ncclInternalError when the proxy's "
        "socket closes ('Socket recv failed while polling'); 2.19.1-1 returns the proxy's own result",
        "rerun with NCCL_DEBUG=WARN: the proxy's own WARN before 'Socket recv failed while polling' names the error",
        weak=re.compile(r"internal error", re.I),
    ),
    KnownBug(
        "ring-loop-back-pci-speed",
        (2, 19, 0),
        (2, 19, 3),
        re.compile(r"ring \d+ does not loop back to start"),
        "",
        "2.19.4",
        "the topology read uninitialised PCI link speeds where sysfs gives none, so ranks computed different rings",
        "NVIDIA/nccl#1020 (the maintainers: fixed in 2.20); NCCL 2.19.4-1 release notes: topology detection made "
        "deterministic when PCI speeds are not available",
        "NCCL_TOPO_FILE with a topology dumped on one node (NCCL_TOPO_DUMP_FILE) gives every rank the same view",
    ),
    KnownBug(
        "blackwell-shared-memory",
        (2, 25, 0),
        (2, 26, 1),
        re.compile(r"Cuda failure (?:\d+ )?'invalid argument'|CUDA error \d+ 'invalid argument'", re.I),
        "enqueue.cc",
        "2.26.2",
        "the kernels' shared-memory size was wrong for recent Blackwell GPUs, so setting it or launching failed",
        "NCCL 2.26.2-1 release notes: shared memory usage fixed on recent Blackwell GPUs (NVIDIA/nccl-tests#287, "
        "#291, NVIDIA/nccl#1637)",
        platform="Blackwell GPUs (B200, GB200, RTX 50xx / RTX PRO 6000)",
    ),
    KnownBug(
        "nic-fusion-path",
        (2, 25, 0),
        (2, 26, 6),
        re.compile(r"Could not find NET with id \S+"),
        "",
        "2.27.3",
        "NIC fusion merged the NICs so that the topology search found no path, and its fallback named a NIC "
        "that no longer existed",
        "NVIDIA/nccl#1748 (works with NCCL 2.27); NCCL 2.26.2-1 release notes: NIC fusion auto-merge failures "
        "made non-fatal",
        "NCCL_NET_MERGE_LEVEL=LOC turns NIC fusion off (it did not help every reporter: upgrading did)",
        weak=re.compile(r"Could not find a path for pattern \d+"),
    ),
    KnownBug(
        "illegal-address-large-collectives",
        (2, 26, 2),
        (2, 26, 2),
        re.compile(r"illegal memory access", re.I),
        "",
        "a later release (2.31.2 tested good)",
        "collectives of 512 KiB and more faulted between two GPUs without NVLink on a Blackwell workstation",
        "NVIDIA/nccl#2418",
        "NCCL_PROTO=Simple or NCCL_P2P_DISABLE=1 narrows it down until NCCL is upgraded",
        platform="Blackwell workstation GPUs (RTX PRO 6000) over PCIe",
    ),
)


def _parse(v: str) -> Version | None:
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", v)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def matching(
    versions: Iterable[str], messages: Iterable[tuple[str, str]], unexplained: bool = True
) -> list[tuple[KnownBug, str, int]]:
    """The known bugs a log shows: (bug, the version it runs, the index of the first message
    that shows it) for each bug whose range holds a version of ``versions`` and whose symptom one
    of ``messages`` ((text, NCCL source file)) prints; its weak symptom counts only where the log is
    otherwise ``unexplained``. A log naming two NCCL versions is matched on each."""
    parsed = {v.split("+")[0]: p for v in versions if (p := _parse(v))}
    msgs = list(messages)
    out = []
    for bug in KNOWN_BUGS:
        running = next((v for v, p in parsed.items() if bug.first <= p <= bug.last), None)
        if running is None:
            continue
        shows = [i for i, (t, src) in enumerate(msgs) if _shows(bug, bug.symptom, t, src)]
        if not shows and bug.weak is not None and unexplained:
            shows = [i for i, (t, src) in enumerate(msgs) if _shows(bug, bug.weak, t, src)]
        if shows:
            out.append((bug, running, shows[0]))
    return out


def _shows(bug: KnownBug, symptom: re.Pattern[str], text: str, src: str) -> bool:
    return bool(symptom.search(text)) and (not bug.source or src.endswith(bug.source) or bug.source in text)


def known_bug_findings(files: Sequence[LogFile], failed: bool, unexplained: bool = True) -> list[Finding]:
    """TD083 for each known bug the logs show in a run that ``failed`` (or whose message alone says
    it fails; a weak sign only where the log is otherwise ``unexplained``): the version, the
    release that fixed it, the workaround and where that is said; the evidence is the first line
    that shows it."""
    events = [e for f in files for e in f.events]
    texts = [(e.fields.get("said") or e.text, e.source) for e in events]
    out = []
    for bug, running, i in matching((v for f in files for v in f.versions), texts, unexplained):
        if not (failed or bug.alone):
            continue
        ev = events[i]
        on = f" on {bug.platform}" if bug.platform else ""
        fix = f"Upgrade NCCL to {bug.fixed_in} or later. " + (
            f"Until then: {bug.workaround}. " if bug.workaround else ""
        )
        evidence: dict[str, object] = {"file": ev.file, "line": ev.line_no, "text": ev.text}
        if ev.rank is not None:
            evidence["rank"] = ev.rank
        evidence |= {
            "cause": {"what": bug.what, "confidence": "known bug of the version"},
            "nccl_version": running,
            "fixed_in": bug.fixed_in,
            "reference": bug.reference,
        }
        out.append(
            Finding(
                "TD083",
                EXPLANATIONS["TD083"].name,
                EXPLANATIONS["TD083"].severity,
                f"nccl-{running}",
                (
                    f"NCCL {running} is NCCL 1.x, replaced by {bug.fixed_in}: upgrade NCCL ({bug.what})"
                    if bug.first[0] == 1
                    else f"a known bug of NCCL {running}{on}, fixed in {bug.fixed_in}: upgrade NCCL ({bug.what})"
                ),
                fix + f"Source: {bug.reference}.",
                evidence,
            )
        )
    return out


def version_candidates(files: Sequence[LogFile]) -> list[str]:
    """For logs that name no NCCL version: the known bugs whose message they show, each as a candidate
    in words ("NCCL 2.19.0 - 2.19.3: ..., fixed in 2.19.4"); [] when a version is known (then
    ``known_bug_findings`` decides) or no bug's message is shown. NCCL 1.x's entry needs a version."""
    if any(f.versions for f in files):
        return []
    texts = [(e.fields.get("said") or e.text, e.source) for f in files for e in f.events]
    out = []
    for bug in KNOWN_BUGS:
        if bug.first[0] == 1:
            continue
        signs = [bug.symptom] + ([bug.weak] if bug.weak is not None else [])
        if any(_shows(bug, sign, t, s) for sign in signs for t, s in texts):
            first, last = ".".join(map(str, bug.first)), ".".join(map(str, bug.last))
            span = first if first == last else f"{first} - {last}"
            out.append(f"if the job runs NCCL {span}: a known bug ({bug.what}), fixed in {bug.fixed_in}")
    return out


def with_bug_candidates(lead: Finding, files: Sequence[LogFile]) -> Finding:
    """A cause-not-found finding of logs without a version banner, with the known bugs its message is
    the sign of: which applies depends on the version the job runs, which the logs do not say."""
    new = [b for b in version_candidates(files) if b.rsplit("fixed in ", 1)[-1] not in lead.message]
    if not new:
        return lead
    fix = (
        f"The log names no NCCL version; {'; '.join(new)}: check it (`python -c 'import torch; "
        f"print(torch.cuda.nccl.version())'`, the banner at NCCL_DEBUG=VERSION) and upgrade if so. {lead.fix}"
    )
    return replace(lead, fix=fix, evidence={**lead.evidence, "bug_candidates": new})
