"""Fitting a pull request to the model's window and the run's tokens: pruned, then split.
Pure: the counts come in, the plan goes out (docs/WORKER.md#sized-to-the-window-pruned-then-split).

A call carries the prompt without the diff (``fixed``: rules, title, body, guidelines,
schema, and Claude Code's own overhead), the diff of some files, and room for the answer.
When the whole diff fits one call it is sent whole, untouched. When it does not, the
steps below run in order, each only while the diff still does not fit:

1. **shed** what costs most and says least (``pruning.shed_reason``: lock files,
   generated and vendored files, renames without a change), and drop hunks that only
   delete;
2. **trim** context to one line each side of a change;
3. **split** the rest into parts, files in diff order (a directory's files stay
   together), each part one call within the window. A file that cannot fit one call
   even alone is not sent (``over_window``).

Every part is one call of one run: together they must fit the run's reservation, each
with its answer room, so parts past it are not sent (``max_run_tokens``). Everything not
sent is an ``Omitted`` entry with its reason, and the coverage the posts show is what is
left (``Coverage``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from service.engine.sizing import MIN_ANSWER_TOKENS
from service.publish.run_content import Coverage, Omitted
from service.review.diff import FileDiff
from service.review.pruning import (
    NO_ATTRIBUTES,
    Attributes,
    drop_deletion_only,
    shed_reason,
    trim_context,
)

#: Context lines kept each side of a change once context is trimmed.
TRIMMED_CONTEXT: Final = 1


@dataclass(frozen=True)
class Limits:
    """What one run's calls must fit: the model's ``window`` (None: unknown), the run's
    ``reservation``, the ``fixed`` prompt every call carries, the ``answer`` room each call
    keeps, and the engine's ``bytes_per_token``."""

    window: int | None
    reservation: int
    fixed: int
    answer: int
    bytes_per_token: float = 2.0

    @property
    def per_call(self) -> int:
        """The diff tokens one call can carry."""
        bound = self.reservation if self.window is None else min(self.window,
                                                                 self.reservation)
        return bound - self.answer - self.fixed

    def tokens(self, f: FileDiff) -> int:
        """``f``'s diff and its line in the changed-files list, as the engine counts text
        it sends as JSON (escapes included)."""
        sent = json.dumps(f.text + f.path + "\n", ensure_ascii=False)
        return math.ceil(len(sent.encode("utf-8")) / self.bytes_per_token)


def answer_room(configured: int, window: int | None) -> int:
    """The answer each call keeps room for: the configured answer, but no more than a
    quarter of a small window (a 16K model is not asked to leave 8K for an answer)."""
    if window is None:
        return configured
    return min(configured, max(MIN_ANSWER_TOKENS, window // 4))


@dataclass(frozen=True)
class Packing:
    """The run's calls (each a group of files), what was not sent, and what was pruned."""

    parts: tuple[tuple[FileDiff, ...], ...]
    omitted: tuple[Omitted, ...]
    pruned: tuple[str, ...] = ()

    @property
    def files(self) -> tuple[FileDiff, ...]:
        return tuple(f for part in self.parts for f in part)

    def coverage(self, withheld: int) -> Coverage:
        """The coverage to record, ``withheld`` files having been left out before packing
        (``review.excluded_paths``, ``review.max_diff_lines``)."""
        return Coverage(files=len(self.files) + len(self.omitted) + withheld,
                        reviewed=len(self.files), parts=len(self.parts), pruned=self.pruned)


def _fits(files: Sequence[FileDiff], limits: Limits) -> bool:
    return sum(limits.tokens(f) for f in files) <= limits.per_call


def pack(files: Sequence[FileDiff], limits: Limits,
         attributes: Attributes = NO_ATTRIBUTES) -> Packing:
    """Fit ``files`` (layer 2's selection, non-empty) to ``limits``."""
    if _fits(files, limits):
        return Packing((tuple(files),), ())
    omitted: list[Omitted] = []
    pruned: list[str] = []
    kept: list[FileDiff] = []
    dropped_hunks = 0
    for f in files:
        reason = shed_reason(f, attributes)
        if reason is not None:
            omitted.append(Omitted(f.path, reason, f.lines))  # type: ignore[arg-type]
            continue
        smaller, dropped = drop_deletion_only(f)
        dropped_hunks += dropped
        kept.append(smaller)
    if dropped_hunks:
        pruned.append(f"{dropped_hunks} hunk that only deletes lines" if dropped_hunks == 1
                      else f"{dropped_hunks} hunks that only delete lines")
    if not _fits(kept, limits):
        trimmed = [trim_context(f, TRIMMED_CONTEXT) for f in kept]
        if trimmed != kept:  # a new file has no context to trim: nothing was left out
            pruned.append(f"context beyond {TRIMMED_CONTEXT} line each side of a change")
        kept = trimmed
    parts = _split(kept, limits, omitted)
    return Packing(_within_reservation(parts, limits, omitted), tuple(omitted),
                   tuple(pruned))


def _split(files: Sequence[FileDiff], limits: Limits,
           omitted: list[Omitted]) -> list[list[FileDiff]]:
    capacity = limits.per_call
    # A file too large for any call: the window's fault when the window is what binds.
    too_large = ("over_window" if limits.window is not None
                 and limits.window <= limits.reservation else "max_run_tokens")
    parts: list[list[FileDiff]] = []
    current: list[FileDiff] = []
    used = 0
    for f in files:
        size = limits.tokens(f)
        if size > capacity:
            omitted.append(Omitted(f.path, too_large, f.lines))  # type: ignore[arg-type]
            continue
        if current and used + size > capacity:
            parts.append(current)
            current, used = [], 0
        current.append(f)
        used += size
    if current:
        parts.append(current)
    return parts


def _within_reservation(parts: list[list[FileDiff]], limits: Limits,
                        omitted: list[Omitted]) -> tuple[tuple[FileDiff, ...], ...]:
    """The parts whose calls, each with its fixed prompt and answer room, fit the run's
    reservation together; the files of the rest are listed as over it."""
    kept: list[tuple[FileDiff, ...]] = []
    total = 0
    for part in parts:
        cost = limits.fixed + sum(limits.tokens(f) for f in part) + limits.answer
        if total + cost > limits.reservation:
            omitted.extend(Omitted(f.path, "max_run_tokens", f.lines) for f in part)
            continue
        kept.append(tuple(part))
        total += cost
    return tuple(kept)
