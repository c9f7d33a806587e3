"""Ready-made simulated GitHub for tests: one App, one installation, one pull request.

    harness = Harness.create()
    async with harness.client:
        token = await harness.mint_token()
        r = await harness.client.get("/repos/acme/widgets/pulls", headers=auth(token))

The App's key pair is generated at run time (once per process) and never written to disk
by this module; ``harness.private_key_pem`` is what the client under test signs with.
"""

from __future__ import annotations

import functools
import secrets
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt

from .auth import generate_app_key
from .clock import SimClock
from .models import App, Installation, PullRequest
from .settings import Settings
from .state import World
from .transport import SimulatorTransport

API = "https://api.github.com"
APP_ID = 4242
REPO = "acme/widgets"

SAMPLE_DIFF = """\
diff --git a/src/app.py b/src/app.py
index 83db48f0000000000000000000000000000000aa..bf269f40000000000000000000000000000000bb 100644
--- a/src/app.py
+++ b/src/app.py
@@ -1,6 +1,7 @@
 import os
-import sys
+import json
+import logging
\x20
 def main():
     value = os.environ.get("X")
     return value
@@ -20,4 +21,4 @@ def helper():
     a = 1
     b = 2
-    return a + b
+    return a * b
     # end
diff --git a/README.md b/README.md
new file mode 100644
index 0000000000000000000000000000000000000000..ccc0000000000000000000000000000000000000
--- /dev/null
+++ b/README.md
@@ -0,0 +1,2 @@
+# Widgets
+Hello.
"""


@functools.cache
def app_key_pair() -> tuple[str, bytes]:
    """(private PEM, public PEM), generated once per test process."""
    return generate_app_key()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"token {token}"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Harness:
    world: World
    app: App
    installation: Installation
    pull: PullRequest
    private_key_pem: str = field(repr=False)
    client: httpx.AsyncClient

    @classmethod
    def create(cls, *, settings: Settings | None = None, diff: str = SAMPLE_DIFF,
               clock: SimClock | None = None) -> Harness:
        """The world above; pass ``clock`` (e.g. a frozen ``SimClock``) to own its time."""
        private_pem, public_pem = app_key_pair()
        world = World(settings=settings, clock=clock)
        app = world.add_app(id=APP_ID, slug="pr-reviewer", name="PR Reviewer",
                            public_key_pem=public_pem, owner="acme",
                            webhook_secret=secrets.token_hex(16))
        world.add_repository(REPO)
        world.add_repository("acme/gadgets")
        inst = world.add_installation(account="acme", repositories=[REPO, "acme/gadgets"])
        # A member of the organisation: automatic review follows the trigger allowlist.
        world.add_user("alice", association="MEMBER")
        pull = world.add_pull(REPO, number=1, title="Add logging", user="alice",
                              head_sha="b" * 40, base_sha="a" * 40, diff=diff)
        client = httpx.AsyncClient(transport=SimulatorTransport(world), base_url=API)
        return cls(world=world, app=app, installation=inst, pull=pull,
                   private_key_pem=private_pem, client=client)

    def jwt(self, *, iat: float | None = None, exp: float | None = None,
            iss: Any = None, key: str | None = None, client_skew: float = 0.0) -> str:
        """An App JWT as a well-behaved client makes it (iat -60 s, exp +9 min), judged
        against a client clock ``client_skew`` seconds ahead of the simulator's."""
        now = self.world.clock.timestamp() + client_skew
        claims = {"iat": int(iat if iat is not None else now - 60),
                  "exp": int(exp if exp is not None else now + 540),
                  "iss": str(self.app.id) if iss is None else iss}
        return jwt.encode(claims, key or self.private_key_pem, algorithm="RS256")

    async def mint_token(self, body: dict[str, Any] | None = None,
                         headers: dict[str, str] | None = None) -> str:
        response = await self.client.post(
            f"/app/installations/{self.installation.id}/access_tokens",
            headers={**bearer(self.jwt()), **(headers or {})}, json=body or {})
        if response.status_code != 201:
            raise AssertionError(f"token mint failed: {response.status_code} {response.text}")
        token = response.json()["token"]
        assert isinstance(token, str)
        return token
