"""The NCCL/PyTorch settings our ranks always run under."""

from __future__ import annotations

from nccl_doctor.cluster.rankenv import RANK_SETTINGS, overridden, rank_env


def test_ranks_connect_at_init_and_wait_blocking():
    env = rank_env({"PATH": "/bin"})
    assert env["NCCL_RUNTIME_CONNECT"] == "0"
    assert env["TORCH_NCCL_BLOCKING_WAIT"] == "1"
    assert env["PATH"] == "/bin"


def test_a_users_own_value_is_replaced_and_said():
    user = {"NCCL_RUNTIME_CONNECT": "1", "TORCH_NCCL_BLOCKING_WAIT": "1"}
    assert rank_env(user)["NCCL_RUNTIME_CONNECT"] == "0"
    assert user["NCCL_RUNTIME_CONNECT"] == "1"  # the caller's mapping is left alone
    (note,) = overridden(user)
    assert note.startswith("NCCL_RUNTIME_CONNECT=1 replaced by 0")


def test_nothing_to_say_when_the_user_agrees_or_is_silent():
    assert overridden({}) == []
    assert overridden(dict(RANK_SETTINGS)) == []
