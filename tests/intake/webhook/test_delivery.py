"""One delivery (delivery.py): its body parsed or refused, its fields read defensively
(text cut and made valid, ids that fit the store or none), and the answer and recorded
outcome of what it did."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from service.github.payload import PayloadError
from service.intake.ingest import Applied
from service.intake.rules.decisions import Close, Ignore
from service.intake.webhook.delivery import Received, Result, outcome_of, safe_text, sql_id

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def received(payload: object, event: str = "issue_comment") -> Received:
    return Received("d-1", event, json.dumps(payload).encode(), "application/json", T0)


def test_text_is_cut_and_valid_and_ids_fit_the_store() -> None:
    assert safe_text("x" * 300) == "x" * 200 and safe_text(7) is None
    assert safe_text("\udcff ok") == "? ok"  # a lone surrogate cannot be stored
    assert [sql_id(v) for v in (1, 2**63 - 1, 2**63, 0, -4, True, "5")] == [
        1, 2**63 - 1, None, None, None, None, None]


def test_a_parsed_delivery_reads_its_fields_defensively() -> None:
    delivery = received({"action": "created", "comment": {"id": 2**64},
                         "installation": {"id": 42},
                         "repository": {"full_name": "o/r"}, "issue": {"number": 7}}).parse()
    assert (delivery.action, delivery.comment_id, delivery.installation_id) == (
        "created", None, 42)
    fields = delivery.log_fields()
    assert fields["delivery_id"] == "d-1" and fields["repo"] == "o/r" and fields["pr"] == 7


def test_a_body_that_is_not_a_payload_is_a_payload_error() -> None:
    with pytest.raises(PayloadError):
        Received("d-2", "ping", b"[" * 100_000, "application/json", T0).parse()
    with pytest.raises(PayloadError):
        Received("d-3", "ping", b"not json", "application/json", T0).parse()


def test_the_answer_and_the_recorded_outcome_say_what_it_did() -> None:
    assert outcome_of("d", Ignore("draft"), Applied(enqueued=["k"])).outcome == "enqueued"
    again = outcome_of("d", Ignore("draft"), Applied(duplicates=["k"]))
    assert again.outcome == "already_queued" and again.body()["enqueued"] == ["k"]
    closed = outcome_of("d", Close("o/r", 7, merged=True), Applied(cancelled=["a", "b"]))
    assert closed.outcome == "closed:cancelled=2"
    ignored = outcome_of("d", Ignore("draft"), Applied(ignored="draft"))
    assert ignored.outcome == "ignored:draft" and ignored.body() == {
        "delivery": "d", "enqueued": [], "ignored": "draft"}
    assert Result(202, "duplicate", "d").body() == {"duplicate": True}
    assert Result(400, "", "d", error="not JSON").body() == {"error": "not JSON"}
