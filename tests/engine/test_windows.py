"""The model's context window, from each place it can come from (``windows``), and the
servers asked for it (``window_discovery``) in the shapes they answer."""

from __future__ import annotations

import pytest

from service.engine import windows
from service.engine.windows import Window

URL = "http://127.0.0.1:8000/v1"


def test_the_configured_window_wins_and_zero_means_find_out() -> None:
    assert windows.configured(32_000) == Window(32_000, "engine.context_tokens")
    assert windows.configured(0) is None


@pytest.mark.parametrize(("model", "tokens"), [
    ("claude-sonnet-4-5", 200_000), ("claude-opus-4-1-20250805", 200_000),
    ("gpt-4o-mini", 128_000), ("gpt-4.1-nano", 1_047_576), ("gpt-4", 8_192),
    ("gpt-4-turbo-2024-04-09", 128_000), ("o1-mini", 128_000), ("o3-pro", 200_000),
    ("openai/gpt-5-mini", 400_000), ("GPT-3.5-TURBO", 16_385),
])
def test_the_table_knows_the_vendors_models_by_their_longest_prefix(model: str,
                                                                     tokens: int) -> None:
    found = windows.from_table(model)
    assert found is not None and found.tokens == tokens


def test_a_model_not_in_the_table_is_unknown() -> None:
    assert windows.from_table("qwen2.5-coder:14b") is None
    assert windows.from_table(None) is None
    assert "engine.context_tokens" in windows.UNKNOWN.describe()


def test_vllms_listing_names_the_window_of_the_served_model() -> None:
    listing = {"object": "list", "data": [
        {"id": "other", "object": "model", "max_model_len": 4096},
        {"id": "Qwen/Qwen2.5-Coder-32B", "object": "model", "max_model_len": 32768}]}
    assert windows.from_models_listing(listing, "Qwen/Qwen2.5-Coder-32B") == Window(
        32_768, "the server's /v1/models (max_model_len)")
    assert windows.from_models_listing(listing, "absent") is None
    assert windows.from_models_listing({"data": [{"id": "m", "context_length": 65_536}]},
                                       "m") == Window(65_536,
                                                      "the server's /v1/models (context_length)")


def test_nonsense_is_never_a_window() -> None:
    assert windows.from_models_listing({"data": [{"id": "m", "max_model_len": True}]},
                                       "m") is None
    assert windows.from_models_listing({"data": [{"id": "m", "max_model_len": 12}]},
                                       "m") is None
    assert windows.from_models_listing([1, 2], "m") is None
    assert windows.from_llama_props({"n_ctx": "8192"}) is None
    assert windows.from_ollama_show({"error": "model not found"}) is None


def test_llama_cpp_props_give_the_slots_context() -> None:
    props = {"default_generation_settings": {"n_ctx": 8192, "n_predict": -1},
             "total_slots": 1}
    assert windows.from_llama_props(props) == Window(8_192, "the server's /props (n_ctx)")
    assert windows.from_llama_props({"n_ctx": 4096}) == Window(
        4_096, "the server's /props (n_ctx)")


def test_ollama_without_num_ctx_is_its_smallest_default() -> None:
    show = {"modelfile": "FROM qwen", "parameters": 'stop "<|im_end|>"\nnum_ctx 16384',
            "details": {"family": "qwen2"}, "model_info": {"qwen2.context_length": 32768}}
    assert windows.from_ollama_show(show) == Window(16_384, "Ollama's /api/show (num_ctx)")
    bare = {**show, "parameters": 'stop "<|im_end|>"'}
    found = windows.from_ollama_show(bare)
    assert found is not None and found.tokens == windows.OLLAMA_DEFAULT_CTX == 4_096


def test_a_context_refusal_names_its_window() -> None:
    assert windows.stated_in_error("This model's maximum context length is 16385 tokens. "
                                   "However, you requested 20000 tokens.") == 16_385
    assert windows.stated_in_error("exceeds the available context size (8,192 tokens)") \
        == 8_192
    assert windows.stated_in_error("prompt is too long") is None


