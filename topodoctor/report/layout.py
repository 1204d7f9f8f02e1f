"""Layered layout of the host tree, lstopo-like but upside down as HGX diagrams are drawn:
NVSwitch on top, then GPUs and NICs in one row, PCIe switches, host bridges, and the NUMA
nodes (CPU sockets) at the bottom. Leaves take fixed slots left to right in tree order; every
inner box spans the leaves below it, so each link is one vertical line from child to parent.
"""

from __future__ import annotations

from dataclasses import dataclass

from topodoctor.topology.hosttree import HostTree, TreeNode

LEAF_W = {"gpu": 118.0, "nic": 100.0}
LEAF_H = 62.0
BOX_H = 40.0
SIBLING_GAP = 14.0  # between leaves under one parent
GROUP_GAP = 30.0  # between leaves of different parents
ROW_GAP = 58.0  # vertical room for a PCIe link and its label
MARGIN = 28.0
PAD = 5.0  # an inner box reaches this far past the boxes it spans
MIN_INNER_W = 196.0


@dataclass
class Box:
    """Where one node of the host tree is drawn: its box's top-left corner, width and height."""

    node: TreeNode
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        """The box's horizontal centre, where its edges attach."""
        return self.x + self.w / 2


@dataclass
class PictureLayout:
    """The placed boxes of a picture, each with its parent, and the picture's width and bottom."""

    boxes: dict[str, Box]  # by TreeNode.key
    parent: dict[str, str]  # child key -> parent key
    leaf_row_y: float
    width: float
    bottom: float  # y below the lowest box


def _depth(node: TreeNode) -> int:
    """Switch levels below (and including) ``node``."""
    below = max((_depth(c) for c in node.children), default=0)
    return below + (1 if node.kind == "switch" else 0)


def layout(tree: HostTree, leaf_row_y: float) -> PictureLayout:
    """Place every node of the tree: leaves in one row at ``leaf_row_y``, switches, host bridges and
    NUMA nodes below them, each centred over its leaves."""
    boxes: dict[str, Box] = {}
    parent: dict[str, str] = {}
    levels = max((_depth(r) for r in tree.roots), default=0)
    switch_top = leaf_row_y + LEAF_H + ROW_GAP
    hostbridge_y = switch_top + levels * (BOX_H + ROW_GAP)
    numa_y = hostbridge_y + BOX_H + ROW_GAP
    x = MARGIN
    last_parent: str | None = None

    def place(node: TreeNode, level_below_hb: int) -> tuple[float, float]:
        nonlocal x, last_parent
        if node.kind in ("gpu", "nic"):
            owner = parent.get(node.key)
            if last_parent is not None:
                x += SIBLING_GAP if owner == last_parent else GROUP_GAP + 2 * PAD * levels
            last_parent = owner
            w = LEAF_W[node.kind]
            boxes[node.key] = Box(node, x, leaf_row_y, w, LEAF_H)
            x += w
            return boxes[node.key].x, x
        spans = []
        for c in node.children:
            parent[c.key] = node.key
            spans.append(place(c, level_below_hb + (1 if node.kind in ("hostbridge", "switch") else 0)))
        if not spans:  # a bridge with nothing we draw below it
            spans = [(x, x + 60.0)]
            x += 60.0
        x0, x1 = min(s[0] for s in spans), max(s[1] for s in spans)
        if x1 - x0 < MIN_INNER_W:  # room for its title: widen to the right and move the cursor past it
            x1 = x0 + MIN_INNER_W
            x = max(x, x1)
        if node.kind == "numa":
            y = numa_y
        elif node.kind == "hostbridge":
            y = hostbridge_y
        else:
            # Switch rows count up from the host bridge: the top switch sits just above it.
            y = hostbridge_y - level_below_hb * (BOX_H + ROW_GAP)
        pad = PAD
        boxes[node.key] = Box(node, x0 - pad, y, x1 - x0 + 2 * pad, BOX_H)
        return x0 - pad, x1 + pad

    for root in tree.roots:
        if last_parent is not None:
            x += GROUP_GAP + 2 * PAD * (levels + 2)
            last_parent = None
        place(root, 0)
    for leaf in tree.unplaced:
        x += GROUP_GAP
        w = LEAF_W[leaf.kind]
        boxes[leaf.key] = Box(leaf, x, leaf_row_y, w, LEAF_H)
        x += w
    bottom = (numa_y + BOX_H) if tree.roots else (leaf_row_y + LEAF_H)
    # Nested boxes reach past their leaves: move everything right so the outermost starts at the margin.
    shift = MARGIN - min((b.x for b in boxes.values()), default=MARGIN)
    for b in boxes.values():
        b.x += shift
    return PictureLayout(boxes, parent, leaf_row_y, x + shift + MARGIN, bottom)
