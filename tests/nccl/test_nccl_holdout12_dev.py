"""The twelfth blind sets (fixtures/nccl-logs/holdout12, holdout12b, holdout12c), scored once and now development
sets: a completion error printed without the peer's address, a torch built without NCCL, a title that says the run
hangs above NCCL's own lines."""

from __future__ import annotations

from conftest import FIXTURES

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

LOGS = FIXTURES / "nccl-logs"


def _explain(path: str, *replace: tuple[str, str]) -> list[Finding]:
    text = (LOGS / path).read_text()
    for old, new in replace:
        text = text.replace(old, new)
    return explain([parse_file(path, text)])


def test_a_completion_error_without_the_peers_address() -> None:
    lead = _explain("holdout12/h12-012.log")[0]  # "Got completion from peer with error 4" (NCCL 2.18.5, RoCE)
    assert lead.code == "TD066" and "status 4" in lead.message and "ACS" in lead.fix
    with_peer = _explain("holdout12/h12-012.log", ("from peer with", "from peer 10.0.0.3<4711> with"))[0]
    assert with_peer.code == "TD066"


def test_a_torch_built_without_nccl() -> None:
    lead = _explain("holdout12b/h12b-002.log")[0]  # Windows: "Distributed package doesn't have NCCL built in"
    assert lead.code == "TD096" and "gloo" in lead.fix and "without NCCL" in lead.message


def test_a_hang_in_the_title_above_ncclS_own_lines() -> None:
    lead = _explain("holdout12b/h12b-007.log")[0]  # '"accelerate test" hangs after initialization'
    assert lead.code == "TD959" and lead.severity == "error"
    # the same title over lines that are not NCCL's says nothing of NCCL
    other = "\n".join(['"accelerate test" hangs after initialization and then timeouts', "loading the model ..."])
    assert not explain([parse_file("post.log", other + "\n")])
