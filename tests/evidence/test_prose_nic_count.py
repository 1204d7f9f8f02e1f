"""How many NICs a post says a node has, as people write it ("8x CX-7", "8 x ConnectX-7", "4x HDR NICs").

The count sets the inter-node expectation: one NIC taken for eight undercounts the node eightfold.
"""

import pytest

from topodoctor.evidence.prose_words import nic_of


@pytest.mark.parametrize(
    ("text", "count"),
    [
        # the header line of a post on a Dell XE9680 (nccl-tests issue 309): the NICs in shorthand after the GPUs
        ("Server: Dell HGX XE9680 with 8xH100 and 8x CX-7 IB 400Gbps", 8),
        ("2 nodes, 8 x ConnectX-7 NDR", 8),
        ("nodes with 4x HDR NICs", 4),
        # the GPUs' count is never the NICs'
        ("8x H100 with 2x CX-7", 2),
        ("8xH100 with IB 400Gbps", None),
    ],
)
def test_nic_count_as_written(text: str, count: int | None) -> None:
    assert nic_of(text, [])[2] == count
