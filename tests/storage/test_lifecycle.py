"""``Lifecycle``: the one type every table's transition table is (and the check of that)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import service.storage
from service.storage.lifecycle import IllegalTransition, Lifecycle

DOOR = Lifecycle("door", ("shut", "open", "locked"), {
    ("open", "shut"): "open",
    ("close", "open"): "shut",
    ("lock", "shut"): "locked",
    ("unlock", "locked"): "shut",
})


def test_a_move_it_has_is_answered() -> None:
    assert DOOR.next("open", "shut") == "open"
    assert DOOR.allows("lock", "shut") and not DOOR.allows("lock", "open")
    assert DOOR.sources("close") == ("open",)
    assert DOOR.target("unlock") == "shut"
    assert DOOR.sql_in("open") == "('shut')"
    assert DOOR.events == {"open", "close", "lock", "unlock"}


def test_a_move_it_has_not_raises_a_named_error() -> None:
    with pytest.raises(IllegalTransition, match=r"door: no transition 'lock' from 'open'"):
        DOOR.next("lock", "open")
    with pytest.raises(IllegalTransition, match=r"door: no transition 'kick'"):
        DOOR.sources("kick")
    with pytest.raises(IllegalTransition):
        DOOR.target("kick")


def test_an_event_with_two_targets_has_no_single_target() -> None:
    fork = Lifecycle("fork", ("a", "b", "c"), {("go", "a"): "b", ("go", "b"): "c"})
    with pytest.raises(IllegalTransition):
        fork.target("go")
    assert fork.next("go", "a") == "b"


def test_a_state_not_declared_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="states not declared"):
        Lifecycle("typo", ("a",), {("go", "a"): "b"})


def test_every_table_with_a_lifecycle_states_it_as_one() -> None:
    """One home for lifecycles: a storage module with a transition table holds it as a
    ``Lifecycle`` (``TRANSITIONS`` is that lifecycle's own mapping)."""
    found = {}
    for info in pkgutil.iter_modules(service.storage.__path__):
        module = importlib.import_module(f"service.storage.{info.name}")
        if hasattr(module, "TRANSITIONS"):
            lifecycle = getattr(module, "LIFECYCLE", None)
            assert isinstance(lifecycle, Lifecycle), info.name
            assert module.TRANSITIONS is lifecycle.transitions, info.name
            found[info.name] = lifecycle.table
    assert found == {"queue": "queue", "ledger": "ledger", "runs": "runs",
                     "checks": "checks"}
