"""The text scan's child (service/probing.py ``probe_scan_text``): it probes, checks the snapshot
and sets out what the text shows, and what its parent draws from that is what the scan printed
from the snapshot itself."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from topodoctor.core.budget import Budget
from topodoctor.core.errors import TopodoctorError
from topodoctor.probe.sources import probe_host
from topodoctor.report.scan import print_scan
from topodoctor.report.scan_text import print_scan_text
from topodoctor.report.terminal import make_console
from topodoctor.service import early, probing
from topodoctor.service.passes import Source
from topodoctor.topology.view import HostView

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ["h100-x1", "h200-x2", "h200-x4", str(ROOT / "fixtures" / "derived" / "x4-gpu-lost.json")]


def _drawn(draw: object, width: int) -> str:
    buf = io.StringIO()
    draw(make_console(buf, width))  # type: ignore[operator]
    return buf.getvalue()


@pytest.mark.parametrize("host", HOSTS, ids=lambda h: Path(h).stem)
@pytest.mark.parametrize("timeout", [30.0, 0.0], ids=["child", "in-process"])
def test_the_childs_text_draws_as_the_snapshot_does(host: str, timeout: float) -> None:
    text = probing.probe_scan_text(Source(host, "/", True), Budget.start(timeout))
    p = probe_host(host, topology_only=True)
    for width in (80, 150):
        expected = _drawn(lambda c: print_scan(p.snapshot, p.origin, HostView(p.snapshot).graph, c), width)
        assert _drawn(lambda c: print_scan_text(text, c), width) == expected


def test_the_early_child_of_a_text_scan_is_the_text_scans() -> None:
    """A plain text scan's early child sets the text out; the text scan adopts it, and a probe
    that wants the Host never takes it for one."""
    source = Source("h200-x2", "/", True)
    early.start(source)
    started = early._early
    assert started is not None
    text = probing.probe_scan_text(source, Budget.start(30))
    assert early._early is None and text["host_title"] == "Host (replay h200-x2)"
    with pytest.raises(ValueError, match="topology-only"):
        probing.probe(source, Budget.start(30))
    with pytest.raises(ValueError, match="topology-only"):
        probing.probe_scan_text(Source("h200-x2"), Budget.start(30))


def test_a_failure_in_the_child_is_the_commands(tmp_path: Path) -> None:
    """The child's error comes back with its message and exit code, as a probe's does."""
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(TopodoctorError) as err:
        probing.probe_scan_text(Source(str(bad), "/", True), Budget.start(30))
    with pytest.raises(TopodoctorError) as direct:
        probing.probe(Source(str(bad)), Budget.start(30))
    assert (str(err.value), err.value.exit_code) == (str(direct.value), direct.value.exit_code)


def test_the_child_sets_the_text_out_without_rich() -> None:
    """rich is the drawing's, in the parent: the child's half of a scan never loads it."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from topodoctor.service import gather\n"
        "from topodoctor.service.passes import Source\n"
        "text = gather.scan_text_of(gather.gather(Source('h200-x4', '/', True), (), 1e9))\n"
        "assert text['gpu_rows'], text\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rich'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr
