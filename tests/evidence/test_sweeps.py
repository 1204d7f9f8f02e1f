"""Two-node sweep tables as people post them (one line per pair of nodes and its busbw)."""

from __future__ import annotations

from evidence_support import ROOT, kinds, read

from topodoctor.evidence.inputs import read_input

CASE = ROOT / "fixtures/diagnose/real/pair-sweep-one-slow-node/evidence-1.txt"


def test_comma_joined_pairs_with_comments() -> None:
    """The sweep of NVIDIA/nccl-tests#106 (fixtures/diagnose/real/pair-sweep-one-slow-node): five pairs,
    two with a `# crossing TOR` comment, one with a trailing space."""
    got = read(CASE)
    assert kinds(got) == ["pair-sweep"]
    pairs = got.parts[0].sweeps
    assert [(p.a, p.b, p.busbw_gbps) for p in pairs][:2] == [
        ("se02gn644", "se02gn699", 49.36),
        ("se02gn632", "se02gn641", 88.36),
    ]
    assert [p.note for p in pairs] == ["", "", "crossing TOR", "", "crossing TOR"]
    assert [p.line for p in pairs] == [1, 2, 3, 4, 5]


def test_space_separated_pairs_after_a_header_and_before_other_text() -> None:
    """The same rows with the names apart, under a header line and followed by prose: the table is read as
    far as its rows go."""
    rows = "\n".join(line.replace(",", "   ") for line in CASE.read_text().splitlines())
    text = "pair                    busbw\n" + rows + "\nnode 644 looks slow to me\n"
    got = read_input("sweep.txt", text)
    assert kinds(got) == ["pair-sweep"] and (got.pieces[0].first_line, got.pieces[0].last_line) == (2, 6)
    assert len(got.parts[0].sweeps) == 5


def test_one_line_or_device_tables_are_no_sweep() -> None:
    """One pair alone is too loose a shape; GPU / NIC names are other tools' tables, not nodes."""
    assert not read_input("p", "se02gn644,se02gn699     49.36\n").pieces
    assert not read_input("p", "GPU0 GPU1 12.5\nGPU1 GPU2 12.7\n").pieces
    assert not read_input("p", "node-a node-a 12.5\nnode-b node-b 12.7\n").pieces
