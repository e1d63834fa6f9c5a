"""The NCCL/PyTorch settings our ranks always run under (issue 21, point 9): only what the measurement and its log
need. PyTorch's error handling is the training job's own: no TORCH_NCCL_BLOCKING_WAIT (our watchdog bounds the
stages instead), and a user's own value of it reaches the ranks untouched."""

from __future__ import annotations

from nccl_doctor.cluster.rankenv import RANK_SETTINGS, overridden, rank_env


def test_ranks_connect_at_init_and_keep_pytorchs_own_error_handling():
    env = rank_env({"PATH": "/bin"})
    assert env["NCCL_RUNTIME_CONNECT"] == "0"
    assert "TORCH_NCCL_BLOCKING_WAIT" not in env  # PyTorch's watchdog, heartbeat monitor and flight recorder stay
    assert env["PATH"] == "/bin"
    assert RANK_SETTINGS == {"NCCL_RUNTIME_CONNECT": "0"}


def test_a_users_blocking_wait_is_theirs_to_keep():
    assert rank_env({"TORCH_NCCL_BLOCKING_WAIT": "1"})["TORCH_NCCL_BLOCKING_WAIT"] == "1"
    assert overridden({"TORCH_NCCL_BLOCKING_WAIT": "1"}) == []


def test_a_users_own_value_is_replaced_and_said():
    user = {"NCCL_RUNTIME_CONNECT": "1"}
    assert rank_env(user)["NCCL_RUNTIME_CONNECT"] == "0"
    assert user["NCCL_RUNTIME_CONNECT"] == "1"  # the caller's mapping is left alone
    (note,) = overridden(user)
    assert note.startswith("NCCL_RUNTIME_CONNECT=1 replaced by 0")


def test_a_launchers_own_settings_are_in_force_and_said_too():
    user = {"NCCL_DEBUG": "WARN", "NCCL_DEBUG_SUBSYS": "ALL"}
    extra = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
    assert rank_env(user, extra)["NCCL_DEBUG"] == "INFO"
    assert overridden(user, extra) == [
        "NCCL_DEBUG=WARN replaced by INFO for nccl-doctor's own ranks (your training keeps yours)",
        "NCCL_DEBUG_SUBSYS=ALL replaced by INIT,NET for nccl-doctor's own ranks (your training keeps yours)"]


def test_nothing_to_say_when_the_user_agrees_or_is_silent():
    assert overridden({}) == []
    assert overridden(dict(RANK_SETTINGS)) == []
