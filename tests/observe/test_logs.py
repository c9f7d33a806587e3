"""Log lines: JSON by default, text on request, context fields carried, secrets never shown."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from service.config.secret import Secret
from service.observe.logs import (
    LOG_LEVELS,
    JsonFormatter,
    TextFormatter,
    configure_logging,
    extra_fields,
    format_for,
    formatter_for,
)


def record(message: str = "webhook delivery", **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("service.app.web", logging.INFO, __file__, 1, message, None, None)
    made.created = datetime(2026, 5, 4, 12, 0, 1, 250000, tzinfo=UTC).timestamp()
    made.msecs = 250.0
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def test_a_json_line_carries_the_context_fields_first() -> None:
    line = json.loads(JsonFormatter().format(record(
        outcome="enqueued", pr=7, repo="o/r", delivery_id="d-1", attempt=2,
        dedupe_key="pr_opened:o/r:7:abc", owner="w1")))

    assert list(line)[:4] == ["ts", "level", "logger", "message"]
    assert line["ts"] == "2026-05-04T12:00:01.250+00:00"
    assert (line["level"], line["logger"], line["message"]) == (
        "INFO", "service.app.web", "webhook delivery")
    assert list(line)[4:] == ["delivery_id", "repo", "pr", "dedupe_key", "attempt", "owner",
                              "outcome"]
    assert line["pr"] == 7 and line["attempt"] == 2


@pytest.mark.parametrize("value", [2**70, "lone \ud800 surrogate", float("inf"), "é ✓ 🚀"])
def test_a_value_the_fast_encoder_refuses_still_makes_one_json_line(value: object) -> None:
    text = JsonFormatter().format(record(repo="o/r", odd=value))

    assert "\n" not in text
    line = json.loads(text)
    assert line["repo"] == "o/r"
    assert line["odd"] == value or (value == float("inf") and line["odd"] in (None, "Infinity"))


def test_secrets_are_masked_by_type_and_by_field_name() -> None:
    fields = extra_fields(record(
        key=Secret("pem-contents"), token="ghs_abc", webhook_secret="s", Authorization="Bearer x",
        nested={"private_key": "k", "fine": [Secret("x"), 1]},
        when=datetime(2026, 1, 1, tzinfo=UTC), thing=object))

    text = json.dumps(fields)
    for leaked in ("pem-contents", "ghs_abc", "Bearer x", '"k"'):
        assert leaked not in text
    assert fields["key"] == fields["token"] == fields["webhook_secret"] == "***"
    assert fields["Authorization"] == "***"
    assert fields["nested"] == {"private_key": "***", "fine": ["***", 1]}
    assert fields["when"] == "2026-01-01T00:00:00+00:00"
    assert fields["thing"] == str(object)


def test_token_counts_are_budget_figures_and_are_not_masked() -> None:
    fields = extra_fields(record(tokens=1234, used_tokens=10, max_run_tokens=60_000,
                                 access_token="ghs_secret", installation_token="ghs_2"))
    assert (fields["tokens"], fields["used_tokens"], fields["max_run_tokens"]) == (
        1234, 10, 60_000)
    assert fields["access_token"] == fields["installation_token"] == "***"


def test_an_exception_is_part_of_the_same_json_line() -> None:
    try:
        raise ValueError("broken")
    except ValueError:
        failing = record("failed", delivery_id="d-2")
        failing.exc_info = sys.exc_info()

    line = JsonFormatter().format(failing)

    assert "\n" not in line
    assert "ValueError: broken" in json.loads(line)["exc_info"]


def test_a_text_line_is_readable_and_quotes_what_needs_it() -> None:
    line = TextFormatter().format(record(delivery_id="d-1", repo="o/r", outcome="ignored:x y",
                                         enqueued=[], token="t"))

    assert line.startswith(
        "2026-05-04T12:00:01.250+00:00 INFO    service.app.web: webhook delivery")
    assert "delivery_id=d-1 repo=o/r" in line
    assert 'outcome="ignored:x y"' in line and "enqueued=[]" in line and "token=***" in line


def test_only_json_and_text_are_formats() -> None:
    with pytest.raises(ValueError, match="json, text"):
        formatter_for("xml")  # type: ignore[arg-type]


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)


@pytest.mark.usefixtures("restore_root")
def test_configure_logging_installs_one_handler_for_everything() -> None:
    stream = io.StringIO()
    configure_logging("text", stream=stream)
    configure_logging("json", stream=stream)

    logging.getLogger("uvicorn.error").info("Started server process", extra={"pid": 1})
    logging.getLogger("service.app.web").debug("not at INFO")

    assert len(logging.getLogger().handlers) == 1
    [line] = stream.getvalue().splitlines()
    assert json.loads(line)["logger"] == "uvicorn.error"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_person_at_a_terminal_gets_text_and_a_machine_gets_json() -> None:
    assert format_for(_Terminal(), None) == "text"
    assert format_for(io.StringIO(), None) == "json"  # a pipe, a file, journald
    assert format_for(_Terminal(), "json") == "json"  # the flag still wins
    closed = io.StringIO()
    closed.close()
    assert format_for(closed, None) == "json"


@pytest.mark.usefixtures("restore_root")
def test_the_format_follows_the_stream_when_none_is_asked_for() -> None:
    terminal = _Terminal()
    configure_logging(None, stream=terminal)
    logging.getLogger("service.app.web").info("webhook delivery", extra={"repo": "o/r"})
    line = terminal.getvalue().strip()
    assert not line.startswith("{") and "webhook delivery" in line and "repo=o/r" in line


def _httpx_line(status: int) -> None:
    # What httpx itself logs for every request it sends.
    logging.getLogger("httpx").info('HTTP Request: %s %s "%s %d %s"', "GET",
                                    "https://api.github.com/repos/o/r/pulls", "HTTP/1.1",
                                    status, "OK" if status < 400 else "Not Found")


@pytest.mark.usefixtures("restore_root")
def test_github_requests_are_debug_unless_they_fail() -> None:
    stream = io.StringIO()
    configure_logging("json", stream=stream)
    _httpx_line(200)
    _httpx_line(404)
    [line] = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert (line["level"], "404" in line["message"]) == ("INFO", True)

    stream = io.StringIO()
    configure_logging("json", level=logging.DEBUG, stream=stream)
    _httpx_line(200)
    [line] = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert line["level"] == "DEBUG" and "200" in line["message"]
    assert len(logging.getLogger("httpx").filters) == 1  # configured twice, installed once


def test_the_cli_offers_exactly_the_levels_the_logs_know() -> None:
    from service.cli.main import LOG_LEVEL_NAMES

    assert tuple(LOG_LEVELS) == LOG_LEVEL_NAMES
