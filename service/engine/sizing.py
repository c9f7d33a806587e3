"""Sizing an HTTP engine's call against what is left of its run. Pure.

The budget admits a run against its reservation (``max_run_tokens``), so a run must never
spend more. An API call costs its input plus its output, and the output is bounded by the
call's ``max_tokens``. So before each call the engine measures the input — exactly where
the server can count (Anthropic's ``count_tokens``), conservatively where it cannot — and
gives the call ``max_tokens`` = what is left of the run after that input, and never more
than the model's context window leaves after it (servers check prompt + ``max_tokens``
against the window, ``windows``). A call whose input leaves less than
``MIN_ANSWER_TOKENS`` for the answer is not made: the first call is then ``refused``
(nothing was spent, the numbers say why), a repair is skipped.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final

#: The smallest answer worth asking for: a review with a few findings.
MIN_ANSWER_TOKENS: Final = 1_024
#: Where no server counts, a token is taken as 2 bytes of UTF-8: Claude, Llama, Qwen and
#: GPT tokenizers all average 3–4 bytes on English and code, so this counts about twice
#: what they would. Text that tokenizes at under 2 bytes a token (long runs of rare
#: symbols) can beat it: docs/ENGINE.md says so.
BYTES_PER_TOKEN_BOUND: Final = 2
#: ``count_tokens`` is documented as an estimate that can differ a little from what the
#: message is billed: a margin on top (2 % and 32 tokens).
COUNT_MARGIN: Final = 0.02
COUNT_SLACK: Final = 32


def conservative_tokens(value: Any) -> int:
    """An upper estimate of the tokens of ``value`` (text, or JSON-able structure)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN_BOUND) + 8


def with_margin(counted: int) -> int:
    """A server's own count, with the margin its documentation calls for."""
    return math.ceil(counted * (1 + COUNT_MARGIN)) + COUNT_SLACK


@dataclass(frozen=True)
class Fit:
    """How one call fits what is left: its ``max_tokens``, or None when it does not."""

    prompt: int
    left: int
    max_tokens: int | None
    window: int | None = None

    @property
    def over_window(self) -> bool:
        """It does not fit because of the model's window (not the run's tokens)."""
        return self.max_tokens is None and self.window is not None and self.window <= self.left

    def explain(self) -> str:
        if self.over_window:
            return (f"the prompt is {self.prompt:,} tokens and the model's context window "
                    f"{self.window:,}: under {MIN_ANSWER_TOKENS:,} left for the answer")
        return (f"the prompt is {self.prompt:,} tokens and {self.left:,} are left of the run: "
                f"under {MIN_ANSWER_TOKENS:,} for the answer")


def fit(*, prompt_tokens: int, spent: int, allowance: int, configured_max: int,
        window: int | None = None) -> Fit:
    """``max_tokens`` for a call whose input is ``prompt_tokens``, after ``spent`` of
    ``allowance``, in a model whose context is ``window`` tokens (None: unknown): the
    room left in both, capped by the configured answer size."""
    left = allowance - spent
    room = left - prompt_tokens
    if window is not None:
        room = min(room, window - prompt_tokens)
    if room < MIN_ANSWER_TOKENS:
        return Fit(prompt_tokens, left, None, window)
    return Fit(prompt_tokens, left, min(configured_max, room), window)
