"""The GIDs a user pastes beside a log (Mellanox's show_gids table, ibv_devinfo -v's GID lines, a
sentence naming a GID index with its RoCE version) read as signs, and the GID index a log shows forced
judged by them: a link-local or RoCE v1 entry narrows an IB completion error 12 to the GID index, a
RoCE v2 IPv4 entry rules it out. The table is show_gids' layout (DEV PORT INDEX GID IPv4 VER DEV), the
WARN net_ib.cc's ncclIbTest format of 2.19 - 2.28."""

from __future__ import annotations

import pytest

from topodoctor.nccl.explain import explain
from topodoctor.nccl.gid_lines import listed_gids
from topodoctor.nccl.parse import parse_file

H = "roce-a:3301:3377 [0]"
SHOW_GIDS = """DEV     PORT    INDEX   GID                                     IPv4            VER     DEV
---     ----    -----   ---                                     ------------    ---     ---
mlx5_0  1       0       fe80:0000:0000:0000:ba59:9fff:fe1f:7f3c                 v1      ens1f0
mlx5_0  1       1       fe80:0000:0000:0000:ba59:9fff:fe1f:7f3c                 v2      ens1f0
mlx5_0  1       2       0000:0000:0000:0000:0000:ffff:0a00:0001 10.0.0.1        v1      ens1f0
mlx5_0  1       3       0000:0000:0000:0000:0000:ffff:0a00:0001 10.0.0.1        v2      ens1f0
"""
FAILED = (
    f"{H} transport/net_ib.cc:1480 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<43521> with error 12, "
    f"opcode 0, len 0, vendor err 129 (Recv)\n{H} NCCL INFO transport/net.cc:1200 -> 6 [Proxy Thread]\n"
)


def _index(n: int) -> str:
    return f"{H} NCCL INFO NCCL_IB_GID_INDEX set by environment to {n}.\n"


@pytest.mark.parametrize(
    ("text", "values"),
    [
        (
            SHOW_GIDS,
            [
                "0 fe80::ba59:9fff:fe1f:7f3c v1",
                "1 fe80::ba59:9fff:fe1f:7f3c v2",
                "2 ::ffff:10.0.0.1 v1",
                "3 ::ffff:10.0.0.1 v2",
            ],
        ),
        (
            "\t\t\tGID[  3]:\t\t::ffff:10.0.1.2, RoCE v2\n\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0ac0:ebff:fe4a:9d3a\n",
            ["3 ::ffff:10.0.1.2 v2", "0 fe80::ac0:ebff:fe4a:9d3a -"],
        ),
        (
            "On both nodes the GID index 3 is RoCE v2 and gid index 0 is the link-local one.\n",
            ["3 - v2", "0 link-local -"],
        ),
    ],
)
def test_pasted_gid_tables_and_sentences_are_read(text: str, values: list[str]) -> None:
    assert [s.value for s in listed_gids(text.splitlines())] == values


def test_a_forced_index_listed_as_link_local_narrows_to_the_gid_index() -> None:
    (lead, *_) = explain([parse_file("r.log", SHOW_GIDS + _index(0) + FAILED)])
    assert lead.code == "TD045" and lead.evidence["cause"]["confidence"] == "shown by the log"
    assert "the GID index in use, 0, is listed as fe80::ba59:9fff:fe1f:7f3c, RoCE v1" in str(
        lead.evidence["narrowed_by"]
    )


@pytest.mark.parametrize("listing", [SHOW_GIDS, "We set the GID index 3, which is RoCE v2 on every host.\n"])
def test_a_forced_index_listed_as_roce_v2_rules_the_gid_index_out(listing: str) -> None:
    (lead, *_) = explain([parse_file("r.log", listing + _index(3) + FAILED)])
    assert lead.evidence["cause"]["confidence"] == "candidates"
    assert not str(lead.evidence["candidates"][0]).startswith("the GID index")
    (alone, *_) = explain([parse_file("r.log", _index(3) + FAILED)])  # no listing: the GID index may be it
    assert any(str(c).startswith("the GID index") for c in alone.evidence["candidates"])
