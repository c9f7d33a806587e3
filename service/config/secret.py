"""A secret value that never shows itself: the one type every module holding a credential
uses (the config, the GitHub client, the engines, the log formatter), so none of them
needs the config module for it."""

from __future__ import annotations

from pathlib import Path


class Secret:
    """A string that never shows itself in a repr, a log line or an exception.

    ``source`` is the file it was read from (None for the environment): the engine's
    sandbox must be shown unable to open it.
    """

    __slots__ = ("_value", "source")

    def __init__(self, value: str, source: Path | None = None) -> None:
        self._value = value
        self.source = source

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)
