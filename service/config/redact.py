"""Credentials taken out of text: by their shape, and by the exact bytes the service holds.

One module, because three places need the same answer: the prompt (a pull request's text
never carries a token to the model), the engine's error details (a server that echoes a
key), and above all the publisher, the last door before GitHub. Whatever persuaded the
model, and whatever it managed to read, nothing shaped like a credential — and none of
the service's own secrets, in any wrapping — is posted.

- **Shapes** (``redact_shapes``): PEM private-key blocks (even one cut off before its END
  line), GitHub tokens (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``),
  Anthropic keys (``sk-ant-…``), OpenAI-style keys (``sk-…``, ``sk-proj-…``) and
  ``Bearer`` credentials.
- **Known secrets** (``Redactor``): the App's private key — any run of 24 base64
  characters from its body, whatever the line breaks, so a key without its armour,
  re-wrapped, JSON-escaped or quoted a line at a time is still found (what may remain is
  a line's last few characters) — the webhook secrets, the admin token and the engine's
  credentials, exactly.

Pure: it returns the kinds it removed, and the caller logs them (never the text).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

#: A secret shorter than this is not searched for: it would match ordinary words.
MIN_KNOWN_CHARS: Final = 8
#: A run of this many base64 characters of the App's key, anywhere, is the key.
KEY_WINDOW: Final = 24

_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE "
                  r"KEY-----|\Z)", re.DOTALL)
_SHAPES: Final = (
    ("github token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("anthropic key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{16,}")),
    ("openai key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("bearer token", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/\-]{12,}=*")),
)
#: A run of base64 long enough to test against the key's windows. Runs stop at anything
#: else (a line break, a quote, a space), so each line of a key re-wrapped, quoted or
#: escaped (``\n``) is tested on its own, and the prose around it is kept.
_BASE64_RUN = re.compile(rf"[A-Za-z0-9+/=]{{{KEY_WINDOW},}}")


def _label(kind: str) -> str:
    # "[redacted token]" is what a GitHub token has always become in posted text.
    return "[redacted token]" if kind == "github token" else f"[redacted {kind}]"


def redact_shapes(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` with every credential-shaped run replaced; the kinds found (repeats kept)."""
    found: list[str] = []

    def sub(kind: str, pattern: re.Pattern[str], value: str) -> str:
        def one(_: re.Match[str]) -> str:
            found.append(kind)
            return _label(kind)

        return pattern.sub(one, value)

    text = sub("private key", _PEM, text)
    for kind, pattern in _SHAPES:
        text = sub(kind, pattern, text)
    return text, tuple(found)


def _key_body(pem: str) -> str:
    lines = [ln.strip() for ln in pem.strip().splitlines()]
    return "".join(ln for ln in lines if ln and not ln.startswith("-----"))


@dataclass(frozen=True)
class Redacted:
    """The text as it may go out, and the kinds taken from it (empty: unchanged)."""

    text: str
    kinds: tuple[str, ...]


class Redactor:
    """Redacts credential shapes and the service's own secrets (see the module doc)."""

    def __init__(self, *, private_keys: Iterable[str] = (), secrets: Iterable[str] = ()) -> None:
        self._windows: set[str] = set()
        for pem in private_keys:
            body = _key_body(pem)
            self._windows.update(body[i:i + KEY_WINDOW]
                                 for i in range(max(0, len(body) - KEY_WINDOW + 1)))
        # Longest first, so a secret that contains another is taken whole.
        self._secrets = sorted({s for s in secrets if len(s) >= MIN_KNOWN_CHARS},
                               key=len, reverse=True)

    @classmethod
    def for_service(cls, private_key: str | None, secrets: Iterable[str | None],
                    environ: Mapping[str, str], env_names: Iterable[str]) -> Redactor:
        """The App's key, the given secrets and the values of ``env_names`` in ``environ``
        (the engine's credential variables)."""
        values = [*secrets, *(environ.get(name) for name in env_names)]
        return cls(private_keys=[private_key] if private_key else [],
                   secrets=[v for v in values if v])

    def redact(self, text: str) -> Redacted:
        """``text`` without a credential; ``kinds`` says what was removed."""
        found: list[str] = []
        for secret in self._secrets:
            if secret in text:
                found.append("service secret")
                text = text.replace(secret, _label("service secret"))
        if self._windows:
            text = _BASE64_RUN.sub(lambda m: self._key_run(m.group(0), found), text)
        text, shapes = redact_shapes(text)
        return Redacted(text, (*found, *shapes))

    def _key_run(self, run: str, found: list[str]) -> str:
        if any(run[i:i + KEY_WINDOW] in self._windows
               for i in range(len(run) - KEY_WINDOW + 1)):
            found.append("app private key")
            return _label("app private key")
        return run

    def payload(self, value: object) -> tuple[object, tuple[str, ...]]:
        """A JSON payload with every string in it redacted; the kinds removed."""
        if isinstance(value, str):
            done = self.redact(value)
            return done.text, done.kinds
        if isinstance(value, Mapping):
            out: dict[object, object] = {}
            kinds: list[str] = []
            for key, item in value.items():
                out[key], found = self.payload(item)
                kinds += found
            return out, tuple(kinds)
        if isinstance(value, list | tuple):
            items, kinds = [], []
            for item in value:
                clean, found = self.payload(item)
                items.append(clean)
                kinds += found
            return items, tuple(kinds)
        return value, ()
