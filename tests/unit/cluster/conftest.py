"""Shared by the cluster unit tests: a Slurm job's environment and a route that needs no network."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nccl_doctor.cluster.net import Route

SLURM = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu[07-09],login1", "SLURM_JOB_NUM_NODES": "4",
         "SLURM_NNODES": "4"}


@pytest.fixture
def slurm_env() -> dict[str, str]:
    """A 4-node job (job id 4242), outside any step."""
    return dict(SLURM)


@pytest.fixture
def fake_route() -> Callable[..., Callable[[str, int], Route]]:
    """``fake_route(local, loop=False)``: a ``route`` for ``plan_launch``/``gloo_iface_to`` over eth1."""

    def make(local: bool, loop: bool = False) -> Callable[[str, int], Route]:
        def route(host: str, port: int) -> Route:
            return Route(peer_ip="127.0.0.1" if loop else "198.18.0.1", local_ip="198.18.0.2", iface="eth1",
                         is_local=local or loop, loopback=loop)
        return route

    return make
