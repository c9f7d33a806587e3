"""Planning a run's calls (``calls.plan``): fitted to the window, priced as the engine
counts, and the estimate that follows — the prompt for the HTTP engines, the fitted rate
for Claude Code once its ledger can say."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from service.engine.base import EngineRequest, EngineResult, Sizing, estimate_tokens
from service.engine.windows import Window
from service.review.calls import plan
from service.review.diff import FileDiff
from service.review.estimate import Estimator
from service.review.pruning import Attributes


class Priced:
    """An engine that only sizes and prices (``run`` is never called here)."""

    name = "priced"

    def __init__(self, window: int | None, *, answer: int = 1_000, overhead: int = 0) -> None:
        self.window, self.answer, self.overhead = window, answer, overhead
        self.priced: list[str | None] = []

    async def run(self, request: EngineRequest) -> EngineResult:
        raise AssertionError("not run")

    async def sizing(self, reservation: int) -> Sizing:
        return Sizing(Window(self.window, "test"), self.answer, self.overhead, 4.0)

    async def price(self, request: EngineRequest) -> int:
        self.priced.append(request.part)
        return self.overhead + 100 + estimate_tokens(request.diff)


def file(name: str, lines: int) -> FileDiff:
    return FileDiff(name, None, "M", f"diff --git a/{name} b/{name}\n@@ -0,0 +1,{lines} @@\n"
                    + "".join(f"+{name} line {i}\n" for i in range(lines)))


def requests(tmp_path: Path, rules: Sequence[tuple[str, str]] = ()):  # type: ignore[no-untyped-def]
    """Each call's request; ``rules`` are ``(path prefix, text)`` that come with a file
    under that prefix (a directory's guidelines), and all of them with ``files=None``."""
    def make(files: Sequence[FileDiff] | None, part: str | None) -> EngineRequest:
        rule_text = "".join(t for prefix, t in rules if files is None
                            or any(f.path.startswith(prefix) for f in files))
        return EngineRequest(
            command="review", workdir=tmp_path,
            diff="".join(f.text for f in files or ()) + rule_text,
            changed_paths=tuple(f.path for f in files or ()), title="t", body="",
            guidelines=None, base_sha="a" * 40, head_sha="b" * 40, reviewed_since=None,
            mode="full", max_turns=1, wall_clock_seconds=1.0, max_run_tokens=1_000_000,
            part=part)
    return make


@pytest.mark.anyio
async def test_a_pull_request_that_fits_is_one_call_priced_from_its_prompt(
        tmp_path: Path) -> None:
    engine = Priced(100_000)
    files = [file("a.py", 50), file("b.py", 50)]
    planned = await plan(engine, files, requests(tmp_path), reserved=30_000,
                         attributes=Attributes(), estimator=Estimator(), lines=104)
    whole = 100 + estimate_tokens("".join(f.text for f in files))
    assert planned.prices == (whole,) and planned.estimate == whole + 1_000
    # What any call costs beside its files is priced as a part (the prompt then says
    # which), then the one call that runs.
    assert planned.label(0) is None and engine.priced == ["part 1 of 2", None]


@pytest.mark.anyio
async def test_a_pull_request_over_the_window_is_split_and_each_part_priced(
        tmp_path: Path) -> None:
    engine = Priced(6_000)
    files = [file(f"f{i}.py", 300) for i in range(8)]
    planned = await plan(engine, files, requests(tmp_path), reserved=100_000,
                         attributes=Attributes(), estimator=Estimator(), lines=2_416)
    count = len(planned.packing.parts)
    assert count > 1 and planned.label(1) == f"part 2 of {count}"
    assert planned.answer == 1_000
    assert all(p + planned.answer <= 6_000 for p in planned.prices)
    assert planned.estimate == sum(planned.prices) + count * 1_000 <= 100_000
    assert engine.priced[1:] == [f"part {i + 1} of {count}" for i in range(count)]


@pytest.mark.anyio
async def test_claude_code_is_priced_by_its_fitted_rate_never_below_its_prompt(
        tmp_path: Path) -> None:
    engine = Priced(200_000, overhead=20_000)
    files = [file("a.py", 100)]
    fitted = Estimator(per_line=50.0, base=30_000.0, samples=12)
    high = await plan(engine, files, requests(tmp_path), reserved=500_000,
                      attributes=Attributes(), estimator=fitted, lines=102)
    assert high.fitted and high.estimate == fitted.tokens(102)
    low = await plan(engine, files, requests(tmp_path), reserved=500_000,
                     attributes=Attributes(), estimator=Estimator(per_line=0.0, base=1.0,
                                                                  samples=12), lines=102)
    assert low.estimate == sum(low.prices) + low.answer  # its first call alone costs more
    unfitted = await plan(engine, files, requests(tmp_path), reserved=500_000,
                          attributes=Attributes(), estimator=Estimator(), lines=102)
    assert not unfitted.fitted and unfitted.estimate == sum(unfitted.prices) + 1_000


@pytest.mark.anyio
async def test_every_part_fits_with_what_its_files_bring(tmp_path: Path) -> None:
    """Directory guidelines and path instructions come with the files they apply to:
    each part is planned against all of them, so no part goes over the window."""
    engine = Priced(6_000)
    files = [file(f"{d}/f{i}.py", 300) for d in ("api", "web") for i in range(4)]
    rules = [("api/", "a" * 3_000), ("web/", "w" * 3_000)]
    planned = await plan(engine, files, requests(tmp_path, rules), reserved=100_000,
                         attributes=Attributes(), estimator=Estimator(), lines=2_416)
    assert len(planned.packing.parts) > 1
    assert all(p + planned.answer <= 6_000 for p in planned.prices)
