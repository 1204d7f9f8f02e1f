"""The fifteenth blind set (fixtures/nccl-logs/holdout15), scored once and now a development set: connect retries of
the old form under a post that says the run failed are the failed connection."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

LOGS = FIXTURES / "nccl-logs"


def test_old_connect_retries_under_a_post_that_says_the_run_failed() -> None:
    lead = explained_with(LOGS / "holdout15/h15-001.log")[0]  # fairseq on 2 nodes: "Connection refused, retrying"
    assert lead.code == "TD072" and "as the post says" in lead.message and "Connection refused" in lead.message
    quiet = explained_with(
        LOGS / "holdout15/h15-001.log",
        ("Distributed training error on", "Distributed training on"),
        ("terminated with the following errors", "printed these lines"),
    )
    assert all(f.severity != "error" for f in quiet)  # retries with attempts left, and no word that it failed
