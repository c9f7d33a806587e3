"""Running a run's parts within its one reservation, and merging what they found
(``parts``): a part never given more than the run has left for it, a failed part's
files named, one overview."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from service.budget.usage import Usage
from service.engine.base import (
    Assessment,
    Description,
    EngineRequest,
    EngineResult,
    Finding,
    Sizing,
)
from service.engine.windows import Window
from service.review.calls import CallPlan
from service.review.diff import FileDiff
from service.review.packing import Packing
from service.review.parts import merge, run_parts


def file(name: str) -> FileDiff:
    return FileDiff(name, None, "M", f"diff --git a/{name} b/{name}\n@@ -0,0 +1 @@\n+x\n")


def finding(path: str, title: str = "Check this") -> Finding:
    return Finding(path=path, line=1, side="RIGHT", start_line=None, severity="minor",
                   category="correctness", title=title, body="Because.")


def done(tokens: int | None, *findings: Finding, risk: str = "low",
         stop: str = "completed", over: bool = False) -> EngineResult:
    usage = (Usage(tokens=tokens, confidence="exact", engine="e", model="m")
             if tokens is not None else Usage(tokens=None, confidence="unavailable",
                                              engine="e", model="m"))
    return EngineResult(usage=usage, stop_reason=stop, findings=findings,
                        assessment=Assessment(f"{risk} part", risk)  # type: ignore[arg-type]
                        if stop == "completed" else None, over_window=over)


class Scripted:
    name = "scripted"

    def __init__(self, answers: list[Callable[[EngineRequest], EngineResult]]) -> None:
        self.answers = answers
        self.requests: list[EngineRequest] = []

    async def run(self, request: EngineRequest) -> EngineResult:
        self.requests.append(request)
        return self.answers[len(self.requests) - 1](request)

    async def sizing(self, reservation: int) -> Sizing:
        return Sizing(Window(None, "test"), 1_000)

    async def price(self, request: EngineRequest) -> int:
        return 100


def planned(parts: int, price: int = 2_000, answer: int = 1_000) -> CallPlan:
    packing = Packing(tuple((file(f"p{i}.py"),) for i in range(parts)), ())
    return CallPlan(packing, (price,) * parts, answer, parts * (price + answer))


def make(tmp_path: Path, calls: CallPlan):  # type: ignore[no-untyped-def]
    def request(index: int, tokens: int, seconds: float) -> EngineRequest:
        part = calls.packing.parts[index]
        return EngineRequest(
            command="review", workdir=tmp_path, diff=part[0].text,
            changed_paths=(part[0].path,), title="t", body="", guidelines=None,
            base_sha="a" * 40, head_sha="b" * 40, reviewed_since=None, mode="full",
            max_turns=1, wall_clock_seconds=seconds, max_run_tokens=tokens,
            part=calls.label(index))
    return request


@pytest.mark.anyio
async def test_each_part_gets_what_is_left_less_what_the_later_parts_need(
        tmp_path: Path) -> None:
    calls = planned(3)
    engine = Scripted([lambda r: done(2_500, finding("p0.py")),
                       lambda r: done(1_500, finding("p1.py")),
                       lambda r: done(2_000, finding("p2.py"))])
    ran = await run_parts(engine, calls, make(tmp_path, calls), reserved=9_000,
                          wall_clock_seconds=60.0, grace_seconds=1.0, extra={})
    allowances = [r.max_run_tokens for r in engine.requests]
    assert allowances == [9_000 - 2 * 3_000, 9_000 - 2_500 - 3_000, 9_000 - 4_000]
    assert [r.part for r in engine.requests] == ["part 1 of 3", "part 2 of 3", "part 3 of 3"]
    assert [f.path for f in ran.read] == ["p0.py", "p1.py", "p2.py"] and ran.unread == ()
    assert ran.result.stop_reason == "completed"
    assert ran.result.usage.tokens == 6_000
    assert [f.path for f in ran.result.findings] == ["p0.py", "p1.py", "p2.py"]


@pytest.mark.anyio
async def test_a_failed_part_leaves_its_files_named_and_the_rest_reviewed(
        tmp_path: Path) -> None:
    calls = planned(3)
    engine = Scripted([lambda r: done(2_000, finding("p0.py")),
                       lambda r: done(0, stop="refused", over=True),
                       lambda r: done(1_000, stop="timeout")])
    ran = await run_parts(engine, calls, make(tmp_path, calls), reserved=9_000,
                          wall_clock_seconds=60.0, grace_seconds=1.0, extra={})
    assert [f.path for f in ran.read] == ["p0.py"]
    assert [(o.path, o.reason) for o in ran.unread] == [("p1.py", "over_window"),
                                                        ("p2.py", "not_reviewed")]
    assert ran.result.stop_reason == "completed" and ran.result.usage.tokens == 3_000


@pytest.mark.anyio
async def test_a_part_whose_spend_is_unknown_ends_the_run_there(tmp_path: Path) -> None:
    calls = planned(3)
    engine = Scripted([lambda r: done(None)])
    ran = await run_parts(engine, calls, make(tmp_path, calls), reserved=9_000,
                          wall_clock_seconds=60.0, grace_seconds=1.0, extra={})
    assert len(engine.requests) == 1
    assert [o.reason for o in ran.unread] == ["max_run_tokens", "max_run_tokens"] or \
        [o.reason for o in ran.unread] == ["not_reviewed", "not_reviewed"]
    assert ran.result.usage.tokens is None


@pytest.mark.anyio
async def test_a_plan_limit_in_any_part_decides_the_run(tmp_path: Path) -> None:
    calls = planned(2)
    engine = Scripted([lambda r: done(2_000, finding("p0.py")),
                       lambda r: done(10, stop="usage_limit")])
    ran = await run_parts(engine, calls, make(tmp_path, calls), reserved=9_000,
                          wall_clock_seconds=60.0, grace_seconds=1.0, extra={})
    assert ran.result.stop_reason == "usage_limit" and ran.result.usage.tokens == 2_010


def test_the_merge_keeps_a_finding_two_parts_made_once_and_the_highest_risk() -> None:
    merged = merge("e", [done(10, finding("a.py"), risk="low"),
                         done(20, finding("a.py", " check  THIS"), finding("b.py"),
                              risk="high")])
    assert [f.path for f in merged.findings] == ["a.py", "b.py"]
    assert merged.assessment == Assessment("low part\n\nhigh part", "high")
    assert merged.usage.tokens == 30


def test_descriptions_merge_into_one() -> None:
    usage = Usage(tokens=1, confidence="exact", engine="e", model="m")
    first = EngineResult(usage=usage, stop_reason="completed",
                         description=Description("Title", "First half.", ("one",)))
    second = EngineResult(usage=usage, stop_reason="completed",
                          description=Description("Other", "Second half.", ("two",)))
    assert merge("e", [first, second]).description == Description(
        "Title", "First half.\n\nSecond half.", ("one", "two"))


def test_nothing_run_is_refused_at_no_cost() -> None:
    merged = merge("e", [])
    assert merged.stop_reason == "refused" and merged.usage.tokens == 0
