"""What preflight's ranks run under (issue 15, points 2 and 5): NCCL connects at init (its channel lines are
printed under the communicator they belong to) and a timed-out collective raises in the rank's main thread
(so it writes ``error/<rank>``); a user's own value for either is replaced and said in the report."""

from __future__ import annotations

from nccl_doctor.preflight.launcher import Launcher
from nccl_doctor.preflight.options import PreflightOptions
from nccl_doctor.preflight.plan import NodePlan

PLAN = NodePlan(nnodes=2, node_rank=1, hosts=("n1", "n2"), head="n1", port=29400, nproc=2, slurm=True, host="n2")
ARGS = PreflightOptions(timeout=60, cpu=False, fsdp_smoke=False, fsdp_smoke_dir=None,
                          collective_timeout=30)


def test_every_rank_connects_at_init_and_waits_blocking():
    env = Launcher(ARGS, PLAN, {"PATH": "/bin"}).ranks.worker_env(1, "eth1")
    assert env["NCCL_RUNTIME_CONNECT"] == "0"
    assert env["TORCH_NCCL_BLOCKING_WAIT"] == "1"
    assert (env["RANK"], env["LOCAL_RANK"], env["GLOO_SOCKET_IFNAME"], env["PATH"]) == ("3", "1", "eth1", "/bin")


def test_a_users_own_setting_is_replaced_for_our_ranks_and_said():
    user = {"NCCL_RUNTIME_CONNECT": "1", "TORCH_NCCL_BLOCKING_WAIT": "0"}
    launcher = Launcher(ARGS, PLAN, user)
    env = launcher.ranks.worker_env(0, None)
    assert (env["NCCL_RUNTIME_CONNECT"], env["TORCH_NCCL_BLOCKING_WAIT"]) == ("0", "1")
    notes = launcher.ranks.setting_notes()
    assert len(notes) == 2 and notes[0].startswith("NCCL_RUNTIME_CONNECT=1 replaced by 0")
    assert Launcher(ARGS, PLAN, {"PATH": "/bin"}).ranks.setting_notes() == []
