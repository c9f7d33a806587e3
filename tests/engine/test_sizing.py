"""Sizing a call against what is left of its run: an upper estimate where no server counts,
the documented margin on a server's own count, and no call whose answer would have less
than the smallest worth asking for."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from service.engine.sizing import (
    BYTES_PER_TOKEN_BOUND,
    MIN_ANSWER_TOKENS,
    conservative_tokens,
    fit,
    with_margin,
)
from tests.kit.thorough import examples


def test_the_upper_estimate_counts_bytes_not_characters() -> None:
    assert conservative_tokens("") == 8
    assert conservative_tokens("abcd") == 4 // BYTES_PER_TOKEN_BOUND + 8
    assert conservative_tokens("é" * 10) == 20 // BYTES_PER_TOKEN_BOUND + 8  # 2 bytes each
    structure = {"role": "user", "content": "hi"}
    assert conservative_tokens(structure) == conservative_tokens(
        '{"role": "user", "content": "hi"}')


def test_a_servers_count_gets_its_margin() -> None:
    assert with_margin(0) == 32
    assert with_margin(1000) == 1020 + 32
    assert with_margin(101) == 104 + 32  # rounded up, never down


def test_the_answer_gets_the_room_left_capped_by_the_configured_size() -> None:
    roomy = fit(prompt_tokens=10_000, spent=0, allowance=30_000, configured_max=8_192)
    assert (roomy.max_tokens, roomy.left, roomy.prompt) == (8_192, 30_000, 10_000)
    tight = fit(prompt_tokens=10_000, spent=15_000, allowance=30_000, configured_max=8_192)
    assert tight.max_tokens == 5_000


def test_a_call_that_leaves_too_little_for_an_answer_is_not_made_and_says_why() -> None:
    edge = fit(prompt_tokens=28_976, spent=0, allowance=30_000, configured_max=8_192)
    assert edge.max_tokens == MIN_ANSWER_TOKENS == 1_024
    short = fit(prompt_tokens=28_977, spent=0, allowance=30_000, configured_max=8_192)
    assert short.max_tokens is None
    assert not short.over_window
    assert short.explain() == ("the prompt is 28,977 tokens and 30,000 are left of the run: "
                               "under 1,024 for the answer")


def test_the_answer_also_fits_the_models_window() -> None:
    # A 16K model: servers check prompt + max_tokens against the window, so a 10.7K
    # prompt may ask for 5.3K of answer, not the configured 8K.
    sized = fit(prompt_tokens=10_700, spent=0, allowance=30_000, configured_max=8_192,
                window=16_000)
    assert sized.max_tokens == 5_300
    over = fit(prompt_tokens=15_500, spent=0, allowance=30_000, configured_max=8_192,
               window=16_000)
    assert over.max_tokens is None and over.over_window
    assert over.explain() == ("the prompt is 15,500 tokens and the model's context window "
                              "16,000: under 1,024 left for the answer")
    # When the run's tokens are what binds, it is not the window's fault.
    spent = fit(prompt_tokens=15_500, spent=14_000, allowance=30_000, configured_max=8_192,
                window=200_000)
    assert spent.max_tokens is None and not spent.over_window


@settings(max_examples=examples(200), deadline=None)
@given(prompt=st.integers(0, 200_000), spent=st.integers(0, 200_000),
       allowance=st.integers(1, 200_000), configured=st.integers(1, 64_000),
       window=st.none() | st.integers(1_024, 300_000))
def test_a_call_never_asks_for_more_than_the_run_or_the_window_has_left(
        prompt: int, spent: int, allowance: int, configured: int, window: int | None) -> None:
    sized = fit(prompt_tokens=prompt, spent=spent, allowance=allowance,
                configured_max=configured, window=window)
    if sized.max_tokens is not None:
        assert spent + prompt + sized.max_tokens <= allowance
        assert window is None or prompt + sized.max_tokens <= window
        assert MIN_ANSWER_TOKENS <= sized.max_tokens <= configured or (
            configured < MIN_ANSWER_TOKENS and sized.max_tokens == configured)
