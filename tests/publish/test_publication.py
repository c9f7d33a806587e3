"""One recorded run as the publisher posts it, built from its three rows: the run, its
queue row and its settled ledger row — each of the last two may be gone."""

from __future__ import annotations

from service.engine.base import Description
from service.publish.publication import build, kind_of
from service.publish.run_content import encode_description, encode_findings
from tests.publisher_rig import ANCHORED

RUN = {"dedupe_key": "mention:acme/widgets:7:123", "repo": "acme/widgets", "pr_number": 7,
       "head_sha": "a" * 40, "outcome": "completed", "findings": encode_findings([ANCHORED]),
       "assessment": None, "description": None, "omitted": None, "publish_attempts": 2,
       "fixed": None}
QUEUE = {"kind": "mention", "command": "review", "comment_id": 123,
         "comment_source": "issue"}
LEDGER = {"used_tokens": 4321, "reserved_tokens": 60_000, "usage_confidence": "exact",
          "engine": "claude_code", "model": "m", "mode": "mention_only",
          "stop_reason": "completed", "reviewed_since": None, "cost_usd": 0.25,
          "earlier_tokens": 60_000}


def test_the_three_rows_make_one_publication() -> None:
    publication = build(RUN, QUEUE, LEDGER)
    assert (publication.kind, publication.command, publication.comment_id) == (
        "mention", "review", 123)
    assert publication.is_mention and not publication.is_describe
    assert publication.findings == (ANCHORED,) and publication.attempts == 2
    account = publication.account
    assert (account.tokens, account.reserved, account.earlier_tokens) == (4321, 60_000, 60_000)
    assert account.cost_usd == 0.25
    assert account.reduced  # admitted on a rung that reviews correctness and security only


def test_without_its_queue_and_ledger_rows_the_run_still_says_what_it_was() -> None:
    described = {**RUN, "dedupe_key": "pr_opened:acme/widgets:7:" + "a" * 40,
                 "description": encode_description(Description("T", "S", ("c",)))}
    publication = build(described, None, None)
    assert publication.kind == kind_of(described["dedupe_key"]) == "pr_opened"
    assert publication.command == "describe" and publication.is_describe
    assert publication.comment_id is None
    assert (publication.account.tokens, publication.account.reserved) == (None, 0)
    assert publication.account.mode == "full" and not publication.account.reduced
