"""Webhook signature verification and body parsing (service.github.webhooks)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from urllib.parse import urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.config.secret import Secret
from service.github.webhooks import (
    PayloadError,
    SignatureError,
    check_signature,
    parse_body,
    sign,
    verify_signature,
)
from tests.kit.thorough import examples

# GitHub's published test vector (docs: "Validating webhook deliveries").
VECTOR_SECRET = "It's a Secret to Everybody"
VECTOR_BODY = b"Hello, World!"
VECTOR_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def _flip(data: bytes, bit: int) -> bytes:
    index, offset = divmod(bit, 8)
    flipped = bytearray(data)
    flipped[index] ^= 1 << offset
    return bytes(flipped)


def test_github_test_vector_signs_and_verifies() -> None:
    assert sign(VECTOR_BODY, VECTOR_SECRET) == VECTOR_SIGNATURE
    assert verify_signature(VECTOR_BODY, VECTOR_SIGNATURE, [VECTOR_SECRET])
    check_signature(VECTOR_BODY, VECTOR_SIGNATURE, [VECTOR_SECRET.encode()])
    check_signature(VECTOR_BODY, VECTOR_SIGNATURE, [Secret(VECTOR_SECRET)])


def test_vector_with_a_different_secret_is_a_mismatch() -> None:
    with pytest.raises(SignatureError) as err:
        check_signature(VECTOR_BODY, VECTOR_SIGNATURE, ["not the secret"])
    assert err.value.reason == "mismatch"


@settings(max_examples=examples(200), deadline=None)
@given(
    body=st.binary(min_size=1, max_size=512),
    secret=st.text(min_size=1, max_size=64),
    data=st.data(),
)
def test_any_single_flipped_bit_in_the_body_fails(
    body: bytes, secret: str, data: st.DataObject
) -> None:
    header = sign(body, secret)
    assert verify_signature(body, header, [secret])
    bit = data.draw(st.integers(min_value=0, max_value=len(body) * 8 - 1))
    assert not verify_signature(_flip(body, bit), header, [secret])


@settings(max_examples=examples(300), deadline=None)
@given(body=st.binary(max_size=256), secret=st.text(min_size=1, max_size=64), data=st.data())
def test_any_single_flipped_bit_in_the_signature_fails(
    body: bytes, secret: str, data: st.DataObject
) -> None:
    raw = sign(body, secret).encode("latin-1")
    bit = data.draw(st.integers(min_value=0, max_value=len(raw) * 8 - 1))
    # Header values reach the app as latin-1 text, so every byte value is representable.
    tampered = _flip(raw, bit).decode("latin-1")
    assert not verify_signature(body, tampered, [secret])


def test_rotation_accepts_any_configured_secret() -> None:
    body = b'{"zen": "Keep it logically awesome."}'
    old, new = Secret("old-secret-value"), Secret("new-secret-value")
    signed_old = sign(body, old)
    signed_new = sign(body, new)
    assert verify_signature(body, signed_old, [new, old])
    assert verify_signature(body, signed_new, [new, old])
    assert not verify_signature(body, signed_old, [new])


@pytest.mark.parametrize("secrets", [[], [""], [b""], [Secret("")]])
def test_no_configured_secret_rejects_everything(secrets: list[object]) -> None:
    with pytest.raises(SignatureError) as err:
        check_signature(VECTOR_BODY, VECTOR_SIGNATURE, secrets)  # type: ignore[arg-type]
    assert err.value.reason == "no_secret"


@pytest.mark.parametrize("header", [None, ""])
def test_missing_header_is_rejected(header: str | None) -> None:
    with pytest.raises(SignatureError) as err:
        check_signature(VECTOR_BODY, header, [VECTOR_SECRET])
    assert err.value.reason == "missing"


def test_sha1_prefix_is_refused_even_when_its_digest_is_right() -> None:
    sha1 = hmac.new(VECTOR_SECRET.encode(), VECTOR_BODY, hashlib.sha1).hexdigest()
    with pytest.raises(SignatureError) as err:
        check_signature(VECTOR_BODY, f"sha1={sha1}", [VECTOR_SECRET])
    assert err.value.reason == "unsupported_algorithm"
    assert "sha1" in str(err.value)


@pytest.mark.parametrize(
    "header",
    [
        "sha256=",
        "sha256=xyz",
        VECTOR_SIGNATURE.upper().replace("SHA256=", "sha256="),  # upper-case hex
        VECTOR_SIGNATURE + "00",
        VECTOR_SIGNATURE[:-1],
        " " + VECTOR_SIGNATURE,
    ],
)
def test_malformed_headers_are_rejected(header: str) -> None:
    with pytest.raises(SignatureError) as err:
        check_signature(VECTOR_BODY, header, [VECTOR_SECRET])
    assert err.value.reason in {"malformed", "unsupported_algorithm"}


def test_sign_refuses_an_empty_secret() -> None:
    with pytest.raises(ValueError):
        sign(b"x", "")


def test_failures_never_reveal_the_secret_or_expected_digest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "super-secret-webhook-value-123"
    expected = sign(VECTOR_BODY, secret)
    caplog.set_level(logging.DEBUG)
    headers = [None, "", "sha1=abc", "sha256=zz", "sha256=" + "0" * 64, expected[:-1] + "0"]
    messages = []
    for header in headers:
        with pytest.raises(SignatureError) as err:
            check_signature(VECTOR_BODY, header, [secret])
        messages += [str(err.value), repr(err.value)]
    for text in messages + [r.getMessage() for r in caplog.records]:
        assert secret not in text
        assert expected[len("sha256="):] not in text


# ---------------------------------------------------------------- parse_body


def test_json_body_parsed() -> None:
    payload = {"action": "opened", "number": 7, "pull_request": {"draft": False}}
    body = json.dumps(payload).encode()
    assert parse_body(body, "application/json") == payload
    assert parse_body(body, "application/json; charset=utf-8") == payload
    assert parse_body(body, None) == payload


def test_form_encoded_body_parsed() -> None:
    payload = {"action": "created", "comment": {"body": "@claude review & more = fun"}}
    body = urlencode({"payload": json.dumps(payload)}).encode()
    assert parse_body(body, "application/x-www-form-urlencoded") == payload


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # orjson refuses these; the standard library reads them as it always did.
        (b'{"action": "\\ud800"}', {"action": "\ud800"}),  # a lone surrogate
        ('{"action": "opened"}'.encode("utf-16"), {"action": "opened"}),
        (b'{"big": 1e400}', {"big": float("inf")}),
        # Both read these alike.
        (b'{"id": 9223372036854775808}', {"id": 2**63}),
        (b'{"a": 1, "a": 2}', {"a": 2}),
    ],
)
def test_what_orjson_refuses_the_standard_library_decides(body: bytes,
                                                          expected: dict[str, object]) -> None:
    assert parse_body(body, "application/json") == expected


def test_an_integer_beyond_64_bits_is_no_integer_and_so_never_an_id() -> None:
    value = parse_body(b'{"id": 18446744073709551616}', None)["id"]
    assert not isinstance(value, int) or value >= 2**64  # a float from orjson


@given(payload=st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20))
@settings(max_examples=examples(200), deadline=None)
def test_parse_body_reads_any_payload_as_the_standard_library_does(payload: object) -> None:
    body = json.dumps({"payload": payload}).encode()
    assert parse_body(body, "application/json") == json.loads(body)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"", "application/json"),
        (b"not json", "application/json"),
        (b"[1, 2, 3]", "application/json"),
        (b'"a string"', "application/json"),
        (b"\xff\xfe{}", "application/json"),
        (b'{"n": NaN}', "application/json"),
        (b"[" * 100_000 + b"]" * 100_000, "application/json"),
        (b"payload=not-json", "application/x-www-form-urlencoded"),
        (b"other=%7B%7D", "application/x-www-form-urlencoded"),
        (b"payload=%7B%7D&payload=%7B%7D", "application/x-www-form-urlencoded"),
        (b"payload=%FF", "application/x-www-form-urlencoded"),
        (b"", "application/x-www-form-urlencoded"),
        (b"{}", "text/plain"),
    ],
)
def test_garbage_raises_payload_error(body: bytes, content_type: str) -> None:
    with pytest.raises(PayloadError):
        parse_body(body, content_type)


@settings(max_examples=examples(300), deadline=None)
@given(
    body=st.binary(max_size=300),
    content_type=st.sampled_from(
        ["application/json", "application/x-www-form-urlencoded", None, "text/html"]
    ),
)
def test_parse_body_raises_only_payload_error(body: bytes, content_type: str | None) -> None:
    try:
        result = parse_body(body, content_type)
    except PayloadError:
        return
    assert isinstance(result, dict)
