"""What the confinement tests share: whether this kernel has Landlock (a machine without it
is told so, not passed quietly), and the secrets a confined engine must not read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.engine.landlock import LandlockUnavailable, abi_version

__all__ = ["LANDLOCK_ABI", "OAUTH", "PEM", "host", "needs_landlock"]

try:
    LANDLOCK_ABI: int | None = abi_version()
except LandlockUnavailable:
    LANDLOCK_ABI = None
# CI and the development machines run Linux with Landlock; a machine without it is told
# so instead of passing quietly.
needs_landlock = pytest.mark.skipif(LANDLOCK_ABI is None,
                                    reason="this kernel has no Landlock")

PEM = "-----BEGIN RSA PRIVATE KEY-----\nTHE-APP-KEY-BYTES\n-----END RSA PRIVATE KEY-----\n"
OAUTH = '{"claudeAiOauth": {"accessToken": "sk-ant-oat01-THE-SUBSCRIPTION"}}'


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Path]:
    """A service's files beside a worktree: the key, the config, the store, ~/.claude."""
    service = tmp_path / "service"
    (service / "secrets").mkdir(parents=True)
    key = service / "secrets" / "app.pem"
    key.write_text(PEM)
    config = service / "config.yaml"
    config.write_text("github:\n  private_key_file: secrets/app.pem\n")
    store = service / "state.db"
    store.write_bytes(b"SQLite format 3\x00")
    credentials = tmp_path / "service-home" / ".claude" / ".credentials.json"
    credentials.parent.mkdir(parents=True)
    credentials.write_text(OAUTH)
    worktree = service / "checkouts" / "worktrees" / "1-abc"
    (worktree / "src").mkdir(parents=True)
    (worktree / "src" / "app.py").write_text("print('inside')\n")
    os.symlink(key, worktree / "innocent.txt")  # a real link, as with symlinks on
    return {"key": key, "config": config, "store": store, "credentials": credentials,
            "worktree": worktree, "secrets": key.parent, "service": service}
