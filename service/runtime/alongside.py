"""Await one thing while a companion task runs beside it (pure anyio, no I/O).

Two places need it: ``review`` watches for Ctrl-C beside the review it runs, and the
publisher renews its lease beside a post. An anyio task group would do, but it wraps an
exception raised by the awaited work in an ``ExceptionGroup``; callers that catch
``ValueError`` or ``GitHubError`` need it as it is. ``alongside`` gives it back unwrapped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TypeVar

import anyio

T = TypeVar("T")
Companion = Callable[[anyio.CancelScope], Coroutine[object, object, None]]


async def alongside(work: Awaitable[T], companion: Companion) -> tuple[bool, T | None]:
    """``await work`` while ``companion(scope)`` runs; the companion is cancelled once the
    work is done. It may cancel ``scope`` to cut the work short: the answer is then
    ``(False, None)``, else ``(True, result)``. The work's exception is raised as it is."""
    scope = anyio.CancelScope()
    result: list[T] = []
    failed: list[Exception] = []
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(companion, scope)
        try:
            with scope:
                result.append(await work)
        except Exception as exc:  # raised below as it is, not in the group's wrapping
            failed.append(exc)
        finally:
            tasks.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return (True, result[0]) if result else (False, None)
