"""The default engine: the Claude Code CLI in headless mode (``claude -p``).

One review is one ``claude -p`` process in the worktree, prompt on stdin, events read
as ``stream-json``. The flags make it read-only (``--tools Read,Grep,Glob``, the write,
shell, network and sub-agent tools disallowed) and confine those tools to the worktree:
the allow rules are path-scoped (``Read(./**)``), because a bare tool name pre-approves
the tool on *every* path, and ``--permission-mode dontAsk`` denies whatever no rule
allows. The CLI loads none of the checkout's own configuration (no MCP servers,
``--setting-sources user``: a pull request can add ``.mcp.json`` or
``.claude/settings.json`` with hooks), and the environment is scrubbed to an allowlist
that never includes a GitHub credential.

That is the first wall. The second does not trust the CLI: each run gets a throwaway
HOME, and is started confined by the kernel (``sandbox``) to the worktree, that HOME and
the CLI's own install, so the App's key, the config and the store cannot be opened even
if the CLI's permission checks were wrong. The run is bounded by the wall clock (the
process group is killed → ``timeout``) and by the run's token cap, checked against the
per-message usage as it streams (killed → ``truncated``).

An answer that does not match the schema gets one repair attempt: a *fresh* short
``claude -p`` call given the bad answer, the problem and the schema (not ``--resume``:
re-sending the whole review context would cost far more than re-formatting, and a fresh
call needs no session persistence). Its usage is added to the run's.

A run is not started when its first call alone cannot fit: the CLI's own system prompt
and tools (``CLI_OVERHEAD_TOKENS``) and the review prompt, with room for an answer, must
fit the run's tokens and the model's window, because the CLI cannot be stopped inside a
call and would otherwise end charged above its reservation.
"""

from __future__ import annotations

import json
import logging
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import anyio

from service.budget.usage import Usage
from service.engine import windows
from service.engine.base import (
    EngineRequest,
    EngineResult,
    Sizing,
    combine_usage,
    estimate_tokens,
    no_usage,
    unknown_usage,
)
from service.engine.confine import CANNOT_CONFINE, CANNOT_EXECUTE, MARK
from service.engine.findings import Answer, InvalidAnswer, parse_answer_text
from service.engine.process import ProcessOutcome, Verdict, run_process
from service.engine.prompt import build_prompt, repair_prompt, system_rules
from service.engine.sandbox import Sandbox, install_roots
from service.engine.sizing import MIN_ANSWER_TOKENS
from service.engine.stream_json import StreamState
from service.engine.stream_verdict import Abort, Outcome, classify

log = logging.getLogger(__name__)

READ_ONLY_TOOLS: Final = ("Read", "Grep", "Glob")
#: Each read-only tool allowed beneath the working directory (the worktree) only. A rule
#: that is a bare tool name would match the tool on any path: never add one.
SCOPED_ALLOW_RULES: Final = tuple(f"{tool}(./**)" for tool in READ_ONLY_TOOLS)
#: Every one a tool of Claude Code 2.1.x: the CLI warns, on every run, about a rule naming
#: a tool it does not have (``MultiEdit`` is gone).
DISALLOWED_TOOLS: Final = ("Bash", "Edit", "Write", "NotebookEdit", "WebFetch", "WebSearch",
                           "Task", "Agent")
#: The variables the child may inherit, besides LC_* and the configured credentials.
ENV_ALLOWLIST: Final = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR")
#: Subscription OAuth only by default: a stray ANTHROPIC_API_KEY would silently move
#: billing to an API key (the CLI prefers it in -p mode), so it must be opted into.
DEFAULT_CREDENTIAL_ENV: Final = ("CLAUDE_CODE_OAUTH_TOKEN",)
#: Set in the child whatever the operator's environment holds: without them the CLI makes
#: calls beside the review (a title-generation call to the model carrying the start of
#: the prompt — the pull request —, telemetry, update checks, error reports).
QUIET_ENV: Final = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
_FORBIDDEN_PREFIXES: Final = ("GH_", "GITHUB_")
REPAIR_MAX_TURNS: Final = 3  # 2.x spends a turn before the model replies; leave room
#: Each API call's output is capped (``CLAUDE_CODE_MAX_OUTPUT_TOKENS``) at a quarter of
#: the call's allowance, within these bounds: the CLI prints nothing until a content block
#: closes, so this is what bounds how far one block can carry a run past its cap.
TURN_OUTPUT_MIN: Final = 4_096
TURN_OUTPUT_MAX: Final = 32_000
MIN_REPAIR_SECONDS: Final = 5.0
#: What every API call of the CLI carries before our prompt: its system prompt and the
#: definitions of the tools it may use (docs/ENGINE.md: 15–30K measured; the read-only
#: tool set sits at the low end, and this errs high).
CLI_OVERHEAD_TOKENS: Final = 20_000
MAX_LINE_BYTES: Final = 8 * 1024 * 1024


def turn_output_limit(allowance: int) -> int:
    """The output cap of each API call of a run allowed ``allowance`` tokens."""
    return max(TURN_OUTPUT_MIN, min(TURN_OUTPUT_MAX, allowance // 4))


def is_forbidden_env(name: str) -> bool:
    """GitHub credentials (and anything GitHub-scoped) never reach the engine."""
    upper = name.upper()
    return upper.startswith(_FORBIDDEN_PREFIXES) or upper in ("GH_TOKEN", "GITHUB_TOKEN")


def scrubbed_environment(environ: Mapping[str, str],
                         credential_env: Sequence[str]) -> dict[str, str]:
    """The child's whole environment: the allowlist, LC_*, and the named credentials."""
    allowed = set(ENV_ALLOWLIST) | {n for n in credential_env if not is_forbidden_env(n)}
    return {
        name: value for name, value in environ.items()
        if (name in allowed or name.startswith("LC_")) and not is_forbidden_env(name)
    }


def claude_argv(command: Sequence[str], *, max_turns: int, model: str | None,
                rules: str) -> list[str]:
    """The full argv of one headless run (the prompt goes on stdin, never in argv)."""
    argv = [*command, "-p", "--output-format", "stream-json", "--verbose",
            "--max-turns", str(max_turns)]
    if model:
        argv += ["--model", model]
    argv += [
        "--tools", ",".join(READ_ONLY_TOOLS),
        "--allowedTools", ",".join(SCOPED_ALLOW_RULES),
        "--disallowedTools", ",".join(DISALLOWED_TOOLS),
        "--permission-mode", "dontAsk",
        "--strict-mcp-config", "--mcp-config", json.dumps({"mcpServers": {}}),
        "--setting-sources", "user",
        "--append-system-prompt", rules,
    ]
    return argv


@dataclass(frozen=True)
class _Spent:
    """Usage and reported dollar cost accumulated over the run's calls."""

    usage: Usage
    cost: float | None

    @classmethod
    def of(cls, outcome: Outcome, engine: str, model: str | None) -> _Spent:
        return cls(Usage(tokens=outcome.tokens, confidence=outcome.confidence,
                         engine=engine, model=outcome.model or model), outcome.cost_usd)

    def plus(self, other: _Spent) -> _Spent:
        cost = None if self.cost is None and other.cost is None else (
            (self.cost or 0.0) + (other.cost or 0.0))
        return _Spent(combine_usage(self.usage, other.usage), cost)


class ClaudeCodeEngine:
    """``claude -p`` as an ``Engine``. ``command`` is split like a shell would (no shell
    runs), so a wrapper with arguments works: ``"/opt/bin/claude"`` or ``"npx claude"``."""

    name = "claude_code"

    def __init__(
        self,
        *,
        command: str | Sequence[str] = "claude",
        model: str | None = None,
        environ: Mapping[str, str],
        credential_env: Sequence[str] = DEFAULT_CREDENTIAL_ENV,
        kill_grace_seconds: float = 5.0,
        result_grace_seconds: float = 10.0,
        max_line_bytes: int = MAX_LINE_BYTES,
        sandbox: Sandbox | None = None,
        clock: Callable[[], datetime] | None = None,
        context_tokens: int = 0,
        overhead_tokens: int = CLI_OVERHEAD_TOKENS,
    ) -> None:
        self._command = shlex.split(command) if isinstance(command, str) else list(command)
        if not self._command:
            raise ValueError("engine.command must name the claude executable")
        bad = [n for n in credential_env if is_forbidden_env(n)]
        if bad:
            raise ValueError(f"engine.credential_env may not name a GitHub variable: {bad[0]}")
        self._model = model
        self._env = scrubbed_environment(environ, credential_env)
        self._kill_grace = kill_grace_seconds
        self._result_grace = result_grace_seconds
        self._max_line_bytes = max_line_bytes
        self._clock = clock or (lambda: datetime.now(UTC))
        self._sandbox = sandbox or Sandbox()
        self._overhead = overhead_tokens
        self._window = (windows.configured(context_tokens) or windows.from_table(model)
                        or windows.Window(windows.CLAUDE_DEFAULT_WINDOW,
                                          "the window of Claude's models"))

    @property
    def sandbox(self) -> Sandbox:
        """How this engine's children are confined."""
        return self._sandbox

    def install_roots(self) -> tuple[str, ...]:
        """The directories the configured command needs to run (see ``sandbox``)."""
        return install_roots(self._command[0], self._env.get("PATH"))

    async def window(self) -> windows.Window:
        """``engine.context_tokens``, else the model's published window (a Claude
        model's when none is configured)."""
        return self._window

    async def sizing(self, reservation: int) -> Sizing:
        return Sizing(window=self._window, answer_tokens=turn_output_limit(reservation),
                      overhead_tokens=self._overhead, bytes_per_token=4.0)

    async def price(self, request: EngineRequest) -> int:
        """The first call's input: the CLI's overhead, our rules and the prompt (4
        characters a token: nothing counts before the CLI sends)."""
        return self._overhead + estimate_tokens(
            system_rules(request.command, request.mode, can_read_files=True),
            build_prompt(request))

    async def _first_call_problem(self, request: EngineRequest) -> tuple[str, bool] | None:
        """Why the first call cannot fit the run or the window (and whether it is the
        window), or None when it can: its input and the smallest answer worth asking for
        (``MIN_ANSWER_TOKENS``, as the HTTP engines)."""
        first = await self.price(request)
        window = self._window.tokens
        said = (f"not started: the first call alone would send about {first:,} tokens (the "
                f"CLI's own {self._overhead:,} included)")
        if window is not None and first + MIN_ANSWER_TOKENS > window:
            return f"{said}, over the model's context window of {window:,}", True
        if first + MIN_ANSWER_TOKENS > request.max_run_tokens:
            return f"{said}, over the run's {request.max_run_tokens:,}", False
        return None

    async def run(self, request: EngineRequest) -> EngineResult:
        """Review or describe ``request``; every outcome is a result (see module doc)."""
        try:
            result = await self._run(request)
        except Exception:
            # A bug in this adapter must still end in a settled run; what was spent is
            # unknown, so the whole reservation stays charged.
            log.exception("engine adapter failed", extra={**request.log_extra,
                                                          "engine": self.name})
            result = EngineResult(usage=unknown_usage(self.name, self._model),
                                  stop_reason="engine_error",
                                  detail="internal error in the claude_code adapter")
        log.info(
            "engine run finished: %s", result.stop_reason,
            extra={**request.log_extra, "engine": self.name, "stop_reason": result.stop_reason,
                   "tokens": result.usage.tokens, "confidence": result.usage.confidence,
                   "cost_usd": result.cost_usd, "detail": result.detail},
        )
        return result

    async def _run(self, request: EngineRequest) -> EngineResult:
        if shutil.which(self._command[0], path=self._env.get("PATH")) is None:
            return EngineResult(usage=no_usage(self.name, self._model),
                                stop_reason="engine_unavailable",
                                detail=f"{self._command[0]!r} was not found or is not executable")
        if not request.workdir.is_dir():
            return EngineResult(usage=no_usage(self.name, self._model),
                                stop_reason="infrastructure", detail="the worktree is missing")
        problem = await self._first_call_problem(request)
        if problem is not None:
            return EngineResult(usage=no_usage(self.name, self._model), stop_reason="refused",
                                detail=problem[0], over_window=problem[1])
        try:
            home = self._sandbox.make_home()
        except OSError as exc:  # a full or read-only disk: nothing ran, nothing was spent
            return EngineResult(usage=no_usage(self.name, self._model),
                                stop_reason="infrastructure",
                                detail=f"the engine's HOME could not be made: {exc.strerror}")
        try:
            return await self._review(request, home)
        finally:
            self._sandbox.remove_home(home)

    async def _review(self, request: EngineRequest, home: Path) -> EngineResult:
        started = anyio.current_time()
        rules = system_rules(request.command, request.mode, can_read_files=True)
        first = await self._call(request, build_prompt(request), home=home, rules=rules,
                                 max_turns=request.max_turns,
                                 timeout=request.wall_clock_seconds,
                                 token_cap=request.max_run_tokens)
        if isinstance(first, EngineResult):
            return first
        spent = _Spent.of(first, self.name, self._model)
        if first.stop_reason != "completed" or first.answer is None:
            return self._result(spent, first, first.stop_reason, first.detail)
        try:
            return self._result(spent, first, "completed", "", answer=parse_answer_text(
                request.command, request.mode, first.answer))
        except InvalidAnswer as exc:
            problem = str(exc)
        log.info("invalid answer, one repair attempt: %s", problem,
                 extra={**request.log_extra, "engine": self.name})
        left_seconds = request.wall_clock_seconds - (anyio.current_time() - started)
        left_tokens = request.max_run_tokens - (spent.usage.tokens or 0)
        if (left_seconds < MIN_REPAIR_SECONDS or spent.usage.tokens is None
                or left_tokens <= 0):
            return self._result(spent, first, "engine_error",
                                f"invalid answer ({problem}); no time or tokens left to repair")
        second = await self._call(
            request, repair_prompt(request.command, request.mode, first.answer, problem),
            home=home, rules=rules, max_turns=REPAIR_MAX_TURNS, timeout=left_seconds,
            token_cap=left_tokens)
        if isinstance(second, EngineResult):  # cannot start now: keep the first call's usage
            return self._result(spent, first, "engine_error", f"repair failed: {second.detail}")
        spent = spent.plus(_Spent.of(second, self.name, self._model))
        if second.stop_reason != "completed" or second.answer is None:
            return self._result(spent, second, second.stop_reason,
                                f"repair attempt: {second.detail}")
        try:
            answer = parse_answer_text(request.command, request.mode, second.answer)
        except InvalidAnswer as again:
            return self._result(spent, second, "engine_error",
                                f"invalid answer after one repair: {again}")
        return self._result(spent, second, "completed", "repaired once", answer=answer)

    async def _call(self, request: EngineRequest, prompt: str, *, home: Path, rules: str,
                    max_turns: int, timeout: float, token_cap: int) -> Outcome | EngineResult:
        state = StreamState(now=self._clock())

        def on_line(line: bytes) -> Verdict:
            state.feed(line)
            # A rejected key is retried for minutes by the CLI: nothing it will do can work.
            if state.running_tokens > token_cap or state.auth_failure:
                return Verdict.STOP
            return Verdict.WIND_DOWN if state.terminal else Verdict.CONTINUE

        argv = self._sandbox.wrap(
            claude_argv(self._command, max_turns=max_turns, model=self._model, rules=rules),
            roots=self.install_roots(), worktree=request.workdir, home=home)
        # The run's own HOME: the service's ~/.claude (settings, CLAUDE.md, credentials)
        # is never read, and whatever the CLI writes there is deleted with the run.
        turn_output = turn_output_limit(token_cap)
        env = {**self._env, **QUIET_ENV, "HOME": str(home), "TMPDIR": str(home / "tmp"),
               "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(turn_output)}
        try:
            ended = await run_process(
                argv, stdin=prompt.encode("utf-8", errors="replace"), cwd=request.workdir,
                env=env, timeout=timeout, on_line=on_line, kill_grace=self._kill_grace,
                wind_down=self._result_grace, max_line_bytes=self._max_line_bytes)
        except OSError as exc:  # not executable, vanished, exec format error
            return EngineResult(usage=no_usage(self.name, self._model),
                                stop_reason="engine_unavailable",
                                detail=f"claude could not be started: {type(exc).__name__}")
        unconfined = _launcher_failure(ended)
        if unconfined is not None:
            return EngineResult(usage=no_usage(self.name, self._model),
                                stop_reason="engine_unavailable", detail=unconfined)
        aborted: Abort | None = None
        if ended.killed == "stopped" and state.auth_failure:
            aborted = None  # classify() reports the credentials, at no cost
        elif ended.killed == "stopped" and state.running_tokens > token_cap:
            aborted = "tokens"
        elif ended.killed is not None and state.result is None:
            # Killed at the deadline (or after a rejected plan limit went quiet): with a
            # plan limit on record, classify() reports usage_limit instead of timeout.
            aborted = "timeout"
        # Ended before its result, the run may also have paid for the block it was in:
        # at most one call's output cap.
        outcome = classify(state, exit_code=ended.exit_code, aborted=aborted,
                           stderr_tail=ended.stderr_tail, unseen_output=turn_output)
        if ended.oversized_lines:
            log.warning("skipped %d over-long output lines", ended.oversized_lines,
                        extra={**request.log_extra, "engine": self.name})
        return outcome

    def _result(self, spent: _Spent, last: Outcome, stop_reason: str, detail: str,
                answer: Answer | None = None) -> EngineResult:
        return EngineResult(
            usage=spent.usage, stop_reason=stop_reason,
            findings=answer.findings if answer else (),
            assessment=answer.assessment if answer else None,
            description=answer.description if answer else None,
            answer=answer.answer if answer else None,
            fixed=answer.fixed if answer else (), cost_usd=spent.cost,
            usage_limit_resets_at=last.resets_at if stop_reason == "usage_limit" else None,
            detail=detail, session_id=last.session_id, turns=last.turns,
        )


def _launcher_failure(ended: ProcessOutcome) -> str | None:
    """The launcher's own refusal (it could not confine, or not exec): nothing ran."""
    if ended.exit_code not in (CANNOT_CONFINE, CANNOT_EXECUTE):
        return None
    for line in ended.stderr_tail.splitlines():
        if line.startswith(MARK):
            return line.removeprefix(MARK).strip()
    return None
