"""Who may trigger the App: an allowed association or a listed login, never a bot, never
the App itself — by any one of its signs."""

from __future__ import annotations

from typing import Any

import pytest

from service.config.schema import TriggersConfig
from service.intake.rules.allow import is_allowed_author, is_bot, is_own_app, login_of
from service.intake.rules.decisions import TriggerContext

CTX = TriggerContext(config=TriggersConfig(), app_id=42, app_slug="pr-reviewer")


def test_a_ghost_account_has_no_login_and_is_no_bot() -> None:
    assert login_of(None) == "" and login_of({"login": 7}) == ""
    assert login_of({"login": "alice"}) == "alice"
    assert not is_bot(None)


@pytest.mark.parametrize(("user", "bot"), [
    ({"login": "dependabot[bot]", "type": "Bot"}, True),
    ({"login": "Renovate[BOT]", "type": "User"}, True),  # the login alone is enough
    ({"login": "ci", "type": "Bot"}, True),               # so is the type
    ({"login": "alice", "type": "User"}, False),
    ({"login": "robot", "type": "User"}, False),
])
def test_a_bot_by_its_type_or_its_login(user: dict[str, Any], bot: bool) -> None:
    assert is_bot(user) is bot


@pytest.mark.parametrize(("user", "app", "own"), [
    ({"login": "pr-reviewer[bot]"}, None, True),
    ({"login": "PR-Reviewer[bot]"}, None, True),          # logins compare without case
    ({"login": "alice"}, {"id": 42}, True),               # acting through a user's token
    ({"login": "alice"}, {"id": 43}, False),
    ({"login": "alice"}, {"id": True}, False),            # bool is not an App id
    ({"login": "alice"}, {"id": "42"}, False),
    (None, None, False),
])
def test_the_app_itself_by_its_login_or_the_app_it_acted_through(
        user: dict[str, Any] | None, app: dict[str, Any] | None, own: bool) -> None:
    assert is_own_app(user, app, CTX) is own


def test_an_allowed_association_or_a_listed_login_may_trigger() -> None:
    config = TriggersConfig(allowed_associations=("OWNER", "MEMBER"), allowed_users=("Carol",))
    assert is_allowed_author({"login": "alice"}, "MEMBER", config)
    assert is_allowed_author({"login": "alice"}, "member", config)   # upper-cased
    assert not is_allowed_author({"login": "alice"}, "CONTRIBUTOR", config)
    assert is_allowed_author({"login": "carol"}, "NONE", config)     # listed, any case
    assert not is_allowed_author(None, "", config)
    assert not is_allowed_author({"login": ""}, None, config)
