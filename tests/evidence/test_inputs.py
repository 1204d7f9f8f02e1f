"""One input cut into pieces by content: several kinds in one paste, each with its line range, and
inputs of no kind it reads."""

from __future__ import annotations

from evidence_support import EVIDENCE, ROOT, kinds

from topodoctor.evidence.inputs import join, read_input


def test_a_paste_of_four_tools_one_after_another() -> None:
    parts = [
        (EVIDENCE / "smi-summary-a100-driver535-cut.txt").read_text(),
        "some words the reporter wrote between the outputs\n",
        (EVIDENCE / "topo-h100-nv6-nics.txt").read_text(),
        (EVIDENCE / "nccl-tests-2.4-v100-two-nodes.txt").read_text(),
        (EVIDENCE / "xid-journal-h100.txt").read_text(),
    ]
    text = "\n".join(parts)
    got = read_input("issue.txt", text)
    assert kinds(got) == ["smi-summary", "topo-matrix", "command-line", "nccl-tests", "nccl-log", "kernel-xid"]
    lines = text.splitlines()
    topo = got.pieces[1]
    assert lines[topo.first_line - 1].split()[:2] == ["GPU0", "GPU1"]
    assert lines[topo.last_line - 1].strip().startswith("PXB")
    # every part names the piece it came from
    ev = join([got])
    assert {g.piece for g in ev.gpus} >= {0, 1, 3}
    assert all(ev.pieces[x.piece].kind == "kernel-xid" for x in ev.xids)


def test_piece_indexes_run_on_across_inputs() -> None:
    a = read_input("a", (EVIDENCE / "topo-h100-nv6-nics.txt").read_text())
    b = read_input("b", (EVIDENCE / "xid-journal-h100.txt").read_text(), first_piece=len(a.pieces))
    ev = join([a, b])
    assert [p.source for p in ev.pieces] == ["a", "b"] and {x.piece for x in ev.xids} == {1}


def test_text_of_no_known_kind_and_binary_data() -> None:
    config = read_input("pyproject.toml", (ROOT / "pyproject.toml").read_text())
    assert config.unreadable == "pyproject.toml: holds no kind of text diagnose reads" and not config.pieces
    assert read_input("core", "\x00\x01ELF").unreadable == "core: binary data, not text"
    assert read_input("-", " \n\n").unreadable == "-: empty"
    other = read_input("x.json", '{"hello": 1}')
    assert other.unreadable == "x.json: JSON of no kind diagnose reads"


def test_nccl_tests_json_is_told_by_its_shape() -> None:
    path = ROOT / "fixtures" / "nccl-tests" / "h200-x2" / "all_reduce.json"
    got = read_input(path.name, path.read_text())
    assert kinds(got) == ["nccl-tests"]
    run = got.parts[0].collectives[0]
    assert run.op == "all_reduce" and len(run.rows) == 14
    text = read_input("t", path.with_suffix(".txt").read_text()).parts[0].collectives[0]
    assert (run.nccl_version, run.avg_busbw_gbps, run.out_of_bounds) == (text.nccl_version, 80.626275, 0)
    assert text.avg_busbw_gbps == 80.6263 and run.nccl_version == "2.28.3"
    assert ("NCCL_NVLS_ENABLE", "0") in [(s.name, s.value) for s in got.parts[0].settings]


def test_launcher_tags_are_taken_off_every_line() -> None:
    text = (EVIDENCE / "topo-h100-nv6-nics.txt").read_text()
    tagged = "\n".join(f"[1,0]<stdout>:{line}" for line in text.splitlines())
    assert read_input("t", tagged).parts[0].pairs == read_input("t", text).parts[0].pairs


def test_a_tools_header_without_its_body_does_not_swallow_what_follows() -> None:
    topo = (EVIDENCE / "topo-h100-nv6-nics.txt").read_text()
    for head in (
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n",
        "nvbandwidth Version: v0.8\n",
        "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n",
        "GPU 00000000:3B:00.0\n    Product Name                          : Tesla V100-PCIE-32GB\n",
        "3b:00.0 3D controller: NVIDIA Corporation GV100GL [Tesla V100 PCIe 32GB] (rev a1)\n\tSubsystem: NVIDIA\n",
    ):
        got = read_input("paste", head + topo)
        assert kinds(got)[-1] == "topo-matrix", head
        assert got.pieces[-1].first_line == head.count("\n") + 1


def test_the_evidence_of_every_fixture_survives_a_json_round_trip() -> None:
    import json

    from topodoctor.core import codec
    from topodoctor.model.evidence import Evidence

    reads = []
    for path in sorted(p for p in EVIDENCE.rglob("*") if p.is_file() and p.suffix != ".md"):
        reads.append(read_input(path.name, path.read_text(), sum(len(r.pieces) for r in reads)))
    ev = join(reads)
    assert len(ev.pieces) > 60 and ev.copies and ev.collectives and ev.pairs and ev.pcie and ev.xids and ev.graphs
    back = codec.from_jsonable(Evidence, json.loads(json.dumps(codec.to_jsonable(ev))), "evidence")
    assert back == ev
    assert all(0 <= part.piece < len(ev.pieces) for part in (*ev.gpus, *ev.pairs, *ev.copies, *ev.settings))
