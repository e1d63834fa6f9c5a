"""The rendezvous ``bench`` has torchrun run: torch's static TCPStore rendezvous, node ranks in order of arrival.

torch's dynamic rendezvous (``--rdzv-backend=c10d``) keeps its state in the store as a pickle, and the store
listens on every interface: whoever reached the port ran code as the user running bench (root in a Slurm
prolog). The static one (``--rdzv-backend=static``) reads nothing back but JSON and counters, but needs each
node's rank up front, which only Slurm knows. This backend is the static one with the rank drawn from the
store: the rendezvous host is node 0, every other node takes the next number of one counter (``add``), and
all wait until every node has arrived. No value read from the store is ever unpickled (the agent's own
``_assign_worker_ranks`` exchanges JSON).

Run as torchrun itself: ``python -m nccl_doctor.cluster.rendezvous <torchrun arguments>`` registers the
backend ``nccl-doctor`` and hands over to torchrun's main. It first makes sure it dies with the launcher
(``procs.die_with_parent``), and names itself the parent its workers must not outlive.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

from torch.distributed import DistNetworkError, PrefixStore, Store, TCPStore
from torch.distributed.elastic.rendezvous import (
    RendezvousError,
    RendezvousHandler,
    RendezvousInfo,
    RendezvousParameters,
    RendezvousStoreInfo,
    rendezvous_handler_registry,
)
from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint
from torch.distributed.run import main as torchrun_main

from nccl_doctor.cluster.procs import PARENT_ENV, die_with_parent

BACKEND = "nccl-doctor"
NODE_COUNTER = "nccl-doctor/node"  # add(1) on it: a joining node's rank (the host is 0)
ARRIVED = "nccl-doctor/arrived/"  # + node rank: that node has its rank
DEFAULT_JOIN_TIMEOUT_S = 600


class ArrivalRendezvous(RendezvousHandler):  # type: ignore[misc]  # torch is untyped (Any) by config
    """One rendezvous (bench never restarts workers): node 0 hosts the TCPStore, the others join in turn."""

    def __init__(self, *, host: str, port: int, run_id: str, nnodes: int, is_host: bool | None, timeout_s: int):
        self.host, self.port, self.run_id, self.nnodes = host, port, run_id, nnodes
        self.is_host, self.timeout = is_host, timedelta(seconds=timeout_s)
        self._info: RendezvousInfo | None = None

    def get_backend(self) -> str:
        return BACKEND

    @property
    def use_agent_store(self) -> bool:
        return True  # the workers' process group uses this store (MASTER_ADDR:MASTER_PORT)

    def next_rendezvous(self) -> RendezvousInfo:
        if self._info is None:
            raw, hosting = self._open()
            store = PrefixStore(self.run_id, raw)
            rank = 0 if hosting else int(store.add(NODE_COUNTER, 1))
            if rank >= self.nnodes:
                raise RendezvousError(f"more nodes joined rendezvous {self.run_id} at {self.host}:{self.port} "
                                      f"than --nnodes {self.nnodes}: this node would be node {rank + 1}")
            store.set(f"{ARRIVED}{rank}", "1")
            store.wait([f"{ARRIVED}{r}" for r in range(self.nnodes)], self.timeout)
            self._info = RendezvousInfo(store, rank, self.nnodes, RendezvousStoreInfo(self.host, self.port))
        return self._info

    def _open(self) -> tuple[Store, bool]:
        """Host the store (``is_host``, or the first to bind when torchrun's plan left it open: two "nodes"
        on one machine), else join it, retrying the connection until the join timeout."""
        if self.is_host is not False:
            try:
                return TCPStore(self.host, self.port, is_master=True, wait_for_workers=False,
                                timeout=self.timeout, multi_tenant=True), True
            except DistNetworkError:
                if self.is_host:
                    raise  # (the launcher checked the port first: another program took it since)
        return TCPStore(self.host, self.port, is_master=False, wait_for_workers=False, timeout=self.timeout), False

    def is_closed(self) -> bool:
        return False

    def set_closed(self) -> None:
        pass

    def num_nodes_waiting(self) -> int:
        return 0  # no node ever joins a running group

    def get_run_id(self) -> str:
        return self.run_id

    def shutdown(self) -> bool:
        return True


def create_handler(params: RendezvousParameters) -> RendezvousHandler:
    """torchrun's parameters: ``--rdzv-endpoint``, ``--rdzv-id``, ``--nnodes``, and ``--rdzv-conf``'s
    ``join_timeout`` and ``is_host``."""
    host, port = parse_rendezvous_endpoint(params.endpoint, -1)
    if port < 0:
        raise ValueError(f"rendezvous endpoint {params.endpoint!r} has no port")
    if params.min_nodes != params.max_nodes:
        raise ValueError(f"the {BACKEND} rendezvous takes a fixed node count, "
                         f"not {params.min_nodes}:{params.max_nodes}")
    return ArrivalRendezvous(host=host, port=port, run_id=params.run_id, nnodes=params.max_nodes,
                             is_host=params.get_as_bool("is_host"),
                             timeout_s=params.get_as_int("join_timeout", DEFAULT_JOIN_TIMEOUT_S) or 0)


def main(argv: list[str] | None = None) -> None:
    """torchrun with this backend registered; it dies with the launcher, and its workers with it."""
    die_with_parent(os.environ)
    os.environ[PARENT_ENV] = str(os.getpid())  # the workers inherit torchrun's environment
    rendezvous_handler_registry.register(BACKEND, create_handler)
    torchrun_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
