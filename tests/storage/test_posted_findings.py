"""``posted_findings``: every finding posted on a pull request, by fingerprint, and what
became of it (open, declined, resolved)."""

from __future__ import annotations

import pytest

from service.storage import posted_findings
from service.storage.database import Database
from service.storage.posted_findings import DECLINED, OPEN, RESOLVED, PostedFinding
from tests.queue_helpers import T0


def finding(fp: str, comment_id: int | None = None) -> PostedFinding:
    return PostedFinding(fp, "src/a.py", 3, "major", "correctness", comment_id)


def test_a_fingerprint_is_remembered_once_per_pull_request(database: Database) -> None:
    with database.transaction() as tx:
        posted_findings.remember(tx, "o/r", 1, head_sha="a" * 40,
                                 posted=[finding("f1", 11), finding("f2")], now=T0)
        posted_findings.remember(tx, "o/r", 1, head_sha="b" * 40, posted=[finding("f1", 99)],
                                 now=T0)
        posted_findings.remember(tx, "o/r", 2, head_sha="a" * 40, posted=[finding("f9")],
                                 now=T0)
    with database.read() as tx:
        assert posted_findings.fingerprints(tx, "o/r", 1) == {"f1", "f2"}
        (known,) = posted_findings.inline(tx, "o/r", 1)  # only f1 has a thread
    assert (known.comment_id, known.fingerprint, known.state) == (11, "f1", OPEN)


def test_only_an_open_finding_moves_and_a_reply_declines_its_own(database: Database) -> None:
    with database.transaction() as tx:
        posted_findings.remember(tx, "o/r", 1, head_sha="a" * 40,
                                 posted=[finding("f1", 11), finding("f2", 12)], now=T0)
        assert posted_findings.decline_reply(tx, "o/r", 1, 11) == "f1"
        assert posted_findings.decline_reply(tx, "o/r", 1, 11) is None  # already declined
        assert posted_findings.decline_reply(tx, "o/r", 1, 77) is None  # not ours
        assert posted_findings.mark(tx, "o/r", 1, ["f1", "f2"], RESOLVED) == 1
    with database.read() as tx:
        states = {k.fingerprint: k.state for k in posted_findings.inline(tx, "o/r", 1)}
    assert states == {"f1": DECLINED, "f2": RESOLVED}
    with pytest.raises(ValueError, match="cannot be moved"), database.transaction() as tx:
        posted_findings.mark(tx, "o/r", 1, ["f1"], OPEN)
