"""Findings with a memory: a fingerprint per finding that survives line shifts, and a later
review of the same pull request that does not post a finding already posted there."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from service.app.retention import sweep
from service.engine.base import EngineRequest, EngineResult, Finding
from service.model.fingerprint import fingerprint, pointed_at
from service.publish import compose
from service.publish.memory import posted, repeated_line, without_repeats
from tests.bench import bench_repeats
from tests.publisher_rig import (
    ANCHORED,
    UNANCHORED,
    Rig,
    publication,
    publisher_rig,  # noqa: F401 - the `rig` fixture
)
from tests.worker_helpers import Sim, worker_sim

__all__ = ["worker_sim"]  # the ``sim`` fixture

CODE = "def load(path):\n    data = open(path).read()\n    return parse(data)\n"


# -- the fingerprint (pure) ------------------------------------------------------------------


# -- what a review does not repeat (pure) ------------------------------------------------------

def test_findings_already_posted_are_held_back_and_counted() -> None:
    a, b = replace(ANCHORED, fingerprint="a" * 32), replace(UNANCHORED, fingerprint="b" * 32)
    pub = without_repeats(publication(findings=(a, b)), frozenset({"a" * 32}))
    assert pub.findings == (b,) and pub.repeated == 1
    assert repeated_line(pub) == ("1 finding this review found was raised earlier on this "
                                  "pull request, on code that has not changed since, and not "
                                  "repeated.")
    body = compose.review(pub, (), pub.findings, phrase="@claude").body
    assert "raised earlier" in body
    fresh = publication(findings=(a, b))
    assert without_repeats(fresh, frozenset()) is fresh
    assert posted(fresh, (a,), (77,)) == (
        posted(fresh, (a,), (77,))[0], posted(fresh, (), ())[1])
    assert [p.comment_id for p in posted(fresh, (a,), (77,))] == [77, None]


# -- through the worker: fingerprints from the commit ------------------------------------------

@pytest.mark.anyio
async def test_the_worker_fingerprints_each_finding_from_the_head(sim: Sim) -> None:
    pr = sim.open_pr({"src/io.py": CODE})

    def answer(request: EngineRequest) -> EngineResult:
        f = Finding(path="src/io.py", line=2, side="RIGHT", start_line=None, severity="major",
                    category="correctness", title="Unclosed file", body="Use a with block.")
        return replace(sim.engine.completed(request), findings=(f,))

    sim.engine.answer = answer
    key = sim.enqueue_opened(pr)
    await sim.runner()(sim.claim())
    (run,) = [r for r in sim.publisher.runs if r.dedupe_key == key]
    (found,) = run.findings
    assert found.fingerprint == fingerprint("src/io.py", "correctness",
                                            pointed_at(CODE, 2, 2))


# -- through the publisher: posted once per pull request ---------------------------------------

@pytest.mark.anyio
async def test_a_later_review_does_not_post_a_finding_again(rig: Rig) -> None:
    pr = rig.add_pull()
    marked = replace(ANCHORED, fingerprint="a" * 32)
    other = replace(UNANCHORED, fingerprint="b" * 32)
    first = rig.record(rig.ask(pr), findings=(marked,))
    await rig.publisher().publish_key(first.dedupe_key)
    assert len(rig.inline(pr)) == 1
    rows = rig.rows("posted_findings")
    assert [(r["fingerprint"], r["severity"], r["state"]) for r in rows] == [
        ("a" * 32, "major", "open")]
    assert rows[0]["comment_id"] == rig.inline(pr)[0].id
    # The same finding (its code unchanged) and a new one, on the next review.
    second = rig.record(rig.ask(pr), findings=(marked, other))
    await rig.publisher().publish_key(second.dedupe_key)
    assert len(rig.inline(pr)) == 1  # nothing new inline: the repeat is held back
    latest = rig.reviews(pr)[-1]
    assert "raised earlier on this pull request" in latest.body
    assert other.title in latest.body and marked.title not in latest.body
    assert {r["fingerprint"] for r in rig.rows("posted_findings")} == {"a" * 32, "b" * 32}
    check = rig.row("checks", "dedupe_key = ?", second.dedupe_key)
    assert check["title"] == "Reviewed: 1 minor"


@pytest.mark.anyio
async def test_the_memory_outlives_the_retention_purge(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), findings=(replace(ANCHORED, fingerprint="a" * 32),))
    await rig.publisher().publish_key(run.dedupe_key)
    with rig.store.transaction() as conn:
        conn.execute("INSERT INTO closed_pull_requests (repo, pr_number, merged, closed_at)"
                     " VALUES (?, ?, 1, ?)", (run.claim.job.repo, pr.number,
                                               "2026-11-02T09:00:00.000000+00:00"))
    assert sweep(rig.store, now=rig.now(), delay=timedelta(0)) == 1
    assert rig.run_row(run.dedupe_key)["content_purged_at"] is not None
    assert len(rig.rows("posted_findings")) == 1


@pytest.mark.anyio
async def test_pushes_that_move_the_code_post_each_finding_once(tmp_path: Path) -> None:
    """The real worker and publisher, three heads, the same two findings each time at
    lines that move with every push: two inline comments in all, not six."""
    figures = await bench_repeats.run(heads=3, findings=2, tmp=tmp_path)
    assert figures["reviews_posted"] == 3
    assert figures["inline_comments_posted"] == figures["distinct_findings"] == 2
