"""The summary comment's text (pure): each head's fate, the open findings, the cost, and an
open reservation named apart from what was spent."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from service.publish.summary_text import SUMMARY_MARKER, render, what_happened
from service.storage.summaries import Facts, Head
from tests.publisher_rig import PHRASE

T = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def head(**changes: object) -> Head:
    base = Head(kind="pr_opened", command="review", status="done", head_sha="ab" * 20,
                outcome="completed", publish_outcome="published", stop_reason="completed",
                enqueued_at=T, posted=2)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_answers_are_counted_among_the_runs() -> None:
    facts = Facts(heads=(head(), head(kind="mention", command="ask", posted=0)),
                  tokens=9_000, cost_usd=None, runs=2, open_findings=())
    body = render(facts, phrase=PHRASE)
    assert "| asked (ask) | answered |" in body
    assert "**Cost so far:** 9,000 tokens over 2 run(s), 1 of them answering a question." in body


def test_the_text_says_each_heads_fate_the_open_findings_and_the_cost() -> None:
    facts = Facts(heads=(head(), head(head_sha="cd" * 20, posted=0),
                         head(kind="mention", status="pending", head_sha=None, outcome=None,
                              publish_outcome=None, stop_reason=None),
                         head(status="superseded", outcome=None, publish_outcome=None)),
                  tokens=12_345, cost_usd=0.125, runs=2,
                  open_findings=(("major", 1), ("nit", 3)),
                  overview=("cd" * 20, '{"summary": "Adds a cache. @claude review", '
                                       '"risk": "medium"}'))
    body = render(facts, phrase=PHRASE)
    assert body.splitlines()[0] == SUMMARY_MARKER
    assert "**Risk: medium** (at `cdcdcdc`). Adds a cache." in body
    assert f"{PHRASE} review" not in body  # the model's text cannot trigger the App
    assert "**Open findings:** 1 major · 3 nit" in body
    assert "| `ababab" in body and "reviewed, 2 new finding(s)" in body
    assert "reviewed, nothing new" in body
    assert "| — | asked (review) | waiting (queued or deferred) |" in body
    assert "superseded by a newer head before it was reviewed" in body
    assert "**Cost so far:** 12,345 tokens over 2 run(s) ($0.12 as reported)." in body


@pytest.mark.parametrize(("changes", "said"), [
    ({"status": "abandoned", "outcome": None, "stop_reason": "timeout"},
     "skipped after repeated failures (timeout)"),
    ({"outcome": None, "publish_outcome": None, "stop_reason": "refused"},
     "skipped (its check run says why)"),
    ({"outcome": "failed", "publish_outcome": "refused", "stop_reason": "engine_error"},
     "not reviewed: engine_error"),
    ({"publish_outcome": "superseded"}, "reviewed, but the head moved on before it was posted"),
    ({"publish_outcome": None}, "reviewed, being posted"),
    ({"outcome": "truncated"}, "reviewed (partly), 2 new finding(s)"),
    ({"command": "describe", "kind": "mention"}, "described"),
    ({"command": "ask", "kind": "mention", "posted": 0}, "answered"),
    ({"command": "ask", "kind": "mention", "outcome": "failed", "publish_outcome": "refused",
      "stop_reason": "timeout"}, "not answered: timeout"),
    ({"status": "cancelled", "outcome": None}, "cancelled: the pull request was closed"),
    ({"status": "claimed", "outcome": None}, "being reviewed"),
])
def test_what_happened_to_a_head(changes: dict[str, object], said: str) -> None:
    assert what_happened(head(**changes)) == said


def test_nothing_yet() -> None:
    body = render(Facts(heads=(), tokens=0, cost_usd=None, runs=0, open_findings=()),
                  phrase=PHRASE)
    assert "**Open findings:** none" in body and "**Cost so far:** nothing yet." in body


def test_an_open_reservation_is_named_apart_and_never_counted_as_spent() -> None:
    facts = Facts(heads=(), tokens=49_600, cost_usd=None, runs=2, open_findings=(),
                  in_progress=1, reserved=150_000)
    body = render(facts, phrase=PHRASE)
    assert "**Cost so far:** 49,600 tokens over 2 run(s). In progress: 1 run(s), holding a " \
           "reservation of 150,000 tokens (not spent yet)." in body
    assert "199,600" not in body
