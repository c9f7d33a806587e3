"""What a trigger's check runs should show, written in the caller's transaction: a worker
starting (and a run left open on an older head answered there), an ending, an ending
decided without a head closing every open run, a description under its own name — and
nothing at all with check runs off; on both backends."""

from __future__ import annotations

from datetime import UTC, datetime

from service.config.posting import ChecksConfig
from service.publish.checks import text
from service.publish.checks.marks import CheckMarks, check_name
from service.storage import checks
from service.storage.checks import CheckState
from service.storage.database import Database

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
KEY = "mention:acme/widgets:5:9"
OLD, NEW = "a" * 40, "b" * 40
DONE = CheckState("completed", "Reviewed: no findings", "Nothing to report.", "success")


def _shown(db: Database) -> dict[str, tuple[str, str]]:
    with db.read() as tx:
        return {row.target.head_sha: (row.state.status, row.state.title)
                for row in checks.rows(tx, KEY)}


def test_a_start_answers_the_run_left_on_an_older_head_and_an_end_closes_them_all(
        database: Database) -> None:
    marks = CheckMarks(ChecksConfig)
    old = marks.target(KEY, "review", "acme/widgets", 5, OLD)
    new = marks.target(KEY, "review", "acme/widgets", 5, NEW)
    with database.transaction() as tx:
        marks.show(tx, old, text.queued("review"), NOW)
    with database.transaction() as tx:
        marks.start(tx, new, attempt=2, now=NOW)
    answered = ("completed", f"Answered on the newer head {NEW[:7]}")
    assert _shown(database) == {NEW: ("in_progress", f"Reviewing {NEW[:7]} (attempt 2)"),
                                OLD: answered}
    with database.transaction() as tx:
        marks.end(tx, new, DONE, NOW)
    assert _shown(database) == {NEW: ("completed", "Reviewed: no findings"), OLD: answered}


def test_an_ending_decided_without_a_head_closes_every_open_run(database: Database) -> None:
    marks = CheckMarks(ChecksConfig)
    with database.transaction() as tx:
        for head in (OLD, NEW):
            marks.show(tx, marks.target(KEY, "review", "acme/widgets", 5, head),
                       text.queued("review"), NOW)
    with database.transaction() as tx:
        marks.end_open(tx, KEY, DONE, NOW)
    assert set(_shown(database).values()) == {("completed", "Reviewed: no findings")}


def test_with_check_runs_off_nothing_is_written(database: Database) -> None:
    marks = CheckMarks(lambda: ChecksConfig(enabled=False))
    target = marks.target(KEY, "review", "acme/widgets", 5, NEW)
    with database.transaction() as tx:
        marks.show(tx, target, text.queued("review"), NOW)
        marks.start(tx, target, attempt=1, now=NOW)
        marks.end(tx, target, DONE, NOW)
        marks.end_open(tx, KEY, DONE, NOW)
    assert _shown(database) == {}


def test_a_description_has_a_name_of_its_own_and_the_config_is_read_at_each_use() -> None:
    config = [ChecksConfig(name="ci/review")]
    marks = CheckMarks(lambda: config[0])
    assert check_name(config[0], "describe") == "ci/review (describe)"
    assert marks.target(KEY, "describe", "o/r", 5, NEW).name == "ci/review (describe)"
    config[0] = ChecksConfig(name="ci/review", fail_on="major", enabled=False)
    assert (marks.enabled, marks.fail_on) == (False, "major")
