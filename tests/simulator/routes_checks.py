"""Check runs, with the rules GitHub applies to them.

``POST /repos/{o}/{r}/check-runs`` and ``PATCH .../check-runs/{id}`` need ``checks: write``
and an App's installation token; a run is created on a commit the repository has (else
422 "No commit found for SHA"), its ``status`` is one of ``queued``, ``in_progress``,
``completed``, a ``conclusion`` completes it and ``completed`` needs one, ``output`` needs
a ``title`` and a ``summary`` of at most 65 535 characters (``text`` too), ``details_url``
is an http(s) URL. An App sees and updates only its own runs. ``GET
/repos/{o}/{r}/commits/{ref}/check-runs`` lists a commit's runs (``check_name``,
``status``, ``filter=latest|all``, ``app_id``), newest first, paginated inside
``{"total_count", "check_runs"}``. The simulator sends no ``check_run`` webhooks.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from .clock import parse_iso
from .models import CheckRun, Repository
from .rest import ApiError, not_found, paginate
from .routing import Ctx, Reply, RouteTable

routes = RouteTable()

CHECKS_READ, CHECKS_WRITE = ("checks", "read"), ("checks", "write")
STATUSES: Final = ("queued", "in_progress", "completed")
CONCLUSIONS: Final = ("action_required", "cancelled", "failure", "neutral", "success",
                      "skipped", "stale", "timed_out")
MAX_OUTPUT: Final = 65535
DOCS: Final = "https://docs.github.com/rest/checks/runs"


def _invalid(field: str, message: str) -> ApiError:
    return ApiError(422, "Validation Failed", errors=[
        {"resource": "CheckRun", "code": "invalid", "field": field, "message": message}],
        documentation_url=DOCS)


def _string(body: dict[str, Any], field: str, *, required: bool = False) -> str | None:
    value = body.get(field)
    if value is None:
        if required:
            raise ApiError(422, f'Invalid request.\n\n"{field}" wasn\'t supplied.',
                           documentation_url=DOCS)
        return None
    if not isinstance(value, str):
        raise ApiError(422, f"Invalid request.\n\nFor '{field}', {value!r} is not a string.",
                       documentation_url=DOCS)
    return value


def _time(body: dict[str, Any], field: str) -> datetime | None:
    value = _string(body, field)
    if value is None:
        return None
    try:
        return parse_iso(value)
    except ValueError as exc:
        raise _invalid(field, f"{field} is not a valid ISO 8601 timestamp") from exc


def _commit_known(ctx: Ctx, repo: Repository, sha: str) -> bool:
    for pr in ctx.world.pulls.values():
        if pr.issue.repo_id == repo.id and any(
                sha in (rev.head_sha, rev.base_sha) for rev in pr.revisions):
            return True
    return False


def _apply(ctx: Ctx, run: CheckRun, body: dict[str, Any]) -> None:
    """The writable fields of ``body``, checked as GitHub checks them, onto ``run``."""
    status = _string(body, "status")
    conclusion = _string(body, "conclusion")
    details_url = _string(body, "details_url")
    started_at = _time(body, "started_at")
    completed_at = _time(body, "completed_at")
    if status is not None and status not in STATUSES:
        raise _invalid("status", f"status is not included in the list ({status!r})")
    if conclusion is not None and conclusion not in CONCLUSIONS:
        raise _invalid("conclusion", f"conclusion is not included in the list ({conclusion!r})")
    if conclusion is not None:
        status = "completed"  # GitHub: a conclusion completes the run
    if (status == "completed" or completed_at is not None) and conclusion is None \
            and run.conclusion is None:
        raise _invalid("conclusion", "conclusion can't be blank when status is completed")
    if details_url is not None and not details_url.startswith(("https://", "http://")):
        raise _invalid("details_url", "details_url must be a valid URL")
    output = body.get("output")
    if output is not None:
        if not isinstance(output, dict):
            raise ApiError(422, "Invalid request.\n\nFor 'output', it is not an object.",
                           documentation_url=DOCS)
        title = _string(output, "title", required=True)
        summary = _string(output, "summary", required=True)
        text = _string(output, "text")
        for name, value in (("summary", summary), ("text", text)):
            if value is not None and len(value) > MAX_OUTPUT:
                raise _invalid(f"output.{name}",
                               f"{name} is too long (maximum is {MAX_OUTPUT} characters)")
        run.title, run.summary, run.text = title, summary, text
    if status is not None:
        run.status = status
    if conclusion is not None:
        run.conclusion = conclusion
    if run.status == "completed":
        run.completed_at = completed_at or run.completed_at or ctx.world.now()
    if started_at is not None:
        run.started_at = started_at
    if details_url is not None:
        run.details_url = details_url
    run.history.append((run.status, run.conclusion))


def _own(ctx: Ctx, *permissions: tuple[str, str]) -> tuple[Repository, CheckRun]:
    repo = ctx.repository(*permissions)
    run = ctx.world.check_runs.get(ctx.int_param("check_run_id"))
    if run is None or run.repo_id != repo.id:
        raise not_found()
    assert ctx.token is not None
    if run.app_id != ctx.token.app_id and ctx.method != "GET":
        raise ApiError(403, f"Invalid app_id `{ctx.token.app_id}` - check run can only be "
                            "modified by the GitHub App that created it.")
    return repo, run


@routes.add("POST", "/repos/{owner}/{repo}/check-runs", auth="token")
async def create_check_run(ctx: Ctx) -> Reply:
    repo = ctx.repository(CHECKS_WRITE)
    body = ctx.json()
    name = _string(body, "name", required=True)
    head_sha = _string(body, "head_sha", required=True)
    assert name is not None and head_sha is not None and ctx.token is not None
    if not name.strip():
        raise _invalid("name", "name can't be blank")
    if not _commit_known(ctx, repo, head_sha):
        raise ApiError(422, f"No commit found for SHA: {head_sha}", documentation_url=DOCS)
    world = ctx.world
    suite = next((r.check_suite_id for r in world.check_runs.values()
                  if r.repo_id == repo.id and r.head_sha == head_sha
                  and r.app_id == ctx.token.app_id), None) or world.next_id()
    run = CheckRun(id=world.next_id(), repo_id=repo.id, app_id=ctx.token.app_id, name=name,
                   head_sha=head_sha, status="queued", conclusion=None,
                   external_id=_string(body, "external_id"), details_url=None, title=None,
                   summary=None, text=None, started_at=world.now(), completed_at=None,
                   check_suite_id=suite)
    _apply(ctx, run, body)
    world.check_runs[run.id] = run
    return Reply(status=201, body=ctx.render.check_run(run))


@routes.add("PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}", auth="token")
async def update_check_run(ctx: Ctx) -> Reply:
    _, run = _own(ctx, CHECKS_WRITE)
    body = ctx.json()
    if "name" in body:
        name = _string(body, "name")
        if name is not None:
            run.name = name
    _apply(ctx, run, body)
    return Reply(body=ctx.render.check_run(run))


@routes.add("GET", "/repos/{owner}/{repo}/check-runs/{check_run_id}", auth="token")
async def get_check_run(ctx: Ctx) -> Reply:
    _, run = _own(ctx, CHECKS_READ)
    return Reply(body=ctx.render.check_run(run))


@routes.add("GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs", auth="token")
async def list_check_runs_for_ref(ctx: Ctx) -> Reply:
    repo = ctx.repository(CHECKS_READ)
    ref = ctx.params["ref"]
    runs = [r for r in ctx.world.check_runs.values()
            if r.repo_id == repo.id and r.head_sha == ref]
    if "check_name" in ctx.query:
        runs = [r for r in runs if r.name == ctx.query["check_name"]]
    if "status" in ctx.query:
        runs = [r for r in runs if r.status == ctx.query["status"]]
    if "app_id" in ctx.query:
        runs = [r for r in runs if str(r.app_id) == ctx.query["app_id"]]
    runs.sort(key=lambda r: (r.started_at, r.id), reverse=True)
    if ctx.query.get("filter", "latest") == "latest":  # the newest run of each name
        newest: dict[str, CheckRun] = {}
        for r in runs:
            newest.setdefault(r.name, r)
        runs = list(newest.values())
    chunk, link = paginate([ctx.render.check_run(r) for r in runs],
                           url=f"{ctx.base_url}{ctx.path}", query=ctx.query)
    return Reply(body={"total_count": len(runs), "check_runs": chunk},
                 headers={"link": link} if link else {})
