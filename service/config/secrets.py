"""Secrets in the config: each from a file the config names, or from the environment.

A secret is never quoted in a problem message, a log line or a repr (``Secret``); a file
is read whole but capped, so a typo such as ``/dev/zero`` cannot hang the loader. A PEM
key is checked to be an unencrypted RSA private key, which is what GitHub Apps sign with.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from service.config.reader import MISSING, Section
from service.config.secret import Secret

__all__ = ["read_secret", "read_text", "resolve", "unregistered"]

# Secret and config files are small; the cap keeps a typo such as /dev/zero from hanging.
_MAX_FILE_BYTES: Final = 1024 * 1024
_PEM_RE: Final = re.compile(
    r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.+-----END \1PRIVATE KEY-----", re.DOTALL
)
#: The environment variables that, set, mean the App was registered (unregistered()).
REGISTRATION_ENV: Final = ("GITHUB_APP_PRIVATE_KEY", "GITHUB_WEBHOOK_SECRET")


def resolve(base_dir: Path, value: str) -> Path:
    """Relative paths in the config are relative to the config file's directory."""
    path = Path(value)
    return path if path.is_absolute() else base_dir / path


def read_text(path: Path) -> str:
    """Read a small UTF-8 file; raise ``ValueError`` with a message that never quotes it."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(_MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ValueError(f"cannot read {path}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"cannot read {path}: it is a directory") from None
    except PermissionError:
        raise ValueError(f"cannot read {path}: permission denied") from None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    if len(raw) > _MAX_FILE_BYTES:
        raise ValueError(f"{path} is larger than {_MAX_FILE_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None


def _private_key_problem(pem: str) -> str | None:
    """Why ``pem`` is not a usable GitHub App key, or None. Never quotes the key."""
    if not _PEM_RE.search(pem):
        return "is not a PEM private key (expected a -----BEGIN ... PRIVATE KEY----- block)"
    try:
        key = load_pem_private_key(pem.encode("utf-8"), password=None)
    except TypeError:
        return "is encrypted with a passphrase; the App key must be stored unencrypted"
    except (ValueError, UnsupportedAlgorithm):
        return "holds a PEM block that is not a readable private key"
    if not isinstance(key, rsa.RSAPrivateKey):
        return "is not an RSA key (GitHub Apps sign their JWTs with RS256)"
    return None


def read_secret(
    s: Section,
    key: str,
    env: str | None,
    environ: Mapping[str, str],
    base_dir: Path,
    *,
    required: bool,
    pem: bool = False,
) -> Secret | None:
    """A secret from ``key`` (a file path) or the environment variable ``env``, never both."""
    mark = s.mark()
    file_value = s.optional_string(key)
    if s.failed_since(mark):
        return None
    env_value = environ.get(env) if env is not None else None
    if file_value is not None and env_value is not None:
        s.problem(key, f"set here and in the environment variable {env}; keep one")
        return None
    origin: Path | None = None
    if file_value is not None:
        path = origin = resolve(base_dir, file_value)
        source = str(path)
        try:
            text = read_text(path)
        except ValueError as exc:
            s.problem(key, str(exc))
            return None
    elif env_value is not None:
        source = f"the environment variable {env}"
        text = env_value
        if pem and "\n" not in text:
            # .env files and CI variables often carry a PEM on one line with literal \n.
            text = text.replace("\\n", "\n")
    else:
        if required:
            s.required(key, f"a file path, or set the environment variable {env}")
        return None
    # A trailing newline from `echo secret > file` is never part of the secret.
    text = text.strip()
    if not text:
        s.problem(key, f"{source} is empty")
        return None
    if pem:
        why = _private_key_problem(text)
        if why is not None:
            s.problem(key, f"{source} {why}")
            return None
    return Secret(text, origin)


def unregistered(data: object, environ: Mapping[str, str], base_dir: Path) -> bool:
    """Whether the ``github`` section (raw) says the App has not been registered yet.

    True for a missing section, or one without ``app_id`` whose key and webhook secret are
    given neither by the environment nor by a file that exists. A section that names an
    ``app_id`` was registered: its missing key is a lost secret, not a first run.
    """
    if any(name in environ for name in REGISTRATION_ENV):
        return False
    if data is MISSING:
        return True
    if not isinstance(data, Mapping) or "app_id" in data:
        return False
    for key in ("private_key_file", "webhook_secret_file"):
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            return False
        if os.path.exists(resolve(base_dir, value)):
            return False
    return True
