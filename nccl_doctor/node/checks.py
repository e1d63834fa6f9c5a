"""Every probe check, in report order: ``check(node)`` is the one entry (preflight and bench use it too)."""

from __future__ import annotations

from nccl_doctor.node.checks_env import SETUP_CHECKS, check_env
from nccl_doctor.node.model import NodeProbe
from nccl_doctor.report import Finding

CHECKS = (*SETUP_CHECKS, check_env)


def check(node: NodeProbe) -> list[Finding]:
    """All probe findings for one node."""
    return [f for chk in CHECKS for f in chk(node)]
