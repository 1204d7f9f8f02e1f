"""Regenerate the pictures under docs/img from the bundled recordings and derived fixtures.

    python docs/img/make.py           # write them
    python docs/img/make.py --check   # exit 1 if any committed picture differs (CI: tests/report/test_draw.py)

PNGs come from resvg (the ``draw`` extra) with the fonts bundled in topodoctor/report/fonts, so
the bytes are the same on every machine. Findings come from the rules with an empty process
environment, so nothing of the machine that draws leaks into the pictures.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from topodoctor.probe.sources import probe_host  # noqa: E402
from topodoctor.report.draw import draw_topology  # noqa: E402
from topodoctor.report.svg import render_png  # noqa: E402
from topodoctor.rules import Context, Environment, evaluate  # noqa: E402

OUT = ROOT / "docs" / "img"
# picture name -> recording name or derived fixture
PICTURES = {
    "h200-x4": "h200-x4",
    "hgx-8gpu-2socket": "fixtures/derived/hgx-8gpu-2socket.json",
    "pcie-2socket-acs": "fixtures/derived/pcie-2socket-acs.json",
    "x4-pcie-fallback": "fixtures/derived/x4-pcie-fallback.json",
}
# heatmap picture name -> bandwidth result
HEATMAPS = {"h200-x4-bandwidth": "fixtures/bandwidth/derived/slow-link.json"}
QUIET = Environment({}, {}, {}, (), None)
# The PNGs are byte-exact for this renderer; another version may anti-alias differently.
RENDERER = "resvg-py 0.5.0"


def picture(source: str) -> str:
    src = str(ROOT / source) if source.endswith(".json") else source
    snap = probe_host(src).snapshot
    # The pictured hosts were recorded before the fitness calls: the note that says so is left
    # out, so each picture shows what the rules found on the host.
    found = [f for f in evaluate(Context(snap, QUIET)).findings if f.evidence.get("error") != "NOT_RECORDED"]
    return draw_topology(snap, found)


def heatmap(source: str) -> str:
    from topodoctor.model.copies import load_result
    from topodoctor.report.heatmap import draw_heatmap
    from topodoctor.service.copies import bandwidth_findings

    result = load_result(ROOT / source)
    return draw_heatmap(result, bandwidth_findings(result))


def main(check: bool, png: bool = True) -> int:
    """Write (or with ``check`` compare) the SVGs, and the PNGs unless ``png`` is False."""
    stale = []
    jobs = [(name, picture, source) for name, source in PICTURES.items()]
    jobs += [(name, heatmap, source) for name, source in HEATMAPS.items()]
    for name, make, source in jobs:
        svg = make(source)
        files = [(OUT / f"{name}.svg", svg.encode())]
        if png:
            files.append((OUT / f"{name}.png", render_png(svg)))
        for path, data in files:
            if check:
                if not path.exists() or path.read_bytes() != data:
                    stale.append(path.name)
            else:
                path.write_bytes(data)
    if stale:
        print(f"stale pictures (run python docs/img/make.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from topodoctor.report.svg import png_renderer

    if png_renderer() != RENDERER:
        sys.exit(f"docs/img/make.py: the pictures are made with {RENDERER}; this environment has {png_renderer()}")
    sys.exit(main("--check" in sys.argv[1:]))
