"""Score `topodoctor diagnose` on a folder of real slow-run cases.

Usage: python tests/diagnosis/score_corpus.py fixtures/diagnose/holdout [--topodoctor CMD]

Not a pytest module (no `test_` prefix): it runs the command on every case and prints a score; it exits 0
whatever the score, so a run is a measurement, never a gate.

The folder holds one sub-folder per case (the evidence files as the reporter posted them) and a README.md
whose Markdown table has a `case` column and an `expected` column. `expected` is either

- `normal`: the thread settled that the numbers were right for the hardware; the answer is right when no
  finding is at warning or above;
- the cause's words, each in backticks (`` `NCCL_P2P_LEVEL`; `SHM` ``): the answer is right when a finding at
  warning or above holds one of them (case-insensitively) in its code, message, fix or diagnosis' what;
- `cannot tell: post X` with X's words in backticks: the evidence alone cannot decide; the answer is right
  when a finding of any severity asks for one of those words (the output to post), and no finding at
  warning or above names a cause.

`topodoctor diagnose CASE_DIR -f json` is expected to print

    {"findings": [{"code": str, "severity": str, "subject": str, "message": str, "fix": str,
                   "diagnosis": {"what": str, "confidence": str, "fix": str, "evidence": [...],
                                 "ruled_out": [...], "others": [...]} | null}],
     "exit_code": int}

Each case gets one verdict:

- named-right: a cause case whose cause a finding at warning or above names;
- normal-right: a normal case with nothing at warning or above;
- confidently-wrong: a finding at warning or above that names something else (on a normal case: any
  finding at warning or above; on a cannot-tell case: a named cause where the evidence cannot decide);
- missed: nothing at warning or above on a cause case, or no request for the deciding output;
- unavailable: the command failed or its output is not the JSON above ("diagnose unavailable").
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

SEVERITY_RANK = {"debug": 0, "info": 1, "notice": 1, "warning": 2, "warn": 2, "error": 3, "critical": 4}
WARNING_RANK = SEVERITY_RANK["warning"]
TIMEOUT_S = 120
VERDICTS = ("named-right", "normal-right", "confidently-wrong", "missed", "unavailable")


@dataclass(frozen=True)
class Case:
    """One row of a README table: the case folder and what a right answer holds."""

    name: str
    kind: str  # "normal", "cause" or "cannot-tell"
    words: tuple[str, ...]


def read_cases(readme: Path) -> list[Case]:
    """The cases of README.md's table: its `case` and `expected` columns."""
    cases: list[Case] = []
    header: list[str] | None = None
    for line in readme.read_text(encoding="utf-8").splitlines():
        if not line.lstrip().startswith("|"):
            header = None  # a table ends at its first line that is not a row
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = [cell.lower() for cell in cells]
            continue
        if all(set(cell) <= set("-: ") for cell in cells):
            continue
        if "case" not in header or "expected" not in header or len(cells) != len(header):
            continue
        row = dict(zip(header, cells, strict=True))
        cases.append(parse_expected(row["case"].strip("`"), row["expected"]))
    return cases


def parse_expected(name: str, expected: str) -> Case:
    """A case from its `expected` cell."""
    words = tuple(word.strip() for word in re.findall(r"`([^`]+)`", expected) if word.strip())
    text = expected.strip().lower()
    if text.startswith("normal"):
        return Case(name, "normal", ())
    if text.startswith("cannot tell"):
        return Case(name, "cannot-tell", words)
    return Case(name, "cause", words)


def finding_text(finding: dict[str, object]) -> str:
    """The parts of a finding a cause's words are looked for in."""
    parts = [str(finding.get(key) or "") for key in ("code", "message", "fix")]
    diagnosis = finding.get("diagnosis")
    if isinstance(diagnosis, dict):
        parts.append(str(diagnosis.get("what") or ""))
        parts.append(str(diagnosis.get("fix") or ""))
    return " ".join(parts).lower()


def is_serious(finding: dict[str, object]) -> bool:
    """Whether a finding is at warning or above."""
    return SEVERITY_RANK.get(str(finding.get("severity", "")).lower(), 0) >= WARNING_RANK


def judge(case: Case, findings: list[dict[str, object]]) -> tuple[str, str]:
    """The verdict on one case and the finding it rests on (its code, or a short note)."""
    serious = [f for f in findings if is_serious(f)]
    words = [word.lower() for word in case.words]

    def names(finding: dict[str, object]) -> bool:
        text = finding_text(finding)
        return any(word in text for word in words)

    if case.kind == "normal":
        if not serious:
            return "normal-right", ""
        return "confidently-wrong", ",".join(str(f.get("code")) for f in serious)
    if case.kind == "cannot-tell":
        asking = [f for f in findings if names(f)]
        if serious and not any(names(f) for f in serious):
            return "confidently-wrong", ",".join(str(f.get("code")) for f in serious)
        if asking:
            return "named-right", str(asking[0].get("code"))
        return "missed", ""
    hits = [f for f in serious if names(f)]
    if hits:
        return "named-right", str(hits[0].get("code"))
    if serious:
        return "confidently-wrong", ",".join(str(f.get("code")) for f in serious)
    return "missed", ""


def run_diagnose(command: list[str], case_dir: Path) -> list[dict[str, object]] | None:
    """The findings `diagnose` gives on one case folder, or None when it cannot be run or read."""
    try:
        done = subprocess.run(
            [*command, "diagnose", str(case_dir), "-f", "json"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        answer = json.loads(done.stdout)
    except json.JSONDecodeError:
        return None
    if not isinstance(answer, dict) or not isinstance(answer.get("findings"), list):
        return None
    return [f for f in answer["findings"] if isinstance(f, dict)]


def main(argv: list[str] | None = None) -> int:
    """Score every case of a corpus folder; always 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="folder with README.md and one sub-folder per case")
    parser.add_argument(
        "--topodoctor",
        default=f"{shlex.quote(sys.executable)} -m topodoctor",
        help="how to start topodoctor (default: this Python's -m topodoctor)",
    )
    args = parser.parse_args(argv)
    readme = args.corpus / "README.md"
    if not readme.is_file():
        print(f"no README.md in {args.corpus}")
        return 0
    cases = read_cases(readme)
    command = shlex.split(args.topodoctor)
    totals: Counter[str] = Counter()
    by_kind: Counter[tuple[str, str]] = Counter()
    for case in cases:
        case_dir = args.corpus / case.name
        if not case_dir.is_dir():
            verdict, note = "unavailable", "no such folder"
        else:
            findings = run_diagnose(command, case_dir)
            if findings is None:
                verdict, note = "unavailable", "diagnose unavailable"
            else:
                verdict, note = judge(case, findings)
        totals[verdict] += 1
        by_kind[(case.kind, verdict)] += 1
        print(f"{case.name:<40} {case.kind:<12} {verdict:<18} {note}")
    print()
    print(f"cases: {len(cases)}  " + "  ".join(f"{v}: {totals[v]}" for v in VERDICTS))
    for kind in ("cause", "cannot-tell", "normal"):
        row = "  ".join(f"{v}: {by_kind[(kind, v)]}" for v in VERDICTS if by_kind[(kind, v)])
        if row:
            print(f"  {kind}: {row}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
