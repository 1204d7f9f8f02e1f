"""One vocabulary across the commands: short flags, budgets, help text and exit codes mean the
same wherever they appear. The help tests walk the app itself, so a new command is held to them
without being listed here."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from conftest import FIXTURES, ROOT

from topodoctor.cli.commands import app, main
from topodoctor.cli.exit_codes import EXIT_TABLE, exit_codes_markdown
from topodoctor.core.shared_options import SHORT_FLAGS


def _commands() -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and sub-command of the app, with the words that reach it. (Typer carries
    its own copy of click: commands and options are told apart by what they hold.)"""
    stack: list[tuple[tuple[str, ...], Any]] = [((), typer.main.get_command(app))]
    while stack:
        path, cmd = stack.pop()
        yield path, cmd
        if hasattr(cmd, "list_commands"):  # a group: its commands as click resolves them, lazy ones loaded
            ctx = cmd.context_class(cmd)
            stack.extend(((*path, name), cmd.get_command(ctx, name)) for name in sorted(cmd.list_commands(ctx)))


COMMANDS = {" ".join(path): cmd for path, cmd in _commands() if path}


def _help(capsys: pytest.CaptureFixture[str], words: list[str]) -> str:
    code = main([*words, "--help"])
    out = capsys.readouterr()
    assert code == 0 and not out.err, out.err
    return out.out


def test_every_command_is_in_the_exit_table() -> None:
    assert sorted(COMMANDS) == sorted(EXIT_TABLE)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_lists_exit_codes_and_no_placeholder(capsys: pytest.CaptureFixture[str], name: str) -> None:
    text = _help(capsys, name.split())
    placeholders = re.findall(r"<[^<>\s]+>|\{[A-Z][^{}\s]*\}", text)  # <list[str]>, <path>, {RESULT...}
    assert not placeholders, placeholders
    listed = re.findall(r"^ {4}(\d+|128\+N)  (.+)$", text.split("Exit codes:", 1)[-1], re.M)
    assert "Exit codes:" in text and listed == [(c, m) for c, m in EXIT_TABLE[name]], text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_main_help_has_no_placeholder(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, [])
    assert "Exit codes:" in text and not re.findall(r"<[^<>\s]+>", text)


def test_readme_exit_table_is_the_commands_table() -> None:
    assert exit_codes_markdown() in (ROOT / "README.md").read_text(), (
        "README's per-command exit codes: paste topodoctor.cli.exit_codes.exit_codes_markdown()"
    )


def test_short_flags_mean_the_same_everywhere() -> None:
    seen: dict[str, set[str]] = {}
    for name, cmd in COMMANDS.items():
        for p in cmd.params:
            if p.param_type_name != "option":
                continue
            longs = [o for o in p.opts + p.secondary_opts if o.startswith("--")]
            for short in (o for o in p.opts + p.secondary_opts if not o.startswith("--")):
                assert SHORT_FLAGS.get(short) in longs, (name, short, longs)
                seen.setdefault(short, set()).add(name)
            for long in longs:  # --format and --output always have their short flag
                if long in ("--format", "--output"):
                    assert next(s for s, v in SHORT_FLAGS.items() if v == long) in p.opts, (name, long)
    assert set(seen) <= set(SHORT_FLAGS)


def test_collectives_format_is_f(capsys: pytest.CaptureFixture[str]) -> None:
    src = FIXTURES / "collectives" / "derived" / "x2-healthy.json"
    code = main(["collectives", "--from", str(src), "--replay", "h200-x2", "-f", "json"])
    out = capsys.readouterr()
    assert code == 0 and out.out.lstrip().startswith("{"), out.err
    code = main(["collectives", "--from", str(src), "--replay", "h200-x2", "--step-factor", "4", "-f", "json"])
    assert code == 0
    capsys.readouterr()


# Each command that takes a budget, run on an input that needs no GPU; the code it ends with.
BUDGETED = {
    "scan": (["scan", "--replay", "h200-x4", "-f", "json"], 0),
    "record": (["record", "--list"], 0),
    "check": (["check", "--replay", "h200-x4", "-f", "line"], 0),
    "expect": (["expect", "--replay", "h200-x4", "-o", "{tmp}/e.json"], 0),
    "bandwidth": (["bandwidth", "--from", str(FIXTURES / "bandwidth" / "h200-x4.quick.json"), "-f", "json"], 0),
    "collectives": (
        ["collectives", "--from", str(FIXTURES / "collectives" / "derived" / "x2-healthy.json"), "-f", "json"],
        0,
    ),
    "fleet": (["fleet", str(FIXTURES / "fleet"), "-f", "json"], 0),
    "nccl-topo": (["nccl-topo", "--replay", "h200-x4", "-o", "{tmp}/t.xml"], 0),
    "nccl-log": (["nccl-log", str(FIXTURES / "nccl-logs" / "failures" / "healthy"), "-f", "json"], 0),
    "diagnose": (["diagnose", str(FIXTURES / "nccl-tests" / "h200-x2" / "all_reduce.txt"), "-f", "json"], 0),
    "job": (["job", str(FIXTURES / "job" / "nccl" / "healthy"), "-f", "json"], 0),
}


def test_every_budgeted_command_is_listed() -> None:
    takes = {n for n, c in COMMANDS.items() if any("--timeout" in p.opts for p in c.params)}
    assert takes == set(BUDGETED)


@pytest.mark.parametrize("value", ["0", "inf", "nan", "-1", "-inf", "soon"])
@pytest.mark.parametrize("name", sorted(BUDGETED))
def test_timeout_means_the_same_everywhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, value: str
) -> None:
    """0 is no budget and inf no limit, in every command; nan, a negative or a word is a usage error."""
    argv, ok = BUDGETED[name]
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code = main([*argv, "--timeout", value])
    said = capsys.readouterr()
    err = said.err
    if value in ("0", "inf"):
        assert code == ok, err
    else:
        # In the one-line format the usage error is that line, on stdout (docs/prolog.md).
        lines = (said.out if "line" in argv else err).strip().splitlines()
        assert code == 2 and len(lines) == 1 and "'--timeout'" in lines[0], said
        assert not (err if "line" in argv else "").strip()


def test_readme_names_every_short_flag() -> None:
    readme = (ROOT / "README.md").read_text()
    for short, long in SHORT_FLAGS.items():
        assert f"`{short}` `{long}`" in readme, short


# ------------------------------------------------------------------ English
def test_counted_nouns() -> None:
    from topodoctor.core.text import plural

    got = [plural(1, "GPU"), plural(2, "GPU"), plural(0, "error"), plural(2, "process"), plural(1, "PCIe switch")]
    assert got == ["1 GPU", "2 GPUs", "0 errors", "2 processes", "1 PCIe switch"]
    assert plural(None, "process") == "an unknown number of processes"


def _string_constants(path: Path) -> Iterator[tuple[int, str]]:
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


@pytest.mark.slow
def test_no_counted_noun_is_left_to_the_reader() -> None:
    """ "error(s)", "GPU(s)": every count in a message goes through text.plural instead."""
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "topodoctor").rglob("*.py"))
        for line, value in _string_constants(path)
        if re.search(r"\w\(s\)", value)
    ]
    assert not found, found


ONE_OF_A_KIND = re.compile(r"(?<![\w.])1 (?!GB|MiB|GiB|ms\b|us\b)[A-Za-z]+s\b")


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--replay", "h100-x1"],
        ["check", "--replay", "h100-x1", "-f", "line"],
        ["scan", "--replay", "h100-x1"],
        ["nccl-topo", "--replay", "h100-x1", "-o", "-"],
        ["check", "--replay", str(FIXTURES / "derived" / "x4-fabric-in-progress.json")],
    ],
)
def test_output_reads_as_english(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    main(argv)
    out = capsys.readouterr()
    text = out.out + out.err
    assert not ONE_OF_A_KIND.findall(text), ONE_OF_A_KIND.findall(text)
    assert "in_progress" not in text and "(SUCCESS)" not in text
