"""``Shutdown``: one SIGTERM is one graceful stop, whoever else saw it; a second forces.

uvicorn, while it serves, takes SIGINT/SIGTERM too and raises each again once stopped; the
loop has delivered it already. The real exchange is in tests/e2e/test_serve_signals.py (a
real ``serve``, real signals); here, the counting."""

from __future__ import annotations

import asyncio
import signal

from service.app.shutdown import Shutdown


def shutdown() -> Shutdown:
    return Shutdown(asyncio.Event(), asyncio.Event())


def test_one_signal_while_the_web_serves_and_its_echo_stop_gracefully() -> None:
    s = shutdown()
    s.web_serving()
    s.on_signal(signal.SIGTERM)  # the loop delivers it as it arrives
    assert s.stop.is_set() and not s.force.is_set()
    s.web_stopped()
    s.on_signal(signal.SIGTERM)  # uvicorn raises it again once stopped
    assert not s.force.is_set()


def test_a_second_signal_forces_whether_or_not_the_web_still_serves() -> None:
    during = shutdown()
    during.web_serving()
    during.on_signal(signal.SIGTERM)
    during.on_signal(signal.SIGTERM)
    assert during.force.is_set()
    during.web_stopped()
    during.on_signal(signal.SIGTERM)  # the two echoes change nothing more
    during.on_signal(signal.SIGTERM)

    after = shutdown()
    after.web_serving()
    after.on_signal(signal.SIGINT)
    after.web_stopped()
    after.on_signal(signal.SIGINT)  # its echo
    assert not after.force.is_set()
    after.on_signal(signal.SIGINT)  # an operator's second signal, once the web stopped
    assert after.force.is_set()


def test_without_a_web_server_every_signal_counts() -> None:
    s = shutdown()
    s.on_signal(signal.SIGTERM)
    assert s.stop.is_set() and not s.force.is_set()
    s.on_signal(signal.SIGTERM)
    assert s.force.is_set()
