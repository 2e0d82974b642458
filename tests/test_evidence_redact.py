"""Credential redaction before storage, and the pure codec helpers."""

from __future__ import annotations

import pytest

from amos.evidence import (
    REDACTED,
    EvidenceScope,
    is_credential_key,
    redact,
    redact_text,
    resolve_scope,
)
from amos.evidence.codec import id_time_ms, next_record_id, normalize_id, time_key


@pytest.mark.parametrize("key", [
    "api_key", "apiKey", "API-KEY", "apikey", "Authorization", "token", "access_token",
    "refresh-token", "password", "passwd", "secret", "client_secret", "private_key",
    "Cookie", "Set-Cookie", "x-api-key", "X_API_KEY", "OPENAI_API_KEY", "github_token",
    "aws_secret_access_key", "Proxy-Authorization",
])
def test_credential_keys(key):
    assert is_credential_key(key)


@pytest.mark.parametrize("key", [
    "path", "tokens", "max_tokens", "input_tokens", "keys", "author", "content", "signature",
    "secretary_name", "pwd",
])
def test_ordinary_keys(key):
    assert not is_credential_key(key)


def test_nested_keys_and_secret_values():
    secret = "sk-live-1234567890"
    value = {
        "headers": {"Authorization": "Bearer abc", "Accept": "json", "X-Api-Key": ["k1", "k2"]},
        "body": [{"config": {"password": "hunter2", "user": "me"}}, ("t", {"refresh_token": 1})],
        "echo": f"the key is {secret}!",
        f"weird-{secret}": "key name holds it",
        "pairs": [{"name": "Cookie", "value": "sid=1"}, {"name": "Accept", "value": "*/*"}],
        "usage": {"max_tokens": 100, "token": None},
        "n": 3,
    }
    original = repr(value)
    out = redact(value, [secret, "", "ab"])
    assert repr(value) == original  # input untouched
    assert out["headers"] == {"Authorization": REDACTED, "Accept": "json", "X-Api-Key": REDACTED}
    assert out["body"][0]["config"] == {"password": REDACTED, "user": "me"}
    assert out["body"][1] == ("t", {"refresh_token": REDACTED})
    assert out["echo"] == f"the key is {REDACTED}!"
    assert out[f"weird-{REDACTED}"] == "key name holds it"
    assert out["pairs"] == [{"name": "Cookie", "value": REDACTED}, {"name": "Accept", "value": "*/*"}]
    assert out["usage"] == {"max_tokens": 100, "token": None}
    assert out["n"] == 3
    assert secret not in repr(out) and "hunter2" not in repr(out)


def test_overlapping_secrets_longest_first():
    assert redact_text("abcdefghijkl and abcdefgh", ["abcdefgh", "abcdefghijkl"]) == f"{REDACTED} and {REDACTED}"
    assert redact_text("a 7-char secret: abcdefg", ["abcdefg"]) == "a 7-char secret: abcdefg"  # below the minimum
    assert redact("plain", []) == "plain"


def test_cycle_and_depth_raise():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError):
        redact(loop)
    deep: list = []
    for _ in range(300):
        deep = [deep]
    with pytest.raises(ValueError):
        redact(deep)


def test_ids_strictly_increase_and_encode_time():
    now = 1_790_000_000_123
    first = next_record_id(None, now)
    assert id_time_ms(first) == now and first[14] == "7"
    ids = [first]
    for _ in range(1000):
        ids.append(next_record_id(ids[-1], now - 5000))  # clock stuck or going back
    assert ids == sorted(set(ids))
    assert time_key(now) <= first < time_key(now + 1)
    assert normalize_id(first.upper()) == first


def test_resolve_scope_defaults():
    class Cfg:
        owner_id = None
        tenant_id = "acme"
        namespace = None

    scope = resolve_scope(Cfg(), owner_id="carol")
    assert scope == EvidenceScope(owner_id="carol", namespace="default", tenant_id="acme")
    assert resolve_scope().owner_id


def test_coerce_reference():
    from amos.evidence import EvidenceError, EvidenceReference, coerce_reference

    ref = EvidenceReference(id="01900000-0000-7000-8000-000000000001", sha256="a" * 64, size=3,
                            acknowledgement="fsync")
    assert coerce_reference(ref) is ref
    assert coerce_reference(ref.model_dump()) == ref
    assert coerce_reference(ref.model_dump_json()) == ref
    for bad in ({**ref.model_dump(), "sha256": "xyz"}, {"id": ref.id}, "nope", 42,
                {**ref.model_dump(), "extra": 1}, {**ref.model_dump(), "id": "../x"}):
        with pytest.raises(EvidenceError) as info:
            coerce_reference(bad)
        assert info.value.code == "invalid"
