"""``preflight.store.Store`` in one process, over the dict-backed fake (``tests/helpers/fake_store.py``):
sealing and opening, ``read_all``'s one round trip and its cache, counters, and the fake's own waits."""

from __future__ import annotations

import json
import threading
import time

import pytest

from nccl_doctor.preflight.auth import RejectedValueError, Seal
from nccl_doctor.preflight.store import NOT_A_COUNT, Store
from tests.helpers.fake_store import FakeStore, StoreTimeoutError

SECRET = b"0123456789abcdef0123456789abcdef"


def _stores(run: str = "4242.0") -> tuple[FakeStore, Store]:
    raw = FakeStore(timeout_s=0.5)
    return raw, Store(raw, Seal(secret=SECRET, run=run))


def test_a_sealed_value_opens_and_a_forged_or_foreign_one_is_rejected_naming_its_key():
    raw, store = _stores()
    store.set("node/1", '{"host": "n2"}')
    assert raw.data["node/1"].startswith(b"nd1:") and store.get("node/1") == '{"host": "n2"}'
    assert store.get("node/2") is None
    raw.set("node/2", b'{"host": "evil"}')  # written without the secret
    with pytest.raises(RejectedValueError, match=r"node/2.*carries no MAC"):
        store.get("node/2")
    raw.data["node/3"] = raw.data["node/1"]  # a real MAC, under another key
    with pytest.raises(RejectedValueError, match=r"node/3.*does not verify"):
        store.get("node/3")
    other = Store(raw, Seal(secret=SECRET, run="4242.1"))  # the next step of the job, same secret
    with pytest.raises(RejectedValueError, match="does not verify"):
        other.get("node/1")
    plain = Store(raw)  # a node without the secret
    with pytest.raises(RejectedValueError, match="sealed with a secret this node lacks"):
        plain.get("node/1")


def test_a_value_over_its_keys_cap_is_rejected_before_it_is_opened():
    raw, store = _stores()
    raw.set("go", b"x" * 100_000)
    with pytest.raises(RejectedValueError, match=r"go.*100000 bytes, more than the"):
        store.get("go")


def test_read_all_is_one_check_and_one_multi_get_and_reparses_only_what_changed():
    raw, store = _stores()
    keys = [f"stages/{i}" for i in range(4)]
    store.set_all({k: json.dumps({"seq": 1}) for k in keys})
    parsed: list[str] = []

    def parse(text: str) -> int:
        parsed.append(text)
        return int(json.loads(text)["seq"])

    seen: dict = {}
    raw.calls.clear()
    assert store.read_all(keys, parse, seen) == [1, 1, 1, 1]
    assert raw.calls == ["check", "multi_get"] and len(parsed) == 4
    store.set("stages/2", json.dumps({"seq": 7}))
    parsed.clear()
    assert store.read_all(keys, parse, seen) == [1, 1, 7, 1]
    assert parsed == ['{"seq": 7}']  # the three unchanged values were neither verified nor parsed again
    raw.delete_key("stages/3")
    with pytest.raises(RejectedValueError, match=r"stages/3.*removed from the store"):
        store.read_all(keys, parse, seen)
    store.set("stages/3", "not json")
    with pytest.raises(RejectedValueError, match="stages/3"):
        store.read_all(keys, parse, seen)
    assert store.read_all([], parse) == []


def test_counters_are_read_without_add_and_text_over_them_is_not_a_count():
    raw, store = _stores()
    assert store.count("errors") == 0
    assert store.add("errors", 1) == 1 and store.add("errors", 2) == 3 and store.count("errors") == 3
    raw.set("errors", b"oops")
    assert store.count("errors") == NOT_A_COUNT
    raw.set("errors", b"9" * 30)
    assert store.count("errors") == NOT_A_COUNT
    assert store.has("errors") and not store.has("errors", "acks")


def test_the_fake_waits_like_tcpstore_across_threads_and_times_out():
    raw, store = _stores()
    writer = threading.Timer(0.05, store.set, args=("go", "1"))
    writer.start()
    try:
        raw.wait(["go"], 5.0)  # returns once another thread set it
        assert store.get("go") == "1"
    finally:
        writer.join()
    t0 = time.monotonic()
    with pytest.raises(StoreTimeoutError, match="never"):
        raw.wait(["never"], 0.1)
    with pytest.raises(StoreTimeoutError):
        raw.get("never")  # the store's own timeout (0.5 s)
    assert time.monotonic() - t0 < 5
    counted = [threading.Thread(target=store.add, args=("acks", 1)) for _ in range(8)]
    for t in counted:
        t.start()
    for t in counted:
        t.join()
    assert store.count("acks") == 8
    assert raw.compare_set("run", b"", b"a") == b"a" and raw.compare_set("run", b"x", b"b") == b"a"
