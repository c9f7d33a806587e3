"""The ``/_simulator/`` control API: what an in-process test does to the ``World`` object,
over HTTP, for the standalone server (local development, out-of-process tests).

    GET    /_simulator/health
    GET    /_simulator/clock                   {"now"}
    POST   /_simulator/clock                   {"advance_seconds": 3600} | {"now": ISO}
    GET    /_simulator/requests                the request record (credentials redacted)
    DELETE /_simulator/requests
    POST   /_simulator/faults                  a Fault as JSON (see faults.py) -> 201
    DELETE /_simulator/faults
    POST   /_simulator/rate-limit              {"installation_id", "remaining"}
    POST   /_simulator/manifest-codes          {"manifest": {...}} -> 201 {"code"}
    POST   /_simulator/files                   {"repo", "path", "content"} -> 204: a file on
                                               the default branch (content null: deleted)
    GET    /_simulator/events                  webhooks the world emitted, not yet delivered
    POST   /_simulator/webhooks/deliver        {"url", "content_type"?, "app_id"?} -> deliver
                                               them (each signed with its App's secret)
    POST   /_simulator/installations           {"app_slug" | "app_id"?, "account"?,
                                               "repositories"?} -> 201: install an App (the
                                               newest by default), emitting `installation`
    POST   /_simulator/issue-comments          {"repo", "number", "user", "body"} -> 201: a
                                               conversation comment, emitting `issue_comment`

These requests are not recorded, faulted or rate limited.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
from starlette.responses import Response

from . import web_pages
from .clock import iso, parse_iso
from .faults import FaultSchedule
from .rest import dump_json
from .webhooks import WebhookSender

if TYPE_CHECKING:
    from .state import World


def _reply(body: Any, status: int = 200) -> Response:
    return Response(dump_json(body), status_code=status, media_type="application/json")


def _record_json(world: World) -> list[dict[str, Any]]:
    return [{
        "method": r.method, "path": r.path, "query": r.query, "headers": r.headers,
        "body": r.body.decode("utf-8", "replace"), "status": r.status, "fault": r.fault,
        "at": iso(r.at), "monotonic": r.monotonic, "credential": r.credential,
    } for r in world.requests]


async def _deliver(world: World, data: dict[str, Any]) -> Response:
    url = data.get("url")
    if not isinstance(url, str):
        return _reply({"message": "'url' is required"}, 400)
    only = data.get("app_id")
    delivered, sent = [], set()
    async with httpx.AsyncClient(timeout=10.0) as client:
        for event in list(world.events):
            # Each event goes to the App it belongs to, signed with that App's secret.
            inst = world.installations.get(event.installation_id or -1)
            app = world.apps[inst.app_id] if inst is not None else world.app
            if only is not None and app.id != int(only):
                continue
            secret = data.get("secret") or app.webhook_secret
            if not isinstance(secret, str):
                return _reply({"message": f"App {app.id} has no webhook_secret; pass "
                                          "'secret'"}, 400)
            sender = WebhookSender(client, url=url, secret=secret, app_id=app.id,
                                   content_type=data.get("content_type", "json"),
                                   log=world.hook_log)
            built = sender.build_emitted(event)
            status: int | None
            try:
                status = (await sender.post(built)).status_code
            except httpx.TransportError:  # the App is down: GitHub logs it and moves on
                sender.lose(built)
                status = None
            sent.add(id(event))
            delivered.append({"event": event.event, "action": event.action,
                              "delivery_id": event.delivery_id, "app_id": app.id,
                              "status": status})
    # Only what was sent leaves the list: an event emitted while the deliveries were in
    # flight (the receiver's own comment, say) waits for the next call.
    world.events[:] = [e for e in world.events if id(e) not in sent]
    return _reply({"delivered": delivered})


def _installation(world: World, data: dict[str, Any]) -> Response:
    """Install an App (``app_id`` or ``app_slug``; default: the newest) on ``account``'s
    ``repositories`` (default: all), emitting the ``installation`` webhook."""
    apps = list(world.apps.values())
    if "app_slug" in data:
        found = [a for a in apps if a.slug == data["app_slug"]]
    elif "app_id" in data:
        found = [a for a in apps if a.id == int(data["app_id"])]
    else:
        found = apps[-1:]
    if not found:
        return _reply({"message": "no such App"}, 404)
    app = found[0]
    repos = data.get("repositories")
    if repos is not None and not (isinstance(repos, list) and all(isinstance(r, str)
                                                                  for r in repos)):
        raise TypeError("repositories must be a list of owner/name")
    account = str(data.get("account") or (repos[0].split("/")[0] if repos
                                          else app.owner.login))
    inst = web_pages.install(world, app_id=app.id, account=account, repositories=repos)
    return _reply({"id": inst.id, "app_id": app.id, "app_slug": app.slug,
                   "account": inst.account.login,
                   "repositories": [r.full_name for r in world.installation_repos(inst)]}, 201)


async def handle(world: World, method: str, path: str, body: bytes) -> Response:
    """Answer one control request."""
    try:
        data = json.loads(body) if body.strip() else {}
    except ValueError:
        return _reply({"message": "body must be JSON"}, 400)
    if not isinstance(data, dict):
        return _reply({"message": "body must be a JSON object"}, 400)
    route = (method, path.removeprefix("/_simulator").rstrip("/"))
    try:
        if route == ("GET", "/health"):
            return _reply({"ok": True})
        if route == ("GET", "/clock"):
            return _reply({"now": iso(world.now())})
        if route == ("POST", "/clock"):
            if "now" in data:
                world.clock.set(parse_iso(str(data["now"])))
            else:
                world.clock.advance(float(data.get("advance_seconds", 0)))
            return _reply({"now": iso(world.now())})
        if route == ("GET", "/requests"):
            return _reply(_record_json(world))
        if route == ("DELETE", "/requests"):
            world.requests.clear()
            return Response(status_code=204)
        if route == ("POST", "/faults"):
            world.faults.faults.append(FaultSchedule.fault_from_json(data))
            return _reply({"index": len(world.faults.faults) - 1}, 201)
        if route == ("DELETE", "/faults"):
            world.faults.clear()
            return Response(status_code=204)
        if route == ("POST", "/rate-limit"):
            bucket = world.limiter.set_remaining(f"installation:{int(data['installation_id'])}",
                                                 int(data["remaining"]),
                                                 world.clock.timestamp())
            return _reply(bucket.headers())
        if route == ("POST", "/files"):
            content = data["content"]
            if content is not None and not isinstance(content, str):
                raise TypeError("content must be a string or null")
            world.put_file(str(data["repo"]), str(data["path"]), content)
            return Response(status_code=204)
        if route == ("POST", "/manifest-codes"):
            return _reply({"code": world.create_manifest_code(dict(data["manifest"]))}, 201)
        if route == ("GET", "/events"):
            return _reply([{"event": e.event, "action": e.action, "delivery_id": e.delivery_id,
                            "installation_id": e.installation_id, "payload": e.payload}
                           for e in world.events])
        if route == ("POST", "/webhooks/deliver"):
            return await _deliver(world, data)
        if route == ("POST", "/installations"):
            return _installation(world, data)
        if route == ("POST", "/issue-comments"):
            comment = world.add_issue_comment(str(data["repo"]), int(data["number"]),
                                              user=str(data["user"]), body=str(data["body"]),
                                              emit=True)
            return _reply({"id": comment.id}, 201)
    except (KeyError, TypeError, ValueError) as exc:
        return _reply({"message": f"bad control request: {exc}"}, 400)
    return _reply({"message": "Not Found"}, 404)
