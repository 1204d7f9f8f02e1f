"""How long a check takes, as measured on the GPU hosts: the one table that ``check --help``,
README.md and docs/prolog.md quote (tests/cli/test_docs.py holds them to it). Each figure
is a median wall time from docs/benchmarks.md, the section named beside it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunTime:
    """One measured run: the command line, the host it ran on, its wall time, and where
    docs/benchmarks.md reports it."""

    command: str
    host: str
    wall: str
    section: str


RUN_TIMES = (
    RunTime("check", "2 x H200", "0.64 s", "Start-up: where a copy pass spends its time"),
    RunTime("check --bandwidth", "2 x H200", "1.25 s", "Start-up: where a copy pass spends its time"),
    RunTime("check --level quick", "2 x H100", "7.96 s", "Small messages, algorithms and emulated nodes on two GPUs"),
    RunTime("check --level quick", "4 x H200", "10.9 s", "Four GPUs: nvidia-h200-x4"),
    RunTime("check --level long", "2 x H100", "76.5 s", "Small messages, algorithms and emulated nodes on two GPUs"),
    RunTime("check --level long", "4 x H200", "93.2 s", "Four GPUs: nvidia-h200-x4"),
)


def took(command: str) -> str:
    """The measured times of ``command``, for a help text: "7.96 s on 2 x H100, 10.9 s on 4 x H200"."""
    return ", ".join(f"{r.wall} on {r.host}" for r in RUN_TIMES if r.command == command)


def run_times_markdown() -> str:
    """The table README.md holds."""
    rows = [f"| `topodoctor {r.command}` | {r.host} | {r.wall} |" for r in RUN_TIMES]
    return "\n".join(["| command | host | wall time |", "| --- | --- | --- |", *rows]) + "\n"
