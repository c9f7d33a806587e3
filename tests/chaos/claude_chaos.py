"""A ``claude`` for chaos runs: the fake CLI with a random duration and a logged usage.

``engine.command`` is ``<python> tests/chaos/claude_chaos.py --plan PLAN.json``; the
engine appends the real CLI's flags and writes the prompt on stdin, as it does for the
real ``claude``. Each invocation:

1. reads the prompt, and finds the trigger it serves from the ``[chaos:owner/name#N]``
   tag the chaos driver puts in every pull request title (and whether it is a review or
   a description, from the answer the prompt asks for);
2. draws a duration and a token count from the plan's ranges (``hang`` in the plan
   makes the run sleep far past any wall clock instead);
3. appends ``{"trigger", "tokens", "seconds", "pid", "empty_prompt", "at"}`` to the
   plan's usage log —
   before any output, so every run that may have spent is on record: the ledger must
   charge at least this much for it, whether the run reported its result or was killed
   (a run whose ``serve`` died before writing the prompt gets none, and the CLI refuses
   an empty prompt before spending anything: it logs 0 tokens);
4. writes a one-call scenario and ``exec``s the fake ``claude`` (tests/fake_claude)
   with it, the prompt on stdin again: it prints real stream-json, sleeps for the
   duration between its first message and its result, and reports exactly ``tokens``
   in ``modelUsage``.

stdlib only: it runs under the engine's scrubbed environment.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TAG = re.compile(r"\[chaos:([A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+#\d+)\]")
FAKE = Path(__file__).resolve().parents[1] / "fake_claude" / "claude"


def plan_path(argv: list[str]) -> tuple[Path, list[str]]:
    if "--plan" not in argv or argv.index("--plan") + 1 >= len(argv):
        sys.stderr.write("claude_chaos: --plan FILE is required\n")
        sys.exit(2)
    i = argv.index("--plan")
    return Path(argv[i + 1]), argv[:i] + argv[i + 2:]


def answer(describe: bool) -> str:
    if describe:
        value: dict[str, Any] = {"title": "A chaos change", "summary": "Adds a module.",
                                 "changes": ["adds one module"]}
    else:
        value = {"summary": "Adds a small module.", "risk": "low", "findings": []}
    return "```json\n" + json.dumps(value) + "\n```"


def scenario(tokens: int, seconds: float, describe: bool) -> list[dict[str, Any]]:
    # Split the count over the fields the engine sums (input + output + cache read +
    # cache creation); the assistant message carries a part, the result the total.
    output = max(1, tokens // 10)
    cache_read = tokens // 2
    inputs = tokens - output - cache_read
    text = answer(describe)
    return [
        {"init": {}},
        {"assistant": {"text": "Reading the change.",
                       "usage": {"input_tokens": 1, "output_tokens": 1}}},
        {"sleep": seconds},
        {"assistant": {"text": text, "usage": {"input_tokens": 1, "output_tokens": 1}}},
        {"result": {"result": text, "total_cost_usd": round(tokens * 3e-6, 6),
                    "modelUsage": {"claude-sonnet-4-5": {
                        "inputTokens": inputs, "outputTokens": output,
                        "cacheReadInputTokens": cache_read, "cacheCreationInputTokens": 0,
                        "costUSD": round(tokens * 3e-6, 6)}}}},
    ]


def main() -> None:
    path, argv = plan_path(sys.argv[1:])
    plan = json.loads(path.read_text())
    prompt = sys.stdin.buffer.read()
    text = prompt.decode("utf-8", "replace")
    found = TAG.search(text)
    trigger = found.group(1) if found else None
    describe = "the list of changes" in text
    rng = random.Random()
    hang = trigger is not None and trigger in plan.get("hang", [])
    seconds = 3600.0 if hang else rng.uniform(plan["min_seconds"], plan["max_seconds"])
    # An empty prompt (its serve was killed before writing it) is refused by the CLI
    # before any model call: it spends nothing.
    tokens = rng.randint(plan["min_tokens"], plan["max_tokens"]) if text.strip() else 0
    with open(plan["usage_log"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"trigger": trigger, "describe": describe, "tokens": tokens,
                              "seconds": round(seconds, 3), "pid": os.getpid(),
                              "empty_prompt": not text.strip(), "at": time.time()}) + "\n")
    scratch = Path(tempfile.mkdtemp(prefix="call-", dir=plan["scratch"]))
    scenario_file = scratch / "scenario.json"
    scenario_file.write_text(json.dumps({"record_dir": str(scratch),
                                         "calls": [{"steps": scenario(tokens, seconds,
                                                                      describe)}]}))
    stdin_copy = scratch / "stdin"
    stdin_copy.write_bytes(prompt)
    fd = os.open(stdin_copy, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    os.execv(sys.executable, [sys.executable, str(FAKE), "--scenario", str(scenario_file),
                              *argv])


if __name__ == "__main__":
    main()
