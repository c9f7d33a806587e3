"""Large pull requests against small windows: what is read, in how many calls, at what
price, and whether any call is over the window.

Nine pull requests made from real code — httpx 0.27.0 → 0.28.1 (the sdists, fetched once
from PyPI into ``~/.cache/pr-review-agent/bench-httpx``), the first k added or modified
files of the release applied on top of 0.27.0 — go through the worker's own planning and calls
(``review.calls.plan``, ``review.parts.run_parts``) with the ``openai_compatible`` engine
against a server played in process that behaves as vLLM does: it counts the prompt
(4 bytes a token, about what real tokenizers make of code) and answers 400 "maximum
context length" when prompt + ``max_tokens`` is over its window. For each pull request
and window it prints what one whole call would have done (what the App did before: one
call with ``max_tokens`` 8 192, or nothing when over the window), then the parts, the
files read of the files changed, what was pruned, the pre-flight estimate against what
the server billed, and the calls the server refused (0 is the point).

    python -m tests.bench.bench_large_prs [--windows 16384 32768 131072]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from service.engine.base import EngineRequest
from service.engine.openai_compatible import OpenAICompatibleEngine
from service.engine.sizing import conservative_tokens
from service.review import calls, parts
from service.review.checkout import BareRepo, GitRunner
from service.review.diff import FileDiff, read_diff
from service.review.estimate import Estimator
from service.review.pruning import Attributes
from tests.simulator import GitRepo

CACHE = Path.home() / ".cache" / "pr-review-agent" / "bench-httpx"
VERSIONS = ("0.27.0", "0.28.1")
RESERVATION = 400_000
ANSWER = json.dumps({"summary": "Reviewed.", "risk": "low", "findings": []})


def sources(version: str) -> dict[str, str]:
    archive = CACHE / f"httpx-{version}.tar.gz"
    if not archive.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", f"httpx=={version}",
                        "--no-deps", "--no-binary", ":all:", "-d", str(CACHE)], check=True)
    out: dict[str, str] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            name = member.name.split("/", 1)[1]
            data = tar.extractfile(member)
            if data is not None and name != "PKG-INFO":
                out[name] = data.read().decode("utf-8", "replace")
    return out


class Server:
    """vLLM's behaviour, as far as sizing goes."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.refused = 0
        self.billed = 0
        self.worst = 0.0  # the largest (prompt + max_tokens) / window asked

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/chat/completions"):
            return httpx.Response(404)
        body = json.loads(request.content)
        prompt = math.ceil(len(json.dumps(body["messages"]).encode()) / 4)
        asked = body.get("max_tokens") or body.get("max_completion_tokens") or 0
        self.worst = max(self.worst, (prompt + asked) / self.window)
        if prompt + asked > self.window:
            self.refused += 1
            return httpx.Response(400, json={"object": "error", "message": (
                f"This model's maximum context length is {self.window} tokens. However, "
                f"you requested {prompt + asked} tokens.")})
        out = math.ceil(len(ANSWER) / 4)
        self.billed += prompt + out
        return httpx.Response(200, json={"choices": [{"message": {"content": ANSWER},
                                                      "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": prompt,
                                                   "completion_tokens": out}})


def request(workdir: Path, files: Sequence[FileDiff], part: str | None,
            tokens: int = RESERVATION, seconds: float = 600.0) -> EngineRequest:
    return EngineRequest(
        command="review", workdir=workdir, diff="".join(f.text for f in files),
        changed_paths=tuple(f.path for f in files), title="Release 0.28.1",
        body="Everything between 0.27.0 and 0.28.1.", guidelines=None, base_sha="a" * 40,
        head_sha="b" * 40, reviewed_since=None, mode="full", max_turns=1,
        wall_clock_seconds=seconds, max_run_tokens=tokens, part=part)


async def measure(files: Sequence[FileDiff], window: int, workdir: Path) -> dict[str, Any]:
    server = Server(window)
    engine = OpenAICompatibleEngine(model="bench", api_url="http://127.0.0.1:1/v1",
                                    environ={}, context_tokens=window,
                                    transport=httpx.MockTransport(server))
    whole = conservative_tokens([{"role": "user", "content": "".join(f.text for f in files)}])
    planned = await calls.plan(engine, files, lambda fs, p: request(workdir, fs, p),
                               reserved=RESERVATION, attributes=Attributes(),
                               estimator=Estimator(), lines=sum(f.lines for f in files))
    ran = await parts.run_parts(
        engine, planned, lambda i, tokens, seconds: request(
            workdir, planned.packing.parts[i], planned.label(i), tokens, seconds),
        reserved=RESERVATION, wall_clock_seconds=600.0, grace_seconds=5.0, extra={})
    return {
        "window": window, "before": "fits" if whole + 8_192 <= window else "400: nothing",
        "parts": len(planned.packing.parts), "read": len(ran.read), "files": len(files),
        "unread": len(planned.packing.omitted) + len(ran.unread),
        "pruned": "; ".join(planned.packing.pruned) or "-",
        "estimate": planned.estimate, "billed": server.billed, "refused": server.refused,
        "worst": round(server.worst, 3)}


async def main(windows: Sequence[int]) -> None:
    old, new = (sources(v) for v in VERSIONS)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        git = GitRepo.create(root / "httpx.git")
        base = git.commit(old, branch="main")
        # Added and modified files (the simulator's git writes no deletions).
        changed = sorted(p for p in new if old.get(p) != new[p])
        full = git.commit({p: new[p] for p in changed}, parent=base, branch="all")
        bare = BareRepo(root / "httpx.git", GitRunner())
        every = await read_diff(bare, base, full)
        rows = []
        for count in (1, 2, 4, 6, 10, 15, 25, 35, len(every)):
            files = every[:count]
            lines = sum(f.lines for f in files)
            for window in windows:
                row = await measure(files, window, root)
                rows.append({"lines": lines, **row})
                print(f"{lines:>6} lines {len(files):>3} files  window {window:>7}: before "
                      f"{row['before']:<12} after {row['parts']} part(s), read "
                      f"{row['read']}/{row['files']} files, estimate {row['estimate']:>7} "
                      f"billed {row['billed']:>7}, refused {row['refused']}, worst call "
                      f"{row['worst']:.0%} of the window; pruned: {row['pruned']}")
    print(json.dumps({"bench": "large_prs", "rows": rows}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, nargs="+", default=[16_384, 32_768, 131_072])
    asyncio.run(main(parser.parse_args().windows))
