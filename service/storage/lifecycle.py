"""One type for every table's lifecycle: states, and the events that move a row between them.

Each table that has a lifecycle (``queue``, ``ledger``, ``runs``, ``checks``) states it as
one ``Lifecycle`` — ``(event, from-state) -> to-state`` — and derives its SQL guards from
it (``sources``, ``sql_in``), so the SQL cannot drift from the documented table. Asking
the table for a move it does not have raises ``IllegalTransition``, naming the table, the
event and the state, rather than returning a value for the caller to interpret.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


class IllegalTransition(ValueError):
    """An event a lifecycle does not allow from a state (or does not have at all)."""

    def __init__(self, table: str, event: str, state: str | None = None) -> None:
        where = f" from {state!r}" if state is not None else ""
        super().__init__(f"{table}: no transition {event!r}{where}")
        self.table, self.event, self.state = table, event, state


@dataclass(frozen=True)
class Lifecycle:
    """A table's states (in a stable order) and its ``(event, from) -> to`` moves."""

    table: str
    states: tuple[str, ...]
    transitions: Mapping[tuple[str, str], str]

    def __post_init__(self) -> None:
        unknown = {s for pair in self.transitions.items() for s in (pair[0][1], pair[1])
                   if s not in self.states}
        if unknown:
            raise ValueError(f"{self.table}: states not declared: {sorted(unknown)}")

    @property
    def events(self) -> frozenset[str]:
        return frozenset(event for event, _ in self.transitions)

    def allows(self, event: str, state: str) -> bool:
        return (event, state) in self.transitions

    def next(self, event: str, state: str) -> str:
        """The state ``event`` takes ``state`` to; ``IllegalTransition`` when it cannot."""
        try:
            return self.transitions[(event, state)]
        except KeyError:
            raise IllegalTransition(self.table, event, state) from None

    def sources(self, event: str) -> tuple[str, ...]:
        """The states ``event`` may leave, in the declared order."""
        found = tuple(s for s in self.states if (event, s) in self.transitions)
        if not found:
            raise IllegalTransition(self.table, event)
        return found

    def target(self, event: str) -> str:
        """The one state ``event`` leads to (``IllegalTransition`` unless exactly one)."""
        targets = {to for (ev, _), to in self.transitions.items() if ev == event}
        if len(targets) != 1:
            raise IllegalTransition(self.table, event)
        return targets.pop()

    def sql_in(self, event: str) -> str:
        """``('a', 'b')``: the states ``event`` may leave, as an SQL list of literals."""
        return "(" + ", ".join(f"'{s}'" for s in self.sources(event)) + ")"
