"""Log output: one JSON object per line by default, or readable text for a terminal.

Modules log through ``logging`` with ``extra={...}`` (``delivery_id``, ``repo``, ``pr``,
``dedupe_key``, ``attempt``, ``owner``, ...). Both formatters carry every such field, so a
line can be found by any of them. Secrets never reach a log line: values that are
``Secret`` print masked, and a field whose name says it holds a credential (``token``,
``secret``, ``password``, ``authorization``, ``private_key``, ``jwt``) is replaced by
``"***"`` whatever its value, as a second line of defence against a careless ``extra``.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import sys
import time
from datetime import datetime
from typing import Any, Final, Literal, TextIO

import orjson

from service.config.secret import Secret

LogFormat = Literal["json", "text"]
LOG_FORMATS: Final = ("json", "text")

#: The fields the project's log lines carry, in the order text lines show them first.
CONTEXT_FIELDS: Final = ("delivery_id", "repo", "pr", "dedupe_key", "attempt", "owner")

_MASK: Final = "***"
_SENSITIVE: Final = ("token", "secret", "password", "authorization", "private_key", "jwt")
_SCALARS: Final = frozenset({str, int, float, bool})
# The standard library's encoder, for what orjson refuses (an int beyond 64 bits, a lone
# surrogate); one for every line: json.dumps() with options builds a new one per call.
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, default=str)
# Every attribute a bare LogRecord has; anything else on a record came from ``extra``.
_STANDARD: Final = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()
    | {"message", "asctime", "taskName", "color_message"}
)


# Token *counts* are budget figures, not credentials: "tokens", "used_tokens", ...
_COUNTS: Final = re.compile(r"(.*_)?tokens|tokens_.*|.*_tokens_.*")


@functools.cache
def _sensitive(name: str) -> bool:
    lowered = name.lower()
    if _COUNTS.fullmatch(lowered):
        return False
    return any(word in lowered for word in _SENSITIVE)


def _plain(value: object) -> object:
    """A JSON-ready form of one extra value (secrets masked, unknown types as text)."""
    if value is None or type(value) in _SCALARS:
        return value
    if isinstance(value, Secret):
        return _MASK
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _MASK if _sensitive(str(k)) else _plain(v) for k, v in value.items()}
    return str(value)


@functools.cache
def _order(name: str) -> tuple[int, str]:
    """Sort key: the context fields first, in their order, then the rest by name."""
    return (CONTEXT_FIELDS.index(name) if name in CONTEXT_FIELDS else len(CONTEXT_FIELDS), name)


def extra_fields(record: logging.LogRecord) -> dict[str, object]:
    """The ``extra={...}`` fields of ``record``: context fields first, secrets masked."""
    # Written for speed: every webhook delivery logs a line, on the event loop.
    attributes = record.__dict__
    names = [n for n in attributes if n not in _STANDARD and not n.startswith("_")]
    if not names:
        return {}
    names.sort(key=_order)
    return {
        name: _MASK if _sensitive(name) else _plain(attributes[name]) for name in names
    }


@functools.lru_cache(maxsize=4)
def _second(whole: int) -> str:
    # strftime once a second rather than once a line
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))


def _timestamp(record: logging.LogRecord) -> str:
    """``2026-01-02T03:04:05.678+00:00``: UTC, milliseconds."""
    return f"{_second(int(record.created))}.{int(record.msecs):03d}+00:00"


def _dumps(line: dict[str, object]) -> str:
    """One JSON line: orjson (about ten times faster here), the standard library for what it
    refuses. The values are already plain (``_plain``), so both write the same data."""
    try:
        return orjson.dumps(line, default=str).decode("utf-8")
    except TypeError:
        return _ENCODER.encode(line)


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", <extras>..., "exc_info"?}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in extra_fields(record).items():
            line.setdefault(name, value)
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        return _dumps(line)


class TextFormatter(logging.Formatter):
    """``TIME LEVEL logger: message key=value ...`` for a person at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(
            f"{name}={json.dumps(value, ensure_ascii=False, default=str)}"
            if not isinstance(value, str) or not value or " " in value or "=" in value
            else f"{name}={value}"
            for name, value in extra_fields(record).items()
        )
        text = f"{_timestamp(record)} {record.levelname:<7} {record.name}: {record.getMessage()}"
        if fields:
            text = f"{text} {fields}"
        if record.exc_info:
            text = f"{text}\n{self.formatException(record.exc_info)}"
        return text


def formatter_for(log_format: LogFormat) -> logging.Formatter:
    """The formatter for ``--log-format``; ``ValueError`` for anything but json or text."""
    if log_format == "json":
        return JsonFormatter()
    if log_format == "text":
        return TextFormatter()
    raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}")


LOG_LEVELS: Final = {"debug": logging.DEBUG, "info": logging.INFO,
                     "warning": logging.WARNING, "error": logging.ERROR}


def format_for(stream: TextIO, chosen: LogFormat | None) -> LogFormat:
    """The format asked for, else text for a person at a terminal and JSON for a
    machine (a pipe, a file, journald, a container's log driver)."""
    if chosen is not None:
        return chosen
    isatty = getattr(stream, "isatty", None)
    try:
        return "text" if callable(isatty) and isatty() else "json"
    except ValueError:  # a closed stream
        return "json"


class _QuietRequests(logging.Filter):
    """httpx says every request at INFO; here a request is DEBUG unless it failed (a
    4xx or 5xx answer stays at INFO, beside the client's own line about it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO:
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        status = args[3] if len(args) > 3 else None
        if isinstance(status, int) and status >= 400:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


_QUIET_REQUESTS: Final = _QuietRequests()


def configure_logging(
    log_format: LogFormat | None = "json", *, level: int = logging.INFO,
    stream: TextIO | None = None,
) -> logging.Handler:
    """Send every log record (uvicorn's included) to ``stream`` (stderr) in one format.

    ``log_format`` None picks by the stream (``format_for``). Replaces the root logger's
    handlers, so calling it twice does not double every line; uvicorn's own loggers are
    pointed at the root instead of their default handlers. Returns the handler installed.
    """
    # Neither format shows the caller's file and line or the thread and process, so the
    # logging module is told not to look them up (its documented optimisations): that
    # makes a record about a third cheaper, and every webhook delivery logs one.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    target = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(target)
    handler.setFormatter(formatter_for(format_for(target, log_format)))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        named = logging.getLogger(name)
        named.handlers.clear()
        named.propagate = True
    requests = logging.getLogger("httpx")
    if _QUIET_REQUESTS not in requests.filters:
        requests.addFilter(_QUIET_REQUESTS)
    return handler


def log_config_for_uvicorn() -> dict[str, Any]:
    """A uvicorn ``log_config`` that leaves logging as ``configure_logging`` set it up."""
    return {"version": 1, "disable_existing_loggers": False}
