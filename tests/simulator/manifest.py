"""The App-manifest flow's GitHub side, as ``World`` methods: registering an App from a
manifest yields a one-hour, single-use code; converting it creates the App with a fresh key
pair and secrets (``POST /app-manifests/{code}/conversions``)."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .auth import generate_app_key
from .models import App, ManifestCode

if TYPE_CHECKING:
    from datetime import datetime

    from .settings import Settings


class ManifestFlow:
    """Mixed into ``World``, which provides everything declared below."""

    if TYPE_CHECKING:
        settings: Settings
        apps: dict[int, App]
        manifest_codes: dict[str, ManifestCode]

        @property
        def app(self) -> App: ...
        def now(self) -> datetime: ...
        def next_id(self) -> int: ...
        def add_app(self, *, id: int, slug: str, public_key_pem: str | bytes | None,
                    name: str | None = None, owner: str = "octo-org",
                    client_id: str | None = None, client_secret: str | None = None,
                    webhook_secret: str | None = None,
                    permissions: dict[str, str] | None = None,
                    events: list[str] | None = None, description: str = "") -> App: ...

    def create_manifest_code(self, manifest: dict[str, Any], *,
                             code: str | None = None, owner: str | None = None) -> str:
        """What GitHub hands the redirect after someone registers an App from ``manifest``.

        Validates like GitHub's registration form: ``url`` is required and every default
        event must be covered by a default permission.
        """
        if not isinstance(manifest.get("url"), str):
            raise ValueError("manifest 'url' is required")
        permissions = manifest.get("default_permissions") or {}
        needs = {"issue_comment": "issues", "issues": "issues",
                 "pull_request": "pull_requests", "pull_request_review": "pull_requests",
                 "pull_request_review_comment": "pull_requests",
                 "pull_request_review_thread": "pull_requests",
                 "check_run": "checks", "check_suite": "checks", "push": "contents"}
        unsupported = [e for e in manifest.get("default_events") or []
                       if e in needs and needs[e] not in permissions]
        if unsupported:
            raise ValueError(
                f"Default events are not supported by permissions: {', '.join(unsupported)}")
        code = code or secrets.token_hex(10)
        self.manifest_codes[code] = ManifestCode(code=code, manifest=dict(manifest),
                                                 created_at=self.now(), owner=owner)
        return code

    def convert_manifest(self, code: str) -> tuple[App, str] | None:
        """Register the App behind ``code``: (the App, its private key PEM), or None if the
        code is unknown, used, or older than an hour."""
        entry = self.manifest_codes.get(code)
        ttl = timedelta(seconds=self.settings.manifest_code_ttl_seconds)
        if entry is None or entry.used or self.now() - entry.created_at > ttl:
            return None
        entry.used = True
        manifest = entry.manifest
        private_pem, public_pem = generate_app_key()
        name = str(manifest.get("name") or f"app-{secrets.token_hex(3)}")
        slug = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")
        hook = manifest.get("hook_attributes")
        app = self.add_app(
            id=self.next_id(), slug=slug, name=name, public_key_pem=public_pem,
            owner=entry.owner or (self.app.owner.login if self.apps else "octo-org"),
            client_secret=secrets.token_hex(20),
            webhook_secret=secrets.token_hex(20) if isinstance(hook, dict) else None,
            permissions=dict(manifest.get("default_permissions") or {}),
            events=[e for e in manifest.get("default_events") or []
                    if e not in ("installation_target", "security_advisory", "meta")],
            description=str(manifest.get("description") or ""),
        )
        return app, private_pem
