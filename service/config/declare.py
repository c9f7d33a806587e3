"""How a config key is declared: once, on the field of the dataclass it fills.

``key(...)`` makes a dataclass field whose metadata is a ``Key``: the YAML name, what
kind of value it takes, its bounds, its one-line doc. Both config files are declared this
way — the operator's ``config.yaml`` (``schema.py``, one class per section) and a
repository's ``.github/pr-review-agent.yml`` (``repository/keys.py``) — and both are read
by ``read_key.py``. ``validate.py`` and ``repository/parse.py`` walk the declarations to
read a file, ``describe.py`` renders the docs' key tables from them and
``repository/json_schema.py`` the published JSON Schema, so a key is added by writing one
declaration.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = ["REQUIRED", "Key", "Kind", "Section", "combiner", "key", "keys", "keys_of",
           "section"]

Kind = Literal["int", "bool", "str", "str?", "strs", "usd", "secret", "secrets", "counts",
               "items"]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Final = _Required()
"""The default of a key that has none: the file must give it."""


@dataclass(frozen=True)
class Key:
    """One YAML key: its kind, bounds and documentation.

    ``allowed`` (a string's choices), ``pattern`` (which a string must match whole,
    described by ``shape``) and ``maximum`` (an int's, or a string's length) bound the
    value; then ``check`` returns why an (already well-typed) value is refused, or None
    (or a list of ``(suffix, why)`` naming its items, ``[1]``);
    ``normalize`` turns it into the stored form (run before ``check``). For the secret
    kinds, ``env`` is the environment variable that may hold the value instead of the
    file the key names, and ``pem`` asks for an unencrypted RSA private key.
    ``registration`` marks the keys whose absence only means "the App is not registered
    yet" (``MissingCredentials``). ``inherits`` says, for a repository file's key, what
    is in force when no file sets it, and ``example`` is the value its docs show.
    The ``items`` kind is a list of mappings, each read into ``item`` (a frozen dataclass
    whose fields are declared keys too), at most ``maximum`` of them.
    """

    name: str
    kind: Kind
    doc: str
    default: object = REQUIRED
    note: str = ""                 # said after the default in the docs: "(no cap)"
    hint: str = ""                 # said when a required key is missing
    minimum: int = 1
    maximum: int | None = None
    allowed: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    shape: str = ""
    fold_case: bool = False
    env: str | None = None
    pem: bool = False
    registration: bool = False
    check: Callable[[Any], str | list[tuple[str, str]] | None] | None = None
    normalize: Callable[[Any], Any] | None = None
    inherits: str = ""
    example: object = None
    item: type[Any] | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def key(kind: Kind, doc: str, default: object = REQUIRED, *, name: str = "",
        **options: Any) -> Any:
    """A section field declared as one YAML key (named like the field unless ``name``)."""
    spec = {"kind": kind, "doc": doc, "default": default, "name": name, **options}
    if default is REQUIRED:
        return dataclasses.field(metadata={"key": spec})
    return dataclasses.field(default=default, metadata={"key": spec})


def keys(*declared: Key, combine: Callable[[tuple[Any, ...]], Any]) -> Any:
    """A section field read from several YAML keys (the webhook secret and its
    predecessor), combined into one value."""
    return dataclasses.field(metadata={"keys": declared, "combine": combine})


@dataclass(frozen=True)
class Section:
    """A top-level section: its name, whether it must be present, and its fields."""

    name: str
    cls: type[Any]
    required: bool = False
    hint: str = ""
    title: str = ""     # what the docs add after the name: "(required section)"


def keys_of(cls: type[Any]) -> list[tuple[str, tuple[Key, ...]]]:
    """``(field name, its keys)`` of a section class, in declaration order."""
    out: list[tuple[str, tuple[Key, ...]]] = []
    for f in dataclasses.fields(cls):
        if "key" in f.metadata:
            spec = dict(f.metadata["key"])
            spec["name"] = spec["name"] or f.name
            out.append((f.name, (Key(**spec),)))
        elif "keys" in f.metadata:
            out.append((f.name, tuple(f.metadata["keys"])))
    return out


def combiner(cls: type[Any], field_name: str) -> Callable[[tuple[Any, ...]], Any]:
    """How a several-key field combines its values."""
    for f in dataclasses.fields(cls):
        if f.name == field_name and "combine" in f.metadata:
            combine: Callable[[tuple[Any, ...]], Any] = f.metadata["combine"]
            return combine
    raise KeyError(field_name)


def section(name: str, cls: type[Any], *, required: bool = False, hint: str = "",
            title: str = "") -> Section:
    return Section(name=name, cls=cls, required=required, hint=hint, title=title)
