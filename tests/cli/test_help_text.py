"""`topodoctor --help` answers from a text kept in topodoctor/cli/help_text.py, before typer loads
(start-up): it must be exactly what typer itself prints for the app. After a change to the commands:
`python tests/cli/test_help_text.py --write`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from topodoctor.cli.commands import app
from topodoctor.cli.help_text import TOP_LEVEL_HELP

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "topodoctor" / "cli" / "help_text.py"


def typer_help() -> str:
    r = CliRunner().invoke(app, ["--help"], prog_name="topodoctor", terminal_width=80)
    assert r.exit_code == 0, r.output
    return r.output


def test_the_kept_help_is_typers_own() -> None:
    assert typer_help() == TOP_LEVEL_HELP, "stale: python tests/cli/test_help_text.py --write"


def test_help_and_version_answer_without_loading_the_commands(tmp_path: Path) -> None:
    code = (
        "import sys; sys.argv = ['topodoctor', '--help']; import atexit, os\n"
        "from topodoctor import cli\n"
        "os._exit = lambda c: (print('typer' in sys.modules, 'topodoctor.cli.commands' in sys.modules), sys.exit(c))\n"
        "cli.run()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert out.returncode == 0 and out.stdout.endswith("False False\n"), out.stdout + out.stderr
    ver = subprocess.run(
        [sys.executable, "-m", "topodoctor", "--version"], capture_output=True, text=True, cwd=tmp_path, timeout=30
    )
    assert ver.returncode == 0 and ver.stdout.startswith("topodoctor "), ver.stderr


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    body = "".join(f"    {line!r}\n" for line in typer_help().splitlines(keepends=True))
    TARGET.write_text(
        '"""The top-level help, as typer renders it (tests/cli/test_help_text.py keeps it current)."""\n\n'
        f"TOP_LEVEL_HELP = (\n{body})\n"
    )


def test_a_missing_dependency_is_one_line_and_exit_3(tmp_path: Path) -> None:
    """An install without typer (a broken venv, a bare python3): one line, "could not check", never a
    traceback a prolog would paste into a drain reason."""
    code = (
        "import sys; sys.modules['typer'] = None; sys.argv = ['topodoctor', 'check', '--level', 'static']\n"
        "from topodoctor import cli\ncli.run()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert (
        out.returncode == 3
        and out.stderr == "topodoctor: error: typer is not installed (pip install topodoctor installs it)\n"
    )
