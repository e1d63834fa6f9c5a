"""The store's seal: a value opens only under the secret, run and key it was sealed for; a short secret is
one input error that never shows the value; the secret never reaches the probe."""

from __future__ import annotations

import pytest

from nccl_doctor.errors import InputError
from nccl_doctor.preflight.auth import SECRET_ENV, RejectedValueError, Seal, secret_from_env, without_secret

SECRET = "9f" * 16


def test_a_sealed_value_opens_only_for_its_secret_run_and_key():
    seal = Seal(secret_from_env({SECRET_ENV: SECRET}), "12.0")
    sealed = seal.seal("verdict", b'{"code": 0}')
    assert sealed != b'{"code": 0}' and seal.open("verdict", sealed) == b'{"code": 0}'
    for other, key in ((Seal(bytes(16), "12.0"), "verdict"), (Seal(seal.secret, "12.1"), "verdict"),
                       (seal, "result")):
        with pytest.raises(RejectedValueError, match="does not verify"):
            other.open(key, sealed)
    with pytest.raises(RejectedValueError, match="carries no MAC"):
        seal.open("verdict", b'{"code": 0}')
    tampered = sealed[:-1] + b"1"
    with pytest.raises(RejectedValueError, match="does not verify") as info:
        seal.open("verdict", tampered)
    assert info.value.key == "verdict"


def test_without_a_secret_values_travel_as_they_are():
    seal = Seal(None, "12.0")
    assert not seal.authenticated and seal.seal("k", b"v") == b"v" and seal.open("k", b"v") == b"v"
    sealed = Seal(bytes(16), "12.0").seal("k", b"v")  # a node that has the secret wrote it
    with pytest.raises(RejectedValueError, match="sealed with a secret this node lacks"):
        seal.open("k", sealed)


def test_the_secret_is_read_from_hex_or_text_and_must_be_long_enough():
    assert secret_from_env({}) is None
    assert secret_from_env({SECRET_ENV: SECRET}) == bytes.fromhex(SECRET)
    assert secret_from_env({SECRET_ENV: "a passphrase of 24 chars"}) == b"a passphrase of 24 chars"
    for short in ("", "0123abcd", "ab" * 15, "short text"):
        with pytest.raises(InputError, match="NCCL_DOCTOR_SECRET is too short") as info:
            secret_from_env({SECRET_ENV: short})
        assert "\n" not in str(info.value) and (not short or short not in str(info.value))
        assert "openssl rand -hex 16" in str(info.value)


def test_the_secret_is_never_in_what_is_probed_or_in_a_seals_repr():
    assert without_secret({SECRET_ENV: SECRET, "NCCL_DEBUG": "INFO"}) == {"NCCL_DEBUG": "INFO"}
    assert SECRET not in repr(Seal(bytes.fromhex(SECRET), "1.0")) and "9f9f" not in repr(Seal(b"\x9f" * 16, "1"))
