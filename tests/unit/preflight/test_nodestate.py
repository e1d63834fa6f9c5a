"""A node's state: its clock and deadline, what exists only once started, who is still expected."""

from __future__ import annotations

import time

import pytest

from nccl_doctor.preflight.nodestate import MIN_WINDOW_S, NodeState
from nccl_doctor.preflight.options import PreflightOptions
from nccl_doctor.preflight.plan import NodePlan

TWO_NODES = NodePlan(nnodes=2, node_rank=0, hosts=("n1", "n2"), head="n1", port=1, nproc=2, slurm=True, host="n1")


def _state(timeout: float = 30.0, rendezvous_timeout: float = 7.0) -> NodeState:
    return NodeState.start(PreflightOptions(timeout=timeout, rendezvous_timeout=rendezvous_timeout), TWO_NODES,
                           {"PATH": "/bin"})


def test_the_clock_bounds_each_step_by_the_deadline():
    state = _state()
    assert state.deadline == pytest.approx(state.t0 + 30.0)
    assert state.window() == 7.0 and state.left(5.0) == 5.0
    state.deadline = time.monotonic() - 1  # past it
    assert state.window() == MIN_WINDOW_S and state.left(5.0) == 0.0
    state.mark("probe", time.monotonic())
    assert set(state.timings) == {"probe"} and state.timings["probe"] >= 0


def test_the_store_and_heartbeat_exist_only_once_started_and_absent_nodes_owe_no_ack():
    state = _state()
    assert state.store is None and state.log_dir is None and not state.seal.authenticated
    with pytest.raises(RuntimeError, match="no rendezvous store"):
        _ = state.live
    with pytest.raises(RuntimeError, match="no heartbeat"):
        _ = state.beat
    assert state.alive_followers() == 1
    state.absent |= {0, 1}  # node 0 itself never counts
    assert state.alive_followers() == 0
