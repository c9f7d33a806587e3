"""A repository's ``.github/pr-review-agent.yml``: read, merged, applied — through the simulator.

The files are served by the simulator's contents API (real git for the repository, so a
file on a pull request's head branch exists and must be ignored; ETags and 304s as
GitHub's). The merge is org → repo → the operator's ``repository_config.allow``; the
ingest decides the automatic-review switches from the last read; the worker reads it
afresh, declines what the file turned off and applies the rest; a broken file of any
kind changes nothing and is named.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from service.config.repository.keys import FILE_PATH, RepoSettings
from service.config.repository.merge import org_label, triggers
from service.config.schema import RepositoryConfigConfig, TriggersConfig
from service.engine.prompt import build_prompt
from service.intake.rules.classify import classify_pull_request
from service.intake.rules.decisions import Enqueue, Ignore
from service.publish import compose
from service.publish.checks import text
from service.review.installations import Installations
from service.review.job import JobRunner
from service.review.repository_config import RepositoryConfigs, org_url, repo_url
from service.storage import checks as checks_table
from service.storage.checks import CheckState
from tests.poller_rig import PollerRig
from tests.publisher_rig import publication
from tests.simulator.models import PullRequest
from tests.worker_helpers import REPO, Sim, build_sim, close_sim

ORG_REPO = "acme/.github"


# -- reading from GitHub -----------------------------------------------------------------------

@pytest.fixture
async def sim(tmp_path: Path) -> Sim:  # type: ignore[misc]
    s = build_sim(tmp_path)
    # The organisation's .github repository, on the same installation.
    org = s.world.add_repository(ORG_REPO)
    next(iter(s.world.installations.values())).repository_ids.add(org.id)
    try:
        yield s
    finally:
        await close_sim(s)


def configs(sim: Sim, **allow: object) -> RepositoryConfigs:
    config = RepositoryConfigConfig(**allow)  # type: ignore[arg-type]
    return RepositoryConfigs(store=sim.store, github=sim.github, clock=sim.now,
                             config=lambda: config)


def commit_on_main(sim: Sim, files: dict[str, str | None]) -> None:
    sim.world.put_file(REPO, next(iter(files)), next(iter(files.values())))
    sim.base_sha = sim.git.ref("refs/heads/main")


def contents_requests(sim: Sim) -> list[tuple[str, int | None, bool]]:
    return [(r.path, r.status, "if-none-match" in r.headers)
            for r in sim.world.requests.matching("GET", "/repos/*/contents/*")]


@pytest.mark.anyio
async def test_the_file_is_read_from_the_default_branch_never_the_head(sim: Sim) -> None:
    commit_on_main(sim, {FILE_PATH: "auto_review: false\n"})
    # The pull request's head says otherwise: it must not change the rules it is reviewed by.
    sim.open_pr({"src/app.py": "changed\n", FILE_PATH: "auto_review: true\n"})
    found = await configs(sim).fresh(sim.installation_id, REPO)
    assert found.settings.auto_review is False and found.applied == (FILE_PATH,)


@pytest.mark.anyio
async def test_an_unchanged_file_is_revalidated_for_nothing(sim: Sim) -> None:
    commit_on_main(sim, {FILE_PATH: "language: de\n"})
    sim.world.put_file(ORG_REPO, FILE_PATH, "language: fr\non_push: true\n")
    reader = configs(sim)
    first = await reader.fresh(sim.installation_id, REPO)
    remaining = sim.github.rate_limit(sim.installation_id).remaining  # type: ignore[union-attr]
    sim.world.requests.clear()
    second = await reader.fresh(sim.installation_id, REPO)
    assert first == second
    assert second.settings.language == "de" and second.settings.on_push is True
    assert contents_requests(sim) == [
        ("/repos/acme/.github/contents/.github/pr-review-agent.yml", 304, True),
        ("/repos/acme/widgets/contents/.github/pr-review-agent.yml", 304, True)]
    assert sim.github.rate_limit(  # type: ignore[union-attr]
        sim.installation_id).remaining == remaining
    # A change on the default branch is seen at the next read.
    commit_on_main(sim, {FILE_PATH: "language: pt-BR\n"})
    assert (await reader.fresh(sim.installation_id, REPO)).settings.language == "pt-BR"


@pytest.mark.anyio
async def test_no_files_apply_nothing_and_say_nothing(
        sim: Sim, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    found = await configs(sim).fresh(sim.installation_id, REPO)
    assert found.settings == RepoSettings() and found.notes == ()
    assert [status for _, status, _ in contents_requests(sim)] == [404, 404]
    # An absent file is the usual case, not a failure: nothing at INFO or above says so.
    assert [r.getMessage() for r in caplog.records if r.name.startswith("service")
            and ("404" in r.getMessage() or getattr(r, "http_status", None) == 404)] == []


@pytest.mark.anyio
async def test_an_empty_allow_list_reads_nothing(sim: Sim) -> None:
    commit_on_main(sim, {FILE_PATH: "auto_review: false\n"})
    found = await configs(sim, allow=()).fresh(sim.installation_id, REPO)
    assert found.settings == RepoSettings() and contents_requests(sim) == []


BROKEN = {
    "not YAML": ("auto_review: [\n", "line 2"),
    "an unknown key": ("auto_reveiw: false\n", "auto_reveiw: unknown key (did you mean "
                                                "auto_review?)"),
    "a wrong type": ("max_findings: many\n", "line 1: max_findings:"),
    "a list at the top": ("- auto_review\n", "the file must be a mapping"),
    "too large": ("# " + "x" * (70 * 1024) + "\n", "more than the 65 536"),
    "not UTF-8": (b"language: \xff\n", "not UTF-8"),
}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_a_broken_file_changes_nothing_and_is_named(sim: Sim, kind: str) -> None:
    content, expected = BROKEN[kind]
    sim.world.put_file(REPO, FILE_PATH, content)
    found = await configs(sim).fresh(sim.installation_id, REPO)
    assert found.settings == RepoSettings() and found.applied == ()
    assert len(found.notes) >= 1 and found.notes[0].startswith(f"{FILE_PATH}: ")
    assert expected in found.notes[0], found.notes


@pytest.mark.anyio
async def test_a_directory_at_the_path_is_named(sim: Sim) -> None:
    sim.world.put_file(REPO, f"{FILE_PATH}/inner.yml", "x: 1\n")
    found = await configs(sim).fresh(sim.installation_id, REPO)
    assert found.problems == (f"{FILE_PATH}: {FILE_PATH} is a directory, not a file",)


@pytest.mark.anyio
async def test_github_failing_keeps_the_last_read_or_applies_none(sim: Sim) -> None:
    reader = configs(sim)
    sim.world.faults.add(method="GET", path_glob="/repos/acme/widgets/contents/*",
                         status=403, times=None)
    first = await reader.fresh(sim.installation_id, REPO)
    assert first.settings == RepoSettings()
    assert first.problems == (
        f"{FILE_PATH}: GitHub would not serve the file (403 Injected fault)",)
    sim.world.faults.clear()
    commit_on_main(sim, {FILE_PATH: "language: de\n"})
    assert (await reader.fresh(sim.installation_id, REPO)).settings.language == "de"
    sim.world.faults.add(method="GET", path_glob="/repos/acme/widgets/contents/*",
                         status=502, times=None)
    kept = await reader.fresh(sim.installation_id, REPO)
    assert kept.settings.language == "de" and kept.notes == ()  # the rules do not flap


@pytest.mark.anyio
async def test_a_stale_read_is_refreshed_and_a_fresh_one_costs_nothing(sim: Sim) -> None:
    reader = configs(sim, refresh_minutes=10)
    await reader.refresh_if_stale(sim.installation_id, REPO, sim.now())
    assert len(contents_requests(sim)) == 2
    sim.world.requests.clear()
    sim.world.clock.advance(9 * 60)
    await reader.refresh_if_stale(sim.installation_id, REPO, sim.now())
    assert contents_requests(sim) == []
    sim.world.clock.advance(2 * 60)
    await reader.refresh_if_stale(sim.installation_id, REPO, sim.now())
    assert len(contents_requests(sim)) == 2


def test_the_urls_name_the_default_branch_and_the_organisation() -> None:
    assert repo_url("acme/widgets") == "/repos/acme/widgets/contents/.github/pr-review-agent.yml"
    assert org_url("acme/widgets") == "/repos/acme/.github/contents/.github/pr-review-agent.yml"
    assert org_label("acme") == "acme/.github: .github/pr-review-agent.yml"


# -- the ingest: the last read decides -----------------------------------------------------------

@pytest.mark.anyio
async def test_the_poller_reads_a_repositorys_switches_before_deciding(tmp_path: Path) -> None:
    rig = PollerRig.create(tmp_path)
    try:
        reader = RepositoryConfigs(store=rig.store, github=rig.client,
                                   clock=rig.world.clock.now)
        rig.ctx = replace(rig.ctx, repo_triggers=reader.triggers)
        rig.poller = rig.new_poller(before_poll=reader.refresh_if_stale)
        rig.open_pull(1)
        rig.tick()
        await rig.poll()  # the cold start: nothing from before the install is enqueued
        rig.tick()
        rig.open_pull(2, draft=True)
        rig.tick()
        await rig.poll()
        assert rig.rows() == []  # a draft, and no file says otherwise
        # The team commits `drafts: true`; the next cycle re-reads the stale file first.
        rig.world.put_file(rig_repo(rig), FILE_PATH, "drafts: true\n")
        rig.world.clock.advance(11 * 60)
        rig.open_pull(3, draft=True)
        rig.tick()
        await rig.poll()
        assert [r.pr_number for r in rig.rows("pending")] == [3]
        assert reader.triggers(rig_repo(rig)).drafts is True
    finally:
        await rig.close()


def rig_repo(rig: PollerRig) -> str:
    return next(iter(rig.world.repos.values())).full_name


def test_the_trigger_rules_use_the_repositorys_switches() -> None:
    from service.intake.rules.decisions import TriggerContext

    def pr(draft: bool) -> dict[str, object]:
        return {"number": 3, "state": "open", "draft": draft, "author_association": "MEMBER",
                "user": {"login": "alice", "id": 5, "type": "User"},
                "head": {"sha": "b" * 40}}

    def ctx(settings: RepoSettings) -> TriggerContext:
        return TriggerContext(config=TriggersConfig(), app_id=1, app_slug="bot",
                              repo_triggers=lambda repo: triggers(TriggersConfig(), settings))

    assert isinstance(classify_pull_request(pr(False), "o/r", ctx(RepoSettings())), Enqueue)
    off = classify_pull_request(pr(False), "o/r", ctx(RepoSettings(auto_review=False)))
    assert isinstance(off, Ignore) and off.reason == "auto_review_off"
    assert classify_pull_request(pr(True), "o/r", ctx(RepoSettings())) == Ignore("draft")
    assert isinstance(classify_pull_request(pr(True), "o/r", ctx(RepoSettings(drafts=True))),
                      Enqueue)
    pushed = classify_pull_request(pr(False), "o/r", ctx(RepoSettings(on_push=True)),
                                   pushed=True)
    assert isinstance(pushed, Enqueue)
    assert classify_pull_request(pr(False), "o/r", ctx(RepoSettings()), pushed=True) == Ignore(
        "on_push_off")


# -- the worker: read afresh, declined or applied --------------------------------------------

def runner(sim: Sim, reader: RepositoryConfigs) -> JobRunner:
    return JobRunner(
        store=sim.store, leasing=sim.queue.leasing, governor=sim.governor, github=sim.github,
        installations=Installations(sim.store, sim.github), checkouts=sim.checkouts,
        engine=sim.engine, publisher=sim.publisher, clock=sim.world.clock.now,
        config=sim.config, tuning=sim.tuning, repo_configs=reader)


def check_of(sim: Sim, key: str) -> CheckState:
    with sim.store.read() as tx:
        (row,) = checks_table.rows(tx, key)
    return row.state


def open_pr(sim: Sim) -> PullRequest:
    return sim.open_pr({"src/app.py": "".join(f"line {i}\n" for i in range(1, 25)),
                        "docs/gen/api.md": "generated\n", "notes.snap": "snap\n"})


@pytest.mark.anyio
async def test_an_automatic_review_the_file_turned_off_is_declined_and_says_so(
        sim: Sim) -> None:
    commit_on_main(sim, {FILE_PATH: "auto_review: false\n"})
    pr = open_pr(sim)
    key = sim.enqueue_opened(pr)  # the ingest decided on an older read
    await runner(sim, configs(sim))(sim.claim())
    assert sim.engine.requests == [] and sim.status(key) == "done"
    assert sim.ledger(key)[0]["used_tokens"] == 0
    state = check_of(sim, key)
    assert (state.conclusion, state.title) == (
        "neutral", "Not reviewed: the repository's config sets auto_review: false")
    assert "@claude review" in state.summary
    # Somebody asking is always answered.
    mention_key, _ = sim.enqueue_mention(pr)
    await runner(sim, configs(sim))(sim.claim())
    assert len(sim.engine.requests) == 1 and sim.status(mention_key) == "done"


@pytest.mark.anyio
async def test_the_files_keys_reach_the_review(sim: Sim) -> None:
    sim.world.put_file(ORG_REPO, FILE_PATH, "language: de\ninstructions: Org words.\n")
    commit_on_main(sim, {"docs/rules.md": "Repo rules: no globals.\n"})
    commit_on_main(sim, {FILE_PATH: "excluded_paths: ['docs/gen/**', '*.snap']\n"
                                    "guidelines: docs/rules.md\n"
                                    "instructions: Flag any SQL built from strings.\n"
                                    "path_instructions:\n"
                                    "  - {path: 'src/**', instructions: Check the types.}\n"
                                    "  - {path: 'db/**', instructions: Reversible.}\n"})
    pr = open_pr(sim)
    sim.enqueue_opened(pr)
    await runner(sim, configs(sim))(sim.claim())
    (request,) = sim.engine.requests
    assert request.changed_paths == ("src/app.py",)  # the operator's and the file's excluded
    assert request.guidelines == "Repo rules: no globals.\n"
    assert request.instructions == "Flag any SQL built from strings."
    assert request.language == "de"  # the organisation's, not overridden
    prompt = build_prompt(request)
    assert "<repository_instructions>" in prompt and "Flag any SQL" in prompt
    assert "in de;" in prompt
    # Only the rules whose paths the change touches.
    assert request.path_instructions == (("src/**", "Check the types."),)
    assert '<repository_instructions paths="src/**">\nCheck the types.' in prompt


@pytest.mark.anyio
async def test_a_broken_file_reviews_with_the_defaults(sim: Sim) -> None:
    commit_on_main(sim, {FILE_PATH: "excluded_paths: ['**']\nauto_review: nope\n"})
    pr = open_pr(sim)
    sim.enqueue_opened(pr)
    await runner(sim, configs(sim))(sim.claim())
    (request,) = sim.engine.requests
    assert "docs/gen/api.md" in request.changed_paths  # nothing of the file applied
    assert request.guidelines == "Base rules: check error handling.\n"


def test_the_notes_go_on_the_check_run_and_in_the_reply() -> None:
    state = text.with_config_notes(text.superseded(None), ("a: line 1: x: unknown key",))
    assert state.summary.endswith("**Repository config**\n\n- a: line 1: x: unknown key")
    many = text.with_config_notes(text.superseded(None), tuple(f"n{i}" for i in range(25)))
    assert "… and 5 more" in many.summary
    assert text.with_config_notes(text.superseded(None), ()) == text.superseded(None)


def test_a_reply_names_the_problems_with_the_trigger_phrase_neutralised() -> None:
    post = compose.review(publication(), (), (), phrase="@claude",
                          config_notes=("f: line 2: @claude review: bad",))
    assert "The repository's config was not fully applied" in post.body
    assert "line 2" in post.body and "@claude review" not in post.body
    assert "not fully applied" not in compose.review(publication(), (), (),
                                                     phrase="@claude").body


@pytest.mark.anyio
async def test_a_client_without_validators_reads_with_plain_gets(
        sim: Sim, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim.github, "_etags", None)  # as `pr-review-agent review` may build it
    assert not sim.github.conditional
    commit_on_main(sim, {FILE_PATH: "language: de\n"})
    found = await configs(sim).fresh(sim.installation_id, REPO)
    assert found.settings.language == "de"
    assert [(status, sent) for _, status, sent in contents_requests(sim)] == [
        (404, False), (200, False)]
