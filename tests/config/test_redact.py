"""Nothing secret is posted: credential shapes, and the service's own secrets in any wrapping."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from service.config.redact import KEY_WINDOW, Redactor, redact_shapes
from service.github.client import GitHubClient
from tests.kit.thorough import examples


@pytest.fixture(scope="module")
def pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def body_of(pem: str) -> str:
    return "".join(line for line in pem.splitlines() if not line.startswith("-----"))


@pytest.mark.parametrize(("text", "kind"), [
    ("ghp_" + "A1b2" * 9, "github token"),
    ("ghs_" + "x" * 36, "github token"),
    ("github_pat_11ABCDEFG0" + "z" * 60, "github token"),
    ("sk-ant-api03-" + "Q" * 40, "anthropic key"),
    ("sk-ant-oat01-" + "q-" * 30, "anthropic key"),
    ("sk-proj-" + "k" * 48, "openai key"),
    ("sk-" + "k" * 48, "openai key"),
    ("Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOjF9.sig", "bearer token"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "private key"),
])
def test_each_credential_shape_is_redacted(text: str, kind: str) -> None:
    out, kinds = redact_shapes(f"Found this: {text} in the file.")
    assert kinds == (kind,)
    assert text not in out and out.startswith("Found this: ") and "[redacted " in out
    assert out.endswith(" in the file.")


def test_a_private_key_cut_off_before_its_end_is_redacted_to_the_end() -> None:
    out, kinds = redact_shapes("Key: -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nmore")
    assert out == "Key: [redacted private key]" and kinds == ("private key",)


def test_ordinary_review_text_is_left_alone() -> None:
    text = ("The `sk-` prefix check in auth.py misses keys; use `startswith`. "
            "See ghp_short and the BEGIN PUBLIC KEY block, which is public.")
    assert redact_shapes(text) == (text, ())
    assert Redactor(secrets=["hunter2-webhook"]).redact(text).kinds == ()


def test_the_apps_key_is_found_whatever_its_wrapping(pem: str) -> None:
    redactor = Redactor(private_keys=[pem])
    body = body_of(pem)
    piece = body[200:200 + 3 * KEY_WINDOW]
    for leaked in (
        pem,                                                    # as it is
        body,                                                   # no armour, one line
        "\n".join(body[i:i + 76] for i in range(0, len(body), 76)),  # re-wrapped
        json.dumps(pem),                                        # quoted, \n escaped
        "> " + "\n> ".join(pem.splitlines()[3:6]),              # three lines quoted
        f"The key starts {piece} and goes on",                  # a piece in prose
    ):
        done = redactor.redact(f"Finding: here it is\n{leaked}\nend")
        assert done.kinds, leaked[:40]
        for line in body_of(pem).splitlines() or [body]:
            assert line[KEY_WINDOW:2 * KEY_WINDOW] not in done.text.replace("\n", "")
        assert done.text.startswith("Finding: here it is") and done.text.endswith("end")


def test_exact_service_secrets_are_redacted_and_short_ones_ignored() -> None:
    redactor = Redactor(secrets=["whsec-0123456789", "abc"])
    done = redactor.redact("secret whsec-0123456789, and abc stays")
    assert done.text == "secret [redacted service secret], and abc stays"
    assert done.kinds == ("service secret",)


def test_for_service_takes_the_engine_credential_from_the_environment() -> None:
    redactor = Redactor.for_service(None, ["whsec-abcdefgh"], {"MY_KEY": "local-proxy-key-9"},
                                    ["MY_KEY", "UNSET"])
    assert redactor.redact("k=local-proxy-key-9 w=whsec-abcdefgh").kinds == (
        "service secret", "service secret")


def test_payloads_are_redacted_in_every_string(pem: str) -> None:
    redactor = Redactor(private_keys=[pem])
    payload = {"body": "ok", "event": "COMMENT", "commit_id": "a" * 40,
               "comments": [{"path": "src/a.py", "line": 3, "body": f"key:\n{pem}"}]}
    clean, kinds = redactor.payload(payload)
    assert kinds and "PRIVATE KEY" not in json.dumps(clean)
    assert isinstance(clean, dict) and clean["commit_id"] == "a" * 40
    assert clean["comments"][0]["path"] == "src/a.py" and clean["comments"][0]["line"] == 3


@settings(max_examples=examples(200), deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300))
def test_redaction_never_grows_a_secret_and_is_idempotent(text: str) -> None:
    redactor = Redactor(secrets=["s3cr3t-value-xyz"])
    once = redactor.redact(text + " s3cr3t-value-xyz")
    assert "s3cr3t-value-xyz" not in once.text
    assert redactor.redact(once.text).text == once.text


@pytest.mark.anyio
async def test_the_github_client_redacts_every_write_and_logs_only_the_kind(
        pem: str, caplog: pytest.LogCaptureFixture) -> None:
    sent: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(201, json={"id": 1})

    client = GitHubClient("https://api.github.com", app_jwt=lambda: "jwt",
                          clock=lambda: datetime.now(UTC), tokens=_Tokens(),
                          transport=httpx.MockTransport(handler), sleep=_no_sleep,
                          redactor=Redactor(private_keys=[pem], secrets=["whsec-topsecret"]))
    caplog.set_level(logging.WARNING)
    async with client:
        await client.post_json(1, "/repos/o/r/issues/1/comments",
                               {"body": f"The key is\n{pem}\nand whsec-topsecret"})
        await client.get_json(1, "/repos/o/r")
    posted = json.loads(sent[0])
    assert "PRIVATE KEY" not in posted["body"] and "whsec-topsecret" not in posted["body"]
    assert posted["body"].startswith("The key is")
    (record,) = [r for r in caplog.records if "redacted" in r.getMessage()]
    assert "whsec-topsecret" not in record.getMessage() + json.dumps(record.__dict__,
                                                                      default=str)
    assert "PRIVATE" not in record.getMessage()
    assert {"app private key", "service secret"} <= set(record.kinds)  # type: ignore[attr-defined]


class _Tokens:
    async def token(self, installation_id: int) -> str:
        return "ghs_" + "t" * 36

    def invalidate(self, installation_id: int, token: str) -> None:
        return None


async def _no_sleep(seconds: float) -> None:
    return None
