"""Running a child in its own process group: stdin in, bounded lines out, and a clean kill.

The engine's child (``claude``) may start children of its own. It is therefore started
in a new session (``start_new_session``), so that the whole group can be signalled at
once: SIGTERM, a grace period, then SIGKILL. Whatever happens — a normal exit, a hang,
an abort asked for by the line callback, the caller being cancelled — the group is
killed before ``run_process`` returns, so no orphan outlives a run.

stdout is read in chunks and split into lines here; a line longer than
``max_line_bytes`` is counted and skipped rather than buffered, so a child that prints
50 MB (or one endless line) costs bounded memory. stderr keeps only its last few KiB.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import anyio
import anyio.abc

log = logging.getLogger(__name__)

STDERR_TAIL_BYTES: Final = 4096
_CHUNK: Final = 64 * 1024


class Verdict(enum.Enum):
    """What the line callback wants after a line."""

    CONTINUE = "continue"
    WIND_DOWN = "wind_down"  # the child said its last word: give it a short grace to exit
    STOP = "stop"            # kill the group now


@dataclass(frozen=True)
class ProcessOutcome:
    """How the child ended. ``killed`` says why *we* ended it, if we did."""

    exit_code: int | None
    killed: Literal["deadline", "stopped", "wind_down"] | None
    stderr_tail: str
    oversized_lines: int


class _Lines:
    """Splits a byte stream into lines, skipping (and counting) over-long ones."""

    def __init__(self, on_line: Callable[[bytes], Verdict], max_line_bytes: int) -> None:
        self.on_line = on_line
        self.max_line_bytes = max_line_bytes
        self.pending = bytearray()
        self.skipping = False
        self.oversized = 0

    def feed(self, chunk: bytes) -> Verdict:
        verdict = Verdict.CONTINUE
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._keep(chunk[start:])
                return verdict
            piece = chunk[start:end]
            start = end + 1
            if self.skipping:
                self.skipping = False
                continue
            if self.pending:
                self.pending += piece
                piece, self.pending = bytes(self.pending), bytearray()
            if piece.strip():
                got = self.on_line(piece)
                if got is Verdict.STOP:
                    return got
                if got is Verdict.WIND_DOWN:
                    verdict = got

    def finish(self) -> Verdict:
        """The stream ended: a last line without a newline still counts."""
        if self.pending and not self.skipping:
            piece, self.pending = bytes(self.pending), bytearray()
            return self.on_line(piece)
        return Verdict.CONTINUE

    def _keep(self, rest: bytes) -> None:
        if self.skipping or not rest:
            return
        if len(self.pending) + len(rest) > self.max_line_bytes:
            self.oversized += 1
            self.pending = bytearray()
            self.skipping = True
        else:
            self.pending += rest


async def run_process(
    argv: Sequence[str],
    *,
    stdin: bytes,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    on_line: Callable[[bytes], Verdict],
    kill_grace: float,
    wind_down: float,
    max_line_bytes: int,
) -> ProcessOutcome:
    """Run ``argv`` to completion or until ``timeout`` seconds, feeding stdout lines to
    ``on_line``. Raises ``OSError`` only when the child cannot be started at all."""
    proc = await anyio.open_process(
        list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=cwd, env=dict(env), start_new_session=True,
    )
    pgid = proc.pid  # a new session's leader leads its own process group
    lines = _Lines(on_line, max_line_bytes)
    tail = bytearray()
    killed: Literal["deadline", "stopped", "wind_down"] | None = None
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_feed_stdin, proc, stdin)
            tasks.start_soon(_drain_stderr, proc, tail)
            killed = await _read_stdout(proc, lines, timeout, wind_down)
            if killed is None:
                # stdout closed; the child should be exiting. Wait, within the deadline.
                with anyio.move_on_after(max(0.0, kill_grace)):
                    await proc.wait()
            await _kill_group(pgid, proc, kill_grace if killed else 0.0)
            # Pipes close once every holder is dead; never hang on one held by an escapee.
            with anyio.move_on_after(1.0):
                await proc.wait()
            tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _kill_group(pgid, proc, 0.0)
            await proc.aclose()
    return ProcessOutcome(
        exit_code=proc.returncode if killed is None else None,
        killed=killed,
        stderr_tail=tail.decode("utf-8", errors="replace"),
        oversized_lines=lines.oversized,
    )


async def _read_stdout(proc: anyio.abc.Process, lines: _Lines, timeout: float,
                       wind_down: float) -> Literal["deadline", "stopped", "wind_down"] | None:
    assert proc.stdout is not None
    deadline = anyio.current_time() + timeout
    winding = False
    while True:
        remaining = deadline - anyio.current_time()
        if remaining <= 0:
            return "wind_down" if winding else "deadline"
        chunk: bytes | None = None
        with anyio.move_on_after(remaining):
            try:
                chunk = await proc.stdout.receive(_CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return None if lines.finish() is not Verdict.STOP else "stopped"
        if chunk is None:
            continue  # timed out; the loop head reports it
        verdict = lines.feed(chunk)
        if verdict is Verdict.STOP:
            return "stopped"
        if verdict is Verdict.WIND_DOWN and not winding:
            winding = True
            deadline = min(deadline, anyio.current_time() + wind_down)


async def _feed_stdin(proc: anyio.abc.Process, data: bytes) -> None:
    assert proc.stdin is not None
    # A child that exits (or is killed) without reading its stdin closes the pipe.
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await proc.stdin.send(data)
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await proc.stdin.aclose()


async def _drain_stderr(proc: anyio.abc.Process, tail: bytearray) -> None:
    assert proc.stderr is not None
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                             anyio.BrokenResourceError):
        while True:
            tail += await proc.stderr.receive(_CHUNK)
            if len(tail) > STDERR_TAIL_BYTES:
                del tail[: len(tail) - STDERR_TAIL_BYTES]


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Signal the group; False when it no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - the pgid was reused by someone else's group
        log.warning("process group %s is not ours any more", pgid)
        return False
    return True


async def _kill_group(pgid: int, proc: anyio.abc.Process, grace: float) -> None:
    """SIGTERM the group, wait up to ``grace`` for the leader, then SIGKILL the group."""
    if grace > 0 and _signal_group(pgid, signal.SIGTERM):
        with anyio.move_on_after(grace):
            await proc.wait()
    _signal_group(pgid, signal.SIGKILL)
    with anyio.move_on_after(max(grace, 1.0)):
        await proc.wait()
