"""A small SVG writer: shapes and text, every value escaped, output byte-stable.

Pictures are drawn with one font family (DejaVu Sans, bundled under report/fonts) so the
PNG rendering of a picture is the same on every machine; see ``render_png``.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from topodoctor.core.errors import InputError
from topodoctor.core.fileio import write_atomic
from topodoctor.core.text import escape_controls

FONT = "DejaVu Sans"
FONT_DIR = Path(__file__).parent / "fonts"
PNG_ZOOM = 1.5  # docs pictures: sharp on high-density screens, still small files


def _num(v: float) -> str:
    text = f"{v:.1f}"
    return text[:-2] if text.endswith(".0") else text


class Svg:
    """An SVG document built up shape by shape; ``render`` writes it."""

    def __init__(self, width: float, height: float, title: str) -> None:
        self.width, self.height, self.title = width, height, title
        self.parts: list[str] = []

    def _attrs(self, attrs: dict[str, object]) -> str:
        out = []
        for k, v in attrs.items():
            if v is None:
                continue
            value = _num(v) if isinstance(v, float) else escape_controls(str(v))
            out.append(f"{k.rstrip('_').replace('_', '-')}={quoteattr(value)}")
        return " ".join(out)

    def rect(self, x: float, y: float, w: float, h: float, **attrs: object) -> None:
        """Add a rectangle."""
        self.parts.append(f"<rect {self._attrs({'x': x, 'y': y, 'width': w, 'height': h, **attrs})}/>")

    def line(self, x1: float, y1: float, x2: float, y2: float, **attrs: object) -> None:
        """Add a straight line."""
        self.parts.append(f"<line {self._attrs({'x1': x1, 'y1': y1, 'x2': x2, 'y2': y2, **attrs})}/>")

    def path(self, d: str, **attrs: object) -> None:
        """Add a path (``d`` in SVG's path syntax)."""
        self.parts.append(f"<path {self._attrs({'d': d, **attrs})}/>")

    def circle(self, cx: float, cy: float, r: float, **attrs: object) -> None:
        """Add a circle."""
        self.parts.append(f"<circle {self._attrs({'cx': cx, 'cy': cy, 'r': r, **attrs})}/>")

    def text(self, x: float, y: float, text: str, size: float = 12, **attrs: object) -> None:
        """Add a line of text, escaped, at ``size`` pixels."""
        a = self._attrs({"x": x, "y": y, "font_size": float(size), **attrs})
        self.parts.append(f"<text {a}>{escape(escape_controls(text))}</text>")

    def open_group(self, **attrs: object) -> None:
        """Open a group: the shapes until ``close_group`` share its attributes."""
        self.parts.append(f"<g {self._attrs(attrs)}>")

    def close_group(self) -> None:
        """Close the group last opened."""
        self.parts.append("</g>")

    def render(self) -> str:
        """The document as SVG text: white background, title, then the shapes in the order added."""
        w, h = _num(float(self.width)), _num(float(self.height))
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f"font-family={quoteattr(FONT + ', sans-serif')}>"
        )
        title = f"<title>{escape(escape_controls(self.title))}</title>"
        body = [head, title, f'<rect width="{w}" height="{h}" fill="#ffffff"/>']
        return "\n".join([*body, *self.parts, "</svg>"]) + "\n"


def text_width(text: str, size: float) -> float:
    """A close upper estimate of DejaVu Sans text width, for laying out boxes without a font engine."""
    return len(text) * size * 0.62


def fit(text: str, size: float, width: float) -> str:
    """``text`` cut with an ellipsis to fit ``width``."""
    if text_width(text, size) <= width:
        return text
    keep = max(1, int(width / (size * 0.62)) - 1)
    return text[:keep] + "…"


def png_renderer() -> str | None:
    """The PNG renderer's name and version, or None when it is not installed (the ``draw`` extra)."""
    try:
        import resvg_py  # noqa: F401
    except ImportError:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"resvg-py {version('resvg-py')}"
    except PackageNotFoundError:
        return "resvg-py"


def render_png(svg_text: str) -> bytes:
    """SVG text to PNG bytes with resvg, from the bundled fonts only (system fonts would make the
    picture differ from machine to machine)."""
    try:
        import resvg_py
    except ImportError:
        raise InputError(
            "writing PNG needs the resvg renderer: pip install 'topodoctor[draw]' (or write .svg)"
        ) from None
    fonts = sorted(str(p) for p in FONT_DIR.glob("*.ttf"))
    try:
        data = resvg_py.svg_to_bytes(
            svg_string=svg_text,
            skip_system_fonts=True,
            font_files=fonts,
            font_family=FONT,
            sans_serif_family=FONT,
            zoom=PNG_ZOOM,
        )
    except ValueError as exc:
        raise InputError(f"the PNG renderer refused the picture: {exc}") from None
    return bytes(data)


def write_picture(svg_text: str, path: Path) -> str:
    """Write ``svg_text`` to ``path`` as SVG or PNG by extension; returns the format written."""
    suffix = path.suffix.lower()
    if suffix == ".svg":
        write_atomic(path, svg_text, "picture")
        return "svg"
    if suffix == ".png":
        write_atomic(path, render_png(svg_text), "picture")
        return "png"
    raise InputError(f"{path}: pictures are written as .svg or .png, not {suffix or 'no extension'!r}")
