"""The per-job secret that authenticates preflight's store (``NCCL_DOCTOR_SECRET``).

Node 0's TCPStore answers anyone who reaches its port. With a secret, every value a launcher or a rank
writes carries an HMAC-SHA256 over (run id, key, value), so a value written by anyone without the secret,
or copied from another run or another key, is rejected when read (``RejectedValueError``). The secret comes from the
environment (srun passes it to every task, the launcher to its ranks) and is never printed or posted.

Not covered: counters written with ``add`` (a MAC cannot ride on them: preflight's counters are only hints,
``protocol.py``) and torch's own process-group keys under ``pg/``. Torch-free.
"""

from __future__ import annotations

import hashlib
import hmac
import string
from collections.abc import Mapping
from dataclasses import dataclass, field

from nccl_doctor.errors import InputError

SECRET_ENV = "NCCL_DOCTOR_SECRET"
MIN_SECRET_BYTES = 16  # `openssl rand -hex 16`: 32 hex digits
SECRET_FIX = ("export NCCL_DOCTOR_SECRET=$(openssl rand -hex 16) before srun (srun passes the environment to "
              "every task); with another launcher give every node the same value")
TAG = b"nd1:"  # an authenticated value: TAG, the MAC in hex, ":", the value
MAC_HEX = 64
DOMAIN = b"nccl-doctor preflight store v1"


class RejectedValueError(Exception):
    """A store value node 0 (or a follower) will not use: forged, malformed or too big. ``key``: whose it is."""

    def __init__(self, key: str, why: str):
        super().__init__(f"{key}: {why}")
        self.key, self.why = key, why


def secret_from_env(env: Mapping[str, str]) -> bytes | None:
    """The secret's bytes (hex digits are decoded), None when unset; a short one is an input error that
    never shows the value."""
    text = env.get(SECRET_ENV)
    if text is None:
        return None
    text = text.strip()
    hexed = len(text) % 2 == 0 and all(c in string.hexdigits for c in text)
    key = bytes.fromhex(text) if hexed and text else text.encode()
    if len(key) < MIN_SECRET_BYTES:
        raise InputError(f"{SECRET_ENV} is too short ({len(key)} bytes; at least {MIN_SECRET_BYTES}, "
                         f"{2 * MIN_SECRET_BYTES} hex digits): {SECRET_FIX}")
    return key


def without_secret(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` less the secret: what may be probed, compared between nodes and reported."""
    return {k: v for k, v in env.items() if k != SECRET_ENV}


@dataclass(frozen=True)
class Seal:
    """Seals and opens the store values of one run. No secret: values travel as they are (unauthenticated)."""

    secret: bytes | None = field(default=None, repr=False)
    run: str = ""

    @property
    def authenticated(self) -> bool:
        return self.secret is not None

    def mac(self, key: str, value: bytes) -> bytes:
        if self.secret is None:
            raise RuntimeError("no secret")
        run, name = self.run.encode(), key.encode()
        msg = b"%s\0%d:%s%d:%s" % (DOMAIN, len(run), run, len(name), name) + value
        return hmac.new(self.secret, msg, hashlib.sha256).hexdigest().encode()

    def seal(self, key: str, value: bytes) -> bytes:
        if self.secret is None:
            return value
        return TAG + self.mac(key, value) + b":" + value

    def open(self, key: str, raw: bytes) -> bytes:
        """The value ``raw`` carries, or ``RejectedValueError`` when its MAC does not verify."""
        if self.secret is None:
            if raw.startswith(TAG):
                raise RejectedValueError(key, f"it is sealed with a secret this node lacks: export the same "
                                              f"{SECRET_ENV} on every node")
            return raw
        head, body = raw[:len(TAG) + MAC_HEX + 1], raw[len(TAG) + MAC_HEX + 1:]
        if not (head.startswith(TAG) and head.endswith(b":")):
            raise RejectedValueError(key, f"it carries no MAC: written without {SECRET_ENV} (forged, or by a "
                                          "node of this job that lacks the secret)")
        if not hmac.compare_digest(head[len(TAG):-1], self.mac(key, body)):
            raise RejectedValueError(key, f"its MAC does not verify with {SECRET_ENV}: forged, or written under "
                                          "another secret, run or key")
        return body
