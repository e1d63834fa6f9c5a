"""What preflight's ranks run under (issue 15, points 2 and 5; issue 21, point 9): NCCL connects at init (its
channel lines are printed under the communicator they belong to) and logs at INFO into preflight's own log dir;
PyTorch's error handling is the user's (no blocking wait: our watchdog bounds the stages). Every user value
replaced, the NCCL log's three included, is said in the report."""

from __future__ import annotations

from nccl_doctor.preflight.launcher import Launcher
from nccl_doctor.preflight.options import PreflightOptions
from nccl_doctor.preflight.plan import NodePlan

PLAN = NodePlan(nnodes=2, node_rank=1, hosts=("n1", "n2"), head="n1", port=29400, nproc=2, slurm=True, host="n2")
ARGS = PreflightOptions(timeout=60, cpu=False, fsdp_smoke=False, fsdp_smoke_dir=None,
                          collective_timeout=30)


def test_every_rank_connects_at_init_without_blocking_wait():
    env = Launcher(ARGS, PLAN, {"PATH": "/bin"}).ranks.worker_env(1, "eth1")
    assert env["NCCL_RUNTIME_CONNECT"] == "0"
    assert "TORCH_NCCL_BLOCKING_WAIT" not in env
    assert (env["NCCL_DEBUG"], env["NCCL_DEBUG_SUBSYS"]) == ("INFO", "INIT,BOOTSTRAP,ENV,NET")
    assert (env["RANK"], env["LOCAL_RANK"], env["GLOO_SOCKET_IFNAME"], env["PATH"]) == ("3", "1", "eth1", "/bin")


def test_a_users_own_setting_is_replaced_for_our_ranks_and_said():
    user = {"NCCL_RUNTIME_CONNECT": "1", "TORCH_NCCL_BLOCKING_WAIT": "0"}
    launcher = Launcher(ARGS, PLAN, user)
    env = launcher.ranks.worker_env(0, None)
    assert (env["NCCL_RUNTIME_CONNECT"], env["TORCH_NCCL_BLOCKING_WAIT"]) == ("0", "0")
    notes = launcher.ranks.setting_notes()
    assert len(notes) == 1 and notes[0].startswith("NCCL_RUNTIME_CONNECT=1 replaced by 0")


def test_the_users_nccl_log_settings_replaced_for_our_ranks_are_said():
    """preflight reads NCCL's log itself: the user's NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE are
    replaced for its ranks, and the report's notes list each one (they did not before)."""
    user = {"NCCL_DEBUG": "WARN", "NCCL_DEBUG_SUBSYS": "ALL", "NCCL_DEBUG_FILE": "/scratch/nccl.%h.%p"}
    launcher = Launcher(ARGS, PLAN, user)
    env = launcher.ranks.worker_env(0, None)
    assert (env["NCCL_DEBUG"], env["NCCL_DEBUG_SUBSYS"]) == ("INFO", "INIT,BOOTSTRAP,ENV,NET")
    assert env["NCCL_DEBUG_FILE"] != user["NCCL_DEBUG_FILE"] and env["NCCL_DEBUG_FILE"].endswith("%h.%p.log")
    assert launcher.ranks.setting_notes() == [
        "NCCL_DEBUG=WARN replaced by INFO for nccl-doctor's own ranks (your training keeps yours)",
        "NCCL_DEBUG_SUBSYS=ALL replaced by INIT,BOOTSTRAP,ENV,NET for nccl-doctor's own ranks (your training keeps "
        "yours)",
        "NCCL_DEBUG_FILE=/scratch/nccl.%h.%p replaced by a file in nccl-doctor's log dir for nccl-doctor's own ranks "
        "(your training keeps yours)"]
    assert Launcher(ARGS, PLAN, {"PATH": "/bin"}).ranks.setting_notes() == []
