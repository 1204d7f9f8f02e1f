"""Score `topodoctor nccl-log` on a folder of real NCCL logs against the folder's README table.

    python tests/nccl/score_corpus.py fixtures/nccl-logs/holdout

Each ``.log`` of the folder is read alone, in its own child process (``topodoctor nccl-log FILE
-f json``), as a new user would run it, so nothing one file teaches the reader carries over to the
next. The README's table (the format of ``fixtures/nccl-logs/real/README.md``) gives each file's
``expected`` cell (``TD053 error``, ``none, exit 0``, or ``new error (the class in words)`` for a class
that has no code yet) and its ``names`` cell (what the fix must name). Each file gets one verdict:

- named-right: the lead error finding is the expected class (any class for ``new``) and its fix or
  message names what the thread settled; a healthy log exits 0 with no error finding;
- confidently-wrong: an error finding that gives another cause (a cause-not-found finding is not one);
  a finding that ranks candidates (``cause.confidence`` is ``candidates``) gives a cause only through its
  first candidate: the settled cause first is named-right, later in the list cause-not-found, absent from
  the fix confidently-wrong; where the thread settles nothing it counts as cause not found;
- missed: no error finding (or not exit 1) on a failed job, or an error finding on a healthy log;
- cause-not-found-correct: a thread that settles nothing answered with cause not found (TD052/TD049);
- cause-not-found: a settled failure answered with cause not found: honest, but not named.

The file is a script, not a test (pytest collects ``test_*.py`` only): it prints a score and exits 0
whatever the score; 2 when the folder or its README cannot be read."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from topodoctor.core.errors import InputError
from topodoctor.core.fileio import read_text
from topodoctor.model.findings import Finding, finding_json
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

NOT_FOUND = ("TD052", "TD049")  # the cause-not-found codes: no reason in the log, or no known class
RUN_TIMEOUT_S = 300  # one log; the largest real log reads in seconds
CATEGORIES = ("named-right", "confidently-wrong", "missed", "cause-not-found-correct", "cause-not-found")


@dataclass(frozen=True)
class Expected:
    """What the README says `nccl-log` must answer for one file."""

    code: str | None  # a TD code, "new" for a class without a code yet, None for a healthy log
    severity: str | None
    exit_code: int
    names: str
    settled: str


def readme_rows(folder: Path) -> dict[str, dict[str, str]]:
    """The README's table: file -> column -> cell (``\\|`` is a pipe inside a cell)."""
    rows: dict[str, dict[str, str]] = {}
    head: list[str] = []
    for line in read_text(folder / "README.md", "README").splitlines():
        if not line.startswith("|") or line.startswith("| ---"):
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if not head:
            head = cells
            continue
        row = dict(zip(head, cells))
        rows[row.get("file", "").strip("`")] = row
    return rows


def expected(row: dict[str, str]) -> Expected:
    """The ``expected`` cell read: ``TD053 error``, ``TD081 warning, exit 0``, ``none, exit 0``, ``new error (...)``."""
    cell = row.get("expected", "")
    names, settled = row.get("names", ""), row.get("settled", "")
    if cell.startswith("none"):
        return Expected(None, None, 0, names, settled)
    words = cell.split(",")[0].split()
    code, severity = [*words, "", ""][:2]
    return Expected(code, severity, 1 if severity == "error" else 0, names, settled)


def run_nccl_log(path: Path) -> tuple[int, list[dict[str, object]], str]:
    """Exit code, findings and a note (empty when the run answered) of `nccl-log` on one file."""
    cmd = [sys.executable, "-m", "topodoctor", "nccl-log", str(path), "-f", "json"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return -1, [], f"no answer within {RUN_TIMEOUT_S} s"
    if done.returncode not in (0, 1):
        first = (done.stderr.strip().splitlines() or [""])[-1][:120]
        return done.returncode, [], f"exit {done.returncode}: {first}"
    try:
        findings = json.loads(done.stdout).get("findings", [])
    except (json.JSONDecodeError, AttributeError):
        return done.returncode, [], "output is not the JSON report"
    return done.returncode, [f for f in findings if isinstance(f, dict)], ""


def candidates(finding: dict[str, object]) -> list[str]:
    """The candidates a finding ranks, most likely first; [] for a finding that names one cause."""
    evidence = finding.get("evidence")
    if not isinstance(evidence, dict):
        return []
    cause = evidence.get("cause")
    if not isinstance(cause, dict) or cause.get("confidence") != "candidates":
        return []
    listed = evidence.get("candidates")
    return [str(c) for c in listed] if isinstance(listed, list) else []


def judge(exp: Expected, rc: int, findings: list[dict[str, object]]) -> str:
    """The verdict for one file (see the module docstring)."""
    errors = [f for f in findings if f.get("severity") == "error"]
    if exp.exit_code == 0:
        wanted = exp.code is None or any(f.get("code") == exp.code for f in findings)
        return "named-right" if rc == 0 and not errors and wanted else "missed"
    if rc != 1 or not errors:
        return "missed"
    lead = errors[0]
    code = str(lead.get("code", ""))
    ranked = candidates(lead)
    if exp.code in NOT_FOUND:
        return "cause-not-found-correct" if code in NOT_FOUND or ranked else "confidently-wrong"
    if code in NOT_FOUND:
        return "cause-not-found"
    said = f"{lead.get('fix', '')} {lead.get('message', '')}".lower()
    if ranked:
        if exp.code in ("new", code) and exp.names.lower() in f"{ranked[0]} {lead.get('message', '')}".lower():
            return "named-right"
        return "cause-not-found" if exp.names.lower() in said else "confidently-wrong"
    if exp.names.lower() in said and exp.code in ("new", code):
        return "named-right"
    return "confidently-wrong"


def findings_of(folder: Path, name: str) -> list[Finding]:
    """One file of a set read in this process, as `nccl-log` reads it (the sets' tests hold their verdicts by it)."""
    return explain([parse_file(name, (folder / name).read_text(errors="replace"))])


def verdict_of(folder: Path, row: dict[str, str], name: str) -> str:
    """The verdict of one file of a set by the rules above, read in this process."""
    findings = findings_of(folder, name)
    rc = 1 if any(f.severity in ("error", "critical") for f in findings) else 0
    return judge(expected(row), rc, [finding_json(f) for f in findings])


def answer(rc: int, findings: list[dict[str, object]], note: str) -> str:
    """The answer in one short phrase: the lead finding's code, severity and message."""
    if note:
        return note
    if not findings:
        return f"exit {rc}, no finding"
    errors = [f for f in findings if f.get("severity") == "error"]
    lead = (errors or findings)[0]
    return f"exit {rc}, {lead.get('code')} {lead.get('severity')}: {str(lead.get('message', ''))[:90]}"


def _kind(exp: Expected) -> str:
    """Which group a file counts in: a healthy run, cause not found expected, a cause expected."""
    if exp.exit_code == 0:
        return "healthy"
    if exp.code in NOT_FOUND:
        return "cause not found expected" + (" (thread settles nothing)" if exp.settled == "no" else "")
    return "cause expected"


def score(folder: Path) -> Counter[str]:
    """Print each file's verdict and the totals; return the counts per verdict."""
    rows = readme_rows(folder)
    logs = sorted(p.name for p in folder.iterdir() if p.suffix == ".log")
    counts: Counter[str] = Counter()
    per_kind: dict[str, Counter[str]] = {}
    for name in sorted(set(rows) - set(logs)):
        print(f"{'not on disk':<24} {name}")
    for name in logs:
        if name not in rows:
            print(f"{'not in README':<24} {name}")
            continue
        exp = expected(rows[name])
        rc, findings, note = run_nccl_log(folder / name)
        verdict = judge(exp, rc, findings)
        counts[verdict] += 1
        per_kind.setdefault(_kind(exp), Counter())[verdict] += 1
        want = "healthy, exit 0" if exp.code is None else f"{exp.code} {exp.severity} naming {exp.names!r}"
        print(f"{verdict:<24} {name}: expected {want}; got {answer(rc, findings, note)}")
    print()
    print(f"{sum(counts.values())} logs in {folder}: " + ", ".join(f"{counts[c]} {c}" for c in CATEGORIES))
    for kind, got in sorted(per_kind.items()):
        print(f"  {kind}: {sum(got.values())} logs, " + ", ".join(f"{n} {c}" for c, n in sorted(got.items())))
    return counts


def main(argv: list[str]) -> int:
    """Score the folder named on the command line; 0 whatever the score, 2 for an unreadable folder."""
    if len(argv) != 1:
        print("usage: python tests/nccl/score_corpus.py FOLDER (a folder of .log files and its README.md)")
        return 2
    folder = Path(argv[0])
    if not folder.is_dir():
        print(f"not a folder: {folder}")
        return 2
    try:
        score(folder)
    except InputError as exc:
        print(str(exc))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
