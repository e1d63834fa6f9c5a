"""Where we are: SLURM_* variables, the GPUs we may use, the port and ranks per node they imply."""

import pytest

from nccl_doctor.cluster import slurm
from nccl_doctor.errors import InputError


def test_slurm_config_from_env(slurm_env):
    s = slurm.slurm_launch_config(slurm_env)
    assert s.hosts == ("gpu07", "gpu08", "gpu09", "login1")
    assert (s.nnodes, s.rdzv_host, s.port, s.rdzv_id) == (4, "gpu07", 29500 + 242, "slurm-4242")


def test_slurm_step_wins_and_master_port_overrides(slurm_env):
    env = {**slurm_env, "SLURM_STEP_NODELIST": "gpu[08-09]", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_ID": "3",
           "SLURM_STEP_NUM_TASKS": "2", "MASTER_PORT": "31000", "SLURM_GPUS_ON_NODE": "8"}
    s = slurm.slurm_launch_config(env)
    assert (s.nnodes, s.rdzv_host, s.port, s.rdzv_id, s.gpus_on_node, s.tasks_per_node) == \
        (2, "gpu08", 31000, "slurm-4242.3", 8, 1)


def test_no_slurm_and_bad_nodelist():
    assert slurm.slurm_launch_config({}) is None
    with pytest.raises(InputError, match="cannot expand SLURM node list"):
        slurm.slurm_launch_config({"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n[1-"})


def test_visible_gpus(tmp_path):
    assert slurm.visible_gpus({"CUDA_VISIBLE_DEVICES": "0,1,3"}, tmp_path) == 3
    assert slurm.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, tmp_path) == 0
    assert slurm.visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}, tmp_path) == 0
    assert slurm.visible_gpus({"CUDA_VISIBLE_DEVICES": "0,2,-1,1"}, tmp_path) == 2  # CUDA stops at -1
    assert slurm.visible_gpus({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, tmp_path) == 0
    # a CUDA process enumerates one MIG device: two MIG UUIDs are one rank's worth, not two
    assert slurm.visible_gpus({"CUDA_VISIBLE_DEVICES": "MIG-4f2a1c3e-5b6d-5e7f-8a9b-0c1d2e3f4a5b,"
                                                       "MIG-7d8e9f0a-1b2c-5d3e-4f5a-6b7c8d9e0f1a"}, tmp_path) == 1
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert slurm.visible_gpus({}, tmp_path) == 2


def test_bad_master_port_in_a_slurm_job_is_an_error(slurm_env):
    with pytest.raises(InputError, match="MASTER_PORT 70000 is not a TCP port"):
        slurm.slurm_launch_config({**slurm_env, "MASTER_PORT": "70000"})


def test_master_port_and_default_ranks_are_one_rule_for_bench_and_preflight(slurm_env):
    assert slurm.port_from_env({}) is None and slurm.port_from_env({"MASTER_PORT": ""}) is None
    assert slurm.port_from_env({"MASTER_PORT": "31000"}) == 31000
    with pytest.raises(InputError, match="MASTER_PORT='x1' is not a number"):
        slurm.port_from_env({"MASTER_PORT": "x1"})
    with pytest.raises(InputError, match="MASTER_PORT 70000 is not a TCP port"):
        slurm.port_from_env({"MASTER_PORT": "70000"})
    info = slurm.slurm_launch_config({**slurm_env, "SLURM_GPUS_ON_NODE": "4"})
    no_gpu = {"CUDA_VISIBLE_DEVICES": ""}
    assert slurm.default_nproc({"CUDA_VISIBLE_DEVICES": "0,1,2"}, info) == 3
    assert slurm.default_nproc(no_gpu, info) == 4 and slurm.default_nproc(no_gpu, None) == 2
    assert slurm.default_nproc({"CUDA_VISIBLE_DEVICES": "0,1,2"}, info, cpu=True) == 2
