"""Where this node stands, per launcher convention: flags, Slurm, a PyTorchJob pod, Open MPI / PMIx. Flags win
over the environment, each on its own, and say so in one line; an incomplete convention is one line naming
what to set."""

from __future__ import annotations

import pytest

from nccl_doctor.cluster.launchers import JobLayout, LayoutFlags, job_layout, parse_master_addr
from nccl_doctor.errors import InputError

NONE = LayoutFlags()
SRUN = {"SLURM_JOB_ID": "1234", "SLURM_JOB_NODELIST": "gpu[01-03]", "SLURM_NNODES": "3", "SLURM_STEP_ID": "0",
        "SLURM_NODEID": "2", "SLURM_STEP_NUM_NODES": "3", "SLURM_STEP_NODELIST": "gpu[01-03]"}
# what the training operator (1.7+) sets on worker-0 of a PyTorchJob with a master and 2 workers, 8 GPUs each
PYTORCHJOB = {"MASTER_ADDR": "train-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "24", "RANK": "1",
              "PET_NNODES": "3", "PET_NODE_RANK": "1", "PET_NPROC_PER_NODE": "8", "PYTHONUNBUFFERED": "0"}
# what mpirun -N 1 sets on the second of 4 nodes (Open MPI 4/5)
OPEN_MPI = {"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "1",
            "OMPI_COMM_WORLD_LOCAL_RANK": "0", "PMIX_RANK": "1", "PMIX_NAMESPACE": "prterun-n1-4242@1"}


def _layout(env: dict[str, str], flags: LayoutFlags = NONE) -> JobLayout:
    layout = job_layout(flags, env)
    assert layout is not None
    return layout


def _place(layout: JobLayout) -> tuple[int, int, str, int | None, str]:
    return layout.nnodes, layout.node_rank, layout.head, layout.port, layout.source


# --- no launcher, flags ----------------------------------------------------------------------------------------
def test_nothing_said_is_this_machine_alone():
    assert job_layout(NONE, {"PATH": "/bin", "MASTER_PORT": "29501"}) is None
    assert job_layout(NONE, {"MASTER_ADDR": "n1", "WORLD_SIZE": "2", "RANK": "1",
                             "TORCHELASTIC_RUN_ID": "x"}) is None  # torchrun's per-process variables


def test_flags_alone():
    layout = _layout({}, LayoutFlags(nnodes=4, node_rank=3, master_addr="node1:31000"))
    assert _place(layout) == (4, 3, "node1", 31000, "flags")
    assert layout.host_names() == ("node1", "node-rank-1", "node-rank-2", "node-rank-3")
    assert layout.overrides == ""


def test_flags_take_node_0_from_master_addr_in_the_environment():
    layout = _layout({"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29600"}, LayoutFlags(nnodes=2, node_rank=1))
    assert _place(layout) == (2, 1, "10.0.0.1", 29600, "flags")


@pytest.mark.parametrize(("flags", "msg"), [
    (LayoutFlags(nnodes=2), r"nothing gives this node's rank \(no launcher's variables are set\): pass --node-rank R"),
    (LayoutFlags(node_rank=1, master_addr="n1"), "nothing gives the node count"),
    (LayoutFlags(nnodes=2, node_rank=1), r"pass --master-addr HOST\[:PORT\]"),
    (LayoutFlags(nnodes=2, node_rank=2, master_addr="n1"), r"--node-rank 2 is not a node rank of 2 nodes \(0-1\)"),
    (LayoutFlags(nnodes=0, node_rank=0, master_addr="n1"), "--nnodes 0 must be >= 1"),
    (LayoutFlags(nnodes=2, node_rank=-1, master_addr="n1"), "--node-rank -1 is not a node rank"),
    (LayoutFlags(nnodes=2, node_rank=0, master_addr="n1:29500", port=29600), "name two ports"),
    (LayoutFlags(nnodes=2, node_rank=0, master_addr="n1:99999"), "is not a TCP port"),
    (LayoutFlags(nnodes=2, node_rank=0, master_addr="n1:http"), "is not HOST"),
])
def test_incomplete_or_bad_flags_are_one_line(flags, msg):
    with pytest.raises(InputError, match=msg) as exc:
        job_layout(flags, {})
    assert "\n" not in str(exc.value)


def test_one_node_by_flag_needs_no_address():
    layout = _layout({}, LayoutFlags(nnodes=1, port=31002))
    assert _place(layout) == (1, 0, "127.0.0.1", 31002, "flags")


@pytest.mark.parametrize(("text", "expected"), [
    ("node1", ("node1", None)),
    ("node1:29500", ("node1", 29500)),
    ("10.0.0.1:1", ("10.0.0.1", 1)),
    ("[fd00::1]:29500", ("fd00::1", 29500)),
    ("[fd00::1]", ("fd00::1", None)),
    ("fd00::1", ("fd00::1", None)),
])
def test_master_addr_forms(text, expected):
    assert parse_master_addr(text) == expected


@pytest.mark.parametrize("text", ["", ":29500", "node1:", "[fd00::1]x", "a b:1", "node1:0"])
def test_bad_master_addr(text):
    with pytest.raises(InputError, match="--master-addr"):
        parse_master_addr(text)


# --- Slurm -----------------------------------------------------------------------------------------------------
def test_slurm_as_before():
    layout = _layout(SRUN)
    assert _place(layout) == (3, 2, "gpu01", None, "Slurm")  # the port: the step's, chosen by the plan
    assert layout.host_names() == ("gpu01", "gpu02", "gpu03") and layout.run_id == "1234.0" and layout.under_slurm


def test_slurm_outside_a_step_says_to_use_srun():
    env = {k: v for k, v in SRUN.items() if k != "SLURM_STEP_ID"}
    with pytest.raises(InputError, match=r"this 3-node allocation needs one preflight per node: run `srun "):
        job_layout(NONE, env)


def test_slurm_comes_first_when_a_pytorchjob_variable_leaks_in():
    assert _layout({**SRUN, **PYTORCHJOB}).source == "Slurm"


def test_a_flag_overrides_slurm_and_says_so_in_one_line():
    layout = _layout(SRUN, LayoutFlags(node_rank=0))
    assert _place(layout) == (3, 0, "gpu01", None, "flags + Slurm")
    assert layout.overrides == "--node-rank 0 overrides SLURM_NODEID=2 (flags win over Slurm's environment)"


# --- PyTorchJob ------------------------------------------------------------------------------------------------
def test_pytorchjob_reads_pet_variables_not_world_size():
    layout = _layout(PYTORCHJOB)
    assert _place(layout) == (3, 1, "train-master-0", 23456, "PyTorchJob")  # WORLD_SIZE=24 counts processes
    assert layout.host_names() == ("train-master-0", "node-rank-1", "node-rank-2")


def test_pytorchjob_of_the_trainer_v2_names_node_0_pet_master():
    env = {"PET_NNODES": "2", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "t-node-0-0.t", "PET_MASTER_PORT": "29400"}
    assert _place(_layout(env)) == (2, 0, "t-node-0-0.t", 29400, "PyTorchJob")


def test_pytorchjob_of_an_older_operator_counts_pods_in_world_size():
    env = {"MASTER_ADDR": "old-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": "1"}
    assert _place(_layout(env)) == (2, 1, "old-master-0", 23456, "PyTorchJob")


def test_pytorchjob_elastic_range_needs_a_count_unless_fixed():
    with pytest.raises(InputError, match=r"PET_NNODES=1:4 is a range \(an elastic job\).*--nnodes N"):
        job_layout(NONE, {**PYTORCHJOB, "PET_NNODES": "1:4"})
    assert _layout({**PYTORCHJOB, "PET_NNODES": "3:3"}).nnodes == 3
    layout = _layout({**PYTORCHJOB, "PET_NNODES": "1:4"}, LayoutFlags(nnodes=3))  # the flag: no range read
    assert layout.nnodes == 3 and layout.overrides.startswith("--nnodes 3 overrides PET_NNODES=1:4")


@pytest.mark.parametrize(("drop", "msg"), [
    ("PET_NODE_RANK", r"PyTorchJob's environment gives no node rank \(PET_NNODES=3 is set\): set PET_NODE_RANK"),
    ("PET_NNODES", r"gives no node count \(PET_NODE_RANK=1 is set\): set PET_NNODES .* or pass --nnodes N"),
    ("MASTER_ADDR", "gives no node 0 address: set MASTER_ADDR"),
])
def test_pytorchjob_incomplete_is_one_line(drop, msg):
    env = {k: v for k, v in PYTORCHJOB.items() if k != drop}
    with pytest.raises(InputError, match=msg):
        job_layout(NONE, env)


@pytest.mark.parametrize(("value", "msg"), [("two", "PET_NODE_RANK='two' is not a number"),
                                            ("-1", "PET_NODE_RANK=-1 is negative"),
                                            ("3", r"PET_NODE_RANK=3 is not a node rank of 3 nodes")])
def test_pytorchjob_bad_values(value, msg):
    with pytest.raises(InputError, match=msg):
        job_layout(NONE, {**PYTORCHJOB, "PET_NODE_RANK": value})


def test_flags_over_a_pytorchjob_are_one_line_naming_each():
    layout = _layout(PYTORCHJOB, LayoutFlags(nnodes=2, node_rank=1, master_addr="10.0.0.9:24000"))
    assert _place(layout) == (2, 1, "10.0.0.9", 24000, "flags + PyTorchJob")
    assert layout.overrides == ("--nnodes 2 overrides PET_NNODES=3; --master-addr 10.0.0.9 overrides "
                                "MASTER_ADDR=train-master-0; port 24000 overrides MASTER_PORT=23456 (flags win over "
                                "PyTorchJob's environment)")  # --node-rank 1 agrees: not said


# --- Open MPI / PMIx -------------------------------------------------------------------------------------------
def test_open_mpi_with_master_addr():
    layout = _layout({**OPEN_MPI, "MASTER_ADDR": "n1"})
    assert _place(layout) == (4, 1, "n1", None, "Open MPI")
    assert layout.run_id == "prterun-n1-4242@1"  # one mpirun's namespace: shared by its nodes, no other run's


def test_open_mpi_needs_node_0s_address():
    with pytest.raises(InputError, match=r"Open MPI does not say where node 0 is: pass --master-addr .*mpirun -x"):
        job_layout(NONE, OPEN_MPI)
    assert _layout(OPEN_MPI, LayoutFlags(master_addr="n1:29510")).port == 29510


def test_open_mpi_with_several_tasks_per_node_is_refused():
    with pytest.raises(InputError, match=r"OMPI_COMM_WORLD_LOCAL_SIZE=8: mpirun started 8 tasks.*mpirun -N 1"):
        job_layout(NONE, {**OPEN_MPI, "OMPI_COMM_WORLD_LOCAL_SIZE": "8", "MASTER_ADDR": "n1"})


def test_pmix_alone_needs_the_node_count():
    env = {"PMIX_RANK": "2", "MASTER_ADDR": "n1"}
    with pytest.raises(InputError, match=r"PMIx gives no node count \(PMIX_RANK=2 is set.*pass --nnodes N"):
        job_layout(NONE, env)
    assert _place(_layout(env, LayoutFlags(nnodes=3))) == (3, 2, "n1", None, "flags + PMIx")
