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
    GET    /_simulator/events                  webhooks the world emitted, not yet delivered
    POST   /_simulator/webhooks/deliver        {"url", "content_type"?} -> deliver them all

These requests are not recorded, faulted or rate limited.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
from starlette.responses import Response

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
    secret = data.get("secret") or world.app.webhook_secret
    if not isinstance(secret, str):
        return _reply({"message": "the App has no webhook_secret; pass 'secret'"}, 400)
    delivered = []
    async with httpx.AsyncClient(timeout=10.0) as client:
        sender = WebhookSender(client, url=url, secret=secret, app_id=world.app.id,
                               content_type=data.get("content_type", "json"))
        while world.events:
            event = world.events.pop(0)
            response = await sender.send_emitted(event)
            delivered.append({"event": event.event, "action": event.action,
                              "delivery_id": event.delivery_id,
                              "status": response.status_code})
    return _reply({"delivered": delivered})


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
    except (KeyError, TypeError, ValueError) as exc:
        return _reply({"message": f"bad control request: {exc}"}, 400)
    return _reply({"message": "Not Found"}, 404)
