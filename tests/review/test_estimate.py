"""The pre-flight estimate: fitted on the ledger, never negative, defaults until it can."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from service.review.estimate import Estimator, fit, load_estimator
from tests.kit.stores import new_sqlite_store

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)



def test_fit_recovers_a_line_and_is_not_fitted_until_it_can() -> None:
    exact = [(x, 12 * x + 3000) for x in range(50, 550, 50)]
    est = fit(exact)
    assert est.fitted and est.samples == 10
    assert est.per_line == pytest.approx(12.0) and est.base == pytest.approx(3000.0)
    assert est.tokens(1000) == 15_000
    assert not fit(exact[:9]).fitted  # too few rows: priced from the prompt alone
    assert fit(exact[:9]) == Estimator()
    assert not fit([(100, 5000)] * 12).fitted  # one size: no slope to tell
    custom = Estimator(per_line=1.0, base=5.0)
    assert fit([], custom) is custom


def test_fit_never_goes_negative() -> None:
    falling = [(x, 10_000 - x) for x in range(100, 1100, 100)]
    est = fit(falling)
    assert est.per_line == 0.0 and est.base == pytest.approx(9450.0)
    steep = [(x, 20 * x - 500) for x in range(100, 1100, 100)]
    est = fit(steep)
    assert est.base == 0.0 and est.per_line > 0
    with pytest.raises(ValueError, match="negative"):
        Estimator(per_line=-1.0)
    with pytest.raises(ValueError, match="lines"):
        Estimator().tokens(-1)


def test_load_estimator_fits_this_engine_s_completed_exact_runs(tmp_path: Path) -> None:
    with new_sqlite_store(tmp_path / "state.db") as store:
        rows: list[tuple[Any, ...]] = []
        for i in range(12):
            lines = 100 * (i + 1)
            rows.append((f"k{i}", "claude_code", "completed", "exact", lines, 8 * lines + 1000))
        rows += [  # none of these may enter the fit
            ("t", "claude_code", "truncated", "exact", 50, 90_000),
            ("u", "claude_code", "completed", "unavailable", 50, 90_000),
            ("o", "anthropic", "completed", "exact", 50, 90_000),
            ("n", "claude_code", "completed", "exact", None, 90_000),
        ]
        with store.transaction() as conn:
            for key, engine, reason, confidence, lines, used in rows:
                conn.execute(
                    "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens,"
                    " used_tokens, usage_confidence, engine, reserved_at, settled_at,"
                    " reviewed_lines, stop_reason) VALUES (?, 'o', 1, 'full', 60000, ?, ?, ?,"
                    " '2026-05-01T09:00:00.000000+00:00', '2026-05-01T09:05:00.000000+00:00',"
                    " ?, ?)", (key, used, confidence, engine, lines, reason))
        with store.read() as conn:
            est = load_estimator(conn, "claude_code")
            other = load_estimator(conn, "openai_compatible")
    assert est.samples == 12
    assert est.per_line == pytest.approx(8.0) and est.base == pytest.approx(1000.0)
    assert not other.fitted
