"""The launch plan (Slurm, GPUs, the route), torchrun's command line, and what the outcome says."""

import pytest

from nccl_doctor.cluster import stages, torchrun
from nccl_doctor.errors import InputError


def test_plan_under_slurm_fills_everything_and_gloo_iface(slurm_env, fake_route):
    env = {**slurm_env, "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "n[1-2]"}
    cfg = torchrun.plan_launch(nnodes=None, nproc_per_node=None, rdzv_endpoint=None, rdzv_id=None, join_timeout_s=60,
                        deadline_s=30, env=env, route=fake_route(local=False))
    assert (cfg.nnodes, cfg.nproc_per_node, cfg.rdzv_endpoint, cfg.rdzv_id) == (2, 2, "n1:29742", "slurm-4242")
    assert (cfg.is_host, cfg.local_addr, cfg.extra_env) == (False, "198.18.0.2", {"GLOO_SOCKET_IFNAME": "eth1"})
    argv = torchrun.torchrun_argv(cfg, ["bench", "--iters", "3"], python="py")
    assert argv[:3] == ["py", "-m", "nccl_doctor.cluster.rendezvous"]  # torchrun's main, our static rendezvous
    assert "--rdzv-backend=nccl-doctor" in argv and not any(a.startswith("--rdzv-backend=c10d") for a in argv)
    assert "--rdzv-conf=join_timeout=60,is_host=0" in argv and "--local-addr=198.18.0.2" in argv
    assert "--max-restarts=0" in argv and argv[-5:] == ["-m", "nccl_doctor", "bench", "--iters", "3"]


def test_plan_keeps_user_gloo_iface_and_lets_torchrun_decide_on_loopback(fake_route):
    cfg = torchrun.plan_launch(nnodes=2, nproc_per_node=1, rdzv_endpoint="127.0.0.1:1234", rdzv_id="x",
                        join_timeout_s=60, deadline_s=30, env={}, route=fake_route(local=False, loop=True))
    assert cfg.is_host is None and cfg.local_addr is None and cfg.extra_env == {}
    cfg = torchrun.plan_launch(nnodes=2, nproc_per_node=1, rdzv_endpoint="n1:1234", rdzv_id="x", join_timeout_s=60,
                        deadline_s=30, env={"GLOO_SOCKET_IFNAME": "ib0"}, route=fake_route(local=True))
    assert cfg.is_host is True and cfg.extra_env == {}


def test_plan_rejects_multinode_without_endpoint_and_multitask_steps(slurm_env):
    with pytest.raises(InputError, match="--rdzv-endpoint"):
        torchrun.plan_launch(nnodes=2, nproc_per_node=1, rdzv_endpoint=None, rdzv_id=None, join_timeout_s=1,
                      deadline_s=1, env={})
    env = {**slurm_env, "SLURM_STEP_NUM_TASKS": "8", "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NODELIST": "gpu07"}
    with pytest.raises(InputError, match="--ntasks-per-node=1"):
        torchrun.plan_launch(nnodes=None, nproc_per_node=None, rdzv_endpoint=None, rdzv_id=None, join_timeout_s=1,
                      deadline_s=1, env=env)


def test_single_node_default_is_local_with_cpu_ranks():
    cfg = torchrun.plan_launch(nnodes=None, nproc_per_node=None, rdzv_endpoint=None, rdzv_id=None, join_timeout_s=1,
                        deadline_s=1, env={"CUDA_VISIBLE_DEVICES": ""})
    assert cfg.nnodes == 1 and cfg.nproc_per_node == 2 and cfg.rdzv_endpoint.startswith("127.0.0.1:")


def test_plan_resolves_a_one_node_endpoint_at_once():
    with pytest.raises(InputError, match="cannot resolve host"):
        torchrun.plan_launch(nnodes=1, nproc_per_node=1, rdzv_endpoint="no-such-host.invalid:29500", rdzv_id=None,
                      join_timeout_s=1, deadline_s=1, env={})


def test_one_node_rendezvous_port_is_master_port_when_set():
    cfg = torchrun.plan_launch(nnodes=1, nproc_per_node=1, rdzv_endpoint=None, rdzv_id=None, join_timeout_s=60,
                        deadline_s=30, env={"MASTER_PORT": "31234"})
    assert cfg.rdzv_endpoint == "127.0.0.1:31234"
    with pytest.raises(InputError, match="MASTER_PORT 99999 is not a TCP port"):
        torchrun.plan_launch(nnodes=1, nproc_per_node=1, rdzv_endpoint=None, rdzv_id=None, join_timeout_s=60,
                      deadline_s=30, env={"MASTER_PORT": "99999"})


def test_stage_files_describe_where_each_rank_was(tmp_path):
    env = {stages.STAGE_DIR_ENV: str(tmp_path)}
    stages.StageFile(0, "n1", env).record("done", code=1)
    stages.StageFile(1, "n1", env).record("all_gather inter 1 MiB")
    records = stages.read_stages(tmp_path)
    cfg = torchrun.LaunchConfig(nnodes=2, nproc_per_node=3, rdzv_endpoint="n1:1", rdzv_id="x", deadline_s=9)
    out = torchrun.LaunchOutcome(returncode=-15, timed_out=True, elapsed_s=9, stages=tuple(records), host="n1", cfg=cfg)
    assert out.worker_code == 1 and out.stuck_stage() == "all_gather inter 1 MiB"
    text = out.describe()
    assert "deadline of 9 s expired in stage all_gather inter 1 MiB on n1" in text
    assert "rank 1 in all_gather inter 1 MiB" in text and "1 local rank(s) never started" in text
    empty = torchrun.LaunchOutcome(returncode=-15, timed_out=True, elapsed_s=9, stages=(), host="n2", cfg=cfg)
    assert "stage rendezvous: no worker started on n2 (waiting for 2 nodes at n1:1" in empty.describe()
    assert "the other nodes did not join" in empty.describe()
    alone = torchrun.LaunchOutcome(returncode=-15, timed_out=True, elapsed_s=9, stages=(), host="n2",
                            cfg=torchrun.LaunchConfig(nproc_per_node=2, rdzv_endpoint="n2:1", rdzv_id="x", deadline_s=9))
    assert "a 1-node rendezvous at n2:1" in alone.describe() and "other nodes" not in alone.describe()


def _outcome(rc, codes, timed_out=False):
    cfg = torchrun.LaunchConfig(nproc_per_node=len(codes), rdzv_endpoint="h:1", rdzv_id="x")
    records = tuple(stages.StageRecord(rank=r, host="h", stage="done", since=0.0, code=c) for r, c in enumerate(codes))
    return torchrun.LaunchOutcome(returncode=rc, timed_out=timed_out, elapsed_s=1, stages=records, host="h", cfg=cfg)


def test_final_code_is_never_below_what_the_workers_exited_with():
    assert _outcome(0, [0, 0]).final_code() == 0
    assert _outcome(0, [1, 1]).final_code() == 1  # the shared verdict, workers exited 0 on purpose
    assert _outcome(1, [0, 0]).final_code() == 1  # a recorded 0, then a rank failed: never 0
    assert _outcome(1, [2, 0]).final_code() == 2  # rank 0 could not write its output: its 2 wins over torchrun's 1
    assert _outcome(-9, [0, 0]).final_code() == 1  # torchrun killed by a signal
    assert _outcome(1, [None, None]).final_code() is None  # no verdict: the launcher reports
    assert _outcome(-15, [0, 0], timed_out=True).final_code() is None


def test_torchrun_phase_and_launcher_stages_keep_their_strings(tmp_path):
    assert [p.value for p in torchrun.TorchrunPhase] == ["starting", "rendezvous", "workers"]
    cfg = torchrun.LaunchConfig(nproc_per_node=1, rdzv_endpoint="h:1", rdzv_id="x")
    early = torchrun.LaunchOutcome(returncode=-15, timed_out=True, elapsed_s=1, stages=(), host="h", cfg=cfg,
                                   phase=torchrun.TorchrunPhase.STARTING)
    assert early.stuck_stage() == "start-up" and f"{early.stuck_stage()}" == "start-up"
    assert "torchrun had not reached the rendezvous yet" in early.describe()
    assert _outcome(0, [0]).stuck_stage() == "shutdown"
