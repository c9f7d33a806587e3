"""Noise: inline comments posted across successive reviews of one pull request.

    python -m tests.bench.bench_repeats [--heads 5] [--findings 3]

One pull request, reviewed on ``--heads`` successive heads (each push adds lines above the
code, so every finding's line number moves), by a scripted engine that answers the same
``--findings`` findings every time, anchored to the same code wherever it now is. The real
worker (checkout, diff, fingerprints) and the real publisher post to the simulator. Without
a memory each review would post every finding again (heads × findings comments); with it,
the inline comments across all the reviews equal the distinct findings. The last line is
the figures as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from service.budget.usage import Usage
from service.config.posting import PublishConfig
from service.engine.base import Assessment, EngineRequest, EngineResult, Finding
from service.publish.github import GitHubPublisher
from service.review.installations import Installations
from tests.simulator import push_to_pull
from tests.worker_helpers import REPO, build_sim, close_sim

#: The code the findings point at; each push puts more lines above it.
SNIPPETS = ("data = open(path).read()", "query = 'SELECT * FROM t WHERE id = ' + key",
            "except Exception: pass", "password = 'hunter2'", "eval(user_input)")


def source(pushes: int) -> str:
    header = "".join(f"# change {n}\n" for n in range(pushes))
    body = "".join(f"def f{i}(path, key, user_input):\n    {code}\n    return None\n\n"
                   for i, code in enumerate(SNIPPETS))
    return header + body


def scripted(count: int) -> Any:
    """An engine answer: the same ``count`` findings, at wherever their code is now."""
    def answer(request: EngineRequest) -> EngineResult:
        lines = (request.workdir / "src/store.py").read_text().splitlines()
        findings = tuple(
            Finding(path="src/store.py", line=lines.index(f"    {code}") + 1, side="RIGHT",
                    start_line=None, severity="major", category="security",
                    title=f"Finding {i}", body=f"About `{code}`.")
            for i, code in enumerate(SNIPPETS[:count]))
        return EngineResult(usage=Usage(tokens=1234, confidence="exact", engine="fake",
                                         model="fake-1"),
                            stop_reason="completed", findings=findings,
                            assessment=Assessment("Same findings again.", "medium"))
    return answer


async def run(heads: int, findings: int, tmp: Path) -> dict[str, Any]:
    sim = build_sim(tmp)
    try:
        installations = Installations(sim.store, sim.github)
        sim.publisher = GitHubPublisher(  # type: ignore[assignment]
            store=sim.store, github=sim.github, installations=installations,
            clock=sim.world.clock.now, config=PublishConfig, mention="@claude")
        sim.engine.answer = scripted(findings)
        pr = sim.open_pr({"src/store.py": source(0)})
        head = pr.head.head_sha
        for n in range(heads):
            if n:
                head = push_to_pull(sim.world, REPO, pr.number, sim.git,
                                    {"src/store.py": source(n)}).head_sha
            sim.enqueue_opened(pr, head=head)
            await sim.runner()(sim.claim())
            sim.world.clock.advance(60)
        inline = [c for c in sim.world.review_comments.values()
                  if c.pull_number == pr.number]
        reviews = [r for r in sim.world.reviews.values() if r.pull_number == pr.number]
        return {"heads": heads, "findings_per_review": findings,
                "findings_answered": heads * findings, "distinct_findings": findings,
                "reviews_posted": len(reviews), "inline_comments_posted": len(inline)}
    finally:
        await close_sim(sim)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--heads", type=int, default=5)
    parser.add_argument("--findings", type=int, default=3, choices=range(1, len(SNIPPETS) + 1))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        figures = asyncio.run(run(args.heads, args.findings, Path(tmp)))
    print(f"{figures['heads']} reviews of one pull request, {figures['findings_per_review']} "
          f"findings answered each ({figures['findings_answered']} in all, "
          f"{figures['distinct_findings']} distinct)")
    print(f"reviews posted: {figures['reviews_posted']}; inline comments posted: "
          f"{figures['inline_comments_posted']}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
