"""The management rule, now linear, decides exactly as the plain pairwise rule it replaced: random nodes
(speeds, default routes, bonds, RDMA ports) are judged by both and must agree interface by interface."""

from __future__ import annotations

import copy
import random

from nccl_doctor.node import classify as c
from nccl_doctor.node.model import (
    BondInfo,
    GdrInfo,
    Interface,
    InterfaceKind,
    LinkLayer,
    NodeFacts,
    PortLink,
    PortState,
    Role,
)

SPEEDS = (None, 1000, 10_000, 25_000, 100_000, 200_000)


def reference_management(facts: NodeFacts) -> None:
    """The rule as first written: every interface weighed against every other (quadratic)."""
    fabric = [i for i in facts.interfaces if i.role == Role.DATA and i.rdma]
    for i in facts.interfaces:
        if i.kind not in (InterfaceKind.ETHERNET, InterfaceKind.BOND) or i.rdma:
            continue
        slaves = i.bond.slaves if i.bond else []
        others = [o for o in facts.interfaces if o is not i and o.role == Role.DATA and o.name not in slaves]
        faster = [o for o in others if (o.rdma and o in fabric) or c.link_mbps(o) > c.link_mbps(i)]
        slow = i.speed_mbps is None or i.speed_mbps <= c.MGMT_MAX_MBPS
        if faster and (i.default_route or slow):
            i.role = Role.MANAGEMENT
            if i.kind == InterfaceKind.ETHERNET:
                i.kind = InterfaceKind.MANAGEMENT


def random_node(rng: random.Random, n: int) -> NodeFacts:
    ifaces = []
    for k in range(n):
        i = Interface(name=f"e{k}", ifindex=k + 1, iflink=k + 1, arphrd=1, speed_mbps=rng.choice(SPEEDS),
                      default_route=rng.random() < 0.2)
        if rng.random() < 0.15:
            rate = rng.choice((None, 100.0, 400.0))
            i.rdma = [PortLink(f"mlx5_{k}", 1, PortState.ACTIVE, None, rate, LinkLayer.ETHERNET)]
        ifaces.append(i)
    for k in range(0, n - 2, 7):  # some bonds over the next interfaces (and a name that is not there)
        ifaces[k].bond = BondInfo("802.3ad", [f"e{k + 1}", f"e{k + 2}", "missing"], [])
        ifaces[k].kind = InterfaceKind.BOND
    gdr = GdrInfo(None, False, None, None, None, False)
    return NodeFacts("h", ifaces, [], [], gdr, [], [], [], None)


def test_linear_management_matches_the_pairwise_rule():
    rng = random.Random(20261202)
    for trial in range(300):
        facts = random_node(rng, rng.randint(1, 40))
        expected = copy.deepcopy(facts)
        reference_management(expected)
        c._management(facts)
        got = [(i.name, i.kind, i.role) for i in facts.interfaces]
        assert got == [(i.name, i.kind, i.role) for i in expected.interfaces], f"trial {trial}"
